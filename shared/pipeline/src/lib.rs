//! Ingest and commit orchestration: from object changes to staged files to committed snapshots.

pub mod config;
