//! An HTTP front that passes one request at a time to a server behind it.
//!
//! Why: `s3s-fs` 0.14.1 checks `If-Match` / `If-None-Match` and then writes, without a lock in
//! between, and a GET opens the file before it reads the stored ETag. Two conditional PUTs with
//! the same ETag can then both succeed, and a GET can pair an old body with a new ETag: lost
//! updates that S3 and OSS (atomic per key) never produce. Seen here: the checkpoint
//! conformance counter (8 tasks × 25 compare-and-set increments) straight against `s3s-fs`
//! ended at 180–185 instead of 200, and with response checksums on, a GET failed validation
//! (old body, new checksum). Putting this front before `s3s-fs`
//! makes every request atomic with respect to the others, which is the guarantee the real
//! stores give; the requests themselves (SigV4, conditional headers, 412 answers) are untouched.
//! Clients still race each other for real: the front only orders what reaches the server.
//!
//! Requests and responses are buffered whole, so use it for small objects (state entries),
//! not for streaming tests.

use std::sync::Arc;

use axum::Router;
use axum::body::{Body, to_bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderName, StatusCode};
use axum::response::{IntoResponse, Response};
use floe_core::{Error, ErrorKind, Result};
use tokio::task::JoinHandle;

/// Largest request or response body passed through.
const MAX_BODY_BYTES: usize = 16 << 20;

/// Headers that belong to one connection, not to the request.
const HOP_BY_HOP: [&str; 4] = ["connection", "keep-alive", "transfer-encoding", "upgrade"];

struct Shared {
    http: reqwest::Client,
    upstream: String,
    turn: tokio::sync::Mutex<()>,
}

/// A running front; stops when dropped.
#[derive(Debug)]
pub struct Linearizer {
    endpoint: String,
    task: JoinHandle<()>,
}

impl Linearizer {
    /// Listen on `127.0.0.1:0` and forward to `upstream` (`http://host:port`). Must be called
    /// inside a tokio runtime.
    pub async fn start(upstream: &str) -> Result<Self> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .map_err(|e| Error::from(e).while_doing("failed to bind the linearizer"))?;
        let endpoint = format!("http://{}", listener.local_addr()?);
        // A fresh connection per request: s3s-fs writes a GET's headers and body separately,
        // and on a kept-alive connection the second write waits for a delayed ACK (about
        // 17 ms a GET here); a new connection ACKs at once.
        let http = reqwest::Client::builder()
            .pool_max_idle_per_host(0)
            .build()
            .map_err(|e| Error::new(ErrorKind::Io, "failed to build a client").with_source(e))?;
        let shared = Arc::new(Shared {
            http,
            upstream: upstream.trim_end_matches('/').to_owned(),
            turn: tokio::sync::Mutex::new(()),
        });
        let app = Router::new().fallback(forward).with_state(shared);
        let task = tokio::spawn(async move {
            if let Err(e) = axum::serve(listener, app).await {
                tracing::warn!(error = %e, "linearizer stopped");
            }
        });
        Ok(Linearizer { endpoint, task })
    }

    /// `http://127.0.0.1:<port>`: give this to clients instead of the server's endpoint.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }
}

impl Drop for Linearizer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn forward(State(shared): State<Arc<Shared>>, req: Request) -> Response {
    match forward_one(&shared, req).await {
        Ok(resp) => resp,
        Err(e) => (StatusCode::BAD_GATEWAY, e.to_string()).into_response(),
    }
}

async fn forward_one(shared: &Shared, req: Request) -> Result<Response> {
    let (parts, body) = req.into_parts();
    let body = to_bytes(body, MAX_BODY_BYTES)
        .await
        .map_err(|e| Error::new(ErrorKind::Io, "failed to read the request body").with_source(e))?;
    let path = parts
        .uri
        .path_and_query()
        .map(|p| p.as_str())
        .unwrap_or("/");
    let url = format!("{}{path}", shared.upstream);
    // The Host header is kept as the client signed it; hyper only adds one when it is missing.
    let mut out = shared.http.request(parts.method.clone(), &url);
    for (name, value) in &parts.headers {
        if !is_hop_by_hop(name) && name.as_str() != "content-length" {
            out = out.header(name, value);
        }
    }
    let _turn = shared.turn.lock().await;
    let resp = out
        .body(body)
        .send()
        .await
        .map_err(|e| Error::new(ErrorKind::Io, "upstream request failed").with_source(e))?;
    let status = resp.status();
    let headers = resp.headers().clone();
    let bytes = resp
        .bytes()
        .await
        .map_err(|e| Error::new(ErrorKind::Io, "upstream body failed").with_source(e))?;
    drop(_turn);
    let mut builder = Response::builder().status(status);
    for (name, value) in &headers {
        if !is_hop_by_hop(name) {
            builder = builder.header(name, value);
        }
    }
    builder
        .body(Body::from(bytes))
        .map_err(|e| Error::unexpected("failed to build the response").with_source(e))
}

fn is_hop_by_hop(name: &HeaderName) -> bool {
    HOP_BY_HOP.contains(&name.as_str())
}
