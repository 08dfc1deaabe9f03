//! A committer, step for step as `Committer::commit` runs a pass: find the targets with work,
//! take each one's lease, finish the commit records an earlier committer left, plan, record the
//! commit, renew the lease, ask the table whether the commit is in, and if not commit it: for a
//! table that replaces changed objects' rows, first finish a compaction an earlier holder of
//! the lease left (and load the table again after one), read what the table holds of the
//! commit's objects (`rows/` records), work out the rows they replace ([`replace::resolve`])
//! and write their position deletes; then append data and delete files in one snapshot with
//! floe's history check before every attempt, never on a table that no longer holds the files
//! the deletes name. Then mark the commit done, record what the table holds now
//! ([`replace::settle`]), mark the batches, delete the record, release the lease.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use floe_core::{Error, ErrorKind, Operation, Result};
use floe_pipeline::protocol::batch::{self, Holder};
use floe_pipeline::protocol::commit::{self, CommitPolicy, Mark, Plan};
use floe_pipeline::protocol::lease::{self, Held};
use floe_pipeline::protocol::records::{
    BatchRecord, BatchState, CommitRecord, CommitState, ObjectRows, Owner, batch_key,
    commit_prefix, done_key, lease_key, rows_key,
};
use floe_pipeline::protocol::replace::{self, ObjKey};
use floe_pipeline::targets::TargetId;

use crate::exec::{Shared, op, read, step};
use crate::ingest::target_table;
use crate::world::{Add, Content, TableView, Value, World};

/// What the table holds of some objects, and each record's version.
type HeldRows = (HashMap<ObjKey, ObjectRows>, HashMap<ObjKey, u64>);

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

/// `Committer::take_lease`: the lease's version, or `None` when another live committer has it.
pub(crate) async fn take_lease(
    w: &Shared,
    owner: &Owner,
    target: &TargetId,
) -> Result<Option<u64>> {
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
pub(crate) async fn renew(
    w: &Shared,
    owner: &Owner,
    target: &TargetId,
    held: &mut u64,
) -> Result<()> {
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
    // What `replaced_rows` read of the `rows/` records, for `settle` of the same commit.
    let mut known = None;
    if rec.state == CommitState::Pending {
        // `Target::is_in`: the table loaded once, kept for the commit.
        let table = read(w, "load table", |w| w.load(target)).await?;
        let snapshot = if table.has(&rec.id) {
            table.current_id()
        } else {
            let batches: Vec<&BatchRecord> = chosen.iter().map(|(b, _)| b).collect();
            commit_to(w, target, &rec, &batches, &table, &mut known).await?
        };
        rec = commit::landed(rec, snapshot);
        version = op(w, "commit done", |w| {
            w.update(key, Value::Commit(rec.clone()), version, None)
        })
        .await?
        .ok_or_else(|| Error::new(ErrorKind::Conflict, "commit record changed"))?;
    }
    {
        let batches: Vec<&BatchRecord> = chosen.iter().map(|(b, _)| b).collect();
        settle(w, target, &rec, &batches, known).await?;
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

/// `IcebergTarget::commit`: the position deletes of the objects the batches replace, then the
/// batches' data files and those deletes appended in one snapshot. The snapshot, or `None`
/// when there was nothing to append.
async fn commit_to(
    w: &Shared,
    target: &TargetId,
    rec: &CommitRecord,
    batches: &[&BatchRecord],
    table: &TableView,
    known: &mut Option<(String, HeldRows)>,
) -> Result<Option<i64>> {
    let replaces = !replace::incoming(batches, target).is_empty();
    let reloaded;
    let mut table = table;
    if replaces
        && crate::maintain::finish_maintenance(w, target)
            .await?
            .is_some()
    {
        // A compaction an earlier holder of the lease left moves the rows this commit replaces:
        // finished first, and the table loaded again (it may have landed since).
        reloaded = read(w, "load table", |w| w.load(target)).await?;
        table = &reloaded;
    }
    let replaced = replaced_rows(w, target, rec, batches, table, known).await?;
    // Position deletes were worked out on this table (`AppendRequest::deletes_on`).
    let deletes_on = (!replaced.is_empty()).then(|| table.current_id()).flatten();
    // Each batch's data files, then its delete files (`IcebergTarget::request`).
    let mut files = Vec::new();
    for b in batches {
        let data = (b.targets.get(target).into_iter())
            .flat_map(|t| &t.files)
            .map(|f| (&f.path, false));
        let deletes = replaced.get(&b.id).into_iter().flatten().map(|p| (p, true));
        files.extend(data.chain(deletes).map(|(path, deletes)| Add {
            path: path.clone(),
            batch: b.id.clone(),
            deletes,
        }));
    }
    if files.is_empty() {
        return Ok(None);
    }
    append_exactly_once(w, target, &rec.id, &files, deletes_on).await
}

/// `IcebergTarget::replaced_rows`: for each batch, the position delete files it adds (written
/// here): the rows of earlier versions of its objects, and of versions that never land.
async fn replaced_rows(
    w: &Shared,
    target: &TargetId,
    rec: &CommitRecord,
    batches: &[&BatchRecord],
    table: &TableView,
    known: &mut Option<(String, HeldRows)>,
) -> Result<BTreeMap<String, Vec<String>>> {
    let incoming = replace::incoming(batches, target);
    if incoming.is_empty() {
        return Ok(BTreeMap::new());
    }
    let (held, versions) = held(w, target, &incoming).await?;
    let resolution = replace::resolve(&held, &incoming);
    *known = Some((rec.id.clone(), (held, versions)));
    // The data files they delete from: this commit's own, else the table's.
    let own: BTreeSet<&str> = (batches.iter())
        .flat_map(|b| b.targets.get(target).into_iter().flat_map(|t| &t.files))
        .map(|f| f.path.as_str())
        .collect();
    let elsewhere: BTreeSet<String> = (resolution.deletes.keys())
        .map(|(_, f)| f.clone())
        .filter(|f| !own.contains(f.as_str()))
        .collect();
    let live: BTreeSet<String> = read(w, "read manifests", |_| {
        elsewhere
            .iter()
            .filter(|f| table.live(f))
            .cloned()
            .collect()
    })
    .await?;
    let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for ((batch, file), positions) in resolution.deletes {
        if !own.contains(file.as_str()) && !live.contains(&file) {
            // Not in the table any more (rewritten by a maintenance floe did not make): its
            // rows cannot be found by position.
            if w.borrow().opts.trace {
                eprintln!(
                    "         {} rows of {file} not deleted: not in the table",
                    positions.len()
                );
            }
            continue;
        }
        let path = format!(
            "sim://{}/data/deletes-{:08}.parquet",
            target_table(target),
            w.borrow_mut().id()
        );
        let n = positions.len() as u64;
        let content = Content::Deletes {
            file,
            positions: positions.into_iter().collect(),
        };
        op(w, "write position deletes", |w| {
            w.write_file(target, &path, content);
            w.stats.rows_deleted += n;
        })
        .await?;
        out.entry(batches[batch].id.clone()).or_default().push(path);
    }
    Ok(out)
}

/// `IcebergTarget::held`: what the table holds of the objects `incoming` names (one `get_many`).
async fn held(
    w: &Shared,
    target: &TargetId,
    incoming: &[(usize, &ObjectRows)],
) -> Result<HeldRows> {
    let keys: BTreeSet<ObjKey> = (incoming.iter())
        .map(|(_, o)| (o.bucket.clone(), o.key.clone()))
        .collect();
    read(w, "get rows records", |w| {
        let (mut held, mut versions) = (HashMap::new(), HashMap::new());
        for k in keys {
            if let Some((Value::Rows(rows), v)) = w.get(&rows_key(target, &k.0, &k.1)) {
                held.insert(k.clone(), rows);
                versions.insert(k, v);
            }
        }
        (held, versions)
    })
    .await
}

/// `IcebergTarget::settle`: record what the table holds of the commit's objects now, each
/// record by compare-and-set (a write whose answer was lost is read again).
async fn settle(
    w: &Shared,
    target: &TargetId,
    rec: &CommitRecord,
    batches: &[&BatchRecord],
    mut known: Option<(String, HeldRows)>,
) -> Result<()> {
    let incoming = replace::incoming(batches, target);
    if incoming.is_empty() {
        return Ok(());
    }
    let dedupe = w.borrow().opts.dedupe_ttl_ms;
    for _ in 0..5 {
        let (held, versions) = match known.take() {
            Some((id, held)) if id == rec.id => held,
            _ => held(w, target, &incoming).await?,
        };
        let changed = replace::settle(&held, &incoming);
        if changed.is_empty() {
            return Ok(());
        }
        // `write_many`: each write its own compare-and-set.
        let mut all = true;
        for ((b, k), rows) in changed {
            let name = rows_key(target, &b, &k);
            let ttl = (rows.operation == Operation::Removed).then_some(dedupe);
            let value = Value::Rows(rows);
            let written = match versions.get(&(b, k)) {
                Some(&expected) => {
                    op(w, "update rows record", |w| {
                        w.update(&name, value, expected, ttl)
                    })
                    .await?
                }
                None => op(w, "insert rows record", |w| w.insert(&name, value, ttl)).await?,
            };
            all &= written.is_some();
        }
        if all {
            return Ok(());
        }
    }
    Err(Error::new(
        ErrorKind::Conflict,
        format!(
            "commit {}: the records of its replaced objects kept changing",
            rec.id
        ),
    ))
}

/// `floe_iceberg::append_exactly_once`: load, look for the commit id, attempt on the table
/// that was loaded; a refused or unanswered attempt goes back to the load. Position deletes
/// worked out on the table at `deletes_on` are not applied to a table that moved since and no
/// longer holds the data files they name: the commit fails, to be worked out again.
async fn append_exactly_once(
    w: &Shared,
    target: &TargetId,
    commit_id: &str,
    files: &[Add],
    deletes_on: Option<i64>,
) -> Result<Option<i64>> {
    let mut last = None;
    for _ in 0..6 {
        let table = read(w, "load table", |w| w.load(target)).await?;
        if w.borrow().opts.trace {
            eprintln!(
                "         {target} at {:?}: {commit_id} in: {}",
                table.current_id(),
                table.has(commit_id)
            );
        }
        if table.has(commit_id) {
            return Ok(table.current_id());
        }
        if deletes_on.is_some_and(|base| table.current_id() != Some(base))
            && !read(w, "read manifests", |w| {
                deleted_files_live(w, &table, files)
            })
            .await?
        {
            return Err(Error::new(
                ErrorKind::Conflict,
                "a data file the position deletes name was rewritten since",
            ));
        }
        // Another writer may move the table between the load and the attempt.
        crate::maintain::maybe_foreign(w, target);
        match op(w, "append", |w| w.commit(target, &table, commit_id, files)).await {
            Ok(Ok(Some(snapshot))) => return Ok(Some(snapshot)),
            Ok(Ok(None)) => return Ok(None),
            Ok(Err(conflict)) => last = Some(Error::new(ErrorKind::Conflict, conflict)),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| Error::unexpected("no attempt")))
}

/// `floe_iceberg::commit::deleted_files_live`: whether every data file the position deletes
/// among `files` name, other than the commit's own, is live in `table`.
fn deleted_files_live(w: &World, table: &TableView, files: &[Add]) -> bool {
    let own: BTreeSet<&str> = (files.iter())
        .filter(|f| !f.deletes)
        .map(|f| f.path.as_str())
        .collect();
    (files.iter().filter(|f| f.deletes)).all(|f| match w.files.get(&f.path).map(|s| &s.content) {
        Some(Content::Deletes { file, .. }) => own.contains(file.as_str()) || table.live(file),
        _ => true,
    })
}
