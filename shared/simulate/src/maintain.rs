//! Table maintenance, step for step as `floe maintain` runs it on a table
//! (`Committer::maintain_table`): take the table's commit lease (the committers' own), finish a
//! compaction an earlier holder left (superseding one that may still land), leave the table
//! alone while a commit is in flight, then compact, expire snapshots and remove orphan files,
//! renewing the lease before each table commit and before deleting anything.
//!
//! A compaction is `floe_iceberg::maintain::compact` at the grain the simulation keeps: every
//! data file of the table read in path order with its position deletes applied, the survivors
//! written into new files, and where each old file's rows went ([`Moved`]) recorded under
//! `maint/<target>` before the `replace` snapshot is committed; once that snapshot is in, the
//! `rows/` records pointing at the old files are moved ([`replace::moved`]) and the record
//! dropped, and while it may still land the record stays ([`replace::compaction`]). Expiry removes the snapshots older than a cutoff but the current one. Orphan
//! removal lists the table's location and deletes what no snapshot of the history reads and no
//! live batch names ([`batch::named_files`]), once older than the safe age
//! ([`floe_iceberg::orphans::select`]).

use std::collections::{BTreeMap, BTreeSet};

use floe_core::{Error, ErrorKind, Result};
use floe_iceberg::SourceRows;
use floe_iceberg::maintain::Moved;
use floe_pipeline::protocol::batch;
use floe_pipeline::protocol::records::{BatchRecord, Owner, commit_prefix, lease_key};
use floe_pipeline::protocol::replace::{self, Compaction};
use floe_pipeline::targets::TargetId;
use floe_pipeline::targets::maintain::{MaintRecord, maint_key};

use crate::commit::{renew, take_lease};
use crate::exec::{Shared, op, read, step};
use crate::ingest::target_table;
use crate::world::{Content, TableView, Value};

/// Rows a compaction writes per file (the simulation's target file size).
const COMPACTED_ROWS: usize = 8;

/// `floe maintain` on every table, again and again, a while apart.
pub async fn run(w: Shared, owner: Owner) {
    loop {
        let pause = {
            let mut world = w.borrow_mut();
            let every = world.opts.maintain_every.max(1);
            world.rng.below(every)
        };
        for _ in 0..pause {
            step().await;
        }
        for (t, _) in crate::TABLES {
            // Each table is maintained or fails on its own.
            let _ = maintain_table(&w, &owner, &TargetId::iceberg("sim", t)).await;
        }
    }
}

/// Another writer may commit to the table before one of floe's commits.
pub fn maybe_foreign(w: &Shared, target: &TargetId) {
    let mut world = w.borrow_mut();
    let foreign = world.opts.foreign;
    if !world.quiet && world.rng.chance(foreign) {
        world.foreign_commit(target);
    }
}

/// `Committer::maintain_table`: under the table's commit lease, or not at all.
async fn maintain_table(w: &Shared, owner: &Owner, target: &TargetId) -> Result<()> {
    let Some(version) = take_lease(w, owner, target).await? else {
        return Ok(());
    };
    let mut held = version;
    let result = under_lease(w, owner, target, &mut held).await;
    let key = lease_key(target);
    let _ = op(w, "release lease", |w| w.delete(&key, held)).await;
    result
}

/// `Committer::maintain_under_lease`.
async fn under_lease(w: &Shared, owner: &Owner, target: &TargetId, held: &mut u64) -> Result<()> {
    if let Some((Compaction::Pending, _)) = finish_maintenance(w, target).await? {
        // `supersede_compaction`: an empty snapshot on the one the pending compaction was built
        // on, so that it never lands; then it is finished.
        let loaded = read(w, "load table", |w| w.load(target)).await?;
        renew(w, owner, target, held).await?;
        let _ = op(w, "commit empty snapshot", |w| w.fence(target, &loaded)).await;
        if let Some((Compaction::Pending, _)) = finish_maintenance(w, target).await? {
            return Err(Error::new(
                ErrorKind::Conflict,
                "a compaction still pending",
            ));
        }
    }
    let in_flight = read(w, "scan commit records", |w| w.scan(&commit_prefix(target))).await?;
    if !in_flight.is_empty() && !w.borrow().opts.maintain_in_flight {
        // A commit is in flight: its committer finishes it first.
        return Ok(());
    }
    let loaded = read(w, "load table", |w| w.load(target)).await?;
    compact(w, owner, target, &loaded, held).await?;

    let loaded = read(w, "load table", |w| w.load(target)).await?;
    let cutoff = w.borrow().now - w.borrow().opts.expire_age_ms;
    // `expire_updates`: older than the cutoff, and not the current snapshot (keep one).
    let expired: BTreeSet<i64> = (loaded.snapshots.iter())
        .filter(|s| s.at < cutoff && Some(s.id) != loaded.current_id())
        .map(|s| s.id)
        .collect();
    if !expired.is_empty() {
        renew(w, owner, target, held).await?;
        op(w, "expire snapshots", |w| {
            w.expire(target, &loaded, &expired)
        })
        .await?
        .map_err(|e| Error::new(ErrorKind::Conflict, e))?;
    }

    let loaded = read(w, "load table", |w| w.load(target)).await?;
    let protected = if w.borrow().opts.orphans_ignore_batches {
        BTreeSet::new()
    } else {
        let found = read(w, "scan batches", |w| w.scan("batch/")).await?;
        let batches: Vec<BatchRecord> = (found.into_iter())
            .filter_map(|(_, v, _)| match v {
                Value::Batch(b) => Some(b),
                _ => None,
            })
            .collect();
        batch::named_files(&batches)
    };
    let cutoff = w.borrow().now - w.borrow().opts.orphan_age_ms;
    // Still ours, so no committer has added to the table since it was loaded.
    renew(w, owner, target, held).await?;
    let listed = read(w, "list location", |w| w.list(target)).await?;
    let referenced = loaded.referenced();
    for f in floe_iceberg::orphans::select(&listed, &referenced, &protected, cutoff) {
        let path = f.path.clone();
        op(w, "remove orphan", |w| {
            w.files.remove(&path);
            w.stats.orphans_removed += 1;
        })
        .await?;
    }
    Ok(())
}

/// Compact `loaded` (see the module doc) and commit it, its record first.
async fn compact(
    w: &Shared,
    owner: &Owner,
    target: &TargetId,
    loaded: &TableView,
    held: &mut u64,
) -> Result<()> {
    let Some(head) = loaded.current.clone() else {
        return Ok(());
    };
    // One partition: worth rewriting with two small data files, or any deletes.
    let small = read(w, "read manifests", |w| {
        (head.data.keys())
            .filter(|p| match w.files.get(*p).map(|f| &f.content) {
                Some(Content::Data(rows)) => rows.len() < COMPACTED_ROWS,
                _ => true,
            })
            .count()
    })
    .await?;
    if small < 2 && head.deletes.is_empty() {
        return Ok(());
    }
    let id = format!("m{:08}", w.borrow_mut().id());
    let table = target_table(target);
    if head.data.values().any(|n| *n > 1) {
        // A file the table names twice: its second entry is not in the table's scan.
        return Err(Error::unexpected("a data file is live twice"));
    }
    let read_all = read(w, "read data files", |w| {
        (head.data.keys())
            .map(|path| {
                let total = match w.files.get(path).map(|f| &f.content) {
                    Some(Content::Data(rows)) => rows.len() as u64,
                    _ => 0,
                };
                Ok((path.clone(), w.read_rows(loaded, path)?, total))
            })
            .collect::<std::result::Result<Vec<_>, String>>()
    })
    .await?;
    let old = read_all.map_err(Error::unexpected)?;
    let mut written: Vec<(String, Vec<(String, u64)>)> = Vec::new();
    let mut moved = BTreeMap::new();
    for (path, survivors, total) in old {
        let kept: BTreeSet<u64> = survivors.iter().map(|(p, _, _)| *p).collect();
        let mut m = Moved {
            deleted: (0..total).filter(|p| !kept.contains(p)).collect(),
            runs: Vec::new(),
        };
        for (_, key, version) in survivors {
            if written
                .last()
                .is_none_or(|(_, rows)| rows.len() >= COMPACTED_ROWS)
            {
                let n = written.len();
                written.push((
                    format!("sim://{table}/data/maint-{id}-{n}.parquet"),
                    Vec::new(),
                ));
            }
            let (file, rows) = written.last_mut().expect("a file open");
            let pos = rows.len() as u64;
            rows.push((key, version));
            match m.runs.last_mut() {
                Some(r) if r.file == *file && r.start + r.rows == pos => r.rows += 1,
                _ => m.runs.push(SourceRows {
                    file: file.clone(),
                    start: pos,
                    rows: 1,
                }),
            }
        }
        moved.insert(path, m);
    }
    let mut added = Vec::new();
    for (path, rows) in written {
        op(w, "write compacted file", |w| {
            w.write_file(target, &path, Content::Data(rows))
        })
        .await?;
        added.push(path);
    }
    let removed: BTreeSet<String> = head.data.keys().chain(&head.deletes).cloned().collect();
    let record = MaintRecord {
        id: id.clone(),
        table: table.to_owned(),
        base: loaded.current_id(),
        moved,
    };
    op(w, "record compaction", |w| {
        w.insert(&maint_key(target), Value::Maint(record), None)
    })
    .await?
    .ok_or_else(|| Error::unexpected("a maintenance record is already there"))?;
    // Still ours: a committer that took the lease over commits on top of the snapshot this one
    // replaces, and the requirement then refuses this commit.
    renew(w, owner, target, held).await?;
    maybe_foreign(w, target);
    let committed = op(w, "commit compaction", |w| {
        w.rewrite(target, loaded, &id, &removed, &added)
    })
    .await;
    if !matches!(committed, Ok(Ok(_))) {
        // Lost answer or refusal: the record says which, next time.
        finish_maintenance(w, target).await?;
        return Err(Error::new(
            ErrorKind::Conflict,
            "the compaction did not commit",
        ));
    }
    finish_maintenance(w, target).await?;
    Ok(())
}

/// `Committer::finish_maintenance`: finish (or drop) a compaction an earlier holder of the
/// lease left, as [`replace::compaction`] says: once its snapshot is in the table, the `rows/`
/// records still pointing at the files it replaced are moved; one that may still land is left.
/// `None` when there was none; else what it was, and how many records moved.
pub async fn finish_maintenance(
    w: &Shared,
    target: &TargetId,
) -> Result<Option<(Compaction, usize)>> {
    let key = maint_key(target);
    let Some((Value::Maint(record), version)) =
        read(w, "get maint record", |w| w.get(&key)).await?
    else {
        return Ok(None);
    };
    let table = read(w, "load table", |w| w.load(target)).await?;
    let found = replace::compaction(table.has(&record.id), record.base, table.current_id());
    if found == Compaction::Pending {
        return Ok(Some((found, 0)));
    }
    let mut moved = 0;
    if found == Compaction::Landed && !w.borrow().opts.compaction_keeps_rows {
        let prefix = format!("rows/{target}/");
        for (name, value, v) in read(w, "scan rows records", |w| w.scan(&prefix)).await? {
            let Value::Rows(rows) = value else {
                continue;
            };
            let Some(next) = replace::moved(&rows, &record.moved) else {
                continue;
            };
            op(w, "move rows record", |w| {
                w.update(&name, Value::Rows(next), v, None)
            })
            .await?
            .ok_or_else(|| {
                Error::new(
                    ErrorKind::Conflict,
                    format!("{name} changed while compaction moved it"),
                )
            })?;
            moved += 1;
        }
        w.borrow_mut().stats.records_moved += moved as u64;
    }
    op(w, "drop maint record", |w| w.delete(&key, version)).await?;
    Ok(Some((found, moved)))
}
