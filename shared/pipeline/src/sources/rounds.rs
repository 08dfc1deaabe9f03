//! `floe run` over a cloud source.
//!
//! - One pass ([`Pipeline::run_once`](crate::Pipeline::run_once)): the listing while one is in
//!   progress (to its end), then the queue until a receive comes back empty, then a commit.
//! - Continuously ([`Pipeline::watch`](crate::Pipeline::watch)): the same in rounds of at most
//!   `commit.interval-ms`, committing what is due after each round, until asked to stop; the
//!   stop is honoured between rounds, never in the middle of a batch. Retryable errors (the
//!   network, throttling) are logged and the next round tries again.

use std::time::{Duration, Instant};

use std::sync::Arc;

use floe_core::retry::{Retry, RetryPolicy};
use floe_core::{Error, Result};
use futures::FutureExt;

use super::CloudSource;
use super::land::far_future;
use crate::passes::RunReport;
use crate::pipeline::Pipeline;
use crate::sources::backfill::BackfillStop;
use crate::sources::queue::PollStop;

/// The waits after rounds that failed with a retryable error: 1 s doubling to a minute, for as
/// long as they keep failing.
const ROUND_RETRY: RetryPolicy = RetryPolicy::new(Duration::from_secs(1), Duration::from_secs(60));

impl Pipeline {
    /// The cloud source, or an error saying the configuration has none.
    pub fn cloud_source(&self) -> Result<&Arc<CloudSource>> {
        self.cloud.as_ref().ok_or_else(|| {
            Error::config(
                "source.type",
                "this needs a bucket or queue source (s3, oss, mns or sqs), not a local folder",
            )
        })
    }

    /// One round until `deadline`: listing (while in progress), then the queue.
    async fn cloud_round(&self, deadline: Instant) -> Result<RunReport> {
        let src = self.cloud_source()?.clone();
        let mut report = RunReport::default();
        if src.config.lists() {
            let mut b = self.backfill(deadline).await?;
            report.changes += b.listed as usize;
            report.batches.append(&mut b.batches);
            report.backfill = Some(b);
        }
        if src.poller.is_some() {
            let mut p = self.poll_queue(deadline).await?;
            report.changes += p.changes;
            report.batches.append(&mut p.batches);
            report.queue = Some(p);
        }
        Ok(report)
    }

    /// `floe run` (one pass) over a cloud source; see the module doc.
    pub(crate) async fn run_cloud_once(&self, commit_now: bool) -> Result<RunReport> {
        let mut report = self.cloud_round(far_future()).await?;
        report.commits = self.commit(commit_now).await?;
        Ok(report)
    }

    /// `floe run --watch` over a cloud source; see the module doc.
    pub(crate) async fn watch_cloud<F, S>(&self, mut on_pass: F, stop: S) -> Result<()>
    where
        F: FnMut(&RunReport),
        S: std::future::Future<Output = ()>,
    {
        let src = self.cloud_source()?.clone();
        let wait = src.config.options.polling_wait;
        // A round lasts a commit interval, but always long enough for a long poll and a batch
        // (poll_queue keeps a second in reserve before its deadline).
        let round = Duration::from_millis(self.config.commit.interval_ms)
            .max(wait + Duration::from_secs(2));
        let idle = Duration::from_secs(1);
        tokio::pin!(stop);
        let mut retry = Retry::new(ROUND_RETRY);
        loop {
            let started = Instant::now();
            let mut rested = false;
            match self.cloud_round(started + round).await {
                Ok(mut report) => {
                    retry = Retry::new(ROUND_RETRY);
                    report.commits = self.commit(false).await?;
                    on_pass(&report);
                    let finished_snapshot = report.backfill.as_ref().is_some_and(|b| {
                        matches!(b.stop, BackfillStop::Done | BackfillStop::NotListing)
                    }) && report
                        .queue
                        .as_ref()
                        .is_none_or(|q| q.stop == PollStop::Snapshot);
                    if finished_snapshot {
                        tracing::info!("the snapshot listing is done: nothing more to watch");
                        break;
                    }
                    // Nothing was pulled (the listing failed, INITIAL waits for it, or the queue
                    // is empty and the long poll is too short to pace the loop): rest.
                    let waiting = report.queue.as_ref().is_none_or(|q| {
                        matches!(q.stop, PollStop::Listing | PollStop::Snapshot)
                            || (q.stop == PollStop::Drained && wait < idle)
                    }) || report
                        .backfill
                        .as_ref()
                        .is_some_and(|b| b.stop == BackfillStop::Failures);
                    if waiting {
                        rested = true;
                        tokio::select! {
                            _ = &mut stop => break,
                            _ = tokio::time::sleep(idle) => {}
                        }
                    }
                }
                Err(e) => {
                    let shown = e.to_string();
                    let delay = retry.next_delay(e)?;
                    tracing::warn!(error = %shown, retry_in = ?delay, "round failed; trying again");
                    rested = true;
                    tokio::select! {
                        _ = &mut stop => break,
                        _ = retry.sleep(delay) => {}
                    }
                }
            }
            if !rested && (&mut stop).now_or_never().is_some() {
                break;
            }
        }
        let commits = self.commit(true).await?;
        on_pass(&RunReport {
            commits,
            ..Default::default()
        });
        Ok(())
    }
}
