//! `floe tables <s3tables call>`: the seed's `aws s3tables …` / `ossutil tables-api …` steps for
//! S3 Tables and OSS Tables (its S3 Tables-compatible API), through
//! [`floe_iceberg::s3tables::S3TablesAdmin`].
//!
//! Arguments are the AWS CLI's (`--table-bucket-arn`, `--namespace`, `--name`, `--format`,
//! `--metadata file://schema.json`, `--cli-input-json file://create-table.json`, `--type`,
//! `--value`), and so is the output: the answer as indented JSON (ARNs printed), nothing for
//! the `put-…` calls.
//!
//! Where the endpoint, region and keys come from, first found wins:
//!
//! | what | from |
//! |---|---|
//! | endpoint | `--endpoint`; the `--config` file's `iceberg.catalog.uri` when its catalog is `s3tables`, or its host when it is OSS Tables' Iceberg REST endpoint (`https://<region>-internal.oss-tables.aliyuncs.com/iceberg` → `https://<region>-internal.oss-tables.aliyuncs.com`); else `https://s3tables.<region>.amazonaws.com` |
//! | region | `--region`; the config's `catalog.s3tables.signing-region`, `catalog.rest.signing-region` or `catalog.client.region`; `AWS_REGION`, `AWS_DEFAULT_REGION` |
//! | signature | `--signature`; the config's `catalog.s3tables.signature`; `oss-v4` (OSS4-HMAC-SHA256, product `osstables`, as ossutil `tables-api` signs) for an `acs:` warehouse or an `*.oss-tables.aliyuncs.com` endpoint, else `sigv4` (as the AWS CLI signs) |
//! | keys | the config's `catalog.s3tables.*`, `catalog.rest.*` (OSS Tables' connector block) or `catalog.s3.*` keys; `AWS_ACCESS_KEY_ID` / `AWS_SECRET_ACCESS_KEY` / `AWS_SESSION_TOKEN` |
//!
//! The config's `catalog.s3.*` and `catalog.client.*` options also reach the FileIO that
//! writes a new table's first metadata file when the server does not (moto).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Args;
use floe_core::{Error, Result};
use floe_iceberg::CatalogKind;
use floe_iceberg::s3tables::S3TablesAdmin;
use serde_json::Value;

/// Where the S3 Tables API is and how to sign for it.
#[derive(Debug, Args)]
pub struct AdminArgs {
    /// The control-plane endpoint, e.g. `https://s3tables.us-east-1.amazonaws.com` or OSS
    /// Tables' `https://cn-hangzhou.oss-tables.aliyuncs.com`.
    #[arg(long)]
    pub endpoint: Option<String>,
    /// The signing region.
    #[arg(long)]
    pub region: Option<String>,
    /// A configuration file whose `[iceberg]` catalog gives endpoint, region and keys (only
    /// that section is read: the seed's connector block alone will do).
    #[arg(short, long)]
    pub config: Option<PathBuf>,
    /// How requests are signed: `oss-v4` (OSS4-HMAC-SHA256, product `osstables`, as ossutil
    /// `tables-api` signs) or `sigv4` (as the AWS CLI signs). Default: `oss-v4` for an OSS
    /// Tables endpoint or an `acs:` warehouse, else `sigv4`.
    #[arg(long, value_parser = ["oss-v4", "sigv4"])]
    pub signature: Option<String>,
}

/// `create-table-bucket`.
#[derive(Debug, Args)]
pub struct CreateTableBucketArgs {
    #[command(flatten)]
    pub admin: AdminArgs,
    /// The table bucket's name.
    #[arg(long)]
    pub name: String,
}

/// `create-namespace`.
#[derive(Debug, Args)]
pub struct CreateNamespaceArgs {
    #[command(flatten)]
    pub admin: AdminArgs,
    /// The table bucket's ARN.
    #[arg(long)]
    pub table_bucket_arn: String,
    /// The namespace.
    #[arg(long)]
    pub namespace: String,
}

/// `create-table`.
#[derive(Debug, Args)]
pub struct CreateTableArgs {
    #[command(flatten)]
    pub admin: AdminArgs,
    /// The table bucket's ARN.
    #[arg(long)]
    pub table_bucket_arn: Option<String>,
    /// The namespace.
    #[arg(long)]
    pub namespace: Option<String>,
    /// The table's name.
    #[arg(long)]
    pub name: Option<String>,
    /// The table format; only `ICEBERG`.
    #[arg(long)]
    pub format: Option<String>,
    /// The schema document `{"iceberg":{"schema":{"fields":[…]}}}`: inline JSON or
    /// `file://schema.json`.
    #[arg(long)]
    pub metadata: Option<String>,
    /// Every argument as one JSON document (`file://create-table.json` or inline), as the AWS
    /// CLI takes it: `{"tableBucketARN","namespace","name","format","metadata"}`; arguments
    /// given on the command line win.
    #[arg(long)]
    pub cli_input_json: Option<String>,
}

/// Calls naming one table.
#[derive(Debug, Args)]
pub struct TableArgs {
    #[command(flatten)]
    pub admin: AdminArgs,
    /// The table bucket's ARN.
    #[arg(long)]
    pub table_bucket_arn: String,
    /// The namespace.
    #[arg(long)]
    pub namespace: String,
    /// The table's name.
    #[arg(long)]
    pub name: String,
}

/// `put-table-maintenance-configuration`.
#[derive(Debug, Args)]
pub struct PutTableMaintenanceArgs {
    #[command(flatten)]
    pub table: TableArgs,
    /// `icebergCompaction` or `icebergSnapshotManagement`.
    #[arg(long = "type")]
    pub kind: String,
    /// The configuration, e.g.
    /// `{"status":"enabled","settings":{"icebergCompaction":{"targetFileSizeMB":256}}}`
    /// (inline or `file://…`).
    #[arg(long)]
    pub value: String,
}

/// Calls naming one table bucket.
#[derive(Debug, Args)]
pub struct BucketArgs {
    #[command(flatten)]
    pub admin: AdminArgs,
    /// The table bucket's ARN.
    #[arg(long)]
    pub table_bucket_arn: String,
}

/// `put-table-bucket-maintenance-configuration`.
#[derive(Debug, Args)]
pub struct PutBucketMaintenanceArgs {
    #[command(flatten)]
    pub bucket: BucketArgs,
    /// `icebergUnreferencedFileRemoval`.
    #[arg(long = "type")]
    pub kind: String,
    /// The configuration, e.g.
    /// `{"status":"enabled","settings":{"icebergUnreferencedFileRemoval":{"unreferencedDays":4,"nonCurrentDays":10}}}`
    /// (inline or `file://…`).
    #[arg(long)]
    pub value: String,
}

/// Catalog properties that carry over from a configuration file to the admin calls.
fn carried(kind: CatalogKind, key: &str) -> Option<String> {
    let mapped = match key {
        "uri" if kind == CatalogKind::S3Tables => "uri",
        "rest.access-key-id" => "s3tables.access-key-id",
        "rest.secret-access-key" => "s3tables.secret-access-key",
        "rest.session-token" => "s3tables.session-token",
        "rest.signing-region" => "s3tables.signing-region",
        k if k.starts_with("s3tables.") || k.starts_with("s3.") || k.starts_with("client.") => k,
        _ => return None,
    };
    Some(mapped.to_owned())
}

/// `https://<host>` of an OSS Tables Iceberg REST uri (`https://<host>/iceberg`, host under
/// `oss-tables.aliyuncs.com`), None for any other uri.
fn oss_tables_host(uri: &str) -> Option<String> {
    let (scheme, rest) = uri.trim().split_once("://")?;
    let (host, path) = rest.split_once('/').unwrap_or((rest, ""));
    (host.ends_with(".oss-tables.aliyuncs.com") && path.trim_end_matches('/') == "iceberg")
        .then(|| format!("{scheme}://{host}"))
}

/// The admin client for these arguments; see the module doc.
fn admin(args: &AdminArgs) -> Result<S3TablesAdmin> {
    admin_with_env(args, |k| std::env::var(k).ok())
}

fn admin_props(
    args: &AdminArgs,
    env: impl Fn(&str) -> Option<String>,
) -> Result<HashMap<String, String>> {
    let mut props = HashMap::new();
    if let Some(path) = &args.config {
        let catalog = catalog_props(path)?;
        let kind =
            floe_iceberg::CatalogConfig::from_props("floe", catalog.clone(), Path::new("."))?.kind;
        // The s3tables.* names win over the rest.* ones they stand for.
        let mut keys: Vec<&String> = catalog.keys().collect();
        keys.sort_by_key(|k| k.starts_with("s3tables."));
        for k in keys {
            if let Some(key) = carried(kind, k) {
                props.insert(key, catalog[k].clone());
            }
        }
        // OSS Tables' connector block names its Iceberg REST endpoint
        // (`https://<region>[-internal].oss-tables.aliyuncs.com/iceberg`); the management
        // calls go to the same host without `/iceberg`, as the seed's `--endpoint` does.
        if let Some(uri) = catalog.get("uri").filter(|_| kind == CatalogKind::Rest)
            && let Some(host) = oss_tables_host(uri)
        {
            props.insert("uri".into(), host);
        }
    }
    if let Some(e) = &args.endpoint {
        props.insert("uri".into(), e.clone());
    }
    if let Some(r) = &args.region {
        props.insert("s3tables.signing-region".into(), r.clone());
        props.insert("client.region".into(), r.clone());
    }
    if let Some(sig) = &args.signature {
        props.insert("s3tables.signature".into(), sig.clone());
    }
    let has_region = ["s3tables.signing-region", "client.region"]
        .iter()
        .any(|k| props.contains_key(*k));
    if !has_region
        && let Some(r) = env("AWS_REGION")
            .or_else(|| env("AWS_DEFAULT_REGION"))
            .filter(|r| !r.is_empty())
    {
        props.insert("client.region".into(), r);
    }
    Ok(props)
}

/// The `catalog.*` options of the file's `[iceberg]` section (TOML or properties), `${env:…}`
/// expanded; nothing else of the file is read.
fn catalog_props(path: &Path) -> Result<HashMap<String, String>> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        Error::from(e).while_doing(format!("failed to read config {}", path.display()))
    })?;
    let properties = path.extension().is_some_and(|e| e == "properties");
    let raw = floe_pipeline::config::parse(&text, properties)?;
    let mut out = HashMap::new();
    if let Some(section) = raw.sections.get("iceberg") {
        for (k, v) in section {
            if let Some(rest) = k.strip_prefix("catalog.") {
                let v = floe_pipeline::config::as_string(v)
                    .ok_or_else(|| Error::config(&format!("iceberg.{k}"), "expected a string"))?;
                out.insert(rest.to_owned(), v);
            }
        }
    }
    Ok(out)
}

fn admin_with_env(args: &AdminArgs, env: impl Fn(&str) -> Option<String>) -> Result<S3TablesAdmin> {
    let props = admin_props(args, &env)?;
    if !props.contains_key("client.region") && !props.contains_key("s3tables.signing-region") {
        return Err(Error::config(
            "--region",
            "no region: pass --region, set AWS_REGION, or use a --config whose catalog names one",
        ));
    }
    S3TablesAdmin::from_props(&props)
}

/// An argument that is JSON inline or `file://path` (as the AWS CLI reads them).
fn json_arg(option: &str, value: &str) -> Result<Value> {
    let text = match value.strip_prefix("file://") {
        Some(path) => std::fs::read_to_string(path)
            .map_err(|e| Error::config(option, format!("cannot read {path}: {e}")))?,
        None => value.to_owned(),
    };
    serde_json::from_str(&text).map_err(|e| Error::config(option, format!("not valid json: {e}")))
}

/// Print an answer as the AWS CLI does: indented JSON, nothing for an empty answer.
fn print(answer: &Value) -> Result<ExitCode> {
    if answer.as_object().is_some_and(|o| o.is_empty()) || answer.is_null() {
        return Ok(ExitCode::SUCCESS);
    }
    let mut out = Vec::new();
    let fmt = serde_json::ser::PrettyFormatter::with_indent(b"    ");
    let mut ser = serde_json::Serializer::with_formatter(&mut out, fmt);
    serde::Serialize::serialize(answer, &mut ser)
        .map_err(|e| Error::unexpected("failed to print the answer").with_source(e))?;
    println!("{}", String::from_utf8_lossy(&out));
    Ok(ExitCode::SUCCESS)
}

/// `create-table-bucket`.
pub async fn create_table_bucket(args: CreateTableBucketArgs) -> Result<ExitCode> {
    print(&admin(&args.admin)?.create_table_bucket(&args.name).await?)
}

/// `create-namespace`.
pub async fn create_namespace(args: CreateNamespaceArgs) -> Result<ExitCode> {
    print(
        &admin(&args.admin)?
            .create_namespace(&args.table_bucket_arn, &args.namespace)
            .await?,
    )
}

/// The create-table request after merging `--cli-input-json` with the arguments.
#[derive(Debug, PartialEq)]
struct CreateTable {
    table_bucket_arn: String,
    namespace: String,
    name: String,
    metadata: Option<Value>,
}

fn create_table_request(args: &CreateTableArgs) -> Result<CreateTable> {
    let input = match &args.cli_input_json {
        Some(v) => json_arg("--cli-input-json", v)?,
        None => Value::Object(Default::default()),
    };
    let from_input = |key: &str| input.get(key).and_then(Value::as_str).map(str::to_owned);
    let need = |arg: &Option<String>, key: &str, option: &str| -> Result<String> {
        arg.clone()
            .or_else(|| from_input(key))
            .ok_or_else(|| Error::config(option, "is required (or in --cli-input-json)"))
    };
    let format = args
        .format
        .clone()
        .or_else(|| from_input("format"))
        .unwrap_or_else(|| "ICEBERG".into());
    if !format.eq_ignore_ascii_case("ICEBERG") {
        return Err(Error::config(
            "--format",
            format!("`{format}`: only ICEBERG tables exist"),
        ));
    }
    let metadata = match &args.metadata {
        Some(m) => Some(json_arg("--metadata", m)?),
        None => input.get("metadata").cloned(),
    };
    Ok(CreateTable {
        table_bucket_arn: need(
            &args.table_bucket_arn,
            "tableBucketARN",
            "--table-bucket-arn",
        )?,
        namespace: need(&args.namespace, "namespace", "--namespace")?,
        name: need(&args.name, "name", "--name")?,
        metadata,
    })
}

/// `create-table`.
pub async fn create_table(args: CreateTableArgs) -> Result<ExitCode> {
    let req = create_table_request(&args)?;
    print(
        &admin(&args.admin)?
            .create_table(
                &req.table_bucket_arn,
                &req.namespace,
                &req.name,
                req.metadata.as_ref(),
            )
            .await?,
    )
}

/// `get-table`.
pub async fn get_table(args: TableArgs) -> Result<ExitCode> {
    print(
        &admin(&args.admin)?
            .get_table(&args.table_bucket_arn, &args.namespace, &args.name)
            .await?,
    )
}

/// `get-table-maintenance-job-status`.
pub async fn get_table_maintenance_job_status(args: TableArgs) -> Result<ExitCode> {
    print(
        &admin(&args.admin)?
            .get_table_maintenance_job_status(&args.table_bucket_arn, &args.namespace, &args.name)
            .await?,
    )
}

/// `get-table-maintenance-configuration`.
pub async fn get_table_maintenance_configuration(args: TableArgs) -> Result<ExitCode> {
    print(
        &admin(&args.admin)?
            .get_table_maintenance_configuration(
                &args.table_bucket_arn,
                &args.namespace,
                &args.name,
            )
            .await?,
    )
}

/// `put-table-maintenance-configuration`.
pub async fn put_table_maintenance_configuration(
    args: PutTableMaintenanceArgs,
) -> Result<ExitCode> {
    let value = json_arg("--value", &args.value)?;
    let t = &args.table;
    print(
        &admin(&t.admin)?
            .put_table_maintenance_configuration(
                &t.table_bucket_arn,
                &t.namespace,
                &t.name,
                &args.kind,
                &value,
            )
            .await?,
    )
}

/// `get-table-bucket-maintenance-configuration`.
pub async fn get_table_bucket_maintenance_configuration(args: BucketArgs) -> Result<ExitCode> {
    print(
        &admin(&args.admin)?
            .get_table_bucket_maintenance_configuration(&args.table_bucket_arn)
            .await?,
    )
}

/// `put-table-bucket-maintenance-configuration`.
pub async fn put_table_bucket_maintenance_configuration(
    args: PutBucketMaintenanceArgs,
) -> Result<ExitCode> {
    let value = json_arg("--value", &args.value)?;
    let b = &args.bucket;
    print(
        &admin(&b.admin)?
            .put_table_bucket_maintenance_configuration(&b.table_bucket_arn, &args.kind, &value)
            .await?,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn create(json: Option<&str>, name: Option<&str>, metadata: Option<&str>) -> CreateTableArgs {
        CreateTableArgs {
            admin: AdminArgs {
                endpoint: None,
                region: None,
                signature: None,
                config: None,
            },
            table_bucket_arn: None,
            namespace: Some("ns".into()),
            name: name.map(str::to_owned),
            format: None,
            metadata: metadata.map(str::to_owned),
            cli_input_json: json.map(str::to_owned),
        }
    }

    #[test]
    fn create_table_merges_the_cli_input_json_with_the_arguments() {
        let input = r#"{"tableBucketARN":"arn:b","namespace":"from-json","name":"t","format":"ICEBERG","metadata":{"iceberg":{"schema":{"fields":[]}}}}"#;
        let r = create_table_request(&create(Some(input), None, None)).unwrap();
        assert_eq!(r.table_bucket_arn, "arn:b");
        assert_eq!(r.namespace, "ns", "the command line wins");
        assert_eq!(r.name, "t");
        assert!(r.metadata.is_some());
        let r = create_table_request(&create(Some(input), Some("u"), Some("{\"x\":1}"))).unwrap();
        assert_eq!(
            (r.name.as_str(), r.metadata),
            ("u", Some(serde_json::json!({"x":1})))
        );
        let e = create_table_request(&create(None, Some("t"), None)).unwrap_err();
        assert!(e.to_string().contains("--table-bucket-arn"), "{e}");
        let mut bad = create(Some(input), None, None);
        bad.format = Some("PARQUET".into());
        assert!(
            create_table_request(&bad)
                .unwrap_err()
                .to_string()
                .contains("--format")
        );
        let e = json_arg("--metadata", "file:///no/such/schema.json").unwrap_err();
        assert!(e.to_string().contains("--metadata"), "{e}");
    }

    #[test]
    fn the_region_comes_from_the_arguments_then_the_environment() {
        let args = AdminArgs {
            endpoint: Some("http://127.0.0.1:1".into()),
            region: None,
            signature: None,
            config: None,
        };
        let p = admin_props(&args, |k| {
            (k == "AWS_DEFAULT_REGION").then(|| "eu-west-1".into())
        })
        .unwrap();
        assert_eq!(p["client.region"], "eu-west-1");
        assert_eq!(p["uri"], "http://127.0.0.1:1");
        let e = admin_with_env(&args, |_| None).unwrap_err();
        assert!(e.to_string().contains("--region"), "{e}");
        assert_eq!(carried(CatalogKind::Rest, "uri"), None);

        // The OSS Tables seed's connector block, without --endpoint: its management host.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("connector.properties");
        std::fs::write(
            &path,
            "connector.class: org.apache.iceberg.connect.IcebergSinkConnector\n\
             iceberg.catalog.type: rest\n\
             iceberg.catalog.uri: https://cn-hangzhou-internal.oss-tables.aliyuncs.com/iceberg\n\
             iceberg.catalog.rest.sigv4-enabled: true\n\
             iceberg.catalog.rest.signing-region: cn-hangzhou\n\
             iceberg.catalog.warehouse: acs:osstables:cn-hangzhou:1234567890:bucket/lake\n\
             iceberg.catalog.rest.signing-name: osstables\n\
             iceberg.catalog.rest.access-key-id: LTAI-seed\n\
             iceberg.catalog.rest.secret-access-key: seed-secret\n",
        )
        .unwrap();
        let args = AdminArgs {
            endpoint: None,
            region: None,
            signature: None,
            config: Some(path),
        };
        let p = admin_props(&args, |_| None).unwrap();
        assert_eq!(
            p["uri"],
            "https://cn-hangzhou-internal.oss-tables.aliyuncs.com"
        );
        assert_eq!(p["s3tables.signing-region"], "cn-hangzhou");
        assert_eq!(p["s3tables.access-key-id"], "LTAI-seed");
        // Signed as ossutil signs: an OSS Tables endpoint and an `acs:` warehouse.
        let config =
            floe_iceberg::s3tables::S3TablesConfig::from_props_with_env(&p, |_| None).unwrap();
        assert_eq!(config.signature, floe_iceberg::s3tables::Signature::OssV4);
        let sigv4 = AdminArgs {
            signature: Some("sigv4".into()),
            ..args
        };
        let p = admin_props(&sigv4, |_| None).unwrap();
        let config =
            floe_iceberg::s3tables::S3TablesConfig::from_props_with_env(&p, |_| None).unwrap();
        assert_eq!(config.signature, floe_iceberg::s3tables::Signature::SigV4);
        assert_eq!(oss_tables_host("https://example.com/iceberg"), None);
        assert_eq!(
            carried(CatalogKind::Rest, "rest.access-key-id").as_deref(),
            Some("s3tables.access-key-id")
        );
    }
}
