//! CreateTable's `metadata` document (`{"iceberg":{"schema":{"fields":[…]}}}`), on the wire and
//! as the first Iceberg metadata of a table.
//!
//! The AWS CLI takes the document with member names (`partitionSpec.specId`,
//! `fields[].sourceId`, `writeOrder.nullOrder`, `schemaV2.identifierFieldIds`); botocore sends
//! some of them under other JSON names (`spec-id`, `source-id`, `null-order`,
//! `identifier-field-ids`), which happen to be the Iceberg spec's. [`to_wire_form`] does the same
//! renaming, so the wire form is also what iceberg's serde reads for partition specs, sort orders
//! and `schemaV2` schemas.
//!
//! A server that does not write the first metadata file itself (moto) leaves the table without a
//! `metadataLocation`; [`table_creation`] turns the document into the [`TableCreation`] floe
//! writes it from. `schema` fields are primitive types (nested ones need `schemaV2`, as with
//! S3 Tables); fields without an `id` are numbered from 1 in order.

use std::collections::HashMap;
use std::sync::Arc;

use floe_core::{Error, Result};
use floe_decode::{IcebergType, TableSchema};
use iceberg::TableCreation;
use iceberg::spec::{NestedField, PrimitiveType, Schema, SortOrder, Type, UnboundPartitionSpec};
use serde_json::{Map, Value};

/// Rename `from` to `to` in `obj` (if present).
fn rename(obj: &mut Map<String, Value>, from: &str, to: &str) {
    if let Some(v) = obj.remove(from) {
        obj.insert(to.to_owned(), v);
    }
}

/// Rename, in the object at `obj[key]`, its own members and those of each of its `fields`.
fn rename_in(
    obj: &mut Map<String, Value>,
    key: &str,
    own: &[(&str, &str)],
    fields: &[(&str, &str)],
) {
    let Some(Value::Object(inner)) = obj.get_mut(key) else {
        return;
    };
    for (from, to) in own {
        rename(inner, from, to);
    }
    if let Some(Value::Array(list)) = inner.get_mut("fields") {
        for f in list.iter_mut() {
            if let Value::Object(f) = f {
                for (from, to) in fields {
                    rename(f, from, to);
                }
            }
        }
    }
}

/// The CLI-form `metadata` document with botocore's wire names (see the module doc); a document
/// already in wire form is returned unchanged.
pub fn to_wire_form(metadata: &Value) -> Value {
    let mut out = metadata.clone();
    if let Some(Value::Object(iceberg)) = out.get_mut("iceberg") {
        rename_in(
            iceberg,
            "partitionSpec",
            &[("specId", "spec-id")],
            &[("sourceId", "source-id"), ("fieldId", "field-id")],
        );
        rename_in(
            iceberg,
            "writeOrder",
            &[("orderId", "order-id")],
            &[("sourceId", "source-id"), ("nullOrder", "null-order")],
        );
        rename_in(
            iceberg,
            "schemaV2",
            &[
                ("schemaId", "schema-id"),
                ("identifierFieldIds", "identifier-field-ids"),
            ],
            &[],
        );
    }
    out
}

fn primitive(t: &IcebergType) -> Option<PrimitiveType> {
    Some(match t {
        IcebergType::Boolean => PrimitiveType::Boolean,
        IcebergType::Int => PrimitiveType::Int,
        IcebergType::Long => PrimitiveType::Long,
        IcebergType::Float => PrimitiveType::Float,
        IcebergType::Double => PrimitiveType::Double,
        IcebergType::Decimal { precision, scale } => PrimitiveType::Decimal {
            precision: *precision,
            scale: *scale,
        },
        IcebergType::Date => PrimitiveType::Date,
        IcebergType::Time => PrimitiveType::Time,
        IcebergType::Timestamp => PrimitiveType::Timestamp,
        IcebergType::Timestamptz => PrimitiveType::Timestamptz,
        IcebergType::TimestampNs => PrimitiveType::TimestampNs,
        IcebergType::TimestamptzNs => PrimitiveType::TimestamptzNs,
        IcebergType::String => PrimitiveType::String,
        IcebergType::Uuid => PrimitiveType::Uuid,
        IcebergType::Fixed(n) => PrimitiveType::Fixed(*n),
        IcebergType::Binary => PrimitiveType::Binary,
        IcebergType::Struct(_) | IcebergType::List(_) | IcebergType::Map { .. } => return None,
    })
}

/// The Iceberg schema of a `schema` (primitive fields) document.
fn schema_from_fields(schema: &Value) -> Result<Schema> {
    let parsed = TableSchema::from_json(&schema.to_string())?;
    let mut next_id = parsed.fields.iter().filter_map(|f| f.id).max().unwrap_or(0) + 1;
    let mut fields = Vec::with_capacity(parsed.fields.len());
    let mut ids_by_name = HashMap::new();
    for f in &parsed.fields {
        let ty = primitive(&f.ty).ok_or_else(|| {
            Error::invalid_input(format!(
                "table schema field `{}` has nested type {}: declare nested types in `schemaV2`",
                f.name, f.ty
            ))
        })?;
        let id = match f.id {
            Some(id) => id,
            None => {
                next_id += 1;
                next_id - 1
            }
        };
        ids_by_name.insert(f.name.clone(), id);
        let mut field = NestedField::new(id, &f.name, Type::Primitive(ty), f.required);
        if let Some(doc) = &f.doc {
            field = field.with_doc(doc);
        }
        fields.push(Arc::new(field));
    }
    let identifier_ids: Vec<i32> = parsed
        .identifier_fields
        .iter()
        .filter_map(|n| ids_by_name.get(n).copied())
        .collect();
    Schema::builder()
        .with_schema_id(0)
        .with_fields(fields)
        .with_identifier_field_ids(identifier_ids)
        .build()
        .map_err(|e| {
            Error::invalid_input(format!("invalid table schema: {}", e.message())).with_source(e)
        })
}

fn from_wire<T: serde::de::DeserializeOwned>(v: &Value, what: &str) -> Result<T> {
    serde_json::from_value(v.clone()).map_err(|e| {
        Error::invalid_input(format!("invalid `{what}` in the table metadata")).with_source(e)
    })
}

/// The [`TableCreation`] of table `name` at `location` from a wire-form `metadata` document.
pub fn table_creation(name: &str, metadata: &Value, location: &str) -> Result<TableCreation> {
    let iceberg = metadata
        .get("iceberg")
        .ok_or_else(|| Error::invalid_input("the table metadata has no `iceberg` member"))?;
    let schema = match (iceberg.get("schemaV2"), iceberg.get("schema")) {
        (Some(v2), _) => from_wire::<Schema>(v2, "schemaV2")?,
        (None, Some(v1)) => schema_from_fields(v1)?,
        (None, None) => {
            return Err(Error::invalid_input(
                "the table metadata has neither `schema` nor `schemaV2`",
            ));
        }
    };
    let partition_spec = iceberg
        .get("partitionSpec")
        .map(|v| from_wire::<UnboundPartitionSpec>(v, "partitionSpec"))
        .transpose()?;
    let sort_order = iceberg
        .get("writeOrder")
        .map(|v| from_wire::<SortOrder>(v, "writeOrder"))
        .transpose()?;
    let properties: HashMap<String, String> = iceberg
        .get("properties")
        .map(|v| from_wire(v, "properties"))
        .transpose()?
        .unwrap_or_default();
    Ok(TableCreation::builder()
        .name(name.to_owned())
        .location(location.to_owned())
        .schema(schema)
        .partition_spec_opt(partition_spec)
        .sort_order_opt(sort_order)
        .properties(properties)
        .build())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn seed() -> Value {
        json!({"iceberg": {"schema": {"fields": [
            {"name": "event_id", "type": "string", "required": true},
            {"name": "event_time", "type": "string"},
            {"name": "event_type", "type": "string"}
        ]}}})
    }

    #[test]
    fn wire_form_renames_like_botocore() {
        let cli = json!({"iceberg": {
            "schema": {"fields": [{"name": "a", "type": "long"}]},
            "partitionSpec": {"specId": 0, "fields": [{"sourceId": 1, "transform": "identity", "name": "a", "fieldId": 1000}]},
            "writeOrder": {"orderId": 1, "fields": [{"sourceId": 1, "transform": "identity", "direction": "asc", "nullOrder": "nulls-first"}]},
            "schemaV2": {"type": "struct", "fields": [], "schemaId": 0, "identifierFieldIds": []}
        }});
        let wire = to_wire_form(&cli);
        assert_eq!(wire["iceberg"]["partitionSpec"]["spec-id"], 0);
        assert_eq!(
            wire["iceberg"]["partitionSpec"]["fields"][0]["source-id"],
            1
        );
        assert_eq!(
            wire["iceberg"]["partitionSpec"]["fields"][0]["field-id"],
            1000
        );
        assert_eq!(wire["iceberg"]["writeOrder"]["order-id"], 1);
        assert_eq!(
            wire["iceberg"]["writeOrder"]["fields"][0]["null-order"],
            "nulls-first"
        );
        assert_eq!(
            wire["iceberg"]["schemaV2"]["identifier-field-ids"],
            json!([])
        );
        assert_eq!(to_wire_form(&wire), wire);
        assert_eq!(to_wire_form(&seed()), seed());
    }

    #[test]
    fn seed_schema_becomes_iceberg_fields_1_to_3() {
        let c = table_creation("events", &seed(), "s3://w").unwrap();
        let fields: Vec<(i32, String, bool)> = c
            .schema
            .as_struct()
            .fields()
            .iter()
            .map(|f| (f.id, f.name.clone(), f.required))
            .collect();
        assert_eq!(
            fields,
            vec![
                (1, "event_id".into(), true),
                (2, "event_time".into(), false),
                (3, "event_type".into(), false)
            ]
        );
        assert_eq!(c.location.as_deref(), Some("s3://w"));
    }

    #[test]
    fn spec_order_properties_and_v2_schemas_are_read() {
        let mut doc = to_wire_form(&json!({"iceberg": {
            "schemaV2": {"type": "struct", "schemaId": 0, "identifierFieldIds": [1], "fields": [
                {"id": 1, "name": "id", "type": "long", "required": true},
                {"id": 2, "name": "tags", "required": false,
                 "type": {"type": "list", "element-id": 3, "element": "string", "element-required": false}}
            ]},
            "partitionSpec": {"fields": [{"sourceId": 1, "transform": "bucket[16]", "name": "id_bucket"}]},
            "writeOrder": {"orderId": 1, "fields": [{"sourceId": 1, "transform": "identity", "direction": "desc", "nullOrder": "nulls-last"}]},
            "properties": {"write.format.default": "parquet"}
        }}));
        let c = table_creation("t", &doc, "s3://w").unwrap();
        assert_eq!(c.schema.identifier_field_ids().collect::<Vec<_>>(), vec![1]);
        assert_eq!(c.partition_spec.unwrap().fields()[0].name, "id_bucket");
        assert_eq!(c.sort_order.unwrap().order_id, 1);
        assert_eq!(c.properties["write.format.default"], "parquet");

        doc["iceberg"] = json!({"schema": {"fields": [{"name": "l", "type": "list<string>"}]}});
        let e = table_creation("t", &doc, "s3://w").unwrap_err();
        assert!(e.to_string().contains("schemaV2"), "{e}");
        let e = table_creation("t", &json!({}), "s3://w").unwrap_err();
        assert!(e.to_string().contains("iceberg"), "{e}");
    }
}
