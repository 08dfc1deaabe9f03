//! The emulator's state: tables with their rows per partition, upload and upsert sessions, SQL
//! instances, and the fault queue.

use std::collections::BTreeMap;

use floe_tunnel_codec::{Column, DataType, TableSchema, UpsertOperation, Value};

use super::faults::Fault;

/// A table to create directly (tests), or as `CREATE TABLE` made it.
#[derive(Clone, Debug, PartialEq)]
pub struct TableDef {
    /// Project.
    pub project: String,
    /// Schema; `None` is the default schema.
    pub schema: Option<String>,
    /// Name.
    pub name: String,
    /// Data columns.
    pub columns: TableSchema,
    /// Partition columns (all `string`).
    pub partition_columns: Vec<String>,
    /// Primary key columns.
    pub primary_key: Vec<String>,
    /// Whether the table is transactional (upserts need it).
    pub transactional: bool,
    /// Comment.
    pub comment: String,
}

impl TableDef {
    /// An unpartitioned, non-transactional table.
    pub fn new(project: &str, name: &str, columns: TableSchema) -> Self {
        TableDef {
            project: project.to_owned(),
            schema: None,
            name: name.to_owned(),
            columns,
            partition_columns: Vec::new(),
            primary_key: Vec::new(),
            transactional: false,
            comment: String::new(),
        }
    }

    /// The same table in schema `schema`.
    pub fn in_schema(mut self, schema: &str) -> Self {
        self.schema = Some(schema.to_owned());
        self
    }

    /// Partitioned by `columns`.
    pub fn partitioned_by(mut self, columns: &[&str]) -> Self {
        self.partition_columns = columns.iter().map(|c| (*c).to_owned()).collect();
        self
    }

    /// A transactional table with primary key `columns` (made NOT NULL).
    pub fn primary_key(mut self, columns: &[&str]) -> Self {
        self.primary_key = columns.iter().map(|c| (*c).to_owned()).collect();
        self.transactional = true;
        let cols = self
            .columns
            .columns()
            .iter()
            .map(|c| {
                if columns.iter().any(|k| k.eq_ignore_ascii_case(&c.name)) {
                    c.clone().not_null()
                } else {
                    c.clone()
                }
            })
            .collect();
        if let Ok(s) = TableSchema::new(cols) {
            self.columns = s;
        }
        self
    }

    pub(crate) fn key(&self) -> String {
        table_key(&self.project, self.schema.as_deref(), &self.name)
    }

    pub(crate) fn display(&self) -> String {
        match &self.schema {
            Some(s) => format!("{}.{}.{}", self.project, s, self.name),
            None => format!("{}.{}", self.project, self.name),
        }
    }
}

/// The lookup key of a table (case-insensitive names, `default` schema when none).
pub(crate) fn table_key(project: &str, schema: Option<&str>, name: &str) -> String {
    format!(
        "{}.{}.{}",
        project.to_ascii_lowercase(),
        schema.unwrap_or("default").to_ascii_lowercase(),
        name.to_ascii_lowercase()
    )
}

/// A table and its rows, per partition (key: the tunnel form `ds=1,hh=2`; `""` unpartitioned).
#[derive(Clone, Debug)]
pub(crate) struct Table {
    pub def: TableDef,
    pub partitions: BTreeMap<String, Vec<Vec<Value>>>,
}

impl Table {
    pub fn new(def: TableDef) -> Self {
        let mut partitions = BTreeMap::new();
        if def.partition_columns.is_empty() {
            partitions.insert(String::new(), Vec::new());
        }
        Table { def, partitions }
    }

    pub fn pk_indexes(&self) -> Vec<usize> {
        self.def
            .primary_key
            .iter()
            .filter_map(|k| self.def.columns.index_of(k))
            .collect()
    }

    /// The schema JSON the REST API and tunnel sessions carry.
    pub fn schema_json(&self, reserved: bool) -> serde_json::Value {
        let col = |c: &Column| serde_json::json!({"name": c.name, "type": c.data_type.to_string(), "comment": "", "isNullable": c.nullable});
        let mut doc = serde_json::json!({
            "comment": self.def.comment,
            "columns": self.def.columns.columns().iter().map(col).collect::<Vec<_>>(),
            "partitionKeys": self.def.partition_columns.iter()
                .map(|p| serde_json::json!({"name": p, "type": "string", "comment": ""}))
                .collect::<Vec<_>>(),
        });
        if reserved {
            let r = serde_json::json!({
                "Transactional": if self.def.transactional { "true" } else { "false" },
                "PrimaryKey": self.def.primary_key,
            });
            doc["Reserved"] = serde_json::Value::String(r.to_string());
        }
        doc
    }

    /// Normalise a partition spec (any form) to this table's key order; `Err` names the problem.
    pub fn partition_key(&self, spec: &str) -> Result<String, String> {
        let mut given: Vec<(String, String)> = Vec::new();
        for part in spec.split([',', '/']).filter(|p| !p.trim().is_empty()) {
            let (k, v) = part
                .split_once('=')
                .ok_or_else(|| format!("bad partition spec `{spec}`"))?;
            let v = v.trim().trim_matches(|c| c == '\'' || c == '"');
            given.push((
                k.trim().trim_matches('`').to_ascii_lowercase(),
                v.to_owned(),
            ));
        }
        if given.len() != self.def.partition_columns.len() {
            return Err(format!(
                "partition spec `{spec}` does not match the partition columns of {}",
                self.def.display()
            ));
        }
        self.def
            .partition_columns
            .iter()
            .map(|c| {
                given
                    .iter()
                    .find(|(k, _)| k.eq_ignore_ascii_case(c))
                    .map(|(_, v)| format!("{c}={v}"))
                    .ok_or_else(|| format!("partition spec `{spec}` lacks `{c}`"))
            })
            .collect::<Result<Vec<_>, _>>()
            .map(|parts| parts.join(","))
    }
}

/// An upload session.
#[derive(Clone, Debug)]
pub(crate) struct Upload {
    pub table: String,
    pub partition: String,
    pub overwrite: bool,
    pub status: &'static str,
    pub blocks: BTreeMap<u32, Vec<Vec<Value>>>,
    pub created_ms: i64,
}

/// An upsert session.
#[derive(Clone, Debug)]
pub(crate) struct Upsert {
    pub table: String,
    pub partition: String,
    pub status: &'static str,
    /// `(slot id, worker address)` per bucket.
    pub routes: Vec<(String, String)>,
    pub ops: Vec<(UpsertOperation, Vec<Value>)>,
    pub created_ms: i64,
    pub lifetime_ms: i64,
    pub commit_polls_left: u32,
}

/// An SQL instance: its outcome is decided at submission; its status turns `Terminated` after
/// `polls_left` status reads.
#[derive(Clone, Debug)]
pub(crate) struct Instance {
    pub polls_left: u32,
    pub outcome: Result<String, String>,
}

/// Everything the emulator holds.
#[derive(Debug, Default)]
pub(crate) struct State {
    pub tables: BTreeMap<String, Table>,
    pub uploads: BTreeMap<String, Upload>,
    pub upserts: BTreeMap<String, Upsert>,
    pub instances: BTreeMap<String, Instance>,
    pub faults: Vec<Fault>,
    pub sql_log: Vec<String>,
    pub next_id: u64,
}

impl State {
    pub fn next_id(&mut self, prefix: &str) -> String {
        self.next_id += 1;
        format!("{prefix}{:016x}", self.next_id)
    }
}

/// A column type for SQL literal conversion.
pub(crate) fn literal_value(text: &Literal, t: &DataType) -> Result<Value, String> {
    use floe_tunnel_codec::Decimal;
    let bad = || format!("literal {text:?} does not fit type {t}");
    Ok(match (text, t) {
        (Literal::Null, _) => Value::Null,
        (Literal::Bool(b), DataType::Boolean) => Value::Boolean(*b),
        (Literal::Number(n), DataType::BigInt) => Value::BigInt(n.parse().map_err(|_| bad())?),
        (Literal::Number(n), DataType::Int) => Value::Int(n.parse().map_err(|_| bad())?),
        (Literal::Number(n), DataType::SmallInt) => Value::SmallInt(n.parse().map_err(|_| bad())?),
        (Literal::Number(n), DataType::TinyInt) => Value::TinyInt(n.parse().map_err(|_| bad())?),
        (Literal::Number(n), DataType::Double) => Value::Double(n.parse().map_err(|_| bad())?),
        (Literal::Number(n), DataType::Float) => Value::Float(n.parse().map_err(|_| bad())?),
        (Literal::Number(n) | Literal::Text(n), DataType::Decimal(_)) => {
            Value::Decimal(Decimal::parse(n).map_err(|_| bad())?)
        }
        (Literal::Text(s), dt) if dt.is_text() => Value::String(s.clone()),
        (Literal::Number(s), dt) if dt.is_text() => Value::String(s.clone()),
        _ => return Err(bad()),
    })
}

/// A literal in an SQL statement.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Literal {
    Null,
    Bool(bool),
    Number(String),
    Text(String),
}

impl Literal {
    /// Whether `v` equals this literal (for `WHERE col = lit`).
    pub fn matches(&self, v: &Value) -> bool {
        match (self, v) {
            (Literal::Null, Value::Null) => true,
            (Literal::Bool(b), Value::Boolean(x)) => b == x,
            (Literal::Number(n), Value::BigInt(x)) => n.parse::<i64>().ok() == Some(*x),
            (Literal::Number(n), Value::Int(x)) => n.parse::<i32>().ok() == Some(*x),
            (Literal::Number(n), Value::SmallInt(x)) => n.parse::<i16>().ok() == Some(*x),
            (Literal::Number(n), Value::TinyInt(x)) => n.parse::<i8>().ok() == Some(*x),
            (Literal::Number(n), Value::Double(x)) => n.parse::<f64>().ok() == Some(*x),
            (Literal::Text(s) | Literal::Number(s), Value::String(x)) => s == x,
            (Literal::Text(s) | Literal::Number(s), Value::Decimal(d)) => s == d.as_str(),
            _ => false,
        }
    }
}
