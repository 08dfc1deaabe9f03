//! Ingest and commit orchestration: from object changes to staged files to committed snapshots,
//! exactly once. The modules, in the order a change goes through them:
//!
//! - [`sources`]: where changes come from (a local folder scan, a bucket listing, a queue of
//!   bucket notifications) and [`Pipeline::land`], which lands any source's deliveries in
//!   batches of whole messages and says which are finished; the ingest function hands it the
//!   messages pushed to it.
//! - [`ingest`]: one batch: route each change, claim it, read it into rows, write data files,
//!   stage them with one compare-and-set.
//! - [`protocol`]: the exactly-once kernel as plain functions over values (no IO): the
//!   checkpoint records, claim decisions, batch states, commit plans, the lease rule and the ack
//!   verdict. Its module doc draws the protocol and every crash point.
//! - [`targets`]: where staged files are committed, through the [`targets::Target`] seam:
//!   Iceberg tables and MaxCompute tables, under one committer.
//! - [`config`]: the configuration file.
//!
//! [`Pipeline`] holds the parts (built by [`Pipeline::open`] or [`Pipeline::builder`]); the
//! serverless functions call [`Pipeline::backfill`], [`Pipeline::poll_queue`] or
//! [`Pipeline::land`] with their deadline, then [`Pipeline::commit`].

pub mod config;
#[cfg(test)]
mod crash_points;
pub mod deadletter;
pub mod fault;
pub mod host;
pub mod ingest;
#[cfg(test)]
mod many_instances;
pub mod passes;
pub mod pipeline;
pub mod protocol;
pub mod replay;
#[cfg(test)]
mod round_trips;
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
