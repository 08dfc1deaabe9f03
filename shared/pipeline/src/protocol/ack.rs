//! What became of each change, and when the message that carried changes may be acknowledged.
//!
//! A message (a queue message, a pushed event, a page of a listing) is finished when every
//! change it carried is [done](Outcome::is_done): what it produced is durable and the
//! committers finish it. Only then is it acknowledged (deleted from its queue, answered as a
//! success); otherwise it is left for redelivery with the reasons why.

use floe_core::{Error, ErrorKind};

/// What became of one change of a batch.
#[derive(Debug)]
pub enum Outcome {
    /// Its rows are staged: durable, the committers finish it.
    Staged,
    /// This version already landed (or failed for good, or was ignored) before.
    Duplicate,
    /// A newer version of the object is already recorded.
    Stale,
    /// Nothing to land: no route took it, or its route makes no rows of a removal.
    Ignored(String),
    /// The object could not be read and went to the dead-letter destination (or was skipped).
    DeadLettered(String),
    /// Another live batch is working on it: try again later.
    Busy,
    /// It failed; `is_retryable()` says whether a later try may succeed.
    Failed(Error),
}

/// Whether an object whose read or write failed is given back, unfinished (its message stays
/// and a later delivery tries it again), rather than set aside under its route's `on-error`.
/// Only a failure of the object itself is set aside: an unknown format, a corrupt stream, a
/// record refused, an object gone. A failure that a later try may not meet (a timeout, a 5xx,
/// a failed write of the destination) or that is the deployment's, lifted without touching the
/// object (a 401 or 403: a bucket policy, an expired token, a missing KMS grant), is given back.
pub fn give_back(e: &Error) -> bool {
    e.is_retryable() || e.kind() == ErrorKind::Auth
}

impl Outcome {
    /// Whether the change is finished with: a message carrying only finished changes can be
    /// acknowledged.
    pub fn is_done(&self) -> bool {
        matches!(
            self,
            Outcome::Staged
                | Outcome::Duplicate
                | Outcome::Stale
                | Outcome::Ignored(_)
                | Outcome::DeadLettered(_)
        )
    }
}

/// Why a change is not finished, or `None` when it is; `None` for the outcome means the
/// change was not attempted (the deadline came first).
pub fn unfinished(outcome: Option<&Outcome>) -> Option<Error> {
    match outcome {
        None => Some(
            Error::new(
                ErrorKind::Deadline,
                "not attempted before the invocation deadline",
            )
            .with_retryable(true),
        ),
        Some(Outcome::Busy) => Some(Error::new(
            ErrorKind::Conflict,
            "another live batch is landing one of its objects",
        )),
        Some(Outcome::Failed(e)) => {
            Some(Error::new(e.kind(), e.to_string()).with_retryable(e.is_retryable()))
        }
        Some(_) => None,
    }
}

/// The verdict on one message.
#[derive(Debug)]
pub enum Ack {
    /// Every change is done: acknowledge it.
    Done,
    /// Leave it for redelivery.
    Leave {
        /// Why, every unfinished change's reason joined; retryable when any of them is.
        why: Error,
        /// Whether a change failed (not merely busy or unattempted): the failure is worth
        /// remembering for the dead letter the message may become.
        failed: bool,
        /// Whether it waits for another batch's live claim and nothing failed: such a delivery
        /// is not the message's fault and must not use up its delivery budget (a crashed
        /// instance's claims look live for `claim-timeout-ms`, however often the queue
        /// redelivers meanwhile).
        busy: bool,
    },
}

/// Judge a message by the outcomes of its changes.
pub fn ack<'a>(outcomes: impl IntoIterator<Item = Option<&'a Outcome>>) -> Ack {
    let mut reasons: Vec<Error> = Vec::new();
    let mut failed = false;
    let mut busy = false;
    for o in outcomes {
        failed |= matches!(o, Some(Outcome::Failed(_)));
        busy |= matches!(o, Some(Outcome::Busy));
        reasons.extend(unfinished(o));
    }
    let Some(first) = reasons.first() else {
        return Ack::Done;
    };
    let retryable = reasons.iter().any(Error::is_retryable);
    let text: Vec<String> = reasons.iter().map(ToString::to_string).collect();
    Ack::Leave {
        why: Error::new(first.kind(), text.join("; ")).with_retryable(retryable),
        failed,
        busy: busy && !failed,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_objects_own_failures_are_set_aside() {
        let denied = Error::new(ErrorKind::Auth, "403 AccessDenied");
        assert!(give_back(&denied), "a permission is the deployment's");
        assert!(give_back(&Error::new(ErrorKind::Io, "connection reset")));
        assert!(give_back(
            &Error::unexpected("writing the data file failed").with_retryable(true)
        ));
        assert!(!give_back(&Error::invalid_input("not json")));
        assert!(!give_back(
            &Error::new(ErrorKind::NotFound, "gone").with_retryable(false)
        ));
    }

    #[test]
    fn a_message_is_done_when_every_change_is() {
        let done = [
            Outcome::Staged,
            Outcome::Duplicate,
            Outcome::Ignored("x".into()),
        ];
        assert!(matches!(ack(done.iter().map(Some)), Ack::Done));
        assert!(matches!(ack([]), Ack::Done), "a message with no changes");
        let busy = [Outcome::Staged, Outcome::Busy];
        let Ack::Leave { why, failed, busy } = ack(busy.iter().map(Some)) else {
            panic!("busy is not done")
        };
        assert!(!failed);
        assert!(busy, "only waiting for another batch's claim");
        assert!(why.is_retryable());
        assert!(why.to_string().contains("another live batch"), "{why}");
        let bad = Outcome::Failed(Error::invalid_input("bad record").with_retryable(false));
        let Ack::Leave { why, failed, busy } = ack([Some(&bad), None]) else {
            panic!("failed is not done")
        };
        assert!(failed);
        assert!(!busy);
        let Ack::Leave { busy, .. } = ack([Some(&bad), Some(&Outcome::Busy)]) else {
            panic!()
        };
        assert!(!busy, "a failure counts, busy or not");
        assert!(
            why.is_retryable(),
            "the unattempted change may succeed later"
        );
        assert_eq!(why.kind(), ErrorKind::InvalidInput);
        assert_eq!(
            why.to_string(),
            "bad record; not attempted before the invocation deadline"
        );
        let Ack::Leave { why, .. } = ack([Some(&bad)]) else {
            panic!()
        };
        assert!(!why.is_retryable());
    }
}
