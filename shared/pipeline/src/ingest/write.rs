//! Reading the claimed objects into their tables' writers (tables created on first use, columns
//! added when a route evolves its schema), and closing the writers into staged files per target.
//! An object that fails is given back (retryable) or set aside under its route's `on-error`.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use floe_checkpoint::Version;
use floe_core::{Error, ErrorKind, ObjectChange, Operation, Result};
use floe_decode::cdc::MetaRow;
use floe_decode::decode::BadRecord;
use floe_iceberg::{
    SourceRows, StagedFile, TableDefinition, TableWriter, WriterOptions, ensure_table,
    evolve_columns, missing_fields, missing_nested_fields, parse_ident, widened_fields,
};
use iceberg::table::Table;

use super::prefetch::{Candidate, Prefetch, worth_reading_ahead};
use super::read::{
    ChangeBytes, content_of, infer_object_schema, metadata_rows, read_records, table_schema_for,
    unreadable,
};
use super::{Claimed, Run};
use crate::config::{Mode, OnChange, OnError};
use crate::deadletter::{DeadLetter, DeadLetterWriter};
use crate::pipeline::{Pipeline, ProgressEvent};
use crate::protocol::Outcome;
use crate::protocol::records::{BatchRecord, ObjectRows, StagedMaxCompute, TargetFiles};
use crate::targets::TargetId;

/// Per-table state while a batch runs (one per table and MaxCompute target: rows bound for
/// different targets never share a file).
pub(super) struct Slot {
    pub(super) table: Table,
    pub(super) writer: TableWriter,
    /// The table, `namespace.table`.
    pub(super) table_name: String,
    /// The route whose rows it holds.
    pub(super) route: usize,
    /// The MaxCompute table name, when the route has one.
    pub(super) maxcompute: Option<String>,
    /// Files already closed, written with an earlier schema of the table (schema evolution
    /// closes the writer before adding columns).
    pub(super) closed: Vec<StagedFile>,
    /// Data file name prefix of this slot's writers.
    pub(super) prefix: String,
    /// How many times the writer was replaced.
    pub(super) generation: u32,
    /// Objects read whose route replaces changed objects' rows: (change index, only appended
    /// bytes read), in the order read.
    pub(super) replacing: Vec<(usize, bool)>,
    /// Where each tracked object's rows went, from the writers already closed.
    pub(super) rows_of: BTreeMap<u64, Vec<SourceRows>>,
}

/// Tables prepared for a batch while its objects are claimed ([`Pipeline::prepare_tables`]),
/// by route index and table name.
pub(crate) type Prepared = HashMap<(usize, String), Table>;

/// A metadata row waiting to be written: the change's index and the object's bytes (content mode).
type MetaItem = (usize, Option<Vec<u8>>);

/// An object that failed while being written: the error (the route's `on-error` or a retry
/// decides), what its dead-letter outcome says, and whether it counts as a finished object for
/// progress.
pub(super) struct Failed {
    error: Error,
    label: &'static str,
    counts: bool,
}

impl Failed {
    fn new(error: Error, label: &'static str, counts: bool) -> Self {
        Failed {
            error,
            label,
            counts,
        }
    }
}

pub(super) enum WriteResult {
    Done(HashMap<String, Slot>),
    GiveBack(usize, Outcome),
    /// As `GiveBack`, the read cut short by the invocation's stop time: the objects after it are
    /// not read either.
    Stopped(usize, Outcome),
    Abandoned,
}

impl Pipeline {
    /// Write every claimed object into its table's writer.
    pub(super) async fn write_all(
        &self,
        run: &mut Run<'_>,
        claimed: &[Claimed],
        record: &mut BatchRecord,
        record_version: &mut Version,
    ) -> Result<WriteResult> {
        let changes = run.changes;
        let mut slots: HashMap<String, Slot> = HashMap::new();
        // Per table: (change index, content) of the metadata rows to write.
        let mut meta: HashMap<String, Vec<MetaItem>> = HashMap::new();
        run.prefetch = self.read_ahead(changes, claimed);
        for (pos, c) in claimed.iter().enumerate() {
            if !self.heartbeat(record, record_version).await? {
                return Ok(WriteResult::Abandoned);
            }
            let change = &changes[c.idx];
            let route = self.router.config(c.route);
            let store = self.stores.store(change)?;
            let span = tracing::info_span!("object", bucket = %change.bucket, key = %change.key);
            let _enter = span.enter();

            if replaces_without_rows(route, change) {
                // Nothing to read: the committer deletes what the object landed before.
                continue;
            }
            let key = slot_key(c);
            let too_large = self.too_large(change);
            let limit = read_limit(
                self.config.ingest.object_timeout_ms,
                run.read_until,
                std::time::Instant::now(),
            );
            let reading = async {
                if let Some(e) = too_large {
                    return Ok(Err(Failed::new(e, "object too large", true)));
                }
                Ok::<_, Error>(
                    match self
                        .slot_for(&mut slots, &mut run.tables, &run.batch, c, &store, change)
                        .await?
                    {
                        Err(e) => Err(Failed::new(e, "table could not be created", false)),
                        Ok(slot) => match route.mode {
                            Mode::Metadata | Mode::Content => {
                                match content_of(&store, change, route).await {
                                    Ok(content) => {
                                        run.report.bytes_read +=
                                            content.as_ref().map_or(0, |c| c.len() as u64);
                                        run.report.rows += 1;
                                        if route.on_change == OnChange::Replace {
                                            slot.replacing.push((c.idx, false));
                                        }
                                        meta.entry(key).or_default().push((c.idx, content));
                                        Ok(1)
                                    }
                                    Err(e) => Err(Failed::new(e, "unreadable object", true)),
                                }
                            }
                            Mode::Records
                                if route.route_field.is_some() || !route.also_tables.is_empty() =>
                            {
                                let from = c.from(change);
                                let key = key.clone();
                                self.read_fanout(
                                    run, &mut slots, &key, &store, c.idx, from, c.route,
                                )
                                .await?
                            }
                            Mode::Records => {
                                let from = c.from(change);
                                let read = self
                                    .read_into(run, slot, &store, c.idx, from, route)
                                    .await?;
                                if read.is_ok() && route.on_change == OnChange::Replace {
                                    slot.replacing.push((c.idx, from.is_some()));
                                }
                                read
                            }
                        },
                    },
                )
            };
            let timed = async {
                let Some((wait, why, stop)) = limit else {
                    return reading.await;
                };
                match tokio::time::timeout(wait, reading).await {
                    Ok(read) => read,
                    Err(_) => Ok(Err(Failed::new(
                        Error::new(
                            ErrorKind::Deadline,
                            format!(
                                "reading {} {why}; given back for a later delivery",
                                change.key
                            ),
                        )
                        .with_retryable(true),
                        if stop {
                            STOPPED
                        } else {
                            "object read timed out"
                        },
                        true,
                    ))),
                }
            };
            let Some(read) = self.beating(timed, record, record_version).await? else {
                return Ok(WriteResult::Abandoned);
            };
            let read = read?;
            let rows = match read {
                Ok(rows) => rows,
                Err(f) => {
                    let url = store.url(&change.key);
                    let given_back = self
                        .object_failed(f.error, route, change, &url, &run.batch, &mut run.dead)
                        .await?;
                    if let Some(outcome) = given_back {
                        return Ok(if f.label == STOPPED {
                            WriteResult::Stopped(pos, outcome)
                        } else {
                            WriteResult::GiveBack(pos, outcome)
                        });
                    }
                    run.outcomes[c.idx] = Some(Outcome::DeadLettered(f.label.into()));
                    if !f.counts {
                        continue;
                    }
                    1
                }
            };
            if let Some(p) = &self.progress {
                p(ProgressEvent::Done {
                    change,
                    done: pos + 1,
                    total: claimed.len(),
                    rows,
                });
            }
        }
        self.write_metadata(changes, &mut slots, meta).await?;
        Ok(WriteResult::Done(slots))
    }

    /// The tables the batch writes, loaded (and created where the route creates tables) while
    /// its objects are being claimed: one per route and table, for the first change that would
    /// write it. Only what worked is kept, each for the first object of its route and table
    /// to take ([`Pipeline::slot_for`]); anything else (the table cannot be had, an object
    /// that cannot give a schema, no answer within the object's time limit) is left for that
    /// object's own turn, which meets the same error as its own and handles it as today. A
    /// table created for a change whose claim then fails is one its route would create for
    /// the object anyway, in whichever batch lands it.
    pub(super) async fn prepare_tables(
        &self,
        changes: &[ObjectChange],
        routed: &[(usize, super::route::Routed)],
        read_until: Option<std::time::Instant>,
    ) -> Prepared {
        let mut wanted: Vec<((usize, String), &ObjectChange)> = Vec::new();
        for (i, r) in routed {
            let change = &changes[*i];
            let route = self.router.config(r.route);
            let key = (r.route, r.table.clone());
            if replaces_without_rows(route, change)
                || self.too_large(change).is_some()
                || wanted.iter().any(|(k, _)| *k == key)
            {
                continue;
            }
            wanted.push((key, change));
        }
        let load = wanted.into_iter().map(|(key, change)| async move {
            let route = self.router.config(key.0);
            let store = self.stores.store(change).ok()?;
            let table = self.table_for(&store, change, route, &key.1);
            let limit = read_limit(
                self.config.ingest.object_timeout_ms,
                read_until,
                std::time::Instant::now(),
            );
            let table = match limit {
                Some((wait, _, _)) => tokio::time::timeout(wait, table).await.ok()?,
                None => table.await,
            };
            Some((key, table.ok()?))
        });
        futures::future::join_all(load)
            .await
            .into_iter()
            .flatten()
            .collect()
    }

    /// The claimed objects worth reading ahead (see [`super::prefetch`]), in the order read.
    fn read_ahead(&self, changes: &[ObjectChange], claimed: &[Claimed]) -> Prefetch {
        let candidates = claimed
            .iter()
            .filter(|c| {
                let (change, route) = (&changes[c.idx], self.router.config(c.route));
                route.mode == Mode::Records
                    && !replaces_without_rows(route, change)
                    && self.too_large(change).is_none()
                    && worth_reading_ahead(change, route, c.from(change).is_some())
            })
            .filter_map(|c| {
                let change = &changes[c.idx];
                Some(Candidate {
                    idx: c.idx,
                    store: self.stores.store(change).ok()?,
                    change: change.clone(),
                    slot: slot_key(c),
                    declared: self.router.config(c.route).format.clone(),
                })
            })
            .collect();
        Prefetch::new(candidates)
    }

    /// Why `change` is not read at all: larger than `ingest.max-object-bytes` says.
    fn too_large(&self, change: &ObjectChange) -> Option<Error> {
        let max = self.config.ingest.max_object_bytes;
        let size = change.size?;
        (max > 0 && size > max).then(|| {
            Error::invalid_input(format!(
                "{} is {size} bytes, larger than ingest.max-object-bytes = {max}; set aside unread",
                change.key
            ))
            .with_retryable(false)
        })
    }

    /// Await `work` (one object's read) while keeping the batch's heartbeat fresh: one object
    /// can take longer than `claim-timeout-ms`, and a batch whose heartbeat went stale is taken
    /// over by the next instance that wants its objects, so its work would be lost and the
    /// object taken over again and again. `None` when the batch was abandoned meanwhile.
    pub(super) async fn beating<T>(
        &self,
        work: impl std::future::Future<Output = T>,
        record: &mut BatchRecord,
        version: &mut Version,
    ) -> Result<Option<T>> {
        let every = Duration::from_millis((self.config.ingest.claim_timeout_ms / 8).max(1));
        tokio::pin!(work);
        loop {
            tokio::select! {
                biased;
                out = &mut work => return Ok(Some(out)),
                () = tokio::time::sleep(every) => {
                    if !self.heartbeat(record, version).await? {
                        return Ok(None);
                    }
                }
            }
        }
    }

    /// The slot of a claimed change, its table created (and its writer opened) on first use;
    /// `Ok(Err(e))` when the table cannot be had for this object.
    async fn slot_for<'s>(
        &self,
        slots: &'s mut HashMap<String, Slot>,
        prepared: &mut Prepared,
        batch: &str,
        c: &Claimed,
        store: &Arc<dyn floe_storage::ObjectStore>,
        change: &ObjectChange,
    ) -> Result<std::result::Result<&'s mut Slot, Error>> {
        let key = slot_key(c);
        if !slots.contains_key(&key) {
            let route = self.router.config(c.route);
            let table = match prepared.remove(&(c.route, c.table.clone())) {
                Some(t) => t,
                None => match self.table_for(store, change, route, &c.table).await {
                    Ok(t) => t,
                    Err(e) => return Ok(Err(e)),
                },
            };
            // Writers of one table in one batch need distinct file names.
            let prefix = if key == c.table {
                batch.to_owned()
            } else {
                format!("{batch}-{}", slots.len())
            };
            let writer = TableWriter::new(&table, &self.writer_options(&prefix, route)).await?;
            let slot = Slot {
                table,
                writer,
                table_name: c.table.clone(),
                route: c.route,
                maxcompute: c.maxcompute.clone(),
                closed: Vec::new(),
                prefix,
                generation: 0,
                replacing: Vec::new(),
                rows_of: BTreeMap::new(),
            };
            slots.insert(key.clone(), slot);
        }
        slots
            .get_mut(&key)
            .map(Ok)
            .ok_or_else(|| Error::unexpected(format!("slot {key} vanished")))
    }

    /// Read a records object into its slot's writer (adding the columns it brings first, when
    /// the route evolves); bad records go the route's `on-error` way. The rows it gave, or why
    /// it failed.
    async fn read_into(
        &self,
        run: &mut Run<'_>,
        slot: &mut Slot,
        store: &Arc<dyn floe_storage::ObjectStore>,
        idx: usize,
        from: Option<u64>,
        route: &crate::config::RouteConfig,
    ) -> Result<std::result::Result<u64, Failed>> {
        let change = &run.changes[idx];
        if route.evolve
            && let Err(e) = self.evolve(slot, store, change, route).await
        {
            return Ok(Err(Failed::new(e, "unreadable object", false)));
        }
        if !route.evolve {
            // The writer's schema stays as it is for the batch: the objects read ahead for
            // this slot can be decoded ahead too.
            let key = slot_key_of(&slot.table_name, slot.route, slot.maxcompute.as_deref());
            (run.prefetch).decode_for(
                &key,
                slot.writer.arrow_schema(),
                self.config.ingest.batch_rows,
                route.names,
            );
        }
        slot.writer.set_source(Some(idx as u64));
        let read = self
            .read_with(run, &mut slot.writer, store, idx, from, route)
            .await;
        slot.writer.set_source(None);
        read
    }

    /// Read a records object of a route with `route-field` into the tables its records name
    /// (see [`super::fanout`]); `fallback` is the slot of the route's own table, which takes
    /// the records without the field and gives the schema records are decoded to.
    #[allow(clippy::too_many_arguments)]
    async fn read_fanout(
        &self,
        run: &mut Run<'_>,
        slots: &mut HashMap<String, Slot>,
        fallback: &str,
        store: &Arc<dyn floe_storage::ObjectStore>,
        idx: usize,
        from: Option<u64>,
        route_idx: usize,
    ) -> Result<std::result::Result<u64, Failed>> {
        let route = self.router.config(route_idx);
        let (changes, batch) = (run.changes, run.batch.clone());
        // With schema evolution, the fields the object brings: the route's own table (whose
        // schema records are decoded to) takes them first, then each table the records reach.
        let mut fields = None;
        if route.evolve {
            let evolved = async {
                let sample = infer_object_schema(store, &changes[idx], route).await?;
                let slot = (slots.get_mut(fallback))
                    .ok_or_else(|| Error::unexpected(format!("slot {fallback} missing")))?;
                self.evolve_to(slot, &sample.fields, route).await?;
                Ok::<_, Error>(sample.fields)
            };
            match evolved.await {
                Ok(f) => fields = Some(f),
                Err(e) => return Ok(Err(Failed::new(e, "unreadable object", false))),
            }
        }
        let mut sink = super::fanout::Fanout::new(
            self,
            slots,
            fallback,
            store,
            &changes[idx],
            route_idx,
            &batch,
        )?
        .evolving(fields);
        self.read_with(run, &mut sink, store, idx, from, route)
            .await
    }

    /// Stream a records object into `sink`; bad records go the route's `on-error` way. The
    /// rows it gave, or why it failed.
    async fn read_with(
        &self,
        run: &mut Run<'_>,
        sink: &mut impl super::read::RowSink,
        store: &Arc<dyn floe_storage::ObjectStore>,
        idx: usize,
        from: Option<u64>,
        route: &crate::config::RouteConfig,
    ) -> Result<std::result::Result<u64, Failed>> {
        let change = &run.changes[idx];
        let mut letters = Vec::new();
        let policy = route.on_error;
        let mut on_bad = |bad: BadRecord| -> std::result::Result<(), BadRecord> {
            match policy {
                OnError::Fail => Err(bad),
                OnError::Skip => {
                    tracing::warn!(line = bad.line, reason = %bad.reason, "bad record skipped");
                    Ok(())
                }
                OnError::DeadLetter => {
                    letters.push(bad);
                    Ok(())
                }
            }
        };
        let progress = self.progress.clone();
        let on_bytes = move |read: u64| {
            if let Some(p) = &progress {
                p(ProgressEvent::Reading { change, read });
            }
        };
        // Appends are never read ahead (see `read_ahead`).
        let early = run.prefetch.take(idx);
        let result = read_records(
            store,
            ChangeBytes {
                change,
                from,
                early,
            },
            route,
            sink,
            self.config.ingest.batch_rows,
            &mut on_bad,
            &on_bytes,
        )
        .await;
        let url = store.url(&change.key);
        for bad in letters {
            let l = letter(
                &run.batch, route, change, &url, bad.line, bad.reason, bad.raw,
            );
            run.dead.add(&l).await?;
        }
        Ok(match result {
            Ok(stats) => {
                run.report.rows += stats.rows;
                run.report.bytes_read += stats.bytes;
                run.report.bad_records += stats.bad;
                tracing::info!(rows = stats.rows, bad = stats.bad, "object ingested");
                Ok(stats.rows)
            }
            Err(e) => Err(Failed::new(e, "unreadable object", true)),
        })
    }

    /// The metadata rows, one batch per table.
    async fn write_metadata(
        &self,
        changes: &[ObjectChange],
        slots: &mut HashMap<String, Slot>,
        meta: HashMap<String, Vec<MetaItem>>,
    ) -> Result<()> {
        for (table, items) in meta {
            let Some(slot) = slots.get_mut(&table) else {
                continue;
            };
            let order: Vec<usize> = items.iter().map(|(idx, _)| *idx).collect();
            let rows: Vec<MetaRow<'_>> = items
                .into_iter()
                .map(|(idx, content)| {
                    let change = &changes[idx];
                    let url = self
                        .stores
                        .store(change)
                        .map(|s| s.url(&change.key))
                        .unwrap_or_else(|_| change.url());
                    MetaRow {
                        change,
                        url,
                        content,
                    }
                })
                .collect();
            let batch_rows = metadata_rows(slot.writer.arrow_schema(), &rows)?;
            if slot.replacing.is_empty() {
                slot.writer.write(batch_rows).await?;
                continue;
            }
            // One row per object, each tracked, so a later version can replace it.
            for (i, idx) in order.iter().enumerate() {
                slot.writer.set_source(Some(*idx as u64));
                slot.writer.write(batch_rows.slice(i, 1)).await?;
            }
            slot.writer.set_source(None);
        }
        Ok(())
    }

    /// Close the writers: every slot's files, per target (an Iceberg table, a MaxCompute table).
    pub(super) async fn close_slots(
        &self,
        run: &mut Run<'_>,
        slots: HashMap<String, Slot>,
        claimed: &[Claimed],
    ) -> Result<BTreeMap<TargetId, TargetFiles>> {
        let mut targets = BTreeMap::new();
        for (_, mut slot) in slots {
            let arrow = slot.writer.arrow_schema().clone();
            let (files, rows_of) = slot.writer.close_with_sources().await?;
            merge_rows(&mut slot.rows_of, rows_of);
            let mut staged = slot.closed;
            for f in files {
                staged.push(StagedFile::new(&slot.table, f)?);
            }
            run.report.files += staged.len();
            let route = self.router.config(slot.route);
            let staged_as = crate::targets::stage(
                route,
                &self.catalog_name,
                &slot.table_name,
                slot.maxcompute.as_deref(),
                self.config.maxcompute.as_ref(),
                &arrow,
            )?;
            for (target, detail) in staged_as {
                let objects = if !target.is_maxcompute() {
                    (slot.replacing.iter())
                        .map(|&(idx, appended)| {
                            let rows = slot.rows_of.remove(&(idx as u64)).unwrap_or_default();
                            object_rows(&run.changes[idx], appended, rows)
                        })
                        .collect()
                } else {
                    Vec::new()
                };
                add_files(
                    &mut targets,
                    target,
                    &slot.table_name,
                    &staged,
                    detail,
                    objects,
                );
            }
        }
        // Removals of objects whose route replaces their rows: no rows, only the deletes the
        // committer works out.
        for c in claimed {
            let change = &run.changes[c.idx];
            if replaces_without_rows(self.router.config(c.route), change) {
                let target = TargetId::iceberg(&self.catalog_name, &c.table);
                let object = object_rows(change, false, Vec::new());
                add_files(&mut targets, target, &c.table, &[], None, vec![object]);
            }
        }
        Ok(targets)
    }

    pub(super) fn writer_options(
        &self,
        prefix: &str,
        route: &crate::config::RouteConfig,
    ) -> WriterOptions {
        WriterOptions {
            target_file_size_bytes: self.config.ingest.target_file_size_bytes as usize,
            row_group_rows: self.config.ingest.row_group_rows,
            file_prefix: prefix.to_owned(),
            changes: route.changes.clone(),
            ..Default::default()
        }
        .with_write_props(&route.write_props)
    }

    /// Schema evolution: add the top-level fields this object brings that the table lacks, as
    /// optional columns, and widen the columns it widens (`int` → `long`, `float` → `double`, a
    /// decimal's precision; see [`floe_iceberg::widened_fields`]). The slot's writer is closed first (its files keep the schema they were
    /// written with) and a new one opened on the evolved table.
    async fn evolve(
        &self,
        slot: &mut Slot,
        store: &Arc<dyn floe_storage::ObjectStore>,
        change: &ObjectChange,
        route: &crate::config::RouteConfig,
    ) -> Result<()> {
        let sample = infer_object_schema(store, change, route).await?;
        self.evolve_to(slot, &sample.fields, route).await
    }

    /// [`Self::evolve`] with the fields an object brings already worked out.
    pub(super) async fn evolve_to(
        &self,
        slot: &mut Slot,
        fields: &[floe_decode::Field],
        route: &crate::config::RouteConfig,
    ) -> Result<()> {
        let names = route.names;
        if missing_fields(&slot.table, fields, names).is_empty()
            && missing_nested_fields(&slot.table, fields, names).is_empty()
            && widened_fields(&slot.table, fields, names).is_empty()
        {
            return Ok(());
        }
        let ident = parse_ident(&slot.table_name).map_err(unreadable)?;
        let table = evolve_columns(self.catalog_for(route)?, &ident, fields, names).await?;
        slot.generation += 1;
        let prefix = format!("{}-s{}", slot.prefix, slot.generation);
        let writer = TableWriter::new(&table, &self.writer_options(&prefix, route)).await?;
        let old_writer = std::mem::replace(&mut slot.writer, writer);
        let old_table = std::mem::replace(&mut slot.table, table);
        let (files, rows_of) = old_writer.close_with_sources().await?;
        merge_rows(&mut slot.rows_of, rows_of);
        for f in files {
            slot.closed.push(StagedFile::new(&old_table, f)?);
        }
        Ok(())
    }

    /// The table a route writes for this object, created if missing.
    pub(super) async fn table_for(
        &self,
        store: &Arc<dyn floe_storage::ObjectStore>,
        change: &ObjectChange,
        route: &crate::config::RouteConfig,
        table: &str,
    ) -> Result<Table> {
        let ident = parse_ident(table).map_err(unreadable)?;
        let catalog = self.catalog_for(route)?;
        if let Some(t) = floe_iceberg::load_table(catalog, &ident).await? {
            return Ok(t);
        }
        if route.targets.iceberg && !route.auto_create {
            // The deployment's to fix, not the object's: given back, it lands once the table
            // exists.
            return Err(Error::new(
                ErrorKind::NotFound,
                format!(
                    "table {table} does not exist, and route {} does not create tables \
                     (iceberg.tables.auto-create-enabled = false, or auto-create = false)",
                    route.name
                ),
            )
            .with_retryable(true));
        }
        let mut schema = table_schema_for(store, change, route).await?;
        if route.force_optional {
            for field in &mut schema.fields {
                field.required = false;
            }
            schema.identifier_fields.clear();
        }
        let mut properties = route.create_props.clone();
        properties.extend(crate::targets::maxcompute::staging_properties(route));
        if route.on_change == OnChange::Replace {
            properties.insert(
                floe_iceberg::ON_CHANGE_PROP.to_owned(),
                "replace".to_owned(),
            );
        }
        let definition = TableDefinition {
            schema,
            partition_by: route.partition_by.clone(),
            properties,
        };
        ensure_table(catalog, &ident, &definition)
            .await
            .map_err(|e| match e.kind() {
                ErrorKind::Config | ErrorKind::InvalidInput => unreadable(e),
                _ => e,
            })
    }

    /// Handle an object that failed: `Some(outcome)` gives it back (the batch restarts without
    /// it); `None` means it was set aside under the route's policy and the batch goes on. What
    /// is given back to be tried again is [`crate::protocol::ack::give_back`]'s to say; the rest
    /// is the route's `on-error`'s.
    async fn object_failed(
        &self,
        e: Error,
        route: &crate::config::RouteConfig,
        change: &ObjectChange,
        url: &str,
        batch: &str,
        dead: &mut DeadLetterWriter,
    ) -> Result<Option<Outcome>> {
        if super::read::is_superseded(&e) {
            // Its version is gone: nothing of it can land (its claim is given back, so the
            // newer version's change is judged against what was recorded before).
            tracing::info!(error = %e, "object overwritten after its change; stale");
            return Ok(Some(Outcome::Stale));
        }
        if crate::protocol::ack::give_back(&e) {
            tracing::warn!(error = %e, "object failed; it will be retried");
            return Ok(Some(Outcome::Failed(e.with_retryable(true))));
        }
        match route.on_error {
            OnError::Fail => {
                tracing::error!(error = %e, "object rejected under on-error = fail");
                Ok(Some(Outcome::Failed(e)))
            }
            OnError::Skip => {
                tracing::warn!(error = %e, "object unreadable; skipped");
                Ok(None)
            }
            OnError::DeadLetter => {
                tracing::warn!(error = %e, "object unreadable; dead-lettered");
                dead.add(&letter(
                    batch,
                    route,
                    change,
                    url,
                    None,
                    e.to_string(),
                    String::new(),
                ))
                .await?;
                Ok(None)
            }
        }
    }
}

fn letter(
    batch: &str,
    route: &crate::config::RouteConfig,
    change: &ObjectChange,
    url: &str,
    line: Option<u64>,
    reason: String,
    raw: String,
) -> DeadLetter {
    DeadLetter {
        time: chrono::Utc::now().to_rfc3339(),
        batch: batch.to_owned(),
        route: route.name.clone(),
        bucket: change.bucket.clone(),
        key: change.key.clone(),
        url: url.to_owned(),
        line,
        reason,
        raw,
    }
}

/// What a read cut short by the invocation's stop time is labelled.
const STOPPED: &str = "stop time reached";

/// How long one object's read may take, and what to say when it takes longer:
/// `ingest.object-timeout-ms` (0: no limit of its own), and never past `until` (the stop time
/// of the invocation landing it: a read still running then is given back, so the batch stages
/// the rest within the invocation's margin instead of being cut off mid-batch).
/// The third value says whether the stop time is the bound.
fn read_limit(
    timeout_ms: u64,
    until: Option<std::time::Instant>,
    now: std::time::Instant,
) -> Option<(Duration, String, bool)> {
    let own = (timeout_ms > 0).then(|| {
        (
            Duration::from_millis(timeout_ms),
            format!("took longer than ingest.object-timeout-ms = {timeout_ms}"),
            false,
        )
    });
    let left = until.map(|t| {
        (
            t.saturating_duration_since(now),
            "was still running at the invocation's stop time".to_owned(),
            true,
        )
    });
    match (own, left) {
        (Some(a), Some(b)) => Some(if b.0 < a.0 { b } else { a }),
        (a, b) => a.or(b),
    }
}

/// The slot of a claimed change: its table alone for an Iceberg-only route (so routes sharing a
/// table share its files, as before MaxCompute targets existed), else table, route and
/// MaxCompute table.
fn slot_key(c: &Claimed) -> String {
    slot_key_of(&c.table, c.route, c.maxcompute.as_deref())
}

/// The slot key of rows of `route` bound for `table` (and MaxCompute table `maxcompute`).
fn slot_key_of(table: &str, route: usize, maxcompute: Option<&str>) -> String {
    match maxcompute {
        None => table.to_owned(),
        Some(m) => format!("{table}\u{1f}{route}\u{1f}{m}"),
    }
}

/// Add a slot's files (and the objects whose rows are in them) to a target of the batch (slots
/// of one table share its Iceberg target).
fn add_files(
    targets: &mut BTreeMap<TargetId, TargetFiles>,
    target: TargetId,
    table: &str,
    files: &[StagedFile],
    maxcompute: Option<StagedMaxCompute>,
    objects: Vec<ObjectRows>,
) {
    let t = targets.entry(target).or_insert_with(|| TargetFiles {
        table: table.to_owned(),
        files: Vec::new(),
        rows: 0,
        bytes: 0,
        maxcompute,
        objects: Vec::new(),
    });
    t.rows += files.iter().map(|f| f.rows).sum::<u64>();
    t.bytes += files.iter().map(|f| f.bytes).sum::<u64>();
    t.files.extend_from_slice(files);
    t.objects.extend(objects);
}

/// A removal the route's table answers by deleting the object's rows, with nothing to read
/// (records mode) or no changelog row to write (metadata and content modes).
fn replaces_without_rows(route: &crate::config::RouteConfig, change: &ObjectChange) -> bool {
    route.on_change == OnChange::Replace && change.operation == Operation::Removed
}

/// The record of an object version and its rows.
fn object_rows(change: &ObjectChange, appended: bool, rows: Vec<SourceRows>) -> ObjectRows {
    ObjectRows {
        bucket: change.bucket.clone(),
        key: change.key.clone(),
        operation: change.operation,
        etag: change.etag.clone(),
        version_id: change.version_id.clone(),
        sequencer: change.sequencer.clone(),
        event_time_ms: change.event_time.map(|t| t.timestamp_millis()),
        appended,
        rows,
    }
}

/// Add the runs of a closed writer to those of the slot's earlier writers.
fn merge_rows(into: &mut BTreeMap<u64, Vec<SourceRows>>, more: BTreeMap<u64, Vec<SourceRows>>) {
    for (source, runs) in more {
        into.entry(source).or_default().extend(runs);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_read_stops_at_its_timeout_or_the_invocations_stop_time_whichever_is_first() {
        let now = std::time::Instant::now();
        let secs = |n| Duration::from_secs(n);
        assert!(read_limit(0, None, now).is_none());
        let (d, why, stop) = read_limit(600_000, None, now).unwrap();
        assert_eq!((d, stop), (secs(600), false));
        assert!(why.contains("object-timeout-ms = 600000"), "{why}");
        let (d, why, stop) = read_limit(600_000, Some(now + secs(20)), now).unwrap();
        assert_eq!((d, stop), (secs(20), true));
        assert!(why.contains("stop time"), "{why}");
        assert_eq!(
            read_limit(5_000, Some(now + secs(20)), now).unwrap().0,
            secs(5)
        );
        assert_eq!(
            read_limit(0, Some(now + secs(20)), now).unwrap().0,
            secs(20)
        );
        // Past the stop time: nothing more is read.
        assert_eq!(
            read_limit(0, Some(now), now + secs(1)).unwrap().0,
            Duration::ZERO
        );
    }
}
