//! proptest strategies shared by the round-trip and robustness tests: random MaxCompute types
//! (nested `array`/`map`/`struct` included) and random records of them, nulls included.

#![allow(dead_code)]

use floe_tunnel_codec::{Column, DataType, Decimal, StructField, TableSchema, Timestamp, Value};
use proptest::collection::vec;
use proptest::prelude::*;
use proptest::test_runner::{Config, RngSeed, TestRunner};

/// A runner with a fixed seed, so every run tries the same cases.
pub fn seeded_runner(cases: u32, seed: u64) -> TestRunner {
    TestRunner::new(Config {
        cases,
        rng_seed: RngSeed::Fixed(seed),
        failure_persistence: None,
        ..Config::default()
    })
}

fn leaf_type() -> impl Strategy<Value = DataType> {
    prop_oneof![
        Just(DataType::TinyInt),
        Just(DataType::SmallInt),
        Just(DataType::Int),
        Just(DataType::BigInt),
        Just(DataType::Float),
        Just(DataType::Double),
        (1u8..=38)
            .prop_flat_map(|p| (Just(p), 0..=p.min(18)))
            .prop_map(|(p, s)| DataType::decimal(p, s).unwrap()),
        Just("decimal".parse().unwrap()),
        Just(DataType::Boolean),
        Just(DataType::String),
        (1u32..=12).prop_map(DataType::Varchar),
        (1u32..=12).prop_map(DataType::Char),
        Just(DataType::Binary),
        Just(DataType::Date),
        Just(DataType::DateTime),
        Just(DataType::Timestamp),
        Just(DataType::TimestampNtz),
        Just(DataType::IntervalDayTime),
        Just(DataType::IntervalYearMonth),
        Just(DataType::Json),
    ]
}

/// Any type, nested up to three levels.
pub fn any_type() -> impl Strategy<Value = DataType> {
    leaf_type().prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            inner.clone().prop_map(DataType::array),
            (inner.clone(), inner.clone()).prop_map(|(k, v)| DataType::map(k, v)),
            vec(inner, 1..4).prop_map(|types| DataType::Struct(
                types
                    .into_iter()
                    .enumerate()
                    .map(|(i, t)| StructField::new(format!("f{i}"), t))
                    .collect()
            )),
        ]
    })
}

fn text(max_chars: usize) -> BoxedStrategy<String> {
    vec(any::<char>(), 0..=max_chars)
        .prop_map(String::from_iter)
        .boxed()
}

fn finite(f: f64) -> f64 {
    if f.is_nan() { 0.0 } else { f }
}

/// A non-null value of `t`.
pub fn value_of(t: &DataType) -> BoxedStrategy<Value> {
    match t {
        DataType::TinyInt => any::<i8>().prop_map(Value::TinyInt).boxed(),
        DataType::SmallInt => any::<i16>().prop_map(Value::SmallInt).boxed(),
        DataType::Int => any::<i32>().prop_map(Value::Int).boxed(),
        DataType::BigInt => any::<i64>().prop_map(Value::BigInt).boxed(),
        DataType::Float => any::<f32>()
            .prop_map(|f| Value::Float(if f.is_nan() { 0.0 } else { f }))
            .boxed(),
        DataType::Double => any::<f64>().prop_map(|f| Value::Double(finite(f))).boxed(),
        DataType::Decimal(d) => {
            let (p, s) = (u32::from(d.precision().min(38)), u32::from(d.scale()));
            let bound = 10i128.pow(p); // unscaled values of p digits at most
            (any::<i128>(), any::<bool>())
                .prop_map(move |(x, small)| {
                    let x = if small { x % 1000 % bound } else { x % bound };
                    Value::Decimal(Decimal::from_unscaled(x, s))
                })
                .boxed()
        }
        DataType::Boolean => any::<bool>().prop_map(Value::Boolean).boxed(),
        DataType::String => text(16).prop_map(Value::String).boxed(),
        DataType::Varchar(n) | DataType::Char(n) => {
            text(*n as usize).prop_map(Value::String).boxed()
        }
        DataType::Json => text(16).prop_map(Value::Json).boxed(),
        DataType::Binary => vec(any::<u8>(), 0..24).prop_map(Value::Binary).boxed(),
        DataType::Date => any::<i32>().prop_map(Value::Date).boxed(),
        DataType::DateTime => any::<i64>().prop_map(Value::DateTime).boxed(),
        DataType::Timestamp | DataType::TimestampNtz => (any::<i64>(), 0u32..1_000_000_000)
            .prop_map(|(s, n)| Value::Timestamp(Timestamp::new(s, n).unwrap()))
            .boxed(),
        DataType::IntervalDayTime => (any::<i64>(), 0u32..1_000_000_000)
            .prop_map(|(s, n)| Value::IntervalDayTime(Timestamp::new(s, n).unwrap()))
            .boxed(),
        DataType::IntervalYearMonth => any::<i64>().prop_map(Value::IntervalYearMonth).boxed(),
        DataType::Array(e) => vec(nullable(e), 0..4).prop_map(Value::Array).boxed(),
        DataType::Map(k, v) => vec((nullable(k), nullable(v)), 0..4)
            .prop_map(Value::Map)
            .boxed(),
        DataType::Struct(fields) => fields
            .iter()
            .map(|f| nullable(&f.data_type))
            .collect::<Vec<_>>()
            .prop_map(Value::Struct)
            .boxed(),
    }
}

/// A value of `t`, null one time in five.
pub fn nullable(t: &DataType) -> BoxedStrategy<Value> {
    prop_oneof![1 => Just(Value::Null), 4 => value_of(t)].boxed()
}

/// A schema of 1..6 columns and up to `max_rows` rows of it.
pub fn schema_and_rows(max_rows: usize) -> impl Strategy<Value = (TableSchema, Vec<Vec<Value>>)> {
    vec(any_type(), 1..6).prop_flat_map(move |types| {
        let schema = TableSchema::new(
            types
                .iter()
                .enumerate()
                .map(|(i, t)| Column::new(format!("c{i}"), t.clone()))
                .collect(),
        )
        .unwrap();
        let row: Vec<BoxedStrategy<Value>> = types.iter().map(nullable).collect();
        (Just(schema), vec(row, 0..=max_rows))
    })
}
