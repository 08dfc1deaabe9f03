//! Type mapping between floe's Iceberg types, Arrow, and MaxCompute, both ways.
//!
//! | Iceberg | Arrow | MaxCompute | back to Iceberg |
//! |---|---|---|---|
//! | boolean | bool | `boolean` | boolean |
//! | int | int8 / int16 / int32 | `tinyint` / `smallint` / `int` | int |
//! | long | int64 (uint32) | `bigint` | long |
//! | float / double | float32 / float64 | `float` / `double` | float / double |
//! | decimal(p,s) | decimal128(p,s) | `decimal(p,s)` (p ≤ 38 back) | decimal(p,s) |
//! | date | date32 | `date` | date |
//! | time | time64 | `string` (`HH:MM:SS.ffffff`) | string |
//! | timestamp | timestamp(µs) | `timestamp_ntz` | timestamp_ns |
//! | timestamptz | timestamp(µs, UTC) | `timestamp` | timestamptz_ns |
//! | timestamp_ns / timestamptz_ns | timestamp(ns[, UTC]) | `timestamp_ntz` / `timestamp` | same |
//! | — | timestamp(ms, UTC) | `datetime` | timestamptz |
//! | string, uuid | utf8 | `string` (`varchar(n)`, `char(n)`, `json` read back as string) | string |
//! | binary, `fixed[L]` | binary | `binary` | binary |
//! | list / map / struct | list / map / struct | `array` / `map` / `struct` | list / map / struct |
//!
//! MaxCompute's `interval_*` types have no counterpart and are refused. Arrow → MaxCompute goes
//! through the Iceberg mapping of `floe_decode::infer::arrow_to_iceberg` except for the few
//! Arrow types MaxCompute holds more exactly (int8/int16, timestamp(ms)).

use arrow_schema::{DataType as ArrowType, Field as ArrowField, Fields, TimeUnit};
use floe_core::{Error, ErrorKind, Result};
use floe_decode::{Field, IcebergType};
use floe_tunnel_codec::{Column, DataType, StructField, TableSchema};

fn unsupported(what: impl std::fmt::Display) -> Error {
    Error::new(ErrorKind::Unsupported, what.to_string())
}

/// The MaxCompute type for an Iceberg type.
pub fn iceberg_to_maxcompute(ty: &IcebergType) -> Result<DataType> {
    Ok(match ty {
        IcebergType::Boolean => DataType::Boolean,
        IcebergType::Int => DataType::Int,
        IcebergType::Long => DataType::BigInt,
        IcebergType::Float => DataType::Float,
        IcebergType::Double => DataType::Double,
        IcebergType::Decimal { precision, scale } => {
            let p = u8::try_from(*precision).map_err(|_| unsupported(format!("{ty}")))?;
            let s = u8::try_from(*scale).map_err(|_| unsupported(format!("{ty}")))?;
            DataType::decimal(p, s)?
        }
        IcebergType::Date => DataType::Date,
        IcebergType::Time | IcebergType::String | IcebergType::Uuid => DataType::String,
        IcebergType::Timestamp | IcebergType::TimestampNs => DataType::TimestampNtz,
        IcebergType::Timestamptz | IcebergType::TimestamptzNs => DataType::Timestamp,
        IcebergType::Fixed(_) | IcebergType::Binary => DataType::Binary,
        IcebergType::List(e) => DataType::array(iceberg_to_maxcompute(&e.ty)?),
        IcebergType::Map { key, value } => DataType::map(
            iceberg_to_maxcompute(&key.ty)?,
            iceberg_to_maxcompute(&value.ty)?,
        ),
        IcebergType::Struct(fields) => DataType::Struct(
            fields
                .iter()
                .map(|f| Ok(StructField::new(&f.name, iceberg_to_maxcompute(&f.ty)?)))
                .collect::<Result<Vec<_>>>()?,
        ),
    })
}

/// The Iceberg type for a MaxCompute type.
pub fn maxcompute_to_iceberg(ty: &DataType) -> Result<IcebergType> {
    Ok(match ty {
        DataType::Boolean => IcebergType::Boolean,
        DataType::TinyInt | DataType::SmallInt | DataType::Int => IcebergType::Int,
        DataType::BigInt => IcebergType::Long,
        DataType::Float => IcebergType::Float,
        DataType::Double => IcebergType::Double,
        DataType::Decimal(d) if d.precision() <= 38 => IcebergType::Decimal {
            precision: u32::from(d.precision()),
            scale: u32::from(d.scale()),
        },
        DataType::Decimal(_) => {
            return Err(unsupported(format!(
                "maxcompute type {ty} has more digits than iceberg's decimal(38)"
            )));
        }
        DataType::String | DataType::Varchar(_) | DataType::Char(_) | DataType::Json => {
            IcebergType::String
        }
        DataType::Binary => IcebergType::Binary,
        DataType::Date => IcebergType::Date,
        DataType::DateTime => IcebergType::Timestamptz,
        DataType::Timestamp => IcebergType::TimestamptzNs,
        DataType::TimestampNtz => IcebergType::TimestampNs,
        DataType::Array(e) => IcebergType::List(Box::new(Field::optional(
            "element",
            maxcompute_to_iceberg(e)?,
        ))),
        DataType::Map(k, v) => IcebergType::Map {
            key: Box::new(Field::required("key", maxcompute_to_iceberg(k)?)),
            value: Box::new(Field::optional("value", maxcompute_to_iceberg(v)?)),
        },
        DataType::Struct(fields) => IcebergType::Struct(
            fields
                .iter()
                .map(|f| {
                    Ok(Field::optional(
                        &f.name,
                        maxcompute_to_iceberg(&f.data_type)?,
                    ))
                })
                .collect::<Result<Vec<_>>>()?,
        ),
        DataType::IntervalDayTime | DataType::IntervalYearMonth => {
            return Err(unsupported(format!(
                "maxcompute type {ty} has no iceberg counterpart"
            )));
        }
    })
}

/// The MaxCompute type for an Arrow type.
pub fn arrow_to_maxcompute(ty: &ArrowType) -> Result<DataType> {
    Ok(match ty {
        ArrowType::Int8 => DataType::TinyInt,
        ArrowType::Int16 | ArrowType::UInt8 => DataType::SmallInt,
        ArrowType::Timestamp(TimeUnit::Millisecond | TimeUnit::Second, Some(_)) => {
            DataType::DateTime
        }
        ArrowType::Dictionary(_, v) => arrow_to_maxcompute(v)?,
        ArrowType::List(e) | ArrowType::LargeList(e) | ArrowType::FixedSizeList(e, _) => {
            DataType::array(arrow_to_maxcompute(e.data_type())?)
        }
        ArrowType::Struct(fields) => DataType::Struct(
            fields
                .iter()
                .map(|f| {
                    Ok(StructField::new(
                        f.name(),
                        arrow_to_maxcompute(f.data_type())?,
                    ))
                })
                .collect::<Result<Vec<_>>>()?,
        ),
        ArrowType::Map(entries, _) => match entries.data_type() {
            ArrowType::Struct(kv) if kv.len() == 2 => DataType::map(
                arrow_to_maxcompute(kv[0].data_type())?,
                arrow_to_maxcompute(kv[1].data_type())?,
            ),
            _ => {
                return Err(unsupported(format!(
                    "arrow type {ty} is not a key/value map"
                )));
            }
        },
        other => {
            let schema = arrow_schema::Schema::new(vec![ArrowField::new("c", other.clone(), true)]);
            let iceberg = floe_decode::infer::arrow_to_iceberg(&schema)?;
            let field = iceberg
                .fields
                .first()
                .ok_or_else(|| Error::unexpected("arrow type mapping lost its field"))?;
            iceberg_to_maxcompute(&field.ty)?
        }
    })
}

/// The Arrow type a MaxCompute column reads as (the Arrow tunnel's mapping).
pub fn maxcompute_to_arrow(ty: &DataType) -> Result<ArrowType> {
    let utc = || Some("UTC".into());
    Ok(match ty {
        DataType::Boolean => ArrowType::Boolean,
        DataType::TinyInt => ArrowType::Int8,
        DataType::SmallInt => ArrowType::Int16,
        DataType::Int => ArrowType::Int32,
        DataType::BigInt => ArrowType::Int64,
        DataType::Float => ArrowType::Float32,
        DataType::Double => ArrowType::Float64,
        DataType::Decimal(d) if d.precision() <= 38 => {
            ArrowType::Decimal128(d.precision(), d.scale() as i8)
        }
        DataType::Decimal(d) => ArrowType::Decimal256(d.precision().min(76), d.scale() as i8),
        DataType::String | DataType::Varchar(_) | DataType::Char(_) | DataType::Json => {
            ArrowType::Utf8
        }
        DataType::Binary => ArrowType::Binary,
        DataType::Date => ArrowType::Date32,
        DataType::DateTime => ArrowType::Timestamp(TimeUnit::Millisecond, utc()),
        DataType::Timestamp => ArrowType::Timestamp(TimeUnit::Nanosecond, utc()),
        DataType::TimestampNtz => ArrowType::Timestamp(TimeUnit::Nanosecond, None),
        DataType::Array(e) => {
            ArrowType::List(ArrowField::new_list_field(maxcompute_to_arrow(e)?, true).into())
        }
        DataType::Map(k, v) => {
            let entries = ArrowField::new(
                "entries",
                ArrowType::Struct(Fields::from(vec![
                    ArrowField::new("key", maxcompute_to_arrow(k)?, false),
                    ArrowField::new("value", maxcompute_to_arrow(v)?, true),
                ])),
                false,
            );
            ArrowType::Map(entries.into(), false)
        }
        DataType::Struct(fields) => ArrowType::Struct(
            fields
                .iter()
                .map(|f| {
                    Ok(ArrowField::new(
                        &f.name,
                        maxcompute_to_arrow(&f.data_type)?,
                        true,
                    ))
                })
                .collect::<Result<Vec<_>>>()?
                .into(),
        ),
        DataType::IntervalDayTime | DataType::IntervalYearMonth => {
            return Err(unsupported(format!(
                "maxcompute type {ty} has no arrow mapping here"
            )));
        }
    })
}

/// The MaxCompute data columns for an Iceberg table schema, leaving out `exclude` (the partition
/// columns, which MaxCompute keeps apart). Required fields become non-nullable columns.
pub fn maxcompute_columns(
    schema: &floe_decode::TableSchema,
    exclude: &[&str],
) -> Result<TableSchema> {
    let columns = schema
        .fields
        .iter()
        .filter(|f| !exclude.iter().any(|e| e.eq_ignore_ascii_case(&f.name)))
        .map(|f| {
            let data_type = iceberg_to_maxcompute(&f.ty)
                .map_err(|e| e.while_doing(format!("column `{}`", f.name)))?;
            Ok(Column {
                name: f.name.clone(),
                data_type,
                nullable: !f.required,
            })
        })
        .collect::<Result<Vec<_>>>()?;
    TableSchema::new(columns)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iceberg_round_trips_through_maxcompute() {
        for text in [
            "boolean",
            "int",
            "long",
            "float",
            "double",
            "decimal(10,2)",
            "date",
            "string",
            "binary",
            "timestamp_ns",
            "timestamptz_ns",
            "list<long>",
            "map<string,double>",
            "struct<a:int,b:list<string>>",
        ] {
            let ty = IcebergType::parse(text).unwrap();
            let mc = iceberg_to_maxcompute(&ty).unwrap();
            let back = maxcompute_to_iceberg(&mc).unwrap();
            assert_eq!(back.to_string(), ty.to_string(), "{text} via {mc}");
        }
        for (iceberg, mc) in [
            ("timestamptz", "timestamp"),
            ("timestamp", "timestamp_ntz"),
            ("uuid", "string"),
            ("time", "string"),
            ("fixed[16]", "binary"),
        ] {
            let ty = IcebergType::parse(iceberg).unwrap();
            assert_eq!(
                iceberg_to_maxcompute(&ty).unwrap().to_string(),
                mc,
                "{iceberg}"
            );
        }
        assert!(maxcompute_to_iceberg(&DataType::IntervalDayTime).is_err());
    }

    #[test]
    fn arrow_round_trips_through_maxcompute() {
        for mc in [
            "boolean",
            "tinyint",
            "smallint",
            "int",
            "bigint",
            "float",
            "double",
            "decimal(38,10)",
            "string",
            "binary",
            "date",
            "datetime",
            "timestamp",
            "timestamp_ntz",
            "array<int>",
            "map<string,bigint>",
            "struct<a:int,b:string>",
        ] {
            let ty: DataType = mc.parse().unwrap();
            let arrow = maxcompute_to_arrow(&ty).unwrap();
            assert_eq!(arrow_to_maxcompute(&arrow).unwrap(), ty, "{mc} via {arrow}");
        }
        assert_eq!(
            arrow_to_maxcompute(&ArrowType::Utf8View).unwrap(),
            DataType::String
        );
        assert!(arrow_to_maxcompute(&ArrowType::Float16).is_ok());
        assert!(arrow_to_maxcompute(&ArrowType::Duration(TimeUnit::Second)).is_err());
    }
}
