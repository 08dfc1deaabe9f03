//! `floe bench`: the same generated data through floe and through the baselines, in one run.
//!
//! Cases:
//! - one large NDJSON object (default 1 GiB): `floe run` (one process: scan, decode, write,
//!   commit), the one-thread floor with its decode and encode CPU apart (floe's decoder into a
//!   Parquet writer, no Iceberg: `floe bench-raw`), and pyarrow + pyiceberg
//!   (`bench/pyiceberg_baseline.py`);
//! - one batch of 500 small NDJSON objects: `floe run` and pyiceberg, process start included;
//! - where the small objects' time goes: their run and one over a single object of the same
//!   bytes, phase by phase from each run's own log, and what each object adds to each phase
//!   ([`phases`]);
//! - the per-object cost: `floe run` over 500 and over 50,000 objects of 1 KiB, less a run over
//!   an empty folder (process start, catalog and checkpoint open; median of three), per object.
//!
//! Each case runs `--runs` rounds (default 3), the tools one after the other in each round, and
//! its figures are medians over the rounds: on a shared host the machine's speed drifts from
//! minute to minute, and one run of each tool would compare two different machines.
//!
//! Every run is a child process; wall time is measured here, peak memory is the child's own
//! high-water mark (VmHWM / getrusage) as it reports it.

use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::sync::Arc;
use std::time::Instant;

use floe_core::{Error, Result};

use crate::cli::{BenchArgs, BenchRawArgs};

mod phases;

const SCHEMA: &str = r#"{"iceberg":{"schema":{"fields":[
  {"name":"id","type":"long","required":true},
  {"name":"ts","type":"timestamptz"},
  {"name":"user","type":"string"},
  {"name":"level","type":"string"},
  {"name":"amount","type":"double"},
  {"name":"ok","type":"boolean"},
  {"name":"message","type":"string"}
]}}}"#;

fn io(what: &str) -> impl Fn(std::io::Error) -> Error + '_ {
    move |e| Error::from(e).while_doing(what.to_owned())
}

/// Write `bytes` of NDJSON records starting at id `first`; returns the rows written.
fn generate(path: &Path, bytes: u64, first: u64) -> Result<u64> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(io("failed to create bench data folder"))?;
    }
    let file = std::fs::File::create(path).map_err(io("failed to create bench data"))?;
    let mut w = BufWriter::with_capacity(1 << 20, file);
    let levels = ["info", "warn", "error", "debug"];
    let words = [
        "alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel",
    ];
    let (mut written, mut id) = (0u64, first);
    while written < bytes {
        let msg: Vec<&str> = (0..6)
            .map(|k| words[((id >> k) as usize + k) % words.len()])
            .collect();
        let line = format!(
            "{{\"id\":{id},\"ts\":\"2025-01-{:02}T{:02}:{:02}:{:02}.{:03}Z\",\"user\":\"user-{}\",\"level\":\"{}\",\"amount\":{}.{:02},\"ok\":{},\"message\":\"{}\"}}\n",
            1 + id % 28,
            id % 24,
            id % 60,
            (id / 60) % 60,
            id % 1000,
            id % 10_007,
            levels[(id % 4) as usize],
            id % 100_000,
            id % 100,
            id % 3 != 0,
            msg.join(" ")
        );
        w.write_all(line.as_bytes())
            .map_err(io("failed to write bench data"))?;
        written += line.len() as u64;
        id += 1;
    }
    w.flush().map_err(io("failed to write bench data"))?;
    Ok(id - first)
}

struct Measured {
    wall_s: f64,
    peak_kb: u64,
    rows: u64,
    /// What the child printed, for figures of its own (`decode_s=`, `encode_s=`).
    text: String,
}

impl Measured {
    /// A `name=<seconds>` figure the child printed (0 when it printed none).
    fn seconds(&self, name: &str) -> f64 {
        self.text
            .split_whitespace()
            .find_map(|w| w.strip_prefix(name))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0.0)
    }
}

/// Run a child, returning its wall time and the `peak_rss_kb=` / `rows=` it printed.
fn measure(mut cmd: Command, label: &str) -> Result<Measured> {
    let start = Instant::now();
    let out = cmd
        .output()
        .map_err(io("failed to start a benchmark process"))?;
    let wall_s = start.elapsed().as_secs_f64();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    if !out.status.success() {
        return Err(Error::unexpected(format!(
            "{label} failed ({}):\n{text}",
            out.status
        )));
    }
    let field = |name: &str| -> u64 {
        text.split_whitespace()
            .find_map(|w| w.strip_prefix(name))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    Ok(Measured {
        wall_s,
        peak_kb: field("peak_rss_kb="),
        rows: field("rows="),
        text,
    })
}

/// A run's configuration in `dir`, reading `folder`. The folder is written absolute: relative
/// paths in a configuration are taken from its own folder, not from the working directory the
/// bench was given its `--dir` in.
fn floe_config(dir: &Path, folder: &Path) -> Result<PathBuf> {
    std::fs::create_dir_all(dir).map_err(io("failed to create bench run folder"))?;
    let folder = std::path::absolute(folder).map_err(io("failed to resolve the data folder"))?;
    std::fs::write(dir.join("schema.json"), SCHEMA).map_err(io("failed to write bench schema"))?;
    let config = format!(
        "[source]\ntype = \"local\"\nfolder = \"{}\"\n\n[iceberg]\ncatalog.uri = \"catalog.db\"\ncatalog.warehouse = \"warehouse\"\n\n[[routes]]\ntable = \"bench.events\"\nschema = \"schema.json\"\nformat = \"ndjson\"\n",
        folder.display()
    );
    let path = dir.join("floe.toml");
    std::fs::write(&path, config).map_err(io("failed to write bench config"))?;
    Ok(path)
}

fn fresh(dir: &Path) -> Result<()> {
    if dir.exists() {
        std::fs::remove_dir_all(dir).map_err(io("failed to clear a bench run folder"))?;
    }
    Ok(())
}

fn run_floe(exe: &Path, dir: &Path, folder: &Path) -> Result<Measured> {
    fresh(dir)?;
    let config = floe_config(dir, folder)?;
    let mut cmd = Command::new(exe);
    cmd.args(["run", "--config"])
        .arg(&config)
        .env("FLOE_PEAK_RSS", "1")
        .env_remove("FLOE_FAULT");
    measure(cmd, "floe run")
}

fn run_python(python: &Path, script: &Path, dir: &Path, files: &[PathBuf]) -> Result<Measured> {
    fresh(dir)?;
    let mut cmd = Command::new(python);
    cmd.arg(script)
        .arg("--warehouse")
        .arg(dir)
        .args(["--table", "bench.events"])
        .args(files);
    measure(cmd, "pyiceberg baseline")
}

fn row(case: &str, tool: &str, m: &Measured, bytes: u64, floe: &Measured) {
    let mib = bytes as f64 / (1 << 20) as f64;
    println!(
        "{case:<22} {tool:<26} {:>9.2} s {:>9.1} MiB/s {:>9.1} MiB peak   time x{:<6.2} memory x{:.2}",
        m.wall_s,
        mib / m.wall_s,
        m.peak_kb as f64 / 1024.0,
        m.wall_s / floe.wall_s,
        m.peak_kb as f64 / floe.peak_kb.max(1) as f64
    );
}

/// `floe bench`.
pub async fn bench(args: BenchArgs) -> Result<ExitCode> {
    let exe = std::env::current_exe().map_err(io("failed to find the floe executable"))?;
    let root = args.dir.clone();
    let script = args.script.clone();
    let data = root.join("data");
    let big = data.join("big/events.ndjson");
    let big_bytes = args.size_mib << 20;
    if std::fs::metadata(&big)
        .map(|m| m.len() < big_bytes)
        .unwrap_or(true)
    {
        println!(
            "generating {} MiB of NDJSON in {}",
            args.size_mib,
            big.display()
        );
        generate(&big, big_bytes, 0)?;
    }
    let big_bytes = std::fs::metadata(&big)
        .map_err(io("failed to stat bench data"))?
        .len();
    let small_dir = data.join("small");
    let small = objects(&small_dir, args.small, args.small_kib)?;
    let small_bytes: u64 = small
        .iter()
        .filter_map(|p| std::fs::metadata(p).ok())
        .map(|m| m.len())
        .sum();
    // Every run reads the data from the page cache: the first run must not be the one that
    // pays for reading it from disk.
    for path in std::iter::once(&big).chain(&small) {
        warm(path)?;
    }
    println!(
        "floe bench: {} ({} MiB), {} objects of {} KiB; every run a fresh process and table\n",
        big.display(),
        big_bytes >> 20,
        small.len(),
        args.small_kib
    );

    // Rounds of every run, one after the other, so that a machine whose speed drifts (a
    // shared host) weighs on each tool alike; each figure is the median over the rounds.
    let folder = big.parent().map(Path::to_path_buf).unwrap_or_default();
    let raw_out = root.join("runs/raw.parquet");
    // Per case, one run a round: floe and the floor on the large object, floe on the small
    // ones, and the baseline on each when there is a python.
    let (mut floe_bigs, mut raws, mut py_bigs, mut floe_smalls, mut py_smalls) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for round in 0..args.runs {
        if args.runs > 1 {
            println!("round {} of {}", round + 1, args.runs);
        }
        floe_bigs.push(run_floe(&exe, &root.join("runs/floe-big"), &folder)?);
        let mut cmd = Command::new(&exe);
        cmd.arg("bench-raw")
            .arg(&big)
            .arg(&raw_out)
            .env("FLOE_PEAK_RSS", "1");
        raws.push(measure(cmd, "one-thread floor")?);
        py_bigs.extend(match &args.python {
            Some(py) => Some(run_python(
                py,
                &script,
                &root.join("runs/py-big"),
                std::slice::from_ref(&big),
            )?),
            None => None,
        });
        floe_smalls.push(run_floe(&exe, &root.join("runs/floe-small"), &small_dir)?);
        py_smalls.extend(match &args.python {
            Some(py) => Some(run_python(
                py,
                &script,
                &root.join("runs/py-small"),
                &small,
            )?),
            None => None,
        });
    }
    let (py_big, py_small) = (median(py_bigs), median(py_smalls));
    let (Some(floe_big), Some(raw), Some(floe_small)) =
        (median(floe_bigs), median(raws), median(floe_smalls))
    else {
        return Err(Error::unexpected("the benchmark made no runs"));
    };
    println!(
        "\n{:<22} {:<26} {:>11} {:>15} {:>14}   ratios to floe (medians of {} rounds)",
        "case", "run", "wall", "throughput", "memory", args.runs
    );
    row(
        "1 large object",
        "floe run",
        &floe_big,
        big_bytes,
        &floe_big,
    );
    row(
        "1 large object",
        "decode+parquet, 1 thread",
        &raw,
        big_bytes,
        &floe_big,
    );
    if let Some(m) = &py_big {
        row(
            "1 large object",
            "pyarrow + pyiceberg",
            m,
            big_bytes,
            &floe_big,
        );
    }
    let small_case = format!("{} small objects", small.len());
    row(
        &small_case,
        "floe run",
        &floe_small,
        small_bytes,
        &floe_small,
    );
    if let Some(m) = &py_small {
        row(
            &small_case,
            "pyarrow + pyiceberg",
            m,
            small_bytes,
            &floe_small,
        );
    }

    // The two-core limit: decoding on one core while encoding on the other, so floe's wall time
    // can not beat the larger of the two CPU figures, measured one after the other by bench-raw.
    let (decode_s, encode_s) = (raw.seconds("decode_s="), raw.seconds("encode_s="));
    let limit = decode_s.max(encode_s);
    println!();
    println!(
        "targets: large object: decode CPU {decode_s:.2} s, encode CPU {encode_s:.2} s (floe's \
         decoder, the writer's Parquet settings, one thread); floe's wall / max of the two \
         {:.2}x (target <= 1.15x)",
        floe_big.wall_s / limit.max(f64::MIN_POSITIVE)
    );
    // However the work is split, two cores can not beat the two stages' CPU shared out evenly
    // over them: the tighter bound, since decoding runs on both cores. Shown beside the
    // target's, which it does not replace.
    let shared = (decode_s + encode_s) / 2.0;
    println!(
        "         large object: both stages shared over two cores, (decode + encode) / 2 = \
         {shared:.2} s; floe's wall / that {:.2}x",
        floe_big.wall_s / shared.max(f64::MIN_POSITIVE)
    );
    if let Some(m) = &py_big {
        println!(
            "         large object: pyiceberg / floe time {:.2}x (target >= 2.5x), rows {} vs {}",
            m.wall_s / floe_big.wall_s,
            m.rows,
            raw.rows
        );
    }
    println!(
        "         peak memory of floe on the large object: {:.1} MiB (target <= 64 MiB)",
        floe_big.peak_kb as f64 / 1024.0
    );
    if let Some(m) = &py_small {
        println!(
            "         {} objects: pyiceberg / floe time {:.2}x (target >= 20x)",
            small.len(),
            m.wall_s / floe_small.wall_s
        );
    }
    println!(
        "         {} objects: {:.0} us per object, process start included",
        small.len(),
        floe_small.wall_s * 1e6 / small.len().max(1) as f64
    );
    phases::per_object_phases(&exe, &root, &small, args.runs)?;
    if args.flat > 0 {
        per_object_cost(&exe, &root, args.small, args.flat, args.flat_kib)?;
    }
    Ok(ExitCode::SUCCESS)
}

/// The run of median wall time among `runs`, its `decode_s=` / `encode_s=` figures replaced
/// by their own medians (`None` without runs).
fn median(mut runs: Vec<Measured>) -> Option<Measured> {
    if runs.is_empty() {
        return None;
    }
    let figure = |runs: &[Measured], name: &str| {
        let mut v: Vec<f64> = runs.iter().map(|m| m.seconds(name)).collect();
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let (decode, encode) = (figure(&runs, "decode_s="), figure(&runs, "encode_s="));
    runs.sort_by(|a, b| a.wall_s.total_cmp(&b.wall_s));
    let mut mid = runs.swap_remove(runs.len() / 2);
    // First, so that `seconds` finds them before the run's own.
    mid.text = format!("decode_s={decode} encode_s={encode} {}", mid.text);
    Some(mid)
}

/// Read `path` through, so that it is in the page cache.
fn warm(path: &Path) -> Result<()> {
    let mut file = std::fs::File::open(path).map_err(io("failed to open bench data"))?;
    std::io::copy(&mut file, &mut std::io::sink()).map_err(io("failed to read bench data"))?;
    Ok(())
}

/// `n` generated objects of `kib` KiB in `dir` (made once, reused).
fn objects(dir: &Path, n: usize, kib: u64) -> Result<Vec<PathBuf>> {
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        let p = dir.join(format!("obj-{i:06}.ndjson"));
        if !p.exists() {
            generate(&p, kib << 10, i as u64 * 1_000_000)?;
        }
        out.push(p);
    }
    Ok(out)
}

/// The per-object cost at `few` and at `many` objects of `kib` KiB: each run's wall time less
/// that of a run over an empty folder, per object; flat when the two agree.
fn per_object_cost(exe: &Path, root: &Path, few: usize, many: usize, kib: u64) -> Result<()> {
    let data = root.join("data");
    let empty = data.join("flat-empty");
    std::fs::create_dir_all(&empty).map_err(io("failed to create bench data folder"))?;
    // The median of three: one empty run is a few milliseconds, and a slow first one (a cold
    // page cache) would be charged to the objects.
    let mut empties = (0..3)
        .map(|_| run_floe(exe, &root.join("runs/floe-flat-empty"), &empty))
        .collect::<Result<Vec<_>>>()?;
    empties.sort_by(|a, b| a.wall_s.total_cmp(&b.wall_s));
    let base = empties.swap_remove(1);
    let mut cost = Vec::new();
    for n in [few, many] {
        let dir = data.join(format!("flat-{n}"));
        objects(&dir, n, kib)?;
        let m = run_floe(exe, &root.join(format!("runs/floe-flat-{n}")), &dir)?;
        if !m.text.contains(&format!("landed: {n} objects")) {
            return Err(Error::unexpected(format!(
                "the {n}-object run did not land its {n} objects:\n{}",
                m.text
            )));
        }
        let us = (m.wall_s - base.wall_s).max(0.0) * 1e6 / n.max(1) as f64;
        println!(
            "         per-object cost, {n} objects of {kib} KiB: {us:.0} us per object \
             ({:.2} s, less {:.2} s for an empty run; {:.1} MiB peak)",
            m.wall_s,
            base.wall_s,
            m.peak_kb as f64 / 1024.0
        );
        cost.push(us);
    }
    println!(
        "         per-object cost at {many} / at {few} objects: {:.2}x (target: flat, <= 1.2x)",
        cost[1] / cost[0].max(f64::MIN_POSITIVE)
    );
    Ok(())
}

/// `floe bench-raw`: the floor of the large-object case, one thread, no Iceberg: floe's own
/// NDJSON decoder (what `floe run` decodes with: the typed reader, arrow-json for what it
/// declines) into a Parquet writer with the table writer's settings (the same
/// `writer_properties`: zstd 1, 131,072-row groups, 256 KiB dictionaries). It prints the CPU time of each of the two (the thread's own, so that other work on
/// the machine does not count): floe decodes and encodes on two cores at once, so the larger of
/// the two is the limit of its wall time.
pub async fn bench_raw(args: BenchRawArgs) -> Result<ExitCode> {
    use std::io::Read;
    let schema = floe_decode::TableSchema::from_json(SCHEMA)?;
    let iceberg = floe_iceberg::schema::to_iceberg_schema(&schema)?;
    let arrow = Arc::new(
        iceberg::arrow::schema_to_arrow_schema(&iceberg).map_err(floe_iceberg::from_iceberg)?,
    );
    let props = floe_iceberg::writer_properties(&floe_iceberg::WriterOptions::default())?;
    let out = std::fs::File::create(&args.output).map_err(io("failed to create the output"))?;
    let mut writer = parquet::arrow::ArrowWriter::try_new(out, arrow.clone(), Some(props))
        .map_err(|e| Error::unexpected(e.to_string()))?;
    let mut input = std::fs::File::open(&args.input).map_err(io("failed to open the input"))?;
    let mut decoder = floe_decode::decode::stream_decoder(
        &floe_decode::decode::Format::Ndjson,
        floe_decode::decode::Compression::None,
        arrow,
        8192,
        floe_decode::Names::default(),
    )?;
    let (mut decode, mut encode) = (std::time::Duration::ZERO, std::time::Duration::ZERO);
    let mut chunk = vec![0u8; 1 << 20];
    let mut rows = 0;
    let mut done = false;
    let clock = ThreadClock::new();
    while !done {
        let started = clock.now();
        let n = input
            .read(&mut chunk)
            .map_err(io("failed to read the input"))?;
        if n == 0 {
            decoder.finish()?;
            done = true;
        } else {
            decoder.push(&chunk[..n])?;
        }
        let out = decoder.take();
        decode += clock.now() - started;
        let started = clock.now();
        for batch in &out.batches {
            rows += batch.num_rows();
            writer
                .write(batch)
                .map_err(|e| Error::unexpected(e.to_string()))?;
        }
        encode += clock.now() - started;
    }
    let started = clock.now();
    writer
        .close()
        .map_err(|e| Error::unexpected(e.to_string()))?;
    encode += clock.now() - started;
    println!(
        "rows={rows} decode_s={:.3} encode_s={:.3}",
        decode.as_secs_f64(),
        encode.as_secs_f64()
    );
    Ok(ExitCode::SUCCESS)
}

/// The calling thread's CPU time (Linux: `/proc/thread-self/schedstat`, time on a CPU as the
/// scheduler counts it, brought up to date at each tick and switch), or wall time where that
/// cannot be read. bench-raw runs on one thread without awaiting, so its figures
/// are CPU seconds even while other work shares the cores.
struct ThreadClock {
    wall: Instant,
    cpu: bool,
}

impl ThreadClock {
    fn new() -> Self {
        ThreadClock {
            wall: Instant::now(),
            cpu: Self::cpu_ns().is_some(),
        }
    }

    fn cpu_ns() -> Option<u64> {
        std::fs::read_to_string("/proc/thread-self/schedstat")
            .ok()?
            .split_whitespace()
            .next()?
            .parse()
            .ok()
    }

    fn now(&self) -> std::time::Duration {
        match self.cpu.then(Self::cpu_ns).flatten() {
            Some(ns) => std::time::Duration::from_nanos(ns),
            None => self.wall.elapsed(),
        }
    }
}

/// The process's peak resident memory in KiB (Linux), for the benchmark.
pub fn peak_rss_kb() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;
    use floe_pipeline::FloeConfig;

    /// `make bench` runs with the default `--dir bench-data`, a relative path, and each run's
    /// configuration sits in a folder of its own: the source folder must still be the one the
    /// bench made (a configuration's relative paths are taken from its own folder).
    #[test]
    fn a_run_reads_the_folder_given_relative_to_the_working_directory() {
        let runs = tempfile::tempdir().unwrap();
        let config = floe_config(&runs.path().join("run"), Path::new("src")).unwrap();
        let loaded = FloeConfig::load(&config).unwrap();
        let folder = match &loaded.source {
            floe_pipeline::config::SourceConfig::Local { folder, .. } => folder.clone(),
            other => panic!("not a local source: {other:?}"),
        };
        assert_eq!(folder, Path::new("src").canonicalize().unwrap());
    }
}
