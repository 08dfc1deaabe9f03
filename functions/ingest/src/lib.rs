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
//! Changes are ingested in batches of whole messages (`ingest.batch-objects`); no batch starts
//! within [`Deps::stop_margin`] of the deadline, and the messages left are answered as
//! unfinished.

pub mod trigger;

use std::time::Duration;

use floe_core::event::{ParseOptions, parse_payload};
use floe_core::{Error, ObjectChange, Result};
use floe_pipeline::protocol::ack::{Ack, ack};
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

/// One delivered message and what it carried.
#[derive(Debug)]
struct Delivered {
    id: Option<String>,
    /// From an SQS event source (answers with partial batch failures).
    sqs: bool,
    changes: Result<Vec<ObjectChange>>,
}

/// Read a payload into its messages.
fn delivered(payload: &[u8], opts: &ParseOptions) -> Result<Vec<Delivered>> {
    let mut out = Vec::new();
    if let Some(messages) = trigger::mns_messages(payload)? {
        for m in messages {
            let changes = parse_payload(&m.body, opts).and_then(|parsed| {
                let mut changes = Vec::new();
                for inner in parsed.messages {
                    changes.extend(inner.changes?);
                }
                for c in &mut changes {
                    c.message_id = c.message_id.take().or_else(|| m.id.clone());
                }
                Ok(changes)
            });
            out.push(Delivered {
                id: m.id,
                sqs: false,
                changes,
            });
        }
        return Ok(out);
    }
    for m in parse_payload(payload, opts)?.messages {
        for (name, reason) in &m.ignored {
            tracing::info!(event_name = %name, reason, "event ignored");
        }
        out.push(Delivered {
            sqs: m.receipt_handle.is_some(),
            id: m.id,
            changes: m.changes,
        });
    }
    Ok(out)
}

/// Handle one invocation; see the crate doc.
pub async fn handle(event: Event, deps: &Deps) -> Result<Output> {
    let ctx = &event.context;
    let messages = delivered(event.body(), &deps.parse)?;
    let sqs = messages.iter().any(|m| m.sqs);
    ctx.metrics.count(Metric::Messages, messages.len() as u64);

    // Flatten; each message keeps the range of its changes.
    let mut changes: Vec<ObjectChange> = Vec::new();
    let mut ranges = Vec::with_capacity(messages.len());
    for m in &messages {
        match &m.changes {
            Ok(c) => {
                ranges.push(Some(changes.len()..changes.len() + c.len()));
                changes.extend(c.iter().cloned());
            }
            Err(e) => {
                tracing::warn!(message_id = m.id.as_deref().unwrap_or("-"), error = %e, "message unreadable");
                ranges.push(None);
            }
        }
    }
    if let Some(lag) = changes
        .iter()
        .filter_map(|c| c.event_time)
        .min()
        .map(|t| (chrono::Utc::now() - t).num_milliseconds().max(0))
    {
        ctx.metrics.record(Metric::Lag, lag as f64);
    }

    // Ingest in batches of whole messages, none started too close to the deadline.
    let mut outcomes: Vec<Option<Outcome>> = (0..changes.len()).map(|_| None).collect();
    let stop_at = ctx.deadline.with_margin(deps.stop_margin);
    let mut summary = Summary::default();
    let limit = deps.pipeline.config().ingest.batch_objects.max(1);
    let mut start = 0;
    while start < changes.len() {
        let mut end = start;
        for r in ranges.iter().flatten().filter(|r| r.start >= start) {
            if end > start && r.end - start > limit {
                break;
            }
            end = r.end;
        }
        let end = if end == start { changes.len() } else { end };
        if stop_at.remaining().is_zero() {
            tracing::warn!(
                left = changes.len() - start,
                "deadline near: changes left for redelivery"
            );
            break;
        }
        let report = deps.pipeline.ingest(&changes[start..end]).await?;
        summary.add(&report);
        for (i, o) in report.outcomes.into_iter().enumerate() {
            outcomes[start + i] = Some(o);
        }
        start = end;
    }
    summary.record(&ctx.metrics, &outcomes);

    // Judge each message.
    let mut failed: Vec<(Option<String>, Error)> = Vec::new();
    for (m, range) in messages.iter().zip(&ranges) {
        let problem = match (range, &m.changes) {
            (None, Err(e)) => {
                Some(Error::new(e.kind(), e.to_string()).with_retryable(e.is_retryable()))
            }
            (Some(r), _) => match ack(outcomes[r.clone()].iter().map(Option::as_ref)) {
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
    Ok(Output::Json(summary.to_json(messages.len(), changes.len())))
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

    fn record(&self, metrics: &floe_runtime::Metrics, outcomes: &[Option<Outcome>]) {
        let done = outcomes
            .iter()
            .filter(|o| o.as_ref().is_some_and(Outcome::is_done))
            .count();
        metrics.count(Metric::Objects, done as u64);
        metrics.count(Metric::Rows, self.rows);
        metrics.count(Metric::Bytes, self.bytes);
        metrics.count(Metric::DeadLetters, self.dead_letters);
        self.count_outcomes(outcomes);
    }

    fn count_outcomes(&self, outcomes: &[Option<Outcome>]) {
        let n = |f: fn(&Outcome) -> bool| outcomes.iter().flatten().filter(|o| f(o)).count();
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
            let got = delivered(&fixture(name), &ParseOptions::default()).unwrap();
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
        let got = delivered(event.to_string().as_bytes(), &ParseOptions::default()).unwrap();
        let changes = got[0].changes.as_ref().unwrap();
        assert_eq!(got[0].id.as_deref(), Some("M-1"));
        assert_eq!(changes[0].key, "in/a b+c.ndjson");
        assert_eq!(changes[0].message_id.as_deref(), Some("M-1"));
    }
}
