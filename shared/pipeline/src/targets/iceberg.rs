//! An Iceberg table target: the staged files of a commit appended in one snapshot whose summary
//! carries the commit id, so "is this commit in?" is a search of the table's history.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use floe_core::{Error, ErrorKind, Result};
use floe_iceberg::{
    AppendOutcome, AppendRequest, CHECKPOINT_PROP, append_exactly_once, find_commit, load_table,
    parse_ident,
};
use iceberg::table::Table;
use tokio::sync::Mutex;

use super::{Committer, Landed, PendingCommit, Target};
use crate::protocol::records::{BatchRecord, CommitRecord};

/// The Iceberg table `table` (`namespace.table`) of the pipeline's catalog.
pub struct IcebergTarget {
    table: String,
    /// The table as [`Target::is_in`] loaded it, reused by [`Target::commit`].
    loaded: Mutex<Option<Table>>,
}

impl IcebergTarget {
    /// The target for `table`.
    pub fn new(table: &str) -> Self {
        IcebergTarget {
            table: table.to_owned(),
            loaded: Mutex::new(None),
        }
    }

    /// The append of `batches`' files for this target under `commit_id`.
    fn request(
        &self,
        cx: &Committer<'_>,
        table: &Table,
        rec: &CommitRecord,
        commit_id: String,
        batches: &[&BatchRecord],
        rows: u64,
    ) -> Result<AppendRequest> {
        let mut files = Vec::new();
        let mut file_batches = Vec::new();
        for b in batches {
            for f in &b.targets[&rec.target].files {
                files.push(f.to_data_file(table)?);
                file_batches.push(b.id.clone());
            }
        }
        let ids: Vec<&str> = batches.iter().map(|b| b.id.as_str()).collect();
        let checkpoint = serde_json::json!({"batches": ids, "rows": rows});
        Ok(AppendRequest {
            table: parse_ident(&self.table)?,
            files,
            commit_id,
            summary: HashMap::from([(CHECKPOINT_PROP.to_owned(), checkpoint.to_string())]),
            deadline: Instant::now() + Duration::from_millis(cx.config.commit.timeout_ms),
            file_batches,
        })
    }

    async fn load(&self, cx: &Committer<'_>) -> Result<Table> {
        let mut loaded = self.loaded.lock().await;
        if let Some(t) = loaded.as_ref() {
            return Ok(t.clone());
        }
        let ident = parse_ident(&self.table)?;
        let table = load_table(cx.catalog.as_ref(), &ident)
            .await?
            .ok_or_else(|| {
                Error::new(
                    ErrorKind::NotFound,
                    format!("table {} does not exist", self.table),
                )
            })?;
        *loaded = Some(table.clone());
        Ok(table)
    }
}

#[async_trait::async_trait]
impl Target for IcebergTarget {
    async fn is_in(&self, cx: &Committer<'_>, record: &CommitRecord) -> Result<Option<Landed>> {
        let table = self.load(cx).await?;
        Ok(find_commit(&table, &record.id).map(|found| Landed {
            snapshot_id: found.snapshot_id,
            bad_rows: 0,
        }))
    }

    async fn commit(&self, cx: &Committer<'_>, pending: PendingCommit<'_>) -> Result<Landed> {
        if pending.files == 0 {
            cx.faults.hit("commit.after-append").await;
            return Ok(Landed::default());
        }
        let table = self.load(cx).await?;
        let rec = &*pending.record;
        let batches: Vec<&BatchRecord> = pending.batches.iter().map(|(b, _)| b).collect();
        let with_deletes =
            (batches.iter()).any(|b| b.targets[&rec.target].files.iter().any(|f| f.deletes));
        // Row changes: one snapshot per batch, in order, as Flink commits each checkpoint's
        // deltas. An equality delete reaches only rows of earlier snapshots, so two batches
        // changing one key in one snapshot would both keep their rows. The last snapshot
        // carries the record's commit id (what `is_in` looks for), the others the id with
        // their place; each is checked by its own id and its batch before it is made again.
        let groups: Vec<(String, &[&BatchRecord])> = if with_deletes && batches.len() > 1 {
            (0..batches.len())
                .map(|i| {
                    let id = if i + 1 == batches.len() {
                        rec.id.clone()
                    } else {
                        format!("{}.{i}", rec.id)
                    };
                    (id, &batches[i..=i])
                })
                .collect()
        } else {
            vec![(rec.id.clone(), &batches[..])]
        };
        let mut snapshot_id = None;
        let last = groups.len();
        for (n, (commit_id, group)) in groups.into_iter().enumerate() {
            let req = self.request(cx, &table, rec, commit_id, group, pending.rows)?;
            snapshot_id = match append_exactly_once(cx.catalog.as_ref(), &req).await? {
                AppendOutcome::Committed { snapshot_id } => Some(snapshot_id),
                AppendOutcome::AlreadyCommitted { snapshot_id } => snapshot_id,
            };
            if n + 1 < last {
                cx.faults.hit("commit.after-batch-snapshot").await;
            }
        }
        cx.faults.hit("commit.after-append").await;
        Ok(Landed {
            snapshot_id,
            bad_rows: 0,
        })
    }
}
