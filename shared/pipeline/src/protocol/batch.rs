//! An ingest batch's life: opened running, kept alive by heartbeats, staged in one
//! compare-and-set, or declared abandoned by an instance that takes its objects over.
//!
//! ```text
//!   open ──▶ Running ──stage──▶ Staged ──(every target committed)──▶ done/<batch>
//!               │
//!               └─ heartbeat stale, or its process gone ──▶ Abandoned (by a taker)
//! ```

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use super::records::{BatchRecord, BatchState, DoneRecord, Owner, TargetFiles};

/// A new running batch.
pub fn open(id: &str, owner: &Owner, now_ms: i64) -> BatchRecord {
    BatchRecord {
        id: id.to_owned(),
        state: BatchState::Running,
        owner: owner.clone(),
        started_ms: now_ms,
        heartbeat_ms: now_ms,
        objects: 0,
        targets: BTreeMap::new(),
        committed: BTreeMap::new(),
    }
}

/// Whether a running batch should say it is alive (four times per claim timeout).
pub fn heartbeat_due(record: &BatchRecord, now_ms: i64, claim_timeout_ms: u64) -> bool {
    now_ms - record.heartbeat_ms > (claim_timeout_ms / 4) as i64
}

/// What the batch holding a claim means for an instance that wants the object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Holder {
    /// Alive and working: leave the object to it.
    Live,
    /// It staged (the object is landed).
    Staged,
    /// Abandoned earlier, or gone without a trace: its objects may be taken.
    Gone,
    /// Running but dead (stale heartbeat, or its process gone): write this record (the batch
    /// abandoned) with a compare-and-set, then take its objects.
    Abandon(BatchRecord),
}

/// Judge the batch `record` (None: no batch record; `done`: a done record exists for it).
pub fn judge(
    record: Option<&BatchRecord>,
    done: bool,
    now_ms: i64,
    claim_timeout_ms: u64,
    owner_dead: bool,
) -> Holder {
    let Some(rec) = record else {
        return if done { Holder::Staged } else { Holder::Gone };
    };
    match rec.state {
        BatchState::Staged => Holder::Staged,
        BatchState::Abandoned => Holder::Gone,
        BatchState::Running => {
            let stale = now_ms - rec.heartbeat_ms > claim_timeout_ms as i64;
            if !stale && !owner_dead {
                return Holder::Live;
            }
            let mut dead = rec.clone();
            dead.state = BatchState::Abandoned;
            Holder::Abandon(dead)
        }
    }
}

/// How long an abandoned batch record is kept: long enough for its owner, if it still runs, to
/// find it abandoned at its next heartbeat or stage.
pub fn abandoned_ttl(claim_timeout_ms: u64) -> Duration {
    Duration::from_millis(claim_timeout_ms * 4)
}

/// What staging a batch writes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Staging {
    /// The batch record, staged: the committers take it from here.
    Stage(BatchRecord),
    /// Nothing for any target to commit: the batch is finished at once (this done record, and
    /// the batch record deleted).
    Finished(DoneRecord),
}

/// Stage `record` with the files it wrote per target.
pub fn stage(
    mut record: BatchRecord,
    objects: u64,
    targets: BTreeMap<crate::targets::id::TargetId, TargetFiles>,
    now_ms: i64,
) -> Staging {
    if targets
        .values()
        .all(|t| t.files.is_empty() && t.objects.is_empty())
    {
        return Staging::Finished(DoneRecord {
            committed: targets.keys().map(|t| (t.clone(), String::new())).collect(),
            at_ms: now_ms,
        });
    }
    record.state = BatchState::Staged;
    record.objects = objects;
    record.targets = targets;
    record.heartbeat_ms = now_ms;
    Staging::Stage(record)
}

/// The files that live batches name, for any target: what orphan removal must keep although no
/// table names them yet. A staged batch's files are what a commit will add; a running batch
/// names none until it stages (the age below which orphan removal keeps every file covers
/// those); an abandoned batch can no longer stage, so its files are orphans once old enough.
pub fn named_files<'a>(batches: impl IntoIterator<Item = &'a BatchRecord>) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for b in batches {
        if b.state == BatchState::Abandoned {
            continue;
        }
        for files in b.targets.values() {
            out.extend(files.files.iter().map(|f| f.path.clone()));
        }
    }
    out
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    fn owner() -> Owner {
        Owner {
            host: "h".into(),
            pid: 1,
            run: "r".into(),
            pid_space: None,
        }
    }

    pub(crate) fn staged_file(path: &str, rows: u64) -> floe_iceberg::StagedFile {
        floe_iceberg::StagedFile {
            data_file: "{}".into(),
            spec_id: 0,
            schema_id: 0,
            rows,
            deletes: false,
            bytes: rows * 10,
            path: path.into(),
        }
    }

    fn target() -> crate::targets::id::TargetId {
        crate::targets::id::TargetId::iceberg("c", "t")
    }

    #[test]
    fn a_claim_holder_is_judged_by_its_record() {
        let mut rec = open("b1", &owner(), 1_000);
        assert_eq!(judge(None, false, 0, 100, false), Holder::Gone);
        assert_eq!(judge(None, true, 0, 100, false), Holder::Staged);
        assert_eq!(judge(Some(&rec), false, 1_050, 100, false), Holder::Live);
        let Holder::Abandon(dead) = judge(Some(&rec), false, 1_101, 100, false) else {
            panic!("a stale heartbeat is dead")
        };
        assert_eq!(dead.state, BatchState::Abandoned);
        assert!(matches!(
            judge(Some(&rec), false, 1_001, 100, true),
            Holder::Abandon(_)
        ));
        rec.state = BatchState::Abandoned;
        assert_eq!(judge(Some(&rec), false, 1_001, 100, false), Holder::Gone);
        rec.state = BatchState::Staged;
        assert_eq!(judge(Some(&rec), false, 9_999, 100, true), Holder::Staged);
    }

    #[test]
    fn heartbeats_come_four_times_per_timeout() {
        let rec = open("b1", &owner(), 1_000);
        assert!(!heartbeat_due(&rec, 1_025, 100));
        assert!(heartbeat_due(&rec, 1_026, 100));
    }

    #[test]
    fn live_batches_name_their_files_and_abandoned_ones_do_not() {
        let files = |path: &str| TargetFiles {
            table: "t".into(),
            files: vec![staged_file(path, 1)],
            rows: 1,
            bytes: 10,
            maxcompute: None,
            objects: Vec::new(),
        };
        let mut staged = open("b1", &owner(), 0);
        staged.state = BatchState::Staged;
        staged.targets.insert(target(), files("/w/staged.parquet"));
        let mut abandoned = open("b2", &owner(), 0);
        abandoned.state = BatchState::Abandoned;
        abandoned
            .targets
            .insert(target(), files("/w/abandoned.parquet"));
        let running = open("b3", &owner(), 0);
        assert_eq!(
            named_files([&staged, &abandoned, &running]),
            BTreeSet::from(["/w/staged.parquet".to_owned()])
        );
    }

    #[test]
    fn a_batch_without_files_finishes_when_it_stages() {
        let rec = open("b1", &owner(), 1_000);
        let empty = TargetFiles {
            table: "t".into(),
            files: Vec::new(),
            rows: 0,
            bytes: 0,
            maxcompute: None,
            objects: Vec::new(),
        };
        let targets = BTreeMap::from([(target(), empty.clone())]);
        let Staging::Finished(done) = stage(rec.clone(), 1, targets, 2_000) else {
            panic!("nothing to commit")
        };
        assert_eq!(done.committed[&target()], "");
        assert!(matches!(
            stage(rec.clone(), 0, BTreeMap::new(), 2_000),
            Staging::Finished(_)
        ));
        let file = TargetFiles {
            files: vec![staged_file("file:///w/a.parquet", 3)],
            ..empty
        };
        let Staging::Stage(staged) = stage(rec, 2, BTreeMap::from([(target(), file)]), 2_000)
        else {
            panic!("files to commit")
        };
        assert_eq!(
            (staged.state, staged.objects, staged.heartbeat_ms),
            (BatchState::Staged, 2, 2_000)
        );
    }
}
