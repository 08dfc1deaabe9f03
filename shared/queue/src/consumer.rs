//! The one consumer trait every queue implements, and the message it hands out.

use std::fmt::Debug;
use std::time::Duration;

use async_trait::async_trait;
use floe_core::{Error, Result};

/// One received message, whatever the queue.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QueueMessage {
    /// The queue's message id (MNS `MessageId`, SQS `MessageId`).
    pub id: String,
    /// The handle that deletes it or extends its visibility; MNS replaces it on every
    /// visibility change (see [`QueueConsumer::extend_visibility`]).
    pub receipt: String,
    /// The body as sent: for MNS maybe base64 (`floe_core::event::parse_payload` decodes
    /// either form), for SQS the text.
    pub body: Vec<u8>,
    /// When the queue accepted it, epoch milliseconds (MNS `EnqueueTime`, SQS
    /// `SentTimestamp`): the "offset" of the startup modes.
    pub enqueue_time_ms: i64,
    /// How many times it has been received, this time included (MNS `DequeueCount`, SQS
    /// `ApproximateReceiveCount`).
    pub receive_count: u32,
}

/// What became of one message of a delete.
#[derive(Debug)]
pub enum DeleteOutcome {
    /// Gone from the queue.
    Deleted,
    /// The receipt no longer works (its visibility ran out, or it was replaced): the message
    /// was received again by someone, or will be. Retrying cannot help; the redelivery will be
    /// recognised as a duplicate downstream.
    Stale(Error),
    /// Not deleted; [`Error::is_retryable`] says whether another try may work.
    Failed(Error),
}

impl DeleteOutcome {
    /// Whether the message is gone.
    pub fn is_deleted(&self) -> bool {
        matches!(self, DeleteOutcome::Deleted)
    }
}

/// A queue floe pulls from; see the crate doc.
#[async_trait]
pub trait QueueConsumer: Send + Sync + Debug {
    /// The queue, for logs and errors (`mns://queue`, the SQS queue URL).
    fn queue(&self) -> &str;

    /// Most messages one receive or delete call may carry (MNS 16, SQS 10).
    fn max_batch(&self) -> usize;

    /// Longest long-poll wait the service accepts (MNS 30 s, SQS 20 s).
    fn max_wait(&self) -> Duration;

    /// Up to `max` messages, waiting up to `wait` (whole seconds) for the first one. An empty
    /// poll is an empty vector. `max` and `wait` beyond the queue's limits are an error.
    async fn receive(&self, max: usize, wait: Duration) -> Result<Vec<QueueMessage>>;

    /// Delete the messages (any number; sent in batches of [`QueueConsumer::max_batch`]).
    /// One outcome per message, in the order given; `Err` only when nothing could be tried.
    async fn delete(&self, batch: &[QueueMessage]) -> Result<Vec<DeleteOutcome>>;

    /// Keep `msg` invisible for `secs` more seconds from now. Returns the receipt to use from
    /// now on (MNS issues a new one; SQS keeps it).
    async fn extend_visibility(&self, msg: &QueueMessage, secs: u32) -> Result<String>;

    /// Ask the queue for its attributes, touching no message: a queue that is not there is
    /// `NotFound`, one the keys may not use is `Auth` (the start-up check of `floe run` and
    /// `floe config check --connect`).
    async fn check(&self) -> Result<()>;
}

/// A copy of `e` for each of several messages that one failed call covered.
pub(crate) fn copy_error(e: &Error) -> Error {
    let mut copy = Error::new(e.kind(), e.to_string()).with_retryable(e.is_retryable());
    for (k, v) in e.context() {
        copy = copy.with_context(k, v.clone());
    }
    copy
}
