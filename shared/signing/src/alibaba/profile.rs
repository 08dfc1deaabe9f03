//! What each link of the chain would do, worked out from the environment and the profile files
//! alone (no IO here): a [`Recipe`] for credentials, or why the link is absent or broken.

use std::collections::BTreeMap;
use std::path::PathBuf;

use floe_core::{Error, ErrorKind, Result};
use serde::Deserialize;

use crate::credentials::Credentials;

/// STS session length when none is configured, in seconds (as the SDKs).
pub const DEFAULT_DURATION_SECS: u64 = 3600;
/// The shortest session STS grants.
pub const MIN_DURATION_SECS: u64 = 900;

/// Where STS is: `ALIBABA_CLOUD_STS_ENDPOINT` (a host, or a URL with its scheme), else
/// `https://sts[-vpc].<region>.aliyuncs.com`, else `https://sts.aliyuncs.com`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StsEndpoint {
    /// `ALIBABA_CLOUD_STS_ENDPOINT`.
    pub endpoint: Option<String>,
    /// `ALIBABA_CLOUD_STS_REGION`, or a profile's `sts_region`.
    pub region: Option<String>,
    /// `ALIBABA_CLOUD_VPC_ENDPOINT_ENABLED=true`, or a profile's `enable_vpc`.
    pub vpc: bool,
}

impl StsEndpoint {
    /// The URL calls go to (no trailing `/`).
    pub fn url(&self) -> String {
        if let Some(e) = &self.endpoint {
            let e = e.trim_end_matches('/');
            return if e.contains("://") {
                e.to_owned()
            } else {
                format!("https://{e}")
            };
        }
        match &self.region {
            Some(region) => {
                let prefix = if self.vpc { "sts-vpc" } else { "sts" };
                format!("https://{prefix}.{region}.aliyuncs.com")
            }
            None => "https://sts.aliyuncs.com".to_owned(),
        }
    }
}

/// How to get credentials.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Recipe {
    /// Keys as they are (no expiry).
    Static(Credentials),
    /// STS `AssumeRole`, signed with the keys `source` gives.
    AssumeRole {
        /// Where the signing keys come from.
        source: Box<Recipe>,
        /// The role's ARN.
        role_arn: String,
        /// `RoleSessionName`.
        session_name: String,
        /// `DurationSeconds`.
        duration_secs: u64,
        /// `Policy`, if any.
        policy: Option<String>,
        /// `ExternalId`, if any.
        external_id: Option<String>,
        /// STS.
        sts: StsEndpoint,
    },
    /// STS `AssumeRoleWithOIDC` with the token read from `token_file` at each call (RRSA rotates it).
    Oidc {
        /// The role's ARN.
        role_arn: String,
        /// The OIDC provider's ARN.
        provider_arn: String,
        /// The file holding the OIDC token.
        token_file: PathBuf,
        /// `RoleSessionName`.
        session_name: String,
        /// `DurationSeconds`.
        duration_secs: u64,
        /// `Policy`, if any.
        policy: Option<String>,
        /// STS.
        sts: StsEndpoint,
    },
    /// The ECS / ECI instance's RAM role from the metadata service.
    Ecs {
        /// The role; `None`: ask the metadata service which it is.
        role_name: Option<String>,
        /// `ALIBABA_CLOUD_IMDSV1_DISABLED=true`: no falling back to requests without a token.
        imdsv1_disabled: bool,
    },
    /// A URL answering with keys (`ALIBABA_CLOUD_CREDENTIALS_URI`).
    Uri(String),
}

/// The environment as the chain reads it: the values of the variables it knows, and `HOME`.
pub type Vars = BTreeMap<String, String>;

pub(crate) fn var<'a>(vars: &'a Vars, name: &str) -> Option<&'a str> {
    vars.get(name).map(String::as_str).filter(|v| !v.is_empty())
}

pub(crate) fn flag(vars: &Vars, name: &str) -> bool {
    var(vars, name).is_some_and(|v| v.eq_ignore_ascii_case("true"))
}

fn config_error(what: impl Into<String>) -> Error {
    Error::new(ErrorKind::Config, what)
}

/// The session name when none is given: `ALIBABA_CLOUD_ROLE_SESSION_NAME`, else
/// `floe-<unix seconds>`.
pub(crate) fn default_session_name(vars: &Vars, now_secs: u64) -> String {
    var(vars, "ALIBABA_CLOUD_ROLE_SESSION_NAME")
        .map_or_else(|| format!("floe-{now_secs}"), str::to_owned)
}

fn sts_from_env(vars: &Vars) -> StsEndpoint {
    StsEndpoint {
        endpoint: var(vars, "ALIBABA_CLOUD_STS_ENDPOINT").map(str::to_owned),
        region: var(vars, "ALIBABA_CLOUD_STS_REGION").map(str::to_owned),
        vpc: flag(vars, "ALIBABA_CLOUD_VPC_ENDPOINT_ENABLED"),
    }
}

fn duration(secs: Option<u64>, field: &str) -> Result<u64> {
    match secs {
        None | Some(0) => Ok(DEFAULT_DURATION_SECS),
        Some(s) if s < MIN_DURATION_SECS => Err(config_error(format!(
            "{field} is {s}: STS sessions last at least {MIN_DURATION_SECS} seconds"
        ))),
        Some(s) => Ok(s),
    }
}

/// Link 1, the environment: `ALIBABA_CLOUD_ACCESS_KEY_ID`, `_SECRET`, `ALIBABA_CLOUD_SECURITY_TOKEN`.
pub fn env_link(vars: &Vars) -> Result<Recipe> {
    let id = var(vars, "ALIBABA_CLOUD_ACCESS_KEY_ID")
        .ok_or_else(|| config_error("ALIBABA_CLOUD_ACCESS_KEY_ID is not set"))?;
    let secret = var(vars, "ALIBABA_CLOUD_ACCESS_KEY_SECRET").ok_or_else(|| {
        config_error(
            "ALIBABA_CLOUD_ACCESS_KEY_ID is set but ALIBABA_CLOUD_ACCESS_KEY_SECRET is not",
        )
    })?;
    Ok(Recipe::Static(
        Credentials::new(id, secret).with_security_token(
            var(vars, "ALIBABA_CLOUD_SECURITY_TOKEN")
                .unwrap_or_default()
                .to_owned(),
        ),
    ))
}

/// Link 2, OIDC / RRSA: present only when all of `ALIBABA_CLOUD_ROLE_ARN`,
/// `ALIBABA_CLOUD_OIDC_PROVIDER_ARN` and `ALIBABA_CLOUD_OIDC_TOKEN_FILE` are set.
pub fn oidc_link(vars: &Vars, now_secs: u64) -> Option<Recipe> {
    Some(Recipe::Oidc {
        role_arn: var(vars, "ALIBABA_CLOUD_ROLE_ARN")?.to_owned(),
        provider_arn: var(vars, "ALIBABA_CLOUD_OIDC_PROVIDER_ARN")?.to_owned(),
        token_file: PathBuf::from(var(vars, "ALIBABA_CLOUD_OIDC_TOKEN_FILE")?),
        session_name: default_session_name(vars, now_secs),
        duration_secs: DEFAULT_DURATION_SECS,
        policy: None,
        sts: sts_from_env(vars),
    })
}

/// The aliyun CLI's file: `ALIBABA_CLOUD_CONFIG_FILE`, else `$HOME/.aliyun/config.json`.
pub fn cli_profile_path(vars: &Vars) -> Option<PathBuf> {
    if let Some(p) = var(vars, "ALIBABA_CLOUD_CONFIG_FILE") {
        return Some(PathBuf::from(p));
    }
    Some(PathBuf::from(var(vars, "HOME")?).join(".aliyun/config.json"))
}

/// The credentials ini files, in the order tried: `ALIBABA_CLOUD_CREDENTIALS_FILE`, else
/// `$HOME/.alibabacloud/credentials` (the Go SDK's name) and `credentials.ini` (the Python
/// SDK's).
pub fn ini_profile_paths(vars: &Vars) -> Vec<PathBuf> {
    if let Some(p) = var(vars, "ALIBABA_CLOUD_CREDENTIALS_FILE") {
        return vec![PathBuf::from(p)];
    }
    var(vars, "HOME").map_or_else(Vec::new, |home| {
        let dir = PathBuf::from(home).join(".alibabacloud");
        vec![dir.join("credentials"), dir.join("credentials.ini")]
    })
}

#[derive(Deserialize)]
struct CliConfig {
    #[serde(default)]
    current: String,
    #[serde(default)]
    profiles: Vec<CliProfile>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct CliProfile {
    name: String,
    mode: String,
    access_key_id: String,
    access_key_secret: String,
    sts_token: String,
    ram_role_arn: String,
    ram_session_name: String,
    role_session_name: String,
    expired_seconds: Option<u64>,
    sts_region: String,
    enable_vpc: bool,
    policy: String,
    external_id: String,
    source_profile: String,
    ram_role_name: String,
    oidc_provider_arn: String,
    oidc_token_file: String,
}

fn nonempty(s: &str) -> Option<String> {
    (!s.is_empty()).then(|| s.to_owned())
}

/// Link 3: the profile `ALIBABA_CLOUD_PROFILE` (else the file's `current`) of the aliyun CLI's
/// `config.json` (`text`, read from `path`). Modes: `AK`, `StsToken`, `RamRoleArn`,
/// `ChainableRamRoleArn`, `EcsRamRole`, `OIDC`; the others (`CloudSSO`, `OAuth`, `External`)
/// need the CLI's own login flow and are refused by name.
pub fn cli_profile(vars: &Vars, path: &str, text: &str, now_secs: u64) -> Result<Recipe> {
    let config: CliConfig = serde_json::from_str(text)
        .map_err(|e| config_error(format!("{path} is not an aliyun CLI configuration: {e}")))?;
    let name = var(vars, "ALIBABA_CLOUD_PROFILE").unwrap_or(&config.current);
    if name.is_empty() {
        return Err(config_error(format!(
            "{path} names no current profile and ALIBABA_CLOUD_PROFILE is not set"
        )));
    }
    cli_profile_named(vars, &config, path, name, now_secs, 0)
}

fn cli_profile_named(
    vars: &Vars,
    config: &CliConfig,
    path: &str,
    name: &str,
    now_secs: u64,
    depth: usize,
) -> Result<Recipe> {
    if depth > 8 {
        return Err(config_error(format!(
            "{path}: profile `{name}`: source_profile chains loop"
        )));
    }
    let p = config
        .profiles
        .iter()
        .find(|p| p.name == name)
        .ok_or_else(|| config_error(format!("{path} has no profile `{name}`")))?;
    let at = |field: &str| format!("{path}: profile `{name}`: {field}");
    let need = |v: &str, field: &str| {
        nonempty(v).ok_or_else(|| config_error(format!("{} is empty", at(field))))
    };
    let keys = || -> Result<Credentials> {
        Ok(Credentials::new(
            need(&p.access_key_id, "access_key_id")?,
            need(&p.access_key_secret, "access_key_secret")?,
        ))
    };
    let sts = StsEndpoint {
        endpoint: var(vars, "ALIBABA_CLOUD_STS_ENDPOINT").map(str::to_owned),
        region: nonempty(&p.sts_region),
        vpc: p.enable_vpc,
    };
    let session =
        |field: &str| nonempty(field).unwrap_or_else(|| default_session_name(vars, now_secs));
    let assume = |source: Recipe| -> Result<Recipe> {
        Ok(Recipe::AssumeRole {
            source: Box::new(source),
            role_arn: need(&p.ram_role_arn, "ram_role_arn")?,
            session_name: session(&p.ram_session_name),
            duration_secs: duration(p.expired_seconds, &at("expired_seconds"))?,
            policy: nonempty(&p.policy),
            external_id: nonempty(&p.external_id),
            sts: sts.clone(),
        })
    };
    match p.mode.as_str() {
        "AK" => Ok(Recipe::Static(keys()?)),
        "StsToken" => Ok(Recipe::Static(
            keys()?.with_security_token(need(&p.sts_token, "sts_token")?),
        )),
        "RamRoleArn" => assume(Recipe::Static(keys()?)),
        "ChainableRamRoleArn" => {
            let source_name = need(&p.source_profile, "source_profile")?;
            assume(cli_profile_named(
                vars,
                config,
                path,
                &source_name,
                now_secs,
                depth + 1,
            )?)
        }
        "EcsRamRole" => Ok(Recipe::Ecs {
            role_name: nonempty(&p.ram_role_name),
            imdsv1_disabled: flag(vars, "ALIBABA_CLOUD_IMDSV1_DISABLED"),
        }),
        "OIDC" => Ok(Recipe::Oidc {
            role_arn: need(&p.ram_role_arn, "ram_role_arn")?,
            provider_arn: need(&p.oidc_provider_arn, "oidc_provider_arn")?,
            token_file: PathBuf::from(need(&p.oidc_token_file, "oidc_token_file")?),
            // The Go SDK reads `ram_session_name`, the Python SDK `role_session_name`.
            session_name: session(if p.ram_session_name.is_empty() {
                &p.role_session_name
            } else {
                &p.ram_session_name
            }),
            duration_secs: duration(p.expired_seconds, &at("expired_seconds"))?,
            policy: nonempty(&p.policy),
            sts,
        }),
        other => Err(config_error(format!(
            "{}: mode `{other}` is not supported (AK, StsToken, RamRoleArn, ChainableRamRoleArn, \
             EcsRamRole and OIDC are)",
            at("mode")
        ))),
    }
}

/// Link 4: section `ALIBABA_CLOUD_PROFILE` (else `default`) of a credentials ini file.
/// `type` is `access_key`, `ram_role_arn`, `oidc_role_arn` or `ecs_ram_role`.
pub fn ini_profile(vars: &Vars, path: &str, text: &str, now_secs: u64) -> Result<Recipe> {
    let wanted = var(vars, "ALIBABA_CLOUD_PROFILE").unwrap_or("default");
    let mut section: Option<BTreeMap<String, String>> = None;
    let mut current = String::new();
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            current = name.trim().to_owned();
            if current == wanted {
                section = Some(BTreeMap::new());
            }
            continue;
        }
        if current == wanted
            && let (Some(s), Some((k, v))) = (section.as_mut(), line.split_once('='))
        {
            s.insert(k.trim().to_owned(), v.trim().to_owned());
        }
    }
    let s = section.ok_or_else(|| config_error(format!("{path} has no section [{wanted}]")))?;
    let at = |field: &str| format!("{path} [{wanted}] {field}");
    let get = |k: &str| s.get(k).map(String::as_str).and_then(nonempty);
    let need = |k: &str| get(k).ok_or_else(|| config_error(format!("{} is empty", at(k))));
    let keys = || -> Result<Credentials> {
        Ok(Credentials::new(
            need("access_key_id")?,
            need("access_key_secret")?,
        ))
    };
    let session =
        || get("role_session_name").unwrap_or_else(|| default_session_name(vars, now_secs));
    match get("type").as_deref() {
        Some("access_key") => Ok(Recipe::Static(keys()?)),
        Some("ram_role_arn") => Ok(Recipe::AssumeRole {
            source: Box::new(Recipe::Static(keys()?)),
            role_arn: need("role_arn")?,
            session_name: session(),
            duration_secs: DEFAULT_DURATION_SECS,
            policy: get("policy"),
            external_id: None,
            sts: sts_from_env(vars),
        }),
        Some("oidc_role_arn") => Ok(Recipe::Oidc {
            role_arn: need("role_arn")?,
            provider_arn: need("oidc_provider_arn")?,
            token_file: PathBuf::from(need("oidc_token_file_path")?),
            session_name: session(),
            duration_secs: DEFAULT_DURATION_SECS,
            policy: get("policy"),
            sts: sts_from_env(vars),
        }),
        Some("ecs_ram_role") => Ok(Recipe::Ecs {
            role_name: get("role_name"),
            imdsv1_disabled: flag(vars, "ALIBABA_CLOUD_IMDSV1_DISABLED"),
        }),
        other => Err(config_error(format!(
            "{}: `{}` is not supported (access_key, ram_role_arn, oidc_role_arn and ecs_ram_role are)",
            at("type"),
            other.unwrap_or("")
        ))),
    }
}

/// Link 5: the instance's RAM role, unless `ALIBABA_CLOUD_ECS_METADATA_DISABLED=true`.
pub fn ecs_link(vars: &Vars) -> Option<Recipe> {
    (!flag(vars, "ALIBABA_CLOUD_ECS_METADATA_DISABLED")).then(|| Recipe::Ecs {
        role_name: var(vars, "ALIBABA_CLOUD_ECS_METADATA").map(str::to_owned),
        imdsv1_disabled: flag(vars, "ALIBABA_CLOUD_IMDSV1_DISABLED"),
    })
}

/// Link 6: `ALIBABA_CLOUD_CREDENTIALS_URI`, when set.
pub fn uri_link(vars: &Vars) -> Option<Recipe> {
    var(vars, "ALIBABA_CLOUD_CREDENTIALS_URI").map(|u| Recipe::Uri(u.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(pairs: &[(&str, &str)]) -> Vars {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn the_environment_link_needs_both_keys() {
        let e = env_link(&vars(&[("ALIBABA_CLOUD_ACCESS_KEY_ID", "id")])).unwrap_err();
        assert!(
            e.to_string().contains("ALIBABA_CLOUD_ACCESS_KEY_SECRET"),
            "{e}"
        );
        let r = env_link(&vars(&[
            ("ALIBABA_CLOUD_ACCESS_KEY_ID", "id"),
            ("ALIBABA_CLOUD_ACCESS_KEY_SECRET", "s"),
            ("ALIBABA_CLOUD_SECURITY_TOKEN", ""),
        ]))
        .unwrap();
        assert_eq!(r, Recipe::Static(Credentials::new("id", "s")));
    }

    #[test]
    fn oidc_is_absent_unless_all_three_variables_are_set() {
        let two = vars(&[
            ("ALIBABA_CLOUD_ROLE_ARN", "acs:ram::1:role/r"),
            (
                "ALIBABA_CLOUD_OIDC_PROVIDER_ARN",
                "acs:ram::1:oidc-provider/p",
            ),
        ]);
        assert_eq!(oidc_link(&two, 7), None);
        let mut three = two.clone();
        three.insert("ALIBABA_CLOUD_OIDC_TOKEN_FILE".into(), "/t".into());
        three.insert("ALIBABA_CLOUD_STS_REGION".into(), "cn-hangzhou".into());
        three.insert("ALIBABA_CLOUD_VPC_ENDPOINT_ENABLED".into(), "TRUE".into());
        let Some(Recipe::Oidc {
            session_name, sts, ..
        }) = oidc_link(&three, 7)
        else {
            panic!("no oidc link")
        };
        assert_eq!(session_name, "floe-7");
        assert_eq!(sts.url(), "https://sts-vpc.cn-hangzhou.aliyuncs.com");
    }

    #[test]
    fn sts_endpoints_follow_the_sdks_and_the_ack_variable() {
        assert_eq!(StsEndpoint::default().url(), "https://sts.aliyuncs.com");
        let vpc_without_region = StsEndpoint {
            vpc: true,
            ..Default::default()
        };
        assert_eq!(vpc_without_region.url(), "https://sts.aliyuncs.com");
        let ack = StsEndpoint {
            endpoint: Some("sts-vpc.cn-beijing.aliyuncs.com".into()),
            region: Some("cn-hangzhou".into()),
            vpc: false,
        };
        assert_eq!(ack.url(), "https://sts-vpc.cn-beijing.aliyuncs.com");
        let local = StsEndpoint {
            endpoint: Some("http://127.0.0.1:9/".into()),
            ..Default::default()
        };
        assert_eq!(local.url(), "http://127.0.0.1:9");
    }

    const CONFIG: &str = r#"{
      "current": "ak",
      "profiles": [
        {"name": "ak", "mode": "AK", "access_key_id": "LTAI1", "access_key_secret": "s1", "region_id": "cn-hangzhou"},
        {"name": "sts", "mode": "StsToken", "access_key_id": "STS.1", "access_key_secret": "s2", "sts_token": "t2"},
        {"name": "role", "mode": "RamRoleArn", "access_key_id": "LTAI1", "access_key_secret": "s1",
         "ram_role_arn": "acs:ram::1:role/r", "ram_session_name": "sess", "expired_seconds": 900,
         "sts_region": "cn-shanghai", "policy": "{}", "external_id": "x"},
        {"name": "chain", "mode": "ChainableRamRoleArn", "source_profile": "role", "ram_role_arn": "acs:ram::1:role/r2"},
        {"name": "ecs", "mode": "EcsRamRole", "ram_role_name": "EcsRole"},
        {"name": "oidc", "mode": "OIDC", "ram_role_arn": "acs:ram::1:role/o", "oidc_provider_arn": "acs:ram::1:oidc-provider/p",
         "oidc_token_file": "/var/run/token", "role_session_name": "py-name"},
        {"name": "loop", "mode": "ChainableRamRoleArn", "source_profile": "loop", "ram_role_arn": "acs:ram::1:role/r"},
        {"name": "sso", "mode": "CloudSSO"},
        {"name": "short", "mode": "RamRoleArn", "access_key_id": "a", "access_key_secret": "b", "ram_role_arn": "r", "expired_seconds": 60}
      ]
    }"#;

    fn profile(name: &str) -> Result<Recipe> {
        cli_profile(
            &vars(&[("ALIBABA_CLOUD_PROFILE", name)]),
            "config.json",
            CONFIG,
            5,
        )
    }

    #[test]
    fn cli_profiles_resolve_as_the_sdks_resolve_them() {
        let current = cli_profile(&Vars::new(), "config.json", CONFIG, 5).unwrap();
        assert_eq!(current, Recipe::Static(Credentials::new("LTAI1", "s1")));
        assert_eq!(
            profile("sts").unwrap(),
            Recipe::Static(Credentials::new("STS.1", "s2").with_security_token("t2"))
        );
        let Recipe::AssumeRole {
            source,
            session_name,
            duration_secs,
            sts,
            external_id,
            ..
        } = profile("role").unwrap()
        else {
            panic!()
        };
        assert_eq!(*source, Recipe::Static(Credentials::new("LTAI1", "s1")));
        assert_eq!((session_name.as_str(), duration_secs), ("sess", 900));
        assert_eq!(sts.url(), "https://sts.cn-shanghai.aliyuncs.com");
        assert_eq!(external_id.as_deref(), Some("x"));
        let Recipe::AssumeRole {
            source, role_arn, ..
        } = profile("chain").unwrap()
        else {
            panic!()
        };
        assert_eq!(role_arn, "acs:ram::1:role/r2");
        assert!(matches!(*source, Recipe::AssumeRole { .. }));
        assert_eq!(
            profile("ecs").unwrap(),
            Recipe::Ecs {
                role_name: Some("EcsRole".into()),
                imdsv1_disabled: false
            }
        );
        let Recipe::Oidc { session_name, .. } = profile("oidc").unwrap() else {
            panic!()
        };
        assert_eq!(session_name, "py-name");
    }

    #[test]
    fn broken_cli_profiles_name_what_is_wrong() {
        for (name, needle) in [
            ("missing", "has no profile `missing`"),
            ("loop", "loop"),
            ("sso", "mode `CloudSSO` is not supported"),
            ("short", "at least 900 seconds"),
        ] {
            let e = profile(name).unwrap_err().to_string();
            assert!(e.contains(needle), "{name}: {e}");
        }
        let e = cli_profile(&Vars::new(), "c.json", "{", 0).unwrap_err();
        assert!(e.to_string().contains("c.json"), "{e}");
    }

    #[test]
    fn ini_profiles_read_the_chosen_section() {
        let text = "[default]\ntype = access_key\naccess_key_id = id1\naccess_key_secret = s1\n\n\
                    [ecs]\ntype = ecs_ram_role\nrole_name = R\n[bad]\ntype = rsa_key_pair\n";
        assert_eq!(
            ini_profile(&Vars::new(), "f", text, 0).unwrap(),
            Recipe::Static(Credentials::new("id1", "s1"))
        );
        let ecs = ini_profile(&vars(&[("ALIBABA_CLOUD_PROFILE", "ecs")]), "f", text, 0).unwrap();
        assert!(matches!(ecs, Recipe::Ecs { role_name: Some(r), .. } if r == "R"));
        let e = ini_profile(&vars(&[("ALIBABA_CLOUD_PROFILE", "bad")]), "f", text, 0).unwrap_err();
        assert!(e.to_string().contains("rsa_key_pair"), "{e}");
    }

    #[test]
    fn the_metadata_link_can_be_switched_off() {
        assert!(ecs_link(&Vars::new()).is_some());
        assert!(ecs_link(&vars(&[("ALIBABA_CLOUD_ECS_METADATA_DISABLED", "True")])).is_none());
        assert_eq!(uri_link(&Vars::new()), None);
    }
}
