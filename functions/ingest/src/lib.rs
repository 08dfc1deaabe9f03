//! The ingest function: object events pushed by a trigger land as staged rows.
//!
//! | payload | from | answer |
//! |---|---|---|
//! | `{"events":[…]}` | FC OSS trigger | summary; error if any change is not finished |
//! | MNS queue / topic trigger envelopes, or a raw / base64 MNS body | FC MNS trigger | as above |
//! | `{"Records":[…s3…]}` | Lambda S3 notification | as above |
//! | `{"Records":[…sqs…]}` | Lambda SQS event source | `{"batchItemFailures":[{"itemIdentifier":id},…]}` |
//! | any of these as an HTTP request body | FC HTTP trigger, function URL | as for the payload |
//!
//! A message is finished when every change it carried is [`Outcome::is_done`] (the kernel's
//! [`ack`] decides, as it does for the pull loop) (staged,
//! duplicate, stale, ignored, dead-lettered): its rows are durable and the committer finishes
//! them. SQS answers name only the unfinished messages, so the queue redelivers just those (a
//! message that keeps failing reaches the queue's dead-letter queue after its redrive
//! policy's `maxReceiveCount`). Other triggers have no partial answer: any unfinished change
//! fails the invocation, `Retryable` when a later try can succeed (busy object, network,
//! deadline), else `NonRetryable`; redelivered changes already staged are duplicates.
//!
//! Messages are read by the event model (`floe_core::event::pushed_messages`, FC's MNS
//! envelopes included) and landed by `Pipeline::land`, the pull loop's way too: batches of whole
//! messages (`ingest.batch-objects`, `ingest.batch-bytes`), none started within
//! [`Deps::stop_margin`] of the deadline; the messages left are answered as unfinished. Messages
//! whose objects another live batch holds are landed again after a pause while time is left
//! (`Pipeline::land_waiting_out_busy`): a trigger cannot hide them as a queue does.

use std::time::Duration;

use floe_core::event::{ParseOptions, pushed_messages};
use floe_core::{Error, Result};
use floe_pipeline::protocol::ack::Ack;
use floe_pipeline::sources::land::{Deliveries, Landing};
use floe_pipeline::{Outcome, Pipeline};
use floe_runtime::{Event, Function, Metric, Output};
use serde_json::{Value, json};

/// What the ingest function needs, built once per process.
#[derive(Debug)]
pub struct Deps {
    /// The pipeline.
    pub pipeline: Pipeline,
    /// How payloads are read (whether OSS keys are URL-encoded).
    pub parse: ParseOptions,
    /// No batch starts when less than this is left before the deadline (default 5 s).
    pub stop_margin: Duration,
}

impl Deps {
    /// Defaults around `pipeline`.
    pub fn new(pipeline: Pipeline) -> Self {
        Deps {
            pipeline,
            parse: ParseOptions::default(),
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

/// Handle one invocation; see the crate doc.
pub async fn handle(event: Event, deps: &Deps) -> Result<Output> {
    let ctx = &event.context;
    let messages = pushed_messages(event.body(), &deps.parse)?;
    let sqs = messages.iter().any(|m| m.sqs);
    ctx.metrics.count(Metric::Messages, messages.len() as u64);

    // The readable messages are delivered; each keeps its place among the messages.
    let mut deliveries = Deliveries::default();
    let mut delivered = Vec::with_capacity(messages.len());
    for m in &messages {
        for (name, reason) in &m.ignored {
            tracing::info!(event_name = %name, reason, "event ignored");
        }
        match &m.changes {
            Ok(c) => {
                delivered.push(Some(deliveries.len()));
                deliveries.push(c.iter().cloned());
            }
            Err(e) => {
                tracing::warn!(message_id = m.id.as_deref().unwrap_or("-"), error = %e, "message unreadable");
                delivered.push(None);
            }
        }
    }
    let changes = deliveries.changes().len();
    if let Some(lag) = deliveries
        .changes()
        .iter()
        .filter_map(|c| c.event_time)
        .min()
        .map(|t| (chrono::Utc::now() - t).num_milliseconds().max(0))
    {
        ctx.metrics.record(Metric::Lag, lag as f64);
    }

    // Land in batches of whole messages, none started too close to the deadline.
    let stop_at = ctx.deadline.with_margin(deps.stop_margin).instant();
    let mut landing = deps
        .pipeline
        .land_waiting_out_busy(&deliveries, stop_at)
        .await?;
    let mut summary = Summary::default();
    for report in &landing.batches {
        summary.add(report);
    }
    summary.record(&ctx.metrics, &landing);

    // Judge each message.
    let mut failed: Vec<(Option<String>, Error)> = Vec::new();
    for (m, slot) in messages.iter().zip(&delivered) {
        let problem = match (slot, &m.changes) {
            (None, Err(e)) => {
                Some(Error::new(e.kind(), e.to_string()).with_retryable(e.is_retryable()))
            }
            (Some(i), _) => match std::mem::replace(&mut landing.acks[*i], Ack::Done) {
                Ack::Done => None,
                Ack::Leave { why, .. } => Some(why),
            },
            (None, Ok(_)) => None,
        };
        if let Some(e) = problem {
            failed.push((m.id.clone(), e));
        }
    }
    ctx.metrics.count(Metric::Failed, failed.len() as u64);

    if sqs {
        let items: Vec<Value> = failed
            .iter()
            .filter_map(|(id, e)| {
                tracing::warn!(message_id = id.as_deref().unwrap_or("-"), error = %e, "message left for redelivery");
                id.as_ref().map(|id| json!({"itemIdentifier": id}))
            })
            .collect();
        return Ok(Output::Json(json!({ "batchItemFailures": items })));
    }
    if let Some((_, first)) = failed.first() {
        let retryable = failed.iter().any(|(_, e)| e.is_retryable());
        return Err(Error::new(
            first.kind(),
            format!(
                "{} of {} messages not finished; first: {first}",
                failed.len(),
                messages.len()
            ),
        )
        .with_retryable(retryable));
    }
    Ok(Output::Json(summary.to_json(messages.len(), changes)))
}

/// Totals over the batches of one invocation.
#[derive(Debug, Default)]
struct Summary {
    batches: Vec<String>,
    rows: u64,
    bytes: u64,
    dead_letters: u64,
    bad_records: u64,
}

impl Summary {
    fn add(&mut self, r: &floe_pipeline::BatchReport) {
        self.batches.push(r.batch.clone());
        self.rows += r.rows;
        self.bytes += r.bytes_read;
        self.dead_letters += r.dead_letters;
        self.bad_records += r.bad_records;
    }

    fn record(&self, metrics: &floe_runtime::Metrics, landing: &Landing) {
        let outcomes: Vec<&Outcome> = landing
            .batches
            .iter()
            .flat_map(|b| b.outcomes.iter())
            .collect();
        let done = outcomes.iter().filter(|o| o.is_done()).count();
        metrics.count(Metric::Objects, done as u64);
        metrics.count(Metric::Rows, self.rows);
        metrics.count(Metric::Bytes, self.bytes);
        metrics.count(Metric::DeadLetters, self.dead_letters);
        self.count_outcomes(&outcomes);
    }

    fn count_outcomes(&self, outcomes: &[&Outcome]) {
        let n = |f: fn(&Outcome) -> bool| outcomes.iter().filter(|o| f(o)).count();
        tracing::info!(
            staged = n(|o| matches!(o, Outcome::Staged)),
            duplicates = n(|o| matches!(o, Outcome::Duplicate | Outcome::Stale)),
            ignored = n(|o| matches!(o, Outcome::Ignored(_))),
            dead_lettered = n(|o| matches!(o, Outcome::DeadLettered(_))),
            rows = self.rows,
            "changes ingested"
        );
    }

    fn to_json(&self, messages: usize, changes: usize) -> Value {
        json!({
            "messages": messages,
            "changes": changes,
            "rows": self.rows,
            "bytes": self.bytes,
            "bad_records": self.bad_records,
            "dead_letters": self.dead_letters,
            "batches": self.batches,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> Vec<u8> {
        std::fs::read(format!(
            "{}/../../tests/fixtures/events/{name}",
            env!("CARGO_MANIFEST_DIR")
        ))
        .unwrap()
    }

    #[test]
    fn every_trigger_shape_reads_into_messages() {
        for (name, messages, sqs, changes) in [
            ("fc_oss_trigger.json", 1, false, None),
            ("mns_body_raw.json", 1, false, Some(1)),
            ("mns_body_base64.txt", 1, false, Some(1)),
            ("s3_notification.json", 1, false, Some(3)),
            ("sqs_event.json", 4, true, None),
            ("sqs_sns_event.json", 1, true, Some(1)),
            ("s3_test_event.json", 1, false, Some(0)),
        ] {
            let got = pushed_messages(&fixture(name), &ParseOptions::default()).unwrap();
            assert_eq!(got.len(), messages, "{name}");
            assert_eq!(got[0].sqs, sqs, "{name}");
            if let Some(n) = changes {
                assert_eq!(got[0].changes.as_ref().unwrap().len(), n, "{name}");
            }
        }
    }

    #[test]
    fn mns_trigger_envelopes_carry_their_message_ids() {
        let body = String::from_utf8(fixture("mns_body_base64.txt")).unwrap();
        let event = json!([{
            "id": "e1", "type": "mns:Queue:SendMessage", "source": "MNS-floe",
            "data": {"messageId": "M-1", "messageBody": body.trim()}
        }]);
        let got = pushed_messages(event.to_string().as_bytes(), &ParseOptions::default()).unwrap();
        let changes = got[0].changes.as_ref().unwrap();
        assert_eq!(got[0].id.as_deref(), Some("M-1"));
        assert_eq!(changes[0].key, "in/a b+c.ndjson");
        assert_eq!(changes[0].message_id.as_deref(), Some("M-1"));
    }
}
