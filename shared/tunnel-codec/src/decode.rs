//! The record stream decoder: reads a block back to values and verifies every checksum.
//!
//! It checks each record's CRC32C, the trailer's record count and its CRC of CRCs, and returns a
//! [`floe_core::ErrorKind::Protocol`] error naming what was wrong, the record index and the byte
//! offset. Checksum varints are taken in both widths (5-byte unsigned and 10-byte sign-extended).
//! A downloaded block may carry server metrics between the count and the checksum; they are
//! verified and returned.
//!
//! The input is untrusted: every length and count is checked against the bytes left before
//! anything is allocated (each collection element takes at least one byte), so memory stays
//! proportional to the input: at most one value per schema column per record (a record takes at
//! least 5 bytes) and one per element.
//!
//! Text columns (`string`, `varchar`, `char`, `json`, `decimal`) must hold UTF-8; bytes that are not
//! are reported as a protocol error rather than passed on.

use floe_core::{Error, ErrorKind, Result};

use crate::crc::Crc32c;
use crate::decimal::Decimal;
use crate::schema::TableSchema;
use crate::types::{DataType, WireType};
use crate::value::{Timestamp, Value};
use crate::wire::{END_METRICS, END_RECORD, META_CHECKSUM, META_COUNT, unzigzag32, unzigzag64};

/// A whole decoded block.
#[derive(Clone, Debug, PartialEq)]
pub struct DecodedBlock {
    /// The records, one value per column.
    pub records: Vec<Vec<Value>>,
    /// The block checksum (CRC32C of the record checksums), verified.
    pub checksum: u32,
    /// Server metrics found in the trailer, verified.
    pub metrics: Option<Vec<u8>>,
}

/// Decode a whole block of records of `schema`.
pub fn decode_block(schema: &TableSchema, block: &[u8]) -> Result<DecodedBlock> {
    let mut decoder = BlockDecoder::new(schema, block);
    let mut records = Vec::new();
    while let Some(record) = decoder.next_record()? {
        records.push(record);
    }
    Ok(DecodedBlock {
        records,
        checksum: decoder.crc_of_crcs.value(),
        metrics: decoder.metrics.map(<[u8]>::to_vec),
    })
}

/// Reads records one at a time; [`BlockDecoder::next_record`] gives `None` after the trailer.
#[derive(Debug)]
pub struct BlockDecoder<'a> {
    schema: &'a TableSchema,
    input: &'a [u8],
    pos: usize,
    records: u64,
    crc_of_crcs: Crc32c,
    done: bool,
    metrics: Option<&'a [u8]>,
}

impl<'a> BlockDecoder<'a> {
    /// A decoder of `block`, whose records follow `schema`.
    pub fn new(schema: &'a TableSchema, block: &'a [u8]) -> Self {
        BlockDecoder {
            schema,
            input: block,
            pos: 0,
            records: 0,
            crc_of_crcs: Crc32c::new(),
            done: false,
            metrics: None,
        }
    }

    /// Records read so far.
    pub fn record_count(&self) -> u64 {
        self.records
    }

    /// Server metrics, once the trailer was read.
    pub fn metrics(&self) -> Option<&'a [u8]> {
        self.metrics
    }

    fn error(&self, at: usize, problem: impl std::fmt::Display) -> Error {
        Error::new(
            ErrorKind::Protocol,
            format!(
                "tunnel record block: {problem} (record {}, byte {at})",
                self.records
            ),
        )
        .with_context("record", self.records.to_string())
        .with_context("offset", at.to_string())
    }

    /// The next record, or `None` once the trailer was read and verified.
    pub fn next_record(&mut self) -> Result<Option<Vec<Value>>> {
        if self.done {
            return Ok(None);
        }
        let columns = self.schema.columns();
        let mut values: Vec<Value> = vec![Value::Null; columns.len()];
        let mut crc = Crc32c::new();
        let mut any_field = false;
        loop {
            if self.pos >= self.input.len() {
                return Err(self.error(self.pos, "block ends without its trailer"));
            }
            let tag_at = self.pos;
            let tag = self.varint()?;
            let field = tag >> 3;
            let wire_type = (tag & 7) as u8;
            if field == u64::from(END_RECORD) {
                self.expect_varint_wire_type(tag_at, wire_type, "end-of-record")?;
                let at = self.pos;
                let stored = self.checksum()?;
                if stored != crc.value() {
                    return Err(self.error(
                        at,
                        format!(
                            "record checksum mismatch: stored {stored:#010x}, computed {:#010x}",
                            crc.value()
                        ),
                    ));
                }
                self.crc_of_crcs.update_u32(stored);
                self.records += 1;
                return Ok(Some(values));
            }
            if field == u64::from(META_COUNT) {
                if any_field {
                    return Err(self.error(tag_at, "trailer inside an unfinished record"));
                }
                self.expect_varint_wire_type(tag_at, wire_type, "record count")?;
                self.trailer()?;
                return Ok(None);
            }
            let index = match usize::try_from(field) {
                Ok(f) if f >= 1 && f <= columns.len() => f - 1,
                _ => {
                    return Err(self.error(
                        tag_at,
                        format!(
                            "field number {field} is not a column (schema has {})",
                            columns.len()
                        ),
                    ));
                }
            };
            let column = &columns[index];
            let expected = column.data_type.wire_type();
            if wire_type != expected as u8 {
                return Err(self.error(
                    tag_at,
                    format!(
                        "column `{}` ({}) has wire type {wire_type}, expected {}",
                        column.name, column.data_type, expected as u8
                    ),
                ));
            }
            if !values[index].is_null() {
                return Err(self.error(tag_at, format!("column `{}` appears twice", column.name)));
            }
            crc.update_i32(index as i32 + 1);
            values[index] = self
                .value(&mut crc, &column.data_type)
                .map_err(|e| annotate(e, &column.name))?;
            any_field = true;
        }
    }

    fn expect_varint_wire_type(&self, at: usize, wire_type: u8, what: &str) -> Result<()> {
        if wire_type == WireType::Varint as u8 {
            Ok(())
        } else {
            Err(self.error(
                at,
                format!("{what} tag has wire type {wire_type}, expected 0"),
            ))
        }
    }

    /// The trailer after the last record: count, optional metrics, CRC of CRCs, end of input.
    fn trailer(&mut self) -> Result<()> {
        let at = self.pos;
        let count = unzigzag64(self.varint()?);
        if u64::try_from(count).ok() != Some(self.records) {
            return Err(self.error(
                at,
                format!("trailer counts {count} records, block has {}", self.records),
            ));
        }
        let mut tag_at = self.pos;
        let mut tag = self.varint()?;
        if tag >> 3 != u64::from(META_CHECKSUM) && tag & 7 == WireType::LengthDelimited as u64 {
            let field =
                u32::try_from(tag >> 3).map_err(|_| self.error(tag_at, "bad metrics tag"))?;
            let metrics = self.length_delimited()?;
            let mut crc = Crc32c::new();
            crc.update_u32(field);
            crc.update(metrics);
            let end_at = self.pos;
            if self.varint()? != (u64::from(END_METRICS) << 3) {
                return Err(self.error(end_at, "metrics not followed by their end tag"));
            }
            let sum_at = self.pos;
            let stored = self.checksum()?;
            if stored != crc.value() {
                return Err(self.error(
                    sum_at,
                    format!(
                        "metrics checksum mismatch: stored {stored:#010x}, computed {:#010x}",
                        crc.value()
                    ),
                ));
            }
            self.metrics = Some(metrics);
            tag_at = self.pos;
            tag = self.varint()?;
        }
        if tag != u64::from(META_CHECKSUM) << 3 {
            return Err(self.error(
                tag_at,
                format!("expected the block checksum tag, got tag {tag}"),
            ));
        }
        let sum_at = self.pos;
        let stored = self.checksum()?;
        if stored != self.crc_of_crcs.value() {
            return Err(self.error(
                sum_at,
                format!(
                    "block checksum mismatch: stored {stored:#010x}, computed {:#010x}",
                    self.crc_of_crcs.value()
                ),
            ));
        }
        if self.pos != self.input.len() {
            return Err(self.error(
                self.pos,
                format!("{} bytes after the trailer", self.input.len() - self.pos),
            ));
        }
        self.done = true;
        Ok(())
    }

    fn varint(&mut self) -> Result<u64> {
        let at = self.pos;
        let mut v: u64 = 0;
        for i in 0..10 {
            let Some(&b) = self.input.get(self.pos) else {
                return Err(self.error(at, "varint cut off by the end of the block"));
            };
            self.pos += 1;
            if i == 9 && b > 1 {
                return Err(self.error(at, "varint longer than 64 bits"));
            }
            v |= u64::from(b & 0x7f) << (7 * i);
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(self.error(at, "varint longer than 10 bytes"))
    }

    /// A uint32 checksum, written unsigned or sign-extended from int32.
    fn checksum(&mut self) -> Result<u32> {
        let at = self.pos;
        let v = self.varint()?;
        if v <= u64::from(u32::MAX) {
            return Ok(v as u32);
        }
        if v >> 31 == (1 << 33) - 1 {
            return Ok(v as u32);
        }
        Err(self.error(at, format!("checksum varint {v:#x} does not hold a uint32")))
    }

    fn u32_varint(&mut self, what: &str) -> Result<u32> {
        let at = self.pos;
        let v = self.varint()?;
        u32::try_from(v).map_err(|_| self.error(at, format!("{what} {v} exceeds uint32")))
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        let left = self.input.len() - self.pos;
        if n > left {
            return Err(self.error(
                self.pos,
                format!("value of {n} bytes but only {left} bytes left"),
            ));
        }
        let b = &self.input[self.pos..self.pos + n];
        self.pos += n;
        Ok(b)
    }

    fn length_delimited(&mut self) -> Result<&'a [u8]> {
        let n = self.u32_varint("length")?;
        self.take(n as usize)
    }

    fn long(&mut self, crc: &mut Crc32c) -> Result<i64> {
        let v = unzigzag64(self.varint()?);
        crc.update_i64(v);
        Ok(v)
    }

    /// A zigzag varint that must fit a narrower integer type.
    fn narrow<T: TryFrom<i64>>(&mut self, crc: &mut Crc32c, dt: &DataType) -> Result<T> {
        let at = self.pos;
        let v = self.long(crc)?;
        T::try_from(v).map_err(|_| self.error(at, format!("value {v} out of range for {dt}")))
    }

    fn text(&mut self, crc: &mut Crc32c, dt: &DataType) -> Result<String> {
        let at = self.pos;
        let b = self.length_delimited()?;
        crc.update(b);
        match std::str::from_utf8(b) {
            Ok(s) => Ok(s.to_string()),
            Err(_) => Err(self.error(at, format!("{dt} value is not utf-8"))),
        }
    }

    fn seconds_nanos(&mut self, crc: &mut Crc32c) -> Result<Timestamp> {
        let seconds = unzigzag64(self.varint()?);
        let at = self.pos;
        let nanos = unzigzag32(self.u32_varint("nanos")?);
        crc.update_i64(seconds);
        crc.update_i32(nanos);
        u32::try_from(nanos)
            .ok()
            .and_then(|n| Timestamp::new(seconds, n).ok())
            .ok_or_else(|| self.error(at, format!("nanos {nanos} outside 0..1e9")))
    }

    /// Element count of an array or map side, bounded by the bytes left (each element needs one).
    fn count(&mut self) -> Result<usize> {
        let at = self.pos;
        let n = self.u32_varint("element count")? as usize;
        let left = self.input.len() - self.pos;
        if n > left {
            return Err(self.error(at, format!("{n} elements but only {left} bytes left")));
        }
        Ok(n)
    }

    fn is_null_flag(&mut self) -> Result<bool> {
        let at = self.pos;
        match self.varint()? {
            0 => Ok(false),
            1 => Ok(true),
            v => Err(self.error(at, format!("null flag {v} is not 0 or 1"))),
        }
    }

    fn elements(&mut self, crc: &mut Crc32c, element: &DataType) -> Result<Vec<Value>> {
        let n = self.count()?;
        let mut items = Vec::with_capacity(n);
        for _ in 0..n {
            if self.is_null_flag()? {
                items.push(Value::Null);
            } else {
                items.push(self.value(crc, element)?);
            }
        }
        Ok(items)
    }

    /// A non-null value of type `dt` (after its tag, or inside a collection).
    fn value(&mut self, crc: &mut Crc32c, dt: &DataType) -> Result<Value> {
        let at = self.pos;
        Ok(match dt {
            DataType::BigInt => Value::BigInt(self.long(crc)?),
            DataType::Int => Value::Int(self.narrow(crc, dt)?),
            DataType::SmallInt => Value::SmallInt(self.narrow(crc, dt)?),
            DataType::TinyInt => Value::TinyInt(self.narrow(crc, dt)?),
            DataType::Date => Value::Date(self.narrow(crc, dt)?),
            DataType::DateTime => Value::DateTime(self.long(crc)?),
            DataType::IntervalYearMonth => Value::IntervalYearMonth(self.long(crc)?),
            DataType::Boolean => {
                let b = match self.varint()? {
                    0 => false,
                    1 => true,
                    v => return Err(self.error(at, format!("boolean value {v} is not 0 or 1"))),
                };
                crc.update(&[u8::from(b)]);
                Value::Boolean(b)
            }
            DataType::Double => {
                let b = self.take(8)?;
                crc.update(b);
                let mut a = [0u8; 8];
                a.copy_from_slice(b);
                Value::Double(f64::from_le_bytes(a))
            }
            DataType::Float => {
                let b = self.take(4)?;
                crc.update(b);
                let mut a = [0u8; 4];
                a.copy_from_slice(b);
                Value::Float(f32::from_le_bytes(a))
            }
            DataType::String | DataType::Varchar(_) | DataType::Char(_) => {
                Value::String(self.text(crc, dt)?)
            }
            DataType::Json => Value::Json(self.text(crc, dt)?),
            DataType::Binary => {
                let b = self.length_delimited()?;
                crc.update(b);
                Value::Binary(b.to_vec())
            }
            DataType::Decimal(_) => {
                let text = self.text(crc, dt)?;
                Value::Decimal(Decimal::parse(&text).map_err(|_| {
                    self.error(at, format!("invalid decimal `{}`", text.escape_debug()))
                })?)
            }
            DataType::Timestamp | DataType::TimestampNtz => {
                Value::Timestamp(self.seconds_nanos(crc)?)
            }
            DataType::IntervalDayTime => Value::IntervalDayTime(self.seconds_nanos(crc)?),
            DataType::Array(element) => Value::Array(self.elements(crc, element)?),
            DataType::Map(kt, vt) => {
                let keys = self.elements(crc, kt)?;
                let count_at = self.pos;
                let values = self.elements(crc, vt)?;
                if keys.len() != values.len() {
                    return Err(self.error(
                        count_at,
                        format!("map has {} keys but {} values", keys.len(), values.len()),
                    ));
                }
                Value::Map(keys.into_iter().zip(values).collect())
            }
            DataType::Struct(fields) => {
                let mut values = Vec::with_capacity(fields.len());
                for field in fields {
                    if self.is_null_flag()? {
                        values.push(Value::Null);
                    } else {
                        values.push(
                            self.value(crc, &field.data_type)
                                .map_err(|e| annotate(e, &field.name))?,
                        );
                    }
                }
                Value::Struct(values)
            }
        })
    }
}

/// Name the column (or struct field) in a value error: `… in `name` (record …)`.
fn annotate(e: Error, name: &str) -> Error {
    let message = e
        .message()
        .replacen(" (record", &format!(" in `{name}` (record"), 1);
    let mut out = Error::new(e.kind(), message);
    for (k, v) in e.context() {
        out = out.with_context(k, v.clone());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::encode::BlockEncoder;
    use crate::wire::{ChecksumVarint, Tag, put_varint, zigzag64};

    fn schema() -> TableSchema {
        TableSchema::from_type_strings([("id", "bigint"), ("name", "string")]).unwrap()
    }

    /// Two records: (1, "a") and (null, null); the block checksum is >= 2^31.
    fn block(style: ChecksumVarint) -> Vec<u8> {
        let mut enc = BlockEncoder::new(&schema()).with_checksum_varint(style);
        enc.write_record(&[Value::BigInt(1), Value::String("a".into())])
            .unwrap();
        enc.write_record(&[Value::Null, Value::Null]).unwrap();
        enc.into_block()
    }

    #[test]
    fn both_checksum_widths_decode_to_the_same_records() {
        let short = block(ChecksumVarint::Unsigned);
        let long = block(ChecksumVarint::SignExtended);
        assert_eq!(long.len(), short.len() + 5, "the block checksum is >= 2^31");
        let a = decode_block(&schema(), &short).unwrap();
        let b = decode_block(&schema(), &long).unwrap();
        assert_eq!(a, b);
        assert_eq!(
            a.records,
            [
                vec![Value::BigInt(1), Value::String("a".into())],
                vec![Value::Null, Value::Null]
            ]
        );
    }

    #[test]
    fn each_defect_is_named_with_record_and_offset() {
        let good = block(ChecksumVarint::Unsigned);
        // Layout: 08 02 | 12 01 61 | 80 c0 ff 7f ea 91 d2 b2 05 | 80 c0 ff 7f 00 |
        //         @19 f0 ff ff 7f 04 | f8 ff ff 7f + 5-byte crc of crcs (0x90c0b141).
        let edit = |f: &dyn Fn(&mut Vec<u8>)| {
            let mut b = good.clone();
            f(&mut b);
            b
        };
        let cases: Vec<(Vec<u8>, &str)> = vec![
            (
                edit(&|b| b[1] = 0x04),
                "tunnel record block: record checksum mismatch: stored 0x565488ea, computed 0x0722c045 (record 0, byte 9)",
            ),
            (
                edit(&|b| b[4] = b'b'),
                "tunnel record block: record checksum mismatch",
            ),
            (
                edit(&|b| b[23] = 0x06),
                "tunnel record block: trailer counts 3 records, block has 2 (record 2, byte 23)",
            ),
            (
                edit(&|b| {
                    let n = b.len();
                    b[n - 1] ^= 1;
                }),
                "tunnel record block: block checksum mismatch",
            ),
            (
                edit(&|b| b.push(0)),
                "tunnel record block: 1 bytes after the trailer",
            ),
            (
                edit(&|b| b.truncate(19)),
                "tunnel record block: block ends without its trailer (record 2, byte 19)",
            ),
            (
                edit(&|b| b[0] = 0x18),
                "tunnel record block: field number 3 is not a column (schema has 2) (record 0, byte 0)",
            ),
            (
                edit(&|b| b[0] = 0x0a),
                "tunnel record block: column `id` (bigint) has wire type 2, expected 0 (record 0, byte 0)",
            ),
            (
                edit(&|b| b[3] = 0x7f),
                "tunnel record block: value of 127 bytes but only 29 bytes left in `name` (record 0, byte 4)",
            ),
            (
                edit(&|b| b[4] = 0xff),
                "tunnel record block: string value is not utf-8 in `name` (record 0, byte 3)",
            ),
            (
                edit(&|b| {
                    b.splice(0..0, [0x08, 0x02]);
                }),
                "tunnel record block: column `id` appears twice (record 0, byte 2)",
            ),
            (
                edit(&|b| {
                    b.splice(19..19, [0x08, 0x02]);
                }),
                "tunnel record block: trailer inside an unfinished record (record 2, byte 21)",
            ),
        ];
        for (input, message) in cases {
            let e = decode_block(&schema(), &input).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::Protocol);
            assert!(
                e.to_string().starts_with(message),
                "want {message}\n got {e}"
            );
            assert!(e.context().iter().any(|(k, _)| *k == "offset"), "{e:?}");
        }
    }

    #[test]
    fn a_checksum_varint_that_is_neither_width_is_refused() {
        // An all-null record whose checksum 0 is written as a 6-byte varint of 2^35.
        let mut b = Tag::new(END_RECORD, WireType::Varint).as_bytes().to_vec();
        put_varint(&mut b, 1 << 35);
        let e = decode_block(&schema(), &b).unwrap_err();
        assert!(e.to_string().contains("does not hold a uint32"), "{e}");
    }

    #[test]
    fn server_metrics_between_count_and_checksum_are_verified() {
        let mut b = Tag::new(END_RECORD, WireType::Varint).as_bytes().to_vec();
        b.push(0);
        let mut crc_of_crcs = Crc32c::new();
        crc_of_crcs.update_u32(0);
        b.extend_from_slice(Tag::new(META_COUNT, WireType::Varint).as_bytes());
        put_varint(&mut b, zigzag64(1));
        let metrics = br#"{"rows":1}"#;
        b.extend_from_slice(Tag::new(7, WireType::LengthDelimited).as_bytes());
        put_varint(&mut b, metrics.len() as u64);
        b.extend_from_slice(metrics);
        let mut m = Crc32c::new();
        m.update_u32(7);
        m.update(metrics);
        b.extend_from_slice(Tag::new(END_METRICS, WireType::Varint).as_bytes());
        put_varint(&mut b, u64::from(m.value()));
        b.extend_from_slice(Tag::new(META_CHECKSUM, WireType::Varint).as_bytes());
        put_varint(&mut b, u64::from(crc_of_crcs.value()));

        let d = decode_block(&schema(), &b).unwrap();
        assert_eq!(d.records, [vec![Value::Null, Value::Null]]);
        assert_eq!(d.metrics.as_deref(), Some(&metrics[..]));

        let at = b.len() - 6 - 4 - 1;
        b[at] ^= 1; // inside the metrics text
        let e = decode_block(&schema(), &b).unwrap_err();
        assert!(e.to_string().contains("metrics checksum mismatch"), "{e}");
    }
}
