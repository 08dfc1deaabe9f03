//! The two tunnel formats on the same table and the same staged rows, for `make bench`:
//! `tunnel_formats [ROWS]` (default 1,000,000) converts Arrow batches of 8,192 rows (as a
//! staged Parquet file hands them over: microsecond timestamps, a decimal128, utf8 and binary)
//! into upload blocks of a ten-column table, once in the record (protobuf) format and once in
//! the Arrow format, the way a commit does (`BatchConverter::prepare`, then per row
//! `BlockEncoder::write_record`, or `ArrowBlockEncoder::write`). It prints, per format, the best
//! of three runs: rows per second, CPU seconds (user + system, from /proc/self/stat) and block
//! bytes, then the Arrow/record ratio.

use std::sync::Arc;
use std::time::Instant;

use arrow_array::{
    ArrayRef, BinaryArray, BooleanArray, Date32Array, Decimal128Array, Float64Array, Int64Array,
    RecordBatch, StringArray, TimestampMicrosecondArray,
};
use arrow_schema::{DataType as ArrowType, Field, Schema, TimeUnit};
use floe_maxcompute::{ArrowBlockEncoder, BatchConverter};
use floe_tunnel_codec::{BlockEncoder, TableSchema};

const BATCH: usize = 8192;

/// splitmix64: deterministic data.
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

fn table() -> TableSchema {
    TableSchema::from_type_strings([
        ("id", "bigint"),
        ("user_id", "bigint"),
        ("score", "double"),
        ("flag", "boolean"),
        ("name", "string"),
        ("created", "datetime"),
        ("ts", "timestamp"),
        ("amount", "decimal(18,4)"),
        ("payload", "binary"),
        ("day", "date"),
    ])
    .expect("schema")
}

fn batch(first: u64, rows: usize, g: &mut SplitMix) -> RecordBatch {
    let schema = Schema::new(vec![
        Field::new("id", ArrowType::Int64, false),
        Field::new("user_id", ArrowType::Int64, true),
        Field::new("score", ArrowType::Float64, true),
        Field::new("flag", ArrowType::Boolean, true),
        Field::new("name", ArrowType::Utf8, true),
        Field::new(
            "created",
            ArrowType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
            true,
        ),
        Field::new(
            "ts",
            ArrowType::Timestamp(TimeUnit::Microsecond, None),
            true,
        ),
        Field::new("amount", ArrowType::Decimal128(18, 4), true),
        Field::new("payload", ArrowType::Binary, true),
        Field::new("day", ArrowType::Date32, true),
    ]);
    let ids: Vec<i64> = (first..first + rows as u64).map(|i| i as i64).collect();
    let users: Vec<i64> = (0..rows)
        .map(|_| (g.next() % 1_000_000_000) as i64)
        .collect();
    let scores: Vec<Option<f64>> = (0..rows)
        .map(|i| (i % 7 != 3).then(|| (g.next() % 1_000_000) as f64 / 1000.0))
        .collect();
    let flags: Vec<bool> = (0..rows).map(|_| g.next() & 1 == 1).collect();
    let names: Vec<Option<String>> = (0..rows)
        .map(|i| {
            let n = g.next() % 100_000;
            (i % 10 != 0).then(|| format!("user_{n}_{}", "x".repeat((n % 16) as usize)))
        })
        .collect();
    let created: Vec<i64> = (0..rows)
        .map(|_| 1_736_929_845_123_000 + (g.next() % 86_400_000_000) as i64)
        .collect();
    let ts: Vec<i64> = (0..rows)
        .map(|_| 1_736_929_845_000_000 + (g.next() % 1_000_000_000_000) as i64)
        .collect();
    let amounts: Vec<i128> = (0..rows)
        .map(|_| (g.next() % 1_000_000_000_000) as i128 - 500_000_000_000)
        .collect();
    let payloads: Vec<Vec<u8>> = (0..rows)
        .map(|_| {
            [g.next(), g.next()]
                .iter()
                .flat_map(|w| w.to_le_bytes())
                .collect()
        })
        .collect();
    let days: Vec<i32> = (0..rows)
        .map(|_| 20_000 + (g.next() % 365) as i32)
        .collect();
    let columns: Vec<ArrayRef> = vec![
        Arc::new(Int64Array::from(ids)),
        Arc::new(Int64Array::from(users)),
        Arc::new(Float64Array::from(scores)),
        Arc::new(BooleanArray::from(flags)),
        Arc::new(StringArray::from(names)),
        Arc::new(TimestampMicrosecondArray::from(created).with_timezone("UTC")),
        Arc::new(TimestampMicrosecondArray::from(ts)),
        Arc::new(
            Decimal128Array::from(amounts)
                .with_precision_and_scale(18, 4)
                .expect("decimal"),
        ),
        Arc::new(BinaryArray::from_iter_values(payloads)),
        Arc::new(Date32Array::from(days)),
    ];
    RecordBatch::try_new(Arc::new(schema), columns).expect("batch")
}

/// CPU seconds (user + system) of this process so far.
fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the command name (which may hold spaces): utime is the 14th field overall.
    let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    // `after` starts at field 3 (state): utime is field 14 → index 11, stime 15 → 12.
    (ticks(11) + ticks(12)) / 100.0
}

/// Encode every batch into blocks of one format; returns block bytes.
fn run(schema: &TableSchema, conv: &BatchConverter, batches: &[RecordBatch], arrow: bool) -> usize {
    let mut bytes = 0;
    // One block per 16 batches (about 131k rows, a staged row group's worth).
    for group in batches.chunks(16) {
        if arrow {
            let mut enc = ArrowBlockEncoder::new(schema).expect("arrow encoder");
            for b in group {
                let prepared = conv.prepare(b).expect("prepare");
                let bad = enc.write(&prepared, &mut |_| None).expect("arrow write");
                assert!(bad.is_empty(), "{bad:?}");
            }
            bytes += enc.finish().len();
        } else {
            let mut enc = BlockEncoder::new(schema);
            let mut row = Vec::new();
            for b in group {
                let prepared = conv.prepare(b).expect("prepare");
                for i in 0..prepared.num_rows() {
                    prepared.row(i, &mut row).expect("row");
                    enc.write_record(&row).expect("record");
                }
            }
            bytes += enc.finish().len();
        }
    }
    bytes
}

fn main() {
    let rows: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(1_000_000);
    let schema = table();
    let mut g = SplitMix(42);
    let batches: Vec<RecordBatch> = (0..rows.div_ceil(BATCH))
        .map(|k| {
            let n = BATCH.min(rows - k * BATCH);
            batch((k * BATCH) as u64, n, &mut g)
        })
        .collect();
    let conv = BatchConverter::new(&schema, &batches[0].schema(), "yyyy-MM-dd HH:mm:ss")
        .expect("converter");
    let mut results = Vec::new();
    for (name, arrow) in [("record", false), ("arrow", true)] {
        let mut best: Option<(f64, f64, usize)> = None;
        for _ in 0..3 {
            let (cpu0, t0) = (cpu_seconds(), Instant::now());
            let bytes = run(&schema, &conv, &batches, arrow);
            let (wall, cpu) = (t0.elapsed().as_secs_f64(), cpu_seconds() - cpu0);
            if best.is_none_or(|(w, ..)| wall < w) {
                best = Some((wall, cpu, bytes));
            }
        }
        let (wall, cpu, bytes) = best.expect("three runs");
        println!(
            "tunnel {name:>6}: {rows} rows in {wall:.3} s = {:.0} rows/s, cpu {cpu:.2} s, blocks {bytes} bytes",
            rows as f64 / wall
        );
        results.push((wall, cpu));
    }
    let (record, arrow) = (results[0], results[1]);
    println!(
        "tunnel arrow/record: {:.2}x rows/s, {:.2}x less cpu",
        record.0 / arrow.0,
        if arrow.1 > 0.0 {
            record.1 / arrow.1
        } else {
            f64::NAN
        }
    );
}
