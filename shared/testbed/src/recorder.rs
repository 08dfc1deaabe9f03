//! A recording HTTP server: answers each request with what a test's responder returns and
//! keeps the request exactly as it arrived (method, raw path and query, headers, body).
//!
//! For checking what a client puts on the wire (signed headers against a vector, paths and
//! bodies against botocore's) where no real server implements the call, and for scripting
//! answers a real server will not give (a 503 on a commit).

use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};

use axum::Router;
use axum::body::{Body, to_bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderName, HeaderValue, StatusCode};
use axum::response::Response;
use floe_core::{Error, Result};
use tokio::task::JoinHandle;

/// Largest request body kept.
const MAX_BODY_BYTES: usize = 16 << 20;

/// A request as the server received it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordedHttpRequest {
    /// `GET`, `PUT`, ….
    pub method: String,
    /// Path and query as sent (percent-encoding untouched).
    pub path_and_query: String,
    /// Headers in arrival order, names lowercase.
    pub headers: Vec<(String, String)>,
    /// The body.
    pub body: Vec<u8>,
}

impl RecordedHttpRequest {
    /// The first value of header `name` (any case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The path without the query.
    pub fn path(&self) -> &str {
        self.path_and_query
            .split_once('?')
            .map_or(self.path_and_query.as_str(), |(p, _)| p)
    }

    /// The raw query (empty if none).
    pub fn query(&self) -> &str {
        self.path_and_query.split_once('?').map_or("", |(_, q)| q)
    }
}

/// What the server answers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reply {
    /// HTTP status.
    pub status: u16,
    /// Headers to send.
    pub headers: Vec<(String, String)>,
    /// Body.
    pub body: Vec<u8>,
}

impl Reply {
    /// A JSON answer.
    pub fn json(status: u16, value: &serde_json::Value) -> Self {
        Reply {
            status,
            headers: vec![("content-type".into(), "application/json".into())],
            body: value.to_string().into_bytes(),
        }
    }

    /// An answer with no body.
    pub fn empty(status: u16) -> Self {
        Reply {
            status,
            headers: Vec::new(),
            body: Vec::new(),
        }
    }

    /// An answer with raw bytes.
    pub fn bytes(status: u16, body: Vec<u8>) -> Self {
        Reply {
            status,
            headers: Vec::new(),
            body,
        }
    }
}

type Responder = dyn Fn(&RecordedHttpRequest) -> Reply + Send + Sync;

struct Shared {
    responder: Box<Responder>,
    requests: Mutex<Vec<RecordedHttpRequest>>,
}

/// A running recording server on 127.0.0.1; stops when dropped.
pub struct RecordingServer {
    addr: SocketAddr,
    shared: Arc<Shared>,
    task: JoinHandle<()>,
}

impl std::fmt::Debug for RecordingServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RecordingServer")
            .field("addr", &self.addr)
            .finish_non_exhaustive()
    }
}

impl RecordingServer {
    /// Bind `127.0.0.1:0` and answer with `responder`. Must be called inside a tokio runtime.
    pub async fn start(
        responder: impl Fn(&RecordedHttpRequest) -> Reply + Send + Sync + 'static,
    ) -> Result<Self> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .map_err(|e| Error::from(e).while_doing("failed to bind the recording server"))?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared {
            responder: Box::new(responder),
            requests: Mutex::new(Vec::new()),
        });
        let app = Router::new().fallback(handle).with_state(shared.clone());
        let task = tokio::spawn(async move {
            if let Err(e) = axum::serve(listener, app).await {
                tracing::warn!(error = %e, "recording server stopped");
            }
        });
        Ok(RecordingServer { addr, shared, task })
    }

    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:<port>`.
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Every request so far, in arrival order.
    pub fn requests(&self) -> Vec<RecordedHttpRequest> {
        self.shared
            .requests
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Forget the requests so far.
    pub fn clear(&self) {
        self.shared
            .requests
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
    }
}

impl Drop for RecordingServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn handle(State(shared): State<Arc<Shared>>, req: Request) -> Response {
    let (parts, body) = req.into_parts();
    let body = to_bytes(body, MAX_BODY_BYTES)
        .await
        .map(|b| b.to_vec())
        .unwrap_or_default();
    let recorded = RecordedHttpRequest {
        method: parts.method.as_str().to_owned(),
        path_and_query: parts
            .uri
            .path_and_query()
            .map(|p| p.as_str().to_owned())
            .unwrap_or_default(),
        headers: parts
            .headers
            .iter()
            .map(|(k, v)| {
                (
                    k.as_str().to_owned(),
                    String::from_utf8_lossy(v.as_bytes()).into_owned(),
                )
            })
            .collect(),
        body,
    };
    let reply = (shared.responder)(&recorded);
    shared
        .requests
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .push(recorded);
    let mut response = Response::new(Body::from(reply.body));
    *response.status_mut() =
        StatusCode::from_u16(reply.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    for (k, v) in reply.headers {
        if let (Ok(k), Ok(v)) = (HeaderName::try_from(k), HeaderValue::try_from(v)) {
            response.headers_mut().append(k, v);
        }
    }
    response
}
