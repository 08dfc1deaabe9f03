//! Queue consumers (MNS, SQS) behind one trait, with the connector's options and the startup
//! modes.
//!
//! - [`QueueConsumer`] ([`consumer`]): receive, delete (per-message outcomes), extend
//!   visibility; [`QueueMessage`] is what every queue hands out.
//! - `mns` (feature `mns`): the Alibaba MNS client and `mns::MnsConsumer`.
//! - `sqs` (feature `sqs`): `sqs::SqsConsumer` through `aws-sdk-sqs`.
//! - [`options`]: `batch-size`, `polling-wait-time`, `delete-max-retries`,
//!   `scan.rate-limit.records-per-second`, `max-deliveries`, `visibility-extension`.
//! - [`Poller`] ([`poller`]): a consumer with those options applied (poison detection, delete
//!   retries, rate limit).
//! - [`RateLimiter`] ([`rate_limit`]): the token bucket behind the rate limit.
//! - [`VisibilityKeeper`] ([`visibility`]): keeps a message hidden while its object is processed.
//! - [`startup`]: `scan.startup.mode` as a pure decision, stored under `cursor/<source>`.
//!
//! ```text
//!  startup ── StartupCursor::start ──▶ decision ──▶ Phase::Queue ──▶ QueueFilter
//!                                                                      │
//!  Poller::poll ──▶ messages ──admit──▶ Process ──▶ (pipeline: stage) ──▶ Poller::delete
//!               │                  └──▶ SkipAndDelete ──────────────────▶ Poller::delete
//!               └─▶ poison (received > max-deliveries) ──▶ dead-letter ──▶ Poller::delete
//! ```

pub mod consumer;
#[cfg(feature = "mns")]
pub mod mns;
pub mod options;
pub mod poller;
pub mod rate_limit;
#[cfg(feature = "sqs")]
pub mod sqs;
pub mod startup;
pub mod visibility;

pub use consumer::{DeleteOutcome, QueueConsumer, QueueMessage};
pub use options::{QueueKind, QueueOptions};
pub use poller::{Polled, Poller};
pub use rate_limit::RateLimiter;
pub use startup::{
    Admit, Phase, QueueFilter, StartupConfig, StartupCursor, StartupDecision, StartupMode,
};
pub use visibility::VisibilityKeeper;
