//! The MaxCompute sink's options, with SeaTunnel's names and defaults
//! (`seeds/seatunnel-maxcompute-sink.txt`).
//!
//! Unknown keys are rejected (serde names the key), and [`MaxComputeSinkConfig::validate`] checks
//! what serde cannot, naming the option. What needs the table's metadata (an `upsert` strategy
//! needs a primary key) is checked by [`MaxComputeSinkConfig::check_table`] at start.

use std::str::FromStr;

use floe_core::{Error, Result, Secret};
use floe_signing::{CredentialSource, Credentials};
use serde::Deserialize;

use crate::client::{ClientConfig, check_http_url};
use crate::datetime::DateTimeFormat;
use crate::meta::{TableId, TableMeta};
use crate::partition::{PartitionSpec, is_identifier};
use crate::save_mode::{DataSaveMode, SchemaSaveMode};
use crate::template::{DEFAULT_CREATE_TEMPLATE, check_template};
use crate::tunnel::TunnelOptions;

/// Environment variable holding the access key id (FC sets it for the function's role).
pub const ENV_ACCESS_KEY_ID: &str = "ALIBABA_CLOUD_ACCESS_KEY_ID";
/// Environment variable holding the access key secret.
pub const ENV_ACCESS_KEY_SECRET: &str = "ALIBABA_CLOUD_ACCESS_KEY_SECRET";
/// Environment variable holding the STS token.
pub const ENV_SECURITY_TOKEN: &str = "ALIBABA_CLOUD_SECURITY_TOKEN";

/// `insert_strategy`: which tunnel session inserts go through.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum InsertStrategy {
    /// Upload sessions (append or overwrite).
    #[default]
    Upload,
    /// Upsert sessions (primary-key tables).
    Upsert,
}

/// `tunnel_format`: how upload blocks are encoded (floe's own option; SeaTunnel's sink has only
/// the record format).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum TunnelFormat {
    /// The record (protobuf) format.
    #[default]
    Record,
    /// Arrow record batches ([`crate::arrow_block`]); upsert sessions keep the record format.
    Arrow,
}

impl FromStr for TunnelFormat {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        match s.trim().to_ascii_lowercase().as_str() {
            "record" => Ok(TunnelFormat::Record),
            "arrow" => Ok(TunnelFormat::Arrow),
            _ => Err(Error::config(
                "tunnel_format",
                format!("must be record or arrow, got `{s}`"),
            )),
        }
    }
}

/// The sink's options. `Debug` hides `accesskey` and `sts_token`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MaxComputeSinkConfig {
    /// `accessId`: the AccessKey id; default none (then the credential chain).
    #[serde(rename = "accessId", default)]
    pub access_id: Option<String>,
    /// `accesskey`: the AccessKey secret; default none.
    #[serde(default)]
    pub accesskey: Option<Secret>,
    /// `sts_token`: an STS token; needs `accessId` and `accesskey`; default none.
    #[serde(default)]
    pub sts_token: Option<Secret>,
    /// `endpoint`: the REST endpoint, starting with http(s); required.
    pub endpoint: String,
    /// `project`: the MaxCompute project; required.
    pub project: String,
    /// `table_name`: the target table; may hold placeholders (`${table_name}`, `${database}`,
    /// `${bucket}`, `${prefix}`…) filled per event; required.
    pub table_name: String,
    /// `schema_name`: the schema between project and table; default none (the default schema).
    #[serde(default)]
    pub schema_name: Option<String>,
    /// `partition_spec`: the partition written, e.g. `ds='20220101'`; default none.
    #[serde(default)]
    pub partition_spec: Option<String>,
    /// `overwrite`: replace the table's (or partition's) contents at commit; default false.
    #[serde(default)]
    pub overwrite: bool,
    /// `schema_save_mode`; default `CREATE_SCHEMA_WHEN_NOT_EXIST`.
    #[serde(default, deserialize_with = "named_enum")]
    pub schema_save_mode: SchemaSaveMode,
    /// `data_save_mode`; default `APPEND_DATA`.
    #[serde(default, deserialize_with = "named_enum")]
    pub data_save_mode: DataSaveMode,
    /// `custom_sql`: run before writing when `data_save_mode = CUSTOM_PROCESSING`; default none.
    #[serde(default)]
    pub custom_sql: Option<String>,
    /// `save_mode_create_template`: the DDL that creates the table; default
    /// [`DEFAULT_CREATE_TEMPLATE`].
    #[serde(default = "default_template")]
    pub save_mode_create_template: String,
    /// `datetime_format`: how timestamps are written into text columns (and text read into
    /// time columns); default `yyyy-MM-dd HH:mm:ss`.
    #[serde(default = "default_datetime_format")]
    pub datetime_format: String,
    /// `tunnel_endpoint`: the tunnel URL; default none (asked of the service, else
    /// `dt.<region>.maxcompute.aliyun.com`).
    #[serde(default)]
    pub tunnel_endpoint: Option<String>,
    /// `tunnel_name`: the tunnel quota (`quotaName`); default none (the shared quota).
    #[serde(default)]
    pub tunnel_name: Option<String>,
    /// `insert_strategy`: `upload` or `upsert`; default `upload`.
    #[serde(default, deserialize_with = "named_enum")]
    pub insert_strategy: InsertStrategy,
    /// `tunnel_format`: `record` or `arrow`; default `record`.
    #[serde(default, deserialize_with = "named_enum")]
    pub tunnel_format: TunnelFormat,
    /// `multi_table_sink_replica`: SeaTunnel's writers per table in multi-table mode; only 1
    /// (the default) is accepted, see [`MaxComputeSinkConfig::validate`].
    #[serde(default = "one")]
    pub multi_table_sink_replica: u32,
}

impl FromStr for InsertStrategy {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        match s.trim().to_ascii_lowercase().as_str() {
            "upload" => Ok(InsertStrategy::Upload),
            "upsert" => Ok(InsertStrategy::Upsert),
            _ => Err(Error::config(
                "insert_strategy",
                format!("must be upload or upsert, got `{s}`"),
            )),
        }
    }
}

impl FromStr for SchemaSaveMode {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        match s.trim().to_ascii_uppercase().as_str() {
            "RECREATE_SCHEMA" => Ok(SchemaSaveMode::RecreateSchema),
            "CREATE_SCHEMA_WHEN_NOT_EXIST" => Ok(SchemaSaveMode::CreateSchemaWhenNotExist),
            "ERROR_WHEN_SCHEMA_NOT_EXIST" => Ok(SchemaSaveMode::ErrorWhenSchemaNotExist),
            "IGNORE" => Ok(SchemaSaveMode::Ignore),
            _ => Err(Error::config(
                "schema_save_mode",
                format!(
                    "must be RECREATE_SCHEMA, CREATE_SCHEMA_WHEN_NOT_EXIST, ERROR_WHEN_SCHEMA_NOT_EXIST or IGNORE, got `{s}`"
                ),
            )),
        }
    }
}

impl FromStr for DataSaveMode {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        match s.trim().to_ascii_uppercase().as_str() {
            "DROP_DATA" => Ok(DataSaveMode::DropData),
            "APPEND_DATA" => Ok(DataSaveMode::AppendData),
            "CUSTOM_PROCESSING" => Ok(DataSaveMode::CustomProcessing),
            "ERROR_WHEN_DATA_EXISTS" => Ok(DataSaveMode::ErrorWhenDataExists),
            _ => Err(Error::config(
                "data_save_mode",
                format!(
                    "must be DROP_DATA, APPEND_DATA, CUSTOM_PROCESSING or ERROR_WHEN_DATA_EXISTS, got `{s}`"
                ),
            )),
        }
    }
}

/// Deserialize an option's enum through its `FromStr` (whose error names the option).
fn named_enum<'de, D, T>(d: D) -> std::result::Result<T, D::Error>
where
    D: serde::Deserializer<'de>,
    T: FromStr<Err = Error>,
{
    let s = String::deserialize(d)?;
    s.parse()
        .map_err(|e: Error| serde::de::Error::custom(e.message()))
}

fn default_template() -> String {
    DEFAULT_CREATE_TEMPLATE.to_owned()
}

fn default_datetime_format() -> String {
    "yyyy-MM-dd HH:mm:ss".to_owned()
}

fn one() -> u32 {
    1
}

impl MaxComputeSinkConfig {
    /// Parse a JSON object of options (unknown keys are an error naming the key).
    pub fn from_json(text: &str) -> Result<Self> {
        serde_json::from_str(text).map_err(|e| {
            Error::new(
                floe_core::ErrorKind::Config,
                format!("invalid maxcompute sink options: {e}"),
            )
        })
    }

    /// Check the options that need no server; errors name the option.
    pub fn validate(&self) -> Result<()> {
        check_http_url("endpoint", &self.endpoint)?;
        if self.project.trim().is_empty() {
            return Err(Error::config("project", "must not be empty"));
        }
        if self.table_name.trim().is_empty() {
            return Err(Error::config("table_name", "must not be empty"));
        }
        if !self.table_name.contains("${") && !is_identifier(&self.table_name) {
            return Err(Error::config(
                "table_name",
                format!(
                    "`{}` is not a table name (letters, digits and `_`)",
                    self.table_name
                ),
            ));
        }
        if let Some(s) = self.schema_name.as_deref().filter(|s| !s.is_empty())
            && !is_identifier(s)
        {
            return Err(Error::config(
                "schema_name",
                format!("`{s}` is not a schema name"),
            ));
        }
        let has_id = self.access_id.as_deref().is_some_and(|s| !s.is_empty());
        let has_key = self.accesskey.as_ref().is_some_and(|s| !s.is_empty());
        let has_token = self.sts_token.as_ref().is_some_and(|s| !s.is_empty());
        if has_token && !(has_id && has_key) {
            return Err(Error::config(
                "sts_token",
                "needs both accessId and accesskey",
            ));
        }
        if has_id != has_key {
            let (option, other) = if has_id {
                ("accesskey", "accessId")
            } else {
                ("accessId", "accesskey")
            };
            return Err(Error::config(
                option,
                format!("must be set together with {other}"),
            ));
        }
        self.partition()?;
        if self.data_save_mode == DataSaveMode::CustomProcessing
            && self
                .custom_sql
                .as_deref()
                .is_none_or(|s| s.trim().is_empty())
        {
            return Err(Error::config(
                "custom_sql",
                "is required when data_save_mode = CUSTOM_PROCESSING",
            ));
        }
        if self.insert_strategy == InsertStrategy::Upsert && self.overwrite {
            return Err(Error::config(
                "overwrite",
                "cannot be true with insert_strategy = upsert",
            ));
        }
        if self.multi_table_sink_replica != 1 {
            return Err(Error::config(
                "multi_table_sink_replica",
                format!(
                    "{}: floe writes each table with one writer per batch and commits it with \
                     one committer at a time; its parallel writers are its function instances \
                     (each stages its own batches). Leave the option out or set it to 1",
                    self.multi_table_sink_replica
                ),
            ));
        }
        DateTimeFormat::parse(&self.datetime_format)
            .map_err(|e| Error::config("datetime_format", e.message()))?;
        if let Some(t) = self.tunnel_endpoint.as_deref().filter(|t| !t.is_empty()) {
            check_http_url("tunnel_endpoint", t)?;
        }
        check_template(&self.save_mode_create_template)?;
        Ok(())
    }

    /// The partition spec, if set.
    pub fn partition(&self) -> Result<Option<PartitionSpec>> {
        self.partition_spec
            .as_deref()
            .filter(|s| !s.trim().is_empty())
            .map(|s| {
                s.parse()
                    .map_err(|e: Error| Error::config("partition_spec", e.message()))
            })
            .transpose()
    }

    /// `table_name` with its placeholders filled by `vars` (an unknown placeholder or a name
    /// that is not a table name is an error naming `table_name`).
    pub fn resolve_table_name(&self, vars: impl Fn(&str) -> Option<String>) -> Result<String> {
        let mut out = String::new();
        let mut rest = self.table_name.as_str();
        while let Some(start) = rest.find("${") {
            out.push_str(&rest[..start]);
            let after = &rest[start + 2..];
            let end = after.find('}').ok_or_else(|| {
                Error::config(
                    "table_name",
                    format!("`{}` has an unclosed placeholder", self.table_name),
                )
            })?;
            let name = &after[..end];
            let value = vars(name).ok_or_else(|| {
                Error::config(
                    "table_name",
                    format!("no value for placeholder `${{{name}}}`"),
                )
            })?;
            out.push_str(&value);
            rest = &after[end + 1..];
        }
        out.push_str(rest);
        if !is_identifier(&out) {
            return Err(Error::config(
                "table_name",
                format!("`{out}` (from `{}`) is not a table name", self.table_name),
            ));
        }
        Ok(out)
    }

    /// The target table for a resolved name.
    pub fn table_id(&self, name: &str) -> TableId {
        TableId::new(&self.project, name).with_schema(self.schema_name.clone())
    }

    /// Credentials: `accessId`/`accesskey`/`sts_token` when set (used as they are), else the
    /// platform's: on Function Compute the keys of the latest invocation, else the environment
    /// (`ALIBABA_CLOUD_ACCESS_KEY_ID`, `…_SECRET`, `ALIBABA_CLOUD_SECURITY_TOKEN`) read now
    /// through `env` (pass `|k| std::env::var(k).ok()`), else the rest of the Alibaba credential
    /// chain ([`floe_signing::alibaba`]: OIDC, profiles, the instance's RAM role).
    pub fn credentials(&self, env: impl Fn(&str) -> Option<String>) -> Result<CredentialSource> {
        if let (Some(id), Some(key)) = (
            self.access_id.as_deref().filter(|s| !s.is_empty()),
            self.accesskey.as_ref().filter(|s| !s.is_empty()),
        ) {
            let c = Credentials::new(id, key.clone());
            return Ok(CredentialSource::fixed(match &self.sts_token {
                Some(t) => c.with_security_token(t.clone()),
                None => c,
            }));
        }
        Ok(floe_signing::alibaba::default_source(env))
    }

    /// The REST client configuration.
    pub fn client_config(&self, credentials: impl Into<CredentialSource>) -> ClientConfig {
        ClientConfig::new(
            self.endpoint.trim_end_matches('/'),
            &self.project,
            credentials,
        )
    }

    /// The tunnel options.
    pub fn tunnel_options(&self) -> TunnelOptions {
        TunnelOptions {
            endpoint: self.tunnel_endpoint.clone().filter(|s| !s.is_empty()),
            quota_name: self.tunnel_name.clone().filter(|s| !s.is_empty()),
            compression: None,
        }
    }

    /// Check the table against the options: `upsert` needs a transactional table with a
    /// primary key; `partition_spec` must name the table's partition columns.
    pub fn check_table(&self, table: &TableMeta) -> Result<()> {
        if self.insert_strategy == InsertStrategy::Upsert && table.primary_key.is_empty() {
            return Err(Error::config(
                "insert_strategy",
                format!(
                    "upsert needs a primary key, and maxcompute table {} has none",
                    table.id
                ),
            ));
        }
        if let Some(p) = self.partition()? {
            let names: Vec<&str> = table
                .partition_columns
                .iter()
                .map(|c| c.name.as_str())
                .collect();
            let given: Vec<&str> = p.parts().iter().map(|(k, _)| k.as_str()).collect();
            let same = names.len() == given.len()
                && names
                    .iter()
                    .zip(&given)
                    .all(|(a, b)| a.eq_ignore_ascii_case(b));
            if !same {
                return Err(Error::config(
                    "partition_spec",
                    format!(
                        "names [{}] but maxcompute table {} is partitioned by [{}]",
                        given.join(","),
                        table.id,
                        names.join(",")
                    ),
                ));
            }
        } else if table.is_partitioned() {
            return Err(Error::config(
                "partition_spec",
                format!("is required: maxcompute table {} is partitioned", table.id),
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(extra: &str) -> Result<MaxComputeSinkConfig> {
        let table = if extra.contains("table_name") {
            ""
        } else {
            r#","table_name":"t""#
        };
        let text = format!(
            r#"{{"endpoint":"http://service.cn-hangzhou.maxcompute.aliyun.com/api","project":"p"{table}{extra}}}"#
        );
        let c = MaxComputeSinkConfig::from_json(&text)?;
        c.validate()?;
        Ok(c)
    }

    #[test]
    fn defaults_follow_the_seed() {
        let c = parse("").unwrap();
        assert_eq!(c.schema_save_mode, SchemaSaveMode::CreateSchemaWhenNotExist);
        assert_eq!(c.data_save_mode, DataSaveMode::AppendData);
        assert_eq!(c.insert_strategy, InsertStrategy::Upload);
        assert_eq!(c.datetime_format, "yyyy-MM-dd HH:mm:ss");
        assert_eq!(c.save_mode_create_template, DEFAULT_CREATE_TEMPLATE);
        assert_eq!(c.multi_table_sink_replica, 1);
        assert!(!c.overwrite);
    }

    #[test]
    fn bad_options_are_named() {
        for (extra, option) in [
            (r#","tabel":"x""#, "tabel"),
            (r#","sts_token":"tok""#, "sts_token"),
            (r#","accessId":"ak""#, "accesskey"),
            (r#","partition_spec":"ds""#, "partition_spec"),
            (r#","data_save_mode":"CUSTOM_PROCESSING""#, "custom_sql"),
            (
                r#","insert_strategy":"upsert","overwrite":true"#,
                "overwrite",
            ),
            (r#","insert_strategy":"merge""#, "insert_strategy"),
            (
                r#","multi_table_sink_replica":0"#,
                "multi_table_sink_replica",
            ),
            (
                r#","multi_table_sink_replica":4"#,
                "multi_table_sink_replica",
            ),
            (r#","datetime_format":"yyyy-QQ""#, "datetime_format"),
            (r#","tunnel_endpoint":"dt.example""#, "tunnel_endpoint"),
            (
                r#","save_mode_create_template":"CREATE ${nope}""#,
                "save_mode_create_template",
            ),
            (r#","schema_save_mode":"SOMETIMES""#, "schema_save_mode"),
        ] {
            let e = parse(extra).unwrap_err();
            assert!(e.to_string().contains(option), "{extra}: {e}");
        }
    }

    #[test]
    fn credentials_come_from_options_then_the_environment() {
        let c = parse(r#","accessId":"AK","accesskey":"SK","sts_token":"TOK""#).unwrap();
        let source = c.credentials(|_| None).unwrap();
        assert!(matches!(source, CredentialSource::Static(_)), "{source:?}");
        let creds = source.configured().unwrap();
        assert_eq!(creds.access_key_id(), "AK");
        assert_eq!(creds.security_token().map(Secret::expose), Some("TOK"));
        assert!(!format!("{c:?}").contains("SK\"") && !format!("{c:?}").contains("TOK"));
        let c = parse("").unwrap();
        let env = |k: &str| match k {
            ENV_ACCESS_KEY_ID => Some("EAK".to_owned()),
            ENV_ACCESS_KEY_SECRET => Some("ESK".to_owned()),
            ENV_SECURITY_TOKEN => Some("ETOK".to_owned()),
            _ => None,
        };
        let source = c.credentials(env).unwrap();
        assert!(matches!(source, CredentialSource::Alibaba(_)), "{source:?}");
        let creds = source.configured().unwrap();
        assert_eq!(creds.access_key_id(), "EAK");
        assert_eq!(creds.security_token().map(Secret::expose), Some("ETOK"));
        // No keys anywhere: the rest of the Alibaba chain, asked at the first request.
        let source = c.credentials(|_| None).unwrap();
        assert!(
            matches!(source, CredentialSource::AlibabaChain(_)),
            "{source:?}"
        );
    }

    #[test]
    fn table_name_placeholders_resolve() {
        let c = parse(r#","table_name":"${table_name}_sink""#).unwrap();
        let name = c
            .resolve_table_name(|k| (k == "table_name").then(|| "orders".to_owned()))
            .unwrap();
        assert_eq!(name, "orders_sink");
        assert!(c.resolve_table_name(|_| None).is_err());
        assert!(c.resolve_table_name(|_| Some("a-b".into())).is_err());
    }
}
