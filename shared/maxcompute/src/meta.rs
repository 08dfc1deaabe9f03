//! Table identities and metadata as the REST API describes them.
//!
//! `GET /projects/<p>/tables/<t>` answers `<Table><Name/>…<Schema>JSON</Schema></Table>`; the
//! JSON (also what tunnel sessions carry) is:
//!
//! ```text
//! {"comment": "…",
//!  "columns":       [{"name":"id","type":"bigint","comment":"","isNullable":false}, …],
//!  "partitionKeys": [{"name":"ds","type":"string","comment":""}],
//!  "Reserved": "{\"Transactional\":\"true\",\"PrimaryKey\":[\"id\"]}"}
//! ```
//! `Reserved` is itself a JSON document in a string, returned by `GET …?extended`; it carries
//! the transactional flag and the primary key (as pyodps's `Table._parse_reserved` reads them).

use floe_core::{Error, ErrorKind, Result};
use floe_tunnel_codec::{Column, DataType, TableSchema};
use serde_json::Value as Json;

use crate::http::encode;

/// Which table: project, optional schema (the namespace between project and table), name.
#[derive(
    Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
pub struct TableId {
    /// The project.
    pub project: String,
    /// The schema, for a table outside the project's default schema.
    pub schema: Option<String>,
    /// The table name.
    pub name: String,
}

impl TableId {
    /// `project.name` in the default schema.
    pub fn new(project: impl Into<String>, name: impl Into<String>) -> Self {
        TableId {
            project: project.into(),
            schema: None,
            name: name.into(),
        }
    }

    /// The same table in schema `schema`.
    pub fn with_schema(mut self, schema: Option<String>) -> Self {
        self.schema = schema.filter(|s| !s.is_empty());
        self
    }

    /// The resource path: `/projects/p/tables/t` or `/projects/p/schemas/s/tables/t`.
    pub fn resource(&self) -> String {
        match &self.schema {
            None => format!(
                "/projects/{}/tables/{}",
                encode(&self.project),
                encode(&self.name)
            ),
            Some(s) => format!(
                "/projects/{}/schemas/{}/tables/{}",
                encode(&self.project),
                encode(s),
                encode(&self.name)
            ),
        }
    }

    /// The name for SQL: `` p.`t` `` or `` p.s.`t` `` (pyodps's `full_table_name`).
    pub fn sql_name(&self) -> String {
        match &self.schema {
            None => format!("{}.`{}`", self.project, self.name),
            Some(s) => format!("{}.{}.`{}`", self.project, s, self.name),
        }
    }
}

impl std::fmt::Display for TableId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.schema {
            None => write!(f, "{}.{}", self.project, self.name),
            Some(s) => write!(f, "{}.{}.{}", self.project, s, self.name),
        }
    }
}

/// A partition column (partition values are text on the wire whatever the declared type).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PartitionColumn {
    /// Column name.
    pub name: String,
    /// Declared type (usually `string`).
    pub data_type: DataType,
}

/// What floe needs to know about a table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TableMeta {
    /// Which table.
    pub id: TableId,
    /// The data columns in order (what a record block carries).
    pub columns: TableSchema,
    /// Partition columns in order; empty for an unpartitioned table.
    pub partition_columns: Vec<PartitionColumn>,
    /// Primary key column names; empty when the table has none.
    pub primary_key: Vec<String>,
    /// Whether the table is transactional (required for upserts).
    pub transactional: bool,
    /// The table comment.
    pub comment: String,
}

impl TableMeta {
    /// Whether the table is partitioned.
    pub fn is_partitioned(&self) -> bool {
        !self.partition_columns.is_empty()
    }
}

/// The columns and partition keys of a schema JSON object.
pub(crate) fn parse_schema_json(
    doc: &Json,
    what: &str,
) -> Result<(TableSchema, Vec<PartitionColumn>)> {
    let columns = doc
        .get("columns")
        .and_then(Json::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[]);
    let columns = columns
        .iter()
        .map(|c| {
            let (name, data_type) = name_and_type(c, what)?;
            let nullable = match c.get("isNullable") {
                Some(Json::Bool(b)) => *b,
                Some(Json::String(s)) => !s.eq_ignore_ascii_case("false"),
                _ => true,
            };
            Ok(Column {
                name,
                data_type,
                nullable,
            })
        })
        .collect::<Result<Vec<_>>>()?;
    let partitions = doc
        .get("partitionKeys")
        .and_then(Json::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[])
        .iter()
        .map(|c| {
            let (name, data_type) = name_and_type(c, what)?;
            Ok(PartitionColumn { name, data_type })
        })
        .collect::<Result<Vec<_>>>()?;
    let schema =
        TableSchema::new(columns).map_err(|e| e.while_doing(format!("schema of {what}")))?;
    Ok((schema, partitions))
}

fn name_and_type(c: &Json, what: &str) -> Result<(String, DataType)> {
    let name = c
        .get("name")
        .and_then(Json::as_str)
        .ok_or_else(|| protocol(format!("schema of {what} has a column without a name")))?;
    let ty = c
        .get("type")
        .and_then(Json::as_str)
        .ok_or_else(|| protocol(format!("column `{name}` of {what} has no type")))?;
    let data_type: DataType = ty
        .parse()
        .map_err(|e: Error| e.while_doing(format!("column `{name}` of {what}")))?;
    Ok((name.to_owned(), data_type))
}

/// The `Reserved` document: transactional flag and primary key.
pub(crate) fn parse_reserved(doc: &Json) -> (Option<bool>, Option<Vec<String>>) {
    let reserved = match doc.get("Reserved") {
        Some(Json::String(s)) => serde_json::from_str::<Json>(s).ok(),
        Some(v @ Json::Object(_)) => Some(v.clone()),
        _ => None,
    };
    let Some(r) = reserved else {
        return (None, None);
    };
    let transactional = r.get("Transactional").map(|v| match v {
        Json::Bool(b) => *b,
        Json::String(s) => s.eq_ignore_ascii_case("true"),
        _ => false,
    });
    let primary_key = r.get("PrimaryKey").map(|v| match v {
        Json::Array(a) => a
            .iter()
            .filter_map(Json::as_str)
            .map(str::to_owned)
            .collect(),
        Json::String(s) => s
            .split(',')
            .map(|x| x.trim().trim_matches('`').to_owned())
            .filter(|x| !x.is_empty())
            .collect(),
        _ => Vec::new(),
    });
    (transactional, primary_key)
}

/// Parse a `<Table>` document's `Schema` JSON text.
pub(crate) fn schema_json_of_table_xml(xml: &str, what: &str) -> Result<Json> {
    let doc = crate::xml::Element::parse(xml)?;
    let text = doc
        .child_text("Schema")
        .ok_or_else(|| protocol(format!("table response for {what} has no <Schema>")))?;
    serde_json::from_str(&text)
        .map_err(|e| protocol(format!("schema of {what} is not valid json")).with_source(e))
}

fn protocol(message: String) -> Error {
    Error::new(ErrorKind::Protocol, message)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_columns_partitions_and_reserved() {
        let xml = r#"<?xml version="1.0"?><Table><Name>t</Name><Schema><![CDATA[{"comment":"c",
            "columns":[{"name":"id","type":"BIGINT","isNullable":false},{"name":"v","type":"decimal(10,2)"}],
            "partitionKeys":[{"name":"ds","type":"string"}],
            "Reserved":"{\"Transactional\":\"true\",\"PrimaryKey\":[\"id\"]}"}]]></Schema></Table>"#;
        let doc = schema_json_of_table_xml(xml, "p.t").unwrap();
        let (cols, parts) = parse_schema_json(&doc, "p.t").unwrap();
        assert_eq!(cols.len(), 2);
        assert!(!cols.columns()[0].nullable);
        assert_eq!(cols.columns()[1].data_type.to_string(), "decimal(10,2)");
        assert_eq!(parts[0].name, "ds");
        assert_eq!(
            parse_reserved(&doc),
            (Some(true), Some(vec!["id".to_owned()]))
        );
        let id = TableId::new("p", "t").with_schema(Some("s".into()));
        assert_eq!(id.resource(), "/projects/p/schemas/s/tables/t");
        assert_eq!(id.sql_name(), "p.s.`t`");
        assert_eq!(id.to_string(), "p.s.t");
    }
}
