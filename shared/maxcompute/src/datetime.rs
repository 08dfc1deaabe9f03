//! The sink's `datetime_format`: a Java-style pattern (`yyyy-MM-dd HH:mm:ss`) used to write
//! timestamps into text columns and to read text into date and time columns.
//!
//! Letters understood: `yyyy`, `MM`/`M`, `dd`/`d`, `HH`/`H`, `mm`, `ss`, and `S`…`SSSSSSSSS`
//! (fraction digits: 1–3 → milliseconds, 4–6 → microseconds, 7–9 → nanoseconds). Other
//! characters are literal; text in single quotes is literal too. Timestamps are written in UTC.

use chrono::format::{Item, StrftimeItems};
use chrono::{DateTime, NaiveDateTime, Utc};
use floe_core::{Error, Result};

/// A parsed `datetime_format`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DateTimeFormat {
    pattern: String,
    strftime: String,
}

impl DateTimeFormat {
    /// Translate a Java-style pattern; unknown letters are an error naming them.
    pub fn parse(pattern: &str) -> Result<Self> {
        let chars: Vec<char> = pattern.chars().collect();
        let mut out = String::new();
        let mut i = 0;
        while i < chars.len() {
            let c = chars[i];
            if c == '\'' {
                let end = chars[i + 1..]
                    .iter()
                    .position(|&x| x == '\'')
                    .ok_or_else(|| bad(pattern, "has an unclosed quote"))?;
                for &l in &chars[i + 1..i + 1 + end] {
                    push_literal(&mut out, l);
                }
                i += end + 2;
                continue;
            }
            if !c.is_ascii_alphabetic() {
                push_literal(&mut out, c);
                i += 1;
                continue;
            }
            let run = chars[i..].iter().take_while(|&&x| x == c).count();
            let spec = match (c, run) {
                ('y', 4) => "%Y",
                ('y', 2) => "%y",
                ('M', 2) => "%m",
                ('M', 1) => "%-m",
                ('d', 2) => "%d",
                ('d', 1) => "%-d",
                ('H', 2) => "%H",
                ('H', 1) => "%-H",
                ('m', 2) => "%M",
                ('s', 2) => "%S",
                ('S', 1..=3) => "%3f",
                ('S', 4..=6) => "%6f",
                ('S', 7..=9) => "%9f",
                _ => {
                    return Err(bad(
                        pattern,
                        format!(
                            "uses `{}`, which is not supported",
                            c.to_string().repeat(run)
                        ),
                    ));
                }
            };
            out.push_str(spec);
            i += run;
        }
        if StrftimeItems::new(&out).any(|item| matches!(item, Item::Error)) {
            return Err(bad(pattern, "is not a valid pattern"));
        }
        Ok(DateTimeFormat {
            pattern: pattern.to_owned(),
            strftime: out,
        })
    }

    /// The pattern as given.
    pub fn pattern(&self) -> &str {
        &self.pattern
    }

    /// Format an instant (in UTC).
    pub fn format(&self, t: DateTime<Utc>) -> String {
        t.naive_utc().format(&self.strftime).to_string()
    }

    /// Parse text written in this format.
    pub fn parse_text(&self, text: &str) -> Option<NaiveDateTime> {
        NaiveDateTime::parse_from_str(text, &self.strftime).ok()
    }
}

fn push_literal(out: &mut String, c: char) {
    if c == '%' {
        out.push_str("%%");
    } else {
        out.push(c);
    }
}

fn bad(pattern: &str, why: impl std::fmt::Display) -> Error {
    Error::invalid_input(format!("datetime format `{pattern}` {why}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_documented_pattern_formats_and_parses() {
        let t = DateTime::from_timestamp_nanos(1_736_929_845_123_456_789);
        for (pattern, text) in [
            ("yyyy-MM-dd HH:mm:ss", "2025-01-15 08:30:45"),
            ("yyyy-MM-dd HH:mm:ss.SSSSSS", "2025-01-15 08:30:45.123456"),
            ("yyyy.MM.dd HH:mm:ss", "2025.01.15 08:30:45"),
            ("yyyy/MM/dd HH:mm:ss", "2025/01/15 08:30:45"),
            ("yyyy/M/d HH:mm", "2025/1/15 08:30"),
            ("yyyy-M-d HH:mm", "2025-1-15 08:30"),
            ("yyyy/M/d HH:mm:ss", "2025/1/15 08:30:45"),
            ("yyyy-M-d HH:mm:ss", "2025-1-15 08:30:45"),
            ("yyyyMMddHHmmss", "20250115083045"),
            ("yyyy-MM-dd'T'HH:mm:ss", "2025-01-15T08:30:45"),
        ] {
            let f = DateTimeFormat::parse(pattern).unwrap();
            assert_eq!(f.format(t), text, "{pattern}");
            assert!(f.parse_text(text).is_some(), "{pattern}");
        }
        assert!(DateTimeFormat::parse("yyyy-MM-dd zzz").is_err());
        assert!(DateTimeFormat::parse("yyyy 'x").is_err());
    }
}
