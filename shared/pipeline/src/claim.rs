//! Deciding what to do with an object change given what the checkpoint table remembers of it.

use floe_core::{ObjectChange, Operation, compare_sequencers_opt};

use crate::keys::{ObjRecord, ObjState};

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

/// Whether `change` is the version `rec` describes.
pub fn same_version(rec: &ObjRecord, change: &ObjectChange) -> bool {
    rec.operation == change.operation
        && rec.etag == change.etag
        && rec.version_id == change.version_id
}

/// Whether `change` happened before what `rec` describes (sequencers first, then event times).
pub fn is_older(rec: &ObjRecord, change: &ObjectChange) -> bool {
    if let Some(ord) = compare_sequencers_opt(change.sequencer.as_deref(), rec.sequencer.as_deref())
    {
        return ord.is_lt();
    }
    match (change.event_time, rec.event_time_ms) {
        (Some(t), Some(r)) => t.timestamp_millis() < r,
        _ => false,
    }
}

/// Decide for `change` given the record (if any) and this batch's id.
pub fn decide(existing: Option<&ObjRecord>, change: &ObjectChange, my_batch: &str) -> Decision {
    let Some(rec) = existing else {
        return Decision::Claim;
    };
    if same_version(rec, change) {
        return match &rec.state {
            ObjState::Claimed { batch } if batch == my_batch => Decision::Claim,
            ObjState::Claimed { batch } => Decision::ClaimedBy(batch.clone()),
            ObjState::Staged { .. } | ObjState::Failed { .. } | ObjState::Ignored { .. } => {
                Decision::Duplicate
            }
        };
    }
    // A removal of an object never seen created, or of one already removed, is nothing new.
    if change.operation == Operation::Removed && rec.operation == Operation::Removed {
        return Decision::Duplicate;
    }
    if is_older(rec, change) {
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
        let mut rm = change("x", None, 12, Operation::Removed);
        rm.etag = None;
        assert_eq!(decide(Some(&removed), &rm, "mine"), Decision::Duplicate);
    }
}
