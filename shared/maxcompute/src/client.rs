//! The MaxCompute REST client: table metadata, partitions, the tunnel endpoint lookup, and SQL
//! jobs (see [`crate::instance`]).
//!
//! Every call is signed ([`floe_signing::odps`]): v4 when the region is known (given, or read
//! from a `service.<region>.maxcompute.aliyun.com` endpoint), falling back to the classic
//! signature when the service refuses v4, as pyodps does. An STS token goes in
//! `authorization-sts-token`. Every request names the project in `curr_project`.

use std::time::Duration;

use floe_core::{Error, ErrorKind, Result};
use floe_signing::CredentialSource;
use reqwest::{Method, Url};

use crate::http::{OdpsHttp, OdpsRequest, encode};
use crate::meta::{
    TableId, TableMeta, parse_reserved, parse_schema_json, schema_json_of_table_xml,
};
use crate::partition::PartitionSpec;
use crate::xml::Element;

/// How to reach MaxCompute.
#[derive(Clone, Debug)]
pub struct ClientConfig {
    /// The REST endpoint, e.g. `https://service.cn-hangzhou.maxcompute.aliyun.com/api`.
    pub endpoint: String,
    /// The project every call is made in (`curr_project`).
    pub project: String,
    /// Where the access keys (and STS token) come from, asked before every request.
    pub credentials: CredentialSource,
    /// Region for v4 signatures; default: read from the endpoint's host, else classic signing.
    pub region: Option<String>,
    /// Time allowed for one HTTP call; default 60 s.
    pub request_timeout: Duration,
    /// How often an SQL job's status is polled; default 1 s (doubling up to 5 s).
    pub sql_poll_interval: Duration,
    /// How long an SQL job may run before [`MaxComputeClient::run_sql`] gives up; default 10 min.
    pub sql_timeout: Duration,
}

impl ClientConfig {
    /// A configuration with the defaults above.
    pub fn new(
        endpoint: impl Into<String>,
        project: impl Into<String>,
        credentials: impl Into<CredentialSource>,
    ) -> Self {
        ClientConfig {
            endpoint: endpoint.into(),
            project: project.into(),
            credentials: credentials.into(),
            region: None,
            request_timeout: Duration::from_secs(60),
            sql_poll_interval: Duration::from_secs(1),
            sql_timeout: Duration::from_secs(600),
        }
    }
}

/// The region in a `service.<region>.maxcompute.aliyun.com` (or `-inc`) host, without a
/// `-vpc` / `-internal` suffix; `None` for any other host.
pub fn region_from_endpoint(endpoint: &str) -> Option<String> {
    let url = Url::parse(endpoint).ok()?;
    let host = url.host_str()?.to_ascii_lowercase();
    let labels: Vec<&str> = host.split('.').collect();
    if labels.len() != 5 || labels[0] != "service" {
        return None;
    }
    let domain_ok = labels[2].len() >= 4
        && labels[2].len() <= 10
        && labels[2].bytes().all(|b| b.is_ascii_lowercase())
        && matches!(labels[3], "aliyun" | "aliyun-inc")
        && labels[4] == "com";
    if !domain_ok {
        return None;
    }
    let mut region = labels[1];
    for suffix in ["-internal", "-vpc"] {
        if let Some(r) = region.strip_suffix(suffix) {
            region = r;
            break;
        }
    }
    region.contains('-').then(|| region.to_owned())
}

/// A MaxCompute REST client; cheap to clone (connections are pooled and shared).
#[derive(Clone, Debug)]
pub struct MaxComputeClient {
    pub(crate) http: OdpsHttp,
    pub(crate) project: String,
    pub(crate) region: Option<String>,
    pub(crate) sql_poll_interval: Duration,
    pub(crate) sql_timeout: Duration,
}

impl MaxComputeClient {
    /// Check `config` and build the client (no request is made).
    pub fn new(config: ClientConfig) -> Result<Self> {
        let endpoint = config.endpoint.trim_end_matches('/').to_owned();
        check_http_url("endpoint", &endpoint)?;
        if config.project.is_empty() {
            return Err(Error::config("project", "must not be empty"));
        }
        let region = config
            .region
            .clone()
            .filter(|r| !r.is_empty())
            .or_else(|| region_from_endpoint(&endpoint));
        let http = reqwest::Client::builder().build().map_err(|e| {
            Error::new(ErrorKind::Io, "failed to build the http client").with_source(e)
        })?;
        Ok(MaxComputeClient {
            http: OdpsHttp::new(
                http,
                &endpoint,
                config.credentials,
                region.clone(),
                config.request_timeout,
            ),
            project: config.project,
            region,
            sql_poll_interval: config.sql_poll_interval,
            sql_timeout: config.sql_timeout,
        })
    }

    /// The project.
    pub fn project(&self) -> &str {
        &self.project
    }

    /// The region used for v4 signatures and tunnel endpoint inference, if known.
    pub fn region(&self) -> Option<&str> {
        self.region.as_deref()
    }

    /// The REST endpoint.
    pub fn endpoint(&self) -> &str {
        self.http.endpoint()
    }

    /// `TableId` of `name` in this client's project and `schema`.
    pub fn table_id(&self, schema: Option<&str>, name: &str) -> TableId {
        TableId::new(&self.project, name).with_schema(schema.map(str::to_owned))
    }

    pub(crate) fn request(&self, method: Method, path: impl Into<String>) -> OdpsRequest {
        OdpsRequest::new(method, path).query("curr_project", self.project.clone())
    }

    /// The table's columns, partition columns, primary key and transactional flag
    /// ([`ErrorKind::NotFound`] when it does not exist).
    pub async fn get_table(&self, table: &TableId) -> Result<TableMeta> {
        let what = format!("maxcompute table {table}");
        let mut req = self.request(Method::GET, table.resource());
        if let Some(s) = &table.schema {
            req = req.query("curr_schema", s.clone());
        }
        let resp = self.http.send(&req, "get", &what).await?;
        if !resp.is_success() {
            return Err(resp.error("get", &what));
        }
        let doc = schema_json_of_table_xml(resp.text()?, &what)?;
        let (columns, partition_columns) = parse_schema_json(&doc, &what)?;
        let comment = doc
            .get("comment")
            .and_then(serde_json::Value::as_str)
            .unwrap_or_default()
            .to_owned();
        let (mut transactional, mut primary_key) = parse_reserved(&doc);
        if transactional.is_none() || primary_key.is_none() {
            // The extended view carries `Reserved` (pyodps reads it from there).
            let ext = req.query("extended", "");
            let resp = self.http.send(&ext, "get extended info of", &what).await?;
            if !resp.is_success() {
                return Err(resp.error("get extended info of", &what));
            }
            let doc = schema_json_of_table_xml(resp.text()?, &what)?;
            let (t, p) = parse_reserved(&doc);
            transactional = transactional.or(t);
            primary_key = primary_key.or(p);
        }
        Ok(TableMeta {
            id: table.clone(),
            columns,
            partition_columns,
            primary_key: primary_key.unwrap_or_default(),
            transactional: transactional.unwrap_or(false),
            comment,
        })
    }

    /// Whether the table exists.
    pub async fn table_exists(&self, table: &TableId) -> Result<bool> {
        match self.get_table(table).await {
            Ok(_) => Ok(true),
            Err(e) if e.kind() == ErrorKind::NotFound => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Every partition of the table, following the listing's markers.
    pub async fn list_partitions(&self, table: &TableId) -> Result<Vec<PartitionSpec>> {
        let what = format!("partitions of maxcompute table {table}");
        let mut out = Vec::new();
        let mut marker: Option<String> = None;
        loop {
            let mut req = self
                .request(Method::GET, table.resource())
                .query("partitions", "")
                .query("expectmarker", "true");
            if let Some(s) = &table.schema {
                req = req.query("curr_schema", s.clone());
            }
            if let Some(m) = &marker {
                req = req.query("marker", m.clone());
            }
            let resp = self.http.send(&req, "list", &what).await?;
            if !resp.is_success() {
                return Err(resp.error("list", &what));
            }
            let doc = Element::parse(resp.text()?)?;
            for p in doc.children_named("Partition") {
                let parts = p
                    .children_named("Column")
                    .map(|c| {
                        (
                            c.attribute("Name").unwrap_or_default().to_owned(),
                            c.attribute("Value").unwrap_or_default().to_owned(),
                        )
                    })
                    .collect();
                out.push(
                    PartitionSpec::new(parts)
                        .map_err(|e| e.while_doing(format!("listing {what}")))?,
                );
            }
            match doc.child_text("Marker").filter(|m| !m.is_empty()) {
                Some(m) if marker.as_deref() != Some(m.as_str()) => marker = Some(m),
                _ => break,
            }
        }
        Ok(out)
    }

    /// Whether the partition exists.
    pub async fn partition_exists(&self, table: &TableId, spec: &PartitionSpec) -> Result<bool> {
        let what = format!("partition {spec} of maxcompute table {table}");
        let mut req = self
            .request(Method::GET, table.resource())
            .query("partition", spec.to_string());
        if let Some(s) = &table.schema {
            req = req.query("curr_schema", s.clone());
        }
        let resp = self.http.send(&req, "get", &what).await?;
        if resp.is_success() {
            return Ok(true);
        }
        let e = resp.error("get", &what);
        if e.kind() == ErrorKind::NotFound {
            Ok(false)
        } else {
            Err(e)
        }
    }

    /// `ALTER TABLE … ADD [IF NOT EXISTS] PARTITION (…)`.
    pub async fn create_partition(
        &self,
        table: &TableId,
        spec: &PartitionSpec,
        if_not_exists: bool,
    ) -> Result<()> {
        self.run_sql(&crate::sql::add_partition(table, spec, if_not_exists))
            .await
            .map(drop)
    }

    /// `ALTER TABLE … DROP [IF EXISTS] PARTITION (…)`.
    pub async fn drop_partition(
        &self,
        table: &TableId,
        spec: &PartitionSpec,
        if_exists: bool,
    ) -> Result<()> {
        self.run_sql(&crate::sql::drop_partition(table, spec, if_exists))
            .await
            .map(drop)
    }

    /// The tunnel host the service names for this project (`GET /projects/<p>/tunnel?service`),
    /// as a URL with the REST endpoint's scheme. `quota` is sent as `quotaName` when set.
    pub async fn tunnel_service_endpoint(&self, quota: Option<&str>) -> Result<String> {
        let what = format!("tunnel endpoint of maxcompute project {}", self.project);
        let mut req = self
            .request(
                Method::GET,
                format!("/projects/{}/tunnel", encode(&self.project)),
            )
            .query("service", "");
        if let Some(q) = quota {
            req = req.query("quotaName", q);
        }
        let resp = self.http.send(&req, "look up", &what).await?;
        if !resp.is_success() {
            return Err(resp.error("look up", &what));
        }
        let host = resp.text()?.trim();
        if host.is_empty() || host.contains(char::is_whitespace) {
            return Err(Error::new(
                ErrorKind::Protocol,
                format!("maxcompute answered a bad {what}: `{host}`"),
            ));
        }
        if host.starts_with("http://") || host.starts_with("https://") {
            return Ok(host.trim_end_matches('/').to_owned());
        }
        let scheme = self
            .http
            .endpoint()
            .split_once("://")
            .map(|(s, _)| s)
            .unwrap_or("https");
        Ok(format!("{scheme}://{host}"))
    }
}

/// Check that `value` is an `http(s)://host…` URL, naming `option` otherwise.
pub(crate) fn check_http_url(option: &str, value: &str) -> Result<()> {
    let url = Url::parse(value)
        .map_err(|e| Error::config(option, format!("`{value}` is not a url: {e}")))?;
    if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
        return Err(Error::config(
            option,
            format!("`{value}` must be an http(s) url with a host"),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn region_comes_from_service_hosts_only() {
        for (endpoint, region) in [
            (
                "https://service.cn-hangzhou.maxcompute.aliyun.com/api",
                Some("cn-hangzhou"),
            ),
            (
                "http://service.cn-shanghai-vpc.maxcompute.aliyun-inc.com/api",
                Some("cn-shanghai"),
            ),
            (
                "https://service.ap-southeast-1.maxcompute.aliyun.com/api",
                Some("ap-southeast-1"),
            ),
            ("http://127.0.0.1:8080/api", None),
            ("http://maxcompute:8080", None),
            ("https://service.odps.aliyun.com/api", None),
        ] {
            assert_eq!(
                region_from_endpoint(endpoint).as_deref(),
                region,
                "{endpoint}"
            );
        }
    }
}
