//! [`Poller`]: a consumer with the options applied: batch size and long-poll wait, the rate
//! limit, poison detection after `max-deliveries`, and deletes retried `delete-max-retries`
//! times with backoff.
//!
//! ```text
//!  poll() ── receive(batch-size, polling-wait-time)
//!              │ receive_count > max-deliveries ──▶ Polled::poison (dead-letter, then delete)
//!              │ otherwise ───────────────────────▶ Polled::messages
//!              └ rate limiter: acquire(one token per message handed out)
//!
//!  delete(batch) ── try ─┬ Deleted / Stale ──▶ done
//!                        └ Failed(retryable) ─▶ backoff 100 ms · 2^n (≤ 5 s), up to
//!                                               delete-max-retries more tries (floe_core::retry)
//! ```

use std::sync::Arc;
use std::time::Duration;

use floe_core::Result;
use floe_core::retry::{Retry, RetryPolicy};

use crate::consumer::{DeleteOutcome, QueueConsumer, QueueMessage, copy_error};
use crate::options::QueueOptions;
use crate::rate_limit::RateLimiter;
use crate::visibility::VisibilityKeeper;

/// Delete retries: 100 ms doubled per retry up to 5 s; the attempts are `delete-max-retries` + 1.
const DELETE_RETRY: RetryPolicy =
    RetryPolicy::new(Duration::from_millis(100), Duration::from_secs(5));

/// What one poll handed out.
#[derive(Debug, Default)]
pub struct Polled {
    /// Messages to process.
    pub messages: Vec<QueueMessage>,
    /// Messages received more than `max-deliveries` times: the caller dead-letters each with
    /// its last error, then deletes it. They are not rate limited.
    pub poison: Vec<QueueMessage>,
}

/// A consumer with its options; see the module doc.
#[derive(Debug, Clone)]
pub struct Poller {
    consumer: Arc<dyn QueueConsumer>,
    options: QueueOptions,
    limiter: Option<Arc<RateLimiter>>,
}

impl Poller {
    /// Wrap `consumer`. The options must already be valid for its kind; a batch size or wait
    /// beyond the consumer's limits is a configuration error here too.
    pub fn new(consumer: Arc<dyn QueueConsumer>, options: QueueOptions) -> Result<Self> {
        if options.batch_size > consumer.max_batch() {
            return Err(floe_core::Error::config(
                crate::options::keys::BATCH_SIZE,
                format!(
                    "must be 1..={} for {}, got {}",
                    consumer.max_batch(),
                    consumer.queue(),
                    options.batch_size
                ),
            ));
        }
        if options.polling_wait > consumer.max_wait() {
            return Err(floe_core::Error::config(
                crate::options::keys::POLLING_WAIT_TIME,
                format!(
                    "must be at most {:?} for {}, got {:?}",
                    consumer.max_wait(),
                    consumer.queue(),
                    options.polling_wait
                ),
            ));
        }
        let limiter = options
            .records_per_second
            .map(|r| Arc::new(RateLimiter::new(r)));
        Ok(Poller {
            consumer,
            options,
            limiter,
        })
    }

    /// Share a limiter with other readers of the same source (a listing, say).
    pub fn with_limiter(mut self, limiter: Arc<RateLimiter>) -> Self {
        self.limiter = Some(limiter);
        self
    }

    /// The consumer.
    pub fn consumer(&self) -> &Arc<dyn QueueConsumer> {
        &self.consumer
    }

    /// The options.
    pub fn options(&self) -> &QueueOptions {
        &self.options
    }

    /// One receive of `batch-size` messages with the `polling-wait-time` long poll.
    pub async fn poll(&self) -> Result<Polled> {
        self.poll_waiting(self.options.polling_wait).await
    }

    /// [`Poller::poll`] with a long poll of at most `wait` (rounded down to whole seconds,
    /// never above `polling-wait-time`): a caller near its deadline waits less.
    pub async fn poll_waiting(&self, wait: Duration) -> Result<Polled> {
        let wait = Duration::from_secs(wait.min(self.options.polling_wait).as_secs());
        let received = self.consumer.receive(self.options.batch_size, wait).await?;
        let (poison, messages): (Vec<_>, Vec<_>) = received
            .into_iter()
            .partition(|m| m.receive_count > self.options.max_deliveries);
        for m in &poison {
            tracing::warn!(
                queue = self.consumer.queue(),
                message_id = %m.id,
                receive_count = m.receive_count,
                max_deliveries = self.options.max_deliveries,
                "message is poison: to be dead-lettered"
            );
        }
        if let (Some(l), false) = (&self.limiter, messages.is_empty()) {
            l.acquire(messages.len()).await;
        }
        Ok(Polled { messages, poison })
    }

    /// Keep `msg` hidden while it is worked on, extending its visibility by
    /// `visibility-extension` at a time; stop the keeper when the work ends.
    pub fn keep_visible(&self, msg: QueueMessage) -> VisibilityKeeper {
        VisibilityKeeper::start(
            self.consumer.clone(),
            msg,
            self.options.visibility_extension,
        )
    }

    /// Delete `batch`, retrying retryable failures up to `delete-max-retries` times with
    /// backoff. One outcome per message, in order.
    pub async fn delete(&self, batch: &[QueueMessage]) -> Result<Vec<DeleteOutcome>> {
        let mut outcomes: Vec<Option<DeleteOutcome>> = (0..batch.len()).map(|_| None).collect();
        let mut pending: Vec<usize> = (0..batch.len()).collect();
        let policy =
            DELETE_RETRY.with_max_attempts(self.options.delete_max_retries.saturating_add(1));
        let mut retry = Retry::new(policy);
        while !pending.is_empty() {
            let attempt = retry.attempts();
            let msgs: Vec<QueueMessage> = pending.iter().map(|&i| batch[i].clone()).collect();
            // The failure that decides whether to go on, and each message's own error to keep
            // if it is the last try.
            let (failure, mut failed) = match self.consumer.delete(&msgs).await {
                Ok(results) => {
                    let mut failed = Vec::new();
                    for (&i, outcome) in pending.iter().zip(results) {
                        match outcome {
                            DeleteOutcome::Failed(e) if e.is_retryable() => failed.push((i, e)),
                            other => outcomes[i] = Some(other),
                        }
                    }
                    match failed.first() {
                        Some((_, e)) => (copy_error(e), failed),
                        None => break,
                    }
                }
                Err(e) => (e, Vec::new()),
            };
            let failure_text = failure.to_string();
            if let Err(last) = retry.backoff(failure).await {
                if failed.is_empty() {
                    failed = pending.iter().map(|&i| (i, copy_error(&last))).collect();
                }
                for (i, e) in failed {
                    outcomes[i] = Some(DeleteOutcome::Failed(e));
                }
                break;
            }
            tracing::debug!(queue = self.consumer.queue(), error = %failure_text, attempt, "delete failed; retrying");
            if !failed.is_empty() {
                // Only the messages that failed are tried again.
                pending = failed.into_iter().map(|(i, _)| i).collect();
            }
        }
        Ok(outcomes
            .into_iter()
            .map(|o| {
                o.unwrap_or_else(|| {
                    DeleteOutcome::Failed(floe_core::Error::unexpected("delete was not tried"))
                })
            })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use async_trait::async_trait;
    use floe_core::{Error, ErrorKind};
    use tokio::time::Instant;

    use super::*;

    /// A consumer whose deletes fail (retryably) a set number of times per message.
    #[derive(Debug)]
    struct Flaky {
        failures_left: Mutex<Vec<u32>>,
        calls: Mutex<Vec<usize>>,
    }

    #[async_trait]
    impl QueueConsumer for Flaky {
        fn queue(&self) -> &str {
            "flaky"
        }
        fn max_batch(&self) -> usize {
            10
        }
        fn max_wait(&self) -> Duration {
            Duration::from_secs(20)
        }
        async fn receive(&self, _max: usize, _wait: Duration) -> Result<Vec<QueueMessage>> {
            Ok(Vec::new())
        }
        async fn check(&self) -> Result<()> {
            Ok(())
        }
        async fn delete(&self, batch: &[QueueMessage]) -> Result<Vec<DeleteOutcome>> {
            self.calls.lock().unwrap().push(batch.len());
            let mut left = self.failures_left.lock().unwrap();
            Ok(batch
                .iter()
                .map(|m| {
                    let i: usize = m.id.parse().unwrap();
                    if left[i] == 0 {
                        DeleteOutcome::Deleted
                    } else if left[i] == u32::MAX {
                        DeleteOutcome::Failed(Error::new(ErrorKind::InvalidInput, "bad receipt"))
                    } else {
                        left[i] -= 1;
                        DeleteOutcome::Failed(Error::new(ErrorKind::Io, "connection reset"))
                    }
                })
                .collect())
        }
        async fn extend_visibility(&self, msg: &QueueMessage, _secs: u32) -> Result<String> {
            Ok(msg.receipt.clone())
        }
    }

    fn msgs(n: usize) -> Vec<QueueMessage> {
        (0..n)
            .map(|i| QueueMessage {
                id: i.to_string(),
                receipt: format!("r{i}"),
                body: Vec::new(),
                enqueue_time_ms: 0,
                receive_count: 1,
            })
            .collect()
    }

    #[tokio::test(start_paused = true)]
    async fn deletes_are_retried_with_backoff_up_to_delete_max_retries() {
        // Message 0 deletes at once, 1 after two failures, 2 never (retryable), 3 is refused.
        let flaky = Arc::new(Flaky {
            failures_left: Mutex::new(vec![0, 2, 100, u32::MAX]),
            calls: Mutex::new(Vec::new()),
        });
        let poller = Poller::new(
            flaky.clone(),
            QueueOptions {
                delete_max_retries: 3,
                ..QueueOptions::default()
            },
        )
        .unwrap();
        let start = Instant::now();
        let outcomes = poller.delete(&msgs(4)).await.unwrap();
        assert!(
            outcomes[0].is_deleted() && outcomes[1].is_deleted(),
            "{outcomes:?}"
        );
        assert!(matches!(&outcomes[2], DeleteOutcome::Failed(e) if e.is_retryable()));
        assert!(matches!(&outcomes[3], DeleteOutcome::Failed(e) if !e.is_retryable()));
        // First try with all four, then only the retryable failures, three more times.
        assert_eq!(*flaky.calls.lock().unwrap(), [4, 2, 2, 1]);
        // Backoff 100 + 200 + 400 ms.
        let took = start.elapsed();
        assert!(
            took >= Duration::from_millis(700) && took < Duration::from_millis(750),
            "{took:?}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn no_retries_when_delete_max_retries_is_zero() {
        let flaky = Arc::new(Flaky {
            failures_left: Mutex::new(vec![1]),
            calls: Mutex::new(Vec::new()),
        });
        let poller = Poller::new(
            flaky.clone(),
            QueueOptions {
                delete_max_retries: 0,
                ..QueueOptions::default()
            },
        )
        .unwrap();
        let outcomes = poller.delete(&msgs(1)).await.unwrap();
        assert!(matches!(&outcomes[0], DeleteOutcome::Failed(_)));
        assert_eq!(*flaky.calls.lock().unwrap(), [1]);
    }
}
