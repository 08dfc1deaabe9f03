//! Ingest and commit orchestration: from object changes to staged files to committed snapshots,
//! exactly once.
//!
//! The protocol and its crash points are described in [`protocol`].
//!
//! # Sources
//!
//! Changes come from a local folder ([`local`]: a scan against the object records), or from a
//! bucket listing and a queue of bucket notifications ([`sources`]: [`Pipeline::backfill`] and
//! [`Pipeline::poll_queue`], which a serverless function calls with its deadline, then
//! [`Pipeline::commit`]). A queue message is deleted at the ack point above, once every change
//! it carried is done.

pub mod config;
#[cfg(test)]
mod crash_points;
pub mod deadletter;
pub mod fault;
pub mod host;
pub mod ingest;
pub mod passes;
pub mod pipeline;
pub mod protocol;
pub mod replay;
pub mod sources;
pub mod targets;

pub use config::FloeConfig;
pub use ingest::{BatchReport, BatchTotals};
pub use passes::RunReport;
pub use pipeline::{Pipeline, PipelineBuilder};
pub use protocol::Outcome;
pub use sources::stores::{SingleStore, StoreResolver};
pub use sources::{BackfillReport, CloudSource, PollReport};
pub use targets::commit::{CommitReport, TargetCommit};
