//! The Function Compute stack as shipped: `s.yaml` rendered as Serverless Devs renders it (its
//! `vars` pointed at the stand-ins, as a user points them at their region), then the function
//! binaries run as FC custom runtimes with exactly the environment `s.yaml` gives them plus
//! what FC sets (the role's STS keys in `ALIBABA_CLOUD_*`). Stand-ins: s3s-fs as OSS (source
//! and state buckets), the MNS emulator (signatures checked), lakana-server as OSS Tables'
//! Iceberg REST endpoint behind a gate that checks every request's SigV4 (`osstables`, the STS
//! token), and the MaxCompute emulator. OSS trigger → ingest; MNS queue → poll; commit; rows
//! read back with pyiceberg and from the MaxCompute emulator.
//!
//! The second test is an FC instance living through an STS token's replacement: FC sets the
//! role's keys in the environment once per instance and hands the current ones with every
//! request (`x-fc-*`). After the stand-ins start accepting only the new token, the next
//! invocations (which carry it in their headers only) must succeed, and no function log line
//! may hold a key secret or token.

use bytes::Bytes;
use floe_core::Provider;
use floe_signing::Credentials;
use floe_storage::{ObjectStore, PutMode, S3Store, S3StoreConfig};
use floe_testbed::functions::{FunctionDir, FunctionProcess};
use floe_testbed::maxcompute::{MaxComputeEmulator, MaxComputeEmulatorConfig};
use floe_testbed::mns::{MnsEmulator, MnsEmulatorConfig};
use floe_testbed::servers::{LakanaServer, Linearizer, S3sFs, SigV4Gate};
use floe_testbed::templates::{fc_template, function_env, render, sibling_binary};
use serde_json::{Value, json};

const OWN: &str = env!("CARGO_BIN_EXE_floe");
const REGION: &str = "cn-hangzhou";
const SOURCE: &str = "landing";
const STATE: &str = "floe-state";
const QUEUE: &str = "floe-oss-events";
const PROJECT: &str = "floe_project";
/// The STS token FC hands the function with the role's keys.
const TOKEN: &str = "CAIS-floe-fc-role-sts-token";
/// The token FC hands out once `TOKEN` has expired.
const NEXT_TOKEN: &str = "CAIS-floe-fc-role-sts-token-reissued";

/// The role's keys with `token` (s3s-fs has fixed keys; the token is what STS replaces).
fn sts(token: &str) -> Credentials {
    Credentials::new(S3sFs::ACCESS_KEY_ID, S3sFs::SECRET_ACCESS_KEY).with_security_token(token)
}

/// What FC sets for a function with a role, besides what `s.yaml` says: the role's keys as they
/// were when the instance started (FC never updates them for a running instance).
fn fc_env(template: Vec<(String, String)>, name: &str) -> Vec<(String, String)> {
    let mut env = template;
    env.extend(
        [
            ("ALIBABA_CLOUD_ACCESS_KEY_ID", S3sFs::ACCESS_KEY_ID),
            ("ALIBABA_CLOUD_ACCESS_KEY_SECRET", S3sFs::SECRET_ACCESS_KEY),
            ("ALIBABA_CLOUD_SECURITY_TOKEN", TOKEN),
            ("FC_REGION", REGION),
            ("FC_ACCOUNT_ID", "1234567890"),
            ("FC_FUNCTION_NAME", name),
            ("FC_FUNCTION_MEMORY_SIZE", "1024"),
        ]
        .map(|(k, v)| (k.to_owned(), v.to_owned())),
    );
    env
}

/// FC's request headers, with the role's keys as they are at the time of the request.
fn fc_headers<'a>(id: &'a str, token: &'a str) -> Vec<(&'a str, &'a str)> {
    vec![
        ("x-fc-request-id", id),
        ("x-fc-control-path", "/invoke"),
        ("x-fc-function-timeout", "120"),
        ("x-fc-access-key-id", S3sFs::ACCESS_KEY_ID),
        ("x-fc-access-key-secret", S3sFs::SECRET_ACCESS_KEY),
        ("x-fc-security-token", token),
        ("content-type", "application/octet-stream"),
    ]
}

fn invoke(f: &FunctionProcess, id: &str, body: &[u8]) -> Value {
    invoke_with(f, id, TOKEN, body)
}

fn invoke_with(f: &FunctionProcess, id: &str, token: &str, body: &[u8]) -> Value {
    let r = f
        .fc("POST", "/invoke", &fc_headers(id, token), body)
        .unwrap();
    assert_eq!(
        (r.status, r.header("x-fc-status")),
        (200, Some("200")),
        "{id}: {}\n{}",
        String::from_utf8_lossy(&r.body),
        f.log_tail()
    );
    r.json()
}

/// The stand-ins, `s.yaml` rendered for them, and the directory the functions run in.
struct Stack {
    _s3s: S3sFs,
    /// OSS as the functions reach it: the one-request-at-a-time front before s3s-fs.
    oss: Linearizer,
    source: S3Store,
    state: S3Store,
    mns: MnsEmulator,
    lakana: LakanaServer,
    gate: Linearizer,
    mc: MaxComputeEmulator,
    rendered: Value,
    dir: FunctionDir,
}

impl Stack {
    async fn start() -> Stack {
        Self::start_with_targets("[\"iceberg\", \"maxcompute\"]").await
    }

    /// The stack with the route's `targets` set to `targets` (`routeTargets` of `s.yaml`).
    async fn start_with_targets(targets: &str) -> Stack {
        // OSS: s3s-fs behind the one-request-at-a-time front (atomic conditional writes).
        let s3s = S3sFs::start().await.expect("start s3s-fs");
        for b in [SOURCE, STATE] {
            s3s.create_bucket(b).unwrap();
        }
        let oss = Linearizer::start(&s3s.endpoint()).await.unwrap();
        let source = S3Store::new(
            S3StoreConfig::new(Provider::Oss, SOURCE)
                .with_endpoint(oss.endpoint())
                .with_region(REGION)
                .with_path_style(true)
                .with_keys(S3sFs::ACCESS_KEY_ID, S3sFs::SECRET_ACCESS_KEY, None),
        )
        .await
        .unwrap();
        let state = source.with_bucket(STATE).unwrap();
        let mns = MnsEmulator::start(MnsEmulatorConfig::new(sts(TOKEN)).with_queue(QUEUE))
            .await
            .unwrap();
        let lakana = LakanaServer::start().await.expect("start lakana-server");
        let gate = Linearizer::start_sigv4(
            &lakana.uri(),
            SigV4Gate::new("osstables", REGION, sts(TOKEN), lakana.token())
                .with_config_prefix(lakana.prefix()),
        )
        .await
        .unwrap();
        let mc = MaxComputeEmulator::start(MaxComputeEmulatorConfig::new(sts(TOKEN)))
            .await
            .unwrap();

        // s.yaml with its vars pointed at the stand-ins and MaxCompute switched on.
        let maxcompute = format!(
            "[maxcompute]\nendpoint = \"{}\"\ntunnel_endpoint = \"{}\"\nproject = \"{PROJECT}\"\ntable_name = \"events\"\n",
            mc.endpoint(),
            mc.tunnel_endpoint()
        );
        let vars = [
            ("ossEndpoint", oss.endpoint().to_owned()),
            ("mnsEndpoint", mns.endpoint().to_owned()),
            ("catalogUri", gate.endpoint().to_owned()),
            ("routeTable", "bronze.events".to_owned()),
            ("routeTargets", targets.to_owned()),
            ("maxcompute", maxcompute),
        ];
        let mut args: Vec<String> = [
            ("--env", format!("FLOE_REGION={REGION}")),
            ("--env", format!("FLOE_SOURCE_BUCKET={SOURCE}")),
            ("--env", format!("FLOE_STATE_BUCKET={STATE}")),
            (
                "--env",
                "FLOE_TABLE_BUCKET_ARN=acs:osstables:cn-hangzhou:1234567890:bucket/floe".to_owned(),
            ),
            ("--config", "AccountID=1234567890".to_owned()),
        ]
        .into_iter()
        .flat_map(|(f, v)| [f.to_owned(), v])
        .collect();
        for (k, v) in vars {
            args.extend(["--var".to_owned(), format!("{k}={v}")]);
        }
        let rendered = render("fc", &fc_template(), &args).unwrap();
        Stack {
            _s3s: s3s,
            oss,
            source,
            state,
            mns,
            lakana,
            gate,
            mc,
            rendered,
            dir: FunctionDir::deployed().unwrap(),
        }
    }

    /// One function of `s.yaml` as an FC instance.
    fn spawn(&self, function: &str) -> FunctionProcess {
        let binary = self.rendered["functions"][function]["binary"]
            .as_str()
            .unwrap();
        self.dir
            .spawn_fc(
                &sibling_binary(OWN, binary),
                &fc_env(function_env(&self.rendered, function), function),
            )
            .unwrap()
    }

    /// The ids in the Iceberg table, sorted (pyiceberg, straight from lakana).
    fn iceberg_ids(&self) -> Vec<i64> {
        let read = floe_testbed::pyiceberg::read_rest_table(
            &self.lakana.uri(),
            &self.lakana.token(),
            self.lakana.prefix(),
            "bronze.events",
        );
        let mut ids: Vec<i64> = read["rows"]
            .as_array()
            .unwrap_or_else(|| panic!("{read}"))
            .iter()
            .map(|r| r["id"].as_i64().unwrap())
            .collect();
        ids.sort();
        ids
    }

    /// The configuration `s.yaml` hands the functions.
    fn deployed_config(&self) -> String {
        self.rendered["functions"]["ingest"]["env"]["FLOE_CONFIG_TOML"]
            .as_str()
            .unwrap()
            .to_owned()
    }

    /// Accept only the role's keys with `token` from now on, everywhere.
    fn reissue(&self, token: &str) {
        self.oss.set_required_security_token(Some(token));
        self.gate.set_gate_credentials(sts(token));
        self.mns.set_credentials(sts(token));
        self.mc.set_credentials(sts(token));
    }
}

fn committed_rows(out: &Value, log: &str) -> u64 {
    out["commits"]
        .as_array()
        .unwrap_or_else(|| panic!("{out}\n{log}"))
        .iter()
        .map(|c| c["rows"].as_u64().unwrap_or(0))
        .sum()
}

fn oss_event(key: &str, etag: &str, size: usize) -> Value {
    json!({
        "eventName": "ObjectCreated:PutObject",
        "eventSource": "acs:oss",
        "eventTime": "2026-12-01T08:30:45.000Z",
        "eventVersion": "1.0",
        "oss": {
            "bucket": {"arn": format!("acs:oss:{REGION}:1234567890:{SOURCE}"), "name": SOURCE, "ownerIdentity": "1234567890"},
            "object": {"deltaSize": size, "eTag": etag, "key": key, "size": size},
            "ossSchemaVersion": "1.0",
            "ruleId": "floe"
        },
        "region": REGION
    })
}

async fn put(store: &S3Store, key: &str, ids: std::ops::Range<i64>) -> Value {
    let body: String = ids.map(|i| format!("{{\"id\":{i}}}\n")).collect();
    let size = body.len();
    let etag = store
        .put(key, Bytes::from(body), PutMode::Overwrite)
        .await
        .unwrap()
        .unwrap();
    oss_event(key, &etag.to_ascii_uppercase(), size)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_fc_stack_lands_rows_with_its_own_configuration() {
    let stack = Stack::start().await;
    let source = &stack.source;

    // `floe config check --connect` with the deployed configuration reaches the MNS queue, the
    // buckets and the catalog; a queue that is not there is named.
    let toml = stack.deployed_config();
    let (code, out) = config_check(&toml);
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("reached: catalog"), "{out}");
    let (code, out) = config_check(&toml.replace(
        &format!("queue-name = \"{QUEUE}\""),
        "queue-name = \"no-such-queue\"",
    ));
    assert_eq!(code, Some(2), "{out}");
    assert!(out.contains("source.queue-name"), "{out}");

    // The OSS trigger: two objects.
    let ingest = stack.spawn("ingest");
    let a = put(source, "orders/a.ndjson", 0..3).await;
    let b = put(source, "orders/b.ndjson", 3..5).await;
    let out = invoke(
        &ingest,
        "fc-oss-1",
        json!({ "events": [a, b] }).to_string().as_bytes(),
    );
    assert_eq!(out["rows"], 5, "{out}");
    drop(ingest);

    // The MNS topic trigger option (`ingest-mns`, the same binary): a notification published to
    // the topic, and an object that is not gzip at all, set aside as a dead letter.
    let ingest_mns = stack.spawn("ingest-mns");
    let d = put(source, "orders/d.ndjson", 9..11).await;
    let broken = {
        let body = Bytes::from_static(b"definitely not gzip");
        let etag = source
            .put("orders/broken.ndjson.gz", body.clone(), PutMode::Overwrite)
            .await
            .unwrap()
            .unwrap();
        oss_event(
            "orders/broken.ndjson.gz",
            &etag.to_ascii_uppercase(),
            body.len(),
        )
    };
    let topic = json!({
        "TopicOwner": "1234567890", "TopicName": QUEUE, "Subscriber": "1234567890",
        "SubscriptionName": "floe-ingest", "MessageId": "2F5B3C281B283D4EAC694B7425280001",
        "MessageMD5": "BA4BA9B48AC81F0F9C66F6C909C3A1B2", "PublishTime": 1796148000000i64,
        "Message": json!({ "events": [d, broken] }).to_string()
    });
    let out = invoke(&ingest_mns, "fc-mns-1", topic.to_string().as_bytes());
    assert_eq!(
        (out["rows"].clone(), out["dead_letters"].clone()),
        (json!(2), json!(1)),
        "{out}"
    );
    drop(ingest_mns);
    let letters = stack
        .state
        .list("floe/dead-letter/", None, 100)
        .await
        .unwrap();
    assert_eq!(
        letters.objects.len(),
        1,
        "the dead letter is in the state bucket"
    );

    // The MNS queue: one more object, pulled by poll on its timer.
    let c = put(source, "orders/c.ndjson", 5..9).await;
    stack
        .mns
        .send_message(QUEUE, &json!({ "events": [c] }).to_string())
        .unwrap();
    let poll = stack.spawn("poll");
    let timer =
        json!({"triggerTime": "2026-12-01T08:31:00Z", "triggerName": "timer", "payload": ""});
    let out = invoke(&poll, "fc-timer-1", timer.to_string().as_bytes());
    assert_eq!(out["rows"], 4, "{out}\n{}", poll.log_tail());
    assert_eq!(stack.mns.queue_len(QUEUE), 0);
    drop(poll);

    // An object no event names, landed by the backfill function through its HTTP trigger; the
    // other objects of the listing were landed already (or set aside) and land nothing again.
    source
        .put(
            "orders/e.ndjson",
            Bytes::from_static(b"{\"id\":11}\n{\"id\":12}\n"),
            PutMode::Overwrite,
        )
        .await
        .unwrap();
    let backfill = stack.spawn("backfill");
    let r = backfill
        .fc(
            "POST",
            "/",
            &[
                ("x-fc-request-id", "fc-http-1"),
                ("x-fc-function-timeout", "120"),
            ],
            br#"{"mode":"SNAPSHOT"}"#,
        )
        .unwrap();
    assert_eq!(
        (r.status, r.header("x-fc-status")),
        (200, Some("200")),
        "{}\n{}",
        String::from_utf8_lossy(&r.body),
        backfill.log_tail()
    );
    let listing = r.json();
    assert_eq!(
        (
            listing["listed"].clone(),
            listing["rows"].clone(),
            listing["complete"].clone()
        ),
        (json!(6), json!(2), json!(true)),
        "{listing}"
    );
    drop(backfill);

    // Commit on its timer: Iceberg through the SigV4 gate, MaxCompute through its tunnel.
    let commit = stack.spawn("commit");
    let out = invoke(&commit, "fc-commit-1", br#"{"force":true}"#);
    assert_eq!(
        committed_rows(&out, &commit.log_tail()),
        26,
        "13 rows to Iceberg, 13 to MaxCompute: {out}\n{}",
        commit.log_tail()
    );
    drop(commit);

    assert_eq!(stack.iceberg_ids(), (0..13).collect::<Vec<_>>());

    // The maintain resource (the commit package, its timer's payload `{"maintain": true}` as
    // s.yaml sets it) maintains the table through the same gate and keeps its rows.
    let maintain = stack.spawn("maintain");
    let timer = json!({
        "triggerTime": "2026-12-02T06:00:00Z",
        "triggerName": "timer",
        "payload": "{\"maintain\": true}",
    });
    let out = invoke(&maintain, "fc-maintain-1", timer.to_string().as_bytes());
    assert_eq!(
        out["maintained"][0]["table"],
        "bronze.events",
        "{out}\n{}",
        maintain.log_tail()
    );
    drop(maintain);
    assert_eq!(stack.iceberg_ids(), (0..13).collect::<Vec<_>>());
    let rows = stack.mc.rows(&format!("{PROJECT}.events"), None).unwrap();
    assert_eq!(rows.len(), 13, "{rows:?}");
    let (checked, refused) = stack.gate.gate_counts();
    assert!(checked > 0, "no catalog request went through the gate");
    assert_eq!(refused, 0, "the gate refused a catalog request");

    // No log line shows the role's secret or token.
    for e in std::fs::read_dir(stack.dir.path()).unwrap().flatten() {
        let text = std::fs::read_to_string(e.path()).unwrap_or_default();
        for secret in [S3sFs::SECRET_ACCESS_KEY, TOKEN] {
            assert!(
                !text.contains(secret),
                "{} shows a secret",
                e.path().display()
            );
        }
    }

    // floe's state is in the state bucket, nothing of it on the function's disk.
    let listed = stack
        .state
        .list("floe/checkpoint/", None, 1000)
        .await
        .unwrap();
    assert!(
        !listed.objects.is_empty(),
        "no checkpoint entries in the state bucket"
    );
    for e in std::fs::read_dir(stack.dir.path()).unwrap().flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        assert!(
            name.ends_with(".log"),
            "a function wrote {name} to its disk"
        );
    }
}

/// The event of an OSS `AppendObject` that left `key` at `size` bytes, `delta` of them new.
fn append_event(key: &str, etag: &str, size: usize, delta: usize) -> Value {
    let mut e = oss_event(key, etag, size);
    e["eventName"] = json!("ObjectCreated:AppendObject");
    e["oss"]["object"]["deltaSize"] = json!(delta);
    e
}

/// Append to `key` as OSS would leave it: lines `{"id":0}` up to `upto`, the bytes before
/// `last` unchanged; the append's event. `last` becomes the new size.
async fn grow(store: &S3Store, key: &str, upto: i64, last: &mut usize) -> Value {
    let body: String = (0..upto).map(|i| format!("{{\"id\":{i}}}\n")).collect();
    let etag = store
        .put(key, Bytes::from(body.clone()), PutMode::Overwrite)
        .await
        .unwrap()
        .unwrap();
    let e = append_event(
        key,
        &etag.to_ascii_uppercase(),
        body.len(),
        body.len() - *last,
    );
    *last = body.len();
    e
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn appends_land_only_their_new_bytes_once() {
    // s3s-fs has no AppendObject: each append is played by writing the grown object (its first
    // bytes unchanged, as OSS keeps them) and sending the event OSS sends for an append.
    let stack = Stack::start().await;
    let key = "orders/app.ndjson";
    let mut last = 0;
    let ingest = stack.spawn("ingest");
    let rows = |id: &str, events: Vec<Value>| {
        let out = invoke(
            &ingest,
            id,
            json!({ "events": events }).to_string().as_bytes(),
        );
        out["rows"].as_u64().unwrap_or_else(|| panic!("{out}"))
    };
    let first = grow(&stack.source, key, 3, &mut last).await;
    assert_eq!(rows("fc-append-1", vec![first.clone()]), 3);
    let second = grow(&stack.source, key, 5, &mut last).await;
    assert_eq!(
        rows("fc-append-2", vec![second.clone()]),
        2,
        "only the two new lines"
    );
    // A redelivered append lands nothing; an older one delivered with a newer one lands only
    // what neither landed.
    assert_eq!(rows("fc-append-3", vec![first]), 0);
    let third = grow(&stack.source, key, 8, &mut last).await;
    assert_eq!(rows("fc-append-4", vec![second, third]), 3);
    drop(ingest);

    let commit = stack.spawn("commit");
    invoke(&commit, "fc-commit-1", br#"{"force":true}"#);
    drop(commit);
    assert_eq!(stack.iceberg_ids(), (0..8).collect::<Vec<_>>());
    let mc = stack.mc.rows(&format!("{PROJECT}.events"), None).unwrap();
    assert_eq!(mc.len(), 8, "{mc:?}");
}

/// `floe config check --connect` of `toml`, run as an operator with the role's keys: (exit
/// code, output).
fn config_check(toml: &str) -> (Option<i32>, String) {
    let admin = tempfile::tempdir().unwrap();
    std::fs::write(admin.path().join("floe.toml"), toml).unwrap();
    let out = std::process::Command::new(OWN)
        .current_dir(admin.path())
        .args(["config", "check", "--connect", "--config", "floe.toml"])
        .envs(fc_env(Vec::new(), "operator"))
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr),
    )
}

/// Every file under `dir`, recursively.
fn files_under(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(files_under(&p));
        } else {
            out.push(p);
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_fc_stack_with_maxcompute_only_stages_in_the_state_bucket_not_the_catalog() {
    let stack = Stack::start_with_targets("[\"maxcompute\"]").await;
    let (code, out) = config_check(&stack.deployed_config());
    assert_eq!(code, Some(0), "{out}");
    assert!(
        out.contains("reached: staging location oss://floe-state/floe/staging"),
        "{out}"
    );
    let ingest = stack.spawn("ingest");
    let a = put(&stack.source, "orders/a.ndjson", 0..3).await;
    let b = put(&stack.source, "orders/b.ndjson", 3..5).await;
    let out = invoke(
        &ingest,
        "fc-oss-1",
        json!({ "events": [a, b] }).to_string().as_bytes(),
    );
    assert_eq!(out["rows"], 5, "{out}\n{}", ingest.log_tail());
    drop(ingest);

    // The staged Parquet files wait in the state bucket, beside the checkpoint table; the
    // catalog holds no table made only to stage them.
    let staged = stack.state.list("floe/staging/", None, 100).await.unwrap();
    assert!(
        !staged.objects.is_empty() && staged.objects.iter().all(|o| o.key.ends_with(".parquet")),
        "{:?}",
        staged.objects
    );
    let lakana_files = files_under(&stack.lakana.warehouse_dir());
    assert!(
        lakana_files.is_empty(),
        "the catalog got files for a route without an iceberg target: {lakana_files:?}"
    );

    let commit = stack.spawn("commit");
    let out = invoke(&commit, "fc-commit-1", br#"{"force":true}"#);
    assert_eq!(
        committed_rows(&out, &commit.log_tail()),
        5,
        "{out}\n{}",
        commit.log_tail()
    );
    drop(commit);
    let rows = stack.mc.rows(&format!("{PROJECT}.events"), None).unwrap();
    assert_eq!(rows.len(), 5, "{rows:?}");
    let left = stack.state.list("floe/staging/", None, 100).await.unwrap();
    assert!(
        left.objects.is_empty(),
        "staged files left after the commit: {:?}",
        left.objects
    );
    assert!(files_under(&stack.lakana.warehouse_dir()).is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_fc_instance_signs_with_the_keys_of_the_latest_invocation() {
    let stack = Stack::start().await;
    stack.reissue(TOKEN);
    // The test's own writes to OSS carry whichever token the front accepts.
    let store = |token: &str| {
        S3Store::new(
            S3StoreConfig::new(Provider::Oss, SOURCE)
                .with_endpoint(stack.oss.endpoint())
                .with_region(REGION)
                .with_path_style(true)
                .with_keys(
                    S3sFs::ACCESS_KEY_ID,
                    S3sFs::SECRET_ACCESS_KEY,
                    Some(token.into()),
                ),
        )
    };
    let ingest = stack.spawn("ingest");
    let poll = stack.spawn("poll");
    let commit = stack.spawn("commit");
    let timer =
        json!({"triggerTime": "2026-12-01T08:31:00Z", "triggerName": "timer", "payload": ""})
            .to_string();

    // The instances' first invocations, with the keys they started with.
    let first = store(TOKEN).await.unwrap();
    let a = put(&first, "orders/a.ndjson", 0..3).await;
    let out = invoke_with(
        &ingest,
        "fc-oss-1",
        TOKEN,
        json!({ "events": [a] }).to_string().as_bytes(),
    );
    assert_eq!(out["rows"], 3, "{out}");
    let b = put(&first, "orders/b.ndjson", 3..5).await;
    stack
        .mns
        .send_message(QUEUE, &json!({ "events": [b] }).to_string())
        .unwrap();
    let out = invoke_with(&poll, "fc-timer-1", TOKEN, timer.as_bytes());
    assert_eq!(out["rows"], 2, "{out}");
    let out = invoke_with(&commit, "fc-commit-1", TOKEN, br#"{"force":true}"#);
    assert_eq!(committed_rows(&out, &commit.log_tail()), 10, "{out}");

    // The token expires: every stand-in accepts only the reissued one, which FC hands the
    // next invocations in their headers; the instances' environment still holds the old one.
    stack.reissue(NEXT_TOKEN);
    let next = store(NEXT_TOKEN).await.unwrap();
    let c = put(&next, "orders/c.ndjson", 5..9).await;
    let out = invoke_with(
        &ingest,
        "fc-oss-2",
        NEXT_TOKEN,
        json!({ "events": [c] }).to_string().as_bytes(),
    );
    assert_eq!(out["rows"], 4, "{out}");
    let d = put(&next, "orders/d.ndjson", 9..10).await;
    stack
        .mns
        .send_message(QUEUE, &json!({ "events": [d] }).to_string())
        .unwrap();
    let out = invoke_with(&poll, "fc-timer-2", NEXT_TOKEN, timer.as_bytes());
    assert_eq!(out["rows"], 1, "{out}");
    let out = invoke_with(&commit, "fc-commit-2", NEXT_TOKEN, br#"{"force":true}"#);
    assert_eq!(committed_rows(&out, &commit.log_tail()), 10, "{out}");

    assert_eq!(stack.iceberg_ids(), (0..10).collect::<Vec<_>>());
    let rows = stack.mc.rows(&format!("{PROJECT}.events"), None).unwrap();
    assert_eq!(rows.len(), 10, "{rows:?}");
    assert_eq!(
        stack.gate.gate_counts().1,
        0,
        "the gate refused a catalog request"
    );
    assert_eq!(
        stack.oss.token_refusals(),
        0,
        "oss refused a request's token"
    );

    // No key secret or token in any line the functions logged.
    let logs = [&ingest, &poll, &commit].map(|f| f.log());
    for (log, name) in logs.iter().zip(["ingest", "poll", "commit"]) {
        assert!(log.lines().count() > 3, "{name} logged nothing:\n{log}");
        for secret in [S3sFs::SECRET_ACCESS_KEY, TOKEN, NEXT_TOKEN] {
            if let Some(line) = log.lines().find(|l| l.contains(secret)) {
                panic!(
                    "{name} logged a secret or token: {}",
                    line.replace(secret, "<secret>")
                );
            }
        }
    }
}
