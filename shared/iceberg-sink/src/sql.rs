//! The embedded SQLite catalog: iceberg-rust's SQL catalog for everything but table commits,
//! which floe makes itself so that it can commit the updates it builds
//! ([`FloeCatalog`](crate::FloeCatalog)).
//!
//! A commit is the one the SQL catalog makes, on the same table of the same database
//! (`iceberg_tables`, pyiceberg's layout): apply the updates to the current metadata, write the
//! next metadata file, and swap the table's `metadata_location` only where it still names the
//! metadata the updates were applied to. A swap that matched no row lost a race with another
//! writer: a retryable commit conflict, as iceberg's own catalog reports it.

use floe_core::{Error, Result};
use iceberg::{Catalog, ErrorKind};
use sqlx::sqlite::{SqliteConnectOptions, SqlitePool, SqlitePoolOptions};
use std::path::Path;
use std::str::FromStr;

/// iceberg-rust's SQL catalog, with floe's table commits.
#[derive(Debug)]
pub struct SqlCatalog {
    name: String,
    inner: iceberg_catalog_sql::SqlCatalog,
    pool: SqlitePool,
}

impl SqlCatalog {
    /// Wrap `inner`, opened on the database file `db` under the catalog name `name`.
    pub async fn new(
        name: &str,
        inner: iceberg_catalog_sql::SqlCatalog,
        db: &Path,
    ) -> Result<Self> {
        let options = SqliteConnectOptions::new()
            .filename(db)
            .busy_timeout(std::time::Duration::from_secs(30));
        let pool = SqlitePoolOptions::new()
            .max_connections(2)
            .connect_with(options)
            .await
            .map_err(|e| {
                Error::unexpected(format!("failed to open sql catalog {}: {e}", db.display()))
            })?;
        Ok(SqlCatalog {
            name: name.to_owned(),
            inner,
            pool,
        })
    }
}

crate::wrap_catalog!(SqlCatalog, inner, |self, ident, requirements, updates| {
    let table = self.inner.load_table(ident).await?;
    let current = table.metadata_location_result()?.to_owned();
    let updated = crate::catalog::apply_updates(&table, requirements, updates)?;
    let location = updated.metadata_location_result()?.to_owned();
    let written = iceberg::MetadataLocation::from_str(&location)?;
    updated
        .metadata()
        .write_to(table.file_io(), &written)
        .await?;
    let swapped = sqlx::query(
        "UPDATE iceberg_tables SET metadata_location = ?, previous_metadata_location = ?
         WHERE catalog_name = ? AND table_name = ? AND table_namespace = ?
           AND (iceberg_type = 'TABLE' OR iceberg_type IS NULL)
           AND metadata_location = ?",
    )
    .bind(&location)
    .bind(&current)
    .bind(&self.name)
    .bind(ident.name())
    .bind(ident.namespace().join("."))
    .bind(&current)
    .execute(&self.pool)
    .await
    .map_err(|e| {
        // Whether the swap happened is unknown only if the statement could have run; sqlx
        // reports a lost connection before it as an error too, so let the history decide.
        iceberg::Error::new(
            ErrorKind::Unexpected,
            format!("failed to swap the metadata of {ident}: {e}"),
        )
    })?;
    if swapped.rows_affected() == 0 {
        if let Err(e) = table.file_io().delete(&location).await {
            tracing::debug!(%location, error = %e, "could not delete unused metadata file");
        }
        return Err(iceberg::Error::new(
            ErrorKind::CatalogCommitConflicts,
            format!("commit conflicted for table {ident}: its metadata moved"),
        )
        .with_retryable(true));
    }
    Ok(updated)
});
