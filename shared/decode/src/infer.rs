//! Schema inference: a table schema from a sample of the data when a route declares none.
//!
//! JSON and CSV samples go through arrow's inference; top-level string columns whose every sampled
//! value is an ISO-8601 timestamp become `timestamptz`. Inferred fields are optional.

use std::io::Cursor;

use arrow_schema::{DataType, Schema, TimeUnit};
use floe_core::{Error, ErrorKind, Result};
use serde_json::Value;

use crate::decode::{Format, split_json_records};
use crate::types::{Field, IcebergType, TableSchema};

/// Infer a table schema from the first bytes of an object (already decompressed).
/// `complete` says the sample is the whole object (so its last line is whole).
pub fn infer_schema(
    format: &Format,
    sample: &[u8],
    complete: bool,
    max_records: usize,
) -> Result<TableSchema> {
    match format {
        Format::Ndjson | Format::Json => {
            let records: Vec<Vec<u8>> = if *format == Format::Ndjson {
                let mut lines: Vec<&[u8]> = sample.split(|b| *b == b'\n').collect();
                if !complete {
                    lines.pop();
                }
                lines.into_iter().map(<[u8]>::to_vec).collect()
            } else {
                split_json_records(sample, complete)
            };
            let values: Vec<Value> = records
                .iter()
                .filter(|r| !r.trim_ascii().is_empty())
                .filter_map(|r| serde_json::from_slice::<Value>(r).ok())
                .filter(Value::is_object)
                .take(max_records)
                .collect();
            if values.is_empty() {
                return Err(Error::invalid_input(
                    "cannot infer a schema: the sample holds no json object",
                ));
            }
            let arrow = arrow_json::reader::infer_json_schema_from_iterator(values.iter().map(Ok))
                .map_err(|e| Error::invalid_input("cannot infer a json schema").with_source(e))?;
            let mut schema = arrow_to_iceberg(&arrow)?;
            for field in &mut schema.fields {
                if field.ty == IcebergType::String {
                    let mut seen = 0;
                    let all_times = values.iter().all(|v| match v.get(&field.name) {
                        None | Some(Value::Null) => true,
                        Some(Value::String(s)) => {
                            seen += 1;
                            looks_like_timestamp(s)
                        }
                        Some(_) => false,
                    });
                    if all_times && seen > 0 {
                        field.ty = IcebergType::Timestamptz;
                    }
                }
            }
            Ok(schema)
        }
        Format::Csv(opts) => {
            let mut sample = sample;
            if !complete && let Some(nl) = memchr::memrchr(b'\n', sample) {
                sample = &sample[..=nl];
            }
            let fmt = arrow_csv::reader::Format::default()
                .with_header(opts.header)
                .with_delimiter(opts.delimiter)
                .with_quote(opts.quote);
            let fmt = match opts.escape {
                Some(e) => fmt.with_escape(e),
                None => fmt,
            };
            let (arrow, _) = fmt
                .infer_schema(Cursor::new(sample), Some(max_records))
                .map_err(|e| Error::invalid_input("cannot infer a csv schema").with_source(e))?;
            arrow_to_iceberg(&arrow)
        }
        Format::Parquet => Err(Error::unexpected(
            "parquet schemas come from the file footer, not a sample",
        )),
    }
}

fn looks_like_timestamp(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() >= 19
        && b[4] == b'-'
        && b[7] == b'-'
        && (b[10] == b'T' || b[10] == b' ')
        && b[13] == b':'
        && arrow_cast::parse::string_to_datetime(&chrono::Utc, s).is_ok()
}

/// Map an Arrow schema to an Iceberg table schema (all fields optional unless non-nullable).
pub fn arrow_to_iceberg(schema: &Schema) -> Result<TableSchema> {
    let fields = schema
        .fields()
        .iter()
        .map(|f| arrow_field(f))
        .collect::<Result<Vec<_>>>()?;
    Ok(TableSchema::new(fields))
}

fn arrow_field(f: &arrow_schema::Field) -> Result<Field> {
    Ok(Field {
        id: None,
        name: f.name().clone(),
        ty: arrow_type(f.data_type(), f.name())?,
        required: !f.is_nullable(),
        doc: None,
    })
}

fn arrow_type(t: &DataType, name: &str) -> Result<IcebergType> {
    Ok(match t {
        DataType::Null | DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => {
            IcebergType::String
        }
        DataType::Boolean => IcebergType::Boolean,
        DataType::Int8 | DataType::Int16 | DataType::Int32 | DataType::UInt8 | DataType::UInt16 => {
            IcebergType::Int
        }
        DataType::Int64 | DataType::UInt32 | DataType::UInt64 => IcebergType::Long,
        DataType::Float16 | DataType::Float32 => IcebergType::Float,
        DataType::Float64 => IcebergType::Double,
        DataType::Decimal32(p, s) | DataType::Decimal64(p, s) | DataType::Decimal128(p, s)
            if *s >= 0 =>
        {
            IcebergType::Decimal {
                precision: u32::from(*p).min(38),
                scale: *s as u32,
            }
        }
        DataType::Date32 | DataType::Date64 => IcebergType::Date,
        DataType::Time32(_) | DataType::Time64(_) => IcebergType::Time,
        DataType::Timestamp(TimeUnit::Nanosecond, Some(_)) => IcebergType::TimestamptzNs,
        DataType::Timestamp(TimeUnit::Nanosecond, None) => IcebergType::TimestampNs,
        DataType::Timestamp(_, Some(_)) => IcebergType::Timestamptz,
        DataType::Timestamp(_, None) => IcebergType::Timestamp,
        DataType::Binary | DataType::LargeBinary | DataType::BinaryView => IcebergType::Binary,
        DataType::FixedSizeBinary(n) => IcebergType::Fixed(*n as u64),
        DataType::List(e) | DataType::LargeList(e) | DataType::FixedSizeList(e, _) => {
            let mut el = arrow_field(e)?;
            el.name = "element".into();
            IcebergType::List(Box::new(el))
        }
        DataType::Struct(fields) => IcebergType::Struct(
            fields
                .iter()
                .map(|f| arrow_field(f))
                .collect::<Result<Vec<_>>>()?,
        ),
        DataType::Map(entries, _) => {
            let DataType::Struct(kv) = entries.data_type() else {
                return Err(unsupported(name, t));
            };
            if kv.len() != 2 {
                return Err(unsupported(name, t));
            }
            let mut key = arrow_field(&kv[0])?;
            key.name = "key".into();
            key.required = true;
            let mut value = arrow_field(&kv[1])?;
            value.name = "value".into();
            IcebergType::Map {
                key: Box::new(key),
                value: Box::new(value),
            }
        }
        DataType::Dictionary(_, v) => arrow_type(v, name)?,
        _ => return Err(unsupported(name, t)),
    })
}

fn unsupported(name: &str, t: &DataType) -> Error {
    Error::new(
        ErrorKind::Unsupported,
        format!("column `{name}` has type {t}, which iceberg cannot store"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn infers_json_with_timestamps_and_nesting() {
        let sample = br#"{"id": 1, "ts": "2025-01-15T08:30:45Z", "name": "a", "tags": ["x"], "geo": {"lat": 1.5}}
{"id": 2, "ts": "2025-01-15 08:31:00", "name": null, "price": 2.5}
{"id": 3, "ts": null, "name": "2025-01-15T08:30:45Z-ish"}
{"id": 4, "trunc"#;
        let s = infer_schema(&Format::Ndjson, sample, false, 100).unwrap();
        let got: Vec<_> = s
            .fields
            .iter()
            .map(|f| format!("{}:{}", f.name, f.ty))
            .collect();
        assert_eq!(
            got,
            [
                "id:long",
                "ts:timestamptz",
                "name:string",
                "tags:list<string>",
                "geo:struct<lat:double>",
                "price:double"
            ]
        );
    }

    #[test]
    fn infers_json_arrays_and_csv() {
        let s = infer_schema(
            &Format::Json,
            br#"[{"a": true}, {"a": false, "b": 1}]"#,
            true,
            10,
        )
        .unwrap();
        assert_eq!(s.fields.len(), 2);
        assert_eq!(s.fields[0].ty, IcebergType::Boolean);
        let csv = b"id,amount,day,label\n1,2.5,2025-01-15,x\n2,3,2025-01-16,y\n";
        let s = infer_schema(&Format::parse("csv").unwrap(), csv, true, 10).unwrap();
        let got: Vec<_> = s
            .fields
            .iter()
            .map(|f| format!("{}:{}", f.name, f.ty))
            .collect();
        assert_eq!(
            got,
            ["id:long", "amount:double", "day:date", "label:string"]
        );
    }

    #[test]
    fn empty_sample_is_an_error() {
        let e = infer_schema(&Format::Ndjson, b"\n\n", true, 10).unwrap_err();
        assert!(e.to_string().contains("no json object"), "{e}");
    }
}
