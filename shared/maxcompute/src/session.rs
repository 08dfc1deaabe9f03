//! What the committer keeps in the checkpoint table about a tunnel session, and how it picks up
//! after a crash.
//!
//! ```text
//!  record { kind, table, partition, id, overwrite, blocks written, commit_requested }
//!        │
//!  resume(record) ── reload by id ──► CLOSED / COMMITTED ............ Resumed::Committed (done)
//!                                 ├─► NORMAL (COMMITTING) .......... Resumed::Upload / Upsert
//!                                 │     (rewrite blocks the server lacks, then commit)
//!                                 ├─► EXPIRED / CANCELED / ABORTED .. Resumed::Expired (redo with a new session)
//!                                 └─► not found: upsert → Expired (written again: upserts by
//!                                                primary key are idempotent, and a gone session
//!                                                may not have committed); upload, commit not
//!                                                requested → Expired; upload with commit
//!                                                requested → StateUnknown error (appends are not
//!                                                idempotent and the session cannot say)
//! ```
//! Write the record (with `commit_requested = false`) right after the session is created, add
//! each block id once its PUT succeeded, and set `commit_requested` before calling commit.
//! Give blocks ids that follow from the work (one per staged file, by its position in the
//! batch list): a block whose answer was lost may be on the server without being in the record,
//! and is then simply written again under the same id (a re-PUT replaces it) before the commit,
//! whose block check wants the server's list and the caller's to be equal.

use floe_core::{Error, ErrorKind, Result};
use serde::{Deserialize, Serialize};

use crate::meta::TableId;
use crate::partition::PartitionSpec;
use crate::tunnel::TableTunnel;
use crate::upload::{UploadSession, UploadStatus};
use crate::upsert::{UpsertOptions, UpsertSession, UpsertStatus};

/// Which kind of session.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SessionKind {
    /// An upload session.
    Upload,
    /// An upsert session.
    Upsert,
}

/// A session as the checkpoint keeps it (serde JSON).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionRecord {
    /// Upload or upsert.
    pub kind: SessionKind,
    /// The table.
    pub table: TableId,
    /// The partition, in `ds='1'` form.
    pub partition: Option<String>,
    /// The session id.
    pub id: String,
    /// Whether the upload session overwrites.
    #[serde(default)]
    pub overwrite: bool,
    /// Block ids whose PUT succeeded (upload sessions).
    #[serde(default)]
    pub blocks: Vec<u32>,
    /// Whether a commit was sent (its outcome may be unknown).
    #[serde(default)]
    pub commit_requested: bool,
}

impl SessionRecord {
    /// The record of a freshly created upload session.
    pub fn for_upload(session: &UploadSession) -> Self {
        SessionRecord {
            kind: SessionKind::Upload,
            table: session.table().clone(),
            partition: session.partition().map(ToString::to_string),
            id: session.id().to_owned(),
            overwrite: session.overwrite(),
            blocks: Vec::new(),
            commit_requested: false,
        }
    }

    /// The record of a freshly created upsert session.
    pub fn for_upsert(session: &UpsertSession) -> Self {
        SessionRecord {
            kind: SessionKind::Upsert,
            table: session.table().clone(),
            partition: session.partition().map(ToString::to_string),
            id: session.id().to_owned(),
            overwrite: false,
            blocks: Vec::new(),
            commit_requested: false,
        }
    }

    /// The partition, parsed.
    pub fn partition_spec(&self) -> Result<Option<PartitionSpec>> {
        self.partition.as_deref().map(str::parse).transpose()
    }
}

/// What [`resume`] found.
#[derive(Debug)]
pub enum Resumed {
    /// The session committed: nothing left to do.
    Committed,
    /// The upload session is open: write the blocks it lacks (compare
    /// [`UploadSession::server_blocks`] with the record), then commit.
    Upload(UploadSession),
    /// The upsert session is open (or committing): re-send its rows if the commit was not
    /// requested, then commit (which waits for a commit under way).
    Upsert(UpsertSession),
    /// The session is gone without committing (or gone, for an upsert session, whatever it
    /// did): start again with a new one.
    Expired,
}

/// Reload the session of `record` and say where it stands; see the module doc.
pub async fn resume(tunnel: &TableTunnel, record: &SessionRecord) -> Result<Resumed> {
    resume_with(tunnel, record, UpsertOptions::default()).await
}

/// [`resume`], giving a resumed upsert session `options` (commit timeout and polling).
pub async fn resume_with(
    tunnel: &TableTunnel,
    record: &SessionRecord,
    options: UpsertOptions,
) -> Result<Resumed> {
    let partition = record.partition_spec()?;
    match record.kind {
        SessionKind::Upload => {
            match tunnel
                .reload_upload(&record.table, partition.as_ref(), &record.id, record.overwrite)
                .await
            {
                Ok(s) => Ok(match s.status() {
                    UploadStatus::Closed => Resumed::Committed,
                    UploadStatus::Normal | UploadStatus::Closing => Resumed::Upload(s),
                    _ => Resumed::Expired,
                }),
                Err(e) if e.kind() == ErrorKind::NotFound && !record.commit_requested => {
                    Ok(Resumed::Expired)
                }
                Err(e) if e.kind() == ErrorKind::NotFound => Err(Error::new(
                    ErrorKind::StateUnknown,
                    format!(
                        "upload session {} of maxcompute table {} is gone after its commit was sent; whether it committed is unknown",
                        record.id, record.table
                    ),
                )
                .with_retryable(false)
                .with_source(e)),
                Err(e) => Err(e),
            }
        }
        SessionKind::Upsert => {
            match tunnel
                .reload_upsert(&record.table, partition.as_ref(), &record.id, options)
                .await
            {
                Ok(s) => Ok(match s.status() {
                    UpsertStatus::Committed => Resumed::Committed,
                    UpsertStatus::Normal | UpsertStatus::Committing => Resumed::Upsert(s),
                    _ => Resumed::Expired,
                }),
                // Gone, even after its commit was asked: whether the commit happened cannot be
                // read from the session, and taking it as committed loses its rows when it did
                // not. Upserts and deletes by primary key are idempotent (the same operations
                // in the same order leave the same rows), so the commit is written again in a
                // new session either way.
                Err(e) if e.kind() == ErrorKind::NotFound => Ok(Resumed::Expired),
                Err(e) => Err(e),
            }
        }
    }
}
