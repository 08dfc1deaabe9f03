//! `floe-poll` as each platform runs it, on the local folder source: a schedule event under
//! the Lambda Runtime API emulator, FC timer and HTTP triggers; staged rows are committed with
//! the pipeline and read back with pyiceberg.

use std::path::Path;
use std::time::Duration;

use floe_pipeline::{FloeConfig, Pipeline};
use floe_testbed::functions::{FunctionDir, LOCAL_CONFIG, event_fixture};
use floe_testbed::lambda::LambdaRuntimeApi;

/// What follows [`LOCAL_CONFIG`] in this test's configuration.
const ROUTES: &str = r#"
[[routes]]
prefix = "events/"
format = "ndjson"
table = "test.events"
"#;

fn config() -> String {
    format!("{LOCAL_CONFIG}{ROUTES}")
}

const BIN: &str = env!("CARGO_BIN_EXE_floe-poll");

fn put(dir: &FunctionDir, name: &str, ids: &[i64]) {
    dir.put_ids(&format!("events/{name}.json"), ids).unwrap();
}

async fn commit_and_read(dir: &FunctionDir) -> Vec<i64> {
    let pipeline = Pipeline::open(FloeConfig::load(&dir.config()).unwrap())
        .await
        .unwrap();
    pipeline.commit(true).await.unwrap();
    dir.ids("test.events").0
}

#[tokio::test(flavor = "multi_thread")]
async fn lambda_schedule_event_polls_the_source() {
    let dir = FunctionDir::new(&config()).unwrap();
    put(&dir, "a", &[1, 2]);
    let api = LambdaRuntimeApi::start().await.unwrap();
    let function = dir.spawn_lambda(Path::new(BIN), &api, &[]).unwrap();
    let wait = Duration::from_secs(60);

    let r = api
        .call(&event_fixture("eventbridge_schedule.json"), wait)
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
        .call(&event_fixture("eventbridge_schedule.json"), wait)
        .await
        .unwrap()
        .json();
    assert_eq!(r["rows"], 0);
    put(&dir, "b", &[3]);
    let r = api
        .call(&event_fixture("eventbridge_schedule.json"), wait)
        .await
        .unwrap()
        .json();
    assert_eq!(r["rows"], 1);
    drop(function);
    assert_eq!(commit_and_read(&dir).await, vec![1, 2, 3]);
}

#[tokio::test(flavor = "multi_thread")]
async fn fc_timer_and_http_triggers_poll_and_a_short_deadline_sets_x_fc_status() {
    let dir = FunctionDir::new(&config()).unwrap();
    put(&dir, "a", &[1, 2]);
    let function = dir.spawn_fc(Path::new(BIN), &[]).unwrap();

    let r = function
        .fc(
            "POST",
            "/invoke",
            &[("x-fc-request-id", "p1"), ("x-fc-function-timeout", "60")],
            &event_fixture("fc_timer_trigger.json"),
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
            &event_fixture("fc_timer_trigger.json"),
        )
        .unwrap();
    assert_eq!((r.status, r.header("x-fc-status")), (404, Some("404")));
    assert_eq!(r.json()["errorType"], "Retryable");
    assert!(function.log().contains("FC Invoke End RequestId: p3"));
    drop(function);
    assert_eq!(commit_and_read(&dir).await, vec![1, 2, 3]);
}
