//! Conforming decoded columns to the target table's Arrow schema, row by row.
//!
//! Decoders read what is cheap to read exactly (JSON primitives natively; temporal, binary and uuid
//! columns, and every CSV column, as strings) and this module converts to the target types. A value
//! that does not convert, or a missing value in a required column, marks its row bad with a reason
//! naming the column; the rest of the batch goes on.

use std::sync::Arc;

use arrow_array::builder::{
    BinaryBuilder, Date32Builder, FixedSizeBinaryBuilder, LargeBinaryBuilder,
    Time64MicrosecondBuilder, TimestampMicrosecondBuilder, TimestampNanosecondBuilder,
};
use arrow_array::{Array, ArrayRef, BooleanArray, RecordBatch, StringArray, new_null_array};
use arrow_cast::cast::{CastOptions, cast_with_options};
use arrow_schema::{ArrowError, DataType, Field, Schema, SchemaRef, TimeUnit};
use base64::Engine as _;
use chrono::{NaiveDate, NaiveTime, TimeZone, Utc};

use crate::Names;

/// How one target column is obtained from the decoded batch.
#[derive(Clone, Debug)]
enum Source {
    /// Decoded column `i` already has the target type.
    Same(usize),
    /// Decoded column `i` is a string to parse into the target type.
    Parse(usize),
    /// The data has no such column.
    Missing,
}

/// A plan that turns batches of a decode schema into batches of the target schema.
#[derive(Clone, Debug)]
pub struct Conformer {
    target: SchemaRef,
    decode: SchemaRef,
    sources: Vec<Source>,
    /// Made by [`Conformer::for_typed_source`].
    typed_source: bool,
    /// How the data's names find the target's columns.
    names: Names,
}

/// Whether a type is read as a string and parsed here rather than by the format decoder.
fn parsed_from_string(t: &DataType) -> bool {
    matches!(
        t,
        DataType::Date32
            | DataType::Time64(_)
            | DataType::Timestamp(_, _)
            | DataType::Binary
            | DataType::LargeBinary
            | DataType::FixedSizeBinary(_)
    )
}

impl Conformer {
    /// For formats that type values themselves (JSON): the decode schema is the target schema
    /// with every top-level field nullable and the temporal/binary fields read as strings. The
    /// decoder matches the record's keys by `names` (see [`Conformer::names`]).
    pub fn for_typed_source(target: SchemaRef, names: Names) -> Self {
        let mut fields = Vec::with_capacity(target.fields().len());
        let mut sources = Vec::with_capacity(target.fields().len());
        for (i, f) in target.fields().iter().enumerate() {
            if parsed_from_string(f.data_type()) {
                fields.push(Field::new(f.name(), DataType::Utf8, true));
                sources.push(Source::Parse(i));
            } else {
                fields.push(f.as_ref().clone().with_nullable(true));
                sources.push(Source::Same(i));
            }
        }
        Conformer {
            decode: Arc::new(Schema::new(fields)),
            target,
            sources,
            typed_source: true,
            names,
        }
    }

    /// For formats whose values are all text (CSV): `columns` are the names in the data, each
    /// read as a nullable string; target columns are found by name, as `names` says.
    pub fn for_text_source(target: SchemaRef, columns: &[String], names: Names) -> Self {
        let decode = Arc::new(Schema::new(
            columns
                .iter()
                .map(|c| Field::new(c, DataType::Utf8, true))
                .collect::<Vec<_>>(),
        ));
        let sources = target
            .fields()
            .iter()
            .map(
                |f| match names.position(columns.iter().map(String::as_str), f.name()) {
                    Some(i) if f.data_type() == &DataType::Utf8 => Source::Same(i),
                    Some(i) => Source::Parse(i),
                    None => Source::Missing,
                },
            )
            .collect();
        Conformer {
            target,
            decode,
            sources,
            typed_source: false,
            names,
        }
    }

    /// For sources with their own schema (Parquet): columns found by name (as `names` says) and
    /// cast.
    pub fn for_schema(target: SchemaRef, source: SchemaRef, names: Names) -> Self {
        let sources = target
            .fields()
            .iter()
            .map(|f| {
                let source_names = source.fields().iter().map(|s| s.name().as_str());
                match names.position(source_names, f.name()) {
                    Some(i) => Source::Same(i),
                    None => Source::Missing,
                }
            })
            .collect();
        Conformer {
            target,
            decode: source,
            sources,
            typed_source: false,
            names,
        }
    }

    /// How the data's names find the target's columns.
    pub fn names(&self) -> Names {
        self.names
    }

    /// The schema decoders must produce.
    pub fn decode_schema(&self) -> &SchemaRef {
        &self.decode
    }

    /// The target schema.
    pub fn target_schema(&self) -> &SchemaRef {
        &self.target
    }

    /// Whether this conformer takes what arrow-json decodes (see [`Conformer::for_typed_source`]).
    pub(super) fn is_typed_source(&self) -> bool {
        self.typed_source
    }

    /// Convert a decoded batch. Returns the conformed batch holding only the good rows, and the
    /// bad rows as `(row index in the input batch, reason)`.
    pub fn conform(
        &self,
        batch: &RecordBatch,
    ) -> Result<(RecordBatch, Vec<(usize, String)>), ArrowError> {
        let rows = batch.num_rows();
        let mut bad: Vec<Option<String>> = vec![None; rows];
        let mut columns: Vec<ArrayRef> = Vec::with_capacity(self.sources.len());
        for (field, source) in self.target.fields().iter().zip(&self.sources) {
            let column = match source {
                Source::Missing => new_null_array(field.data_type(), rows),
                Source::Same(i) => {
                    let col = batch.column(*i);
                    if col.data_type() == field.data_type() {
                        col.clone()
                    } else {
                        cast_checked(col, field, &mut bad)?
                    }
                }
                Source::Parse(i) => parse_column(batch.column(*i), field, &mut bad)?,
            };
            if !field.is_nullable() && column.null_count() > 0 {
                for (row, slot) in bad.iter_mut().enumerate() {
                    if slot.is_none() && column.is_null(row) {
                        *slot = Some(required_missing(field));
                    }
                }
            }
            columns.push(column);
        }
        let bad_rows: Vec<(usize, String)> = bad
            .into_iter()
            .enumerate()
            .filter_map(|(i, r)| r.map(|r| (i, r)))
            .collect();
        let columns = if bad_rows.is_empty() {
            columns
        } else {
            let mut keep = vec![true; rows];
            for (i, _) in &bad_rows {
                keep[*i] = false;
            }
            let keep = BooleanArray::from(keep);
            columns
                .iter()
                .map(|c| arrow_select::filter::filter(c.as_ref(), &keep))
                .collect::<Result<_, _>>()?
        };
        let batch = RecordBatch::try_new_with_options(
            self.target.clone(),
            columns,
            &arrow_array::RecordBatchOptions::new().with_row_count(Some(rows - bad_rows.len())),
        )?;
        Ok((batch, bad_rows))
    }
}

/// Cast with null-on-failure, marking rows where a non-null input became null.
fn cast_checked(
    col: &ArrayRef,
    field: &Field,
    bad: &mut [Option<String>],
) -> Result<ArrayRef, ArrowError> {
    let opts = CastOptions {
        safe: true,
        ..Default::default()
    };
    let out = cast_with_options(col, field.data_type(), &opts)?;
    if out.null_count() > col.null_count() {
        for (row, slot) in bad.iter_mut().enumerate() {
            if slot.is_none() && out.is_null(row) && !col.is_null(row) {
                *slot = Some(format!(
                    "field `{}`: value does not fit type {}",
                    field.name(),
                    field.data_type()
                ));
            }
        }
    }
    Ok(out)
}

/// Parse a string column into the field's type. Empty strings are null.
fn parse_column(
    col: &ArrayRef,
    field: &Field,
    bad: &mut [Option<String>],
) -> Result<ArrayRef, ArrowError> {
    let strings = match col.as_any().downcast_ref::<StringArray>() {
        Some(s) => s,
        None => return cast_checked(col, field, bad),
    };
    let n = strings.len();
    let mut fail = |row: usize, value: &str, why: &str| {
        if bad[row].is_none() {
            bad[row] = Some(cannot_read(field, value, why));
        }
    };
    macro_rules! build {
        ($builder:expr, $parse:expr) => {{
            let mut b = $builder;
            for row in 0..n {
                if strings.is_null(row) || strings.value(row).is_empty() {
                    b.append_null();
                    continue;
                }
                let v = strings.value(row);
                match $parse(v) {
                    Some(x) => b.append_value(x),
                    None => {
                        fail(row, v, "");
                        b.append_null();
                    }
                }
            }
            Arc::new(b.finish()) as ArrayRef
        }};
    }
    let out: ArrayRef = match field.data_type() {
        DataType::Timestamp(TimeUnit::Microsecond, tz) => {
            let a = build!(TimestampMicrosecondBuilder::with_capacity(n), |v: &str| {
                parse_timestamp_nanos(v).map(|ns| ns.div_euclid(1000))
            });
            with_tz::<arrow_array::types::TimestampMicrosecondType>(a, tz.clone())
        }
        DataType::Timestamp(TimeUnit::Nanosecond, tz) => {
            let a = build!(
                TimestampNanosecondBuilder::with_capacity(n),
                parse_timestamp_nanos
            );
            with_tz::<arrow_array::types::TimestampNanosecondType>(a, tz.clone())
        }
        DataType::Date32 => build!(Date32Builder::with_capacity(n), parse_date),
        DataType::Time64(TimeUnit::Microsecond) => {
            build!(
                Time64MicrosecondBuilder::with_capacity(n),
                parse_time_micros
            )
        }
        DataType::Binary => build!(BinaryBuilder::with_capacity(n, 0), decode_base64),
        DataType::LargeBinary => build!(LargeBinaryBuilder::with_capacity(n, 0), decode_base64),
        DataType::FixedSizeBinary(16) => {
            let mut b = FixedSizeBinaryBuilder::with_capacity(n, 16);
            for row in 0..n {
                if strings.is_null(row) || strings.value(row).is_empty() {
                    b.append_null();
                    continue;
                }
                let v = strings.value(row);
                match parse_uuid(v) {
                    Some(bytes) => b.append_value(bytes)?,
                    None => {
                        fail(row, v, " (a uuid)");
                        b.append_null();
                    }
                }
            }
            Arc::new(b.finish())
        }
        DataType::Utf8 => col.clone(),
        _ => {
            // Numbers, booleans, decimals: arrow's string parsing, empty strings as null.
            let blanked = arrow_select::nullif::nullif(strings, &arrow_ord_eq_empty(strings))?;
            cast_checked(&blanked, field, bad)?
        }
    };
    Ok(out)
}

/// Why a record is set aside when `field`'s text `value` does not convert (`why` adds to it).
pub(super) fn cannot_read(field: &Field, value: &str, why: &str) -> String {
    let shown: String = value.chars().take(64).collect();
    format!(
        "field `{}`: cannot read {shown:?} as {}{why}",
        field.name(),
        type_name(field.data_type())
    )
}

/// Why a record is set aside when the required `field` has no value.
pub(super) fn required_missing(field: &Field) -> String {
    format!("required field `{}` is missing or null", field.name())
}

fn type_name(t: &DataType) -> String {
    match t {
        DataType::Timestamp(_, Some(_)) => "timestamptz".into(),
        DataType::Timestamp(_, None) => "timestamp".into(),
        DataType::Date32 => "date".into(),
        DataType::Time64(_) => "time".into(),
        DataType::Binary | DataType::LargeBinary => "binary (base64)".into(),
        DataType::FixedSizeBinary(16) => "uuid".into(),
        DataType::Int32 => "int".into(),
        DataType::Int64 => "long".into(),
        DataType::Float32 => "float".into(),
        DataType::Float64 => "double".into(),
        DataType::Boolean => "boolean".into(),
        other => other.to_string(),
    }
}

/// A mask of the empty strings in a string array.
fn arrow_ord_eq_empty(strings: &StringArray) -> BooleanArray {
    strings.iter().map(|v| Some(v == Some(""))).collect()
}

fn with_tz<T: arrow_array::types::ArrowTimestampType>(
    a: ArrayRef,
    tz: Option<Arc<str>>,
) -> ArrayRef {
    match a.as_any().downcast_ref::<arrow_array::PrimitiveArray<T>>() {
        Some(p) => Arc::new(p.clone().with_timezone_opt(tz)),
        None => a,
    }
}

/// Timestamps as text: RFC 3339 / ISO 8601 with `T` or a space, with or without a zone (no zone
/// means UTC), or an integer of epoch **milliseconds** (Kafka Connect's convention for numbers).
pub fn parse_timestamp_nanos(v: &str) -> Option<i64> {
    let v = v.trim();
    if is_integer(v) {
        return v.parse::<i64>().ok()?.checked_mul(1_000_000);
    }
    arrow_cast::parse::string_to_datetime(&Utc, v)
        .ok()
        .and_then(|t| t.timestamp_nanos_opt())
        .or_else(|| {
            // Date only: midnight UTC.
            NaiveDate::parse_from_str(v, "%Y-%m-%d").ok().and_then(|d| {
                Utc.from_utc_datetime(&d.and_hms_opt(0, 0, 0)?)
                    .timestamp_nanos_opt()
            })
        })
}

/// Dates as `YYYY-MM-DD`, a timestamp (its UTC date), or an integer of days since the epoch.
pub fn parse_date(v: &str) -> Option<i32> {
    let v = v.trim();
    if is_integer(v) {
        return v.parse().ok();
    }
    let epoch = NaiveDate::from_ymd_opt(1970, 1, 1)?;
    if let Ok(d) = NaiveDate::parse_from_str(v, "%Y-%m-%d") {
        return i32::try_from((d - epoch).num_days()).ok();
    }
    let ns = parse_timestamp_nanos(v)?;
    i32::try_from(ns.div_euclid(86_400_000_000_000)).ok()
}

fn parse_time_micros(v: &str) -> Option<i64> {
    let v = v.trim();
    NaiveTime::parse_from_str(v, "%H:%M:%S%.f")
        .or_else(|_| NaiveTime::parse_from_str(v, "%H:%M"))
        .ok()
        .map(|t| {
            use chrono::Timelike;
            t.num_seconds_from_midnight() as i64 * 1_000_000 + (t.nanosecond() / 1000) as i64
        })
}

fn decode_base64(v: &str) -> Option<Vec<u8>> {
    base64::engine::general_purpose::STANDARD
        .decode(v.trim())
        .ok()
}

fn parse_uuid(v: &str) -> Option<[u8; 16]> {
    let hex: String = v.trim().chars().filter(|c| *c != '-').collect();
    if hex.len() != 32 {
        return None;
    }
    let mut out = [0u8; 16];
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(hex.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(out)
}

fn is_integer(v: &str) -> bool {
    let digits = v.strip_prefix('-').unwrap_or(v);
    !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit())
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::{Int64Array, TimestampMicrosecondArray};

    fn target() -> SchemaRef {
        Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int64, false),
            Field::new(
                "ts",
                DataType::Timestamp(TimeUnit::Microsecond, Some("+00:00".into())),
                true,
            ),
            Field::new("name", DataType::Utf8, true),
        ]))
    }

    #[test]
    fn text_columns_convert_and_bad_rows_are_named() {
        let c = Conformer::for_text_source(
            target(),
            &["NAME".into(), "id".into(), "ts".into()],
            crate::Names::CaseInsensitive,
        );
        let input = RecordBatch::try_new(
            c.decode_schema().clone(),
            vec![
                Arc::new(StringArray::from(vec![
                    Some("a"),
                    Some(""),
                    Some("c"),
                    Some("d"),
                ])),
                Arc::new(StringArray::from(vec![
                    Some("1"),
                    Some("x2"),
                    Some("3"),
                    None,
                ])),
                Arc::new(StringArray::from(vec![
                    Some("2025-01-15T08:30:45Z"),
                    Some("1736929845000"),
                    Some("not a time"),
                    Some("2025-01-15 08:30:45.5"),
                ])),
            ],
        )
        .unwrap();
        let (out, bad) = c.conform(&input).unwrap();
        assert_eq!(out.num_rows(), 1);
        let ids = out.column(0).as_any().downcast_ref::<Int64Array>().unwrap();
        assert_eq!(ids.value(0), 1);
        let ts = out
            .column(1)
            .as_any()
            .downcast_ref::<TimestampMicrosecondArray>()
            .unwrap();
        assert_eq!(ts.value(0), 1_736_929_845_000_000);
        assert_eq!(ts.timezone(), Some("+00:00"));
        let reasons: Vec<_> = bad.iter().map(|(i, r)| format!("{i}:{r}")).collect();
        assert_eq!(reasons.len(), 3, "{reasons:?}");
        assert!(reasons[0].starts_with("1:field `id`"), "{reasons:?}");
        assert!(
            reasons[1].starts_with("2:field `ts`: cannot read \"not a time\" as timestamptz"),
            "{reasons:?}"
        );
        assert!(
            reasons[2].starts_with("3:required field `id`"),
            "{reasons:?}"
        );
    }

    #[test]
    fn temporal_text_forms() {
        assert_eq!(
            parse_timestamp_nanos("1970-01-01T00:00:01Z"),
            Some(1_000_000_000)
        );
        assert_eq!(
            parse_timestamp_nanos("1970-01-01T08:00:01+08:00"),
            Some(1_000_000_000)
        );
        assert_eq!(parse_timestamp_nanos("1000"), Some(1_000_000_000));
        assert_eq!(
            parse_timestamp_nanos("1970-01-02"),
            Some(86_400_000_000_000)
        );
        assert_eq!(parse_date("1970-01-11"), Some(10));
        assert_eq!(parse_date("-3"), Some(-3));
        assert_eq!(parse_time_micros("00:01:00.5"), Some(60_500_000));
        assert_eq!(
            parse_uuid("00112233-4455-6677-8899-aabbccddeeff").unwrap()[15],
            0xff
        );
        assert_eq!(parse_uuid("xyz"), None);
    }
}
