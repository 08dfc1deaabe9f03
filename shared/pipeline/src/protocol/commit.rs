//! What a committer commits, and when: the choice of staged batches for one target, the commit
//! record written before the target is touched, and how a batch is marked once a commit holds
//! its files.

use std::collections::{BTreeMap, BTreeSet};

use super::records::{BatchRecord, BatchState, CommitRecord, CommitState, DoneRecord};
use crate::targets::id::TargetId;

/// When a target's staged work is due (`[commit]`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CommitPolicy {
    /// Commit when the oldest staged batch waited this long.
    pub interval_ms: u64,
    /// Commit when this many files wait; also the most files one commit takes (a commit takes
    /// whole batches, so it may pass this by one batch's files).
    pub max_files: u64,
    /// Commit when this many bytes wait.
    pub max_bytes: u64,
}

/// Whether `batch` waits for a commit to `target`.
pub fn waits_for(batch: &BatchRecord, target: &TargetId) -> bool {
    batch.state == BatchState::Staged
        && batch.targets.contains_key(target)
        && !batch.committed.contains_key(target)
}

/// Whether `batch` is already committed to `target` by a commit other than `commit_id` (a
/// committer whose lease ran out planned it into a second commit).
pub fn committed_elsewhere(batch: &BatchRecord, target: &TargetId, commit_id: &str) -> bool {
    batch
        .committed
        .get(target)
        .is_some_and(|c| c.as_str() != commit_id)
}

/// The target of a commit record's key, `commit/<target>/<id>`.
pub fn target_of_commit_key(key: &str) -> Option<TargetId> {
    let (target, _) = key.strip_prefix("commit/")?.rsplit_once('/')?;
    target.parse().ok()
}

/// Every target with work: a staged batch not committed to it, or a commit record in flight.
pub fn targets_with_work<'a>(
    batches: impl IntoIterator<Item = &'a BatchRecord>,
    commit_keys: impl IntoIterator<Item = &'a str>,
) -> BTreeSet<TargetId> {
    let mut targets = BTreeSet::new();
    for b in batches {
        if b.state == BatchState::Staged {
            targets.extend(
                b.targets
                    .keys()
                    .filter(|t| !b.committed.contains_key(*t))
                    .cloned(),
            );
        }
    }
    targets.extend(commit_keys.into_iter().filter_map(target_of_commit_key));
    targets
}

/// What a committer does for one target now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Plan {
    /// No staged batch waits for it.
    Nothing,
    /// Work waits but is not due yet.
    Wait,
    /// Commit these batches (ids, oldest first) in one commit.
    Commit(Vec<String>),
}

/// Choose the batches of `staged` (any batches: those not waiting for `target` are left out)
/// to commit to `target` now; `force` commits whatever waits.
pub fn plan<'a>(
    staged: impl IntoIterator<Item = &'a BatchRecord>,
    target: &TargetId,
    now_ms: i64,
    policy: &CommitPolicy,
    force: bool,
) -> Plan {
    let mut waiting: Vec<&BatchRecord> = staged
        .into_iter()
        .filter(|b| waits_for(b, target))
        .collect();
    if waiting.is_empty() {
        return Plan::Nothing;
    }
    waiting.sort_by(|a, b| a.id.cmp(&b.id));
    let files_of = |b: &BatchRecord| b.targets[target].files.len() as u64;
    let files: u64 = waiting.iter().map(|b| files_of(b)).sum();
    let bytes: u64 = waiting.iter().map(|b| b.targets[target].bytes).sum();
    let oldest = waiting
        .iter()
        .map(|b| b.heartbeat_ms)
        .min()
        .unwrap_or(now_ms);
    let due = force
        || now_ms - oldest >= policy.interval_ms as i64
        || files >= policy.max_files
        || bytes >= policy.max_bytes;
    if !due {
        return Plan::Wait;
    }
    let mut chosen = Vec::new();
    let mut n = 0u64;
    for b in waiting {
        n += files_of(b);
        chosen.push(b.id.clone());
        if n >= policy.max_files {
            break;
        }
    }
    Plan::Commit(chosen)
}

/// The record of a new commit, written (pending) before the target is touched.
pub fn begin(id: &str, target: &TargetId, batches: Vec<String>, now_ms: i64) -> CommitRecord {
    CommitRecord {
        id: id.to_owned(),
        target: target.clone(),
        batches,
        state: CommitState::Pending,
        created_ms: now_ms,
        snapshot_id: None,
        session: None,
    }
}

/// The record once the target holds the commit (`snapshot` for an Iceberg table).
pub fn landed(mut record: CommitRecord, snapshot: Option<i64>) -> CommitRecord {
    record.state = CommitState::Done;
    record.snapshot_id = snapshot;
    record
}

/// What marking a batch committed to a target writes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Mark {
    /// Other targets still wait: the batch record, with this target's commit.
    Update(BatchRecord),
    /// Every target has it: this done record, and the batch record deleted.
    Finish(DoneRecord),
}

/// Mark `batch` committed to `target` by commit `commit_id`.
pub fn mark(mut batch: BatchRecord, target: &TargetId, commit_id: &str, now_ms: i64) -> Mark {
    batch.committed.insert(target.clone(), commit_id.to_owned());
    if batch
        .targets
        .keys()
        .all(|t| batch.committed.contains_key(t))
    {
        Mark::Finish(DoneRecord {
            committed: batch.committed,
            at_ms: now_ms,
        })
    } else {
        Mark::Update(batch)
    }
}

/// Staged work waiting per target: (batches, files, rows).
pub fn waiting_summary<'a>(
    batches: impl IntoIterator<Item = &'a BatchRecord>,
) -> BTreeMap<TargetId, (usize, usize, u64)> {
    let mut out: BTreeMap<TargetId, (usize, usize, u64)> = BTreeMap::new();
    for b in batches {
        for (t, files) in &b.targets {
            if waits_for(b, t) {
                let e = out.entry(t.clone()).or_default();
                e.0 += 1;
                e.1 += files.files.len();
                e.2 += files.rows;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::batch::tests::staged_file;
    use crate::protocol::records::{Owner, TargetFiles};

    fn t() -> TargetId {
        "iceberg:c:t".parse().unwrap()
    }

    fn m() -> TargetId {
        "maxcompute:p.t".parse().unwrap()
    }

    fn batch(id: &str, hb: i64, files: usize, targets: &[TargetId]) -> BatchRecord {
        let owner = Owner {
            host: "h".into(),
            pid: 1,
            run: "r".into(),
            pid_space: None,
        };
        let mut b = crate::protocol::batch::open(id, &owner, hb);
        b.state = BatchState::Staged;
        for t in targets {
            let fs: Vec<_> = (0..files)
                .map(|i| staged_file(&format!("{id}-{i}"), 1))
                .collect();
            b.targets.insert(
                t.clone(),
                TargetFiles {
                    table: "t".into(),
                    rows: fs.len() as u64,
                    bytes: fs.len() as u64 * 10,
                    files: fs,
                    maxcompute: None,
                    objects: Vec::new(),
                },
            );
        }
        b
    }

    fn policy() -> CommitPolicy {
        CommitPolicy {
            interval_ms: 1_000,
            max_files: 4,
            max_bytes: 1 << 30,
        }
    }

    #[test]
    fn a_batch_committed_by_another_commit_is_left_out() {
        let mut b = batch("b1", 0, 1, &[t(), m()]);
        assert!(!committed_elsewhere(&b, &t(), "c1"));
        b.committed.insert(t(), "c0".into());
        assert!(committed_elsewhere(&b, &t(), "c1"));
        assert!(!committed_elsewhere(&b, &t(), "c0"), "its own commit");
        assert!(!committed_elsewhere(&b, &m(), "c1"), "another target");
    }

    #[test]
    fn work_is_due_by_age_files_or_force() {
        let young = [batch("b2", 900, 1, &[t()]), batch("b1", 950, 1, &[t()])];
        assert_eq!(plan(&young, &t(), 1_000, &policy(), false), Plan::Wait);
        assert_eq!(plan(&young, &m(), 1_000, &policy(), true), Plan::Nothing);
        assert_eq!(
            plan(&young, &t(), 1_000, &policy(), true),
            Plan::Commit(vec!["b1".into(), "b2".into()]),
            "oldest id first"
        );
        assert_eq!(
            plan(&young, &t(), 1_900, &policy(), false),
            Plan::Commit(vec!["b1".into(), "b2".into()])
        );
        let many = [
            batch("b1", 999, 3, &[t()]),
            batch("b2", 999, 3, &[t()]),
            batch("b3", 999, 3, &[t()]),
        ];
        assert_eq!(
            plan(&many, &t(), 1_000, &policy(), false),
            Plan::Commit(vec!["b1".into(), "b2".into()]),
            "max-files due, and a commit stops after the batch that reaches it"
        );
    }

    #[test]
    fn committed_and_running_batches_are_not_chosen() {
        let mut done = batch("b1", 0, 1, &[t(), m()]);
        done.committed.insert(t(), "c0".into());
        let mut running = batch("b2", 0, 1, &[t()]);
        running.state = BatchState::Running;
        let all = [done, running];
        assert_eq!(plan(&all, &t(), 5_000, &policy(), true), Plan::Nothing);
        assert_eq!(
            plan(&all, &m(), 5_000, &policy(), false),
            Plan::Commit(vec!["b1".into()])
        );
        let keys = ["commit/iceberg:c:other/c9"];
        let targets = targets_with_work(&all, keys);
        assert_eq!(
            targets.into_iter().collect::<Vec<_>>(),
            ["iceberg:c:other".parse().unwrap(), m()]
        );
        assert_eq!(waiting_summary(&all)[&m()], (1, 1, 1));
    }

    #[test]
    fn a_batch_finishes_with_its_last_target() {
        let b = batch("b1", 0, 1, &[t(), m()]);
        let Mark::Update(b) = mark(b, &t(), "c1", 10) else {
            panic!("maxcompute still waits")
        };
        assert_eq!(b.committed[&t()], "c1");
        let Mark::Finish(done) = mark(b, &m(), "c2", 11) else {
            panic!("every target has it")
        };
        assert_eq!(done.committed.len(), 2);
        assert_eq!(done.at_ms, 11);
    }

    #[test]
    fn commit_keys_name_their_target() {
        assert_eq!(
            target_of_commit_key("commit/maxcompute:p.t/ds=1/c1"),
            Some("maxcompute:p.t/ds=1".parse().unwrap())
        );
        assert_eq!(target_of_commit_key("batch/x"), None);
    }
}
