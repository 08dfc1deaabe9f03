//! The soak: several floe instances at once on the real stand-ins, killed at random moments
//! while objects keep arriving and being overwritten, must land every object version exactly
//! once (or not at all, when a newer version overtook it).
//!
//! ```text
//!  writer ── PUT soak/kNNNNN.ndjson ──▶ s3s-fs "landing" ─┐   (behind the one-request-at-a-time
//!     │      (30 % overwrite a key)                        │    front: per-key atomic, as OSS is)
//!     └──── OSS event with the PUT's ETag ──▶ MNS emulator queue (visibility 5 s)
//!                                                          │
//!  FLOE_SOAK_PROCESSES × `floe run --watch` ◀──────────────┘   each its own HOSTNAME
//!  one `floe-commit` as an FC instance, invoked every 0.5–2 s ("force": true)
//!        │ checkpoint: object-store in s3s-fs "floe-state" (same front)
//!        ▼ catalog: lakana-server (Iceberg REST), table bronze.soak
//!  killer: every 0.2–1.5 s SIGKILL one instance at random, start it again
//! ```
//!
//! Claims and commit leases run out after 3 s, so instances take over each other's work
//! during the run (an instance restarted under the same HOSTNAME also finds its predecessor's
//! pid gone). After `FLOE_SOAK_KILLS` kills the writer and the killer stop, the instances run
//! unkilled until the queue is empty, stop with Ctrl-C (committing what they staged), and
//! `floe commit` runs until nothing is left to commit. pyiceberg then reads the table: every
//! row carries `key`, `version` and `i`, and for every version written the table must hold
//! its N rows exactly once when it is the key's latest, and none when the key was overwritten
//! later (the route's `on-change = replace`, records mode's default: a new version's rows
//! replace the old ones; a version kept beside a newer one is reported as `kept`). Rows of a version
//! never written, dead letters and instances that exit on their own are reported too.
//!
//! Sizing: `FLOE_SOAK_KILLS` (default 30, about a minute), `FLOE_SOAK_PROCESSES` (default 4),
//! `FLOE_SOAK_SEED` (default: the clock; printed, so a run can be repeated). `make soak
//! KILLS=1000` runs it at size. One line sums it up:
//! `soak: runs=… kills=… processes=… … rows=… lost=0 doubled=0`. On failure the working
//! folder (instance logs, a copy of the checkpoint table) is kept and named.
//!
//! `max-deliveries` is raised to 100: a delivery cut short by a kill counts toward it, and
//! this test kills far more often than any deployment would, so the shipped 5 would set
//! messages aside by design rather than by fault.

mod common;

use std::collections::BTreeMap;
use std::fs::OpenOptions;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use base64::Engine as _;
use bytes::Bytes;
use floe_core::Provider;
use floe_signing::Credentials;
use floe_storage::{ObjectStore, PutMode, S3Store, S3StoreConfig};
use floe_testbed::functions::{FunctionDir, FunctionProcess, http_request};
use floe_testbed::mns::{MnsEmulator, MnsEmulatorConfig};
use floe_testbed::servers::{LakanaServer, Linearizer, S3sFs};
use floe_testbed::templates::sibling_binary;
use serde_json::Value;

const OWN: &str = env!("CARGO_BIN_EXE_floe");
const BUCKET: &str = "landing";
const STATE: &str = "floe-state";
const QUEUE: &str = "oss-events";
const REGION: &str = "cn-hangzhou";
const TABLE: &str = "bronze.soak";
const MNS_KEY_ID: &str = "LTAI5tFloeSoakTestKey";
const MNS_SECRET: &str = "floe-soak-test-secret-0123456789";
const VISIBILITY: Duration = Duration::from_secs(5);
/// Share of puts that overwrite an existing key with its next version.
const OVERWRITE_PERCENT: u64 = 30;
/// How long the instances get to empty the queue once the killer stops.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(600);

/// How big a soak is.
#[derive(Clone, Copy, Debug)]
struct Sizing {
    kills: u64,
    processes: usize,
    seed: u64,
}

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    match std::env::var(name) {
        Ok(v) => v
            .parse()
            .unwrap_or_else(|_| panic!("{name}={v} is not a number")),
        Err(_) => default,
    }
}

fn sizing() -> Sizing {
    let clock = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64;
    let sizing = Sizing {
        kills: env_or("FLOE_SOAK_KILLS", 30),
        processes: env_or("FLOE_SOAK_PROCESSES", 4),
        seed: env_or("FLOE_SOAK_SEED", clock),
    };
    assert!(
        sizing.processes >= 1,
        "FLOE_SOAK_PROCESSES must be at least 1"
    );
    sizing
}

/// splitmix64: enough randomness for choosing moments and victims, repeatable from a seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n`.
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    /// A duration uniform in `lo_ms..hi_ms`.
    fn millis(&mut self, lo_ms: u64, hi_ms: u64) -> Duration {
        Duration::from_millis(lo_ms + self.below(hi_ms - lo_ms))
    }
}

/// The stand-ins and the working folder every instance shares.
struct Bed {
    s3s: S3sFs,
    /// s3s-fs as the instances and the writer reach it: one request at a time, so a
    /// conditional write or a read is atomic per key as on OSS (see `Linearizer`).
    front: Linearizer,
    mns: Arc<MnsEmulator>,
    lakana: LakanaServer,
    store: S3Store,
    work: tempfile::TempDir,
}

impl Bed {
    async fn start() -> Bed {
        let s3s = S3sFs::start().await.expect("start s3s-fs");
        for b in [BUCKET, STATE] {
            s3s.create_bucket(b).unwrap();
        }
        let front = Linearizer::start(&s3s.endpoint()).await.unwrap();
        let store = S3Store::new(
            S3StoreConfig::new(Provider::Oss, BUCKET)
                .with_endpoint(front.endpoint())
                .with_region(REGION)
                .with_path_style(true)
                .with_keys(S3sFs::ACCESS_KEY_ID, S3sFs::SECRET_ACCESS_KEY, None),
        )
        .await
        .unwrap();
        let mns = MnsEmulator::start(
            MnsEmulatorConfig::new(Credentials::new(MNS_KEY_ID, MNS_SECRET))
                .with_queue(QUEUE)
                .with_visibility_timeout(VISIBILITY),
        )
        .await
        .unwrap();
        let lakana = LakanaServer::start().await.expect("start lakana-server");
        let work = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(work.path().join("logs")).unwrap();
        let bed = Bed {
            s3s,
            front,
            mns: Arc::new(mns),
            lakana,
            store,
            work,
        };
        std::fs::write(bed.dir().join("floe.toml"), bed.config()).unwrap();
        bed
    }

    fn dir(&self) -> PathBuf {
        self.work.path().canonicalize().unwrap()
    }

    /// The configuration every instance runs with: an MNS source, the checkpoint table in the
    /// state bucket, lakana as the catalog, seconds-long claims and leases.
    fn config(&self) -> String {
        format!(
            r#"
[source]
type = "mns"
endpoint = "{mns}"
region = "{REGION}"
queue-name = "{QUEUE}"
access-key-id = "{MNS_KEY_ID}"
access-key-secret = "{MNS_SECRET}"
scan.startup.mode = "EARLIEST_OFFSET"
batch-size = 16
polling-wait-time = "1s"
visibility-extension = "10s"
max-deliveries = 100
oss-bucket = "{BUCKET}"
s3.endpoint = "{front}"
s3.path-style-access = true
s3.access-key-id = "{s3_key}"
s3.secret-access-key = "{s3_secret}"

[checkpoint]
type = "object-store"
bucket = "{STATE}"

[iceberg]
catalog.type = "rest"
catalog.uri = "{catalog}"
catalog.token = "{token}"
catalog.prefix = "{prefix}"

[commit]
interval-ms = 1000
lease-ms = 3000

[ingest]
claim-timeout-ms = 3000

[dead-letter]
path = "{dead}"

[[routes]]
name = "soak"
table = "{TABLE}"
schema = '{{"fields":[{{"name":"key","type":"string","required":true}},{{"name":"version","type":"long","required":true}},{{"name":"i","type":"long","required":true}}]}}'
on-error = "dead-letter"
"#,
            mns = self.mns.endpoint(),
            front = self.front.endpoint(),
            s3_key = S3sFs::ACCESS_KEY_ID,
            s3_secret = S3sFs::SECRET_ACCESS_KEY,
            catalog = self.lakana.uri(),
            token = self.lakana.token(),
            prefix = self.lakana.prefix(),
            dead = self.dir().join("dead-letter").display(),
        )
    }

    /// The checkpoint table's entries as s3s-fs keeps them (one file per entry).
    fn checkpoint_dir(&self) -> PathBuf {
        self.s3s.root().join(STATE).join("floe/checkpoint")
    }
}

/// One version of an object as the writer put it.
#[derive(Clone, Debug)]
struct Version {
    rows: u64,
    etag: String,
}

/// What the writer put: every version of every key, and each key's latest.
#[derive(Debug, Default)]
struct Written {
    versions: BTreeMap<(String, u64), Version>,
    latest: BTreeMap<String, u64>,
    keys: Vec<String>,
}

impl Written {
    /// The next put: a new key, or (30 % of the time) the next version of an earlier one.
    fn next_put(&mut self, rng: &mut Rng) -> (String, u64) {
        if !self.keys.is_empty() && rng.below(100) < OVERWRITE_PERCENT {
            // Half the overwrites hit one of the ten newest keys, whose earlier version is
            // likely still in flight: the race between an overwrite and a read.
            let n = self.keys.len() as u64;
            let pick = if rng.below(2) == 0 {
                n - 1 - rng.below(n.min(10))
            } else {
                rng.below(n)
            };
            let key = self.keys[pick as usize].clone();
            let version = self.latest[&key] + 1;
            return (key, version);
        }
        let key = format!("soak/k{:05}.ndjson", self.keys.len());
        self.keys.push(key.clone());
        (key, 1)
    }

    fn rows(&self) -> u64 {
        self.versions.values().map(|v| v.rows).sum()
    }
}

/// Put the next object (or version) and enqueue its OSS event.
async fn put_one(bed: &Bed, written: &mut Written, rng: &mut Rng) {
    let (key, version) = written.next_put(rng);
    let rows = 1 + rng.below(8);
    let body: String = (0..rows)
        .map(|i| format!("{{\"key\":\"{key}\",\"version\":{version},\"i\":{i}}}\n"))
        .collect();
    let size = body.len() as u64;
    let etag = bed
        .store
        .put(&key, Bytes::from(body), PutMode::Overwrite)
        .await
        .unwrap()
        .expect("s3s-fs answers a put with its ETag")
        .to_ascii_uppercase();
    notify(&bed.mns, &key, &etag, size);
    written.latest.insert(key.clone(), version);
    written
        .versions
        .insert((key, version), Version { rows, etag });
}

/// Enqueue an OSS `ObjectCreated:PutObject` event naming `etag`, base64-encoded as OSS sends it.
fn notify(mns: &MnsEmulator, key: &str, etag: &str, size: u64) {
    let event = floe_testbed::mns::oss_put_event(REGION, BUCKET, key, etag, size, mns.now_ms());
    let body = base64::engine::general_purpose::STANDARD.encode(event);
    mns.send_message(QUEUE, &body).unwrap();
}

/// Put objects in bursts of 1–20, 0.1–1.5 s apart, until `stop`: a burst fills the queue so
/// that several instances hold messages when the killer strikes.
async fn write_until(bed: &Bed, mut written: Written, mut rng: Rng, stop: &AtomicBool) -> Written {
    while !stop.load(Ordering::SeqCst) {
        for _ in 0..1 + rng.below(20) {
            put_one(bed, &mut written, &mut rng).await;
        }
        tokio::time::sleep(rng.millis(100, 1500)).await;
    }
    written
}

/// What the instances went through.
#[derive(Debug, Default)]
struct FleetReport {
    /// Processes started (`floe run` and `floe-commit` instances).
    runs: u64,
    /// SIGKILLs of running processes.
    kills: u64,
    /// Processes that exited without being killed: (instance, exit status).
    exits: Vec<(String, String)>,
    /// Commit function invocations answered, and those cut short or failed.
    invocations_ok: u64,
    invocations_failed: u64,
}

/// The `floe run --watch` instances and the commit function, with everything needed to start
/// them again.
struct Fleet {
    dir: PathBuf,
    runs: Vec<Option<Child>>,
    commit_dir: FunctionDir,
    commit: Arc<Mutex<Option<FunctionProcess>>>,
    report: FleetReport,
}

impl Fleet {
    fn start(dir: PathBuf, processes: usize, config: &str) -> Fleet {
        let mut fleet = Fleet {
            dir,
            runs: (0..processes).map(|_| None).collect(),
            commit_dir: FunctionDir::new(config).unwrap(),
            commit: Arc::new(Mutex::new(None)),
            report: FleetReport::default(),
        };
        for slot in 0..processes {
            fleet.start_run(slot);
        }
        fleet.start_commit();
        fleet
    }

    /// Instances the killer chooses from: the runs, then the commit function.
    fn len(&self) -> usize {
        self.runs.len() + 1
    }

    fn log(&self, slot: usize) -> PathBuf {
        self.dir.join(format!("logs/run-{slot}.log"))
    }

    /// Start `floe run --watch` in `slot`, appending its output to `logs/run-<slot>.log`.
    fn start_run(&mut self, slot: usize) {
        self.report.runs += 1;
        let mut log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.log(slot))
            .unwrap();
        writeln!(log, "=== start {} ===", self.report.runs).unwrap();
        let child = Command::new(OWN)
            .current_dir(&self.dir)
            .args(["run", "--config", "floe.toml", "--watch"])
            .env_remove("FLOE_FAULT")
            .env("FLOE_LOG", "info")
            .env("NO_COLOR", "1")
            .env("HOSTNAME", format!("soak-run-{slot}"))
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("start floe run");
        self.runs[slot] = Some(child);
    }

    fn start_commit(&mut self) {
        self.report.runs += 1;
        let extra = [("HOSTNAME".to_owned(), "soak-commit".to_owned())];
        let process = self
            .commit_dir
            .spawn_fc(&sibling_binary(OWN, "floe-commit"), &extra)
            .expect("start floe-commit as an FC instance");
        *self.commit.lock().unwrap() = Some(process);
    }

    /// SIGKILL instance `victim` and start it again; false when it had already exited (then
    /// it is only restarted).
    fn kill_and_restart(&mut self, victim: usize) -> bool {
        if victim == self.runs.len() {
            self.stop_commit();
            self.report.kills += 1;
            self.start_commit();
            return true;
        }
        let mut child = self.runs[victim].take().expect("every slot runs");
        let killed = match child.try_wait().unwrap() {
            None => {
                child.kill().unwrap();
                child.wait().unwrap();
                true
            }
            Some(status) => {
                self.report
                    .exits
                    .push((format!("run-{victim}"), status.to_string()));
                false
            }
        };
        self.report.kills += u64::from(killed);
        self.start_run(victim);
        killed
    }

    /// Start again every `floe run` that exited on its own (a watch should not), noting why.
    fn restart_exited(&mut self) {
        for slot in 0..self.runs.len() {
            let exited = self.runs[slot].as_mut().and_then(|c| c.try_wait().unwrap());
            if let Some(status) = exited {
                self.report
                    .exits
                    .push((format!("run-{slot}"), status.to_string()));
                self.start_run(slot);
            }
        }
    }

    /// Ctrl-C every `floe run` (each commits what it staged), wait for it, then stop the commit
    /// function.
    fn stop(&mut self) {
        for child in self.runs.iter().flatten() {
            let status = Command::new("kill")
                .args(["-INT", &child.id().to_string()])
                .status()
                .unwrap();
            assert!(status.success());
        }
        for (slot, child) in self.runs.iter_mut().enumerate() {
            let mut child = child.take().unwrap();
            let deadline = Instant::now() + Duration::from_secs(60);
            let status = loop {
                if let Some(status) = child.try_wait().unwrap() {
                    break status;
                }
                if Instant::now() > deadline {
                    child.kill().unwrap();
                    break child.wait().unwrap();
                }
                std::thread::sleep(Duration::from_millis(100));
            };
            if !status.success() {
                self.report
                    .exits
                    .push((format!("run-{slot} (at Ctrl-C)"), status.to_string()));
            }
        }
        self.stop_commit();
    }

    /// SIGKILL the commit function (waited for) and keep what it logged in `logs/commit.log`
    /// (each instance's own log starts afresh).
    fn stop_commit(&mut self) {
        let Some(process) = self.commit.lock().unwrap().take() else {
            return;
        };
        let text = process.log();
        drop(process);
        let mut log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.join("logs/commit.log"))
            .unwrap();
        writeln!(log, "=== instance ===\n{text}").unwrap();
    }
}

/// Invoke the commit function every 0.5–2 s until `stop`, as its timer would (more often).
fn invoke_commits(
    commit: Arc<Mutex<Option<FunctionProcess>>>,
    stop: Arc<AtomicBool>,
    mut rng: Rng,
    ok: Arc<AtomicU64>,
    failed: Arc<AtomicU64>,
) {
    let mut n = 0u64;
    while !stop.load(Ordering::SeqCst) {
        std::thread::sleep(rng.millis(500, 2000));
        let Some(port) = commit.lock().unwrap().as_ref().and_then(|p| p.port) else {
            continue;
        };
        n += 1;
        let id = format!("soak-commit-{n}");
        let headers = [
            ("x-fc-request-id", id.as_str()),
            ("x-fc-control-path", "/invoke"),
            ("x-fc-function-timeout", "60"),
            ("content-type", "application/json"),
        ];
        let answer = http_request(port, "POST", "/invoke", &headers, br#"{"force":true}"#);
        let counter = match answer {
            Ok(a) if a.status == 200 && a.header("x-fc-status") == Some("200") => &ok,
            _ => &failed, // killed mid-invocation, or the commit failed (retried next time)
        };
        counter.fetch_add(1, Ordering::SeqCst);
    }
}

/// The run: instances started, `kills` SIGKILLs at random moments, then the queue emptied with
/// no more kills and the instances stopped. `writer_stop` is raised when the kills are done;
/// `writer_done` says the writer's last message is in the queue.
fn conduct(
    dir: PathBuf,
    config: String,
    sizing: Sizing,
    mns: Arc<MnsEmulator>,
    writer_stop: Arc<AtomicBool>,
    writer_done: Arc<AtomicBool>,
) -> FleetReport {
    let mut rng = Rng(sizing.seed ^ 0x4B49_4C4C);
    let mut fleet = Fleet::start(dir, sizing.processes, &config);
    let invoking = Arc::new(AtomicBool::new(false));
    let (ok, failed) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let invoker = {
        let (commit, stop, ok, failed) = (
            fleet.commit.clone(),
            invoking.clone(),
            ok.clone(),
            failed.clone(),
        );
        let rng = Rng(sizing.seed ^ 0x434F_4D4D);
        std::thread::spawn(move || invoke_commits(commit, stop, rng, ok, failed))
    };

    let started = Instant::now();
    while fleet.report.kills < sizing.kills {
        std::thread::sleep(rng.millis(200, 1500));
        fleet.restart_exited();
        let victim = rng.below(fleet.len() as u64) as usize;
        if fleet.kill_and_restart(victim) && fleet.report.kills.is_multiple_of(100) {
            eprintln!(
                "soak: {} kills in {:.0?}, {} messages queued",
                fleet.report.kills,
                started.elapsed(),
                mns.queue_len(QUEUE)
            );
        }
    }
    writer_stop.store(true, Ordering::SeqCst);
    while !writer_done.load(Ordering::SeqCst) {
        std::thread::sleep(Duration::from_millis(50));
    }

    // No more kills: the queue must empty.
    let drain = Instant::now();
    while mns.queue_len(QUEUE) > 0 {
        assert!(
            drain.elapsed() < DRAIN_TIMEOUT,
            "the queue still holds {} messages after {DRAIN_TIMEOUT:?} without kills; logs in {}",
            mns.queue_len(QUEUE),
            fleet.dir.display()
        );
        fleet.restart_exited();
        std::thread::sleep(Duration::from_millis(500));
    }
    eprintln!(
        "soak: queue empty {:.0?} after the last kill",
        drain.elapsed()
    );
    // A few commit intervals unkilled, so a just restarted instance has its Ctrl-C handler.
    for _ in 0..10 {
        fleet.restart_exited();
        std::thread::sleep(Duration::from_millis(500));
    }
    invoking.store(true, Ordering::SeqCst);
    invoker.join().unwrap();
    fleet.stop();
    fleet.report.invocations_ok = ok.load(Ordering::SeqCst);
    fleet.report.invocations_failed = failed.load(Ordering::SeqCst);
    fleet.report
}

/// `floe commit` until it finds nothing to commit and no other committer's lease in its way.
async fn commit_until_done(dir: &Path) -> u64 {
    for round in 1..=30 {
        let r = common::floe_async(dir, &["commit", "--config", "floe.toml"], &[]).await;
        let busy = r.stdout.contains("another committer holds") || r.stdout.contains("failed");
        let committed = r.stdout.contains("committed ");
        if r.code == 0 && !busy && !committed {
            return round;
        }
        eprintln!(
            "soak: final commit {round} (exit {}):\n{}",
            r.code, r.stdout
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    panic!("floe commit still found work after 30 rounds");
}

/// Every row of the table through the REST catalog (the reader stops at 10 000 rows unless
/// told otherwise).
fn read_all(uri: &str, token: &str, prefix: &str) -> Value {
    let args = [
        ("--rest", uri),
        ("--token", token),
        ("--prefix", prefix),
        ("--table", TABLE),
        ("--max-rows", "1000000000"),
    ];
    let args: Vec<String> = args
        .iter()
        .flat_map(|(k, v)| [k.to_string(), v.to_string()])
        .collect();
    let table = floe_testbed::pyiceberg::read_table(&args);
    let rows = table["rows"].as_array().expect("rows").len();
    assert_eq!(table["count"], rows, "the reader left rows out");
    table
}

/// How the table compares with what was written.
#[derive(Debug, Default)]
struct Verdict {
    rows: usize,
    /// Superseded versions with no rows (replaced, or skipped as stale: as it must be).
    stale: usize,
    /// Superseded versions whose rows are still in the table beside a newer version's.
    kept: Vec<String>,
    /// Latest versions without rows, and versions with some but not all of their rows.
    lost: Vec<String>,
    /// Versions with more rows than written.
    doubled: Vec<String>,
    /// Rows of a (key, version) never written.
    unknown: Vec<String>,
}

fn judge(table: &Value, written: &Written) -> Verdict {
    let rows = table["rows"].as_array().expect("rows");
    let mut counts: BTreeMap<(String, u64), u64> = BTreeMap::new();
    for r in rows {
        let key = r["key"].as_str().expect("key").to_owned();
        let version = r["version"].as_u64().expect("version");
        *counts.entry((key, version)).or_default() += 1;
    }
    let mut v = Verdict {
        rows: rows.len(),
        ..Default::default()
    };
    for ((key, version), w) in &written.versions {
        let n = counts.remove(&(key.clone(), *version)).unwrap_or(0);
        let latest = written.latest[key] == *version;
        let what = || format!("{key} v{version} ({}): {n} of {} rows", w.etag, w.rows);
        match n {
            0 if !latest => v.stale += 1,
            n if !latest && n == w.rows => v.kept.push(what()),
            n if n == w.rows => {}
            n if n > w.rows => v.doubled.push(what()),
            _ => v.lost.push(what()),
        }
    }
    v.unknown = counts
        .into_iter()
        .map(|((k, ver), n)| format!("{k} v{ver}: {n} rows"))
        .collect();
    v
}

/// The checkpoint entries naming one of `keys` (the first twenty at fault), and a count of entries per kind (`batch`,
/// `commit`, `obj`, …), for a failure's evidence.
fn checkpoint_evidence(dir: &Path, keys: &[&str]) -> String {
    let mut kinds: BTreeMap<String, usize> = BTreeMap::new();
    let mut lines = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let kind = name.split("%2F").next().unwrap_or("?").to_owned();
        *kinds.entry(kind).or_default() += 1;
        let text = std::fs::read_to_string(e.path()).unwrap_or_default();
        if keys.iter().any(|k| text.contains(k)) {
            lines.push(format!("  {name}: {text}"));
        }
    }
    format!("entries: {kinds:?}\n{}", lines.join("\n"))
}

/// How often the instances' logs mention the events a soak is there to provoke.
fn log_tally(dir: &Path) -> String {
    let events = [
        ("claim_takeovers", "took over the objects"),
        ("stale", "overwritten after its change; stale"),
        ("left_out", "already committed by another commit"),
        ("abandoned", "declared abandoned"),
        ("recovered_commits", "[recovered]"),
        ("lease_busy", "another committer holds"),
        ("commits", "committed bronze.soak"),
        ("receipt_stale", "its receipt went stale"),
        ("round_failed", "round failed"),
    ];
    let mut counts = vec![0usize; events.len()];
    for e in std::fs::read_dir(dir.join("logs"))
        .into_iter()
        .flatten()
        .flatten()
    {
        let text = std::fs::read_to_string(e.path()).unwrap_or_default();
        for (n, (_, needle)) in counts.iter_mut().zip(events) {
            *n += text.matches(needle).count();
        }
    }
    (events.iter().zip(counts))
        .map(|((name, _), n)| format!("{name}={n}"))
        .collect::<Vec<_>>()
        .join(" ")
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).into_iter().flatten().flatten() {
        if e.file_type().unwrap().is_file() {
            std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_instances_killed_at_random_land_every_version_once() {
    let sizing = sizing();
    let wall = Instant::now();
    eprintln!("soak: {sizing:?}");
    let bed = Bed::start().await;
    let dir = bed.dir();

    // The first object and one plain run: the table exists before the instances race.
    let mut rng = Rng(sizing.seed);
    let mut written = Written::default();
    put_one(&bed, &mut written, &mut rng).await;
    common::floe_async(&dir, &["run", "--config", "floe.toml"], &[])
        .await
        .expect_code(0, "the first run");

    let writer_stop = Arc::new(AtomicBool::new(false));
    let writer_done = Arc::new(AtomicBool::new(false));
    let conductor = {
        let (dir, config, mns) = (dir.clone(), bed.config(), bed.mns.clone());
        let (stop, done) = (writer_stop.clone(), writer_done.clone());
        tokio::task::spawn_blocking(move || conduct(dir, config, sizing, mns, stop, done))
    };
    let written = write_until(&bed, written, rng, &writer_stop).await;
    writer_done.store(true, Ordering::SeqCst);
    let fleet = conductor.await.expect("the conductor");
    let final_commits = commit_until_done(&dir).await;

    let (uri, token, prefix) = (bed.lakana.uri(), bed.lakana.token(), bed.lakana.prefix());
    let table = tokio::task::spawn_blocking(move || read_all(&uri, &token, prefix))
        .await
        .unwrap();
    let verdict = judge(&table, &written);
    let letters = common::dead_letters(&dir);

    println!(
        "soak: runs={} kills={} processes={}+1 objects={} versions={} rows_written={} rows={} \
         superseded={} kept={} lost={} doubled={} unknown={} dead_letters={} unexpected_exits={} \
         commit_invocations={}/{} final_commits={} seed={} wall={:.0?}",
        fleet.runs + 1 + final_commits, // the first run and the final `floe commit`s too
        fleet.kills,
        sizing.processes,
        written.keys.len(),
        written.versions.len(),
        written.rows(),
        verdict.rows,
        verdict.stale,
        verdict.kept.len(),
        verdict.lost.len(),
        verdict.doubled.len(),
        verdict.unknown.len(),
        letters.len(),
        fleet.exits.len(),
        fleet.invocations_ok,
        fleet.invocations_ok + fleet.invocations_failed,
        final_commits,
        sizing.seed,
        wall.elapsed(),
    );
    for (who, status) in &fleet.exits {
        println!("soak: {who} exited on its own: {status}");
    }
    common::assert_commit_ids_unique(&table);
    let clean = verdict.lost.is_empty()
        && verdict.kept.is_empty()
        && verdict.doubled.is_empty()
        && verdict.unknown.is_empty()
        && letters.is_empty();
    println!("soak: in the logs: {}", log_tally(&dir));
    let keep = std::env::var("FLOE_SOAK_KEEP").is_ok_and(|v| v == "1");
    if clean && keep {
        println!("soak: working folder kept: {}", bed.work.keep().display());
        return;
    }
    if !clean {
        let keys: Vec<&str> = (verdict.lost.iter())
            .chain(&verdict.kept)
            .chain(&verdict.doubled)
            .filter_map(|s| s.split(' ').next())
            .take(20)
            .collect();
        copy_dir(&bed.checkpoint_dir(), &dir.join("checkpoint-copy"));
        let evidence = checkpoint_evidence(&bed.checkpoint_dir(), &keys);
        let kept = bed.work.keep();
        panic!(
            "lost: {:#?}\nkept: {:#?}\ndoubled: {:#?}\nunknown: {:#?}\n\
             dead letters: {letters:#?}\n\
             checkpoint {evidence}\nlogs and a copy of the checkpoint table kept in {}",
            verdict.lost,
            verdict.kept,
            verdict.doubled,
            verdict.unknown,
            kept.display()
        );
    }
}
