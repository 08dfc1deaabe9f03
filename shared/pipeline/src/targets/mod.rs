//! Targets: where staged files are committed. A target id names a destination table
//! ([`id`]); the committer ([`commit`]) takes staged batches to each target exactly once under
//! its lease; Iceberg appends the files in one snapshot, MaxCompute uploads their rows in one
//! tunnel session ([`maxcompute`]).

pub mod commit;
pub mod id;
pub mod maxcompute;
