//! [`RestCatalog`]: `iceberg::Catalog` over the Iceberg REST spec, with SigV4 among its auths.
//!
//! ```text
//! connect ── GET {uri}/v1/config?warehouse=W ──▶ {defaults, overrides}
//!            prefix = overrides.prefix | config `prefix` | defaults.prefix (used verbatim)
//!            FileIO props = defaults < catalog props < overrides
//! load    ── GET  /v1/{prefix}/namespaces/{ns}/tables/{t} ──▶ metadata + config + storage-credentials
//! commit  ── POST /v1/{prefix}/namespaces/{ns}/tables/{t} {requirements, updates}
//!              200 ─▶ new metadata      409 ─▶ CatalogCommitConflicts (retryable)
//!              5xx / dropped ─▶ commit state unknown (not retryable: check history first)
//! ```
//! Namespaces of several levels are joined with 0x1F in paths, as the spec says.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

use async_trait::async_trait;
use iceberg::spec::{FormatVersion, TableMetadata};
use iceberg::table::Table;
use iceberg::{
    Catalog, Error, ErrorKind, Namespace, NamespaceIdent, Result, Runtime, TableCommit,
    TableCreation, TableIdent, TableRequirement, TableUpdate,
};
use reqwest::{Method, Url};
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::auth::{Authenticator, SigningClock, system_clock};
use super::client::{HttpClient, default_http_client, encode_segment, parse_json};
use super::config::RestCatalogConfig;
use super::error::{Op, http_error, into_floe_error};
use super::file_io::{TableFileIo, merge_table_props};

/// Builds a [`RestCatalog`] with a caller's HTTP client or signing clock.
pub struct RestCatalogBuilder {
    config: RestCatalogConfig,
    http: Option<reqwest::Client>,
    clock: Option<SigningClock>,
}

impl RestCatalogBuilder {
    /// A builder for `config`.
    pub fn new(config: RestCatalogConfig) -> Self {
        RestCatalogBuilder {
            config,
            http: None,
            clock: None,
        }
    }

    /// Use this HTTP client (timeouts, proxies, DNS overrides); default: rustls, 10 s to
    /// connect, 60 s per request.
    pub fn http_client(mut self, http: reqwest::Client) -> Self {
        self.http = Some(http);
        self
    }

    /// Read the SigV4 signing time from `clock` instead of the system clock (tests replaying
    /// vectors).
    pub fn signing_clock(mut self, clock: SigningClock) -> Self {
        self.clock = Some(clock);
        self
    }

    /// Fetch the server's config and return the catalog, named `name`.
    pub async fn connect(self, name: &str) -> floe_core::Result<RestCatalog> {
        let RestCatalogConfig {
            uri,
            warehouse,
            prefix,
            auth,
            headers,
            file_io_props,
        } = self.config;
        let http = match self.http {
            Some(h) => h,
            None => default_http_client()?,
        };
        let auth = Authenticator::new(&auth, self.clock.unwrap_or_else(system_clock));
        let client = HttpClient::new(http, auth, &headers)?;

        let what = format!("failed to read the config of rest catalog {uri}");
        let mut url = Url::parse(&format!("{uri}/v1/config")).map_err(|e| {
            floe_core::Error::config("uri", format!("`{uri}` is not a valid url: {e}"))
        })?;
        if let Some(w) = &warehouse {
            url.query_pairs_mut().append_pair("warehouse", w);
        }
        let body = client
            .send(Op::Config, &what, Method::GET, url.as_str(), None)
            .await
            .and_then(|a| a.ok(Op::Config, &what))
            .map_err(into_floe_error)?;
        let server: ConfigResponse = parse_json(&body, &what).map_err(into_floe_error)?;

        let mut props = server.defaults.clone();
        props.extend(file_io_props);
        props.extend(server.overrides.clone());
        let prefix = server
            .overrides
            .get("prefix")
            .cloned()
            .or(prefix)
            .or_else(|| server.defaults.get("prefix").cloned())
            .map(|p| p.trim_matches('/').to_owned())
            .filter(|p| !p.is_empty());
        let uri = server
            .overrides
            .get("uri")
            .map(|u| u.trim_end_matches('/').to_owned())
            .unwrap_or(uri);
        tracing::debug!(catalog = name, %uri, prefix = ?prefix, "rest catalog connected");
        Ok(RestCatalog {
            name: name.to_owned(),
            client,
            uri,
            prefix,
            props,
            table_props: Mutex::new(HashMap::new()),
            file_ios: TableFileIo::default(),
        })
    }
}

/// An Iceberg REST catalog client; see the module doc.
pub struct RestCatalog {
    name: String,
    client: HttpClient,
    uri: String,
    prefix: Option<String>,
    /// FileIO properties from the config exchange.
    props: HashMap<String, String>,
    /// Each loaded table's FileIO properties (catalog ones plus the server's table config), kept
    /// so a commit's answer gets the same FileIO as the load.
    table_props: Mutex<HashMap<TableIdent, HashMap<String, String>>>,
    /// The tables' FileIOs, sharing their storage clients.
    file_ios: TableFileIo,
}

impl std::fmt::Debug for RestCatalog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RestCatalog")
            .field("name", &self.name)
            .field("uri", &self.uri)
            .field("prefix", &self.prefix)
            .field("auth", &self.client)
            .finish_non_exhaustive()
    }
}

#[derive(Deserialize)]
struct ConfigResponse {
    #[serde(default)]
    defaults: HashMap<String, String>,
    #[serde(default)]
    overrides: HashMap<String, String>,
}

#[derive(Deserialize)]
struct LoadTableResult {
    #[serde(rename = "metadata-location", default)]
    metadata_location: Option<String>,
    metadata: TableMetadata,
    #[serde(default)]
    config: Option<HashMap<String, String>>,
    #[serde(rename = "storage-credentials", default)]
    storage_credentials: Option<Vec<StorageCredential>>,
}

#[derive(Deserialize)]
struct StorageCredential {
    prefix: String,
    #[serde(default)]
    config: HashMap<String, String>,
}

#[derive(Deserialize)]
struct NamespaceBody {
    namespace: Vec<String>,
    #[serde(default)]
    properties: Option<HashMap<String, String>>,
}

#[derive(Deserialize)]
struct ListNamespacesBody {
    #[serde(default)]
    namespaces: Vec<Vec<String>>,
    #[serde(rename = "next-page-token", default)]
    next_page_token: Option<String>,
}

#[derive(Deserialize)]
struct ListTablesBody {
    #[serde(default)]
    identifiers: Vec<TableIdent>,
    #[serde(rename = "next-page-token", default)]
    next_page_token: Option<String>,
}

/// The commit body, fields in the order the spec (and the S3 Tables vector) writes them.
#[derive(Serialize)]
struct CommitRequest<'a> {
    requirements: &'a [TableRequirement],
    updates: &'a [TableUpdate],
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

fn to_json(value: &impl Serialize, what: &str) -> Result<Vec<u8>> {
    serde_json::to_vec(value).map_err(|e| {
        Error::new(
            ErrorKind::DataInvalid,
            format!("{what}: cannot serialize the request"),
        )
        .with_source(e)
    })
}

impl RestCatalog {
    /// Read the configuration from properties and connect (see [`RestCatalogConfig`]).
    pub async fn from_props(
        name: &str,
        props: &HashMap<String, String>,
    ) -> floe_core::Result<Self> {
        RestCatalogBuilder::new(RestCatalogConfig::from_props(props)?)
            .connect(name)
            .await
    }

    /// Connect with `config` and the default HTTP client.
    pub async fn connect(name: &str, config: RestCatalogConfig) -> floe_core::Result<Self> {
        RestCatalogBuilder::new(config).connect(name).await
    }

    /// The catalog's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The path prefix in use (from the server's config or the `prefix` option).
    pub fn prefix(&self) -> Option<&str> {
        self.prefix.as_deref()
    }

    /// `{uri}/v1[/{prefix}]` followed by `tail` (which starts with `/`).
    fn url(&self, tail: &str) -> String {
        match &self.prefix {
            Some(p) => format!("{}/v1/{p}{tail}", self.uri),
            None => format!("{}/v1{tail}", self.uri),
        }
    }

    fn namespace_url(&self, ns: &NamespaceIdent) -> String {
        self.url(&format!(
            "/namespaces/{}",
            encode_segment(&ns.to_url_string())
        ))
    }

    fn table_url(&self, t: &TableIdent) -> String {
        format!(
            "{}/tables/{}",
            self.namespace_url(t.namespace()),
            encode_segment(t.name())
        )
    }

    /// Build the [`Table`] for a load, create or commit answer.
    fn table_from(
        &self,
        ident: &TableIdent,
        result: LoadTableResult,
        fresh_props: bool,
    ) -> Result<Table> {
        let location = result.metadata.location().to_owned();
        let props = if fresh_props {
            let credentials: Vec<(String, HashMap<String, String>)> = result
                .storage_credentials
                .unwrap_or_default()
                .into_iter()
                .map(|c| (c.prefix, c.config))
                .collect();
            let props = merge_table_props(
                &self.props,
                &result.config.unwrap_or_default(),
                &credentials,
                &location,
            );
            lock(&self.table_props).insert(ident.clone(), props.clone());
            props
        } else {
            lock(&self.table_props)
                .get(ident)
                .cloned()
                .unwrap_or_else(|| self.props.clone())
        };
        let mut builder = Table::builder()
            .identifier(ident.clone())
            .metadata(result.metadata)
            .file_io(self.file_ios.open(&location, &props)?)
            .runtime(Runtime::try_current()?);
        if let Some(l) = result.metadata_location {
            builder = builder.metadata_location(l);
        }
        builder.build()
    }

    /// GET `url`, following `next-page-token` until the last page.
    async fn get_pages<T, F>(&self, op: Op, what: &str, url: &str, mut each: F) -> Result<()>
    where
        T: serde::de::DeserializeOwned,
        F: FnMut(T) -> Option<String>,
    {
        let mut token: Option<String> = None;
        loop {
            let mut u = Url::parse(url).map_err(|e| {
                Error::new(ErrorKind::DataInvalid, format!("{what}: bad url `{url}`"))
                    .with_source(e)
            })?;
            if let Some(t) = &token {
                u.query_pairs_mut().append_pair("pageToken", t);
            }
            let body = self
                .client
                .send(op, what, Method::GET, u.as_str(), None)
                .await?
                .ok(op, what)?;
            let next = each(parse_json(&body, what)?).filter(|t| !t.is_empty());
            if next.is_none() || next == token {
                return Ok(());
            }
            token = next;
        }
    }

    /// HEAD `url`; a server without HEAD (405/501) is asked with GET.
    async fn exists(&self, op: Op, what: &str, url: &str) -> Result<bool> {
        let mut answer = self.client.send(op, what, Method::HEAD, url, None).await?;
        if matches!(answer.status, 405 | 501) {
            answer = self.client.send(op, what, Method::GET, url, None).await?;
        }
        match answer.status {
            200..=299 => Ok(true),
            404 => Ok(false),
            status => Err(http_error(op, what, status, &answer.body)),
        }
    }

    /// Commit `requirements` and `updates` to table `ident`: the commit endpoint itself,
    /// without the [`TableCommit`] wrapper (whose constructor iceberg keeps private).
    ///
    /// A 409 is [`ErrorKind::CatalogCommitConflicts`] (retryable); a 5xx or a dropped connection
    /// is commit-state-unknown ([`super::is_commit_state_unknown`]).
    pub async fn commit_table(
        &self,
        ident: &TableIdent,
        requirements: &[TableRequirement],
        updates: &[TableUpdate],
    ) -> Result<Table> {
        let what = format!("failed to commit table {ident}");
        let body = to_json(
            &CommitRequest {
                requirements,
                updates,
            },
            &what,
        )?;
        let answer = self
            .client
            .send(
                Op::Commit,
                &what,
                Method::POST,
                &self.table_url(ident),
                Some(body),
            )
            .await?
            .ok(Op::Commit, &what)?;
        let result: LoadTableResult = parse_json(&answer, &what)?;
        self.table_from(ident, result, false)
    }
}

#[async_trait]
impl Catalog for RestCatalog {
    async fn list_namespaces(
        &self,
        parent: Option<&NamespaceIdent>,
    ) -> Result<Vec<NamespaceIdent>> {
        let what = "failed to list namespaces";
        let mut url = Url::parse(&self.url("/namespaces")).map_err(|e| {
            Error::new(ErrorKind::DataInvalid, format!("{what}: bad catalog url")).with_source(e)
        })?;
        if let Some(p) = parent {
            url.query_pairs_mut()
                .append_pair("parent", &p.to_url_string());
        }
        let mut out = Vec::new();
        let mut bad = None;
        self.get_pages(
            Op::Namespace,
            what,
            url.as_str(),
            |page: ListNamespacesBody| {
                for ns in page.namespaces {
                    match NamespaceIdent::from_vec(ns) {
                        Ok(n) => out.push(n),
                        Err(e) => bad = Some(e),
                    }
                }
                page.next_page_token
            },
        )
        .await?;
        match bad {
            Some(e) => Err(e),
            None => Ok(out),
        }
    }

    async fn create_namespace(
        &self,
        namespace: &NamespaceIdent,
        properties: HashMap<String, String>,
    ) -> Result<Namespace> {
        let what = format!("failed to create namespace {namespace}");
        let body = to_json(
            &json!({"namespace": namespace.as_ref(), "properties": properties}),
            &what,
        )?;
        let answer = self
            .client
            .send(
                Op::CreateNamespace,
                &what,
                Method::POST,
                &self.url("/namespaces"),
                Some(body),
            )
            .await?
            .ok(Op::CreateNamespace, &what)?;
        let created: NamespaceBody = parse_json(&answer, &what)?;
        Ok(Namespace::with_properties(
            NamespaceIdent::from_vec(created.namespace)?,
            created.properties.unwrap_or(properties),
        ))
    }

    async fn get_namespace(&self, namespace: &NamespaceIdent) -> Result<Namespace> {
        let what = format!("failed to get namespace {namespace}");
        let answer = self
            .client
            .send(
                Op::Namespace,
                &what,
                Method::GET,
                &self.namespace_url(namespace),
                None,
            )
            .await?
            .ok(Op::Namespace, &what)?;
        let got: NamespaceBody = parse_json(&answer, &what)?;
        Ok(Namespace::with_properties(
            NamespaceIdent::from_vec(got.namespace)?,
            got.properties.unwrap_or_default(),
        ))
    }

    async fn namespace_exists(&self, namespace: &NamespaceIdent) -> Result<bool> {
        let what = format!("failed to check namespace {namespace}");
        self.exists(Op::Namespace, &what, &self.namespace_url(namespace))
            .await
    }

    async fn update_namespace(
        &self,
        namespace: &NamespaceIdent,
        properties: HashMap<String, String>,
    ) -> Result<()> {
        let current = self.get_namespace(namespace).await?;
        let removals: Vec<&String> = current
            .properties()
            .keys()
            .filter(|k| !properties.contains_key(*k))
            .collect();
        let what = format!("failed to update namespace {namespace}");
        let body = to_json(&json!({"removals": removals, "updates": properties}), &what)?;
        let url = format!("{}/properties", self.namespace_url(namespace));
        self.client
            .send(Op::Namespace, &what, Method::POST, &url, Some(body))
            .await?
            .ok(Op::Namespace, &what)?;
        Ok(())
    }

    async fn drop_namespace(&self, namespace: &NamespaceIdent) -> Result<()> {
        let what = format!("failed to drop namespace {namespace}");
        self.client
            .send(
                Op::Namespace,
                &what,
                Method::DELETE,
                &self.namespace_url(namespace),
                None,
            )
            .await?
            .ok(Op::Namespace, &what)?;
        Ok(())
    }

    async fn list_tables(&self, namespace: &NamespaceIdent) -> Result<Vec<TableIdent>> {
        let what = format!("failed to list tables of {namespace}");
        let url = format!("{}/tables", self.namespace_url(namespace));
        let mut out = Vec::new();
        self.get_pages(Op::Namespace, &what, &url, |page: ListTablesBody| {
            out.extend(page.identifiers);
            page.next_page_token
        })
        .await?;
        Ok(out)
    }

    async fn create_table(
        &self,
        namespace: &NamespaceIdent,
        creation: TableCreation,
    ) -> Result<Table> {
        let ident = TableIdent::new(namespace.clone(), creation.name.clone());
        let what = format!("failed to create table {ident}");
        let mut properties = creation.properties;
        if creation.format_version != FormatVersion::V2 {
            properties
                .entry("format-version".to_owned())
                .or_insert_with(|| (creation.format_version as u8).to_string());
        }
        let mut request = json!({
            "name": creation.name,
            "schema": creation.schema,
            "stage-create": false,
            "properties": properties,
        });
        if let Some(location) = creation.location {
            request["location"] = json!(location);
        }
        if let Some(spec) = creation.partition_spec {
            request["partition-spec"] = serde_json::to_value(spec)?;
        }
        if let Some(order) = creation.sort_order {
            request["write-order"] = serde_json::to_value(order)?;
        }
        let body = to_json(&request, &what)?;
        let url = format!("{}/tables", self.namespace_url(namespace));
        let answer = self
            .client
            .send(Op::CreateTable, &what, Method::POST, &url, Some(body))
            .await?
            .ok(Op::CreateTable, &what)?;
        let result: LoadTableResult = parse_json(&answer, &what)?;
        self.table_from(&ident, result, true)
    }

    async fn load_table(&self, table: &TableIdent) -> Result<Table> {
        let what = format!("failed to load table {table}");
        let answer = self
            .client
            .send(Op::Table, &what, Method::GET, &self.table_url(table), None)
            .await?
            .ok(Op::Table, &what)?;
        let result: LoadTableResult = parse_json(&answer, &what)?;
        self.table_from(table, result, true)
    }

    async fn drop_table(&self, table: &TableIdent) -> Result<()> {
        let what = format!("failed to drop table {table}");
        self.client
            .send(
                Op::Table,
                &what,
                Method::DELETE,
                &self.table_url(table),
                None,
            )
            .await?
            .ok(Op::Table, &what)?;
        lock(&self.table_props).remove(table);
        Ok(())
    }

    async fn purge_table(&self, table: &TableIdent) -> Result<()> {
        let what = format!("failed to purge table {table}");
        let url = format!("{}?purgeRequested=true", self.table_url(table));
        self.client
            .send(Op::Table, &what, Method::DELETE, &url, None)
            .await?
            .ok(Op::Table, &what)?;
        lock(&self.table_props).remove(table);
        Ok(())
    }

    async fn table_exists(&self, table: &TableIdent) -> Result<bool> {
        let what = format!("failed to check table {table}");
        self.exists(Op::Table, &what, &self.table_url(table)).await
    }

    async fn rename_table(&self, src: &TableIdent, dest: &TableIdent) -> Result<()> {
        let what = format!("failed to rename table {src} to {dest}");
        let body = to_json(&json!({"source": src, "destination": dest}), &what)?;
        self.client
            .send(
                Op::CreateTable,
                &what,
                Method::POST,
                &self.url("/tables/rename"),
                Some(body),
            )
            .await?
            .ok(Op::CreateTable, &what)?;
        lock(&self.table_props).remove(src);
        Ok(())
    }

    async fn register_table(&self, table: &TableIdent, metadata_location: String) -> Result<Table> {
        let what = format!("failed to register table {table}");
        let body = to_json(
            &json!({"name": table.name(), "metadata-location": metadata_location}),
            &what,
        )?;
        let url = format!("{}/register", self.namespace_url(table.namespace()));
        let answer = self
            .client
            .send(Op::CreateTable, &what, Method::POST, &url, Some(body))
            .await?
            .ok(Op::CreateTable, &what)?;
        let result: LoadTableResult = parse_json(&answer, &what)?;
        self.table_from(table, result, true)
    }

    async fn update_table(&self, commit: TableCommit) -> Result<Table> {
        let (ident, requirements, updates) = crate::catalog::commit_parts(commit);
        self.commit_table(&ident, &requirements, &updates).await
    }
}

#[async_trait]
impl crate::FloeCatalog for RestCatalog {
    async fn commit_updates(
        &self,
        ident: &TableIdent,
        requirements: Vec<TableRequirement>,
        updates: Vec<TableUpdate>,
    ) -> Result<Table> {
        self.commit_table(ident, &requirements, &updates).await
    }
}
