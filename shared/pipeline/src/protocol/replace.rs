//! Objects that change replace their rows (`on-change = replace`): which rows a commit deletes,
//! and what the table holds of each object after it.
//!
//! A batch records, per object version it read, the runs of rows it wrote
//! ([`ObjectRows`] in its [`TargetFiles`](super::records::TargetFiles)); the checkpoint table
//! records, per object, the version the table holds and where its rows are (under
//! [`rows_key`](super::records::rows_key)). A commit walks its batches' objects in order
//! against what the table holds:
//! - a version newer than the one held replaces it: the held version's rows are deleted (by
//!   position, in the snapshot that adds the new rows), and the new version is held;
//! - a removal newer than the held version, or of an object the table holds nothing of,
//!   deletes its rows (if any) and is held as a removal, so an older version cannot bring rows
//!   back: one delivered late, or one read before the removal whose batch stages after the
//!   removal committed (the removal's claim is taken over the version's; it cannot stop a
//!   batch already past reading);
//! - the held version again, or an older one (delivered late, or staged by a batch that
//!   finished after a newer one committed), deletes its own new rows: it never lands;
//! - an append (only the bytes added since the held version were read) adds its rows to the
//!   held version's.
//!
//! Newer is decided as claims decide it: sequencers when both sides have one, else event
//! times; a version that cannot be ordered against the held one replaces it. The result only
//! depends on what the table held before the commit and the commit's batches, so a committer
//! recovering a commit derives the same deletes, and recording what the table holds afterwards
//! ([`settle`]) can be repeated: a version already held is held again.
//!
//! A compaction (`floe maintain`) rewrites data files with their deletes applied, so the rows
//! a record points at move: [`moved`] says where they are afterwards, and [`compaction`] what
//! the next holder of the table's lease does with a compaction it finds in flight. Its maker
//! may have lost the lease between renewing it and its commit going through: until the table
//! moves past the snapshot the compaction was built on, it may still land, so its record (what
//! moves the `rows/` records once it does) stays; a commit of a replacing table that works out
//! its deletes meanwhile asserts that the files they name are still in the table
//! (`floe_iceberg::AppendRequest::deletes_on`).

use std::collections::{BTreeMap, HashMap};

use floe_core::{Operation, compare_sequencers_opt};
use floe_iceberg::maintain::Moved;

use super::claim::normalize_etag;
use super::records::{BatchRecord, ObjectRows};
use crate::targets::id::TargetId;

/// An object: (bucket, key).
pub type ObjKey = (String, String);

/// Rows a commit deletes: for each batch (by its index in the commit) and data file, the
/// positions.
pub type Deletes = BTreeMap<(usize, String), Vec<u64>>;

/// What a commit does to the rows of changed objects.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Resolution {
    /// Rows to delete, attributed to the batch whose object deletes them (so a batch left out
    /// of the commit takes its deletes with it).
    pub deletes: Deletes,
    /// What the table holds afterwards, for each object the commit changed.
    pub held: BTreeMap<ObjKey, ObjectRows>,
}

/// What a compaction found in flight (its `maint/<target>` record) calls for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Compaction {
    /// Its snapshot is in the table: the `rows/` records of the files it rewrote are moved
    /// ([`moved`]), then its record dropped.
    Landed,
    /// Not in the table, which is still at the snapshot the compaction was built on: it may
    /// land yet (its maker may have lost the lease while its commit was on the way). Its record
    /// stays.
    Pending,
    /// Not in the table, which has moved on: the compaction's commit asserts the snapshot it was
    /// built on, so it can never land. Its record is dropped.
    Dead,
}

/// What a compaction in flight calls for: whether its snapshot is in the table (`landed`), the
/// snapshot it was built on (`base`; `None` in a record an earlier floe wrote) and the table's
/// current one.
pub fn compaction(landed: bool, base: Option<i64>, current: Option<i64>) -> Compaction {
    match base {
        _ if landed => Compaction::Landed,
        Some(b) if current == Some(b) => Compaction::Pending,
        _ => Compaction::Dead,
    }
}

/// The objects `batches` (a commit's, in order) landed or removed for `target`, each with the
/// index of its batch: what [`resolve`] and [`settle`] walk.
pub fn incoming<'b>(
    batches: &[&'b BatchRecord],
    target: &TargetId,
) -> Vec<(usize, &'b ObjectRows)> {
    (batches.iter().enumerate())
        .flat_map(|(i, b)| {
            (b.targets.get(target).into_iter())
                .flat_map(|t| t.objects.iter())
                .map(move |o| (i, o))
        })
        .collect()
}

/// Whether `a` happened before `b`.
fn older(a: &ObjectRows, b: &ObjectRows) -> bool {
    if let Some(ord) = compare_sequencers_opt(a.sequencer.as_deref(), b.sequencer.as_deref()) {
        return ord.is_lt();
    }
    matches!((a.event_time_ms, b.event_time_ms), (Some(x), Some(y)) if x < y)
}

/// Whether `a` and `b` are the same version of the object (removals have no ETag: two are one
/// unless their order tells them apart).
fn same_version(a: &ObjectRows, b: &ObjectRows) -> bool {
    let etags = match (&a.etag, &b.etag) {
        (Some(x), Some(y)) => normalize_etag(x) == normalize_etag(y),
        (x, y) => x == y,
    };
    let versions = match (&a.version_id, &b.version_id) {
        (Some(x), Some(y)) => x == y,
        _ => true,
    };
    let removals = a.operation == Operation::Removed && b.operation == Operation::Removed;
    let apart = removals && (older(a, b) || older(b, a));
    a.operation == b.operation && etags && versions && !apart
}

fn doom(deletes: &mut Deletes, batch: usize, rows: &[floe_iceberg::SourceRows]) {
    for r in rows {
        let positions = deletes.entry((batch, r.file.clone())).or_default();
        positions.extend(r.start..r.start + r.rows);
    }
}

/// Walk `incoming` (each object with the index of its batch in the commit, in commit order)
/// against `held` (what the table holds of those objects before the commit); see the module
/// doc.
pub fn resolve(
    held: &HashMap<ObjKey, ObjectRows>,
    incoming: &[(usize, &ObjectRows)],
) -> Resolution {
    let mut out = Resolution::default();
    for &(batch, inc) in incoming {
        let key = (inc.bucket.clone(), inc.key.clone());
        let current = out.held.get(&key).or_else(|| held.get(&key));
        let next = match current {
            None => Some(inc.clone()),
            Some(cur) if same_version(cur, inc) || older(inc, cur) => {
                doom(&mut out.deletes, batch, &inc.rows);
                None
            }
            Some(cur) if inc.appended && cur.operation == Operation::Created => {
                let mut next = inc.clone();
                next.rows = cur.rows.iter().chain(&inc.rows).cloned().collect();
                Some(next)
            }
            Some(cur) => {
                doom(&mut out.deletes, batch, &cur.rows);
                Some(inc.clone())
            }
        };
        if let Some(next) = next {
            out.held.insert(key, next);
        }
    }
    for positions in out.deletes.values_mut() {
        positions.sort_unstable();
        positions.dedup();
    }
    out
}

/// What to record once the commit is in: for each object, the version to hold, given what the
/// checkpoint table holds now (`held`, possibly already updated by an earlier try of the same
/// settling). Only the objects whose record changes are returned.
pub fn settle(
    held: &HashMap<ObjKey, ObjectRows>,
    incoming: &[(usize, &ObjectRows)],
) -> BTreeMap<ObjKey, ObjectRows> {
    let mut out = resolve(held, incoming).held;
    out.retain(|k, v| held.get(k) != Some(v));
    out
}

/// Where the rows of `held` are once a compaction rewrote the data files of `moved` (each with
/// where its surviving rows went); `None` when none of them was rewritten. Moving a record
/// again changes nothing: the files it points at then are not among the rewritten ones.
pub fn moved(held: &ObjectRows, moved: &BTreeMap<String, Moved>) -> Option<ObjectRows> {
    if !held.rows.iter().any(|r| moved.contains_key(&r.file)) {
        return None;
    }
    let mut next = held.clone();
    next.rows = (held.rows.iter())
        .flat_map(|r| match moved.get(&r.file) {
            Some(m) => m.map(r.start, r.rows),
            None => vec![r.clone()],
        })
        .collect();
    Some(next)
}

#[cfg(test)]
mod tests {
    use super::*;
    use floe_iceberg::SourceRows;

    fn version(key: &str, etag: &str, seq: &str, rows: &[(&str, u64, u64)]) -> ObjectRows {
        ObjectRows {
            bucket: "b".into(),
            key: key.into(),
            operation: Operation::Created,
            etag: Some(etag.into()),
            version_id: None,
            sequencer: Some(seq.into()),
            event_time_ms: None,
            appended: false,
            rows: rows
                .iter()
                .map(|(f, start, rows)| SourceRows {
                    file: (*f).into(),
                    start: *start,
                    rows: *rows,
                })
                .collect(),
        }
    }

    fn removal(key: &str, seq: &str) -> ObjectRows {
        ObjectRows {
            operation: Operation::Removed,
            etag: None,
            rows: Vec::new(),
            ..version(key, "", seq, &[])
        }
    }

    fn key(k: &str) -> ObjKey {
        ("b".into(), k.into())
    }

    #[test]
    fn a_new_version_deletes_the_held_rows_and_is_held() {
        let held = HashMap::from([(key("a"), version("a", "e1", "01", &[("f1", 3, 2)]))]);
        let v2 = version("a", "e2", "02", &[("f2", 0, 4)]);
        let r = resolve(&held, &[(0, &v2)]);
        assert_eq!(r.deletes, BTreeMap::from([((0, "f1".into()), vec![3, 4])]));
        assert_eq!(r.held[&key("a")], v2);
    }

    #[test]
    fn versions_in_one_commit_replace_each_other_in_order() {
        // Three versions of one object in one commit (two batches): only the last one's rows
        // stay; the first two are deleted from the files this very commit adds.
        let v1 = version("a", "e1", "01", &[("f1", 0, 2)]);
        let v2 = version("a", "e2", "02", &[("f1", 5, 2)]);
        let v3 = version("a", "e3", "03", &[("f2", 0, 1)]);
        let r = resolve(&HashMap::new(), &[(0, &v1), (0, &v2), (1, &v3)]);
        assert_eq!(
            r.deletes,
            BTreeMap::from([
                ((0, "f1".into()), vec![0, 1]),
                ((1, "f1".into()), vec![5, 6])
            ])
        );
        assert_eq!(r.held[&key("a")], v3);
    }

    #[test]
    fn an_older_or_repeated_version_never_lands() {
        let v2 = version("a", "e2", "02", &[("f1", 0, 2)]);
        let held = HashMap::from([(key("a"), v2.clone())]);
        let late = version("a", "e1", "01", &[("f9", 7, 1)]);
        let again = version("a", "E2", "02", &[("f9", 8, 2)]);
        let r = resolve(&held, &[(0, &late), (1, &again)]);
        assert_eq!(
            r.deletes,
            BTreeMap::from([((0, "f9".into()), vec![7]), ((1, "f9".into()), vec![8, 9])])
        );
        assert!(r.held.is_empty());
    }

    #[test]
    fn a_removal_deletes_the_rows_and_keeps_a_late_version_out() {
        let held = HashMap::from([(key("a"), version("a", "e1", "01", &[("f1", 0, 3)]))]);
        let gone = removal("a", "02");
        let late = version("a", "e1b", "01", &[("f2", 0, 1)]);
        let r = resolve(&held, &[(0, &gone), (1, &late)]);
        assert_eq!(
            r.deletes,
            BTreeMap::from([
                ((0, "f1".into()), vec![0, 1, 2]),
                ((1, "f2".into()), vec![0])
            ])
        );
        assert_eq!(r.held[&key("a")], gone);
        // A removal of an object the table holds nothing of deletes nothing, and is held: a
        // version read before it, whose batch stages after the removal committed, stays out.
        let gone = removal("z", "05");
        let r = resolve(&HashMap::new(), &[(0, &gone)]);
        assert!(r.deletes.is_empty());
        assert_eq!(r.held[&key("z")], gone);
        let after: HashMap<ObjKey, ObjectRows> = r.held.into_iter().collect();
        let read_before = version("z", "e1", "03", &[("f3", 0, 2)]);
        let r = resolve(&after, &[(0, &read_before)]);
        assert_eq!(r.deletes, BTreeMap::from([((0, "f3".into()), vec![0, 1])]));
        assert!(r.held.is_empty());
    }

    #[test]
    fn a_later_removal_is_held_over_an_earlier_one() {
        // Put, removed, put again and removed again: the second removal is held, so the
        // version between the two, staged late, stays out; the first removal again changes
        // nothing.
        let first = removal("a", "02");
        let held = HashMap::from([(key("a"), first.clone())]);
        let second = removal("a", "07");
        let r = resolve(&held, &[(0, &second)]);
        assert!(r.deletes.is_empty());
        assert_eq!(r.held[&key("a")], second);
        let after: HashMap<ObjKey, ObjectRows> = r.held.into_iter().collect();
        let between = version("a", "e3", "05", &[("f5", 0, 2)]);
        let r = resolve(&after, &[(0, &between), (1, &first)]);
        assert_eq!(r.deletes, BTreeMap::from([((0, "f5".into()), vec![0, 1])]));
        assert!(r.held.is_empty());
    }

    #[test]
    fn an_append_adds_to_the_held_rows() {
        let held = HashMap::from([(key("a"), version("a", "e1", "01", &[("f1", 0, 3)]))]);
        let mut more = version("a", "e2", "02", &[("f2", 0, 2)]);
        more.appended = true;
        let r = resolve(&held, &[(0, &more)]);
        assert!(r.deletes.is_empty());
        assert_eq!(r.held[&key("a")].rows.len(), 2);
    }

    #[test]
    fn settling_again_changes_nothing() {
        let held = HashMap::from([(key("a"), version("a", "e1", "01", &[("f1", 0, 3)]))]);
        let v2 = version("a", "e2", "02", &[("f2", 0, 4)]);
        let first = settle(&held, &[(0, &v2)]);
        assert_eq!(first[&key("a")], v2);
        let after: HashMap<ObjKey, ObjectRows> = first.into_iter().collect();
        assert!(settle(&after, &[(0, &v2)]).is_empty());
    }

    #[test]
    fn a_compaction_moves_the_held_rows_once() {
        // f1's rows 0..4 (row 1 deleted) went to n1 from 10; f2 was not rewritten.
        let held = version("a", "e1", "01", &[("f1", 2, 2), ("f2", 0, 1)]);
        let rewritten = BTreeMap::from([(
            "f1".to_owned(),
            floe_iceberg::maintain::moved_of(vec![1], vec![("n1", 10, 3)]),
        )]);
        let after = moved(&held, &rewritten).expect("f1 was rewritten");
        assert_eq!(
            after,
            version("a", "e1", "01", &[("n1", 11, 2), ("f2", 0, 1)])
        );
        assert_eq!(
            moved(&after, &rewritten),
            None,
            "moving again changes nothing"
        );
    }

    #[test]
    fn a_compaction_not_in_the_table_may_land_until_the_table_moves() {
        assert_eq!(compaction(true, Some(7), Some(9)), Compaction::Landed);
        assert_eq!(compaction(false, Some(7), Some(7)), Compaction::Pending);
        assert_eq!(compaction(false, Some(7), Some(8)), Compaction::Dead);
        assert_eq!(
            compaction(false, None, Some(7)),
            Compaction::Dead,
            "an old record"
        );
    }

    #[test]
    fn a_commit_walks_its_batches_objects_in_order() {
        let owner = crate::protocol::records::Owner {
            host: "h".into(),
            pid: 1,
            run: "r".into(),
            pid_space: None,
        };
        let (t, other) = (TargetId::iceberg("c", "t"), TargetId::iceberg("c", "u"));
        let files = |objects: Vec<ObjectRows>| crate::protocol::records::TargetFiles {
            table: "t".into(),
            files: Vec::new(),
            rows: 0,
            bytes: 0,
            maxcompute: None,
            objects,
        };
        let (a, b, c) = (
            version("a", "e1", "01", &[]),
            version("b", "e1", "01", &[]),
            version("c", "e1", "01", &[]),
        );
        let mut b1 = crate::protocol::batch::open("b1", &owner, 0);
        b1.targets
            .insert(t.clone(), files(vec![a.clone(), b.clone()]));
        b1.targets.insert(other, files(vec![c.clone()]));
        let mut b2 = crate::protocol::batch::open("b2", &owner, 0);
        b2.targets.insert(t.clone(), files(vec![c.clone()]));
        assert_eq!(incoming(&[&b1, &b2], &t), vec![(0, &a), (0, &b), (1, &c)]);
    }
}
