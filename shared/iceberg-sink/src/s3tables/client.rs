//! The S3 Tables control-plane API (REST-JSON), one method per operation, signed with SigV4
//! (`s3tables`, as the AWS CLI signs) or, for OSS Tables, OSS4-HMAC-SHA256 (product
//! `osstables`, as ossutil `tables-api` signs: then every call carries `Content-Type` and
//! `Content-MD5`, as ossutil's requests do; see `s3tables.signature`).
//!
//! Paths and queries are built as botocore builds them (every path parameter percent-encoded
//! with no safe characters, so an ARN's `:` and `/` become `%3A` and `%2F`); the
//! `s3tables_requests` test compares them with requests recorded from botocore. Each method
//! returns the answer's JSON as the service sent it (`{}` for an empty answer).

use std::fmt;

use floe_core::Result;
use reqwest::header::{CONTENT_TYPE, HeaderValue};
use reqwest::{Method, Url};
use serde::Serialize;
use serde_json::{Value, json};

use super::config::S3TablesConfig;
use super::error::{Call, control_plane_error, control_plane_transport_error};
use crate::rest::auth::{OssTablesAuth, SigV4Auth, SigningClock, system_clock};
use base64::Engine as _;
use md5::Digest as _;

use super::config::Signature;
use crate::rest::client::{default_http_client, encode_segment};

/// How a client signs.
#[derive(Clone, Debug)]
enum Auth {
    SigV4(SigV4Auth),
    OssV4(OssTablesAuth),
}

/// A signed client for one control-plane endpoint.
#[derive(Clone)]
pub struct S3TablesClient {
    http: reqwest::Client,
    endpoint: String,
    signer: Auth,
}

impl fmt::Debug for S3TablesClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("S3TablesClient")
            .field("endpoint", &self.endpoint)
            .field("signer", &self.signer)
            .finish_non_exhaustive()
    }
}

/// The table bucket a request is about, which OSS4 signs: the ARN in its path
/// (`/buckets/<arn>`, `/namespaces/<arn>`, `/tables/<arn>/…`) or its `tableBucketARN` query
/// (GetTable); none for CreateTableBucket.
fn bucket_arn(request: &reqwest::Request) -> Option<String> {
    let url = request.url();
    let mut segments = url.path_segments()?;
    let first = segments.next()?;
    if matches!(first, "buckets" | "namespaces" | "tables")
        && let Some(arn) = segments.next()
    {
        let arn = percent_encoding::percent_decode_str(arn)
            .decode_utf8()
            .ok()?;
        if arn.starts_with("acs:") || arn.starts_with("arn:") {
            return Some(arn.into_owned());
        }
    }
    (url.query_pairs())
        .find(|(k, _)| k == "tableBucketARN")
        .map(|(_, v)| v.into_owned())
}

/// UpdateTableMetadataLocation's body, in botocore's member order.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct UpdateLocation<'a> {
    version_token: &'a str,
    metadata_location: &'a str,
}

impl S3TablesClient {
    /// A client for `config`'s endpoint, region and keys, with the default HTTP client.
    pub fn new(config: &S3TablesConfig) -> Result<Self> {
        Ok(Self::with_http_client(
            config,
            default_http_client()?,
            system_clock(),
        ))
    }

    /// A client using `http` and reading the signing time from `clock`.
    pub fn with_http_client(
        config: &S3TablesConfig,
        http: reqwest::Client,
        clock: SigningClock,
    ) -> Self {
        let signer = match config.signature {
            Signature::SigV4 => Auth::SigV4(SigV4Auth::new(
                &config.signing_name,
                &config.region,
                config.credentials.clone(),
                clock,
            )),
            Signature::OssV4 => Auth::OssV4(OssTablesAuth::new(
                &config.region,
                config.credentials.clone(),
                clock,
            )),
        };
        S3TablesClient {
            http,
            endpoint: config.endpoint.clone(),
            signer,
        }
    }

    /// The endpoint requests go to.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// Send one request. `path` is already encoded; `query` pairs are form-encoded.
    async fn call(
        &self,
        call: Call,
        what: &str,
        method: Method,
        path: &str,
        query: &[(&str, &str)],
        body: Option<Vec<u8>>,
    ) -> Result<Value> {
        let mut url = Url::parse(&format!("{}{path}", self.endpoint)).map_err(|e| {
            floe_core::Error::config(
                "uri",
                format!("`{}` is not a valid url: {e}", self.endpoint),
            )
        })?;
        if !query.is_empty() {
            let mut pairs = url.query_pairs_mut();
            for (k, v) in query {
                pairs.append_pair(k, v);
            }
        }
        let mut builder = self.http.request(method.clone(), url.as_str());
        let oss = matches!(self.signer, Auth::OssV4(_));
        if oss {
            // As ossutil sends every call: JSON, with the body's MD5 (of nothing for a GET).
            let md5 = md5::Md5::digest(body.as_deref().unwrap_or_default());
            builder = builder
                .header(CONTENT_TYPE, HeaderValue::from_static("application/json"))
                .header(
                    "content-md5",
                    base64::engine::general_purpose::STANDARD.encode(md5),
                );
        } else if body.is_some() {
            builder = builder.header(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        }
        if let Some(body) = body {
            builder = builder.body(body);
        }
        let mut request = builder.build().map_err(|e| {
            floe_core::Error::invalid_input(format!("{what}: bad request url {url}")).with_source(e)
        })?;
        match &self.signer {
            Auth::SigV4(s) => s.sign(&mut request).await?,
            Auth::OssV4(s) => {
                let arn = bucket_arn(&request);
                s.sign(&mut request, arn.as_deref()).await?
            }
        }
        tracing::debug!(%method, %url, "s3tables request");
        let response = self
            .http
            .execute(request)
            .await
            .map_err(|e| control_plane_transport_error(call, what, e))?;
        let status = response.status().as_u16();
        let bytes = response
            .bytes()
            .await
            .map_err(|e| control_plane_transport_error(call, what, e))?;
        tracing::debug!(%method, %url, status, "s3tables answer");
        if !(200..300).contains(&status) {
            return Err(control_plane_error(call, what, status, &bytes));
        }
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return Ok(json!({}));
        }
        serde_json::from_slice(&bytes).map_err(|e| {
            floe_core::Error::new(
                floe_core::ErrorKind::Protocol,
                format!("{what}: the answer is not json"),
            )
            .with_source(e)
        })
    }

    async fn get(&self, what: &str, path: &str, query: &[(&str, &str)]) -> Result<Value> {
        self.call(Call::Other, what, Method::GET, path, query, None)
            .await
    }

    async fn send_json(
        &self,
        call: Call,
        what: &str,
        method: Method,
        path: &str,
        body: &impl Serialize,
    ) -> Result<Value> {
        let bytes = serde_json::to_vec(body).map_err(|e| {
            floe_core::Error::invalid_input(format!("{what}: cannot serialize the request"))
                .with_source(e)
        })?;
        self.call(call, what, method, path, &[], Some(bytes)).await
    }

    fn table_path(arn: &str, namespace: &str, name: &str) -> String {
        format!(
            "/tables/{}/{}/{}",
            encode_segment(arn),
            encode_segment(namespace),
            encode_segment(name)
        )
    }

    /// CreateTableBucket: `PUT /buckets {"name"}` → `{"arn"}`.
    pub async fn create_table_bucket(&self, name: &str) -> Result<Value> {
        let what = format!("failed to create table bucket {name}");
        self.send_json(
            Call::Other,
            &what,
            Method::PUT,
            "/buckets",
            &json!({"name": name}),
        )
        .await
    }

    /// GetTableBucket: `GET /buckets/{arn}`.
    pub async fn get_table_bucket(&self, arn: &str) -> Result<Value> {
        let what = format!("failed to get table bucket {arn}");
        self.get(&what, &format!("/buckets/{}", encode_segment(arn)), &[])
            .await
    }

    /// CreateNamespace: `PUT /namespaces/{arn} {"namespace":[ns]}`.
    pub async fn create_namespace(&self, arn: &str, namespace: &str) -> Result<Value> {
        let what = format!("failed to create namespace {namespace} in {arn}");
        let path = format!("/namespaces/{}", encode_segment(arn));
        self.send_json(
            Call::Other,
            &what,
            Method::PUT,
            &path,
            &json!({"namespace": [namespace]}),
        )
        .await
    }

    /// GetNamespace: `GET /namespaces/{arn}/{ns}`.
    pub async fn get_namespace(&self, arn: &str, namespace: &str) -> Result<Value> {
        let what = format!("failed to get namespace {namespace} in {arn}");
        let path = format!(
            "/namespaces/{}/{}",
            encode_segment(arn),
            encode_segment(namespace)
        );
        self.get(&what, &path, &[]).await
    }

    /// ListNamespaces (one page): `GET /namespaces/{arn}[?continuationToken]`.
    pub async fn list_namespaces(
        &self,
        arn: &str,
        continuation_token: Option<&str>,
    ) -> Result<Value> {
        let what = format!("failed to list namespaces in {arn}");
        let path = format!("/namespaces/{}", encode_segment(arn));
        let query: Vec<(&str, &str)> = continuation_token
            .map(|t| ("continuationToken", t))
            .into_iter()
            .collect();
        self.get(&what, &path, &query).await
    }

    /// DeleteNamespace: `DELETE /namespaces/{arn}/{ns}`.
    pub async fn delete_namespace(&self, arn: &str, namespace: &str) -> Result<Value> {
        let what = format!("failed to delete namespace {namespace} in {arn}");
        let path = format!(
            "/namespaces/{}/{}",
            encode_segment(arn),
            encode_segment(namespace)
        );
        self.call(Call::Other, &what, Method::DELETE, &path, &[], None)
            .await
    }

    /// CreateTable: `PUT /tables/{arn}/{ns} {"name","format":"ICEBERG","metadata"?}` →
    /// `{"tableARN","versionToken"}`. `metadata` goes on the wire as given (see
    /// [`super::metadata::to_wire_form`] for the CLI's member names).
    pub async fn create_table(
        &self,
        arn: &str,
        namespace: &str,
        name: &str,
        metadata: Option<&Value>,
    ) -> Result<Value> {
        let what = format!("failed to create table {namespace}.{name} in {arn}");
        let path = format!(
            "/tables/{}/{}",
            encode_segment(arn),
            encode_segment(namespace)
        );
        // Members in key order, as the Go SDK (ossutil) marshals its request map: the OSS4
        // signature covers the body's Content-MD5.
        let mut body = json!({"format": "ICEBERG"});
        if let Some(m) = metadata {
            body["metadata"] = m.clone();
        }
        body["name"] = json!(name);
        self.send_json(Call::Other, &what, Method::PUT, &path, &body)
            .await
    }

    /// GetTable: `GET /get-table?tableBucketARN&namespace&name` → versionToken,
    /// metadataLocation, warehouseLocation, tableARN, ….
    pub async fn get_table(&self, arn: &str, namespace: &str, name: &str) -> Result<Value> {
        let what = format!("failed to get table {namespace}.{name} in {arn}");
        self.get(
            &what,
            "/get-table",
            &[
                ("tableBucketARN", arn),
                ("namespace", namespace),
                ("name", name),
            ],
        )
        .await
    }

    /// ListTables (one page): `GET /tables/{arn}?namespace[&continuationToken]`.
    pub async fn list_tables(
        &self,
        arn: &str,
        namespace: Option<&str>,
        continuation_token: Option<&str>,
    ) -> Result<Value> {
        let what = format!("failed to list tables in {arn}");
        let path = format!("/tables/{}", encode_segment(arn));
        let mut query = Vec::new();
        if let Some(ns) = namespace {
            query.push(("namespace", ns));
        }
        if let Some(t) = continuation_token {
            query.push(("continuationToken", t));
        }
        self.get(&what, &path, &query).await
    }

    /// DeleteTable: `DELETE /tables/{arn}/{ns}/{name}[?versionToken]`.
    pub async fn delete_table(
        &self,
        arn: &str,
        namespace: &str,
        name: &str,
        version_token: Option<&str>,
    ) -> Result<Value> {
        let what = format!("failed to delete table {namespace}.{name} in {arn}");
        let query: Vec<(&str, &str)> = version_token
            .map(|t| ("versionToken", t))
            .into_iter()
            .collect();
        self.call(
            Call::Other,
            &what,
            Method::DELETE,
            &Self::table_path(arn, namespace, name),
            &query,
            None,
        )
        .await
    }

    /// RenameTable: `PUT /tables/{arn}/{ns}/{name}/rename {newNamespaceName?, newName?, versionToken?}`.
    pub async fn rename_table(
        &self,
        arn: &str,
        namespace: &str,
        name: &str,
        new_namespace: Option<&str>,
        new_name: Option<&str>,
        version_token: Option<&str>,
    ) -> Result<Value> {
        let what = format!("failed to rename table {namespace}.{name} in {arn}");
        let mut body = serde_json::Map::new();
        if let Some(n) = new_namespace {
            body.insert("newNamespaceName".into(), json!(n));
        }
        if let Some(n) = new_name {
            body.insert("newName".into(), json!(n));
        }
        if let Some(t) = version_token {
            body.insert("versionToken".into(), json!(t));
        }
        let path = format!("{}/rename", Self::table_path(arn, namespace, name));
        self.send_json(Call::Other, &what, Method::PUT, &path, &Value::Object(body))
            .await
    }

    /// GetTableMetadataLocation: `GET …/{name}/metadata-location`.
    pub async fn get_table_metadata_location(
        &self,
        arn: &str,
        namespace: &str,
        name: &str,
    ) -> Result<Value> {
        let what =
            format!("failed to get the metadata location of table {namespace}.{name} in {arn}");
        let path = format!(
            "{}/metadata-location",
            Self::table_path(arn, namespace, name)
        );
        self.get(&what, &path, &[]).await
    }

    /// UpdateTableMetadataLocation: `PUT …/{name}/metadata-location {versionToken, metadataLocation}`.
    /// A stale token is a 409 ([`floe_core::ErrorKind::Conflict`], retryable); a 5xx or a dropped
    /// connection is [`floe_core::ErrorKind::StateUnknown`].
    pub async fn update_table_metadata_location(
        &self,
        arn: &str,
        namespace: &str,
        name: &str,
        version_token: &str,
        metadata_location: &str,
    ) -> Result<Value> {
        let what =
            format!("failed to update the metadata location of table {namespace}.{name} in {arn}");
        let path = format!(
            "{}/metadata-location",
            Self::table_path(arn, namespace, name)
        );
        let body = UpdateLocation {
            version_token,
            metadata_location,
        };
        self.send_json(Call::UpdateLocation, &what, Method::PUT, &path, &body)
            .await
    }

    /// GetTableMaintenanceJobStatus: `GET …/{name}/maintenance-job-status`.
    pub async fn get_table_maintenance_job_status(
        &self,
        arn: &str,
        namespace: &str,
        name: &str,
    ) -> Result<Value> {
        let what = format!("failed to get the maintenance job status of table {namespace}.{name}");
        let path = format!(
            "{}/maintenance-job-status",
            Self::table_path(arn, namespace, name)
        );
        self.get(&what, &path, &[]).await
    }

    /// GetTableMaintenanceConfiguration: `GET …/{name}/maintenance`.
    pub async fn get_table_maintenance_configuration(
        &self,
        arn: &str,
        namespace: &str,
        name: &str,
    ) -> Result<Value> {
        let what =
            format!("failed to get the maintenance configuration of table {namespace}.{name}");
        let path = format!("{}/maintenance", Self::table_path(arn, namespace, name));
        self.get(&what, &path, &[]).await
    }

    /// PutTableMaintenanceConfiguration: `PUT …/{name}/maintenance/{type} {"value"}`.
    pub async fn put_table_maintenance_configuration(
        &self,
        arn: &str,
        namespace: &str,
        name: &str,
        kind: &str,
        value: &Value,
    ) -> Result<Value> {
        let what = format!("failed to put the {kind} configuration of table {namespace}.{name}");
        let path = format!(
            "{}/maintenance/{}",
            Self::table_path(arn, namespace, name),
            encode_segment(kind)
        );
        self.send_json(
            Call::Other,
            &what,
            Method::PUT,
            &path,
            &json!({"value": value}),
        )
        .await
    }

    /// Turn on the catalog's own maintenance of a table: snapshot management, and compaction
    /// unless `compaction` is false (then it is turned off: floe compacts the table itself).
    pub async fn set_managed_maintenance(
        &self,
        arn: &str,
        namespace: &str,
        name: &str,
        compaction: bool,
    ) -> Result<()> {
        let status = |on: bool| json!({"status": if on { "enabled" } else { "disabled" }});
        self.put_table_maintenance_configuration(
            arn,
            namespace,
            name,
            "icebergSnapshotManagement",
            &status(true),
        )
        .await?;
        self.put_table_maintenance_configuration(
            arn,
            namespace,
            name,
            "icebergCompaction",
            &status(compaction),
        )
        .await?;
        Ok(())
    }

    /// GetTableBucketMaintenanceConfiguration: `GET /buckets/{arn}/maintenance`.
    pub async fn get_table_bucket_maintenance_configuration(&self, arn: &str) -> Result<Value> {
        let what = format!("failed to get the maintenance configuration of table bucket {arn}");
        let path = format!("/buckets/{}/maintenance", encode_segment(arn));
        self.get(&what, &path, &[]).await
    }

    /// PutTableBucketMaintenanceConfiguration: `PUT /buckets/{arn}/maintenance/{type} {"value"}`.
    pub async fn put_table_bucket_maintenance_configuration(
        &self,
        arn: &str,
        kind: &str,
        value: &Value,
    ) -> Result<Value> {
        let what = format!("failed to put the {kind} configuration of table bucket {arn}");
        let path = format!(
            "/buckets/{}/maintenance/{}",
            encode_segment(arn),
            encode_segment(kind)
        );
        self.send_json(
            Call::Other,
            &what,
            Method::PUT,
            &path,
            &json!({"value": value}),
        )
        .await
    }
}
