//! The FC custom runtime server with a scripted function: what FC sends in (control paths,
//! request id, credentials, timeout) reaches the handler, and what it answers goes out with
//! the status and `x-fc-status` FC expects.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use floe_core::{Error, ErrorKind, Result};
use floe_runtime::{
    Event, Function, HttpResponse, Input, Invocation, Output, SharedCredentials, fc,
};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// What the function saw of one call: input kind, request id, credential id, seconds left.
type Seen = (String, String, Option<String>, u64);

/// Answers by the body: `ok`, `retry`, `invalid`, `http`; records what it saw.
#[derive(Default)]
struct Scripted {
    seen: Mutex<Vec<Seen>>,
    fail_init: bool,
}

#[async_trait::async_trait]
impl Function for Scripted {
    async fn call(&self, event: Event) -> Result<Output> {
        let kind = match &event.input {
            Input::Payload(_) => "event".to_owned(),
            Input::Http(r) => format!("http {} {}", r.method, r.path),
        };
        let ctx = &event.context;
        self.seen.lock().unwrap().push((
            kind,
            ctx.request_id.clone(),
            ctx.credentials.as_ref().map(|c| c.access_key_id.clone()),
            ctx.deadline.remaining().as_secs(),
        ));
        match event.body() {
            b"retry" => Err(Error::new(ErrorKind::Throttled, "slow down")),
            b"invalid" => Err(Error::invalid_input("bad event")),
            b"http" => Ok(Output::Http(HttpResponse::json(
                202,
                &json!({"more": true}),
            ))),
            _ => Ok(Output::Json(json!({"ok": true}))),
        }
    }

    async fn initialize(&self, _context: &Invocation) -> Result<()> {
        if self.fail_init {
            Err(Error::config("catalog.uri", "missing"))
        } else {
            Ok(())
        }
    }
}

async fn start(function: Scripted) -> (u16, Arc<Scripted>, SharedCredentials) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let function = Arc::new(function);
    let shared = SharedCredentials::default();
    let (f, s) = (function.clone(), shared.clone());
    tokio::spawn(async move { fc::serve(listener, f, "test", s).await });
    (port, function, shared)
}

async fn request(
    port: u16,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> (u16, String, Value) {
    let mut s = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .unwrap();
    let mut req = format!(
        "{method} {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    req.push_str(body);
    s.write_all(req.as_bytes()).await.unwrap();
    let mut raw = String::new();
    s.read_to_string(&mut raw).await.unwrap();
    let (head, body) = raw.split_once("\r\n\r\n").unwrap();
    let status = head.split_whitespace().nth(1).unwrap().parse().unwrap();
    let fc_status = head
        .lines()
        .find_map(|l| l.strip_prefix("x-fc-status: "))
        .unwrap_or("")
        .to_owned();
    (
        status,
        fc_status,
        serde_json::from_str(body).unwrap_or(Value::Null),
    )
}

#[tokio::test]
async fn invoke_initialize_and_http_requests_answer_as_fc_expects() {
    let (port, f, shared) = start(Scripted::default()).await;
    let fc_headers = [
        ("x-fc-request-id", "r-1"),
        ("x-fc-function-timeout", "120"),
        ("x-fc-access-key-id", "STS.id"),
        ("x-fc-access-key-secret", "secret"),
        ("x-fc-security-token", "token"),
    ];

    let (status, fc_status, body) = request(port, "POST", "/invoke", &fc_headers, "ok").await;
    assert_eq!(
        (status, fc_status.as_str(), body),
        (200, "200", json!({"ok": true}))
    );
    let seen = f.seen.lock().unwrap()[0].clone();
    assert_eq!((seen.0.as_str(), seen.1.as_str()), ("event", "r-1"));
    assert_eq!(seen.2.as_deref(), Some("STS.id"));
    assert!(
        (118..=120).contains(&seen.3),
        "deadline from x-fc-function-timeout: {}",
        seen.3
    );
    assert_eq!(shared.get().unwrap().security_token.expose(), "token");

    // Failed events: 404 + x-fc-status 404, the type says whether to retry.
    let (status, fc_status, body) = request(port, "POST", "/invoke", &fc_headers, "retry").await;
    assert_eq!((status, fc_status.as_str()), (404, "404"));
    assert_eq!(body["errorType"], "Retryable");
    assert_eq!(body["errorKind"], "throttled");
    let (_, _, body) = request(port, "POST", "/invoke", &fc_headers, "invalid").await;
    assert_eq!(body["errorType"], "NonRetryable");

    // HTTP trigger requests: the handler's status, or one by error kind; x-fc-status marks failure.
    let (status, fc_status, _) = request(port, "GET", "/status", &[], "ok").await;
    assert_eq!((status, fc_status.as_str()), (200, "200"));
    let (status, fc_status, body) = request(port, "POST", "/x", &[], "http").await;
    assert_eq!(
        (status, fc_status.as_str(), body),
        (202, "200", json!({"more": true}))
    );
    let (status, fc_status, _) = request(port, "POST", "/x", &[], "invalid").await;
    assert_eq!((status, fc_status.as_str()), (400, "404"));
    let (status, _, _) = request(port, "POST", "/x", &[], "retry").await;
    assert_eq!(status, 503);
    // An HTTP trigger request to the path /invoke is still an HTTP request.
    request(
        port,
        "POST",
        "/invoke",
        &[("x-fc-control-path", "/http-invoke")],
        "ok",
    )
    .await;
    assert_eq!(
        f.seen.lock().unwrap().last().unwrap().0,
        "http POST /invoke"
    );
    // Without x-fc-function-timeout the deadline is FLOE_TIMEOUT_SECS or 60 s.
    assert!(f.seen.lock().unwrap().last().unwrap().3 <= 60);

    let (status, fc_status, _) = request(
        port,
        "POST",
        "/initialize",
        &[("x-fc-request-id", "i-1")],
        "",
    )
    .await;
    assert_eq!((status, fc_status.as_str()), (200, "200"));
}

#[tokio::test]
async fn a_failing_initializer_is_reported_with_x_fc_status() {
    let (port, _, _) = start(Scripted {
        fail_init: true,
        ..Default::default()
    })
    .await;
    let (status, fc_status, body) = request(
        port,
        "POST",
        "/initialize",
        &[("x-fc-control-path", "/initialize")],
        "",
    )
    .await;
    assert_eq!((status, fc_status.as_str()), (404, "404"));
    assert_eq!(body["errorKind"], "config");
    tokio::time::sleep(Duration::from_millis(1)).await;
}
