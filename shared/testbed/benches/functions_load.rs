//! The functions under load, as deployed (`make bench`; a benchmark, never a test).
//!
//! Each leg starts fresh stand-ins: s3s-fs as the object store (behind the front that takes one
//! request at a time per object, which makes its conditional writes atomic, as OSS and S3 are,
//! while requests on different objects run together) holding the source bucket
//! and the state bucket with the object-store checkpoint, and lakana-server as the Iceberg REST
//! catalog behind a SigV4 gate (`osstables` for FC, `s3tables` for Lambda). The shipped template
//! is rendered for them (`s.yaml` or `template.yaml`, nothing edited), and the ingest and commit
//! binaries run as that platform runs them: FC custom runtime servers, or processes under the
//! Lambda Runtime API stand-in. The driver then puts the objects of one invocation (10 by
//! default), sends their events (the OSS trigger's event, or an SQS event of S3 notifications),
//! waits for the answer, and goes on, while the commit function is invoked every few seconds
//! (a timer whose payload is `{"force":true}`). A pyiceberg process polls the table all along
//! and notes when each object's rows first became visible.
//!
//! The baseline is pyiceberg run the same way: one warm process, the same objects, one
//! invocation per batch of events, reading them with pyarrow and appending (so committing) each
//! batch with pyiceberg.
//!
//! Printed per leg: invocations per second of the one instance (busy time only), p50 and p99
//! invocation latency, commit pass time, freshness (put to visible in pyiceberg) p50 and p99,
//! GB-seconds per GiB landed at the memory the templates configure (every ingest and commit
//! invocation's duration times 1024 MB), and peak memory.
//!
//! Usage: `cargo bench -p floe-testbed --bench functions_load -- [--bin-dir DIR] [--events N]
//! [--batch N] [--object-kib N] [--commit-every-ms N] [--legs fc,lambda,pyiceberg]
//! [--store-rtt-ms N]`. `--store-rtt-ms` adds a network round trip to every object-store and
//! catalog request (the stand-ins answer in about a millisecond, a region's store in several).
//! The function binaries come from `--bin-dir` (default `$CARGO_TARGET_DIR/release`).

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use floe_core::{Error, Provider, Result};
use floe_signing::Credentials;
use floe_storage::{ObjectStore, PutMode, S3Store, S3StoreConfig};
use floe_testbed::functions::{FunctionDir, FunctionProcess};
use floe_testbed::lambda::LambdaRuntimeApi;
use floe_testbed::servers::{LakanaServer, Linearizer, S3sFs, SigV4Gate};
use floe_testbed::templates::{fc_template, function_env, render, sam_template};
use serde_json::{Value, json};

const SOURCE: &str = "floe-src";
const STATE: &str = "floe-state";
const TABLE: &str = "bronze.events";
/// The memory both templates give every function (`memorySize` of `s.yaml`, `MemorySize` of
/// `template.yaml`), in MB; billed as MB / 1024 GB.
const TEMPLATE_MEMORY_MB: f64 = 1024.0;
const TOKEN: &str = "floe-bench-role-session-token";
const WAIT: Duration = Duration::from_secs(120);

struct Args {
    bin_dir: PathBuf,
    events: usize,
    batch: usize,
    object_kib: usize,
    commit_every: Duration,
    legs: Vec<String>,
    /// A network round trip added to every object-store and catalog request.
    rtt: Duration,
}

fn args() -> Result<Args> {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target"));
    let mut a = Args {
        bin_dir: target.join("release"),
        events: 2000,
        batch: 10,
        object_kib: 128,
        commit_every: Duration::from_millis(3000),
        legs: ["fc", "lambda", "pyiceberg"].map(String::from).to_vec(),
        rtt: Duration::ZERO,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        if flag == "--bench" {
            continue; // what `cargo bench` passes to every bench binary
        }
        let value = it
            .next()
            .ok_or_else(|| Error::invalid_input(format!("{flag} needs a value")))?;
        let number = || {
            value
                .parse::<usize>()
                .map_err(|_| Error::invalid_input(format!("{flag}: not a number: {value}")))
        };
        match flag.as_str() {
            "--bin-dir" => a.bin_dir = PathBuf::from(&value),
            "--events" => a.events = number()?,
            "--batch" => a.batch = number()?.max(1),
            "--object-kib" => a.object_kib = number()?.max(1),
            "--commit-every-ms" => a.commit_every = Duration::from_millis(number()? as u64),
            "--legs" => a.legs = value.split(',').map(str::to_owned).collect(),
            "--store-rtt-ms" => a.rtt = Duration::from_millis(number()? as u64),
            _ => return Err(Error::invalid_input(format!("unknown option {flag}"))),
        }
    }
    Ok(a)
}

fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// The objects: NDJSON of the shape `floe bench` uses, `rows` rows each; object `k` holds ids
/// `k * rows ..`, so a reader maps a row to its object by `id / rows`.
struct Objects {
    rows: u64,
}

impl Objects {
    const ROW_BYTES: usize = 150;

    fn new(kib: usize) -> Self {
        Objects {
            rows: ((kib * 1024) / Self::ROW_BYTES).max(1) as u64,
        }
    }

    fn key(k: usize) -> String {
        format!("load/{k:05}.ndjson")
    }

    fn body(&self, k: usize) -> Bytes {
        let levels = ["info", "warn", "error", "debug"];
        let words = [
            "alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel",
        ];
        let mut out = String::with_capacity(self.rows as usize * Self::ROW_BYTES);
        let first = k as u64 * self.rows;
        for id in first..first + self.rows {
            let msg: Vec<&str> = (0..6)
                .map(|j| words[((id >> j) as usize + j) % words.len()])
                .collect();
            out.push_str(&format!(
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
            ));
        }
        Bytes::from(out)
    }
}

/// s3s-fs behind its front, and lakana-server behind a SigV4 gate for `service` (or, without
/// one, a plain front passing its bearer token), both adding the round trip `rtt`.
struct Stand {
    _s3s: S3sFs,
    front: Linearizer,
    source: S3Store,
    lakana: LakanaServer,
    gate: Linearizer,
}

impl Stand {
    async fn start(
        provider: Provider,
        region: &str,
        service: Option<&str>,
        rtt: Duration,
    ) -> Result<Stand> {
        let s3s = S3sFs::start().await?;
        for b in [SOURCE, STATE] {
            s3s.create_bucket(b)?;
        }
        let front = Linearizer::start(&s3s.endpoint()).await?;
        let source = S3Store::new(
            S3StoreConfig::new(provider, SOURCE)
                .with_endpoint(front.endpoint())
                .with_region(region)
                .with_path_style(true)
                .with_keys(S3sFs::ACCESS_KEY_ID, S3sFs::SECRET_ACCESS_KEY, None),
        )
        .await?;
        let lakana = LakanaServer::start().await?;
        let gate = match service {
            Some(service) => {
                Linearizer::start_sigv4(
                    &lakana.uri(),
                    SigV4Gate::new(service, region, role(), lakana.token())
                        .with_config_prefix(lakana.prefix()),
                )
                .await?
            }
            None => Linearizer::start(&lakana.uri()).await?,
        };
        // A real store takes requests on different objects at once; s3s-fs needs only each
        // object's requests in one order.
        front.set_per_key(true);
        front.set_round_trip(rtt);
        gate.set_round_trip(rtt);
        Ok(Stand {
            _s3s: s3s,
            front,
            source,
            lakana,
            gate,
        })
    }

    fn catalog_uri(&self) -> String {
        self.gate.endpoint().to_owned()
    }
}

/// The function role's keys: s3s-fs's fixed keys with an STS token.
fn role() -> Credentials {
    Credentials::new(S3sFs::ACCESS_KEY_ID, S3sFs::SECRET_ACCESS_KEY).with_security_token(TOKEN)
}

/// One deployed function, invoked as its platform invokes it.
enum Function {
    Fc(FunctionProcess, AtomicU64),
    Lambda(FunctionProcess, LambdaRuntimeApi),
}

impl Function {
    fn process(&self) -> &FunctionProcess {
        match self {
            Function::Fc(p, _) | Function::Lambda(p, _) => p,
        }
    }

    /// Invoke with `body`; the answer and how long the invocation took.
    async fn invoke(self: &Arc<Self>, body: Vec<u8>) -> Result<(Value, Duration)> {
        match &**self {
            Function::Fc(..) => {
                let f = self.clone();
                tokio::task::spawn_blocking(move || f.invoke_fc(&body))
                    .await
                    .map_err(|e| Error::unexpected(format!("fc invocation task: {e}")))?
            }
            Function::Lambda(p, api) => {
                let start = Instant::now();
                let id = api.invoke(&body, WAIT);
                let (result, at) = api.result_at(&id, WAIT + Duration::from_secs(5)).await?;
                match result {
                    floe_testbed::lambda::LambdaResult::Response(b) => {
                        let v = serde_json::from_slice(&b).map_err(|e| {
                            Error::unexpected(format!("lambda answer is not json: {e}"))
                        })?;
                        Ok((v, at - start))
                    }
                    floe_testbed::lambda::LambdaResult::Error { body, .. } => Err(
                        Error::unexpected(format!("invocation failed: {body}\n{}", p.log_tail())),
                    ),
                }
            }
        }
    }

    fn invoke_fc(&self, body: &[u8]) -> Result<(Value, Duration)> {
        let Function::Fc(p, n) = self else {
            unreachable!("invoke_fc on an fc function")
        };
        let id = format!("fc-load-{}", n.fetch_add(1, Ordering::Relaxed));
        let headers = [
            ("x-fc-request-id", id.as_str()),
            ("x-fc-control-path", "/invoke"),
            ("x-fc-function-timeout", "300"),
            ("x-fc-access-key-id", S3sFs::ACCESS_KEY_ID),
            ("x-fc-access-key-secret", S3sFs::SECRET_ACCESS_KEY),
            ("x-fc-security-token", TOKEN),
            ("content-type", "application/octet-stream"),
        ];
        let start = Instant::now();
        let r = p.fc("POST", "/invoke", &headers, body)?;
        let took = start.elapsed();
        if r.status != 200 || r.header("x-fc-status") != Some("200") {
            return Err(Error::unexpected(format!(
                "{id}: {} {}\n{}",
                r.status,
                String::from_utf8_lossy(&r.body),
                p.log_tail()
            )));
        }
        Ok((r.json(), took))
    }
}

/// A deployed platform: its rendered template and how it starts a function.
struct Deployed {
    platform: &'static str,
    rendered: Value,
    dir: FunctionDir,
    bin_dir: PathBuf,
}

impl Deployed {
    const FC_REGION: &'static str = "cn-hangzhou";
    const AWS_REGION: &'static str = "us-east-1";

    fn fc(stand: &Stand, bin_dir: &Path) -> Result<Deployed> {
        let vars = [
            ("ossEndpoint", stand.front.endpoint().to_owned()),
            // The ingest function never opens the queue; the configuration names one.
            ("mnsEndpoint", "http://127.0.0.1:9".to_owned()),
            ("catalogUri", stand.catalog_uri()),
            ("routeTable", TABLE.to_owned()),
        ];
        let mut args: Vec<String> = [
            format!("FLOE_REGION={}", Self::FC_REGION),
            format!("FLOE_SOURCE_BUCKET={SOURCE}"),
            format!("FLOE_STATE_BUCKET={STATE}"),
            "FLOE_TABLE_BUCKET_ARN=acs:osstables:cn-hangzhou:1234567890:bucket/floe".to_owned(),
        ]
        .into_iter()
        .flat_map(|e| ["--env".to_owned(), e])
        .collect();
        args.extend(["--config".to_owned(), "AccountID=1234567890".to_owned()]);
        for (k, v) in vars {
            args.extend(["--var".to_owned(), format!("{k}={v}")]);
        }
        Ok(Deployed {
            platform: "fc",
            rendered: render("fc", &fc_template(), &args)?,
            dir: FunctionDir::deployed()?,
            bin_dir: bin_dir.to_owned(),
        })
    }

    fn lambda(stand: &Stand, bin_dir: &Path) -> Result<Deployed> {
        let params = [
            format!("SourceBucketName={SOURCE}"),
            format!("CatalogUri={}", stand.catalog_uri()),
            "CatalogType=rest".to_owned(),
            format!("RouteTable={TABLE}"),
            format!(
                "TableBucketArn=arn:aws:s3tables:{}:1:bucket/floe-tables",
                Self::AWS_REGION
            ),
        ];
        let mut args: Vec<String> = params
            .into_iter()
            .flat_map(|p| ["--param".to_owned(), p])
            .collect();
        args.extend([
            "--resource-value".to_owned(),
            format!(
                "IngestQueue=https://sqs.{}.amazonaws.com/1/floe-ingest",
                Self::AWS_REGION
            ),
            "--resource-value".to_owned(),
            format!("StateBucket={STATE}"),
        ]);
        Ok(Deployed {
            platform: "lambda",
            rendered: render("sam", &sam_template(), &args)?,
            dir: FunctionDir::deployed()?,
            bin_dir: bin_dir.to_owned(),
        })
    }

    /// Start `function` (`ingest`, `commit`) as the platform does.
    async fn spawn(&self, stand: &Stand, function: &str) -> Result<Arc<Function>> {
        let binary = self.bin_dir.join(format!("floe-{function}"));
        if !binary.exists() {
            return Err(Error::invalid_input(format!(
                "{} is not built: run `make functions`",
                binary.display()
            )));
        }
        let memory = format!("{TEMPLATE_MEMORY_MB}");
        let string = |pairs: &[(&str, &str)]| -> Vec<(String, String)> {
            pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect()
        };
        Ok(Arc::new(if self.platform == "fc" {
            let mut env = function_env(&self.rendered, function);
            env.extend(string(&[
                ("ALIBABA_CLOUD_ACCESS_KEY_ID", S3sFs::ACCESS_KEY_ID),
                ("ALIBABA_CLOUD_ACCESS_KEY_SECRET", S3sFs::SECRET_ACCESS_KEY),
                ("ALIBABA_CLOUD_SECURITY_TOKEN", TOKEN),
                ("FC_REGION", Self::FC_REGION),
                ("FC_ACCOUNT_ID", "1234567890"),
                ("FC_FUNCTION_NAME", function),
                ("FC_FUNCTION_MEMORY_SIZE", &memory),
            ]));
            Function::Fc(self.dir.spawn_fc(&binary, &env)?, AtomicU64::new(0))
        } else {
            let resource = match function {
                "ingest" => "IngestFunction",
                _ => "CommitFunction",
            };
            let mut env = function_env(&self.rendered, resource);
            env.extend(string(&[
                ("AWS_ACCESS_KEY_ID", S3sFs::ACCESS_KEY_ID),
                ("AWS_SECRET_ACCESS_KEY", S3sFs::SECRET_ACCESS_KEY),
                ("AWS_SESSION_TOKEN", TOKEN),
                ("AWS_ENDPOINT_URL", stand.front.endpoint()),
                ("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", &memory),
            ]));
            let api = LambdaRuntimeApi::start().await?;
            let process = self.dir.spawn_lambda(&binary, &api, &env)?;
            Function::Lambda(process, api)
        }))
    }

    /// The event of one invocation for these objects (key, ETag, size).
    fn event(&self, objects: &[(String, String, usize)]) -> Vec<u8> {
        let event = if self.platform == "fc" {
            let events: Vec<Value> = objects
                .iter()
                .map(|(key, etag, size)| {
                    json!({
                        "eventName": "ObjectCreated:PutObject", "eventSource": "acs:oss",
                        "eventTime": "2026-12-01T08:30:45.000Z", "eventVersion": "1.0",
                        "oss": {
                            "bucket": {"arn": format!("acs:oss:{}:1234567890:{SOURCE}", Self::FC_REGION),
                                       "name": SOURCE, "ownerIdentity": "1234567890"},
                            "object": {"deltaSize": size, "eTag": etag.to_ascii_uppercase(), "key": key, "size": size},
                            "ossSchemaVersion": "1.0", "ruleId": "floe"
                        },
                        "region": Self::FC_REGION
                    })
                })
                .collect();
            json!({ "events": events })
        } else {
            let records: Vec<Value> = objects
                .iter()
                .enumerate()
                .map(|(i, (key, etag, size))| {
                    let notification = json!({"Records": [{
                        "eventVersion": "2.1", "eventSource": "aws:s3", "awsRegion": Self::AWS_REGION,
                        "eventTime": "2026-12-01T08:30:45.123Z", "eventName": "ObjectCreated:Put",
                        "s3": {
                            "s3SchemaVersion": "1.0", "configurationId": "floe",
                            "bucket": {"name": SOURCE, "arn": format!("arn:aws:s3:::{SOURCE}")},
                            "object": {"key": key, "size": size, "eTag": etag, "sequencer": format!("{i:018X}")}
                        }
                    }]});
                    json!({
                        "messageId": format!("00000000-0000-4000-8000-{i:012}"),
                        "receiptHandle": format!("handle-{key}"),
                        "body": notification.to_string(),
                        "attributes": {"ApproximateReceiveCount": "1"},
                        "messageAttributes": {}, "eventSource": "aws:sqs",
                        "eventSourceARN": format!("arn:aws:sqs:{}:1:floe-ingest", Self::AWS_REGION),
                        "awsRegion": Self::AWS_REGION
                    })
                })
                .collect();
            json!({ "Records": records })
        };
        event.to_string().into_bytes()
    }

    /// Check an ingest answer: every event taken.
    fn check_ingest(&self, answer: &Value) -> Result<()> {
        let ok = if self.platform == "fc" {
            answer["dead_letters"].as_u64().unwrap_or(0) == 0 && answer["rows"].as_u64().is_some()
        } else {
            answer["batchItemFailures"]
                .as_array()
                .is_some_and(Vec::is_empty)
        };
        if ok {
            Ok(())
        } else {
            Err(Error::unexpected(format!(
                "ingest did not take every event: {answer}"
            )))
        }
    }
}

/// What one leg measured.
#[derive(Default)]
struct Leg {
    name: String,
    latencies: Vec<Duration>,
    commits: Vec<Duration>,
    freshness: Vec<f64>,
    bytes: u64,
    peak_kb: Vec<(String, u64)>,
    /// Where the time went, printed under the row.
    notes: Vec<String>,
}

fn quantile_ms(d: &[Duration], q: f64) -> f64 {
    let mut v: Vec<f64> = d.iter().map(|d| d.as_secs_f64() * 1e3).collect();
    quantile(&mut v, q)
}

fn quantile(v: &mut [f64], q: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    let i = ((q * v.len() as f64).ceil() as usize).clamp(1, v.len()) - 1;
    v[i]
}

impl Leg {
    fn busy(&self) -> f64 {
        self.latencies.iter().map(Duration::as_secs_f64).sum()
    }

    /// GB-seconds billed per GiB landed, at the templates' memory.
    fn gb_s_per_gib(&self) -> f64 {
        let billed: f64 = self.busy() + self.commits.iter().map(Duration::as_secs_f64).sum::<f64>();
        billed * (TEMPLATE_MEMORY_MB / 1024.0) / (self.bytes as f64 / f64::from(1u32 << 30))
    }

    fn print(&self) {
        let mut fresh = self.freshness.clone();
        let peaks: Vec<String> = self
            .peak_kb
            .iter()
            .map(|(n, kb)| format!("{n} {:.0} MiB", *kb as f64 / 1024.0))
            .collect();
        println!(
            "{:<34} {:>7.1} {:>8.1} {:>8.1} {:>7} {:>8.0} {:>8.0} {:>8.2} {:>8.2} {:>9.1}   {}",
            self.name,
            self.latencies.len() as f64 / self.busy(),
            quantile_ms(&self.latencies, 0.5),
            quantile_ms(&self.latencies, 0.99),
            self.commits.len(),
            quantile_ms(&self.commits, 0.5),
            quantile_ms(&self.commits, 1.0),
            quantile(&mut fresh, 0.5),
            quantile(&mut fresh, 0.99),
            self.gb_s_per_gib(),
            peaks.join(", ")
        );
        for n in &self.notes {
            println!("    {n}");
        }
    }
}

/// The pyiceberg watcher: started before the load, answers when every row is visible.
struct Watcher {
    child: Child,
}

impl Watcher {
    fn start(lakana: &LakanaServer, rows: u64, rows_per_object: u64) -> Result<Watcher> {
        let child = Command::new(floe_testbed::pyiceberg::python())
            .arg(bench_script("load_watch.py"))
            .args(["--rest", &lakana.uri(), "--token", &lakana.token()])
            .args(["--prefix", lakana.prefix(), "--table", TABLE])
            .args(["--rows", &rows.to_string()])
            .args(["--rows-per-object", &rows_per_object.to_string()])
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| Error::from(e).while_doing("failed to start the pyiceberg watcher"))?;
        Ok(Watcher { child })
    }

    /// When each object was first visible (unix seconds), by object number.
    fn first_seen(self) -> Result<Vec<(usize, f64)>> {
        let out = self
            .child
            .wait_with_output()
            .map_err(|e| Error::from(e).while_doing("failed to read the pyiceberg watcher"))?;
        if !out.status.success() {
            return Err(Error::unexpected(format!(
                "the pyiceberg watcher failed ({})",
                out.status
            )));
        }
        let v: Value = serde_json::from_slice(&out.stdout)
            .map_err(|e| Error::unexpected(format!("watcher output: {e}")))?;
        Ok(v["first_seen"]
            .as_object()
            .map(|m| {
                m.iter()
                    .filter_map(|(k, t)| Some((k.parse().ok()?, t.as_f64()?)))
                    .collect()
            })
            .unwrap_or_default())
    }
}

fn bench_script(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../bench")
        .join(name)
}

fn freshness(put_at: &[f64], seen: &[(usize, f64)]) -> Result<Vec<f64>> {
    if seen.len() != put_at.len() {
        return Err(Error::unexpected(format!(
            "pyiceberg saw {} of {} objects",
            seen.len(),
            put_at.len()
        )));
    }
    Ok(seen.iter().map(|(k, t)| t - put_at[*k]).collect())
}

async fn put_batch(
    source: &S3Store,
    objects: &Objects,
    range: std::ops::Range<usize>,
    put_at: &mut [f64],
) -> Result<Vec<(String, String, usize)>> {
    let mut out = Vec::new();
    for k in range {
        let key = Objects::key(k);
        let body = objects.body(k);
        let size = body.len();
        let etag = source
            .put(&key, body, PutMode::Overwrite)
            .await?
            .ok_or_else(|| Error::unexpected("the store answered a put without an ETag"))?;
        put_at[k] = unix_now();
        out.push((key, etag, size));
    }
    Ok(out)
}

/// One platform's leg: the shipped template's ingest and commit functions under the load.
async fn floe_leg(a: &Args, platform: &str) -> Result<Leg> {
    let objects = Objects::new(a.object_kib);
    let (stand, deployed) = if platform == "fc" {
        let stand =
            Stand::start(Provider::Oss, Deployed::FC_REGION, Some("osstables"), a.rtt).await?;
        let d = Deployed::fc(&stand, &a.bin_dir)?;
        (stand, d)
    } else {
        let stand =
            Stand::start(Provider::S3, Deployed::AWS_REGION, Some("s3tables"), a.rtt).await?;
        let d = Deployed::lambda(&stand, &a.bin_dir)?;
        (stand, d)
    };
    let ingest = deployed.spawn(&stand, "ingest").await?;
    let commit = deployed.spawn(&stand, "commit").await?;
    let total_rows = objects.rows * a.events as u64;
    let watcher = Watcher::start(&stand.lakana, total_rows, objects.rows)?;

    // The commit timer.
    let done = Arc::new(AtomicBool::new(false));
    let timer = {
        let (commit, done, every) = (commit.clone(), done.clone(), a.commit_every);
        tokio::spawn(async move {
            let mut passes = Vec::new();
            let mut committed = 0u64;
            let mut tick = tokio::time::interval(every);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            tick.tick().await;
            while !(done.load(Ordering::Relaxed) && committed >= total_rows) {
                tick.tick().await;
                let (answer, took) = commit.invoke(br#"{"force":true}"#.to_vec()).await?;
                committed += answer["commits"].as_array().map_or(0, |c| {
                    c.iter().map(|c| c["rows"].as_u64().unwrap_or(0)).sum()
                });
                passes.push(took);
                if passes.len() > 10_000 {
                    return Err(Error::unexpected("commit never caught up"));
                }
            }
            Ok::<_, Error>(passes)
        })
    };

    let mut leg = Leg {
        name: format!(
            "floe {platform} ({})",
            if platform == "fc" {
                "s.yaml"
            } else {
                "template.yaml"
            }
        ),
        ..Leg::default()
    };
    let mut put_at = vec![0.0; a.events];
    for first in (0..a.events).step_by(a.batch) {
        let batch = put_batch(
            &stand.source,
            &objects,
            first..(first + a.batch).min(a.events),
            &mut put_at,
        )
        .await?;
        leg.bytes += batch.iter().map(|(_, _, s)| *s as u64).sum::<u64>();
        let (answer, took) = ingest.invoke(deployed.event(&batch)).await?;
        deployed.check_ingest(&answer)?;
        leg.latencies.push(took);
    }
    done.store(true, Ordering::Relaxed);
    leg.commits = timer
        .await
        .map_err(|e| Error::unexpected(format!("commit timer: {e}")))??;
    leg.freshness = freshness(&put_at, &watcher.first_seen()?)?;
    let n = leg.latencies.len().max(1) as f64;
    let mut cpu = Vec::new();
    for (name, f) in [("ingest", &ingest), ("commit", &commit)] {
        if let Some(kb) = f.process().peak_rss_kb() {
            leg.peak_kb.push((name.to_owned(), kb));
        }
        if let Some(t) = f.process().cpu_time() {
            cpu.push(format!("{name} {:.1} ms", t.as_secs_f64() * 1e3 / n));
        }
    }
    leg.notes.push(format!(
        "CPU per ingest invocation: {} (the commit's spread over the invocations)",
        cpu.join(", ")
    ));
    for (what, front) in [("object store", &stand.front), ("catalog", &stand.gate)] {
        let (served, busy) = front.served();
        let total: u64 = served.values().sum();
        let by: Vec<String> = served
            .iter()
            .map(|(m, c)| format!("{m} {:.1}", *c as f64 / n))
            .collect();
        leg.notes.push(format!(
            "{what}: {:.1} requests per ingest invocation, {:.1} ms of server time per invocation, summed over requests served at once ({:.2} ms a request; the driver's puts included):\n      {}",
            total as f64 / n,
            busy.as_secs_f64() * 1e3 / n,
            busy.as_secs_f64() * 1e3 / total.max(1) as f64,
            by.join("\n      "),
        ));
    }
    Ok(leg)
}

/// pyiceberg as one warm instance taking the same invocations.
struct PyInstance {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl PyInstance {
    fn start(stand: &Stand) -> Result<PyInstance> {
        let mut child = Command::new(floe_testbed::pyiceberg::python())
            .arg(bench_script("load_pyiceberg.py"))
            .args([
                "--rest",
                &stand.catalog_uri(),
                "--token",
                &stand.lakana.token(),
            ])
            .args(["--prefix", stand.lakana.prefix(), "--table", TABLE])
            .args(["--s3-endpoint", stand.front.endpoint()])
            .args(["--access-key", S3sFs::ACCESS_KEY_ID])
            .args(["--secret-key", S3sFs::SECRET_ACCESS_KEY])
            .args(["--bucket", SOURCE])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| Error::from(e).while_doing("failed to start the pyiceberg baseline"))?;
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            return Err(Error::unexpected("the pyiceberg baseline has no pipes"));
        };
        let mut p = PyInstance {
            child,
            stdin,
            stdout: BufReader::new(stdout),
        };
        p.answer()?; // ready
        Ok(p)
    }

    fn answer(&mut self) -> Result<Value> {
        let mut line = String::new();
        self.stdout
            .read_line(&mut line)
            .map_err(|e| Error::from(e).while_doing("failed to read the pyiceberg baseline"))?;
        serde_json::from_str(&line)
            .map_err(|_| Error::unexpected(format!("the pyiceberg baseline answered {line:?}")))
    }

    fn invoke(&mut self, keys: &[String]) -> Result<Value> {
        writeln!(self.stdin, "{}", json!({ "keys": keys }))
            .and_then(|()| self.stdin.flush())
            .map_err(|e| Error::from(e).while_doing("failed to invoke the pyiceberg baseline"))?;
        self.answer()
    }

    fn finish(mut self) -> Result<u64> {
        drop(self.stdin);
        let v = {
            let mut line = String::new();
            self.stdout.read_line(&mut line).map_err(Error::from)?;
            serde_json::from_str::<Value>(&line).unwrap_or_default()
        };
        let _ = self.child.wait();
        Ok(v["peak_rss_kb"].as_u64().unwrap_or(0))
    }
}

async fn pyiceberg_leg(a: &Args) -> Result<Leg> {
    let objects = Objects::new(a.object_kib);
    let stand = Stand::start(Provider::S3, Deployed::AWS_REGION, None, a.rtt).await?;
    let mut py = PyInstance::start(&stand)?;
    let mut leg = Leg {
        name: "pyiceberg (warm, append per call)".to_owned(),
        ..Leg::default()
    };
    let mut put_at = vec![0.0; a.events];
    for first in (0..a.events).step_by(a.batch) {
        let range = first..(first + a.batch).min(a.events);
        let batch = put_batch(&stand.source, &objects, range.clone(), &mut put_at).await?;
        leg.bytes += batch.iter().map(|(_, _, s)| *s as u64).sum::<u64>();
        let keys: Vec<String> = batch.into_iter().map(|(k, _, _)| k).collect();
        let t = Instant::now();
        let answer = py.invoke(&keys)?;
        leg.latencies.push(t.elapsed());
        let visible = unix_now();
        if answer["rows"].as_u64() != Some(objects.rows * range.len() as u64) {
            return Err(Error::unexpected(format!("pyiceberg answered {answer}")));
        }
        leg.freshness.extend(range.map(|k| visible - put_at[k]));
    }
    leg.peak_kb.push(("python".to_owned(), py.finish()?));
    Ok(leg)
}

async fn run() -> Result<()> {
    let a = args()?;
    let objects = Objects::new(a.object_kib);
    println!(
        "functions under load: {} events, {} per invocation, objects of {} rows (~{} KiB), commit every {:.1} s, {} MB per function, {} ms round trip to the store and catalog",
        a.events,
        a.batch,
        objects.rows,
        a.object_kib,
        a.commit_every.as_secs_f64(),
        TEMPLATE_MEMORY_MB,
        a.rtt.as_millis()
    );
    let mut legs = Vec::new();
    for name in &a.legs {
        let leg = match name.as_str() {
            "fc" | "lambda" => floe_leg(&a, name).await?,
            "pyiceberg" => pyiceberg_leg(&a).await?,
            other => return Err(Error::invalid_input(format!("unknown leg {other}"))),
        };
        legs.push(leg);
    }
    println!(
        "{:<34} {:>7} {:>8} {:>8} {:>7} {:>8} {:>8} {:>8} {:>8} {:>9}   peak",
        "",
        "inv/s",
        "p50 ms",
        "p99 ms",
        "commits",
        "c50 ms",
        "cmax ms",
        "fresh50",
        "fresh99",
        "GB-s/GiB"
    );
    for leg in &legs {
        leg.print();
    }
    if let Some(py) = legs.iter().find(|l| l.name.starts_with("pyiceberg")) {
        for leg in legs.iter().filter(|l| l.name.starts_with("floe")) {
            println!(
                "{}: GB-s per GiB x{:.1} less than pyiceberg, invocations per second x{:.1}",
                leg.name,
                py.gb_s_per_gib() / leg.gb_s_per_gib(),
                (leg.latencies.len() as f64 / leg.busy()) / (py.latencies.len() as f64 / py.busy()),
            );
        }
    }
    Ok(())
}

fn main() -> std::process::ExitCode {
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("functions_load: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    match rt.block_on(run()) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("functions_load: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}
