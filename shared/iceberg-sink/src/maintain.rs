//! Table maintenance floe makes itself: compaction (small files and their position deletes
//! rewritten into files of the target size) and snapshot expiry.
//!
//! **Compaction** works per group of files that deletes can reach together: a partition of a
//! partition spec ([`plan`] says which files it takes and why). Small files (under ¾ of the
//! target size) are rewritten when a partition has two or more of them, and so is every data
//! file a position delete names; a partition with equality deletes (an upsert table's), or
//! written for an earlier partition spec, is rewritten whole, into the current spec (unless
//! the current spec would split it and floe keeps the table's rows by position: then it stays);
//! large files without deletes stay as they are. The files are read through iceberg-rust's reader
//! (which applies the deletes), written again with floe's writer, and swapped in by one
//! `replace` snapshot: the new files added, the old data files and the delete files that reach
//! nothing any more marked deleted in rewritten copies of the manifests that listed them, every
//! other manifest carried over. Dropping the equality deletes is what lets pyiceberg, which
//! refuses them, read an upsert table again.
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
    Operation, PartitionSpec, SnapshotSummaryCollector,
};
use iceberg::table::Table;
use iceberg::{TableRequirement, TableUpdate};
use serde::{Deserialize, Serialize};

use crate::catalog::from_iceberg;
use crate::delta::{
    Made, branch_head, finish_snapshot, manifest_list, manifest_writer, ref_at, rewrite_manifests,
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
    /// The branch compacted: the one floe commits the table's rows to (`main` unless
    /// `commit-branch` says otherwise), where its records of each object's rows point.
    pub branch: String,
    /// Whether floe keeps where each object's rows are (a replacing route's table): files of
    /// an earlier partition spec the current one would split are then left alone.
    pub tracks_rows: bool,
}

/// A live file of the table's current snapshot, as compaction sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LiveFile {
    pub path: String,
    pub content: DataContentType,
    pub size: u64,
    /// Its data sequence number.
    pub sequence: i64,
    /// The partition spec it was written for.
    pub spec: i32,
    /// Its partition (any text that is equal for equal partitions of one spec).
    pub partition: String,
}

/// Which files a compaction rewrites and drops; see [`plan`].
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Plan {
    /// Data files read (deletes applied) and written again.
    pub rewrite: BTreeSet<String>,
    /// Of those, the files an equality delete reaches (rows deleted by key: their survivors
    /// cannot be mapped position by position).
    pub by_key: BTreeSet<String>,
    /// Delete files that reach nothing once the rewrite lands, so the rewrite drops them.
    pub drop: BTreeSet<String>,
    /// Groups left alone although they have something to compact, and why.
    pub skipped: Vec<String>,
}

/// Whether every partition of `earlier` lies within one partition of `current`: each field of
/// `current` is determined by a field of `earlier` on the same column (the same transform, an
/// identity, or a finer time unit: hour → day → month → year), or is `void`. Rows rewritten
/// from a file of `earlier` then all go to one new partition, in their order.
pub fn refines(current: &PartitionSpec, earlier: &PartitionSpec) -> bool {
    use iceberg::spec::Transform as T;
    let rank = |t: &T| match t {
        T::Hour => Some(0),
        T::Day => Some(1),
        T::Month => Some(2),
        T::Year => Some(3),
        _ => None,
    };
    current.fields().iter().all(|c| {
        c.transform == T::Void
            || (earlier.fields().iter()).any(|e| {
                e.source_id == c.source_id
                    && (e.transform == T::Identity
                        || e.transform == c.transform
                        || matches!((rank(&e.transform), rank(&c.transform)), (Some(a), Some(b)) if a < b))
            })
    })
}

/// Which files to compact, from the table's live files (`files`), the table's default spec,
/// the specs without partition fields (an equality delete written for one reaches every
/// partition), the target file size and the data files each position delete file names.
///
/// Files are grouped by spec and partition, the reach of a delete (the Iceberg spec: a delete
/// applies to data files of its own partition, or of every partition when its spec is
/// unpartitioned; an equality delete to files of a lower data sequence number, a position
/// delete to the files it names). A group is compacted when it was written for an earlier
/// spec (its files are rewritten into the current one), has two or more small data files
/// (under ¾ of the target, Iceberg's `min-file-size-bytes` default), or has delete files:
/// - a group of the current spec without equality deletes rewrites its small files and the
///   files its position deletes name; its large files without deletes stay as they are;
/// - a group with equality deletes, or of an earlier spec, rewrites all its data files;
/// - an equality delete of an unpartitioned spec rewrites every data file older than it.
///
/// A delete file is dropped when every live data file it reaches is rewritten (deletes
/// applied), or when it reaches none: by the rules above, every delete file of a compacted
/// group.
///
/// The files of `kept_specs` are left alone: where floe keeps each object's rows by position
/// (a replacing route's table), a rewrite must keep the rows of an old file in order, so it
/// cannot spread one old partition over several new ones (see [`refines`]).
pub fn plan(
    files: &[LiveFile],
    default_spec: i32,
    unpartitioned: &BTreeSet<i32>,
    kept_specs: &BTreeSet<i32>,
    target_file_size_bytes: u64,
    names: &HashMap<String, BTreeSet<String>>,
) -> Plan {
    let small = |f: &LiveFile| f.size < target_file_size_bytes / 4 * 3;
    let mut groups: BTreeMap<(i32, &str), Vec<&LiveFile>> = BTreeMap::new();
    for f in files {
        groups.entry((f.spec, &f.partition)).or_default().push(f);
    }
    let data = |g: &[&LiveFile]| -> Vec<String> {
        (g.iter())
            .filter(|f| f.content == DataContentType::Data)
            .map(|f| f.path.clone())
            .collect()
    };
    let mut out = Plan::default();
    let mut global_deletes: Vec<&LiveFile> = Vec::new();
    for ((spec, _), g) in &groups {
        let is_data = |f: &&&LiveFile| f.content == DataContentType::Data;
        let smalls = g.iter().filter(is_data).filter(|f| small(f)).count();
        let equality: Vec<&LiveFile> = (g.iter().copied())
            .filter(|f| f.content == DataContentType::EqualityDeletes)
            .collect();
        let positional: Vec<&LiveFile> = (g.iter().copied())
            .filter(|f| f.content == DataContentType::PositionDeletes)
            .collect();
        if kept_specs.contains(spec) {
            out.skipped.push(format!(
                "{} files of partition spec {spec}, which the current spec would split: \
                 floe replaces this table's rows by position, so they stay as they are",
                g.len()
            ));
            continue;
        }
        let earlier_spec = *spec != default_spec;
        let worth = earlier_spec || smalls >= 2 || !equality.is_empty() || !positional.is_empty();
        if !worth {
            continue;
        }
        if earlier_spec || !equality.is_empty() {
            out.rewrite.extend(data(g));
        } else {
            let named: BTreeSet<&String> = (positional.iter())
                .flat_map(|d| names.get(&d.path).into_iter().flatten())
                .collect();
            out.rewrite.extend(
                (g.iter())
                    .filter(is_data)
                    .filter(|f| small(f) || named.contains(&f.path))
                    .map(|f| f.path.clone()),
            );
        }
        if !equality.is_empty() {
            out.by_key.extend(data(g));
        }
        if unpartitioned.contains(spec) {
            global_deletes.extend(equality);
        }
    }
    for d in global_deletes {
        for f in files {
            if f.content == DataContentType::Data && f.sequence < d.sequence {
                out.rewrite.insert(f.path.clone());
                out.by_key.insert(f.path.clone());
            }
        }
    }
    // What each delete file reaches among the live data files; dropped when all of it is
    // rewritten.
    for ((spec, partition), g) in groups.iter().filter(|((s, _), _)| !kept_specs.contains(s)) {
        for d in g.iter().filter(|f| f.content != DataContentType::Data) {
            let reaches = |f: &LiveFile| match d.content {
                DataContentType::PositionDeletes => {
                    names.get(&d.path).is_some_and(|n| n.contains(&f.path))
                }
                _ => {
                    f.sequence < d.sequence
                        && (unpartitioned.contains(spec)
                            || (f.spec == *spec && f.partition == *partition))
                }
            };
            let reached: Vec<&LiveFile> = (files.iter())
                .filter(|f| f.content == DataContentType::Data && reaches(f))
                .collect();
            // A delete that reaches no live data file any more changes nothing: dropped too.
            if reached.iter().all(|f| out.rewrite.contains(&f.path)) {
                out.drop.insert(d.path.clone());
            } else {
                out.skipped.push(format!(
                    "delete file {} kept: it reaches data files this compaction leaves",
                    d.path
                ));
            }
        }
    }
    out
}

/// The live entries of `branch`'s head, with the manifest each is in.
async fn live_entries(
    table: &Table,
    branch: &str,
) -> Result<Vec<(ManifestFile, Vec<ManifestEntryRef>)>> {
    let Some(snapshot) = branch_head(table, branch) else {
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

/// The rows each position delete file or deletion vector deletes: per delete file (by its
/// [`delete_key`]), per data file path.
async fn deleted_positions(
    table: &Table,
    files: &[&ManifestEntryRef],
) -> Result<HashMap<String, HashMap<String, BTreeSet<u64>>>> {
    let mut out = HashMap::new();
    for f in files {
        let positions = crate::dv::deleted_positions(table.file_io(), &[f.data_file()]).await?;
        let named = (positions.into_iter())
            .map(|(file, p)| (file, p.into_iter().collect()))
            .collect();
        out.insert(delete_key(f.data_file()), named);
    }
    Ok(out)
}

/// How compaction names a delete file: its path, or for a deletion vector (one Puffin file
/// may hold the vectors of several data files) its path and the data file it deletes from.
fn delete_key(file: &DataFile) -> String {
    match file.referenced_data_file() {
        Some(data) if crate::dv::is_vector(file) => format!("{}#{data}", file.file_path()),
        _ => file.file_path().to_owned(),
    }
}

/// Compact the table's files as [`plan`] chooses them; see the module doc. Nothing is
/// committed: the caller commits [`rewrite_updates`].
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
    let mut live: Vec<LiveFile> = Vec::new();
    let mut entries: HashMap<String, ManifestEntryRef> = HashMap::new();
    let Some(head) = branch_head(table, &opts.branch) else {
        return Ok(rewrite);
    };
    let head = head.snapshot_id();
    for (manifest, alive) in live_entries(table, &opts.branch).await? {
        for e in alive {
            live.push(LiveFile {
                path: delete_key(e.data_file()),
                content: e.content_type(),
                size: e.file_size_in_bytes(),
                sequence: e.sequence_number().unwrap_or(0),
                spec: manifest.partition_spec_id,
                partition: format!("{:?}", e.data_file().partition()),
            });
            entries.insert(delete_key(e.data_file()), e);
        }
    }
    let positional: Vec<&ManifestEntryRef> = (entries.values())
        .filter(|e| e.content_type() == DataContentType::PositionDeletes)
        .collect();
    let deletes = deleted_positions(table, &positional).await?;
    let names: HashMap<String, BTreeSet<String>> = (deletes.iter())
        .map(|(d, named)| (d.clone(), named.keys().cloned().collect()))
        .collect();
    let unpartitioned: BTreeSet<i32> = (metadata.partition_specs_iter())
        .filter(|s| s.is_unpartitioned())
        .map(|s| s.spec_id())
        .collect();
    let current = metadata.default_partition_spec();
    let kept_specs: BTreeSet<i32> = (metadata.partition_specs_iter())
        .filter(|s| opts.tracks_rows && !refines(current, s))
        .map(|s| s.spec_id())
        .collect();
    let chosen = plan(
        &live,
        metadata.default_partition_spec_id(),
        &unpartitioned,
        &kept_specs,
        opts.target_file_size_bytes,
        &names,
    );
    rewrite.skipped = chosen.skipped;
    if chosen.rewrite.is_empty() && chosen.drop.is_empty() {
        return Ok(rewrite);
    }
    // iceberg-rust's reader does not apply deletion vectors (v3): floe hands them to it.
    let vectors = crate::scan::Vectors::of(table, Some(head)).await?;
    // The positions deleted from each data file rewritten, over every delete file.
    let mut deleted: HashMap<String, BTreeSet<u64>> = HashMap::new();
    for named in deletes.into_values() {
        for (path, positions) in named {
            if chosen.rewrite.contains(&path) {
                deleted.entry(path).or_default().extend(positions);
            }
        }
    }

    let mut tasks: HashMap<String, iceberg::scan::FileScanTask> = HashMap::new();
    let scan = table
        .scan()
        .snapshot_id(head)
        .select_all()
        .build()
        .map_err(from_iceberg)?
        .plan_files()
        .await
        .map_err(from_iceberg)?;
    let all: Vec<_> = scan.try_collect().await.map_err(from_iceberg)?;
    for t in all {
        tasks.insert(t.data_file_path.clone(), t);
    }
    let options = WriterOptions {
        target_file_size_bytes: opts.target_file_size_bytes as usize,
        file_prefix: opts.file_prefix.clone(),
        ..Default::default()
    };
    let mut writer = TableWriter::new(table, &options).await?;
    let arrow = writer.arrow_schema().clone();
    // Group by group, each in path order (the new files keep a partition's rows together).
    let mut order: Vec<&LiveFile> = (live.iter())
        .filter(|f| chosen.rewrite.contains(&f.path))
        .collect();
    order.sort_by(|a, b| (a.spec, &a.partition, &a.path).cmp(&(b.spec, &b.partition, &b.path)));
    // (path, rows, deleted positions, rows also deleted by key).
    let mut old: Vec<(String, u64, BTreeSet<u64>, bool)> = Vec::new();
    for f in order {
        let path = f.path.clone();
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
        let rows = entries.get(&path).map_or(0, |e| e.record_count());
        old.push((
            path.clone(),
            rows,
            deleted.remove(&path).unwrap_or_default(),
            chosen.by_key.contains(&path),
        ));
        rewrite.removed.insert(path);
    }
    rewrite.files_before = old.len();
    rewrite.removed.extend(chosen.drop);
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

/// The `replace` snapshot swapping a rewrite's files in on `branch` (the one it compacted),
/// with `properties` in its summary.
pub async fn rewrite_updates(
    table: &Table,
    branch: &str,
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

    let Some(parent) = branch_head(table, branch) else {
        return Err(Error::unexpected(format!(
            "a rewrite of branch {branch}, which has no snapshot"
        )));
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
        branch,
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
/// snapshot of any branch or tag, and not among the newest `keep` of `branch`'s history (the
/// one floe commits to). `None` when there are none; else the requirements, updates and the
/// ids.
pub fn expire_updates(
    table: &Table,
    branch: &str,
    older_than_ms: i64,
    keep: usize,
) -> Option<(Vec<TableRequirement>, Vec<TableUpdate>, Vec<i64>)> {
    let metadata = table.metadata();
    let current = branch_head(table, branch)?;
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
    let requirements = ref_at(table, branch, Some(current.snapshot_id()));
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

    fn file(
        path: &str,
        content: DataContentType,
        size: u64,
        seq: i64,
        spec: i32,
        part: &str,
    ) -> LiveFile {
        LiveFile {
            path: path.into(),
            content,
            size,
            sequence: seq,
            spec,
            partition: part.into(),
        }
    }

    fn set(paths: &[&str]) -> BTreeSet<String> {
        paths.iter().map(|p| p.to_string()).collect()
    }

    const MB: u64 = 1 << 20;
    use DataContentType::{Data, EqualityDeletes as Eq, PositionDeletes as Pos};

    #[test]
    fn large_files_stay_unless_a_delete_names_them() {
        // Partition a: two small files and a large one; b: one small file, and a large one
        // with a position delete; c: one small file alone.
        let files = [
            file("a1", Data, MB, 1, 0, "a"),
            file("a2", Data, 2 * MB, 2, 0, "a"),
            file("a3", Data, 100 * MB, 3, 0, "a"),
            file("b1", Data, MB, 1, 0, "b"),
            file("b2", Data, 100 * MB, 2, 0, "b"),
            file("bd", Pos, 1000, 3, 0, "b"),
            file("c1", Data, MB, 1, 0, "c"),
        ];
        let names = HashMap::from([("bd".to_owned(), set(&["b2"]))]);
        let p = plan(
            &files,
            0,
            &BTreeSet::new(),
            &BTreeSet::new(),
            128 * MB,
            &names,
        );
        // b's small file joins the rewrite its delete starts; c's lone small file waits.
        assert_eq!(p.rewrite, set(&["a1", "a2", "b1", "b2"]));
        assert_eq!(p.drop, set(&["bd"]));
        assert!(p.by_key.is_empty());
        // Nothing small enough and no deletes: nothing to do.
        let big = [
            file("x", Data, 100 * MB, 1, 0, "a"),
            file("y", Data, 120 * MB, 2, 0, "a"),
        ];
        assert_eq!(
            plan(
                &big,
                0,
                &BTreeSet::new(),
                &BTreeSet::new(),
                128 * MB,
                &names
            ),
            Plan::default()
        );
    }

    #[test]
    fn earlier_specs_and_equality_deletes_rewrite_their_whole_group() {
        let files = [
            // Written for spec 0 (before the table was repartitioned): moved to spec 1.
            file("o1", Data, 100 * MB, 1, 0, "()"),
            // An upsert partition: all of it, large files too, and the delete dropped.
            file("u1", Data, 100 * MB, 2, 1, "u"),
            file("u2", Data, MB, 3, 1, "u"),
            file("ue", Eq, 1000, 4, 1, "u"),
            // A large file in a partition with nothing to do.
            file("k1", Data, 100 * MB, 2, 1, "k"),
        ];
        let p = plan(
            &files,
            1,
            &BTreeSet::new(),
            &BTreeSet::new(),
            128 * MB,
            &HashMap::new(),
        );
        assert_eq!(p.rewrite, set(&["o1", "u1", "u2"]));
        assert_eq!(p.by_key, set(&["u1", "u2"]));
        assert_eq!(p.drop, set(&["ue"]));
    }

    #[test]
    fn an_unpartitioned_equality_delete_reaches_every_older_file() {
        // Spec 0 is unpartitioned: its equality delete (seq 5) reaches the older files of
        // spec 1's partitions too, but not the newer one.
        let files = [
            file("g", Eq, 1000, 5, 0, "()"),
            file("p1", Data, 100 * MB, 2, 1, "p"),
            file("q1", Data, 100 * MB, 4, 1, "q"),
            file("q2", Data, 100 * MB, 6, 1, "q"),
        ];
        let p = plan(
            &files,
            1,
            &BTreeSet::from([0]),
            &BTreeSet::new(),
            128 * MB,
            &HashMap::new(),
        );
        assert_eq!(p.rewrite, set(&["p1", "q1"]));
        assert_eq!(p.by_key, set(&["p1", "q1"]));
        assert_eq!(p.drop, set(&["g"]));
    }

    #[test]
    fn a_delete_that_reaches_nothing_is_dropped_and_one_that_reaches_a_kept_file_stays() {
        let files = [
            file("d1", Data, 100 * MB, 1, 0, "a"),
            // Names a file no longer in the table.
            file("gone", Pos, 1000, 2, 0, "a"),
            // Names d1 and a file of another partition (not what floe writes, but possible).
            file("odd", Pos, 1000, 3, 0, "b"),
            file("e1", Data, 100 * MB, 1, 0, "b"),
        ];
        let names = HashMap::from([
            ("gone".to_owned(), set(&["old"])),
            ("odd".to_owned(), set(&["d1", "e1"])),
        ]);
        let p = plan(
            &files,
            0,
            &BTreeSet::new(),
            &BTreeSet::new(),
            128 * MB,
            &names,
        );
        assert_eq!(p.rewrite, set(&["e1"]));
        assert_eq!(p.drop, set(&["gone"]));
        assert_eq!(p.skipped.len(), 1, "{:?}", p.skipped);
        assert!(p.skipped[0].contains("odd"), "{:?}", p.skipped);
    }

    #[test]
    fn a_kept_spec_is_left_alone_and_refinement_follows_the_transforms() {
        let files = [
            file("o1", Data, MB, 1, 0, "(0)"),
            file("o2", Data, MB, 2, 0, "(0)"),
            file("od", Pos, 1000, 3, 0, "(0)"),
        ];
        let names = HashMap::from([("od".to_owned(), set(&["o1"]))]);
        let p = plan(
            &files,
            1,
            &BTreeSet::new(),
            &BTreeSet::from([0]),
            128 * MB,
            &names,
        );
        assert!(p.rewrite.is_empty() && p.drop.is_empty(), "{p:?}");
        assert_eq!(p.skipped.len(), 1, "{p:?}");

        use iceberg::spec::{NestedField, PrimitiveType, Schema, Transform as T, Type};
        let schema = Schema::builder()
            .with_fields([
                NestedField::required(1, "id", Type::Primitive(PrimitiveType::Long)).into(),
                NestedField::required(2, "ts", Type::Primitive(PrimitiveType::Timestamp)).into(),
            ])
            .build()
            .unwrap();
        let spec = |fields: &[(i32, T)]| {
            let mut b = PartitionSpec::builder(schema.clone());
            for (i, (source, t)) in fields.iter().enumerate() {
                let name = if *source == 1 { "id" } else { "ts" };
                b = b.add_partition_field(name, format!("p{i}"), *t).unwrap();
            }
            b.build().unwrap()
        };
        let none = spec(&[]);
        let bucket = spec(&[(1, T::Bucket(2))]);
        let day = spec(&[(2, T::Day)]);
        let month = spec(&[(2, T::Month)]);
        assert!(
            refines(&none, &bucket),
            "merging partitions keeps each old one whole"
        );
        assert!(
            !refines(&bucket, &none),
            "bucketing splits the unpartitioned files"
        );
        assert!(refines(&month, &day));
        assert!(!refines(&day, &month));
        assert!(refines(&bucket, &spec(&[(1, T::Identity)])));
        assert!(!refines(&bucket, &spec(&[(1, T::Bucket(4))])));
        assert!(refines(&spec(&[(1, T::Void)]), &none));
    }

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
