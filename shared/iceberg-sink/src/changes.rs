//! Row-level changes in a batch of rows: upserts and deletes by key, as the Kafka Connect
//! Iceberg sink and Flink write them.
//!
//! A table written with [`RowChanges`] names its key (`id-columns`) and, optionally, a field
//! whose value says what a row is (`cdc-field`: `D…` a delete, `U…` an update, anything else
//! an insert). Each row is handled in order:
//! - a delete or an update, or any row in upsert mode, deletes its key: an equality delete on
//!   the id columns (it applies to the rows of earlier snapshots), and a position delete of the
//!   row this batch wrote for the key before, if any (an equality delete does not reach rows of
//!   its own snapshot);
//! - every row but a delete is written, and replaces (by position) a row of the same key the
//!   batch wrote before.
//!
//! So after the batch's snapshot the table holds, per key, the latest row, or none after a
//! delete. Positions are known as row ordinals per partition while writing (iceberg's rolling
//! writer fills one partition's files in order); they are turned into (file, position) pairs
//! when the files are closed. On a partitioned table the partition's source columns must be
//! among the id columns (as Flink requires): a key then never changes partition, and each
//! partition's equality deletes reach all of its earlier rows.
//!
//! The batch's snapshot must not share a sequence number with another batch writing the same
//! keys: the committer makes one snapshot per batch for files with deletes.

use std::collections::HashMap;
use std::sync::Arc;

use arrow_array::{Array, BooleanArray, RecordBatch};
use arrow_cast::display::{ArrayFormatter, FormatOptions};
use floe_core::{Error, Result};
use iceberg::spec::{DataFile, DataFileFormat, PartitionKey};
use iceberg::table::Table;
use iceberg::writer::base_writer::equality_delete_writer::{
    EqualityDeleteFileWriter, EqualityDeleteFileWriterBuilder, EqualityDeleteWriterConfig,
};
use iceberg::writer::file_writer::ParquetWriterBuilder;
use iceberg::writer::file_writer::location_generator::{
    DefaultFileNameGenerator, DefaultLocationGenerator,
};
use iceberg::writer::file_writer::rolling_writer::RollingFileWriterBuilder;
use iceberg::writer::partitioning::PartitioningWriter;
use iceberg::writer::partitioning::fanout_writer::FanoutWriter;
use iceberg::writer::{IcebergWriter, IcebergWriterBuilder};
use parquet::file::properties::WriterProperties;

use crate::catalog::from_iceberg;
use crate::delta::{PositionDeletes, write_position_deletes};
use crate::sources::Ordinals;

/// How a table's rows change: its key, the field naming each row's operation, upsert mode.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RowChanges {
    /// The columns that identify a row (top-level columns of the table).
    pub id_columns: Vec<String>,
    /// The column whose value names the operation (`D`, `U`, else an insert), if any.
    pub cdc_field: Option<String>,
    /// Every insert replaces the key's earlier row (Kafka Connect's upsert mode).
    pub upsert: bool,
}

/// Each row's key: its id columns' values as text, joined by a separator no value displays.
fn row_keys(batch: &RecordBatch, columns: &[usize]) -> Result<Vec<String>> {
    let options = FormatOptions::default().with_null("\u{0}null");
    let formatters = (columns.iter())
        .map(|&i| ArrayFormatter::try_new(batch.column(i).as_ref(), &options))
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(|e| Error::invalid_input(format!("key column: {e}")))?;
    Ok((0..batch.num_rows())
        .map(|row| {
            let mut k = String::new();
            for f in &formatters {
                k.push_str(&f.value(row).to_string());
                k.push('\u{1f}');
            }
            k
        })
        .collect())
}

/// What a row does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    Insert,
    Update,
    Delete,
}

/// The operation a cdc-field value names, as the Kafka Connect sink reads it: its first
/// letter, `D` a delete, `U` an update, anything else (or nothing) an insert.
fn op_of(value: Option<&str>) -> Op {
    match value.and_then(|v| v.trim().chars().next()) {
        Some('D' | 'd') => Op::Delete,
        Some('U' | 'u') => Op::Update,
        _ => Op::Insert,
    }
}

type DeleteBuilder = EqualityDeleteFileWriterBuilder<
    ParquetWriterBuilder,
    DefaultLocationGenerator,
    DefaultFileNameGenerator,
>;

/// The equality delete writers (one per partition on a partitioned table).
enum Deletes {
    Unpartitioned(
        Box<
            EqualityDeleteFileWriter<
                ParquetWriterBuilder,
                DefaultLocationGenerator,
                DefaultFileNameGenerator,
            >,
        >,
    ),
    Partitioned(Box<FanoutWriter<DeleteBuilder>>),
}

/// The row-change state of one writer: see the module doc.
pub(crate) struct Changes {
    table: Table,
    /// Arrow indices of the id columns, in the order of `id_columns`.
    keys: Vec<usize>,
    /// Arrow index of the cdc field.
    op: Option<usize>,
    upsert: bool,
    deletes: Deletes,
    /// The latest row written for each key: (partition, ordinal).
    latest: HashMap<String, (usize, u64)>,
    /// Rows written and then replaced or deleted within the batch: (partition, ordinal).
    doomed: Vec<(usize, u64)>,
}

impl Changes {
    /// The state for writing `table` with `changes`; `prefix` names the delete files.
    pub(crate) async fn new(
        table: &Table,
        changes: &RowChanges,
        prefix: &str,
        props: WriterProperties,
    ) -> Result<Self> {
        let metadata = table.metadata();
        let schema = metadata.current_schema().clone();
        let arrow = crate::writer::arrow_schema(table)?;
        let column = |name: &str, what: &str| -> Result<(usize, i32)> {
            let index = (arrow.fields().iter())
                .position(|f| f.name().eq_ignore_ascii_case(name))
                .ok_or_else(|| {
                    Error::config(
                        what,
                        format!("`{name}` is not a column of table {}", table.identifier()),
                    )
                })?;
            let id = schema
                .field_by_name(arrow.field(index).name())
                .map(|f| f.id)
                .ok_or_else(|| Error::unexpected(format!("column {name} has no field id")))?;
            Ok((index, id))
        };
        if changes.id_columns.is_empty() {
            return Err(Error::config(
                "id-columns",
                format!(
                    "table {}: upserts and deletes need the columns that identify a row \
                     (iceberg.tables.default-id-columns, iceberg.table.<table>.id-columns, \
                     or a route's id-columns)",
                    table.identifier()
                ),
            ));
        }
        let mut keys = Vec::new();
        let mut key_ids = Vec::new();
        for name in &changes.id_columns {
            let (index, id) = column(name, "id-columns")?;
            keys.push(index);
            key_ids.push(id);
        }
        let spec = metadata.default_partition_spec();
        for field in spec.fields() {
            if !key_ids.contains(&field.source_id) {
                let name = (schema.field_by_id(field.source_id))
                    .map(|f| f.name.clone())
                    .unwrap_or_else(|| field.source_id.to_string());
                return Err(Error::config(
                    "id-columns",
                    format!(
                        "table {} is partitioned by `{name}`, which is not among its id columns {:?}: \
                         a key could change partition and keep its old row",
                        table.identifier(),
                        changes.id_columns
                    ),
                ));
            }
        }
        let op = match &changes.cdc_field {
            Some(name) => Some(column(name, "cdc-field")?.0),
            None => None,
        };
        let config =
            EqualityDeleteWriterConfig::new(key_ids, schema.clone()).map_err(from_iceberg)?;
        let delete_schema =
            iceberg::arrow::arrow_schema_to_schema(config.projected_arrow_schema_ref())
                .map_err(from_iceberg)?;
        let rolling = RollingFileWriterBuilder::new_with_default_file_size(
            ParquetWriterBuilder::new(props, Arc::new(delete_schema)),
            table.file_io().clone(),
            DefaultLocationGenerator::new(metadata).map_err(from_iceberg)?,
            DefaultFileNameGenerator::new(
                format!("{prefix}-eq-deletes"),
                None,
                DataFileFormat::Parquet,
            ),
        );
        let builder = EqualityDeleteFileWriterBuilder::new(rolling, config);
        let deletes = if spec.is_unpartitioned() {
            Deletes::Unpartitioned(Box::new(builder.build(None).await.map_err(from_iceberg)?))
        } else {
            Deletes::Partitioned(Box::new(FanoutWriter::new(builder)))
        };
        Ok(Changes {
            table: table.clone(),
            keys,
            op,
            upsert: changes.upsert,
            deletes,
            latest: HashMap::new(),
            doomed: Vec::new(),
        })
    }

    /// Sort the rows of `batch` (all of one partition, `key`, whose slot is `slot` and whose
    /// next row ordinal is `next`) into rows to write and keys to delete, in order; returns the
    /// rows to write, and writes the equality deletes.
    pub(crate) async fn split(
        &mut self,
        key: Option<&PartitionKey>,
        slot: usize,
        mut next: u64,
        batch: &RecordBatch,
    ) -> Result<RecordBatch> {
        let keys = row_keys(batch, &self.keys)?;
        let ops = match self.op {
            Some(i) => {
                let values = arrow_cast::cast(batch.column(i), &arrow_schema::DataType::Utf8)
                    .map_err(|e| Error::invalid_input(format!("cdc field: {e}")))?;
                let values = (values.as_any())
                    .downcast_ref::<arrow_array::StringArray>()
                    .cloned()
                    .ok_or_else(|| Error::unexpected("cdc field did not cast to strings"))?;
                (0..batch.num_rows())
                    .map(|r| op_of(values.is_valid(r).then(|| values.value(r))))
                    .collect()
            }
            None => vec![Op::Insert; batch.num_rows()],
        };
        let mut write = Vec::with_capacity(batch.num_rows());
        let mut delete = Vec::with_capacity(batch.num_rows());
        for (op, k) in ops.into_iter().zip(keys) {
            let deletes_key = op != Op::Insert || self.upsert;
            if deletes_key && let Some(earlier) = self.latest.remove(&k) {
                self.doomed.push(earlier);
            }
            delete.push(deletes_key);
            if op != Op::Delete {
                let ordinal = next;
                next += 1;
                if let Some(earlier) = self.latest.insert(k, (slot, ordinal)) {
                    self.doomed.push(earlier);
                }
            }
            write.push(op != Op::Delete);
        }
        let filter = |mask: Vec<bool>| {
            arrow_select::filter::filter_record_batch(batch, &BooleanArray::from(mask))
                .map_err(|e| Error::unexpected(format!("filtering rows: {e}")))
        };
        // Whole rows: the equality delete writer projects the id columns itself.
        let keys = filter(delete)?;
        if keys.num_rows() > 0 {
            match (&mut self.deletes, key) {
                (Deletes::Unpartitioned(w), _) => w.write(keys).await.map_err(from_iceberg)?,
                (Deletes::Partitioned(w), Some(k)) => {
                    w.write(k.clone(), keys).await.map_err(from_iceberg)?
                }
                (Deletes::Partitioned(_), None) => {
                    return Err(Error::unexpected(
                        "a partitioned table's rows without a partition",
                    ));
                }
            }
        }
        filter(write)
    }

    /// Finish the delete files, given the data files the writer closed: the equality delete
    /// files, and one position delete file per data file with rows replaced in the batch.
    pub(crate) async fn close(
        self,
        data: &[DataFile],
        ordinals: &Ordinals,
    ) -> Result<Vec<DataFile>> {
        let mut files = match self.deletes {
            Deletes::Unpartitioned(mut w) => w.close().await.map_err(from_iceberg)?,
            Deletes::Partitioned(w) => w.close().await.map_err(from_iceberg)?,
        };
        if self.doomed.is_empty() {
            return Ok(files);
        }
        let index = ordinals.files(data);
        let mut positions: HashMap<usize, (&DataFile, Vec<i64>)> = HashMap::new();
        for (slot, ordinal) in self.doomed {
            let (file, pos) = index.locate(slot, ordinal)?;
            let entry = positions
                .entry(std::ptr::from_ref(file) as usize)
                .or_insert_with(|| (file, Vec::new()));
            entry.1.push(pos as i64);
        }
        for (file, rows) in positions.into_values() {
            let deletes = PositionDeletes::of(file, rows);
            files.push(write_position_deletes(&self.table, &deletes).await?);
        }
        Ok(files)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operations_as_the_kafka_connect_sink_reads_them() {
        assert_eq!(op_of(Some("D")), Op::Delete);
        assert_eq!(op_of(Some("delete")), Op::Delete);
        assert_eq!(op_of(Some("U")), Op::Update);
        assert_eq!(op_of(Some("I")), Op::Insert);
        assert_eq!(op_of(Some("C")), Op::Insert);
        assert_eq!(op_of(Some("")), Op::Insert);
        assert_eq!(op_of(None), Op::Insert);
    }
}
