//! floe's table schemas and partition declarations as Iceberg ones.

use floe_core::{Error, Result};
use floe_decode::partition::{PartitionField, Transform as FloeTransform};
use floe_decode::{Field, IcebergType, TableSchema};
use iceberg::spec::{
    ListType, MapType, NestedField, NestedFieldRef, PrimitiveType, Schema, StructType, Transform,
    Type, UnboundPartitionSpec,
};

/// Build an Iceberg schema, assigning field ids in order where the declaration has none.
pub fn to_iceberg_schema(schema: &TableSchema) -> Result<Schema> {
    let mut next_id = schema
        .fields
        .iter()
        .filter_map(|f| f.id)
        .max()
        .unwrap_or(0)
        .max(0)
        + 1;
    let fields = schema
        .fields
        .iter()
        .map(|f| field(f, &mut next_id))
        .collect::<Vec<_>>();
    let ids: Vec<i32> = schema
        .identifier_fields
        .iter()
        .map(|name| {
            fields
                .iter()
                .find(|f| &f.name == name)
                .map(|f| f.id)
                .ok_or_else(|| {
                    Error::invalid_input(format!("identifier field `{name}` is not in the schema"))
                })
        })
        .collect::<Result<_>>()?;
    Schema::builder()
        .with_fields(fields)
        .with_identifier_field_ids(ids)
        .build()
        .map_err(|e| {
            Error::invalid_input("the table schema is not a valid iceberg schema").with_source(e)
        })
}

/// An Iceberg type for a new column (field ids inside are placeholders: adding a column assigns
/// fresh ones).
pub fn to_iceberg_type(t: &IcebergType) -> Type {
    let mut next = 1;
    ty(t, &mut next)
}

fn take(next: &mut i32, declared: Option<i32>) -> i32 {
    match declared {
        Some(id) => id,
        None => {
            let id = *next;
            *next += 1;
            id
        }
    }
}

fn field(f: &Field, next: &mut i32) -> NestedFieldRef {
    let id = take(next, f.id);
    let ty = ty(&f.ty, next);
    let mut nf = if f.required {
        NestedField::required(id, &f.name, ty)
    } else {
        NestedField::optional(id, &f.name, ty)
    };
    if let Some(doc) = &f.doc {
        nf = nf.with_doc(doc);
    }
    nf.into()
}

fn ty(t: &IcebergType, next: &mut i32) -> Type {
    match t {
        IcebergType::Boolean => Type::Primitive(PrimitiveType::Boolean),
        IcebergType::Int => Type::Primitive(PrimitiveType::Int),
        IcebergType::Long => Type::Primitive(PrimitiveType::Long),
        IcebergType::Float => Type::Primitive(PrimitiveType::Float),
        IcebergType::Double => Type::Primitive(PrimitiveType::Double),
        IcebergType::Decimal { precision, scale } => Type::Primitive(PrimitiveType::Decimal {
            precision: *precision,
            scale: *scale,
        }),
        IcebergType::Date => Type::Primitive(PrimitiveType::Date),
        IcebergType::Time => Type::Primitive(PrimitiveType::Time),
        IcebergType::Timestamp => Type::Primitive(PrimitiveType::Timestamp),
        IcebergType::Timestamptz => Type::Primitive(PrimitiveType::Timestamptz),
        IcebergType::TimestampNs => Type::Primitive(PrimitiveType::TimestampNs),
        IcebergType::TimestamptzNs => Type::Primitive(PrimitiveType::TimestamptzNs),
        IcebergType::String => Type::Primitive(PrimitiveType::String),
        IcebergType::Uuid => Type::Primitive(PrimitiveType::Uuid),
        IcebergType::Fixed(n) => Type::Primitive(PrimitiveType::Fixed(*n)),
        IcebergType::Binary => Type::Primitive(PrimitiveType::Binary),
        IcebergType::Struct(fields) => Type::Struct(StructType::new(
            fields.iter().map(|f| field(f, next)).collect(),
        )),
        IcebergType::List(element) => {
            let id = take(next, element.id);
            let inner = ty(&element.ty, next);
            Type::List(ListType {
                element_field: NestedField::list_element(id, inner, element.required).into(),
            })
        }
        IcebergType::Map { key, value } => {
            let kid = take(next, key.id);
            let vid = take(next, value.id);
            let kt = ty(&key.ty, next);
            let vt = ty(&value.ty, next);
            Type::Map(MapType {
                key_field: NestedField::map_key_element(kid, kt).into(),
                value_field: NestedField::map_value_element(vid, vt, value.required).into(),
            })
        }
    }
}

/// Build an unbound partition spec from declared partition fields, resolving source columns by
/// name (exact, then case-insensitive) in `schema`.
pub fn to_partition_spec(
    fields: &[PartitionField],
    schema: &Schema,
) -> Result<UnboundPartitionSpec> {
    let mut builder = UnboundPartitionSpec::builder();
    for p in fields {
        let source = schema
            .as_struct()
            .fields()
            .iter()
            .find(|f| f.name == p.source)
            .or_else(|| {
                schema
                    .as_struct()
                    .fields()
                    .iter()
                    .find(|f| f.name.eq_ignore_ascii_case(&p.source))
            })
            .ok_or_else(|| {
                Error::config(
                    "partition-by",
                    format!(
                        "partition source column `{}` is not in the table schema",
                        p.source
                    ),
                )
            })?;
        let transform = match p.transform {
            FloeTransform::Identity => Transform::Identity,
            FloeTransform::Year => Transform::Year,
            FloeTransform::Month => Transform::Month,
            FloeTransform::Day => Transform::Day,
            FloeTransform::Hour => Transform::Hour,
            FloeTransform::Bucket(n) => Transform::Bucket(n),
            FloeTransform::Truncate(w) => Transform::Truncate(w),
            FloeTransform::Void => Transform::Void,
        };
        builder = builder
            .add_partition_field(source.id, &p.name, transform)
            .map_err(|e| Error::config("partition-by", e))?;
    }
    Ok(builder.build())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nested_types_get_unique_ids() {
        let s = TableSchema::from_json(
            r#"{"fields":[
              {"name":"id","type":"long","required":true},
              {"name":"tags","type":"list<string>"},
              {"name":"attrs","type":"map<string,struct<a:int,b:double>>"},
              {"name":"ts","type":"timestamptz"}
            ],"identifierFields":["id"]}"#,
        )
        .unwrap();
        let iceberg = to_iceberg_schema(&s).unwrap();
        assert_eq!(iceberg.identifier_field_ids().collect::<Vec<_>>(), [1]);
        assert_eq!(iceberg.highest_field_id(), 9);
        assert!(iceberg.field_by_name("attrs.value.b").is_some());
        let spec = to_partition_spec(
            &[
                PartitionField::parse("day(TS)").unwrap(),
                PartitionField::parse("bucket(4,id)").unwrap(),
            ],
            &iceberg,
        )
        .unwrap();
        assert_eq!(spec.fields().len(), 2);
        let err =
            to_partition_spec(&[PartitionField::parse("nope").unwrap()], &iceberg).unwrap_err();
        assert!(
            err.to_string()
                .contains("`nope` is not in the table schema"),
            "{err}"
        );
    }
}
