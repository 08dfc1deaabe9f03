//! A Lambda Runtime API emulator: the four routes a custom runtime talks to, on real HTTP.
//!
//! - `GET /2018-06-01/runtime/invocation/next` waits for a queued event and serves it with
//!   `Lambda-Runtime-Aws-Request-Id`, `Lambda-Runtime-Deadline-Ms`,
//!   `Lambda-Runtime-Invoked-Function-Arn` and `Lambda-Runtime-Trace-Id`.
//! - `POST /2018-06-01/runtime/invocation/{id}/response` and `…/{id}/error` are recorded
//!   (the error with its `Lambda-Runtime-Function-Error-Type` header).
//! - `POST /2018-06-01/runtime/init/error` is recorded.
//!
//! Run a function binary with `AWS_LAMBDA_RUNTIME_API` set to [`LambdaRuntimeApi::address`]
//! and the variables of [`LambdaRuntimeApi::function_env`], queue events with
//! [`LambdaRuntimeApi::invoke`], and wait for what the function answered.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use axum::routing::{get, post};
use floe_core::{Error, Result};
use serde_json::Value;
use tokio::sync::{Mutex as AsyncMutex, mpsc};
use tokio::task::JoinHandle;

/// What the function answered to one event.
#[derive(Clone, Debug, PartialEq)]
pub enum LambdaResult {
    /// `POST …/{id}/response` with this body.
    Response(Vec<u8>),
    /// `POST …/{id}/error`.
    Error {
        /// The `Lambda-Runtime-Function-Error-Type` header, if sent.
        header_type: Option<String>,
        /// The body: `{"errorType","errorMessage"}`.
        body: Value,
    },
}

impl LambdaResult {
    /// The response body as JSON (panics on an error result: for tests).
    pub fn json(&self) -> Value {
        match self {
            LambdaResult::Response(b) => {
                serde_json::from_slice(b).expect("the function's response is not json")
            }
            LambdaResult::Error { body, .. } => panic!("the invocation failed: {body}"),
        }
    }

    /// The error body's `errorType` (panics on a response: for tests).
    pub fn error_type(&self) -> String {
        match self {
            LambdaResult::Error { body, .. } => {
                body["errorType"].as_str().unwrap_or_default().to_owned()
            }
            LambdaResult::Response(b) => {
                panic!("the invocation succeeded: {}", String::from_utf8_lossy(b))
            }
        }
    }
}

struct Queued {
    request_id: String,
    deadline_ms: u64,
    body: Vec<u8>,
}

struct Shared {
    sender: mpsc::UnboundedSender<Queued>,
    receiver: AsyncMutex<mpsc::UnboundedReceiver<Queued>>,
    results: Mutex<HashMap<String, (LambdaResult, Instant)>>,
    init_errors: Mutex<Vec<Value>>,
    next_calls: AtomicU64,
    function_arn: String,
}

/// The emulator; stops when dropped.
pub struct LambdaRuntimeApi {
    addr: SocketAddr,
    shared: Arc<Shared>,
    counter: AtomicU64,
    task: JoinHandle<()>,
}

impl Drop for LambdaRuntimeApi {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl LambdaRuntimeApi {
    /// Listen on a free port of 127.0.0.1.
    pub async fn start() -> Result<Self> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let (sender, receiver) = mpsc::unbounded_channel();
        let shared = Arc::new(Shared {
            sender,
            receiver: AsyncMutex::new(receiver),
            results: Mutex::new(HashMap::new()),
            init_errors: Mutex::new(Vec::new()),
            next_calls: AtomicU64::new(0),
            function_arn: "arn:aws:lambda:us-east-1:123456789012:function:floe-test".into(),
        });
        let app = Router::new()
            .route("/2018-06-01/runtime/invocation/next", get(next))
            .route(
                "/2018-06-01/runtime/invocation/{id}/response",
                post(response),
            )
            .route("/2018-06-01/runtime/invocation/{id}/error", post(error))
            .route("/2018-06-01/runtime/init/error", post(init_error))
            .with_state(shared.clone());
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Ok(LambdaRuntimeApi {
            addr,
            shared,
            counter: AtomicU64::new(0),
            task,
        })
    }

    /// `127.0.0.1:PORT`: the value of `AWS_LAMBDA_RUNTIME_API`.
    pub fn address(&self) -> String {
        self.addr.to_string()
    }

    /// The environment Lambda gives a function process (with `AWS_LAMBDA_RUNTIME_API`).
    pub fn function_env(&self, function_name: &str) -> Vec<(String, String)> {
        [
            ("AWS_LAMBDA_RUNTIME_API", self.address()),
            ("AWS_LAMBDA_FUNCTION_NAME", function_name.to_owned()),
            ("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "512".to_owned()),
            ("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST".to_owned()),
            (
                "AWS_LAMBDA_LOG_GROUP_NAME",
                format!("/aws/lambda/{function_name}"),
            ),
            (
                "AWS_LAMBDA_LOG_STREAM_NAME",
                "2025/01/15/[$LATEST]0123456789abcdef".to_owned(),
            ),
            ("AWS_REGION", "us-east-1".to_owned()),
            ("AWS_DEFAULT_REGION", "us-east-1".to_owned()),
            ("AWS_EXECUTION_ENV", "AWS_Lambda_provided.al2023".to_owned()),
            ("LAMBDA_TASK_ROOT", "/var/task".to_owned()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect()
    }

    /// Queue an event with `timeout` for the function to answer; returns its request id.
    pub fn invoke(&self, event: &[u8], timeout: Duration) -> String {
        let n = self.counter.fetch_add(1, Ordering::Relaxed);
        let request_id = format!("8476a536-e9f4-11e8-9739-{n:012x}");
        let deadline_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis() as u64)
            .unwrap_or(0)
            + timeout.as_millis() as u64;
        let _ = self.shared.sender.send(Queued {
            request_id: request_id.clone(),
            deadline_ms,
            body: event.to_vec(),
        });
        request_id
    }

    /// What the function answered to `request_id`, waiting up to `wait`.
    pub async fn result(&self, request_id: &str, wait: Duration) -> Result<LambdaResult> {
        Ok(self.result_at(request_id, wait).await?.0)
    }

    /// The answer and when it arrived.
    pub async fn result_at(
        &self,
        request_id: &str,
        wait: Duration,
    ) -> Result<(LambdaResult, Instant)> {
        let until = Instant::now() + wait;
        loop {
            if let Some(r) = lock(&self.shared.results).get(request_id) {
                return Ok(r.clone());
            }
            // A function that failed to start answers nothing: say so now, not at the deadline.
            if let Some(e) = lock(&self.shared.init_errors).first() {
                return Err(Error::new(
                    floe_core::ErrorKind::Unexpected,
                    format!(
                        "the function failed to start (invocation {request_id} unanswered): {e}"
                    ),
                ));
            }
            if Instant::now() >= until {
                return Err(Error::new(
                    floe_core::ErrorKind::Deadline,
                    format!("no answer to lambda invocation {request_id} within {wait:?}"),
                ));
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// Queue `event` and wait for the answer.
    pub async fn call(&self, event: &[u8], wait: Duration) -> Result<LambdaResult> {
        let id = self.invoke(event, wait);
        self.result(&id, wait + Duration::from_secs(5)).await
    }

    /// Init errors posted so far.
    pub fn init_errors(&self) -> Vec<Value> {
        lock(&self.shared.init_errors).clone()
    }

    /// How many times the function asked for its next event.
    pub fn next_calls(&self) -> u64 {
        self.shared.next_calls.load(Ordering::Relaxed)
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

async fn next(State(shared): State<Arc<Shared>>) -> Response {
    shared.next_calls.fetch_add(1, Ordering::Relaxed);
    let queued = shared.receiver.lock().await.recv().await;
    let Some(q) = queued else {
        return status(StatusCode::GONE);
    };
    Response::builder()
        .status(StatusCode::OK)
        .header("content-type", "application/json")
        .header("lambda-runtime-aws-request-id", &q.request_id)
        .header("lambda-runtime-deadline-ms", q.deadline_ms.to_string())
        .header("lambda-runtime-invoked-function-arn", &shared.function_arn)
        .header(
            "lambda-runtime-trace-id",
            "Root=1-5bef4de7-ad49b0e87f6ef6c87fc2e700;Parent=9a9197af755a6419;Sampled=1",
        )
        .body(Body::from(q.body))
        .unwrap_or_else(|_| status(StatusCode::INTERNAL_SERVER_ERROR))
}

async fn response(
    State(shared): State<Arc<Shared>>,
    Path(id): Path<String>,
    body: Bytes,
) -> Response {
    lock(&shared.results).insert(id, (LambdaResult::Response(body.to_vec()), Instant::now()));
    status(StatusCode::ACCEPTED)
}

async fn error(
    State(shared): State<Arc<Shared>>,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let result = LambdaResult::Error {
        header_type: headers
            .get("lambda-runtime-function-error-type")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned),
        body: serde_json::from_slice(&body)
            .unwrap_or_else(|_| Value::from(String::from_utf8_lossy(&body).into_owned())),
    };
    lock(&shared.results).insert(id, (result, Instant::now()));
    status(StatusCode::ACCEPTED)
}

async fn init_error(State(shared): State<Arc<Shared>>, body: Bytes) -> Response {
    lock(&shared.init_errors).push(
        serde_json::from_slice(&body)
            .unwrap_or_else(|_| Value::from(String::from_utf8_lossy(&body).into_owned())),
    );
    status(StatusCode::ACCEPTED)
}

fn status(code: StatusCode) -> Response {
    Response::builder()
        .status(code)
        .body(Body::empty())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn serves_queued_events_and_records_answers() {
        let api = LambdaRuntimeApi::start().await.unwrap();
        let base = format!("http://{}/2018-06-01/runtime", api.address());
        let client = reqwest::Client::new();
        let id = api.invoke(br#"{"a":1}"#, Duration::from_secs(30));
        let next = client
            .get(format!("{base}/invocation/next"))
            .send()
            .await
            .unwrap();
        assert_eq!(
            next.headers()["lambda-runtime-aws-request-id"]
                .to_str()
                .unwrap(),
            id
        );
        let deadline: u64 = next.headers()["lambda-runtime-deadline-ms"]
            .to_str()
            .unwrap()
            .parse()
            .unwrap();
        assert!(deadline > 1_700_000_000_000);
        assert_eq!(next.bytes().await.unwrap().as_ref(), br#"{"a":1}"#);
        client
            .post(format!("{base}/invocation/{id}/response"))
            .body("{\"ok\":true}")
            .send()
            .await
            .unwrap();
        let r = api.result(&id, Duration::from_secs(1)).await.unwrap();
        assert_eq!(r.json()["ok"], true);

        let id2 = api.invoke(b"{}", Duration::from_secs(30));
        client
            .post(format!("{base}/invocation/{id2}/error"))
            .header("lambda-runtime-function-error-type", "unhandled")
            .body(r#"{"errorType":"Retryable","errorMessage":"io: x"}"#)
            .send()
            .await
            .unwrap();
        let r = api.result(&id2, Duration::from_secs(1)).await.unwrap();
        assert_eq!(r.error_type(), "Retryable");
        client
            .post(format!("{base}/init/error"))
            .body(r#"{"errorType":"NonRetryable","errorMessage":"config: x"}"#)
            .send()
            .await
            .unwrap();
        assert_eq!(api.init_errors()[0]["errorType"], "NonRetryable");
        assert_eq!(api.next_calls(), 1);

        // After a start-up failure an invocation is reported unanswered at once, with the error.
        let started = std::time::Instant::now();
        let e = api.call(b"{}", Duration::from_secs(60)).await.unwrap_err();
        assert!(e.to_string().contains("config: x"), "{e}");
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{:?}",
            started.elapsed()
        );
    }
}
