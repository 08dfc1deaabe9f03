//! A container credentials endpoint, as ECS and EKS Pod Identity serve one: `GET` with
//! `Authorization: <AWS_CONTAINER_AUTHORIZATION_TOKEN>` answers
//! `{"AccessKeyId","SecretAccessKey","Token","Expiration"}`. A process finds it through
//! `AWS_CONTAINER_CREDENTIALS_FULL_URI` (`http://127.0.0.1:<port>/credentials`, loopback being
//! allowed over plain HTTP). The test decides which keys it hands out and for how long
//! ([`ContainerCredentials::set`]), and counts the requests, so a client that fetches again
//! before the keys expire can be told from one that kept them.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime};

use axum::Router;
use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use floe_core::{Error, Result};
use floe_signing::Credentials;
use tokio::task::JoinHandle;

/// The path the endpoint answers on.
pub const CONTAINER_CREDENTIALS_PATH: &str = "/credentials";

struct Shared {
    authorization: String,
    current: Mutex<(Credentials, SystemTime)>,
    hits: AtomicU64,
}

/// A running endpoint; stops when dropped.
pub struct ContainerCredentials {
    uri: String,
    shared: Arc<Shared>,
    task: JoinHandle<()>,
}

impl std::fmt::Debug for ContainerCredentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ContainerCredentials")
            .field("uri", &self.uri)
            .finish_non_exhaustive()
    }
}

impl ContainerCredentials {
    /// Serve `credentials`, valid for `lifetime`, on `127.0.0.1:port` (0: any free port) to
    /// requests carrying `authorization`. Must be called inside a tokio runtime.
    pub async fn start(
        port: u16,
        authorization: &str,
        credentials: Credentials,
        lifetime: Duration,
    ) -> Result<Self> {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
            .await
            .map_err(|e| Error::from(e).while_doing("failed to bind the credentials endpoint"))?;
        let uri = format!(
            "http://{}{CONTAINER_CREDENTIALS_PATH}",
            listener.local_addr()?
        );
        let shared = Arc::new(Shared {
            authorization: authorization.to_owned(),
            current: Mutex::new((credentials, SystemTime::now() + lifetime)),
            hits: AtomicU64::new(0),
        });
        let app = Router::new().fallback(answer).with_state(shared.clone());
        let task = tokio::spawn(async move {
            if let Err(e) = axum::serve(listener, app).await {
                tracing::warn!(error = %e, "credentials endpoint stopped");
            }
        });
        Ok(ContainerCredentials { uri, shared, task })
    }

    /// `AWS_CONTAINER_CREDENTIALS_FULL_URI`.
    pub fn uri(&self) -> &str {
        &self.uri
    }

    /// Hand out `credentials`, valid for `lifetime` from now, from the next request on.
    pub fn set(&self, credentials: Credentials, lifetime: Duration) {
        *self
            .shared
            .current
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = (credentials, SystemTime::now() + lifetime);
    }

    /// Requests answered with keys so far.
    pub fn hits(&self) -> u64 {
        self.shared.hits.load(Ordering::SeqCst)
    }
}

impl Drop for ContainerCredentials {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn answer(State(shared): State<Arc<Shared>>, req: Request) -> Response {
    let sent = req
        .headers()
        .get("authorization")
        .and_then(|v| v.to_str().ok());
    if req.uri().path() != CONTAINER_CREDENTIALS_PATH {
        return StatusCode::NOT_FOUND.into_response();
    }
    if sent != Some(shared.authorization.as_str()) {
        return (StatusCode::UNAUTHORIZED, "wrong or missing authorization").into_response();
    }
    let (c, expires) = shared
        .current
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clone();
    shared.hits.fetch_add(1, Ordering::SeqCst);
    let expiration = chrono::DateTime::<chrono::Utc>::from(expires)
        .format("%Y-%m-%dT%H:%M:%SZ")
        .to_string();
    let body = serde_json::json!({
        "AccessKeyId": c.access_key_id(),
        "SecretAccessKey": c.access_key_secret().expose(),
        "Token": c.security_token().map(|t| t.expose()).unwrap_or_default(),
        "Expiration": expiration,
    });
    (
        [(axum::http::header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response()
}
