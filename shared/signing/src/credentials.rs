//! Access keys for every scheme: an id, a secret and an optional STS / session token; and
//! where a client takes them from before each request ([`CredentialSource`]).
//!
//! A client is built once and lives as long as the process (an FC instance for hours, a
//! `floe run --watch` for days), while the platform's temporary keys are replaced every hour or
//! so. So no client keeps keys: each holds a [`CredentialSource`] and asks it for the
//! [`current`](CredentialSource::current) keys when it signs a request.
//!
//! | source | what [`current`](CredentialSource::current) answers | who uses it |
//! |---|---|---|
//! | [`Static`](CredentialSource::Static) | the keys written in the configuration, always | every client whose keys are configured |
//! | [`Alibaba`](CredentialSource::Alibaba) | the keys of the most recent Function Compute invocation (`x-fc-access-key-id`, `x-fc-access-key-secret`, `x-fc-security-token`, published with [`set_platform_credentials`] by the FC runtime before the handler runs), else the keys read from the environment at start (`ALIBABA_CLOUD_*`, which FC sets once per instance and never updates) | OSS (aws-sdk-s3 through the [`ProvideCredentials`] impl), MNS, MaxCompute, the SigV4 REST catalog of OSS Tables (`rest.signing-name = osstables`), the S3 Tables client on an `acs:` (OSS Tables) warehouse |
//! | `AlibabaChain` (feature `alibaba`) | the latest FC invocation's keys, else the Alibaba credential chain past its environment link (OIDC / RRSA, the CLI and ini profiles, the instance's RAM role, a credentials URI; `crate::alibaba`), refreshed 15 minutes before they expire | the same clients, when neither the configuration nor `ALIBABA_CLOUD_ACCESS_KEY_*` give keys |
//! | [`Aws`](CredentialSource::Aws) | an AWS credentials provider (the default chain: environment, profile, web identity, container credentials, instance metadata), cached until shortly before the keys expire | the SigV4 REST catalog of any other signing name, the S3 Tables client on an AWS warehouse |
//!
//! The aws-sdk clients (S3, SQS) use the default chain through the SDK itself, which refreshes
//! the same way. Keys never leave this module in printable form: `Debug` shows the key id and
//! the kind of source; errors name the source, not its keys.

use std::fmt;
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::{Duration, SystemTime};

use aws_credential_types::provider::{
    ProvideCredentials, SharedCredentialsProvider, future as provider_future,
};
use floe_core::{Error, ErrorKind, Result, Secret};

/// An access key pair plus an optional security (STS / session) token.
///
/// `Debug` prints the id only; the secret and token are [`Secret`]s and print `***`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Credentials {
    access_key_id: String,
    access_key_secret: Secret,
    security_token: Option<Secret>,
}

impl Credentials {
    /// Long-lived keys: an access key id and its secret.
    pub fn new(access_key_id: impl Into<String>, access_key_secret: impl Into<Secret>) -> Self {
        Credentials {
            access_key_id: access_key_id.into(),
            access_key_secret: access_key_secret.into(),
            security_token: None,
        }
    }

    /// The same keys with an STS (Alibaba) or session (AWS) token; an empty token means none.
    pub fn with_security_token(mut self, token: impl Into<Secret>) -> Self {
        let token = token.into();
        self.security_token = (!token.is_empty()).then_some(token);
        self
    }

    /// The access key id (not secret).
    pub fn access_key_id(&self) -> &str {
        &self.access_key_id
    }

    /// The access key secret.
    pub fn access_key_secret(&self) -> &Secret {
        &self.access_key_secret
    }

    /// The security token, if these are temporary credentials.
    pub fn security_token(&self) -> Option<&Secret> {
        self.security_token.as_ref()
    }
}

/// The keys the platform handed the process most recently (Function Compute's per-request
/// keys); `None` until the first invocation, and always outside FC.
static PLATFORM: RwLock<Option<Credentials>> = RwLock::new(None);

/// Publish the keys of the invocation about to run (the FC runtime calls this before the
/// handler). Every [`CredentialSource::Alibaba`] uses them from the next request on.
pub fn set_platform_credentials(credentials: Credentials) {
    *PLATFORM.write().unwrap_or_else(PoisonError::into_inner) = Some(credentials);
}

/// The keys published by [`set_platform_credentials`], if any.
pub fn platform_credentials() -> Option<Credentials> {
    PLATFORM
        .read()
        .unwrap_or_else(PoisonError::into_inner)
        .clone()
}

/// AWS keys are fetched again when they expire within this margin.
pub const AWS_REFRESH_MARGIN: Duration = Duration::from_secs(60);

/// Where a client takes its keys from; asked before every request (see the module doc).
/// Cheap to clone; clones share the cached AWS keys.
#[derive(Clone)]
pub enum CredentialSource {
    /// Keys from the configuration: used as they are.
    Static(Credentials),
    /// Alibaba Cloud's platform keys: the latest FC invocation's, else these (read from the
    /// environment when the client was built).
    Alibaba(Credentials),
    /// An AWS credentials provider (the default chain), cached until shortly before expiry.
    Aws(Arc<AwsCachedProvider>),
    /// The Alibaba Cloud credential chain past its environment link (OIDC, profiles, the
    /// instance's RAM role; see [`crate::alibaba`]): the latest FC invocation's keys, else the
    /// chain's.
    #[cfg(feature = "alibaba")]
    AlibabaChain(Arc<crate::alibaba::AlibabaChain>),
}

/// The provider behind [`CredentialSource::Aws`] and the keys it last gave, with their expiry.
pub struct AwsCachedProvider {
    provider: SharedCredentialsProvider,
    cached: Mutex<Option<(Credentials, Option<SystemTime>)>>,
}

impl CredentialSource {
    /// Keys from the configuration.
    pub fn fixed(credentials: Credentials) -> Self {
        CredentialSource::Static(credentials)
    }

    /// Alibaba Cloud's platform keys, `from_env` (read at start) until FC hands newer ones.
    pub fn alibaba(from_env: Credentials) -> Self {
        CredentialSource::Alibaba(from_env)
    }

    /// Keys from an AWS credentials provider, fetched again [`AWS_REFRESH_MARGIN`] before they
    /// expire (keys without an expiry are kept).
    pub fn aws(provider: SharedCredentialsProvider) -> Self {
        CredentialSource::Aws(Arc::new(AwsCachedProvider {
            provider,
            cached: Mutex::new(None),
        }))
    }

    /// The keys known without asking anyone: the configured ones, or for Alibaba the ones read
    /// at start. `None` for an AWS provider.
    pub fn configured(&self) -> Option<&Credentials> {
        match self {
            CredentialSource::Static(c) | CredentialSource::Alibaba(c) => Some(c),
            CredentialSource::Aws(_) => None,
            #[cfg(feature = "alibaba")]
            CredentialSource::AlibabaChain(_) => None,
        }
    }

    /// The keys to sign the next request with.
    pub async fn current(&self) -> Result<Credentials> {
        match self {
            CredentialSource::Static(c) => Ok(c.clone()),
            CredentialSource::Alibaba(from_env) => {
                Ok(platform_credentials().unwrap_or_else(|| from_env.clone()))
            }
            CredentialSource::Aws(p) => p.current().await,
            #[cfg(feature = "alibaba")]
            CredentialSource::AlibabaChain(chain) => match platform_credentials() {
                Some(c) => Ok(c),
                None => chain.current().await,
            },
        }
    }
}

impl AwsCachedProvider {
    async fn current(&self) -> Result<Credentials> {
        let now = SystemTime::now();
        if let Some((c, expiry)) = &*self.cached.lock().unwrap_or_else(PoisonError::into_inner)
            && expiry.is_none_or(|at| now + AWS_REFRESH_MARGIN < at)
        {
            return Ok(c.clone());
        }
        let fresh = self.provider.provide_credentials().await.map_err(|e| {
            // The provider's own message names the provider and what failed, never the keys.
            Error::new(
                ErrorKind::Auth,
                format!("the AWS credentials chain gave no credentials: {e}"),
            )
        })?;
        let c = Credentials::new(fresh.access_key_id(), fresh.secret_access_key())
            .with_security_token(fresh.session_token().unwrap_or_default());
        *self.cached.lock().unwrap_or_else(PoisonError::into_inner) =
            Some((c.clone(), fresh.expiry()));
        Ok(c)
    }
}

/// Configured and start-up keys compare by value; AWS providers by identity (two clones of one
/// source are equal).
impl PartialEq for CredentialSource {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (CredentialSource::Static(a), CredentialSource::Static(b))
            | (CredentialSource::Alibaba(a), CredentialSource::Alibaba(b)) => a == b,
            (CredentialSource::Aws(a), CredentialSource::Aws(b)) => Arc::ptr_eq(a, b),
            #[cfg(feature = "alibaba")]
            (CredentialSource::AlibabaChain(a), CredentialSource::AlibabaChain(b)) => {
                Arc::ptr_eq(a, b)
            }
            _ => false,
        }
    }
}

impl Eq for CredentialSource {}

impl From<Credentials> for CredentialSource {
    fn from(c: Credentials) -> Self {
        CredentialSource::Static(c)
    }
}

impl fmt::Debug for CredentialSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CredentialSource::Static(c) => f.debug_tuple("Static").field(c).finish(),
            CredentialSource::Alibaba(c) => f.debug_tuple("Alibaba").field(c).finish(),
            CredentialSource::Aws(p) => f.debug_tuple("Aws").field(p).finish(),
            #[cfg(feature = "alibaba")]
            CredentialSource::AlibabaChain(c) => f.debug_tuple("AlibabaChain").field(c).finish(),
        }
    }
}

impl fmt::Debug for AwsCachedProvider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AwsCachedProvider").finish_non_exhaustive()
    }
}

/// So that aws-sdk-s3 on OSS signs with the same keys as every other Alibaba client. Give the
/// SDK no identity cache with it (the source is cheap to ask, and the SDK's cache would keep
/// keys without an expiry for 15 minutes).
impl ProvideCredentials for CredentialSource {
    fn provide_credentials<'a>(&'a self) -> provider_future::ProvideCredentials<'a>
    where
        Self: 'a,
    {
        provider_future::ProvideCredentials::new(async move {
            let c = self.current().await.map_err(|e| {
                aws_credential_types::provider::error::CredentialsError::provider_error(
                    e.to_string(),
                )
            })?;
            Ok(aws_credential_types::Credentials::new(
                c.access_key_id(),
                c.access_key_secret().expose(),
                c.security_token().map(|t| t.expose().to_owned()),
                None,
                "floe",
            ))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_hides_secret_and_token() {
        let c = Credentials::new("AKID", "very-secret").with_security_token("tok-123");
        let d = format!("{c:?}");
        assert!(d.contains("AKID"), "{d}");
        assert!(!d.contains("very-secret") && !d.contains("tok-123"), "{d}");
        assert_eq!(c.security_token().map(Secret::expose), Some("tok-123"));
        assert!(
            Credentials::new("a", "b")
                .with_security_token("")
                .security_token()
                .is_none()
        );
    }

    /// Runs a future that never waits (the providers below answer at once).
    fn ready<F: std::future::Future>(f: F) -> F::Output {
        let mut f = std::pin::pin!(f);
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        match f.as_mut().poll(&mut cx) {
            std::task::Poll::Ready(v) => v,
            std::task::Poll::Pending => panic!("the future waited"),
        }
    }

    /// Hands out `key-1`, `key-2`, … each valid for `lifetime`.
    #[derive(Debug)]
    struct Counting {
        calls: std::sync::atomic::AtomicU32,
        lifetime: Option<Duration>,
    }

    impl ProvideCredentials for Counting {
        fn provide_credentials<'a>(&'a self) -> provider_future::ProvideCredentials<'a>
        where
            Self: 'a,
        {
            let n = self.calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
            provider_future::ProvideCredentials::ready(Ok(aws_credential_types::Credentials::new(
                format!("key-{n}"),
                "secret",
                Some(format!("token-{n}")),
                self.lifetime.map(|l| SystemTime::now() + l),
                "test",
            )))
        }
    }

    #[test]
    fn aws_keys_are_fetched_again_shortly_before_they_expire() {
        let soon = CredentialSource::aws(SharedCredentialsProvider::new(Counting {
            calls: Default::default(),
            lifetime: Some(AWS_REFRESH_MARGIN / 2),
        }));
        let ids: Vec<String> = (0..3)
            .map(|_| ready(soon.current()).unwrap().access_key_id().to_owned())
            .collect();
        assert_eq!(ids, ["key-1", "key-2", "key-3"]);
        let later = CredentialSource::aws(SharedCredentialsProvider::new(Counting {
            calls: Default::default(),
            lifetime: Some(Duration::from_secs(3600)),
        }));
        let shared = later.clone();
        for _ in 0..3 {
            assert_eq!(ready(later.current()).unwrap().access_key_id(), "key-1");
        }
        let c = ready(shared.current()).unwrap();
        assert_eq!(c.security_token().map(Secret::expose), Some("token-1"));
    }

    #[test]
    fn alibaba_keys_follow_the_platform_and_static_keys_do_not() {
        let env = Credentials::new("env-id", "env-secret").with_security_token("T1");
        let platform = CredentialSource::alibaba(env.clone());
        let fixed = CredentialSource::fixed(Credentials::new("cfg-id", "cfg-secret"));
        // Other tests in this binary never publish keys, so the cell is empty until here.
        assert_eq!(ready(platform.current()).unwrap(), env);
        let fc = Credentials::new("STS.new", "new-secret").with_security_token("T2");
        set_platform_credentials(fc.clone());
        assert_eq!(ready(platform.current()).unwrap(), fc);
        assert_eq!(ready(fixed.current()).unwrap().access_key_id(), "cfg-id");
        let d = format!("{platform:?} {fixed:?}");
        assert!(!d.contains("env-secret") && !d.contains("T1"), "{d}");
    }
}
