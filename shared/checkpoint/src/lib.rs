//! floe's checkpoint table: a small versioned key/value store with compare-and-set.
//!
//! Everything floe must remember between invocations lives here: which objects were seen and
//! where they are in the pipeline, which staged files wait for which commit, which commits are
//! pending, who holds a committer lease, where a queue or a backfill listing stands. Writes are
//! conditional, so any number of concurrent function instances can share one table without
//! corrupting it:
//!
//! | call | succeeds when |
//! |---|---|
//! | [`CheckpointStore::put_if_absent`] | the key does not exist (or has expired) |
//! | [`CheckpointStore::put_if_version`] | the key's version is still the one read |
//! | [`CheckpointStore::delete_if_version`] | the same |
//!
//! A losing writer gets `None` / `false` and re-reads. Entries may carry a TTL; an expired entry
//! reads as absent and is purged lazily.
//!
//! Backends: [`SqliteStore`] (the embedded default), and [`ObjectStoreCheckpoint`] (one object
//! per entry in a bucket, conditional requests) for serverless instances on either cloud.
//! [`conformance`] is the test suite every backend must pass.

pub mod conformance;
mod object_store;
mod sqlite;
mod store;

pub use object_store::ObjectStoreCheckpoint;
pub use sqlite::SqliteStore;
pub use store::{CheckpointStore, Entry, StoreExt, Version, Write, encode, now_ms};
