//! The S3 Tables catalog's configuration (Kafka Connect style properties, `iceberg.catalog.`
//! removed). The same keys serve OSS Tables through its S3 Tables-compatible endpoint.
//!
//! | key | meaning | default |
//! |---|---|---|
//! | `warehouse` | the table-bucket ARN (`arn:aws:s3tables:…:bucket/<name>`, `acs:osstables:…`) | required by the catalog |
//! | `uri` | control-plane endpoint | `AWS_ENDPOINT_URL_S3TABLES`, then `AWS_ENDPOINT_URL`, then `https://s3tables.<region>.amazonaws.com`; for an `acs:` ARN `https://<region>.oss-tables.aliyuncs.com` |
//! | `s3tables.signing-region` | SigV4 region | `client.region`, then the ARN's region |
//! | `s3tables.signing-name` | SigV4 signing name | `s3tables` |
//! | `s3tables.access-key-id` / `s3tables.secret-access-key` / `s3tables.session-token` | keys | `s3.*` keys, then for an AWS warehouse the AWS default chain ([`crate::aws_chain`]: `AWS_*`, container credentials, profile, instance metadata), for an `acs:` warehouse Function Compute's role keys (the latest invocation's, else `ALIBABA_CLOUD_*`), then `AWS_*`, then the rest of the Alibaba credential chain (OIDC, profiles, the instance's RAM role: `floe_signing::alibaba`) |
//! | `s3tables.signature` | `oss-v4` (OSS4-HMAC-SHA256, product `osstables`, as ossutil `tables-api` signs) or `sigv4` (SigV4 as `s3tables.signing-name`, as the AWS CLI signs) | `oss-v4` for an `acs:` warehouse or an `*.oss-tables.aliyuncs.com` endpoint, else `sigv4` |
//! | `s3tables.managed-maintenance` | when floe creates a table, turn on the catalog's own snapshot management and compaction (`PutTableMaintenanceConfiguration`); compaction is turned off instead for a table whose rows floe replaces by position (`floe.on-change = replace`: `floe maintain` compacts those, moving its row records) | `true` |
//! | `s3.*`, `client.*` | FileIO properties for metadata and data files | `client.region` = the signing region; `s3.endpoint` = `AWS_ENDPOINT_URL_S3`, then `AWS_ENDPOINT_URL` (AWS warehouses) |
//! | `type`, `catalog-impl`, `io-impl`, `name` | read by whoever picks the catalog; ignored here | |
//!
//! Any other key is refused with its name.

use std::collections::HashMap;

use floe_core::{Error, Result};
use floe_signing::CredentialSource;
use reqwest::Url;

use crate::rest::config::{Cloud, credentials_from};

/// How control-plane requests are signed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Signature {
    /// AWS SigV4 (service `s3tables.signing-name`).
    SigV4,
    /// OSS4-HMAC-SHA256 with product `osstables`, as ossutil `tables-api` signs.
    OssV4,
}

/// The S3 Tables catalog's configuration; see the module doc for the keys.
#[derive(Clone, PartialEq, Eq)]
pub struct S3TablesConfig {
    /// `warehouse`: the table-bucket ARN the catalog works in; default none (admin calls name
    /// their bucket themselves).
    pub warehouse: Option<String>,
    /// `uri`: the control-plane endpoint without a trailing slash.
    pub endpoint: String,
    /// `s3tables.signing-region`: the SigV4 region.
    pub region: String,
    /// `s3tables.signing-name`: the SigV4 signing name; default `s3tables`.
    pub signing_name: String,
    /// The keys requests are signed with.
    pub credentials: CredentialSource,
    /// `s3.*` and `client.*`: FileIO properties for the tables' files.
    pub file_io_props: HashMap<String, String>,
    /// `s3tables.managed-maintenance`: set the catalog's maintenance of the tables floe creates.
    pub managed_maintenance: bool,
    /// `s3tables.signature`.
    pub signature: Signature,
}

impl std::fmt::Debug for S3TablesConfig {
    // FileIO properties can hold keys: print their names only.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut io_keys: Vec<&String> = self.file_io_props.keys().collect();
        io_keys.sort();
        f.debug_struct("S3TablesConfig")
            .field("warehouse", &self.warehouse)
            .field("endpoint", &self.endpoint)
            .field("region", &self.region)
            .field("signing_name", &self.signing_name)
            .field("credentials", &self.credentials)
            .field("file_io_props", &io_keys)
            .field("managed_maintenance", &self.managed_maintenance)
            .field("signature", &self.signature)
            .finish()
    }
}

const IGNORED_KEYS: &[&str] = &["type", "catalog-impl", "io-impl", "name"];

/// The region field of a table-bucket ARN: `arn:aws:s3tables:<region>:…` (AWS) or
/// `acs:osstables:<region>:…` (Alibaba Cloud).
pub(crate) fn arn_region(arn: &str) -> Option<&str> {
    let field = if arn.starts_with("acs:") { 2 } else { 3 };
    arn.split(':').nth(field).filter(|r| !r.is_empty())
}

/// The control-plane endpoint for a bucket ARN and region: OSS Tables for `acs:` ARNs, S3 Tables
/// otherwise.
fn default_endpoint(warehouse: Option<&str>, region: &str) -> String {
    match warehouse {
        Some(arn) if arn.starts_with("acs:") => format!("https://{region}.oss-tables.aliyuncs.com"),
        _ => format!("https://s3tables.{region}.amazonaws.com"),
    }
}

/// `s3tables.managed-maintenance` of a catalog's properties (default true).
pub fn managed_maintenance(props: &HashMap<String, String>) -> Result<bool> {
    match props.get("s3tables.managed-maintenance").map(|v| v.trim()) {
        None | Some("") => Ok(true),
        Some(v) if v.eq_ignore_ascii_case("true") => Ok(true),
        Some(v) if v.eq_ignore_ascii_case("false") => Ok(false),
        Some(v) => Err(Error::config(
            "s3tables.managed-maintenance",
            format!("`{v}`: expected true or false"),
        )),
    }
}

impl S3TablesConfig {
    /// Read the configuration (see the module doc); keys not set come from the `AWS_*`
    /// environment variables.
    pub fn from_props(props: &HashMap<String, String>) -> Result<Self> {
        Self::from_props_with_env(props, |k| std::env::var(k).ok())
    }

    /// [`S3TablesConfig::from_props`] with the environment given as a lookup function.
    pub fn from_props_with_env(
        props: &HashMap<String, String>,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Self> {
        let mut keys: Vec<&String> = props.keys().collect();
        keys.sort();
        let mut file_io_props = HashMap::new();
        for key in keys {
            match key.as_str() {
                "warehouse"
                | "uri"
                | "s3tables.signing-region"
                | "s3tables.signing-name"
                | "s3tables.access-key-id"
                | "s3tables.secret-access-key"
                | "s3tables.session-token"
                | "s3tables.managed-maintenance"
                | "s3tables.signature" => {}
                k if IGNORED_KEYS.contains(&k) => {}
                k if k.starts_with("s3.") || k.starts_with("client.") => {
                    file_io_props.insert(k.to_owned(), props[key].clone());
                }
                k => return Err(Error::config(k, "unknown s3tables catalog option")),
            }
        }
        let get = |k: &str| props.get(k).map(|v| v.trim()).filter(|v| !v.is_empty());
        let warehouse = get("warehouse").map(str::to_owned);
        let region = get("s3tables.signing-region")
            .or_else(|| get("client.region"))
            .or_else(|| warehouse.as_deref().and_then(arn_region))
            .ok_or_else(|| {
                Error::config(
                    "client.region",
                    "the s3tables catalog needs a region (client.region or the warehouse arn)",
                )
            })?
            .to_owned();
        // The AWS SDKs' endpoint overrides (`AWS_ENDPOINT_URL_<SERVICE>`, then
        // `AWS_ENDPOINT_URL`) apply to S3 Tables as to every AWS client floe builds; OSS Tables
        // (an `acs:` warehouse) is not an AWS service and ignores them.
        let aws = !warehouse.as_deref().is_some_and(|w| w.starts_with("acs:"));
        let env_endpoint = |service: &str| {
            [
                format!("AWS_ENDPOINT_URL_{service}"),
                "AWS_ENDPOINT_URL".to_owned(),
            ]
            .iter()
            .find_map(|k| env(k).filter(|v| !v.trim().is_empty()))
            .filter(|_| aws)
        };
        let endpoint = match get("uri") {
            Some(u) if u.starts_with("http://") || u.starts_with("https://") => {
                u.trim_end_matches('/').to_owned()
            }
            Some(u) => return Err(Error::config("uri", format!("`{u}` is not an http(s) url"))),
            None => env_endpoint("S3TABLES")
                .map(|u| u.trim_end_matches('/').to_owned())
                .unwrap_or_else(|| default_endpoint(warehouse.as_deref(), &region)),
        };
        if !file_io_props.contains_key("s3.endpoint")
            && let Some(e) = env_endpoint("S3")
        {
            file_io_props.insert("s3.endpoint".to_owned(), e);
        }
        let credentials = credentials_from(
            &get,
            &[
                [
                    "s3tables.access-key-id",
                    "s3tables.secret-access-key",
                    "s3tables.session-token",
                ],
                [
                    "s3.access-key-id",
                    "s3.secret-access-key",
                    "s3.session-token",
                ],
            ],
            if aws { Cloud::Aws } else { Cloud::Alibaba },
            &env,
        )?;
        if !file_io_props.contains_key("client.region") && !file_io_props.contains_key("s3.region")
        {
            file_io_props.insert("client.region".to_owned(), region.clone());
        }
        let oss_tables_host = Url::parse(&endpoint).ok().is_some_and(|u| {
            u.host_str()
                .is_some_and(|h| h.ends_with(".oss-tables.aliyuncs.com"))
        });
        let signature = match get("s3tables.signature") {
            None if !aws || oss_tables_host => Signature::OssV4,
            None => Signature::SigV4,
            Some(v) if v.eq_ignore_ascii_case("oss-v4") => Signature::OssV4,
            Some(v) if v.eq_ignore_ascii_case("sigv4") => Signature::SigV4,
            Some(v) => {
                return Err(Error::config(
                    "s3tables.signature",
                    format!("`{v}`: expected oss-v4 or sigv4"),
                ));
            }
        };
        Ok(S3TablesConfig {
            signature,
            warehouse,
            endpoint,
            region,
            signing_name: get("s3tables.signing-name")
                .unwrap_or("s3tables")
                .to_owned(),
            credentials,
            file_io_props,
            managed_maintenance: managed_maintenance(props)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn props(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn aws_endpoint_overrides_apply_to_aws_warehouses_only() {
        let env = |k: &str| match k {
            "AWS_ENDPOINT_URL" => Some("http://127.0.0.1:5000/".to_owned()),
            "AWS_ENDPOINT_URL_S3" => Some("http://127.0.0.1:5001".to_owned()),
            "AWS_ACCESS_KEY_ID" | "AWS_SECRET_ACCESS_KEY" => Some("k".to_owned()),
            _ => None,
        };
        let c = S3TablesConfig::from_props_with_env(
            &props(&[("warehouse", "arn:aws:s3tables:us-east-1:1:bucket/b")]),
            env,
        )
        .unwrap();
        assert_eq!(c.endpoint, "http://127.0.0.1:5000");
        assert_eq!(c.file_io_props["s3.endpoint"], "http://127.0.0.1:5001");
        let c = S3TablesConfig::from_props_with_env(
            &props(&[("warehouse", "acs:osstables:cn-hangzhou:1:bucket/b")]),
            env,
        )
        .unwrap();
        assert_eq!(c.endpoint, "https://cn-hangzhou.oss-tables.aliyuncs.com");
        assert!(!c.file_io_props.contains_key("s3.endpoint"));
    }

    #[test]
    fn defaults_come_from_the_arn_and_the_s3_keys() {
        let c = S3TablesConfig::from_props_with_env(
            &props(&[
                ("type", "s3tables"),
                (
                    "warehouse",
                    "arn:aws:s3tables:eu-west-1:111122223333:bucket/b",
                ),
                ("s3.access-key-id", "AK"),
                ("s3.secret-access-key", "very-secret-sk"),
            ]),
            |_| None,
        )
        .unwrap();
        assert_eq!(c.region, "eu-west-1");
        assert_eq!(c.endpoint, "https://s3tables.eu-west-1.amazonaws.com");
        assert_eq!(c.signing_name, "s3tables");
        assert!(matches!(c.credentials, CredentialSource::Static(_)));
        assert_eq!(c.credentials.configured().unwrap().access_key_id(), "AK");
        assert_eq!(c.file_io_props["client.region"], "eu-west-1");
        assert!(!format!("{c:?}").contains("very-secret"), "{c:?}");
    }

    #[test]
    fn oss_tables_arns_give_region_and_endpoint() {
        assert_eq!(
            arn_region("arn:aws:s3tables:us-east-1:1:bucket/b"),
            Some("us-east-1")
        );
        assert_eq!(
            arn_region("acs:osstables:cn-hangzhou:1:bucket/b"),
            Some("cn-hangzhou")
        );
        assert_eq!(arn_region("acs:osstables::1:bucket/b"), None);
        let c = S3TablesConfig::from_props_with_env(
            &props(&[("warehouse", "acs:osstables:cn-hangzhou:1:bucket/b")]),
            |k| Some(format!("env-{k}")),
        )
        .unwrap();
        assert_eq!(c.endpoint, "https://cn-hangzhou.oss-tables.aliyuncs.com");
        assert_eq!(c.region, "cn-hangzhou");
        let CredentialSource::Alibaba(keys) = &c.credentials else {
            panic!("{:?}", c.credentials)
        };
        assert_eq!(keys.access_key_id(), "env-ALIBABA_CLOUD_ACCESS_KEY_ID");
        // OSS Tables without keys anywhere: the rest of the Alibaba chain, asked at the first
        // request (AWS warehouses fall back to the AWS default chain).
        let c = S3TablesConfig::from_props_with_env(
            &props(&[("warehouse", "acs:osstables:cn-hangzhou:1:bucket/b")]),
            |_| None,
        )
        .unwrap();
        assert!(
            matches!(c.credentials, CredentialSource::AlibabaChain(_)),
            "{:?}",
            c.credentials
        );
    }

    #[test]
    fn refusals_name_the_option() {
        for (pairs, option) in [
            (vec![("bogus", "x")], "bogus"),
            (vec![("s3tables.access-key-id", "a")], "client.region"),
            (
                vec![("client.region", "r"), ("uri", "s3tables.local")],
                "uri",
            ),
            (
                vec![("client.region", "r"), ("s3tables.access-key-id", "a")],
                "s3tables.secret-access-key",
            ),
        ] {
            let e = S3TablesConfig::from_props_with_env(&props(&pairs), |_| None).unwrap_err();
            assert!(
                e.to_string().contains(&format!("`{option}`")),
                "{pairs:?}: {e}"
            );
        }
    }
}
