//! JSON records read straight into Arrow builders of the target schema: the fast path of
//! [`super::JsonDecoder`].
//!
//! arrow-json decodes a batch into a tape, then each column from the tape, and the conformer
//! parses the temporal columns from the strings it produced. Most records are plain objects whose
//! values have the column's own JSON type; this reader takes those in one pass over the record,
//! no tape, no intermediate strings, and converts as the conformer does (the same functions, the
//! same messages). It only reads what it is sure arrow-json and the conformer read the same way;
//! for anything else (a leniency of arrow-json's, a coercion it does itself, malformed JSON, a
//! type it does not know) it answers [`Read::Unsure`] and the record goes the old way, so what
//! lands and what is set aside, and why, does not change. `typed_tests.rs` holds the two against
//! each other.

use std::collections::HashMap;
use std::sync::Arc;

use arrow_array::builder::{
    BooleanBuilder, Date32Builder, Float32Builder, Float64Builder, Int32Builder, Int64Builder,
    StringBuilder, TimestampMicrosecondBuilder, TimestampNanosecondBuilder,
};
use arrow_array::{ArrayRef, RecordBatch};
use arrow_schema::{ArrowError, DataType, SchemaRef, TimeUnit};

use super::convert::{cannot_read, parse_date, parse_timestamp_nanos, required_missing};
use super::{BadRecord, truncate_raw};
use crate::Names;

/// What became of one record.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Read {
    /// A row was added.
    Row,
    /// The record was set aside (a value the conformer would not convert, a required field
    /// missing); the reason is the conformer's.
    Bad,
    /// Not a record this reader is sure of: decode it with arrow-json.
    Unsure,
}

/// The column types read here (every other type: the decoder does not take the schema).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Bool,
    I32,
    I64,
    F32,
    F64,
    Str,
    TsMicros,
    TsNanos,
    Date,
}

impl Kind {
    fn of(t: &DataType) -> Option<Kind> {
        Some(match t {
            DataType::Boolean => Kind::Bool,
            DataType::Int32 => Kind::I32,
            DataType::Int64 => Kind::I64,
            DataType::Float32 => Kind::F32,
            DataType::Float64 => Kind::F64,
            DataType::Utf8 => Kind::Str,
            DataType::Timestamp(TimeUnit::Microsecond, _) => Kind::TsMicros,
            DataType::Timestamp(TimeUnit::Nanosecond, _) => Kind::TsNanos,
            DataType::Date32 => Kind::Date,
            _ => return None,
        })
    }

    /// Read from text by the conformer (arrow-json gives it the value as a string).
    fn parsed(self) -> bool {
        matches!(self, Kind::TsMicros | Kind::TsNanos | Kind::Date)
    }
}

/// One column's value in the record being read.
#[derive(Clone, Copy, Debug, Default)]
enum Slot {
    #[default]
    Absent,
    Null,
    Int(i64),
    Float(f64),
    Bool(bool),
    /// Text at `start..end` of the record.
    Raw(usize, usize),
    /// Unescaped text at `start..end` of the scratch buffer.
    Esc(usize, usize),
}

enum Builder {
    Bool(BooleanBuilder),
    I32(Int32Builder),
    I64(Int64Builder),
    F32(Float32Builder),
    F64(Float64Builder),
    Str(StringBuilder),
    TsMicros(TimestampMicrosecondBuilder),
    TsNanos(TimestampNanosecondBuilder),
    Date(Date32Builder),
}

impl Builder {
    fn new(kind: Kind, t: &DataType, rows: usize) -> Builder {
        match kind {
            Kind::Bool => Builder::Bool(BooleanBuilder::with_capacity(rows)),
            Kind::I32 => Builder::I32(Int32Builder::with_capacity(rows)),
            Kind::I64 => Builder::I64(Int64Builder::with_capacity(rows)),
            Kind::F32 => Builder::F32(Float32Builder::with_capacity(rows)),
            Kind::F64 => Builder::F64(Float64Builder::with_capacity(rows)),
            Kind::Str => Builder::Str(StringBuilder::with_capacity(rows, rows * 16)),
            Kind::TsMicros => Builder::TsMicros(
                TimestampMicrosecondBuilder::with_capacity(rows).with_data_type(t.clone()),
            ),
            Kind::TsNanos => Builder::TsNanos(
                TimestampNanosecondBuilder::with_capacity(rows).with_data_type(t.clone()),
            ),
            Kind::Date => Builder::Date(Date32Builder::with_capacity(rows)),
        }
    }

    fn finish(&mut self) -> ArrayRef {
        match self {
            Builder::Bool(b) => Arc::new(b.finish()),
            Builder::I32(b) => Arc::new(b.finish()),
            Builder::I64(b) => Arc::new(b.finish()),
            Builder::F32(b) => Arc::new(b.finish()),
            Builder::F64(b) => Arc::new(b.finish()),
            Builder::Str(b) => Arc::new(b.finish()),
            Builder::TsMicros(b) => Arc::new(b.finish()),
            Builder::TsNanos(b) => Arc::new(b.finish()),
            Builder::Date(b) => Arc::new(b.finish()),
        }
    }
}

struct Column {
    name: Box<[u8]>,
    /// The name and its closing quote as a little-endian word, and the mask of their bytes:
    /// for names of up to 7 bytes with no quote or backslash, matched in place by
    /// [`TypedReader::expected_key`].
    key: Option<(u64, u64)>,
    kind: Kind,
    nullable: bool,
    builder: Builder,
}

/// The fast path's reader; see the module doc.
pub(super) struct TypedReader {
    target: SchemaRef,
    columns: Vec<Column>,
    /// Column by name, for wide schemas (narrow ones are searched in order).
    index: Option<HashMap<Box<[u8]>, usize>>,
    /// How keys find columns: case-insensitively, a key that is a case variant of a column's
    /// name makes the record one this reader is unsure of (the decoder renames its keys).
    names: Names,
    slots: Vec<Slot>,
    scratch: String,
    rows: usize,
    /// Rows per batch.
    capacity: usize,
}

/// Rows the builders first have room for: a batch's worth for every object would be most of
/// a small object's cost (allocating and freeing them); a large object's first batch grows
/// them (by doubling), its later ones start at the size of the batch before.
const FIRST_ROWS: usize = 256;

/// A column name of up to 7 bytes with no quote or backslash, followed by the closing quote, as
/// a little-endian word and the mask of its bytes (see [`Column::key`]).
fn key_word(name: &[u8]) -> Option<(u64, u64)> {
    if name.len() > 7 || name.iter().any(|&c| c == b'"' || c == b'\\') {
        return None;
    }
    let mut bytes = [0u8; 8];
    bytes[..name.len()].copy_from_slice(name);
    bytes[name.len()] = b'"';
    let mask = u64::MAX >> (8 * (7 - name.len()));
    Some((u64::from_le_bytes(bytes), mask))
}

/// Widest schema searched column by column for a key.
const LINEAR_LOOKUP: usize = 16;

impl TypedReader {
    /// A reader of `target`'s batches of about `rows` rows; `None` when a column has a type this
    /// reader does not take (structs, lists, decimals, binary...).
    pub(super) fn new(target: SchemaRef, rows: usize, names: Names) -> Option<TypedReader> {
        let mut columns = Vec::with_capacity(target.fields().len());
        for f in target.fields() {
            let kind = Kind::of(f.data_type())?;
            columns.push(Column {
                name: f.name().as_bytes().into(),
                key: key_word(f.name().as_bytes()),
                kind,
                nullable: f.is_nullable(),
                builder: Builder::new(kind, f.data_type(), rows.min(FIRST_ROWS)),
            });
        }
        let index = (columns.len() > LINEAR_LOOKUP).then(|| {
            let mut map = HashMap::with_capacity(columns.len());
            for (i, c) in columns.iter().enumerate() {
                // The first of two equal names wins, as in arrow-json.
                map.entry(c.name.clone()).or_insert(i);
            }
            map
        });
        Some(TypedReader {
            slots: vec![Slot::Absent; columns.len()],
            target,
            columns,
            index,
            names,
            scratch: String::new(),
            rows: 0,
            capacity: rows,
        })
    }

    /// Rows read since the last [`TypedReader::finish`].
    pub(super) fn rows(&self) -> usize {
        self.rows
    }

    /// The rows read so far as a batch of the target schema (`None` when there are none).
    pub(super) fn finish(&mut self) -> Result<Option<RecordBatch>, ArrowError> {
        if self.rows == 0 {
            return Ok(None);
        }
        // A full batch is followed by another (most often); a short one ends the object.
        let capacity = self
            .rows
            .clamp(FIRST_ROWS.min(self.capacity), self.capacity);
        let columns = self
            .columns
            .iter_mut()
            .zip(self.target.fields())
            .map(|(c, f)| {
                let array = c.builder.finish();
                c.builder = Builder::new(c.kind, f.data_type(), capacity);
                array
            })
            .collect();
        self.rows = 0;
        RecordBatch::try_new(self.target.clone(), columns).map(Some)
    }

    /// Read one record (trimmed, not empty) that starts at `line`; a record set aside is added to
    /// `bad`.
    pub(super) fn read(&mut self, record: &[u8], line: u64, bad: &mut Vec<BadRecord>) -> Read {
        let Ok(text) = std::str::from_utf8(record) else {
            return Read::Unsure;
        };
        self.slots.fill(Slot::Absent);
        self.scratch.clear();
        if self.parse(text).is_none() {
            return Read::Unsure;
        }
        match self.convert(text) {
            Ok(()) => {
                self.append(text);
                self.rows += 1;
                Read::Row
            }
            Err(reason) => {
                bad.push(BadRecord {
                    line: Some(line),
                    raw: truncate_raw(record),
                    reason,
                });
                Read::Bad
            }
        }
    }

    /// Whether the key whose text starts at `start` is column `guess`'s name (records most
    /// often list their fields in the schema's order), compared in place as one word: the index
    /// of its closing quote. `None`: not known this way; scan the key and look it up.
    #[inline]
    fn expected_key(&self, b: &[u8], start: usize, guess: usize) -> Option<usize> {
        let column = self.columns.get(guess)?;
        let (pattern, mask) = column.key?;
        let w = u64::from_le_bytes(b.get(start..start + 8)?.try_into().ok()?);
        ((w ^ pattern) & mask == 0).then_some(start + column.name.len())
    }

    fn lookup(&self, key: &[u8], guess: usize) -> Option<usize> {
        if self.columns.get(guess).is_some_and(|c| *c.name == *key) {
            return Some(guess);
        }
        match &self.index {
            Some(map) => map.get(key).copied(),
            None => self.columns.iter().position(|c| *c.name == *key),
        }
    }

    /// Whether `key`, which names no column, names one when case is ignored (and names are
    /// matched so).
    fn is_case_variant(&self, key: &[u8]) -> bool {
        self.names == Names::CaseInsensitive
            && (self.columns.iter()).any(|c| c.name.eq_ignore_ascii_case(key))
    }

    /// Read the record's fields into the slots; `None`: unsure.
    fn parse(&mut self, text: &str) -> Option<()> {
        let b = text.as_bytes();
        if b.first() != Some(&b'{') {
            return None;
        }
        let mut i = ws(b, 1);
        let mut guess = 0;
        if b.get(i) == Some(&b'}') {
            i += 1;
        } else {
            loop {
                if b.get(i) != Some(&b'"') {
                    return None;
                }
                let (column, end) = match self.expected_key(b, i + 1, guess) {
                    Some(end) => (Some(guess), end),
                    None => {
                        let (end, escaped) = scan_string(b, i + 1)?;
                        if escaped {
                            return None;
                        }
                        let key = &b[i + 1..end];
                        match self.lookup(key, guess) {
                            Some(c) => (Some(c), end),
                            None if self.is_case_variant(key) => return None,
                            None => (None, end),
                        }
                    }
                };
                i = ws(b, end + 1);
                if b.get(i) != Some(&b':') {
                    return None;
                }
                i = ws(b, i + 1);
                i = match column {
                    Some(c) => {
                        guess = c + 1;
                        self.value(text, i, c)?
                    }
                    None => skip_value(b, i)?,
                };
                i = ws(b, i);
                match b.get(i) {
                    Some(b',') => i = ws(b, i + 1),
                    Some(b'}') => {
                        i += 1;
                        break;
                    }
                    _ => return None,
                }
            }
        }
        (ws(b, i) == b.len()).then_some(())
    }

    /// Read the value at `i` into column `c`'s slot; returns the end of the value.
    fn value(&mut self, text: &str, i: usize, c: usize) -> Option<usize> {
        let b = text.as_bytes();
        let kind = self.columns[c].kind;
        let textual = kind == Kind::Str || kind.parsed();
        let (slot, end) = match *b.get(i)? {
            b'"' => {
                if !textual {
                    return None;
                }
                let (end, escaped) = scan_string(b, i + 1)?;
                let slot = if escaped {
                    let start = self.scratch.len();
                    unescape(&text[i + 1..end], &mut self.scratch)?;
                    Slot::Esc(start, self.scratch.len())
                } else {
                    Slot::Raw(i + 1, end)
                };
                (slot, end + 1)
            }
            b'-' | b'0'..=b'9' => {
                let (end, integer) = scan_number(b, i)?;
                let literal = &text[i..end];
                let slot = match kind {
                    Kind::I64 if integer => Slot::Int(parse_i64(literal)?),
                    Kind::I32 if integer => {
                        Slot::Int(i32::try_from(parse_i64(literal)?).ok()?.into())
                    }
                    Kind::F64 => Slot::Float(finite(literal.parse::<f64>().ok()?)?),
                    Kind::F32 => Slot::Float(finite(f64::from(literal.parse::<f32>().ok()?))?),
                    _ if textual => Slot::Raw(i, end),
                    _ => return None,
                };
                (slot, end)
            }
            b't' if b[i..].starts_with(b"true") => {
                if !(kind == Kind::Bool || textual) {
                    return None;
                }
                (Slot::Bool(true), i + 4)
            }
            b'f' if b[i..].starts_with(b"false") => {
                if !(kind == Kind::Bool || textual) {
                    return None;
                }
                (Slot::Bool(false), i + 5)
            }
            b'n' if b[i..].starts_with(b"null") => (Slot::Null, i + 4),
            _ => return None,
        };
        // A later value of the same key replaces an earlier one, as in arrow-json.
        self.slots[c] = slot;
        Some(end)
    }

    /// Convert the slots of the columns parsed from text, and check required columns, in column
    /// order: the first failure is the record's reason, as in the conformer.
    fn convert(&mut self, text: &str) -> Result<(), String> {
        for (c, col) in self.columns.iter().enumerate() {
            let slot = &mut self.slots[c];
            if col.kind.parsed() {
                let value = match *slot {
                    Slot::Raw(s, e) => &text[s..e],
                    Slot::Esc(s, e) => &self.scratch[s..e],
                    Slot::Bool(true) => "true",
                    Slot::Bool(false) => "false",
                    _ => "",
                };
                if !value.is_empty() {
                    let parsed = match col.kind {
                        Kind::TsMicros => timestamp_nanos(value).map(|ns| ns.div_euclid(1000)),
                        Kind::TsNanos => timestamp_nanos(value),
                        _ => parse_date(value).map(i64::from),
                    };
                    *slot = match parsed {
                        Some(v) => Slot::Int(v),
                        None => {
                            let field = self.target.field(c);
                            return Err(cannot_read(field, value, ""));
                        }
                    };
                } else {
                    *slot = Slot::Null;
                }
            }
            if !col.nullable && matches!(slot, Slot::Absent | Slot::Null) {
                return Err(required_missing(self.target.field(c)));
            }
        }
        Ok(())
    }

    fn append(&mut self, text: &str) {
        for (col, slot) in self.columns.iter_mut().zip(&self.slots) {
            match (&mut col.builder, *slot) {
                (Builder::Bool(b), Slot::Bool(v)) => b.append_value(v),
                (Builder::Bool(b), _) => b.append_null(),
                (Builder::I32(b), Slot::Int(v)) => b.append_value(v as i32),
                (Builder::I32(b), _) => b.append_null(),
                (Builder::I64(b), Slot::Int(v)) => b.append_value(v),
                (Builder::I64(b), _) => b.append_null(),
                (Builder::F32(b), Slot::Float(v)) => b.append_value(v as f32),
                (Builder::F32(b), _) => b.append_null(),
                (Builder::F64(b), Slot::Float(v)) => b.append_value(v),
                (Builder::F64(b), _) => b.append_null(),
                (Builder::Str(b), Slot::Raw(s, e)) => b.append_value(&text[s..e]),
                (Builder::Str(b), Slot::Esc(s, e)) => b.append_value(&self.scratch[s..e]),
                (Builder::Str(b), Slot::Bool(v)) => {
                    b.append_value(if v { "true" } else { "false" })
                }
                (Builder::Str(b), _) => b.append_null(),
                (Builder::TsMicros(b), Slot::Int(v)) => b.append_value(v),
                (Builder::TsMicros(b), _) => b.append_null(),
                (Builder::TsNanos(b), Slot::Int(v)) => b.append_value(v),
                (Builder::TsNanos(b), _) => b.append_null(),
                (Builder::Date(b), Slot::Int(v)) => b.append_value(v as i32),
                (Builder::Date(b), _) => b.append_null(),
            }
        }
    }
}

/// A timestamp as the conformer reads it: RFC 3339 in its common form here, anything else by
/// [`parse_timestamp_nanos`].
fn timestamp_nanos(v: &str) -> Option<i64> {
    rfc3339_nanos(v.as_bytes()).or_else(|| parse_timestamp_nanos(v))
}

/// `YYYY-MM-DDTHH:MM:SS[.f]` with `Z` or `±HH:MM`, 1 to 9 fraction digits, as nanoseconds since
/// the epoch; `None` for any other form or an instant outside the nanosecond range (the general
/// parser decides those).
pub(super) fn rfc3339_nanos(s: &[u8]) -> Option<i64> {
    fn num(s: &[u8]) -> Option<i64> {
        let mut v = 0i64;
        for &d in s {
            if !d.is_ascii_digit() {
                return None;
            }
            v = v * 10 + i64::from(d - b'0');
        }
        Some(v)
    }
    if s.len() < 20
        || s[4] != b'-'
        || s[7] != b'-'
        || s[10] != b'T'
        || s[13] != b':'
        || s[16] != b':'
    {
        return None;
    }
    let (year, month, day) = (num(&s[0..4])?, num(&s[5..7])?, num(&s[8..10])?);
    let (hour, minute, second) = (num(&s[11..13])?, num(&s[14..16])?, num(&s[17..19])?);
    let mut i = 19;
    let mut nanos = 0i64;
    if s[i] == b'.' {
        let digits = s[i + 1..].iter().take_while(|d| d.is_ascii_digit()).count();
        if !(1..=9).contains(&digits) {
            return None;
        }
        nanos = num(&s[i + 1..i + 1 + digits])? * 10i64.pow(9 - digits as u32);
        i += 1 + digits;
    }
    let offset = match &s[i..] {
        b"Z" => 0,
        [sign @ (b'+' | b'-'), h1, h2, b':', m1, m2] => {
            let (h, m) = (num(&[*h1, *h2])?, num(&[*m1, *m2])?);
            if h > 23 || m > 59 {
                return None;
            }
            let secs = h * 3600 + m * 60;
            if *sign == b'-' { -secs } else { secs }
        }
        _ => return None,
    };
    if !(1..=12).contains(&month)
        || day < 1
        || day > days_in_month(year, month)
        || hour > 23
        || minute > 59
        || second > 59
    {
        return None;
    }
    let secs =
        days_from_civil(year, month, day) * 86_400 + hour * 3600 + minute * 60 + second - offset;
    i64::try_from(i128::from(secs) * 1_000_000_000 + i128::from(nanos)).ok()
}

fn days_in_month(year: i64, month: i64) -> i64 {
    match month {
        2 if year % 4 == 0 && (year % 100 != 0 || year % 400 == 0) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days from 1970-01-01 to a date of the proleptic Gregorian calendar (year 0 to 9999).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn finite(v: f64) -> Option<f64> {
    v.is_finite().then_some(v)
}

/// An integer literal (already checked: `-?(0|[1-9][0-9]*)`) that fits an i64.
fn parse_i64(s: &str) -> Option<i64> {
    let (neg, digits) = match s.strip_prefix('-') {
        Some(d) => (true, d),
        None => (false, s),
    };
    let mut v = 0i64;
    for d in digits.bytes() {
        let d = i64::from(d - b'0');
        v = v.checked_mul(10)?;
        v = if neg {
            v.checked_sub(d)?
        } else {
            v.checked_add(d)?
        };
    }
    Some(v)
}

/// Skip JSON whitespace from `i`.
pub(super) fn ws(b: &[u8], mut i: usize) -> usize {
    while let Some(b' ' | b'\n' | b'\r' | b'\t') = b.get(i) {
        i += 1;
    }
    i
}

/// The string whose text starts at `i` (after its opening quote): the index of its closing
/// quote, and whether it has escapes. `None` when it does not end or an escape is not one
/// arrow-json reads the same way.
pub(super) fn scan_string(b: &[u8], mut i: usize) -> Option<(usize, bool)> {
    let mut escaped = false;
    loop {
        i += quote_or_backslash(&b[i..])?;
        if b[i] == b'"' {
            return Some((i, escaped));
        }
        escaped = true;
        match *b.get(i + 1)? {
            b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => i += 2,
            b'u' => {
                let unit = hex4(b.get(i + 2..i + 6)?)?;
                i += 6;
                if (0xD800..0xDC00).contains(&unit) {
                    if b.get(i..i + 2)? != b"\\u" {
                        return None;
                    }
                    let low = hex4(b.get(i + 2..i + 6)?)?;
                    if !(0xDC00..0xE000).contains(&low) {
                        return None;
                    }
                    i += 6;
                } else if (0xDC00..0xE000).contains(&unit) {
                    return None;
                }
            }
            _ => return None,
        }
    }
}

/// A word whose every byte is 1, and one whose every byte has only its high bit: for testing
/// eight bytes at once.
const ONES: u64 = u64::from_ne_bytes([1; 8]);
const HIGHS: u64 = u64::from_ne_bytes([0x80; 8]);

/// Bytes read a word at a time before handing the rest to `memchr2`: a record's keys and most
/// of its values are shorter, and for them `memchr2`'s set-up is most of the cost.
const WORDS_FIRST: usize = 32;

/// The first `"` or `\` of `s`.
#[inline]
fn quote_or_backslash(s: &[u8]) -> Option<usize> {
    let mut at = 0;
    while at < WORDS_FIRST
        && let Some(word) = s.get(at..at + 8)
    {
        let w = u64::from_le_bytes(word.try_into().ok()?);
        let (q, e) = (w ^ (ONES * u64::from(b'"')), w ^ (ONES * u64::from(b'\\')));
        // The high bit of each byte that is zero in q or e (above the lowest such byte a borrow
        // may set more: only the lowest is used).
        let hits = ((q.wrapping_sub(ONES) & !q) | (e.wrapping_sub(ONES) & !e)) & HIGHS;
        if hits != 0 {
            return Some(at + (hits.trailing_zeros() / 8) as usize);
        }
        at += 8;
    }
    memchr::memchr2(b'"', b'\\', &s[at..]).map(|p| at + p)
}

fn hex4(h: &[u8]) -> Option<u32> {
    let mut v = 0;
    for &d in h {
        v = v << 4 | (d as char).to_digit(16)?;
    }
    Some(v)
}

/// Append the text of a string (escapes checked by [`scan_string`]) to `out`.
fn unescape(s: &str, out: &mut String) -> Option<()> {
    let mut rest = s;
    while let Some(at) = rest.find('\\') {
        out.push_str(&rest[..at]);
        let b = rest.as_bytes();
        let (c, used) = match b[at + 1] {
            b'"' => ('"', 2),
            b'\\' => ('\\', 2),
            b'/' => ('/', 2),
            b'b' => ('\u{8}', 2),
            b'f' => ('\u{c}', 2),
            b'n' => ('\n', 2),
            b'r' => ('\r', 2),
            b't' => ('\t', 2),
            _ => {
                let unit = hex4(&b[at + 2..at + 6])?;
                if (0xD800..0xDC00).contains(&unit) {
                    let low = hex4(&b[at + 8..at + 12])?;
                    let n = ((unit - 0xD800) << 10 | (low - 0xDC00)) + 0x1_0000;
                    (char::from_u32(n)?, 12)
                } else {
                    (char::from_u32(unit)?, 6)
                }
            }
        };
        out.push(c);
        rest = &rest[at + used..];
    }
    out.push_str(rest);
    Some(())
}

/// The number starting at `i`, in JSON's grammar: its end, and whether it is an integer. `None`
/// when the literal is not one JSON allows or runs into more of what arrow-json would take as
/// part of it.
fn scan_number(b: &[u8], start: usize) -> Option<(usize, bool)> {
    let digits = |mut i: usize| {
        while b.get(i).is_some_and(u8::is_ascii_digit) {
            i += 1;
        }
        i
    };
    let mut i = start;
    if b.get(i) == Some(&b'-') {
        i += 1;
    }
    match b.get(i)? {
        b'0' => i += 1,
        b'1'..=b'9' => i = digits(i + 1),
        _ => return None,
    }
    let mut integer = true;
    if b.get(i) == Some(&b'.') {
        let end = digits(i + 1);
        if end == i + 1 {
            return None;
        }
        i = end;
        integer = false;
    }
    if let Some(b'e' | b'E') = b.get(i) {
        i += 1;
        if let Some(b'+' | b'-') = b.get(i) {
            i += 1;
        }
        let end = digits(i);
        if end == i || end - i > 3 {
            return None;
        }
        i = end;
        integer = false;
    }
    if let Some(b'0'..=b'9' | b'+' | b'-' | b'.' | b'e' | b'E') = b.get(i) {
        return None;
    }
    Some((i, integer))
}

/// Skip the JSON value at `i` (any value, checked to be well-formed); returns its end.
pub(super) fn skip_value(b: &[u8], mut i: usize) -> Option<usize> {
    // Open containers, innermost in the low bit: 1 an object, 0 an array.
    let (mut stack, mut depth) = (0u64, 0u32);
    loop {
        // A value at `i`.
        match *b.get(i)? {
            b'"' => i = scan_string(b, i + 1)?.0 + 1,
            b'-' | b'0'..=b'9' => i = scan_number(b, i)?.0,
            b't' if b[i..].starts_with(b"true") => i += 4,
            b'f' if b[i..].starts_with(b"false") => i += 5,
            b'n' if b[i..].starts_with(b"null") => i += 4,
            open @ (b'{' | b'[') => {
                if depth == 64 {
                    return None;
                }
                let object = open == b'{';
                stack = stack << 1 | u64::from(object);
                depth += 1;
                i = ws(b, i + 1);
                let close = if object { b'}' } else { b']' };
                if b.get(i) != Some(&close) {
                    if object {
                        i = key(b, i)?;
                    }
                    continue;
                }
                i += 1;
                stack >>= 1;
                depth -= 1;
            }
            _ => return None,
        }
        // After a value: close what ends here, up to the next value.
        loop {
            if depth == 0 {
                return Some(i);
            }
            i = ws(b, i);
            let object = stack & 1 == 1;
            match *b.get(i)? {
                b',' => {
                    i = ws(b, i + 1);
                    if object {
                        i = key(b, i)?;
                    }
                    break;
                }
                b'}' if object => {}
                b']' if !object => {}
                _ => return None,
            }
            i += 1;
            stack >>= 1;
            depth -= 1;
        }
    }
}

/// A key and its colon at `i` (of an object being skipped); returns where its value starts.
fn key(b: &[u8], i: usize) -> Option<usize> {
    if b.get(i) != Some(&b'"') {
        return None;
    }
    let end = scan_string(b, i + 1)?.0;
    let i = ws(b, end + 1);
    if b.get(i) != Some(&b':') {
        return None;
    }
    Some(ws(b, i + 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_agrees_with_the_general_parser() {
        for v in [
            "2025-01-15T08:30:45Z",
            "2025-01-15T08:30:45.1Z",
            "2025-01-15T08:30:45.123456789Z",
            "2025-01-15T08:30:45.5+08:00",
            "2025-01-15T08:30:45-05:30",
            "2024-02-29T23:59:59Z",
            "1970-01-01T00:00:00Z",
            "1969-12-31T23:59:59.999999999Z",
            "1677-09-21T00:12:43.145224192Z",
            "2262-04-11T23:47:16.854775807Z",
            "0001-01-01T00:00:00Z",
        ] {
            let fast = rfc3339_nanos(v.as_bytes());
            assert_eq!(fast, parse_timestamp_nanos(v), "{v}");
        }
        for v in [
            "2025-02-29T00:00:00Z",
            "2025-01-15T24:00:00Z",
            "2025-01-15T08:30:45",
            "2025-01-15 08:30:45Z",
            "2025-01-15T08:30:45.Z",
            "2025-01-15T08:30:45.1234567891Z",
            "2025-01-15T08:30:60Z",
            "2262-04-11T23:47:16.854775808Z",
        ] {
            assert_eq!(rfc3339_nanos(v.as_bytes()), None, "{v}");
        }
    }

    #[test]
    fn numbers_follow_json_grammar() {
        assert_eq!(scan_number(b"-12,", 0), Some((3, true)));
        assert_eq!(scan_number(b"0.5e-3}", 0), Some((6, false)));
        assert_eq!(scan_number(b"01", 0), None);
        assert_eq!(scan_number(b"1.", 0), None);
        assert_eq!(scan_number(b"1-2", 0), None);
        assert_eq!(parse_i64("-9223372036854775808"), Some(i64::MIN));
        assert_eq!(parse_i64("9223372036854775808"), None);
    }

    #[test]
    fn finds_the_first_quote_or_backslash_as_memchr2_does() {
        // Every position of a quote or a backslash in strings longer and shorter than a word,
        // and than the part read a word at a time, after bytes that differ from each by one bit.
        for len in 0..80 {
            for at in 0..=len {
                for (mark, other) in [(b'"', b'\\'), (b'\\', b'"')] {
                    let mut s = vec![b'"' ^ 1; len];
                    s.iter_mut()
                        .skip(1)
                        .step_by(3)
                        .for_each(|c| *c = b'\\' ^ 0x80);
                    if at < len {
                        s[at] = mark;
                        s.iter_mut()
                            .skip(at + 1)
                            .step_by(2)
                            .for_each(|c| *c = other);
                    }
                    let want = memchr::memchr2(b'"', b'\\', &s);
                    assert_eq!(quote_or_backslash(&s), want, "len {len}, at {at}");
                }
            }
        }
    }

    #[test]
    fn names_are_matched_in_place_only_when_they_fit_a_word() {
        let (w, m) = key_word(b"id").unwrap();
        assert_eq!(w & m, u64::from_le_bytes(*b"id\"\0\0\0\0\0"));
        assert_eq!(m, 0xff_ffff);
        assert_eq!(key_word(b"message").unwrap().1, u64::MAX);
        assert_eq!(key_word(b"messages"), None);
        assert_eq!(key_word(b"a\"b"), None);
        assert_eq!(key_word(b"a\\b"), None);
    }

    #[test]
    fn skips_nested_values() {
        let v = br#"{"a": [1, {"b": "]"}, []], "c": {}} ,"#;
        assert_eq!(skip_value(v, 0), Some(v.len() - 2));
        assert_eq!(skip_value(b"[1 2]", 0), None);
        assert_eq!(skip_value(b"{\"a\" 1}", 0), None);
        assert_eq!(skip_value(b"[1,]", 0), None);
        assert_eq!(skip_value(b"{\"a\":1,}", 0), None);
        assert_eq!(skip_value(b"[[[", 0), None);
    }
}
