//! `floe bench-maintain`: what `floe maintain` does for a table a serverless writer made.
//!
//! A local folder source and the embedded SQL catalog; `--commits` micro-commits into one
//! table (each one pass: one new object of `--rows` rows, and every tenth pass an overwrite of
//! an earlier object, so position deletes pile up as well), then `floe maintain` with expiry of
//! everything but the current snapshot. Before and after: data files, delete files, snapshots,
//! and the median time of a full-table scan with pyiceberg (`bench/scan_time.py`). Printed with
//! the ratios; the rows read must be the same.

use std::path::Path;
use std::process::{Command, ExitCode};
use std::time::{Duration, Instant};

use floe_core::{Error, Result};
use floe_pipeline::targets::maintain::MaintainOptions;
use floe_pipeline::{FloeConfig, Pipeline};
use futures::TryStreamExt;

use crate::cli::BenchMaintainArgs;

fn io(what: &str) -> impl Fn(std::io::Error) -> Error + '_ {
    move |e| Error::unexpected(format!("{what}: {e}"))
}

/// Files, delete files and snapshots of the table's current state.
async fn shape(p: &Pipeline, table: &str) -> Result<(usize, usize, usize)> {
    let ident = floe_iceberg::parse_ident(table)?;
    let t = floe_iceberg::load_table(p.catalog().as_ref(), &ident)
        .await?
        .ok_or_else(|| Error::unexpected("the table is gone"))?;
    let tasks: Vec<_> = (t.scan().build().map_err(floe_iceberg::from_iceberg)?)
        .plan_files()
        .await
        .map_err(floe_iceberg::from_iceberg)?
        .try_collect()
        .await
        .map_err(floe_iceberg::from_iceberg)?;
    let deletes: std::collections::BTreeSet<&str> = (tasks.iter())
        .flat_map(|t| t.deletes.iter().map(|d| d.file_path.as_str()))
        .collect();
    Ok((tasks.len(), deletes.len(), t.metadata().snapshots().count()))
}

/// pyiceberg's full scan: (rows, median seconds).
fn scan_time(python: &Path, dir: &Path, table: &str) -> Result<(u64, f64)> {
    let out = Command::new(python)
        .arg("bench/scan_time.py")
        .arg("--uri")
        .arg(format!("sqlite:///{}", dir.join("catalog.db").display()))
        .arg("--warehouse")
        .arg(format!("file://{}", dir.join("warehouse").display()))
        .args(["--table", table, "--runs", "5"])
        .output()
        .map_err(io("running bench/scan_time.py"))?;
    if !out.status.success() {
        return Err(Error::unexpected(format!(
            "bench/scan_time.py failed: {}",
            String::from_utf8_lossy(&out.stderr)
        )));
    }
    let v: serde_json::Value = serde_json::from_slice(&out.stdout)
        .map_err(|e| Error::unexpected(format!("bench/scan_time.py said: {e}")))?;
    Ok((
        v["rows"].as_u64().unwrap_or(0),
        v["median_s"].as_f64().unwrap_or(f64::NAN),
    ))
}

fn object(dir: &Path, n: usize, version: usize, rows: usize) -> Result<()> {
    let text: String = (0..rows)
        .map(|i| format!("{{\"object\":{n},\"version\":{version},\"i\":{i},\"payload\":\"row {i} of object {n}\"}}\n"))
        .collect();
    std::fs::write(dir.join(format!("bucket/o{n:05}.ndjson")), text)
        .map_err(io("writing an object"))
}

pub async fn bench_maintain(args: BenchMaintainArgs) -> Result<ExitCode> {
    let dir = std::path::absolute(&args.dir).map_err(io("the bench folder"))?;
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("bucket")).map_err(io("the bench folder"))?;
    let config = dir.join("floe.toml");
    std::fs::write(
        &config,
        "[source]\ntype = \"local\"\nfolder = \"bucket\"\n\n\
         [iceberg]\ncatalog.type = \"sql\"\ncatalog.uri = \"catalog.db\"\ncatalog.warehouse = \"warehouse\"\n\n\
         [checkpoint]\npath = \"checkpoint.db\"\n\n\
         [[routes]]\ntable = \"bench.micro\"\n",
    )
    .map_err(io("writing the configuration"))?;
    let p = Pipeline::builder(FloeConfig::load(&config)?)
        .build()
        .await?;
    let table = "bench.micro";
    let started = Instant::now();
    for n in 0..args.commits {
        // Every tenth commit also overwrites an earlier object (its old rows deleted by
        // position in the same snapshot).
        object(&dir, n, 1, args.rows)?;
        if n % 10 == 9 {
            // The local folder's version is the file's time: let it move on.
            tokio::time::sleep(Duration::from_millis(2)).await;
            object(&dir, n / 2, 2, args.rows)?;
        }
        let report = p.run_once(true).await?;
        if !report.failures().is_empty() {
            return Err(Error::unexpected(format!(
                "commit {n}: {:?}",
                report.failures()
            )));
        }
    }
    let writing = started.elapsed();
    let before = shape(&p, table).await?;
    let (rows_before, scan_before) = scan_time(&args.python, &dir, table)?;
    let started = Instant::now();
    let done = p
        .maintain(
            &[table.to_owned()],
            &MaintainOptions {
                compact: true,
                expire_older_than: Some(Duration::ZERO),
                keep_snapshots: 1,
                // The benchmark's files are all the table's own, and nothing else writes.
                remove_orphans_older_than: Some(Duration::ZERO),
            },
        )
        .await?;
    let maintaining = started.elapsed();
    let after = shape(&p, table).await?;
    let (rows_after, scan_after) = scan_time(&args.python, &dir, table)?;
    println!(
        "maintain: {} micro-commits of {} rows in {:.1?}, then floe maintain in {:.1?}: {:?}",
        args.commits, args.rows, writing, maintaining, done[0]
    );
    println!("{:<28} {:>10} {:>10} {:>8}", "", "before", "after", "ratio");
    let line = |what: &str, b: f64, a: f64| {
        let ratio = if a > 0.0 {
            format!("{:.1}x", b / a)
        } else {
            "-".into()
        };
        println!("{what:<28} {b:>10.3} {a:>10.3} {ratio:>8}");
    };
    line("data files", before.0 as f64, after.0 as f64);
    line("delete files", before.1 as f64, after.1 as f64);
    line("snapshots", before.2 as f64, after.2 as f64);
    line("pyiceberg full scan, s", scan_before, scan_after);
    println!("rows read: {rows_before} before, {rows_after} after");
    if rows_before != rows_after {
        return Err(Error::unexpected(
            "maintenance changed the rows a scan reads",
        ));
    }
    Ok(ExitCode::SUCCESS)
}
