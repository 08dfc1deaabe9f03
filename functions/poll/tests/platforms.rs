//! `floe-poll` as each platform runs it, on the local folder source: a schedule event under
//! the Lambda Runtime API emulator, FC timer and HTTP triggers; staged rows are committed with
//! the pipeline and read back with pyiceberg.

use std::path::Path;
use std::time::Duration;

use floe_pipeline::{FloeConfig, Pipeline};
use floe_testbed::functions::FunctionDir;
use floe_testbed::lambda::LambdaRuntimeApi;

const CONFIG: &str = r#"
[source]
type = "local"
folder = "bucket"
bucket = "floe-src"

[iceberg]
catalog.type = "sql"
catalog.uri = "catalog.db"
catalog.warehouse = "warehouse"

[checkpoint]
path = "checkpoint.db"

[[routes]]
prefix = "events/"
format = "ndjson"
table = "test.events"
"#;

const BIN: &str = env!("CARGO_BIN_EXE_floe-poll");

fn fixture(name: &str) -> Vec<u8> {
    std::fs::read(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../tests/fixtures/events")
            .join(name),
    )
    .unwrap()
}

fn put(dir: &FunctionDir, name: &str, ids: &[i64]) {
    let body: String = ids.iter().map(|id| format!("{{\"id\":{id}}}\n")).collect();
    dir.put(&format!("events/{name}.json"), body.as_bytes())
        .unwrap();
}

async fn commit_and_read(dir: &FunctionDir) -> Vec<i64> {
    let pipeline = Pipeline::open(FloeConfig::load(&dir.config()).unwrap())
        .await
        .unwrap();
    pipeline.commit(true).await.unwrap();
    let t = dir.read_table("test.events");
    let mut ids: Vec<i64> = t["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_i64().unwrap())
        .collect();
    ids.sort();
    ids
}

#[tokio::test(flavor = "multi_thread")]
async fn lambda_schedule_event_polls_the_source() {
    let dir = FunctionDir::new(CONFIG).unwrap();
    put(&dir, "a", &[1, 2]);
    let api = LambdaRuntimeApi::start().await.unwrap();
    let function = dir.spawn_lambda(Path::new(BIN), &api, &[]).unwrap();
    let wait = Duration::from_secs(60);

    let r = api
        .call(&fixture("eventbridge_schedule.json"), wait)
        .await
        .unwrap()
        .json();
    assert_eq!(
        (
            r["objects"].clone(),
            r["rows"].clone(),
            r["drained"].clone()
        ),
        (1.into(), 2.into(), true.into()),
        "{r}\n{}",
        function.log_tail()
    );
    // A second poll finds nothing new; a new object is picked up by the next.
    let r = api
        .call(&fixture("eventbridge_schedule.json"), wait)
        .await
        .unwrap()
        .json();
    assert_eq!(r["rows"], 0);
    put(&dir, "b", &[3]);
    let r = api
        .call(&fixture("eventbridge_schedule.json"), wait)
        .await
        .unwrap()
        .json();
    assert_eq!(r["rows"], 1);
    drop(function);
    assert_eq!(commit_and_read(&dir).await, vec![1, 2, 3]);
}

#[tokio::test(flavor = "multi_thread")]
async fn fc_timer_and_http_triggers_poll_and_a_short_deadline_sets_x_fc_status() {
    let dir = FunctionDir::new(CONFIG).unwrap();
    put(&dir, "a", &[1, 2]);
    let function = dir.spawn_fc(Path::new(BIN), &[]).unwrap();

    let r = function
        .fc(
            "POST",
            "/invoke",
            &[("x-fc-request-id", "p1"), ("x-fc-function-timeout", "60")],
            &fixture("fc_timer_trigger.json"),
        )
        .unwrap();
    assert_eq!((r.status, r.header("x-fc-status")), (200, Some("200")));
    assert_eq!(r.json()["rows"], 2);

    put(&dir, "b", &[3]);
    let r = function
        .fc("GET", "/poll", &[("x-fc-request-id", "p2")], b"")
        .unwrap();
    assert_eq!((r.status, r.header("x-fc-status")), (200, Some("200")));
    assert_eq!(r.json()["rows"], 1);

    // A function timeout shorter than the stop margin: nothing is pulled.
    put(&dir, "c", &[4]);
    let r = function
        .fc(
            "POST",
            "/invoke",
            &[("x-fc-request-id", "p3"), ("x-fc-function-timeout", "5")],
            &fixture("fc_timer_trigger.json"),
        )
        .unwrap();
    assert_eq!((r.status, r.header("x-fc-status")), (404, Some("404")));
    assert_eq!(r.json()["errorType"], "Retryable");
    assert!(function.log().contains("FC Invoke End RequestId: p3"));
    drop(function);
    assert_eq!(commit_and_read(&dir).await, vec![1, 2, 3]);
}
