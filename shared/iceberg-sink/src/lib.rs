//! The Iceberg sink: catalogs, the Parquet writer stack and the exactly-once append.
//!
//! - [`catalog`]: open a catalog from Kafka Connect-style `iceberg.catalog.*` properties.
//! - [`rest`]: floe's own Iceberg REST catalog client (bearer, OAuth2, AWS SigV4).
//! - [`s3tables`]: the S3 Tables (and OSS Tables) control-plane catalog and its admin calls.
//! - [`table`]: find or create tables (schema, partition spec, zstd Parquet properties).
//! - [`changes`]: upserts and deletes by key (equality and position deletes) while writing.
//! - [`writer`]: Arrow batches → partitioned, rolled Parquet data files with column statistics.
//! - [`sources`]: where each object's rows went (data file, positions), for replacing them later.
//! - [`staged`]: data files as kept in the checkpoint table until they are committed.
//! - [`wrap_catalog!`]: a catalog passing every call but its table commits to another.
//! - [`commit`]: one snapshot per commit, carrying floe's commit id; history checked before retries.
//! - [`maintain`]: compaction (applying deletes) and snapshot expiry.
//! - [`orphans`]: which files under a table's location its metadata no longer reaches.
//! - [`delta`]: row deltas (data and delete files in one snapshot), written by floe itself.
//! - [`dv`]: deletion vectors, the position deletes of format v3 tables.
//! - [`scan`]: reading a table's rows with its deletion vectors applied.

pub mod aws_chain;
pub mod catalog;
pub mod changes;
pub mod commit;
pub mod delta;
pub mod dv;
mod encode;
pub mod maintain;
pub mod orphans;
pub mod rest;
pub mod s3tables;
pub mod scan;
pub mod schema;
pub mod sources;
pub mod sql;
pub mod staged;
pub mod table;
pub mod wrap;
pub mod writer;

pub use catalog::{CatalogConfig, CatalogKind, FloeCatalog, from_iceberg, open_catalog};
pub use changes::RowChanges;
pub use commit::{
    AppendOutcome, AppendRequest, BATCH_IDS_PROP, CHECKPOINT_PROP, COMMIT_ID_PROP, COMMIT_IDS_PROP,
    FoundCommit, append_exactly_once, find_commit, find_commit_on,
};
pub use sources::SourceRows;

/// A table property floe sets on the tables it creates for a route with `on-change = replace`:
/// floe deletes their rows by position, so only floe's own compaction (which moves its record
/// of those positions) may rewrite their files.
pub const ON_CHANGE_PROP: &str = "floe.on-change";
pub use staged::StagedFile;
pub use table::{
    TableDefinition, add_missing_columns, all_tables, ensure_table, evolve_columns, load_table,
    missing_fields, missing_nested_fields, parse_ident, widened_fields,
};
pub use writer::{
    DICTIONARY_PAGE_BYTES, TableWriter, WRITE_PROPS, WriteProps, WriterOptions, arrow_schema,
    writer_properties,
};
