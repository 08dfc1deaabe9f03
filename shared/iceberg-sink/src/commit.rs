//! Appending staged data files to a table exactly once.
//!
//! Every append carries floe's commit id in its snapshot summary (`floe.commit-id`). Before each
//! attempt, and so before any retry, the table's history (the head of the branch it commits
//! to, `main` unless the request names another, and its ancestors) is searched for that id: if
//! an earlier attempt landed (its answer lost to a timeout, a 5xx, a crash) the commit is
//! reported as already done instead of being applied a second time. The same commit sets the table property `floe.commit-ids` (the latest commit
//! ids), which snapshot expiry leaves alone: a commit whose snapshot was expired is still
//! found. Conflicts (another writer moved the table) are retried with backoff and jitter
//! until the deadline; the files themselves do not change between attempts.
//!
//! floe owns every retry. iceberg's `Transaction::commit` would retry a 409 by itself, reloading
//! the table and re-applying the append without looking for the commit id: when the table moved
//! because an earlier attempt of this same commit landed (its answer timed out, or a second
//! committer finished the same commit record), that lands the files twice. So the transaction
//! commits through [`OneAttempt`], which makes every catalog error final for iceberg's loop and
//! hands it back to floe's, which searches the history before trying again. The transaction
//! also reloads the table before it commits and would re-apply the append on whatever it finds:
//! [`OneAttempt`] answers that load with the table whose history was searched, so the attempt
//! asserts the snapshot floe checked, and an attempt that landed in between makes the catalog
//! refuse this one (409) instead of stacking a second copy on top of it.

use std::collections::{BTreeSet, HashMap};
use std::time::{Duration, Instant};

use floe_core::retry::{Jitter, Retry, RetryPolicy};
use floe_core::{Error, ErrorKind, Result};
use iceberg::spec::{DataContentType, DataFile, MAIN_BRANCH};
use iceberg::table::Table;
use iceberg::transaction::{ApplyTransactionAction, Transaction};
use iceberg::{TableIdent, TableUpdate};

use crate::catalog::{FloeCatalog, from_iceberg};
use crate::table::load_table;

/// Snapshot summary key holding floe's commit id.
pub const COMMIT_ID_PROP: &str = "floe.commit-id";
/// Snapshot summary key holding floe's checkpoint (the batches the snapshot took).
pub const CHECKPOINT_PROP: &str = "floe.checkpoint";

/// Table property listing the latest commit ids floe appended to the table (comma-separated,
/// newest last, at most [`RECENT_COMMIT_IDS`]): set in the same commit as each append, so "is
/// this commit in?" has an answer after snapshot expiry has removed the commit's snapshot.
pub const COMMIT_IDS_PROP: &str = "floe.commit-ids";

/// Table property listing the latest batch ids floe appended (comma-separated, newest last, at
/// most [`RECENT_BATCH_IDS`]), set with each append: a batch taken under one commit id is
/// recognised by an attempt under another after the snapshot that took it was expired.
pub const BATCH_IDS_PROP: &str = "floe.batch-ids";

/// How many batch ids [`BATCH_IDS_PROP`] keeps: a commit record naming batches another commit
/// took is one written by a committer whose lease ran out, recovered or retried within minutes
/// of the other; a few hundred batches cover many commits of that span.
pub const RECENT_BATCH_IDS: usize = 256;

/// How many commit ids [`COMMIT_IDS_PROP`] keeps. A pending commit is finished by the next
/// committer of its table before that one commits anything new, so only the last few matter;
/// the margin covers several floe deployments writing one table.
pub const RECENT_COMMIT_IDS: usize = 64;

/// How an append ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AppendOutcome {
    /// This call made the snapshot.
    Committed {
        /// The new snapshot.
        snapshot_id: i64,
    },
    /// An earlier attempt had already made it.
    AlreadyCommitted {
        /// The snapshot found (`None`: it was expired since; the table's recent commit ids
        /// still name the commit).
        snapshot_id: Option<i64>,
    },
}

/// A commit found in a table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FoundCommit {
    /// Its snapshot, or `None` when the snapshot was expired and only the table's recent
    /// commit ids ([`COMMIT_IDS_PROP`]) name it.
    pub snapshot_id: Option<i64>,
}

/// Whether `table` holds the commit `commit_id`: a snapshot of its current lineage whose
/// summary carries the id, or else the id among the table's recent commit ids.
pub fn find_commit(table: &Table, commit_id: &str) -> Option<FoundCommit> {
    find_commit_on(table, MAIN_BRANCH, commit_id)
}

/// [`find_commit`] on `branch`'s lineage (a branch not made yet: `main`'s, which it will fork
/// from).
pub fn find_commit_on(table: &Table, branch: &str, commit_id: &str) -> Option<FoundCommit> {
    let lineage = walk_lineage(table, branch, commit_id, &BTreeSet::new());
    found(table, commit_id, &lineage)
}

/// [`find_commit`]'s answer from a walk of the lineage already made.
fn found(table: &Table, commit_id: &str, lineage: &Lineage) -> Option<FoundCommit> {
    if let Some(id) = lineage.snapshot {
        return Some(FoundCommit {
            snapshot_id: Some(id),
        });
    }
    recent_ids(table, COMMIT_IDS_PROP)
        .any(|id| id == commit_id)
        .then_some(FoundCommit { snapshot_id: None })
}

/// The ids a recent-ids table property ([`COMMIT_IDS_PROP`], [`BATCH_IDS_PROP`]) lists,
/// oldest first.
fn recent_ids<'t>(table: &'t Table, prop: &str) -> impl Iterator<Item = &'t str> {
    (table.metadata().properties().get(prop))
        .map(String::as_str)
        .unwrap_or("")
        .split(',')
        .filter(|s| !s.is_empty())
}

/// The recent-ids property `prop` with `added` last (moved there if listed already), the oldest
/// dropped past `keep`.
fn with_ids<'a>(table: &'a Table, prop: &str, added: &[&'a str], keep: usize) -> String {
    let mut ids: Vec<&str> = recent_ids(table, prop)
        .filter(|id| !added.contains(id))
        .collect();
    ids.extend(added);
    let start = ids.len().saturating_sub(keep);
    ids[start..].join(",")
}

/// What one walk of a table's current lineage found.
struct Lineage {
    /// The snapshot whose summary carries the commit id looked for.
    snapshot: Option<i64>,
    /// Of the batches looked for, those a snapshot's [`CHECKPOINT_PROP`] summary names (only
    /// the snapshots newer than the commit's, when it was found).
    taken: BTreeSet<String>,
}

/// Walk `table`'s current lineage, newest first, once: for the snapshot carrying `commit_id`
/// (the walk stops there) and for the batches among `wanted` that snapshots already took,
/// whatever their commit id.
fn walk_lineage(table: &Table, branch: &str, commit_id: &str, wanted: &BTreeSet<&str>) -> Lineage {
    let metadata = table.metadata();
    let mut lineage = Lineage {
        snapshot: None,
        taken: BTreeSet::new(),
    };
    let mut next = (crate::delta::branch_head(table, branch))
        .or_else(|| metadata.current_snapshot())
        .map(|s| s.snapshot_id());
    let mut seen = 0usize;
    while let Some(id) = next {
        let Some(snapshot) = metadata.snapshot_by_id(id) else {
            break;
        };
        let summary = &snapshot.summary().additional_properties;
        if summary.get(COMMIT_ID_PROP).map(String::as_str) == Some(commit_id) {
            lineage.snapshot = Some(id);
            break;
        }
        if let Some(text) = summary.get(CHECKPOINT_PROP)
            && wanted.iter().any(|b| text.contains(b))
            && let Ok(checkpoint) = serde_json::from_str::<serde_json::Value>(text)
        {
            let named = checkpoint["batches"].as_array().into_iter().flatten();
            lineage.taken.extend(
                named
                    .filter_map(|b| b.as_str())
                    .filter(|b| wanted.contains(b))
                    .map(str::to_owned),
            );
        }
        next = snapshot.parent_snapshot_id();
        seen += 1;
        if seen > 100_000 {
            break; // a cycle would be a corrupt table; do not loop forever
        }
    }
    lineage
}

/// What one attempt appends: the request's files and summary without the files of batches the
/// table already took (the summary's [`CHECKPOINT_PROP`] then names only the batches this
/// snapshot takes), and the batches it takes.
struct Attempt {
    files: Vec<DataFile>,
    summary: HashMap<String, String>,
    batches: BTreeSet<String>,
}

/// `taken`: what the walk of the lineage found; the batches [`BATCH_IDS_PROP`] names are added
/// (it outlives snapshot expiry).
fn without_taken(
    table: &Table,
    req: &AppendRequest,
    wanted: &BTreeSet<&str>,
    mut taken: BTreeSet<String>,
) -> Attempt {
    let mut summary = req.summary.clone();
    taken.extend(
        recent_ids(table, BATCH_IDS_PROP)
            .filter(|b| wanted.contains(b))
            .map(str::to_owned),
    );
    let batches: BTreeSet<String> = (wanted.iter())
        .filter(|b| !taken.contains(**b))
        .map(|b| (*b).to_owned())
        .collect();
    if taken.is_empty() {
        return Attempt {
            files: req.files.clone(),
            summary,
            batches,
        };
    }
    tracing::warn!(table = %req.table, commit_id = %req.commit_id, batches = ?taken, "batches already appended by another commit; left out");
    let files: Vec<DataFile> = (req.files.iter().zip(&req.file_batches))
        .filter(|(_, b)| !taken.contains(*b))
        .map(|(f, _)| f.clone())
        .collect();
    if let Some(text) = summary.get_mut(CHECKPOINT_PROP)
        && let Ok(mut checkpoint) = serde_json::from_str::<serde_json::Value>(text)
    {
        checkpoint["batches"] = serde_json::json!(batches);
        *text = checkpoint.to_string();
    }
    Attempt {
        files,
        summary,
        batches,
    }
}

/// What to append.
#[derive(Clone, Debug)]
pub struct AppendRequest {
    /// The table.
    pub table: TableIdent,
    /// The data files.
    pub files: Vec<DataFile>,
    /// floe's commit id for this append.
    pub commit_id: String,
    /// Extra snapshot summary properties (the checkpoint).
    pub summary: HashMap<String, String>,
    /// Give up retrying after this instant.
    pub deadline: Instant,
    /// The batch each of `files` was staged by (empty: no batch check). A batch already taken
    /// by a snapshot of the table (under another commit id: a commit record written by a
    /// committer whose lease had run out, recovered beside the one that holds it) is left out,
    /// decided on the very table the attempt asserts, so it can never be appended twice.
    pub file_batches: Vec<String>,
    /// The branch the snapshot goes on (`None`: `main`); one that does not exist yet is made
    /// from `main`'s current snapshot (Kafka Connect's `iceberg.tables.default-commit-branch`).
    pub branch: Option<String>,
    /// The snapshot of `main` the request's position deletes were worked out on (`None`: no
    /// such deletes, or no check). An attempt on a table that has moved since is made only while
    /// every data file they name (other than the request's own) is still in it: a compaction
    /// that landed meanwhile rewrote the rows they would delete, and the append fails instead
    /// (a conflict, not retried here) so that the caller works its deletes out again.
    pub deletes_on: Option<i64>,
}

/// Hook called after each attempt that reached the catalog with whether it succeeded; returning
/// `true` makes floe treat the attempt as lost (tests simulate a response lost after the catalog
/// applied the commit).
pub type AfterAttempt<'a> = &'a (dyn Fn(bool) -> bool + Send + Sync);

/// Append `req.files` in one snapshot, exactly once; see the module doc.
pub async fn append_exactly_once(
    catalog: &dyn FloeCatalog,
    req: &AppendRequest,
) -> Result<AppendOutcome> {
    append_with_hook(catalog, req, &|_| false).await
}

/// [`append_exactly_once`] with a hook after each attempt.
pub async fn append_with_hook(
    catalog: &dyn FloeCatalog,
    req: &AppendRequest,
    after_attempt: AfterAttempt<'_>,
) -> Result<AppendOutcome> {
    let mut retry = Retry::new(COMMIT_RETRY)
        .with_deadline(req.deadline)
        .retry_if(|err| {
            err.is_retryable()
                || matches!(
                    err.kind(),
                    ErrorKind::Conflict
                        | ErrorKind::StateUnknown
                        | ErrorKind::Io
                        | ErrorKind::Unexpected
                )
        });
    loop {
        let table = load_table(catalog, &req.table).await?.ok_or_else(|| {
            Error::new(
                ErrorKind::NotFound,
                format!("table {} does not exist", req.table),
            )
        })?;
        // One walk of the history answers both "is this commit in?" and "which of its
        // batches are?".
        let wanted: BTreeSet<&str> = req.file_batches.iter().map(String::as_str).collect();
        let branch = req.branch.as_deref().unwrap_or(MAIN_BRANCH);
        let lineage = walk_lineage(&table, branch, &req.commit_id, &wanted);
        if let Some(found) = found(&table, &req.commit_id, &lineage) {
            return Ok(AppendOutcome::AlreadyCommitted {
                snapshot_id: found.snapshot_id,
            });
        }
        let branch = req.branch.as_deref().unwrap_or(MAIN_BRANCH);
        if let Some(base) = req.deletes_on
            && crate::delta::branch_head(&table, branch).map(|s| s.snapshot_id()) != Some(base)
            && !deleted_files_live(&table, branch, req).await?
        {
            return Err(Error::new(
                ErrorKind::Conflict,
                format!(
                    "commit {} to {}: a data file its position deletes name was rewritten since \
                     they were worked out (a compaction landed); they are worked out again",
                    req.commit_id, req.table
                ),
            ));
        }
        let Attempt {
            files,
            mut summary,
            batches,
        } = without_taken(&table, req, &wanted, lineage.taken);
        if files.is_empty() {
            return Ok(AppendOutcome::AlreadyCommitted { snapshot_id: None });
        }
        summary.insert(COMMIT_ID_PROP.into(), req.commit_id.clone());
        let mut properties = HashMap::from([(
            COMMIT_IDS_PROP.to_owned(),
            with_ids(
                &table,
                COMMIT_IDS_PROP,
                &[req.commit_id.as_str()],
                RECENT_COMMIT_IDS,
            ),
        )]);
        if !batches.is_empty() {
            let added: Vec<&str> = batches.iter().map(String::as_str).collect();
            let batch_ids = with_ids(&table, BATCH_IDS_PROP, &added, RECENT_BATCH_IDS);
            properties.insert(BATCH_IDS_PROP.to_owned(), batch_ids);
        }
        let one_attempt = OneAttempt(catalog, &table);
        // iceberg-rust's fast append commits to `main` only.
        let result = if branch == MAIN_BRANCH
            && files
                .iter()
                .all(|f| f.content_type() == DataContentType::Data)
        {
            let tx = Transaction::new(&table);
            let action = tx
                .fast_append()
                // floe's own commit ids already guard against adding files twice; the
                // duplicate check would read every manifest of the table on every commit.
                .with_check_duplicate(false)
                .set_snapshot_properties(summary)
                .add_data_files(files);
            let tx = action.apply(tx).map_err(from_iceberg)?;
            let set = properties
                .into_iter()
                .fold(tx.update_table_properties(), |p, (k, v)| p.set(k, v));
            let tx = set.apply(tx).map_err(from_iceberg)?;
            tx.commit(&one_attempt).await
        } else {
            // Delete files, or another branch: a snapshot floe writes itself (`crate::delta`).
            let (requirements, mut updates) =
                crate::delta::snapshot_updates(&table, branch, files, summary).await?;
            updates.push(TableUpdate::SetProperties {
                updates: properties,
            });
            one_attempt
                .commit_updates(&req.table, requirements, updates)
                .await
        };
        let lost = after_attempt(result.is_ok());
        let err = match result {
            Ok(_) if lost => Error::new(ErrorKind::StateUnknown, "the commit's answer was lost"),
            Ok(t) => {
                let snapshot_id = (walk_lineage(&t, branch, &req.commit_id, &BTreeSet::new())
                    .snapshot)
                    .or_else(|| crate::delta::branch_head(&t, branch).map(|s| s.snapshot_id()))
                    .ok_or_else(|| {
                        Error::unexpected("commit returned a table without a current snapshot")
                    })?;
                tracing::info!(table = %req.table, commit_id = %req.commit_id, snapshot_id, files = req.files.len(), "snapshot committed");
                return Ok(AppendOutcome::Committed { snapshot_id });
            }
            Err(e) => from_iceberg(e),
        };
        let message = err.to_string();
        let delay = retry.next_delay(err).map_err(|err| {
            err.while_doing(format!(
                "failed to commit {} to {}",
                req.commit_id, req.table
            ))
        })?;
        let attempt = retry.attempts();
        tracing::warn!(table = %req.table, commit_id = %req.commit_id, attempt, error = %message, "commit conflict or unknown outcome; checking history before retrying");
        retry.sleep(delay).await;
    }
}

/// Whether every data file `req`'s position deletes name, other than its own, is live in
/// `table` (see [`AppendRequest::deletes_on`]).
async fn deleted_files_live(table: &Table, branch: &str, req: &AppendRequest) -> Result<bool> {
    let own: BTreeSet<&str> = (req.files.iter())
        .filter(|f| f.content_type() == DataContentType::Data)
        .map(|f| f.file_path())
        .collect();
    let named: BTreeSet<String> = (req.files.iter())
        .filter(|f| f.content_type() == DataContentType::PositionDeletes)
        .filter_map(|f| f.referenced_data_file())
        .filter(|p| !own.contains(p.as_str()))
        .collect();
    let live = crate::delta::live_data_files(table, branch, &named).await?;
    Ok(live.len() == named.len())
}

/// A catalog whose table commits iceberg's transaction never retries, and whose table loads
/// answer the table floe searched for its commit id (see the module doc).
struct OneAttempt<'a>(&'a dyn FloeCatalog, &'a Table);

impl std::fmt::Debug for OneAttempt<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("OneAttempt")
    }
}

crate::wrap_catalog!(
    OneAttempt<'_>,
    0,
    load | self,
    ident | {
        if ident == self.1.identifier() {
            Ok(self.1.clone())
        } else {
            self.0.load_table(ident).await
        }
    },
    commit | self,
    ident,
    requirements,
    updates | {
        (self.0.commit_updates(ident, requirements, updates).await)
            .map_err(|e| e.with_retryable(false))
    }
);

/// Commit retries: 200 ms doubling to 10 s, each wait jittered within its upper half
/// (100–200 ms, then 200–400 ms, …), until the request's deadline.
const COMMIT_RETRY: RetryPolicy =
    RetryPolicy::new(Duration::from_millis(200), Duration::from_secs(10))
        .with_jitter(Jitter::Equal);
