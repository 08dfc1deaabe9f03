//! The REST catalog's configuration, read from Kafka Connect Iceberg sink property names (the
//! `iceberg.catalog.` prefix removed), so the connector block of the OSS Tables seed works as is.
//!
//! | key | meaning | default |
//! |---|---|---|
//! | `uri` | catalog base URL (`…/iceberg` for S3 Tables and OSS Tables) | required |
//! | `warehouse` | sent as `?warehouse=` on `GET /v1/config` (S3 Tables: the table-bucket ARN) | none |
//! | `prefix` | path prefix when the server's config names none (lakana: the environment) | none |
//! | `token` | bearer token | none |
//! | `credential` | OAuth2 client credentials, `client_id:secret` or `secret` | none |
//! | `oauth2-server-uri` | OAuth2 token endpoint | `{uri}/v1/oauth/tokens` |
//! | `scope` | OAuth2 scope | `catalog` |
//! | `rest.sigv4-enabled` | sign every request with AWS SigV4 | `false` |
//! | `rest.signing-name` | SigV4 service: `s3tables`, `osstables`, `glue`, … | `execute-api` |
//! | `rest.signing-region` | SigV4 region | `client.region`, then `s3.region` |
//! | `rest.access-key-id` / `rest.secret-access-key` / `rest.session-token` | SigV4 keys | signing name `osstables`: Function Compute's role keys (the latest invocation's, else `ALIBABA_CLOUD_ACCESS_KEY_ID` / `_SECRET` / `ALIBABA_CLOUD_SECURITY_TOKEN`), then `AWS_ACCESS_KEY_ID` / `AWS_SECRET_ACCESS_KEY` / `AWS_SESSION_TOKEN`; any other: the AWS default chain ([`crate::aws_chain`]) |
//! | `header.<name>` | extra header on every request | none |
//! | `s3.*`, `client.*` | FileIO properties for the tables' data and metadata files | none |
//! | `type`, `catalog-impl`, `io-impl`, `name` | read by whoever picks the catalog; ignored here | |
//!
//! Any other key is refused with its name. At most one of `token`, `credential` and
//! `rest.sigv4-enabled=true` may be set.

use std::collections::HashMap;
use std::fmt;

use floe_core::{Error, Result, Secret};
use floe_signing::{CredentialSource, Credentials};

/// How requests are authenticated.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AuthConfig {
    /// No authentication.
    None,
    /// `Authorization: Bearer <token>` (`token`).
    Bearer {
        /// The token.
        token: Secret,
    },
    /// OAuth2 client credentials (`credential`, `oauth2-server-uri`, `scope`); the token is
    /// fetched before the first request and again before it expires.
    OAuth2 {
        /// The token endpoint.
        server_uri: String,
        /// The client id; none when `credential` holds a bare secret.
        client_id: Option<String>,
        /// The client secret.
        client_secret: Secret,
        /// The requested scope.
        scope: String,
    },
    /// AWS SigV4 (`rest.sigv4-enabled=true`).
    SigV4 {
        /// The signing name (service), e.g. `s3tables`, `osstables`, `glue`.
        signing_name: String,
        /// The signing region, e.g. `us-east-1`.
        signing_region: String,
        /// Where the keys (and session token) to sign each request with come from.
        credentials: CredentialSource,
    },
}

/// The REST catalog's configuration; see the module doc for the keys.
#[derive(Clone, PartialEq, Eq)]
pub struct RestCatalogConfig {
    /// `uri`: the catalog's base URL without a trailing slash; required.
    pub uri: String,
    /// `warehouse`: passed to `GET /v1/config`; default none.
    pub warehouse: Option<String>,
    /// `prefix`: the path prefix used when the server's `overrides` and `defaults` name none;
    /// default none (paths are `/v1/namespaces…`).
    pub prefix: Option<String>,
    /// `token` / `credential` / `rest.*`: how requests are authenticated; default none.
    pub auth: AuthConfig,
    /// `header.<name>`: extra headers sent on every request, in key order; default none.
    pub headers: Vec<(String, String)>,
    /// `s3.*` and `client.*`: FileIO properties, merged under the server's table config.
    pub file_io_props: HashMap<String, String>,
}

impl fmt::Debug for RestCatalogConfig {
    // Header values can hold credentials: print their names only.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut io_keys: Vec<&String> = self.file_io_props.keys().collect();
        io_keys.sort();
        f.debug_struct("RestCatalogConfig")
            .field("uri", &self.uri)
            .field("warehouse", &self.warehouse)
            .field("prefix", &self.prefix)
            .field("auth", &self.auth)
            .field(
                "headers",
                &self.headers.iter().map(|(k, _)| k).collect::<Vec<_>>(),
            )
            .field("file_io_props", &io_keys)
            .finish()
    }
}

/// Keys read by whoever chooses the catalog implementation; accepted and ignored here.
const IGNORED_KEYS: &[&str] = &["type", "catalog-impl", "io-impl", "name"];

/// The SigV4 signing name the Iceberg Java client defaults to.
const DEFAULT_SIGNING_NAME: &str = "execute-api";

impl RestCatalogConfig {
    /// A configuration with no authentication and nothing else set.
    pub fn new(uri: impl Into<String>) -> Self {
        RestCatalogConfig {
            uri: uri.into().trim_end_matches('/').to_owned(),
            warehouse: None,
            prefix: None,
            auth: AuthConfig::None,
            headers: Vec::new(),
            file_io_props: HashMap::new(),
        }
    }

    /// Read the configuration from properties (see the module doc); SigV4 keys that are not
    /// set are taken from the `AWS_*` environment variables.
    pub fn from_props(props: &HashMap<String, String>) -> Result<Self> {
        Self::from_props_with_env(props, |k| std::env::var(k).ok())
    }

    /// [`RestCatalogConfig::from_props`] with the environment given as a lookup function.
    pub fn from_props_with_env(
        props: &HashMap<String, String>,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Self> {
        let mut keys: Vec<&String> = props.keys().collect();
        keys.sort();
        let mut headers = Vec::new();
        let mut file_io_props = HashMap::new();
        for key in keys {
            let value = &props[key];
            match key.as_str() {
                "uri"
                | "warehouse"
                | "prefix"
                | "token"
                | "credential"
                | "oauth2-server-uri"
                | "scope"
                | "rest.sigv4-enabled"
                | "rest.signing-region"
                | "rest.signing-name"
                | "rest.access-key-id"
                | "rest.secret-access-key"
                | "rest.session-token" => {}
                k if IGNORED_KEYS.contains(&k) => {}
                k if k.starts_with("header.") => {
                    let name = &k["header.".len()..];
                    if name.is_empty() {
                        return Err(Error::config(k, "the header name is empty"));
                    }
                    headers.push((name.to_owned(), value.clone()));
                }
                k if k.starts_with("s3.") || k.starts_with("client.") => {
                    file_io_props.insert(k.to_owned(), value.clone());
                }
                k => return Err(Error::config(k, "unknown rest catalog option")),
            }
        }
        let get = |k: &str| props.get(k).map(|v| v.trim()).filter(|v| !v.is_empty());

        let uri = get("uri").ok_or_else(|| Error::config("uri", "the rest catalog needs a uri"))?;
        if !(uri.starts_with("http://") || uri.starts_with("https://")) {
            return Err(Error::config(
                "uri",
                format!("`{uri}` is not an http(s) url"),
            ));
        }

        let sigv4 = match get("rest.sigv4-enabled") {
            None => false,
            Some(v) => parse_bool(v).ok_or_else(|| {
                Error::config("rest.sigv4-enabled", format!("`{v}` is not true or false"))
            })?,
        };
        let chosen: Vec<&str> = [
            ("token", get("token").is_some()),
            ("credential", get("credential").is_some()),
            ("rest.sigv4-enabled", sigv4),
        ]
        .iter()
        .filter(|(_, on)| *on)
        .map(|(k, _)| *k)
        .collect();
        if chosen.len() > 1 {
            return Err(Error::config(
                chosen[1],
                format!("set only one of {}", chosen.join(", ")),
            ));
        }

        let auth = if let Some(token) = get("token") {
            AuthConfig::Bearer {
                token: Secret::new(token),
            }
        } else if let Some(credential) = get("credential") {
            let (client_id, client_secret) = match credential.split_once(':') {
                Some((id, secret)) => (Some(id.to_owned()), secret.to_owned()),
                None => (None, credential.to_owned()),
            };
            if client_secret.is_empty() {
                return Err(Error::config("credential", "the client secret is empty"));
            }
            let server_uri = get("oauth2-server-uri")
                .map(str::to_owned)
                .unwrap_or_else(|| format!("{}/v1/oauth/tokens", uri.trim_end_matches('/')));
            AuthConfig::OAuth2 {
                server_uri,
                client_id,
                client_secret: Secret::new(client_secret),
                scope: get("scope").unwrap_or("catalog").to_owned(),
            }
        } else if sigv4 {
            let signing_region = get("rest.signing-region")
                .or_else(|| get("client.region"))
                .or_else(|| get("s3.region"))
                .ok_or_else(|| {
                    Error::config("rest.signing-region", "sigv4 needs a signing region")
                })?
                .to_owned();
            let signing_name = get("rest.signing-name").unwrap_or(DEFAULT_SIGNING_NAME);
            let cloud = if signing_name == "osstables" {
                Cloud::Alibaba
            } else {
                Cloud::Aws
            };
            let credentials = credentials_from(
                &get,
                &[[
                    "rest.access-key-id",
                    "rest.secret-access-key",
                    "rest.session-token",
                ]],
                cloud,
                &env,
            )?;
            AuthConfig::SigV4 {
                signing_name: signing_name.to_owned(),
                signing_region,
                credentials,
            }
        } else {
            AuthConfig::None
        };

        Ok(RestCatalogConfig {
            uri: uri.trim_end_matches('/').to_owned(),
            warehouse: get("warehouse").map(str::to_owned),
            prefix: get("prefix").map(|p| p.trim_matches('/').to_owned()),
            auth,
            headers,
            file_io_props,
        })
    }
}

/// Whose platform a SigV4 endpoint belongs to, which decides where unconfigured keys come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Cloud {
    /// OSS Tables: Function Compute's role keys.
    Alibaba,
    /// Everything else: the AWS default chain.
    Aws,
}

/// Where a SigV4 signer takes its keys: the first of `sources` (`[key id, secret, session
/// token]` property names) that sets a key id, used as it is; else for [`Cloud::Alibaba`]
/// Function Compute's role keys (the latest invocation's, else `ALIBABA_CLOUD_*` read now), then
/// keys exported as `AWS_*` (someone reaching OSS Tables from their own machine), then the rest
/// of the Alibaba credential chain ([`floe_signing::alibaba`]); else for
/// [`Cloud::Aws`] the AWS default chain. The parts of one source are never mixed with another's:
/// a session token in the environment is not attached to keys from the properties.
pub(crate) fn credentials_from<'a>(
    get: &impl Fn(&str) -> Option<&'a str>,
    sources: &[[&str; 3]],
    cloud: Cloud,
    env: &impl Fn(&str) -> Option<String>,
) -> Result<CredentialSource> {
    for [id_key, secret_key, token_key] in sources {
        if let Some(id) = get(id_key) {
            let secret = get(secret_key).ok_or_else(|| {
                Error::config(secret_key, format!("`{id_key}` is set but not its secret"))
            })?;
            let credentials = Credentials::new(id, secret);
            return Ok(CredentialSource::fixed(match get(token_key) {
                Some(token) => credentials.with_security_token(token),
                None => credentials,
            }));
        }
    }
    if cloud == Cloud::Aws {
        return Ok(crate::aws_chain::default_chain());
    }
    let nonempty = |k: &str| env(k).filter(|v| !v.is_empty());
    let alibaba = floe_signing::alibaba::default_source(env);
    if matches!(alibaba, CredentialSource::Alibaba(_)) {
        return Ok(alibaba);
    }
    if let (Some(id), Some(secret)) = (
        nonempty("AWS_ACCESS_KEY_ID"),
        nonempty("AWS_SECRET_ACCESS_KEY"),
    ) {
        return Ok(CredentialSource::fixed(
            Credentials::new(id, secret)
                .with_security_token(nonempty("AWS_SESSION_TOKEN").unwrap_or_default()),
        ));
    }
    Ok(alibaba)
}

/// Java's `Boolean.parseBoolean` plus the usual spellings of yes and no.
pub(crate) fn parse_bool(v: &str) -> Option<bool> {
    match v.trim().to_ascii_lowercase().as_str() {
        "true" | "1" | "yes" | "on" => Some(true),
        "false" | "0" | "no" | "off" => Some(false),
        _ => None,
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

    fn no_env(_: &str) -> Option<String> {
        None
    }

    #[test]
    fn reads_the_seed_connector_block() {
        // The OSS Tables seed's connector properties, `iceberg.catalog.` removed.
        let p = props(&[
            ("type", "rest"),
            (
                "uri",
                "https://cn-hangzhou-internal.oss-tables.aliyuncs.com/iceberg",
            ),
            ("rest.sigv4-enabled", "true"),
            ("rest.signing-region", "cn-hangzhou"),
            ("warehouse", "acs:osstables:cn-hangzhou:123:bucket/tb"),
            ("rest.signing-name", "osstables"),
            ("rest.access-key-id", "LTAI-id"),
            ("rest.secret-access-key", "very-secret"),
            ("io-impl", "org.apache.iceberg.aws.s3.S3FileIO"),
            (
                "s3.endpoint",
                "https://oss-cn-hangzhou-internal.aliyuncs.com",
            ),
            ("s3.access-key-id", "LTAI-id"),
            ("s3.secret-access-key", "very-secret"),
            ("s3.path-style-access", "true"),
            ("client.region", "cn-hangzhou"),
        ]);
        let c = RestCatalogConfig::from_props_with_env(&p, no_env).unwrap();
        assert_eq!(
            c.uri,
            "https://cn-hangzhou-internal.oss-tables.aliyuncs.com/iceberg"
        );
        assert_eq!(
            c.warehouse.as_deref(),
            Some("acs:osstables:cn-hangzhou:123:bucket/tb")
        );
        match &c.auth {
            AuthConfig::SigV4 {
                signing_name,
                signing_region,
                credentials,
            } => {
                assert_eq!(signing_name, "osstables");
                assert_eq!(signing_region, "cn-hangzhou");
                let CredentialSource::Static(credentials) = credentials else {
                    panic!("{credentials:?}")
                };
                assert_eq!(credentials.access_key_id(), "LTAI-id");
                assert!(credentials.security_token().is_none());
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(c.file_io_props.len(), 5);
        assert_eq!(c.file_io_props["s3.path-style-access"], "true");
        let debug = format!("{c:?}");
        assert!(!debug.contains("very-secret"), "{debug}");
    }

    #[test]
    fn auth_choices_and_defaults() {
        let c = RestCatalogConfig::from_props_with_env(
            &props(&[
                ("uri", "http://h/"),
                ("token", "t0k"),
                ("header.X-Tenant", "a"),
            ]),
            no_env,
        )
        .unwrap();
        assert_eq!(c.uri, "http://h");
        assert_eq!(
            c.auth,
            AuthConfig::Bearer {
                token: "t0k".into()
            }
        );
        assert_eq!(c.headers, vec![("X-Tenant".to_owned(), "a".to_owned())]);

        let c = RestCatalogConfig::from_props_with_env(
            &props(&[("uri", "http://h"), ("credential", "id:sec")]),
            no_env,
        )
        .unwrap();
        assert_eq!(
            c.auth,
            AuthConfig::OAuth2 {
                server_uri: "http://h/v1/oauth/tokens".into(),
                client_id: Some("id".into()),
                client_secret: "sec".into(),
                scope: "catalog".into(),
            }
        );

        let env = |k: &str| match k {
            "AWS_ACCESS_KEY_ID" => Some("AKENV".to_owned()),
            "AWS_SECRET_ACCESS_KEY" => Some("secenv".to_owned()),
            "AWS_SESSION_TOKEN" => Some("sess".to_owned()),
            _ => None,
        };
        let c = RestCatalogConfig::from_props_with_env(
            &props(&[
                ("uri", "https://h"),
                ("rest.sigv4-enabled", "true"),
                ("client.region", "eu-west-1"),
            ]),
            env,
        )
        .unwrap();
        match c.auth {
            AuthConfig::SigV4 {
                signing_name,
                signing_region,
                credentials,
            } => {
                assert_eq!(signing_name, "execute-api");
                assert_eq!(signing_region, "eu-west-1");
                // AWS keys come from the default chain (which reads AWS_* first), one per process.
                assert!(matches!(credentials, CredentialSource::Aws(_)));
                assert_eq!(credentials, crate::aws_chain::default_chain());
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn function_compute_role_keys_sign_an_oss_tables_catalog() {
        // What FC sets for a function with a role; no AWS_* variables there.
        let fc = |k: &str| match k {
            "ALIBABA_CLOUD_ACCESS_KEY_ID" => Some("STS.fc-role".to_owned()),
            "ALIBABA_CLOUD_ACCESS_KEY_SECRET" => Some("fc-secret".to_owned()),
            "ALIBABA_CLOUD_SECURITY_TOKEN" => Some("fc-token".to_owned()),
            _ => None,
        };
        let c = RestCatalogConfig::from_props_with_env(
            &props(&[
                ("uri", "https://cn-hangzhou.oss-tables.aliyuncs.com/iceberg"),
                ("rest.sigv4-enabled", "true"),
                ("rest.signing-name", "osstables"),
                ("rest.signing-region", "cn-hangzhou"),
            ]),
            fc,
        )
        .unwrap();
        let AuthConfig::SigV4 {
            credentials: CredentialSource::Alibaba(credentials),
            ..
        } = c.auth
        else {
            panic!("{:?}", c.auth)
        };
        assert_eq!(credentials.access_key_id(), "STS.fc-role");
        assert_eq!(
            credentials.security_token().map(Secret::expose),
            Some("fc-token")
        );
        // Without keys anywhere the rest of the Alibaba chain is asked, at the first request.
        let c = RestCatalogConfig::from_props_with_env(
            &props(&[
                ("uri", "https://h"),
                ("rest.sigv4-enabled", "true"),
                ("rest.signing-name", "osstables"),
                ("rest.signing-region", "cn-hangzhou"),
            ]),
            no_env,
        )
        .unwrap();
        assert!(
            matches!(
                c.auth,
                AuthConfig::SigV4 {
                    credentials: CredentialSource::AlibabaChain(_),
                    ..
                }
            ),
            "{:?}",
            c.auth
        );
    }

    #[test]
    fn an_environment_session_token_is_not_attached_to_configured_keys() {
        let env = |k: &str| (k == "AWS_SESSION_TOKEN").then(|| "lambda-token".to_owned());
        let c = RestCatalogConfig::from_props_with_env(
            &props(&[
                ("uri", "https://h"),
                ("rest.sigv4-enabled", "true"),
                ("rest.signing-region", "r"),
                ("rest.access-key-id", "AK"),
                ("rest.secret-access-key", "SK"),
            ]),
            env,
        )
        .unwrap();
        match c.auth {
            AuthConfig::SigV4 { credentials, .. } => {
                assert!(credentials.configured().unwrap().security_token().is_none())
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn refusals_name_the_option() {
        for (pairs, option) in [
            (vec![], "uri"),
            (vec![("uri", "ftp://h")], "uri"),
            (vec![("uri", "http://h"), ("bogus", "1")], "bogus"),
            (vec![("uri", "http://h"), ("header.", "1")], "header."),
            (
                vec![("uri", "http://h"), ("rest.sigv4-enabled", "maybe")],
                "rest.sigv4-enabled",
            ),
            (
                vec![("uri", "http://h"), ("rest.sigv4-enabled", "true")],
                "rest.signing-region",
            ),
            (
                vec![("uri", "http://h"), ("token", "t"), ("credential", "c")],
                "credential",
            ),
            (
                vec![("uri", "http://h"), ("credential", "id:")],
                "credential",
            ),
        ] {
            let e = RestCatalogConfig::from_props_with_env(&props(&pairs), no_env).unwrap_err();
            assert_eq!(e.kind(), floe_core::ErrorKind::Config, "{pairs:?}");
            assert!(
                e.to_string().contains(&format!("`{option}`")),
                "{pairs:?}: {e}"
            );
        }
    }
}
