//! One way to land what any source delivers: [`Pipeline::land`] takes deliveries (the changes
//! of one queue message, one pushed message, one listed or scanned object), ingests them in
//! batches of whole deliveries, and says for each whether it is finished
//! ([`crate::protocol::ack`]): the queue pull loop deletes the finished messages, the push
//! handler answers with the unfinished ones.

use std::ops::Range;
use std::time::{Duration, Instant};

use floe_core::{ObjectChange, Result};

use crate::config::IngestConfig;
use crate::ingest::BatchReport;
use crate::pipeline::Pipeline;
use crate::protocol::ack::{Ack, ack};

/// Changes and the messages (or listed objects) that carried them, kept flat so that a batch is
/// a slice: message `i` carries `changes[ends[i - 1]..ends[i]]`.
#[derive(Clone, Debug, Default)]
pub struct Deliveries {
    changes: Vec<ObjectChange>,
    ends: Vec<usize>,
}

impl Deliveries {
    /// Add a message carrying `changes`.
    pub fn push(&mut self, changes: impl IntoIterator<Item = ObjectChange>) {
        self.changes.extend(changes);
        self.ends.push(self.changes.len());
    }

    /// Messages.
    pub fn len(&self) -> usize {
        self.ends.len()
    }

    /// Whether there is none.
    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// Every change, in order.
    pub fn changes(&self) -> &[ObjectChange] {
        &self.changes
    }

    /// The changes of message `i`.
    pub fn message(&self, i: usize) -> &[ObjectChange] {
        let start = if i == 0 { 0 } else { self.ends[i - 1] };
        &self.changes[start..self.ends[i]]
    }
}

/// The first pause before landing busy deliveries again ([`Pipeline::land_waiting_out_busy`]);
/// it doubles up to [`BUSY_PAUSE_MAX`].
const BUSY_PAUSE: Duration = Duration::from_millis(500);
/// The longest pause between two landings of busy deliveries.
const BUSY_PAUSE_MAX: Duration = Duration::from_secs(8);

/// What [`Pipeline::land`] did.
#[derive(Debug, Default)]
pub struct Landing {
    /// The ingest batches, in order.
    pub batches: Vec<BatchReport>,
    /// One verdict per delivery, in order.
    pub acks: Vec<Ack>,
    /// Deliveries not attempted: the stop came first (their verdict says so).
    pub unattempted: usize,
}

/// An instant no pass reaches: landing without a stop.
pub fn far_future() -> Instant {
    Instant::now() + std::time::Duration::from_secs(100 * 365 * 24 * 3600)
}

/// Batches of whole deliveries: a batch closes before the delivery that would take it past
/// `max_objects` changes or `max_bytes` bytes (a delivery larger than either is a batch alone).
/// `sizes` gives each delivery's (changes, bytes).
pub fn plan_batches(
    sizes: impl IntoIterator<Item = (usize, u64)>,
    max_objects: usize,
    max_bytes: u64,
) -> Vec<Range<usize>> {
    let mut out = Vec::new();
    let (mut start, mut objects, mut bytes) = (0, 0usize, 0u64);
    let mut end = 0;
    for (i, (n, b)) in sizes.into_iter().enumerate() {
        if i > start && (objects + n > max_objects || bytes + b > max_bytes) {
            out.push(start..i);
            (start, objects, bytes) = (i, 0, 0);
        }
        objects += n;
        bytes += b;
        end = i + 1;
    }
    if start < end {
        out.push(start..end);
    }
    out
}

fn bytes_of(changes: &[ObjectChange]) -> u64 {
    changes.iter().map(|c| c.size.unwrap_or(0)).sum()
}

/// The batching options of `[ingest]`: `batch-objects` (at least one) and `batch-bytes`.
fn limits(ingest: &IngestConfig) -> (usize, u64) {
    (ingest.batch_objects.max(1), ingest.batch_bytes)
}

impl Pipeline {
    /// Land `deliveries` in batches of whole deliveries (`ingest.batch-objects`,
    /// `ingest.batch-bytes`), starting no batch at or after `stop_at` and giving back the objects
    /// still reading then (see [`Pipeline::ingest_until`]); see the module doc.
    pub async fn land(&self, deliveries: &Deliveries, stop_at: Instant) -> Result<Landing> {
        self.land_slices(&deliveries.changes, &deliveries.ends, stop_at)
            .await
    }

    /// [`Pipeline::land`] over `changes` split at `ends`: batches are slices, nothing is copied.
    async fn land_slices(
        &self,
        changes: &[ObjectChange],
        ends: &[usize],
        stop_at: Instant,
    ) -> Result<Landing> {
        let start_of = |i: usize| if i == 0 { 0 } else { ends[i - 1] };
        let message = |i: usize| &changes[start_of(i)..ends[i]];
        let (max_objects, max_bytes) = limits(&self.config.ingest);
        let sizes = (0..ends.len()).map(|i| (message(i).len(), bytes_of(message(i))));
        let mut landing = Landing::default();
        for range in plan_batches(sizes, max_objects, max_bytes) {
            if Instant::now() >= stop_at {
                tracing::warn!(
                    left = ends.len() - range.start,
                    "stop time reached: deliveries left unattempted"
                );
                for i in range.start..ends.len() {
                    landing.acks.push(ack(message(i).iter().map(|_| None)));
                    landing.unattempted += 1;
                }
                return Ok(landing);
            }
            let first = start_of(range.start);
            let report = self
                .ingest_until(&changes[first..ends[range.end - 1]], Some(stop_at))
                .await?;
            let mut outcomes = report.outcomes.iter();
            for i in range {
                let n = message(i).len();
                landing.acks.push(ack(outcomes.by_ref().take(n).map(Some)));
            }
            landing.batches.push(report);
        }
        Ok(landing)
    }

    /// [`Pipeline::land`], then the deliveries left only because another live batch holds
    /// their objects are landed again after a pause (half a second, doubling up to 8 s), until
    /// none is left or the next try would start at or after `stop_at`. For a pushed trigger: a
    /// queue hides such a message until the claim can run out, but a trigger's only recourse is
    /// to fail the invocation, and each failure uses up one of its few retries (the holder is
    /// most often a duplicate delivery landing the same object a moment earlier).
    pub async fn land_waiting_out_busy(
        &self,
        deliveries: &Deliveries,
        stop_at: Instant,
    ) -> Result<Landing> {
        let mut landing = self.land(deliveries, stop_at).await?;
        let mut pause = BUSY_PAUSE;
        loop {
            let busy: Vec<usize> = (0..landing.acks.len())
                .filter(|&i| matches!(landing.acks[i], Ack::Leave { busy: true, .. }))
                .collect();
            if busy.is_empty() || Instant::now() + pause >= stop_at {
                return Ok(landing);
            }
            tracing::info!(
                messages = busy.len(),
                pause_ms = pause.as_millis() as u64,
                "objects held by another live batch; landing them again after a pause"
            );
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(BUSY_PAUSE_MAX);
            let mut again = Deliveries::default();
            for &i in &busy {
                again.push(deliveries.message(i).iter().cloned());
            }
            let retried = self.land(&again, stop_at).await?;
            for (&i, ack) in busy.iter().zip(retried.acks) {
                landing.acks[i] = ack;
            }
            landing.batches.extend(retried.batches);
        }
    }

    /// Land `changes` as deliveries of one change each (a scanned or listed object is its own
    /// message), starting no batch at or after `stop_at`.
    pub async fn land_changes(
        &self,
        changes: &[ObjectChange],
        stop_at: Instant,
    ) -> Result<Landing> {
        let ends: Vec<usize> = (1..=changes.len()).collect();
        self.land_slices(changes, &ends, stop_at).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batches_hold_whole_deliveries_within_the_limits() {
        let plan = |sizes: &[(usize, u64)], objects, bytes| {
            plan_batches(sizes.iter().copied(), objects, bytes)
        };
        assert_eq!(plan(&[], 10, 100), Vec::<Range<usize>>::new());
        assert_eq!(plan(&[(1, 1); 5], 2, 100), [0..2, 2..4, 4..5]);
        assert_eq!(
            plan(&[(3, 0), (3, 0), (1, 0)], 4, 100),
            [0..1, 1..3],
            "a message is never split across batches"
        );
        assert_eq!(
            plan(&[(9, 0), (1, 0)], 4, 100),
            [0..1, 1..2],
            "oversized alone"
        );
        assert_eq!(plan(&[(1, 60), (1, 50), (1, 10)], 10, 100), [0..1, 1..3]);
    }
}
