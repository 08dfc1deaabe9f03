//! The HTTP side of the emulator: start/stop, the test-facing API, signature checks, and the
//! dispatch of REST (`/api/…`) and tunnel (`/…`) requests.

use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::Router;
use axum::body::{Body, to_bytes};
use axum::extract::{ConnectInfo, Request, State as AxumState};
use axum::http::{HeaderMap, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use floe_core::{Error, ErrorKind, Result};
use floe_signing::Credentials;
use floe_signing::odps;
use floe_tunnel_codec::Value;
use percent_encoding::percent_decode_str;
use tokio::task::JoinHandle;

use super::faults::{ConnectionKill, Fault, FaultAction, FaultPoint, KillableListener};
use super::model::{State, Table, TableDef, table_key};
use super::{rest, tunnel};

/// Largest request body read (a block).
const MAX_BODY_BYTES: usize = 256 << 20;

/// How the emulator is set up.
#[derive(Clone, Debug)]
pub struct MaxComputeEmulatorConfig {
    /// The keys it accepts (with an STS token, every request must send it).
    pub credentials: Credentials,
    /// Buckets of every upsert session; default 4.
    pub upsert_buckets: u32,
    /// Hasher upsert sessions name (`default` or `legacy`); default `default`.
    pub upsert_hasher: String,
    /// Reloads an upsert session answers `COMMITTING` after its commit; default 1.
    pub upsert_commit_polls: u32,
    /// Status reads an SQL instance answers `Running`; default 1.
    pub sql_running_polls: u32,
    /// Partitions per listing page; default 1000.
    pub partition_page_size: usize,
    /// Upload session lifetime; default 24 h.
    pub upload_lifetime: Duration,
}

impl MaxComputeEmulatorConfig {
    /// Defaults, accepting `credentials`.
    pub fn new(credentials: Credentials) -> Self {
        MaxComputeEmulatorConfig {
            credentials,
            upsert_buckets: 4,
            upsert_hasher: "default".into(),
            upsert_commit_polls: 1,
            sql_running_polls: 1,
            partition_page_size: 1000,
            upload_lifetime: Duration::from_secs(24 * 3600),
        }
    }
}

/// One request as received (for assertions).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordedRequest {
    /// HTTP method.
    pub method: String,
    /// Path and query as received.
    pub target: String,
    /// The status answered (0 when the connection was dropped).
    pub status: u16,
    /// The `Content-Encoding` sent, if any.
    pub content_encoding: Option<String>,
}

pub(crate) struct Shared {
    pub config: MaxComputeEmulatorConfig,
    /// The keys accepted now: `config.credentials` until [`MaxComputeEmulator::set_credentials`].
    credentials: Mutex<Credentials>,
    pub host: String,
    state: Mutex<State>,
    requests: Mutex<Vec<RecordedRequest>>,
    clock_offset_ms: AtomicI64,
}

impl Shared {
    pub fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub fn now_ms(&self) -> i64 {
        let real = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
            .unwrap_or(0);
        real.saturating_add(self.clock_offset_ms.load(Ordering::SeqCst))
    }

    /// Take the first armed fault matching `point`.
    pub fn take_fault(&self, point: FaultPoint) -> Option<FaultAction> {
        let mut st = self.lock();
        let i = st.faults.iter().position(|f| f.point.matches(point))?;
        Some(st.faults.remove(i).action)
    }
}

/// A running emulator; stops when dropped.
pub struct MaxComputeEmulator {
    base: String,
    shared: Arc<Shared>,
    task: JoinHandle<()>,
}

impl std::fmt::Debug for MaxComputeEmulator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MaxComputeEmulator")
            .field("base", &self.base)
            .finish_non_exhaustive()
    }
}

fn not_found(what: String) -> Error {
    Error::new(ErrorKind::NotFound, what)
}

impl MaxComputeEmulator {
    /// Bind `127.0.0.1:0` and serve until dropped. Must be called inside a tokio runtime.
    pub async fn start(config: MaxComputeEmulatorConfig) -> Result<Self> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .map_err(|e| Error::from(e).while_doing("failed to bind the maxcompute emulator"))?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared {
            credentials: Mutex::new(config.credentials.clone()),
            config,
            host: addr.to_string(),
            state: Mutex::new(State::default()),
            requests: Mutex::new(Vec::new()),
            clock_offset_ms: AtomicI64::new(0),
        });
        let app = Router::new()
            .fallback(handle)
            .with_state(shared.clone())
            .into_make_service_with_connect_info::<ConnectionKill>();
        let task = tokio::spawn(async move {
            if let Err(e) = axum::serve(KillableListener(listener), app).await {
                tracing::warn!(error = %e, "maxcompute emulator stopped");
            }
        });
        Ok(MaxComputeEmulator {
            base: format!("http://{addr}"),
            shared,
            task,
        })
    }

    /// Accept only `credentials` from now on, as MaxCompute does once an STS token has expired
    /// and the role's keys were issued again: a request signed with the old keys or sending the
    /// old `authorization-sts-token` is refused with 403.
    pub fn set_credentials(&self, credentials: Credentials) {
        *self
            .shared
            .credentials
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = credentials;
    }

    /// The REST endpoint: `http://127.0.0.1:<port>/api`.
    pub fn endpoint(&self) -> String {
        format!("{}/api", self.base)
    }

    /// The tunnel endpoint (also what `GET /projects/<p>/tunnel?service` names).
    pub fn tunnel_endpoint(&self) -> String {
        self.base.clone()
    }

    /// Create a table directly (replacing one of the same name).
    pub fn create_table(&self, def: TableDef) {
        self.shared.lock().tables.insert(def.key(), Table::new(def));
    }

    /// Whether `project.table` (or `project.schema.table`) exists.
    pub fn table_exists(&self, table: &str) -> bool {
        self.shared.lock().tables.contains_key(&parse_name(table))
    }

    /// The definition of a table.
    pub fn table(&self, table: &str) -> Option<TableDef> {
        self.shared
            .lock()
            .tables
            .get(&parse_name(table))
            .map(|t| t.def.clone())
    }

    /// The partitions of a table (`ds=1,hh=2` form), sorted.
    pub fn partitions(&self, table: &str) -> Result<Vec<String>> {
        let st = self.shared.lock();
        let t = st
            .tables
            .get(&parse_name(table))
            .ok_or_else(|| not_found(format!("emulator has no table {table}")))?;
        Ok(t.partitions
            .keys()
            .filter(|k| !k.is_empty())
            .cloned()
            .collect())
    }

    /// The rows of a table: of one partition (any spec form), or of all partitions in order.
    pub fn rows(&self, table: &str, partition: Option<&str>) -> Result<Vec<Vec<Value>>> {
        let st = self.shared.lock();
        let t = st
            .tables
            .get(&parse_name(table))
            .ok_or_else(|| not_found(format!("emulator has no table {table}")))?;
        match partition {
            None => Ok(t.partitions.values().flatten().cloned().collect()),
            Some(spec) => {
                let key = t.partition_key(spec).map_err(Error::invalid_input)?;
                t.partitions
                    .get(&key)
                    .cloned()
                    .ok_or_else(|| not_found(format!("{table} has no partition {spec}")))
            }
        }
    }

    /// Add rows to a table (or partition, created if missing), as if committed.
    pub fn insert_rows(
        &self,
        table: &str,
        partition: Option<&str>,
        rows: Vec<Vec<Value>>,
    ) -> Result<()> {
        let mut st = self.shared.lock();
        let t = st
            .tables
            .get_mut(&parse_name(table))
            .ok_or_else(|| not_found(format!("emulator has no table {table}")))?;
        let key = match partition {
            Some(p) => t.partition_key(p).map_err(Error::invalid_input)?,
            None => String::new(),
        };
        t.partitions.entry(key).or_default().extend(rows);
        Ok(())
    }

    /// Every SQL statement run so far, in order.
    pub fn sql_log(&self) -> Vec<String> {
        self.shared.lock().sql_log.clone()
    }

    /// Every request received so far.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.shared
            .requests
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Arm a one-shot fault.
    pub fn inject(&self, point: FaultPoint, action: FaultAction) {
        self.shared.lock().faults.push(Fault { point, action });
    }

    /// Move the emulator's clock forward (sessions expire without waiting).
    pub fn advance_clock(&self, by: Duration) {
        let ms = i64::try_from(by.as_millis()).unwrap_or(i64::MAX);
        self.shared.clock_offset_ms.fetch_add(ms, Ordering::SeqCst);
    }

    /// Forget every upload and upsert session, committed or not, as the service does once it
    /// has purged them: reloading one is answered 404.
    pub fn forget_sessions(&self) {
        let mut st = self.shared.lock();
        st.uploads.clear();
        st.upserts.clear();
    }

    /// The status of an upload session (`NORMAL`, `CLOSED`, `EXPIRED`…).
    pub fn upload_status(&self, id: &str) -> Option<String> {
        let now = self.shared.now_ms();
        let mut st = self.shared.lock();
        let life =
            i64::try_from(self.shared.config.upload_lifetime.as_millis()).unwrap_or(i64::MAX);
        st.uploads.get_mut(id).map(|u| {
            tunnel::expire_upload(u, now, life);
            u.status.to_owned()
        })
    }

    /// Send bucket `bucket` of upsert session `id` to another worker: the next write to the old
    /// one is answered 308 with the new address.
    pub fn move_upsert_bucket(&self, id: &str, bucket: usize, worker: &str) -> Result<()> {
        let mut st = self.shared.lock();
        let u = st
            .upserts
            .get_mut(id)
            .ok_or_else(|| not_found(format!("emulator has no upsert session {id}")))?;
        let route = u
            .routes
            .get_mut(bucket)
            .ok_or_else(|| Error::invalid_input(format!("session {id} has no bucket {bucket}")))?;
        route.1 = worker.to_owned();
        Ok(())
    }
}

impl Drop for MaxComputeEmulator {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// `p.t` or `p.s.t` to a table key.
fn parse_name(name: &str) -> String {
    let parts: Vec<&str> = name.split('.').collect();
    match parts.as_slice() {
        [p, t] => table_key(p, None, t),
        [p, s, t] => table_key(p, Some(s), t),
        _ => table_key("", None, name),
    }
}

/// What a handler answers.
pub(crate) struct Reply {
    pub status: StatusCode,
    pub content_type: &'static str,
    pub headers: Vec<(&'static str, String)>,
    pub body: Vec<u8>,
    /// Drop the connection instead of answering.
    pub drop_connection: bool,
}

impl Reply {
    pub fn new(status: StatusCode, content_type: &'static str, body: impl Into<Vec<u8>>) -> Self {
        Reply {
            status,
            content_type,
            headers: Vec::new(),
            body: body.into(),
            drop_connection: false,
        }
    }

    pub fn json(status: StatusCode, v: &serde_json::Value) -> Self {
        Reply::new(status, "application/json", v.to_string())
    }

    pub fn xml(status: StatusCode, body: String) -> Self {
        Reply::new(status, "application/xml", body)
    }

    pub fn empty(status: StatusCode) -> Self {
        Reply::new(status, "text/plain", Vec::new())
    }

    pub fn dropped() -> Self {
        Reply {
            drop_connection: true,
            ..Reply::empty(StatusCode::INTERNAL_SERVER_ERROR)
        }
    }

    pub fn with_header(mut self, k: &'static str, v: String) -> Self {
        self.headers.push((k, v));
        self
    }
}

/// A REST error (XML).
pub(crate) fn rest_error(status: StatusCode, code: &str, message: &str) -> Reply {
    Reply::xml(
        status,
        format!(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>{}</Code><Message>{}</Message><RequestId>emulator</RequestId><HostId>localhost</HostId></Error>",
            xml_text(code),
            xml_text(message)
        ),
    )
}

/// A tunnel error (JSON).
pub(crate) fn tunnel_error(status: StatusCode, code: &str, message: &str) -> Reply {
    Reply::json(
        status,
        &serde_json::json!({"Code": code, "Message": message, "RequestId": "emulator"}),
    )
}

pub(crate) fn xml_text(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// A parsed request for the handlers.
pub(crate) struct Incoming {
    pub method: Method,
    /// Path segments after `/api` (REST) or `/` (tunnel), decoded.
    pub segments: Vec<String>,
    pub params: HashMap<String, String>,
    pub headers: HeaderMap,
    pub body: Vec<u8>,
}

impl Incoming {
    pub fn param(&self, k: &str) -> Option<&str> {
        self.params.get(k).map(String::as_str)
    }

    pub fn header(&self, k: &str) -> Option<&str> {
        self.headers.get(k).and_then(|v| v.to_str().ok())
    }
}

fn decode(s: &str) -> String {
    percent_decode_str(&s.replace('+', " "))
        .decode_utf8_lossy()
        .into_owned()
}

async fn handle(AxumState(sh): AxumState<Arc<Shared>>, req: Request) -> Response {
    let kill = req
        .extensions()
        .get::<ConnectInfo<ConnectionKill>>()
        .map(|c| c.0.clone());
    let method = req.method().clone();
    let target = req
        .uri()
        .path_and_query()
        .map(|p| p.as_str().to_owned())
        .unwrap_or_else(|| "/".into());
    let headers = req.headers().clone();
    let content_encoding = headers
        .get("content-encoding")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let body = to_bytes(req.into_body(), MAX_BODY_BYTES).await;

    let reply = match body {
        Err(_) => rest_error(
            StatusCode::BAD_REQUEST,
            "InvalidArgument",
            "the request body could not be read",
        ),
        Ok(body) => dispatch(&sh, &method, &target, headers, body.to_vec()),
    };
    let status = if reply.drop_connection {
        0
    } else {
        reply.status.as_u16()
    };
    sh.requests
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .push(RecordedRequest {
            method: method.to_string(),
            target,
            status,
            content_encoding,
        });
    if reply.drop_connection
        && let Some(k) = kill
    {
        k.kill();
    }
    let mut resp = (reply.status, Body::from(reply.body)).into_response();
    let h = resp.headers_mut();
    if let Ok(v) = reply.content_type.parse() {
        h.insert("content-type", v);
    }
    h.insert(
        "x-odps-request-id",
        axum::http::HeaderValue::from_static("emulator"),
    );
    for (k, v) in reply.headers {
        if let Ok(v) = v.parse() {
            h.insert(k, v);
        }
    }
    resp
}

fn dispatch(
    sh: &Shared,
    method: &Method,
    target: &str,
    headers: HeaderMap,
    body: Vec<u8>,
) -> Reply {
    let (is_rest, relative) = match target.strip_prefix("/api") {
        Some(rest) if rest.is_empty() || rest.starts_with('/') || rest.starts_with('?') => {
            (true, rest)
        }
        _ => (false, target),
    };
    let err = if is_rest { rest_error } else { tunnel_error };
    let pairs: Vec<(String, String)> = headers
        .iter()
        .filter_map(|(k, v)| Some((k.as_str().to_owned(), v.to_str().ok()?.to_owned())))
        .collect();
    let hv: Vec<(&str, &str)> = pairs
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    let accepted = sh
        .credentials
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clone();
    if let Err(e) = odps::verify(&accepted, method.as_str(), relative, &hv) {
        tracing::debug!(error = %e, "maxcompute emulator refused a signature");
        return err(
            StatusCode::FORBIDDEN,
            "SignatureNotMatch",
            &format!("the request signature does not match: {}", e.message()),
        );
    }
    let (path, query) = relative.split_once('?').unwrap_or((relative, ""));
    let params = query
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            (decode(k), decode(v))
        })
        .collect();
    let incoming = Incoming {
        method: method.clone(),
        segments: path
            .split('/')
            .filter(|s| !s.is_empty())
            .map(decode)
            .collect(),
        params,
        headers,
        body,
    };
    if is_rest {
        rest::handle(sh, &incoming)
    } else {
        tunnel::handle(sh, &incoming)
    }
}

/// `projects/<p>[/schemas/<s>]/tables/<t>[/rest…]` → (table key, label, rest).
pub(crate) fn table_path(
    segments: &[String],
    curr_schema: Option<&str>,
) -> Option<(String, String, Vec<String>)> {
    match segments {
        [projects, p, tables, t, rest @ ..] if projects == "projects" && tables == "tables" => {
            Some((
                table_key(p, curr_schema, t),
                match curr_schema {
                    Some(s) => format!("{p}.{s}.{t}"),
                    None => format!("{p}.{t}"),
                },
                rest.to_vec(),
            ))
        }
        [projects, p, schemas, s, tables, t, rest @ ..]
            if projects == "projects" && schemas == "schemas" && tables == "tables" =>
        {
            Some((
                table_key(p, Some(s), t),
                format!("{p}.{s}.{t}"),
                rest.to_vec(),
            ))
        }
        _ => None,
    }
}
