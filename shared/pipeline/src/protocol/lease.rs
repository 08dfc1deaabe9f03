//! The commit lease: one committer per target at a time, for a bounded time.

use super::records::{Lease, Owner};

/// A lease for `owner` until `lease_ms` from now.
pub fn lease(owner: &Owner, now_ms: i64, lease_ms: u64) -> Lease {
    Lease {
        owner: owner.clone(),
        until_ms: now_ms + lease_ms as i64,
    }
}

/// What to do about a lease someone holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Held {
    /// Delete it (compare-and-set on its version) and take the lease: it is this owner's own
    /// (an earlier pass that did not release it), or its holder is known dead.
    Replace,
    /// Another live committer has it: skip the target for now.
    Busy,
}

/// Judge the lease `held` for `me` (`holder_dead`: its holder is a process known to be gone).
pub fn judge(held: &Lease, me: &Owner, holder_dead: bool) -> Held {
    if holder_dead || &held.owner == me {
        Held::Replace
    } else {
        Held::Busy
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lease_is_replaced_only_when_ours_or_dead() {
        let me = Owner {
            host: "h".into(),
            pid: 1,
            run: "a".into(),
            pid_space: None,
        };
        let other = Owner {
            run: "b".into(),
            ..me.clone()
        };
        let l = lease(&other, 100, 50);
        assert_eq!(l.until_ms, 150);
        assert_eq!(judge(&l, &me, false), Held::Busy);
        assert_eq!(judge(&l, &me, true), Held::Replace);
        assert_eq!(judge(&lease(&me, 0, 1), &me, false), Held::Replace);
    }
}
