//! `floe-backfill` as each platform runs it, on the local folder source: a function URL event
//! under the Lambda Runtime API emulator, FC HTTP-trigger requests and an `/invoke` event;
//! staged rows are committed with the pipeline and read back with pyiceberg.

use std::path::Path;
use std::time::Duration;

use floe_pipeline::{FloeConfig, Pipeline};
use floe_testbed::functions::{FunctionDir, LOCAL_CONFIG, event_fixture};
use floe_testbed::lambda::LambdaRuntimeApi;
use serde_json::Value;

/// What follows [`LOCAL_CONFIG`] in this test's configuration.
const ROUTES: &str = r#"
[[routes]]
format = "ndjson"
table = "test.events"
"#;

fn config() -> String {
    format!("{LOCAL_CONFIG}{ROUTES}")
}

const BIN: &str = env!("CARGO_BIN_EXE_floe-backfill");

fn setup() -> FunctionDir {
    let dir = FunctionDir::new(&config()).unwrap();
    for (key, ids) in [
        ("logs/a.json", &[1, 2][..]),
        ("logs/b.json", &[3][..]),
        ("events/c.json", &[4][..]),
        ("other/d.json", &[5][..]),
    ] {
        dir.put_ids(key, ids).unwrap();
    }
    dir
}

async fn commit_and_read(dir: &FunctionDir) -> Vec<i64> {
    let pipeline = Pipeline::open(FloeConfig::load(&dir.config()).unwrap())
        .await
        .unwrap();
    pipeline.commit(true).await.unwrap();
    dir.ids("test.events").0
}

#[tokio::test(flavor = "multi_thread")]
async fn lambda_function_url_backfills_the_requested_prefix() {
    let dir = setup();
    let api = LambdaRuntimeApi::start().await.unwrap();
    let function = dir.spawn_lambda(Path::new(BIN), &api, &[]).unwrap();
    let wait = Duration::from_secs(60);

    // The function URL event asks for prefix=logs/ (query) and SNAPSHOT (body).
    let r = api
        .call(&event_fixture("function_url_backfill.json"), wait)
        .await
        .unwrap()
        .json();
    assert_eq!(r["statusCode"], 200, "{r}\n{}", function.log_tail());
    let body: Value = serde_json::from_str(r["body"].as_str().unwrap()).unwrap();
    assert_eq!(body["prefixes"], serde_json::json!(["logs/"]));
    assert_eq!(
        (body["listed"].clone(), body["complete"].clone()),
        (2.into(), true.into())
    );

    // A bad request answers 400 through the function URL (the invocation itself succeeds).
    let mut bad: Value =
        serde_json::from_slice(&event_fixture("function_url_backfill.json")).unwrap();
    bad["rawQueryString"] = "mode=EVERYTHING".into();
    let r = api
        .call(bad.to_string().as_bytes(), wait)
        .await
        .unwrap()
        .json();
    assert_eq!(r["statusCode"], 400, "{r}");
    drop(function);
    assert_eq!(commit_and_read(&dir).await, vec![1, 2, 3]);
}

#[tokio::test(flavor = "multi_thread")]
async fn fc_http_trigger_and_invoke_backfill_and_bad_requests_set_x_fc_status() {
    let dir = setup();
    let function = dir.spawn_fc(Path::new(BIN), &[]).unwrap();

    let r = function
        .fc(
            "POST",
            "/?prefix=events/&mode=INITIAL",
            &[("x-fc-request-id", "b1"), ("x-fc-function-timeout", "60")],
            b"",
        )
        .unwrap();
    assert_eq!((r.status, r.header("x-fc-status")), (200, Some("200")));
    assert_eq!(r.json()["listed"], 1);

    // As an event: everything not landed yet.
    let r = function
        .fc(
            "POST",
            "/invoke",
            &[("x-fc-request-id", "b2"), ("x-fc-control-path", "/invoke")],
            br#"{"mode":"SNAPSHOT"}"#,
        )
        .unwrap();
    assert_eq!((r.status, r.header("x-fc-status")), (200, Some("200")));
    // Listed: what was not landed yet (events/c.json was).
    assert_eq!(
        (r.json()["listed"].clone(), r.json()["complete"].clone()),
        (3.into(), true.into())
    );

    let r = function
        .fc(
            "POST",
            "/",
            &[("x-fc-request-id", "b3")],
            br#"{"bucket":"elsewhere"}"#,
        )
        .unwrap();
    assert_eq!((r.status, r.header("x-fc-status")), (400, Some("404")));
    assert_eq!(r.json()["errorType"], "NonRetryable");
    drop(function);
    assert_eq!(commit_and_read(&dir).await, vec![1, 2, 3, 4, 5]);
}
