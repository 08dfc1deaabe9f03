//! The MaxCompute target: staged Parquet files → one tunnel session per commit, exactly once.
//!
//! Rows are staged once, as the Parquet files the Iceberg writer makes (in the route's Iceberg
//! table, or for a route whose only target is MaxCompute in a staging table that no Iceberg
//! catalog holds, see [`crate::targets::staging`]). A batch record names them under the target
//! `maxcompute:<project>.<table>[/<partition>]` with a [`StagedMaxCompute`]; the committer below
//! reads them back and uploads them, under the same lease and commit record as an Iceberg
//! commit (see the crate doc):
//!
//! ```text
//!  commit/T/C = pending [batches] ───────────────────────────►  (written by the common path)
//!  setup/T absent? save modes (schema, then data), once ─────►  setup/T
//!        │  ✗ commit.mc.after-save-modes
//!  commit/T/C has a session? ── reload it ── committed ──────►  done, nothing to send
//!        │                               ├─ open ───────────►  send what it lacks, commit it
//!        │                               └─ expired / gone ──►  as if it had none
//!  create an upload (or upsert) session ─────────────────────►  commit/T/C.session = {id}
//!        │  ✗ commit.mc.after-session
//!  per staged file, per row group: convert (bad rows → on-error), write
//!        upload: one block per row group, ids 0,1,2… in file order (a rewrite replaces)
//!        upsert: rows by primary key, `removed` / -D rows as deletes
//!  session.blocks = [ids], commit_requested ────────────────►  commit/T/C.session
//!        │  ✗ commit.mc.after-blocks
//!  commit the session
//!        │  ✗ commit.mc.after-commit
//!  commit/T/C := done, batches marked (common path); staging-only files deleted
//! ```
//!
//! One block per row group rather than per file (as DESIGN.md sketched): a block is built in
//! memory before its PUT, and a staged file may be 128 MiB of zstd Parquet, many times that as
//! tunnel records; a row group (`ingest.row-group-rows`) bounds it. Ids stay derived from
//! position: the row groups of the commit's files, counted in commit order.
//!
//! Determinism is what makes a retry safe: the files of a commit and their order are in its
//! record, so block `n` always holds the same rows, a rewritten block replaces the one the server
//! may already have, and the rows MaxCompute cannot take are found again. Those are set aside
//! under the route's `on-error` (`dead-letter` writes them once per file and row group to a
//! name derived from the commit, create-only: a redo finds the part the first attempt wrote and
//! keeps it instead of duplicating it, see `crate::deadletter`; `fail` stops the commit; `skip`
//! counts them).

mod bad_rows;
mod readback;
mod session;
mod setup;

use std::collections::{BTreeSet, HashMap};

use arrow_schema::SchemaRef;
use floe_checkpoint::{StoreExt, Version};
use floe_core::{Error, Result};
use floe_decode::infer::arrow_to_iceberg;
use floe_iceberg::StagedFile;
use floe_maxcompute::{
    InsertStrategy, MaxComputeSink, MaxComputeSinkConfig, PartitionSpec, Resumed, SessionRecord,
    UploadOptions, UploadSession, UpsertOptions, UpsertSession,
};
use tokio::sync::{Mutex, OnceCell};

use super::{Committer, Landed, PendingCommit, Target, TargetId};
use crate::config::{Mode, OnError, RouteConfig, RowKinds};
use crate::protocol::records::{BatchRecord, CommitRecord, StagedMaxCompute, TargetFiles};

/// The `[maxcompute]` options, and the connection made on first use (a commit with MaxCompute
/// work; ingest never needs it).
#[derive(Debug)]
pub struct MaxComputeTargets {
    config: MaxComputeSinkConfig,
    sink: OnceCell<MaxComputeSink>,
}

impl MaxComputeTargets {
    /// Targets with these options (no request is made).
    pub fn new(config: MaxComputeSinkConfig) -> Self {
        MaxComputeTargets {
            config,
            sink: OnceCell::new(),
        }
    }

    /// The options.
    pub fn config(&self) -> &MaxComputeSinkConfig {
        &self.config
    }

    /// The connected sink: credentials (options, else the environment), REST client, tunnel.
    pub async fn sink(&self) -> Result<&MaxComputeSink> {
        self.sink
            .get_or_try_init(|| {
                MaxComputeSink::connect(self.config.clone(), |k| std::env::var(k).ok())
            })
            .await
    }
}

/// Table properties of a table created only to hold a MaxCompute route's staged files.
pub fn staging_properties(route: &RouteConfig) -> HashMap<String, String> {
    let mut props = HashMap::new();
    if !route.targets.iceberg && route.targets.maxcompute.is_some() {
        props.insert(
            "floe.staging-for".to_owned(),
            format!(
                "maxcompute (route {}; floe never commits to this table)",
                route.name
            ),
        );
    }
    props
}

/// Check a MaxCompute table name resolved for `change` from `template`.
pub fn resolve_table_name(
    template: &str,
    resolved: &str,
    change: &floe_core::ObjectChange,
) -> Result<String> {
    if floe_maxcompute::partition::is_identifier(resolved) {
        Ok(resolved.to_owned())
    } else {
        Err(Error::invalid_input(format!(
            "object {} gives maxcompute table name `{resolved}` (from `{template}`), which is not a table name",
            change.key
        )))
    }
}

fn on_error_name(p: OnError) -> &'static str {
    match p {
        OnError::Fail => "fail",
        OnError::Skip => "skip",
        OnError::DeadLetter => "dead-letter",
    }
}

/// One staged file of a commit, in commit order.
pub(super) struct Part<'a> {
    pub(super) batch: &'a str,
    pub(super) staged: &'a TargetFiles,
    pub(super) detail: &'a StagedMaxCompute,
    pub(super) file: &'a StagedFile,
}

enum Session {
    Upload(UploadSession),
    Upsert(UpsertSession),
}

/// What to stage for MaxCompute: the target and detail of a slot's files bound for MaxCompute
/// table `name` (resolved for the slot's objects) by route `r`; `arrow` is the files' schema.
pub fn staging(
    r: &RouteConfig,
    config: Option<&MaxComputeSinkConfig>,
    name: &str,
    arrow: &SchemaRef,
) -> Result<(TargetId, StagedMaxCompute)> {
    let m =
        r.targets.maxcompute.as_ref().ok_or_else(|| {
            Error::unexpected(format!("route {} has no maxcompute target", r.name))
        })?;
    let config = config.ok_or_else(|| {
        Error::config(
            "maxcompute",
            "a route targets maxcompute but the section is missing",
        )
    })?;
    let table = config.table_id(name);
    let partition = m
        .partition_spec
        .as_deref()
        .map(str::parse::<PartitionSpec>)
        .transpose()?;
    let mut schema = match &r.schema {
        Some(s) => s.clone(),
        None => arrow_to_iceberg(arrow)?,
    };
    if r.mode != Mode::Records
        && schema.identifier_fields.is_empty()
        && schema.fields.iter().any(|f| f.name == "key" && f.required)
    {
        // An object's key identifies its metadata row.
        schema.identifier_fields = vec!["key".to_owned()];
    }
    let detail = StagedMaxCompute {
        partition: partition.as_ref().map(ToString::to_string),
        route: r.name.clone(),
        on_error: on_error_name(r.on_error).to_owned(),
        row_kinds: m.row_kinds.clone(),
        upstream_schema: schema.to_json().to_string(),
        table: table.clone(),
    };
    Ok((TargetId::maxcompute(&table, partition.as_ref()), detail))
}

/// A MaxCompute table target (the table and partition are in the commit's batches).
#[derive(Default)]
pub struct MaxComputeTarget {
    /// The recorded session as [`Target::is_in`] found it (open or expired), handed to
    /// [`Target::commit`] so the session is asked once.
    resumed: Mutex<Option<Resumed>>,
}

#[async_trait::async_trait]
impl Target for MaxComputeTarget {
    async fn is_in(&self, cx: &Committer<'_>, record: &CommitRecord) -> Result<Option<Landed>> {
        let Some(session) = &record.session else {
            return Ok(None);
        };
        let sink = cx.maxcompute_targets(&record.target)?.sink().await?;
        Ok(match sink.resume(session).await? {
            Resumed::Committed => {
                tracing::info!(target = %record.target, session = %session.id, "maxcompute session already committed");
                Some(Landed::default())
            }
            open_or_expired => {
                *self.resumed.lock().await = Some(open_or_expired);
                None
            }
        })
    }

    async fn commit(&self, cx: &Committer<'_>, p: PendingCommit<'_>) -> Result<Landed> {
        let resumed = self.resumed.lock().await.take();
        let bad_rows = cx
            .commit_maxcompute(p.key, p.record, p.version, p.batches, resumed)
            .await?;
        Ok(Landed {
            snapshot_id: None,
            bad_rows,
        })
    }

    async fn cleanup(&self, cx: &Committer<'_>, id: &TargetId, batches: &[(BatchRecord, Version)]) {
        cx.drop_staging_files(id, batches).await;
    }
}

impl Committer<'_> {
    /// Whether commit `commit_id` is the one that overwrites `table` (its `partition`):
    /// `overwrite = true` replaces a table or partition once per deployment, as SeaTunnel
    /// does once per job, and every later commit appends. The first commit to ask records
    /// itself in the checkpoint table (insert-if-absent, before its session exists), so two
    /// committers cannot both overwrite, and a recovery of that same commit (its session
    /// expired, its rows written again) still overwrites. A new checkpoint table is a new job.
    async fn overwrites_first(
        &self,
        table: &floe_maxcompute::TableId,
        partition: Option<&PartitionSpec>,
        commit_id: &str,
    ) -> Result<bool> {
        let key = format!(
            "mc-overwrite/{table}/{}",
            partition.map(ToString::to_string).unwrap_or_default()
        );
        let mine = serde_json::json!({ "commit": commit_id });
        if self
            .checkpoint
            .insert_json(&key, &mine, None)
            .await?
            .is_some()
        {
            tracing::info!(%table, partition = ?partition.map(ToString::to_string), commit_id, "the first commit into this table overwrites it");
            return Ok(true);
        }
        let first = self.checkpoint.get_json::<serde_json::Value>(&key).await?;
        Ok(first.is_some_and(|(v, _)| v["commit"] == commit_id))
    }

    /// The `[maxcompute]` section, or an error naming `target`'s staged work.
    fn maxcompute_targets(&self, target: &TargetId) -> Result<&MaxComputeTargets> {
        self.maxcompute.ok_or_else(|| {
            Error::config(
                "maxcompute",
                format!(
                    "{target} has staged work but the configuration has no [maxcompute] section"
                ),
            )
        })
    }

    /// Take a pending MaxCompute commit to the point where its session is committed (the
    /// common path then marks it done); see the module doc. `found` is the recorded session's
    /// state when it was already asked. Returns the rows set aside.
    async fn commit_maxcompute(
        &self,
        key: &str,
        rec: &mut CommitRecord,
        version: &mut Version,
        batches: &[(BatchRecord, Version)],
        found: Option<Resumed>,
    ) -> Result<u64> {
        let target = rec.target.clone();
        let mut parts = Vec::new();
        for (b, _) in batches {
            let Some(staged) = b.targets.get(&target) else {
                continue;
            };
            let detail = staged.maxcompute.as_ref().ok_or_else(|| {
                Error::unexpected(format!(
                    "batch {} stages files for {target} without their maxcompute details",
                    b.id
                ))
            })?;
            for file in &staged.files {
                parts.push(Part {
                    batch: &b.id,
                    staged,
                    detail,
                    file,
                });
            }
        }
        let Some(first) = parts.first() else {
            return Ok(0);
        };
        let detail = first.detail;
        let targets = self.maxcompute_targets(&target)?;
        let sink = targets.sink().await?;
        let mut cfg = sink.config().clone();
        cfg.table_name = detail.table.name.clone();
        cfg.partition_spec = detail.partition.clone();
        let partition = cfg.partition()?;
        let table = &detail.table;

        self.maxcompute_setup(&target, sink, &cfg, first, partition.as_ref())
            .await?;
        let meta = sink.client().get_table(table).await?;
        cfg.check_table(&meta)?;

        // The session: the recorded one if it can still be committed, else a new one.
        let mut requested = false;
        let resumed = match rec.session.clone() {
            None => None,
            Some(s) => match match found {
                Some(r) => r,
                None => sink.resume(&s).await?,
            } {
                Resumed::Committed => {
                    tracing::info!(target = %target, session = %s.id, "maxcompute session already committed");
                    return Ok(0);
                }
                Resumed::Upload(u) => {
                    requested = s.commit_requested;
                    Some(Session::Upload(u))
                }
                Resumed::Upsert(u) => {
                    requested = s.commit_requested;
                    Some(Session::Upsert(u))
                }
                Resumed::Expired => {
                    tracing::warn!(target = %target, session = %s.id, "maxcompute session expired before its commit; writing again with a new session");
                    None
                }
            },
        };
        let mut rows_before = None;
        let mut session = match resumed {
            Some(s) => s,
            None => {
                let changes = !meta.primary_key.is_empty()
                    && parts
                        .iter()
                        .any(|p| p.detail.row_kinds != RowKinds::Inserts);
                let s = if cfg.insert_strategy == InsertStrategy::Upsert || changes {
                    Session::Upsert(
                        sink.tunnel()
                            .create_upsert(table, partition.as_ref(), UpsertOptions::default())
                            .await?,
                    )
                } else {
                    let overwrite = cfg.overwrite
                        && self
                            .overwrites_first(table, partition.as_ref(), &rec.id)
                            .await?;
                    let options = UploadOptions {
                        overwrite,
                        create_partition: partition.is_some(),
                    };
                    // What the table holds before: should this session be gone after its
                    // commit was sent, the count then says whether it committed.
                    rows_before = Some(
                        sink.tunnel()
                            .record_count(table, partition.as_ref())
                            .await?,
                    );
                    Session::Upload(
                        sink.tunnel()
                            .create_upload(table, partition.as_ref(), &options)
                            .await?,
                    )
                };
                rec.session = Some(match &s {
                    Session::Upload(u) => SessionRecord {
                        rows_before,
                        ..SessionRecord::for_upload(u)
                    },
                    Session::Upsert(u) => SessionRecord::for_upsert(u),
                });
                *version = self.save_commit_record(key, rec, version).await?;
                self.faults.hit("commit.mc.after-session").await;
                s
            }
        };

        let mut tables = HashMap::new();
        let bad = match &mut session {
            Session::Upload(s) => {
                let have: BTreeSet<u32> = s.server_blocks().iter().copied().collect();
                let (blocks, bad, rows) = self
                    .upload_blocks(s, &have, &parts, &meta, &cfg, rec, &mut tables)
                    .await?;
                if let Some(r) = rec.session.as_mut() {
                    r.blocks = blocks.clone();
                    r.rows_sent = Some(rows);
                    r.commit_requested = true;
                }
                *version = self.save_commit_record(key, rec, version).await?;
                self.faults.hit("commit.mc.after-blocks").await;
                self.renew_lease(true).await?;
                s.commit(&blocks).await?;
                bad
            }
            Session::Upsert(s) => {
                // Rows already sent stay in the session; a commit asked for (its answer lost)
                // must not be fed again. Before that, sending everything again is harmless:
                // the same operations in the same order leave the same rows.
                let bad = if requested {
                    0
                } else {
                    let bad = self
                        .upsert_rows(s, &parts, &meta, &cfg, rec, &mut tables)
                        .await?;
                    s.flush().await?;
                    if let Some(r) = rec.session.as_mut() {
                        r.commit_requested = true;
                    }
                    *version = self.save_commit_record(key, rec, version).await?;
                    self.faults.hit("commit.mc.after-blocks").await;
                    bad
                };
                self.renew_lease(true).await?;
                s.commit().await?;
                bad
            }
        };
        self.faults.hit("commit.mc.after-commit").await;
        tracing::info!(target = %target, commit_id = %rec.id, files = parts.len(), bad_rows = bad, "maxcompute session committed");
        Ok(bad)
    }
}
