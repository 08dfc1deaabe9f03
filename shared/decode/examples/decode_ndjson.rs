//! Decode an NDJSON file with floe's streaming decoder, one thread, and print the rows and the
//! time taken: a quick way to profile the decoder alone (`cargo run --profile profiling -p
//! floe-decode --example decode_ndjson -- FILE`). The schema is `floe bench`'s.

use std::io::Read;
use std::sync::Arc;
use std::time::Instant;

use arrow_schema::{DataType, Field, Schema, TimeUnit};
use floe_decode::Names;
use floe_decode::decode::{Compression, Format, stream_decoder};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let path = std::env::args().nth(1).ok_or("usage: decode_ndjson FILE")?;
    let schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new(
            "ts",
            DataType::Timestamp(TimeUnit::Microsecond, Some("+00:00".into())),
            true,
        ),
        Field::new("user", DataType::Utf8, true),
        Field::new("level", DataType::Utf8, true),
        Field::new("amount", DataType::Float64, true),
        Field::new("ok", DataType::Boolean, true),
        Field::new("message", DataType::Utf8, true),
    ]));
    let mut decoder = stream_decoder(
        &Format::Ndjson,
        Compression::None,
        schema,
        8192,
        Names::default(),
    )?;
    let mut input = std::fs::File::open(&path)?;
    let mut chunk = vec![0u8; 1 << 20];
    let (mut rows, mut bad) = (0, 0);
    let started = Instant::now();
    loop {
        let n = input.read(&mut chunk)?;
        if n == 0 {
            decoder.finish()?;
        } else {
            decoder.push(&chunk[..n])?;
        }
        let out = decoder.take();
        rows += out.batches.iter().map(|b| b.num_rows()).sum::<usize>();
        bad += out.bad.len();
        if n == 0 {
            break;
        }
    }
    println!(
        "rows={rows} bad={bad} seconds={:.3}",
        started.elapsed().as_secs_f64()
    );
    Ok(())
}
