//! An Iceberg table target: the staged files of a commit appended in one snapshot whose summary
//! carries the commit id, so "is this commit in?" is a search of the table's history.

use std::collections::{BTreeSet, HashMap};
use std::time::{Duration, Instant};

use floe_checkpoint::{Version, Write, encode};
use floe_core::{Error, ErrorKind, Result};
use floe_iceberg::delta::{PositionDeletes, write_position_deletes};
use floe_iceberg::{
    AppendOutcome, AppendRequest, CHECKPOINT_PROP, append_exactly_once, find_commit_on, load_table,
    parse_ident,
};
use iceberg::spec::DataFile;
use iceberg::table::Table;
use tokio::sync::Mutex;

use super::{Committer, Landed, PendingCommit, Target, TargetId};
use crate::protocol::records::{BatchRecord, CommitRecord, ObjectRows, rows_key};
use crate::protocol::replace::{self, ObjKey};

/// The Iceberg table `table` (`namespace.table`) of the pipeline's catalog.
pub struct IcebergTarget {
    table: String,
    /// The branch its snapshots go on (`None`: `main`).
    branch: Option<String>,
    /// The table as [`Target::is_in`] loaded it, reused by [`Target::commit`].
    loaded: Mutex<Option<Table>>,
    /// What the `rows/` records said when [`Target::commit`] worked out the replaced rows of
    /// the commit it names: [`Target::settle`] of that commit starts from it instead of reading
    /// them again (only this target's committer writes them meanwhile; a write that finds
    /// them changed reads them again).
    held: Mutex<Option<(String, Held)>>,
}

/// What the table holds of some objects, and each record's version.
type Held = (HashMap<ObjKey, ObjectRows>, HashMap<ObjKey, Version>);

impl IcebergTarget {
    /// The target for `table`, committing to `branch` (`None`: `main`).
    pub fn new(table: &str, branch: Option<String>) -> Self {
        IcebergTarget {
            table: table.to_owned(),
            branch,
            loaded: Mutex::new(None),
            held: Mutex::new(None),
        }
    }

    /// The append of a group of batches' files for this target under the group's commit id,
    /// with the delete files of the objects they replace.
    fn request(
        &self,
        deadline: Instant,
        table: &Table,
        rec: &CommitRecord,
        (commit_id, batches): (String, &[&BatchRecord]),
        rows: u64,
        replaced: &HashMap<String, Vec<DataFile>>,
    ) -> Result<AppendRequest> {
        let mut files = Vec::new();
        let mut file_batches = Vec::new();
        for b in batches {
            for f in &b.targets[&rec.target].files {
                files.push(f.to_data_file(table)?);
                file_batches.push(b.id.clone());
            }
            for f in replaced.get(&b.id).into_iter().flatten() {
                files.push(f.clone());
                file_batches.push(b.id.clone());
            }
        }
        // Position deletes were worked out on this table: an attempt on one a compaction has
        // rewritten since would miss the rows.
        let deletes_on = (batches.iter())
            .any(|b| replaced.contains_key(&b.id))
            .then(|| {
                let branch = self.branch.as_deref().unwrap_or(iceberg::spec::MAIN_BRANCH);
                floe_iceberg::delta::branch_head(table, branch).map(|s| s.snapshot_id())
            })
            .flatten();
        let ids: Vec<&str> = batches.iter().map(|b| b.id.as_str()).collect();
        let checkpoint = serde_json::json!({"batches": ids, "rows": rows});
        Ok(AppendRequest {
            table: parse_ident(&self.table)?,
            files,
            commit_id,
            summary: HashMap::from([(CHECKPOINT_PROP.to_owned(), checkpoint.to_string())]),
            deadline,
            file_batches,
            branch: self.branch.clone(),
            deletes_on,
        })
    }

    /// What the table holds of the objects `incoming` names, and each record's version.
    async fn held(
        cx: &Committer<'_>,
        target: &TargetId,
        incoming: &[(usize, &ObjectRows)],
    ) -> Result<Held> {
        let keys: BTreeSet<ObjKey> = (incoming.iter())
            .map(|(_, o)| (o.bucket.clone(), o.key.clone()))
            .collect();
        let keys: Vec<ObjKey> = keys.into_iter().collect();
        let names: Vec<String> = (keys.iter()).map(|(b, k)| rows_key(target, b, k)).collect();
        let (mut held, mut versions) = (HashMap::new(), HashMap::new());
        for (k, entry) in keys.into_iter().zip(cx.checkpoint.get_many(&names).await?) {
            if let Some(e) = entry {
                let rows: ObjectRows = serde_json::from_slice(&e.value).map_err(|err| {
                    Error::unexpected(format!("unreadable record of {}: {err}", k.1))
                })?;
                held.insert(k.clone(), rows);
                versions.insert(k, e.version);
            }
        }
        Ok((held, versions))
    }

    /// The position delete files of a commit whose objects replace earlier rows, per batch:
    /// the rows of earlier versions (and of versions that never land) deleted by position.
    async fn replaced_rows(
        &self,
        cx: &Committer<'_>,
        table: &Table,
        rec: &CommitRecord,
        batches: &[&BatchRecord],
    ) -> Result<HashMap<String, Vec<DataFile>>> {
        let target = &rec.target;
        let incoming = replace::incoming(batches, target);
        if incoming.is_empty() {
            return Ok(HashMap::new());
        }
        let (held, versions) = Self::held(cx, target, &incoming).await?;
        let resolution = replace::resolve(&held, &incoming);
        *self.held.lock().await = Some((rec.id.clone(), (held, versions)));
        // The data files they delete from: this commit's own, else the table's.
        let mut known: HashMap<String, DataFile> = HashMap::new();
        for b in batches {
            for f in b.targets[target].files.iter().filter(|f| !f.deletes) {
                known.insert(f.path.clone(), f.to_data_file(table)?);
            }
        }
        let elsewhere: BTreeSet<String> = (resolution.deletes.keys())
            .map(|(_, f)| f.clone())
            .filter(|f| !known.contains_key(f))
            .collect();
        let branch = self.branch.as_deref().unwrap_or(iceberg::spec::MAIN_BRANCH);
        known.extend(floe_iceberg::delta::live_data_files(table, branch, &elsewhere).await?);
        let mut out: HashMap<String, Vec<DataFile>> = HashMap::new();
        for ((batch, path), positions) in resolution.deletes {
            let Some(file) = known.get(&path) else {
                // Not in the table any more (rewritten by a maintenance floe did not make):
                // its rows cannot be found by position.
                tracing::warn!(table = %table.identifier(), file = %path, rows = positions.len(), "rows of a replaced object are in a data file the table no longer holds; not deleted");
                continue;
            };
            let positions = positions.into_iter().map(|p| p as i64).collect();
            let deletes = PositionDeletes::of(file, positions);
            let written = write_position_deletes(table, &deletes).await?;
            out.entry(batches[batch].id.clone())
                .or_default()
                .push(written);
        }
        Ok(out)
    }

    async fn load(&self, cx: &Committer<'_>) -> Result<Table> {
        let mut loaded = self.loaded.lock().await;
        if let Some(t) = loaded.as_ref() {
            return Ok(t.clone());
        }
        let ident = parse_ident(&self.table)?;
        let table = load_table(cx.catalog.as_ref(), &ident)
            .await?
            .ok_or_else(|| {
                Error::new(
                    ErrorKind::NotFound,
                    format!("table {} does not exist", self.table),
                )
            })?;
        *loaded = Some(table.clone());
        Ok(table)
    }
}

#[async_trait::async_trait]
impl Target for IcebergTarget {
    async fn is_in(&self, cx: &Committer<'_>, record: &CommitRecord) -> Result<Option<Landed>> {
        let table = self.load(cx).await?;
        let branch = self.branch.as_deref().unwrap_or(iceberg::spec::MAIN_BRANCH);
        Ok(
            find_commit_on(&table, branch, &record.id).map(|found| Landed {
                snapshot_id: found.snapshot_id,
                bad_rows: 0,
            }),
        )
    }

    async fn commit(&self, cx: &Committer<'_>, pending: PendingCommit<'_>) -> Result<Landed> {
        let rec = &*pending.record;
        let batches: Vec<&BatchRecord> = pending.batches.iter().map(|(b, _)| b).collect();
        let replaces = !replace::incoming(&batches, &rec.target).is_empty();
        if replaces && cx.finish_maintenance(&rec.target).await?.is_some() {
            // A compaction an earlier holder of the lease left moves the rows this commit
            // replaces: finished first (see `super::maintain`), and the table loaded again (it
            // may have landed since `is_in` loaded it).
            *self.loaded.lock().await = None;
        }
        let table = if pending.files == 0 && !replaces {
            None
        } else {
            Some(self.load(cx).await?)
        };
        let replaced = match &table {
            Some(t) => self.replaced_rows(cx, t, rec, &batches).await?,
            None => HashMap::new(),
        };
        cx.faults.hit("commit.after-replaced-rows").await;
        let Some(table) = table.filter(|_| pending.files > 0 || !replaced.is_empty()) else {
            cx.faults.hit("commit.after-append").await;
            return Ok(Landed::default());
        };
        let with_deletes =
            (batches.iter()).any(|b| b.targets[&rec.target].files.iter().any(|f| f.deletes));
        // Row changes: one snapshot per batch, in order, as Flink commits each checkpoint's
        // deltas. An equality delete reaches only rows of earlier snapshots, so two batches
        // changing one key in one snapshot would both keep their rows. The last snapshot
        // carries the record's commit id (what `is_in` looks for), the others the id with
        // their place; each is checked by its own id and its batch before it is made again.
        let groups: Vec<(String, &[&BatchRecord])> = if with_deletes && batches.len() > 1 {
            (0..batches.len())
                .map(|i| {
                    let id = if i + 1 == batches.len() {
                        rec.id.clone()
                    } else {
                        format!("{}.{i}", rec.id)
                    };
                    (id, &batches[i..=i])
                })
                .collect()
        } else {
            vec![(rec.id.clone(), &batches[..])]
        };
        let mut snapshot_id = None;
        let last = groups.len();
        for (n, group) in groups.into_iter().enumerate() {
            let deadline = Instant::now() + Duration::from_millis(cx.config.commit.timeout_ms);
            let req = self.request(deadline, &table, rec, group, pending.rows, &replaced)?;
            snapshot_id = match append_exactly_once(cx.catalog.as_ref(), &req).await? {
                AppendOutcome::Committed { snapshot_id } => Some(snapshot_id),
                AppendOutcome::AlreadyCommitted { snapshot_id } => snapshot_id,
            };
            if n + 1 < last {
                cx.faults.hit("commit.after-batch-snapshot").await;
            }
        }
        cx.faults.hit("commit.after-append").await;
        Ok(Landed {
            snapshot_id,
            bad_rows: 0,
        })
    }

    async fn settle(
        &self,
        cx: &Committer<'_>,
        record: &CommitRecord,
        batches: &[(BatchRecord, Version)],
    ) -> Result<()> {
        let batches: Vec<&BatchRecord> = batches.iter().map(|(b, _)| b).collect();
        let incoming = replace::incoming(&batches, &record.target);
        if incoming.is_empty() {
            return Ok(());
        }
        let ttl = Some(Duration::from_secs(
            cx.config.ingest.dedupe_ttl_hours * 3600,
        ));
        // Only a committer of this target writes these records; one whose lease ran out may
        // still be settling the same commit, with the same outcome: a lost write is read again.
        let mut known = self.held.lock().await.take();
        for _ in 0..5 {
            let (held, versions) = match known.take() {
                Some((id, held)) if id == record.id => held,
                _ => Self::held(cx, &record.target, &incoming).await?,
            };
            let changed = replace::settle(&held, &incoming);
            if changed.is_empty() {
                return Ok(());
            }
            let names: Vec<(String, Vec<u8>, Option<Duration>)> = (changed.iter())
                .map(|((b, k), rows)| {
                    let removed = rows.operation == floe_core::Operation::Removed;
                    Ok((
                        rows_key(&record.target, b, k),
                        encode(rows)?,
                        if removed { ttl } else { None },
                    ))
                })
                .collect::<Result<_>>()?;
            let writes: Vec<Write<'_>> = (changed.keys().zip(&names))
                .map(|(k, (name, value, ttl))| match versions.get(k) {
                    Some(expected) => Write::Update {
                        key: name,
                        value: value.clone(),
                        expected,
                        ttl: *ttl,
                    },
                    None => Write::Insert {
                        key: name,
                        value: value.clone(),
                        ttl: *ttl,
                    },
                })
                .collect();
            let written = cx.checkpoint.write_many(&writes).await?;
            if written.iter().all(Option::is_some) {
                return Ok(());
            }
        }
        Err(Error::new(
            ErrorKind::Conflict,
            format!(
                "commit {}: the records of its replaced objects kept changing under it",
                record.id
            ),
        ))
    }
}
