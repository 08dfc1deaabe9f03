//! An ingest instance, step for step as `Pipeline::ingest` and the queue pull run it: receive,
//! record a removal its route makes nothing of as ignored, open the batch, claim each object
//! (judging the batch that holds a claim), read at the event's version, write a data file per
//! table, stage with one compare-and-set (for a replacing table, with each object version and
//! where its rows are, a removal with none), mark the objects, and acknowledge each message by
//! the protocol's verdict. Every decision is the kernel's (`floe_pipeline::protocol`); this
//! file only does the calls in the real order.

use std::collections::BTreeMap;

use floe_core::{Error, ErrorKind, ObjectChange, Operation, Result};
use floe_iceberg::{SourceRows, StagedFile};
use floe_pipeline::protocol::ack::{self, Ack, Outcome, give_back};
use floe_pipeline::protocol::batch::{self, Holder, Staging};
use floe_pipeline::protocol::claim::{
    self, Decision, decide, may_record_ignored, normalize_etag, obj_record,
};
use floe_pipeline::protocol::records::{
    ObjRecord, ObjState, ObjectRows, Owner, TargetFiles, batch_key, done_key, obj_key,
};
use floe_pipeline::targets::TargetId;

use crate::exec::{Shared, op, read, step};
use crate::world::{Content, Message, Value};

/// Messages one receive takes.
const BATCH: usize = 4;

/// Pull messages and land them, for ever (until the scheduler drops this instance).
pub async fn run(w: Shared, owner: Owner) {
    loop {
        match op(&w, "receive", |w| w.receive(BATCH)).await {
            Ok(received) if !received.is_empty() => {
                if w.borrow().opts.trace {
                    let ids: Vec<u64> = received.iter().map(|(m, _)| m.id).collect();
                    eprintln!("         {} received {ids:?}", owner.pid);
                }
                land(&w, &owner, received).await
            }
            _ => step().await,
        }
    }
}

fn failure_key(id: u64) -> String {
    format!("msg/{id}")
}

/// One receive: set aside the messages past `max-deliveries` (deliveries that only waited for
/// another batch's claim do not count), land the rest, acknowledge by the verdict.
async fn land(w: &Shared, owner: &Owner, received: Vec<(Message, u64)>) {
    let max = w.borrow().opts.max_deliveries;
    let mut work = Vec::new();
    for (m, receipt) in received {
        if m.receives > max {
            let Ok(found) = read(w, "get failure", |w| w.get(&failure_key(m.id))).await else {
                return;
            };
            let busy = match found {
                Some((Value::Failure { busy }, _)) => busy,
                _ => 0,
            };
            if m.receives.saturating_sub(busy) > max {
                let _ = op(w, "dead-letter", |w| w.delete_message(m.id, receipt, true)).await;
                continue;
            }
        }
        work.push((m, receipt));
    }
    if work.is_empty() {
        return;
    }
    let changes: Vec<ObjectChange> = work.iter().map(|(m, _)| m.change.clone()).collect();
    let receipts: Vec<(u64, u64)> = work.iter().map(|(m, r)| (m.id, *r)).collect();
    // An error ends the batch: every message stays for redelivery.
    let Ok(outcomes) = ingest(w, owner, &changes, &receipts).await else {
        return;
    };
    for ((m, receipt), outcome) in work.into_iter().zip(outcomes) {
        if w.borrow().opts.trace {
            eprintln!(
                "         {} message {} {} {:?}: {outcome:?}",
                owner.pid, m.id, m.change.key, m.change.etag
            );
        }
        match ack::ack([Some(&outcome)]) {
            Ack::Done => {
                let _ = op(w, "delete message", |w| {
                    w.delete_message(m.id, receipt, false)
                })
                .await;
            }
            Ack::Leave { failed, busy, .. } => {
                if (failed || busy) && record_delivery(w, m.id, busy).await.is_err() {
                    continue;
                }
                if busy {
                    let hide = w.borrow().opts.claim_timeout_ms as i64 + 1_000;
                    let _ = op(w, "hide", |w| w.hide(m.id, receipt, hide)).await;
                }
            }
        }
    }
}

async fn record_delivery(w: &Shared, id: u64, busy: bool) -> Result<()> {
    let key = failure_key(id);
    let found = read(w, "get failure", |w| w.get(&key)).await?;
    let earlier = match &found {
        Some((Value::Failure { busy }, _)) => *busy,
        _ => 0,
    };
    let value = Value::Failure {
        busy: earlier + u32::from(busy),
    };
    match found {
        None => op(w, "insert failure", |w| w.insert(&key, value, None)).await?,
        Some((_, v)) => op(w, "update failure", |w| w.update(&key, value, v, None)).await?,
    };
    Ok(())
}

/// The table a key lands in (the routes: its first path segment).
pub fn target_of(key: &str) -> TargetId {
    TargetId::iceberg("sim", key.split('/').next().unwrap_or_default())
}

/// The table name of a target.
pub fn target_table(target: &TargetId) -> &str {
    match target {
        TargetId::Iceberg { table, .. } => table,
        TargetId::MaxCompute { .. } => unreachable!("the simulation has Iceberg tables only"),
    }
}

/// `write::object_rows`: the record of an object version and its rows.
fn object_rows(change: &ObjectChange, rows: Vec<SourceRows>) -> ObjectRows {
    ObjectRows {
        bucket: change.bucket.clone(),
        key: change.key.clone(),
        operation: change.operation,
        etag: change.etag.clone(),
        version_id: change.version_id.clone(),
        sequencer: change.sequencer.clone(),
        event_time_ms: change.event_time.map(|t| t.timestamp_millis()),
        appended: false,
        rows,
    }
}

/// `Pipeline::record_ignored`: remember a change floe deliberately does not land.
async fn record_ignored(w: &Shared, c: &ObjectChange) -> Result<()> {
    let key = obj_key(&c.bucket, &c.key);
    let dedupe = w.borrow().opts.dedupe_ttl_ms;
    let state = ObjState::Ignored {
        reason: "a removed object has no records".into(),
    };
    for _ in 0..5 {
        let rec = obj_record(c, state.clone(), w.borrow().now);
        let written = match read(w, "get obj", |w| w.get(&key)).await? {
            None => {
                op(w, "record ignored", |w| {
                    w.insert(&key, Value::Obj(rec), Some(dedupe))
                })
                .await?
            }
            Some((Value::Obj(old), v)) => {
                if !may_record_ignored(&old, c) {
                    return Ok(());
                }
                op(w, "record ignored", |w| {
                    w.update(&key, Value::Obj(rec), v, Some(dedupe))
                })
                .await?
            }
            Some(_) => return Err(Error::new(ErrorKind::Unexpected, "not an object record")),
        };
        if written.is_some() {
            return Ok(());
        }
    }
    Ok(())
}

/// What reading an object at its event's version finds.
enum Read {
    /// (version number, rows).
    Rows(u64, u64),
    /// Overwritten since.
    Superseded,
    /// Removed since.
    Gone,
}

struct Claimed {
    idx: usize,
    key: String,
    version: u64,
    prev: Option<(ObjRecord, u64)>,
}

/// `Pipeline::ingest`: the outcome of every change, or an error that ends the batch.
async fn ingest(
    w: &Shared,
    owner: &Owner,
    changes: &[ObjectChange],
    messages: &[(u64, u64)],
) -> Result<Vec<Outcome>> {
    let mut outcomes: Vec<Option<Outcome>> = changes.iter().map(|_| None).collect();
    // `route_all`: a removal from a table that appends has no records.
    let mut routed = Vec::new();
    for (i, c) in changes.iter().enumerate() {
        if c.operation == Operation::Removed
            && !crate::replaces(&w.borrow().opts, &target_of(&c.key))
        {
            record_ignored(w, c).await?;
            outcomes[i] = Some(Outcome::Ignored("a removed object has no records".into()));
        } else {
            routed.push(i);
        }
    }
    let superseded = claim::superseded_in_batch(changes, routed.iter().copied());
    for (i, d) in &superseded {
        outcomes[*i] = Some(match d {
            Decision::Duplicate => Outcome::Duplicate,
            _ => Outcome::Stale,
        });
    }
    if outcomes.iter().all(Option::is_some) {
        return Ok(finish(outcomes));
    }
    let batch_id = format!("b{:08}", w.borrow_mut().id());
    let now = w.borrow().now;
    let mut record = batch::open(&batch_id, owner, now);
    let bkey = batch_key(&batch_id);
    let mut version = op(w, "open batch", |w| {
        w.insert(&bkey, Value::Batch(record.clone()), None)
    })
    .await?
    .ok_or_else(|| Error::unexpected("batch id taken"))?;

    let mut claimed = Vec::new();
    for (idx, c) in changes.iter().enumerate() {
        if outcomes[idx].is_some() {
            continue;
        }
        match claim_one(w, owner, c, &batch_id).await {
            Ok(Ok((key, v, prev))) => claimed.push(Claimed {
                idx,
                key,
                version: v,
                prev,
            }),
            Ok(Err(o)) => outcomes[idx] = Some(o),
            // The claim may have landed with its answer lost: the batch cannot go on without
            // the object (see `claim_all`).
            Err(e) if w.borrow().opts.claim_error_continues => {
                outcomes[idx] = Some(Outcome::Failed(e))
            }
            Err(e) => return Err(e),
        }
    }

    // Read each object at its event's version; an object given back leaves the batch.
    // Per table: (change, version number, rows) of each object read.
    let mut contents: BTreeMap<TargetId, Vec<(usize, u64, u64)>> = BTreeMap::new();
    let mut removals = Vec::new();
    let mut kept = Vec::new();
    for c in claimed {
        keep_alive(w, &mut record, &mut version, messages).await?;
        if record.state != floe_pipeline::protocol::records::BatchState::Running {
            return Ok(abandoned(outcomes, &kept, &[c]));
        }
        let change = &changes[c.idx];
        if change.operation == Operation::Removed {
            // Nothing to read: the commit deletes the rows the table holds of it.
            removals.push(c.idx);
            kept.push(c);
            continue;
        }
        let got = read(w, "get object", |w| {
            let versions = &w.bucket[&change.key];
            let n = versions.len();
            let latest = &versions[n - 1];
            let etag = change.etag.as_deref().map(normalize_etag);
            if latest.removed {
                Read::Gone
            } else if Some(normalize_etag(&latest.etag)) == etag {
                Read::Rows(n as u64, latest.rows)
            } else {
                Read::Superseded
            }
        })
        .await;
        let outcome = match got {
            Ok(Read::Rows(n, rows)) => {
                (contents.entry(target_of(&change.key)).or_default()).push((c.idx, n, rows));
                kept.push(c);
                continue;
            }
            // Removed since the event: unreadable, set aside under the route's `on-error`
            // (dead-lettered); the object stays the batch's, with no rows.
            Ok(Read::Gone) => {
                kept.push(c);
                continue;
            }
            // Overwritten since the event: this version is gone, the newer one has its event.
            Ok(Read::Superseded) => Outcome::Stale,
            Err(e) if give_back(&e) => Outcome::Failed(e),
            Err(e) => return Err(e),
        };
        release(w, &c).await?;
        outcomes[c.idx] = Some(outcome);
    }
    let claimed = kept;

    // Write a data file per table; a replacing table's batch says which rows are whose.
    let mut targets = BTreeMap::new();
    for (target, rows) in contents {
        let table = target_table(&target);
        let path = format!("sim://{table}/data/{batch_id}.parquet");
        let total: u64 = rows.iter().map(|r| r.2).sum();
        let content = Content::Data(
            (rows.iter())
                .flat_map(|&(i, n, rows)| (0..rows).map(move |_| (changes[i].key.clone(), n)))
                .collect(),
        );
        op(w, "write data file", |w| {
            w.write_file(&target, &path, content)
        })
        .await?;
        let mut objects = Vec::new();
        if crate::replaces(&w.borrow().opts, &target) {
            let mut start = 0;
            for &(i, _, rows) in &rows {
                let runs = vec![SourceRows {
                    file: path.clone(),
                    start,
                    rows,
                }];
                start += rows;
                objects.push(object_rows(&changes[i], runs));
            }
        }
        let file = StagedFile {
            data_file: "{}".into(),
            spec_id: 0,
            schema_id: 0,
            rows: total,
            deletes: false,
            bytes: total * 100,
            path,
        };
        let files = TargetFiles {
            table: table.to_owned(),
            files: vec![file],
            rows: total,
            bytes: total * 100,
            maxcompute: None,
            objects,
        };
        targets.insert(target, files);
    }
    // `close_slots`: removals from a replacing table, with no rows.
    for i in removals {
        let target = target_of(&changes[i].key);
        let entry = targets
            .entry(target.clone())
            .or_insert_with(|| TargetFiles {
                table: target_table(&target).to_owned(),
                files: Vec::new(),
                rows: 0,
                bytes: 0,
                maxcompute: None,
                objects: Vec::new(),
            });
        entry.objects.push(object_rows(&changes[i], Vec::new()));
    }
    if claimed.is_empty() {
        let _ = op(w, "drop empty batch", |w| w.delete(&bkey, version)).await?;
        return Ok(finish(outcomes));
    }

    // Stage: one compare-and-set makes the batch durable, unless it was declared abandoned.
    keep_alive(w, &mut record, &mut version, messages).await?;
    let now = w.borrow().now;
    let dedupe = w.borrow().opts.dedupe_ttl_ms;
    match batch::stage(record, claimed.len() as u64, targets, now) {
        Staging::Finished(done) => {
            op(w, "insert done", |w| {
                w.insert(&done_key(&batch_id), Value::Done(done), Some(dedupe))
            })
            .await?;
            op(w, "delete batch", |w| w.delete(&bkey, version)).await?;
        }
        Staging::Stage(staged) => {
            let ok = op(w, "stage", |w| {
                w.update(&bkey, Value::Batch(staged), version, None)
            })
            .await?;
            if ok.is_none() {
                return Ok(abandoned(outcomes, &claimed, &[]));
            }
        }
    }
    // Mark the objects staged (best effort: a claim by a staged batch counts as staged).
    for c in &claimed {
        let now = w.borrow().now;
        let rec = obj_record(
            &changes[c.idx],
            ObjState::Staged {
                batch: batch_id.clone(),
            },
            now,
        );
        let _ = op(w, "mark staged", |w| {
            w.update(&c.key, Value::Obj(rec), c.version, Some(dedupe))
        })
        .await;
        outcomes[c.idx].get_or_insert(Outcome::Staged);
    }
    Ok(finish(outcomes))
}

fn finish(outcomes: Vec<Option<Outcome>>) -> Vec<Outcome> {
    outcomes
        .into_iter()
        .map(|o| o.unwrap_or_else(|| Outcome::Failed(Error::unexpected("no outcome"))))
        .collect()
}

/// The batch was declared abandoned: its objects are another batch's now (busy).
fn abandoned(mut outcomes: Vec<Option<Outcome>>, a: &[Claimed], b: &[Claimed]) -> Vec<Outcome> {
    for c in a.iter().chain(b) {
        outcomes[c.idx] = Some(Outcome::Busy);
    }
    finish(outcomes)
}

/// The batch's heartbeat when due, and the messages' visibility (the real keeper runs beside
/// the batch). A heartbeat refused means another instance declared the batch abandoned.
async fn keep_alive(
    w: &Shared,
    record: &mut floe_pipeline::protocol::records::BatchRecord,
    version: &mut u64,
    messages: &[(u64, u64)],
) -> Result<()> {
    let vis = w.borrow().opts.visibility_ms;
    for &(id, receipt) in messages {
        let _ = op(w, "keep visible", |w| w.hide(id, receipt, vis)).await;
    }
    let (now, timeout) = (w.borrow().now, w.borrow().opts.claim_timeout_ms);
    if !batch::heartbeat_due(record, now, timeout) {
        return Ok(());
    }
    let mut fresh = record.clone();
    fresh.heartbeat_ms = now;
    let key = batch_key(&record.id);
    match op(w, "heartbeat", |w| {
        w.update(&key, Value::Batch(fresh.clone()), *version, None)
    })
    .await?
    {
        Some(v) => {
            *record = fresh;
            *version = v;
        }
        None => record.state = floe_pipeline::protocol::records::BatchState::Abandoned,
    }
    Ok(())
}

/// Give an object back: restore what its record held before the claim.
async fn release(w: &Shared, c: &Claimed) -> Result<()> {
    let dedupe = w.borrow().opts.dedupe_ttl_ms;
    match &c.prev {
        None => {
            op(w, "release", |w| w.delete(&c.key, c.version)).await?;
        }
        Some((prev, _)) => {
            op(w, "release", |w| {
                w.update(&c.key, Value::Obj(prev.clone()), c.version, Some(dedupe))
            })
            .await?;
        }
    }
    Ok(())
}

type ClaimResult = std::result::Result<(String, u64, Option<(ObjRecord, u64)>), Outcome>;

/// `Pipeline::claim`: take one object for the batch, or say why not.
async fn claim_one(
    w: &Shared,
    owner: &Owner,
    c: &ObjectChange,
    batch: &str,
) -> Result<ClaimResult> {
    let key = obj_key(&c.bucket, &c.key);
    let dedupe = w.borrow().opts.dedupe_ttl_ms;
    for _ in 0..10 {
        let existing = match read(w, "get obj", |w| w.get(&key)).await? {
            Some((Value::Obj(r), v)) => Some((r, v)),
            Some(_) => return Err(Error::new(ErrorKind::Unexpected, "not an object record")),
            None => None,
        };
        if w.borrow().opts.trace {
            eprintln!(
                "         {} {batch} claims {} {:?}: found {:?}",
                owner.pid,
                c.key,
                c.etag,
                existing.as_ref().map(|(r, _)| (&r.etag, &r.state))
            );
        }
        let decision = match decide(existing.as_ref().map(|(r, _)| r), c, batch) {
            Decision::ClaimedBy(other) => match judge_batch(w, owner, &other).await? {
                Judged::Live => return Ok(Err(Outcome::Busy)),
                Judged::Staged => {
                    if let Some((rec, v)) = &existing {
                        let mut fixed = rec.clone();
                        fixed.state = ObjState::Staged {
                            batch: other.clone(),
                        };
                        let _ = op(w, "fix obj", |w| {
                            w.update(&key, Value::Obj(fixed), *v, Some(dedupe))
                        })
                        .await;
                    }
                    return Ok(Err(Outcome::Duplicate));
                }
                Judged::Gone => Decision::Claim,
            },
            d => d,
        };
        match decision {
            Decision::Duplicate => return Ok(Err(Outcome::Duplicate)),
            Decision::Stale => return Ok(Err(Outcome::Stale)),
            Decision::ClaimedBy(_) => return Ok(Err(Outcome::Busy)),
            Decision::Claim => {
                let now = w.borrow().now;
                let mine = obj_record(
                    c,
                    ObjState::Claimed {
                        batch: batch.to_owned(),
                    },
                    now,
                );
                let written = match &existing {
                    None => {
                        op(w, "claim", |w| {
                            w.insert(&key, Value::Obj(mine), Some(dedupe))
                        })
                        .await?
                    }
                    Some((_, v)) => {
                        op(w, "claim", |w| {
                            w.update(&key, Value::Obj(mine), *v, Some(dedupe))
                        })
                        .await?
                    }
                };
                if let Some(v) = written {
                    return Ok(Ok((key, v, existing)));
                }
            }
        }
    }
    Ok(Err(Outcome::Busy))
}

enum Judged {
    Live,
    Staged,
    Gone,
}

/// `Pipeline::judge_batch`: decide about the batch holding a claim we want.
async fn judge_batch(w: &Shared, owner: &Owner, other: &str) -> Result<Judged> {
    let timeout = w.borrow().opts.claim_timeout_ms;
    for _ in 0..5 {
        let found = match read(w, "get batch", |w| w.get(&batch_key(other))).await? {
            Some((Value::Batch(b), v)) => Some((b, v)),
            _ => None,
        };
        let done = match &found {
            None => read(w, "get done", |w| w.get(&done_key(other)))
                .await?
                .is_some(),
            Some(_) => false,
        };
        let (now, dead) = {
            let world = w.borrow();
            let dead = found
                .as_ref()
                .is_some_and(|(b, _)| world.owner_dead(&b.owner, &owner.host));
            (world.now, dead)
        };
        match batch::judge(found.as_ref().map(|(b, _)| b), done, now, timeout, dead) {
            Holder::Live => return Ok(Judged::Live),
            Holder::Staged => return Ok(Judged::Staged),
            Holder::Gone => return Ok(Judged::Gone),
            Holder::Abandon(abandoned) => {
                let Some((_, v)) = &found else { continue };
                let ttl = batch::abandoned_ttl(timeout).as_millis() as i64;
                let key = batch_key(other);
                if op(w, "abandon batch", |w| {
                    w.update(&key, Value::Batch(abandoned), *v, Some(ttl))
                })
                .await?
                .is_some()
                {
                    w.borrow_mut().stats.takeovers += 1;
                    return Ok(Judged::Gone);
                }
            }
        }
    }
    Ok(Judged::Live)
}
