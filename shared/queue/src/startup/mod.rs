//! Startup modes (`scan.startup.mode`): what a source takes from its queue the first time it
//! starts, and how later starts resume.
//!
//! A queue has no offsets. floe defines a position by the message's enqueue time
//! ([`QueueMessage::enqueue_time_ms`](crate::QueueMessage): MNS `EnqueueTime`, SQS
//! `SentTimestamp`) and by what floe has made durable: a message is deleted only after what it
//! produced is staged, so **every message still in the queue is unacknowledged work**. The
//! decision taken at first start is stored in the checkpoint table under `cursor/<source>`
//! ([`cursor`]) and every later start reads it back, so a restart never changes what is
//! skipped.
//!
//! | mode | first start decides | the queue filter ([`QueueFilter::admit`]) |
//! |---|---|---|
//! | `EARLIEST_OFFSET` | nothing to skip | every message is processed |
//! | `LATEST_OFFSET` | `start_ms = now` | a message enqueued before `start_ms` is skipped and deleted; from then on all are processed, including those that arrive while floe is stopped |
//! | `COMMITTED_OFFSET` (default) | with a stored decision: resume it unchanged; without one: as `LATEST_OFFSET` (recorded as such) | as the decision it resumes |
//! | `TIMESTAMP` (+ `scan.startup.timestamp-millis` = T) | `start_ms = T` | a message enqueued before T is skipped and deleted |
//! | `INITIAL` | a listing of the `path` prefixes, started at `L = now`; the queue waits until the listing is marked done | then a message enqueued before L is skipped and deleted (its object was listed, or removed before the listing saw it); later ones are processed. An object seen by both is written once: the pipeline deduplicates by bucket/key/eTag |
//! | `SNAPSHOT` | a listing only | no queue at all: [`StartupDecision::queue_filter`] is `None` and the queue is never touched |
//!
//! "Skip" means the message is deleted without processing ([`Admit::SkipAndDelete`]) so that it
//! does not come back. Skipping compares the queue's clock (enqueue time) with floe's
//! (`start_ms`); a message enqueued within clock skew of the start may land on either side.
//!
//! The committed watermark: the pipeline calls [`cursor::StartupCursor::advance_committed`]
//! with the enqueue time of messages whose work became durable, and the cursor keeps the
//! newest (`committed_ms`), for lag and for operators. It is **not** a filter: a message older
//! than the watermark that is still in the queue failed earlier and is being retried, and
//! skipping it would lose it. (This departs from a literal "resume from the newest committed
//! time": in a queue the unacknowledged messages themselves are the resume position.)
//!
//! Changing the mode of a source that has a stored decision: `COMMITTED_OFFSET` always resumes
//! the stored decision; the mode the decision was made with (or recorded as) is accepted too;
//! any other mode is a configuration error naming `scan.startup.mode`, because it would change
//! what a running source skips. To start over, reset the cursor
//! ([`cursor::StartupCursor::reset`]) and start again with the new mode.
//!
//! ```text
//!            first start                              later starts
//!  config ──▶ decide(now) ──▶ put_if_absent(cursor/<source>) ──▶ stored decision ◀── check config
//!                 │ lost the race to another instance ──▶ read theirs ──▶ check config
//!                 ▼
//!  INITIAL/SNAPSHOT: Listing ──mark_listing_done──▶ INITIAL: Queue   SNAPSHOT: Done
//!  others:           Queue
//! ```

pub mod cursor;
mod decision;

pub use cursor::StartupCursor;
pub use decision::{
    Admit, Listing, Phase, QueueFilter, StartupConfig, StartupDecision, StartupMode, keys,
};
