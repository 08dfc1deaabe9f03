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
mod fanout;
mod prefetch;
pub mod read;
pub mod route;
mod segments;
mod write;

use floe_checkpoint::Version;
use floe_core::{Error, ObjectChange};

use crate::deadletter::DeadLetterWriter;
use crate::protocol::Outcome;
use crate::protocol::records::ObjRecord;

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

/// A claimed change.
pub(crate) struct Claimed {
    pub(crate) idx: usize,
    pub(crate) key: String,
    pub(crate) version: Version,
    /// What the record held before the claim (restored if the object is given back).
    pub(crate) prev: Option<(ObjRecord, Version)>,
    pub(crate) route: usize,
    pub(crate) table: String,
    /// The MaxCompute table name, when the route has a MaxCompute target.
    pub(crate) maxcompute: Option<String>,
}

impl Claimed {
    /// For an append: the offset its rows start at (see [`crate::protocol::claim::append_start`]).
    pub(crate) fn from(&self, change: &ObjectChange) -> Option<u64> {
        use crate::protocol::claim::{append_start, lands_as_append};
        let prev = self.prev.as_ref().map(|(r, _)| r);
        lands_as_append(prev, change).then(|| append_start(prev))
    }
}

/// One batch while it runs: its changes and what became of each, its report and its dead
/// letters.
pub(crate) struct Run<'c> {
    pub(crate) batch: String,
    pub(crate) changes: &'c [ObjectChange],
    pub(crate) outcomes: Vec<Option<Outcome>>,
    pub(crate) report: BatchReport,
    pub(crate) dead: DeadLetterWriter,
    /// No object read goes on past this (the invocation's stop time), when there is one.
    pub(crate) read_until: Option<std::time::Instant>,
    /// The objects being read ahead (see [`prefetch`]).
    pub(crate) prefetch: prefetch::Prefetch,
    /// Tables loaded (or created) while the objects were being claimed, by route and table
    /// (see [`write::Prepared`]); each is taken by the first object that needs it.
    pub(crate) tables: write::Prepared,
}

impl Run<'_> {
    /// The report, with an outcome for every change.
    pub(crate) fn finish(mut self) -> BatchReport {
        self.report.outcomes = finish(self.outcomes);
        self.report
    }

    /// Every claimed change is busy: another instance took the batch over.
    pub(crate) fn abandoned(mut self, claimed: &[Claimed]) -> BatchReport {
        for c in claimed {
            self.outcomes[c.idx] = Some(Outcome::Busy);
        }
        self.report.files = 0;
        self.finish()
    }
}

fn finish(outcomes: Vec<Option<Outcome>>) -> Vec<Outcome> {
    outcomes
        .into_iter()
        .map(|o| {
            o.unwrap_or_else(|| {
                Outcome::Failed(Error::unexpected("change left without an outcome"))
            })
        })
        .collect()
}
