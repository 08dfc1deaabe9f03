//! Row deltas: data files and delete files committed in one snapshot.
//!
//! iceberg-rust 0.10's only snapshot action is the fast append, which refuses delete files, and
//! its snapshot producer is private to the crate. floe writes these snapshots itself, with
//! iceberg-rust's public manifest and manifest-list writers: one manifest per kind of content
//! (data, deletes) and partition spec, the current snapshot's manifests carried over unchanged,
//! and the snapshot's summary with the added counts and the running totals. The updates it
//! makes (add the snapshot, point `main` at it) are committed through
//! [`FloeCatalog::commit_updates`](crate::FloeCatalog::commit_updates) with the same
//! requirements as the fast append's: the same table, `main` still at the parent.
//!
//! Sequence numbers do the work of a row delta: every file the snapshot adds gets the
//! snapshot's sequence number. A position delete applies to data files of an equal or lower
//! sequence number, so it can delete rows of files added by the same snapshot; an equality
//! delete applies only to lower ones, so it deletes a key's earlier rows and leaves the rows the
//! same snapshot adds.
//!
//! On a format v2 table, position deletes go into Parquet files of the spec's schema
//! (`file_path`, `pos`, sorted), one per data file they delete from, naming it in
//! `referenced_data_file` and in the `file_path` bounds, so every reader matches them to that
//! file alone. On a v3 table, which must not get new position delete files, they are deletion
//! vectors ([`crate::dv`]): one per data file, merged when the snapshot is made with the ones it
//! already has (the replaced entries marked deleted in rewritten copies of their manifests). A
//! v3 snapshot also carries row lineage: its manifest list assigns the new data manifests their
//! first row ids, and the snapshot its `first-row-id` (the table's `next-row-id`) and
//! `added-rows`, which iceberg-rust's metadata builder checks and adds to `next-row-id`. v1
//! tables have no delete files.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use arrow_array::{Array, ArrayRef, Int64Array, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema as ArrowSchema};
use floe_core::{Error, ErrorKind, Result};
use iceberg::io::FileIO;
use iceberg::spec::{
    DataContentType, DataFile, DataFileBuilder, DataFileFormat, Datum, FormatVersion, MAIN_BRANCH,
    ManifestContentType, ManifestEntry, ManifestFile, ManifestListWriter, ManifestWriter,
    ManifestWriterBuilder, Operation, PartitionSpec, Snapshot, SnapshotRef, SnapshotReference,
    SnapshotRetention, SnapshotSummaryCollector, Struct, Summary,
};
use iceberg::table::Table;
use iceberg::{TableRequirement, TableUpdate};
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::properties::WriterProperties;

use crate::catalog::from_iceberg;

/// Field id of a position delete file's `file_path` column (reserved by the Iceberg spec).
pub const DELETE_FILE_PATH_ID: i32 = 2_147_483_546;
/// Field id of a position delete file's `pos` column (reserved by the Iceberg spec).
pub const DELETE_POS_ID: i32 = 2_147_483_545;

/// Rows to delete from one data file of the table: its path and partition (a position delete
/// file lives in the partition of the file it deletes from), and the row positions.
#[derive(Clone, Debug)]
pub struct PositionDeletes {
    /// The data file's path, as the table's manifests name it.
    pub data_file: String,
    /// The data file's partition.
    pub partition: Struct,
    /// Row positions (0-based) in the data file; order and repeats do not matter.
    pub positions: Vec<i64>,
}

impl PositionDeletes {
    /// Deletes from the data file `file`.
    pub fn of(file: &DataFile, positions: Vec<i64>) -> Self {
        PositionDeletes {
            data_file: file.file_path().to_owned(),
            partition: file.partition().clone(),
            positions,
        }
    }
}

/// Write `deletes` as a position delete file under the table's data folder (a deletion vector
/// on a format v3 table); the returned delete file still has to be committed (see
/// [`snapshot_updates`]).
pub async fn write_position_deletes(table: &Table, deletes: &PositionDeletes) -> Result<DataFile> {
    let mut positions = deletes.positions.clone();
    positions.sort_unstable();
    positions.dedup();
    if positions.is_empty() {
        return Err(Error::invalid_input(format!(
            "no rows to delete from {}",
            deletes.data_file
        )));
    }
    if positions[0] < 0 {
        return Err(Error::invalid_input(format!(
            "a negative row position ({}) to delete from {}",
            positions[0], deletes.data_file
        )));
    }
    if table.metadata().format_version() >= FormatVersion::V3 {
        let vector = crate::dv::Vector {
            data_file: deletes.data_file.clone(),
            partition: deletes.partition.clone(),
            spec_id: table.metadata().default_partition_spec_id(),
            positions: positions.iter().map(|p| *p as u64).collect(),
        };
        let mut written = crate::dv::write_vectors(table, &[vector]).await?;
        return written
            .pop()
            .ok_or_else(|| Error::unexpected("a deletion vector written without its entry"));
    }
    let rows = positions.len();
    let bytes = encode_position_deletes(&deletes.data_file, &positions)?;
    let path = format!(
        "{}/data/floe-deletes-{}.parquet",
        table.metadata().location().trim_end_matches('/'),
        uuid::Uuid::now_v7()
    );
    let size = bytes.len() as u64;
    let output = table.file_io().new_output(&path).map_err(from_iceberg)?;
    output.write(bytes.into()).await.map_err(|e| {
        from_iceberg(e).while_doing(format!("failed to write position deletes {path}"))
    })?;
    let bound = Datum::string(&deletes.data_file);
    DataFileBuilder::default()
        .content(DataContentType::PositionDeletes)
        .file_path(path)
        .file_format(DataFileFormat::Parquet)
        .partition(deletes.partition.clone())
        .partition_spec_id(table.metadata().default_partition_spec_id())
        .record_count(rows as u64)
        .file_size_in_bytes(size)
        .referenced_data_file(Some(deletes.data_file.clone()))
        .lower_bounds(HashMap::from([
            (DELETE_FILE_PATH_ID, bound.clone()),
            (DELETE_POS_ID, Datum::long(positions[0])),
        ]))
        .upper_bounds(HashMap::from([
            (DELETE_FILE_PATH_ID, bound),
            (DELETE_POS_ID, Datum::long(positions[rows - 1])),
        ]))
        .build()
        .map_err(|e| Error::unexpected(format!("position delete file: {e}")))
}

/// A Parquet position delete file (the spec's schema, zstd) deleting `positions` (sorted, no
/// repeats) of `data_file`.
pub(crate) fn encode_position_deletes(data_file: &str, positions: &[i64]) -> Result<Vec<u8>> {
    let field = |name: &str, ty: DataType, id: i32| {
        Field::new(name, ty, false).with_metadata(HashMap::from([(
            parquet::arrow::PARQUET_FIELD_ID_META_KEY.to_owned(),
            id.to_string(),
        )]))
    };
    let schema = Arc::new(ArrowSchema::new(vec![
        field("file_path", DataType::Utf8, DELETE_FILE_PATH_ID),
        field("pos", DataType::Int64, DELETE_POS_ID),
    ]));
    let columns: Vec<ArrayRef> = vec![
        Arc::new(StringArray::from(vec![data_file; positions.len()])),
        Arc::new(Int64Array::from(positions.to_vec())),
    ];
    let batch = RecordBatch::try_new(schema.clone(), columns)
        .map_err(|e| Error::unexpected(format!("position delete batch: {e}")))?;
    let props = WriterProperties::builder()
        .set_compression(Compression::ZSTD(ZstdLevel::default()))
        .build();
    let mut bytes = Vec::new();
    let mut writer = ArrowWriter::try_new(&mut bytes, schema, Some(props))
        .map_err(|e| Error::unexpected(format!("position delete writer: {e}")))?;
    writer
        .write(&batch)
        .and_then(|()| writer.close().map(|_| ()))
        .map_err(|e| Error::unexpected(format!("failed to encode position deletes: {e}")))?;
    Ok(bytes)
}

/// The (data file, position) rows of the Parquet position delete file at `path`.
pub(crate) async fn read_position_deletes(io: &FileIO, path: &str) -> Result<Vec<(String, u64)>> {
    let bytes = (io.new_input(path))
        .map_err(from_iceberg)?
        .read()
        .await
        .map_err(from_iceberg)?;
    let reader = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(bytes)
        .and_then(|b| b.build())
        .map_err(|e| Error::invalid_input(format!("{path}: {e}")))?;
    let mut out = Vec::new();
    for batch in reader {
        let batch = batch.map_err(|e| Error::invalid_input(format!("{path}: {e}")))?;
        let paths = (batch.column_by_name("file_path"))
            .and_then(|c| c.as_any().downcast_ref::<StringArray>())
            .ok_or_else(|| Error::invalid_input(format!("{path}: no file_path")))?;
        let pos = (batch.column_by_name("pos"))
            .and_then(|c| c.as_any().downcast_ref::<Int64Array>())
            .ok_or_else(|| Error::invalid_input(format!("{path}: no pos")))?;
        for i in 0..batch.num_rows() {
            out.push((paths.value(i).to_owned(), pos.value(i) as u64));
        }
    }
    Ok(out)
}

/// The requirements and updates of a snapshot of `table` adding `files` (data, position delete
/// and equality delete files, written for the table's default partition spec), with `properties`
/// in its summary. Its manifests and manifest list are written here; the caller commits the
/// updates (a conflict leaves them unreferenced).
///
/// The snapshot goes on `branch` (`main`, or another branch, created from `main`'s current
/// snapshot when it does not exist yet, as Iceberg's Java writers do).
pub async fn snapshot_updates(
    table: &Table,
    branch: &str,
    files: Vec<DataFile>,
    properties: HashMap<String, String>,
) -> Result<(Vec<TableRequirement>, Vec<TableUpdate>)> {
    let metadata = table.metadata();
    let version = metadata.format_version();
    if version < FormatVersion::V2 {
        return Err(Error::new(
            ErrorKind::Unsupported,
            format!(
                "table {}: floe writes row-level deletes and commits to branches into format v2 \
                 and v3 tables only (this one is {version})",
                table.identifier(),
            ),
        ));
    }
    let snapshot_id = unique_snapshot_id(table);
    let parent = parent_on(table, branch);
    let sequence_number = metadata.next_sequence_number();
    let schema = metadata.current_schema().clone();

    // Every file floe adds is written for the table's default partition spec (the fast append
    // assumes the same): one manifest for the data files, one for the delete files.
    let spec = metadata.default_partition_spec().clone();
    let mut collector = SnapshotSummaryCollector::default();
    let (deleting, adding): (Vec<DataFile>, Vec<DataFile>) =
        (files.into_iter()).partition(|f| f.content_type() != DataContentType::Data);
    // A v3 snapshot holds at most one deletion vector per data file.
    let (deleting, replaced) = if version >= FormatVersion::V3 {
        let merged = crate::dv::merge_for_snapshot(table, parent, deleting).await?;
        (merged.files, merged.replaced)
    } else {
        (deleting, BTreeSet::new())
    };
    for file in adding.iter().chain(&deleting) {
        collector.add_file(file, schema.clone(), spec.clone());
    }
    let (data, deletes) = (!adding.is_empty(), !deleting.is_empty());
    let groups = [(false, adding), (true, deleting)];

    let location = metadata.location().trim_end_matches('/');
    let commit = uuid::Uuid::now_v7();
    let mut manifests: Vec<ManifestFile> = Vec::new();
    for (n, (is_delete, group)) in groups.into_iter().enumerate() {
        if group.is_empty() {
            continue;
        }
        let path = format!("{location}/metadata/{commit}-m{n}.avro");
        let mut writer = manifest_writer(table, &path, snapshot_id, &spec, is_delete)?;
        for file in group {
            writer
                .add_file(file, sequence_number)
                .map_err(from_iceberg)?;
        }
        let manifest = writer
            .write_manifest_file()
            .await
            .map_err(|e| from_iceberg(e).while_doing(format!("failed to write manifest {path}")))?;
        debug_assert_eq!(
            manifest.content,
            if is_delete {
                ManifestContentType::Deletes
            } else {
                ManifestContentType::Data
            }
        );
        manifests.push(manifest);
    }
    if let Some(parent) = parent {
        if replaced.is_empty() {
            let list = manifest_list(table, parent).await?;
            manifests.extend(
                (list.entries().iter())
                    .filter(|m| {
                        m.has_added_files() || m.has_existing_files() || m.has_deleted_files()
                    })
                    .cloned(),
            );
        } else {
            // The deletion vectors the merged ones replace are marked deleted.
            let rewritten = rewrite_manifests(
                table,
                parent,
                snapshot_id,
                &format!("{commit}"),
                &|m| m.content == ManifestContentType::Deletes,
                &|e| replaced.contains(&crate::dv::entry_key(e.data_file())),
                &mut collector,
            )
            .await?;
            manifests.extend(rewritten.merged);
            manifests.extend((rewritten.untouched.into_iter()).filter(|m| {
                m.has_added_files() || m.has_existing_files() || m.has_deleted_files()
            }));
        }
    }

    let operation = match (data, deletes) {
        (_, false) => Operation::Append,
        (true, true) => Operation::Overwrite,
        (false, true) => Operation::Delete,
    };
    let mut summary = properties;
    summary.extend(collector.build());
    finish_snapshot(
        table,
        branch,
        Made {
            snapshot_id,
            sequence_number,
            manifests,
            operation,
            summary,
        },
    )
    .await
}

/// A writer of a manifest of the table's format version (v2 or v3) at `path`, for files of
/// partition spec `spec` added, kept or removed by snapshot `snapshot_id`.
pub(crate) fn manifest_writer(
    table: &Table,
    path: &str,
    snapshot_id: i64,
    spec: &PartitionSpec,
    is_delete: bool,
) -> Result<ManifestWriter> {
    let output = table.file_io().new_output(path).map_err(from_iceberg)?;
    let schema = table.metadata().current_schema().clone();
    let builder = ManifestWriterBuilder::new(output, Some(snapshot_id), schema, spec.clone());
    let v3 = table.metadata().format_version() >= FormatVersion::V3;
    Ok(match (v3, is_delete) {
        (false, false) => builder.build_v2_data(),
        (false, true) => builder.build_v2_deletes(),
        (true, false) => builder.build_v3_data(),
        (true, true) => builder.build_v3_deletes(),
    })
}

/// The manifests of `parent`, for a snapshot that removes some of its files.
pub(crate) struct Rewritten {
    /// Manifests listing none of the removed files, as they are.
    pub(crate) untouched: Vec<ManifestFile>,
    /// The manifests listing one, merged into one manifest per kind of content and partition
    /// spec: their other live files kept as existing, the removed ones marked deleted.
    pub(crate) merged: Vec<ManifestFile>,
}

/// Rewrite the manifests of `parent` that list a live entry `gone` says goes (only manifests
/// `look_in` says may list one are read; the others are untouched), for snapshot `snapshot_id`;
/// the new manifests are named after `name`. Merging them (rather than rewriting each) leaves a
/// table of a thousand one-file manifests with a few, not a thousand. The removed files are
/// counted in `collector`.
///
/// On a v3 table a data file kept or removed keeps its first row id: the id it inherited in
/// its old manifest is written into its entry (the spec's rule), so the new manifest's own
/// first row id does not renumber its rows.
pub(crate) async fn rewrite_manifests(
    table: &Table,
    parent: &SnapshotRef,
    snapshot_id: i64,
    name: &str,
    look_in: &(dyn Fn(&ManifestFile) -> bool + Sync),
    gone: &(dyn Fn(&ManifestEntry) -> bool + Sync),
    collector: &mut SnapshotSummaryCollector,
) -> Result<Rewritten> {
    let metadata = table.metadata();
    let schema = metadata.current_schema().clone();
    let io = table.file_io();
    let location = metadata.location().trim_end_matches('/');
    let list = manifest_list(table, parent).await?;
    let mut untouched = Vec::new();
    let mut merged: BTreeMap<(bool, i32), ManifestWriter> = BTreeMap::new();
    for manifest in list.entries() {
        if !look_in(manifest) {
            untouched.push(manifest.clone());
            continue;
        }
        let loaded = manifest.load_manifest(io).await.map_err(|e| {
            from_iceberg(e).while_doing(format!(
                "failed to read manifest {}",
                manifest.manifest_path
            ))
        })?;
        let touched = (loaded.entries().iter()).any(|e| e.is_alive() && gone(e));
        if !touched {
            untouched.push(manifest.clone());
            continue;
        }
        let spec = metadata
            .partition_spec_by_id(manifest.partition_spec_id)
            .ok_or_else(|| Error::unexpected("a manifest of an unknown partition spec"))?;
        let is_delete = manifest.content == ManifestContentType::Deletes;
        let writer = match merged.entry((is_delete, manifest.partition_spec_id)) {
            std::collections::btree_map::Entry::Occupied(o) => o.into_mut(),
            std::collections::btree_map::Entry::Vacant(v) => {
                let path = format!(
                    "{location}/metadata/{name}-r{}-{}.avro",
                    u8::from(is_delete),
                    manifest.partition_spec_id
                );
                v.insert(manifest_writer(table, &path, snapshot_id, spec, is_delete)?)
            }
        };
        let row_ids = inherited_row_ids(manifest, loaded.entries());
        for (e, row_id) in loaded.entries().iter().zip(row_ids) {
            if !e.is_alive() {
                continue;
            }
            let seq = e.sequence_number().unwrap_or(0);
            let file = match row_id {
                Some(id) => with_first_row_id(e.data_file(), manifest.partition_spec_id, id)?,
                None => e.data_file().clone(),
            };
            if gone(e) {
                collector.remove_file(&file, schema.clone(), spec.clone());
                writer
                    .add_delete_file(file, seq, e.file_sequence_number)
                    .map_err(from_iceberg)?;
            } else {
                let added_by = e.snapshot_id().unwrap_or(parent.snapshot_id());
                writer
                    .add_existing_file(file, added_by, seq, e.file_sequence_number)
                    .map_err(from_iceberg)?;
            }
        }
    }
    let mut out = Vec::new();
    for (_, writer) in merged {
        out.push(writer.write_manifest_file().await.map_err(from_iceberg)?);
    }
    Ok(Rewritten {
        untouched,
        merged: out,
    })
}

/// The first row id each entry of `manifest` inherits, where it has none of its own and the
/// manifest has one (a v3 data manifest): the manifest's first row id plus the record counts
/// of the data files before it that had none either. `None` where nothing is inherited.
fn inherited_row_ids(
    manifest: &ManifestFile,
    entries: &[iceberg::spec::ManifestEntryRef],
) -> Vec<Option<i64>> {
    let mut next = match (manifest.content, manifest.first_row_id) {
        (ManifestContentType::Data, Some(first)) => Some(first as i64),
        _ => None,
    };
    (entries.iter())
        .map(|e| {
            let file = e.data_file();
            if file.first_row_id().is_some() || file.content_type() != DataContentType::Data {
                return None;
            }
            let id = next?;
            next = Some(id + file.record_count() as i64);
            Some(id)
        })
        .collect()
}

/// `file` with its first row id set to `id` (iceberg-rust's data files have no setter).
fn with_first_row_id(file: &DataFile, spec_id: i32, id: i64) -> Result<DataFile> {
    let mut b = DataFileBuilder::default();
    b.content(file.content_type())
        .file_path(file.file_path().to_owned())
        .file_format(file.file_format())
        .partition(file.partition().clone())
        .record_count(file.record_count())
        .file_size_in_bytes(file.file_size_in_bytes())
        .column_sizes(file.column_sizes().clone())
        .value_counts(file.value_counts().clone())
        .null_value_counts(file.null_value_counts().clone())
        .nan_value_counts(file.nan_value_counts().clone())
        .lower_bounds(file.lower_bounds().clone())
        .upper_bounds(file.upper_bounds().clone())
        .key_metadata(file.key_metadata().map(<[u8]>::to_vec))
        .split_offsets(file.split_offsets().map(<[i64]>::to_vec))
        .equality_ids(file.equality_ids())
        .first_row_id(Some(id))
        .partition_spec_id(spec_id)
        .referenced_data_file(file.referenced_data_file())
        .content_offset(file.content_offset())
        .content_size_in_bytes(file.content_size_in_bytes());
    if let Some(order) = file.sort_order_id() {
        b.sort_order_id(order);
    }
    b.build()
        .map_err(|e| Error::unexpected(format!("data file {}: {e}", file.file_path())))
}

/// A snapshot being made: its manifests written, its summary's own counts set.
pub(crate) struct Made {
    pub(crate) snapshot_id: i64,
    pub(crate) sequence_number: i64,
    pub(crate) manifests: Vec<ManifestFile>,
    pub(crate) operation: Operation,
    pub(crate) summary: HashMap<String, String>,
}

/// The snapshot of `branch`, `None` when the branch does not exist.
pub fn branch_head<'t>(table: &'t Table, branch: &str) -> Option<&'t SnapshotRef> {
    let metadata = table.metadata();
    if branch == MAIN_BRANCH {
        return metadata.current_snapshot();
    }
    metadata.snapshot_for_ref(branch)
}

/// The parent of a new snapshot on `branch`: its head, or `main`'s current snapshot for a
/// branch not made yet.
pub(crate) fn parent_on<'t>(table: &'t Table, branch: &str) -> Option<&'t SnapshotRef> {
    branch_head(table, branch).or_else(|| table.metadata().current_snapshot())
}

/// Write the manifest list of `made` and return the requirements and updates that add it as
/// the new head of `branch`, on top of its current one.
pub(crate) async fn finish_snapshot(
    table: &Table,
    branch: &str,
    made: Made,
) -> Result<(Vec<TableRequirement>, Vec<TableUpdate>)> {
    let Made {
        snapshot_id,
        sequence_number,
        manifests,
        operation,
        mut summary,
    } = made;
    let metadata = table.metadata();
    let parent = parent_on(table, branch);
    let io = table.file_io();
    let location = metadata.location().trim_end_matches('/');
    let list_path = format!(
        "{location}/metadata/snap-{snapshot_id}-0-{}.avro",
        uuid::Uuid::now_v7()
    );
    let output = io.new_output(&list_path).map_err(from_iceberg)?;
    let writer = output.writer().await.map_err(from_iceberg)?;
    let parent_id = parent.map(|p| p.snapshot_id());
    // Row lineage (v3): the snapshot's rows are numbered from the table's next row id; the
    // list assigns each data manifest without a first row id its range.
    let first_row_id = metadata.next_row_id();
    let mut list = if metadata.format_version() >= FormatVersion::V3 {
        ManifestListWriter::v3(
            writer,
            snapshot_id,
            parent_id,
            sequence_number,
            Some(first_row_id),
        )
    } else {
        ManifestListWriter::v2(writer, snapshot_id, parent_id, sequence_number)
    };
    list.add_manifests(manifests.into_iter())
        .map_err(from_iceberg)?;
    let next_row_id = list.next_row_id();
    list.close().await.map_err(|e| {
        from_iceberg(e).while_doing(format!("failed to write manifest list {list_path}"))
    })?;
    with_totals(
        &mut summary,
        parent.map(|p| &p.summary().additional_properties),
    );
    let snapshot = Snapshot::builder()
        .with_snapshot_id(snapshot_id)
        .with_parent_snapshot_id(parent_id)
        .with_sequence_number(sequence_number)
        .with_timestamp_ms(now_ms())
        .with_manifest_list(list_path)
        .with_summary(Summary {
            operation,
            additional_properties: summary,
        })
        .with_schema_id(metadata.current_schema_id());
    let snapshot = match next_row_id {
        Some(next) => snapshot
            .with_row_range(first_row_id, next - first_row_id)
            .build(),
        None => snapshot.build(),
    };
    let requirements = ref_at(
        table,
        branch,
        branch_head(table, branch).map(|p| p.snapshot_id()),
    );
    let updates = vec![
        TableUpdate::AddSnapshot { snapshot },
        TableUpdate::SetSnapshotRef {
            ref_name: branch.to_owned(),
            reference: SnapshotReference::new(
                snapshot_id,
                SnapshotRetention::branch(None, None, None),
            ),
        },
    ];
    Ok((requirements, updates))
}

/// The requirements of a commit on top of `snapshot_id` of `branch` (`None`: the branch has no
/// snapshot yet, or does not exist).
pub(crate) fn ref_at(
    table: &Table,
    branch: &str,
    snapshot_id: Option<i64>,
) -> Vec<TableRequirement> {
    vec![
        TableRequirement::UuidMatch {
            uuid: table.metadata().uuid(),
        },
        TableRequirement::RefSnapshotIdMatch {
            r#ref: branch.to_owned(),
            snapshot_id,
        },
    ]
}

/// The summary's running totals: the parent's, plus what this snapshot adds, less what it
/// removes. Data records are counted as added, as Iceberg's own writers count them; the delete
/// counts say how many of them are deleted.
fn with_totals(summary: &mut HashMap<String, String>, parent: Option<&HashMap<String, String>>) {
    for (total, added, removed) in [
        ("total-records", "added-records", "deleted-records"),
        ("total-files-size", "added-files-size", "removed-files-size"),
        ("total-data-files", "added-data-files", "deleted-data-files"),
        (
            "total-delete-files",
            "added-delete-files",
            "removed-delete-files",
        ),
        (
            "total-position-deletes",
            "added-position-deletes",
            "removed-position-deletes",
        ),
        (
            "total-equality-deletes",
            "added-equality-deletes",
            "removed-equality-deletes",
        ),
    ] {
        let num = |m: Option<&HashMap<String, String>>, k: &str| -> u64 {
            m.and_then(|m| m.get(k))
                .and_then(|v| v.parse().ok())
                .unwrap_or(0)
        };
        let value = (num(parent, total) + num(Some(summary), added))
            .saturating_sub(num(Some(summary), removed));
        summary.insert(total.to_owned(), value.to_string());
    }
}

/// The time now in milliseconds since the epoch.
fn now_ms() -> i64 {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
    now.map_or(0, |d| d.as_millis() as i64)
}

/// A snapshot id no snapshot of the table has: positive, random.
pub(crate) fn unique_snapshot_id(table: &Table) -> i64 {
    loop {
        let (a, b) = uuid::Uuid::new_v4().as_u64_pair();
        let id = ((a ^ b) & (i64::MAX as u64)) as i64;
        if id != 0 && table.metadata().snapshot_by_id(id).is_none() {
            return id;
        }
    }
}

/// The manifest list of `snapshot` of `table`.
pub(crate) async fn manifest_list(
    table: &Table,
    snapshot: &iceberg::spec::SnapshotRef,
) -> Result<iceberg::spec::ManifestList> {
    table
        .manifest_list_reader(snapshot)
        .load()
        .await
        .map_err(|e| from_iceberg(e).while_doing("failed to read the current manifest list"))
}

/// The data files among `paths` that `branch` holds (its head; `main`'s current snapshot for a
/// branch not made yet, which its first commit makes from there), by path (a path the branch
/// no longer holds, or never held, is absent). Reads the manifest list and the data manifests
/// whose files may include one of them.
pub async fn live_data_files(
    table: &Table,
    branch: &str,
    paths: &std::collections::BTreeSet<String>,
) -> Result<HashMap<String, DataFile>> {
    let mut out = HashMap::new();
    let Some(snapshot) = parent_on(table, branch) else {
        return Ok(out);
    };
    if paths.is_empty() {
        return Ok(out);
    }
    let io = table.file_io();
    let list = manifest_list(table, snapshot).await?;
    for manifest in list.entries() {
        if manifest.content != ManifestContentType::Data {
            continue;
        }
        let loaded = manifest.load_manifest(io).await.map_err(from_iceberg)?;
        for entry in loaded.entries() {
            if entry.is_alive() && paths.contains(entry.file_path()) {
                out.insert(entry.file_path().to_owned(), entry.data_file().clone());
            }
        }
        if out.len() == paths.len() {
            break;
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn totals_add_to_the_parent() {
        let parent = HashMap::from([
            ("total-records".to_owned(), "10".to_owned()),
            ("total-data-files".to_owned(), "2".to_owned()),
        ]);
        let mut summary = HashMap::from([
            ("added-records".to_owned(), "5".to_owned()),
            ("added-data-files".to_owned(), "1".to_owned()),
            ("added-delete-files".to_owned(), "1".to_owned()),
            ("added-position-deletes".to_owned(), "3".to_owned()),
        ]);
        with_totals(&mut summary, Some(&parent));
        assert_eq!(summary["total-records"], "15");
        assert_eq!(summary["total-data-files"], "3");
        assert_eq!(summary["total-delete-files"], "1");
        assert_eq!(summary["total-position-deletes"], "3");
        assert_eq!(summary["total-equality-deletes"], "0");
    }
}
