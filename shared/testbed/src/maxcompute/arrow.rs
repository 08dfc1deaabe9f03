//! Decoding upload blocks in the tunnel's Arrow format, as the service reads them: undo the
//! CRC32C framing, then read the record batch messages against the schema the session's table
//! implies (the body carries no schema), in the layout pyodps writes
//! (`tests/vectors/tunnel_arrow_upload.json` holds bodies pyodps made):
//! `bigint` … `tinyint` as `int64` … `int8`, `double`/`float`, `boolean`, text as `utf8`,
//! `binary`, `date` as `date32`, `datetime` as `timestamp[ms]`, `timestamp` and
//! `timestamp_ntz` as `timestamp[ns]`, `decimal(p,s)` (p ≤ 38) as `decimal128(p,s)`.
//!
//! Every message must be a record batch whose columns match that layout; a schema message, a
//! dictionary, a column count or buffer that does not fit is refused. A 0-byte body (the Java
//! SDK with nothing written) and the 4-byte `00000000` (pyodps, Go) are empty blocks.

use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::{
    Date32Type, Decimal128Type, Float32Type, Float64Type, Int8Type, Int16Type, Int32Type,
    Int64Type, TimestampMillisecondType, TimestampNanosecondType,
};
use arrow_array::{Array, RecordBatch};
use arrow_schema::{DataType as ArrowType, Field, Schema, TimeUnit};
use floe_tunnel_codec::arrow_frame::unframe_arrow_block;
use floe_tunnel_codec::{DataType, TableSchema, Timestamp, Value, decimal::Decimal};

/// The layout a column of type `t` travels in.
fn layout(t: &DataType) -> Result<ArrowType, String> {
    Ok(match t {
        DataType::TinyInt => ArrowType::Int8,
        DataType::SmallInt => ArrowType::Int16,
        DataType::Int => ArrowType::Int32,
        DataType::BigInt => ArrowType::Int64,
        DataType::Float => ArrowType::Float32,
        DataType::Double => ArrowType::Float64,
        DataType::Boolean => ArrowType::Boolean,
        DataType::String | DataType::Varchar(_) | DataType::Char(_) => ArrowType::Utf8,
        DataType::Binary => ArrowType::Binary,
        DataType::Date => ArrowType::Date32,
        DataType::DateTime => ArrowType::Timestamp(TimeUnit::Millisecond, None),
        DataType::Timestamp | DataType::TimestampNtz => {
            ArrowType::Timestamp(TimeUnit::Nanosecond, None)
        }
        DataType::Decimal(d) if d.precision() <= 38 => {
            ArrowType::Decimal128(d.precision(), d.scale() as i8)
        }
        other => {
            return Err(format!(
                "the emulator reads no {other} column in arrow blocks"
            ));
        }
    })
}

/// The schema message readers put before a body's record batches.
fn schema_prefix(schema: &Schema) -> Result<Vec<u8>, String> {
    let mut w =
        arrow_ipc::writer::StreamWriter::try_new(Vec::new(), schema).map_err(|e| e.to_string())?;
    w.finish().map_err(|e| e.to_string())?;
    let mut bytes = w.into_inner().map_err(|e| e.to_string())?;
    // Drop the end-of-stream marker the writer added: ffffffff 00000000.
    bytes.truncate(bytes.len() - 8);
    Ok(bytes)
}

/// The rows of an Arrow-format block body (already inflated) for a table of `schema`.
pub(crate) fn decode_arrow_block(
    schema: &TableSchema,
    body: &[u8],
) -> Result<Vec<Vec<Value>>, String> {
    if body.is_empty() {
        return Ok(Vec::new());
    }
    let (payload, _) = unframe_arrow_block(body).map_err(|e| e.to_string())?;
    if payload.is_empty() {
        return Ok(Vec::new());
    }
    let fields = schema
        .columns()
        .iter()
        .map(|c| layout(&c.data_type).map(|t| Field::new(&c.name, t, true)))
        .collect::<Result<Vec<_>, _>>()?;
    let arrow = Arc::new(Schema::new(fields));
    // Each message must be a record batch: a schema or dictionary message in the payload is a
    // client error, not something to read past.
    let mut at = 0;
    while at < payload.len() {
        let head = payload.get(at..at + 8).ok_or("a message is cut short")?;
        if head[..4] != [0xff; 4] {
            return Err(format!("no message continuation marker at byte {at}"));
        }
        let meta_len = i32::from_le_bytes([head[4], head[5], head[6], head[7]]);
        let meta_len = usize::try_from(meta_len).map_err(|_| "negative metadata length")?;
        let meta = payload
            .get(at + 8..at + 8 + meta_len)
            .ok_or("message metadata is cut short")?;
        let message = arrow_ipc::root_as_message(meta).map_err(|e| format!("bad message: {e}"))?;
        if message.header_type() != arrow_ipc::MessageHeader::RecordBatch {
            return Err(format!(
                "a {:?} message where only record batches may be",
                message.header_type()
            ));
        }
        let body_len = usize::try_from(message.bodyLength()).map_err(|_| "bad body length")?;
        at += 8 + meta_len + body_len;
    }
    if at != payload.len() {
        return Err("the last message is cut short".into());
    }
    let mut stream = schema_prefix(&arrow)?;
    stream.extend_from_slice(&payload);
    let reader = arrow_ipc::reader::StreamReader::try_new(std::io::Cursor::new(stream), None)
        .map_err(|e| e.to_string())?;
    let mut rows = Vec::new();
    for batch in reader {
        let batch = batch.map_err(|e| format!("record batch refused: {e}"))?;
        rows.extend(batch_rows(schema, &batch)?);
    }
    Ok(rows)
}

fn batch_rows(schema: &TableSchema, batch: &RecordBatch) -> Result<Vec<Vec<Value>>, String> {
    let mut rows = vec![Vec::with_capacity(schema.columns().len()); batch.num_rows()];
    for (c, col) in schema.columns().iter().zip(batch.columns()) {
        for (i, row) in rows.iter_mut().enumerate() {
            let v = if col.is_null(i) {
                if !c.nullable {
                    return Err(format!("null in non-null column `{}`", c.name));
                }
                Value::Null
            } else {
                value(&c.data_type, col.as_ref(), i)?
            };
            row.push(v);
        }
    }
    Ok(rows)
}

fn value(t: &DataType, a: &dyn Array, i: usize) -> Result<Value, String> {
    Ok(match t {
        DataType::TinyInt => Value::TinyInt(a.as_primitive::<Int8Type>().value(i)),
        DataType::SmallInt => Value::SmallInt(a.as_primitive::<Int16Type>().value(i)),
        DataType::Int => Value::Int(a.as_primitive::<Int32Type>().value(i)),
        DataType::BigInt => Value::BigInt(a.as_primitive::<Int64Type>().value(i)),
        DataType::Float => Value::Float(a.as_primitive::<Float32Type>().value(i)),
        DataType::Double => Value::Double(a.as_primitive::<Float64Type>().value(i)),
        DataType::Boolean => Value::Boolean(a.as_boolean().value(i)),
        DataType::String | DataType::Varchar(_) | DataType::Char(_) => {
            Value::String(a.as_string::<i32>().value(i).to_owned())
        }
        DataType::Binary => Value::Binary(a.as_binary::<i32>().value(i).to_vec()),
        DataType::Date => Value::Date(a.as_primitive::<Date32Type>().value(i)),
        DataType::DateTime => {
            Value::DateTime(a.as_primitive::<TimestampMillisecondType>().value(i))
        }
        DataType::Timestamp | DataType::TimestampNtz => {
            let ns = a.as_primitive::<TimestampNanosecondType>().value(i);
            let t = Timestamp::new(
                ns.div_euclid(1_000_000_000),
                ns.rem_euclid(1_000_000_000) as u32,
            )
            .map_err(|e| e.to_string())?;
            Value::Timestamp(t)
        }
        DataType::Decimal(d) => Value::Decimal(Decimal::from_unscaled(
            a.as_primitive::<Decimal128Type>().value(i),
            u32::from(d.scale()),
        )),
        other => return Err(format!("no {other} columns in arrow blocks")),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bodies_pyodps_wrote_decode_to_its_input_rows() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../tests/vectors/tunnel_arrow_upload.json");
        let v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        let columns: Vec<(String, String)> = v["table"]["schema"]["columns"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| {
                (
                    c["name"].as_str().unwrap().to_owned(),
                    c["type"].as_str().unwrap().to_owned(),
                )
            })
            .collect();
        let schema =
            TableSchema::from_type_strings(columns.iter().map(|(n, t)| (n.as_str(), t.as_str())))
                .unwrap();
        let all: Vec<&serde_json::Value> = v["batches"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|b| b.as_array().unwrap())
            .collect();
        let mut checked = 0;
        for block in v["blocks"].as_array().unwrap() {
            let case = block["case"].as_str().unwrap();
            let body = hex::decode(block["body_hex"].as_str().unwrap()).unwrap();
            let encoding = block["request"]["headers"]["Content-Encoding"].as_str();
            let body = match floe_tunnel_codec::Compression::from_content_encoding(encoding) {
                Ok(Some(c)) => c.decompress(&body, 1 << 20).unwrap(),
                Ok(None) => body,
                // An encoding the codec does not speak (pyodps's `x-odps-lz4-frame`).
                Err(_) => continue,
            };
            let rows = decode_arrow_block(&schema, &body).unwrap_or_else(|e| panic!("{case}: {e}"));
            assert_eq!(rows.len() as u64, block["rows"].as_u64().unwrap(), "{case}");
            let expected = &all[..rows.len().min(all.len())];
            for (row, want) in rows.iter().zip(expected) {
                assert_eq!(show(&row[0]), want["id"].to_string(), "{case}");
                assert_eq!(
                    show(&row[1]),
                    want["name"]
                        .as_str()
                        .map_or("null".into(), |s| format!("{s:?}")),
                    "{case}"
                );
                assert_eq!(
                    show(&row[6]),
                    want["amount"].as_str().map_or("null".into(), str::to_owned),
                    "{case}"
                );
            }
            checked += 1;
        }
        assert!(checked >= 6, "{checked}");
        // A schema message in the payload is refused.
        let body = hex::decode(v["blocks"][0]["body_hex"].as_str().unwrap()).unwrap();
        let (payload, _) = unframe_arrow_block(&body).unwrap();
        let mut framed = floe_tunnel_codec::arrow_frame::ArrowBlockWriter::new(65536).unwrap();
        let fields: Vec<Field> = schema
            .columns()
            .iter()
            .map(|c| Field::new(&c.name, layout(&c.data_type).unwrap(), true))
            .collect();
        framed.write(&schema_prefix(&Schema::new(fields)).unwrap());
        framed.write(&payload);
        let e = decode_arrow_block(&schema, &framed.finish()).unwrap_err();
        assert!(e.contains("Schema"), "{e}");
    }

    fn show(v: &Value) -> String {
        match v {
            Value::Null => "null".into(),
            Value::BigInt(x) => x.to_string(),
            Value::String(s) => format!("{s:?}"),
            Value::Decimal(d) => d.as_str().to_owned(),
            other => format!("{other:?}"),
        }
    }
}
