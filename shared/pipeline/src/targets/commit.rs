//! The committer: staged batches → one commit per target, exactly once, under the target's
//! lease. See [`crate::protocol`] for the protocol and its crash points; what a commit does to
//! its table is the [`Target`]'s.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use floe_checkpoint::{CheckpointStore, StoreExt, Version, now_ms};
use floe_core::{Error, ErrorKind, Result};
use floe_iceberg::FloeCatalog;
use floe_storage::ObjectStore;
use futures::{StreamExt, TryStreamExt};

use super::iceberg::IcebergTarget;
use super::maxcompute::{MaxComputeTarget, MaxComputeTargets};
use super::{PendingCommit, Target};
use crate::config::FloeConfig;
use crate::fault::Faults;
use crate::protocol::batch::{self, Holder};
use crate::protocol::commit::{self, CommitPolicy, Mark, Plan};
use crate::protocol::lease::{self, Held};
use crate::protocol::records::{
    BatchRecord, BatchState, CommitRecord, CommitState, Lease, Owner, batch_key, commit_prefix,
    done_key, lease_key,
};
use crate::targets::id::TargetId;

/// The checkpoint key whose expiry paces the scheduled purge.
const PURGE_MARKER: &str = "purge/last";
/// Batches of a commit marked at once (each mark is a round trip or two to the store).
const MARK_PARALLELISM: usize = 16;

/// How often the committers purge dead checkpoint entries.
const PURGE_EVERY: Duration = Duration::from_secs(3600);

/// One target's commit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TargetCommit {
    /// The target id.
    pub target: String,
    /// The commit id.
    pub commit_id: String,
    /// Batches it took.
    pub batches: usize,
    /// Data files it added.
    pub files: usize,
    /// Rows it added.
    pub rows: u64,
    /// Rows the target could not hold, set aside under the route's `on-error` while this
    /// commit ran (MaxCompute values out of range or of the wrong kind; 0 for Iceberg, whose
    /// bad records are set aside at ingest).
    pub bad_rows: u64,
    /// The snapshot.
    pub snapshot_id: Option<i64>,
    /// Whether it finished a commit an earlier run had started.
    pub recovered: bool,
}

/// What a commit pass did.
#[derive(Debug, Default)]
pub struct CommitReport {
    /// Commits made (or finished).
    pub commits: Vec<TargetCommit>,
    /// Targets skipped because another committer holds their lease.
    pub busy: Vec<String>,
    /// Targets with staged work not yet due.
    pub waiting: Vec<String>,
    /// Dead checkpoint entries removed by the scheduled purge (0 when it was not due).
    pub purged: u64,
    /// Targets whose commit failed this pass (each target commits or fails on its own: one
    /// failing never holds up the others). Their staged work stays for the next pass.
    pub failed: Vec<FailedCommit>,
}

/// A target whose commit failed.
#[derive(Debug)]
pub struct FailedCommit {
    /// The target id.
    pub target: String,
    /// Why.
    pub error: Error,
}

/// The commit lease a committer holds: its target, the version it wrote, and when.
#[derive(Clone)]
pub(crate) struct HeldLease {
    target: TargetId,
    version: Version,
    renewed: Instant,
}

/// What a committer works with: the checkpoint table, the targets' clients, and who it is.
pub struct Committer<'a> {
    pub(crate) checkpoint: &'a Arc<dyn CheckpointStore>,
    pub(crate) catalog: &'a Arc<dyn FloeCatalog>,
    /// The staging tables of MaxCompute-only routes (see [`super::staging`]).
    pub(crate) staging: Option<&'a super::staging::StagingCatalog>,
    pub(crate) dead_letters: &'a Arc<dyn ObjectStore>,
    pub(crate) faults: &'a Faults,
    pub(crate) owner: &'a Owner,
    pub(crate) config: &'a FloeConfig,
    pub(crate) maxcompute: Option<&'a MaxComputeTargets>,
    /// The lease held while a target is committed (see [`Committer::renew_lease`]).
    pub(crate) lease: std::sync::Mutex<Option<HeldLease>>,
    /// When this process last asked whether the scheduled purge is due.
    pub(crate) purge_asked: &'a std::sync::Mutex<Option<Instant>>,
}

impl Committer<'_> {
    /// Commit every target with staged batches that is due (`force`: all of them now).
    pub(crate) async fn commit(&self, force: bool) -> Result<CommitReport> {
        let mut report = CommitReport::default();
        // Batch and commit ids are never written again once finished: their tombstones go as
        // they are met, so a pass reads what is in flight, not the history.
        let batches = (self.checkpoint)
            .scan_and_purge_json::<BatchRecord>("batch/")
            .await?;
        let commits = self.checkpoint.scan_and_purge("commit/").await?;
        self.clear_stopped_batches(&batches).await;
        let targets = commit::targets_with_work(
            batches.iter().map(|(_, b, _)| b),
            commits.iter().map(|e| e.key.as_str()),
        );
        for target in targets {
            if let Err(error) = self.commit_target(&target, force, &mut report).await {
                tracing::error!(target = %target, error = %error, "commit failed; the target's staged work waits for the next pass");
                report.failed.push(FailedCommit {
                    target: target.to_string(),
                    error,
                });
            }
        }
        report.purged = self.purge_if_due().await;
        Ok(report)
    }

    /// Declare abandoned the running batches whose instance stopped (heartbeat older than
    /// `claim-timeout-ms`, or a crashed local process), as a claim taker would: their claims go
    /// to the next delivery at once, and their records expire instead of being read by every
    /// pass for ever (an instance killed between opening a batch and claiming leaves one that no
    /// claim taker ever meets).
    async fn clear_stopped_batches(&self, batches: &[(String, BatchRecord, Version)]) {
        let timeout = self.config.ingest.claim_timeout_ms;
        for (key, b, v) in batches {
            if b.state != BatchState::Running {
                continue;
            }
            let dead = crate::host::is_dead_local_process(&b.owner);
            let Holder::Abandon(abandoned) = batch::judge(Some(b), false, now_ms(), timeout, dead)
            else {
                continue;
            };
            let ttl = Some(batch::abandoned_ttl(timeout));
            match self.checkpoint.update_json(key, &abandoned, v, ttl).await {
                Ok(Some(_)) => {
                    tracing::info!(batch = %b.id, "a batch whose instance stopped was declared abandoned")
                }
                Ok(None) => {}
                Err(e) => {
                    tracing::warn!(batch = %b.id, error = %e, "could not declare a stopped batch abandoned")
                }
            }
        }
    }

    /// At most once per [`PURGE_EVERY`] across every committer of the checkpoint table (the
    /// first to write the marker does it; each process asks at most every quarter of it): remove the dead entries under the prefixes whose
    /// keys are ids (done batches, and what passes did not meet). Object records (`obj/`) are
    /// left to expire in place: a claim may revive a dead one at any moment (see
    /// [`CheckpointStore::scan_and_purge`]). Returns how many went.
    async fn purge_if_due(&self) -> u64 {
        {
            // Ask the checkpoint table (a conditional write) at most a few times an hour per
            // process, not at every pass.
            let mut asked = self.purge_asked.lock().unwrap_or_else(|e| e.into_inner());
            if asked.is_some_and(|t| t.elapsed() < PURGE_EVERY / 4) {
                return 0;
            }
            *asked = Some(Instant::now());
        }
        match (self.checkpoint)
            .insert_json(PURGE_MARKER, &now_ms(), Some(PURGE_EVERY))
            .await
        {
            Ok(Some(_)) => {}
            Ok(None) => return 0,
            Err(e) => {
                tracing::warn!(error = %e, "could not write the purge marker; purging later");
                return 0;
            }
        }
        let mut purged = 0;
        for prefix in ["done/", "batch/", "commit/"] {
            match self.checkpoint.purge_expired(prefix).await {
                Ok(n) => purged += n,
                Err(e) => {
                    tracing::warn!(prefix, error = %e, "purge failed; the next one tries again")
                }
            }
        }
        tracing::info!(purged, "dead checkpoint entries removed");
        purged
    }

    async fn commit_target(
        &self,
        target: &TargetId,
        force: bool,
        report: &mut CommitReport,
    ) -> Result<()> {
        if !self.hold_lease(target).await? {
            report.busy.push(target.to_string());
            return Ok(());
        }
        self.faults.hit("commit.after-lease").await;
        let result = self.commit_under_lease(target, force, report).await;
        // Release the lease whatever happened (it would expire anyway).
        self.release_lease(target).await;
        result
    }

    /// Give up the held lease of `target` (best effort: it would expire anyway).
    pub(crate) async fn release_lease(&self, target: &TargetId) {
        let held = self.held().take();
        if let Some(held) = held {
            let _ = self
                .checkpoint
                .delete_if_version(&lease_key(target), &held.version)
                .await;
        }
    }

    /// Take `target`'s lease and hold it (false: another live committer has it).
    pub(crate) async fn hold_lease(&self, target: &TargetId) -> Result<bool> {
        let Some(version) = self.take_lease(target).await? else {
            return Ok(false);
        };
        *self.held() = Some(HeldLease {
            target: target.clone(),
            version,
            renewed: Instant::now(),
        });
        Ok(true)
    }

    fn held(&self) -> std::sync::MutexGuard<'_, Option<HeldLease>> {
        self.lease.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Extend the held lease by `lease-ms` from now, compare-and-set on the version this
    /// committer last wrote: called before a target is touched (`always`) and between the
    /// blocks of a long upload (when a third of the lease has passed). If the lease ran out or
    /// another committer took it, this committer stops with a conflict: its commit record stays
    /// for whoever holds the lease now, who asks the target whether the commit is in.
    pub(crate) async fn renew_lease(&self, always: bool) -> Result<()> {
        let Some(held) = self.held().clone() else {
            return Ok(());
        };
        let lease_ms = self.config.commit.lease_ms;
        if !always && held.renewed.elapsed() < Duration::from_millis(lease_ms / 3) {
            return Ok(());
        }
        let mine = lease::lease(self.owner, now_ms(), lease_ms);
        let ttl = Some(Duration::from_millis(lease_ms));
        let key = lease_key(&held.target);
        match self
            .checkpoint
            .update_json(&key, &mine, &held.version, ttl)
            .await?
        {
            Some(version) => {
                *self.held() = Some(HeldLease {
                    version,
                    renewed: Instant::now(),
                    ..held
                });
                Ok(())
            }
            None => {
                *self.held() = None;
                Err(Error::new(
                    ErrorKind::Conflict,
                    format!(
                        "the commit lease of {} ran out (lease-ms = {lease_ms}) and may be another committer's; stopped before touching the target",
                        held.target
                    ),
                ))
            }
        }
    }

    async fn take_lease(&self, target: &TargetId) -> Result<Option<Version>> {
        let lease_ms = self.config.commit.lease_ms;
        let ttl = Some(Duration::from_millis(lease_ms));
        for _ in 0..3 {
            let mine = lease::lease(self.owner, now_ms(), lease_ms);
            if let Some(v) = self
                .checkpoint
                .insert_json(&lease_key(target), &mine, ttl)
                .await?
            {
                return Ok(Some(v));
            }
            let Some((held, v)) = self
                .checkpoint
                .get_json::<Lease>(&lease_key(target))
                .await?
            else {
                continue;
            };
            let dead = crate::host::is_dead_local_process(&held.owner);
            match lease::judge(&held, self.owner, dead) {
                Held::Replace => {
                    self.checkpoint
                        .delete_if_version(&lease_key(target), &v)
                        .await?;
                }
                Held::Busy => return Ok(None),
            }
        }
        Ok(None)
    }

    async fn commit_under_lease(
        &self,
        target: &TargetId,
        force: bool,
        report: &mut CommitReport,
    ) -> Result<()> {
        // 1. Finish what an earlier committer started: first the commits already in the target
        // (done, or landed before their committer stopped), so their batches are marked before
        // any other record naming the same batches is looked at. (A record written by a
        // committer whose lease had run out can name batches another commit took; the table's
        // own batch check covers that too, but only while the other snapshot is in its history.)
        let records = (self.checkpoint)
            .scan_json::<CommitRecord>(&commit_prefix(target))
            .await?;
        let several = records.len() > 1;
        let (mut landed, mut open) = (Vec::new(), Vec::new());
        for (key, rec, version) in records {
            // (One record alone has no other to be ordered against: no extra question then.)
            let is_in = rec.state == CommitState::Done
                || (several && self.target(target).is_in(self, &rec).await?.is_some());
            if is_in {
                landed.push((key, rec, version));
            } else {
                open.push((key, rec, version));
            }
        }
        for (key, rec, version) in landed.into_iter().chain(open) {
            let done = self.finish_commit(&key, rec, version, true).await?;
            report.commits.push(done);
        }

        // 2. Choose the batches.
        let batches = self.checkpoint.scan_json::<BatchRecord>("batch/").await?;
        let policy = CommitPolicy {
            interval_ms: self.config.commit.interval_ms,
            max_files: self.config.commit.max_files,
            max_bytes: self.config.commit.max_bytes,
        };
        let staged = batches.iter().map(|(_, b, _)| b);
        let chosen = match commit::plan(staged, target, now_ms(), &policy, force) {
            Plan::Nothing => return Ok(()),
            Plan::Wait => {
                report.waiting.push(target.to_string());
                return Ok(());
            }
            Plan::Commit(chosen) => chosen,
        };

        // 3. Record the commit before touching the table.
        let commit_id = uuid::Uuid::now_v7().to_string();
        let rec = commit::begin(&commit_id, target, chosen, now_ms());
        let key = format!("{}{commit_id}", commit_prefix(target));
        let version = self
            .checkpoint
            .insert_json(&key, &rec, None)
            .await?
            .ok_or_else(|| Error::unexpected(format!("commit id {commit_id} already exists")))?;
        self.faults.hit("commit.after-record").await;
        let done = self.finish_commit(&key, rec, version, false).await?;
        report.commits.push(done);
        Ok(())
    }

    /// Take a commit record to its end: append (unless the table already has it), mark it done,
    /// mark its batches, delete it.
    async fn finish_commit(
        &self,
        key: &str,
        mut rec: CommitRecord,
        mut version: Version,
        recovered: bool,
    ) -> Result<TargetCommit> {
        let target = rec.target.clone();
        // Under a live lease, no other committer can be between its append and its marks: the
        // batch records read next say what is already in the target.
        self.renew_lease(true).await?;
        let mut batches = Vec::new();
        let keys: Vec<String> = rec.batches.iter().map(|id| batch_key(id)).collect();
        let found = self.checkpoint.get_many_json::<BatchRecord>(&keys).await?;
        for (b, v) in found.into_iter().flatten() {
            if commit::committed_elsewhere(&b, &target, &rec.id) {
                // Another commit holds this batch's files (one that ran out of its lease
                // planned it too): never append them twice.
                tracing::warn!(target = %target, commit_id = %rec.id, batch = %b.id, "batch already committed by another commit; left out");
                continue;
            }
            batches.push((b, v));
        }
        let files: usize = batches
            .iter()
            .map(|(b, _)| b.targets.get(&target).map_or(0, |t| t.files.len()))
            .sum();
        let rows: u64 = batches
            .iter()
            .map(|(b, _)| b.targets.get(&target).map_or(0, |t| t.rows))
            .sum();

        let handler = self.target(&target);
        let mut bad_rows = 0;
        if rec.state == CommitState::Pending {
            let landed = match handler.is_in(self, &rec).await? {
                Some(landed) => landed,
                None => {
                    let pending = PendingCommit {
                        key,
                        record: &mut rec,
                        version: &mut version,
                        batches: &batches,
                        files,
                        rows,
                    };
                    handler.commit(self, pending).await?
                }
            };
            bad_rows = landed.bad_rows;
            rec = commit::landed(rec, landed.snapshot_id);
            version = self
                .checkpoint
                .update_json(key, &rec, &version, None)
                .await?
                .ok_or_else(|| {
                    Error::new(
                        ErrorKind::Conflict,
                        format!("commit record {key} changed under its committer"),
                    )
                })?;
            self.faults.hit("commit.after-done").await;
        }
        handler.settle(self, &rec, &batches).await?;
        self.faults.hit("commit.after-settle").await;
        handler.cleanup(self, &target, &batches).await;

        // Mark the batches, all at once (each is its own record); a batch every target has
        // committed becomes a done record.
        let marks: Vec<_> = (batches.into_iter())
            .map(|(b, v)| self.mark_batch(b, v, &target, &rec.id))
            .collect();
        futures::stream::iter(marks)
            .buffer_unordered(MARK_PARALLELISM)
            .try_collect::<()>()
            .await?;
        self.checkpoint.delete_if_version(key, &version).await?;
        tracing::info!(target = %target, commit_id = %rec.id, batches = rec.batches.len(), files, rows, bad_rows, snapshot_id = rec.snapshot_id, "commit finished");
        Ok(TargetCommit {
            target: target.to_string(),
            commit_id: rec.id,
            batches: rec.batches.len(),
            files,
            rows: rows - bad_rows.min(rows),
            bad_rows,
            snapshot_id: rec.snapshot_id,
            recovered,
        })
    }

    /// Mark batch `b` (read at `v`) committed to `target` by commit `commit_id`; when every
    /// target has it, write its done record and delete it.
    async fn mark_batch(
        &self,
        mut b: BatchRecord,
        mut v: Version,
        target: &TargetId,
        commit_id: &str,
    ) -> Result<()> {
        let ttl = Some(Duration::from_secs(
            self.config.ingest.dedupe_ttl_hours * 3600,
        ));
        loop {
            let id = b.id.clone();
            let written = match commit::mark(b, target, commit_id, now_ms()) {
                Mark::Finish(done) => {
                    let _ = self
                        .checkpoint
                        .insert_json(&done_key(&id), &done, ttl)
                        .await?;
                    self.checkpoint
                        .delete_if_version(&batch_key(&id), &v)
                        .await?
                }
                Mark::Update(marked) => self
                    .checkpoint
                    .update_json(&batch_key(&id), &marked, &v, None)
                    .await?
                    .is_some(),
            };
            if written {
                break;
            }
            // Another target's committer changed the batch meanwhile: reload and retry.
            match self
                .checkpoint
                .get_json::<BatchRecord>(&batch_key(&id))
                .await?
            {
                Some((fresh, fv)) => {
                    b = fresh;
                    v = fv;
                }
                None => break,
            }
        }
        self.faults.hit("commit.after-batches").await;
        Ok(())
    }

    /// Staged work waiting per target: (batches, files, rows).
    pub(crate) async fn staged_summary(&self) -> Result<BTreeMap<TargetId, (usize, usize, u64)>> {
        let batches = self.checkpoint.scan_json::<BatchRecord>("batch/").await?;
        Ok(commit::waiting_summary(batches.iter().map(|(_, b, _)| b)))
    }

    /// The target behind an id.
    fn target(&self, id: &TargetId) -> Box<dyn Target> {
        match id {
            TargetId::Iceberg { table, .. } => Box::new(IcebergTarget::new(
                table,
                self.config.commit_branches.of(table).map(str::to_owned),
            )),
            TargetId::MaxCompute { .. } => Box::new(MaxComputeTarget::default()),
        }
    }

    /// Save the commit record `rec` over `version` (a target records its progress in it).
    pub async fn save_commit_record(
        &self,
        key: &str,
        rec: &CommitRecord,
        version: &Version,
    ) -> Result<Version> {
        self.checkpoint
            .update_json(key, rec, version, None)
            .await?
            .ok_or_else(|| {
                Error::new(
                    ErrorKind::Conflict,
                    format!("commit record {key} changed under its committer"),
                )
            })
    }
}
