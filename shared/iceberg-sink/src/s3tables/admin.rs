//! Table management as the seed does it with `aws s3tables …` (and `ossutil tables-api …`):
//! each call returns the JSON the AWS CLI prints for it (ARNs and all), so `floe tables …`
//! can print it as is.
//!
//! | CLI command | function | prints |
//! |---|---|---|
//! | `create-table-bucket --name` | [`S3TablesAdmin::create_table_bucket`] | `{"arn"}` |
//! | `create-namespace --table-bucket-arn --namespace` | [`S3TablesAdmin::create_namespace`] | `{"tableBucketARN","namespace":[…]}` |
//! | `create-table … --format ICEBERG --metadata` | [`S3TablesAdmin::create_table`] | `{"tableARN","versionToken"}` |
//! | `get-table` | [`S3TablesAdmin::get_table`] | the GetTable answer |
//! | `get-table-maintenance-job-status` | [`S3TablesAdmin::get_table_maintenance_job_status`] | `{"tableARN","status":{…}}` |
//! | `get-table-maintenance-configuration` | [`S3TablesAdmin::get_table_maintenance_configuration`] | `{"tableARN","configuration":{…}}` |
//! | `put-table-maintenance-configuration --type --value` | [`S3TablesAdmin::put_table_maintenance_configuration`] | nothing (`{}`) |
//! | `get-table-bucket-maintenance-configuration` | [`S3TablesAdmin::get_table_bucket_maintenance_configuration`] | `{"tableBucketARN","configuration":{…}}` |
//! | `put-table-bucket-maintenance-configuration --type --value` | [`S3TablesAdmin::put_table_bucket_maintenance_configuration`] | nothing (`{}`) |
//!
//! `create_table` takes the `--metadata` document in the CLI's form and sends it as botocore
//! does ([`to_wire_form`]). When the server leaves the new table without a metadata file (moto;
//! AWS and OSS write one themselves), floe writes the first one from the same document, so the
//! table is usable either way.

use std::collections::HashMap;

use floe_core::{Error, Result};
use serde_json::{Value, json};

use super::catalog::{TableState, initialize_table};
use super::client::S3TablesClient;
use super::config::S3TablesConfig;
use super::metadata::{table_creation, to_wire_form};
use crate::rest::error::into_floe_error;

/// Table-bucket, namespace, table and maintenance management; see the module doc.
#[derive(Clone)]
pub struct S3TablesAdmin {
    client: S3TablesClient,
    file_io_props: HashMap<String, String>,
}

impl std::fmt::Debug for S3TablesAdmin {
    // FileIO properties can hold keys: left out.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("S3TablesAdmin")
            .field("client", &self.client)
            .finish_non_exhaustive()
    }
}

fn require_object(value: &Value, what: &str) -> Result<()> {
    if value.is_object() {
        Ok(())
    } else {
        Err(Error::invalid_input(format!(
            "{what}: `--value` must be a json object"
        )))
    }
}

impl S3TablesAdmin {
    /// Admin calls with `config`'s endpoint, keys and FileIO properties (`warehouse` unused).
    pub fn new(config: &S3TablesConfig) -> Result<Self> {
        Ok(Self::with_client(config, S3TablesClient::new(config)?))
    }

    /// [`S3TablesAdmin::new`] from properties (see [`S3TablesConfig`]).
    pub fn from_props(props: &HashMap<String, String>) -> Result<Self> {
        Self::new(&S3TablesConfig::from_props(props)?)
    }

    /// Admin calls through `client`.
    pub fn with_client(config: &S3TablesConfig, client: S3TablesClient) -> Self {
        S3TablesAdmin {
            client,
            file_io_props: config.file_io_props.clone(),
        }
    }

    /// The control-plane client.
    pub fn client(&self) -> &S3TablesClient {
        &self.client
    }

    /// `create-table-bucket --name <name>` → `{"arn": "arn:aws:s3tables:…:bucket/<name>"}`.
    pub async fn create_table_bucket(&self, name: &str) -> Result<Value> {
        let answer = self.client.create_table_bucket(name).await?;
        Ok(json!({"arn": answer.get("arn").cloned().unwrap_or(Value::Null)}))
    }

    /// `create-namespace --table-bucket-arn <arn> --namespace <ns>` →
    /// `{"tableBucketARN": <arn>, "namespace": [<ns>]}`.
    pub async fn create_namespace(&self, table_bucket_arn: &str, namespace: &str) -> Result<Value> {
        let answer = self
            .client
            .create_namespace(table_bucket_arn, namespace)
            .await?;
        let arn = answer
            .get("tableBucketARN")
            .or_else(|| answer.get("tableBucketArn"))
            .cloned()
            .unwrap_or_else(|| json!(table_bucket_arn));
        let ns = answer
            .get("namespace")
            .cloned()
            .unwrap_or_else(|| json!([namespace]));
        Ok(json!({"tableBucketARN": arn, "namespace": ns}))
    }

    /// `create-table --table-bucket-arn --namespace --name --format ICEBERG [--metadata <doc>]`
    /// → `{"tableARN", "versionToken"}` (the token after floe wrote the first metadata file, if
    /// it had to; see the module doc).
    pub async fn create_table(
        &self,
        table_bucket_arn: &str,
        namespace: &str,
        name: &str,
        metadata: Option<&Value>,
    ) -> Result<Value> {
        let what = format!("failed to create table {namespace}.{name}");
        let wire = metadata.map(to_wire_form);
        // Check the document before creating anything.
        let creation = wire
            .as_ref()
            .map(|m| table_creation(name, m, "s3://placeholder"))
            .transpose()
            .map_err(|e| e.while_doing(&what))?;
        let created = self
            .client
            .create_table(table_bucket_arn, namespace, name, wire.as_ref())
            .await?;
        let mut token = created.get("versionToken").cloned().unwrap_or(Value::Null);
        let table_arn = created.get("tableARN").cloned().unwrap_or(Value::Null);
        if let Some(creation) = creation {
            let state: TableState = serde_json::from_value(
                self.client
                    .get_table(table_bucket_arn, namespace, name)
                    .await?,
            )
            .map_err(|e| {
                Error::new(
                    floe_core::ErrorKind::Protocol,
                    format!("{what}: unexpected GetTable answer"),
                )
                .with_source(e)
            })?;
            if state.metadata_location.is_none() {
                let (new_token, location, _) = initialize_table(
                    &self.client,
                    table_bucket_arn,
                    namespace,
                    &state,
                    creation,
                    &self.file_io_props,
                )
                .await
                .map_err(|e| into_floe_error(e).while_doing(&what))?;
                tracing::info!(table = %format!("{namespace}.{name}"), %location, "wrote the first metadata file");
                token = json!(new_token);
            }
        }
        Ok(json!({"tableARN": table_arn, "versionToken": token}))
    }

    /// `get-table --table-bucket-arn --namespace --name`: the GetTable answer.
    pub async fn get_table(
        &self,
        table_bucket_arn: &str,
        namespace: &str,
        name: &str,
    ) -> Result<Value> {
        self.client
            .get_table(table_bucket_arn, namespace, name)
            .await
    }

    /// `get-table-maintenance-job-status --table-bucket-arn --namespace --name` →
    /// `{"tableARN", "status": {"icebergCompaction": {"status", "lastRunTimestamp"?, "failureMessage"?}, …}}`.
    pub async fn get_table_maintenance_job_status(
        &self,
        table_bucket_arn: &str,
        namespace: &str,
        name: &str,
    ) -> Result<Value> {
        self.client
            .get_table_maintenance_job_status(table_bucket_arn, namespace, name)
            .await
    }

    /// `get-table-maintenance-configuration --table-bucket-arn --namespace --name` →
    /// `{"tableARN", "configuration": {"icebergCompaction": {"status", "settings"}, …}}`.
    pub async fn get_table_maintenance_configuration(
        &self,
        table_bucket_arn: &str,
        namespace: &str,
        name: &str,
    ) -> Result<Value> {
        self.client
            .get_table_maintenance_configuration(table_bucket_arn, namespace, name)
            .await
    }

    /// `put-table-maintenance-configuration --table-bucket-arn --namespace --name --type <kind>
    /// --value <json>`; `kind` is `icebergCompaction` or `icebergSnapshotManagement`, `value`
    /// e.g. `{"status":"enabled","settings":{"icebergCompaction":{"targetFileSizeMB":256}}}`.
    pub async fn put_table_maintenance_configuration(
        &self,
        table_bucket_arn: &str,
        namespace: &str,
        name: &str,
        kind: &str,
        value: &Value,
    ) -> Result<Value> {
        require_object(value, "put-table-maintenance-configuration")?;
        self.client
            .put_table_maintenance_configuration(table_bucket_arn, namespace, name, kind, value)
            .await
    }

    /// `get-table-bucket-maintenance-configuration --table-bucket-arn` →
    /// `{"tableBucketARN", "configuration": {"icebergUnreferencedFileRemoval": {"status", "settings"}}}`.
    pub async fn get_table_bucket_maintenance_configuration(
        &self,
        table_bucket_arn: &str,
    ) -> Result<Value> {
        self.client
            .get_table_bucket_maintenance_configuration(table_bucket_arn)
            .await
    }

    /// `put-table-bucket-maintenance-configuration --table-bucket-arn --type <kind> --value <json>`;
    /// `kind` is `icebergUnreferencedFileRemoval`, `value` e.g.
    /// `{"status":"enabled","settings":{"icebergUnreferencedFileRemoval":{"unreferencedDays":4,"nonCurrentDays":10}}}`.
    pub async fn put_table_bucket_maintenance_configuration(
        &self,
        table_bucket_arn: &str,
        kind: &str,
        value: &Value,
    ) -> Result<Value> {
        require_object(value, "put-table-bucket-maintenance-configuration")?;
        self.client
            .put_table_bucket_maintenance_configuration(table_bucket_arn, kind, value)
            .await
    }
}
