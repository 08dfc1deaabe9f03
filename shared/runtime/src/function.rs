//! The contract between a platform adapter and a function: an [`Event`] in, an [`Output`] or an
//! error out.

use bytes::Bytes;
use floe_core::{Error, Result};
use serde_json::Value;

use crate::invocation::Invocation;

/// What a function is invoked with.
#[derive(Debug)]
pub enum Input {
    /// An event payload as delivered: a Lambda event's JSON, an FC `/invoke` body (OSS trigger,
    /// MNS trigger, timer trigger, or whatever `InvokeFunction` sent).
    Payload(Bytes),
    /// An HTTP request: an FC HTTP trigger, or a Lambda function URL event (decoded).
    Http(HttpRequest),
}

/// One invocation: the input and its context (the shape of `lambda_runtime::LambdaEvent`).
#[derive(Debug)]
pub struct Event {
    /// What came in.
    pub input: Input,
    /// Request id, deadline, credentials, metrics.
    pub context: Invocation,
}

impl Event {
    /// An event payload (tests, local runs).
    pub fn payload(bytes: impl Into<Bytes>, context: Invocation) -> Self {
        Event {
            input: Input::Payload(bytes.into()),
            context,
        }
    }

    /// The bytes a handler treats as its event document: the payload, or an HTTP request's body.
    pub fn body(&self) -> &[u8] {
        match &self.input {
            Input::Payload(b) => b,
            Input::Http(r) => &r.body,
        }
    }

    /// The body as JSON; an empty body is `null`.
    pub fn json_body(&self) -> Result<Value> {
        let body = self.body().trim_ascii();
        if body.is_empty() {
            return Ok(Value::Null);
        }
        serde_json::from_slice(body)
            .map_err(|e| Error::invalid_input("request body is not valid json").with_source(e))
    }
}

/// An HTTP request as the function sees it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HttpRequest {
    /// `GET`, `POST`, ….
    pub method: String,
    /// The path, without the query.
    pub path: String,
    /// The raw query string (no `?`).
    pub query: String,
    /// Headers, names lowercase.
    pub headers: Vec<(String, String)>,
    /// The body.
    pub body: Bytes,
}

impl HttpRequest {
    /// The first value of header `name` (lowercase).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// The query parameters, percent-decoded (`+` is a space).
    pub fn query_pairs(&self) -> Vec<(String, String)> {
        self.query
            .split('&')
            .filter(|p| !p.is_empty())
            .map(|p| {
                let (k, v) = p.split_once('=').unwrap_or((p, ""));
                (
                    floe_core::event::decode_form_component(k),
                    floe_core::event::decode_form_component(v),
                )
            })
            .collect()
    }
}

/// An HTTP answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HttpResponse {
    /// The status.
    pub status: u16,
    /// Headers to send.
    pub headers: Vec<(String, String)>,
    /// The body.
    pub body: Bytes,
}

impl HttpResponse {
    /// A JSON answer.
    pub fn json(status: u16, value: &Value) -> Self {
        HttpResponse {
            status,
            headers: vec![("content-type".into(), "application/json".into())],
            body: Bytes::from(value.to_string()),
        }
    }
}

/// What a function answers.
#[derive(Debug)]
pub enum Output {
    /// A JSON result (HTTP callers get it with status 200).
    Json(Value),
    /// A full HTTP answer (event callers get its body, parsed as JSON when it is).
    Http(HttpResponse),
}

/// A deployable function: the adapters call [`Function::call`] once per invocation.
#[async_trait::async_trait]
pub trait Function: Send + Sync + 'static {
    /// Handle one invocation.
    async fn call(&self, event: Event) -> Result<Output>;

    /// FC's `/initialize` hook (the instance's first request when an initializer is configured).
    /// Default: nothing to do; everything was built at start.
    async fn initialize(&self, _context: &Invocation) -> Result<()> {
        Ok(())
    }
}
