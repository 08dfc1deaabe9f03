//! Upload blocks in the tunnel's Arrow format (`tunnel_format = "arrow"`): the block body is
//! Arrow IPC record batch messages (no schema message, no end marker: the server knows the
//! schema from the session), framed with CRC32C checksums by
//! [`floe_tunnel_codec::arrow_frame`], and sent with an empty `arrow` query parameter.
//!
//! Columns travel in the table's order with the types pyodps and the Java SDK use:
//!
//! | MaxCompute | Arrow |
//! |---|---|
//! | `tinyint` … `bigint` | `int8` … `int64` |
//! | `float`, `double` | `float32`, `float64` |
//! | `boolean` | `bool` |
//! | `string`, `varchar(n)`, `char(n)` | `utf8` (32-bit offsets) |
//! | `binary` | `binary` |
//! | `date` | `date32` (days) |
//! | `datetime` | `timestamp[ms]` (UTC instant) |
//! | `timestamp`, `timestamp_ntz` | `timestamp[ns]` |
//! | `decimal(p,s)`, p ≤ 38 | `decimal128(p,s)` |
//!
//! Other column types (intervals, `json`, complex types, `decimal` above 38 digits or without
//! a precision, which pyodps and the Java SDK send differently) are refused when the encoder is
//! made; such tables keep the record format.
//!
//! Rows convert exactly as for the record format ([`crate::rows`]), and a row that does not fit
//! (a null in a NOT NULL column, text longer than `varchar(n)`, a decimal with too many
//! integer digits, a timestamp outside the nanosecond range) is left out of the block and
//! reported, as [`floe_tunnel_codec::BlockEncoder`] reports it. Columns whose Arrow type
//! already is the wire type (or only needs a wider offset type narrowed) are moved as whole
//! arrays, without converting each value.

use std::sync::Arc;

use arrow_array::builder::{
    BinaryBuilder, BooleanBuilder, Date32Builder, Decimal128Builder, Float32Builder,
    Float64Builder, Int8Builder, Int16Builder, Int32Builder, Int64Builder, StringBuilder,
    TimestampMillisecondBuilder, TimestampNanosecondBuilder,
};
use arrow_array::{Array, ArrayRef, BooleanArray, RecordBatch, RecordBatchOptions};
use arrow_ipc::writer::{CompressionContext, DictionaryTracker, IpcDataGenerator, IpcWriteOptions};
use arrow_schema::{DataType as ArrowType, Field, Schema, SchemaRef};
use floe_core::{Error, ErrorKind, Result};
use floe_tunnel_codec::arrow_frame::{ArrowBlockWriter, DEFAULT_CHUNK_SIZE};
use floe_tunnel_codec::{DataType, TableSchema, Value};

use crate::rows::{PreparedBatch, RowError};

/// The Arrow type a column travels as ([`crate::types::maxcompute_to_arrow`], the tunnel's
/// mapping, without time zones: the body carries no schema), or why it cannot.
pub fn wire_type(t: &DataType) -> Result<ArrowType> {
    let refused = match t {
        DataType::Decimal(d) => d.precision() > 38,
        DataType::Json
        | DataType::IntervalDayTime
        | DataType::IntervalYearMonth
        | DataType::Array(_)
        | DataType::Map(..)
        | DataType::Struct(_) => true,
        _ => false,
    };
    if refused {
        return Err(Error::new(
            ErrorKind::Unsupported,
            format!("type {t} has no Arrow tunnel mapping in floe; use tunnel_format = \"record\""),
        ));
    }
    Ok(match crate::types::maxcompute_to_arrow(t)? {
        ArrowType::Timestamp(unit, _) => ArrowType::Timestamp(unit, None),
        other => other,
    })
}

/// The Arrow schema of a table's blocks (its non-partition columns, in order).
pub fn wire_schema(schema: &TableSchema) -> Result<SchemaRef> {
    let fields = schema
        .columns()
        .iter()
        .map(|c| {
            wire_type(&c.data_type)
                .map(|t| Field::new(&c.name, t, true))
                .map_err(|e| e.while_doing(format!("column `{}`", c.name)))
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(Arc::new(Schema::new(fields)))
}

/// Whether a source array of type `a` already carries column type `t` value for value, so it
/// can be moved whole (cast only between offset widths).
fn moves_whole(a: &ArrowType, t: &DataType) -> bool {
    matches!(
        (a, t),
        (ArrowType::Int8, DataType::TinyInt)
            | (ArrowType::Int16, DataType::SmallInt)
            | (ArrowType::Int32, DataType::Int)
            | (ArrowType::Int64, DataType::BigInt)
            | (ArrowType::Float32, DataType::Float)
            | (ArrowType::Float64, DataType::Double)
            | (ArrowType::Boolean, DataType::Boolean)
            | (
                ArrowType::Utf8 | ArrowType::LargeUtf8 | ArrowType::Utf8View,
                DataType::String
            )
            | (
                ArrowType::Binary | ArrowType::LargeBinary | ArrowType::BinaryView,
                DataType::Binary
            )
            | (ArrowType::Date32, DataType::Date)
    )
}

/// Frames the record batches of one block; see the module doc.
#[derive(Debug)]
pub struct ArrowBlockEncoder {
    schema: SchemaRef,
    types: Vec<DataType>,
    frame: ArrowBlockWriter,
    options: IpcWriteOptions,
    records: u64,
}

/// A builder for one column's values, by wire type.
enum Builder {
    I8(Int8Builder),
    I16(Int16Builder),
    I32(Int32Builder),
    I64(Int64Builder),
    F32(Float32Builder),
    F64(Float64Builder),
    Bool(BooleanBuilder),
    Text(StringBuilder, Option<(u32, &'static str)>),
    Bytes(BinaryBuilder),
    Date(Date32Builder),
    Millis(TimestampMillisecondBuilder),
    Nanos(TimestampNanosecondBuilder),
    Decimal(Decimal128Builder, u8, u8),
}

fn text_fits(s: &str, max: Option<(u32, &'static str)>) -> std::result::Result<(), String> {
    match max {
        Some((n, name)) if s.len() > n as usize && s.chars().count() > n as usize => Err(format!(
            "text of {} characters exceeds {name}({n})",
            s.chars().count()
        )),
        _ => Ok(()),
    }
}

/// The unscaled value of decimal text at `scale`, within `precision` digits.
fn unscaled(text: &str, precision: u8, scale: u8) -> std::result::Result<i128, String> {
    let (negative, digits) = match text.strip_prefix('-') {
        Some(d) => (true, d),
        None => (false, text),
    };
    let (int, frac) = digits.split_once('.').unwrap_or((digits, ""));
    let frac = frac.trim_end_matches('0');
    if frac.len() > usize::from(scale) {
        return Err(format!(
            "decimal {text} has more than {scale} fraction digits"
        ));
    }
    let int = int.trim_start_matches('0');
    if int.len() > usize::from(precision - scale) {
        return Err(format!(
            "decimal {text} does not fit decimal({precision},{scale}) ({} integer digits at most)",
            precision - scale
        ));
    }
    let mut all = String::with_capacity(usize::from(precision));
    all.push_str(int);
    all.push_str(frac);
    all.extend(std::iter::repeat_n('0', usize::from(scale) - frac.len()));
    let v: i128 = if all.is_empty() {
        0
    } else {
        all.parse()
            .map_err(|_| format!("decimal {text} is not a number"))?
    };
    Ok(if negative { -v } else { v })
}

impl Builder {
    fn new(t: &DataType, rows: usize) -> Builder {
        match t {
            DataType::TinyInt => Builder::I8(Int8Builder::with_capacity(rows)),
            DataType::SmallInt => Builder::I16(Int16Builder::with_capacity(rows)),
            DataType::Int => Builder::I32(Int32Builder::with_capacity(rows)),
            DataType::BigInt => Builder::I64(Int64Builder::with_capacity(rows)),
            DataType::Float => Builder::F32(Float32Builder::with_capacity(rows)),
            DataType::Double => Builder::F64(Float64Builder::with_capacity(rows)),
            DataType::Boolean => Builder::Bool(BooleanBuilder::with_capacity(rows)),
            DataType::Varchar(n) => Builder::Text(StringBuilder::new(), Some((*n, "varchar"))),
            DataType::Char(n) => Builder::Text(StringBuilder::new(), Some((*n, "char"))),
            DataType::Binary => Builder::Bytes(BinaryBuilder::new()),
            DataType::Date => Builder::Date(Date32Builder::with_capacity(rows)),
            DataType::DateTime => Builder::Millis(TimestampMillisecondBuilder::with_capacity(rows)),
            DataType::Timestamp | DataType::TimestampNtz => {
                Builder::Nanos(TimestampNanosecondBuilder::with_capacity(rows))
            }
            DataType::Decimal(d) => Builder::Decimal(
                Decimal128Builder::with_capacity(rows),
                d.precision(),
                d.scale(),
            ),
            // `wire_type` refused every other type before any builder is made.
            _ => Builder::Text(StringBuilder::new(), None),
        }
    }

    fn null(&mut self) {
        match self {
            Builder::I8(b) => b.append_null(),
            Builder::I16(b) => b.append_null(),
            Builder::I32(b) => b.append_null(),
            Builder::I64(b) => b.append_null(),
            Builder::F32(b) => b.append_null(),
            Builder::F64(b) => b.append_null(),
            Builder::Bool(b) => b.append_null(),
            Builder::Text(b, _) => b.append_null(),
            Builder::Bytes(b) => b.append_null(),
            Builder::Date(b) => b.append_null(),
            Builder::Millis(b) => b.append_null(),
            Builder::Nanos(b) => b.append_null(),
            Builder::Decimal(b, ..) => b.append_null(),
        }
    }

    /// Append a non-null value, or say why it does not fit.
    fn push(&mut self, v: Value) -> std::result::Result<(), String> {
        match (self, v) {
            (Builder::I8(b), Value::TinyInt(x)) => b.append_value(x),
            (Builder::I16(b), Value::SmallInt(x)) => b.append_value(x),
            (Builder::I32(b), Value::Int(x)) => b.append_value(x),
            (Builder::I64(b), Value::BigInt(x)) => b.append_value(x),
            (Builder::F32(b), Value::Float(x)) => b.append_value(x),
            (Builder::F64(b), Value::Double(x)) => b.append_value(x),
            (Builder::Bool(b), Value::Boolean(x)) => b.append_value(x),
            (Builder::Text(b, max), Value::String(s)) => {
                text_fits(&s, *max)?;
                b.append_value(s);
            }
            (Builder::Bytes(b), Value::Binary(x)) => b.append_value(x),
            (Builder::Date(b), Value::Date(x)) => b.append_value(x),
            (Builder::Millis(b), Value::DateTime(x)) => b.append_value(x),
            (Builder::Nanos(b), Value::Timestamp(t)) => {
                let ns = t
                    .seconds()
                    .checked_mul(1_000_000_000)
                    .and_then(|s| s.checked_add(i64::from(t.nanos())))
                    .ok_or_else(|| {
                        format!(
                            "timestamp at {} s is outside the range the arrow tunnel format carries (1677-09-21 to 2262-04-11)",
                            t.seconds()
                        )
                    })?;
                b.append_value(ns);
            }
            (Builder::Decimal(b, p, s), Value::Decimal(d)) => {
                b.append_value(unscaled(d.as_str(), *p, *s)?);
            }
            (_, v) => {
                return Err(format!(
                    "a {} value does not fit this column",
                    v.kind_name()
                ));
            }
        }
        Ok(())
    }

    fn finish(self) -> ArrayRef {
        match self {
            Builder::I8(mut b) => Arc::new(b.finish()),
            Builder::I16(mut b) => Arc::new(b.finish()),
            Builder::I32(mut b) => Arc::new(b.finish()),
            Builder::I64(mut b) => Arc::new(b.finish()),
            Builder::F32(mut b) => Arc::new(b.finish()),
            Builder::F64(mut b) => Arc::new(b.finish()),
            Builder::Bool(mut b) => Arc::new(b.finish()),
            Builder::Text(mut b, _) => Arc::new(b.finish()),
            Builder::Bytes(mut b) => Arc::new(b.finish()),
            Builder::Date(mut b) => Arc::new(b.finish()),
            Builder::Millis(mut b) => Arc::new(b.finish()),
            Builder::Nanos(mut b) => Arc::new(b.finish()),
            Builder::Decimal(mut b, p, s) => Arc::new(
                b.finish()
                    .with_precision_and_scale(p, s as i8)
                    .expect("precision and scale checked by wire_type"),
            ),
        }
    }
}

fn arrow_error(e: arrow_schema::ArrowError, what: &str) -> Error {
    Error::unexpected(format!("arrow tunnel block: {what}: {e}"))
}

impl ArrowBlockEncoder {
    /// An encoder for blocks of `schema`'s table, in chunks of 65,536 bytes (as the SDKs).
    pub fn new(schema: &TableSchema) -> Result<Self> {
        Self::with_chunk_size(schema, DEFAULT_CHUNK_SIZE)
    }

    /// The same with another chunk size.
    pub fn with_chunk_size(schema: &TableSchema, chunk_size: u32) -> Result<Self> {
        Ok(ArrowBlockEncoder {
            schema: wire_schema(schema)?,
            types: schema
                .columns()
                .iter()
                .map(|c| c.data_type.clone())
                .collect(),
            frame: ArrowBlockWriter::new(chunk_size)?,
            // 8-byte alignment, as pyarrow writes.
            options: IpcWriteOptions::try_new(8, false, arrow_ipc::MetadataVersion::V5)
                .map_err(|e| arrow_error(e, "write options"))?,
            records: 0,
        })
    }

    /// Rows written so far.
    pub fn record_count(&self) -> u64 {
        self.records
    }

    /// Whether nothing was written.
    pub fn is_empty(&self) -> bool {
        self.records == 0
    }

    /// Convert the rows of `batch` and write those that fit as one record batch message. Rows
    /// for which `refused` gives a reason are left out first (before any conversion); the
    /// others as the record format would leave them out. Returns one error per row left out.
    pub fn write(
        &mut self,
        batch: &PreparedBatch<'_>,
        refused: &mut dyn FnMut(usize) -> Option<String>,
    ) -> Result<Vec<RowError>> {
        let rows = batch.num_rows();
        let mut errors: Vec<Option<RowError>> = (0..rows)
            .map(|i| refused(i).map(|m| RowError::new(i, None, m)))
            .collect();
        let mut columns = Vec::with_capacity(batch.column_count());
        for j in 0..batch.column_count() {
            let (name, data_type, nullable, source) = batch.column(j);
            let target = self.schema.field(j).data_type();
            let whole = source.filter(|a| moves_whole(a.data_type(), data_type));
            let column = match whole {
                Some(array) => {
                    if !nullable && array.null_count() > 0 {
                        for (i, e) in errors.iter_mut().enumerate() {
                            if e.is_none() && array.is_null(i) {
                                *e = Some(RowError::new(
                                    i,
                                    Some(name.to_owned()),
                                    "null in a not null column",
                                ));
                            }
                        }
                    }
                    if array.data_type() == target {
                        Arc::clone(array)
                    } else {
                        arrow_cast::cast(array, target)
                            .map_err(|e| arrow_error(e, &format!("column `{name}`")))?
                    }
                }
                None => {
                    let mut b = Builder::new(&self.types[j], rows);
                    for (i, e) in errors.iter_mut().enumerate() {
                        if e.is_some() {
                            b.null();
                            continue;
                        }
                        let fitted = batch.value(j, i).and_then(|v| match v {
                            Value::Null if !nullable => Err("null in a not null column".to_owned()),
                            Value::Null => {
                                b.null();
                                Ok(())
                            }
                            v => b.push(v),
                        });
                        if let Err(m) = fitted {
                            b.null();
                            *e = Some(RowError::new(i, Some(name.to_owned()), m));
                        }
                    }
                    b.finish()
                }
            };
            columns.push(column);
        }
        let keep: BooleanArray = errors.iter().map(|e| Some(e.is_none())).collect();
        let kept = keep.true_count();
        if kept < rows {
            for c in &mut columns {
                *c = arrow_select::filter::filter(c.as_ref(), &keep)
                    .map_err(|e| arrow_error(e, "dropping rows"))?;
            }
        }
        let out = RecordBatch::try_new_with_options(
            Arc::clone(&self.schema),
            columns,
            &RecordBatchOptions::new().with_row_count(Some(kept)),
        )
        .map_err(|e| arrow_error(e, "assembling the batch"))?;
        if kept > 0 {
            self.write_batch(&out)?;
        }
        Ok(errors.into_iter().flatten().collect())
    }

    /// Write a batch already in the wire schema ([`wire_schema`]) as one message.
    pub fn write_batch(&mut self, batch: &RecordBatch) -> Result<()> {
        let (_, encoded) = IpcDataGenerator::default()
            .encode(
                batch,
                &mut DictionaryTracker::new(false),
                &self.options,
                &mut CompressionContext::default(),
            )
            .map_err(|e| arrow_error(e, "encoding"))?;
        let mut message =
            Vec::with_capacity(encoded.ipc_message.len() + encoded.arrow_data.len() + 16);
        arrow_ipc::writer::write_message(&mut message, encoded, &self.options)
            .map_err(|e| arrow_error(e, "encoding"))?;
        self.frame.write(&message);
        self.records += batch.num_rows() as u64;
        Ok(())
    }

    /// The framed block body.
    pub fn finish(self) -> Vec<u8> {
        self.frame.finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimals_scale_to_the_column() {
        assert_eq!(unscaled("12.345", 18, 3), Ok(12_345));
        assert_eq!(unscaled("-0.001", 18, 3), Ok(-1));
        assert_eq!(unscaled("7", 5, 2), Ok(700));
        assert_eq!(unscaled("0.000", 18, 3), Ok(0));
        assert!(unscaled("1.2345", 18, 3).is_err());
        assert!(
            unscaled("1234", 5, 2)
                .unwrap_err()
                .contains("integer digits")
        );
    }

    #[test]
    fn types_without_a_mapping_are_refused_by_name() {
        let s =
            TableSchema::from_type_strings([("a", "bigint"), ("m", "map<string,bigint>")]).unwrap();
        let e = ArrowBlockEncoder::new(&s).unwrap_err().to_string();
        assert!(e.contains("`m`") && e.contains("tunnel_format"), "{e}");
        let legacy = TableSchema::from_type_strings([("d", "decimal")]).unwrap();
        assert!(ArrowBlockEncoder::new(&legacy).is_err());
    }
}
