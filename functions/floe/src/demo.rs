//! `floe demo`: sample objects in a local folder, the pipeline run on them, and what landed.

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use floe_core::{Error, Result};

use crate::cli::DemoArgs;

const CONFIG: &str = r#"# floe demo: a local folder plays the bucket; tables land in a local Iceberg warehouse with a
# SQLite catalog (pyiceberg reads it: SqlCatalog("floe", uri="sqlite:///<abs>/catalog.db",
# warehouse="file://<abs>/warehouse")). Rerun with: floe run --config demo/floe.toml
# Paths are relative to this file.

[source]
type = "local"
folder = "bucket"
bucket = "demo-bucket"

[iceberg]
catalog.type = "sql"
catalog.uri = "catalog.db"
catalog.warehouse = "warehouse"

[checkpoint]
type = "sqlite"
path = "checkpoint.db"

[dead-letter]
path = "dead-letter"

# Application events (NDJSON, some gzipped): a declared schema, partitioned by day.
[[routes]]
name = "events"
prefix = "events/"
table = "demo.events"
schema = "schemas/events.json"
partition-by = ["day(ts)"]
on-error = "dead-letter"

# Orders (CSV): the schema is inferred from the first file.
[[routes]]
name = "orders"
prefix = "orders/"
table = "demo.orders"

# To land a route in MaxCompute as well, add `targets = ["iceberg", "maxcompute"]` to it and:
# [maxcompute]
# endpoint = "https://service.cn-hangzhou.maxcompute.aliyun.com/api"
# project = "my_project"
# table_name = "${table_name}"   # credentials: ALIBABA_CLOUD_ACCESS_KEY_ID / _SECRET

# Everything else: one metadata row per object change (the OSS CDC connector's fixed schema).
[[routes]]
name = "objects"
table = "demo.objects"
mode = "metadata"
"#;

const EVENTS_SCHEMA: &str = r#"{
  "iceberg": {
    "schema": {
      "fields": [
        {"name": "id", "type": "long", "required": true},
        {"name": "ts", "type": "timestamptz", "required": true},
        {"name": "level", "type": "string"},
        {"name": "user", "type": "struct<id:long,name:string>"},
        {"name": "amount", "type": "double"},
        {"name": "tags", "type": "list<string>"},
        {"name": "message", "type": "string"}
      ]
    }
  }
}
"#;

fn write(path: &Path, bytes: &[u8]) -> Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| {
            Error::from(e).while_doing(format!("failed to create {}", dir.display()))
        })?;
    }
    std::fs::write(path, bytes)
        .map_err(|e| Error::from(e).while_doing(format!("failed to write {}", path.display())))
}

fn events(day: u32, start: i64, n: i64) -> String {
    let levels = ["info", "warn", "error", "debug"];
    let mut out = String::new();
    for i in start..start + n {
        out.push_str(&format!(
            "{{\"id\": {i}, \"ts\": \"2025-01-{day:02}T{:02}:{:02}:00Z\", \"level\": \"{}\", \"user\": {{\"id\": {}, \"name\": \"user-{}\"}}, \"amount\": {}, \"tags\": [\"t{}\"], \"message\": \"event {i}\"}}\n",
            i % 24,
            (i * 7) % 60,
            levels[(i % 4) as usize],
            i % 5,
            i % 5,
            if i % 6 == 0 { "null".to_string() } else { format!("{}.5", i * 3) },
            i % 3
        ));
    }
    out
}

/// Make the sample objects (only those missing).
fn make_samples(dir: &Path) -> Result<usize> {
    let bucket = dir.join("bucket");
    let mut made = 0;
    let mut put = |rel: &str, bytes: Vec<u8>| -> Result<()> {
        let path = bucket.join(rel);
        if !path.exists() {
            write(&path, &bytes)?;
            made += 1;
        }
        Ok(())
    };
    let mut day15 = events(15, 1, 20);
    day15.push_str(
        "{\"id\": 21, \"ts\": \"2025-01-15T23:00:00Z\", \"level\": \"info\"  -- a truncated line\n",
    );
    day15.push_str("{\"id\": \"twenty-two\", \"ts\": \"2025-01-15T23:30:00Z\"}\n");
    put("events/2025/01/15/app-01.ndjson", day15.into_bytes())?;
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(events(16, 100, 30).as_bytes())
        .map_err(|e| Error::from(e).while_doing("failed to gzip sample events"))?;
    let gz = gz
        .finish()
        .map_err(|e| Error::from(e).while_doing("failed to gzip sample events"))?;
    put("events/2025/01/16/app-02.ndjson.gz", gz)?;
    put(
        "orders/2025-01/orders.csv",
        b"order_id,customer,amount,ordered_at\n1001,alice,19.99,2025-01-15T10:00:00Z\n1002,bob,5.00,2025-01-15T11:30:00Z\n".to_vec(),
    )?;
    put(
        "orders/2025-02/orders.csv",
        b"order_id,customer,amount,ordered_at\n1003,carol,not-a-price,2025-02-01T12:00:00Z\n1004,\"dave, jr\",42.10,2025-02-02T09:15:00Z\n".to_vec(),
    )?;
    put(
        "nested/a/b/readme.txt",
        b"floe demo: a file that only lands as metadata\n".to_vec(),
    )?;
    put("nested/a/b/c/logo.bin", (0u8..=255).collect())?;
    put(
        "nested/top level file with spaces.txt",
        b"spaces and all\n".to_vec(),
    )?;
    Ok(made)
}

/// `floe demo`.
pub async fn demo(args: DemoArgs) -> Result<ExitCode> {
    let dir = &args.dir;
    if args.reset && dir.exists() {
        std::fs::remove_dir_all(dir).map_err(|e| {
            Error::from(e).while_doing(format!("failed to remove {}", dir.display()))
        })?;
    }
    let config_path = dir.join("floe.toml");
    if !config_path.exists() {
        write(&config_path, CONFIG.as_bytes())?;
    }
    let schema_path = dir.join("schemas/events.json");
    if !schema_path.exists() {
        write(&schema_path, EVENTS_SCHEMA.as_bytes())?;
    }
    let made = make_samples(dir)?;
    println!(
        "demo folder: {} ({made} sample objects written)",
        dir.display()
    );
    println!("running: floe run --config {}\n", config_path.display());
    let pipeline = crate::run::open(&config_path).await?;
    let report = pipeline.run_once(true).await?;
    crate::output::print_report(&report);
    println!();
    let tables = floe_iceberg::all_tables(pipeline.catalog().as_ref()).await?;
    for t in &tables {
        crate::tables::describe(pipeline.catalog().as_ref(), t, 5).await?;
        println!();
    }
    print_dead_letters(&pipeline).await?;
    println!(
        "\nnext: add or change files under {}/bucket and run `floe run --config {}` again; `floe tables show demo.events --config {}` shows a table.",
        dir.display(),
        config_path.display(),
        config_path.display()
    );
    println!(
        "to land them in MaxCompute too: add a [maxcompute] section (endpoint, project, table_name; credentials from ALIBABA_CLOUD_ACCESS_KEY_ID / _SECRET) and `targets = [\"iceberg\", \"maxcompute\"]` to a route; see the README."
    );
    Ok(ExitCode::SUCCESS)
}

/// The last few dead-letter files, a few letters each (`floe dead-letters list` shows all).
async fn print_dead_letters(pipeline: &floe_pipeline::Pipeline) -> Result<()> {
    let store = pipeline.dead_letters().as_ref();
    let files = floe_pipeline::deadletter::list_files(store).await?;
    println!(
        "dead letters ({} files in {}):",
        files.len(),
        pipeline.config().dead_letter.location()
    );
    for meta in files.iter().rev().take(3) {
        let f = floe_pipeline::deadletter::read_file(store, &meta.key).await?;
        for l in f.letters.iter().take(5) {
            println!(
                "  {} line {}: {}",
                l.key,
                l.line.map_or("-".into(), |n| n.to_string()),
                l.reason
            );
        }
    }
    Ok(())
}
