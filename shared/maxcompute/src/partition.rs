//! Partition specs: `ds='20250115',hh='08'` as users write them, in the forms each API wants.
//!
//! | form | example | used by |
//! |---|---|---|
//! | [`PartitionSpec::to_sql`] | `` `ds`='20250115',`hh`='08' `` | DDL (`PARTITION (…)`) |
//! | [`fmt::Display`] | `ds='20250115',hh='08'` | REST `partition=` (as pyodps sends) |
//! | [`PartitionSpec::to_tunnel`] | `ds=20250115,hh=08` | tunnel `partition=` (no quotes) |

use std::fmt;
use std::str::FromStr;

use floe_core::{Error, Result};

/// An ordered list of partition column values.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PartitionSpec {
    parts: Vec<(String, String)>,
}

impl PartitionSpec {
    /// A spec from `(column, value)` pairs; names must be identifiers and appear once, values
    /// must be non-empty.
    pub fn new(parts: Vec<(String, String)>) -> Result<Self> {
        if parts.is_empty() {
            return Err(Error::invalid_input("partition spec is empty"));
        }
        for (i, (k, v)) in parts.iter().enumerate() {
            if !is_identifier(k) {
                return Err(Error::invalid_input(format!(
                    "partition column `{k}` is not a valid name"
                )));
            }
            if v.is_empty() {
                return Err(Error::invalid_input(format!(
                    "partition column `{k}` has an empty value"
                )));
            }
            if v.contains(['\'', '"', ',', '=', '\\', '\n', '\r', '/']) {
                return Err(Error::invalid_input(format!(
                    "partition value `{v}` of `{k}` contains a character partitions cannot hold"
                )));
            }
            if parts[..i].iter().any(|(o, _)| o.eq_ignore_ascii_case(k)) {
                return Err(Error::invalid_input(format!(
                    "partition column `{k}` appears twice"
                )));
            }
        }
        Ok(PartitionSpec { parts })
    }

    /// The `(column, value)` pairs in order.
    pub fn parts(&self) -> &[(String, String)] {
        &self.parts
    }

    /// The value of `column` (case-insensitive).
    pub fn get(&self, column: &str) -> Option<&str> {
        self.parts
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(column))
            .map(|(_, v)| v.as_str())
    }

    /// The tunnel's form: `ds=20250115,hh=08`.
    pub fn to_tunnel(&self) -> String {
        self.join(|k, v| format!("{k}={v}"))
    }

    /// The SQL form for `PARTITION (…)`: `` `ds`='20250115',`hh`='08' ``.
    pub fn to_sql(&self) -> String {
        self.join(|k, v| format!("`{k}`='{v}'"))
    }

    /// A `WHERE` condition selecting this partition: `` `ds`='20250115' AND `hh`='08' ``.
    pub fn to_sql_condition(&self) -> String {
        self.parts
            .iter()
            .map(|(k, v)| format!("`{k}`='{v}'"))
            .collect::<Vec<_>>()
            .join(" AND ")
    }

    fn join(&self, f: impl Fn(&str, &str) -> String) -> String {
        self.parts
            .iter()
            .map(|(k, v)| f(k, v))
            .collect::<Vec<_>>()
            .join(",")
    }
}

impl fmt::Display for PartitionSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.join(|k, v| format!("{k}='{v}'")))
    }
}

impl FromStr for PartitionSpec {
    type Err = Error;

    /// Parse `ds='20250115',hh=08` (quotes optional, `/` also separates, as in `ds=1/hh=2`).
    fn from_str(s: &str) -> Result<Self> {
        let parts = s
            .split([',', '/'])
            .filter(|p| !p.trim().is_empty())
            .map(|p| {
                let (k, v) = p.split_once('=').ok_or_else(|| {
                    Error::invalid_input(format!(
                        "partition spec `{s}` is not of the form col='value',…"
                    ))
                })?;
                let k = k.trim().trim_matches('`');
                let v = v.trim();
                let v = v
                    .strip_prefix('\'')
                    .and_then(|x| x.strip_suffix('\''))
                    .or_else(|| v.strip_prefix('"').and_then(|x| x.strip_suffix('"')))
                    .unwrap_or(v);
                Ok((k.to_owned(), v.to_owned()))
            })
            .collect::<Result<Vec<_>>>()?;
        PartitionSpec::new(parts)
    }
}

/// Whether `s` is a MaxCompute name: a letter or `_`, then letters, digits and `_`, at most 128.
pub fn is_identifier(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
        && s.len() <= 128
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_prints_every_form() {
        for input in [
            "ds='20250115',hh='08'",
            "ds=20250115,hh=08",
            " ds = \"20250115\" , hh='08' ",
            "ds=20250115/hh=08",
        ] {
            let p: PartitionSpec = input.parse().unwrap();
            assert_eq!(p.to_string(), "ds='20250115',hh='08'", "{input}");
            assert_eq!(p.to_tunnel(), "ds=20250115,hh=08", "{input}");
            assert_eq!(p.to_sql(), "`ds`='20250115',`hh`='08'", "{input}");
            assert_eq!(p.get("HH"), Some("08"));
        }
        for bad in [
            "",
            "ds",
            "ds=",
            "1a=2",
            "ds=1,ds=2",
            "ds='a'b'",
            "ds=x,DS=y",
        ] {
            assert!(bad.parse::<PartitionSpec>().is_err(), "{bad}");
        }
    }
}
