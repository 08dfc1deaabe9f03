//! [`Pipeline::poll_queue`]: pull the source's queue until it is empty or the deadline nears.
//!
//! One receive is handled as a unit:
//!
//! ```text
//!  receive (batch-size, long poll ≤ time left, rate limited)
//!   ├─ poison: received > max-deliveries ─▶ dead letter (with the error remembered under
//!   │                                        cursor/<name>/failed/<id>) ─▶ delete
//!   ├─ enqueued before the startup decision's start ─▶ delete unprocessed ("skipped")
//!   ├─ body unreadable (neither JSON nor base64 JSON) ─▶ dead letter ─▶ delete
//!   ├─ nothing to land (s3:TestEvent, download events) ─▶ delete
//!   └─ changes ─▶ visibility kept while ─▶ ingest (claims, Parquet, stage)
//!                   every change of the message done (staged, duplicate, ignored, …)?
//!                     yes ─▶ delete                         ◀── the ack point
//!                     no  ─▶ left: redelivered after its visibility timeout; a failure is
//!                            remembered for the dead letter it may become
//! ```
//!
//! Dead letters are flushed before their messages are deleted; a message is deleted only after
//! the batch that staged its changes is durable. A crash anywhere leaves messages in the queue:
//! their redelivery finds the objects staged (duplicates) or claimed by a dead batch (taken over).

use std::time::{Duration, Instant};

use floe_checkpoint::{StoreExt, now_ms};
use floe_core::event::{ParseOptions, parse_payload};
use floe_core::{Error, ErrorKind, ObjectChange, Result};
use floe_queue::{Admit, DeleteOutcome, Phase, Polled, Poller, QueueFilter, QueueMessage};
use serde::{Deserialize, Serialize};

use super::land::Deliveries;
use super::{CloudSource, normalized};
use crate::deadletter::{DeadLetter, DeadLetterWriter};
use crate::ingest::BatchReport;
use crate::pipeline::Pipeline;
use crate::protocol::ack::Ack;

/// How much of a message body a dead letter keeps.
const MAX_RAW_BYTES: usize = 64 << 10;

/// Why [`Pipeline::poll_queue`] returned.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum PollStop {
    /// A receive came back empty: the queue is drained (for now).
    #[default]
    Drained,
    /// It stopped pulling because the deadline was near.
    Deadline,
    /// `INITIAL` whose listing is not done yet: the queue waits for [`Pipeline::backfill`].
    Listing,
    /// `SNAPSHOT`: the queue is never read.
    Snapshot,
}

/// What [`Pipeline::poll_queue`] did.
#[derive(Debug, Default)]
pub struct PollReport {
    /// Why it returned.
    pub stop: PollStop,
    /// Receive calls.
    pub receives: usize,
    /// Messages received (poison included).
    pub received: usize,
    /// Object changes the messages carried.
    pub changes: usize,
    /// Messages deleted: those whose work is staged, and the skipped, ignored and dead-lettered.
    pub deleted: usize,
    /// Messages deleted unprocessed: enqueued before the startup decision's start.
    pub skipped: usize,
    /// Messages that carried nothing to land (test events, download events): deleted.
    pub ignored: usize,
    /// Messages dead-lettered and deleted: poison (past `max-deliveries`) or unreadable.
    pub dead_lettered: usize,
    /// Messages left in the queue for redelivery (a change failed or was busy).
    pub left: usize,
    /// Messages done whose delete failed (their redelivery will be recognised as duplicates).
    pub delete_failures: usize,
    /// Why messages were left, one line each.
    pub failures: Vec<String>,
    /// The ingest batches.
    pub batches: Vec<BatchReport>,
}

/// The last failure of a message, kept under `cursor/<name>/failed/<message id>` so the dead
/// letter it becomes after `max-deliveries` carries its error.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MessageFailure {
    /// The error.
    pub error: String,
    /// The delivery that failed.
    pub receive_count: u32,
    /// When, ms since the epoch.
    pub at_ms: i64,
    /// Deliveries that found its objects claimed by another live batch: they do not count
    /// toward `max-deliveries`.
    #[serde(default)]
    pub busy: u32,
}

/// The longest a message is hidden while another batch's claim lives (12 hours: the most both
/// MNS and SQS allow).
const MAX_HIDE_SECS: u64 = 43_200;

fn failure_key(src: &CloudSource, message_id: &str) -> String {
    format!("{}failed/{message_id}", src.key_prefix())
}

/// The changes of one message body; an error when the body cannot be read at all.
fn parse_message(msg: &QueueMessage) -> Result<(Vec<ObjectChange>, usize)> {
    let parsed = parse_payload(&msg.body, &ParseOptions::default())?;
    let mut changes = Vec::new();
    let mut ignored = 0;
    for m in parsed.messages {
        ignored += m.ignored.len();
        for (name, reason) in &m.ignored {
            tracing::debug!(message_id = %msg.id, event = %name, reason, "event ignored");
        }
        for mut c in m.changes? {
            c.message_id.get_or_insert_with(|| msg.id.clone());
            changes.push(normalized(c));
        }
    }
    Ok((changes, ignored))
}

impl Pipeline {
    /// Pull the queue of a cloud source until a receive comes back empty, or until the time
    /// left before `deadline` is less than the longest receive-and-land so far (at least a
    /// second): a function stops pulling in time and leaves every message either deleted (its
    /// work staged) or in the queue. Staged work is not committed here; see
    /// [`Pipeline::commit`].
    ///
    /// Does nothing while an `INITIAL` listing is unfinished, or ever for `SNAPSHOT`
    /// ([`PollReport::stop`] says which).
    pub async fn poll_queue(&self, deadline: Instant) -> Result<PollReport> {
        let src = self.cloud_source()?.clone();
        let Some(poller) = src.poller.as_ref() else {
            return Err(match src.config.queue {
                None => Error::config(
                    "source.type",
                    "a bucket source (s3, oss) has no queue to poll; use mns or sqs",
                ),
                Some(_) => Error::new(
                    ErrorKind::Unsupported,
                    "this pipeline was opened without queue clients (a function that never \
                     polls, or floe-pipeline built without `queue-clients`): the poll function \
                     and the floe command poll queues",
                ),
            });
        };
        let mut report = PollReport::default();
        let decision = src.cursor.start(&src.config.startup, now_ms()).await?;
        let filter = match (decision.phase(), decision.queue_filter()) {
            (Phase::Listing, _) => {
                report.stop = PollStop::Listing;
                return Ok(report);
            }
            (Phase::Done, _) | (_, None) => {
                report.stop = PollStop::Snapshot;
                return Ok(report);
            }
            (Phase::Queue, Some(f)) => f,
        };
        let mut reserve = Duration::from_secs(1);
        loop {
            let remaining = deadline.saturating_duration_since(Instant::now());
            if remaining <= reserve {
                report.stop = PollStop::Deadline;
                break;
            }
            let polled = poller.poll_waiting(remaining - reserve).await?;
            report.receives += 1;
            if polled.messages.is_empty() && polled.poison.is_empty() {
                report.stop = PollStop::Drained;
                break;
            }
            let started = Instant::now();
            self.handle_receive(&src, poller, &filter, polled, deadline, &mut report)
                .await?;
            reserve = reserve.max(started.elapsed());
        }
        Ok(report)
    }

    /// One receive; see the module doc.
    /// Remember a delivery left unfinished: its error when a change failed (for the dead
    /// letter it may become), and one more busy delivery when it only waited for a claim.
    async fn record_delivery(
        &self,
        src: &CloudSource,
        msg: &QueueMessage,
        error: &str,
        busy: bool,
    ) -> Result<()> {
        let key = failure_key(src, &msg.id);
        let found = self.checkpoint.get_json::<MessageFailure>(&key).await?;
        let earlier = found.as_ref().map(|(f, _)| f);
        let record = MessageFailure {
            error: match earlier {
                Some(f) if busy => f.error.clone(),
                _ => error.to_owned(),
            },
            receive_count: msg.receive_count,
            at_ms: now_ms(),
            busy: earlier.map_or(0, |f| f.busy) + u32::from(busy),
        };
        let written = match &found {
            None => {
                self.checkpoint
                    .insert_json(&key, &record, self.dedupe_ttl)
                    .await?
            }
            Some((_, v)) => {
                self.checkpoint
                    .update_json(&key, &record, v, self.dedupe_ttl)
                    .await?
            }
        };
        if written.is_none() {
            tracing::debug!(message_id = %msg.id, "another instance recorded this message's delivery first");
        }
        Ok(())
    }

    async fn handle_receive(
        &self,
        src: &CloudSource,
        poller: &Poller,
        filter: &QueueFilter,
        polled: Polled,
        deadline: Instant,
        report: &mut PollReport,
    ) -> Result<()> {
        report.received += polled.messages.len() + polled.poison.len();
        let letters_batch = format!("queue-{}", uuid::Uuid::now_v7());
        let mut dead = DeadLetterWriter::new(self.dead_letters.clone(), &letters_batch);
        // Messages to delete without landing anything, and those whose work is done.
        let mut finished: Vec<QueueMessage> = Vec::new();
        let max = poller.options().max_deliveries;

        let mut messages = polled.messages;
        for m in polled.poison {
            let failure = self
                .checkpoint
                .get_json::<MessageFailure>(&failure_key(src, &m.id))
                .await?
                .map(|(f, _)| f);
            // Deliveries spent waiting for another batch's claim are not the message's.
            let busy = failure.as_ref().map_or(0, |f| f.busy);
            if m.receive_count.saturating_sub(busy) <= max {
                messages.push(m);
                continue;
            }
            let last = failure.map(|f| f.error).unwrap_or_else(|| {
                "none recorded (it ran out of time, or its instance stopped)".into()
            });
            let reason = format!(
                "message received {} times, more than max-deliveries = {max}; last error: {last}",
                m.receive_count
            );
            dead.add(&self.message_letter(poller, &letters_batch, &m, reason))
                .await?;
            tracing::warn!(message_id = %m.id, receive_count = m.receive_count, "message dead-lettered");
            report.dead_lettered += 1;
            finished.push(m);
        }

        let mut deliveries = Deliveries::default();
        let mut work: Vec<QueueMessage> = Vec::new();
        for m in messages {
            if filter.admit(&m) == Admit::SkipAndDelete {
                tracing::debug!(message_id = %m.id, enqueue_time_ms = m.enqueue_time_ms, "message before the start: skipped");
                report.skipped += 1;
                finished.push(m);
                continue;
            }
            match parse_message(&m) {
                Err(e) => {
                    let reason = format!("unreadable message: {e}");
                    dead.add(&self.message_letter(poller, &letters_batch, &m, reason))
                        .await?;
                    tracing::warn!(message_id = %m.id, error = %e, "message dead-lettered");
                    report.dead_lettered += 1;
                    finished.push(m);
                }
                Ok((cs, _)) if cs.is_empty() => {
                    report.ignored += 1;
                    finished.push(m);
                }
                Ok((cs, _)) => {
                    report.changes += cs.len();
                    deliveries.push(cs);
                    work.push(m);
                }
            }
        }
        // Dead letters are durable before the messages they describe go; those, the skipped
        // and the ignored go now, so a failure while landing the rest cannot bring them back.
        dead.flush().await?;
        self.delete_finished(src, poller, &std::mem::take(&mut finished), report)
            .await?;

        // Land the changes with every message kept invisible meanwhile.
        let keepers: Vec<_> = work
            .iter()
            .map(|m| poller.keep_visible(m.clone()))
            .collect();
        let landed = self.land(&deliveries, deadline).await;
        let mut latest = Vec::with_capacity(keepers.len());
        for k in keepers {
            latest.push(k.stop().await);
        }
        let landing = landed?;

        let mut done_enqueue_ms: Option<i64> = None;
        let mut processed = 0;
        for ((msg, verdict), latest) in work.into_iter().zip(landing.acks).zip(latest) {
            let leave = match verdict {
                Ack::Done => {
                    done_enqueue_ms = done_enqueue_ms.max(Some(msg.enqueue_time_ms));
                    match latest {
                        Ok(m) => {
                            finished.push(m);
                            processed += 1;
                        }
                        Err(e) => {
                            // The receipt went stale: the message was or will be delivered
                            // again, and its redelivery finds everything landed.
                            tracing::warn!(message_id = %msg.id, error = %e, "message landed but its receipt went stale");
                            report.delete_failures += 1;
                        }
                    }
                    continue;
                }
                Ack::Leave { why, failed, busy } => (why.to_string(), failed, busy),
            };
            let (error, failed, busy) = leave;
            if failed || busy {
                self.record_delivery(src, &msg, &error, busy).await?;
            }
            if busy && let Ok(m) = &latest {
                // Nothing changes until the claim is staged or runs out: hide the message
                // that long rather than spend deliveries on it.
                let secs = (self.config.ingest.claim_timeout_ms / 1000 + 1).min(MAX_HIDE_SECS);
                if let Err(e) = poller.consumer().extend_visibility(m, secs as u32).await {
                    tracing::debug!(message_id = %msg.id, error = %e, "could not hide a busy message");
                }
            }
            tracing::warn!(message_id = %msg.id, receive_count = msg.receive_count, error = %error, "message left for redelivery");
            report.left += 1;
            report.failures.push(format!("message {}: {error}", msg.id));
        }
        report.batches.extend(landing.batches);

        // The ack point: delete the messages whose work is staged. Only they move the
        // committed watermark.
        self.delete_finished(src, poller, &finished, report).await?;
        if processed > 0
            && let Some(t) = done_enqueue_ms
            && let Err(e) = src.cursor.advance_committed(t).await
        {
            tracing::warn!(error = %e, "failed to move the committed watermark");
        }
        Ok(())
    }

    /// Delete finished messages (retried per `delete-max-retries`); a message that cannot be
    /// deleted comes back and is recognised as a duplicate.
    async fn delete_finished(
        &self,
        src: &CloudSource,
        poller: &Poller,
        finished: &[QueueMessage],
        report: &mut PollReport,
    ) -> Result<()> {
        if finished.is_empty() {
            return Ok(());
        }
        let outcomes = poller.delete(finished).await?;
        for (m, o) in finished.iter().zip(outcomes) {
            match o {
                DeleteOutcome::Deleted => {
                    report.deleted += 1;
                    if m.receive_count > 1 {
                        self.forget_failure(src, &m.id).await;
                    }
                }
                DeleteOutcome::Stale(e) | DeleteOutcome::Failed(e) => {
                    tracing::warn!(message_id = %m.id, error = %e, "message not deleted; its redelivery will be a duplicate");
                    report.delete_failures += 1;
                }
            }
        }
        Ok(())
    }

    async fn forget_failure(&self, src: &CloudSource, message_id: &str) {
        let key = failure_key(src, message_id);
        if let Ok(Some(e)) = self.checkpoint.get(&key).await {
            let _ = self.checkpoint.delete_if_version(&key, &e.version).await;
        }
    }

    fn message_letter(
        &self,
        poller: &Poller,
        batch: &str,
        m: &QueueMessage,
        reason: String,
    ) -> DeadLetter {
        let body = String::from_utf8_lossy(&m.body);
        let mut raw: String = body.chars().take(MAX_RAW_BYTES).collect();
        if raw.len() < body.len() {
            raw.push('…');
        }
        let (bucket, key) = parse_message(m)
            .ok()
            .and_then(|(cs, _)| cs.into_iter().next())
            .map(|c| (c.bucket, c.key))
            .unwrap_or_default();
        DeadLetter {
            time: chrono::Utc::now().to_rfc3339(),
            batch: batch.to_owned(),
            route: String::new(),
            bucket,
            key,
            url: format!("{}#{}", poller.consumer().queue(), m.id),
            line: None,
            reason,
            raw,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(body: &str) -> QueueMessage {
        QueueMessage {
            id: "m1".into(),
            receipt: "r".into(),
            body: body.as_bytes().to_vec(),
            enqueue_time_ms: 0,
            receive_count: 1,
        }
    }

    /// A queue source as the shipped templates give it to every function (keys fixed, nothing
    /// listening: no request may be needed to open it).
    const MNS_SOURCE: &str = r#"
[source]
type = "mns"
endpoint = "http://127.0.0.1:9"
region = "cn-hangzhou"
queue-name = "oss-events"
access-key-id = "AK"
access-key-secret = "SK"
oss-bucket = "landing"
s3.endpoint = "http://127.0.0.1:9"

[checkpoint]
path = "checkpoint.db"

[dead-letter]
path = "dead-letter"

[[routes]]
table = "t.events"
"#;

    #[tokio::test]
    async fn a_pipeline_opened_without_queue_clients_reads_the_queue_but_refuses_to_poll_it() {
        let dir = tempfile::tempdir().unwrap();
        let config = || {
            let raw = crate::config::parse(MNS_SOURCE, false).unwrap();
            crate::config::FloeConfig::from_raw(raw, dir.path()).unwrap()
        };
        let lean = Pipeline::open_without_queue_clients(config())
            .await
            .unwrap();
        let src = lean.cloud_source().unwrap();
        assert_eq!(src.config.name, "mns-oss-events");
        assert!(src.poller.is_none());
        let e = lean
            .poll_queue(Instant::now() + Duration::from_secs(5))
            .await
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Unsupported, "{e}");
        assert!(e.to_string().contains("without queue clients"), "{e}");
        // The same configuration opened with them (this crate is tested with `queue-clients`).
        let full = Pipeline::open(config()).await.unwrap();
        assert!(full.cloud_source().unwrap().poller.is_some());
    }

    #[test]
    fn bodies_parse_raw_or_base64_and_etags_are_normalised() {
        use base64::Engine as _;
        let oss = r#"{"events":[{"eventName":"ObjectCreated:PutObject","eventTime":"2025-01-15T01:00:00.000Z","region":"cn-hangzhou","oss":{"bucket":{"name":"b"},"object":{"key":"a/x.json","size":3,"eTag":"5D41402ABC4B2A76B9719D911017C592"}}}]}"#;
        let b64 = base64::engine::general_purpose::STANDARD.encode(oss);
        for body in [oss.to_owned(), b64] {
            let (cs, ignored) = parse_message(&msg(&body)).unwrap();
            assert_eq!(ignored, 0);
            assert_eq!(cs.len(), 1);
            assert_eq!(
                cs[0].etag.as_deref(),
                Some("5d41402abc4b2a76b9719d911017c592")
            );
            assert_eq!(cs[0].message_id.as_deref(), Some("m1"));
        }
        let (cs, ignored) =
            parse_message(&msg(r#"{"Service":"Amazon S3","Event":"s3:TestEvent"}"#)).unwrap();
        assert!(cs.is_empty());
        assert_eq!(ignored, 1);
        assert!(parse_message(&msg("not json, not base64!")).is_err());
    }
}
