//! One ingest batch, step by step: route, open the batch record, claim (`claims.rs`),
//! read and write (`write.rs`), stage with one compare-and-set, mark the objects. See
//! [`crate::protocol`] for what each step writes and what a crash after it leaves.

use std::collections::BTreeMap;

use floe_checkpoint::{StoreExt, Version, Write, encode, now_ms};
use floe_core::{Error, ErrorKind, ObjectChange, Operation, Result};
use futures::future::Either;

use super::route::Routed;
use super::write::WriteResult;
use super::{BatchReport, Claimed, Run};
use crate::config::{Mode, OnChange};
use crate::deadletter::{DeadLetter, DeadLetterWriter};
use crate::pipeline::Pipeline;
use crate::protocol::Outcome;
use crate::protocol::batch::{self, Staging};
use crate::protocol::claim::{self, Decision};
use crate::protocol::records::{
    BatchRecord, DoneRecord, ObjState, TargetFiles, batch_key, done_key,
};
use crate::targets::TargetId;

impl Pipeline {
    /// Land a batch of changes: route, claim, read and write, stage, mark (see
    /// [`crate::protocol`] for what each step writes and what a crash after it leaves).
    pub async fn ingest(&self, changes: &[ObjectChange]) -> Result<BatchReport> {
        self.ingest_until(changes, None).await
    }

    /// [`Pipeline::ingest`], no object read going on past `read_until` (an invocation's stop
    /// time): a read still running then is given back, and the batch stages the rest.
    pub async fn ingest_until(
        &self,
        changes: &[ObjectChange],
        read_until: Option<std::time::Instant>,
    ) -> Result<BatchReport> {
        let batch = uuid::Uuid::now_v7().to_string();
        let mut run = Run {
            read_until,
            dead: DeadLetterWriter::new(self.dead_letters.clone(), &batch),
            report: BatchReport {
                batch: batch.clone(),
                ..Default::default()
            },
            outcomes: (0..changes.len()).map(|_| None).collect(),
            changes,
            batch,
            prefetch: Default::default(),
            tables: Default::default(),
        };
        let routed = self.route_all(&mut run).await?;
        if routed.is_empty() {
            run.report.dead_letters = run.dead.count();
            for o in run.outcomes.iter_mut().filter(|o| o.is_none()) {
                *o = Some(Outcome::Ignored("nothing to do".into()));
            }
            return Ok(run.finish());
        }

        // The batch's tables are loaded (created if need be) while its objects are claimed:
        // one waits on the catalog, the other on the checkpoint table. What is still loading
        // once the claims are in is waited for with the batch's heartbeat kept fresh, as an
        // object's read is (a table created from an inferred schema reads an object).
        let (changes, read_until) = (run.changes, run.read_until);
        let mut tables = std::pin::pin!(self.prepare_tables(changes, &routed, read_until));
        let (opened, prepared) = {
            let open_and_claim = std::pin::pin!(async {
                // Open the batch record before claiming anything: takers of our claims judge us
                // by it.
                let record = batch::open(&run.batch, &self.owner, now_ms());
                let version = (self.checkpoint)
                    .insert_json(&batch_key(&run.batch), &record, None)
                    .await?
                    .ok_or_else(|| {
                        Error::unexpected(format!("batch id {} already exists", run.batch))
                    })?;
                self.faults.hit("ingest.after-batch-open").await;
                let claimed = self.claim_all(&mut run, &routed).await?;
                Ok::<_, Error>((record, version, claimed))
            });
            match futures::future::select(open_and_claim, tables.as_mut()).await {
                Either::Left((opened, _)) => (opened, None),
                Either::Right((prepared, open_and_claim)) => (open_and_claim.await, Some(prepared)),
            }
        };
        let (mut record, mut version, mut claimed) = opened?;
        run.tables = match prepared {
            Some(prepared) => prepared,
            None => match self.beating(tables, &mut record, &mut version).await? {
                Some(prepared) => prepared,
                None => return Ok(run.abandoned(&claimed)),
            },
        };
        self.faults.hit("ingest.after-claim").await;
        tracing::info!(batch = %run.batch, changes = routed.len(), claimed = claimed.len(), "objects claimed");

        // Read and write; an object given back restarts the batch's writing without it.
        let slots = loop {
            let given_back = match self
                .write_all(&mut run, &claimed, &mut record, &mut version)
                .await?
            {
                WriteResult::Done(slots) => break slots,
                WriteResult::GiveBack(pos, outcome) => vec![(claimed.remove(pos), outcome)],
                WriteResult::Stopped(pos, outcome) => {
                    // The stop time came while this object read: it and the objects not read
                    // yet go back; those read before it are written again (they were read in
                    // time once), bound by the object timeout alone.
                    run.read_until = None;
                    let mut outcome = Some(outcome);
                    let rest: Vec<Claimed> = claimed.drain(pos..).collect();
                    rest.into_iter()
                        .map(|c| (c, outcome.take().unwrap_or_else(not_read_in_time)))
                        .collect()
                }
                WriteResult::Abandoned => return Ok(run.abandoned(&claimed)),
            };
            for (c, outcome) in given_back {
                self.release(&c).await?;
                run.outcomes[c.idx] = Some(outcome);
            }
            run.dead.discard_pending();
            run.report.rows = 0;
            run.report.bad_records = 0;
            run.report.bytes_read = 0;
        };
        let targets = self.close_slots(&mut run, slots, &claimed).await?;
        self.faults.hit("ingest.after-write").await;
        run.dead.flush().await?;
        run.report.dead_letters += run.dead.count();
        self.faults.hit("ingest.after-dead-letter").await;

        if claimed.is_empty() {
            let _ = self
                .checkpoint
                .delete_if_version(&batch_key(&run.batch), &version)
                .await?;
            return Ok(run.finish());
        }
        if !self
            .stage(&run, record, &version, claimed.len(), targets)
            .await?
        {
            tracing::warn!(batch = %run.batch, "batch was declared abandoned before it could stage; its objects go to other batches");
            return Ok(run.abandoned(&claimed));
        }
        self.faults.hit("ingest.after-stage").await;
        tracing::info!(batch = %run.batch, objects = claimed.len(), rows = run.report.rows, files = run.report.files, "batch staged");
        self.mark_staged(&mut run, &claimed).await?;
        self.faults.hit("ingest.after-mark").await;
        Ok(run.finish())
    }

    /// Route every change; those routed are returned, the others get their outcome (ignored,
    /// or dead-lettered when a route matched but cannot name a table for them). Of several
    /// changes of one object only the newest goes on.
    async fn route_all(&self, run: &mut Run<'_>) -> Result<Vec<(usize, Routed)>> {
        let mut routed = Vec::new();
        for (i, c) in run.changes.iter().enumerate() {
            let why = match self.router.route(c) {
                Ok(Some(r)) => {
                    let route = self.router.config(r.route);
                    if c.operation != Operation::Removed
                        || route.mode != Mode::Records
                        || route.on_change == OnChange::Replace
                    {
                        routed.push((i, r));
                        continue;
                    }
                    "a removed object has no records"
                }
                Ok(None) => "no route",
                Err(e) => {
                    let store = self.stores.store(c)?;
                    run.dead
                        .add(&DeadLetter {
                            time: chrono::Utc::now().to_rfc3339(),
                            batch: run.batch.clone(),
                            route: String::new(),
                            bucket: c.bucket.clone(),
                            key: c.key.clone(),
                            url: store.url(&c.key),
                            line: None,
                            reason: e.to_string(),
                            raw: String::new(),
                        })
                        .await?;
                    run.outcomes[i] = Some(Outcome::DeadLettered(e.to_string()));
                    continue;
                }
            };
            self.record_ignored(c, why).await?;
            run.outcomes[i] = Some(Outcome::Ignored(why.into()));
        }
        run.dead.flush().await?;
        // One change per object lands; the others of this batch are duplicates or stale.
        let superseded = claim::superseded_in_batch(run.changes, routed.iter().map(|(i, _)| *i));
        routed.retain(|(i, _)| match superseded.get(i) {
            Some(Decision::Duplicate) => {
                run.outcomes[*i] = Some(Outcome::Duplicate);
                false
            }
            Some(_) => {
                run.outcomes[*i] = Some(Outcome::Stale);
                false
            }
            None => true,
        });
        Ok(routed)
    }

    /// Stage: one compare-and-set makes the whole batch durable, unless another instance
    /// declared it abandoned first (`false`).
    async fn stage(
        &self,
        run: &Run<'_>,
        record: BatchRecord,
        version: &Version,
        objects: usize,
        targets: BTreeMap<TargetId, TargetFiles>,
    ) -> Result<bool> {
        Ok(
            match batch::stage(record, objects as u64, targets, now_ms()) {
                // Nothing to commit anywhere: finished right away.
                Staging::Finished(done) => {
                    self.finish_empty_batch(&run.batch, &done, version).await?;
                    true
                }
                Staging::Stage(record) => self
                    .checkpoint
                    .update_json(&batch_key(&run.batch), &record, version, None)
                    .await?
                    .is_some(),
            },
        )
    }

    /// Mark the objects staged, in one transaction (best effort: a claim by a staged batch
    /// already counts as staged).
    async fn mark_staged(&self, run: &mut Run<'_>, claimed: &[Claimed]) -> Result<()> {
        let mut values = Vec::with_capacity(claimed.len());
        for c in claimed {
            let state = ObjState::Staged {
                batch: run.batch.clone(),
            };
            let change = &run.changes[c.idx];
            let rec = super::claims::claim_record(change, state, c.prev.as_ref().map(|(r, _)| r));
            values.push((encode(&rec)?, self.record_ttl(&rec)));
            run.outcomes[c.idx].get_or_insert(Outcome::Staged);
        }
        let marks: Vec<Write<'_>> = claimed
            .iter()
            .zip(values)
            .map(|(c, (value, ttl))| Write::Update {
                key: &c.key,
                value,
                expected: &c.version,
                ttl,
            })
            .collect();
        if let Err(e) = self.checkpoint.write_many(&marks).await {
            tracing::warn!(batch = %run.batch, error = %e, "failed to mark objects staged; their claims still count");
        }
        Ok(())
    }

    async fn finish_empty_batch(
        &self,
        batch: &str,
        done: &DoneRecord,
        version: &Version,
    ) -> Result<()> {
        self.checkpoint
            .insert_json(&done_key(batch), done, self.dedupe_ttl)
            .await?;
        self.checkpoint
            .delete_if_version(&batch_key(batch), version)
            .await?;
        Ok(())
    }

    /// Refresh the batch's heartbeat if due; `false` when the batch was abandoned meanwhile.
    pub(super) async fn heartbeat(
        &self,
        record: &mut BatchRecord,
        version: &mut Version,
    ) -> Result<bool> {
        if !batch::heartbeat_due(record, now_ms(), self.config.ingest.claim_timeout_ms) {
            return Ok(true);
        }
        record.heartbeat_ms = now_ms();
        match self
            .checkpoint
            .update_json(&batch_key(&record.id), record, version, None)
            .await?
        {
            Some(v) => {
                *version = v;
                Ok(true)
            }
            None => Ok(false),
        }
    }
}

/// The outcome of an object not read because the invocation's stop time came first.
fn not_read_in_time() -> Outcome {
    Outcome::Failed(
        Error::new(
            ErrorKind::Deadline,
            "not read before the invocation's stop time; given back for a later delivery",
        )
        .with_retryable(true),
    )
}
