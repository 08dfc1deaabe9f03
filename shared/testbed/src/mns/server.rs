//! The HTTP side of the emulator: start/stop, the test-facing methods, and request handling.

use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::Router;
use axum::body::{Body, to_bytes};
use axum::extract::{Request, State};
use axum::http::{Method, StatusCode};
use axum::response::{IntoResponse, Response};
use floe_core::{Error, ErrorKind, Result};
use floe_signing::{Credentials, mns as sign};
use percent_encoding::percent_decode_str;
use tokio::sync::Notify;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::queue::{HandleError, Queue};
use super::xml;

/// Largest request body the emulator reads.
const MAX_BODY_BYTES: usize = 1 << 20;

/// How the emulator is set up.
#[derive(Clone, Debug)]
pub struct MnsEmulatorConfig {
    /// The keys it accepts. If they carry a security token, every request must send it in
    /// `security-token`.
    pub credentials: Credentials,
    /// Queues that exist from the start; default none.
    pub queues: Vec<String>,
    /// Every queue's VisibilityTimeout; default 30 s. Milliseconds are honoured.
    pub visibility_timeout: Duration,
    /// Every queue's PollingWaitSeconds (used when a receive names no `waitseconds`);
    /// default 0.
    pub polling_wait: Duration,
}

impl MnsEmulatorConfig {
    /// Defaults, accepting `credentials`.
    pub fn new(credentials: Credentials) -> Self {
        MnsEmulatorConfig {
            credentials,
            queues: Vec::new(),
            visibility_timeout: Duration::from_secs(30),
            polling_wait: Duration::ZERO,
        }
    }

    /// Add a queue.
    pub fn with_queue(mut self, name: impl Into<String>) -> Self {
        self.queues.push(name.into());
        self
    }

    /// Set every queue's visibility timeout.
    pub fn with_visibility_timeout(mut self, timeout: Duration) -> Self {
        self.visibility_timeout = timeout;
        self
    }
}

/// One request as the emulator received it (for assertions).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordedRequest {
    /// HTTP method.
    pub method: String,
    /// Path and query as received.
    pub resource: String,
    /// The `security-token` header, if sent.
    pub security_token: Option<String>,
    /// The status the emulator answered.
    pub status: u16,
}

struct Queues {
    queues: HashMap<String, Queue>,
    next_seq: u64,
    requests: Vec<RecordedRequest>,
}

struct Shared {
    config: MnsEmulatorConfig,
    /// The keys accepted now: `config.credentials` until [`MnsEmulator::set_credentials`].
    credentials: Mutex<Credentials>,
    host_id: String,
    state: Mutex<Queues>,
    /// Woken whenever a message may have become available.
    arrivals: Notify,
    clock_offset_ms: AtomicI64,
    next_request_id: AtomicU64,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Queues> {
        // A panic in one handler must not take the whole emulator down with it.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn now_ms(&self) -> i64 {
        let real = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
            .unwrap_or(0);
        real.saturating_add(self.clock_offset_ms.load(Ordering::SeqCst))
    }

    fn visibility_ms(&self) -> i64 {
        i64::try_from(self.config.visibility_timeout.as_millis()).unwrap_or(i64::MAX)
    }
}

/// A running emulator; stops when dropped.
pub struct MnsEmulator {
    endpoint: String,
    shared: Arc<Shared>,
    task: JoinHandle<()>,
}

impl std::fmt::Debug for MnsEmulator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MnsEmulator")
            .field("endpoint", &self.endpoint)
            .finish_non_exhaustive()
    }
}

impl MnsEmulator {
    /// Bind `127.0.0.1:0` and serve until dropped. Must be called inside a tokio runtime.
    pub async fn start(config: MnsEmulatorConfig) -> Result<Self> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .map_err(|e| Error::from(e).while_doing("failed to bind the mns emulator"))?;
        let addr = listener.local_addr()?;
        let endpoint = format!("http://{addr}");
        let vt = i64::try_from(config.visibility_timeout.as_millis()).unwrap_or(i64::MAX);
        let queues = config
            .queues
            .iter()
            .map(|q| (q.clone(), Queue::new(vt)))
            .collect();
        let shared = Arc::new(Shared {
            credentials: Mutex::new(config.credentials.clone()),
            config,
            host_id: endpoint.clone(),
            state: Mutex::new(Queues {
                queues,
                next_seq: 1,
                requests: Vec::new(),
            }),
            arrivals: Notify::new(),
            clock_offset_ms: AtomicI64::new(0),
            next_request_id: AtomicU64::new(1),
        });
        let app = Router::new().fallback(handle).with_state(shared.clone());
        let task = tokio::spawn(async move {
            if let Err(e) = axum::serve(listener, app).await {
                tracing::warn!(error = %e, "mns emulator stopped");
            }
        });
        Ok(MnsEmulator {
            endpoint,
            shared,
            task,
        })
    }

    /// `http://127.0.0.1:<port>`, to use as the client's endpoint.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// Accept only `credentials` from now on, as MNS does once an STS token has expired and the
    /// role's keys were issued again: a request signed with the old keys or sending the old
    /// `security-token` is refused with 403.
    pub fn set_credentials(&self, credentials: Credentials) {
        *self
            .shared
            .credentials
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = credentials;
    }

    /// Create a queue (no-op if it exists).
    pub fn create_queue(&self, name: &str) {
        let vt = self.shared.visibility_ms();
        self.shared
            .lock()
            .queues
            .entry(name.to_owned())
            .or_insert_with(|| Queue::new(vt));
    }

    /// Enqueue `body` now; returns the message id. Wakes waiting long polls.
    pub fn send_message(&self, queue: &str, body: &str) -> Result<String> {
        let now = self.now_ms();
        self.send_message_at(queue, body, now)
    }

    /// Enqueue `body` with the given `EnqueueTime` (epoch ms); it is visible at once.
    pub fn send_message_at(&self, queue: &str, body: &str, enqueue_time_ms: i64) -> Result<String> {
        let now = self.now_ms();
        let id = {
            let mut st = self.shared.lock();
            let seq = st.next_seq;
            st.next_seq += 1;
            let q = st.queues.get_mut(queue).ok_or_else(|| {
                Error::new(
                    ErrorKind::NotFound,
                    format!("mns emulator has no queue {queue}"),
                )
            })?;
            q.push(seq, body.to_owned(), enqueue_time_ms, now)
        };
        self.shared.arrivals.notify_waiters();
        Ok(id)
    }

    /// Move the emulator's clock forward (visibility timeouts expire without waiting).
    pub fn advance_clock(&self, by: Duration) {
        let ms = i64::try_from(by.as_millis()).unwrap_or(i64::MAX);
        self.shared.clock_offset_ms.fetch_add(ms, Ordering::SeqCst);
        self.shared.arrivals.notify_waiters();
    }

    /// The emulator's current time, epoch ms.
    pub fn now_ms(&self) -> i64 {
        self.shared.now_ms()
    }

    /// Messages in `queue` not yet deleted (visible or not).
    pub fn queue_len(&self, queue: &str) -> usize {
        self.shared.lock().queues.get(queue).map_or(0, Queue::len)
    }

    /// Every request received so far.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.shared.lock().requests.clone()
    }
}

impl Drop for MnsEmulator {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// What a handler answers: status and XML body.
struct Reply {
    status: StatusCode,
    body: String,
}

impl Reply {
    fn ok(status: StatusCode, body: String) -> Self {
        Reply { status, body }
    }
}

fn error_reply(sh: &Shared, rid: &str, status: StatusCode, code: &str, message: &str) -> Reply {
    Reply {
        status,
        body: xml::error(code, message, rid, &sh.host_id),
    }
}

async fn handle(State(sh): State<Arc<Shared>>, req: Request) -> Response {
    let rid = format!(
        "5F290C926D4728{:010X}",
        sh.next_request_id.fetch_add(1, Ordering::SeqCst)
    );
    let method = req.method().clone();
    let resource = req
        .uri()
        .path_and_query()
        .map(|p| p.as_str().to_owned())
        .unwrap_or_else(|| "/".into());
    let headers: Vec<(String, String)> = req
        .headers()
        .iter()
        .filter_map(|(k, v)| Some((k.as_str().to_owned(), v.to_str().ok()?.to_owned())))
        .collect();
    let token = headers
        .iter()
        .find(|(k, _)| k == sign::SECURITY_TOKEN_HEADER)
        .map(|(_, v)| v.clone());
    let body = to_bytes(req.into_body(), MAX_BODY_BYTES).await.ok();

    let reply = match body {
        None => error_reply(
            &sh,
            &rid,
            StatusCode::BAD_REQUEST,
            "InvalidArgument",
            "the request body could not be read",
        ),
        Some(body) => {
            let hv: Vec<(&str, &str)> = headers
                .iter()
                .map(|(k, v)| (k.as_str(), v.as_str()))
                .collect();
            match authenticate(&sh, &rid, &method, &resource, &hv, token.as_deref(), &body) {
                Some(refusal) => refusal,
                None => route(&sh, &rid, &method, &resource, &body).await,
            }
        }
    };
    sh.lock().requests.push(RecordedRequest {
        method: method.to_string(),
        resource,
        security_token: token,
        status: reply.status.as_u16(),
    });
    (
        reply.status,
        [
            ("x-mns-request-id", rid),
            ("content-type", "text/xml;charset=utf-8".to_owned()),
        ],
        Body::from(reply.body),
    )
        .into_response()
}

/// `Some(refusal)` when the request is not properly signed.
fn authenticate(
    sh: &Shared,
    rid: &str,
    method: &Method,
    resource: &str,
    headers: &[(&str, &str)],
    token: Option<&str>,
    body: &[u8],
) -> Option<Reply> {
    let creds = &sh
        .credentials
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clone();
    let auth = headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case("authorization"))
        .and_then(|(_, v)| sign::parse_authorization(v));
    if let Some((id, _)) = auth
        && id != creds.access_key_id()
    {
        return Some(error_reply(
            sh,
            rid,
            StatusCode::FORBIDDEN,
            "InvalidAccessKeyId",
            "the access key id you provided does not exist",
        ));
    }
    if let Err(e) = sign::verify(creds, method.as_str(), resource, headers) {
        tracing::debug!(error = %e, "mns emulator refused a signature");
        return Some(error_reply(
            sh,
            rid,
            StatusCode::FORBIDDEN,
            "SignatureDoesNotMatch",
            "the request signature we calculated does not match the signature you provided",
        ));
    }
    if let Some(want) = creds.security_token()
        && token != Some(want.expose())
    {
        return Some(error_reply(
            sh,
            rid,
            StatusCode::FORBIDDEN,
            "AccessDenied",
            "the security token is missing or does not match",
        ));
    }
    let md5 = headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case("content-md5"))
        .map(|(_, v)| *v);
    if let Some(md5) = md5
        && md5 != sign::content_md5(body)
    {
        return Some(error_reply(
            sh,
            rid,
            StatusCode::BAD_REQUEST,
            "InvalidArgument",
            "content-md5 does not match the body",
        ));
    }
    None
}

async fn route(sh: &Shared, rid: &str, method: &Method, resource: &str, body: &[u8]) -> Reply {
    let (path, query) = resource.split_once('?').unwrap_or((resource, ""));
    let params: HashMap<String, String> = query
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            // Percent-decode only: receipt handles keep their `+`.
            (decode(k), decode(v))
        })
        .collect();
    let parts: Vec<&str> = path.split('/').collect();
    let queue = match parts.as_slice() {
        ["", "queues", q, "messages"] => *q,
        ["", "queues", q] if *method == Method::GET => return queue_attributes(sh, rid, q),
        _ => {
            return error_reply(
                sh,
                rid,
                StatusCode::BAD_REQUEST,
                "InvalidArgument",
                "the emulator serves only /queues/<queue>/messages",
            );
        }
    };
    if !sh.lock().queues.contains_key(queue) {
        return error_reply(
            sh,
            rid,
            StatusCode::NOT_FOUND,
            "QueueNotExist",
            "the queue name you provided does not exist",
        );
    }
    match *method {
        Method::GET => receive(sh, rid, queue, &params).await,
        Method::DELETE => match params.get("ReceiptHandle") {
            Some(h) => delete_one(sh, rid, queue, h),
            None => delete_batch(sh, rid, queue, body),
        },
        Method::PUT => change_visibility(sh, rid, queue, &params),
        _ => error_reply(
            sh,
            rid,
            StatusCode::METHOD_NOT_ALLOWED,
            "InvalidArgument",
            "method not supported by the emulator",
        ),
    }
}

/// GetQueueAttributes: the queue's name and message counts (what floe's start-up check reads is
/// only whether the answer is 200 or `QueueNotExist`).
fn queue_attributes(sh: &Shared, rid: &str, queue: &str) -> Reply {
    let active = sh.lock().queues.get(queue).map(Queue::len);
    let Some(active) = active else {
        return error_reply(
            sh,
            rid,
            StatusCode::NOT_FOUND,
            "QueueNotExist",
            "the queue name you provided does not exist",
        );
    };
    let body = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Queue xmlns=\"http://mns.aliyuncs.com/doc/v1/\">\
         <QueueName>{queue}</QueueName><ActiveMessages>{active}</ActiveMessages>\
         <VisibilityTimeout>{}</VisibilityTimeout></Queue>",
        sh.config.visibility_timeout.as_secs()
    );
    Reply::ok(StatusCode::OK, body)
}

fn decode(s: &str) -> String {
    percent_decode_str(s).decode_utf8_lossy().into_owned()
}

fn int_param(
    params: &HashMap<String, String>,
    name: &str,
    range: std::ops::RangeInclusive<i64>,
) -> Result<Option<i64>, String> {
    match params.get(name) {
        None => Ok(None),
        Some(v) => match v.parse::<i64>() {
            Ok(n) if range.contains(&n) => Ok(Some(n)),
            _ => Err(format!(
                "the value of {name} should be between {} and {}, got `{v}`",
                range.start(),
                range.end()
            )),
        },
    }
}

async fn receive(sh: &Shared, rid: &str, queue: &str, params: &HashMap<String, String>) -> Reply {
    let batch = match int_param(params, "numOfMessages", 1..=16) {
        Ok(n) => n,
        Err(m) => return error_reply(sh, rid, StatusCode::BAD_REQUEST, "InvalidArgument", &m),
    };
    let wait = match int_param(params, "waitseconds", 0..=30) {
        Ok(Some(w)) => Duration::from_secs(w.unsigned_abs()),
        Ok(None) => sh.config.polling_wait,
        Err(m) => return error_reply(sh, rid, StatusCode::BAD_REQUEST, "InvalidArgument", &m),
    };
    let n = batch.map_or(1, |b| usize::try_from(b).unwrap_or(1));
    let deadline = Instant::now() + wait;
    loop {
        // Register for wake-ups before looking, so an arrival in between is not missed.
        let arrival = sh.arrivals.notified();
        tokio::pin!(arrival);
        arrival.as_mut().enable();
        let now = sh.now_ms();
        let (got, next_visible) = {
            let mut st = sh.lock();
            match st.queues.get_mut(queue) {
                Some(q) => {
                    let got = q.receive(n, now);
                    let next = q.next_visible_after(now);
                    (got, next)
                }
                None => (Vec::new(), None),
            }
        };
        if !got.is_empty() {
            let body = if batch.is_some() {
                xml::messages(&got)
            } else {
                xml::message(&got[0])
            };
            return Reply::ok(StatusCode::OK, body);
        }
        let t = Instant::now();
        if t >= deadline {
            return error_reply(
                sh,
                rid,
                StatusCode::NOT_FOUND,
                "MessageNotExist",
                "message not exist",
            );
        }
        let mut wake = deadline;
        if let Some(next) = next_visible {
            let ms = u64::try_from(next - now).unwrap_or(0);
            wake = wake.min(t + Duration::from_millis(ms));
        }
        tokio::select! {
            _ = &mut arrival => {}
            _ = tokio::time::sleep_until(wake) => {}
        }
    }
}

fn handle_error(sh: &Shared, rid: &str, e: HandleError) -> Reply {
    match e {
        HandleError::MessageNotExist => error_reply(
            sh,
            rid,
            StatusCode::NOT_FOUND,
            "MessageNotExist",
            "the receipt handle has expired or its message is gone",
        ),
        HandleError::ReceiptHandleError => error_reply(
            sh,
            rid,
            StatusCode::BAD_REQUEST,
            "ReceiptHandleError",
            "the receipt handle you provided is not valid",
        ),
    }
}

fn delete_one(sh: &Shared, rid: &str, queue: &str, handle: &str) -> Reply {
    let now = sh.now_ms();
    let result = match sh.lock().queues.get_mut(queue) {
        Some(q) => q.delete(handle, now),
        None => Err(HandleError::MessageNotExist),
    };
    match result {
        Ok(()) => Reply::ok(StatusCode::NO_CONTENT, String::new()),
        Err(e) => handle_error(sh, rid, e),
    }
}

fn delete_batch(sh: &Shared, rid: &str, queue: &str, body: &[u8]) -> Reply {
    let Some(handles) = xml::receipt_handles(body) else {
        return error_reply(
            sh,
            rid,
            StatusCode::BAD_REQUEST,
            "InvalidArgument",
            "the body is not a ReceiptHandles document",
        );
    };
    if !(1..=16).contains(&handles.len()) {
        return error_reply(
            sh,
            rid,
            StatusCode::BAD_REQUEST,
            "InvalidArgument",
            "the number of receipt handles should be between 1 and 16",
        );
    }
    let now = sh.now_ms();
    let mut failures = Vec::new();
    {
        let mut st = sh.lock();
        for h in handles {
            let r = match st.queues.get_mut(queue) {
                Some(q) => q.delete(&h, now),
                None => Err(HandleError::MessageNotExist),
            };
            match r {
                Ok(()) => {}
                Err(HandleError::MessageNotExist) => failures.push((
                    "MessageNotExist",
                    "the receipt handle has expired or its message is gone",
                    h,
                )),
                Err(HandleError::ReceiptHandleError) => failures.push((
                    "ReceiptHandleError",
                    "the receipt handle you provided is not valid",
                    h,
                )),
            }
        }
    }
    if failures.is_empty() {
        Reply::ok(StatusCode::NO_CONTENT, String::new())
    } else {
        Reply::ok(StatusCode::NOT_FOUND, xml::batch_delete_errors(&failures))
    }
}

fn change_visibility(
    sh: &Shared,
    rid: &str,
    queue: &str,
    params: &HashMap<String, String>,
) -> Reply {
    let Some(handle) = params.get("ReceiptHandle") else {
        return error_reply(
            sh,
            rid,
            StatusCode::BAD_REQUEST,
            "InvalidArgument",
            "ReceiptHandle is required",
        );
    };
    let timeout = match int_param(params, "VisibilityTimeout", 0..=43_200) {
        Ok(Some(t)) => t,
        Ok(None) => {
            return error_reply(
                sh,
                rid,
                StatusCode::BAD_REQUEST,
                "InvalidArgument",
                "VisibilityTimeout is required",
            );
        }
        Err(m) => return error_reply(sh, rid, StatusCode::BAD_REQUEST, "InvalidArgument", &m),
    };
    let now = sh.now_ms();
    let result = match sh.lock().queues.get_mut(queue) {
        Some(q) => q.change_visibility(handle, timeout * 1000, now),
        None => Err(HandleError::MessageNotExist),
    };
    match result {
        Ok((new, until)) => {
            // A timeout of 0 makes the message visible at once.
            sh.arrivals.notify_waiters();
            Reply::ok(StatusCode::OK, xml::change_visibility(&new, until))
        }
        Err(e) => handle_error(sh, rid, e),
    }
}
