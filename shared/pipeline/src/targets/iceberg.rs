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
use crate::protocol::records::CommitRecord;

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
        let mut data_files = Vec::with_capacity(pending.files);
        let mut file_batches = Vec::with_capacity(pending.files);
        for (b, _) in pending.batches {
            for f in &b.targets[&rec.target].files {
                data_files.push(f.to_data_file(&table)?);
                file_batches.push(b.id.clone());
            }
        }
        let batches: Vec<&str> = pending.batches.iter().map(|(b, _)| b.id.as_str()).collect();
        let checkpoint = serde_json::json!({"batches": batches, "rows": pending.rows});
        let req = AppendRequest {
            table: parse_ident(&self.table)?,
            files: data_files,
            commit_id: rec.id.clone(),
            summary: HashMap::from([(CHECKPOINT_PROP.to_owned(), checkpoint.to_string())]),
            deadline: Instant::now() + Duration::from_millis(cx.config.commit.timeout_ms),
            file_batches,
        };
        let snapshot_id = match append_exactly_once(cx.catalog.as_ref(), &req).await? {
            AppendOutcome::Committed { snapshot_id } => Some(snapshot_id),
            AppendOutcome::AlreadyCommitted { snapshot_id } => snapshot_id,
        };
        cx.faults.hit("commit.after-append").await;
        Ok(Landed {
            snapshot_id,
            bad_rows: 0,
        })
    }
}
