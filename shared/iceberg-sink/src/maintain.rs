//! Table maintenance floe makes itself: compaction (small files and their position deletes
//! rewritten into files of the target size) and snapshot expiry.
//!
//! **Compaction** works per partition of the table's default spec. A partition is rewritten
//! when it has at least two data files smaller than the target size, or any position delete
//! files. All its data files are read in path order through iceberg-rust's reader (which
//! applies the deletes), written again with floe's writer, and swapped in by one `replace`
//! snapshot: the new files added, the old data and delete files marked deleted in rewritten
//! copies of the manifests that listed them, every other manifest carried over. A partition
//! with equality deletes (an upsert table's) is rewritten the same way, its equality delete
//! files dropped with the position deletes: every data file they could reach is rewritten
//! with them applied, so pyiceberg, which refuses equality deletes, reads the table again.
//! On a format v3 table the deletion vectors are applied the same way (handed to the reader by
//! [`crate::scan`]: iceberg-rust's own does not apply them) and dropped with the data files they
//! delete from. The rewritten rows get new row ids: iceberg-rust's reader does not give floe the
//! rows' `_row_id`, so the rewrite counts as a delete and an insert for row lineage, where the
//! spec would rather have the ids copied.
//!
//! A rewrite says where every surviving row of every old data file went ([`Moved`]): the old
//! file's deleted positions, and runs of its survivors in the new files, in order. floe's
//! record of where each object's rows are (routes with `on-change = replace`) is moved with it.
//!
//! **Expiry** removes snapshots older than a cutoff that no branch or tag points at, keeping
//! the newest few of `main`. floe's exactly-once check does not need them: the ids of recent
//! commits and batches are table properties.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use arrow_array::RecordBatch;
use floe_core::{Error, Result};
use futures::TryStreamExt;
use iceberg::spec::{
    DataContentType, DataFile, FormatVersion, ManifestEntry, ManifestEntryRef, ManifestFile,
    Operation, SnapshotSummaryCollector, Struct,
};
use iceberg::table::Table;
use iceberg::{TableRequirement, TableUpdate};
use serde::{Deserialize, Serialize};

use crate::catalog::from_iceberg;
use crate::delta::{
    Made, finish_snapshot, main_at, manifest_list, manifest_writer, rewrite_manifests,
    unique_snapshot_id,
};
use crate::sources::SourceRows;
use crate::writer::{TableWriter, WriterOptions};

/// Where the surviving rows of one rewritten data file went.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Moved {
    /// Positions that were deleted (not carried over), sorted.
    pub deleted: Vec<u64>,
    /// The survivors, in order, as runs in the new files.
    pub runs: Vec<SourceRows>,
}

impl Moved {
    /// Where rows `start..start + rows` of the old file are now (deleted ones are nowhere).
    pub fn map(&self, start: u64, rows: u64) -> Vec<SourceRows> {
        let mut out: Vec<SourceRows> = Vec::new();
        let end = start + rows;
        // The range's surviving stretches, between its deleted positions; `d` deleted
        // positions come before `at`, so its survivors start at ordinal `at - d`.
        let (mut at, mut d) = (start, self.deleted.partition_point(|p| *p < start));
        while at < end {
            let stop = self
                .deleted
                .get(d)
                .copied()
                .filter(|p| *p < end)
                .unwrap_or(end);
            if at < stop {
                self.map_ordinals(at - d as u64, stop - at, &mut out);
            }
            at = stop + 1;
            d += 1;
        }
        out
    }

    /// Add where survivors `first..first + n` (ordinals among the old file's survivors) are.
    fn map_ordinals(&self, first: u64, n: u64, out: &mut Vec<SourceRows>) {
        let (lo, hi) = (first, first + n);
        let mut before = 0;
        for run in &self.runs {
            let (from, to) = (lo.max(before), hi.min(before + run.rows));
            if from < to {
                let pos = run.start + (from - before);
                match out.last_mut() {
                    Some(l) if l.file == run.file && l.start + l.rows == pos => l.rows += to - from,
                    _ => out.push(SourceRows {
                        file: run.file.clone(),
                        start: pos,
                        rows: to - from,
                    }),
                }
            }
            before += run.rows;
            if before >= hi {
                break;
            }
        }
    }
}

/// What a compaction wrote, and what it replaces.
#[derive(Debug, Default)]
pub struct Rewrite {
    /// Data and delete files it replaces, by path.
    pub removed: BTreeSet<String>,
    /// The new data files.
    pub added: Vec<DataFile>,
    /// Per old data file, where its rows went.
    pub moved: BTreeMap<String, Moved>,
    /// Partitions left alone, and why.
    pub skipped: Vec<String>,
    /// Data files before and after, over the partitions rewritten.
    pub files_before: usize,
}

/// Compaction settings.
#[derive(Clone, Debug)]
pub struct CompactOptions {
    /// Size of the files written, and below which a file is small.
    pub target_file_size_bytes: u64,
    /// Names of the new files start with this.
    pub file_prefix: String,
}

/// One partition's live files.
#[derive(Default)]
struct Partition {
    data: Vec<ManifestEntryRef>,
    position_deletes: Vec<ManifestEntryRef>,
    equality_deletes: Vec<ManifestEntryRef>,
}

/// The live entries of the table's current snapshot, with the manifest each is in.
async fn live_entries(table: &Table) -> Result<Vec<(ManifestFile, Vec<ManifestEntryRef>)>> {
    let Some(snapshot) = table.metadata().current_snapshot() else {
        return Ok(Vec::new());
    };
    let list = manifest_list(table, snapshot).await?;
    let mut out = Vec::new();
    for manifest in list.entries() {
        let loaded = manifest
            .load_manifest(table.file_io())
            .await
            .map_err(from_iceberg)?;
        let alive = (loaded.entries().iter())
            .filter(|e| e.is_alive())
            .cloned()
            .collect();
        out.push((manifest.clone(), alive));
    }
    Ok(out)
}

/// Rows each position delete file (or deletion vector) deletes, per data file path.
async fn deleted_positions(
    table: &Table,
    files: &[ManifestEntryRef],
) -> Result<HashMap<String, BTreeSet<u64>>> {
    let files: Vec<&DataFile> = files.iter().map(|f| f.data_file()).collect();
    let positions = crate::dv::deleted_positions(table.file_io(), &files).await?;
    Ok((positions.into_iter())
        .map(|(file, p)| (file, p.into_iter().collect()))
        .collect())
}

/// Rewrite the partitions worth compacting; see the module doc. Nothing is committed: the
/// caller commits [`rewrite_updates`].
pub async fn compact(table: &Table, opts: &CompactOptions) -> Result<Rewrite> {
    let metadata = table.metadata();
    let mut rewrite = Rewrite::default();
    if metadata.format_version() < FormatVersion::V2 {
        rewrite.skipped.push(format!(
            "table {}: floe compacts format v2 and v3 tables only (this one is {})",
            table.identifier(),
            metadata.format_version()
        ));
        return Ok(rewrite);
    }
    let default_spec = metadata.default_partition_spec_id();
    let mut partitions: BTreeMap<String, (Struct, Partition)> = BTreeMap::new();
    let mut other_specs = 0;
    for (manifest, entries) in live_entries(table).await? {
        if manifest.partition_spec_id != default_spec {
            other_specs += entries.len();
            continue;
        }
        for e in entries {
            let p = e.data_file().partition().clone();
            let slot = &mut partitions
                .entry(format!("{p:?}"))
                .or_insert_with(|| (p, Partition::default()))
                .1;
            match e.content_type() {
                DataContentType::Data => slot.data.push(e),
                DataContentType::PositionDeletes => slot.position_deletes.push(e),
                DataContentType::EqualityDeletes => slot.equality_deletes.push(e),
            }
        }
    }
    if other_specs > 0 {
        rewrite.skipped.push(format!(
            "{other_specs} files written for an earlier partition spec"
        ));
    }
    let small = |e: &ManifestEntryRef| e.file_size_in_bytes() < opts.target_file_size_bytes;
    let mut chosen: Vec<(String, Partition)> = Vec::new();
    for (name, (_, p)) in partitions {
        let deletes = !p.position_deletes.is_empty() || !p.equality_deletes.is_empty();
        if p.data.iter().filter(|e| small(e)).count() >= 2 || deletes {
            chosen.push((name, p));
        }
    }
    if chosen.is_empty() {
        return Ok(rewrite);
    }

    let mut tasks: HashMap<String, iceberg::scan::FileScanTask> = HashMap::new();
    let plan = table
        .scan()
        .select_all()
        .build()
        .map_err(from_iceberg)?
        .plan_files()
        .await
        .map_err(from_iceberg)?;
    let all: Vec<_> = plan.try_collect().await.map_err(from_iceberg)?;
    for t in all {
        tasks.insert(t.data_file_path.clone(), t);
    }
    // iceberg-rust's reader does not apply deletion vectors (v3): floe hands them to it.
    let vectors = crate::scan::Vectors::of_current(table).await?;
    let options = WriterOptions {
        target_file_size_bytes: opts.target_file_size_bytes as usize,
        file_prefix: opts.file_prefix.clone(),
        ..Default::default()
    };
    let mut writer = TableWriter::new(table, &options).await?;
    let arrow = writer.arrow_schema().clone();
    // (path, rows, deleted positions, rows also deleted by key: their survivors cannot be
    // mapped position by position).
    let mut old: Vec<(String, u64, BTreeSet<u64>, bool)> = Vec::new();
    for (_, mut p) in chosen {
        let by_key = !p.equality_deletes.is_empty();
        let mut deleted = deleted_positions(table, &p.position_deletes).await?;
        p.data.sort_by(|a, b| a.file_path().cmp(b.file_path()));
        rewrite.files_before += p.data.len();
        for e in &p.data {
            let path = e.file_path().to_owned();
            let task = tasks.remove(&path).ok_or_else(|| {
                Error::unexpected(format!("{path} is live but not in the table's scan"))
            })?;
            writer.set_source(Some(old.len() as u64));
            let stream = futures::stream::iter([Ok(vectors.prepare(task).await?)]);
            let mut batches = (vectors.reader(table))
                .read(Box::pin(stream))
                .map_err(from_iceberg)?
                .stream();
            while let Some(b) = batches.try_next().await.map_err(from_iceberg)? {
                let b = RecordBatch::try_new(arrow.clone(), b.columns().to_vec())
                    .map_err(|err| Error::unexpected(format!("rewriting {path}: {err}")))?;
                writer.write(b).await?;
            }
            writer.set_source(None);
            old.push((
                path.clone(),
                e.record_count(),
                deleted.remove(&path).unwrap_or_default(),
                by_key,
            ));
            rewrite.removed.insert(path);
        }
        // Every data file of the partition is rewritten with the deletes applied, so its
        // delete files reach nothing any more (an equality delete reaches only older data
        // files, and the new ones are newer).
        for d in p.position_deletes.iter().chain(&p.equality_deletes) {
            rewrite.removed.insert(d.file_path().to_owned());
        }
    }
    let (files, mut runs) = writer.close_with_sources().await?;
    for (i, (path, rows, deleted, by_key)) in old.into_iter().enumerate() {
        if by_key {
            // Rows changed by key (upsert tables) have no `rows/` records to move.
            runs.remove(&(i as u64));
            continue;
        }
        let moved = Moved {
            deleted: deleted.into_iter().filter(|p| *p < rows).collect(),
            runs: runs.remove(&(i as u64)).unwrap_or_default(),
        };
        let carried: u64 = moved.runs.iter().map(|r| r.rows).sum();
        if carried + moved.deleted.len() as u64 != rows {
            return Err(Error::unexpected(format!(
                "rewriting {path}: {rows} rows, {} deleted, but {carried} carried over",
                moved.deleted.len()
            )));
        }
        rewrite.moved.insert(path, moved);
    }
    rewrite.added = files;
    Ok(rewrite)
}

/// The `replace` snapshot swapping a rewrite's files in, with `properties` in its summary.
pub async fn rewrite_updates(
    table: &Table,
    rewrite: &Rewrite,
    properties: HashMap<String, String>,
) -> Result<(Vec<TableRequirement>, Vec<TableUpdate>)> {
    let metadata = table.metadata();
    let snapshot_id = unique_snapshot_id(table);
    let sequence_number = metadata.next_sequence_number();
    let schema = metadata.current_schema().clone();
    let location = metadata.location().trim_end_matches('/');
    let commit = uuid::Uuid::now_v7();
    let mut collector = SnapshotSummaryCollector::default();
    let mut manifests: Vec<ManifestFile> = Vec::new();
    let spec = metadata.default_partition_spec().clone();

    let path = format!("{location}/metadata/{commit}-m0.avro");
    let mut writer = manifest_writer(table, &path, snapshot_id, &spec, false)?;
    for f in &rewrite.added {
        collector.add_file(f, schema.clone(), spec.clone());
        writer
            .add_file(f.clone(), sequence_number)
            .map_err(from_iceberg)?;
    }
    if !rewrite.added.is_empty() {
        manifests.push(writer.write_manifest_file().await.map_err(from_iceberg)?);
    }

    let Some(parent) = metadata.current_snapshot() else {
        return Err(Error::unexpected("a rewrite of a table with no snapshot"));
    };
    // A deletion vector goes with its data file: one Puffin file may hold the vectors of
    // data files of other partitions, so its path alone does not say.
    let gone = |e: &ManifestEntry| {
        if crate::dv::is_vector(e.data_file()) {
            (e.data_file().referenced_data_file()).is_some_and(|d| rewrite.removed.contains(&d))
        } else {
            rewrite.removed.contains(e.file_path())
        }
    };
    let rewritten = rewrite_manifests(
        table,
        parent,
        snapshot_id,
        &format!("{commit}"),
        &|_| true,
        &gone,
        &mut collector,
    )
    .await?;
    manifests.extend(
        (rewritten.untouched.into_iter()).filter(|m| m.has_added_files() || m.has_existing_files()),
    );
    manifests.extend(rewritten.merged);
    let mut summary = properties;
    summary.extend(collector.build());
    finish_snapshot(
        table,
        iceberg::spec::MAIN_BRANCH,
        Made {
            snapshot_id,
            sequence_number,
            manifests,
            operation: Operation::Replace,
            summary,
        },
    )
    .await
}

/// The snapshots to expire: older than `older_than_ms` (ms since the epoch), not the current
/// snapshot of any branch or tag, and not among the newest `keep` of `main`'s history. `None`
/// when there are none; else the requirements, updates and the ids.
pub fn expire_updates(
    table: &Table,
    older_than_ms: i64,
    keep: usize,
) -> Option<(Vec<TableRequirement>, Vec<TableUpdate>, Vec<i64>)> {
    let metadata = table.metadata();
    let current = metadata.current_snapshot()?;
    // Every branch's and tag's snapshot (iceberg-rust exposes refs only in the metadata's
    // serialized form). Unreadable refs expire nothing.
    let refs = serde_json::to_value(metadata).ok()?;
    let mut kept: BTreeSet<i64> = (refs["refs"].as_object()?.values())
        .map(|r| r["snapshot-id"].as_i64())
        .collect::<Option<_>>()?;
    let mut at = Some(current.clone());
    for _ in 0..keep.max(1) {
        let Some(s) = at else { break };
        kept.insert(s.snapshot_id());
        at = s
            .parent_snapshot_id()
            .and_then(|p| metadata.snapshot_by_id(p).cloned());
    }
    let ids: Vec<i64> = (metadata.snapshots())
        .filter(|s| s.timestamp_ms() < older_than_ms && !kept.contains(&s.snapshot_id()))
        .map(|s| s.snapshot_id())
        .collect();
    if ids.is_empty() {
        return None;
    }
    let requirements = main_at(table, Some(current.snapshot_id()));
    let updates = vec![TableUpdate::RemoveSnapshots {
        snapshot_ids: ids.clone(),
    }];
    Some((requirements, updates, ids))
}

/// Shared for tests: a [`Moved`] from runs.
#[doc(hidden)]
pub fn moved_of(deleted: Vec<u64>, runs: Vec<(&str, u64, u64)>) -> Moved {
    Moved {
        deleted,
        runs: runs
            .into_iter()
            .map(|(f, start, rows)| SourceRows {
                file: f.to_owned(),
                start,
                rows,
            })
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn survivors_map_to_their_runs_in_order() {
        // 6 old rows, 1 and 4 deleted: survivors 0, 2, 3, 5 went to n1[10..12] and n2[0..2].
        let m = moved_of(vec![1, 4], vec![("n1", 10, 2), ("n2", 0, 2)]);
        assert_eq!(
            m.map(0, 6),
            moved_of(vec![], vec![("n1", 10, 2), ("n2", 0, 2)]).runs
        );
        assert_eq!(
            m.map(2, 2),
            moved_of(vec![], vec![("n1", 11, 1), ("n2", 0, 1)]).runs
        );
        assert_eq!(m.map(4, 1), Vec::new());
        assert_eq!(m.map(5, 1), moved_of(vec![], vec![("n2", 1, 1)]).runs);
    }
}
