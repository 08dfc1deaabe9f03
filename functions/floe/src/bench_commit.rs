//! `floe bench-commit-pass`: does a commit pass stay flat as history grows?
//!
//! A finished batch leaves, once the pass that saw it finish has removed its tombstones, its
//! `done/` record and its objects' `obj/` records (both kept for `dedupe-ttl-hours`). A pass
//! lists only what is in flight (`batch/`, `commit/`) and asks about the hourly purge, so its
//! cost should not grow with that history. This case measures it on the object-store
//! checkpoint over s3s-fs: the median of 9 idle passes with 20 finished batches behind them,
//! then with 20,000 (the entries a real batch leaves, one object each, written straight into
//! the checkpoint table), and prints the ratio against its target (≤ 1.2).
//!
//! It prints two ratios. The checkpoint calls a pass makes and the entries they return are
//! floe's own cost, and what S3 or OSS charge for: a prefix listing there costs what it
//! returns. The wall time is s3s-fs's: it walks the whole bucket for every listing, whatever
//! the prefix, so its time grows with history where S3's and OSS's do not.

use std::path::Path;
use std::process::{Child, Command, ExitCode, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use floe_checkpoint::{CheckpointStore, Entry, Version};
use floe_core::{Error, Result};
use floe_pipeline::config::CheckpointConfig;
use floe_pipeline::protocol::records::{done_key, obj_key};
use floe_pipeline::sources::stores::open_object_store_checkpoint;
use floe_pipeline::{FloeConfig, Pipeline};
use futures::StreamExt;

use crate::cli::BenchCommitPassArgs;

const KEY_ID: &str = "FLOEBENCHAKID";
const SECRET: &str = "floe-bench-secret-for-s3s-fs";
/// Idle passes per measurement (the median is reported).
const PASSES: usize = 9;
/// Checkpoint writes in flight while the history is written.
const WRITERS: usize = 32;

/// s3s-fs as a child process, killed on drop.
struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn io(what: &str) -> impl Fn(std::io::Error) -> Error + '_ {
    move |e| Error::from(e).while_doing(what.to_owned())
}

/// Start s3s-fs on a free port with `root` as its data; its endpoint.
async fn start_s3s_fs(bin: &Path, root: &Path) -> Result<(Server, String)> {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map_err(io("failed to find a free port"))?
        .port();
    let child = Command::new(bin)
        .args(["--host", "127.0.0.1", "--port", &port.to_string()])
        .args(["--access-key", KEY_ID, "--secret-key", SECRET])
        .arg(root)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(io("failed to start s3s-fs"))?;
    let server = Server(child);
    let deadline = Instant::now() + Duration::from_secs(20);
    while tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .is_err()
    {
        if Instant::now() > deadline {
            return Err(Error::unexpected("s3s-fs did not start within 20 s"));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Ok((server, format!("http://127.0.0.1:{port}")))
}

/// A checkpoint table counting the calls made to it and the entries its scans return.
#[derive(Debug)]
struct Counting {
    inner: Arc<dyn CheckpointStore>,
    calls: AtomicU64,
    listed: AtomicU64,
}

impl Counting {
    fn call(&self) {
        self.calls.fetch_add(1, Ordering::Relaxed);
    }

    /// (calls, entries listed) so far.
    fn counts(&self) -> (u64, u64) {
        (
            self.calls.load(Ordering::Relaxed),
            self.listed.load(Ordering::Relaxed),
        )
    }
}

#[async_trait::async_trait]
impl CheckpointStore for Counting {
    async fn get(&self, key: &str) -> Result<Option<Entry>> {
        self.call();
        self.inner.get(key).await
    }
    async fn put_if_absent(
        &self,
        key: &str,
        value: &[u8],
        ttl: Option<Duration>,
    ) -> Result<Option<Version>> {
        self.call();
        self.inner.put_if_absent(key, value, ttl).await
    }
    async fn put_if_version(
        &self,
        key: &str,
        value: &[u8],
        expected: &Version,
        ttl: Option<Duration>,
    ) -> Result<Option<Version>> {
        self.call();
        self.inner.put_if_version(key, value, expected, ttl).await
    }
    async fn delete_if_version(&self, key: &str, expected: &Version) -> Result<bool> {
        self.call();
        self.inner.delete_if_version(key, expected).await
    }
    async fn scan(&self, prefix: &str) -> Result<Vec<Entry>> {
        self.call();
        let found = self.inner.scan(prefix).await?;
        self.listed.fetch_add(found.len() as u64, Ordering::Relaxed);
        Ok(found)
    }
    async fn purge_expired(&self, prefix: &str) -> Result<u64> {
        self.call();
        self.inner.purge_expired(prefix).await
    }
}

/// Write the entries `count` finished batches leave, numbered from `first`.
async fn finish_batches(p: &Pipeline, first: usize, count: usize) -> Result<()> {
    let checkpoint = p.checkpoint().clone();
    let writes = (first..first + count).flat_map(|i| {
        let batch = format!("0190a000-0000-7000-8000-{i:012}");
        let done = serde_json::json!({"batch": batch, "objects": 1, "at_ms": 0});
        let obj = serde_json::json!({
            "bucket": "landing", "key": format!("events/{i}.ndjson"), "operation": "created",
            "etag": format!("{i:032x}"), "version_id": null, "sequencer": null,
            "event_time_ms": 0, "size": 1024, "state": "staged", "batch": batch, "at_ms": 0
        });
        [
            (done_key(&batch), done.to_string()),
            (
                obj_key("landing", &format!("events/{i}.ndjson")),
                obj.to_string(),
            ),
        ]
    });
    let mut results = futures::stream::iter(writes)
        .map(|(key, value)| {
            let checkpoint = checkpoint.clone();
            async move {
                checkpoint
                    .put_if_absent(&key, value.as_bytes(), Some(Duration::from_secs(3600)))
                    .await
            }
        })
        .buffer_unordered(WRITERS);
    while let Some(r) = results.next().await {
        r?;
    }
    Ok(())
}

/// What one idle commit pass costs: median milliseconds of [`PASSES`] passes, and the
/// checkpoint calls and entries listed per pass.
struct PassCost {
    ms: f64,
    calls: f64,
    listed: f64,
}

async fn pass_cost(p: &Pipeline, counting: &Counting) -> Result<PassCost> {
    let (calls, listed) = counting.counts();
    let mut times = Vec::with_capacity(PASSES);
    for _ in 0..PASSES {
        let t = Instant::now();
        let report = p.commit(false).await?;
        times.push(t.elapsed().as_secs_f64() * 1000.0);
        if !report.commits.is_empty() {
            return Err(Error::unexpected("an idle pass committed something"));
        }
    }
    times.sort_by(f64::total_cmp);
    let (calls_after, listed_after) = counting.counts();
    let per_pass = |n: u64| n as f64 / PASSES as f64;
    Ok(PassCost {
        ms: times[PASSES / 2],
        calls: per_pass(calls_after - calls),
        listed: per_pass(listed_after - listed),
    })
}

pub async fn bench_commit_pass(args: BenchCommitPassArgs) -> Result<ExitCode> {
    let dir = &args.dir;
    let _ = std::fs::remove_dir_all(dir);
    let data = dir.join("s3");
    std::fs::create_dir_all(data.join("state")).map_err(io("failed to create the bucket"))?;
    std::fs::create_dir_all(dir.join("bucket")).map_err(io("failed to create the source"))?;
    let dir = dir
        .canonicalize()
        .map_err(io("failed to resolve the bench dir"))?;
    let (_server, endpoint) = start_s3s_fs(&args.s3s_fs, &dir.join("s3")).await?;
    let toml = format!(
        "[source]\nfolder = \"bucket\"\n\n[checkpoint]\ntype = \"object-store\"\n\
         url = \"s3://state/floe/checkpoint/\"\nendpoint = \"{endpoint}\"\nregion = \"us-east-1\"\n\
         path-style-access = true\naccess-key-id = \"{KEY_ID}\"\nsecret-access-key = \"{SECRET}\"\n\n\
         [[routes]]\ntable = \"bench.events\"\n"
    );
    let path = dir.join("floe.toml");
    std::fs::write(&path, toml).map_err(io("failed to write the bench config"))?;
    let config = FloeConfig::load(&path)?;
    let CheckpointConfig::ObjectStore {
        provider,
        bucket,
        prefix,
        store,
    } = &config.checkpoint
    else {
        return Err(Error::unexpected(
            "the bench config has no object-store checkpoint",
        ));
    };
    let inner = open_object_store_checkpoint(*provider, bucket, prefix, store).await?;
    let counting = Arc::new(Counting {
        inner,
        calls: AtomicU64::new(0),
        listed: AtomicU64::new(0),
    });
    let p = Pipeline::builder(config)
        .checkpoint(counting.clone())
        .build()
        .await?;

    let few = 20;
    finish_batches(&p, 0, few).await?;
    p.commit(false).await?;
    let small = pass_cost(&p, &counting).await?;
    let t = Instant::now();
    finish_batches(&p, few, args.batches - few).await?;
    let filled = t.elapsed().as_secs_f64();
    p.commit(false).await?;
    let large = pass_cost(&p, &counting).await?;
    let line = |n: usize, c: &PassCost| {
        format!(
            "{n:>8} finished batches {:>9.2} ms {:>7.1} checkpoint calls {:>7.1} entries listed",
            c.ms, c.calls, c.listed
        )
    };
    println!(
        "commit pass, object-store checkpoint on s3s-fs (per idle pass, median of {PASSES}):\n{}\n{}   ({filled:.0} s to write their entries)\n\
         floe's cost (calls and entries): x{:.2} and x{:.2} (target <= 1.2x)\n\
         wall time on s3s-fs, which walks the whole bucket for each listing: x{:.2}",
        line(few, &small),
        line(args.batches, &large),
        large.calls / small.calls.max(1.0),
        (large.listed + 1.0) / (small.listed + 1.0),
        large.ms / small.ms
    );
    Ok(ExitCode::SUCCESS)
}
