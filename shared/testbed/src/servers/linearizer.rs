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
//!
//! [`Linearizer::start_dropping`] makes it a broken front on purpose: it removes the named
//! request headers (say `If-None-Match` and `If-Match`) before passing a request on, the way an
//! old S3-compatible server or a careless proxy ignores conditional writes. Put it before a
//! server that checks no signatures (moto): the headers are signed, so a server that checks
//! SigV4 refuses what is left.
//!
//! [`Linearizer::start_sigv4`] makes it a SigV4 gate before a server that knows only bearer
//! tokens (lakana-server standing in for OSS Tables' or S3 Tables' Iceberg REST endpoint): each
//! request's `Authorization` is checked against the expected keys, service and region (the
//! request signed again from what arrived, with the time it names; the session token compared),
//! then replaced by the bearer token. A request that fails the check gets 403 and never reaches
//! the server. The keys can be changed while it runs ([`Linearizer::set_gate_credentials`]), as
//! an STS token is replaced when it expires.
//!
//! [`Linearizer::set_required_security_token`] makes any front check the STS token of the
//! requests it passes (`x-amz-security-token`, as OSS's S3-compatible endpoint and S3 read it):
//! a request with another token, or none, gets 403 `InvalidToken`, as from a store whose token
//! has expired. `s3s-fs` accepts its fixed keys with any token, so this is what tells an OSS
//! client that still signs with an expired token from one that took the new keys.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use axum::Router;
use axum::body::{Body, to_bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderName, StatusCode};
use axum::response::{IntoResponse, Response};
use floe_core::{Error, ErrorKind, Result};
use floe_signing::Credentials;
use floe_signing::sigv4::{Payload, SigV4Signer};
use tokio::task::JoinHandle;

/// Largest request or response body passed through.
const MAX_BODY_BYTES: usize = 16 << 20;

/// Headers that belong to one connection, not to the request.
const HOP_BY_HOP: [&str; 4] = ["connection", "keep-alive", "transfer-encoding", "upgrade"];

#[derive(Debug)]
struct Shared {
    http: reqwest::Client,
    upstream: String,
    turn: tokio::sync::Mutex<()>,
    dropped: Vec<HeaderName>,
    gate: Option<SigV4Gate>,
    checked: AtomicU64,
    refused: AtomicU64,
    required_token: std::sync::Mutex<Option<String>>,
    token_refused: AtomicU64,
    /// Requests passed to the server, by [`request_kind`].
    served: std::sync::Mutex<std::collections::BTreeMap<String, u64>>,
    /// Time the server took for them (the turn held), in microseconds.
    busy_us: AtomicU64,
    /// A network round trip added to every request before it queues for the server, in
    /// microseconds (see [`Linearizer::set_round_trip`]).
    round_trip_us: AtomicU64,
    /// One request at a time per object instead of overall (see [`Linearizer::set_per_key`]).
    per_key: std::sync::atomic::AtomicBool,
    key_turns: std::sync::Mutex<std::collections::HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
}

/// What a SigV4 gate accepts, and the bearer token it passes on in place of the signature.
#[derive(Clone, Debug)]
pub struct SigV4Gate {
    /// The signing name (`osstables`, `s3tables`, `execute-api`).
    pub service: String,
    /// The signing region.
    pub region: String,
    /// The keys requests must be signed with (and the session token they must carry).
    pub credentials: Arc<std::sync::Mutex<Credentials>>,
    /// `Authorization: Bearer <this>` is what the server behind gets.
    pub bearer: String,
    /// When set, the gate answers `GET /v1/config` itself with this path prefix in its
    /// `overrides`, as the managed catalogs name the prefix of a warehouse (lakana needs its
    /// environment's name there, which a client configured for OSS Tables does not know).
    pub config_prefix: Option<String>,
}

impl SigV4Gate {
    /// A gate for `service` in `region` accepting `credentials`.
    pub fn new(
        service: &str,
        region: &str,
        credentials: Credentials,
        bearer: impl Into<String>,
    ) -> Self {
        SigV4Gate {
            service: service.to_owned(),
            region: region.to_owned(),
            credentials: Arc::new(std::sync::Mutex::new(credentials)),
            bearer: bearer.into(),
            config_prefix: None,
        }
    }

    /// Answer `GET /v1/config` with `prefix` (see [`SigV4Gate::config_prefix`]).
    pub fn with_config_prefix(mut self, prefix: &str) -> Self {
        self.config_prefix = Some(prefix.to_owned());
        self
    }

    /// Why the request's signature is not one made with the expected keys, or `None` when it is.
    fn refusal(&self, parts: &axum::http::request::Parts, body: &[u8]) -> Option<String> {
        let header = |name: &str| parts.headers.get(name).and_then(|v| v.to_str().ok());
        let Some(auth) = header("authorization") else {
            return Some("no authorization header".into());
        };
        let Some(rest) = auth.strip_prefix("AWS4-HMAC-SHA256 ") else {
            return Some(format!("not a sigv4 authorization: {auth}"));
        };
        let field = |name: &str| {
            rest.split(", ")
                .find_map(|f| f.strip_prefix(&format!("{name}=")))
                .unwrap_or_default()
        };
        let expected = self
            .credentials
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        let scope: Vec<&str> = field("Credential").split('/').collect();
        if scope.len() != 5
            || scope[0] != expected.access_key_id()
            || scope[2] != self.region
            || scope[3] != self.service
        {
            return Some(format!(
                "credential scope {} is not {}/…/{}/{}",
                field("Credential"),
                expected.access_key_id(),
                self.region,
                self.service
            ));
        }
        let token = header("x-amz-security-token");
        if token != expected.security_token().map(|t| t.expose()) {
            return Some("the security token is not the current one".into());
        }
        let Some(time) = header("x-amz-date")
            .and_then(|d| chrono::NaiveDateTime::parse_from_str(d, "%Y%m%dT%H%M%SZ").ok())
        else {
            return Some("no x-amz-date".into());
        };
        let time: std::time::SystemTime = time.and_utc().into();
        let signed: Vec<&str> = field("SignedHeaders").split(';').collect();
        let added = ["x-amz-date", "x-amz-security-token", "x-amz-content-sha256"];
        let headers: Vec<(&str, &str)> = signed
            .iter()
            .filter(|h| !added.contains(h))
            .map(|h| (*h, header(h).unwrap_or_default()))
            .collect();
        let host = header("host").unwrap_or_default();
        let path = parts.uri.path_and_query().map_or("/", |p| p.as_str());
        let again = match SigV4Signer::new(&self.service, &self.region).sign(
            &expected,
            parts.method.as_str(),
            &format!("http://{host}{path}"),
            &headers,
            Payload::Bytes(body),
            time,
        ) {
            Ok(a) => a,
            Err(e) => return Some(format!("cannot sign the request again: {e}")),
        };
        (again.authorization() != Some(auth)).then(|| "the signature does not match".into())
    }
}

/// A running front; stops when dropped.
#[derive(Debug)]
pub struct Linearizer {
    endpoint: String,
    task: JoinHandle<()>,
    shared: Arc<Shared>,
    gate: Option<SigV4Gate>,
}

impl Linearizer {
    /// Listen on `127.0.0.1:0` and forward to `upstream` (`http://host:port`). Must be called
    /// inside a tokio runtime.
    pub async fn start(upstream: &str) -> Result<Self> {
        Self::start_dropping(upstream, &[]).await
    }

    /// [`Linearizer::start`], removing the `dropped` request headers (lower-case names) from
    /// every request it passes on.
    pub async fn start_dropping(upstream: &str, dropped: &[&str]) -> Result<Self> {
        Self::start_with(upstream, dropped, None).await
    }

    /// A SigV4 gate before `upstream` (see the module doc).
    pub async fn start_sigv4(upstream: &str, gate: SigV4Gate) -> Result<Self> {
        Self::start_with(upstream, &[], Some(gate)).await
    }

    async fn start_with(upstream: &str, dropped: &[&str], gate: Option<SigV4Gate>) -> Result<Self> {
        let dropped = dropped
            .iter()
            .map(|h| {
                HeaderName::from_bytes(h.as_bytes())
                    .map_err(|e| Error::unexpected(format!("bad header name {h}")).with_source(e))
            })
            .collect::<Result<Vec<_>>>()?;
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
            dropped,
            gate: gate.clone(),
            checked: AtomicU64::new(0),
            refused: AtomicU64::new(0),
            required_token: std::sync::Mutex::new(None),
            token_refused: AtomicU64::new(0),
            served: std::sync::Mutex::new(Default::default()),
            busy_us: AtomicU64::new(0),
            round_trip_us: AtomicU64::new(0),
            per_key: std::sync::atomic::AtomicBool::new(false),
            key_turns: std::sync::Mutex::new(Default::default()),
        });
        let app = Router::new().fallback(forward).with_state(shared.clone());
        let task = tokio::spawn(async move {
            if let Err(e) = axum::serve(listener, app).await {
                tracing::warn!(error = %e, "linearizer stopped");
            }
        });
        Ok(Linearizer {
            endpoint,
            task,
            shared,
            gate,
        })
    }

    /// Requests the gate let through and refused so far.
    pub fn gate_counts(&self) -> (u64, u64) {
        (
            self.shared.checked.load(Ordering::Relaxed),
            self.shared.refused.load(Ordering::Relaxed),
        )
    }

    /// From now on pass only requests whose `x-amz-security-token` is `token` (`None`: stop
    /// checking). See the module doc.
    pub fn set_required_security_token(&self, token: Option<&str>) {
        *self
            .shared
            .required_token
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = token.map(str::to_owned);
    }

    /// Requests refused for their security token so far.
    pub fn token_refusals(&self) -> u64 {
        self.shared.token_refused.load(Ordering::Relaxed)
    }

    /// Accept only `credentials` from now on (an STS token replaced).
    pub fn set_gate_credentials(&self, credentials: Credentials) {
        if let Some(g) = &self.gate {
            *g.credentials.lock().unwrap_or_else(|p| p.into_inner()) = credentials;
        }
    }

    /// Requests passed to the server so far, by kind (method and folder: `PUT
    /// /floe-state/floe/checkpoint/obj`, `GET /floe-src/load`), and the time the server took for them
    /// (one at a time, so this is time the clients waited on the server itself).
    pub fn served(&self) -> (std::collections::BTreeMap<String, u64>, std::time::Duration) {
        (
            self.shared
                .served
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .clone(),
            std::time::Duration::from_micros(self.shared.busy_us.load(Ordering::Relaxed)),
        )
    }

    /// Delay every request by `rtt` before it queues for the server, as the network between a
    /// function and its region's store would: requests in flight at once wait out their round
    /// trips together, while the server behind still takes them one at a time.
    pub fn set_round_trip(&self, rtt: std::time::Duration) {
        self.shared
            .round_trip_us
            .store(rtt.as_micros() as u64, Ordering::Relaxed);
    }

    /// Take requests one at a time per object (path) rather than one at a time overall: each
    /// key stays atomic, as S3 and OSS guarantee, while requests on different keys reach the
    /// server together, as they do a real store. For measuring clients that send requests at
    /// once; the tests keep the default (everything in one order).
    pub fn set_per_key(&self, on: bool) {
        self.shared.per_key.store(on, Ordering::Relaxed);
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

/// A request's method and folder: the path without its last segment, at most four segments
/// (bucket and three folders), the kind of a checkpoint entry (`obj`, `batch`, …), and the
/// names of its query parameters.
fn request_kind(method: &axum::http::Method, uri: &axum::http::Uri) -> String {
    let segments: Vec<&str> = uri.path().trim_start_matches('/').split('/').collect();
    let mut folder = segments[..segments.len().saturating_sub(1).clamp(1, 4)].join("/");
    // floe's checkpoint objects are flat names with escaped slashes (`obj%2F…`): their kind.
    // (`%252F` once the client has escaped the `%` in the URL.)
    if let Some((kind, _)) =
        (segments.last()).and_then(|s| s.split_once("%252F").or_else(|| s.split_once("%2F")))
    {
        folder = format!("{folder}/{kind}");
    }
    let query: Vec<&str> = uri
        .query()
        .unwrap_or_default()
        .split('&')
        .filter(|q| !q.is_empty())
        .map(|q| q.split('=').next().unwrap_or(q))
        .collect();
    if query.is_empty() {
        format!("{method} /{folder}")
    } else {
        format!("{method} /{folder}?{}", query.join("&"))
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
    let required = shared
        .required_token
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .clone();
    if let Some(required) = required {
        let sent = parts
            .headers
            .get("x-amz-security-token")
            .and_then(|v| v.to_str().ok());
        if sent != Some(required.as_str()) {
            shared.token_refused.fetch_add(1, Ordering::Relaxed);
            let body = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>InvalidToken</Code>\
                        <Message>The provided token is malformed or otherwise invalid.</Message></Error>";
            return Ok((
                StatusCode::FORBIDDEN,
                [(axum::http::header::CONTENT_TYPE, "application/xml")],
                body,
            )
                .into_response());
        }
    }
    if let Some(gate) = &shared.gate {
        if let Some(why) = gate.refusal(&parts, &body) {
            shared.refused.fetch_add(1, Ordering::Relaxed);
            return Ok((StatusCode::FORBIDDEN, format!("sigv4 gate: {why}")).into_response());
        }
        shared.checked.fetch_add(1, Ordering::Relaxed);
        if let Some(prefix) = &gate.config_prefix
            && parts.method == axum::http::Method::GET
            && parts.uri.path() == "/v1/config"
        {
            let config = serde_json::json!({"defaults": {}, "overrides": {"prefix": prefix}});
            return Ok((
                [(axum::http::header::CONTENT_TYPE, "application/json")],
                config.to_string(),
            )
                .into_response());
        }
    }
    // The Host header is kept as the client signed it; hyper only adds one when it is missing.
    let mut out = shared.http.request(parts.method.clone(), &url);
    for (name, value) in &parts.headers {
        let signature = shared.gate.is_some()
            && (name == "authorization" || name.as_str().starts_with("x-amz-"));
        if !is_hop_by_hop(name)
            && name.as_str() != "content-length"
            && !shared.dropped.contains(name)
            && !signature
        {
            out = out.header(name, value);
        }
    }
    if let Some(gate) = &shared.gate {
        out = out.bearer_auth(&gate.bearer);
    }
    let rtt = shared.round_trip_us.load(Ordering::Relaxed);
    if rtt > 0 {
        tokio::time::sleep(std::time::Duration::from_micros(rtt)).await;
    }
    let key_turn = shared.per_key.load(Ordering::Relaxed).then(|| {
        (shared.key_turns.lock().unwrap_or_else(|p| p.into_inner()))
            .entry(parts.uri.path().to_owned())
            .or_default()
            .clone()
    });
    let _turn = match &key_turn {
        Some(turn) => (None, Some(turn.lock().await)),
        None => (Some(shared.turn.lock().await), None),
    };
    let started = std::time::Instant::now();
    *shared
        .served
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .entry(request_kind(&parts.method, &parts.uri))
        .or_default() += 1;
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
    shared
        .busy_us
        .fetch_add(started.elapsed().as_micros() as u64, Ordering::Relaxed);
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
