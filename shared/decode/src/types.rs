//! Table schemas in Iceberg's type system, independent of any Iceberg library.
//!
//! A [`TableSchema`] is what a route declares (the OSS Tables / S3 Tables
//! `{"iceberg":{"schema":{"fields":[…]}}}` JSON), what floe infers from data, and what the
//! sinks map to their own types (Iceberg in `floe-iceberg`, MaxCompute in the MaxCompute sink).

use std::fmt;

use floe_core::{Error, Result};
use serde_json::Value;

/// An Iceberg type.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum IcebergType {
    /// `boolean`
    Boolean,
    /// `int` (32-bit)
    Int,
    /// `long` (64-bit)
    Long,
    /// `float` (32-bit IEEE 754)
    Float,
    /// `double` (64-bit IEEE 754)
    Double,
    /// `decimal(P,S)`
    Decimal {
        /// Total digits, 1..=38.
        precision: u32,
        /// Digits after the point, 0..=precision.
        scale: u32,
    },
    /// `date`: days since 1970-01-01.
    Date,
    /// `time`: microseconds since midnight.
    Time,
    /// `timestamp`: microseconds, no zone.
    Timestamp,
    /// `timestamptz`: microseconds, UTC.
    Timestamptz,
    /// `timestamp_ns`: nanoseconds, no zone (format v3).
    TimestampNs,
    /// `timestamptz_ns`: nanoseconds, UTC (format v3).
    TimestamptzNs,
    /// `string`: UTF-8.
    String,
    /// `uuid`
    Uuid,
    /// `fixed[L]`
    Fixed(u64),
    /// `binary`
    Binary,
    /// `struct<…>`
    Struct(Vec<Field>),
    /// `list<…>`
    List(Box<Field>),
    /// `map<…, …>`
    Map {
        /// The key field (always required).
        key: Box<Field>,
        /// The value field.
        value: Box<Field>,
    },
}

/// [`TableSchema::fold_case_variants`] on one struct's fields.
fn fold_fields(fields: &mut Vec<Field>) {
    let mut seen = std::collections::HashSet::new();
    fields.retain(|f| seen.insert(f.name.to_ascii_lowercase()));
    for f in fields {
        fold_type(&mut f.ty);
    }
}

fn fold_type(ty: &mut IcebergType) {
    match ty {
        IcebergType::Struct(fields) => fold_fields(fields),
        IcebergType::List(element) => fold_type(&mut element.ty),
        IcebergType::Map { value, .. } => fold_type(&mut value.ty),
        _ => {}
    }
}

/// A named field of a struct or table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Field {
    /// Field id, when declared; sinks assign ids to fields without one.
    pub id: Option<i32>,
    /// Field name.
    pub name: String,
    /// Field type.
    pub ty: IcebergType,
    /// Whether the field is NOT NULL.
    pub required: bool,
    /// Documentation.
    pub doc: Option<String>,
}

impl Field {
    /// An optional field.
    pub fn optional(name: impl Into<String>, ty: IcebergType) -> Self {
        Field {
            id: None,
            name: name.into(),
            ty,
            required: false,
            doc: None,
        }
    }

    /// A required field.
    pub fn required(name: impl Into<String>, ty: IcebergType) -> Self {
        Field {
            required: true,
            ..Field::optional(name, ty)
        }
    }
}

/// The schema of a table: top-level fields plus the identifier (primary key) field names.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct TableSchema {
    /// Top-level fields in order.
    pub fields: Vec<Field>,
    /// Names of identifier fields (a primary key), possibly empty.
    pub identifier_fields: Vec<String>,
}

impl TableSchema {
    /// A schema of the given fields and no identifier.
    pub fn new(fields: Vec<Field>) -> Self {
        TableSchema {
            fields,
            identifier_fields: Vec::new(),
        }
    }

    /// The field named `name` (exact match).
    pub fn field(&self, name: &str) -> Option<&Field> {
        self.fields.iter().find(|f| f.name == name)
    }

    /// Parse the table-creation JSON of OSS Tables / S3 Tables
    /// (`{"iceberg":{"schema":{"fields":[…]}}}`), also accepting the inner `{"schema":…}` or
    /// `{"fields":…}`, and an Iceberg-spec schema (`{"type":"struct","fields":[…]}` with nested types
    /// as JSON objects). `identifier-field-ids` / `identifierFields` name the primary key.
    pub fn from_json(text: &str) -> Result<Self> {
        let doc: Value = serde_json::from_str(text)
            .map_err(|e| Error::invalid_input("table schema is not valid json").with_source(e))?;
        let mut node = &doc;
        if let Some(inner) = node.get("metadata") {
            node = inner;
        }
        if let Some(inner) = node.get("iceberg") {
            node = inner;
        }
        if let Some(inner) = node.get("schema") {
            node = inner;
        }
        let fields = node
            .get("fields")
            .and_then(Value::as_array)
            .ok_or_else(|| Error::invalid_input("table schema has no `fields` array"))?;
        let fields = fields
            .iter()
            .enumerate()
            .map(|(i, f)| parse_field(f, &format!("fields[{i}]")))
            .collect::<Result<Vec<_>>>()?;
        let mut schema = TableSchema::new(fields);
        if let Some(ids) = node.get("identifier-field-ids").and_then(Value::as_array) {
            for id in ids {
                let id = id.as_i64().unwrap_or(-1);
                let f = schema
                    .fields
                    .iter()
                    .find(|f| f.id.map(i64::from) == Some(id))
                    .ok_or_else(|| {
                        Error::invalid_input(format!(
                            "identifier-field-ids names field id {id}, which the schema does not have"
                        ))
                    })?;
                schema.identifier_fields.push(f.name.clone());
            }
        }
        if let Some(names) = node.get("identifierFields").and_then(Value::as_array) {
            schema
                .identifier_fields
                .extend(names.iter().filter_map(Value::as_str).map(str::to_owned));
        }
        schema.validate()?;
        Ok(schema)
    }

    /// Drop each field whose name differs only in ASCII case from an earlier field's, at the top
    /// level and inside structs (through list elements and map values): what case-insensitive
    /// name matching ([`crate::Names::CaseInsensitive`]) reads as one column. The first name seen
    /// stays.
    pub fn fold_case_variants(&mut self) {
        fold_fields(&mut self.fields);
    }

    /// Check names are unique and identifier fields exist and are required primitives.
    pub fn validate(&self) -> Result<()> {
        let mut seen = std::collections::HashSet::new();
        for f in &self.fields {
            if f.name.is_empty() {
                return Err(Error::invalid_input(
                    "table schema has a field with an empty name",
                ));
            }
            if !seen.insert(f.name.to_lowercase()) {
                return Err(Error::invalid_input(format!(
                    "table schema names field `{}` twice",
                    f.name
                )));
            }
        }
        for name in &self.identifier_fields {
            let f = self.field(name).ok_or_else(|| {
                Error::invalid_input(format!("identifier field `{name}` is not in the schema"))
            })?;
            if !f.required || !f.ty.is_primitive() {
                return Err(Error::invalid_input(format!(
                    "identifier field `{name}` must be a required primitive field"
                )));
            }
        }
        Ok(())
    }

    /// The schema as Iceberg-spec JSON (`{"type":"struct","fields":[…]}`), ids included where set.
    pub fn to_json(&self) -> Value {
        let mut v = struct_json(&self.fields);
        if !self.identifier_fields.is_empty() {
            v["identifierFields"] = Value::from(self.identifier_fields.clone());
        }
        v
    }
}

impl IcebergType {
    /// Whether the type is not a struct, list or map.
    pub fn is_primitive(&self) -> bool {
        !matches!(
            self,
            IcebergType::Struct(_) | IcebergType::List(_) | IcebergType::Map { .. }
        )
    }

    /// Parse a type written as a string: a primitive name (`long`, `decimal(10,2)`,
    /// `fixed[16]`, `timestamptz`), or the nested forms `list<T>`, `map<K,V>`,
    /// `struct<a:T,b:U>` (elements and values optional).
    pub fn parse(text: &str) -> Result<Self> {
        let mut p = TypeParser { s: text, pos: 0 };
        let t = p.parse_type()?;
        p.skip_ws();
        if p.pos != p.s.len() {
            return Err(p.err("unexpected text after the type"));
        }
        Ok(t)
    }
}

impl fmt::Display for IcebergType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            IcebergType::Boolean => f.write_str("boolean"),
            IcebergType::Int => f.write_str("int"),
            IcebergType::Long => f.write_str("long"),
            IcebergType::Float => f.write_str("float"),
            IcebergType::Double => f.write_str("double"),
            IcebergType::Decimal { precision, scale } => write!(f, "decimal({precision},{scale})"),
            IcebergType::Date => f.write_str("date"),
            IcebergType::Time => f.write_str("time"),
            IcebergType::Timestamp => f.write_str("timestamp"),
            IcebergType::Timestamptz => f.write_str("timestamptz"),
            IcebergType::TimestampNs => f.write_str("timestamp_ns"),
            IcebergType::TimestamptzNs => f.write_str("timestamptz_ns"),
            IcebergType::String => f.write_str("string"),
            IcebergType::Uuid => f.write_str("uuid"),
            IcebergType::Fixed(l) => write!(f, "fixed[{l}]"),
            IcebergType::Binary => f.write_str("binary"),
            IcebergType::Struct(fields) => {
                f.write_str("struct<")?;
                for (i, fl) in fields.iter().enumerate() {
                    if i > 0 {
                        f.write_str(",")?;
                    }
                    write!(f, "{}:{}", fl.name, fl.ty)?;
                }
                f.write_str(">")
            }
            IcebergType::List(e) => write!(f, "list<{}>", e.ty),
            IcebergType::Map { key, value } => write!(f, "map<{},{}>", key.ty, value.ty),
        }
    }
}

fn primitive(name: &str) -> Option<IcebergType> {
    Some(match name.to_ascii_lowercase().as_str() {
        "boolean" | "bool" => IcebergType::Boolean,
        "int" | "integer" => IcebergType::Int,
        "long" | "bigint" => IcebergType::Long,
        "float" => IcebergType::Float,
        "double" => IcebergType::Double,
        "date" => IcebergType::Date,
        "time" => IcebergType::Time,
        "timestamp" => IcebergType::Timestamp,
        "timestamptz" => IcebergType::Timestamptz,
        "timestamp_ns" => IcebergType::TimestampNs,
        "timestamptz_ns" => IcebergType::TimestamptzNs,
        "string" => IcebergType::String,
        "uuid" => IcebergType::Uuid,
        "binary" => IcebergType::Binary,
        _ => return None,
    })
}

struct TypeParser<'a> {
    s: &'a str,
    pos: usize,
}

impl TypeParser<'_> {
    fn err(&self, what: &str) -> Error {
        Error::invalid_input(format!(
            "invalid iceberg type `{}` at offset {}: {what}",
            self.s, self.pos
        ))
    }

    fn skip_ws(&mut self) {
        while self.s[self.pos..].starts_with(char::is_whitespace) {
            self.pos += 1;
        }
    }

    fn word(&mut self) -> &str {
        self.skip_ws();
        let start = self.pos;
        while let Some(c) = self.s[self.pos..].chars().next() {
            if c.is_alphanumeric() || c == '_' {
                self.pos += c.len_utf8();
            } else {
                break;
            }
        }
        &self.s[start..self.pos]
    }

    fn expect(&mut self, c: char) -> Result<()> {
        self.skip_ws();
        if self.s[self.pos..].starts_with(c) {
            self.pos += 1;
            Ok(())
        } else {
            Err(self.err(&format!("expected `{c}`")))
        }
    }

    fn number(&mut self) -> Result<u64> {
        let w = self.word().to_owned();
        w.parse().map_err(|_| self.err("expected a number"))
    }

    fn parse_type(&mut self) -> Result<IcebergType> {
        let name = self.word().to_ascii_lowercase();
        match name.as_str() {
            "decimal" => {
                self.expect('(')?;
                let precision = self.number()? as u32;
                self.expect(',')?;
                let scale = self.number()? as u32;
                self.expect(')')?;
                if precision == 0 || precision > 38 || scale > precision {
                    return Err(
                        self.err("decimal needs 1 <= precision <= 38 and scale <= precision")
                    );
                }
                Ok(IcebergType::Decimal { precision, scale })
            }
            "fixed" => {
                self.skip_ws();
                let close = if self.s[self.pos..].starts_with('[') {
                    self.expect('[')?;
                    ']'
                } else {
                    self.expect('(')?;
                    ')'
                };
                let len = self.number()?;
                self.expect(close)?;
                Ok(IcebergType::Fixed(len))
            }
            "list" | "array" => {
                self.expect('<')?;
                let t = self.parse_type()?;
                self.expect('>')?;
                Ok(IcebergType::List(Box::new(Field::optional("element", t))))
            }
            "map" => {
                self.expect('<')?;
                let k = self.parse_type()?;
                self.expect(',')?;
                let v = self.parse_type()?;
                self.expect('>')?;
                Ok(IcebergType::Map {
                    key: Box::new(Field::required("key", k)),
                    value: Box::new(Field::optional("value", v)),
                })
            }
            "struct" => {
                self.expect('<')?;
                let mut fields = Vec::new();
                loop {
                    let fname = self.word().to_owned();
                    if fname.is_empty() {
                        return Err(self.err("expected a field name"));
                    }
                    self.expect(':')?;
                    let t = self.parse_type()?;
                    fields.push(Field::optional(fname, t));
                    self.skip_ws();
                    if self.s[self.pos..].starts_with(',') {
                        self.pos += 1;
                    } else {
                        break;
                    }
                }
                self.expect('>')?;
                Ok(IcebergType::Struct(fields))
            }
            "" => Err(self.err("expected a type name")),
            other => primitive(other).ok_or_else(|| self.err("unknown type name")),
        }
    }
}

fn parse_type_json(v: &Value, at: &str) -> Result<IcebergType> {
    match v {
        Value::String(s) => IcebergType::parse(s),
        Value::Object(o) => {
            let kind = o.get("type").and_then(Value::as_str).unwrap_or("");
            match kind {
                "struct" => {
                    let fields = o.get("fields").and_then(Value::as_array).ok_or_else(|| {
                        Error::invalid_input(format!("{at}: struct type has no `fields`"))
                    })?;
                    let fields = fields
                        .iter()
                        .enumerate()
                        .map(|(i, f)| parse_field(f, &format!("{at}.fields[{i}]")))
                        .collect::<Result<_>>()?;
                    Ok(IcebergType::Struct(fields))
                }
                "list" => {
                    let element = o.get("element").ok_or_else(|| {
                        Error::invalid_input(format!("{at}: list type has no `element`"))
                    })?;
                    let mut f = Field::optional("element", parse_type_json(element, at)?);
                    f.id = o
                        .get("element-id")
                        .and_then(Value::as_i64)
                        .map(|i| i as i32);
                    f.required = o
                        .get("element-required")
                        .and_then(Value::as_bool)
                        .unwrap_or(false);
                    Ok(IcebergType::List(Box::new(f)))
                }
                "map" => {
                    let k = o.get("key").ok_or_else(|| {
                        Error::invalid_input(format!("{at}: map type has no `key`"))
                    })?;
                    let val = o.get("value").ok_or_else(|| {
                        Error::invalid_input(format!("{at}: map type has no `value`"))
                    })?;
                    let mut key = Field::required("key", parse_type_json(k, at)?);
                    key.id = o.get("key-id").and_then(Value::as_i64).map(|i| i as i32);
                    let mut value = Field::optional("value", parse_type_json(val, at)?);
                    value.id = o.get("value-id").and_then(Value::as_i64).map(|i| i as i32);
                    value.required = o
                        .get("value-required")
                        .and_then(Value::as_bool)
                        .unwrap_or(false);
                    Ok(IcebergType::Map {
                        key: Box::new(key),
                        value: Box::new(value),
                    })
                }
                other => Err(Error::invalid_input(format!(
                    "{at}: unknown nested type `{other}`"
                ))),
            }
        }
        _ => Err(Error::invalid_input(format!(
            "{at}: a type must be a string or an object"
        ))),
    }
}

fn parse_field(v: &Value, at: &str) -> Result<Field> {
    let name = v
        .get("name")
        .and_then(Value::as_str)
        .ok_or_else(|| Error::invalid_input(format!("{at} has no `name`")))?;
    let ty = v
        .get("type")
        .ok_or_else(|| Error::invalid_input(format!("{at} (`{name}`) has no `type`")))?;
    let ty = parse_type_json(ty, &format!("{at} (`{name}`)"))?;
    Ok(Field {
        id: v.get("id").and_then(Value::as_i64).map(|i| i as i32),
        name: name.to_owned(),
        ty,
        required: v.get("required").and_then(Value::as_bool).unwrap_or(false),
        doc: v.get("doc").and_then(Value::as_str).map(str::to_owned),
    })
}

fn type_json(t: &IcebergType) -> Value {
    match t {
        IcebergType::Struct(fields) => struct_json(fields),
        IcebergType::List(e) => {
            let mut v = serde_json::json!({
                "type": "list",
                "element": type_json(&e.ty),
                "element-required": e.required,
            });
            if let Some(id) = e.id {
                v["element-id"] = id.into();
            }
            v
        }
        IcebergType::Map { key, value } => {
            let mut v = serde_json::json!({
                "type": "map",
                "key": type_json(&key.ty),
                "value": type_json(&value.ty),
                "value-required": value.required,
            });
            if let Some(id) = key.id {
                v["key-id"] = id.into();
            }
            if let Some(id) = value.id {
                v["value-id"] = id.into();
            }
            v
        }
        p => Value::String(p.to_string()),
    }
}

fn struct_json(fields: &[Field]) -> Value {
    let fields: Vec<Value> = fields
        .iter()
        .map(|f| {
            let mut v = serde_json::json!({
                "name": f.name,
                "type": type_json(&f.ty),
                "required": f.required,
            });
            if let Some(id) = f.id {
                v["id"] = id.into();
            }
            if let Some(doc) = &f.doc {
                v["doc"] = doc.clone().into();
            }
            v
        })
        .collect();
    serde_json::json!({"type": "struct", "fields": fields})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn case_variants_fold_into_the_first_name_at_every_depth() {
        let text = r#"{"fields":[{"name":"id","type":"long"},{"name":"ID","type":"string"},
            {"name":"a","type":{"type":"struct","fields":[{"name":"X","type":"int"},{"name":"x","type":"int"}]}},
            {"name":"l","type":{"type":"list","element":{"type":"struct","fields":[{"name":"q","type":"int"},{"name":"Q","type":"int"}]}}}]}"#;
        let err = TableSchema::from_json(text).unwrap_err();
        assert!(err.to_string().contains("`ID` twice"), "{err}");
        let mut schema = TableSchema::new(vec![
            Field::optional("id", IcebergType::Long),
            Field::optional("ID", IcebergType::String),
            Field::optional(
                "a",
                IcebergType::Struct(vec![
                    Field::optional("X", IcebergType::Int),
                    Field::optional("x", IcebergType::Int),
                ]),
            ),
            Field::optional(
                "l",
                IcebergType::List(Box::new(Field::optional(
                    "element",
                    IcebergType::Struct(vec![
                        Field::optional("q", IcebergType::Int),
                        Field::optional("Q", IcebergType::Int),
                    ]),
                ))),
            ),
        ]);
        schema.fold_case_variants();
        let names = |fields: &[Field]| fields.iter().map(|f| f.name.clone()).collect::<Vec<_>>();
        assert_eq!(names(&schema.fields), ["id", "a", "l"]);
        assert_eq!(schema.fields[0].ty, IcebergType::Long);
        let IcebergType::Struct(a) = &schema.fields[1].ty else {
            panic!()
        };
        assert_eq!(names(a), ["X"]);
        let IcebergType::List(e) = &schema.fields[2].ty else {
            panic!()
        };
        let IcebergType::Struct(l) = &e.ty else {
            panic!()
        };
        assert_eq!(names(l), ["q"]);
    }

    #[test]
    fn parses_the_seed_schema_json() {
        let text = r#"{
          "iceberg": {"schema": {"fields": [
            {"name": "event_id", "type": "string", "required": true},
            {"name": "event_time", "type": "string"},
            {"name": "event_type", "type": "string"}
          ]}}
        }"#;
        let s = TableSchema::from_json(text).unwrap();
        assert_eq!(s.fields.len(), 3);
        assert_eq!(
            s.fields[0],
            Field::required("event_id", IcebergType::String)
        );
        assert!(!s.fields[1].required);
        // The aws-cli create-table.json wraps it in "metadata".
        let wrapped = format!(r#"{{"name":"t","format":"ICEBERG","metadata":{text}}}"#);
        assert_eq!(TableSchema::from_json(&wrapped).unwrap(), s);
    }

    #[test]
    fn type_strings_round_trip() {
        for text in [
            "boolean",
            "int",
            "long",
            "float",
            "double",
            "decimal(10,2)",
            "date",
            "time",
            "timestamp",
            "timestamptz",
            "timestamp_ns",
            "timestamptz_ns",
            "string",
            "uuid",
            "fixed[16]",
            "binary",
            "list<long>",
            "map<string,list<double>>",
            "struct<a:int,b:struct<c:string>>",
        ] {
            let t = IcebergType::parse(text).unwrap_or_else(|e| panic!("{text}: {e}"));
            assert_eq!(t.to_string(), text, "case {text}");
        }
        assert_eq!(IcebergType::parse("BIGINT").unwrap(), IcebergType::Long);
        assert_eq!(
            IcebergType::parse(" decimal( 38 , 0 ) ")
                .unwrap()
                .to_string(),
            "decimal(38,0)"
        );
    }

    #[test]
    fn bad_types_name_the_problem() {
        for (text, want) in [
            ("varchar", "unknown type name"),
            ("decimal(40,2)", "precision"),
            ("list<long", "expected `>`"),
            ("long long", "unexpected text"),
            ("", "expected a type name"),
        ] {
            let e = IcebergType::parse(text).unwrap_err().to_string();
            assert!(e.contains(want), "{text}: {e}");
        }
    }

    #[test]
    fn spec_json_with_nested_types_and_ids_round_trips() {
        let text = r#"{"type":"struct","schema-id":0,"identifier-field-ids":[1],"fields":[
          {"id":1,"name":"id","type":"long","required":true},
          {"id":2,"name":"tags","type":{"type":"list","element-id":4,"element":"string","element-required":false},"required":false},
          {"id":3,"name":"attrs","type":{"type":"map","key-id":5,"key":"string","value-id":6,"value":"double","value-required":true},"required":false}
        ]}"#;
        let s = TableSchema::from_json(text).unwrap();
        assert_eq!(s.identifier_fields, ["id"]);
        let again = TableSchema::from_json(&s.to_json().to_string()).unwrap();
        assert_eq!(again, s);
        let IcebergType::Map { value, .. } = &s.fields[2].ty else {
            panic!("map expected")
        };
        assert!(value.required);
        assert_eq!(value.id, Some(6));
    }

    #[test]
    fn schema_errors_name_the_field() {
        for (text, want) in [
            (r#"{"fields":[{"type":"long"}]}"#, "fields[0] has no `name`"),
            (
                r#"{"fields":[{"name":"a","type":"nope"}]}"#,
                "unknown type name",
            ),
            (
                r#"{"fields":[{"name":"a","type":"long"},{"name":"A","type":"long"}]}"#,
                "twice",
            ),
            (
                r#"{"fields":[{"name":"a","type":"long"}],"identifierFields":["a"]}"#,
                "required primitive",
            ),
            (r#"{"nofields":1}"#, "no `fields`"),
        ] {
            let e = TableSchema::from_json(text).unwrap_err().to_string();
            assert!(e.contains(want), "{text}: {e}");
        }
    }
}
