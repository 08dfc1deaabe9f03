//! Running the pipeline on the local folder source: one pass, or continuously.

use std::time::Duration;

use floe_core::Result;

use crate::config::SourceConfig;
use crate::ingest::BatchReport;
use crate::pipeline::Pipeline;
use crate::protocol::Outcome;
use crate::sources::land::far_future;
use crate::sources::{BackfillReport, PollReport};
use crate::targets::commit::CommitReport;

/// Totals of a pass.
#[derive(Debug, Default)]
pub struct RunReport {
    /// Changes found by the scan.
    pub changes: usize,
    /// Files unchanged since they landed.
    pub unchanged: usize,
    /// One report per ingest batch.
    pub batches: Vec<BatchReport>,
    /// The commit pass.
    pub commits: CommitReport,
    /// The listing, for a cloud source that lists (its batches are in `batches`).
    pub backfill: Option<BackfillReport>,
    /// The queue, for a queue source (its batches are in `batches`).
    pub queue: Option<PollReport>,
}

impl RunReport {
    /// Changes with an outcome matching `f`, over all batches.
    pub fn count(&self, f: impl Fn(&Outcome) -> bool + Copy) -> usize {
        self.batches.iter().map(|b| b.count(f)).sum()
    }

    /// Rows staged by the batches.
    pub fn rows(&self) -> u64 {
        self.batches.iter().map(|b| b.rows).sum()
    }

    /// Bad records set aside.
    pub fn bad_records(&self) -> u64 {
        self.batches.iter().map(|b| b.bad_records).sum()
    }

    /// Dead letters written.
    pub fn dead_letters(&self) -> u64 {
        self.batches.iter().map(|b| b.dead_letters).sum()
    }

    /// Changes and commits that failed (retried on the next pass).
    pub fn failures(&self) -> Vec<String> {
        let changes = self
            .batches
            .iter()
            .flat_map(|b| b.outcomes.iter())
            .filter_map(|o| match o {
                Outcome::Failed(e) => Some(e.to_string()),
                _ => None,
            });
        let commits =
            (self.commits.failed.iter()).map(|f| format!("commit to {}: {}", f.target, f.error));
        changes.chain(commits).collect()
    }
}

impl Pipeline {
    /// One pass: scan, ingest in batches, then commit everything staged (`commit_now`), or what
    /// is due.
    pub async fn run_once(&self, commit_now: bool) -> Result<RunReport> {
        if self.cloud.is_some() {
            return self.run_cloud_once(commit_now).await;
        }
        let scan = self.scan_local().await?;
        let mut report = RunReport {
            changes: scan.changes.len(),
            unchanged: scan.unchanged,
            ..Default::default()
        };
        report.batches = self
            .land_changes(&scan.changes, far_future())
            .await?
            .batches;
        report.commits = self.commit(commit_now).await?;
        Ok(report)
    }

    /// Land what changed in the local folder source under `prefixes` (all the source's when
    /// empty), batch by batch, starting no batch after `stop_at`; nothing is committed. Returns
    /// the report and whether every change found was attempted (false: the rest waits for the
    /// next pass). The functions' local-source poll and backfill.
    pub async fn ingest_local_until(
        &self,
        stop_at: std::time::Instant,
        prefixes: &[String],
    ) -> Result<(RunReport, bool)> {
        let mut scan = self.scan_local().await?;
        if !prefixes.is_empty() {
            scan.changes
                .retain(|c| prefixes.iter().any(|p| c.key.starts_with(p.as_str())));
        }
        let mut report = RunReport {
            changes: scan.changes.len(),
            unchanged: scan.unchanged,
            ..Default::default()
        };
        let landing = self.land_changes(&scan.changes, stop_at).await?;
        report.batches = landing.batches;
        Ok((report, landing.unattempted == 0))
    }

    /// Run until `stop` resolves: rescan every `poll-interval-ms`, commit when due. Calls
    /// `on_pass` after each pass. Staged work is committed before returning.
    pub async fn watch<F, S>(&self, mut on_pass: F, stop: S) -> Result<()>
    where
        F: FnMut(&RunReport),
        S: std::future::Future<Output = ()>,
    {
        let poll_interval_ms = match &self.config.source {
            SourceConfig::Local {
                poll_interval_ms, ..
            } => poll_interval_ms,
            SourceConfig::Cloud(_) => return self.watch_cloud(on_pass, stop).await,
        };
        let poll = Duration::from_millis(*poll_interval_ms);
        tokio::pin!(stop);
        loop {
            let report = self.run_once(false).await?;
            on_pass(&report);
            tokio::select! {
                _ = &mut stop => break,
                _ = tokio::time::sleep(poll) => {}
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
