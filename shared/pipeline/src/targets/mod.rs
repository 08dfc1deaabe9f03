//! Targets: where staged files are committed.
//!
//! - [`id`]: a target's id, [`TargetId`] (an Iceberg table, a MaxCompute table or partition).
//! - [`commit`]: the committer, which takes staged batches to each target exactly once under
//!   the target's lease, through the [`Target`] seam below.
//! - [`iceberg`]: an Iceberg table: the files appended in one snapshot.
//! - [`maxcompute`]: a MaxCompute table: the files' rows uploaded in one tunnel session.
//! - [`maintain`]: compaction and snapshot expiry of an Iceberg table, under its commit lease.
//! - [`orphans`]: orphan-file removal, maintenance's last step.
//! - [`staging`]: where a MaxCompute-only route stages its files, without an Iceberg table.
//!
//! A target answers two questions for the committer: is this commit in ([`Target::is_in`]),
//! and commit these staged files under this commit id ([`Target::commit`]). Before that, when a
//! batch stages, [`stage`] says which targets its files are for and what each needs recorded
//! with them besides the Parquet files (a MaxCompute target's table and route options).

pub mod commit;
pub mod iceberg;
pub mod id;
pub mod maintain;
pub mod maxcompute;
pub mod orphans;
pub mod staging;

use floe_checkpoint::Version;
use floe_core::Result;

pub use commit::Committer;
pub use id::TargetId;

use crate::config::RouteConfig;
use crate::protocol::records::{BatchRecord, CommitRecord, StagedMaxCompute};
use arrow_schema::SchemaRef;
use floe_maxcompute::MaxComputeSinkConfig;

/// What a target holds once a commit is in.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Landed {
    /// The snapshot (an Iceberg table).
    pub snapshot_id: Option<i64>,
    /// Rows the target could not take, set aside under the route's `on-error`.
    pub bad_rows: u64,
}

/// A pending commit a target works on.
pub struct PendingCommit<'a> {
    /// Its key in the checkpoint table.
    pub key: &'a str,
    /// Its record; a target that records progress in it (a MaxCompute session) saves it with
    /// [`Committer::save_commit_record`].
    pub record: &'a mut CommitRecord,
    /// The record's version.
    pub version: &'a mut Version,
    /// The batches it takes, with their versions (a batch already finished is not among them).
    pub batches: &'a [(BatchRecord, Version)],
    /// Data files of those batches for this target.
    pub files: usize,
    /// Rows in them.
    pub rows: u64,
}

/// What the files of one writer are staged as: an entry per target of `route` (its Iceberg
/// table `table` of catalog `catalog`, and its MaxCompute table `maxcompute` as resolved for the
/// writer's objects), each with what that target needs recorded beside the files to commit them
/// later without the configuration that staged them; `arrow` is the files' schema.
pub fn stage(
    route: &RouteConfig,
    catalog: &str,
    table: &str,
    maxcompute: Option<&str>,
    maxcompute_config: Option<&MaxComputeSinkConfig>,
    arrow: &SchemaRef,
) -> Result<Vec<(TargetId, Option<StagedMaxCompute>)>> {
    let mut out = Vec::new();
    if route.targets.iceberg {
        out.push((TargetId::iceberg(catalog, table), None));
    }
    if let Some(name) = maxcompute {
        let (target, detail) = maxcompute::staging(route, maxcompute_config, name, arrow)?;
        out.push((target, Some(detail)));
    }
    Ok(out)
}

/// One destination table; see the module doc.
#[async_trait::async_trait]
pub trait Target: Send + Sync {
    /// Whether the target already holds the commit `record` names (a crash or a lost answer
    /// after it went in): `Some` with what landed, else `None`.
    async fn is_in(&self, cx: &Committer<'_>, record: &CommitRecord) -> Result<Option<Landed>>;

    /// Commit the staged files of the pending commit's batches under its id. Called only when
    /// [`Target::is_in`] said no; it must still be safe to call again after a crash anywhere in
    /// it (the next committer calls `is_in`, then this, with the same record).
    async fn commit(&self, cx: &Committer<'_>, pending: PendingCommit<'_>) -> Result<Landed>;

    /// After the commit is in (also when a recovery finds it in): record what the target holds
    /// because of it. Must be safe to repeat.
    async fn settle(
        &self,
        _cx: &Committer<'_>,
        _record: &CommitRecord,
        _batches: &[(BatchRecord, Version)],
    ) -> Result<()> {
        Ok(())
    }

    /// After the commit is done: remove what only this target needed (best effort).
    async fn cleanup(
        &self,
        _cx: &Committer<'_>,
        _id: &TargetId,
        _batches: &[(BatchRecord, Version)],
    ) {
    }
}
