//! What one invocation knows about itself: its request id, its platform, its deadline, and (on
//! FC) the STS credentials the platform handed it.

use std::fmt;
use std::sync::{Arc, PoisonError, RwLock};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use floe_core::Secret;

use crate::metrics::Metrics;

/// Which platform runs the function.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Platform {
    /// AWS Lambda: `AWS_LAMBDA_RUNTIME_API` is set; events come from the Runtime API.
    Lambda,
    /// Alibaba Function Compute 3.0, custom runtime: an HTTP server on `FC_SERVER_PORT`.
    Fc,
}

impl Platform {
    /// Lambda when `AWS_LAMBDA_RUNTIME_API` is set, else FC (its server also serves local runs).
    pub fn from_env() -> Self {
        if std::env::var_os("AWS_LAMBDA_RUNTIME_API").is_some_and(|v| !v.is_empty()) {
            Platform::Lambda
        } else {
            Platform::Fc
        }
    }

    /// `lambda` / `fc`, for logs and metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            Platform::Lambda => "lambda",
            Platform::Fc => "fc",
        }
    }
}

/// When the platform ends the invocation. Handlers stop pulling new work well before it
/// ([`Deadline::with_margin`]) so that what they started finishes and state stays consistent.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Deadline(Instant);

impl Deadline {
    /// A deadline at `at`.
    pub fn at(at: Instant) -> Self {
        Deadline(at)
    }

    /// A deadline `d` from now.
    pub fn after(d: Duration) -> Self {
        Deadline(Instant::now() + d)
    }

    /// From Lambda's `Lambda-Runtime-Deadline-Ms` (milliseconds since the Unix epoch).
    pub fn from_epoch_ms(deadline_ms: u64) -> Self {
        let now_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis() as u64)
            .unwrap_or(0);
        Deadline::after(Duration::from_millis(deadline_ms.saturating_sub(now_ms)))
    }

    /// The instant itself (for APIs that take an `Instant`).
    pub fn instant(self) -> Instant {
        self.0
    }

    /// Time left (zero once passed).
    pub fn remaining(self) -> Duration {
        self.0.saturating_duration_since(Instant::now())
    }

    /// Whether at least `d` is left.
    pub fn has(self, d: Duration) -> bool {
        self.remaining() >= d
    }

    /// The deadline `margin` earlier: when a handler should stop starting new work.
    pub fn with_margin(self, margin: Duration) -> Self {
        Deadline(self.0.checked_sub(margin).unwrap_or_else(Instant::now))
    }
}

/// Temporary credentials FC passes with every request (`x-fc-access-key-id`,
/// `x-fc-access-key-secret`, `x-fc-security-token`): the function's role, refreshed by FC.
#[derive(Clone, PartialEq, Eq)]
pub struct StsCredentials {
    /// The AccessKey id (not secret, but kept out of logs anyway).
    pub access_key_id: String,
    /// The AccessKey secret.
    pub access_key_secret: Secret,
    /// The STS security token.
    pub security_token: Secret,
}

impl fmt::Debug for StsCredentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StsCredentials")
            .field("access_key_id", &"***")
            .field("access_key_secret", &self.access_key_secret)
            .field("security_token", &self.security_token)
            .finish()
    }
}

/// The latest credentials seen on any request, shared with long-lived clients built at start
/// (an object store or MaxCompute client reads them before each call). FC rotates its STS
/// credentials; the adapter stores each request's before the handler runs.
#[derive(Clone, Debug, Default)]
pub struct SharedCredentials(Arc<RwLock<Option<StsCredentials>>>);

impl SharedCredentials {
    /// The latest credentials, if the platform has given any.
    pub fn get(&self) -> Option<StsCredentials> {
        self.0
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Replace them (the adapters call this).
    pub fn set(&self, creds: StsCredentials) {
        *self.0.write().unwrap_or_else(PoisonError::into_inner) = Some(creds);
    }
}

/// One invocation's context.
#[derive(Debug)]
pub struct Invocation {
    /// The platform's request id (Lambda's `Lambda-Runtime-Aws-Request-Id`, FC's
    /// `x-fc-request-id`); also on every log line of the invocation.
    pub request_id: String,
    /// The platform.
    pub platform: Platform,
    /// The function's name (`ingest`, `poll`, `commit`, `backfill`).
    pub function: &'static str,
    /// When the platform ends the invocation.
    pub deadline: Deadline,
    /// The credentials that came with this request (FC), if any.
    pub credentials: Option<StsCredentials>,
    /// Metrics the handler records; the adapter writes them as one EMF line at the end.
    pub metrics: Arc<Metrics>,
}

impl Invocation {
    /// A context for tests and local runs.
    pub fn new(request_id: impl Into<String>, function: &'static str, deadline: Deadline) -> Self {
        Invocation {
            request_id: request_id.into(),
            platform: Platform::Fc,
            function,
            deadline,
            credentials: None,
            metrics: Arc::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deadline_from_epoch_and_margin() {
        let now_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_millis() as u64;
        let d = Deadline::from_epoch_ms(now_ms + 30_000);
        assert!(d.remaining() > Duration::from_secs(29));
        assert!(d.remaining() <= Duration::from_secs(30));
        let early = d.with_margin(Duration::from_secs(10));
        assert!(early.remaining() <= Duration::from_secs(20));
        assert!(d.has(Duration::from_secs(25)) && !early.has(Duration::from_secs(25)));
        // A deadline in the past, or a margin larger than what is left, is "now".
        assert_eq!(Deadline::from_epoch_ms(1).remaining(), Duration::ZERO);
        assert_eq!(
            d.with_margin(Duration::from_secs(3600)).remaining(),
            Duration::ZERO
        );
    }

    #[test]
    fn credentials_debug_hides_everything() {
        let c = StsCredentials {
            access_key_id: "STS.AKID".into(),
            access_key_secret: Secret::new("very-secret"),
            security_token: Secret::new("token-value"),
        };
        let d = format!("{c:?}");
        assert!(
            !d.contains("STS.AKID") && !d.contains("very-secret") && !d.contains("token-value"),
            "{d}"
        );
        let shared = SharedCredentials::default();
        assert!(shared.get().is_none());
        shared.set(c.clone());
        assert_eq!(shared.get(), Some(c));
    }
}
