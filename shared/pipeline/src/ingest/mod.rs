//! Ingest: object changes → routed, claimed, read and written as data files → one staged
//! batch record per batch.
//!
//! - [`route`]: which table (and targets) a change lands in.
//! - [`read`]: reading an object into rows (records, metadata or content) and the schema of a
//!   new table.
//! - [`batch`]: one batch through the protocol, step by step: route, claim (`claims.rs`), read and
//!   write (`write.rs`), stage, mark.

pub mod batch;
mod claims;
pub mod read;
pub mod route;
mod write;

use crate::protocol::Outcome;

/// What a batch did.
#[derive(Debug, Default)]
pub struct BatchReport {
    /// The batch id.
    pub batch: String,
    /// One outcome per input change, in order.
    pub outcomes: Vec<Outcome>,
    /// Rows written.
    pub rows: u64,
    /// Object bytes read.
    pub bytes_read: u64,
    /// Bad records set aside (dead-lettered or skipped).
    pub bad_records: u64,
    /// Dead letters written (bad records and unreadable objects).
    pub dead_letters: u64,
    /// Data files staged.
    pub files: usize,
}

impl BatchReport {
    /// How many outcomes are of a kind, by a predicate.
    pub fn count(&self, f: impl Fn(&Outcome) -> bool) -> usize {
        self.outcomes.iter().filter(|o| f(o)).count()
    }
}

/// What several batches did together (a pass, a queue poll, a backfill call).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BatchTotals {
    /// Changes finished with ([`Outcome::is_done`]).
    pub done: u64,
    /// Rows written.
    pub rows: u64,
    /// Object bytes read.
    pub bytes: u64,
    /// Dead letters written.
    pub dead_letters: u64,
}

impl BatchTotals {
    /// The sums over `batches`.
    pub fn of(batches: &[BatchReport]) -> Self {
        batches
            .iter()
            .fold(BatchTotals::default(), |t, b| BatchTotals {
                done: t.done + b.count(Outcome::is_done) as u64,
                rows: t.rows + b.rows,
                bytes: t.bytes + b.bytes_read,
                dead_letters: t.dead_letters + b.dead_letters,
            })
    }
}
