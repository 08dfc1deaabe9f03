//! Staging without an Iceberg table: where a route whose only target is MaxCompute writes its
//! Parquet files, and the small catalog that keeps their schema.
//!
//! The writer stack wants a table: a location, a schema decided once (from the first object any
//! instance reads) and evolved by compare-and-set, a partition spec and a FileIO. A route with an
//! Iceberg target writes into its own table. A MaxCompute-only route has none and needs no
//! Iceberg catalog: [`StagingCatalog`] keeps each staging table's metadata as one entry of the
//! checkpoint table, `staging-table/<namespace>.<name>`. The entry is created insert-if-absent,
//! so racing instances agree on the first schema. Each update (columns added when the route
//! evolves) is written only if the entry's version is still the one it was built from, as a
//! catalog checks a commit's base. No snapshot is ever committed to it and no metadata file is
//! written: only data files, under the staging location, which the MaxCompute committer reads
//! back and deletes once MaxCompute has their rows.
//!
//! | `[maxcompute] staging-location` | where the files go |
//! |---|---|
//! | set (a folder, `file://`, `s3://` or `oss://` URL) | there |
//! | unset, `[checkpoint] type = "object-store"` | the checkpoint's bucket, beside its prefix: `floe/checkpoint/` → `floe/staging/` (another prefix `p/` → `p/staging-files/`) |
//! | unset, a SQLite checkpoint and the embedded `sql` catalog | the catalog's warehouse folder |
//! | unset, a SQLite checkpoint and another catalog | `staging/` beside the checkpoint database |
//!
//! A staging location on a bucket is reached with the checkpoint bucket's endpoint, region,
//! addressing and keys (the source's when the checkpoint is local); with no keys configured,
//! the same defaults as the stores (OSS: Function Compute's role keys; S3: the AWS default
//! chain), fetched again for every table load, so a long-lived instance follows its keys'
//! replacement. Each table's files are under `<location>/<namespace>/<name>/data/`.
//!
//! Files staged before this catalog existed live in a `floe_staging.*` table of the Iceberg
//! catalog; the committer still reads them from there (see `maxcompute::readback`).

use std::collections::HashMap;
use std::fmt;
use std::path::Path;
use std::sync::Arc;

use async_trait::async_trait;
use floe_checkpoint::{CheckpointStore, StoreExt, Version};
use floe_core::Provider;
use floe_iceberg::FloeCatalog;
use floe_signing::CredentialSource;
use iceberg::io::{
    FileIO, S3_ACCESS_KEY_ID, S3_ENDPOINT, S3_PATH_STYLE_ACCESS, S3_REGION, S3_SECRET_ACCESS_KEY,
    S3_SESSION_TOKEN,
};
use iceberg::spec::{TableMetadata, TableMetadataBuilder};
use iceberg::table::Table;
use iceberg::{
    Catalog, Error, ErrorKind, MetadataLocation, Namespace, NamespaceIdent, Result, Runtime,
    TableCommit, TableCreation, TableIdent, TableRequirement, TableUpdate,
};
use serde::{Deserialize, Serialize};

use crate::config::{CheckpointConfig, FloeConfig, SourceConfig, StoreSettings};

/// Checkpoint key prefix of the staging tables' entries.
const KEY_PREFIX: &str = "staging-table/";

/// Where staged files go and how that storage is reached (see the module doc).
#[derive(Clone)]
pub struct StagingArea {
    /// The root location, without a trailing slash.
    root: String,
    /// FileIO properties besides the keys.
    props: HashMap<String, String>,
    /// Where the keys come from (a bucket location), fetched at every table load.
    credentials: Option<CredentialSource>,
    /// The staging tables' FileIOs, sharing their storage clients.
    file_ios: floe_iceberg::rest::TableFileIo,
}

impl fmt::Debug for StagingArea {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StagingArea")
            .field("root", &self.root)
            .finish_non_exhaustive()
    }
}

impl StagingArea {
    /// The staging area `config` says (see the module doc); reads the environment for keys but
    /// makes no request.
    pub fn from_config(config: &FloeConfig) -> floe_core::Result<StagingArea> {
        let bucket_store = match (&config.checkpoint, &config.source) {
            (
                CheckpointConfig::ObjectStore {
                    provider,
                    bucket,
                    prefix,
                    store,
                },
                _,
            ) => Some((*provider, Some((bucket, prefix)), store)),
            (_, SourceConfig::Cloud(c)) => Some((c.provider, None, &c.store)),
            _ => None,
        };
        let root = match (&config.staging_location, &config.checkpoint, bucket_store) {
            (Some(l), _, _) => absolute(l, &config.base_dir),
            (None, _, Some((provider, Some((bucket, prefix)), _))) => {
                let base = prefix.strip_suffix("checkpoint/").map_or_else(
                    || format!("{prefix}staging-files"),
                    |p| format!("{p}staging"),
                );
                format!("{}://{bucket}/{base}", scheme_of(provider))
            }
            (None, CheckpointConfig::Sqlite { path }, _) => {
                if config.catalog.kind == floe_iceberg::CatalogKind::Sql {
                    config.catalog.local_warehouse()?
                } else {
                    let dir = path.parent().unwrap_or(Path::new("."));
                    absolute(&dir.join("staging").to_string_lossy(), &config.base_dir)
                }
            }
            (None, CheckpointConfig::ObjectStore { .. }, _) => {
                return Err(floe_core::Error::unexpected(
                    "object-store checkpoint without its bucket",
                ));
            }
        };
        let root = root.trim_end_matches('/').to_owned();
        let on_bucket = !root.starts_with("file://");
        let (props, credentials) = match bucket_store {
            Some((provider, _, settings)) if on_bucket => (
                bucket_props(settings),
                Some(bucket_credentials(provider, settings)?),
            ),
            _ => (HashMap::new(), None),
        };
        Ok(StagingArea {
            root,
            props,
            credentials,
            file_ios: Default::default(),
        })
    }

    /// A local folder (tests).
    pub fn local(folder: &Path) -> StagingArea {
        StagingArea {
            root: format!("file://{}", folder.display()),
            props: HashMap::new(),
            credentials: None,
            file_ios: Default::default(),
        }
    }

    /// The root location.
    pub fn root(&self) -> &str {
        &self.root
    }

    /// Write and delete a small file under the root: the location is reachable and writable.
    pub async fn probe(&self) -> floe_core::Result<()> {
        let path = format!("{}/_probe/{}", self.root, uuid::Uuid::now_v7());
        let io = self.file_io().await.map_err(floe_iceberg::from_iceberg)?;
        let written = async {
            io.new_output(&path)?
                .write(bytes::Bytes::from_static(b"floe"))
                .await?;
            io.delete(&path).await
        };
        written.await.map_err(|e| {
            floe_iceberg::from_iceberg(e).while_doing(format!(
                "failed to write and delete {path} (staging location)"
            ))
        })
    }

    /// A FileIO for the area, with the current keys.
    async fn file_io(&self) -> Result<FileIO> {
        let mut props = self.props.clone();
        if let Some(source) = &self.credentials {
            let c = source.current().await.map_err(to_iceberg)?;
            props.insert(S3_ACCESS_KEY_ID.into(), c.access_key_id().to_owned());
            props.insert(
                S3_SECRET_ACCESS_KEY.into(),
                c.access_key_secret().expose().to_owned(),
            );
            if let Some(t) = c.security_token().filter(|t| !t.expose().is_empty()) {
                props.insert(S3_SESSION_TOKEN.into(), t.expose().to_owned());
            }
        }
        self.file_ios.open(&self.root, &props)
    }
}

/// `file://` URL of `location` when it is a path (relative ones from `base`), else as given.
fn absolute(location: &str, base: &Path) -> String {
    if location.contains("://") {
        return location.to_owned();
    }
    let path = Path::new(location);
    let path = if path.is_absolute() {
        path.to_owned()
    } else {
        base.join(path)
    };
    format!("file://{}", path.display())
}

fn scheme_of(provider: Provider) -> &'static str {
    match provider {
        Provider::Oss => "oss",
        Provider::S3 | Provider::Local => "s3",
    }
}

/// FileIO properties reaching a bucket as the stores do (an `oss://` location without an
/// endpoint gets OSS's from the region, see `floe_iceberg::rest::table_file_io`).
fn bucket_props(s: &StoreSettings) -> HashMap<String, String> {
    let mut props = HashMap::new();
    if let Some(e) = &s.endpoint {
        props.insert(S3_ENDPOINT.to_owned(), e.clone());
    }
    if let Some(r) = &s.region {
        props.insert(S3_REGION.to_owned(), r.clone());
    }
    if s.path_style {
        props.insert(S3_PATH_STYLE_ACCESS.to_owned(), "true".to_owned());
    }
    props
}

/// The keys a store with `settings` would sign with (see the module doc).
fn bucket_credentials(
    provider: Provider,
    s: &StoreSettings,
) -> floe_core::Result<CredentialSource> {
    let config = crate::sources::stores::store_config(provider, "staging", s);
    Ok(floe_storage::s3::credential_source(&config)?
        .unwrap_or_else(floe_iceberg::aws_chain::default_chain))
}

/// One staging table as the checkpoint keeps it.
#[derive(Serialize, Deserialize)]
struct Entry {
    /// Where the metadata would be, were it written (the base of the next update's).
    metadata_location: String,
    metadata: TableMetadata,
}

/// The staging tables' catalog over the checkpoint table (see the module doc). Namespaces
/// exist as long as a table is in them.
pub struct StagingCatalog {
    checkpoint: Arc<dyn CheckpointStore>,
    area: StagingArea,
}

impl fmt::Debug for StagingCatalog {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StagingCatalog")
            .field("area", &self.area)
            .finish_non_exhaustive()
    }
}

impl StagingCatalog {
    /// The catalog of `area`'s tables, kept in `checkpoint`.
    pub fn new(checkpoint: Arc<dyn CheckpointStore>, area: StagingArea) -> Self {
        StagingCatalog { checkpoint, area }
    }

    /// Where its tables' files are.
    pub fn area(&self) -> &StagingArea {
        &self.area
    }

    fn key(ident: &TableIdent) -> String {
        format!(
            "{KEY_PREFIX}{}.{}",
            ident.namespace().join("."),
            ident.name()
        )
    }

    async fn entry(&self, ident: &TableIdent) -> Result<Option<(Entry, Version)>> {
        self.checkpoint
            .get_json::<Entry>(&Self::key(ident))
            .await
            .map_err(to_iceberg)
    }

    async fn table(&self, ident: &TableIdent, entry: Entry) -> Result<Table> {
        Table::builder()
            .identifier(ident.clone())
            .metadata(entry.metadata)
            .metadata_location(entry.metadata_location)
            .file_io(self.area.file_io().await?)
            .runtime(Runtime::try_current()?)
            .build()
    }

    async fn idents(&self, prefix: &str) -> Result<Vec<TableIdent>> {
        let entries = self
            .checkpoint
            .scan(&format!("{KEY_PREFIX}{prefix}"))
            .await
            .map_err(to_iceberg)?;
        entries
            .iter()
            .filter_map(|e| e.key.strip_prefix(KEY_PREFIX))
            .map(|name| TableIdent::from_strs(name.split('.')))
            .collect()
    }
}

fn to_iceberg(e: floe_core::Error) -> Error {
    let retryable = e.is_retryable();
    Error::new(ErrorKind::Unexpected, e.to_string())
        .with_retryable(retryable)
        .with_source(e)
}

fn not_found(ident: &TableIdent) -> Error {
    Error::new(
        ErrorKind::TableNotFound,
        format!("staging table {ident} does not exist"),
    )
}

fn unsupported(what: &str) -> Error {
    Error::new(
        ErrorKind::FeatureUnsupported,
        format!("the staging catalog does not {what}"),
    )
}

#[async_trait]
impl Catalog for StagingCatalog {
    async fn list_namespaces(
        &self,
        parent: Option<&NamespaceIdent>,
    ) -> Result<Vec<NamespaceIdent>> {
        if parent.is_some() {
            return Ok(Vec::new());
        }
        let mut namespaces: Vec<NamespaceIdent> = Vec::new();
        for t in self.idents("").await? {
            if !namespaces.contains(t.namespace()) {
                namespaces.push(t.namespace().clone());
            }
        }
        Ok(namespaces)
    }

    async fn create_namespace(
        &self,
        namespace: &NamespaceIdent,
        properties: HashMap<String, String>,
    ) -> Result<Namespace> {
        Ok(Namespace::with_properties(namespace.clone(), properties))
    }

    async fn get_namespace(&self, namespace: &NamespaceIdent) -> Result<Namespace> {
        Ok(Namespace::new(namespace.clone()))
    }

    async fn namespace_exists(&self, namespace: &NamespaceIdent) -> Result<bool> {
        Ok(!self.list_tables(namespace).await?.is_empty())
    }

    async fn update_namespace(
        &self,
        _namespace: &NamespaceIdent,
        _properties: HashMap<String, String>,
    ) -> Result<()> {
        Err(unsupported("keep namespace properties"))
    }

    async fn drop_namespace(&self, _namespace: &NamespaceIdent) -> Result<()> {
        Err(unsupported("drop namespaces"))
    }

    async fn list_tables(&self, namespace: &NamespaceIdent) -> Result<Vec<TableIdent>> {
        let prefix = format!("{}.", namespace.join("."));
        Ok(self
            .idents(&prefix)
            .await?
            .into_iter()
            .filter(|t| t.namespace() == namespace)
            .collect())
    }

    async fn create_table(
        &self,
        namespace: &NamespaceIdent,
        creation: TableCreation,
    ) -> Result<Table> {
        let ident = TableIdent::new(namespace.clone(), creation.name.clone());
        let location = match &creation.location {
            Some(l) => l.clone(),
            None => format!(
                "{}/{}/{}",
                self.area.root,
                namespace.join("/"),
                creation.name
            ),
        };
        let creation = TableCreation {
            location: Some(location.clone()),
            ..creation
        };
        let metadata = TableMetadataBuilder::from_table_creation(creation)?
            .build()?
            .metadata;
        let entry = Entry {
            metadata_location: MetadataLocation::new_with_metadata(&location, &metadata)
                .to_string(),
            metadata,
        };
        let inserted = self
            .checkpoint
            .insert_json(&Self::key(&ident), &entry, None)
            .await
            .map_err(to_iceberg)?;
        if inserted.is_none() {
            return Err(Error::new(
                ErrorKind::TableAlreadyExists,
                format!("staging table {ident} already exists"),
            ));
        }
        self.table(&ident, entry).await
    }

    async fn load_table(&self, ident: &TableIdent) -> Result<Table> {
        match self.entry(ident).await? {
            Some((entry, _)) => self.table(ident, entry).await,
            None => Err(not_found(ident)),
        }
    }

    async fn drop_table(&self, ident: &TableIdent) -> Result<()> {
        let (_, version) = self.entry(ident).await?.ok_or_else(|| not_found(ident))?;
        self.checkpoint
            .delete_if_version(&Self::key(ident), &version)
            .await
            .map_err(to_iceberg)?;
        Ok(())
    }

    async fn purge_table(&self, ident: &TableIdent) -> Result<()> {
        self.drop_table(ident).await
    }

    async fn table_exists(&self, ident: &TableIdent) -> Result<bool> {
        Ok(self.entry(ident).await?.is_some())
    }

    async fn rename_table(&self, _src: &TableIdent, _dest: &TableIdent) -> Result<()> {
        Err(unsupported("rename tables"))
    }

    async fn register_table(&self, _ident: &TableIdent, _location: String) -> Result<Table> {
        Err(unsupported("register tables"))
    }

    async fn update_table(&self, commit: TableCommit) -> Result<Table> {
        let (ident, requirements, updates) = floe_iceberg::catalog::commit_parts(commit);
        self.commit_updates(&ident, requirements, updates).await
    }
}

#[async_trait]
impl FloeCatalog for StagingCatalog {
    async fn commit_updates(
        &self,
        ident: &TableIdent,
        requirements: Vec<TableRequirement>,
        updates: Vec<TableUpdate>,
    ) -> Result<Table> {
        let ident = ident.clone();
        let (entry, version) = self.entry(&ident).await?.ok_or_else(|| not_found(&ident))?;
        let table = self.table(&ident, entry).await?;
        let updated = floe_iceberg::catalog::apply_updates(&table, requirements, updates)?;
        let entry = Entry {
            metadata_location: updated.metadata_location_result()?.to_owned(),
            metadata: updated.metadata().clone(),
        };
        let written = self
            .checkpoint
            .update_json(&Self::key(&ident), &entry, &version, None)
            .await
            .map_err(to_iceberg)?;
        match written {
            Some(_) => Ok(updated),
            None => Err(Error::new(
                ErrorKind::CatalogCommitConflicts,
                format!("staging table {ident} changed meanwhile"),
            )
            .with_retryable(true)),
        }
    }
}

/// The Iceberg catalog of a configuration whose routes all target MaxCompute only and that
/// configures no catalog: there is nothing to open (the embedded default would create a
/// database beside the configuration, which a deployed function may not even be able to
/// write). It holds no namespace, and every other call says why there is no catalog.
#[derive(Debug)]
pub struct NoIcebergCatalog;

fn no_catalog() -> Error {
    Error::new(
        ErrorKind::Unexpected,
        "no iceberg catalog: no route targets iceberg and [iceberg] configures none",
    )
}

#[async_trait]
impl Catalog for NoIcebergCatalog {
    async fn list_namespaces(&self, _: Option<&NamespaceIdent>) -> Result<Vec<NamespaceIdent>> {
        Ok(Vec::new())
    }
    async fn create_namespace(
        &self,
        _: &NamespaceIdent,
        _: HashMap<String, String>,
    ) -> Result<Namespace> {
        Err(no_catalog())
    }
    async fn get_namespace(&self, _: &NamespaceIdent) -> Result<Namespace> {
        Err(no_catalog())
    }
    async fn namespace_exists(&self, _: &NamespaceIdent) -> Result<bool> {
        Ok(false)
    }
    async fn update_namespace(&self, _: &NamespaceIdent, _: HashMap<String, String>) -> Result<()> {
        Err(no_catalog())
    }
    async fn drop_namespace(&self, _: &NamespaceIdent) -> Result<()> {
        Err(no_catalog())
    }
    async fn list_tables(&self, _: &NamespaceIdent) -> Result<Vec<TableIdent>> {
        Ok(Vec::new())
    }
    async fn create_table(&self, _: &NamespaceIdent, _: TableCreation) -> Result<Table> {
        Err(no_catalog())
    }
    async fn load_table(&self, ident: &TableIdent) -> Result<Table> {
        Err(Error::new(
            ErrorKind::TableNotFound,
            format!("{ident}: {}", no_catalog().message()),
        ))
    }
    async fn drop_table(&self, _: &TableIdent) -> Result<()> {
        Err(no_catalog())
    }
    async fn purge_table(&self, _: &TableIdent) -> Result<()> {
        Err(no_catalog())
    }
    async fn table_exists(&self, _: &TableIdent) -> Result<bool> {
        Ok(false)
    }
    async fn rename_table(&self, _: &TableIdent, _: &TableIdent) -> Result<()> {
        Err(no_catalog())
    }
    async fn register_table(&self, _: &TableIdent, _: String) -> Result<Table> {
        Err(no_catalog())
    }
    async fn update_table(&self, _: TableCommit) -> Result<Table> {
        Err(no_catalog())
    }
}

#[async_trait]
impl FloeCatalog for NoIcebergCatalog {
    async fn commit_updates(
        &self,
        _: &TableIdent,
        _: Vec<TableRequirement>,
        _: Vec<TableUpdate>,
    ) -> Result<Table> {
        Err(no_catalog())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::parse;
    use floe_decode::{Field, IcebergType, TableSchema};
    use floe_iceberg::{TableDefinition, add_missing_columns, ensure_table, load_table};

    fn config(text: &str) -> FloeConfig {
        FloeConfig::from_raw(parse(text, false).unwrap(), Path::new("/cfg")).unwrap()
    }

    const OSS: &str = "[source]\ntype = \"oss\"\noss-bucket = \"landing\"\noss-region = \"cn-beijing\"\ns3.access-key-id = \"id\"\ns3.secret-access-key = \"s\"\n";
    const MC: &str = "[maxcompute]\nendpoint = \"http://127.0.0.1:1/api\"\nproject = \"p\"\ntable_name = \"t\"\n";
    const ROUTE: &str = "[[routes]]\ntargets = [\"maxcompute\"]\n";

    #[test]
    fn the_location_follows_the_checkpoint_unless_set() {
        let area = |text: &str| StagingArea::from_config(&config(text)).unwrap();
        let c = area(&format!(
            "{OSS}[checkpoint]\ntype = \"object-store\"\nbucket = \"state\"\n{MC}{ROUTE}"
        ));
        assert_eq!(c.root(), "oss://state/floe/staging");
        assert_eq!(
            c.props.get(S3_ENDPOINT).map(String::as_str),
            Some("https://oss-cn-beijing.aliyuncs.com")
        );
        assert!(c.credentials.is_some());
        let c = area(&format!(
            "{OSS}[checkpoint]\ntype = \"object-store\"\nurl = \"oss://state/mine/\"\n{MC}{ROUTE}"
        ));
        assert_eq!(c.root(), "oss://state/mine/staging-files");
        let c = area(&format!(
            "{OSS}[checkpoint]\ntype = \"object-store\"\nbucket = \"state\"\n{MC}staging-location = \"oss://other/stage/\"\n{ROUTE}"
        ));
        assert_eq!(c.root(), "oss://other/stage");
        assert!(
            c.credentials.is_some(),
            "reached as the checkpoint bucket is"
        );

        let dir = tempfile::tempdir().unwrap();
        let local = format!(
            "[source]\nfolder = \"b\"\n[iceberg]\ncatalog.warehouse = \"{}\"\n{MC}{ROUTE}",
            dir.path().join("wh").display()
        );
        let c = area(&local);
        assert_eq!(
            c.root(),
            format!("file://{}", dir.path().join("wh").display())
        );
        assert!(c.credentials.is_none() && c.props.is_empty());
        let c = area(&format!(
            "[source]\nfolder = \"b\"\n{MC}staging-location = \"stage\"\n{ROUTE}"
        ));
        assert_eq!(c.root(), "file:///cfg/stage");
    }

    fn field(name: &str, ty: IcebergType) -> Field {
        Field::optional(name, ty)
    }

    fn definition(fields: Vec<Field>) -> TableDefinition {
        TableDefinition {
            schema: TableSchema::new(fields),
            partition_by: Vec::new(),
            properties: HashMap::new(),
        }
    }

    fn column_names(t: &Table) -> Vec<String> {
        t.metadata()
            .current_schema()
            .as_struct()
            .fields()
            .iter()
            .map(|f| f.name.clone())
            .collect()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn instances_agree_on_the_first_schema_and_every_evolution_lands() {
        let dir = tempfile::tempdir().unwrap();
        let checkpoint: Arc<dyn CheckpointStore> = Arc::new(
            floe_checkpoint::SqliteStore::open(&dir.path().join("checkpoint.db"))
                .await
                .unwrap(),
        );
        let area = StagingArea::local(&dir.path().join("stage"));
        let one = StagingCatalog::new(checkpoint.clone(), area.clone());
        let two = StagingCatalog::new(checkpoint.clone(), area);
        let ident = TableIdent::from_strs(["floe_staging", "events"]).unwrap();
        assert!(load_table(&one, &ident).await.unwrap().is_none());

        // Two instances create the table from what each read first: the first one wins.
        let (da, db) = (
            definition(vec![field("id", IcebergType::Long)]),
            definition(vec![field("name", IcebergType::String)]),
        );
        let a = ensure_table(&one, &ident, &da);
        let b = ensure_table(&two, &ident, &db);
        let (a, b) = tokio::join!(a, b);
        let (a, b) = (a.unwrap(), b.unwrap());
        assert_eq!(column_names(&a), column_names(&b));
        assert_eq!(
            a.metadata().location(),
            format!(
                "file://{}/floe_staging/events",
                dir.path().join("stage").display()
            )
        );

        // Both evolve it at once: the loser of the compare-and-set tries again on the new base.
        let (fx, fy) = (
            [field("x", IcebergType::Long)],
            [field("y", IcebergType::String)],
        );
        let x = add_missing_columns(&one, &ident, &fx, floe_decode::Names::default());
        let y = add_missing_columns(&two, &ident, &fy, floe_decode::Names::default());
        let (x, y) = tokio::join!(x, y);
        x.unwrap();
        y.unwrap();
        let t = load_table(&one, &ident).await.unwrap().unwrap();
        let mut names = column_names(&t);
        names.sort();
        let mut want = column_names(&a);
        want.extend(["x".to_owned(), "y".to_owned()]);
        want.sort();
        assert_eq!(names, want);
        assert_eq!(
            one.list_tables(ident.namespace()).await.unwrap(),
            vec![ident.clone()]
        );

        // Its files are written under the area, never to a catalog.
        let mut w = floe_iceberg::TableWriter::new(&t, &Default::default())
            .await
            .unwrap();
        let batch = arrow_array::RecordBatch::new_empty(w.arrow_schema().clone());
        w.write(batch).await.unwrap();
        for f in w.close().await.unwrap() {
            assert!(f.file_path().starts_with(&format!(
                "file://{}/floe_staging/events/data/",
                dir.path().join("stage").display()
            )));
        }
    }
}
