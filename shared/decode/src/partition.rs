//! Partition specs as routes declare them: `["day(event_time)", "bucket(16, id)", "region"]`.

use std::fmt;

use floe_core::{Error, Result};

/// An Iceberg partition transform.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transform {
    /// The value itself.
    Identity,
    /// Years since 1970.
    Year,
    /// Months since 1970-01.
    Month,
    /// Days since 1970-01-01.
    Day,
    /// Hours since the epoch.
    Hour,
    /// Murmur3 hash modulo N.
    Bucket(u32),
    /// Truncate to width W.
    Truncate(u32),
    /// Always null.
    Void,
}

impl fmt::Display for Transform {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Transform::Identity => f.write_str("identity"),
            Transform::Year => f.write_str("year"),
            Transform::Month => f.write_str("month"),
            Transform::Day => f.write_str("day"),
            Transform::Hour => f.write_str("hour"),
            Transform::Bucket(n) => write!(f, "bucket[{n}]"),
            Transform::Truncate(w) => write!(f, "truncate[{w}]"),
            Transform::Void => f.write_str("void"),
        }
    }
}

/// One partition field: a transform of a source column.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PartitionField {
    /// The source column name.
    pub source: String,
    /// The transform.
    pub transform: Transform,
    /// The partition field's name (default: Iceberg's convention, e.g. `event_time_day`).
    pub name: String,
}

/// The two arguments of `bucket` / `truncate` as (number, column), in either order.
fn number_and_column<'a>(a: &'a str, b: &'a str) -> (&'a str, &'a str) {
    if a.parse::<u32>().is_err() && b.parse::<u32>().is_ok() {
        (b, a)
    } else {
        (a, b)
    }
}

impl PartitionField {
    /// Parse `day(ts)`, `bucket(16, id)`, `truncate(4, name)`, `identity(region)` or a bare
    /// column name (identity). `bucket` and `truncate` also take the column first, as Kafka
    /// Connect writes them (`bucket(id, 16)`). An optional ` as name` renames the partition
    /// field.
    pub fn parse(text: &str) -> Result<Self> {
        let bad = |why: &str| Error::config("partition-by", format!("`{text}`: {why}"));
        let (expr, alias) = match text.split_once(" as ") {
            Some((e, a)) => (e.trim(), Some(a.trim().to_owned())),
            None => (text.trim(), None),
        };
        let (transform, source) = match expr.split_once('(') {
            None => (Transform::Identity, expr.to_owned()),
            Some((func, rest)) => {
                let args = rest.strip_suffix(')').ok_or_else(|| bad("missing `)`"))?;
                let args: Vec<&str> = args.split(',').map(str::trim).collect();
                let func = func.trim().to_ascii_lowercase();
                let number = |s: &str| -> Result<u32> {
                    s.parse::<u32>()
                        .ok()
                        .filter(|n| *n > 0)
                        .ok_or_else(|| bad("expected a positive number"))
                };
                match (func.as_str(), args.as_slice()) {
                    ("identity", [c]) => (Transform::Identity, c.to_string()),
                    ("year" | "years", [c]) => (Transform::Year, c.to_string()),
                    ("month" | "months", [c]) => (Transform::Month, c.to_string()),
                    ("day" | "days", [c]) => (Transform::Day, c.to_string()),
                    ("hour" | "hours", [c]) => (Transform::Hour, c.to_string()),
                    ("void", [c]) => (Transform::Void, c.to_string()),
                    // Spark's order (`bucket(16, id)`) or Kafka Connect's (`bucket(id, 16)`).
                    ("bucket", [a, b]) => {
                        let (n, c) = number_and_column(a, b);
                        (Transform::Bucket(number(n)?), c.to_string())
                    }
                    ("truncate", [a, b]) => {
                        let (w, c) = number_and_column(a, b);
                        (Transform::Truncate(number(w)?), c.to_string())
                    }
                    _ => return Err(bad("unknown transform or wrong number of arguments")),
                }
            }
        };
        if source.is_empty() {
            return Err(bad("no source column"));
        }
        let name = alias.unwrap_or_else(|| match transform {
            Transform::Identity => source.clone(),
            Transform::Year => format!("{source}_year"),
            Transform::Month => format!("{source}_month"),
            Transform::Day => format!("{source}_day"),
            Transform::Hour => format!("{source}_hour"),
            Transform::Bucket(_) => format!("{source}_bucket"),
            Transform::Truncate(_) => format!("{source}_trunc"),
            Transform::Void => format!("{source}_null"),
        });
        Ok(PartitionField {
            source,
            transform,
            name,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_partition_expressions() {
        let cases = [
            ("region", Transform::Identity, "region", "region"),
            ("day(ts)", Transform::Day, "ts", "ts_day"),
            ("bucket(16, id)", Transform::Bucket(16), "id", "id_bucket"),
            (
                "truncate(4,name)",
                Transform::Truncate(4),
                "name",
                "name_trunc",
            ),
            ("hour(ts) as h", Transform::Hour, "ts", "h"),
            ("identity(x)", Transform::Identity, "x", "x"),
            ("bucket(id, 8)", Transform::Bucket(8), "id", "id_bucket"),
            (
                "truncate(name,2)",
                Transform::Truncate(2),
                "name",
                "name_trunc",
            ),
        ];
        for (text, t, src, name) in cases {
            let p = PartitionField::parse(text).unwrap();
            assert_eq!(
                (p.transform, p.source.as_str(), p.name.as_str()),
                (t, src, name),
                "{text}"
            );
        }
        for bad in [
            "bucket(id)",
            "day(ts",
            "fortnight(ts)",
            "bucket(0, id)",
            "day()",
        ] {
            let e = PartitionField::parse(bad).unwrap_err().to_string();
            assert!(e.contains("partition-by"), "{bad}: {e}");
        }
    }
}
