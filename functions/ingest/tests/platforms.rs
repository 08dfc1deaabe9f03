//! `floe-ingest` as each platform runs it, fed the fixture events: under the Lambda Runtime API
//! emulator (S3 notification, SQS batches with partial failures, an init error) and as an FC
//! custom runtime (OSS trigger, MNS queue and topic triggers, an HTTP trigger, a failure with
//! `x-fc-status`). The objects live in the local folder source, which serves any bucket name;
//! staged rows are committed with the pipeline and read back with pyiceberg.

use std::path::Path;
use std::time::Duration;

use floe_pipeline::{FloeConfig, Pipeline};
use floe_testbed::functions::{FunctionDir, LOCAL_CONFIG, event_fixture};
use floe_testbed::lambda::{LambdaResult, LambdaRuntimeApi};
use serde_json::{Value, json};

/// What follows [`LOCAL_CONFIG`] in this test's configuration.
const ROUTES: &str = r#"
[dead-letter]
path = "dead-letter"

[[routes]]
name = "strict"
prefix = "strict/"
format = "ndjson"
table = "test.strict"
on-error = "fail"

[[routes]]
name = "records"
prefix = ["events/", "logs/", "in/", "dir/"]
format = "ndjson"
table = "test.records"

[[routes]]
name = "objects"
mode = "metadata"
table = "test.objects"
"#;

fn config() -> String {
    format!("{LOCAL_CONFIG}{ROUTES}")
}

const BIN: &str = env!("CARGO_BIN_EXE_floe-ingest");

/// The folder with the objects every fixture event names (decoded keys).
fn setup() -> FunctionDir {
    let dir = FunctionDir::new(&config()).unwrap();
    let rows = |ids: &[i64], src: &str| -> Vec<u8> {
        ids.iter()
            .map(|id| format!("{{\"id\":{id},\"src\":\"{src}\"}}\n"))
            .collect::<String>()
            .into_bytes()
    };
    dir.put("events/2025/01/my file+plus.json", &rows(&[1, 2], "s3"))
        .unwrap();
    dir.put("日本語/データ.csv", b"a,b\n1,2\n").unwrap();
    dir.put("logs/2025/01/15/app events+1.json", &rows(&[10, 11], "oss"))
        .unwrap();
    dir.put("数据/日志 2025.csv", b"x\n1\n").unwrap();
    dir.put("in/a b+c.ndjson", &rows(&[20, 21], "mns")).unwrap();
    dir.put("dir/sub/a b.json", &rows(&[30], "moto")).unwrap();
    dir.put("strict/bad.json", b"{\"id\":40,\"src\":\"x\"}\n{not json\n")
        .unwrap();
    dir
}

/// Commit everything staged, as the commit function would.
async fn commit(dir: &FunctionDir) {
    let pipeline = Pipeline::open(FloeConfig::load(&dir.config()).unwrap())
        .await
        .unwrap();
    pipeline.commit(true).await.unwrap();
}

fn ids(table: &Value) -> Vec<i64> {
    let mut ids: Vec<i64> = table["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_i64().unwrap())
        .collect();
    ids.sort();
    ids
}

/// An SQS event of S3 notifications, one message per `(message id, key)`.
fn sqs_event(messages: &[(&str, &str)]) -> Vec<u8> {
    let records: Vec<Value> = messages
        .iter()
        .map(|(id, key)| {
            let body = json!({"Records": [{
                "eventVersion": "2.1", "eventSource": "aws:s3", "awsRegion": "us-east-1",
                "eventTime": "2025-01-15T08:30:45.123Z", "eventName": "ObjectCreated:Put",
                "s3": {"s3SchemaVersion": "1.0", "bucket": {"name": "floe-src"},
                       "object": {"key": key, "size": 40, "eTag": format!("etag-{id}"),
                                  "sequencer": "0055AED6DCD90281E5"}}
            }]});
            json!({
                "messageId": id, "receiptHandle": format!("rh-{id}"), "body": body.to_string(),
                "attributes": {"ApproximateReceiveCount": "1"}, "messageAttributes": {},
                "md5OfBody": "x", "eventSource": "aws:sqs",
                "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:floe-ingest",
                "awsRegion": "us-east-1"
            })
        })
        .collect();
    json!({ "Records": records }).to_string().into_bytes()
}

const WAIT: Duration = Duration::from_secs(60);

#[tokio::test(flavor = "multi_thread")]
async fn lambda_s3_and_sqs_events_land_once_and_only_failed_messages_are_reported() {
    let dir = setup();
    let api = LambdaRuntimeApi::start().await.unwrap();
    let function = dir.spawn_lambda(Path::new(BIN), &api, &[]).unwrap();

    // S3 notification: a put (2 rows), a multipart upload (metadata route), a delete marker
    // (no records of a removal).
    let r = api
        .call(&event_fixture("s3_notification.json"), WAIT)
        .await
        .unwrap();
    let summary = r.json();
    assert_eq!(summary["changes"], 3, "{summary}");
    assert_eq!(summary["rows"], 3, "{summary}");

    // SQS batch of the fixture: the S3 message again (duplicates), a body that is not JSON, a
    // test event, moto's event. Only the unreadable message is reported.
    let r = api
        .call(&event_fixture("sqs_event.json"), WAIT)
        .await
        .unwrap();
    assert_eq!(
        r.json(),
        json!({"batchItemFailures": [{"itemIdentifier": "2e1424d4-f796-459a-8184-9c92662be6da"}]}),
        "{}",
        function.log_tail()
    );

    // A batch where one object is rejected (a bad record under on-error = fail): only its
    // message comes back.
    let r = api
        .call(
            &sqs_event(&[
                ("m-good", "logs/2025/01/15/app+events%2B1.json"),
                ("m-bad", "strict/bad.json"),
            ]),
            WAIT,
        )
        .await
        .unwrap();
    assert_eq!(
        r.json(),
        json!({"batchItemFailures": [{"itemIdentifier": "m-bad"}]})
    );

    // Outside SQS there is no partial answer: the invocation fails, NonRetryable.
    let direct = json!({"Records": [{
        "eventVersion": "2.1", "eventSource": "aws:s3", "awsRegion": "us-east-1",
        "eventTime": "2025-01-15T08:31:00.000Z", "eventName": "ObjectCreated:Put",
        "s3": {"bucket": {"name": "floe-src"}, "object": {"key": "strict/bad.json", "eTag": "e2"}}
    }]});
    let r = api.call(direct.to_string().as_bytes(), WAIT).await.unwrap();
    let LambdaResult::Error { body, .. } = &r else {
        panic!("expected an error, got {r:?}")
    };
    assert_eq!(body["errorType"], "NonRetryable", "{body}");
    assert!(
        body["errorMessage"]
            .as_str()
            .unwrap()
            .contains("on-error = fail"),
        "{body}"
    );

    // Logs are JSON with the request id; one EMF line per invocation.
    let log = function.log();
    assert!(
        log.lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .any(|l| l["span"]["request_id"]
                .as_str()
                .is_some_and(|id| id.starts_with("8476a536"))),
        "no log line with the request id:\n{log}"
    );
    assert!(log.contains("\"CloudWatchMetrics\""), "{log}");
    drop(function);

    commit(&dir).await;
    let records = dir.read_table("test.records");
    assert_eq!(ids(&records), vec![1, 2, 10, 11, 30], "{records}");
    let objects = dir.read_table("test.objects");
    assert_eq!(objects["count"], 1, "{objects}");
    assert_eq!(objects["rows"][0]["key"], "日本語/データ.csv");
}

#[tokio::test(flavor = "multi_thread")]
async fn lambda_start_up_failure_is_reported_as_an_init_error() {
    let dir = setup();
    let api = LambdaRuntimeApi::start().await.unwrap();
    let (code, out) = dir
        .run_lambda_to_exit(
            Path::new(BIN),
            &api,
            &[(
                "FLOE_CONFIG".into(),
                dir.path().join("missing.toml").display().to_string(),
            )],
        )
        .unwrap();
    assert_eq!(code, Some(1), "{out}");
    let errors = api.init_errors();
    assert_eq!(errors.len(), 1, "{out}");
    assert_eq!(errors[0]["errorType"], "NonRetryable");
    assert!(
        errors[0]["errorMessage"]
            .as_str()
            .unwrap()
            .contains("missing.toml"),
        "{}",
        errors[0]
    );

    let (code, _) = dir
        .run_lambda_to_exit(
            Path::new(BIN),
            &api,
            &[
                ("FLOE_CONFIG".into(), String::new()),
                (
                    "FLOE_CONFIG_TOML".into(),
                    format!("{}batch = 1\n", config()),
                ),
            ],
        )
        .unwrap();
    assert_eq!(code, Some(2), "invalid configuration exits with 2");
    let errors = api.init_errors();
    assert!(
        errors[1]["errorMessage"]
            .as_str()
            .unwrap()
            .contains("batch"),
        "the message names the option: {}",
        errors[1]
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn fc_oss_mns_and_http_triggers_land_once_and_failures_set_x_fc_status() {
    let dir = setup();
    let function = dir.spawn_fc(Path::new(BIN), &[]).unwrap();
    let fc_headers = |id: &'static str| {
        vec![
            ("x-fc-request-id", id),
            ("x-fc-control-path", "/invoke"),
            ("x-fc-function-timeout", "60"),
            ("x-fc-access-key-id", "STS.FAKEKEYID"),
            ("x-fc-access-key-secret", "fake-secret-value"),
            ("x-fc-security-token", "fake-security-token"),
            ("content-type", "application/octet-stream"),
        ]
    };

    let init = function
        .fc(
            "POST",
            "/initialize",
            &[("x-fc-request-id", "fc-init")],
            b"",
        )
        .unwrap();
    assert_eq!(
        (init.status, init.header("x-fc-status")),
        (200, Some("200"))
    );

    // OSS trigger: a put (2 rows), a multipart completion (metadata), a part, a download and a
    // delete (ignored or no records).
    let r = function
        .fc(
            "POST",
            "/invoke",
            &fc_headers("fc-oss-1"),
            &event_fixture("fc_oss_trigger.json"),
        )
        .unwrap();
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(r.header("x-fc-status"), Some("200"));
    assert_eq!(r.json()["rows"], 3);

    // MNS queue trigger (EventBridge CloudEvent, base64 body), then the same object through an
    // MNS topic trigger (JSON envelope, raw body): landed once.
    let r = function
        .fc(
            "POST",
            "/invoke",
            &fc_headers("fc-mns-1"),
            &event_fixture("fc_mns_queue_trigger.json"),
        )
        .unwrap();
    assert_eq!((r.status, r.json()["rows"].clone()), (200, json!(2)));
    let r = function
        .fc(
            "POST",
            "/invoke",
            &fc_headers("fc-mns-2"),
            &event_fixture("fc_mns_topic_trigger.json"),
        )
        .unwrap();
    assert_eq!((r.status, r.json()["rows"].clone()), (200, json!(0)));

    // An HTTP trigger request carrying an event (moto's S3 body).
    let r = function
        .fc(
            "POST",
            "/events",
            &[
                ("x-fc-request-id", "fc-http-1"),
                ("content-type", "application/json"),
            ],
            &event_fixture("moto_s3_body.json"),
        )
        .unwrap();
    assert_eq!((r.status, r.header("x-fc-status")), (200, Some("200")));
    assert_eq!(r.json()["rows"], 1);

    // A rejected object: 404 with x-fc-status 404 and a NonRetryable body.
    let bad = json!({"events": [{
        "eventName": "ObjectCreated:PutObject", "eventTime": "2025-01-15T09:10:00.000Z",
        "region": "cn-hangzhou",
        "oss": {"bucket": {"name": "floe-src"}, "object": {"key": "strict/bad.json", "eTag": "B1", "size": 40}}
    }]});
    let r = function
        .fc(
            "POST",
            "/invoke",
            &fc_headers("fc-oss-bad"),
            bad.to_string().as_bytes(),
        )
        .unwrap();
    assert_eq!((r.status, r.header("x-fc-status")), (404, Some("404")));
    assert_eq!(r.json()["errorType"], "NonRetryable");
    // The same over an HTTP trigger: a 400 status, and x-fc-status 404 for FC's records.
    let r = function
        .fc(
            "POST",
            "/",
            &[("x-fc-request-id", "fc-http-bad")],
            bad.to_string().as_bytes(),
        )
        .unwrap();
    assert_eq!((r.status, r.header("x-fc-status")), (400, Some("404")));
    // Not an event at all.
    let r = function
        .fc("POST", "/invoke", &fc_headers("fc-junk"), b"{\"hello\":1}")
        .unwrap();
    assert_eq!((r.status, r.header("x-fc-status")), (404, Some("404")));

    // FC's log contract and the request id on JSON lines; no credential in any line.
    let log = function.log();
    assert!(log.contains("FC Invoke Start RequestId: fc-oss-1"), "{log}");
    assert!(log.contains("FC Invoke End RequestId: fc-oss-1"), "{log}");
    assert!(
        log.lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .any(|l| l["span"]["request_id"] == "fc-mns-1"),
        "{log}"
    );
    for secret in ["fake-secret-value", "fake-security-token", "STS.FAKEKEYID"] {
        assert!(!log.contains(secret), "{secret} leaked into the log");
    }
    drop(function);

    commit(&dir).await;
    let records = dir.read_table("test.records");
    assert_eq!(ids(&records), vec![10, 11, 20, 21, 30], "{records}");
    let objects = dir.read_table("test.objects");
    assert_eq!(objects["count"], 1, "{objects}");
    assert_eq!(objects["rows"][0]["key"], "数据/日志 2025.csv");
}
