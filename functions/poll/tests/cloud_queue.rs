//! `floe-poll` and the backfill handler on a queue source, as a deployment runs them: an
//! `INITIAL` MNS source whose bucket is served by s3s-fs (standing in for OSS's S3-compatible
//! endpoint). Until the listing is done a poll pulls nothing; the backfill lands what the
//! bucket holds; then polls take the queue, and an object both listed and notified lands once.
//! Committed with the pipeline, read back with pyiceberg.

use std::path::Path;
use std::time::Duration;

use bytes::Bytes;
use floe_core::Provider;
use floe_pipeline::{FloeConfig, Pipeline};
use floe_runtime::{Deadline, Event, Invocation, Output};
use floe_signing::Credentials;
use floe_storage::{ObjectStore, PutMode, S3Store, S3StoreConfig};
use floe_testbed::functions::FunctionDir;
use floe_testbed::lambda::LambdaRuntimeApi;
use floe_testbed::mns::{MnsEmulator, MnsEmulatorConfig};
use floe_testbed::servers::S3sFs;

const BIN: &str = env!("CARGO_BIN_EXE_floe-poll");
const QUEUE: &str = "oss-events";
const BUCKET: &str = "landing";
const REGION: &str = "cn-hangzhou";
const KEY_ID: &str = "LTAI5tFloePollTestKey";
const SECRET: &str = "floe-poll-test-secret-0123456789";

fn config(mns: &MnsEmulator, s3s: &S3sFs) -> String {
    format!(
        r#"
[source]
type = "mns"
endpoint = "{mns}"
region = "{REGION}"
queue-name = "{QUEUE}"
access-key-id = "{KEY_ID}"
access-key-secret = "{SECRET}"
polling-wait-time = "0s"
scan.startup.mode = "INITIAL"
oss-bucket = "{BUCKET}"
path = "data/"
s3.endpoint = "{s3}"
s3.path-style-access = true
s3.access-key-id = "{s3_key}"
s3.secret-access-key = "{s3_secret}"

[iceberg]
catalog.type = "sql"
catalog.uri = "catalog.db"
catalog.warehouse = "warehouse"

[checkpoint]
path = "checkpoint.db"

[[routes]]
prefix = "data/"
format = "ndjson"
table = "lake.events"
"#,
        mns = mns.endpoint(),
        s3 = s3s.endpoint(),
        s3_key = S3sFs::ACCESS_KEY_ID,
        s3_secret = S3sFs::SECRET_ACCESS_KEY,
    )
}

async fn put(store: &S3Store, key: &str, ids: &[i64]) -> (String, usize) {
    let body: String = ids.iter().map(|i| format!("{{\"id\":{i}}}\n")).collect();
    let size = body.len();
    let etag = store
        .put(key, Bytes::from(body), PutMode::Overwrite)
        .await
        .unwrap()
        .unwrap();
    (etag.to_ascii_uppercase(), size)
}

fn notify(mns: &MnsEmulator, key: &str, (etag, size): &(String, usize)) {
    let event = serde_json::json!({"events": [{
        "eventName": "ObjectCreated:PutObject",
        "eventSource": "acs:oss",
        "eventTime": chrono::DateTime::from_timestamp_millis(mns.now_ms()).unwrap().to_rfc3339(),
        "eventVersion": "1.0",
        "oss": {
            "bucket": {"arn": format!("acs:oss:{REGION}:1234567890:{BUCKET}"), "name": BUCKET, "ownerIdentity": "1234567890"},
            "object": {"deltaSize": size, "eTag": etag, "key": key, "size": size},
            "ossSchemaVersion": "1.0",
            "ruleId": "floe"
        },
        "region": REGION
    }]});
    mns.send_message(QUEUE, &event.to_string()).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn initial_source_lists_first_then_polls_the_queue_landing_each_object_once() {
    let s3s = S3sFs::start().await.expect("start s3s-fs");
    s3s.create_bucket(BUCKET).unwrap();
    let store = S3Store::new(
        S3StoreConfig::new(Provider::Oss, BUCKET)
            .with_endpoint(s3s.endpoint())
            .with_region(REGION)
            .with_path_style(true)
            .with_keys(S3sFs::ACCESS_KEY_ID, S3sFs::SECRET_ACCESS_KEY, None),
    )
    .await
    .unwrap();
    let mns = MnsEmulator::start(
        MnsEmulatorConfig::new(Credentials::new(KEY_ID, SECRET))
            .with_queue(QUEUE)
            .with_visibility_timeout(Duration::from_secs(5)),
    )
    .await
    .unwrap();
    let dir = FunctionDir::new(&config(&mns, &s3s)).unwrap();

    // Before the listing: `a` is only in the bucket, `b` is also notified.
    put(&store, "data/a.ndjson", &[1, 2]).await;
    let b = put(&store, "data/b.ndjson", &[3]).await;
    notify(&mns, "data/b.ndjson", &b);

    let api = LambdaRuntimeApi::start().await.unwrap();
    let function = dir.spawn_lambda(Path::new(BIN), &api, &[]).unwrap();
    let schedule = br#"{"source":"aws.events","detail-type":"Scheduled Event"}"#;
    let wait = Duration::from_secs(60);

    // INITIAL with the listing not done: the poll leaves the queue alone.
    let r = api.call(schedule, wait).await.unwrap().json();
    assert_eq!(
        (
            r["messages"].clone(),
            r["rows"].clone(),
            r["drained"].clone()
        ),
        (0.into(), 0.into(), false.into()),
        "{r}\n{}",
        function.log_tail()
    );
    assert_eq!(mns.queue_len(QUEUE), 1);

    // The backfill handler on the same configuration lists and lands the bucket.
    let pipeline = Pipeline::open(FloeConfig::load(&dir.config()).unwrap())
        .await
        .unwrap();
    let deps = floe_backfill::Deps::new(pipeline);
    let invocation =
        || Invocation::new("b1", "backfill", Deadline::after(Duration::from_secs(120)));
    let Output::Json(r) = floe_backfill::handle(
        Event::payload(r#"{"bucket":"landing","prefixes":["data/"]}"#, invocation()),
        &deps,
    )
    .await
    .unwrap() else {
        panic!("expected json")
    };
    assert_eq!(
        (
            r["listed"].clone(),
            r["rows"].clone(),
            r["complete"].clone()
        ),
        (2.into(), 3.into(), true.into()),
        "{r}"
    );
    // A request for another bucket is refused, naming both.
    let e = floe_backfill::handle(
        Event::payload(r#"{"bucket":"elsewhere"}"#, invocation()),
        &deps,
    )
    .await
    .unwrap_err();
    assert!(
        e.to_string().contains("elsewhere") && e.to_string().contains(BUCKET),
        "{e}"
    );

    // Now the poll takes the queue: `b` again (already landed: deleted, not repeated), and `c`.
    let c = put(&store, "data/c.ndjson", &[4, 5]).await;
    notify(&mns, "data/c.ndjson", &c);
    let r = api.call(schedule, wait).await.unwrap().json();
    assert_eq!(
        (
            r["messages"].clone(),
            r["rows"].clone(),
            r["failed"].clone(),
            r["drained"].clone()
        ),
        (2.into(), 2.into(), 0.into(), true.into()),
        "{r}\n{}",
        function.log_tail()
    );
    assert_eq!(mns.queue_len(QUEUE), 0);
    drop(function);

    deps.source.commit(true).await.unwrap();
    assert_eq!(dir.ids("lake.events"), (vec![1, 2, 3, 4, 5], 1));
}
