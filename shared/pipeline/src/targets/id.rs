//! Target ids: the name under which a table's staged files and commits are kept.
//!
//! A [`TargetId`] is written in the checkpoint table as text, the same text floe has always
//! written, so records staged by an earlier version read as they are:
//!
//! | target | text |
//! |---|---|
//! | an Iceberg table | `iceberg:<catalog>:<namespace.table>` |
//! | a MaxCompute table | `maxcompute:<project>[.<schema>].<table>` |
//! | a partition of one | `maxcompute:<project>[.<schema>].<table>/<partition as the tunnel writes it, ds=1,hh=2>` |

use std::fmt;
use std::str::FromStr;

use floe_core::{Error, Result};
use floe_maxcompute::{PartitionSpec, TableId};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Where a batch's files are committed.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum TargetId {
    /// An Iceberg table of a catalog.
    Iceberg {
        /// The catalog's name.
        catalog: String,
        /// `namespace.table`.
        table: String,
    },
    /// A MaxCompute table, or one partition of it.
    MaxCompute {
        /// The table.
        table: TableId,
        /// The partition, as the tunnel writes it (`ds=1,hh=2`).
        partition: Option<String>,
    },
}

impl TargetId {
    /// An Iceberg table target.
    pub fn iceberg(catalog: &str, table: &str) -> Self {
        TargetId::Iceberg {
            catalog: catalog.to_owned(),
            table: table.to_owned(),
        }
    }

    /// A MaxCompute table target, or one of a partition.
    pub fn maxcompute(table: &TableId, partition: Option<&PartitionSpec>) -> Self {
        TargetId::MaxCompute {
            table: table.clone(),
            partition: partition.map(PartitionSpec::to_tunnel),
        }
    }

    /// Whether it is a MaxCompute table.
    pub fn is_maxcompute(&self) -> bool {
        matches!(self, TargetId::MaxCompute { .. })
    }
}

impl fmt::Display for TargetId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TargetId::Iceberg { catalog, table } => write!(f, "iceberg:{catalog}:{table}"),
            TargetId::MaxCompute {
                table,
                partition: None,
            } => write!(f, "maxcompute:{table}"),
            TargetId::MaxCompute {
                table,
                partition: Some(p),
            } => write!(f, "maxcompute:{table}/{p}"),
        }
    }
}

impl FromStr for TargetId {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        let bad = || Error::invalid_input(format!("`{s}` is not a target id"));
        if let Some(rest) = s.strip_prefix("iceberg:") {
            let (catalog, table) = rest.split_once(':').ok_or_else(bad)?;
            if catalog.is_empty() || table.is_empty() {
                return Err(bad());
            }
            return Ok(TargetId::iceberg(catalog, table));
        }
        let rest = s.strip_prefix("maxcompute:").ok_or_else(bad)?;
        let (name, partition) = match rest.split_once('/') {
            Some((n, p)) => (n, Some(p.to_owned())),
            None => (rest, None),
        };
        let parts: Vec<&str> = name.split('.').collect();
        let table = match parts[..] {
            [p, t] if !p.is_empty() && !t.is_empty() => TableId::new(p, t),
            [p, schema, t] if !p.is_empty() && !schema.is_empty() && !t.is_empty() => {
                TableId::new(p, t).with_schema(Some(schema.to_owned()))
            }
            _ => return Err(bad()),
        };
        Ok(TargetId::MaxCompute { table, partition })
    }
}

impl Serialize for TargetId {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for TargetId {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let text = std::borrow::Cow::<'de, str>::deserialize(d)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    #[test]
    fn ids_keep_the_text_older_records_hold() {
        let cases = [
            (
                "iceberg:floe:demo.events",
                TargetId::iceberg("floe", "demo.events"),
            ),
            (
                "maxcompute:p.t/ds=1,hh=2",
                TargetId::maxcompute(
                    &TableId::new("p", "t"),
                    Some(&"ds='1',hh=2".parse().unwrap()),
                ),
            ),
            (
                "maxcompute:p.s.t",
                TargetId::maxcompute(&TableId::new("p", "t").with_schema(Some("s".into())), None),
            ),
        ];
        for (text, id) in cases {
            assert_eq!(id.to_string(), text);
            assert_eq!(text.parse::<TargetId>().unwrap(), id, "{text}");
        }
        assert!(TargetId::maxcompute(&TableId::new("p", "t"), None).is_maxcompute());
        for bad in ["iceberg:floe", "hive:x", "maxcompute:t", "maxcompute:a..b"] {
            assert!(bad.parse::<TargetId>().is_err(), "{bad}");
        }
    }

    #[test]
    fn ids_are_text_in_json_even_as_map_keys() {
        let older = r#"{"iceberg:floe:a.b":1,"maxcompute:p.t/ds=1":2}"#;
        let map: BTreeMap<TargetId, u32> = serde_json::from_str(older).unwrap();
        assert_eq!(map[&TargetId::iceberg("floe", "a.b")], 1);
        assert_eq!(serde_json::to_string(&map).unwrap(), older);
        let e = serde_json::from_str::<BTreeMap<TargetId, u32>>(r#"{"x":1}"#).unwrap_err();
        assert!(e.to_string().contains("`x` is not a target id"), "{e}");
    }
}
