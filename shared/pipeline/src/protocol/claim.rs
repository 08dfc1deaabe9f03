//! Deciding what to do with an object change given what the checkpoint table remembers of it.

use std::cmp::Ordering;
use std::collections::HashMap;

use floe_core::{ObjectChange, Operation, compare_sequencers_opt};

use super::records::{ObjRecord, ObjState};

/// What the recorded state says about a change.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    /// Nothing (or an older version) recorded: claim it.
    Claim,
    /// The same version already landed, failed for good, or was ignored.
    Duplicate,
    /// A newer version is recorded: this delivery is late.
    Stale,
    /// Another batch claimed this very version: its batch record decides.
    ClaimedBy(String),
}

/// An ETag as floe compares it: without quotes or a weak-validator `W/`, lowercase. S3
/// listings quote ETags, S3 events do not, OSS writes them in uppercase hex and s3s-fs or moto in
/// lowercase: the same version must compare equal whichever way it was reported.
pub fn normalize_etag(etag: &str) -> String {
    let e = etag.trim();
    let e = e.strip_prefix("W/").unwrap_or(e);
    e.trim_matches('"').to_ascii_lowercase()
}

/// Whether `change` is the version `rec` describes: same operation, same ETag (normalised), and
/// the same version id when both sides have one (a listing reports no version ids; the event
/// for the same version does). A removal has no ETag: two removals are one change unless their
/// sequencers (else event times) tell them apart.
pub fn same_version(rec: &ObjRecord, change: &ObjectChange) -> bool {
    let etags = match (&rec.etag, &change.etag) {
        (Some(a), Some(b)) => normalize_etag(a) == normalize_etag(b),
        (a, b) => a == b,
    };
    let versions = match (&rec.version_id, &change.version_id) {
        (Some(a), Some(b)) => a == b,
        _ => true,
    };
    let removals = rec.operation == Operation::Removed && change.operation == Operation::Removed;
    let apart = removals && order(rec, change).is_some_and(Ordering::is_ne);
    rec.operation == change.operation && etags && versions && !apart
}

/// How `change` is ordered against what `rec` describes: by sequencers when both have one,
/// else by event times; `None` when neither tells.
fn order(rec: &ObjRecord, change: &ObjectChange) -> Option<Ordering> {
    if let Some(ord) = compare_sequencers_opt(change.sequencer.as_deref(), rec.sequencer.as_deref())
    {
        return Some(ord);
    }
    match (change.event_time, rec.event_time_ms) {
        (Some(t), Some(r)) => Some(t.timestamp_millis().cmp(&r)),
        _ => None,
    }
}

/// Whether `change` happened before what `rec` describes (sequencers first, then event times).
pub fn is_older(rec: &ObjRecord, change: &ObjectChange) -> bool {
    order(rec, change).is_some_and(Ordering::is_lt)
}

/// Within one batch, several changes may name the same object: a queue delivers a message
/// twice in one receive, moto (and S3, at times) sends two created events for one multipart
/// upload, an object is written twice in quick succession. Reading by key gives its latest
/// content either way, so one change per object lands: the newest (sequencer, else event time;
/// the later in the batch on a tie). The others are returned with their decision: `Duplicate`
/// when they are the same version, `Stale` when they are an older one.
pub fn superseded_in_batch(
    changes: &[ObjectChange],
    candidates: impl IntoIterator<Item = usize>,
) -> HashMap<usize, Decision> {
    let candidates: Vec<usize> = candidates.into_iter().collect();
    let older = |a: &ObjectChange, b: &ObjectChange| match compare_sequencers_opt(
        a.sequencer.as_deref(),
        b.sequencer.as_deref(),
    ) {
        Some(ord) => ord.is_lt(),
        None => matches!((a.event_time, b.event_time), (Some(x), Some(y)) if x < y),
    };
    // The newest change of each object.
    let mut newest: HashMap<(&str, &str), usize> = HashMap::new();
    for &i in &candidates {
        let c = &changes[i];
        let slot = newest
            .entry((c.bucket.as_str(), c.key.as_str()))
            .or_insert(i);
        if !older(c, &changes[*slot]) {
            *slot = i;
        }
    }
    // Every other change of it, against the newest.
    let mut out = HashMap::new();
    for &i in &candidates {
        let c = &changes[i];
        let w = newest[&(c.bucket.as_str(), c.key.as_str())];
        if w == i {
            continue;
        }
        let kept = &changes[w];
        let same = c.operation == kept.operation
            && c.etag.as_deref().map(normalize_etag) == kept.etag.as_deref().map(normalize_etag)
            && (c.version_id.is_none()
                || kept.version_id.is_none()
                || c.version_id == kept.version_id);
        out.insert(
            i,
            if same {
                Decision::Duplicate
            } else {
                Decision::Stale
            },
        );
    }
    out
}

/// The record of `change` in `state`.
pub fn obj_record(change: &ObjectChange, state: ObjState, now_ms: i64) -> ObjRecord {
    ObjRecord {
        bucket: change.bucket.clone(),
        key: change.key.clone(),
        operation: change.operation,
        etag: change.etag.clone(),
        version_id: change.version_id.clone(),
        sequencer: change.sequencer.clone(),
        event_time_ms: change.event_time.map(|t| t.timestamp_millis()),
        size: change.size,
        from: None,
        state,
        at_ms: now_ms,
    }
}

/// Whether `change` lands as an append, by range after what landed: an append (see
/// [`ObjectChange::is_append`]), or a bucket listing's sighting of an object whose record is an
/// append's (the listing cannot tell an append from a rewrite; a rewrite sends its own
/// whole-object event, while landing the whole object here would land its earlier bytes twice).
pub fn lands_as_append(prev: Option<&ObjRecord>, change: &ObjectChange) -> bool {
    change.is_append()
        || (change.operation == Operation::Created
            && change.event_name == LISTING_EVENT
            && prev.is_some_and(|r| r.from.is_some() && r.operation == Operation::Created))
}

/// The event name of a change found by listing the bucket.
pub const LISTING_EVENT: &str = "ObjectCreated:Listing";

/// Where an append (see [`ObjectChange::is_append`]) starts landing, given the object's record
/// before its claim: nothing recorded, or a removal, lands from the start; a version that
/// staged, failed or was ignored accounts for its whole size; a claim that is taken over (its
/// batch is gone) for only what landed before it.
pub fn append_start(prev: Option<&ObjRecord>) -> u64 {
    match prev {
        None => 0,
        Some(r) if r.operation == Operation::Removed => 0,
        Some(r) => match &r.state {
            ObjState::Claimed { .. } => r.from.unwrap_or(0),
            ObjState::Staged { .. } | ObjState::Failed { .. } | ObjState::Ignored { .. } => {
                r.size.unwrap_or(0)
            }
        },
    }
}

/// Whether a change floe deliberately does not land may be recorded as ignored over
/// `existing`: not over a claim (its batch decides), nor over a newer version.
pub fn may_record_ignored(existing: &ObjRecord, change: &ObjectChange) -> bool {
    !matches!(existing.state, ObjState::Claimed { .. }) && !is_older(existing, change)
}

/// Decide for `change` given the record (if any) and this batch's id.
pub fn decide(existing: Option<&ObjRecord>, change: &ObjectChange, my_batch: &str) -> Decision {
    let Some(rec) = existing else {
        return Decision::Claim;
    };
    if lands_as_append(Some(rec), change) {
        return decide_append(rec, change, my_batch);
    }
    if same_version(rec, change) {
        return match &rec.state {
            ObjState::Claimed { batch } if batch == my_batch => Decision::Claim,
            ObjState::Claimed { batch } => Decision::ClaimedBy(batch.clone()),
            ObjState::Staged { .. } | ObjState::Failed { .. } | ObjState::Ignored { .. } => {
                Decision::Duplicate
            }
        };
    }
    // A later removal is a change of its own (see `same_version`), claimed like a new version:
    // once held, it keeps out a version put between the two removals and delivered late.
    if is_older(rec, change) {
        return Decision::Stale;
    }
    Decision::Claim
}

/// [`decide`] for an append. Its bytes are the object's after what landed, so it never claims
/// over another batch's claim, whatever version that names: that batch decides what landed
/// (staged: its whole range; gone: none of it). An append whose bytes all landed already (a
/// later append landed them; event times cannot always order two appends) is stale.
fn decide_append(rec: &ObjRecord, change: &ObjectChange, my_batch: &str) -> Decision {
    if let ObjState::Claimed { batch } = &rec.state {
        return if batch == my_batch {
            Decision::Claim
        } else {
            Decision::ClaimedBy(batch.clone())
        };
    }
    if same_version(rec, change) {
        return Decision::Duplicate;
    }
    if is_older(rec, change) || append_start(Some(rec)) >= change.size.unwrap_or(0) {
        return Decision::Stale;
    }
    Decision::Claim
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::{TimeZone, Utc};

    fn change(etag: &str, seq: Option<&str>, t: i64, op: Operation) -> ObjectChange {
        ObjectChange {
            operation: op,
            provider: floe_core::Provider::S3,
            bucket: "b".into(),
            key: "k".into(),
            region: None,
            size: Some(1),
            etag: Some(etag.into()),
            version_id: None,
            sequencer: seq.map(str::to_owned),
            event_time: Some(Utc.timestamp_millis_opt(t).unwrap()),
            event_name: "x".into(),
            message_id: None,
        }
    }

    fn rec(etag: &str, seq: Option<&str>, t: i64, state: ObjState) -> ObjRecord {
        ObjRecord {
            bucket: "b".into(),
            key: "k".into(),
            operation: Operation::Created,
            etag: Some(etag.into()),
            version_id: None,
            sequencer: seq.map(str::to_owned),
            event_time_ms: Some(t),
            size: Some(1),
            from: None,
            state,
            at_ms: 0,
        }
    }

    #[test]
    fn decisions() {
        let staged = ObjState::Staged { batch: "b1".into() };
        let claimed = ObjState::Claimed { batch: "b1".into() };
        let c = change("e1", Some("0A"), 10, Operation::Created);
        let cases = vec![
            (None, Decision::Claim, "nothing recorded"),
            (
                Some(rec("e1", Some("0A"), 10, staged.clone())),
                Decision::Duplicate,
                "same version staged",
            ),
            (
                Some(rec("e1", Some("0A"), 10, claimed.clone())),
                Decision::ClaimedBy("b1".into()),
                "same version claimed elsewhere",
            ),
            (
                Some(rec("e0", Some("09"), 9, staged.clone())),
                Decision::Claim,
                "newer version",
            ),
            (
                Some(rec("e2", Some("0B"), 5, staged.clone())),
                Decision::Stale,
                "sequencer says older despite time",
            ),
            (
                Some(rec("e2", None, 11, claimed.clone())),
                Decision::Stale,
                "no sequencer: older by time",
            ),
            (
                Some(rec("e2", None, 10, claimed)),
                Decision::Claim,
                "same time: let it through",
            ),
        ];
        for (existing, want, why) in cases {
            assert_eq!(decide(existing.as_ref(), &c, "mine"), want, "{why}");
        }
        let mine = rec(
            "e1",
            Some("0A"),
            10,
            ObjState::Claimed {
                batch: "mine".into(),
            },
        );
        assert_eq!(decide(Some(&mine), &c, "mine"), Decision::Claim);
        let mut removed = rec("e1", None, 10, staged);
        removed.operation = Operation::Removed;
        removed.etag = None;
        let removal = |seq: Option<&str>, t: i64| ObjectChange {
            etag: None,
            ..change("x", seq, t, Operation::Removed)
        };
        assert_eq!(
            decide(Some(&removed), &removal(None, 10), "mine"),
            Decision::Duplicate,
            "the same removal again"
        );
        assert_eq!(
            decide(Some(&removed), &removal(None, 12), "mine"),
            Decision::Claim,
            "a later removal is a change of its own"
        );
        assert_eq!(
            decide(Some(&removed), &removal(None, 8), "mine"),
            Decision::Stale,
            "an earlier removal"
        );
        // Removals have no ETag: their sequencers tell them apart. An earlier one delivered
        // late does not take a later one's claim as its own, nor a later one wait for an
        // earlier one's.
        let mut claimed = rec("", Some("0C"), 10, ObjState::Claimed { batch: "b9".into() });
        claimed.operation = Operation::Removed;
        claimed.etag = None;
        assert_eq!(
            decide(Some(&claimed), &removal(Some("0C"), 10), "mine"),
            Decision::ClaimedBy("b9".into())
        );
        assert_eq!(
            decide(Some(&claimed), &removal(Some("03"), 10), "mine"),
            Decision::Stale
        );
        assert_eq!(
            decide(Some(&claimed), &removal(Some("1A"), 10), "mine"),
            Decision::Claim
        );
    }

    #[test]
    fn one_change_per_object_lands_within_a_batch() {
        let mut changes = vec![
            change("e1", None, 10, Operation::Created), // 0: k, v1
            change("E1", None, 10, Operation::Created), // 1: k, v1 again (multipart double)
            change("e0", None, 5, Operation::Created),  // 2: k, an older version, late
            change("e2", None, 20, Operation::Created), // 3: k, a newer version
        ];
        let mut other = change("x", None, 1, Operation::Created);
        other.key = "other".into();
        changes.push(other); // 4
        let got = superseded_in_batch(&changes, 0..changes.len());
        let mut got: Vec<(usize, Decision)> = got.into_iter().collect();
        got.sort_by_key(|(i, _)| *i);
        assert_eq!(
            got,
            [
                (0, Decision::Stale),
                (1, Decision::Stale),
                (2, Decision::Stale)
            ]
        );
        let dup = superseded_in_batch(&changes, [0, 1, 4]);
        assert_eq!(dup.len(), 1);
        assert_eq!(
            dup[&0],
            Decision::Duplicate,
            "the first of two deliveries of v1"
        );
    }

    #[test]
    fn listing_and_event_etags_of_one_version_compare_equal() {
        let staged = ObjState::Staged { batch: "b1".into() };
        // (recorded etag, recorded version id, delivered etag, delivered version id, same?)
        let cases = [
            (
                "\"5d41402abc4b2a76b9719d911017c592\"",
                None,
                "5d41402abc4b2a76b9719d911017c592",
                None,
                true,
            ),
            (
                "5D41402ABC4B2A76B9719D911017C592",
                None,
                "5d41402abc4b2a76b9719d911017c592",
                None,
                true,
            ),
            ("W/\"abc-2\"", None, "ABC-2", None, true),
            ("abc", None, "abc", Some("v1"), true),
            ("abc", Some("v1"), "abc", Some("v2"), false),
            ("abc", None, "abd", None, false),
        ];
        for (rec_etag, rec_version, etag, version, same) in cases {
            let mut r = rec(rec_etag, None, 10, staged.clone());
            r.version_id = rec_version.map(str::to_owned);
            let mut c = change(etag, None, 10, Operation::Created);
            c.version_id = version.map(str::to_owned);
            assert_eq!(
                same_version(&r, &c),
                same,
                "{rec_etag} {rec_version:?} vs {etag} {version:?}"
            );
        }
    }

    /// An append of `size` bytes in all, at time `t`.
    fn append(etag: &str, t: i64, size: u64) -> ObjectChange {
        ObjectChange {
            size: Some(size),
            event_name: "ObjectCreated:AppendObject".into(),
            ..change(etag, None, t, Operation::Created)
        }
    }

    fn sized(mut r: ObjRecord, size: u64, from: Option<u64>) -> ObjRecord {
        r.size = Some(size);
        r.from = from;
        r
    }

    #[test]
    fn appends_land_after_what_landed_and_wait_for_any_claim() {
        let staged = ObjState::Staged { batch: "b1".into() };
        let claimed = |b: &str| ObjState::Claimed { batch: b.into() };
        // Where an append starts: after every byte a finished record accounts for; after what
        // landed before a claim that is being taken over; from the start of a removed object.
        assert_eq!(append_start(None), 0);
        assert_eq!(
            append_start(Some(&sized(rec("e1", None, 10, staged.clone()), 30, None))),
            30
        );
        assert_eq!(
            append_start(Some(&sized(
                rec("e1", None, 10, claimed("b1")),
                30,
                Some(12)
            ))),
            12
        );
        let failed = ObjState::Failed {
            reason: "bad".into(),
        };
        assert_eq!(
            append_start(Some(&sized(rec("e1", None, 10, failed), 30, Some(0)))),
            30
        );
        let mut removed = sized(rec("e1", None, 10, staged.clone()), 30, None);
        removed.operation = Operation::Removed;
        assert_eq!(append_start(Some(&removed)), 0);

        let landed = sized(rec("e1", None, 10, staged.clone()), 30, Some(0));
        // A later append claims; the same one again is a duplicate; one whose bytes landed
        // already (older, or no longer than what landed) is stale.
        assert_eq!(
            decide(Some(&landed), &append("e2", 20, 50), "me"),
            Decision::Claim
        );
        assert_eq!(
            decide(Some(&landed), &append("e1", 10, 30), "me"),
            Decision::Duplicate
        );
        assert_eq!(
            decide(Some(&landed), &append("e0", 5, 20), "me"),
            Decision::Stale
        );
        assert_eq!(
            decide(Some(&landed), &append("e0", 10, 20), "me"),
            Decision::Stale
        );
        // Another batch's claim, of any version, decides first: never claimed over.
        let busy = sized(rec("e1", None, 10, claimed("other")), 30, Some(0));
        assert_eq!(
            decide(Some(&busy), &append("e2", 20, 50), "me"),
            Decision::ClaimedBy("other".into())
        );
        // A listing's sighting of an appended object lands by range too; of any other object,
        // whole, as before.
        let mut listed = append("e2", 20, 50);
        listed.event_name = LISTING_EVENT.into();
        assert!(!listed.is_append());
        assert!(lands_as_append(Some(&landed), &listed));
        assert_eq!(decide(Some(&landed), &listed, "me"), Decision::Claim);
        let put_landed = sized(rec("e1", None, 10, staged.clone()), 30, None);
        assert!(!lands_as_append(Some(&put_landed), &listed));
        assert!(!lands_as_append(None, &listed));
        // (A whole-object write is still decided by version, as before.)
        let mut put = change("e2", None, 20, Operation::Created);
        put.size = Some(50);
        assert_eq!(decide(Some(&busy), &put, "me"), Decision::Claim);
    }
}
