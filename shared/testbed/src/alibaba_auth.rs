//! A stand-in for the endpoints the Alibaba credential chain calls, on one HTTP server:
//! STS (`AssumeRoleWithOIDC`, anonymous; `AssumeRole`, whose RPC signature it checks), the ECS
//! metadata service (IMDSv2 tokens, the role, its keys) and a credentials URI (`/credentials`).
//!
//! Every answer hands out the next keys of one sequence, [`AlibabaAuthStandIn::keys`]`(n)`, so a
//! test can give a protocol emulator (MNS, MaxCompute) the keys the chain is about to receive.
//! Keys expire [`AlibabaAuthStandIn::set_lifetime`] after they are issued.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime};

use floe_core::Result;
use floe_signing::{Credentials, rpc};
use percent_encoding::percent_decode_str;

use crate::recorder::{RecordedHttpRequest, RecordingServer, Reply};

/// The role the metadata service says the instance has.
pub const ECS_ROLE: &str = "FloeInstanceRole";
/// The OIDC token the stand-in's STS accepts.
pub const OIDC_TOKEN: &str = "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJmbG9lLXRlc3QifQ.c2lnbmF0dXJl";
/// The IMDSv2 token the metadata service hands out.
const IMDS_TOKEN: &str = "imds-v2-token-1";

struct State {
    issued: AtomicU32,
    lifetime_secs: AtomicU64,
    /// Metadata GETs without a token are refused (an instance with IMDSv1 off).
    token_required: AtomicBool,
    /// Token PUTs are refused (an instance without IMDSv2).
    token_refused: AtomicBool,
    /// Every call answers 503.
    down: AtomicBool,
    /// The long-lived key allowed to call `AssumeRole`.
    caller: Mutex<Credentials>,
}

/// The running stand-in; stops when dropped.
pub struct AlibabaAuthStandIn {
    server: RecordingServer,
    state: Arc<State>,
}

/// The decoded parameters of a request: its query and its form body together.
pub fn params(req: &RecordedHttpRequest) -> BTreeMap<String, String> {
    let decode = |s: &str| {
        percent_decode_str(&s.replace('+', " "))
            .decode_utf8_lossy()
            .into_owned()
    };
    let body = String::from_utf8_lossy(&req.body).into_owned();
    req.query()
        .split('&')
        .chain(body.split('&'))
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            (decode(k), decode(v))
        })
        .collect()
}

fn error(status: u16, code: &str, message: &str) -> Reply {
    Reply::json(
        status,
        &serde_json::json!({"RequestId": "stand-in", "Code": code, "Message": message}),
    )
}

impl AlibabaAuthStandIn {
    /// Start on 127.0.0.1; `caller` may call `AssumeRole`. Keys last an hour until told
    /// otherwise; the metadata service wants a token.
    pub async fn start(caller: Credentials) -> Result<Self> {
        let state = Arc::new(State {
            issued: AtomicU32::new(0),
            lifetime_secs: AtomicU64::new(3600),
            token_required: AtomicBool::new(true),
            token_refused: AtomicBool::new(false),
            down: AtomicBool::new(false),
            caller: Mutex::new(caller),
        });
        let s = state.clone();
        let server = RecordingServer::start(move |req| answer(&s, req)).await?;
        Ok(AlibabaAuthStandIn { server, state })
    }

    /// `http://127.0.0.1:<port>`: STS, the metadata service and the credentials URI's host.
    pub fn endpoint(&self) -> String {
        self.server.endpoint()
    }

    /// The keys of the `n`th answer (from 1).
    pub fn keys(n: u32) -> Credentials {
        Credentials::new(format!("STS.standin-{n}"), format!("standin-secret-{n}"))
            .with_security_token(format!("standin-token-{n}"))
    }

    /// How many keys were handed out.
    pub fn issued(&self) -> u32 {
        self.state.issued.load(Ordering::SeqCst)
    }

    /// Keys issued from now on expire `lifetime` after.
    pub fn set_lifetime(&self, lifetime: Duration) {
        (self.state.lifetime_secs).store(lifetime.as_secs(), Ordering::SeqCst);
    }

    /// Refuse metadata requests without a token (`true`, the default) or not.
    pub fn require_token(&self, on: bool) {
        self.state.token_required.store(on, Ordering::SeqCst);
    }

    /// Refuse to hand out IMDSv2 tokens (an instance that does not have them).
    pub fn refuse_tokens(&self, on: bool) {
        self.state.token_refused.store(on, Ordering::SeqCst);
    }

    /// Answer every request with 503 (`true`) or serve again.
    pub fn set_down(&self, down: bool) {
        self.state.down.store(down, Ordering::SeqCst);
    }

    /// Every request so far.
    pub fn requests(&self) -> Vec<RecordedHttpRequest> {
        self.server.requests()
    }

    /// Forget the requests so far.
    pub fn clear(&self) {
        self.server.clear();
    }
}

fn issue(state: &State) -> serde_json::Value {
    let n = state.issued.fetch_add(1, Ordering::SeqCst) + 1;
    let keys = AlibabaAuthStandIn::keys(n);
    let expires =
        SystemTime::now() + Duration::from_secs(state.lifetime_secs.load(Ordering::SeqCst));
    let expiration = chrono::DateTime::<chrono::Utc>::from(expires)
        .format("%Y-%m-%dT%H:%M:%SZ")
        .to_string();
    serde_json::json!({
        "AccessKeyId": keys.access_key_id(),
        "AccessKeySecret": keys.access_key_secret().expose(),
        "SecurityToken": keys.security_token().map(|t| t.expose().to_owned()),
        "Expiration": expiration,
    })
}

/// The secret of an access key the stand-in knows: the caller's, or one it issued.
fn secret_of(state: &State, id: &str) -> Option<String> {
    let caller = state.caller.lock().unwrap_or_else(PoisonError::into_inner);
    if id == caller.access_key_id() {
        return Some(caller.access_key_secret().expose().to_owned());
    }
    let n: u32 = id.strip_prefix("STS.standin-")?.parse().ok()?;
    (n <= state.issued.load(Ordering::SeqCst)).then(|| {
        AlibabaAuthStandIn::keys(n)
            .access_key_secret()
            .expose()
            .to_owned()
    })
}

fn answer(state: &State, req: &RecordedHttpRequest) -> Reply {
    if state.down.load(Ordering::SeqCst) {
        return error(503, "ServiceUnavailable", "the stand-in is down");
    }
    let path = req.path();
    if let Some(rest) = path.strip_prefix("/latest/") {
        return metadata(state, req, rest);
    }
    match (req.method.as_str(), path) {
        ("GET", "/credentials") => {
            let mut keys = issue(state);
            keys["Code"] = "Success".into();
            Reply::json(200, &keys)
        }
        ("POST", "/") => sts(state, req),
        _ => error(404, "NotFound", "no such endpoint"),
    }
}

fn sts(state: &State, req: &RecordedHttpRequest) -> Reply {
    let p = params(req);
    let get = |k: &str| p.get(k).map(String::as_str).unwrap_or("");
    for k in ["Version", "Action", "Format", "Timestamp"] {
        if !req.query().contains(&format!("{k}=")) {
            return error(400, "MissingParameter", &format!("{k} is not in the query"));
        }
    }
    if get("Version") != "2015-04-01" || get("Format") != "JSON" {
        return error(400, "InvalidParameter", "Version or Format");
    }
    let duration: u64 = get("DurationSeconds").parse().unwrap_or(0);
    if duration < 900 || get("RoleArn").is_empty() || get("RoleSessionName").is_empty() {
        return error(
            400,
            "InvalidParameter",
            "DurationSeconds, RoleArn or RoleSessionName",
        );
    }
    match get("Action") {
        "AssumeRoleWithOIDC" => {
            if p.contains_key("AccessKeyId") || p.contains_key("Signature") {
                return error(400, "InvalidParameter", "AssumeRoleWithOIDC is not signed");
            }
            if req.query().contains("OIDCToken") {
                return error(
                    400,
                    "InvalidParameter",
                    "the OIDC token belongs in the body",
                );
            }
            if get("OIDCProviderArn").is_empty() {
                return error(400, "MissingParameter", "OIDCProviderArn");
            }
            if get("OIDCToken") != OIDC_TOKEN {
                return error(
                    400,
                    "AuthenticationFail.OIDCToken.Invalid",
                    "bad OIDC token",
                );
            }
        }
        "AssumeRole" => {
            let Some(secret) = secret_of(state, get("AccessKeyId")) else {
                return error(404, "InvalidAccessKeyId.NotFound", "unknown AccessKeyId");
            };
            if get("SignatureMethod") != "HMAC-SHA1" || get("SignatureVersion") != "1.0" {
                return error(
                    400,
                    "InvalidParameter",
                    "SignatureMethod or SignatureVersion",
                );
            }
            if get("AccessKeyId").starts_with("STS.") && get("SecurityToken").is_empty() {
                return error(400, "MissingSecurityToken", "STS keys need their token");
            }
            let pairs: Vec<(&str, &str)> =
                p.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
            if !rpc::verify(&secret, &req.method, &pairs) {
                return error(400, "SignatureDoesNotMatch", "signature mismatch");
            }
        }
        other => return error(400, "InvalidAction", &format!("unknown action {other}")),
    }
    Reply::json(
        200,
        &serde_json::json!({
            "RequestId": "stand-in",
            "AssumedRoleUser": {"Arn": get("RoleArn"), "AssumedRoleId": "1:stand-in"},
            "Credentials": issue(state),
        }),
    )
}

fn metadata(state: &State, req: &RecordedHttpRequest, rest: &str) -> Reply {
    if rest == "api/token" {
        if req.method != "PUT"
            || req
                .header("x-aliyun-ecs-metadata-token-ttl-seconds")
                .is_none()
            || state.token_refused.load(Ordering::SeqCst)
        {
            return Reply::empty(403);
        }
        return Reply::bytes(200, IMDS_TOKEN.as_bytes().to_vec());
    }
    let token = req.header("x-aliyun-ecs-metadata-token");
    if token.is_some_and(|t| t != IMDS_TOKEN)
        || (token.is_none() && state.token_required.load(Ordering::SeqCst))
    {
        return Reply::empty(401);
    }
    match rest.strip_prefix("meta-data/ram/security-credentials/") {
        Some("") => Reply::bytes(200, ECS_ROLE.as_bytes().to_vec()),
        Some(ECS_ROLE) => {
            let mut keys = issue(state);
            keys["Code"] = "Success".into();
            keys["LastUpdated"] = "2026-12-02T00:00:00Z".into();
            Reply::json(200, &keys)
        }
        _ => Reply::empty(404),
    }
}
