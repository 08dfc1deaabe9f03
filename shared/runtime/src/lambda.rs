//! AWS Lambda: events from the Runtime API (`AWS_LAMBDA_RUNTIME_API`) through `lambda_runtime`.
//!
//! - Every event arrives as JSON. A function URL event (payload format 2.0: `version` "2.0"
//!   and `requestContext.http`) becomes an [`Input::Http`] and its answer the function URL
//!   response object; anything else is an [`Input::Payload`] of the event's JSON.
//! - The deadline is the context's `Lambda-Runtime-Deadline-Ms`.
//! - A failed event invocation is reported with a `Diagnostic` whose `error_type` is
//!   `Retryable` or `NonRetryable` ([`crate::error`]); Lambda retries asynchronous events and
//!   event-source batches either way, the type tells operators and alarms which kind it was.
//! - A failure before the first event (configuration, pipeline start) is posted to
//!   `/runtime/init/error`, then the process exits.

use std::sync::Arc;

use base64::Engine as _;
use bytes::Bytes;
use floe_core::{Error, ErrorKind, Result};
use lambda_runtime::{Diagnostic, LambdaEvent, service_fn};
use lambda_runtime_api_client::{PooledClient, body::Body, build_request};
use serde_json::{Map, Value, json};

use crate::error::{diagnostic, error_body, http_status};
use crate::function::{Function, HttpRequest, HttpResponse, Input, Output};
use crate::invocation::{Deadline, Invocation, Platform};
use crate::invoke::invoke;

/// The environment the Runtime API client needs (it panics without them, so they are checked
/// first and reported as a configuration error instead).
const REQUIRED_ENV: [&str; 4] = [
    "AWS_LAMBDA_RUNTIME_API",
    "AWS_LAMBDA_FUNCTION_NAME",
    "AWS_LAMBDA_FUNCTION_MEMORY_SIZE",
    "AWS_LAMBDA_FUNCTION_VERSION",
];

/// Serve events until the Runtime API goes away.
pub async fn run(function: Arc<dyn Function>, name: &'static str) -> Result<()> {
    check_env()?;
    let service = service_fn(move |event: LambdaEvent<Value>| {
        let function = function.clone();
        async move { handle(function.as_ref(), name, event).await }
    });
    lambda_runtime::Runtime::new(service)
        .run()
        .await
        .map_err(|e| Error::new(ErrorKind::Io, format!("lambda runtime api failed: {e}")))
}

fn check_env() -> Result<()> {
    for var in REQUIRED_ENV {
        if std::env::var_os(var).is_none_or(|v| v.is_empty()) {
            return Err(Error::new(
                ErrorKind::Config,
                format!("environment variable {var} is not set (the lambda runtime sets it)"),
            ));
        }
    }
    let memory = std::env::var("AWS_LAMBDA_FUNCTION_MEMORY_SIZE").unwrap_or_default();
    if memory.parse::<i32>().is_err() {
        return Err(Error::new(
            ErrorKind::Config,
            "environment variable AWS_LAMBDA_FUNCTION_MEMORY_SIZE is not a number",
        ));
    }
    Ok(())
}

async fn handle(
    function: &dyn Function,
    name: &'static str,
    event: LambdaEvent<Value>,
) -> std::result::Result<Value, Diagnostic> {
    let context = Invocation {
        request_id: event.context.request_id.clone(),
        platform: Platform::Lambda,
        function: name,
        deadline: Deadline::from_epoch_ms(event.context.deadline),
        credentials: None,
        metrics: Arc::default(),
    };
    if let Some(request) = function_url_request(&event.payload) {
        let result = invoke(function, Input::Http(request), context).await;
        return Ok(function_url_response(result));
    }
    let payload = serde_json::to_vec(&event.payload)
        .map(Bytes::from)
        .map_err(|e| Diagnostic {
            error_type: "NonRetryable".into(),
            error_message: format!("invalid_input: event is not serializable: {e}"),
        })?;
    match invoke(function, Input::Payload(payload), context).await {
        Ok(Output::Json(v)) => Ok(v),
        Ok(Output::Http(r)) => Ok(body_value(&r.body)),
        Err(e) => Err(diagnostic(&e)),
    }
}

/// A function URL (or API Gateway HTTP API) event, payload format 2.0, as an HTTP request.
pub fn function_url_request(payload: &Value) -> Option<HttpRequest> {
    if payload.get("version").and_then(Value::as_str) != Some("2.0") {
        return None;
    }
    let http = payload.get("requestContext")?.get("http")?;
    let method = http.get("method")?.as_str()?.to_owned();
    let path = payload
        .get("rawPath")
        .or_else(|| http.get("path"))
        .and_then(Value::as_str)
        .unwrap_or("/")
        .to_owned();
    let query = payload
        .get("rawQueryString")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned();
    let headers = payload
        .get("headers")
        .and_then(Value::as_object)
        .map(|h| {
            h.iter()
                .filter_map(|(k, v)| Some((k.to_ascii_lowercase(), v.as_str()?.to_owned())))
                .collect()
        })
        .unwrap_or_default();
    let raw = payload.get("body").and_then(Value::as_str).unwrap_or("");
    let body = if payload.get("isBase64Encoded").and_then(Value::as_bool) == Some(true) {
        base64::engine::general_purpose::STANDARD
            .decode(raw)
            .unwrap_or_default()
    } else {
        raw.as_bytes().to_vec()
    };
    Some(HttpRequest {
        method,
        path,
        query,
        headers,
        body: Bytes::from(body),
    })
}

/// The function URL response object for a handler's result.
pub fn function_url_response(result: Result<Output>) -> Value {
    let response = match result {
        Ok(Output::Json(v)) => HttpResponse::json(200, &v),
        Ok(Output::Http(r)) => r,
        Err(e) => HttpResponse::json(http_status(&e), &error_body(&e)),
    };
    let headers: Map<String, Value> = response
        .headers
        .iter()
        .map(|(k, v)| (k.clone(), Value::from(v.as_str())))
        .collect();
    let (body, base64) = match std::str::from_utf8(&response.body) {
        Ok(s) => (s.to_owned(), false),
        Err(_) => (
            base64::engine::general_purpose::STANDARD.encode(&response.body),
            true,
        ),
    };
    json!({
        "statusCode": response.status,
        "headers": headers,
        "body": body,
        "isBase64Encoded": base64,
    })
}

/// An HTTP body returned to an event caller: its JSON, else the text.
fn body_value(body: &[u8]) -> Value {
    serde_json::from_slice(body)
        .unwrap_or_else(|_| Value::from(String::from_utf8_lossy(body).into_owned()))
}

/// Tell the Runtime API that start-up failed (`/runtime/init/error`), so the invocation that
/// started this sandbox fails with the reason instead of a timeout.
pub async fn report_init_error(e: &Error) -> Result<()> {
    let client = PooledClient::builder().build();
    let body = serde_json::to_vec(&diagnostic(e))
        .map_err(|e| Error::unexpected(format!("failed to encode the init error: {e}")))?;
    let request = build_request()
        .method("POST")
        .uri("/2018-06-01/runtime/init/error")
        .header("lambda-runtime-function-error-type", "Runtime.InitError")
        .header("content-type", "application/json")
        .body(Body::from(body))
        .map_err(|e| Error::unexpected(format!("failed to build the init error request: {e}")))?;
    client.call(request).await.map_err(|e| {
        Error::new(
            ErrorKind::Io,
            format!("failed to post the init error to the runtime api: {e}"),
        )
    })?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn function_url_events_become_http_requests() {
        let event = json!({
            "version": "2.0", "routeKey": "$default", "rawPath": "/backfill",
            "rawQueryString": "prefix=a%2Fb&mode=SNAPSHOT",
            "headers": {"Content-Type": "application/json"},
            "requestContext": {"http": {"method": "POST", "path": "/backfill"}},
            "body": "eyJhIjoxfQ==", "isBase64Encoded": true
        });
        let r = function_url_request(&event).unwrap();
        assert_eq!(r.method, "POST");
        assert_eq!(r.path, "/backfill");
        assert_eq!(r.header("content-type"), Some("application/json"));
        assert_eq!(&r.body[..], br#"{"a":1}"#);
        assert_eq!(
            r.query_pairs(),
            vec![
                ("prefix".to_owned(), "a/b".to_owned()),
                ("mode".to_owned(), "SNAPSHOT".to_owned())
            ]
        );
        // An S3 notification or a schedule event is not an HTTP request.
        assert!(function_url_request(&json!({"Records": []})).is_none());
        assert!(function_url_request(&json!({"version": "0", "source": "aws.events"})).is_none());
    }

    #[test]
    fn function_url_responses_carry_status_and_body() {
        let ok = function_url_response(Ok(Output::Json(json!({"rows": 3}))));
        assert_eq!(ok["statusCode"], 200);
        assert_eq!(ok["body"], r#"{"rows":3}"#);
        assert_eq!(ok["headers"]["content-type"], "application/json");
        let err = function_url_response(Err(Error::invalid_input("bad prefix")));
        assert_eq!(err["statusCode"], 400);
        let body: Value = serde_json::from_str(err["body"].as_str().unwrap()).unwrap();
        assert_eq!(body["errorType"], "NonRetryable");
    }
}
