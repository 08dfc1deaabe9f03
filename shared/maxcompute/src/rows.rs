//! Arrow record batches to tunnel rows, with a row-level error for a value that cannot be
//! represented, so the caller dead-letters that row and lands the rest.
//!
//! Columns are matched by name (case-insensitively); a table column the batch lacks is null
//! (an error for a NOT NULL column, found when the converter is built). Values are converted by
//! what the target column needs, with the coercions a user expects when the declared and the
//! actual types differ:
//!
//! | target | accepts |
//! |---|---|
//! | integers | any integer in range; integral floats and decimals; numeric text |
//! | `double` / `float` | numbers; numeric text |
//! | `decimal(p,s)` | decimals (rounded half-up to `s`), integers, finite floats, decimal text; at most `p - s` integer digits |
//! | `string` / `varchar(n)` / `char(n)` | text; numbers, booleans, dates and times as text (timestamps with `datetime_format`); UTF-8 binary; at most `n` characters |
//! | `boolean` | booleans; `true`/`false`/`1`/`0` |
//! | `date`, `datetime`, `timestamp[_ntz]` | dates and timestamps (any unit); text in `datetime_format`, RFC 3339 or `yyyy-MM-dd[ HH:mm:ss[.f]]` (UTC) |
//! | `binary` / `json` | bytes or text / valid JSON text, numbers, booleans |
//! | `array` / `map` / `struct` | lists / maps / structs (struct fields by name) |
//!
//! Anything else is a row error naming the row, the column and the value's problem.

use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::{
    Date32Type, Date64Type, Decimal32Type, Decimal64Type, Decimal128Type, Float16Type, Float32Type,
    Float64Type, Int8Type, Int16Type, Int32Type, Int64Type, Time32MillisecondType,
    Time32SecondType, Time64MicrosecondType, Time64NanosecondType, TimestampMicrosecondType,
    TimestampMillisecondType, TimestampNanosecondType, TimestampSecondType, UInt8Type, UInt16Type,
    UInt32Type, UInt64Type,
};
use arrow_array::{Array, ArrayRef, RecordBatch};
use arrow_schema::{DataType as ArrowType, Schema, TimeUnit};
use chrono::{DateTime, NaiveDate, NaiveDateTime, Utc};
use floe_core::{Error, ErrorKind, Result};
use floe_tunnel_codec::{BlockEncoder, DataType, Decimal, TableSchema, Timestamp, Value};

use crate::datetime::DateTimeFormat;

/// One row that could not be converted or encoded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RowError {
    /// The row's index in its batch.
    pub row: usize,
    /// The column at fault, when one is.
    pub column: Option<String>,
    /// What is wrong, lowercase, one line.
    pub message: String,
}

impl RowError {
    /// A row error.
    pub fn new(row: usize, column: Option<String>, message: impl Into<String>) -> Self {
        RowError {
            row,
            column,
            message: message.into(),
        }
    }
}

impl std::fmt::Display for RowError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.column {
            Some(c) => write!(f, "row {} column `{c}`: {}", self.row, self.message),
            None => write!(f, "row {}: {}", self.row, self.message),
        }
    }
}

/// The rows of a batch that converted, and the errors of those that did not.
#[derive(Debug, Default)]
pub struct Converted {
    /// `(row index, values)` for each row that converted, in order.
    pub rows: Vec<(usize, Vec<Value>)>,
    /// One error per row that did not.
    pub errors: Vec<RowError>,
}

#[derive(Clone, Debug)]
struct Plan {
    name: String,
    data_type: DataType,
    nullable: bool,
    source: Option<usize>,
}

/// Converts Arrow batches of one schema into rows of one MaxCompute table; see the module doc.
#[derive(Clone, Debug)]
pub struct BatchConverter {
    plan: Vec<Plan>,
    arrow_columns: usize,
    format: DateTimeFormat,
}

impl BatchConverter {
    /// Plan the conversion of batches of `arrow` into rows of `target`. `datetime_format` is the
    /// sink's `datetime_format` (Java style, default `yyyy-MM-dd HH:mm:ss`). Fails when a NOT NULL
    /// column has no source, or a source type can never fit its column.
    pub fn new(target: &TableSchema, arrow: &Schema, datetime_format: &str) -> Result<Self> {
        let format = DateTimeFormat::parse(datetime_format)
            .map_err(|e| Error::config("datetime_format", e.message()))?;
        let plan = target
            .columns()
            .iter()
            .map(|c| {
                let source = arrow
                    .fields()
                    .iter()
                    .position(|f| f.name().eq_ignore_ascii_case(&c.name));
                match source {
                    None if !c.nullable => Err(Error::invalid_input(format!(
                        "column `{}` is not null but the data has no such field",
                        c.name
                    ))),
                    Some(i) if !fits(arrow.field(i).data_type(), &c.data_type) => Err(Error::new(
                        ErrorKind::Unsupported,
                        format!(
                            "field `{}` of type {} cannot be written to column `{}` of type {}",
                            arrow.field(i).name(),
                            arrow.field(i).data_type(),
                            c.name,
                            c.data_type
                        ),
                    )),
                    _ => Ok(Plan {
                        name: c.name.clone(),
                        data_type: c.data_type.clone(),
                        nullable: c.nullable,
                        source,
                    }),
                }
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(BatchConverter {
            plan,
            arrow_columns: arrow.fields().len(),
            format,
        })
    }

    /// Get a batch ready for row-by-row conversion (dictionaries are decoded once here).
    pub fn prepare<'a>(&'a self, batch: &RecordBatch) -> Result<PreparedBatch<'a>> {
        if batch.num_columns() != self.arrow_columns {
            return Err(Error::invalid_input(format!(
                "batch has {} columns, the converter was planned for {}",
                batch.num_columns(),
                self.arrow_columns
            )));
        }
        let columns = self
            .plan
            .iter()
            .map(|p| {
                p.source
                    .map(|i| {
                        let col = batch.column(i);
                        match col.data_type() {
                            ArrowType::Dictionary(_, v) => arrow_cast::cast(col, v).map_err(|e| {
                                Error::invalid_input(format!(
                                    "cannot decode dictionary column `{}`",
                                    p.name
                                ))
                                .with_source(e)
                            }),
                            _ => Ok(Arc::clone(col)),
                        }
                    })
                    .transpose()
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(PreparedBatch {
            converter: self,
            columns,
            rows: batch.num_rows(),
        })
    }

    /// Convert every row of `batch`.
    pub fn convert(&self, batch: &RecordBatch) -> Result<Converted> {
        let prepared = self.prepare(batch)?;
        let mut out = Converted::default();
        for i in 0..prepared.rows {
            let mut row = Vec::with_capacity(self.plan.len());
            match prepared.row(i, &mut row) {
                Ok(()) => out.rows.push((i, row)),
                Err(e) => out.errors.push(e),
            }
        }
        Ok(out)
    }

    /// Convert and encode every row of `batch` into `encoder`; returns the rows that failed
    /// (conversion or encoding), which are left out of the block.
    pub fn encode_batch(
        &self,
        batch: &RecordBatch,
        encoder: &mut BlockEncoder,
    ) -> Result<Vec<RowError>> {
        let prepared = self.prepare(batch)?;
        let mut errors = Vec::new();
        let mut row = Vec::with_capacity(self.plan.len());
        for i in 0..prepared.rows {
            if let Err(e) = prepared.row(i, &mut row) {
                errors.push(e);
                continue;
            }
            if let Err(e) = encoder.write_record(&row) {
                if e.kind() != ErrorKind::InvalidInput {
                    return Err(e);
                }
                errors.push(RowError::new(i, None, e.to_string()));
            }
        }
        Ok(errors)
    }
}

/// A batch ready for conversion; see [`BatchConverter::prepare`].
#[derive(Debug)]
pub struct PreparedBatch<'a> {
    converter: &'a BatchConverter,
    columns: Vec<Option<ArrayRef>>,
    rows: usize,
}

impl PreparedBatch<'_> {
    /// The number of rows.
    pub fn num_rows(&self) -> usize {
        self.rows
    }

    /// Convert row `i` into `out` (cleared first).
    pub fn row(&self, i: usize, out: &mut Vec<Value>) -> std::result::Result<(), RowError> {
        out.clear();
        for (plan, column) in self.converter.plan.iter().zip(&self.columns) {
            let value = match column {
                None => Value::Null,
                Some(array) => convert(array.as_ref(), i, &plan.data_type, &self.converter.format)
                    .map_err(|m| RowError::new(i, Some(plan.name.clone()), m))?,
            };
            if value.is_null() && !plan.nullable {
                return Err(RowError::new(
                    i,
                    Some(plan.name.clone()),
                    "null in a not null column",
                ));
            }
            out.push(value);
        }
        Ok(())
    }
}

impl PreparedBatch<'_> {
    /// The columns of the target, in order.
    pub(crate) fn column_count(&self) -> usize {
        self.converter.plan.len()
    }

    /// Column `j`'s name, type, nullability and source array (`None`: no source, all null).
    pub(crate) fn column(&self, j: usize) -> (&str, &DataType, bool, Option<&ArrayRef>) {
        let p = &self.converter.plan[j];
        (&p.name, &p.data_type, p.nullable, self.columns[j].as_ref())
    }

    /// Row `i`'s value of column `j`, converted as [`PreparedBatch::row`] converts it (nullability
    /// not checked).
    pub(crate) fn value(&self, j: usize, i: usize) -> Conv<Value> {
        match &self.columns[j] {
            None => Ok(Value::Null),
            Some(array) => convert(
                array.as_ref(),
                i,
                &self.converter.plan[j].data_type,
                &self.converter.format,
            ),
        }
    }
}

/// Whether values of Arrow type `a` can ever fill a column of type `t` (row-level checks do
/// the rest).
fn fits(a: &ArrowType, t: &DataType) -> bool {
    let a = match a {
        ArrowType::Dictionary(_, v) => v.as_ref(),
        other => other,
    };
    if matches!(a, ArrowType::Null) {
        return true;
    }
    match (a, t) {
        (_, DataType::IntervalDayTime | DataType::IntervalYearMonth) => false,
        (
            ArrowType::List(e) | ArrowType::LargeList(e) | ArrowType::FixedSizeList(e, _),
            DataType::Array(te),
        ) => fits(e.data_type(), te),
        (ArrowType::Map(entries, _), DataType::Map(tk, tv)) => match entries.data_type() {
            ArrowType::Struct(kv) if kv.len() == 2 => {
                fits(kv[0].data_type(), tk) && fits(kv[1].data_type(), tv)
            }
            _ => false,
        },
        (ArrowType::Struct(fields), DataType::Struct(tf)) => tf.iter().all(|f| {
            fields
                .iter()
                .find(|a| a.name().eq_ignore_ascii_case(&f.name))
                .is_none_or(|a| fits(a.data_type(), &f.data_type))
        }),
        (
            ArrowType::List(_)
            | ArrowType::LargeList(_)
            | ArrowType::FixedSizeList(..)
            | ArrowType::Map(..)
            | ArrowType::Struct(_),
            _,
        ) => false,
        (_, DataType::Array(_) | DataType::Map(..) | DataType::Struct(_)) => false,
        _ => scalar_kind(a).is_some(),
    }
}

/// The Arrow scalar types the converter reads.
fn scalar_kind(a: &ArrowType) -> Option<()> {
    use ArrowType as A;
    match a {
        A::Boolean
        | A::Int8
        | A::Int16
        | A::Int32
        | A::Int64
        | A::UInt8
        | A::UInt16
        | A::UInt32
        | A::UInt64
        | A::Float16
        | A::Float32
        | A::Float64
        | A::Decimal32(..)
        | A::Decimal64(..)
        | A::Decimal128(..)
        | A::Utf8
        | A::LargeUtf8
        | A::Utf8View
        | A::Binary
        | A::LargeBinary
        | A::BinaryView
        | A::FixedSizeBinary(_)
        | A::Date32
        | A::Date64
        | A::Timestamp(..)
        | A::Time32(_)
        | A::Time64(_) => Some(()),
        _ => None,
    }
}

/// A value read from Arrow, before it is fitted to the column type.
enum Scalar<'a> {
    Bool(bool),
    Int(i128),
    Float(f64),
    Decimal {
        unscaled: i128,
        scale: i8,
    },
    Str(&'a str),
    Bytes(&'a [u8]),
    Date(i32),
    /// Nanoseconds since the epoch.
    Instant(i128),
    /// Nanoseconds since midnight.
    Time(i64),
}

pub(crate) type Conv<T> = std::result::Result<T, String>;

fn convert(array: &dyn Array, i: usize, t: &DataType, fmt: &DateTimeFormat) -> Conv<Value> {
    if array.is_null(i) {
        return Ok(Value::Null);
    }
    match t {
        DataType::Array(et) => {
            let values = list_values(array, i)?;
            let items = (0..values.len())
                .map(|j| convert(values.as_ref(), j, et, fmt))
                .collect::<Conv<Vec<_>>>()?;
            Ok(Value::Array(items))
        }
        DataType::Map(kt, vt) => {
            let map = array
                .as_map_opt()
                .ok_or_else(|| format!("a {} value is not a map", array.data_type()))?;
            let entries = map.value(i);
            let (keys, values) = (entries.column(0), entries.column(1));
            let items = (0..entries.len())
                .map(|j| {
                    let k = convert(keys.as_ref(), j, kt, fmt)?;
                    if k.is_null() {
                        return Err("map key is null".to_owned());
                    }
                    Ok((k, convert(values.as_ref(), j, vt, fmt)?))
                })
                .collect::<Conv<Vec<_>>>()?;
            Ok(Value::Map(items))
        }
        DataType::Struct(fields) => {
            let s = array
                .as_struct_opt()
                .ok_or_else(|| format!("a {} value is not a struct", array.data_type()))?;
            let names = s.column_names();
            let values = fields
                .iter()
                .map(
                    |f| match names.iter().position(|n| n.eq_ignore_ascii_case(&f.name)) {
                        None => Ok(Value::Null),
                        Some(j) => convert(s.column(j).as_ref(), i, &f.data_type, fmt)
                            .map_err(|m| format!("field `{}`: {m}", f.name)),
                    },
                )
                .collect::<Conv<Vec<_>>>()?;
            Ok(Value::Struct(values))
        }
        _ => {
            let s = scalar(array, i)?;
            fit(s, t, fmt)
        }
    }
}

fn list_values(array: &dyn Array, i: usize) -> Conv<ArrayRef> {
    if let Some(l) = array.as_list_opt::<i32>() {
        return Ok(l.value(i));
    }
    if let Some(l) = array.as_list_opt::<i64>() {
        return Ok(l.value(i));
    }
    if let Some(l) = array.as_fixed_size_list_opt() {
        return Ok(l.value(i));
    }
    Err(format!("a {} value is not a list", array.data_type()))
}

fn scalar(array: &dyn Array, i: usize) -> Conv<Scalar<'_>> {
    use ArrowType as A;
    Ok(match array.data_type() {
        A::Boolean => Scalar::Bool(array.as_boolean().value(i)),
        A::Int8 => Scalar::Int(array.as_primitive::<Int8Type>().value(i).into()),
        A::Int16 => Scalar::Int(array.as_primitive::<Int16Type>().value(i).into()),
        A::Int32 => Scalar::Int(array.as_primitive::<Int32Type>().value(i).into()),
        A::Int64 => Scalar::Int(array.as_primitive::<Int64Type>().value(i).into()),
        A::UInt8 => Scalar::Int(array.as_primitive::<UInt8Type>().value(i).into()),
        A::UInt16 => Scalar::Int(array.as_primitive::<UInt16Type>().value(i).into()),
        A::UInt32 => Scalar::Int(array.as_primitive::<UInt32Type>().value(i).into()),
        A::UInt64 => Scalar::Int(array.as_primitive::<UInt64Type>().value(i).into()),
        A::Float16 => Scalar::Float(array.as_primitive::<Float16Type>().value(i).to_f64()),
        A::Float32 => Scalar::Float(array.as_primitive::<Float32Type>().value(i).into()),
        A::Float64 => Scalar::Float(array.as_primitive::<Float64Type>().value(i)),
        A::Decimal32(_, s) => Scalar::Decimal {
            unscaled: array.as_primitive::<Decimal32Type>().value(i).into(),
            scale: *s,
        },
        A::Decimal64(_, s) => Scalar::Decimal {
            unscaled: array.as_primitive::<Decimal64Type>().value(i).into(),
            scale: *s,
        },
        A::Decimal128(_, s) => Scalar::Decimal {
            unscaled: array.as_primitive::<Decimal128Type>().value(i),
            scale: *s,
        },
        A::Utf8 => Scalar::Str(array.as_string::<i32>().value(i)),
        A::LargeUtf8 => Scalar::Str(array.as_string::<i64>().value(i)),
        A::Utf8View => Scalar::Str(array.as_string_view().value(i)),
        A::Binary => Scalar::Bytes(array.as_binary::<i32>().value(i)),
        A::LargeBinary => Scalar::Bytes(array.as_binary::<i64>().value(i)),
        A::BinaryView => Scalar::Bytes(array.as_binary_view().value(i)),
        A::FixedSizeBinary(_) => Scalar::Bytes(array.as_fixed_size_binary().value(i)),
        A::Date32 => Scalar::Date(array.as_primitive::<Date32Type>().value(i)),
        A::Date64 => {
            let ms = array.as_primitive::<Date64Type>().value(i);
            Scalar::Date(i32::try_from(ms.div_euclid(86_400_000)).map_err(|_| "date out of range")?)
        }
        A::Timestamp(unit, _) => {
            let (v, per) = match unit {
                TimeUnit::Second => (
                    array.as_primitive::<TimestampSecondType>().value(i),
                    1_000_000_000,
                ),
                TimeUnit::Millisecond => (
                    array.as_primitive::<TimestampMillisecondType>().value(i),
                    1_000_000,
                ),
                TimeUnit::Microsecond => (
                    array.as_primitive::<TimestampMicrosecondType>().value(i),
                    1_000,
                ),
                TimeUnit::Nanosecond => {
                    (array.as_primitive::<TimestampNanosecondType>().value(i), 1)
                }
            };
            Scalar::Instant(i128::from(v) * per)
        }
        A::Time32(TimeUnit::Second) => Scalar::Time(
            i64::from(array.as_primitive::<Time32SecondType>().value(i)) * 1_000_000_000,
        ),
        A::Time32(_) => Scalar::Time(
            i64::from(array.as_primitive::<Time32MillisecondType>().value(i)) * 1_000_000,
        ),
        A::Time64(TimeUnit::Microsecond) => {
            Scalar::Time(array.as_primitive::<Time64MicrosecondType>().value(i) * 1_000)
        }
        A::Time64(_) => Scalar::Time(array.as_primitive::<Time64NanosecondType>().value(i)),
        other => return Err(format!("values of type {other} are not supported")),
    })
}

fn fit(s: Scalar<'_>, t: &DataType, fmt: &DateTimeFormat) -> Conv<Value> {
    match t {
        DataType::TinyInt => {
            int_in(s, t).and_then(|v| i8::try_from(v).map(Value::TinyInt).map_err(|_| range(v, t)))
        }
        DataType::SmallInt => int_in(s, t).and_then(|v| {
            i16::try_from(v)
                .map(Value::SmallInt)
                .map_err(|_| range(v, t))
        }),
        DataType::Int => {
            int_in(s, t).and_then(|v| i32::try_from(v).map(Value::Int).map_err(|_| range(v, t)))
        }
        DataType::BigInt => {
            int_in(s, t).and_then(|v| i64::try_from(v).map(Value::BigInt).map_err(|_| range(v, t)))
        }
        DataType::Double => float_in(s, t).map(Value::Double),
        DataType::Float => float_in(s, t).map(|f| Value::Float(f as f32)),
        DataType::Boolean => match s {
            Scalar::Bool(b) => Ok(Value::Boolean(b)),
            Scalar::Int(0) => Ok(Value::Boolean(false)),
            Scalar::Int(1) => Ok(Value::Boolean(true)),
            Scalar::Str(x) => match x.trim().to_ascii_lowercase().as_str() {
                "true" | "1" => Ok(Value::Boolean(true)),
                "false" | "0" => Ok(Value::Boolean(false)),
                _ => Err(format!("text `{}` is not a boolean", clip(x))),
            },
            other => Err(mismatch(&other, t)),
        },
        DataType::Decimal(d) => {
            let value = match s {
                Scalar::Decimal { unscaled, scale } => rescale(unscaled, scale, d.scale())?,
                Scalar::Int(v) => Decimal::from_unscaled(v, 0),
                Scalar::Float(f) if f.is_finite() => {
                    Decimal::parse(&f.to_string()).map_err(|e| e.to_string())?
                }
                Scalar::Str(x) => Decimal::parse(x.trim())
                    .map_err(|_| format!("text `{}` is not a decimal", clip(x)))?,
                other => return Err(mismatch(&other, t)),
            };
            let max = usize::from(d.precision() - d.scale());
            if value.integer_digits() > max {
                return Err(format!(
                    "decimal {value} does not fit {t} ({max} integer digits at most)"
                ));
            }
            Ok(Value::Decimal(value))
        }
        DataType::String | DataType::Varchar(_) | DataType::Char(_) => {
            let text = match s {
                Scalar::Str(x) => x.to_owned(),
                Scalar::Bytes(b) => std::str::from_utf8(b)
                    .map_err(|_| "binary value is not utf-8 text".to_owned())?
                    .to_owned(),
                Scalar::Int(v) => v.to_string(),
                Scalar::Float(f) => f.to_string(),
                Scalar::Bool(b) => b.to_string(),
                Scalar::Decimal { unscaled, scale } => decimal_text(unscaled, scale)?,
                Scalar::Date(d) => date_of(d)?.format("%Y-%m-%d").to_string(),
                Scalar::Instant(ns) => fmt.format(instant_of(ns)?),
                Scalar::Time(ns) => time_text(ns),
            };
            let limit = match t {
                DataType::Varchar(n) | DataType::Char(n) => Some(*n),
                _ => None,
            };
            if let Some(n) = limit {
                let chars = text.chars().count();
                if chars > n as usize {
                    return Err(format!("text of {chars} characters exceeds {t}"));
                }
            }
            Ok(Value::String(text))
        }
        DataType::Binary => match s {
            Scalar::Bytes(b) => Ok(Value::Binary(b.to_vec())),
            Scalar::Str(x) => Ok(Value::Binary(x.as_bytes().to_vec())),
            other => Err(mismatch(&other, t)),
        },
        DataType::Json => match s {
            Scalar::Str(x) => serde_json::from_str::<serde_json::Value>(x)
                .map(|_| Value::Json(x.to_owned()))
                .map_err(|_| format!("text `{}` is not valid json", clip(x))),
            Scalar::Int(v) => Ok(Value::Json(v.to_string())),
            Scalar::Float(f) if f.is_finite() => Ok(Value::Json(f.to_string())),
            Scalar::Bool(b) => Ok(Value::Json(b.to_string())),
            other => Err(mismatch(&other, t)),
        },
        DataType::Date => match s {
            Scalar::Date(d) => Ok(Value::Date(d)),
            Scalar::Instant(ns) => {
                let days = ns.div_euclid(86_400_000_000_000);
                i32::try_from(days)
                    .map(Value::Date)
                    .map_err(|_| "date out of range".to_owned())
            }
            Scalar::Str(x) => {
                let ns = parse_instant(x, fmt)?;
                let days = ns.div_euclid(86_400_000_000_000);
                i32::try_from(days)
                    .map(Value::Date)
                    .map_err(|_| "date out of range".to_owned())
            }
            other => Err(mismatch(&other, t)),
        },
        DataType::DateTime | DataType::Timestamp | DataType::TimestampNtz => {
            let ns = match s {
                Scalar::Instant(ns) => ns,
                Scalar::Date(d) => i128::from(d) * 86_400_000_000_000,
                Scalar::Str(x) => parse_instant(x, fmt)?,
                other => return Err(mismatch(&other, t)),
            };
            if matches!(t, DataType::DateTime) {
                let ms = i64::try_from(ns.div_euclid(1_000_000))
                    .map_err(|_| "timestamp out of range".to_owned())?;
                Ok(Value::DateTime(ms))
            } else {
                let ns = i64::try_from(ns).map_err(|_| "timestamp out of range".to_owned())?;
                Ok(Value::Timestamp(Timestamp::from_epoch_nanos(ns)))
            }
        }
        _ => Err(format!("columns of type {t} are not supported")),
    }
}

fn clip(s: &str) -> String {
    if s.chars().count() > 40 {
        format!("{}…", s.chars().take(40).collect::<String>())
    } else {
        s.to_owned()
    }
}

fn scalar_name(s: &Scalar<'_>) -> &'static str {
    match s {
        Scalar::Bool(_) => "boolean",
        Scalar::Int(_) => "integer",
        Scalar::Float(_) => "floating-point",
        Scalar::Decimal { .. } => "decimal",
        Scalar::Str(_) => "text",
        Scalar::Bytes(_) => "binary",
        Scalar::Date(_) => "date",
        Scalar::Instant(_) => "timestamp",
        Scalar::Time(_) => "time",
    }
}

fn mismatch(s: &Scalar<'_>, t: &DataType) -> String {
    format!("a {} value does not fit type {t}", scalar_name(s))
}

fn range(v: i128, t: &DataType) -> String {
    format!("{v} is out of range for {t}")
}

fn int_in(s: Scalar<'_>, t: &DataType) -> Conv<i128> {
    match s {
        Scalar::Int(v) => Ok(v),
        Scalar::Float(f) if f.is_finite() && f.fract() == 0.0 && f.abs() < 1.7e38 => Ok(f as i128),
        Scalar::Decimal { unscaled, scale } => {
            if scale <= 0 {
                let p = 10i128
                    .checked_pow(u32::from(scale.unsigned_abs()))
                    .ok_or_else(|| "decimal out of range".to_owned())?;
                unscaled
                    .checked_mul(p)
                    .ok_or_else(|| "decimal out of range".to_owned())
            } else {
                let p = 10i128.pow(u32::from(scale as u8).min(38));
                if unscaled % p == 0 {
                    Ok(unscaled / p)
                } else {
                    Err(format!(
                        "decimal {} is not an integer",
                        decimal_text(unscaled, scale)?
                    ))
                }
            }
        }
        Scalar::Str(x) => x
            .trim()
            .parse::<i128>()
            .map_err(|_| format!("text `{}` is not an integer", clip(x))),
        other => Err(mismatch(&other, t)),
    }
}

fn float_in(s: Scalar<'_>, t: &DataType) -> Conv<f64> {
    match s {
        Scalar::Float(f) => Ok(f),
        Scalar::Int(v) => Ok(v as f64),
        Scalar::Decimal { unscaled, scale } => decimal_text(unscaled, scale)?
            .parse()
            .map_err(|_| "decimal is not a number".to_owned()),
        Scalar::Str(x) => x
            .trim()
            .parse()
            .map_err(|_| format!("text `{}` is not a number", clip(x))),
        other => Err(mismatch(&other, t)),
    }
}

fn decimal_text(unscaled: i128, scale: i8) -> Conv<String> {
    if scale >= 0 {
        Ok(Decimal::from_unscaled(unscaled, scale as u32).to_string())
    } else {
        let p = 10i128
            .checked_pow(u32::from(scale.unsigned_abs()))
            .and_then(|p| unscaled.checked_mul(p))
            .ok_or_else(|| "decimal out of range".to_owned())?;
        Ok(p.to_string())
    }
}

/// `unscaled × 10^-scale` at `target` fraction digits, rounding half away from zero.
fn rescale(unscaled: i128, scale: i8, target: u8) -> Conv<Decimal> {
    let target_i = i16::from(target);
    let scale_i = i16::from(scale);
    let v = if scale_i <= target_i {
        let p = 10i128
            .checked_pow((target_i - scale_i) as u32)
            .ok_or_else(|| "decimal out of range".to_owned())?;
        unscaled
            .checked_mul(p)
            .ok_or_else(|| "decimal out of range".to_owned())?
    } else {
        let p = 10i128
            .checked_pow((scale_i - target_i) as u32)
            .ok_or_else(|| "decimal out of range".to_owned())?;
        let (q, r) = (unscaled / p, unscaled % p);
        if r.unsigned_abs() * 2 >= p.unsigned_abs() {
            q + unscaled.signum()
        } else {
            q
        }
    };
    Ok(Decimal::from_unscaled(v, u32::from(target)))
}

fn date_of(days: i32) -> Conv<NaiveDate> {
    NaiveDate::from_ymd_opt(1970, 1, 1)
        .and_then(|e| e.checked_add_signed(chrono::Duration::days(i64::from(days))))
        .ok_or_else(|| "date out of range".to_owned())
}

fn instant_of(ns: i128) -> Conv<DateTime<Utc>> {
    let ns = i64::try_from(ns).map_err(|_| "timestamp out of range".to_owned())?;
    Ok(DateTime::from_timestamp_nanos(ns))
}

fn time_text(ns: i64) -> String {
    let secs = ns.div_euclid(1_000_000_000);
    let frac = ns.rem_euclid(1_000_000_000);
    let base = format!(
        "{:02}:{:02}:{:02}",
        secs / 3600,
        (secs / 60) % 60,
        secs % 60
    );
    if frac == 0 {
        base
    } else {
        format!("{base}.{:06}", frac / 1000)
    }
}

/// Nanoseconds since the epoch of a text timestamp (naive text is UTC).
fn parse_instant(x: &str, fmt: &DateTimeFormat) -> Conv<i128> {
    let x = x.trim();
    let naive = fmt
        .parse_text(x)
        .or_else(|| DateTime::parse_from_rfc3339(x).ok().map(|d| d.naive_utc()))
        .or_else(|| NaiveDateTime::parse_from_str(x, "%Y-%m-%d %H:%M:%S%.f").ok())
        .or_else(|| NaiveDateTime::parse_from_str(x, "%Y-%m-%dT%H:%M:%S%.f").ok())
        .or_else(|| {
            NaiveDate::parse_from_str(x, "%Y-%m-%d")
                .ok()
                .and_then(|d| d.and_hms_opt(0, 0, 0))
        })
        .ok_or_else(|| format!("text `{}` is not a date or time", clip(x)))?;
    naive
        .and_utc()
        .timestamp_nanos_opt()
        .map(i128::from)
        .ok_or_else(|| "timestamp out of range".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::{Decimal128Array, Int64Array, StringArray, TimestampMicrosecondArray};
    use arrow_schema::Field;

    fn schema(cols: &[(&str, &str)]) -> TableSchema {
        TableSchema::from_type_strings(cols.iter().copied()).unwrap()
    }

    #[test]
    fn bad_values_are_reported_per_row_and_the_rest_converts() {
        let target = schema(&[
            ("id", "bigint"),
            ("amount", "decimal(5,2)"),
            ("tag", "varchar(3)"),
            ("ts", "string"),
            ("missing", "string"),
        ]);
        let arrow = Schema::new(vec![
            Field::new("ID", ArrowType::Utf8, true),
            Field::new("amount", ArrowType::Decimal128(10, 3), true),
            Field::new("tag", ArrowType::Utf8, true),
            Field::new(
                "ts",
                ArrowType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
                true,
            ),
        ]);
        let batch = RecordBatch::try_new(
            Arc::new(arrow.clone()),
            vec![
                Arc::new(StringArray::from(vec![
                    Some("1"),
                    Some("x2"),
                    Some("3"),
                    None,
                ])),
                Arc::new(
                    Decimal128Array::from(vec![Some(12_345), Some(1), Some(123_456_789), Some(5)])
                        .with_precision_and_scale(10, 3)
                        .unwrap(),
                ),
                Arc::new(StringArray::from(vec![
                    Some("ab"),
                    Some("abc"),
                    Some("a"),
                    Some("abcd"),
                ])),
                Arc::new(
                    TimestampMicrosecondArray::from(vec![
                        Some(1_736_929_845_000_000),
                        None,
                        None,
                        None,
                    ])
                    .with_timezone("UTC"),
                ),
            ],
        )
        .unwrap();
        let conv = BatchConverter::new(&target, &arrow, "yyyy/MM/dd HH:mm:ss").unwrap();
        let out = conv.convert(&batch).unwrap();
        assert_eq!(out.rows.len(), 1);
        let (i, row) = &out.rows[0];
        assert_eq!(*i, 0);
        assert_eq!(row[0], Value::BigInt(1));
        assert_eq!(row[1], Value::Decimal(Decimal::parse("12.35").unwrap()));
        assert_eq!(row[3], Value::String("2025/01/15 08:30:45".into()));
        assert_eq!(row[4], Value::Null);
        let errors: Vec<String> = out.errors.iter().map(ToString::to_string).collect();
        assert_eq!(
            errors,
            [
                "row 1 column `id`: text `x2` is not an integer",
                "row 2 column `amount`: decimal 123456.79 does not fit decimal(5,2) (3 integer digits at most)",
                "row 3 column `tag`: text of 4 characters exceeds varchar(3)",
            ]
        );
        let mut enc = BlockEncoder::new(&target);
        let errs = conv.encode_batch(&batch, &mut enc).unwrap();
        assert_eq!(errs.len(), 3);
        assert_eq!(enc.record_count(), 1);
    }

    #[test]
    fn impossible_mappings_fail_when_planned() {
        let target = TableSchema::new(vec![
            floe_tunnel_codec::Column::new("id", DataType::BigInt).not_null(),
        ])
        .unwrap();
        let e = BatchConverter::new(&target, &Schema::empty(), "yyyy-MM-dd HH:mm:ss").unwrap_err();
        assert!(e.to_string().contains("`id` is not null"), "{e}");
        let list = Schema::new(vec![Field::new(
            "id",
            ArrowType::List(Field::new_list_field(ArrowType::Int64, true).into()),
            true,
        )]);
        let e = BatchConverter::new(&schema(&[("id", "bigint")]), &list, "yyyy-MM-dd").unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Unsupported);
        let ints = Schema::new(vec![Field::new("n", ArrowType::Int64, true)]);
        let batch = RecordBatch::try_new(
            Arc::new(ints.clone()),
            vec![Arc::new(Int64Array::from(vec![Some(300), Some(-5)]))],
        )
        .unwrap();
        let conv = BatchConverter::new(&schema(&[("n", "tinyint")]), &ints, "yyyy-MM-dd").unwrap();
        let out = conv.convert(&batch).unwrap();
        assert_eq!(out.rows[0].1, vec![Value::TinyInt(-5)]);
        assert_eq!(out.errors[0].message, "300 is out of range for tinyint");
    }
}
