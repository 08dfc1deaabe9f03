//! `floe maintain`: an Iceberg table compacted and its old snapshots expired, under the same
//! lease as its commits, so maintenance and ingest commits never race.
//!
//! A compaction moves rows that floe's `rows/` records point at (routes with
//! `on-change = replace`), so it is a small protocol of its own, with its record in the
//! checkpoint table:
//!
//! | step | writes | a crash after it leaves | recovery |
//! |---|---|---|---|
//! | rewrite | the new data files | files nobody references | none needed (orphans) |
//! | ✗ `maintain.after-record` | `maint/<target>`: the commit id, the snapshot it is built on, and where each old file's rows went | a record, table untouched | the next holder of the lease (a committer or `floe maintain`) finds the id not in the table: keeps the record while the table is still at that snapshot (the compaction may still land: its maker may have lost the lease while its commit was on the way; `floe maintain` moves the table on with an empty snapshot), drops it once the table moved on |
//! | ✗ `maintain.after-commit` | the `replace` snapshot, carrying the commit id | the table compacted, `rows/` records pointing at the old files | the next holder finds the id in the table: moves the `rows/` records, drops the record |
//! | ✗ `maintain.after-move` | `rows/` records moved | the record | as above: moving again changes nothing |
//!
//! A committer finishes a maintenance record before it works out which rows a commit
//! replaces (and loads the table again after one), so no commit deletes by position in a file a
//! compaction removed; one that may still land while the commit is on its way makes the append
//! refuse deletes whose files are gone (`floe_iceberg::AppendRequest::deletes_on`), and the
//! next pass works them out again. Maintenance that finds such a compaction pending makes sure
//! it never lands (an empty snapshot on the one it was built on) before it compacts.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use floe_checkpoint::StoreExt;
use floe_core::{Error, Result};
use floe_iceberg::maintain::{CompactOptions, Moved, compact, expire_updates, rewrite_updates};
use floe_iceberg::{
    CHECKPOINT_PROP, COMMIT_ID_PROP, ON_CHANGE_PROP, find_commit_on, load_table, parse_ident,
};
use iceberg::spec::MAIN_BRANCH;
use serde::{Deserialize, Serialize};

use super::{Committer, TargetId};
use crate::protocol::records::ObjectRows;
use crate::protocol::replace::{self, Compaction};

/// `maint/<target>`.
pub fn maint_key(target: &TargetId) -> String {
    format!("maint/{target}")
}

/// A compaction in flight.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct MaintRecord {
    /// The commit id its snapshot carries.
    pub id: String,
    /// The table, `namespace.table`.
    pub table: String,
    /// The snapshot it is built on (its commit asserts `main` is still there); `None` in a
    /// record an earlier floe wrote.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base: Option<i64>,
    /// Where the rows of each replaced data file went.
    pub moved: BTreeMap<String, Moved>,
}

/// What `floe maintain` asks for.
#[derive(Clone, Debug)]
pub struct MaintainOptions {
    /// Compact the table's small files.
    pub compact: bool,
    /// Expire snapshots older than this.
    pub expire_older_than: Option<Duration>,
    /// Snapshots of `main` always kept.
    pub keep_snapshots: usize,
    /// Remove orphan files older than this (see [`super::orphans`]); `None`: keep them.
    pub remove_orphans_older_than: Option<Duration>,
}

impl Default for MaintainOptions {
    /// What the deployed `maintain` function does: compact, expire snapshots older than
    /// Iceberg's default of 5 days, keeping the newest one, and remove orphan files older than
    /// Iceberg's default of 3 days.
    fn default() -> Self {
        MaintainOptions {
            compact: true,
            expire_older_than: Some(Duration::from_secs(5 * 24 * 3600)),
            keep_snapshots: 1,
            remove_orphans_older_than: Some(Duration::from_secs(3 * 24 * 3600)),
        }
    }
}

/// What maintenance did to one table.
#[derive(Clone, Debug, Default, Serialize)]
pub struct TableMaintenance {
    pub table: String,
    /// Data files rewritten, and the files written for them.
    pub files_rewritten: usize,
    pub files_written: usize,
    /// Delete files applied and dropped.
    pub delete_files_dropped: usize,
    /// Snapshots expired.
    pub snapshots_expired: usize,
    /// What was left alone, and why.
    pub skipped: Vec<String>,
    /// `rows/` records moved to the new files.
    pub records_moved: usize,
    /// Orphan files removed (when asked).
    pub orphans: Option<super::orphans::OrphanReport>,
}

impl Committer<'_> {
    /// Maintain `table` (the Iceberg target `target`) under its commit lease; `None` when
    /// another committer holds it.
    pub(crate) async fn maintain_table(
        &self,
        target: TargetId,
        table: &str,
        opts: &MaintainOptions,
    ) -> Result<Option<TableMaintenance>> {
        if !self.hold_lease(&target).await? {
            return Ok(None);
        }
        let result = self.maintain_under_lease(&target, table, opts).await;
        self.release_lease(&target).await;
        result.map(Some)
    }

    async fn maintain_under_lease(
        &self,
        target: &TargetId,
        table: &str,
        opts: &MaintainOptions,
    ) -> Result<TableMaintenance> {
        let mut report = TableMaintenance {
            table: table.to_owned(),
            ..Default::default()
        };
        let found = match self.finish_maintenance(target).await? {
            Some((Compaction::Pending, _)) => self.supersede_compaction(target, table).await?,
            found => found,
        };
        report.records_moved += found.map_or(0, |(_, moved)| moved);
        let in_flight = (self.checkpoint)
            .scan(&crate::protocol::records::commit_prefix(target))
            .await?;
        if !in_flight.is_empty() {
            report
                .skipped
                .push("a commit is in flight: its committer finishes it first".into());
            return Ok(report);
        }
        let ident = parse_ident(table)?;
        let loaded = load_table(self.catalog.as_ref(), &ident)
            .await?
            .ok_or_else(|| Error::config("--table", format!("table {table} does not exist")))?;
        let replaces = loaded
            .metadata()
            .properties()
            .get(ON_CHANGE_PROP)
            .map(String::as_str)
            == Some("replace");
        if self.catalog_maintains()? && !replaces {
            report.skipped.push(
                "the catalog maintains this table (s3tables.managed-maintenance): see \
                 `floe tables get-table-maintenance-job-status`"
                    .into(),
            );
            return Ok(report);
        }
        // The branch floe commits the table's rows to, where its `rows/` records point.
        let branch = self.branch_of(table);
        if opts.compact {
            let id = uuid::Uuid::now_v7().to_string();
            // The size the table's route writes its files at.
            let target_size = (self.config.routes.iter())
                .find(|r| r.table == table)
                .and_then(|r| r.write_props.target_file_size_bytes())
                .map_or(self.config.ingest.target_file_size_bytes, |s| s as u64);
            let rewrite = compact(
                &loaded,
                &CompactOptions {
                    target_file_size_bytes: target_size,
                    file_prefix: format!("maint-{id}"),
                    branch: branch.to_owned(),
                    tracks_rows: replaces
                        || (self.config.routes.iter()).any(|r| {
                            r.table == table && r.on_change == crate::config::OnChange::Replace
                        }),
                },
            )
            .await?;
            report.skipped.extend(rewrite.skipped.iter().cloned());
            if !rewrite.removed.is_empty() {
                report.files_rewritten = rewrite.files_before;
                report.files_written = rewrite.added.len();
                report.delete_files_dropped = rewrite.removed.len() - rewrite.files_before;
                let record = MaintRecord {
                    id: id.clone(),
                    table: table.to_owned(),
                    base: floe_iceberg::delta::branch_head(&loaded, branch)
                        .map(|s| s.snapshot_id()),
                    moved: rewrite.moved.clone(),
                };
                self.checkpoint
                    .insert_json(&maint_key(target), &record, None)
                    .await?
                    .ok_or_else(|| Error::unexpected("a maintenance record is already there"))?;
                self.faults.hit("maintain.after-record").await;
                let summary = HashMap::from([
                    (COMMIT_ID_PROP.to_owned(), id.clone()),
                    (
                        CHECKPOINT_PROP.to_owned(),
                        serde_json::json!({"maintenance": "compaction"}).to_string(),
                    ),
                ]);
                let (requirements, updates) =
                    rewrite_updates(&loaded, branch, &rewrite, summary).await?;
                // Still ours: a committer that took the lease over commits on top of the
                // snapshot this one replaces, and the requirement then refuses this commit.
                self.renew_lease(true).await?;
                let committed = self
                    .catalog
                    .commit_updates(&ident, requirements, updates)
                    .await;
                if let Err(e) = committed {
                    // Lost answer or refusal: the record says which, now or next time.
                    let found = self.finish_maintenance(target).await?;
                    report.records_moved += found.map_or(0, |(_, moved)| moved);
                    return Err(floe_iceberg::from_iceberg(e)
                        .while_doing(format!("failed to commit the compaction of {table}")));
                }
                self.faults.hit("maintain.after-commit").await;
                let found = self.finish_maintenance(target).await?;
                report.records_moved += found.map_or(0, |(_, moved)| moved);
            }
        }
        if let Some(age) = opts.expire_older_than {
            let loaded = load_table(self.catalog.as_ref(), &ident)
                .await?
                .ok_or_else(|| Error::config("--table", format!("table {table} does not exist")))?;
            let cutoff = floe_checkpoint::now_ms() - age.as_millis() as i64;
            if let Some((requirements, updates, ids)) =
                expire_updates(&loaded, branch, cutoff, opts.keep_snapshots)
            {
                self.renew_lease(true).await?;
                self.catalog
                    .commit_updates(&ident, requirements, updates)
                    .await
                    .map_err(|e| {
                        floe_iceberg::from_iceberg(e)
                            .while_doing(format!("failed to expire snapshots of {table}"))
                    })?;
                report.snapshots_expired = ids.len();
            }
        }
        if let Some(age) = opts.remove_orphans_older_than {
            if table_bucket_removes_orphans(&self.config.catalog) {
                report.skipped.push(
                    "orphan files: the table bucket removes unreferenced files itself \
                     (icebergUnreferencedFileRemoval)"
                        .into(),
                );
            } else {
                let loaded = load_table(self.catalog.as_ref(), &ident)
                    .await?
                    .ok_or_else(|| {
                        Error::config("--table", format!("table {table} does not exist"))
                    })?;
                let protected = super::orphans::batch_files(self.checkpoint.as_ref()).await?;
                let cutoff = floe_checkpoint::now_ms() - age.as_millis() as i64;
                // Still ours, so no committer has added to the table since it was loaded.
                self.renew_lease(true).await?;
                let orphans =
                    super::orphans::remove_orphans(&loaded, &protected, cutoff, self.faults)
                        .await
                        .map_err(|e| {
                            e.while_doing(format!("failed to remove orphan files of {table}"))
                        })?;
                report.orphans = Some(orphans);
            }
        }
        Ok(report)
    }

    /// Whether the catalog compacts and expires the tables floe creates itself: S3 Tables and
    /// OSS Tables, unless `s3tables.managed-maintenance = false`. (Tables whose rows floe
    /// replaces by position are created with the catalog's compaction off: floe keeps them.)
    fn catalog_maintains(&self) -> Result<bool> {
        let catalog = &self.config.catalog;
        Ok(catalog.kind == floe_iceberg::CatalogKind::S3Tables
            && floe_iceberg::s3tables::managed_maintenance(&catalog.props)?)
    }

    /// The branch floe commits `table`'s rows to, where its `rows/` records point.
    fn branch_of(&self, table: &str) -> &str {
        (self.config.commit_branches.of(table)).unwrap_or(MAIN_BRANCH)
    }

    /// Make sure a compaction an earlier maintenance left pending (see [`Compaction::Pending`])
    /// never lands, so that this one can compact: an empty snapshot on the one it was built
    /// on, which its commit asserts. If it lands first, the empty snapshot is refused; either
    /// way it is then finished.
    async fn supersede_compaction(
        &self,
        target: &TargetId,
        table: &str,
    ) -> Result<Option<(Compaction, usize)>> {
        let ident = parse_ident(table)?;
        let loaded = load_table(self.catalog.as_ref(), &ident)
            .await?
            .ok_or_else(|| Error::config("--table", format!("table {table} does not exist")))?;
        let summary = HashMap::from([(
            CHECKPOINT_PROP.to_owned(),
            serde_json::json!({"maintenance": "supersede"}).to_string(),
        )]);
        let branch = self.branch_of(table);
        let (requirements, updates) =
            floe_iceberg::delta::snapshot_updates(&loaded, branch, Vec::new(), summary).await?;
        self.renew_lease(true).await?;
        // Refused: the table moved (the compaction landed, or can no longer).
        let _ = self
            .catalog
            .commit_updates(&ident, requirements, updates)
            .await;
        match self.finish_maintenance(target).await? {
            Some((Compaction::Pending, _)) => Err(Error::new(
                floe_core::ErrorKind::Conflict,
                format!("{table}: a compaction left pending could not be superseded; next time"),
            )),
            found => Ok(found),
        }
    }

    /// Finish (or drop) a compaction an earlier holder of the lease left, as
    /// [`replace::compaction`] says: once its snapshot is in the table, the `rows/` records
    /// still pointing at the files it replaced are moved; one that may still land is left.
    /// `None` when there was none; else what it was, and how many records moved.
    pub(crate) async fn finish_maintenance(
        &self,
        target: &TargetId,
    ) -> Result<Option<(Compaction, usize)>> {
        let key = maint_key(target);
        let Some((record, version)) = self.checkpoint.get_json::<MaintRecord>(&key).await? else {
            return Ok(None);
        };
        let ident = parse_ident(&record.table)?;
        let branch = self.branch_of(&record.table);
        let table = load_table(self.catalog.as_ref(), &ident).await?;
        let landed =
            (table.as_ref()).is_some_and(|t| find_commit_on(t, branch, &record.id).is_some());
        let current = table
            .and_then(|t| floe_iceberg::delta::branch_head(&t, branch).map(|s| s.snapshot_id()));
        let found = replace::compaction(landed, record.base, current);
        if found == Compaction::Pending {
            return Ok(Some((found, 0)));
        }
        let mut moved = 0;
        if found == Compaction::Landed {
            let prefix = format!("rows/{target}/");
            for (name, rows, v) in self.checkpoint.scan_json::<ObjectRows>(&prefix).await? {
                let Some(next) = replace::moved(&rows, &record.moved) else {
                    continue;
                };
                self.checkpoint
                    .update_json(&name, &next, &v, None)
                    .await?
                    .ok_or_else(|| {
                        Error::new(
                            floe_core::ErrorKind::Conflict,
                            format!("{name} changed while compaction moved it"),
                        )
                    })?;
                moved += 1;
            }
            self.faults.hit("maintain.after-move").await;
        }
        self.checkpoint.delete_if_version(&key, &version).await?;
        Ok(Some((found, moved)))
    }
}

/// Whether `catalog`'s tables live in an S3 Tables or OSS Tables bucket, which removes
/// unreferenced files itself and cannot be listed: the `s3tables` catalog, or a REST catalog
/// signing as `s3tables` or `osstables`.
fn table_bucket_removes_orphans(catalog: &floe_iceberg::CatalogConfig) -> bool {
    let signing = catalog.props.get("rest.signing-name").map(String::as_str);
    catalog.kind == floe_iceberg::CatalogKind::S3Tables
        || (catalog.kind == floe_iceberg::CatalogKind::Rest
            && matches!(signing, Some("s3tables" | "osstables")))
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::path::Path;

    /// Orphan removal leaves S3 Tables and OSS Tables buckets alone, whichever catalog reaches
    /// them (the `s3tables` API, or their Iceberg REST endpoints signing as `s3tables` /
    /// `osstables`), and lists every other catalog's table locations.
    #[test]
    fn table_buckets_remove_their_own_orphans() {
        let catalog = |props: &[(&str, &str)]| {
            let props: HashMap<String, String> = (props.iter())
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            floe_iceberg::CatalogConfig::from_props("floe", props, Path::new("/")).unwrap()
        };
        let cases: [(&[(&str, &str)], bool); 6] = [
            (&[("uri", "c.db"), ("warehouse", "wh")], false),
            (&[("type", "rest"), ("uri", "http://localhost:8181")], false),
            (
                &[
                    ("type", "rest"),
                    ("uri", "https://cn-hangzhou.oss-tables.aliyuncs.com/iceberg"),
                    ("rest.sigv4-enabled", "true"),
                    ("rest.signing-name", "osstables"),
                ],
                true,
            ),
            (
                &[
                    ("type", "rest"),
                    ("uri", "https://s3tables.us-east-1.amazonaws.com/iceberg"),
                    ("rest.sigv4-enabled", "true"),
                    ("rest.signing-name", "s3tables"),
                ],
                true,
            ),
            (
                &[
                    ("type", "rest"),
                    ("uri", "https://glue.us-east-1.amazonaws.com/iceberg"),
                    ("rest.sigv4-enabled", "true"),
                    ("rest.signing-name", "glue"),
                ],
                false,
            ),
            (
                &[
                    ("type", "s3tables"),
                    (
                        "warehouse",
                        "arn:aws:s3tables:us-east-1:123456789012:bucket/b",
                    ),
                ],
                true,
            ),
        ];
        for (props, want) in cases {
            assert_eq!(
                super::table_bucket_removes_orphans(&catalog(props)),
                want,
                "{props:?}"
            );
        }
    }
}
