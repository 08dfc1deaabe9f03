//! Opening a catalog from Kafka Connect-style properties (`iceberg.catalog.*`, prefix removed).
//!
//! | `type` | catalog |
//! |---|---|
//! | `sql` (default) | SQLite through iceberg-rust's SQL catalog; same tables as pyiceberg's `SqlCatalog` |
//! | `rest` | an Iceberg REST catalog (bearer, OAuth2 or AWS SigV4) |
//! | `s3tables` | the S3 Tables control plane (also OSS Tables) |
//!
//! For `sql`, `uri` (default `catalog.db`) is a SQLite database: `sqlite:////abs/path.db` (pyiceberg's form),
//! `sqlite:///abs/path.db`, `jdbc:sqlite:/abs/path.db` or a plain path; relative paths are taken
//! from `base_dir` (the configuration file's folder). `warehouse` (default `warehouse`) is a
//! folder or `file://` URL.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::Arc;

use floe_core::{Error, ErrorKind, Result};
use iceberg::io::LocalFsStorageFactory;
use iceberg::table::Table;
use iceberg::{Catalog, CatalogBuilder, TableIdent, TableRequirement, TableUpdate};
use iceberg_catalog_sql::{SqlBindStyle, SqlCatalogBuilder};

/// A catalog floe commits to: an iceberg [`Catalog`] that also takes a commit as its
/// requirements and updates. iceberg-rust only lets its own transaction actions build a
/// `TableCommit`, and its only snapshot action is the fast append; floe's row deltas (data and
/// delete files in one snapshot, [`crate::delta`]) build their updates themselves and commit
/// them here. Every catalog floe opens implements it, and `update_table` is the same commit.
#[async_trait::async_trait]
pub trait FloeCatalog: Catalog {
    /// Apply `updates` to `ident` if every requirement holds, atomically; a requirement that
    /// fails, or another writer moving the table first, is a commit conflict.
    async fn commit_updates(
        &self,
        ident: &TableIdent,
        requirements: Vec<TableRequirement>,
        updates: Vec<TableUpdate>,
    ) -> iceberg::Result<Table>;
}

/// Which catalog implementation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CatalogKind {
    /// SQLite (the embedded default).
    Sql,
    /// Iceberg REST.
    Rest,
    /// S3 Tables / OSS Tables control plane.
    S3Tables,
}

/// A catalog's configuration: its name and its properties.
#[derive(Clone)]
pub struct CatalogConfig {
    /// The catalog's name (pyiceberg must open it under the same name to see the tables).
    pub name: String,
    /// Which implementation.
    pub kind: CatalogKind,
    /// Every property, Kafka Connect names without the `iceberg.catalog.` prefix.
    pub props: HashMap<String, String>,
    /// The folder relative paths are taken from.
    pub base_dir: PathBuf,
}

/// Whether a property holds a secret (its value is never printed).
pub fn is_secret_prop(key: &str) -> bool {
    let k = key.to_ascii_lowercase();
    ["secret", "token", "password", "credential", "session"]
        .iter()
        .any(|s| k.contains(s))
}

impl std::fmt::Debug for CatalogConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut props: Vec<(&String, &str)> = self
            .props
            .iter()
            .map(|(k, v)| (k, if is_secret_prop(k) { "***" } else { v.as_str() }))
            .collect();
        props.sort();
        f.debug_struct("CatalogConfig")
            .field("name", &self.name)
            .field("kind", &self.kind)
            .field("props", &props)
            .field("base_dir", &self.base_dir)
            .finish()
    }
}

impl CatalogConfig {
    /// Build from properties; `type` (or a Java `catalog-impl` class name) picks the kind.
    pub fn from_props(name: &str, props: HashMap<String, String>, base_dir: &Path) -> Result<Self> {
        let kind = match (
            props.get("type").map(String::as_str),
            props.get("catalog-impl").map(String::as_str),
        ) {
            (Some("sql") | Some("jdbc"), _) | (None, None) => CatalogKind::Sql,
            (Some("rest"), _) => CatalogKind::Rest,
            (Some("s3tables"), _) => CatalogKind::S3Tables,
            (None, Some(c)) if c.ends_with("JdbcCatalog") => CatalogKind::Sql,
            (None, Some(c)) if c.ends_with("RESTCatalog") => CatalogKind::Rest,
            (None, Some(c)) if c.contains("S3TablesCatalog") => CatalogKind::S3Tables,
            (Some(other), _) => {
                return Err(Error::config(
                    "iceberg.catalog.type",
                    format!("unknown catalog type `{other}`; expected sql, rest or s3tables"),
                ));
            }
            (None, Some(other)) => {
                return Err(Error::config(
                    "iceberg.catalog.catalog-impl",
                    format!("unsupported catalog class `{other}`"),
                ));
            }
        };
        if name.trim().is_empty() {
            return Err(Error::config(
                "iceberg.catalog.name",
                "the catalog name is empty",
            ));
        }
        Ok(CatalogConfig {
            name: name.to_owned(),
            kind,
            props,
            base_dir: base_dir.to_owned(),
        })
    }

    fn resolve(&self, p: &str) -> PathBuf {
        let path = Path::new(p);
        if path.is_absolute() {
            path.to_owned()
        } else {
            self.base_dir.join(path)
        }
    }

    /// The SQLite database file of a `sql` catalog.
    pub fn sqlite_path(&self) -> Result<PathBuf> {
        // The embedded default: `catalog.db` beside the configuration.
        let default_uri = "catalog.db".to_owned();
        let uri = self.props.get("uri").unwrap_or(&default_uri);
        let path = uri
            .strip_prefix("sqlite:///")
            .map(|p| {
                if p.starts_with('/') {
                    p.to_owned()
                } else {
                    format!("/{p}")
                }
            })
            .or_else(|| uri.strip_prefix("jdbc:sqlite:").map(str::to_owned))
            .or_else(|| uri.strip_prefix("sqlite://").map(str::to_owned))
            .or_else(|| uri.strip_prefix("sqlite:").map(str::to_owned))
            .unwrap_or_else(|| uri.clone());
        let path = path.split('?').next().unwrap_or_default().to_owned();
        if path.is_empty() || path == ":memory:" {
            return Err(Error::config(
                "iceberg.catalog.uri",
                "the sqlite database must be a file",
            ));
        }
        Ok(self.resolve(&path))
    }

    /// The warehouse as a `file://` URL (sql catalog).
    pub fn local_warehouse(&self) -> Result<String> {
        // The embedded default: `warehouse/` beside the configuration.
        let default_warehouse = "warehouse".to_owned();
        let w = self.props.get("warehouse").unwrap_or(&default_warehouse);
        if w.contains("://") && !w.starts_with("file://") {
            // Object-store warehouses are for the REST and S3 Tables catalogs.
            return Err(Error::config(
                "iceberg.catalog.warehouse",
                format!("`{w}`: the embedded sql catalog writes to a local folder"),
            ));
        }
        let path = self.resolve(w.strip_prefix("file://").unwrap_or(w));
        std::fs::create_dir_all(&path).map_err(|e| {
            Error::from(e).while_doing(format!("failed to create warehouse {}", path.display()))
        })?;
        let path = path.canonicalize().map_err(|e| {
            Error::from(e).while_doing(format!("failed to resolve {}", path.display()))
        })?;
        Ok(format!("file://{}", path.display()))
    }
}

/// A commit iceberg's transaction built, as [`FloeCatalog::commit_updates`] takes it: the
/// table, the requirements, the updates.
pub fn commit_parts(
    mut commit: iceberg::TableCommit,
) -> (TableIdent, Vec<TableRequirement>, Vec<TableUpdate>) {
    let requirements = commit.take_requirements();
    let updates = commit.take_updates();
    (commit.identifier().clone(), requirements, updates)
}

/// `table` with `updates` applied if every requirement holds, at the next metadata location
/// (not written): what a catalog that keeps metadata files does before swapping its pointer.
pub fn apply_updates(
    table: &Table,
    requirements: Vec<TableRequirement>,
    updates: Vec<TableUpdate>,
) -> iceberg::Result<Table> {
    let current = table.metadata_location_result()?;
    for requirement in requirements {
        requirement.check(Some(table.metadata()))?;
    }
    let mut builder = table
        .metadata()
        .clone()
        .into_builder(Some(current.to_owned()));
    for update in updates {
        builder = update.apply(builder)?;
    }
    let metadata = builder.build()?.metadata;
    let location = iceberg::MetadataLocation::from_str(current)?
        .with_next_version()
        .with_new_metadata(&metadata);
    Table::builder()
        .identifier(table.identifier().clone())
        .file_io(table.file_io().clone())
        .metadata(Arc::new(metadata))
        .metadata_location(location.to_string())
        .runtime(iceberg::Runtime::try_current()?)
        .build()
}

/// Open the catalog.
pub async fn open_catalog(config: &CatalogConfig) -> Result<Arc<dyn FloeCatalog>> {
    match config.kind {
        CatalogKind::Sql => {
            let db = config.sqlite_path()?;
            if let Some(dir) = db.parent() {
                std::fs::create_dir_all(dir).map_err(|e| {
                    Error::from(e).while_doing(format!("failed to create {}", dir.display()))
                })?;
            }
            let warehouse = config.local_warehouse()?;
            let mut props: HashMap<String, String> = config
                .props
                .iter()
                .filter(|(k, _)| {
                    !matches!(
                        k.as_str(),
                        "type" | "uri" | "warehouse" | "catalog-impl" | "name"
                    )
                })
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            props.insert("uri".into(), format!("sqlite://{}?mode=rwc", db.display()));
            props.insert("warehouse".into(), warehouse);
            props.insert("sql_bind_style".into(), SqlBindStyle::QMark.to_string());
            let catalog = SqlCatalogBuilder::default()
                .with_storage_factory(Arc::new(LocalFsStorageFactory))
                .load(&config.name, props)
                .await
                .map_err(|e| {
                    from_iceberg(e)
                        .while_doing(format!("failed to open sql catalog {}", db.display()))
                })?;
            Ok(Arc::new(
                crate::sql::SqlCatalog::new(&config.name, catalog, &db).await?,
            ))
        }
        CatalogKind::Rest => {
            let catalog = crate::rest::RestCatalog::from_props(&config.name, &config.props).await?;
            Ok(Arc::new(catalog))
        }
        CatalogKind::S3Tables => {
            let catalog =
                crate::s3tables::S3TablesCatalog::from_props(&config.name, &config.props)?;
            Ok(Arc::new(catalog))
        }
    }
}

/// Map an iceberg error to floe's, keeping it retryable when iceberg says so. A REST commit whose
/// outcome is unknown (5xx, a dropped connection) becomes [`ErrorKind::StateUnknown`], so the
/// committer checks the table history before trying again.
pub fn from_iceberg(e: iceberg::Error) -> Error {
    use iceberg::ErrorKind as K;
    if crate::rest::is_commit_state_unknown(&e) {
        let message = e.message().to_lowercase();
        return Error::new(ErrorKind::StateUnknown, message).with_source(e);
    }
    let kind = match e.kind() {
        K::TableNotFound | K::NamespaceNotFound => ErrorKind::NotFound,
        K::CatalogCommitConflicts
        | K::TableAlreadyExists
        | K::NamespaceAlreadyExists
        | K::PreconditionFailed => ErrorKind::Conflict,
        K::DataInvalid => ErrorKind::InvalidInput,
        K::FeatureUnsupported => ErrorKind::Unsupported,
        _ => ErrorKind::Unexpected,
    };
    let retryable = e.retryable();
    let message = e.message().to_lowercase();
    Error::new(kind, message)
        .with_retryable(retryable)
        .with_source(e)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(pairs: &[(&str, &str)]) -> Result<CatalogConfig> {
        let props = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        CatalogConfig::from_props("floe", props, Path::new("/base"))
    }

    #[test]
    fn debug_hides_secrets() {
        let c = cfg(&[
            ("rest.secret-access-key", "wJalrXUtn"),
            ("token", "t0k"),
            ("uri", "x"),
        ])
        .unwrap();
        let d = format!("{c:?}");
        assert!(
            !d.contains("wJalrXUtn") && !d.contains("t0k") && d.contains("\"x\""),
            "{d}"
        );
    }

    #[test]
    fn kinds_and_sqlite_uris() {
        assert_eq!(cfg(&[]).unwrap().kind, CatalogKind::Sql);
        assert_eq!(cfg(&[("type", "rest")]).unwrap().kind, CatalogKind::Rest);
        assert_eq!(
            cfg(&[("catalog-impl", "org.apache.iceberg.rest.RESTCatalog")])
                .unwrap()
                .kind,
            CatalogKind::Rest
        );
        let e = cfg(&[("type", "hive")]).unwrap_err();
        assert!(e.to_string().contains("iceberg.catalog.type"), "{e}");
        for (uri, want) in [
            ("sqlite:////abs/c.db", "/abs/c.db"),
            ("sqlite:///abs/c.db", "/abs/c.db"),
            ("jdbc:sqlite:/abs/c.db", "/abs/c.db"),
            ("rel/c.db", "/base/rel/c.db"),
            ("sqlite:rel.db?mode=rwc", "/base/rel.db"),
        ] {
            let c = cfg(&[("uri", uri)]).unwrap();
            assert_eq!(c.sqlite_path().unwrap(), PathBuf::from(want), "{uri}");
        }
    }
}
