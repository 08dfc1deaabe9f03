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
//!                                                requested → the table's record count says
//!                                                ([`gone_upload_committed`]): committed, or
//!                                                Expired, or a StateUnknown error when it
//!                                                cannot tell (appends are not idempotent)
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
    /// Records in the table (partition) just before the upload session was created: with
    /// `rows_sent`, what tells whether a session gone after its commit was sent committed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rows_before: Option<u64>,
    /// Records in the blocks the commit names (upload sessions).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rows_sent: Option<u64>,
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
            rows_before: None,
            rows_sent: None,
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
            rows_before: None,
            rows_sent: None,
        }
    }

    /// The partition, parsed.
    pub fn partition_spec(&self) -> Result<Option<PartitionSpec>> {
        self.partition.as_deref().map(str::parse).transpose()
    }
}

/// Whether the upload session of `record`, gone after its commit was sent, committed, judged
/// by the records its table (partition) holds `now` against those it held before the session
/// and those the commit sent: `Some(true)` it did, `Some(false)` it did not (the commit never
/// reached the service, and the session expired), `None` when the counts cannot tell (another
/// writer changed the table meanwhile, or the commit would not have changed the count). Only
/// floe's committer, under its lease, writes through floe's sessions into a target, so between
/// the session's creation and now the count moves by this commit alone, if at all.
pub fn gone_upload_committed(record: &SessionRecord, now: u64) -> Option<bool> {
    let (before, sent) = (record.rows_before?, record.rows_sent?);
    let after = if record.overwrite {
        sent
    } else {
        before.checked_add(sent)?
    };
    if after == before {
        // Nothing to tell apart, and nothing to lose: landing it again changes nothing either.
        return (now == before).then_some(true);
    }
    if now == after {
        Some(true)
    } else if now == before {
        Some(false)
    } else {
        None
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
                .reload_upload(
                    &record.table,
                    partition.as_ref(),
                    &record.id,
                    record.overwrite,
                )
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
                Err(e) if e.kind() == ErrorKind::NotFound => {
                    let now = match (record.rows_before, record.rows_sent) {
                        (Some(_), Some(_)) => Some(
                            tunnel
                                .record_count(&record.table, partition.as_ref())
                                .await?,
                        ),
                        _ => None,
                    };
                    match now.and_then(|n| gone_upload_committed(record, n)) {
                        Some(true) => Ok(Resumed::Committed),
                        Some(false) => Ok(Resumed::Expired),
                        None => Err(Error::new(
                            ErrorKind::StateUnknown,
                            format!(
                                "upload session {} of maxcompute table {} is gone after its commit was sent; whether it committed is unknown (records before {:?}, sent {:?}, now {now:?})",
                                record.id, record.table, record.rows_before, record.rows_sent
                            ),
                        )
                        .with_retryable(false)
                        .with_source(e)),
                    }
                }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn record(before: u64, sent: u64, overwrite: bool) -> SessionRecord {
        SessionRecord {
            kind: SessionKind::Upload,
            table: TableId::new("p", "t"),
            partition: None,
            id: "u".into(),
            overwrite,
            blocks: vec![0],
            commit_requested: true,
            rows_before: Some(before),
            rows_sent: Some(sent),
        }
    }

    #[test]
    fn a_gone_upload_is_judged_by_the_tables_record_count() {
        let r = record(10, 5, false);
        assert_eq!(gone_upload_committed(&r, 15), Some(true));
        assert_eq!(gone_upload_committed(&r, 10), Some(false));
        assert_eq!(gone_upload_committed(&r, 12), None);
        assert_eq!(gone_upload_committed(&r, 20), None);
        // Overwrite: the partition holds what was sent, or what it held.
        let r = record(10, 5, true);
        assert_eq!(gone_upload_committed(&r, 5), Some(true));
        assert_eq!(gone_upload_committed(&r, 10), Some(false));
        let r = record(5, 5, true);
        assert_eq!(gone_upload_committed(&r, 5), Some(true));
        // Nothing sent: nothing to lose.
        assert_eq!(gone_upload_committed(&record(7, 0, false), 7), Some(true));
        // An older record without counts cannot be judged.
        let mut old = record(1, 1, false);
        old.rows_before = None;
        assert_eq!(gone_upload_committed(&old, 2), None);
    }
}
