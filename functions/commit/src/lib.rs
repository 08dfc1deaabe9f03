//! The commit function: timer-triggered (EventBridge schedule, FC timer trigger), or called over
//! HTTP; commits what ingest staged, one snapshot per table, within the invocation's deadline.
//!
//! The event's content does not matter, except `"force": true` (in the event, in an FC timer
//! trigger's `payload`, or `?force=true` over HTTP), which commits every table now instead of
//! only those due (`commit.interval-ms`, `commit.max-files`, `commit.max-bytes`), and
//! `"maintain": true` (same places), which maintains every table of the catalog instead
//! (`floe maintain`'s compaction, snapshot expiry and orphan-file removal, with its defaults;
//! see `floe_pipeline::targets::maintain`):
//! the templates deploy this binary a second time as the `maintain` function, on its own timer
//! with that payload and a longer timeout.
//!
//! The commit runs until [`Deps::stop_margin`] before the deadline. A commit stopped there
//! is the protocol's crash at that step: the next run finishes it (see `floe_pipeline`), and the
//! table lease it held is taken over by this process at once, by others when it expires.
//!
//! Answer: `{"maintained":[{"table","files_rewritten","files_written",…}]}` for maintenance,
//! else `{"commits":[{"target","commit_id","snapshot_id","batches","files","rows",
//! "recovered"}],"busy":[…],"waiting":[…]}`.

use std::time::Duration;

use floe_core::{Error, ErrorKind, Result};
use floe_pipeline::Pipeline;
use floe_runtime::{Event, Function, Input, Metric, Output};
use serde_json::{Value, json};

/// What the commit function needs, built once per process.
#[derive(Debug)]
pub struct Deps {
    /// The pipeline.
    pub pipeline: Pipeline,
    /// The commit stops this long before the deadline (default 5 s).
    pub stop_margin: Duration,
}

impl Deps {
    /// Defaults around `pipeline`.
    pub fn new(pipeline: Pipeline) -> Self {
        Deps {
            pipeline,
            stop_margin: Duration::from_secs(5),
        }
    }
}

#[async_trait::async_trait]
impl Function for Deps {
    async fn call(&self, event: Event) -> Result<Output> {
        handle(event, self).await
    }
}

/// Whether the event asks to commit every table now.
pub fn wants_force(event: &Event) -> bool {
    flag(event, "force")
}

/// Whether the event asks for maintenance instead of a commit.
pub fn wants_maintain(event: &Event) -> bool {
    flag(event, "maintain")
}

/// Whether `name` is true in the event, in an FC timer trigger's payload, or in the query.
fn flag(event: &Event, name: &str) -> bool {
    if let Input::Http(r) = &event.input
        && r.query_pairs()
            .iter()
            .any(|(k, v)| k == name && (v == "true" || v == "1"))
    {
        return true;
    }
    let Ok(doc) = event.json_body() else {
        return false;
    };
    let set = |v: &Value| v.get(name).and_then(Value::as_bool) == Some(true);
    if set(&doc) {
        return true;
    }
    // FC timer trigger: {"triggerTime","triggerName","payload":"<the trigger's message>"}.
    doc.get("payload")
        .and_then(Value::as_str)
        .and_then(|p| serde_json::from_str::<Value>(p).ok())
        .is_some_and(|p| set(&p))
}

/// Maintain every table within `budget`; see the crate doc.
async fn maintain(deps: &Deps, budget: Duration) -> Result<Output> {
    let opts = floe_pipeline::targets::maintain::MaintainOptions::default();
    let done = tokio::time::timeout(budget, deps.pipeline.maintain_all(&opts))
        .await
        .map_err(|_| {
            Error::new(
                ErrorKind::Deadline,
                "maintenance stopped at the invocation deadline; the next run finishes it",
            )
            .with_retryable(true)
        })??;
    for t in &done {
        tracing::info!(table = %t.table, files_rewritten = t.files_rewritten, files_written = t.files_written, snapshots_expired = t.snapshots_expired, records_moved = t.records_moved, orphans = ?t.orphans, skipped = ?t.skipped, "table maintained");
    }
    let maintained = serde_json::to_value(&done)
        .map_err(|e| Error::unexpected(format!("maintenance report: {e}")))?;
    Ok(Output::Json(json!({ "maintained": maintained })))
}

/// Handle one invocation; see the crate doc.
pub async fn handle(event: Event, deps: &Deps) -> Result<Output> {
    let ctx = &event.context;
    let force = wants_force(&event);
    let budget = ctx.deadline.with_margin(deps.stop_margin).remaining();
    if budget.is_zero() {
        return Err(Error::new(
            ErrorKind::Deadline,
            "too little time left to start a commit",
        )
        .with_retryable(true));
    }
    if wants_maintain(&event) {
        return maintain(deps, budget).await;
    }
    let report = tokio::time::timeout(budget, deps.pipeline.commit(force))
        .await
        .map_err(|_| {
            Error::new(
                ErrorKind::Deadline,
                "commit stopped at the invocation deadline; the next run finishes it",
            )
            .with_retryable(true)
        })??;
    ctx.metrics
        .count(Metric::Commits, report.commits.len() as u64);
    ctx.metrics.count(
        Metric::Rows,
        report.commits.iter().map(|c| c.rows).sum::<u64>(),
    );
    for c in &report.commits {
        tracing::info!(target_id = %c.target, commit_id = %c.commit_id, snapshot_id = c.snapshot_id, rows = c.rows, bad_rows = c.bad_rows, recovered = c.recovered, "target committed");
    }
    let commits: Vec<Value> = report
        .commits
        .iter()
        .map(|c| {
            json!({
                "target": c.target,
                "commit_id": c.commit_id,
                "snapshot_id": c.snapshot_id,
                "batches": c.batches,
                "files": c.files,
                "rows": c.rows,
                "bad_rows": c.bad_rows,
                "recovered": c.recovered,
            })
        })
        .collect();
    let failed: Vec<Value> = (report.failed.iter())
        .map(|f| json!({"target": f.target, "error": f.error.to_string()}))
        .collect();
    Ok(Output::Json(json!({
        "commits": commits,
        "busy": report.busy,
        "waiting": report.waiting,
        "failed": failed,
        "purged": report.purged,
    })))
}

#[cfg(test)]
mod tests {
    use super::*;
    use floe_runtime::{Deadline, HttpRequest, Invocation};

    fn event(input: Input) -> Event {
        Event {
            input,
            context: Invocation::new("r", "commit", Deadline::after(Duration::from_secs(60))),
        }
    }

    #[test]
    fn force_comes_from_the_event_the_timer_payload_or_the_query() {
        let schedule = r#"{"version":"0","id":"1","detail-type":"Scheduled Event","source":"aws.events","detail":{}}"#;
        let fc_timer = r#"{"triggerTime":"2025-01-15T08:00:00Z","triggerName":"commit","payload":"{\"force\":true}"}"#;
        for (input, force) in [
            (Input::Payload(schedule.into()), false),
            (Input::Payload(r#"{"force":true}"#.into()), true),
            (Input::Payload(fc_timer.into()), true),
            (Input::Payload("not json".into()), false),
            (Input::Payload("".into()), false),
            (
                Input::Http(HttpRequest {
                    method: "POST".into(),
                    query: "force=true".into(),
                    ..Default::default()
                }),
                true,
            ),
        ] {
            let e = event(input);
            assert_eq!(wants_force(&e), force, "{:?}", e.input);
            assert!(!wants_maintain(&e), "{:?}", e.input);
        }
        let maintain = r#"{"triggerTime":"2026-12-02T06:00:00Z","triggerName":"maintain","payload":"{\"maintain\":true}"}"#;
        let e = event(Input::Payload(maintain.into()));
        assert!(wants_maintain(&e) && !wants_force(&e));
        assert!(wants_maintain(&event(Input::Payload(
            r#"{"maintain":true}"#.into()
        ))));
    }
}
