//! The poll function: timer-triggered (EventBridge schedule, FC timer trigger) or called over
//! HTTP; pulls the configured source and stages what it finds until near the deadline.
//!
//! The handler knows the source only as a [`PollSource`]: "pull until this instant, then tell
//! me what you did". [`Pipeline`] implements it by the kind of `[source]`:
//!
//! | source | what a poll does |
//! |---|---|
//! | `local` (a folder) | scans the folder once and lands what changed, batch by batch |
//! | MNS / SQS queue | long-polls the queue with the startup modes, stages, deletes what is durable (`Pipeline::poll_queue`); an `INITIAL` source polls nothing until its listing is done |
//!
//! The source is given the deadline less [`Deps::stop_margin`]: it starts no new receive or
//! batch after it, so messages in flight are staged (or left visible for redelivery) before the
//! platform ends the invocation. Nothing is committed here: the commit function does that.
//!
//! Answer: [`PollReport`] as JSON; `drained: false` means work was left for the next run.

use std::time::Duration;

use floe_core::{Error, ErrorKind, Result};
use floe_pipeline::config::SourceConfig;
use floe_pipeline::sources::queue::PollStop;
use floe_pipeline::{BatchTotals, Pipeline, PollReport as QueuePoll, RunReport};
use floe_runtime::{Deadline, Event, Function, Metric, Metrics, Output};
use serde_json::json;

/// Something that can be pulled until a deadline: see the crate doc.
#[async_trait::async_trait]
pub trait PollSource: Send + Sync + 'static {
    /// Pull and stage until `stop_at` (starting nothing after it); report what was done.
    async fn poll_until(&self, stop_at: Deadline) -> Result<PollReport>;
}

/// What one poll did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PollReport {
    /// Queue messages received (for a folder: changes found).
    pub messages: u64,
    /// Object changes finished with (staged, duplicate, ignored, dead-lettered).
    pub objects: u64,
    /// Messages (or changes) left for a later delivery: failed, busy, or not reached.
    pub failed: u64,
    /// Rows staged.
    pub rows: u64,
    /// Object bytes read.
    pub bytes: u64,
    /// Dead letters written.
    pub dead_letters: u64,
    /// Age of the oldest change handled, in milliseconds, when known.
    pub lag_ms: Option<u64>,
    /// Whether the source had nothing left when the poll stopped.
    pub drained: bool,
}

impl PollReport {
    /// The report of a local-folder pass.
    pub fn from_run(run: &RunReport, drained: bool) -> Self {
        let t = BatchTotals::of(&run.batches);
        PollReport {
            messages: run.changes as u64,
            objects: t.done,
            failed: run.changes as u64 - t.done,
            rows: t.rows,
            bytes: t.bytes,
            dead_letters: t.dead_letters,
            lag_ms: None,
            drained: drained && run.failures().is_empty(),
        }
    }

    /// The report of a queue poll ([`Pipeline::poll_queue`]). An `INITIAL` source whose listing
    /// is unfinished has polled nothing and is not drained; a `SNAPSHOT` source never polls.
    pub fn from_queue(q: &QueuePoll) -> Self {
        let t = BatchTotals::of(&q.batches);
        PollReport {
            messages: q.received as u64,
            objects: t.done,
            failed: q.left as u64,
            rows: t.rows,
            bytes: t.bytes,
            dead_letters: t.dead_letters + q.dead_lettered as u64,
            lag_ms: None,
            drained: matches!(q.stop, PollStop::Drained | PollStop::Snapshot) && q.left == 0,
        }
    }

    fn record(&self, m: &Metrics) {
        m.count(Metric::Messages, self.messages);
        m.count(Metric::Objects, self.objects);
        m.count(Metric::Failed, self.failed);
        m.count(Metric::Rows, self.rows);
        m.count(Metric::Bytes, self.bytes);
        m.count(Metric::DeadLetters, self.dead_letters);
        if let Some(lag) = self.lag_ms {
            m.count(Metric::Lag, lag);
        }
    }
}

#[async_trait::async_trait]
impl PollSource for Pipeline {
    async fn poll_until(&self, stop_at: Deadline) -> Result<PollReport> {
        match &self.config().source {
            SourceConfig::Local { .. } => {
                let (run, complete) = self.ingest_local_until(stop_at.instant(), &[]).await?;
                Ok(PollReport::from_run(&run, complete))
            }
            SourceConfig::Cloud(_) => {
                let q = self.poll_queue(stop_at.instant()).await?;
                Ok(PollReport::from_queue(&q))
            }
        }
    }
}

/// What the poll function needs, built once per process.
#[derive(Debug)]
pub struct Deps<S = Pipeline> {
    /// What is pulled.
    pub source: S,
    /// Nothing new starts this long before the deadline (default 10 s: one long poll of up to
    /// `polling-wait-time` (≤ 30 s) is not started in it either, see the queue options).
    pub stop_margin: Duration,
}

impl<S> Deps<S> {
    /// Defaults around `source`.
    pub fn new(source: S) -> Self {
        Deps {
            source,
            stop_margin: Duration::from_secs(10),
        }
    }
}

#[async_trait::async_trait]
impl<S: PollSource> Function for Deps<S> {
    async fn call(&self, event: Event) -> Result<Output> {
        handle(event, self).await
    }
}

/// Handle one invocation; see the crate doc. The event's content is not used.
pub async fn handle<S: PollSource>(event: Event, deps: &Deps<S>) -> Result<Output> {
    let ctx = &event.context;
    let stop_at = ctx.deadline.with_margin(deps.stop_margin);
    if stop_at.remaining().is_zero() {
        return Err(
            Error::new(ErrorKind::Deadline, "too little time left to start polling")
                .with_retryable(true),
        );
    }
    let report = deps.source.poll_until(stop_at).await?;
    report.record(&ctx.metrics);
    tracing::info!(
        messages = report.messages,
        objects = report.objects,
        rows = report.rows,
        drained = report.drained,
        "poll finished"
    );
    Ok(Output::Json(json!({
        "messages": report.messages,
        "objects": report.objects,
        "failed": report.failed,
        "rows": report.rows,
        "bytes": report.bytes,
        "dead_letters": report.dead_letters,
        "lag_ms": report.lag_ms,
        "drained": report.drained,
    })))
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;
    use floe_runtime::Invocation;

    /// A source that records the deadline it was given and answers as told.
    struct Fake {
        seen: Mutex<Option<Deadline>>,
        answer: fn() -> Result<PollReport>,
    }

    #[async_trait::async_trait]
    impl PollSource for Fake {
        async fn poll_until(&self, stop_at: Deadline) -> Result<PollReport> {
            *self.seen.lock().unwrap() = Some(stop_at);
            (self.answer)()
        }
    }

    fn deps(answer: fn() -> Result<PollReport>) -> Deps<Fake> {
        Deps::new(Fake {
            seen: Mutex::new(None),
            answer,
        })
    }

    fn event(secs: u64) -> Event {
        Event::payload(
            r#"{"source":"aws.events","detail-type":"Scheduled Event"}"#,
            Invocation::new("req", "poll", Deadline::after(Duration::from_secs(secs))),
        )
    }

    #[tokio::test]
    async fn the_source_gets_the_deadline_less_the_margin_and_its_report_is_answered() {
        let d = deps(|| {
            Ok(PollReport {
                messages: 4,
                objects: 3,
                failed: 1,
                rows: 30,
                bytes: 900,
                dead_letters: 1,
                lag_ms: Some(1200),
                drained: false,
            })
        });
        let e = event(60);
        let metrics = e.context.metrics.clone();
        let Output::Json(v) = handle(e, &d).await.unwrap() else {
            panic!("expected json")
        };
        assert_eq!(v["rows"], 30);
        assert_eq!(v["drained"], false);
        assert_eq!(v["lag_ms"], 1200);
        let stop_at = d.source.seen.lock().unwrap().unwrap();
        let left = stop_at.remaining();
        assert!(
            left <= Duration::from_secs(50) && left > Duration::from_secs(48),
            "{left:?}"
        );
        assert_eq!(metrics.get(Metric::Rows), Some(30.0));
        assert_eq!(metrics.get(Metric::Lag), Some(1200.0));
        assert_eq!(metrics.get(Metric::Failed), Some(1.0));
    }

    #[tokio::test]
    async fn too_little_time_is_a_retryable_deadline_error_without_polling() {
        let d = deps(|| Ok(PollReport::default()));
        let err = handle(event(5), &d).await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Deadline);
        assert!(err.is_retryable());
        assert!(d.source.seen.lock().unwrap().is_none());
    }

    #[tokio::test]
    async fn source_errors_keep_their_retryability() {
        let d = deps(|| Err(Error::new(ErrorKind::Throttled, "queue throttled")));
        let err = handle(event(60), &d).await.unwrap_err();
        assert!(err.is_retryable());
        let d = deps(|| Err(Error::new(ErrorKind::Auth, "signature refused")));
        assert!(!handle(event(60), &d).await.unwrap_err().is_retryable());
    }
}
