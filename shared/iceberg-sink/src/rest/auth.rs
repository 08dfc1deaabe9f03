//! Request authentication: none, a bearer token, OAuth2 client credentials (fetched once, kept,
//! fetched again shortly before it expires or after a 401), or AWS SigV4 through
//! `floe_signing::sigv4` (also used by the S3 Tables control-plane client).
//!
//! SigV4 signs the request exactly as built: its URL (path and query as they will be sent), its
//! body, and every header already on it (`content-type` and the `header.*` extras); `host` comes
//! from the URL. Headers the HTTP client adds when sending (`accept`) are not signed, which
//! SigV4 allows. With no extras, a GET signs `host;x-amz-date` and a JSON POST
//! `content-type;host;x-amz-date`, as botocore does.

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use floe_core::Secret;
use floe_signing::CredentialSource;
use floe_signing::sigv4::{Payload, SigV4Signer};
use iceberg::{Error, ErrorKind, Result};
use reqwest::header::{AUTHORIZATION, HeaderName, HeaderValue};
use serde::Deserialize;
use tokio::sync::Mutex;

use super::config::AuthConfig;
use super::error::error_detail;

/// Where SigV4 reads the time from; tests pin it to replay vectors.
pub type SigningClock = Arc<dyn Fn() -> SystemTime + Send + Sync>;

/// The clock SigV4 uses unless told otherwise.
pub fn system_clock() -> SigningClock {
    Arc::new(SystemTime::now)
}

/// SigV4 for one signing name and region, applied to `reqwest` requests.
#[derive(Clone)]
pub(crate) struct SigV4Auth {
    signer: SigV4Signer,
    credentials: CredentialSource,
    clock: SigningClock,
}

impl fmt::Debug for SigV4Auth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SigV4Auth")
            .field("service", &self.signer.service())
            .field("region", &self.signer.region())
            .field("credentials", &self.credentials)
            .finish_non_exhaustive()
    }
}

impl SigV4Auth {
    /// Sign as `signing_name` in `region` with the keys `credentials` gives at the time of each
    /// request, at the time `clock` gives.
    pub(crate) fn new(
        signing_name: &str,
        region: &str,
        credentials: CredentialSource,
        clock: SigningClock,
    ) -> Self {
        SigV4Auth {
            signer: SigV4Signer::new(signing_name, region),
            credentials,
            clock,
        }
    }

    /// Add `x-amz-date`, `authorization` (and `x-amz-security-token`) to `req`.
    pub(crate) async fn sign(&self, req: &mut reqwest::Request) -> floe_core::Result<()> {
        let credentials = self.credentials.current().await?;
        let headers = request_headers(req)?;
        let borrowed: Vec<(&str, &str)> = (headers.iter())
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        let body = req.body().and_then(|b| b.as_bytes()).unwrap_or_default();
        let signed = self.signer.sign(
            &credentials,
            req.method().as_str(),
            req.url().as_str(),
            &borrowed,
            Payload::Bytes(body),
            (self.clock)(),
        )?;
        add_headers(req, signed.into_headers())
    }
}

/// The headers of `req` as the signers take them.
fn request_headers(req: &reqwest::Request) -> floe_core::Result<Vec<(String, String)>> {
    let mut headers = Vec::with_capacity(req.headers().len());
    for (name, value) in req.headers() {
        let value = value.to_str().map_err(|_| {
            floe_core::Error::invalid_input(format!(
                "header `{name}` is not ascii and cannot be signed"
            ))
        })?;
        headers.push((name.as_str().to_owned(), value.to_owned()));
    }
    Ok(headers)
}

/// Put the signer's headers on `req`.
fn add_headers(
    req: &mut reqwest::Request,
    headers: Vec<(String, String)>,
) -> floe_core::Result<()> {
    for (name, value) in headers {
        let name = HeaderName::try_from(name.as_str()).map_err(|e| {
            floe_core::Error::unexpected("a signer returned a bad header name").with_source(e)
        })?;
        let value = HeaderValue::try_from(value).map_err(|e| {
            floe_core::Error::unexpected("a signer returned a bad header value").with_source(e)
        })?;
        req.headers_mut().insert(name, value);
    }
    Ok(())
}

/// OSS4-HMAC-SHA256 for OSS Tables' management API (product `osstables`), as ossutil
/// `tables-api` signs: every `x-oss-*` header, `content-type` and `content-md5`; the body is
/// not hashed (`UNSIGNED-PAYLOAD`); the canonical URI is the table bucket's ARN and the path.
#[derive(Clone)]
pub(crate) struct OssTablesAuth {
    signer: floe_signing::oss::OssV4Signer,
    credentials: CredentialSource,
    clock: SigningClock,
}

impl fmt::Debug for OssTablesAuth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OssTablesAuth")
            .field("signer", &self.signer)
            .field("credentials", &self.credentials)
            .finish_non_exhaustive()
    }
}

impl OssTablesAuth {
    /// Sign in `region` with the keys `credentials` gives at each request.
    pub(crate) fn new(region: &str, credentials: CredentialSource, clock: SigningClock) -> Self {
        OssTablesAuth {
            signer: floe_signing::oss::OssV4Signer::tables(region),
            credentials,
            clock,
        }
    }

    /// Add `x-oss-date`, `date`, `x-oss-content-sha256`, the STS token and `authorization` to
    /// `req`, a call about the table bucket `bucket_arn` (none: CreateTableBucket).
    pub(crate) async fn sign(
        &self,
        req: &mut reqwest::Request,
        bucket_arn: Option<&str>,
    ) -> floe_core::Result<()> {
        use floe_signing::oss::{OssRequest, OssResource};
        let credentials = self.credentials.current().await?;
        let headers = request_headers(req)?;
        let borrowed: Vec<(&str, &str)> = (headers.iter())
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        let path = req.url().path().trim_start_matches('/').to_owned();
        let query = req.url().query().unwrap_or("").to_owned();
        let request = OssRequest::new(
            req.method().as_str(),
            OssResource::Tables {
                bucket_arn,
                path: &path,
            },
        )
        .query(&query)
        .headers(&borrowed);
        let signed = self.signer.sign(&credentials, &request, (self.clock)())?;
        add_headers(req, signed.into_headers())
    }
}

/// A token from the OAuth2 endpoint and when to fetch the next one.
struct CachedToken {
    token: Secret,
    refresh_at: Option<Instant>,
}

/// OAuth2 client credentials with a cached token.
pub(crate) struct OAuth2 {
    server_uri: String,
    client_id: Option<String>,
    client_secret: Secret,
    scope: String,
    cached: Mutex<Option<CachedToken>>,
}

#[derive(Deserialize)]
struct TokenResponse {
    access_token: String,
    #[serde(default)]
    expires_in: Option<u64>,
}

impl OAuth2 {
    /// The current token, fetching one first if there is none or it is about to expire.
    async fn token(&self, http: &reqwest::Client) -> Result<Secret> {
        let mut cached = self.cached.lock().await;
        if let Some(c) = cached.as_ref()
            && c.refresh_at.is_none_or(|at| Instant::now() < at)
        {
            return Ok(c.token.clone());
        }
        let fresh = self.fetch(http).await?;
        let token = fresh.token.clone();
        *cached = Some(fresh);
        Ok(token)
    }

    async fn fetch(&self, http: &reqwest::Client) -> Result<CachedToken> {
        let what = format!("failed to get an oauth2 token from {}", self.server_uri);
        let mut form = vec![
            ("grant_type", "client_credentials"),
            ("client_secret", self.client_secret.expose()),
            ("scope", self.scope.as_str()),
        ];
        if let Some(id) = &self.client_id {
            form.push(("client_id", id));
        }
        let response = http
            .post(&self.server_uri)
            .form(&form)
            .send()
            .await
            .map_err(|e| {
                Error::new(ErrorKind::Unexpected, format!("{what}: request failed"))
                    .with_retryable(true)
                    .with_source(e)
            })?;
        let status = response.status().as_u16();
        let body = response.bytes().await.map_err(|e| {
            Error::new(
                ErrorKind::Unexpected,
                format!("{what}: reading the answer failed"),
            )
            .with_retryable(true)
            .with_source(e)
        })?;
        if !(200..300).contains(&status) {
            // OAuth2 errors are `{"error":"invalid_client","error_description":…}`.
            let (kind, message) = match serde_json::from_slice::<serde_json::Value>(&body) {
                Ok(v) => (
                    v.get("error")
                        .and_then(|e| e.as_str())
                        .unwrap_or_default()
                        .to_owned(),
                    v.get("error_description")
                        .and_then(|e| e.as_str())
                        .unwrap_or_default()
                        .to_owned(),
                ),
                Err(_) => error_detail(&body),
            };
            return Err(Error::new(
                ErrorKind::Unexpected,
                format!("{what}: http {status} {kind} {message}")
                    .trim()
                    .to_owned(),
            )
            .with_retryable(floe_core::http::kind_for_status(status).retryable_by_default()));
        }
        let parsed: TokenResponse = serde_json::from_slice(&body).map_err(|e| {
            Error::new(
                ErrorKind::DataInvalid,
                format!("{what}: the answer has no access_token"),
            )
            .with_source(e)
        })?;
        Ok(CachedToken {
            token: Secret::new(parsed.access_token),
            refresh_at: parsed.expires_in.map(|secs| {
                // Fetch again a minute before expiry, or half-way through a short lifetime.
                let margin = (secs / 2).min(60);
                Instant::now() + Duration::from_secs(secs - margin)
            }),
        })
    }
}

/// How the catalog client authenticates each request.
pub(crate) enum Authenticator {
    /// Nothing to add.
    None,
    /// A fixed bearer token.
    Bearer(Secret),
    /// OAuth2 client credentials.
    OAuth2(OAuth2),
    /// AWS SigV4.
    SigV4(SigV4Auth),
}

impl fmt::Debug for Authenticator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Authenticator::None => f.write_str("None"),
            Authenticator::Bearer(_) => f.write_str("Bearer(***)"),
            Authenticator::OAuth2(o) => f
                .debug_struct("OAuth2")
                .field("server_uri", &o.server_uri)
                .field("client_id", &o.client_id)
                .finish_non_exhaustive(),
            Authenticator::SigV4(s) => s.fmt(f),
        }
    }
}

impl Authenticator {
    /// The authenticator for `config`; SigV4 reads the time from `clock`.
    pub(crate) fn new(config: &AuthConfig, clock: SigningClock) -> Self {
        match config {
            AuthConfig::None => Authenticator::None,
            AuthConfig::Bearer { token } => Authenticator::Bearer(token.clone()),
            AuthConfig::OAuth2 {
                server_uri,
                client_id,
                client_secret,
                scope,
            } => Authenticator::OAuth2(OAuth2 {
                server_uri: server_uri.clone(),
                client_id: client_id.clone(),
                client_secret: client_secret.clone(),
                scope: scope.clone(),
                cached: Mutex::new(None),
            }),
            AuthConfig::SigV4 {
                signing_name,
                signing_region,
                credentials,
            } => Authenticator::SigV4(SigV4Auth::new(
                signing_name,
                signing_region,
                credentials.clone(),
                clock,
            )),
        }
    }

    /// Authenticate `req` (the last step before sending it).
    pub(crate) async fn apply(
        &self,
        http: &reqwest::Client,
        req: &mut reqwest::Request,
    ) -> Result<()> {
        let bearer = match self {
            Authenticator::None => return Ok(()),
            Authenticator::SigV4(s) => {
                return s.sign(req).await.map_err(|e| {
                    Error::new(ErrorKind::Unexpected, e.message().to_owned()).with_source(e)
                });
            }
            Authenticator::Bearer(token) => token.clone(),
            Authenticator::OAuth2(o) => o.token(http).await?,
        };
        let mut value =
            HeaderValue::try_from(format!("Bearer {}", bearer.expose())).map_err(|_| {
                Error::new(
                    ErrorKind::DataInvalid,
                    "the bearer token is not a valid header value",
                )
            })?;
        value.set_sensitive(true);
        req.headers_mut().insert(AUTHORIZATION, value);
        Ok(())
    }

    /// After a 401: forget a cached OAuth2 token. Returns whether a retry may now succeed.
    pub(crate) async fn invalidate(&self) -> bool {
        match self {
            Authenticator::OAuth2(o) => {
                *o.cached.lock().await = None;
                true
            }
            _ => false,
        }
    }
}
