//! Carrying out a [`Recipe`]: the STS calls, the ECS metadata service and a credentials URI.
//! Requests are made as the Go SDK makes them (POST with a form body to STS, so the OIDC token
//! never sits in a URL).

use std::time::{Duration, SystemTime};

use floe_core::{Error, ErrorKind, Result};
use serde::Deserialize;

use super::profile::{Recipe, StsEndpoint};
use crate::credentials::Credentials;
use crate::rpc;

/// The metadata service of ECS and ECI instances.
pub const ECS_METADATA_ENDPOINT: &str = "http://100.100.100.200";
/// Life of an IMDSv2 token asked for, in seconds (as the SDKs).
const IMDS_TOKEN_TTL_SECS: &str = "21600";
/// Timeout of a metadata request (connect and read, as the SDKs: 1 s each).
const IMDS_TIMEOUT: Duration = Duration::from_secs(2);
/// Timeout of an STS or credentials URI call (5 s connect + 10 s read in the SDKs).
const STS_TIMEOUT: Duration = Duration::from_secs(15);
/// STS's API version.
const STS_VERSION: &str = "2015-04-01";

/// Keys and when they expire (`None`: never).
#[derive(Clone, Debug)]
pub struct Fetched {
    /// The keys.
    pub credentials: Credentials,
    /// Their `Expiration`.
    pub expiry: Option<SystemTime>,
}

/// Where the calls go: STS comes from each recipe, the metadata service is fixed (a test may
/// point it elsewhere).
#[derive(Clone, Debug)]
pub struct Fetcher {
    pub(crate) http: reqwest::Client,
    pub(crate) metadata: String,
}

fn auth(what: impl Into<String>) -> Error {
    Error::new(ErrorKind::Auth, what)
}

/// `YYYY-MM-DDThh:mm:ssZ` (UTC), the format of STS's and the metadata service's `Expiration`.
pub fn parse_expiration(s: &str) -> Result<SystemTime> {
    let t = chrono::NaiveDateTime::parse_from_str(s, "%Y-%m-%dT%H:%M:%SZ").map_err(|e| {
        auth(format!(
            "`Expiration` {s:?} is not YYYY-MM-DDThh:mm:ssZ: {e}"
        ))
    })?;
    let secs = u64::try_from(t.and_utc().timestamp())
        .map_err(|_| auth(format!("`Expiration` {s:?} is before 1970")))?;
    Ok(SystemTime::UNIX_EPOCH + Duration::from_secs(secs))
}

/// `YYYY-MM-DDThh:mm:ssZ` of `t`.
pub fn timestamp(t: SystemTime) -> String {
    chrono::DateTime::<chrono::Utc>::from(t)
        .format("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct StsKeys {
    access_key_id: String,
    access_key_secret: String,
    security_token: String,
    expiration: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct StsAnswer {
    credentials: Option<StsKeys>,
}

/// What the metadata service and a credentials URI answer.
#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct KeysAnswer {
    code: Option<String>,
    access_key_id: Option<String>,
    access_key_secret: Option<String>,
    security_token: Option<String>,
    expiration: Option<String>,
}

impl KeysAnswer {
    fn into_fetched(self, what: &str) -> Result<Fetched> {
        if self.code.as_deref().is_some_and(|c| c != "Success") {
            return Err(auth(format!(
                "{what} answered Code {:?}",
                self.code.unwrap_or_default()
            )));
        }
        let (Some(id), Some(secret), Some(token)) = (
            self.access_key_id,
            self.access_key_secret,
            self.security_token,
        ) else {
            return Err(auth(format!(
                "{what} answered without AccessKeyId, AccessKeySecret and SecurityToken"
            )));
        };
        Ok(Fetched {
            credentials: Credentials::new(id, secret).with_security_token(token),
            expiry: self
                .expiration
                .as_deref()
                .map(parse_expiration)
                .transpose()?,
        })
    }
}

/// A short excerpt of an error body for a message (STS error bodies hold codes and request ids,
/// never keys).
fn excerpt(body: &str) -> String {
    let body = body.trim();
    match body.char_indices().nth(300) {
        Some((i, _)) => format!("{}…", &body[..i]),
        None => body.to_owned(),
    }
}

/// Send `req` and return the body of a success, or an error naming `what` with the status and
/// an excerpt of the body.
async fn answer(req: reqwest::RequestBuilder, what: &str) -> Result<String> {
    let resp = (req.send().await).map_err(|e| auth(format!("{what} did not answer: {e}")))?;
    let status = resp.status();
    let body = resp.text().await.unwrap_or_default();
    if !status.is_success() {
        return Err(auth(format!(
            "{what} answered {status}: {}",
            excerpt(&body)
        )));
    }
    Ok(body)
}

impl Fetcher {
    /// Keys for `recipe`.
    pub fn fetch<'a>(
        &'a self,
        recipe: &'a Recipe,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<Fetched>> + Send + 'a>> {
        Box::pin(async move {
            match recipe {
                Recipe::Static(c) => Ok(Fetched {
                    credentials: c.clone(),
                    expiry: None,
                }),
                Recipe::AssumeRole {
                    source,
                    role_arn,
                    session_name,
                    duration_secs,
                    policy,
                    external_id,
                    sts,
                } => {
                    let keys = self.fetch(source).await?.credentials;
                    let mut form = vec![
                        ("RoleArn", role_arn.clone()),
                        ("RoleSessionName", session_name.clone()),
                        ("DurationSeconds", duration_secs.to_string()),
                    ];
                    if let Some(p) = policy {
                        form.push(("Policy", p.clone()));
                    }
                    if let Some(x) = external_id {
                        form.push(("ExternalId", x.clone()));
                    }
                    self.assume_role(&keys, sts, &form).await
                }
                Recipe::Oidc {
                    role_arn,
                    provider_arn,
                    token_file,
                    session_name,
                    duration_secs,
                    policy,
                    sts,
                } => {
                    let token = tokio::fs::read_to_string(token_file).await.map_err(|e| {
                        auth(format!(
                            "cannot read the OIDC token file {}: {e}",
                            token_file.display()
                        ))
                    })?;
                    let mut form = vec![
                        ("RoleArn", role_arn.clone()),
                        ("OIDCProviderArn", provider_arn.clone()),
                        ("OIDCToken", token),
                        ("RoleSessionName", session_name.clone()),
                        ("DurationSeconds", duration_secs.to_string()),
                    ];
                    if let Some(p) = policy {
                        form.push(("Policy", p.clone()));
                    }
                    let query = [
                        ("Version", STS_VERSION.to_owned()),
                        ("Action", "AssumeRoleWithOIDC".to_owned()),
                        ("Format", "JSON".to_owned()),
                        ("Timestamp", timestamp(SystemTime::now())),
                    ];
                    self.sts_call("AssumeRoleWithOIDC", sts, &query, &form)
                        .await
                }
                Recipe::Ecs {
                    role_name,
                    imdsv1_disabled,
                } => self.ecs(role_name.as_deref(), *imdsv1_disabled).await,
                Recipe::Uri(uri) => {
                    let what = "the credentials URI";
                    let body = answer(self.http.get(uri).timeout(STS_TIMEOUT), what).await?;
                    serde_json::from_str::<KeysAnswer>(&body)
                        .map_err(|e| auth(format!("{what} answered no keys: {e}")))?
                        .into_fetched(what)
                }
            }
        })
    }

    /// `AssumeRole`, signed (RPC signature, HMAC-SHA1) with `keys`.
    async fn assume_role(
        &self,
        keys: &Credentials,
        sts: &StsEndpoint,
        form: &[(&str, String)],
    ) -> Result<Fetched> {
        let nonce = {
            use std::sync::atomic::{AtomicU64, Ordering};
            static SEQ: AtomicU64 = AtomicU64::new(0);
            let now = SystemTime::now()
                .duration_since(SystemTime::UNIX_EPOCH)
                .unwrap_or_default();
            format!(
                "{:x}-{:x}-{:x}",
                now.as_nanos(),
                std::process::id(),
                SEQ.fetch_add(1, Ordering::Relaxed)
            )
        };
        let mut query: Vec<(String, String)> =
            rpc::common_params(keys, STS_VERSION, &timestamp(SystemTime::now()), &nonce);
        query.push(("Action".into(), "AssumeRole".into()));
        let all: Vec<(&str, &str)> = query
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .chain(form.iter().map(|(k, v)| (*k, v.as_str())))
            .collect();
        let signature = rpc::sign(keys.access_key_secret().expose(), "POST", &all)?;
        query.push(("Signature".into(), signature));
        let query: Vec<(&str, String)> =
            query.iter().map(|(k, v)| (k.as_str(), v.clone())).collect();
        self.sts_call("AssumeRole", sts, &query, form).await
    }

    async fn sts_call(
        &self,
        action: &str,
        sts: &StsEndpoint,
        query: &[(&str, String)],
        form: &[(&str, String)],
    ) -> Result<Fetched> {
        let url = format!("{}/", sts.url());
        let what = format!("STS {action} at {url}");
        let req = (self.http.post(&url))
            .query(query)
            .form(form)
            .header("Accept-Encoding", "identity")
            .timeout(STS_TIMEOUT);
        let body = answer(req, &what).await?;
        let keys = serde_json::from_str::<StsAnswer>(&body)
            .ok()
            .and_then(|a| a.credentials)
            .ok_or_else(|| auth(format!("{what} answered without Credentials")))?;
        Ok(Fetched {
            credentials: Credentials::new(keys.access_key_id, keys.access_key_secret)
                .with_security_token(keys.security_token),
            expiry: Some(parse_expiration(&keys.expiration)?),
        })
    }

    /// The instance's RAM role: an IMDSv2 token first (asked again before each GET, as the
    /// SDKs do), requests without one only when getting it failed or a GET with it failed, and
    /// never when `imdsv1_disabled`.
    async fn ecs(&self, role_name: Option<&str>, imdsv1_disabled: bool) -> Result<Fetched> {
        let base = format!(
            "{}/latest/meta-data/ram/security-credentials/",
            self.metadata
        );
        let role = match role_name {
            Some(r) => r.to_owned(),
            None => self
                .metadata_get(&base, imdsv1_disabled)
                .await?
                .trim()
                .to_owned(),
        };
        if role.is_empty() {
            return Err(auth(
                "the metadata service names no RAM role for this instance",
            ));
        }
        let url = format!("{base}{role}");
        let body = self.metadata_get(&url, imdsv1_disabled).await?;
        serde_json::from_str::<KeysAnswer>(&body)
            .map_err(|e| {
                auth(format!(
                    "the metadata service answered no keys for role {role}: {e}"
                ))
            })?
            .into_fetched(&format!("the metadata service (role {role})"))
    }

    async fn metadata_token(&self) -> Result<String> {
        let url = format!("{}/latest/api/token", self.metadata);
        let resp = (self.http.put(&url))
            .header(
                "X-aliyun-ecs-metadata-token-ttl-seconds",
                IMDS_TOKEN_TTL_SECS,
            )
            .header("Content-Length", "0")
            .timeout(IMDS_TIMEOUT)
            .send()
            .await
            .map_err(|e| {
                auth(format!(
                    "the metadata service {} did not answer: {e}",
                    self.metadata
                ))
            })?;
        let status = resp.status();
        if !status.is_success() {
            return Err(auth(format!(
                "the metadata service refused a token: {status}"
            )));
        }
        resp.text()
            .await
            .map_err(|e| auth(format!("the metadata service's token was cut: {e}")))
    }

    async fn metadata_get(&self, url: &str, imdsv1_disabled: bool) -> Result<String> {
        let token = match self.metadata_token().await {
            Ok(t) => Some(t),
            Err(e) if imdsv1_disabled => return Err(e),
            Err(_) => None,
        };
        let get = |token: Option<&str>| {
            let mut req = self.http.get(url).timeout(IMDS_TIMEOUT);
            if let Some(t) = token {
                req = req.header("X-aliyun-ecs-metadata-token", t);
            }
            async move {
                let resp = req
                    .send()
                    .await
                    .map_err(|e| auth(format!("the metadata service did not answer {url}: {e}")))?;
                let status = resp.status();
                let body = resp.text().await.unwrap_or_default();
                if status.is_success() {
                    Ok(body)
                } else {
                    Err(auth(format!(
                        "the metadata service answered {status} to {url}"
                    )))
                }
            }
        };
        match (get(token.as_deref()).await, &token) {
            (Ok(body), _) => Ok(body),
            (Err(e), Some(_)) if !imdsv1_disabled => get(None).await.map_err(|_| e),
            (Err(e), _) => Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expirations_parse_strictly() {
        let t = parse_expiration("2026-12-02T13:00:00Z").unwrap();
        assert_eq!(timestamp(t), "2026-12-02T13:00:00Z");
        assert!(parse_expiration("2026-12-02 13:00:00").is_err());
        assert!(parse_expiration("2026-12-02T13:00:00.000Z").is_err());
    }
}
