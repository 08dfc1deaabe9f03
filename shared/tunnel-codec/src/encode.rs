//! The record stream encoder: records appended one at a time into a reusable buffer, then a trailer.
//!
//! ```text
//!   BlockEncoder::new(&schema)
//!        │  write_record(&values)   … as often as wanted; len() tells the block's size so far
//!        ▼
//!   finish() ──► &[u8]: the records, then META_COUNT + count, META_CHECKSUM + CRC of CRCs
//!        │
//!   reset() ──► empty again, buffer capacity kept for the next block
//! ```
//!
//! Per record, each non-null column is a tag `(index + 1) << 3 | wire type` and its value; then
//! `END_RECORD` and the record's CRC32C. What each type writes, and what it feeds the CRC:
//!
//! | type | wire bytes | CRC input |
//! |---|---|---|
//! | tinyint … bigint, date (days), datetime (ms), interval_year_month | zigzag varint | int64 LE |
//! | boolean | varint 0/1 | one byte 0/1 |
//! | float / double | 4 / 8 bytes LE | the same bytes |
//! | string, varchar, char, binary, json, decimal (plain text) | varint length, bytes | the bytes |
//! | timestamp, timestamp_ntz, interval_day_time | zigzag varint seconds (floored), zigzag varint nanos (no length) | int64 LE, int32 LE |
//! | array | varint count; per element varint 1 (null) or 0 and the element | the elements |
//! | map | the keys as an array, then the values as an array | the elements |
//! | struct | per field varint 1 (null) or 0 and the value | the values |
//!
//! A record that fails to encode (a type mismatch, a null in a non-null column) leaves the block as
//! it was before that record.

use floe_core::{Error, Result};

use crate::crc::Crc32c;
use crate::schema::TableSchema;
use crate::types::{DataType, WireType};
use crate::value::{Timestamp, Value};
use crate::wire::{
    ChecksumVarint, END_RECORD, META_CHECKSUM, META_COUNT, Tag, put_varint, zigzag32, zigzag64,
};

/// What the encoder needs of a column, computed once.
#[derive(Clone, Debug)]
struct ColumnPlan {
    name: String,
    data_type: DataType,
    nullable: bool,
    field: i32,
    tag: Tag,
}

/// Encodes records of one schema into tunnel record blocks; see the module doc.
#[derive(Clone, Debug)]
pub struct BlockEncoder {
    columns: Vec<ColumnPlan>,
    out: Vec<u8>,
    records: u64,
    crc_of_crcs: Crc32c,
    checksum_varint: ChecksumVarint,
    finished: bool,
    end_record: Tag,
}

impl BlockEncoder {
    /// An encoder for records of `schema`.
    pub fn new(schema: &TableSchema) -> Self {
        BlockEncoder::with_buffer(schema, Vec::new())
    }

    /// An encoder that writes into `buffer` (cleared first), to reuse its capacity.
    pub fn with_buffer(schema: &TableSchema, mut buffer: Vec<u8>) -> Self {
        buffer.clear();
        let columns = schema
            .columns()
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let field = i as u32 + 1;
                ColumnPlan {
                    name: c.name.clone(),
                    data_type: c.data_type.clone(),
                    nullable: c.nullable,
                    field: field as i32,
                    tag: Tag::new(field, c.data_type.wire_type()),
                }
            })
            .collect();
        BlockEncoder {
            columns,
            out: buffer,
            records: 0,
            crc_of_crcs: Crc32c::new(),
            checksum_varint: ChecksumVarint::default(),
            finished: false,
            end_record: Tag::new(END_RECORD, WireType::Varint),
        }
    }

    /// Write checksums in `style` (default [`ChecksumVarint::Unsigned`]).
    pub fn with_checksum_varint(mut self, style: ChecksumVarint) -> Self {
        self.checksum_varint = style;
        self
    }

    /// Append one record: one value per schema column, [`Value::Null`] for a null.
    pub fn write_record(&mut self, values: &[Value]) -> Result<()> {
        if self.finished {
            return Err(Error::unexpected(
                "tunnel block encoder: write after finish without reset",
            ));
        }
        if values.len() != self.columns.len() {
            return Err(Error::invalid_input(format!(
                "record {} has {} values for {} columns",
                self.records,
                values.len(),
                self.columns.len()
            )));
        }
        let start = self.out.len();
        let mut crc = Crc32c::new();
        for (col, value) in self.columns.iter().zip(values) {
            if value.is_null() {
                if !col.nullable {
                    self.out.truncate(start);
                    return Err(Error::invalid_input(format!(
                        "record {}: null in non-null column `{}`",
                        self.records, col.name
                    )));
                }
                continue;
            }
            crc.update_i32(col.field);
            self.out.extend_from_slice(col.tag.as_bytes());
            if let Err(e) = put_value(&mut self.out, &mut crc, &col.data_type, value) {
                self.out.truncate(start);
                return Err(e.while_doing(format!("record {} column `{}`", self.records, col.name)));
            }
        }
        let checksum = crc.value();
        self.out.extend_from_slice(self.end_record.as_bytes());
        put_varint(&mut self.out, self.checksum_varint.varint_value(checksum));
        self.crc_of_crcs.update_u32(checksum);
        self.records += 1;
        Ok(())
    }

    /// Bytes written so far, without the trailer ([`crate::TRAILER_MAX_BYTES`] at most).
    pub fn len(&self) -> usize {
        self.out.len()
    }

    /// Whether no bytes were written yet.
    pub fn is_empty(&self) -> bool {
        self.out.is_empty()
    }

    /// Records written so far.
    pub fn record_count(&self) -> u64 {
        self.records
    }

    /// Append the trailer (once) and return the whole block.
    pub fn finish(&mut self) -> &[u8] {
        if !self.finished {
            self.out
                .extend_from_slice(Tag::new(META_COUNT, WireType::Varint).as_bytes());
            put_varint(&mut self.out, zigzag64(self.records as i64));
            self.out
                .extend_from_slice(Tag::new(META_CHECKSUM, WireType::Varint).as_bytes());
            let crc = self.crc_of_crcs.value();
            put_varint(&mut self.out, self.checksum_varint.varint_value(crc));
            self.finished = true;
        }
        &self.out
    }

    /// Start a new block, keeping the buffer's capacity.
    pub fn reset(&mut self) {
        self.out.clear();
        self.records = 0;
        self.crc_of_crcs.reset();
        self.finished = false;
    }

    /// Finish the block and hand over its buffer.
    pub fn into_block(mut self) -> Vec<u8> {
        self.finish();
        self.out
    }
}

#[inline]
fn put_long(out: &mut Vec<u8>, crc: &mut Crc32c, v: i64) {
    crc.update_i64(v);
    put_varint(out, zigzag64(v));
}

#[inline]
fn put_bytes(out: &mut Vec<u8>, crc: &mut Crc32c, b: &[u8]) -> Result<()> {
    let len = u32::try_from(b.len())
        .map_err(|_| Error::invalid_input(format!("value of {} bytes is too long", b.len())))?;
    crc.update(b);
    put_varint(out, u64::from(len));
    out.extend_from_slice(b);
    Ok(())
}

#[inline]
fn put_seconds_nanos(out: &mut Vec<u8>, crc: &mut Crc32c, t: &Timestamp) {
    let nanos = t.nanos() as i32;
    crc.update_i64(t.seconds());
    crc.update_i32(nanos);
    put_varint(out, zigzag64(t.seconds()));
    put_varint(out, u64::from(zigzag32(nanos)));
}

fn put_count(out: &mut Vec<u8>, n: usize) -> Result<()> {
    let n = u32::try_from(n)
        .map_err(|_| Error::invalid_input(format!("collection of {n} elements is too long")))?;
    put_varint(out, u64::from(n));
    Ok(())
}

/// Elements of an array (or of one side of a map): null flag, then the value.
fn put_elements<'v>(
    out: &mut Vec<u8>,
    crc: &mut Crc32c,
    element: &DataType,
    n: usize,
    items: impl Iterator<Item = &'v Value>,
) -> Result<()> {
    put_count(out, n)?;
    for item in items {
        if item.is_null() {
            out.push(1);
        } else {
            out.push(0);
            put_value(out, crc, element, item)?;
        }
    }
    Ok(())
}

fn check_text_length(s: &str, max_chars: u32, type_name: &str) -> Result<()> {
    // Bytes bound characters from above: count characters only when the bytes exceed the limit.
    if s.len() > max_chars as usize && s.chars().count() > max_chars as usize {
        return Err(Error::invalid_input(format!(
            "text of {} characters exceeds {type_name}({max_chars})",
            s.chars().count()
        )));
    }
    Ok(())
}

/// Write a non-null value of type `dt` (without tag) and feed its CRC input.
fn put_value(out: &mut Vec<u8>, crc: &mut Crc32c, dt: &DataType, v: &Value) -> Result<()> {
    match (dt, v) {
        (DataType::BigInt, Value::BigInt(x)) => put_long(out, crc, *x),
        (DataType::Int, Value::Int(x)) => put_long(out, crc, i64::from(*x)),
        (DataType::SmallInt, Value::SmallInt(x)) => put_long(out, crc, i64::from(*x)),
        (DataType::TinyInt, Value::TinyInt(x)) => put_long(out, crc, i64::from(*x)),
        (DataType::Boolean, Value::Boolean(b)) => {
            crc.update(&[u8::from(*b)]);
            out.push(u8::from(*b));
        }
        (DataType::Double, Value::Double(x)) => {
            let b = x.to_le_bytes();
            crc.update(&b);
            out.extend_from_slice(&b);
        }
        (DataType::Float, Value::Float(x)) => {
            let b = x.to_le_bytes();
            crc.update(&b);
            out.extend_from_slice(&b);
        }
        (DataType::String, Value::String(s)) => put_bytes(out, crc, s.as_bytes())?,
        (DataType::Varchar(n), Value::String(s)) => {
            check_text_length(s, *n, "varchar")?;
            put_bytes(out, crc, s.as_bytes())?;
        }
        (DataType::Char(n), Value::String(s)) => {
            check_text_length(s, *n, "char")?;
            put_bytes(out, crc, s.as_bytes())?;
        }
        (DataType::Binary, Value::Binary(b)) => put_bytes(out, crc, b)?,
        (DataType::Json, Value::Json(s)) => put_bytes(out, crc, s.as_bytes())?,
        (DataType::Decimal(t), Value::Decimal(d)) => {
            let max = usize::from(t.precision() - t.scale());
            if d.integer_digits() > max {
                return Err(Error::invalid_input(format!(
                    "decimal {d} does not fit {dt} ({max} integer digits at most)"
                )));
            }
            put_bytes(out, crc, d.as_str().as_bytes())?;
        }
        (DataType::Date, Value::Date(d)) => put_long(out, crc, i64::from(*d)),
        (DataType::DateTime, Value::DateTime(ms)) => put_long(out, crc, *ms),
        (DataType::IntervalYearMonth, Value::IntervalYearMonth(m)) => put_long(out, crc, *m),
        (DataType::Timestamp | DataType::TimestampNtz, Value::Timestamp(t))
        | (DataType::IntervalDayTime, Value::IntervalDayTime(t)) => put_seconds_nanos(out, crc, t),
        (DataType::Array(element), Value::Array(items)) => {
            put_elements(out, crc, element, items.len(), items.iter())?;
        }
        (DataType::Map(kt, vt), Value::Map(entries)) => {
            put_elements(out, crc, kt, entries.len(), entries.iter().map(|(k, _)| k))?;
            put_elements(out, crc, vt, entries.len(), entries.iter().map(|(_, v)| v))?;
        }
        (DataType::Struct(fields), Value::Struct(values)) => {
            if fields.len() != values.len() {
                return Err(Error::invalid_input(format!(
                    "struct value has {} fields for {dt}",
                    values.len()
                )));
            }
            for (field, value) in fields.iter().zip(values) {
                if value.is_null() {
                    out.push(1);
                } else {
                    out.push(0);
                    put_value(out, crc, &field.data_type, value)
                        .map_err(|e| e.while_doing(format!("field `{}`", field.name)))?;
                }
            }
        }
        (_, v) => {
            return Err(Error::invalid_input(format!(
                "a {} value does not fit type {dt}",
                v.kind_name()
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::Column;

    fn schema(cols: &[(&str, &str)]) -> TableSchema {
        TableSchema::from_type_strings(cols.iter().copied()).unwrap()
    }

    #[test]
    fn empty_block_is_just_the_trailer() {
        let mut enc = BlockEncoder::new(&schema(&[("a", "bigint")]));
        assert_eq!(
            enc.finish(),
            [0xf0, 0xff, 0xff, 0x7f, 0x00, 0xf8, 0xff, 0xff, 0x7f, 0x00]
        );
    }

    #[test]
    fn all_null_record_is_end_record_and_zero() {
        let mut enc = BlockEncoder::new(&schema(&[("a", "bigint"), ("b", "string")]));
        enc.write_record(&[Value::Null, Value::Null]).unwrap();
        assert_eq!(enc.len(), 5);
        assert_eq!(&enc.finish()[..5], [0x80, 0xc0, 0xff, 0x7f, 0x00]);
    }

    #[test]
    fn bad_records_are_rejected_and_leave_the_block_unchanged() {
        let s = TableSchema::new(vec![
            Column::new("id", DataType::BigInt).not_null(),
            Column::new("tag", DataType::Varchar(2)),
            Column::new("d", DataType::decimal(4, 2).unwrap()),
            Column::new("s", "struct<a:int,b:string>".parse().unwrap()),
        ])
        .unwrap();
        let mut enc = BlockEncoder::new(&s);
        enc.write_record(&[Value::BigInt(1), Value::Null, Value::Null, Value::Null])
            .unwrap();
        let before = enc.len();
        let d = |s: &str| Value::Decimal(s.parse().unwrap());
        let cases: Vec<(Vec<Value>, &str)> = vec![
            (
                vec![Value::Null, Value::Null, Value::Null, Value::Null],
                "record 1: null in non-null column `id`",
            ),
            (
                vec![Value::Int(1), Value::Null, Value::Null, Value::Null],
                "record 1 column `id`: a int value does not fit type bigint",
            ),
            (
                vec![
                    Value::BigInt(1),
                    Value::String("abc".into()),
                    Value::Null,
                    Value::Null,
                ],
                "record 1 column `tag`: text of 3 characters exceeds varchar(2)",
            ),
            (
                vec![Value::BigInt(1), Value::Null, d("123.4"), Value::Null],
                "record 1 column `d`: decimal 123.4 does not fit decimal(4,2) (2 integer digits at most)",
            ),
            (
                vec![
                    Value::BigInt(1),
                    Value::Null,
                    Value::Null,
                    Value::Struct(vec![Value::Int(1), Value::Int(2)]),
                ],
                "record 1 column `s`: field `b`: a int value does not fit type string",
            ),
            (
                vec![Value::BigInt(1)],
                "record 1 has 1 values for 4 columns",
            ),
        ];
        for (values, message) in cases {
            let e = enc.write_record(&values).unwrap_err();
            assert_eq!(e.to_string(), message);
            assert_eq!(enc.len(), before, "{message}");
        }
        // Two-character text within varchar(2), multi-byte.
        enc.write_record(&[
            Value::BigInt(2),
            Value::String("中文".into()),
            d("-12.5"),
            Value::Null,
        ])
        .unwrap();
        assert_eq!(enc.record_count(), 2);
    }

    #[test]
    fn finish_is_idempotent_and_reset_reuses_the_buffer() {
        let s = schema(&[("a", "bigint")]);
        let mut enc = BlockEncoder::new(&s);
        enc.write_record(&[Value::BigInt(7)]).unwrap();
        let first = enc.finish().to_vec();
        assert_eq!(enc.finish(), first.as_slice());
        assert!(enc.write_record(&[Value::BigInt(8)]).is_err());
        enc.reset();
        enc.write_record(&[Value::BigInt(7)]).unwrap();
        assert_eq!(enc.finish(), first.as_slice());
        assert_eq!(enc.clone().into_block(), first);
    }
}
