//! A committer, step for step as `Committer::commit` runs a pass: find the targets with work,
//! take each one's lease, finish the commit records an earlier committer left, plan, record the
//! commit, renew the lease, ask the table whether the commit is in, append with floe's history
//! check before every attempt, mark the batches, delete the record, release the lease.

use floe_core::{Error, ErrorKind, Result};
use floe_pipeline::protocol::batch::{self, Holder};
use floe_pipeline::protocol::commit::{self, CommitPolicy, Mark, Plan};
use floe_pipeline::protocol::lease::{self, Held};
use floe_pipeline::protocol::records::{
    BatchRecord, BatchState, CommitRecord, CommitState, Owner, batch_key, commit_prefix, done_key,
    lease_key,
};
use floe_pipeline::targets::TargetId;

use crate::exec::{Shared, op, read, step};
use crate::world::Value;

/// Commit passes, for ever; every few passes one forced (as `floe commit` or a final pass).
pub async fn run(w: Shared, owner: Owner) {
    loop {
        let force = w.borrow_mut().rng.chance(0.2);
        let _ = pass(&w, &owner, force).await;
        for _ in 0..4 {
            step().await;
        }
    }
}

fn batches(found: Vec<(String, Value, u64)>) -> Vec<(BatchRecord, u64)> {
    found
        .into_iter()
        .filter_map(|(_, v, version)| match v {
            Value::Batch(b) => Some((b, version)),
            _ => None,
        })
        .collect()
}

async fn pass(w: &Shared, owner: &Owner, force: bool) -> Result<()> {
    let staged = batches(read(w, "scan batches", |w| w.scan("batch/")).await?);
    let commits = read(w, "scan commits", |w| w.scan("commit/")).await?;
    clear_stopped_batches(w, owner, &staged).await;
    let targets = commit::targets_with_work(
        staged.iter().map(|(b, _)| b),
        commits.iter().map(|(k, _, _)| k.as_str()),
    );
    for target in targets {
        // Each target commits or fails on its own.
        let _ = commit_target(w, owner, &target, force).await;
    }
    Ok(())
}

/// `Committer::clear_stopped_batches`: running batches judged dead are declared abandoned.
async fn clear_stopped_batches(w: &Shared, owner: &Owner, found: &[(BatchRecord, u64)]) {
    let timeout = w.borrow().opts.claim_timeout_ms;
    for (b, v) in found {
        if b.state != BatchState::Running {
            continue;
        }
        let (now, dead) = {
            let world = w.borrow();
            (world.now, world.owner_dead(&b.owner, &owner.host))
        };
        if let Holder::Abandon(abandoned) = batch::judge(Some(b), false, now, timeout, dead) {
            let ttl = batch::abandoned_ttl(timeout).as_millis() as i64;
            let key = batch_key(&b.id);
            let _ = op(w, "abandon stopped batch", |w| {
                w.update(&key, Value::Batch(abandoned), *v, Some(ttl))
            })
            .await;
        }
    }
}

async fn commit_target(w: &Shared, owner: &Owner, target: &TargetId, force: bool) -> Result<()> {
    let Some(version) = take_lease(w, owner, target).await? else {
        return Ok(());
    };
    let mut held = version;
    let result = under_lease(w, owner, target, force, &mut held).await;
    let key = lease_key(target);
    let _ = op(w, "release lease", |w| w.delete(&key, held)).await;
    result
}

async fn take_lease(w: &Shared, owner: &Owner, target: &TargetId) -> Result<Option<u64>> {
    let key = lease_key(target);
    let lease_ms = w.borrow().opts.lease_ms;
    for _ in 0..3 {
        let mine = lease::lease(owner, w.borrow().now, lease_ms);
        if let Some(v) = op(w, "insert lease", |w| {
            w.insert(&key, Value::Lease(mine), Some(lease_ms as i64))
        })
        .await?
        {
            return Ok(Some(v));
        }
        let Some((Value::Lease(held), v)) = read(w, "get lease", |w| w.get(&key)).await? else {
            continue;
        };
        let dead = w.borrow().owner_dead(&held.owner, &owner.host);
        match lease::judge(&held, owner, dead) {
            Held::Replace => {
                op(w, "delete lease", |w| w.delete(&key, v)).await?;
            }
            Held::Busy => return Ok(None),
        }
    }
    Ok(None)
}

/// `Committer::renew_lease(true)`: extend the lease by compare-and-set, or stop.
async fn renew(w: &Shared, owner: &Owner, target: &TargetId, held: &mut u64) -> Result<()> {
    let lease_ms = w.borrow().opts.lease_ms;
    let mine = lease::lease(owner, w.borrow().now, lease_ms);
    let key = lease_key(target);
    match op(w, "renew lease", |w| {
        w.update(&key, Value::Lease(mine), *held, Some(lease_ms as i64))
    })
    .await?
    {
        Some(v) => {
            *held = v;
            Ok(())
        }
        None => Err(Error::new(ErrorKind::Conflict, "the lease ran out")),
    }
}

async fn under_lease(
    w: &Shared,
    owner: &Owner,
    target: &TargetId,
    force: bool,
    held: &mut u64,
) -> Result<()> {
    let prefix = commit_prefix(target);
    let records: Vec<(String, CommitRecord, u64)> =
        (read(w, "scan commit records", |w| w.scan(&prefix)).await?)
            .into_iter()
            .filter_map(|(k, v, version)| match v {
                Value::Commit(rec) => Some((k, rec, version)),
                _ => None,
            })
            .collect();
    // The commits already in the table first (`Committer::commit_under_lease`).
    let several = records.len() > 1;
    let (mut landed, mut open) = (Vec::new(), Vec::new());
    for (key, rec, version) in records {
        let is_in = rec.state == CommitState::Done
            || (several
                && read(w, "load table", |w| w.load(target))
                    .await?
                    .has(&rec.id));
        if is_in {
            landed.push((key, rec, version));
        } else {
            open.push((key, rec, version));
        }
    }
    for (key, rec, version) in landed.into_iter().chain(open) {
        finish(w, owner, target, &key, rec, version, held).await?;
    }
    let staged = batches(read(w, "scan batches", |w| w.scan("batch/")).await?);
    let (now, policy) = {
        let world = w.borrow();
        let o = &world.opts;
        let policy = CommitPolicy {
            interval_ms: o.commit_interval_ms,
            max_files: o.max_files,
            max_bytes: u64::MAX,
        };
        (world.now, policy)
    };
    let chosen = match commit::plan(staged.iter().map(|(b, _)| b), target, now, &policy, force) {
        Plan::Commit(chosen) => chosen,
        Plan::Nothing | Plan::Wait => return Ok(()),
    };
    let id = format!("c{:08}", w.borrow_mut().id());
    let rec = commit::begin(&id, target, chosen, now);
    let key = format!("{prefix}{id}");
    let version = op(w, "record commit", |w| {
        w.insert(&key, Value::Commit(rec.clone()), None)
    })
    .await?
    .ok_or_else(|| Error::unexpected("commit id taken"))?;
    finish(w, owner, target, &key, rec, version, held).await
}

/// `Committer::finish_commit`.
async fn finish(
    w: &Shared,
    owner: &Owner,
    target: &TargetId,
    key: &str,
    mut rec: CommitRecord,
    mut version: u64,
    held: &mut u64,
) -> Result<()> {
    if w.borrow().opts.trace {
        eprintln!(
            "         {} finishes {} on {target}: {:?} {:?}",
            owner.pid, rec.id, rec.state, rec.batches
        );
    }
    renew(w, owner, target, held).await?;
    let mut chosen = Vec::new();
    for id in &rec.batches {
        if let Some((Value::Batch(b), v)) = read(w, "get batch", |w| w.get(&batch_key(id))).await? {
            if commit::committed_elsewhere(&b, target, &rec.id) {
                continue;
            }
            chosen.push((b, v));
        }
    }
    if rec.state == CommitState::Pending {
        let files: Vec<_> = chosen
            .iter()
            .flat_map(|(b, _)| {
                b.targets
                    .get(target)
                    .map(|t| t.files.clone())
                    .unwrap_or_default()
            })
            .collect();
        // `Target::is_in`, then the append with its own check before every attempt.
        let snapshot = append_exactly_once(w, target, &rec.id, &files).await?;
        rec = commit::landed(rec, snapshot);
        version = op(w, "commit done", |w| {
            w.update(key, Value::Commit(rec.clone()), version, None)
        })
        .await?
        .ok_or_else(|| Error::new(ErrorKind::Conflict, "commit record changed"))?;
    }
    let dedupe = w.borrow().opts.dedupe_ttl_ms;
    for (mut b, mut v) in chosen {
        loop {
            let id = b.id.clone();
            let now = w.borrow().now;
            let written = match commit::mark(b, target, &rec.id, now) {
                Mark::Finish(done) => {
                    op(w, "insert done", |w| {
                        w.insert(&done_key(&id), Value::Done(done), Some(dedupe))
                    })
                    .await?;
                    op(w, "delete batch", |w| w.delete(&batch_key(&id), v)).await?
                }
                Mark::Update(marked) => op(w, "mark batch", |w| {
                    w.update(&batch_key(&id), Value::Batch(marked), v, None)
                })
                .await?
                .is_some(),
            };
            if written {
                break;
            }
            match read(w, "get batch", |w| w.get(&batch_key(&id))).await? {
                Some((Value::Batch(fresh), fv)) => {
                    b = fresh;
                    v = fv;
                }
                _ => break,
            }
        }
    }
    op(w, "delete commit record", |w| w.delete(key, version)).await?;
    Ok(())
}

/// `floe_iceberg::append_exactly_once`: load, look for the commit id, attempt on the table
/// that was loaded; a refused or unanswered attempt goes back to the load.
async fn append_exactly_once(
    w: &Shared,
    target: &TargetId,
    commit_id: &str,
    files: &[floe_iceberg::StagedFile],
) -> Result<Option<i64>> {
    let mut last = None;
    for _ in 0..6 {
        let table = read(w, "load table", |w| w.load(target)).await?;
        if w.borrow().opts.trace {
            eprintln!(
                "         {target} at {:?}: {commit_id} in: {}",
                table.current,
                table.has(commit_id)
            );
        }
        if table.has(commit_id) {
            return Ok(table.current);
        }
        // Another writer may move the table between the load and the attempt.
        {
            let mut world = w.borrow_mut();
            let foreign = world.opts.foreign;
            if !world.quiet && world.rng.chance(foreign) {
                world.foreign_commit(target);
            }
        }
        match op(w, "append", |w| w.commit(target, &table, commit_id, files)).await {
            Ok(Ok(Some(snapshot))) => return Ok(Some(snapshot)),
            Ok(Ok(None)) => return Ok(None),
            Ok(Err(conflict)) => last = Some(Error::new(ErrorKind::Conflict, conflict)),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| Error::unexpected("no attempt")))
}
