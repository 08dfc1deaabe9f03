//! The SQS consumer: [`SqsConsumer`] through `aws-sdk-sqs`.
//!
//! - [`config`]: [`SqsConfig`], field by field.
//! - `consumer`: ReceiveMessage with long polling and the `SentTimestamp` /
//!   `ApproximateReceiveCount` attributes, DeleteMessageBatch with per-entry failures,
//!   ChangeMessageVisibility.
//! - [`error`]: SQS error codes as floe error kinds.
//!
//! SQS's limits differ from MNS's: 10 messages per call, 20 s of long poll. A receipt handle
//! stays the same across visibility changes.

pub mod config;
mod consumer;
pub mod error;

pub use config::SqsConfig;
pub use consumer::{MAX_BATCH, MAX_WAIT_SECS, SqsConsumer};
