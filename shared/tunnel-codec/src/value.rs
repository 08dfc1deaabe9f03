//! Values of a record: one [`Value`] per column, in schema order, [`Value::Null`] for a null.
//!
//! A variant may serve several column types with the same representation: [`Value::String`] fills
//! `string`, `varchar(n)` and `char(n)` columns, and [`Value::Timestamp`] fills `timestamp` and
//! `timestamp_ntz`. Integers are strict: a `bigint` column takes [`Value::BigInt`] only.

use floe_core::{Error, Result};

use crate::decimal::Decimal;

const NANOS_PER_SEC: i64 = 1_000_000_000;

/// A value of one column (or of one element of an `array`, `map` or `struct`).
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    /// No value.
    Null,
    /// `boolean`.
    Boolean(bool),
    /// `tinyint`.
    TinyInt(i8),
    /// `smallint`.
    SmallInt(i16),
    /// `int`.
    Int(i32),
    /// `bigint`.
    BigInt(i64),
    /// `float`.
    Float(f32),
    /// `double`.
    Double(f64),
    /// `decimal`.
    Decimal(Decimal),
    /// `string`, `varchar(n)`, `char(n)`.
    String(String),
    /// `binary`.
    Binary(Vec<u8>),
    /// `date`: days since 1970-01-01.
    Date(i32),
    /// `datetime`: milliseconds since the epoch.
    DateTime(i64),
    /// `timestamp`, `timestamp_ntz`.
    Timestamp(Timestamp),
    /// `interval_day_time`: total seconds (floored) and nanoseconds.
    IntervalDayTime(Timestamp),
    /// `interval_year_month`: total months.
    IntervalYearMonth(i64),
    /// `json`: the JSON text.
    Json(String),
    /// `array<T>`: elements, [`Value::Null`] for a null element.
    Array(Vec<Value>),
    /// `map<K,V>`: entries in order.
    Map(Vec<(Value, Value)>),
    /// `struct<…>`: field values in the type's field order.
    Struct(Vec<Value>),
}

impl Value {
    /// The variant's name, for error messages.
    pub fn kind_name(&self) -> &'static str {
        match self {
            Value::Null => "null",
            Value::Boolean(_) => "boolean",
            Value::TinyInt(_) => "tinyint",
            Value::SmallInt(_) => "smallint",
            Value::Int(_) => "int",
            Value::BigInt(_) => "bigint",
            Value::Float(_) => "float",
            Value::Double(_) => "double",
            Value::Decimal(_) => "decimal",
            Value::String(_) => "string",
            Value::Binary(_) => "binary",
            Value::Date(_) => "date",
            Value::DateTime(_) => "datetime",
            Value::Timestamp(_) => "timestamp",
            Value::IntervalDayTime(_) => "interval_day_time",
            Value::IntervalYearMonth(_) => "interval_year_month",
            Value::Json(_) => "json",
            Value::Array(_) => "array",
            Value::Map(_) => "map",
            Value::Struct(_) => "struct",
        }
    }

    /// Whether this is [`Value::Null`].
    pub fn is_null(&self) -> bool {
        matches!(self, Value::Null)
    }
}

/// Seconds and nanoseconds, with the seconds floored: 1969-12-31T23:59:59.5Z is `(-1, 500000000)`.
///
/// This is the record stream's form for `timestamp`, `timestamp_ntz` and `interval_day_time`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Timestamp {
    seconds: i64,
    nanos: u32,
}

impl Timestamp {
    /// `seconds` since the epoch plus `nanos` (0..1e9).
    pub fn new(seconds: i64, nanos: u32) -> Result<Self> {
        if i64::from(nanos) >= NANOS_PER_SEC {
            return Err(Error::invalid_input(format!(
                "timestamp nanos must be below 1e9, got {nanos}"
            )));
        }
        Ok(Timestamp { seconds, nanos })
    }

    /// From nanoseconds since the epoch (seconds floored, nanos non-negative).
    pub fn from_epoch_nanos(nanos: i64) -> Self {
        Timestamp {
            seconds: nanos.div_euclid(NANOS_PER_SEC),
            nanos: nanos.rem_euclid(NANOS_PER_SEC) as u32,
        }
    }

    /// From microseconds since the epoch.
    pub fn from_epoch_micros(micros: i64) -> Self {
        Timestamp {
            seconds: micros.div_euclid(1_000_000),
            nanos: (micros.rem_euclid(1_000_000) * 1000) as u32,
        }
    }

    /// From milliseconds since the epoch.
    pub fn from_epoch_millis(millis: i64) -> Self {
        Timestamp {
            seconds: millis.div_euclid(1000),
            nanos: (millis.rem_euclid(1000) * 1_000_000) as u32,
        }
    }

    /// The floored seconds.
    pub fn seconds(&self) -> i64 {
        self.seconds
    }

    /// The nanoseconds past [`Timestamp::seconds`], 0..1e9.
    pub fn nanos(&self) -> u32 {
        self.nanos
    }

    /// Nanoseconds since the epoch.
    pub fn epoch_nanos(&self) -> i128 {
        i128::from(self.seconds) * i128::from(NANOS_PER_SEC) + i128::from(self.nanos)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pre_epoch_fractions_floor_the_seconds() {
        let t = Timestamp::from_epoch_nanos(-500_000_000);
        assert_eq!((t.seconds(), t.nanos()), (-1, 500_000_000));
        let t = Timestamp::from_epoch_millis(-1);
        assert_eq!((t.seconds(), t.nanos()), (-1, 999_000_000));
        let t = Timestamp::from_epoch_micros(1_736_929_845_123_456);
        assert_eq!((t.seconds(), t.nanos()), (1_736_929_845, 123_456_000));
        assert_eq!(t.epoch_nanos(), 1_736_929_845_123_456_000);
        assert!(Timestamp::new(0, 1_000_000_000).is_err());
    }
}
