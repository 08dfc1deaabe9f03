//! The MaxCompute target: staged Parquet files → one tunnel session per commit, exactly once.
//!
//! Rows are staged once, as the Parquet files the Iceberg writer makes (in the route's Iceberg
//! table, or in a `floe_staging.*` table for a route whose only target is MaxCompute, see
//! [`crate::config::maxcompute::default_table`]). A batch record names them under the target
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

use std::collections::{BTreeSet, HashMap};
use std::path::PathBuf;

use arrow_array::cast::AsArray;
use arrow_array::{Array, RecordBatch};
use arrow_schema::{ArrowError, SchemaRef};
use bytes::Bytes;
use floe_checkpoint::{StoreExt, Version, now_ms};
use floe_core::{Error, ErrorKind, Result};
use floe_iceberg::{StagedFile, from_iceberg, load_table, parse_ident};
use floe_maxcompute::upload::MAX_BLOCK_ID;
use floe_maxcompute::{
    BatchConverter, InsertStrategy, MaxComputeSink, MaxComputeSinkConfig, PartitionSpec, Resumed,
    RowKind, SaveModeTarget, SessionRecord, TableMeta, UploadOptions, UploadSession, UpsertOptions,
    UpsertSession, UpstreamTable, apply_data_save_mode, apply_schema_save_mode,
    data_save_mode_statement,
};
use floe_schema::TableSchema;
use floe_schema::infer::arrow_to_iceberg;
use floe_tunnel_codec::BlockEncoder;
use iceberg::table::Table;
use parquet::arrow::arrow_reader::{
    ArrowReaderMetadata, ArrowReaderOptions, ParquetRecordBatchReaderBuilder,
};
use tokio::sync::OnceCell;

use crate::config::{Mode, OnError, RouteConfig, RowKinds};
use crate::deadletter::{DeadLetter, DeadLetterWriter};
use crate::pipeline::Pipeline;
use crate::protocol::records::{
    BatchRecord, CommitRecord, SetupRecord, StagedMaxCompute, TargetFiles, setup_key,
};
use crate::targets::id::{is_maxcompute, maxcompute_target};

/// Rows per Arrow batch read back from a staged file.
const READ_BATCH_ROWS: usize = 8192;
/// A dead letter's `raw` is cut at this many characters.
const RAW_MAX_CHARS: usize = 4096;

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
struct Part<'a> {
    batch: &'a str,
    staged: &'a TargetFiles,
    detail: &'a StagedMaxCompute,
    file: &'a StagedFile,
}

enum Session {
    Upload(UploadSession),
    Upsert(UpsertSession),
}

/// A row MaxCompute cannot take.
struct BadRow {
    line: u64,
    reason: String,
    raw: String,
    bucket: String,
    key: String,
}

impl Pipeline {
    /// The target and detail for a slot's files bound for MaxCompute table `name` (resolved for
    /// the slot's objects); `arrow` is the staged files' schema.
    pub(crate) fn maxcompute_staging(
        &self,
        route: usize,
        name: &str,
        arrow: &SchemaRef,
    ) -> Result<(String, StagedMaxCompute)> {
        let r = self.router.config(route);
        let m = r.targets.maxcompute.as_ref().ok_or_else(|| {
            Error::unexpected(format!("route {} has no maxcompute target", r.name))
        })?;
        let config = self.config.maxcompute.as_ref().ok_or_else(|| {
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
        Ok((maxcompute_target(&table, partition.as_ref()), detail))
    }

    /// Take a pending MaxCompute commit to the point where its session is committed (the
    /// common path then marks it done); see the module doc. Returns the rows set aside.
    pub(crate) async fn commit_maxcompute(
        &self,
        key: &str,
        rec: &mut CommitRecord,
        version: &mut Version,
        batches: &[(BatchRecord, Version)],
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
        let targets = self.maxcompute.as_ref().ok_or_else(|| {
            Error::config(
                "maxcompute",
                format!(
                    "{target} has staged work but the configuration has no [maxcompute] section"
                ),
            )
        })?;
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
            Some(s) => match sink.resume(&s).await? {
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
                    let options = UploadOptions {
                        overwrite: cfg.overwrite,
                        create_partition: partition.is_some(),
                    };
                    Session::Upload(
                        sink.tunnel()
                            .create_upload(table, partition.as_ref(), &options)
                            .await?,
                    )
                };
                rec.session = Some(match &s {
                    Session::Upload(u) => SessionRecord::for_upload(u),
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
                let (blocks, bad) = self
                    .upload_blocks(s, &have, &parts, &meta, &cfg, rec, &mut tables)
                    .await?;
                if let Some(r) = rec.session.as_mut() {
                    r.blocks = blocks.clone();
                    r.commit_requested = true;
                }
                *version = self.save_commit_record(key, rec, version).await?;
                self.faults.hit("commit.mc.after-blocks").await;
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
                s.commit().await?;
                bad
            }
        };
        self.faults.hit("commit.mc.after-commit").await;
        tracing::info!(target = %target, commit_id = %rec.id, files = parts.len(), bad_rows = bad, "maxcompute session committed");
        Ok(bad)
    }

    async fn save_commit_record(
        &self,
        key: &str,
        rec: &CommitRecord,
        version: &Version,
    ) -> Result<Version> {
        self.checkpoint
            .update_json(key, rec, version, None)
            .await?
            .ok_or_else(|| {
                Error::new(
                    ErrorKind::Conflict,
                    format!("commit record {key} changed under its committer"),
                )
            })
    }

    /// Run the save modes of a target once, before its first session, and remember that they
    /// ran (`setup/<target>`), so no later commit or rerun applies them again.
    ///
    /// A crash before the record is written runs the schema mode and the data checks again:
    /// harmless, since no session of the target has started, so nothing floe landed can be
    /// dropped. The one statement that changes data (`DROP_DATA`'s `TRUNCATE`, the `custom_sql`
    /// of `CUSTOM_PROCESSING`) is submitted by floe and its SQL instance recorded; after a
    /// crash, recovery waits for that instance instead of submitting it again. (Only a crash
    /// between the submission and its record, one HTTP answer wide, can repeat it, still before
    /// any session of the target.)
    async fn maxcompute_setup(
        &self,
        target: &str,
        sink: &MaxComputeSink,
        cfg: &MaxComputeSinkConfig,
        first: &Part<'_>,
        partition: Option<&PartitionSpec>,
    ) -> Result<()> {
        let key = setup_key(target);
        let (mut record, mut version) = match self.checkpoint.get_json::<SetupRecord>(&key).await? {
            Some((r, _)) if r.done => return Ok(()),
            Some((r, v)) => (r, Some(v)),
            None => (
                SetupRecord {
                    at_ms: now_ms(),
                    schema: String::new(),
                    data: format!("{:?}", cfg.data_save_mode),
                    data_instance: None,
                    data_sql: None,
                    done: false,
                },
                None,
            ),
        };
        let detail = first.detail;
        let client = sink.client();
        if record.data_instance.is_none() {
            let schema = TableSchema::from_json(&detail.upstream_schema)?;
            let staging = first.staged.table.as_str();
            let (database, table_name) = staging.rsplit_once('.').unwrap_or(("", staging));
            let upstream = UpstreamTable {
                database: database.to_owned(),
                table_name: table_name.to_owned(),
                schema,
                unique_keys: Vec::new(),
                comment: format!("landed by floe (route {})", detail.route),
            };
            let outcome = apply_schema_save_mode(
                client,
                cfg.schema_save_mode,
                &SaveModeTarget {
                    table: &detail.table,
                    partition,
                    create_template: &cfg.save_mode_create_template,
                    upstream: &upstream,
                },
            )
            .await?;
            record.schema = format!("{:?}: {outcome:?}", cfg.schema_save_mode);
            let custom_sql = cfg.custom_sql.as_deref();
            let mode = cfg.data_save_mode;
            match data_save_mode_statement(client, mode, custom_sql, &detail.table, partition)
                .await?
            {
                Some(statement) => {
                    let id = client
                        .submit_sql(&statement.sql, &statement.settings)
                        .await?;
                    record.data_instance = Some(id);
                    record.data_sql = Some(statement.sql);
                    version = Some(self.save_setup(&key, &record, version.as_ref()).await?);
                }
                // The modes that only check (or do nothing) are safe to run again.
                None => {
                    apply_data_save_mode(client, mode, custom_sql, &detail.table, partition).await?
                }
            }
        }
        self.faults.hit("commit.mc.after-save-modes").await;
        if let (Some(id), Some(sql)) = (&record.data_instance, &record.data_sql)
            && let Err(e) = client.wait_sql(id, sql).await
        {
            if !e.is_retryable() {
                // It failed on the server: the next try submits it again.
                record.data_instance = None;
                record.data_sql = None;
                self.save_setup(&key, &record, version.as_ref()).await?;
            }
            return Err(e);
        }
        record.done = true;
        record.at_ms = now_ms();
        self.save_setup(&key, &record, version.as_ref()).await?;
        tracing::info!(target = %target, schema = %record.schema, data = %record.data, "maxcompute save modes applied");
        Ok(())
    }

    async fn save_setup(
        &self,
        key: &str,
        record: &SetupRecord,
        version: Option<&Version>,
    ) -> Result<Version> {
        let saved = match version {
            Some(v) => self.checkpoint.update_json(key, record, v, None).await?,
            None => self.checkpoint.insert_json(key, record, None).await?,
        };
        saved.ok_or_else(|| {
            Error::new(
                ErrorKind::Conflict,
                format!("{key} changed under its committer"),
            )
        })
    }

    /// Write the blocks the session lacks (all of them for a new one); returns every block id of
    /// the commit and the rows set aside.
    #[allow(clippy::too_many_arguments)]
    async fn upload_blocks(
        &self,
        s: &UploadSession,
        have: &BTreeSet<u32>,
        parts: &[Part<'_>],
        meta: &TableMeta,
        cfg: &MaxComputeSinkConfig,
        rec: &CommitRecord,
        tables: &mut HashMap<String, Table>,
    ) -> Result<(Vec<u32>, u64)> {
        let mut blocks = Vec::new();
        let mut bad_rows = 0;
        let mut next: u32 = 0;
        for (fi, part) in parts.iter().enumerate() {
            let file = self
                .open_staged(tables, &part.staged.table, &part.file.path)
                .await?;
            let conv = BatchConverter::new(&meta.columns, file.schema(), &cfg.datetime_format)
                .map_err(|e| e.while_doing(format!("staged file {}", part.file.path)))?;
            for rg in 0..file.row_groups() {
                let id = next;
                if id > MAX_BLOCK_ID {
                    return Err(Error::invalid_input(format!(
                        "a commit to maxcompute table {} takes more than {} row groups; lower commit.max-files",
                        meta.id,
                        MAX_BLOCK_ID + 1
                    ))
                    .with_retryable(false));
                }
                next += 1;
                blocks.push(id);
                if have.contains(&id) {
                    // Written before a crash; its bad rows were set aside before it was.
                    continue;
                }
                let mut enc = BlockEncoder::new(&meta.columns);
                let mut bad = Vec::new();
                let mut line = file.first_row(rg);
                let mut row = Vec::new();
                for batch in file.row_group(rg)? {
                    let batch = batch.map_err(|e| read_error(&part.file.path, e))?;
                    let kinds = KindColumn::new(&part.detail.row_kinds, &batch)?;
                    let prepared = conv.prepare(&batch)?;
                    for i in 0..batch.num_rows() {
                        let refused = match kinds.kind(i) {
                            Ok(RowKind::Insert) => None,
                            Ok(_) if kinds.changelog => None,
                            Ok(RowKind::UpdateBefore) => RowKind::UpdateBefore
                                .operation()
                                .err()
                                .map(|e| e.to_string()),
                            Ok(_) => Some(format!(
                                "update and delete rows need an upsert session, and maxcompute table {} has no primary key",
                                meta.id
                            )),
                            Err(e) => Some(e.to_string()),
                        };
                        let outcome = match refused {
                            Some(reason) => Err(reason),
                            None => match prepared.row(i, &mut row) {
                                Err(e) => Err(row_error_reason(&e)),
                                Ok(()) => match enc.write_record(&row) {
                                    Ok(()) => Ok(()),
                                    Err(e) if e.kind() == ErrorKind::InvalidInput => {
                                        Err(e.to_string())
                                    }
                                    Err(e) => return Err(e),
                                },
                            },
                        };
                        if let Err(reason) = outcome {
                            bad.push(bad_row(&batch, i, line + i as u64, reason));
                        }
                    }
                    line += batch.num_rows() as u64;
                }
                bad_rows += self.set_aside(rec, part, fi, rg, bad).await?;
                s.write_block(id, enc.finish()).await?;
            }
        }
        Ok((blocks, bad_rows))
    }

    /// Send every row of the commit to an upsert session (not flushed); returns the rows set
    /// aside.
    #[allow(clippy::too_many_arguments)]
    async fn upsert_rows(
        &self,
        s: &mut UpsertSession,
        parts: &[Part<'_>],
        meta: &TableMeta,
        cfg: &MaxComputeSinkConfig,
        rec: &CommitRecord,
        tables: &mut HashMap<String, Table>,
    ) -> Result<u64> {
        let mut bad_rows = 0;
        for (fi, part) in parts.iter().enumerate() {
            let file = self
                .open_staged(tables, &part.staged.table, &part.file.path)
                .await?;
            let conv = BatchConverter::new(s.schema(), file.schema(), &cfg.datetime_format)
                .map_err(|e| e.while_doing(format!("staged file {}", part.file.path)))?;
            for rg in 0..file.row_groups() {
                let mut bad = Vec::new();
                let mut line = file.first_row(rg);
                for batch in file.row_group(rg)? {
                    let batch = batch.map_err(|e| read_error(&part.file.path, e))?;
                    let kinds = KindColumn::new(&part.detail.row_kinds, &batch)?;
                    let errors = s.write_batch(&conv, &batch, |i| kinds.kind(i)).await?;
                    for e in errors {
                        bad.push(bad_row(
                            &batch,
                            e.row,
                            line + e.row as u64,
                            row_error_reason(&e),
                        ));
                    }
                    line += batch.num_rows() as u64;
                }
                bad_rows += self.set_aside(rec, part, fi, rg, bad).await?;
            }
        }
        tracing::debug!(table = %meta.id, rows = s.rows_sent(), "maxcompute upsert rows sent");
        Ok(bad_rows)
    }

    /// Apply the route's `on-error` to the bad rows of one row group of one file.
    async fn set_aside(
        &self,
        rec: &CommitRecord,
        part: &Part<'_>,
        file_index: usize,
        row_group: usize,
        bad: Vec<BadRow>,
    ) -> Result<u64> {
        let Some(firstbad) = bad.first() else {
            return Ok(0);
        };
        let n = bad.len() as u64;
        let table = &part.detail.table;
        match part.detail.on_error.as_str() {
            "fail" => Err(Error::invalid_input(format!(
                "{} row {}: maxcompute table {table} cannot take it: {} (on-error = fail)",
                part.file.path, firstbad.line, firstbad.reason
            ))
            .with_retryable(false)),
            "skip" => {
                tracing::warn!(table = %table, file = %part.file.path, rows = n, reason = %firstbad.reason, "rows maxcompute cannot take were skipped");
                Ok(n)
            }
            _ => {
                // Named by commit, file and row group, filed under the commit's day: a redo
                // after a crash finds the part already written (same letters: done).
                let name = format!("{}-{file_index}-{row_group}", rec.id);
                let day = chrono::DateTime::from_timestamp_millis(rec.created_ms)
                    .unwrap_or_else(chrono::Utc::now)
                    .format("%Y-%m-%d")
                    .to_string();
                let mut w = DeadLetterWriter::new(self.dead_letters.clone(), &name).on_day(day);
                for b in bad {
                    w.add(&DeadLetter {
                        time: chrono::Utc::now().to_rfc3339(),
                        batch: part.batch.to_owned(),
                        route: part.detail.route.clone(),
                        bucket: b.bucket,
                        key: b.key,
                        url: part.file.path.clone(),
                        line: Some(b.line),
                        reason: format!("maxcompute table {table}: {}", b.reason),
                        raw: b.raw,
                    })
                    .await?;
                }
                w.flush().await?;
                tracing::warn!(table = %table, file = %part.file.path, rows = n, "message dead-lettered");
                Ok(n)
            }
        }
    }

    /// Open a staged file: a local file directly, anything else through its table's FileIO.
    async fn open_staged(
        &self,
        tables: &mut HashMap<String, Table>,
        table: &str,
        path: &str,
    ) -> Result<StagedParquet> {
        let source = match local_path(path) {
            Some(p) => Source::File(std::fs::File::open(&p).map_err(|e| {
                Error::from(e).while_doing(format!("failed to open staged file {path}"))
            })?),
            None => {
                let t = self.staging_table(tables, table).await?;
                let input = t.file_io().new_input(path).map_err(from_iceberg)?;
                Source::Bytes(input.read().await.map_err(|e| {
                    from_iceberg(e).while_doing(format!("failed to read staged file {path}"))
                })?)
            }
        };
        let meta = match &source {
            Source::File(f) => ArrowReaderMetadata::load(f, ArrowReaderOptions::new()),
            Source::Bytes(b) => ArrowReaderMetadata::load(b, ArrowReaderOptions::new()),
        }
        .map_err(|e| {
            Error::invalid_input(format!("staged file {path} is not readable parquet"))
                .with_source(e)
                .with_retryable(false)
        })?;
        Ok(StagedParquet { source, meta })
    }

    async fn staging_table<'t>(
        &self,
        tables: &'t mut HashMap<String, Table>,
        table: &str,
    ) -> Result<&'t Table> {
        if !tables.contains_key(table) {
            let t = load_table(self.catalog.as_ref(), &parse_ident(table)?)
                .await?
                .ok_or_else(|| {
                    Error::new(
                        ErrorKind::NotFound,
                        format!("table {table} holding staged files does not exist"),
                    )
                })?;
            tables.insert(table.to_owned(), t);
        }
        tables
            .get(table)
            .ok_or_else(|| Error::unexpected(format!("table {table} not cached")))
    }

    /// After a MaxCompute commit is done: delete its batches' files that no Iceberg target of
    /// theirs references (a MaxCompute-only route's staging files). Best effort: a file left
    /// behind is only garbage in the staging table's folder.
    pub(crate) async fn drop_staging_files(
        &self,
        target: &str,
        batches: &[(BatchRecord, Version)],
    ) {
        let mut tables = HashMap::new();
        for (b, _) in batches {
            let Some(staged) = b.targets.get(target) else {
                continue;
            };
            let kept: BTreeSet<&str> = b
                .targets
                .iter()
                .filter(|(t, _)| !is_maxcompute(t))
                .flat_map(|(_, t)| t.files.iter().map(|f| f.path.as_str()))
                .collect();
            for f in staged
                .files
                .iter()
                .filter(|f| !kept.contains(f.path.as_str()))
            {
                let result = match local_path(&f.path) {
                    Some(p) => match std::fs::remove_file(&p) {
                        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(Error::from(e)),
                        _ => Ok(()),
                    },
                    None => match self.staging_table(&mut tables, &staged.table).await {
                        Ok(t) => t.file_io().delete(&f.path).await.map_err(from_iceberg),
                        Err(e) => Err(e),
                    },
                };
                if let Err(e) = result {
                    tracing::warn!(file = %f.path, error = %e, "failed to delete a staged file");
                }
            }
        }
    }
}

fn local_path(path: &str) -> Option<PathBuf> {
    match path.strip_prefix("file://") {
        Some(p) => Some(PathBuf::from(p)),
        None if path.starts_with('/') => Some(PathBuf::from(path)),
        None => None,
    }
}

fn read_error(path: &str, e: ArrowError) -> Error {
    Error::invalid_input(format!("failed to read staged file {path}"))
        .with_source(e)
        .with_retryable(false)
}

fn row_error_reason(e: &floe_maxcompute::RowError) -> String {
    match &e.column {
        Some(c) => format!("column `{c}`: {}", e.message),
        None => e.message.clone(),
    }
}

/// A bad row with what a dead letter shows of it: the row as JSON, and its object's bucket and
/// key when the row carries them (metadata rows do).
fn bad_row(batch: &RecordBatch, i: usize, line: u64, reason: String) -> BadRow {
    let text = |name: &str| {
        batch
            .column_by_name(name)
            .and_then(|c| c.as_string_opt::<i32>())
            .filter(|c| c.is_valid(i))
            .map(|c| c.value(i).to_owned())
            .unwrap_or_default()
    };
    BadRow {
        line: line + 1,
        reason,
        raw: row_json(batch, i),
        bucket: text("bucket"),
        key: text("key"),
    }
}

fn row_json(batch: &RecordBatch, i: usize) -> String {
    let mut out = Vec::new();
    let mut w = arrow_json::LineDelimitedWriter::new(&mut out);
    if w.write(&batch.slice(i, 1))
        .and_then(|()| w.finish())
        .is_err()
    {
        return String::new();
    }
    drop(w);
    let text = String::from_utf8_lossy(&out).trim_end().to_owned();
    if text.chars().count() > RAW_MAX_CHARS {
        text.chars().take(RAW_MAX_CHARS).collect()
    } else {
        text
    }
}

/// The row-kind column of a batch, if the route has one.
struct KindColumn {
    field: Option<String>,
    values: Option<arrow_array::StringArray>,
    /// `operation` of metadata rows: removals are deletes only where upserts are used.
    changelog: bool,
}

impl KindColumn {
    fn new(kinds: &RowKinds, batch: &RecordBatch) -> Result<Self> {
        let (field, changelog) = match kinds {
            RowKinds::Inserts => {
                return Ok(KindColumn {
                    field: None,
                    values: None,
                    changelog: false,
                });
            }
            RowKinds::Changelog(f) => (f, true),
            RowKinds::Cdc(f) => (f, false),
        };
        let schema = batch.schema();
        let index = schema
            .fields()
            .iter()
            .position(|x| x.name().eq_ignore_ascii_case(field))
            .ok_or_else(|| {
                Error::config(
                    "maxcompute.row-kind-field",
                    format!("the staged rows have no field `{field}`"),
                )
            })?;
        let values = arrow_cast::cast(batch.column(index), &arrow_schema::DataType::Utf8)
            .map_err(|e| {
                Error::config(
                    "maxcompute.row-kind-field",
                    format!("field `{field}` cannot be read as text: {e}"),
                )
            })?
            .as_string::<i32>()
            .clone();
        Ok(KindColumn {
            field: Some(schema.field(index).name().clone()),
            values: Some(values),
            changelog,
        })
    }

    fn kind(&self, i: usize) -> Result<RowKind> {
        match (&self.values, &self.field) {
            (Some(v), Some(f)) if v.is_valid(i) => RowKind::parse(v.value(i))
                .map_err(|e| e.while_doing(format!("row kind field `{f}`"))),
            (Some(_), Some(f)) => Err(Error::invalid_input(format!(
                "row kind field `{f}` is null"
            ))),
            _ => Ok(RowKind::Insert),
        }
    }
}

enum Source {
    File(std::fs::File),
    Bytes(Bytes),
}

/// A staged Parquet file, read one row group at a time (one upload block each, so memory holds
/// one row group, not the file).
struct StagedParquet {
    source: Source,
    meta: ArrowReaderMetadata,
}

type Batches = Box<dyn Iterator<Item = std::result::Result<RecordBatch, ArrowError>> + Send>;

impl StagedParquet {
    fn schema(&self) -> &SchemaRef {
        self.meta.schema()
    }

    fn row_groups(&self) -> usize {
        self.meta.metadata().num_row_groups()
    }

    /// Rows before row group `rg`.
    fn first_row(&self, rg: usize) -> u64 {
        self.meta.metadata().row_groups()[..rg]
            .iter()
            .map(|g| g.num_rows().max(0) as u64)
            .sum()
    }

    fn row_group(&self, rg: usize) -> Result<Batches> {
        let fail = |e: parquet::errors::ParquetError| {
            Error::invalid_input("failed to read a staged parquet file")
                .with_source(e)
                .with_retryable(false)
        };
        Ok(match &self.source {
            Source::File(f) => {
                let f = f.try_clone().map_err(Error::from)?;
                Box::new(
                    ParquetRecordBatchReaderBuilder::new_with_metadata(f, self.meta.clone())
                        .with_row_groups(vec![rg])
                        .with_batch_size(READ_BATCH_ROWS)
                        .build()
                        .map_err(fail)?,
                )
            }
            Source::Bytes(b) => Box::new(
                ParquetRecordBatchReaderBuilder::new_with_metadata(b.clone(), self.meta.clone())
                    .with_row_groups(vec![rg])
                    .with_batch_size(READ_BATCH_ROWS)
                    .build()
                    .map_err(fail)?,
            ),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    use arrow_array::{Int64Array, StringArray};
    use arrow_schema::{DataType, Field, Schema};

    fn batch(ops: Vec<Option<&str>>) -> RecordBatch {
        let n = ops.len() as i64;
        RecordBatch::try_new(
            Arc::new(Schema::new(vec![
                Field::new("id", DataType::Int64, false),
                Field::new("op", DataType::Utf8, true),
                Field::new("key", DataType::Utf8, true),
            ])),
            vec![
                Arc::new(Int64Array::from((1..=n).collect::<Vec<_>>())),
                Arc::new(StringArray::from(ops)),
                Arc::new(StringArray::from(vec![Some("a/b.json"); n as usize])),
            ],
        )
        .unwrap()
    }

    #[test]
    fn row_kinds_come_from_the_field() {
        let b = batch(vec![
            Some("+I"),
            Some("-U"),
            Some("+U"),
            Some("-D"),
            None,
            Some("?"),
        ]);
        let k = KindColumn::new(&RowKinds::Cdc("OP".into()), &b).unwrap();
        let got: Vec<String> = (0..6)
            .map(|i| match k.kind(i) {
                Ok(kind) => format!("{kind:?}"),
                Err(e) => e.to_string(),
            })
            .collect();
        assert_eq!(
            &got[..4],
            ["Insert", "UpdateBefore", "UpdateAfter", "Delete"]
        );
        assert!(got[4].contains("`op` is null"), "{}", got[4]);
        assert!(got[5].contains("unknown row kind"), "{}", got[5]);
        let k = KindColumn::new(&RowKinds::Inserts, &b).unwrap();
        assert_eq!(k.kind(1).unwrap(), RowKind::Insert);
        let e = KindColumn::new(&RowKinds::Cdc("kind".into()), &b)
            .err()
            .unwrap();
        assert!(e.to_string().contains("row-kind-field"), "{e}");
    }

    #[test]
    fn bad_rows_carry_the_row_and_its_key() {
        let b = batch(vec![Some("+I"), Some("-U")]);
        let r = bad_row(&b, 1, 41, "why".into());
        assert_eq!(r.line, 42);
        assert_eq!(r.key, "a/b.json");
        assert_eq!(r.bucket, "");
        assert_eq!(r.raw, r#"{"id":2,"op":"-U","key":"a/b.json"}"#);
    }

    #[test]
    fn local_paths() {
        assert_eq!(
            local_path("file:///w/a.parquet"),
            Some(PathBuf::from("/w/a.parquet"))
        );
        assert_eq!(
            local_path("/w/a.parquet"),
            Some(PathBuf::from("/w/a.parquet"))
        );
        assert_eq!(local_path("s3://b/a.parquet"), None);
    }
}
