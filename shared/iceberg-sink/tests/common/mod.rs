//! Helpers shared by the catalog tests: the seed's table schema, appending rows through
//! iceberg's writer stack and a fast append, and a catalog wrapper that makes two writers race.

#![allow(dead_code)]

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use arrow_array::{ArrayRef, RecordBatch, StringArray};
use floe_iceberg::FloeCatalog;
use iceberg::arrow::schema_to_arrow_schema;
use iceberg::spec::{DataFileFormat, NestedField, PrimitiveType, Schema, Type};
use iceberg::table::Table;
use iceberg::transaction::{ApplyTransactionAction, Transaction};
use iceberg::writer::base_writer::data_file_writer::DataFileWriterBuilder;
use iceberg::writer::file_writer::ParquetWriterBuilder;
use iceberg::writer::file_writer::location_generator::{
    DefaultFileNameGenerator, DefaultLocationGenerator,
};
use iceberg::writer::file_writer::rolling_writer::RollingFileWriterBuilder;
use iceberg::writer::{IcebergWriter, IcebergWriterBuilder};
use iceberg::{Catalog, ErrorKind, Result, TableCreation, TableIdent};
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::properties::WriterProperties;
use tokio::sync::Barrier;

/// The OSS Tables seed's schema: `event_id` (required), `event_time`, `event_type`, all strings.
pub fn seed_schema() -> Schema {
    Schema::builder()
        .with_fields(vec![
            Arc::new(NestedField::required(
                1,
                "event_id",
                Type::Primitive(PrimitiveType::String),
            )),
            Arc::new(NestedField::optional(
                2,
                "event_time",
                Type::Primitive(PrimitiveType::String),
            )),
            Arc::new(NestedField::optional(
                3,
                "event_type",
                Type::Primitive(PrimitiveType::String),
            )),
        ])
        .build()
        .unwrap()
}

/// A table creation with the seed's schema.
pub fn seed_creation(name: &str) -> TableCreation {
    TableCreation::builder()
        .name(name.to_owned())
        .schema(seed_schema())
        .build()
}

/// Write `ids` as rows (`event_id` = id) into one Parquet data file of `table`, and stage a
/// fast append of it; the returned transaction still has to be committed.
pub async fn append_transaction(table: &Table, ids: &[&str]) -> Transaction {
    let schema = table.metadata().current_schema().clone();
    let arrow = Arc::new(schema_to_arrow_schema(&schema).unwrap());
    let columns: Vec<ArrayRef> = vec![
        Arc::new(StringArray::from(ids.to_vec())),
        Arc::new(StringArray::from(vec![
            Some("2025-01-15T08:30:45Z");
            ids.len()
        ])),
        Arc::new(StringArray::from(vec![Some("created"); ids.len()])),
    ];
    let batch = RecordBatch::try_new(arrow, columns).unwrap();
    let props = WriterProperties::builder()
        .set_compression(Compression::ZSTD(ZstdLevel::default()))
        .build();
    let rolling = RollingFileWriterBuilder::new_with_default_file_size(
        ParquetWriterBuilder::new(props, schema),
        table.file_io().clone(),
        DefaultLocationGenerator::new(table.metadata()).unwrap(),
        DefaultFileNameGenerator::new(
            "floe".into(),
            Some(uuid::Uuid::new_v4().to_string()),
            DataFileFormat::Parquet,
        ),
    );
    let mut writer = DataFileWriterBuilder::new(rolling)
        .build(None)
        .await
        .unwrap();
    writer.write(batch).await.unwrap();
    let files = writer.close().await.unwrap();
    assert_eq!(files.len(), 1);
    let tx = Transaction::new(table);
    tx.fast_append()
        .add_data_files(files)
        .set_snapshot_properties(HashMap::from([(
            "floe.commit-id".to_owned(),
            ids.join(","),
        )]))
        .apply(tx)
        .unwrap()
}

/// Load `ident`, append rows `ids` and commit; returns the committed table.
pub async fn append(catalog: &dyn Catalog, ident: &TableIdent, ids: &[&str]) -> Result<Table> {
    let table = catalog.load_table(ident).await?;
    append_transaction(&table, ids).await.commit(catalog).await
}

/// The `total-records` of the current snapshot's summary (0 without a snapshot).
pub fn total_records(table: &Table) -> u64 {
    table
        .metadata()
        .current_snapshot()
        .and_then(|s| {
            s.summary()
                .additional_properties
                .get("total-records")
                .cloned()
        })
        .map(|v| v.parse().unwrap())
        .unwrap_or(0)
}

/// Wraps a catalog so that the first `update_table` of each of two writers waits for the other
/// one at a barrier: both commits are then based on the same table state, so exactly one loses
/// (409 / stale token) and is retried by iceberg's transaction. Counts the conflicts it sees.
#[derive(Debug)]
pub struct RacingCatalog {
    inner: Arc<dyn FloeCatalog>,
    barrier: Arc<Barrier>,
    waited: AtomicBool,
    pub conflicts: Arc<AtomicUsize>,
}

impl RacingCatalog {
    /// Two wrappers sharing one barrier and conflict counter.
    pub fn pair(
        a: Arc<dyn FloeCatalog>,
        b: Arc<dyn FloeCatalog>,
    ) -> (Self, Self, Arc<AtomicUsize>) {
        let barrier = Arc::new(Barrier::new(2));
        let conflicts = Arc::new(AtomicUsize::new(0));
        let wrap = |inner| RacingCatalog {
            inner,
            barrier: barrier.clone(),
            waited: AtomicBool::new(false),
            conflicts: conflicts.clone(),
        };
        (wrap(a), wrap(b), conflicts)
    }
}

floe_iceberg::wrap_catalog!(
    RacingCatalog,
    inner,
    |self, ident, requirements, updates| {
        if !self.waited.swap(true, Ordering::SeqCst) {
            self.barrier.wait().await;
        }
        let result = self
            .inner
            .commit_updates(ident, requirements, updates)
            .await;
        if let Err(e) = &result
            && e.kind() == ErrorKind::CatalogCommitConflicts
        {
            assert!(e.retryable(), "a commit conflict must be retryable: {e}");
            self.conflicts.fetch_add(1, Ordering::SeqCst);
        }
        result
    }
);

/// A catalog on which another attempt of the same commit lands right after the first table
/// load (floe's history check), before the attempt that loaded it commits: an attempt that
/// timed out while it was still landing, or a committer whose lease ran out, finishing in that
/// window.
#[derive(Debug)]
pub struct LandsAfterCheck {
    inner: Arc<dyn FloeCatalog>,
    other: std::sync::Mutex<Option<floe_iceberg::AppendRequest>>,
}

impl LandsAfterCheck {
    pub fn new(inner: Arc<dyn FloeCatalog>, other: floe_iceberg::AppendRequest) -> Self {
        Self {
            inner,
            other: std::sync::Mutex::new(Some(other)),
        }
    }
}

floe_iceberg::wrap_catalog!(
    LandsAfterCheck,
    inner,
    load | self,
    ident | {
        let table = self.inner.load_table(ident).await?;
        let other = self.other.lock().unwrap().take();
        if let Some(other) = other {
            floe_iceberg::append_exactly_once(self.inner.as_ref(), &other)
                .await
                .expect("the other attempt lands");
        }
        Ok(table)
    },
    commit | self,
    ident,
    requirements,
    updates | {
        self.inner
            .commit_updates(ident, requirements, updates)
            .await
    }
);
