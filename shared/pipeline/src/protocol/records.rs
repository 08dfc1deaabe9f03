//! The checkpoint table's layout: keys and the records under them.
//!
//! | key | record | life |
//! |---|---|---|
//! | `obj/<bucket hash>/<key hash>` | [`ObjRecord`]: latest identity seen, and its state | dedupe TTL (none for a local folder) |
//! | `batch/<batch>` | [`BatchRecord`]: a live ingest batch: running, staged, abandoned | until every target committed it |
//! | `done/<batch>` | [`DoneRecord`]: a batch whose every target committed it | dedupe TTL |
//! | `commit/<target>/<commit>` | [`CommitRecord`]: a commit in flight | until its batches are marked |
//! | `lease/<target>` | [`Lease`]: the one committer of a target | its TTL |
//! | `rows/<target>/<bucket hash>/<key hash>` | [`ObjectRows`]: the version of an object a table holds and where its rows are (routes with `on-change = replace`) | none (a removal: dedupe TTL) |
//! | `setup/<target>` | [`SetupRecord`]: a MaxCompute table's save modes ran | none |
//! | `cursor/<source>` | the startup decision (`floe_queue::startup`) | none |
//! | `cursor/<source>/backfill/<prefix>` | [`crate::sources::backfill::PrefixState`]: the listing's next page | none |
//! | `cursor/<source>/failed/<message>` | [`crate::sources::queue::MessageFailure`]: a message's last error | dedupe TTL |

use std::collections::BTreeMap;

use floe_core::Operation;
use floe_iceberg::StagedFile;
use floe_maxcompute::TableId;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::config::RowKinds;
use crate::targets::id::TargetId;

fn short_hash(parts: &[&str], len: usize) -> String {
    let mut h = Sha256::new();
    for p in parts {
        h.update(p.as_bytes());
        h.update([0]);
    }
    hex::encode(h.finalize())[..len].to_owned()
}

/// `obj/<bucket hash>/` : every object record of a bucket.
pub fn obj_prefix(bucket: &str) -> String {
    format!("obj/{}/", short_hash(&[bucket], 12))
}

/// `obj/<bucket hash>/<key hash>`.
pub fn obj_key(bucket: &str, key: &str) -> String {
    format!("{}{}", obj_prefix(bucket), short_hash(&[bucket, key], 32))
}

/// `rows/<target>/<bucket hash>/<key hash>`.
pub fn rows_key(target: &TargetId, bucket: &str, key: &str) -> String {
    format!(
        "rows/{target}/{}/{}",
        short_hash(&[bucket], 12),
        short_hash(&[bucket, key], 32)
    )
}

/// `batch/<id>`.
pub fn batch_key(batch: &str) -> String {
    format!("batch/{batch}")
}

/// `done/<id>`.
pub fn done_key(batch: &str) -> String {
    format!("done/{batch}")
}

/// `commit/<target>/`.
pub fn commit_prefix(target: &TargetId) -> String {
    format!("commit/{target}/")
}

/// `lease/<target>`.
pub fn lease_key(target: &TargetId) -> String {
    format!("lease/{target}")
}

/// Where an object is in the pipeline.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum ObjState {
    /// A batch is working on it.
    Claimed { batch: String },
    /// What it produced is staged (durable); the committers finish it.
    Staged {
        /// The batch that staged it.
        batch: String,
    },
    /// It could not be read at all and was dead-lettered (or skipped) under the route's policy.
    Failed { reason: String },
    /// No route took it, or its operation produces no rows for its route.
    Ignored { reason: String },
}

/// The latest identity of an object and where it is.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ObjRecord {
    pub bucket: String,
    pub key: String,
    /// Created or removed.
    pub operation: Operation,
    /// ETag of the version (None for removals).
    pub etag: Option<String>,
    pub version_id: Option<String>,
    pub sequencer: Option<String>,
    /// Event time, ms since the epoch.
    pub event_time_ms: Option<i64>,
    /// Size in bytes.
    pub size: Option<u64>,
    /// An append's claim (see [`crate::protocol::claim::append_start`]): the offset it lands
    /// from; the bytes before it landed earlier.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<u64>,
    #[serde(flatten)]
    pub state: ObjState,
    /// When the state was set, ms since the epoch.
    pub at_ms: i64,
}

/// Who runs a batch or holds a lease.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Owner {
    pub host: String,
    pub pid: u32,
    /// This run's id.
    pub run: String,
    /// The pid's namespace (see [`crate::host`]); absent in records of other hosts' kind or of
    /// older versions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pid_space: Option<String>,
}

/// A batch's lifecycle state.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BatchState {
    /// Claiming, reading and writing.
    Running,
    /// Its files are durable; committers take it from here.
    Staged,
    /// Declared dead by another instance that took over its objects; it can no longer stage.
    Abandoned,
}

/// The files a batch staged for one target.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TargetFiles {
    /// The table, `namespace.table`.
    pub table: String,
    pub files: Vec<StagedFile>,
    /// Rows in them.
    pub rows: u64,
    /// Bytes of them.
    pub bytes: u64,
    /// For a MaxCompute target: the table and what its committer needs to know of the route.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub maxcompute: Option<StagedMaxCompute>,
    /// For a table whose route replaces changed objects' rows: each object version the batch
    /// landed or removed, and where its rows are, in the order read.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub objects: Vec<ObjectRows>,
}

/// An object version and where its rows are in a table: what a batch staged (in
/// [`TargetFiles::objects`]), and what the table holds (under [`rows_key`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ObjectRows {
    pub bucket: String,
    pub key: String,
    /// Created or removed (a removal has no rows).
    pub operation: Operation,
    pub etag: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sequencer: Option<String>,
    /// Event time, ms since the epoch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event_time_ms: Option<i64>,
    /// Only the bytes appended since the earlier version were read: these rows add to that
    /// version's rows instead of replacing them.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub appended: bool,
    /// Runs of rows in data files.
    pub rows: Vec<floe_iceberg::SourceRows>,
}

/// A live ingest batch.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BatchRecord {
    pub id: String,
    pub state: BatchState,
    /// Who runs it.
    pub owner: Owner,
    /// When it started.
    pub started_ms: i64,
    /// When its owner last said it is alive.
    pub heartbeat_ms: i64,
    /// Objects it staged.
    pub objects: u64,
    /// Files per target (set when staged).
    pub targets: BTreeMap<TargetId, TargetFiles>,
    /// The commit that took it, per target.
    pub committed: BTreeMap<TargetId, String>,
}

/// A batch every target has committed (kept for deduplication).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DoneRecord {
    /// Commits per target.
    pub committed: BTreeMap<TargetId, String>,
    /// When it finished.
    pub at_ms: i64,
}

/// A commit's state.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CommitState {
    /// Written before the table commit; recovery checks the table's history for it.
    Pending,
    /// The table has it; its batches are being marked.
    Done,
}

/// A commit in flight for one target.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CommitRecord {
    /// The commit id (also in the snapshot summary).
    pub id: String,
    pub target: TargetId,
    /// The batches it takes.
    pub batches: Vec<String>,
    pub state: CommitState,
    /// When it was started.
    pub created_ms: i64,
    /// The snapshot, once known.
    pub snapshot_id: Option<i64>,
    /// For a MaxCompute target: its tunnel session, recorded when created and again (with its
    /// blocks) before it is committed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<floe_maxcompute::SessionRecord>,
}

/// A committer's lease on a target.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lease {
    pub owner: Owner,
    /// Until when, ms since the epoch (also the entry's TTL).
    pub until_ms: i64,
}

/// `setup/<target>`: the save modes of a MaxCompute target ran.
pub fn setup_key(target: &TargetId) -> String {
    format!("setup/{target}")
}

/// What a batch record keeps for a MaxCompute target besides its files.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StagedMaxCompute {
    pub table: TableId,
    /// The partition written (`partition_spec`), if any.
    pub partition: Option<String>,
    /// The route (dead letters name it).
    pub route: String,
    /// The route's `on-error` for rows MaxCompute cannot take: `fail`, `skip` or `dead-letter`.
    pub on_error: String,
    /// How a row's operation is known.
    pub row_kinds: RowKinds,
    /// The route's schema (Iceberg schema JSON with its identifier fields): what the create
    /// template is filled from.
    pub upstream_schema: String,
}

/// `setup/<target>`: the save modes of a target, run once before its first session.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SetupRecord {
    /// When they finished (or started), ms since the epoch.
    pub at_ms: i64,
    /// `schema_save_mode` and what it did.
    pub schema: String,
    /// `data_save_mode`.
    pub data: String,
    /// The SQL instance running the data save mode's statement, recorded once submitted.
    #[serde(default)]
    pub data_instance: Option<String>,
    /// That statement.
    #[serde(default)]
    pub data_sql: Option<String>,
    /// Whether every save mode finished.
    pub done: bool,
}
