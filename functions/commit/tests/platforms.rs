//! `floe-commit` as each platform runs it: rows staged by the pipeline are committed by the
//! binary on a schedule event (EventBridge under the Lambda Runtime API emulator, an FC timer
//! trigger) and over an FC HTTP trigger, then read back with pyiceberg.

use std::path::Path;
use std::time::Duration;

use floe_pipeline::{FloeConfig, Pipeline};
use floe_testbed::functions::{FunctionDir, LOCAL_CONFIG, event_fixture};
use floe_testbed::lambda::LambdaRuntimeApi;
use serde_json::Value;

/// What follows [`LOCAL_CONFIG`] in this test's configuration.
const ROUTES: &str = r#"
[commit]
interval-ms = 0

[[routes]]
prefix = "events/"
format = "ndjson"
table = "test.events"
"#;

fn config() -> String {
    format!("{LOCAL_CONFIG}{ROUTES}")
}

const BIN: &str = env!("CARGO_BIN_EXE_floe-commit");

/// Put objects with ids `ids` under `events/` and stage them with the pipeline (as ingest would).
async fn stage(dir: &FunctionDir, name: &str, ids: &[i64]) {
    dir.put_ids(&format!("events/{name}.json"), ids).unwrap();
    let pipeline = Pipeline::open(FloeConfig::load(&dir.config()).unwrap())
        .await
        .unwrap();
    let (report, complete) = pipeline
        .ingest_local_until(std::time::Instant::now() + Duration::from_secs(60), &[])
        .await
        .unwrap();
    assert!(complete && report.failures().is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn lambda_schedule_event_commits_what_was_staged() {
    let dir = FunctionDir::new(&config()).unwrap();
    stage(&dir, "a", &[1, 2, 3]).await;
    let api = LambdaRuntimeApi::start().await.unwrap();
    let function = dir.spawn_lambda(Path::new(BIN), &api, &[]).unwrap();

    let wait = Duration::from_secs(60);
    let r = api
        .call(&event_fixture("eventbridge_schedule.json"), wait)
        .await
        .unwrap()
        .json();
    let commits = r["commits"].as_array().unwrap();
    assert_eq!(commits.len(), 1, "{r}\n{}", function.log_tail());
    assert_eq!(commits[0]["rows"], 3);
    assert_eq!(dir.ids("test.events"), (vec![1, 2, 3], 1));

    // Nothing staged: nothing committed, no new snapshot.
    let r = api
        .call(&event_fixture("eventbridge_schedule.json"), wait)
        .await
        .unwrap()
        .json();
    assert_eq!(r["commits"], Value::Array(vec![]));
    assert!(
        function.log().contains("\"commits\":1"),
        "EMF line with commits"
    );
    assert_eq!(dir.ids("test.events").1, 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn fc_timer_and_http_triggers_commit_and_a_short_deadline_is_a_retryable_failure() {
    let dir = FunctionDir::new(&config()).unwrap();
    let function = dir.spawn_fc(Path::new(BIN), &[]).unwrap();
    let invoke = |id: &'static str, timeout: &'static str| {
        vec![
            ("x-fc-request-id", id),
            ("x-fc-control-path", "/invoke"),
            ("x-fc-function-timeout", timeout),
        ]
    };

    stage(&dir, "a", &[1, 2]).await;
    let r = function
        .fc(
            "POST",
            "/invoke",
            &invoke("t1", "60"),
            &event_fixture("fc_timer_trigger.json"),
        )
        .unwrap();
    assert_eq!((r.status, r.header("x-fc-status")), (200, Some("200")));
    assert_eq!(r.json()["commits"][0]["rows"], 2);

    stage(&dir, "b", &[3]).await;
    let r = function
        .fc(
            "POST",
            "/commit?force=true",
            &[("x-fc-request-id", "h1")],
            b"",
        )
        .unwrap();
    assert_eq!((r.status, r.header("x-fc-status")), (200, Some("200")));
    assert_eq!(r.json()["commits"][0]["rows"], 1);
    assert_eq!(dir.ids("test.events"), (vec![1, 2, 3], 2));

    // Less time than the stop margin: refused before starting, Retryable, x-fc-status 404.
    stage(&dir, "c", &[4]).await;
    let r = function
        .fc(
            "POST",
            "/invoke",
            &invoke("t2", "3"),
            &event_fixture("fc_timer_trigger.json"),
        )
        .unwrap();
    assert_eq!((r.status, r.header("x-fc-status")), (404, Some("404")));
    assert_eq!(r.json()["errorType"], "Retryable");
    assert_eq!(r.json()["errorKind"], "deadline");
    // The next run commits it.
    let r = function
        .fc(
            "POST",
            "/invoke",
            &invoke("t3", "60"),
            &event_fixture("fc_timer_trigger.json"),
        )
        .unwrap();
    assert_eq!(r.json()["commits"][0]["rows"], 1);
    assert_eq!(dir.ids("test.events"), (vec![1, 2, 3, 4], 3));
}

/// The templates' `maintain` function: this binary with an FC timer whose payload is
/// `{"maintain":true}` compacts the table (three one-object commits become one file) and keeps
/// every row; the answer names the table and what was done.
#[tokio::test(flavor = "multi_thread")]
async fn a_maintain_timer_compacts_the_tables_and_keeps_the_rows() {
    let dir = FunctionDir::new(&config()).unwrap();
    let function = dir.spawn_fc(Path::new(BIN), &[]).unwrap();
    let invoke = [
        ("x-fc-request-id", "m"),
        ("x-fc-control-path", "/invoke"),
        ("x-fc-function-timeout", "60"),
    ];
    for (name, ids) in [("a", &[1, 2][..]), ("b", &[3]), ("c", &[4, 5])] {
        stage(&dir, name, ids).await;
        let r = function
            .fc(
                "POST",
                "/invoke",
                &invoke,
                &event_fixture("fc_timer_trigger.json"),
            )
            .unwrap();
        assert_eq!(r.status, 200, "{}", function.log_tail());
    }
    assert_eq!(dir.ids("test.events"), (vec![1, 2, 3, 4, 5], 3));
    let timer = serde_json::json!({
        "triggerTime": "2026-12-02T06:00:00Z",
        "triggerName": "maintain",
        "payload": "{\"maintain\":true}",
    });
    let r = function
        .fc("POST", "/invoke", &invoke, timer.to_string().as_bytes())
        .unwrap();
    assert_eq!(r.status, 200, "{}", function.log_tail());
    let done = r.json();
    let table = &done["maintained"][0];
    assert_eq!(table["table"], "test.events", "{done}");
    assert_eq!(table["files_rewritten"], 3, "{done}");
    assert_eq!(table["files_written"], 1, "{done}");
    let (ids, _) = dir.ids("test.events");
    assert_eq!(ids, [1, 2, 3, 4, 5]);
}
