//! The Alibaba Cloud credential chain (feature `alibaba`): where every Alibaba client of floe
//! (OSS, MNS, MaxCompute, OSS Tables) finds keys when the configuration gives none, in the
//! order of the Alibaba Cloud credentials SDKs (`credentials-go`, `alibabacloud-credentials`):
//!
//! | link | when it is in the chain | what it does |
//! |---|---|---|
//! | environment | always | `ALIBABA_CLOUD_ACCESS_KEY_ID`, `ALIBABA_CLOUD_ACCESS_KEY_SECRET`, `ALIBABA_CLOUD_SECURITY_TOKEN` |
//! | OIDC (RRSA) | `ALIBABA_CLOUD_ROLE_ARN`, `ALIBABA_CLOUD_OIDC_PROVIDER_ARN` and `ALIBABA_CLOUD_OIDC_TOKEN_FILE` all set | STS `AssumeRoleWithOIDC` (anonymous) with the token file's content, read at each call; `ALIBABA_CLOUD_ROLE_SESSION_NAME` |
//! | CLI profile | unless `ALIBABA_CLOUD_CLI_PROFILE_DISABLED=true` | profile `ALIBABA_CLOUD_PROFILE` (else `current`) of `ALIBABA_CLOUD_CONFIG_FILE` or `~/.aliyun/config.json`; modes `AK`, `StsToken`, `RamRoleArn` (STS `AssumeRole`, signed), `ChainableRamRoleArn`, `EcsRamRole`, `OIDC` |
//! | ini profile | always | section `ALIBABA_CLOUD_PROFILE` (else `default`) of `ALIBABA_CLOUD_CREDENTIALS_FILE`, `~/.alibabacloud/credentials` or `credentials.ini` |
//! | instance RAM role | unless `ALIBABA_CLOUD_ECS_METADATA_DISABLED=true` | the ECS / ECI metadata service at 100.100.100.200: an IMDSv2 token first (falling back to requests without one unless `ALIBABA_CLOUD_IMDSV1_DISABLED=true`), the role from `ALIBABA_CLOUD_ECS_METADATA` or the service |
//! | credentials URI | `ALIBABA_CLOUD_CREDENTIALS_URI` set | a GET answering `{AccessKeyId, AccessKeySecret, SecurityToken, Expiration}` |
//!
//! STS is `ALIBABA_CLOUD_STS_ENDPOINT` when set (Alibaba's Kubernetes RRSA injects it; the SDKs
//! themselves do not read it), else `sts[-vpc].<ALIBABA_CLOUD_STS_REGION>.aliyuncs.com`
//! (`ALIBABA_CLOUD_VPC_ENDPOINT_ENABLED`), else `sts.aliyuncs.com`. The metadata service's
//! address is fixed; `FLOE_TEST_ECS_METADATA_ENDPOINT` moves it, for tests only.
//!
//! As in the SDKs, a link that fails is noted and the next one tried; the chain fails only when
//! every link has, with every link's reason in the error. The link that answered is kept for
//! the life of the chain. Temporary keys are fetched again 15 minutes before they expire; when
//! that fails, the keys held are used until they do expire (with a warning). Chains built from
//! the same environment are one chain, so the clients of a process share one STS session.
//!
//! On Function Compute the keys of the latest invocation win over all of this (see
//! [`crate::credentials`]).
//!
//! Nothing here prints a key, a secret, a token or the OIDC token: errors name the link, the
//! file or the endpoint and what went wrong.

mod fetch;
pub mod profile;

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime};

use floe_core::{Error, ErrorKind, Result};

use fetch::Fetcher;
pub use fetch::{ECS_METADATA_ENDPOINT, Fetched, parse_expiration, timestamp};
use profile::{Recipe, Vars};

use crate::credentials::{CredentialSource, Credentials};

/// Temporary keys are fetched again this long before they expire (the SDKs' figure).
pub const REFRESH_BEFORE_EXPIRY: Duration = Duration::from_secs(15 * 60);

/// Moves the metadata service, for tests only.
pub const TEST_METADATA_ENDPOINT_VAR: &str = "FLOE_TEST_ECS_METADATA_ENDPOINT";

/// Every variable the chain reads.
pub const VARIABLES: &[&str] = &[
    "ALIBABA_CLOUD_ACCESS_KEY_ID",
    "ALIBABA_CLOUD_ACCESS_KEY_SECRET",
    "ALIBABA_CLOUD_SECURITY_TOKEN",
    "ALIBABA_CLOUD_ROLE_ARN",
    "ALIBABA_CLOUD_OIDC_PROVIDER_ARN",
    "ALIBABA_CLOUD_OIDC_TOKEN_FILE",
    "ALIBABA_CLOUD_ROLE_SESSION_NAME",
    "ALIBABA_CLOUD_STS_ENDPOINT",
    "ALIBABA_CLOUD_STS_REGION",
    "ALIBABA_CLOUD_VPC_ENDPOINT_ENABLED",
    "ALIBABA_CLOUD_PROFILE",
    "ALIBABA_CLOUD_CONFIG_FILE",
    "ALIBABA_CLOUD_CLI_PROFILE_DISABLED",
    "ALIBABA_CLOUD_CREDENTIALS_FILE",
    "ALIBABA_CLOUD_ECS_METADATA",
    "ALIBABA_CLOUD_ECS_METADATA_DISABLED",
    "ALIBABA_CLOUD_IMDSV1_DISABLED",
    "ALIBABA_CLOUD_CREDENTIALS_URI",
    "HOME",
    TEST_METADATA_ENDPOINT_VAR,
];

/// The links, in order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Link {
    /// `ALIBABA_CLOUD_ACCESS_KEY_*`.
    Environment,
    /// `AssumeRoleWithOIDC`.
    Oidc,
    /// `~/.aliyun/config.json`.
    CliProfile,
    /// `~/.alibabacloud/credentials`.
    IniProfile,
    /// The instance's RAM role.
    EcsRamRole,
    /// `ALIBABA_CLOUD_CREDENTIALS_URI`.
    CredentialsUri,
}

impl Link {
    /// Every link, in the chain's order.
    pub const ALL: [Link; 6] = [
        Link::Environment,
        Link::Oidc,
        Link::CliProfile,
        Link::IniProfile,
        Link::EcsRamRole,
        Link::CredentialsUri,
    ];

    /// Its name in logs and errors.
    pub fn name(self) -> &'static str {
        match self {
            Link::Environment => "environment",
            Link::Oidc => "oidc",
            Link::CliProfile => "cli profile",
            Link::IniProfile => "ini profile",
            Link::EcsRamRole => "ecs ram role",
            Link::CredentialsUri => "credentials uri",
        }
    }
}

/// What a link comes to: absent (not in the chain), broken (the reason), or a recipe.
fn recipe(link: Link, vars: &Vars, now_secs: u64) -> Option<Result<Recipe>> {
    let read = |path: &std::path::Path| std::fs::read_to_string(path);
    match link {
        Link::Environment => Some(profile::env_link(vars)),
        Link::Oidc => profile::oidc_link(vars, now_secs).map(Ok),
        Link::CliProfile => {
            if profile::flag(vars, "ALIBABA_CLOUD_CLI_PROFILE_DISABLED") {
                return None;
            }
            let Some(path) = profile::cli_profile_path(vars) else {
                return Some(Err(Error::config("HOME", "HOME is not set")));
            };
            let shown = path.display().to_string();
            Some(match read(&path) {
                Ok(text) => profile::cli_profile(vars, &shown, &text, now_secs),
                Err(e) => Err(Error::new(ErrorKind::Config, format!("{shown}: {e}"))),
            })
        }
        Link::IniProfile => {
            let paths = profile::ini_profile_paths(vars);
            for path in &paths {
                if let Ok(text) = read(path) {
                    let shown = path.display().to_string();
                    return Some(profile::ini_profile(vars, &shown, &text, now_secs));
                }
            }
            let names: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
            Some(Err(Error::new(
                ErrorKind::Config,
                format!("none of {} can be read", names.join(", ")),
            )))
        }
        Link::EcsRamRole => profile::ecs_link(vars).map(Ok),
        Link::CredentialsUri => profile::uri_link(vars).map(Ok),
    }
}

struct Held {
    fetched: Fetched,
    link: Link,
}

/// One chain, built from a snapshot of the environment; see the module doc.
pub struct AlibabaChain {
    vars: Vars,
    fetcher: Fetcher,
    held: tokio::sync::Mutex<Option<Held>>,
}

impl std::fmt::Debug for AlibabaChain {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AlibabaChain").finish_non_exhaustive()
    }
}

fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// The chain for this environment (`env` is asked for each of [`VARIABLES`]); one per
/// distinct environment per process.
pub fn chain(env: impl Fn(&str) -> Option<String>) -> Arc<AlibabaChain> {
    static CHAINS: Mutex<Vec<Arc<AlibabaChain>>> = Mutex::new(Vec::new());
    let vars: Vars = VARIABLES
        .iter()
        .filter_map(|k| env(k).map(|v| ((*k).to_owned(), v)))
        .collect();
    let mut chains = CHAINS.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(c) = chains.iter().find(|c| c.vars == vars) {
        return c.clone();
    }
    let metadata = profile::var(&vars, TEST_METADATA_ENDPOINT_VAR)
        .unwrap_or(ECS_METADATA_ENDPOINT)
        .trim_end_matches('/')
        .to_owned();
    let http = reqwest::Client::builder()
        .connect_timeout(Duration::from_secs(5))
        .build()
        .unwrap_or_default();
    let c = Arc::new(AlibabaChain {
        vars,
        fetcher: Fetcher { http, metadata },
        held: tokio::sync::Mutex::new(None),
    });
    chains.push(c.clone());
    c
}

/// The keys for an Alibaba client whose configuration gives none: the environment's keys as
/// [`CredentialSource::Alibaba`] (Function Compute's latest keys first, no IO), else the rest of
/// the chain, asked at the first request.
pub fn default_source(env: impl Fn(&str) -> Option<String>) -> CredentialSource {
    let get = |k: &str| env(k).filter(|v| !v.is_empty());
    if let (Some(id), Some(secret)) = (
        get("ALIBABA_CLOUD_ACCESS_KEY_ID"),
        get("ALIBABA_CLOUD_ACCESS_KEY_SECRET"),
    ) {
        return CredentialSource::alibaba(
            Credentials::new(id, secret)
                .with_security_token(get("ALIBABA_CLOUD_SECURITY_TOKEN").unwrap_or_default()),
        );
    }
    CredentialSource::AlibabaChain(chain(env))
}

impl AlibabaChain {
    /// The keys to sign the next request with.
    pub async fn current(&self) -> Result<Credentials> {
        let mut held = self.held.lock().await;
        let now = SystemTime::now();
        if let Some(h) = &*held
            && (h.fetched.expiry).is_none_or(|at| now + REFRESH_BEFORE_EXPIRY < at)
        {
            return Ok(h.fetched.credentials.clone());
        }
        let pinned = held.as_ref().map(|h| h.link);
        match self.resolve(pinned).await {
            Ok((link, fetched)) => {
                if pinned.is_none() {
                    tracing::info!(
                        link = link.name(),
                        access_key_id = fetched.credentials.access_key_id(),
                        "Alibaba Cloud credentials found"
                    );
                } else {
                    tracing::debug!(link = link.name(), "Alibaba Cloud credentials refreshed");
                }
                let c = fetched.credentials.clone();
                *held = Some(Held { fetched, link });
                Ok(c)
            }
            Err(e) => match &*held {
                Some(h) if h.fetched.expiry.is_some_and(|at| now < at) => {
                    tracing::warn!(link = h.link.name(), error = %e, "could not refresh Alibaba Cloud credentials; using the held ones until they expire");
                    Ok(h.fetched.credentials.clone())
                }
                _ => Err(e),
            },
        }
    }

    /// The link that answered, and its keys: `pinned` alone once one has answered, else the
    /// links in order.
    async fn resolve(&self, pinned: Option<Link>) -> Result<(Link, Fetched)> {
        let now = now_secs();
        let links: &[Link] = match &pinned {
            Some(l) => std::slice::from_ref(l),
            None => &Link::ALL,
        };
        let mut reasons = Vec::new();
        for &link in links {
            let Some(recipe) = recipe(link, &self.vars, now) else {
                continue;
            };
            match recipe {
                Ok(r) => match self.fetcher.fetch(&r).await {
                    Ok(f) => return Ok((link, f)),
                    Err(e) => reasons.push(format!("{}: {}", link.name(), e.message())),
                },
                Err(e) => reasons.push(format!("{}: {}", link.name(), e.message())),
            }
        }
        Err(Error::new(
            ErrorKind::Auth,
            format!(
                "no Alibaba Cloud credentials: set the keys in the configuration, or one link of \
                 the credential chain ({})",
                reasons.join("; ")
            ),
        ))
    }
}
