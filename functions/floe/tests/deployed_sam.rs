//! The SAM stack as shipped: `template.yaml` rendered for its conditions, then the function
//! binaries run under the Lambda Runtime API emulator with exactly the environment the template
//! gives them (the rendered `FLOE_CONFIG_TOML`) plus what Lambda sets (the function's role keys
//! in `AWS_*`), against moto standing in for S3, SQS and S3 Tables (reached through the AWS
//! SDKs' own `AWS_ENDPOINT_URL` override). Objects put in the source bucket notify the queue;
//! the SQS event source pushes them to ingest (or the poll function pulls them); commit lands
//! them in the S3 Tables table; pyiceberg reads the table back from its metadata file.
//!
//! Every combination of the template's conditions is also read by floe's own parser here, so a
//! template that writes an option floe does not read fails this test.

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use aws_sdk_s3::types::{Event, NotificationConfiguration, QueueConfiguration};
use bytes::Bytes;
use floe_core::Provider;
use floe_iceberg::s3tables::S3TablesAdmin;
use floe_pipeline::FloeConfig;
use floe_pipeline::config::{CheckpointConfig, QueueConfig, SourceConfig, parse};
use floe_queue::StartupMode;
use floe_queue::sqs::{SqsConfig, SqsConsumer};
use floe_signing::Credentials;
use floe_storage::{ObjectStore, PutMode, S3Store, S3StoreConfig};
use floe_testbed::functions::{FunctionDir, FunctionProcess};
use floe_testbed::lambda::LambdaRuntimeApi;
use floe_testbed::maxcompute::{MaxComputeEmulator, MaxComputeEmulatorConfig};
use floe_testbed::servers::{LakanaServer, Linearizer, MotoServer, SigV4Gate};
use floe_testbed::templates::{function_env, render, sam_template, sibling_binary};
use floe_testbed::venv::{python_with, run_python};
use serde_json::{Value, json};

const OWN: &str = env!("CARGO_BIN_EXE_floe");
const SOURCE: &str = "floe-src";
const STATE: &str = "floe-state";
const QUEUE: &str = "floe-ingest";
const KEY: &str = MotoServer::ACCESS_KEY_ID;
const REGION: &str = MotoServer::REGION;
const WAIT: Duration = Duration::from_secs(90);
/// The Lambda role's secret key and session token (moto takes any): no log may show them.
const ROLE_SECRET: &str = "floe-lambda-role-secret-0123456789";
const ROLE_TOKEN: &str = "floe-lambda-role-session-token-0123456789";

/// Every log line the functions wrote in `dir`, checked for the role's secret and token and
/// the `more` secrets.
fn assert_no_secret_in_logs(dir: &Path, more: &[&str]) {
    for path in walk(dir).iter().filter(|p| p.ends_with(".log")) {
        let text = std::fs::read_to_string(path).unwrap();
        assert!(!text.is_empty(), "{path} is empty");
        for secret in [ROLE_SECRET, ROLE_TOKEN].iter().chain(more) {
            assert!(!text.contains(secret), "{path} shows a secret");
        }
    }
}

/// A rendered configuration read as a deployed function reads it.
fn parse_rendered(toml: &str) -> floe_core::Result<FloeConfig> {
    FloeConfig::from_raw(parse(toml, false)?, Path::new("/var/task"))
}

fn rendered_toml(render: &Value, function: &str) -> String {
    render["functions"][function]["env"]["FLOE_CONFIG_TOML"]
        .as_str()
        .unwrap_or_else(|| panic!("{function} has no FLOE_CONFIG_TOML: {render}"))
        .to_owned()
}

fn resource_args(queue_url: &str) -> Vec<String> {
    resource_args_with(
        queue_url,
        "https://s3tables.us-east-1.amazonaws.com/iceberg",
    )
}

fn resource_args_with(queue_url: &str, catalog_uri: &str) -> Vec<String> {
    [
        format!("SourceBucketName={SOURCE}"),
        format!("CatalogUri={catalog_uri}"),
        format!("MaxComputeSecretArn=arn:aws:secretsmanager:{REGION}:1:secret:mc"),
    ]
    .iter()
    .flat_map(|p| ["--param".to_owned(), p.clone()])
    .chain([
        "--resource-value".to_owned(),
        format!("IngestQueue={queue_url}"),
        "--resource-value".to_owned(),
        format!("StateBucket={STATE}"),
        "--attr".to_owned(),
        format!("TableBucket.TableBucketARN=arn:aws:s3tables:{REGION}:1:bucket/floe-tables"),
    ])
    .collect()
}

#[test]
fn every_combination_of_the_template_is_read_by_floe() {
    let out = render(
        "sam-combinations",
        &sam_template(),
        &resource_args("https://sqs.us-east-1.amazonaws.com/1/floe-ingest"),
    )
    .unwrap();
    let renders = out["renders"].as_array().unwrap();
    assert!(renders.len() >= 8, "{out}");
    for r in renders {
        let name = r["name"].as_str().unwrap_or("?");
        let functions = r["functions"].as_object().unwrap();
        // Ingest, poll, commit, maintain (the commit binary on its own schedule), backfill.
        assert_eq!(functions.len(), 5, "{name}: {functions:?}");
        assert_eq!(
            functions["MaintainFunction"]["binary"], "floe-commit",
            "{name}"
        );
        for function in functions.keys() {
            let toml = rendered_toml(r, function);
            // The MaxCompute keys come from the environment the template sets beside it.
            let env = function_env(r, function);
            let has_mc = toml.contains("[maxcompute]");
            assert_eq!(
                env.iter().any(|(k, v)| k == "FLOE_MAXCOMPUTE_ACCESS_KEY"
                    && v.starts_with("{{resolve:secretsmanager:")),
                has_mc,
                "{name} {function}: the MaxCompute key must be a Secrets Manager reference"
            );
            // The parser expands `${env:…}` from this process: stand in the values a function gets.
            let toml = toml
                .replace("${env:FLOE_MAXCOMPUTE_ACCESS_ID}", "mc-id")
                .replace("${env:FLOE_MAXCOMPUTE_ACCESS_KEY}", "mc-key");
            let c =
                parse_rendered(&toml).unwrap_or_else(|e| panic!("{name} {function}: {e}\n{toml}"));
            let SourceConfig::Cloud(s) = &c.source else {
                panic!("{name}: not a cloud source")
            };
            assert!(matches!(s.queue, Some(QueueConfig::Sqs { .. })), "{name}");
            // Messages sent before a first poll are work too (push can be switched to poll).
            assert_eq!(s.startup.mode, StartupMode::EarliestOffset, "{name}");
            assert_eq!(s.listing.as_ref().unwrap().bucket, SOURCE, "{name}");
            assert!(
                matches!(&c.checkpoint, CheckpointConfig::ObjectStore { bucket, .. } if bucket == STATE),
                "{name}"
            );
            assert_eq!(c.maxcompute.is_some(), has_mc, "{name}");
            assert_eq!(
                c.routes[0].targets.maxcompute.is_some(),
                has_mc,
                "{name}: the route must land in MaxCompute when the stack has it"
            );
        }
    }
}

/// Whether an environment variable's name says it holds a secret.
fn secretish(name: &str) -> bool {
    let name = name.to_ascii_uppercase();
    ["KEY", "SECRET", "TOKEN", "PASSWORD"]
        .iter()
        .any(|w| name.contains(w))
}

#[test]
fn no_key_is_written_in_a_template() {
    let out = render(
        "sam-combinations",
        &sam_template(),
        &resource_args("https://sqs.us-east-1.amazonaws.com/1/floe-ingest"),
    )
    .unwrap();
    for r in out["renders"].as_array().unwrap() {
        for function in r["functions"].as_object().unwrap().keys() {
            for (k, v) in function_env(r, function) {
                assert!(
                    !secretish(&k) || v.starts_with("{{resolve:secretsmanager:"),
                    "{function}: {k} is not a Secrets Manager reference"
                );
                if k == "FLOE_CONFIG_TOML" {
                    for line in v.lines() {
                        let l = line.to_ascii_lowercase();
                        if l.contains("accesskey") || l.contains("secret") || l.contains("token") {
                            assert!(line.contains("${env:"), "{function}: {line}");
                        }
                    }
                }
            }
        }
    }
    // s.yaml: the functions take the role's keys from FC; nothing secret in what it sets.
    let out = render(
        "fc-combinations",
        &floe_testbed::templates::fc_template(),
        &fc_args(),
    )
    .unwrap();
    for r in out["renders"].as_array().unwrap() {
        for function in r["functions"].as_object().unwrap().keys() {
            for (k, v) in function_env(r, function) {
                assert!(!secretish(&k), "s.yaml sets {k} for {function}");
                let v = v.to_ascii_lowercase();
                for word in [
                    "accesskey",
                    "access-key-secret",
                    "secret-access-key",
                    "sts_token",
                ] {
                    assert!(!v.contains(word), "s.yaml's {function} {k} sets {word}");
                }
            }
        }
    }
}

#[test]
fn an_option_floe_does_not_read_fails_the_template() {
    // What the issue found: a template that says `queue = "x"` must not pass.
    let text = std::fs::read_to_string(sam_template()).unwrap();
    let broken = text.replacen(
        "                type = \"sqs\"\n",
        "                type = \"sqs\"\n                queue = \"x\"\n",
        1,
    );
    assert_ne!(
        broken, text,
        "the template's [source] moved: update this test"
    );
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("template.yaml");
    std::fs::write(&path, broken).unwrap();
    let r = render(
        "sam",
        &path,
        &resource_args("https://sqs.us-east-1.amazonaws.com/1/floe-ingest"),
    )
    .unwrap();
    let e = parse_rendered(&rendered_toml(&r, "IngestFunction")).unwrap_err();
    assert!(e.to_string().contains("source.queue"), "{e}");
}

/// What Lambda sets besides the runtime variables: the role's keys, and (for this test) the AWS
/// SDKs' endpoint override pointing every AWS client at moto.
fn lambda_env(moto: &MotoServer, template: Vec<(String, String)>) -> Vec<(String, String)> {
    let mut env = template;
    env.extend(
        [
            ("AWS_ACCESS_KEY_ID", KEY.to_owned()),
            ("AWS_SECRET_ACCESS_KEY", ROLE_SECRET.to_owned()),
            ("AWS_SESSION_TOKEN", ROLE_TOKEN.to_owned()),
            ("AWS_ENDPOINT_URL", moto.endpoint()),
        ]
        .map(|(k, v)| (k.to_owned(), v)),
    );
    env
}

/// Receive what the queue holds (as the SQS event source does) as one Lambda SQS event.
async fn sqs_event(sqs: &aws_sdk_sqs::Client, url: &str, want: usize) -> (Vec<u8>, Vec<String>) {
    let mut records = Vec::new();
    let mut handles = Vec::new();
    for _ in 0..20 {
        let out = sqs
            .receive_message()
            .queue_url(url)
            .max_number_of_messages(10)
            .wait_time_seconds(1)
            .send()
            .await
            .unwrap();
        for m in out.messages() {
            records.push(json!({
                "messageId": m.message_id(), "receiptHandle": m.receipt_handle(),
                "body": m.body(), "attributes": {"ApproximateReceiveCount": "1"},
                "messageAttributes": {}, "md5OfBody": m.md5_of_body(), "eventSource": "aws:sqs",
                "eventSourceARN": format!("arn:aws:sqs:{REGION}:{}:{QUEUE}", MotoServer::ACCOUNT_ID),
                "awsRegion": REGION
            }));
            handles.push(m.receipt_handle().unwrap().to_owned());
        }
        if records.len() >= want {
            break;
        }
    }
    assert!(
        records.len() >= want,
        "{} of {want} messages",
        records.len()
    );
    (
        json!({ "Records": records }).to_string().into_bytes(),
        handles,
    )
}

/// What the SQS event source does: receive the queue's messages (at least `want`), invoke
/// ingest with them, and delete those the answer does not name as failed (here: all of them,
/// which the answer must say).
async fn push_to_ingest(
    api: &LambdaRuntimeApi,
    ingest: &FunctionProcess,
    sqs: &aws_sdk_sqs::Client,
    queue_url: &str,
    want: usize,
) {
    let (event, handles) = sqs_event(sqs, queue_url, want).await;
    let answer = api
        .call(&event, WAIT)
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", ingest.log_tail()))
        .json();
    assert_eq!(
        answer,
        json!({"batchItemFailures": []}),
        "{}",
        ingest.log_tail()
    );
    for h in handles {
        sqs.delete_message()
            .queue_url(queue_url)
            .receipt_handle(h)
            .send()
            .await
            .unwrap();
    }
}

fn ndjson(ids: std::ops::Range<i64>) -> Bytes {
    Bytes::from(ids.map(|i| format!("{{\"id\":{i}}}\n")).collect::<String>())
}

/// What the stack creates before any function runs: the source and state buckets, the
/// ingest queue, the source bucket's notifications to it (created and removed objects). An
/// object put before the notifications exist (`orders/before.ndjson`, ids 200 and 201) is one
/// only a backfill finds.
struct Stack {
    moto: MotoServer,
    source: S3Store,
    state: S3Store,
    sqs: SqsConsumer,
    queue_url: String,
}

async fn stack() -> Stack {
    let moto = MotoServer::start().await.expect("start moto_server");
    let keys = |bucket: &str| {
        S3StoreConfig::new(Provider::S3, bucket)
            .with_endpoint(moto.endpoint())
            .with_region(REGION)
            .with_path_style(true)
            .with_keys(KEY, MotoServer::SECRET_ACCESS_KEY, None)
    };
    let source = S3Store::new(keys(SOURCE)).await.unwrap();
    let state = S3Store::new(keys(STATE)).await.unwrap();
    let s3 = source.sdk_client();
    for b in [SOURCE, STATE] {
        s3.create_bucket().bucket(b).send().await.unwrap();
    }
    let sqs = SqsConsumer::new(
        SqsConfig::new(format!(
            "{}/{}/{QUEUE}",
            moto.endpoint(),
            MotoServer::ACCOUNT_ID
        ))
        .with_endpoint(moto.endpoint())
        .with_region(REGION)
        .with_keys(KEY, MotoServer::SECRET_ACCESS_KEY, None),
    )
    .await
    .unwrap();
    let queue_url = sqs
        .sdk_client()
        .create_queue()
        .queue_name(QUEUE)
        .send()
        .await
        .unwrap()
        .queue_url()
        .unwrap()
        .to_owned();
    source
        .put("orders/before.ndjson", ndjson(200..202), PutMode::Overwrite)
        .await
        .unwrap();
    let events = [Event::S3ObjectCreated, Event::S3ObjectRemoved];
    s3.put_bucket_notification_configuration()
        .bucket(SOURCE)
        .notification_configuration(
            NotificationConfiguration::builder()
                .queue_configurations(
                    QueueConfiguration::builder()
                        .queue_arn(format!(
                            "arn:aws:sqs:{REGION}:{}:{QUEUE}",
                            MotoServer::ACCOUNT_ID
                        ))
                        .set_events(Some(events.to_vec()))
                        .build()
                        .unwrap(),
                )
                .build(),
        )
        .send()
        .await
        .unwrap();
    Stack {
        moto,
        source,
        state,
        sqs,
        queue_url,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sam_stack_lands_rows_with_its_own_configuration() {
    let Stack {
        moto,
        source,
        state,
        sqs: admin_sqs,
        queue_url,
    } = stack().await;
    let sqs = admin_sqs.sdk_client();
    let admin_props: std::collections::HashMap<String, String> = [
        ("uri", moto.endpoint()),
        ("client.region", REGION.to_owned()),
        ("s3tables.access-key-id", KEY.to_owned()),
        ("s3tables.secret-access-key", KEY.to_owned()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect();
    let admin = S3TablesAdmin::from_props(&admin_props).unwrap();
    let arn = admin.create_table_bucket("floe-tables").await.unwrap()["arn"]
        .as_str()
        .unwrap()
        .to_owned();

    // The template, rendered with the ordinary parameters and these resources.
    let mut args = resource_args(&queue_url);
    args.extend(["--param".to_owned(), format!("TableBucketArn={arn}")]);
    let r = render("sam", &sam_template(), &args).unwrap();
    assert_eq!(r["conditions"]["IsRest"], false, "{r}");
    let env = |function: &str| lambda_env(&moto, function_env(&r, function));

    // `floe config check --connect` with the deployed configuration reaches all of it; with a
    // queue that is not there it stops naming the option.
    let admin_dir = tempfile::tempdir().unwrap();
    let config = admin_dir.path().join("floe.toml");
    let operator: Vec<(String, String)> = lambda_env(&moto, Vec::new());
    let operator: Vec<(&str, &str)> = operator
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    let check = |toml: String| {
        std::fs::write(&config, toml).unwrap();
        common::floe_async(
            admin_dir.path(),
            &["config", "check", "--connect", "--config", "floe.toml"],
            &operator,
        )
    };
    let checked = check(rendered_toml(&r, "PollFunction")).await;
    assert_eq!(checked.code, 0, "{}{}", checked.stdout, checked.stderr);
    assert!(
        checked.stdout.contains("reached: source"),
        "{}",
        checked.stdout
    );
    let wrong = rendered_toml(&r, "PollFunction").replace(QUEUE, "no-such-queue");
    let checked = check(wrong).await;
    assert_eq!(checked.code, 2, "{}{}", checked.stdout, checked.stderr);
    assert!(
        checked.stderr.contains("source.queue-url"),
        "{}",
        checked.stderr
    );

    let api = LambdaRuntimeApi::start().await.unwrap();
    let dir = FunctionDir::deployed().unwrap();
    let bin = |name: &str| sibling_binary(OWN, name);
    let ingest = dir
        .spawn_lambda(&bin("floe-ingest"), &api, &env("IngestFunction"))
        .unwrap();

    // Push: objects put, the queue's messages delivered to ingest as the event source does.
    // moto's first message is the notification configuration's s3:TestEvent.
    put_orders(&source).await;
    // Not gzip at all: the whole object is set aside as a dead letter.
    source
        .put(
            "orders/broken.ndjson.gz",
            Bytes::from_static(b"definitely not gzip"),
            PutMode::Overwrite,
        )
        .await
        .unwrap();
    push_to_ingest(&api, &ingest, sqs, &queue_url, 4).await;

    // Pull: the poll function drains the queue on its schedule.
    source
        .put("orders/c.ndjson", ndjson(5..9), PutMode::Overwrite)
        .await
        .unwrap();
    drop(ingest);
    let api = LambdaRuntimeApi::start().await.unwrap();
    let poll = dir
        .spawn_lambda(&bin("floe-poll"), &api, &env("PollFunction"))
        .unwrap();
    let schedule = br#"{"source":"aws.events","detail-type":"Scheduled Event","detail":{}}"#;
    let polled = api.call(schedule, WAIT).await.unwrap().json();
    assert_eq!(polled["rows"], 4, "{polled}\n{}", poll.log_tail());
    drop(poll);

    // Backfill through the function URL (the template's BackfillUrl output): the queue source
    // lists its bucket on request; what the queue brought is recognised and lands once.
    let api = LambdaRuntimeApi::start().await.unwrap();
    let backfill = dir
        .spawn_lambda(&bin("floe-backfill"), &api, &env("BackfillFunction"))
        .unwrap();
    let mut request: Value = serde_json::from_slice(&floe_testbed::functions::event_fixture(
        "function_url_backfill.json",
    ))
    .unwrap();
    request["rawQueryString"] = json!("");
    let answer = api
        .call(request.to_string().as_bytes(), WAIT)
        .await
        .unwrap()
        .json();
    assert_eq!(
        answer["statusCode"],
        200,
        "{answer}\n{}",
        backfill.log_tail()
    );
    let listing: Value = serde_json::from_str(answer["body"].as_str().unwrap()).unwrap();
    assert_eq!(
        (
            listing["listed"].clone(),
            listing["rows"].clone(),
            listing["complete"].clone()
        ),
        (json!(5), json!(2), json!(true)),
        "{listing}"
    );
    drop(backfill);

    // Commit: on its schedule the batches wait for the commit interval (a minute, the
    // default); a forced commit (what an operator sends) takes them now.
    let api = LambdaRuntimeApi::start().await.unwrap();
    let commit = dir
        .spawn_lambda(&bin("floe-commit"), &api, &env("CommitFunction"))
        .unwrap();
    let waiting = api.call(schedule, WAIT).await.unwrap().json();
    assert_eq!(
        waiting["waiting"],
        json!(["iceberg:floe:floe.orders"]),
        "{waiting}"
    );
    let committed = api.call(br#"{"force":true}"#, WAIT).await.unwrap().json();
    let rows: u64 = committed["commits"]
        .as_array()
        .unwrap_or_else(|| panic!("{committed}\n{}", commit.log_tail()))
        .iter()
        .map(|c| c["rows"].as_u64().unwrap_or(0))
        .sum();
    assert_eq!(rows, 11, "{committed}\n{}", commit.log_tail());

    // pyiceberg reads the S3 Tables table from its metadata file on moto's S3.
    let (ids, read) = s3tables_ids(&admin, &arn, &moto).await;
    assert_eq!(
        ids,
        (0..9).chain(200..202).map(|i| (i, 1)).collect(),
        "{read}"
    );

    // The dead letter is in the state bucket; fixed, the object replays once with the
    // deployed configuration (the operator's `floe dead-letters replay`).
    let letters = state.list("floe/dead-letter/", None, 1000).await.unwrap();
    assert_eq!(letters.objects.len(), 1, "{:?}", letters.objects);
    std::fs::write(&config, rendered_toml(&r, "BackfillFunction")).unwrap();
    let listed = common::floe_async(
        admin_dir.path(),
        &["dead-letters", "list", "--config", "floe.toml"],
        &operator,
    )
    .await;
    assert_eq!(listed.code, 0, "{} {}", listed.stdout, listed.stderr);
    assert!(
        listed
            .stdout
            .contains("s3://floe-src/orders/broken.ndjson.gz"),
        "{}",
        listed.stdout
    );
    let mut fixed = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    std::io::Write::write_all(&mut fixed, &ndjson(100..102)).unwrap();
    source
        .put(
            "orders/broken.ndjson.gz",
            Bytes::from(fixed.finish().unwrap()),
            PutMode::Overwrite,
        )
        .await
        .unwrap();
    for _ in 0..2 {
        let replay = common::floe_async(
            admin_dir.path(),
            &["dead-letters", "replay", "--all", "--config", "floe.toml"],
            &operator,
        )
        .await;
        assert_eq!(replay.code, 0, "{} {}", replay.stdout, replay.stderr);
    }
    let (ids, read) = s3tables_ids(&admin, &arn, &moto).await;
    assert_eq!(
        ids,
        (0..9)
            .chain(100..102)
            .chain(200..202)
            .map(|i| (i, 1))
            .collect(),
        "the fixed object lands once: {read}"
    );

    // The maintain function (the commit binary, its schedule's input `{"maintain": true}`):
    // the table's route replaces rows by position, so floe created it with the catalog's
    // compaction off and compacts it itself; the rows stay.
    let api = LambdaRuntimeApi::start().await.unwrap();
    let maintain = dir
        .spawn_lambda(&bin("floe-commit"), &api, &env("MaintainFunction"))
        .unwrap();
    let done = api
        .call(br#"{"maintain": true}"#, WAIT)
        .await
        .unwrap()
        .json();
    let table = &done["maintained"][0];
    assert_eq!(
        table["table"],
        "floe.orders",
        "{done}\n{}",
        maintain.log_tail()
    );
    assert!(
        table["files_rewritten"].as_u64().unwrap_or(0) >= 2 && table["files_written"] == 1,
        "{done}\n{}",
        maintain.log_tail()
    );
    drop(maintain);
    let (after, read) = s3tables_ids(&admin, &arn, &moto).await;
    assert_eq!(after, ids, "maintenance kept the rows: {read}");

    // floe's state is in the state bucket, none of it on the function's disk.
    let listed = state.list("floe/checkpoint/", None, 1000).await.unwrap();
    assert!(
        !listed.objects.is_empty(),
        "no checkpoint entries in the state bucket"
    );
    assert_no_secret_in_logs(&dir.path(), &[]);
    let on_disk: Vec<_> = walk(&dir.path());
    assert!(
        on_disk.iter().all(|p| p.ends_with(".log")),
        "the functions wrote to their disk: {on_disk:?}"
    );
}

/// The `id` column of `floe.orders` read by pyiceberg from the table's current metadata file
/// on moto's S3, as id → how many rows carry it; and the reader's whole answer.
async fn s3tables_ids(
    admin: &S3TablesAdmin,
    arn: &str,
    moto: &MotoServer,
) -> (BTreeMap<i64, usize>, Value) {
    let table = admin.get_table(arn, "floe", "orders").await.unwrap();
    let location = table["metadataLocation"].as_str().unwrap();
    let python =
        python_with(&[("pyiceberg", "pyiceberg[sql-sqlite,pyarrow,pyiceberg-core]")]).unwrap();
    let script = floe_testbed::templates::repo_root().join("tests/py/read_static_table.py");
    let out = run_python(
        &python,
        &script,
        &[location, &moto.endpoint(), KEY, KEY, REGION, "id"],
    )
    .unwrap();
    let read: Value = serde_json::from_str(out.trim()).unwrap();
    (floe_testbed::pyiceberg::id_counts(&read["values"]), read)
}

fn walk(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p.display().to_string());
        }
    }
    out
}

/// The `s config` and environment values `make deploy-fc` renders `s.yaml` with.
fn fc_args() -> Vec<String> {
    [
        ("--env", "FLOE_REGION=cn-hangzhou"),
        ("--env", "FLOE_SOURCE_BUCKET=landing"),
        ("--env", "FLOE_STATE_BUCKET=floe-state"),
        (
            "--env",
            "FLOE_TABLE_BUCKET_ARN=acs:osstables:cn-hangzhou:1234567890:bucket/floe",
        ),
        ("--config", "AccountID=1234567890"),
    ]
    .iter()
    .flat_map(|(f, v)| [f.to_string(), v.to_string()])
    .collect()
}

/// `s.yaml` as Serverless Devs renders it for each of its variants (MaxCompute on or off, a
/// prefix or none), every function's configuration read by floe's parser.
#[test]
fn every_variant_of_the_fc_stack_is_read_by_floe() {
    let out = render(
        "fc-combinations",
        &floe_testbed::templates::fc_template(),
        &fc_args(),
    )
    .unwrap();
    let renders = out["renders"].as_array().unwrap();
    assert!(renders.len() >= 2, "{out}");
    let mut saw_maxcompute = false;
    for r in renders {
        let name = r["name"].as_str().unwrap_or("?");
        let functions = r["functions"].as_object().unwrap();
        for function in [
            "ingest",
            "ingest-mns",
            "poll",
            "commit",
            "maintain",
            "backfill",
        ] {
            assert!(functions.contains_key(function), "{name}: no {function}");
            let toml = rendered_toml(r, function);
            let c =
                parse_rendered(&toml).unwrap_or_else(|e| panic!("{name} {function}: {e}\n{toml}"));
            let SourceConfig::Cloud(s) = &c.source else {
                panic!("{name}: not a cloud source")
            };
            assert!(matches!(s.queue, Some(QueueConfig::Mns { .. })), "{name}");
            assert_eq!(s.startup.mode, StartupMode::EarliestOffset, "{name}");
            assert_eq!(s.provider, Provider::Oss, "{name}");
            assert!(
                matches!(&c.checkpoint, CheckpointConfig::ObjectStore { provider: Provider::Oss, bucket, .. } if bucket == "floe-state"),
                "{name}"
            );
            saw_maxcompute |= c.maxcompute.is_some();
            assert_eq!(
                c.maxcompute.is_some(),
                c.routes[0].targets.maxcompute.is_some(),
                "{name}"
            );
        }
    }
    assert!(saw_maxcompute, "no variant lands in MaxCompute: {out}");
}

/// The same stack with `CatalogType = rest` and MaxCompute on: S3 Tables' Iceberg REST endpoint
/// stood in by lakana-server behind a gate that checks every request's SigV4 (`s3tables`, the
/// Lambda role's keys and session token) before passing it on with lakana's bearer token; the
/// MaxCompute emulator checking its keys, which reach the functions as CloudFormation resolves
/// the template's Secrets Manager references.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sam_stack_with_a_rest_catalog_and_maxcompute_lands_in_both() {
    let Stack {
        moto,
        source,
        sqs,
        queue_url,
        ..
    } = stack().await;
    let lakana = LakanaServer::start().await.expect("start lakana-server");
    let role = Credentials::new(KEY, ROLE_SECRET).with_security_token(ROLE_TOKEN);
    let gate = Linearizer::start_sigv4(
        &lakana.uri(),
        SigV4Gate::new("s3tables", REGION, role, lakana.token())
            .with_config_prefix(lakana.prefix()),
    )
    .await
    .unwrap();
    let mc_keys = Credentials::new("mc-access-id", "mc-access-secret-0123456789");
    let mc = MaxComputeEmulator::start(MaxComputeEmulatorConfig::new(mc_keys.clone()))
        .await
        .unwrap();
    let mut args = resource_args_with(&queue_url, gate.endpoint());
    for p in [
        "CatalogType=rest".to_owned(),
        "RouteTable=bronze.${table_name}".to_owned(),
        format!("TableBucketArn=arn:aws:s3tables:{REGION}:1:bucket/floe-tables"),
        format!("MaxComputeEndpoint={}", mc.endpoint()),
        "MaxComputeProject=floe_project".to_owned(),
        "MaxComputeTable=orders".to_owned(),
    ] {
        args.extend(["--param".to_owned(), p]);
    }
    let r = render("sam", &sam_template(), &args).unwrap();
    assert_eq!(r["conditions"]["IsRest"], true, "{r}");
    assert_eq!(r["conditions"]["HasMaxCompute"], true, "{r}");
    // What CloudFormation does with the Secrets Manager references when the stack deploys.
    let secret = [
        ("accessId", mc_keys.access_key_id().to_owned()),
        ("accessKey", mc_keys.access_key_secret().expose().to_owned()),
    ];
    let env = |function: &str| {
        let resolved = function_env(&r, function)
            .into_iter()
            .map(|(k, v)| {
                let value = secret
                    .iter()
                    .find(|(field, _)| {
                        v.starts_with("{{resolve:secretsmanager:")
                            && v.ends_with(&format!(":SecretString:{field}}}}}"))
                    })
                    .map_or(v.clone(), |(_, value)| value.clone());
                (k, value)
            })
            .collect();
        lambda_env(&moto, resolved)
    };
    let dir = FunctionDir::deployed().unwrap();
    let bin = |name: &str| sibling_binary(OWN, name);

    put_orders(&source).await;
    let api = LambdaRuntimeApi::start().await.unwrap();
    let ingest = dir
        .spawn_lambda(&bin("floe-ingest"), &api, &env("IngestFunction"))
        .unwrap();
    push_to_ingest(&api, &ingest, sqs.sdk_client(), &queue_url, 3).await;
    drop(ingest);

    let api = LambdaRuntimeApi::start().await.unwrap();
    let commit = dir
        .spawn_lambda(&bin("floe-commit"), &api, &env("CommitFunction"))
        .unwrap();
    let committed = api.call(br#"{"force":true}"#, WAIT).await.unwrap().json();
    let targets: BTreeMap<String, u64> = committed["commits"]
        .as_array()
        .unwrap_or_else(|| panic!("{committed}\n{}", commit.log_tail()))
        .iter()
        .map(|c| {
            (
                c["target"].as_str().unwrap().to_owned(),
                c["rows"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        targets,
        [
            ("iceberg:floe:bronze.orders".to_owned(), 5),
            ("maxcompute:floe_project.orders".to_owned(), 5)
        ]
        .into(),
        "{committed}\n{}",
        commit.log_tail()
    );
    assert_eq!(mc.rows("floe_project.orders", None).unwrap().len(), 5);

    let read = floe_testbed::pyiceberg::read_rest_table(
        &lakana.uri(),
        &lakana.token(),
        lakana.prefix(),
        "bronze.orders",
    );
    let ids = floe_testbed::pyiceberg::row_ids(&read);
    assert_eq!(ids, (0..5).collect::<Vec<_>>(), "{read}");
    let (checked, refused) = gate.gate_counts();
    assert!(checked > 0, "no catalog request went through the gate");
    assert_eq!(refused, 0, "the gate refused a catalog request");
    assert_no_secret_in_logs(&dir.path(), &[mc_keys.access_key_secret().expose()]);
}

/// The two order objects every run lands (ids 0 to 4).
async fn put_orders(source: &S3Store) {
    for (key, ids) in [("orders/a.ndjson", 0..3), ("orders/b.ndjson", 3..5)] {
        source
            .put(key, ndjson(ids), PutMode::Overwrite)
            .await
            .unwrap();
    }
}
