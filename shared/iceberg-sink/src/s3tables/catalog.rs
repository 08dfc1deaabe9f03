//! [`S3TablesCatalog`]: `iceberg::Catalog` over the S3 Tables control plane, for one table bucket
//! (AWS S3 Tables, or OSS Tables through its S3 Tables-compatible endpoint).
//!
//! The control plane keeps, per table, a `metadataLocation` and a `versionToken`; the client
//! writes the metadata files itself. A commit is optimistic:
//!
//! ```text
//! load_table ── GetTable ──▶ versionToken T, metadataLocation M ── read M ──▶ base (kept per table)
//! update_table
//!   check requirements on base, apply updates ──▶ new metadata
//!   write <warehouse>/metadata/<N+1>-<uuid>.metadata.json (FileIO)
//!   UpdateTableMetadataLocation(T, new location)
//!     200 ─▶ new token T' kept with the new base
//!     409 (T is stale) ─▶ CatalogCommitConflicts, retryable; the unused file is deleted;
//!                         iceberg's transaction reloads and tries again
//!     5xx / dropped ─▶ commit state unknown (not retryable; the file is kept)
//! ```
//! The base of a commit is the state the last `load_table` of that table saw on this catalog
//! (iceberg's transactions load right before committing), so a concurrent writer shows up as a
//! stale token. Without a kept base, `update_table` reads the table first.
//!
//! Creating a table: CreateTable with no `metadata`, then floe writes the first metadata file
//! under the table's `warehouseLocation` and points the table at it, the same on every server
//! (moto writes no metadata file of its own). A table left without metadata by an interrupted
//! create reads as not found, and creating it again finishes the job.

use std::collections::HashMap;
use std::str::FromStr;
use std::sync::{Arc, Mutex, PoisonError};

use async_trait::async_trait;
use iceberg::spec::{TableMetadata, TableMetadataBuilder, TableMetadataRef};
use iceberg::table::Table;
use iceberg::{
    Catalog, Error, ErrorKind, MetadataLocation, Namespace, NamespaceIdent, Result, Runtime,
    TableCommit, TableCreation, TableIdent, TableRequirement, TableUpdate,
};
use serde::Deserialize;
use serde_json::Value;

use super::client::S3TablesClient;
use super::config::S3TablesConfig;
use super::error::{Meaning, to_iceberg};
use crate::rest::file_io::{TableFileIo, table_file_io};

/// What GetTable says about a table.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct TableState {
    pub(crate) version_token: String,
    #[serde(default)]
    pub(crate) metadata_location: Option<String>,
    pub(crate) warehouse_location: String,
}

/// The table state a commit is based on.
#[derive(Clone)]
struct Base {
    version_token: String,
    metadata_location: String,
    metadata: TableMetadataRef,
}

/// An `iceberg::Catalog` over one S3 Tables table bucket; see the module doc.
pub struct S3TablesCatalog {
    name: String,
    client: S3TablesClient,
    warehouse: String,
    file_io_props: HashMap<String, String>,
    /// The tables' FileIOs, sharing their storage clients.
    file_ios: TableFileIo,
    /// `s3tables.managed-maintenance`.
    managed_maintenance: bool,
    bases: Mutex<HashMap<TableIdent, Base>>,
}

impl std::fmt::Debug for S3TablesCatalog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("S3TablesCatalog")
            .field("name", &self.name)
            .field("warehouse", &self.warehouse)
            .field("client", &self.client)
            .finish_non_exhaustive()
    }
}

fn parse<T: serde::de::DeserializeOwned>(v: Value, what: &str) -> Result<T> {
    serde_json::from_value(v).map_err(|e| {
        Error::new(ErrorKind::DataInvalid, format!("{what}: unexpected answer")).with_source(e)
    })
}

/// The one level of an S3 Tables namespace.
fn single(ns: &NamespaceIdent) -> Result<&str> {
    match ns.as_ref().as_slice() {
        [one] => Ok(one),
        _ => Err(Error::new(
            ErrorKind::FeatureUnsupported,
            format!("namespace `{ns}`: s3 tables namespaces have one level"),
        )),
    }
}

/// The location after `current` for `metadata` (`…/metadata/<N+1>-<uuid>.metadata.json`).
fn next_metadata_location(current: &str, metadata: &TableMetadata) -> Result<MetadataLocation> {
    let base = match MetadataLocation::from_str(current) {
        Ok(l) => l,
        // A name another writer chose differently: continue the numbering from the log.
        Err(_) => MetadataLocation::from_str(&format!(
            "{}/metadata/{:05}-{}.metadata.json",
            metadata.location().trim_end_matches('/'),
            metadata.metadata_log().len(),
            uuid::Uuid::new_v4()
        ))?,
    };
    Ok(base.with_next_version().with_new_metadata(metadata))
}

/// Write the first metadata file of a table that has none and point the table at it.
/// Returns the new version token, location and metadata.
pub(crate) async fn initialize_table(
    client: &S3TablesClient,
    arn: &str,
    namespace: &str,
    state: &TableState,
    creation: TableCreation,
    file_io_props: &HashMap<String, String>,
) -> Result<(String, String, TableMetadata)> {
    let warehouse = state.warehouse_location.trim_end_matches('/').to_owned();
    let name = creation.name.clone();
    let creation = TableCreation {
        location: Some(warehouse.clone()),
        ..creation
    };
    let metadata = TableMetadataBuilder::from_table_creation(creation)?
        .build()?
        .metadata;
    let location = MetadataLocation::new_with_metadata(&warehouse, &metadata);
    let io = table_file_io(&warehouse, file_io_props)?;
    metadata.write_to(&io, &location).await?;
    let location = location.to_string();
    let answer = client
        .update_table_metadata_location(arn, namespace, &name, &state.version_token, &location)
        .await
        .map_err(|e| to_iceberg(e, Meaning::Commit))?;
    let token = answer
        .get("versionToken")
        .and_then(Value::as_str)
        .ok_or_else(|| {
            Error::new(
                ErrorKind::DataInvalid,
                format!("table {namespace}.{name}: the metadata-location update returned no versionToken"),
            )
        })?
        .to_owned();
    Ok((token, location, metadata))
}

impl S3TablesCatalog {
    /// A catalog named `name` over `config.warehouse` (required), with the default HTTP client.
    pub fn new(name: &str, config: S3TablesConfig) -> floe_core::Result<Self> {
        let client = S3TablesClient::new(&config)?;
        Self::with_client(name, config, client)
    }

    /// [`S3TablesCatalog::new`] from properties (see [`S3TablesConfig`]).
    pub fn from_props(name: &str, props: &HashMap<String, String>) -> floe_core::Result<Self> {
        Self::new(name, S3TablesConfig::from_props(props)?)
    }

    /// A catalog that talks through `client`.
    pub fn with_client(
        name: &str,
        config: S3TablesConfig,
        client: S3TablesClient,
    ) -> floe_core::Result<Self> {
        let warehouse = config.warehouse.ok_or_else(|| {
            floe_core::Error::config(
                "warehouse",
                "the s3tables catalog needs the table bucket arn",
            )
        })?;
        Ok(S3TablesCatalog {
            name: name.to_owned(),
            client,
            warehouse,
            file_io_props: config.file_io_props,
            file_ios: TableFileIo::default(),
            managed_maintenance: config.managed_maintenance,
            bases: Mutex::new(HashMap::new()),
        })
    }

    /// The control-plane client.
    pub fn client(&self) -> &S3TablesClient {
        &self.client
    }

    /// The table bucket ARN.
    pub fn warehouse(&self) -> &str {
        &self.warehouse
    }

    fn bases(&self) -> std::sync::MutexGuard<'_, HashMap<TableIdent, Base>> {
        self.bases.lock().unwrap_or_else(PoisonError::into_inner)
    }

    async fn table_state(&self, ident: &TableIdent) -> Result<TableState> {
        let ns = single(ident.namespace())?;
        let answer = self
            .client
            .get_table(&self.warehouse, ns, ident.name())
            .await
            .map_err(|e| to_iceberg(e, Meaning::Table))?;
        parse(answer, &format!("failed to get table {ident}"))
    }

    /// Read the table's current state, keep it as the base of the next commit.
    async fn read_base(&self, ident: &TableIdent) -> Result<Base> {
        let state = self.table_state(ident).await?;
        let location = state.metadata_location.ok_or_else(|| {
            Error::new(
                ErrorKind::TableNotFound,
                format!("table {ident} has no iceberg metadata yet (create it again to finish)"),
            )
        })?;
        let io = self.file_ios.open(&location, &self.file_io_props)?;
        let metadata = TableMetadata::read_from(&io, &location).await?;
        let base = Base {
            version_token: state.version_token,
            metadata_location: location,
            metadata: Arc::new(metadata),
        };
        self.bases().insert(ident.clone(), base.clone());
        Ok(base)
    }

    fn table(&self, ident: &TableIdent, base: &Base) -> Result<Table> {
        let io = self
            .file_ios
            .open(base.metadata.location(), &self.file_io_props)?;
        Table::builder()
            .identifier(ident.clone())
            .metadata(base.metadata.clone())
            .metadata_location(base.metadata_location.clone())
            .file_io(io)
            .runtime(Runtime::try_current()?)
            .build()
    }
}

#[async_trait]
impl Catalog for S3TablesCatalog {
    async fn list_namespaces(
        &self,
        parent: Option<&NamespaceIdent>,
    ) -> Result<Vec<NamespaceIdent>> {
        if parent.is_some() {
            return Ok(Vec::new());
        }
        let mut out = Vec::new();
        let mut token: Option<String> = None;
        loop {
            let page = self
                .client
                .list_namespaces(&self.warehouse, token.as_deref())
                .await
                .map_err(|e| to_iceberg(e, Meaning::Namespace))?;
            for ns in page["namespaces"].as_array().into_iter().flatten() {
                let names: Vec<String> =
                    parse(ns["namespace"].clone(), "failed to list namespaces")?;
                out.push(NamespaceIdent::from_vec(names)?);
            }
            let next = page["continuationToken"].as_str().map(str::to_owned);
            if next.is_none() || next == token {
                return Ok(out);
            }
            token = next;
        }
    }

    async fn create_namespace(
        &self,
        namespace: &NamespaceIdent,
        properties: HashMap<String, String>,
    ) -> Result<Namespace> {
        if !properties.is_empty() {
            return Err(Error::new(
                ErrorKind::FeatureUnsupported,
                format!("namespace {namespace}: s3 tables namespaces have no properties"),
            ));
        }
        self.client
            .create_namespace(&self.warehouse, single(namespace)?)
            .await
            .map_err(|e| to_iceberg(e, Meaning::Namespace))?;
        Ok(Namespace::new(namespace.clone()))
    }

    async fn get_namespace(&self, namespace: &NamespaceIdent) -> Result<Namespace> {
        self.client
            .get_namespace(&self.warehouse, single(namespace)?)
            .await
            .map_err(|e| to_iceberg(e, Meaning::Namespace))?;
        Ok(Namespace::new(namespace.clone()))
    }

    async fn namespace_exists(&self, namespace: &NamespaceIdent) -> Result<bool> {
        match self.get_namespace(namespace).await {
            Ok(_) => Ok(true),
            Err(e) if e.kind() == ErrorKind::NamespaceNotFound => Ok(false),
            Err(e) => Err(e),
        }
    }

    async fn update_namespace(
        &self,
        namespace: &NamespaceIdent,
        _: HashMap<String, String>,
    ) -> Result<()> {
        Err(Error::new(
            ErrorKind::FeatureUnsupported,
            format!("namespace {namespace}: s3 tables namespaces have no properties"),
        ))
    }

    async fn drop_namespace(&self, namespace: &NamespaceIdent) -> Result<()> {
        self.client
            .delete_namespace(&self.warehouse, single(namespace)?)
            .await
            .map_err(|e| to_iceberg(e, Meaning::Namespace))?;
        Ok(())
    }

    async fn list_tables(&self, namespace: &NamespaceIdent) -> Result<Vec<TableIdent>> {
        let ns = single(namespace)?;
        let mut out = Vec::new();
        let mut token: Option<String> = None;
        loop {
            let page = self
                .client
                .list_tables(&self.warehouse, Some(ns), token.as_deref())
                .await
                .map_err(|e| to_iceberg(e, Meaning::Namespace))?;
            for t in page["tables"].as_array().into_iter().flatten() {
                let names: Vec<String> = parse(t["namespace"].clone(), "failed to list tables")?;
                let name = t["name"].as_str().unwrap_or_default().to_owned();
                out.push(TableIdent::new(NamespaceIdent::from_vec(names)?, name));
            }
            let next = page["continuationToken"].as_str().map(str::to_owned);
            if next.is_none() || next == token {
                return Ok(out);
            }
            token = next;
        }
    }

    async fn create_table(
        &self,
        namespace: &NamespaceIdent,
        creation: TableCreation,
    ) -> Result<Table> {
        let ns = single(namespace)?;
        let ident = TableIdent::new(namespace.clone(), creation.name.clone());
        match self
            .client
            .create_table(&self.warehouse, ns, ident.name(), None)
            .await
        {
            Ok(_) => {}
            // A table an interrupted create left without metadata is finished below.
            Err(e) if e.kind() == floe_core::ErrorKind::Conflict => {}
            Err(e) => return Err(to_iceberg(e, Meaning::Table)),
        }
        let state = self.table_state(&ident).await?;
        if state.metadata_location.is_some() {
            return Err(Error::new(
                ErrorKind::TableAlreadyExists,
                format!("table {ident} already exists"),
            ));
        }
        if let Some(location) = &creation.location
            && location.trim_end_matches('/') != state.warehouse_location.trim_end_matches('/')
        {
            return Err(Error::new(
                ErrorKind::FeatureUnsupported,
                format!(
                    "table {ident}: s3 tables chooses the location ({}), `{location}` cannot be used",
                    state.warehouse_location
                ),
            ));
        }
        // Tables whose rows floe deletes by position are compacted by floe, which moves its
        // record of those positions; the catalog's compaction would not.
        let compaction = creation
            .properties
            .get(crate::ON_CHANGE_PROP)
            .map(String::as_str)
            != Some("replace");
        let (token, location, metadata) = initialize_table(
            &self.client,
            &self.warehouse,
            ns,
            &state,
            creation,
            &self.file_io_props,
        )
        .await?;
        if self.managed_maintenance
            && let Err(e) = (self.client)
                .set_managed_maintenance(&self.warehouse, ns, ident.name(), compaction)
                .await
        {
            tracing::warn!(table = %ident, error = %e, "the table was created, but its maintenance could not be set (s3tables.managed-maintenance); set it with `floe tables put-table-maintenance-configuration`");
        }
        let base = Base {
            version_token: token,
            metadata_location: location,
            metadata: Arc::new(metadata),
        };
        self.bases().insert(ident.clone(), base.clone());
        self.table(&ident, &base)
    }

    async fn load_table(&self, table: &TableIdent) -> Result<Table> {
        let base = self.read_base(table).await?;
        self.table(table, &base)
    }

    async fn drop_table(&self, table: &TableIdent) -> Result<()> {
        self.client
            .delete_table(
                &self.warehouse,
                single(table.namespace())?,
                table.name(),
                None,
            )
            .await
            .map_err(|e| to_iceberg(e, Meaning::Table))?;
        self.bases().remove(table);
        Ok(())
    }

    async fn purge_table(&self, table: &TableIdent) -> Result<()> {
        // S3 Tables deletes a dropped table's storage itself.
        self.drop_table(table).await
    }

    async fn table_exists(&self, table: &TableIdent) -> Result<bool> {
        match self.table_state(table).await {
            Ok(state) => Ok(state.metadata_location.is_some()),
            Err(e)
                if matches!(
                    e.kind(),
                    ErrorKind::TableNotFound | ErrorKind::NamespaceNotFound
                ) =>
            {
                Ok(false)
            }
            Err(e) => Err(e),
        }
    }

    async fn rename_table(&self, src: &TableIdent, dest: &TableIdent) -> Result<()> {
        let (from_ns, to_ns) = (single(src.namespace())?, single(dest.namespace())?);
        self.client
            .rename_table(
                &self.warehouse,
                from_ns,
                src.name(),
                (from_ns != to_ns).then_some(to_ns),
                (src.name() != dest.name()).then_some(dest.name()),
                None,
            )
            .await
            .map_err(|e| to_iceberg(e, Meaning::Table))?;
        self.bases().remove(src);
        Ok(())
    }

    async fn register_table(&self, table: &TableIdent, _: String) -> Result<Table> {
        Err(Error::new(
            ErrorKind::FeatureUnsupported,
            format!("table {table}: s3 tables cannot register metadata written elsewhere"),
        ))
    }

    async fn update_table(&self, commit: TableCommit) -> Result<Table> {
        let (ident, requirements, updates) = crate::catalog::commit_parts(commit);
        crate::FloeCatalog::commit_updates(self, &ident, requirements, updates).await
    }
}

#[async_trait]
impl crate::FloeCatalog for S3TablesCatalog {
    async fn commit_updates(
        &self,
        ident: &TableIdent,
        requirements: Vec<TableRequirement>,
        updates: Vec<TableUpdate>,
    ) -> Result<Table> {
        let ident = ident.clone();
        let ns = single(ident.namespace())?.to_owned();
        let kept = self.bases().get(&ident).cloned();
        let base = match kept {
            Some(b) => b,
            None => self.read_base(&ident).await?,
        };
        for requirement in requirements {
            requirement.check(Some(&base.metadata))?;
        }
        let mut builder = (*base.metadata)
            .clone()
            .into_builder(Some(base.metadata_location.clone()));
        for update in updates {
            builder = update.apply(builder)?;
        }
        let metadata = builder.build()?.metadata;
        let location = next_metadata_location(&base.metadata_location, &metadata)?;
        let io = self
            .file_ios
            .open(metadata.location(), &self.file_io_props)?;
        metadata.write_to(&io, &location).await?;
        let location = location.to_string();

        let answer = match self
            .client
            .update_table_metadata_location(
                &self.warehouse,
                &ns,
                ident.name(),
                &base.version_token,
                &location,
            )
            .await
        {
            Ok(a) => a,
            Err(e) => {
                self.bases().remove(&ident);
                if e.kind() == floe_core::ErrorKind::Conflict {
                    // The file was never referenced: remove it (best effort).
                    if let Err(d) = io.delete(&location).await {
                        tracing::debug!(%location, error = %d, "could not delete unused metadata file");
                    }
                    tracing::info!(table = %ident, "commit conflict: stale version token");
                }
                return Err(to_iceberg(e, Meaning::Commit));
            }
        };
        let token = answer
            .get("versionToken")
            .and_then(Value::as_str)
            .map(str::to_owned);
        let base = Base {
            version_token: token.unwrap_or_default(),
            metadata_location: location,
            metadata: Arc::new(metadata),
        };
        if base.version_token.is_empty() {
            self.bases().remove(&ident);
        } else {
            self.bases().insert(ident.clone(), base.clone());
        }
        self.table(&ident, &base)
    }
}
