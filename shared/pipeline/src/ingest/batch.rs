//! One ingest batch: object changes → claims → rows in data files → one staged batch record.
//! See [`crate::protocol`] for the protocol and its crash points.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use floe_checkpoint::{StoreExt, Version, Write, encode, now_ms};
use floe_core::{Error, ErrorKind, ObjectChange, Operation, Result};
use floe_decode::cdc::MetaRow;
use floe_decode::decode::BadRecord;
use floe_iceberg::{
    StagedFile, TableDefinition, TableWriter, WriterOptions, add_missing_columns, ensure_table,
    missing_fields, parse_ident,
};
use iceberg::table::Table;

use super::BatchReport;
use crate::config::{Mode, OnError};
use crate::deadletter::{DeadLetter, DeadLetterWriter};
use crate::ingest::read::{
    content_of, infer_object_schema, metadata_rows, read_records, table_schema_for, unreadable,
};
use crate::pipeline::{Pipeline, ProgressEvent};
use crate::protocol::Outcome;
use crate::protocol::batch::{self, Holder, Staging};
use crate::protocol::claim::{Decision, decide, may_record_ignored, obj_record};
use crate::protocol::records::{
    BatchRecord, DoneRecord, ObjRecord, ObjState, TargetFiles, batch_key, done_key, obj_key,
};
use crate::targets::TargetId;

/// A claimed change.
struct Claimed {
    idx: usize,
    key: String,
    version: Version,
    /// What the record held before the claim (restored if the object is given back).
    prev: Option<(ObjRecord, Version)>,
    route: usize,
    table: String,
    /// The MaxCompute table name, when the route has a MaxCompute target.
    maxcompute: Option<String>,
}

/// Per-table state while a batch runs (one per table and MaxCompute target: rows bound for
/// different targets never share a file).
struct Slot {
    table: Table,
    writer: TableWriter,
    /// The table, `namespace.table`.
    table_name: String,
    /// The route whose rows it holds.
    route: usize,
    /// The MaxCompute table name, when the route has one.
    maxcompute: Option<String>,
    /// Files already closed, written with an earlier schema of the table (schema evolution
    /// closes the writer before adding columns).
    closed: Vec<StagedFile>,
    /// Data file name prefix of this slot's writers.
    prefix: String,
    /// How many times the writer was replaced.
    generation: u32,
}

impl Pipeline {
    /// Land a batch of changes; see the crate doc.
    pub async fn ingest(&self, changes: &[ObjectChange]) -> Result<BatchReport> {
        let batch = uuid::Uuid::now_v7().to_string();
        let mut report = BatchReport {
            batch: batch.clone(),
            ..Default::default()
        };
        let mut outcomes: Vec<Option<Outcome>> = (0..changes.len()).map(|_| None).collect();
        let mut dead = DeadLetterWriter::new(self.dead_letters.clone(), &batch);

        // Route.
        let mut routed = Vec::new();
        for (i, c) in changes.iter().enumerate() {
            match self.router.route(c) {
                Ok(Some(r)) => {
                    let mode = self.router.config(r.route).mode;
                    if c.operation == Operation::Removed && mode == Mode::Records {
                        self.record_ignored(c, "a removed object has no records")
                            .await?;
                        outcomes[i] =
                            Some(Outcome::Ignored("a removed object has no records".into()));
                    } else {
                        routed.push((i, r));
                    }
                }
                Ok(None) => {
                    self.record_ignored(c, "no route").await?;
                    outcomes[i] = Some(Outcome::Ignored("no route".into()));
                }
                Err(e) => {
                    // A route matched but its table cannot be named for this object.
                    let store = self.stores.store(c)?;
                    dead.add(&DeadLetter {
                        time: chrono::Utc::now().to_rfc3339(),
                        batch: batch.clone(),
                        route: String::new(),
                        bucket: c.bucket.clone(),
                        key: c.key.clone(),
                        url: store.url(&c.key),
                        line: None,
                        reason: e.to_string(),
                        raw: String::new(),
                    })
                    .await?;
                    outcomes[i] = Some(Outcome::DeadLettered(e.to_string()));
                }
            }
        }
        dead.flush().await?;
        // One change per object lands; the others of this batch are duplicates or stale.
        let superseded =
            crate::protocol::claim::superseded_in_batch(changes, routed.iter().map(|(i, _)| *i));
        routed.retain(|(i, _)| match superseded.get(i) {
            Some(Decision::Duplicate) => {
                outcomes[*i] = Some(Outcome::Duplicate);
                false
            }
            Some(_) => {
                outcomes[*i] = Some(Outcome::Stale);
                false
            }
            None => true,
        });
        if routed.is_empty() {
            report.dead_letters = dead.count();
            report.outcomes = outcomes
                .into_iter()
                .map(|o| o.unwrap_or(Outcome::Ignored("nothing to do".into())))
                .collect();
            return Ok(report);
        }

        // Open the batch record before claiming anything: takers of our claims judge us by it.
        let mut record = batch::open(&batch, &self.owner, now_ms());
        let mut record_version = self
            .checkpoint
            .insert_json(&batch_key(&batch), &record, None)
            .await?
            .ok_or_else(|| Error::unexpected(format!("batch id {batch} already exists")))?;
        self.faults.hit("ingest.after-batch-open").await;

        // Claim: one read and one transaction for everything uncontended; an object claimed by
        // another batch, or a lost race, takes the one-object path.
        let mut claimed = Vec::new();
        let keys: Vec<String> = routed
            .iter()
            .map(|(i, _)| obj_key(&changes[*i].bucket, &changes[*i].key))
            .collect();
        let existing = self.checkpoint.get_many(&keys).await?;
        let mut fast: Vec<(usize, Option<(ObjRecord, Version)>)> = Vec::new();
        let mut slow = Vec::new();
        for (j, entry) in existing.into_iter().enumerate() {
            let i = routed[j].0;
            let rec = match entry {
                None => None,
                Some(e) => match serde_json::from_slice::<ObjRecord>(&e.value) {
                    Ok(r) => Some((r, e.version)),
                    Err(_) => {
                        slow.push(j);
                        continue;
                    }
                },
            };
            match decide(rec.as_ref().map(|(r, _)| r), &changes[i], &batch) {
                Decision::Claim => fast.push((j, rec)),
                Decision::Duplicate => outcomes[i] = Some(Outcome::Duplicate),
                Decision::Stale => outcomes[i] = Some(Outcome::Stale),
                Decision::ClaimedBy(_) => slow.push(j),
            }
        }
        let mut values = Vec::with_capacity(fast.len());
        for (j, _) in &fast {
            let change = &changes[routed[*j].0];
            let state = ObjState::Claimed {
                batch: batch.clone(),
            };
            values.push(encode(&obj_record(change, state, now_ms()))?);
        }
        let writes: Vec<Write<'_>> = fast
            .iter()
            .zip(values)
            .map(|((j, rec), value)| match rec {
                None => Write::Insert {
                    key: &keys[*j],
                    value,
                    ttl: self.dedupe_ttl,
                },
                Some((_, v)) => Write::Update {
                    key: &keys[*j],
                    value,
                    expected: v,
                    ttl: self.dedupe_ttl,
                },
            })
            .collect();
        let results = self.checkpoint.write_many(&writes).await?;
        drop(writes);
        for ((j, prev), result) in fast.into_iter().zip(results) {
            match result {
                Some(version) => {
                    let (i, r) = &routed[j];
                    claimed.push(Claimed {
                        idx: *i,
                        key: keys[j].clone(),
                        version,
                        prev,
                        route: r.route,
                        table: r.table.clone(),
                        maxcompute: r.maxcompute.clone(),
                    });
                }
                None => slow.push(j),
            }
        }
        slow.sort_unstable();
        for j in slow {
            let (i, r) = &routed[j];
            match self.claim(&changes[*i], &batch).await {
                Ok(Ok((key, version, prev))) => claimed.push(Claimed {
                    idx: *i,
                    key,
                    version,
                    prev,
                    route: r.route,
                    table: r.table.clone(),
                    maxcompute: r.maxcompute.clone(),
                }),
                Ok(Err(outcome)) => outcomes[*i] = Some(outcome),
                Err(e) => outcomes[*i] = Some(Outcome::Failed(e)),
            }
        }
        // Objects are read in the order given (the first one of a new table shapes its schema).
        claimed.sort_by_key(|c| c.idx);
        self.faults.hit("ingest.after-claim").await;

        // Read and write; an object given back restarts the batch's writing without it.
        let slots = loop {
            match self
                .write_all(
                    changes,
                    &claimed,
                    &batch,
                    &mut dead,
                    &mut record,
                    &mut record_version,
                    &mut outcomes,
                    &mut report,
                )
                .await?
            {
                WriteResult::Done(slots) => break slots,
                WriteResult::GiveBack(pos, outcome) => {
                    let c = claimed.remove(pos);
                    self.release(&c).await?;
                    outcomes[c.idx] = Some(outcome);
                    dead.discard_pending();
                    report.rows = 0;
                    report.bad_records = 0;
                    report.bytes_read = 0;
                }
                WriteResult::Abandoned => {
                    for c in &claimed {
                        outcomes[c.idx] = Some(Outcome::Busy);
                    }
                    report.outcomes = finish(outcomes);
                    return Ok(report);
                }
            }
        };

        // Close the files.
        let mut targets = BTreeMap::new();
        for (_, slot) in slots {
            let arrow = slot.writer.arrow_schema().clone();
            let files = slot.writer.close().await?;
            let mut staged = slot.closed;
            for f in files {
                staged.push(StagedFile::new(&slot.table, f)?);
            }
            report.files += staged.len();
            if self.router.config(slot.route).targets.iceberg {
                add_files(
                    &mut targets,
                    TargetId::iceberg(&self.catalog_name, &slot.table_name),
                    &slot.table_name,
                    &staged,
                    None,
                );
            }
            if let Some(name) = &slot.maxcompute {
                let (target, detail) = crate::targets::maxcompute::staging(
                    self.router.config(slot.route),
                    self.config.maxcompute.as_ref(),
                    name,
                    &arrow,
                )?;
                add_files(
                    &mut targets,
                    target,
                    &slot.table_name,
                    &staged,
                    Some(detail),
                );
            }
        }
        self.faults.hit("ingest.after-write").await;
        dead.flush().await?;
        report.dead_letters += dead.count();
        self.faults.hit("ingest.after-dead-letter").await;

        // Stage: one compare-and-set makes the whole batch durable, unless another instance
        // declared it abandoned first.
        if claimed.is_empty() {
            let _ = self
                .checkpoint
                .delete_if_version(&batch_key(&batch), &record_version)
                .await?;
            report.outcomes = finish(outcomes);
            return Ok(report);
        }
        let objects = claimed.len() as u64;
        let staged = match batch::stage(record, objects, targets, now_ms()) {
            // Nothing to commit anywhere: finished right away.
            Staging::Finished(done) => {
                self.finish_empty_batch(&batch, &done, &record_version)
                    .await?;
                true
            }
            Staging::Stage(record) => self
                .checkpoint
                .update_json(&batch_key(&batch), &record, &record_version, None)
                .await?
                .is_some(),
        };
        if !staged {
            tracing::warn!(batch = %batch, "batch was declared abandoned before it could stage; its objects go to other batches");
            for c in &claimed {
                outcomes[c.idx] = Some(Outcome::Busy);
            }
            report.outcomes = finish(outcomes);
            report.files = 0;
            return Ok(report);
        }
        self.faults.hit("ingest.after-stage").await;
        tracing::info!(batch = %batch, objects = claimed.len(), rows = report.rows, files = report.files, "batch staged");

        // Mark the objects staged, in one transaction (best effort: a claim by a staged batch
        // already counts as staged).
        let mut values = Vec::with_capacity(claimed.len());
        for c in &claimed {
            let state = ObjState::Staged {
                batch: batch.clone(),
            };
            let rec = obj_record(&changes[c.idx], state, now_ms());
            values.push(encode(&rec)?);
            if outcomes[c.idx].is_none() {
                outcomes[c.idx] = Some(Outcome::Staged);
            }
        }
        let marks: Vec<Write<'_>> = claimed
            .iter()
            .zip(values)
            .map(|(c, value)| Write::Update {
                key: &c.key,
                value,
                expected: &c.version,
                ttl: self.dedupe_ttl,
            })
            .collect();
        if let Err(e) = self.checkpoint.write_many(&marks).await {
            tracing::warn!(batch = %batch, error = %e, "failed to mark objects staged; their claims still count");
        }
        self.faults.hit("ingest.after-mark").await;
        report.outcomes = finish(outcomes);
        Ok(report)
    }

    /// Remember an object floe deliberately does not land (so a folder rescan does not offer it
    /// again, and a redelivery is recognised).
    async fn record_ignored(&self, c: &ObjectChange, reason: &str) -> Result<()> {
        let key = obj_key(&c.bucket, &c.key);
        let state = ObjState::Ignored {
            reason: reason.into(),
        };
        let rec = obj_record(c, state, now_ms());
        for _ in 0..5 {
            match self.checkpoint.get_json::<ObjRecord>(&key).await? {
                None => {
                    if self
                        .checkpoint
                        .insert_json(&key, &rec, self.dedupe_ttl)
                        .await?
                        .is_some()
                    {
                        return Ok(());
                    }
                }
                Some((old, v)) => {
                    if !may_record_ignored(&old, c) {
                        return Ok(());
                    }
                    if self
                        .checkpoint
                        .update_json(&key, &rec, &v, self.dedupe_ttl)
                        .await?
                        .is_some()
                    {
                        return Ok(());
                    }
                }
            }
        }
        Ok(())
    }

    /// Claim one change for `batch`: `Ok(Ok(..))` claimed, `Ok(Err(outcome))` not ours to do.
    #[allow(clippy::type_complexity)]
    async fn claim(
        &self,
        c: &ObjectChange,
        batch: &str,
    ) -> Result<std::result::Result<(String, Version, Option<(ObjRecord, Version)>), Outcome>> {
        let key = obj_key(&c.bucket, &c.key);
        let state = ObjState::Claimed {
            batch: batch.to_owned(),
        };
        let mine = obj_record(c, state, now_ms());
        for _ in 0..10 {
            let existing = self.checkpoint.get_json::<ObjRecord>(&key).await?;
            let decision = decide(existing.as_ref().map(|(r, _)| r), c, batch);
            let decision = match decision {
                Decision::ClaimedBy(other) => match self.judge_batch(&other).await? {
                    Judged::Live => return Ok(Err(Outcome::Busy)),
                    Judged::Staged => {
                        if let Some((rec, v)) = &existing {
                            let mut fixed = rec.clone();
                            fixed.state = ObjState::Staged {
                                batch: other.clone(),
                            };
                            let _ = self
                                .checkpoint
                                .update_json(&key, &fixed, v, self.dedupe_ttl)
                                .await;
                        }
                        return Ok(Err(Outcome::Duplicate));
                    }
                    Judged::Gone => Decision::Claim,
                },
                d => d,
            };
            match decision {
                Decision::Duplicate => return Ok(Err(Outcome::Duplicate)),
                Decision::Stale => return Ok(Err(Outcome::Stale)),
                Decision::ClaimedBy(_) => return Ok(Err(Outcome::Busy)),
                Decision::Claim => {
                    let written = match &existing {
                        None => {
                            self.checkpoint
                                .insert_json(&key, &mine, self.dedupe_ttl)
                                .await?
                        }
                        Some((_, v)) => {
                            self.checkpoint
                                .update_json(&key, &mine, v, self.dedupe_ttl)
                                .await?
                        }
                    };
                    if let Some(version) = written {
                        return Ok(Ok((key, version, existing)));
                    }
                    // Lost a race: look again.
                }
            }
        }
        Ok(Err(Outcome::Busy))
    }

    /// Decide about a batch that holds a claim we want.
    async fn judge_batch(&self, other: &str) -> Result<Judged> {
        let timeout = self.config.ingest.claim_timeout_ms;
        for _ in 0..5 {
            let found = self
                .checkpoint
                .get_json::<BatchRecord>(&batch_key(other))
                .await?;
            let done = match &found {
                None => self.checkpoint.get(&done_key(other)).await?.is_some(),
                Some(_) => false,
            };
            let rec = found.as_ref().map(|(r, _)| r);
            let dead = rec.is_some_and(|r| crate::host::is_dead_local_process(&r.owner));
            match batch::judge(rec, done, now_ms(), timeout, dead) {
                Holder::Live => return Ok(Judged::Live),
                Holder::Staged => return Ok(Judged::Staged),
                Holder::Gone => return Ok(Judged::Gone),
                Holder::Abandon(abandoned) => {
                    let Some((_, v)) = &found else {
                        continue;
                    };
                    let ttl = Some(batch::abandoned_ttl(timeout));
                    if self
                        .checkpoint
                        .update_json(&batch_key(other), &abandoned, v, ttl)
                        .await?
                        .is_some()
                    {
                        tracing::warn!(
                            batch = other,
                            "took over the objects of a batch that stopped"
                        );
                        return Ok(Judged::Gone);
                    }
                }
            }
        }
        Ok(Judged::Live)
    }

    /// Give an object back: restore what its record held before our claim.
    async fn release(&self, c: &Claimed) -> Result<()> {
        match &c.prev {
            None => {
                self.checkpoint
                    .delete_if_version(&c.key, &c.version)
                    .await?;
            }
            Some((prev, _)) => {
                self.checkpoint
                    .update_json(&c.key, prev, &c.version, self.dedupe_ttl)
                    .await?;
            }
        }
        Ok(())
    }

    async fn finish_empty_batch(
        &self,
        batch: &str,
        done: &DoneRecord,
        version: &Version,
    ) -> Result<()> {
        self.checkpoint
            .insert_json(&done_key(batch), done, self.dedupe_ttl)
            .await?;
        self.checkpoint
            .delete_if_version(&batch_key(batch), version)
            .await?;
        Ok(())
    }

    /// Refresh the batch's heartbeat if due; `false` when the batch was abandoned meanwhile.
    async fn heartbeat(&self, record: &mut BatchRecord, version: &mut Version) -> Result<bool> {
        if !batch::heartbeat_due(record, now_ms(), self.config.ingest.claim_timeout_ms) {
            return Ok(true);
        }
        record.heartbeat_ms = now_ms();
        match self
            .checkpoint
            .update_json(&batch_key(&record.id), record, version, None)
            .await?
        {
            Some(v) => {
                *version = v;
                Ok(true)
            }
            None => Ok(false),
        }
    }

    /// Write every claimed object into its table's writer.
    #[allow(clippy::too_many_arguments)]
    async fn write_all(
        &self,
        changes: &[ObjectChange],
        claimed: &[Claimed],
        batch: &str,
        dead: &mut DeadLetterWriter,
        record: &mut BatchRecord,
        record_version: &mut Version,
        outcomes: &mut [Option<Outcome>],
        report: &mut BatchReport,
    ) -> Result<WriteResult> {
        let mut slots: HashMap<String, Slot> = HashMap::new();
        // Per table: (change index, content) of the metadata rows to write.
        let mut meta: HashMap<String, Vec<MetaItem>> = HashMap::new();
        for (pos, c) in claimed.iter().enumerate() {
            if !self.heartbeat(record, record_version).await? {
                return Ok(WriteResult::Abandoned);
            }
            let change = &changes[c.idx];
            let route = self.router.config(c.route);
            let store = self.stores.store(change)?;
            let url = store.url(&change.key);
            let span = tracing::info_span!("object", bucket = %change.bucket, key = %change.key);
            let _enter = span.enter();

            // The table (created on first use).
            let key = slot_key(c);
            if !slots.contains_key(&key) {
                let table = match self.table_for(&store, change, route, &c.table).await {
                    Ok(t) => t,
                    Err(f) => match self
                        .object_failed(f, route, change, &url, batch, dead)
                        .await?
                    {
                        Some(outcome) => return Ok(WriteResult::GiveBack(pos, outcome)),
                        None => {
                            outcomes[c.idx] =
                                Some(Outcome::DeadLettered("table could not be created".into()));
                            continue;
                        }
                    },
                };
                // Writers of one table in one batch need distinct file names.
                let prefix = if key == c.table {
                    batch.to_owned()
                } else {
                    format!("{batch}-{}", slots.len())
                };
                let writer = TableWriter::new(&table, &self.writer_options(&prefix)).await?;
                slots.insert(
                    key.clone(),
                    Slot {
                        table,
                        writer,
                        table_name: c.table.clone(),
                        route: c.route,
                        maxcompute: c.maxcompute.clone(),
                        closed: Vec::new(),
                        prefix,
                        generation: 0,
                    },
                );
            }
            let Some(slot) = slots.get_mut(&key) else {
                continue;
            };

            let mut object_rows = 1;
            match route.mode {
                Mode::Metadata | Mode::Content => match content_of(&store, change, route).await {
                    Ok(content) => {
                        report.bytes_read += content.as_ref().map_or(0, |c| c.len() as u64);
                        meta.entry(key.clone()).or_default().push((c.idx, content));
                        report.rows += 1;
                    }
                    Err(f) => {
                        if let Some(outcome) = self
                            .object_failed(f, route, change, &url, batch, dead)
                            .await?
                        {
                            return Ok(WriteResult::GiveBack(pos, outcome));
                        }
                        outcomes[c.idx] = Some(Outcome::DeadLettered("unreadable object".into()));
                    }
                },
                Mode::Records => {
                    if route.evolve
                        && let Err(f) = self.evolve(slot, &store, change, route).await
                    {
                        if let Some(outcome) = self
                            .object_failed(f, route, change, &url, batch, dead)
                            .await?
                        {
                            return Ok(WriteResult::GiveBack(pos, outcome));
                        }
                        outcomes[c.idx] = Some(Outcome::DeadLettered("unreadable object".into()));
                        continue;
                    }
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
                    let result = read_records(
                        &store,
                        change,
                        route,
                        &mut slot.writer,
                        self.config.ingest.batch_rows,
                        &mut on_bad,
                        &on_bytes,
                    )
                    .await;
                    for bad in letters {
                        dead.add(&letter(
                            batch, route, change, &url, bad.line, bad.reason, bad.raw,
                        ))
                        .await?;
                    }
                    match result {
                        Ok(stats) => {
                            object_rows = stats.rows;
                            report.rows += stats.rows;
                            report.bytes_read += stats.bytes;
                            report.bad_records += stats.bad;
                            tracing::info!(rows = stats.rows, bad = stats.bad, "object ingested");
                        }
                        Err(f) => {
                            if let Some(outcome) = self
                                .object_failed(f, route, change, &url, batch, dead)
                                .await?
                            {
                                return Ok(WriteResult::GiveBack(pos, outcome));
                            }
                            outcomes[c.idx] =
                                Some(Outcome::DeadLettered("unreadable object".into()));
                        }
                    }
                }
            }
            if let Some(p) = &self.progress {
                p(ProgressEvent::Done {
                    change,
                    done: pos + 1,
                    total: claimed.len(),
                    rows: object_rows,
                });
            }
        }
        // Metadata rows, one batch per table.
        for (table, items) in meta {
            let Some(slot) = slots.get_mut(&table) else {
                continue;
            };
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
            slot.writer.write(batch_rows).await?;
        }
        Ok(WriteResult::Done(slots))
    }

    fn writer_options(&self, prefix: &str) -> WriterOptions {
        WriterOptions {
            target_file_size_bytes: self.config.ingest.target_file_size_bytes as usize,
            row_group_rows: self.config.ingest.row_group_rows,
            file_prefix: prefix.to_owned(),
            ..Default::default()
        }
    }

    /// Schema evolution: add the top-level fields this object brings that the table lacks, as
    /// optional columns. The slot's writer is closed first (its files keep the schema they were
    /// written with) and a new one opened on the evolved table.
    async fn evolve(
        &self,
        slot: &mut Slot,
        store: &Arc<dyn floe_storage::ObjectStore>,
        change: &ObjectChange,
        route: &crate::config::RouteConfig,
    ) -> Result<()> {
        let sample = infer_object_schema(store, change, route).await?;
        let missing: Vec<floe_decode::Field> = missing_fields(&slot.table, &sample.fields)
            .into_iter()
            .cloned()
            .collect();
        if missing.is_empty() {
            return Ok(());
        }
        let ident = parse_ident(&slot.table_name).map_err(unreadable)?;
        let table = add_missing_columns(self.catalog.as_ref(), &ident, &missing).await?;
        slot.generation += 1;
        let prefix = format!("{}-s{}", slot.prefix, slot.generation);
        let writer = TableWriter::new(&table, &self.writer_options(&prefix)).await?;
        let old_writer = std::mem::replace(&mut slot.writer, writer);
        let old_table = std::mem::replace(&mut slot.table, table);
        for f in old_writer.close().await? {
            slot.closed.push(StagedFile::new(&old_table, f)?);
        }
        Ok(())
    }

    /// The table a route writes for this object, created if missing.
    async fn table_for(
        &self,
        store: &Arc<dyn floe_storage::ObjectStore>,
        change: &ObjectChange,
        route: &crate::config::RouteConfig,
        table: &str,
    ) -> Result<Table> {
        let ident = parse_ident(table).map_err(unreadable)?;
        if let Some(t) = floe_iceberg::load_table(self.catalog.as_ref(), &ident).await? {
            return Ok(t);
        }
        let schema = table_schema_for(store, change, route).await?;
        let definition = TableDefinition {
            schema,
            partition_by: route.partition_by.clone(),
            properties: crate::targets::maxcompute::staging_properties(route),
        };
        ensure_table(self.catalog.as_ref(), &ident, &definition)
            .await
            .map_err(|e| match e.kind() {
                ErrorKind::Config | ErrorKind::InvalidInput => unreadable(e),
                _ => e,
            })
    }

    /// Handle an object that failed: `Some(outcome)` gives it back (the batch restarts without
    /// it); `None` means it was set aside under the route's policy and the batch goes on. A
    /// retryable error is given back to be tried again; any other is the route's `on-error`'s.
    async fn object_failed(
        &self,
        e: Error,
        route: &crate::config::RouteConfig,
        change: &ObjectChange,
        url: &str,
        batch: &str,
        dead: &mut DeadLetterWriter,
    ) -> Result<Option<Outcome>> {
        if e.is_retryable() {
            tracing::warn!(error = %e, "object failed; it will be retried");
            return Ok(Some(Outcome::Failed(e)));
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

/// A metadata row waiting to be written: the change's index and the object's bytes (content mode).
type MetaItem = (usize, Option<Vec<u8>>);

enum Judged {
    /// Alive and working: leave the object to it.
    Live,
    /// It staged (the object is landed).
    Staged,
    /// Dead, abandoned or gone: its objects may be taken.
    Gone,
}

enum WriteResult {
    Done(HashMap<String, Slot>),
    GiveBack(usize, Outcome),
    Abandoned,
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

/// The slot of a claimed change: its table alone for an Iceberg-only route (so routes sharing a
/// table share its files, as before MaxCompute targets existed), else table, route and
/// MaxCompute table.
fn slot_key(c: &Claimed) -> String {
    match &c.maxcompute {
        None => c.table.clone(),
        Some(m) => format!("{}\u{1f}{}\u{1f}{m}", c.table, c.route),
    }
}

/// Add a slot's files to a target of the batch (slots of one table share its Iceberg target).
fn add_files(
    targets: &mut BTreeMap<TargetId, TargetFiles>,
    target: TargetId,
    table: &str,
    files: &[StagedFile],
    maxcompute: Option<crate::protocol::records::StagedMaxCompute>,
) {
    let t = targets.entry(target).or_insert_with(|| TargetFiles {
        table: table.to_owned(),
        files: Vec::new(),
        rows: 0,
        bytes: 0,
        maxcompute,
    });
    t.rows += files.iter().map(|f| f.rows).sum::<u64>();
    t.bytes += files.iter().map(|f| f.bytes).sum::<u64>();
    t.files.extend_from_slice(files);
}

fn finish(outcomes: Vec<Option<Outcome>>) -> Vec<Outcome> {
    outcomes
        .into_iter()
        .map(|o| {
            o.unwrap_or_else(|| {
                Outcome::Failed(Error::unexpected("change left without an outcome"))
            })
        })
        .collect()
}
