//! Typed reads from a flat section, naming the full option in every error, and rejecting
//! options nobody read.

use std::cell::RefCell;
use std::collections::BTreeSet;

use floe_core::{Error, Result};
use toml::Value;

use super::load::{Section, as_string};

/// Reads options of one section (or route) and remembers which were read.
pub struct Opts<'a> {
    name: String,
    map: &'a Section,
    used: RefCell<BTreeSet<String>>,
}

impl<'a> Opts<'a> {
    /// Options of `map`, reported under `name` (`source`, `routes[0]`).
    pub fn new(name: impl Into<String>, map: &'a Section) -> Self {
        Opts {
            name: name.into(),
            map,
            used: RefCell::new(BTreeSet::new()),
        }
    }

    /// The full name of an option, for messages.
    pub fn full(&self, key: &str) -> String {
        format!("{}.{key}", self.name)
    }

    fn raw(&self, key: &str) -> Option<&'a Value> {
        let v = self.map.get(key)?;
        self.used.borrow_mut().insert(key.to_owned());
        Some(v)
    }

    /// An error about `key`.
    pub fn err(&self, key: &str, problem: impl std::fmt::Display) -> Error {
        Error::config(&self.full(key), problem)
    }

    /// Whether the option is present.
    pub fn has(&self, key: &str) -> bool {
        self.map.contains_key(key)
    }

    /// A string option.
    pub fn string(&self, key: &str) -> Result<Option<String>> {
        match self.raw(key) {
            None => Ok(None),
            Some(v) => as_string(v)
                .map(Some)
                .ok_or_else(|| self.err(key, "expected a string")),
        }
    }

    /// A required string option.
    pub fn required(&self, key: &str) -> Result<String> {
        self.string(key)?
            .ok_or_else(|| self.err(key, "is required"))
    }

    /// An unsigned integer option, with `default`, within `range`.
    pub fn u64_in(
        &self,
        key: &str,
        default: u64,
        range: std::ops::RangeInclusive<u64>,
    ) -> Result<u64> {
        let v = match self.raw(key) {
            None => return Ok(default),
            Some(Value::Integer(i)) if *i >= 0 => *i as u64,
            Some(v) => as_string(v)
                .and_then(|s| s.trim().parse::<u64>().ok())
                .ok_or_else(|| self.err(key, "expected a non-negative integer"))?,
        };
        if !range.contains(&v) {
            return Err(self.err(
                key,
                format!(
                    "must be within {}..={}, got {v}",
                    range.start(),
                    range.end()
                ),
            ));
        }
        Ok(v)
    }

    /// A boolean option.
    pub fn bool(&self, key: &str, default: bool) -> Result<bool> {
        match self.raw(key) {
            None => Ok(default),
            Some(Value::Boolean(b)) => Ok(*b),
            Some(v) => match as_string(v)
                .as_deref()
                .map(str::to_ascii_lowercase)
                .as_deref()
            {
                Some("true") => Ok(true),
                Some("false") => Ok(false),
                _ => Err(self.err(key, "expected true or false")),
            },
        }
    }

    /// A list: a TOML array of strings, or one comma-separated string.
    pub fn list(&self, key: &str) -> Result<Vec<String>> {
        match self.raw(key) {
            None => Ok(Vec::new()),
            Some(Value::Array(items)) => items
                .iter()
                .map(|v| as_string(v).ok_or_else(|| self.err(key, "expected a list of strings")))
                .collect(),
            Some(v) => Ok(as_string(v)
                .ok_or_else(|| self.err(key, "expected a string or a list"))?
                .split(',')
                .map(|s| s.trim().to_owned())
                .filter(|s| !s.is_empty())
                .collect()),
        }
    }

    /// A list of expressions that may hold commas themselves (`bucket(16, id), day(ts)`): a
    /// TOML array of strings, or one string split at the commas outside parentheses.
    pub fn expressions(&self, key: &str) -> Result<Vec<String>> {
        match self.raw(key) {
            Some(v @ Value::String(_)) => Ok(split_expressions(&as_string(v).unwrap_or_default())),
            Some(_) => self.list(key),
            None => Ok(Vec::new()),
        }
    }

    /// Every option under `prefix.` as (rest of key, value as string), marking them read.
    pub fn prefixed(&self, prefix: &str) -> Result<Vec<(String, String)>> {
        let dotted = format!("{prefix}.");
        let mut out = Vec::new();
        for (k, v) in self.map.range(dotted.clone()..) {
            let Some(rest) = k.strip_prefix(&dotted) else {
                break;
            };
            let s = as_string(v).ok_or_else(|| self.err(k, "expected a string"))?;
            self.used.borrow_mut().insert(k.clone());
            out.push((rest.to_owned(), s));
        }
        Ok(out)
    }

    /// Fail on any option that was not read, naming it.
    pub fn finish(self) -> Result<()> {
        let used = self.used.into_inner();
        if let Some(unknown) = self.map.keys().find(|k| !used.contains(*k)) {
            return Err(Error::config(
                &format!("{}.{unknown}", self.name),
                "unknown option",
            ));
        }
        Ok(())
    }
}

/// `text` split at the commas outside parentheses, each part trimmed, empty parts dropped.
pub fn split_expressions(text: &str) -> Vec<String> {
    let (mut out, mut depth, mut start) = (Vec::new(), 0usize, 0);
    for (i, c) in text.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                out.push(text[start..i].trim().to_owned());
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(text[start..].trim().to_owned());
    out.retain(|s| !s.is_empty());
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn expressions_split_outside_parentheses() {
        assert_eq!(
            super::split_expressions("bucket(16, id), day(ts),region ,"),
            ["bucket(16, id)", "day(ts)", "region"]
        );
        assert!(super::split_expressions(" ").is_empty());
    }
}
