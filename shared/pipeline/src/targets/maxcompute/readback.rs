//! Reading a commit's staged Parquet files back (a local file directly, anything else through
//! its table's FileIO), one row group at a time, and deleting the files only MaxCompute needed.

use std::collections::{BTreeSet, HashMap};
use std::path::PathBuf;

use arrow_array::RecordBatch;
use arrow_schema::{ArrowError, SchemaRef};
use bytes::Bytes;
use floe_checkpoint::Version;
use floe_core::{Error, ErrorKind, Result};
use floe_iceberg::{from_iceberg, load_table, parse_ident};
use iceberg::table::Table;
use parquet::arrow::arrow_reader::{
    ArrowReaderMetadata, ArrowReaderOptions, ParquetRecordBatchReaderBuilder,
};

use crate::protocol::records::BatchRecord;
use crate::targets::{Committer, TargetId};

/// Rows per Arrow batch read back from a staged file.
const READ_BATCH_ROWS: usize = 8192;

impl Committer<'_> {
    /// Open a staged file: a local file directly, anything else through its table's FileIO.
    pub(super) async fn open_staged(
        &self,
        tables: &mut HashMap<String, Table>,
        table: &str,
        path: &str,
    ) -> Result<StagedParquet> {
        let source = match local_path(path) {
            Some(p) => Source::File(std::fs::File::open(&p).map_err(|e| {
                Error::from(e).while_doing(format!("failed to open staged file {path}"))
            })?),
            None => {
                let t = self.staging_table(tables, table).await?;
                let input = t.file_io().new_input(path).map_err(from_iceberg)?;
                Source::Bytes(input.read().await.map_err(|e| {
                    from_iceberg(e).while_doing(format!("failed to read staged file {path}"))
                })?)
            }
        };
        let meta = match &source {
            Source::File(f) => ArrowReaderMetadata::load(f, ArrowReaderOptions::new()),
            Source::Bytes(b) => ArrowReaderMetadata::load(b, ArrowReaderOptions::new()),
        }
        .map_err(|e| {
            Error::invalid_input(format!("staged file {path} is not readable parquet"))
                .with_source(e)
                .with_retryable(false)
        })?;
        Ok(StagedParquet { source, meta })
    }

    /// The table whose FileIO reads `table`'s staged files: a staging table (see
    /// [`crate::targets::staging`]), else an Iceberg table (a route with an Iceberg target, or
    /// files staged into a `floe_staging.*` Iceberg table before the staging catalog existed).
    async fn staging_table<'t>(
        &self,
        tables: &'t mut HashMap<String, Table>,
        table: &str,
    ) -> Result<&'t Table> {
        if !tables.contains_key(table) {
            let ident = parse_ident(table)?;
            let staged = match self.staging {
                Some(staging) => load_table(staging, &ident).await?,
                None => None,
            };
            let t = match staged {
                Some(t) => t,
                None => load_table(self.catalog.as_ref(), &ident)
                    .await?
                    .ok_or_else(|| {
                        Error::new(
                            ErrorKind::NotFound,
                            format!("table {table} holding staged files does not exist"),
                        )
                    })?,
            };
            tables.insert(table.to_owned(), t);
        }
        tables
            .get(table)
            .ok_or_else(|| Error::unexpected(format!("table {table} not cached")))
    }

    /// After a MaxCompute commit is done: delete its batches' files that no Iceberg target of
    /// theirs references (a MaxCompute-only route's staging files). Best effort: a file left
    /// behind is only garbage in the staging table's folder.
    pub(super) async fn drop_staging_files(
        &self,
        target: &TargetId,
        batches: &[(BatchRecord, Version)],
    ) {
        let mut tables = HashMap::new();
        for (b, _) in batches {
            let Some(staged) = b.targets.get(target) else {
                continue;
            };
            let kept: BTreeSet<&str> = b
                .targets
                .iter()
                .filter(|(t, _)| !t.is_maxcompute())
                .flat_map(|(_, t)| t.files.iter().map(|f| f.path.as_str()))
                .collect();
            for f in staged
                .files
                .iter()
                .filter(|f| !kept.contains(f.path.as_str()))
            {
                let result = match local_path(&f.path) {
                    Some(p) => match std::fs::remove_file(&p) {
                        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(Error::from(e)),
                        _ => Ok(()),
                    },
                    None => match self.staging_table(&mut tables, &staged.table).await {
                        Ok(t) => t.file_io().delete(&f.path).await.map_err(from_iceberg),
                        Err(e) => Err(e),
                    },
                };
                if let Err(e) = result {
                    tracing::warn!(file = %f.path, error = %e, "failed to delete a staged file");
                }
            }
        }
    }
}

fn local_path(path: &str) -> Option<PathBuf> {
    match path.strip_prefix("file://") {
        Some(p) => Some(PathBuf::from(p)),
        None if path.starts_with('/') => Some(PathBuf::from(path)),
        None => None,
    }
}

pub(super) fn read_error(path: &str, e: ArrowError) -> Error {
    Error::invalid_input(format!("failed to read staged file {path}"))
        .with_source(e)
        .with_retryable(false)
}

enum Source {
    File(std::fs::File),
    Bytes(Bytes),
}

/// A staged Parquet file, read one row group at a time (one upload block each, so memory holds
/// one row group, not the file).
pub(super) struct StagedParquet {
    source: Source,
    meta: ArrowReaderMetadata,
}

type Batches = Box<dyn Iterator<Item = std::result::Result<RecordBatch, ArrowError>> + Send>;

impl StagedParquet {
    pub(super) fn schema(&self) -> &SchemaRef {
        self.meta.schema()
    }

    pub(super) fn row_groups(&self) -> usize {
        self.meta.metadata().num_row_groups()
    }

    /// Rows before row group `rg`.
    pub(super) fn first_row(&self, rg: usize) -> u64 {
        self.meta.metadata().row_groups()[..rg]
            .iter()
            .map(|g| g.num_rows().max(0) as u64)
            .sum()
    }

    pub(super) fn row_group(&self, rg: usize) -> Result<Batches> {
        let fail = |e: parquet::errors::ParquetError| {
            Error::invalid_input("failed to read a staged parquet file")
                .with_source(e)
                .with_retryable(false)
        };
        Ok(match &self.source {
            Source::File(f) => {
                let f = f.try_clone().map_err(Error::from)?;
                Box::new(
                    ParquetRecordBatchReaderBuilder::new_with_metadata(f, self.meta.clone())
                        .with_row_groups(vec![rg])
                        .with_batch_size(READ_BATCH_ROWS)
                        .build()
                        .map_err(fail)?,
                )
            }
            Source::Bytes(b) => Box::new(
                ParquetRecordBatchReaderBuilder::new_with_metadata(b.clone(), self.meta.clone())
                    .with_row_groups(vec![rg])
                    .with_batch_size(READ_BATCH_ROWS)
                    .build()
                    .map_err(fail)?,
            ),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn local_paths() {
        assert_eq!(
            local_path("file:///w/a.parquet"),
            Some(PathBuf::from("/w/a.parquet"))
        );
        assert_eq!(
            local_path("/w/a.parquet"),
            Some(PathBuf::from("/w/a.parquet"))
        );
        assert_eq!(local_path("s3://b/a.parquet"), None);
    }
}
