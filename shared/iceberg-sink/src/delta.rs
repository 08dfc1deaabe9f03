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
//! Position deletes go into Parquet files of the spec's schema (`file_path`, `pos`, sorted),
//! one per data file they delete from, naming it in `referenced_data_file` and in the
//! `file_path` bounds, so every reader matches them to that file alone. Format v2 tables only:
//! v1 has no delete files, and v3 wants deletion vectors for new position deletes, which floe
//! does not write yet.

use std::collections::HashMap;
use std::sync::Arc;

use arrow_array::{ArrayRef, Int64Array, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema as ArrowSchema};
use floe_core::{Error, ErrorKind, Result};
use iceberg::spec::{
    DataContentType, DataFile, DataFileBuilder, DataFileFormat, Datum, FormatVersion, MAIN_BRANCH,
    ManifestContentType, ManifestFile, ManifestListWriter, ManifestWriterBuilder, Operation,
    Snapshot, SnapshotRef, SnapshotReference, SnapshotRetention, SnapshotSummaryCollector, Struct,
    Summary,
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

/// Write `deletes` as a position delete file under the table's data folder; the returned
/// delete file still has to be committed (see [`snapshot_updates`]).
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
    let rows = positions.len();
    let columns: Vec<ArrayRef> = vec![
        Arc::new(StringArray::from(vec![deletes.data_file.as_str(); rows])),
        Arc::new(Int64Array::from(positions.clone())),
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
    if metadata.format_version() != FormatVersion::V2 {
        return Err(Error::new(
            ErrorKind::Unsupported,
            format!(
                "table {}: floe writes row-level deletes and commits to branches into format v2 \
                 tables only (this one is {})",
                table.identifier(),
                metadata.format_version()
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
    for file in adding.iter().chain(&deleting) {
        collector.add_file(file, schema.clone(), spec.clone());
    }
    let (data, deletes) = (!adding.is_empty(), !deleting.is_empty());
    let groups = [(false, adding), (true, deleting)];

    let io = table.file_io();
    let location = metadata.location().trim_end_matches('/');
    let commit = uuid::Uuid::now_v7();
    let mut manifests: Vec<ManifestFile> = Vec::new();
    for (n, (is_delete, group)) in groups.into_iter().enumerate() {
        if group.is_empty() {
            continue;
        }
        let path = format!("{location}/metadata/{commit}-m{n}.avro");
        let output = io.new_output(&path).map_err(from_iceberg)?;
        let builder = ManifestWriterBuilder::new(
            output,
            Some(snapshot_id),
            schema.clone(),
            spec.as_ref().clone(),
        );
        let mut writer = if is_delete {
            builder.build_v2_deletes()
        } else {
            builder.build_v2_data()
        };
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
        let list = manifest_list(table, parent).await?;
        manifests.extend(
            (list.entries().iter())
                .filter(|m| m.has_added_files() || m.has_existing_files() || m.has_deleted_files())
                .cloned(),
        );
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
    let mut list = ManifestListWriter::v2(
        writer,
        snapshot_id,
        parent.map(|p| p.snapshot_id()),
        sequence_number,
    );
    list.add_manifests(manifests.into_iter())
        .map_err(from_iceberg)?;
    list.close().await.map_err(|e| {
        from_iceberg(e).while_doing(format!("failed to write manifest list {list_path}"))
    })?;
    with_totals(
        &mut summary,
        parent.map(|p| &p.summary().additional_properties),
    );
    let snapshot = Snapshot::builder()
        .with_snapshot_id(snapshot_id)
        .with_parent_snapshot_id(parent.map(|p| p.snapshot_id()))
        .with_sequence_number(sequence_number)
        .with_timestamp_ms(now_ms())
        .with_manifest_list(list_path)
        .with_summary(Summary {
            operation,
            additional_properties: summary,
        })
        .with_schema_id(metadata.current_schema_id())
        .build();
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
