//! Record encoding throughput on a representative mixed schema, for `bench/tunnel_encode.sh`.
//!
//! `encode_bench [ROWS] [OUT]`: builds ROWS rows (default 200000) deterministically, encodes them
//! into one block a few times, prints the best rate as `records_per_sec=…`, and writes the block
//! to OUT. The rows follow the recipe `bench/tunnel_encode_pyodps.py` follows, and the block is
//! written in pyodps's C-writer checksum style, so the two outputs must be identical bytes.

use std::time::Instant;

use floe_tunnel_codec::{
    BlockEncoder, ChecksumVarint, Decimal, Error, Result, TableSchema, Timestamp, Value,
};

/// The schema both benchmarks use.
const SCHEMA: &[(&str, &str)] = &[
    ("id", "bigint"),
    ("user_id", "bigint"),
    ("score", "double"),
    ("flag", "boolean"),
    ("name", "string"),
    ("created", "datetime"),
    ("ts", "timestamp"),
    ("amount", "decimal(18,4)"),
    ("payload", "binary"),
    ("tags", "array<bigint>"),
];

/// splitmix64, the same generator as the Python script's.
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

/// Row `i`, drawing from `g` in a fixed order (the Python script draws in the same order).
fn row(i: u64, g: &mut SplitMix) -> Result<Vec<Value>> {
    let user_id = (g.next() % 1_000_000_000) as i64;
    let score = (g.next() % 1_000_000) as f64 / 1000.0;
    let flag = g.next() & 1 == 1;
    let n = g.next() % 100_000;
    let name = format!("user_{n}_{}", "x".repeat((n % 16) as usize));
    let created = 1_736_929_845_123 + (g.next() % 86_400_000) as i64 - 43_200_000;
    let ts_secs = 1_736_929_845 + (g.next() % 1_000_000) as i64;
    let ts_nanos = (g.next() % 1_000_000_000) as u32;
    let unscaled = (g.next() % 1_000_000_000_000) as i128 - 500_000_000_000;
    let payload: Vec<u8> = [g.next(), g.next()]
        .iter()
        .flat_map(|w| w.to_le_bytes())
        .collect();
    let tag_count = g.next() % 4;
    let tags = (0..tag_count)
        .map(|_| Value::BigInt((g.next() % 1000) as i64))
        .collect();
    Ok(vec![
        Value::BigInt(i as i64),
        Value::BigInt(user_id),
        if i % 7 == 3 {
            Value::Null
        } else {
            Value::Double(score)
        },
        Value::Boolean(flag),
        if i.is_multiple_of(10) {
            Value::Null
        } else {
            Value::String(name)
        },
        Value::DateTime(created),
        Value::Timestamp(Timestamp::new(ts_secs, ts_nanos)?),
        Value::Decimal(Decimal::from_unscaled(unscaled, 4)),
        Value::Binary(payload),
        Value::Array(tags),
    ])
}

fn main() -> Result<()> {
    let mut args = std::env::args().skip(1);
    let rows_n: u64 = match args.next() {
        Some(a) => a
            .parse()
            .map_err(|_| Error::invalid_input(format!("ROWS must be a number, got `{a}`")))?,
        None => 200_000,
    };
    let out = args.next();

    let schema = TableSchema::from_type_strings(SCHEMA.iter().copied())?;
    let mut g = SplitMix(0x0f10e);
    let rows = (0..rows_n)
        .map(|i| row(i, &mut g))
        .collect::<Result<Vec<_>>>()?;

    let mut encoder = BlockEncoder::new(&schema).with_checksum_varint(ChecksumVarint::SignExtended);
    let mut best = f64::INFINITY;
    for _ in 0..5 {
        encoder.reset();
        let start = Instant::now();
        for r in &rows {
            encoder.write_record(r)?;
        }
        encoder.finish();
        best = best.min(start.elapsed().as_secs_f64());
    }
    let block = encoder.finish();
    println!(
        "rust: {rows_n} records, {} bytes, best of 5 {:.1} ms",
        block.len(),
        best * 1e3
    );
    println!("records_per_sec={:.0}", rows_n as f64 / best);
    if let Some(path) = out {
        std::fs::write(&path, block)?;
    }
    Ok(())
}
