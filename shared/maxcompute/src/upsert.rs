//! Tunnel upsert sessions: insert-or-replace and delete rows of a primary-key (transactional)
//! table, applied atomically at commit.
//!
//! ```text
//!   create ──► NORMAL ──upsert/delete rows──► flush: one block per bucket ──► commit ──► COMMITTING ──► COMMITTED
//!     │          │   (bucket = RecordHasher(hash keys) mod buckets;             (poll; "session not found"
//!     │          │    PUT …/upserts?upsertid&bucketid&slotid&record_count        while polling counts as
//!     │          │    with odps-tunnel-routed-server: <slot's worker>)           committed)
//!     │          ├── 308: the slot moved; take the new worker from the answer's header (or reload)
//!     │          └── abort (DELETE) ──► ABORTED
//!   POST <res>/upserts?slotnum=1[&partition][&lifecycle=1..24]
//! ```
//! Records use the upsert layout of [`floe_tunnel_codec::upsert_schema`]: the table columns,
//! then five hidden columns whose `__operation` says `U` or `D`. Blocks of one bucket add up
//! within the session; writing the same upsert twice leaves the same row, so a retried flush is
//! harmless.

use std::time::Duration;

use arrow_array::RecordBatch;
use floe_core::retry::{Retry, RetryPolicy};
use floe_core::{Error, ErrorKind, Result};
use floe_tunnel_codec::upsert::push_hidden_values;
use floe_tunnel_codec::{
    BlockEncoder, HasherKind, RecordHasher, TableSchema, UpsertOperation, Value, upsert_schema,
};
use reqwest::Method;
use serde_json::Value as Json;

use crate::error::{codes, odps_code};
use crate::meta::{TableId, parse_schema_json};
use crate::partition::PartitionSpec;
use crate::rows::{BatchConverter, RowError};
use crate::tunnel::{TableTunnel, describe, protocol};

/// The header naming the worker a bucket's blocks go to.
pub const ROUTED_SERVER_HEADER: &str = "odps-tunnel-routed-server";

/// A bucket's buffered block is sent once it grows past this many bytes.
const BUCKET_BUFFER_BYTES: usize = 1 << 20;
/// Sending a bucket's block: 6 attempts in all; a moved slot (308) is retried at once, an `Io`
/// or `Throttled` failure after 200 ms doubling per attempt (up to 6.4 s).
const SEND_RETRY: RetryPolicy =
    RetryPolicy::new(Duration::from_millis(200), Duration::from_millis(6400)).with_max_attempts(6);
/// Waits between two looks at a committing session: `commit_poll_interval` doubling up to 8 s.
const COMMIT_POLL_MAX: Duration = Duration::from_secs(8);

/// An upsert session's state as the server reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UpsertStatus {
    /// Open for rows.
    Normal,
    /// Commit under way.
    Committing,
    /// Committed.
    Committed,
    /// Not committed within its lifetime.
    Expired,
    /// Broken on the server side.
    Critical,
    /// Aborted.
    Aborted,
    /// A status this client does not know.
    Unknown,
}

impl UpsertStatus {
    fn parse(s: &str) -> Self {
        match s.trim().to_ascii_uppercase().as_str() {
            "NORMAL" => UpsertStatus::Normal,
            "COMMITTING" => UpsertStatus::Committing,
            "COMMITTED" => UpsertStatus::Committed,
            "EXPIRED" => UpsertStatus::Expired,
            "CRITICAL" => UpsertStatus::Critical,
            "ABORTED" => UpsertStatus::Aborted,
            _ => UpsertStatus::Unknown,
        }
    }

    /// The status as the service spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            UpsertStatus::Normal => "NORMAL",
            UpsertStatus::Committing => "COMMITTING",
            UpsertStatus::Committed => "COMMITTED",
            UpsertStatus::Expired => "EXPIRED",
            UpsertStatus::Critical => "CRITICAL",
            UpsertStatus::Aborted => "ABORTED",
            UpsertStatus::Unknown => "UNKNOWN",
        }
    }
}

/// What a change row does, in the vocabulary of CDC sources (Flink's `RowKind`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RowKind {
    /// `+I`: a new row.
    Insert,
    /// `-U`: the row before an update (refused by this sink).
    UpdateBefore,
    /// `+U`: the row after an update.
    UpdateAfter,
    /// `-D`: a deleted row.
    Delete,
}

impl RowKind {
    /// Parse `+I`/`-U`/`+U`/`-D`, `INSERT`/`UPDATE_BEFORE`/`UPDATE_AFTER`/`DELETE`, or the
    /// single letters `I`/`U`/`D` (case-insensitive).
    pub fn parse(s: &str) -> Result<Self> {
        Ok(match s.trim().to_ascii_uppercase().as_str() {
            "+I" | "I" | "INSERT" | "C" | "CREATE" | "CREATED" => RowKind::Insert,
            "-U" | "UPDATE_BEFORE" => RowKind::UpdateBefore,
            "+U" | "U" | "UPDATE" | "UPDATE_AFTER" | "UPSERT" => RowKind::UpdateAfter,
            "-D" | "D" | "DELETE" | "REMOVED" => RowKind::Delete,
            other => {
                return Err(Error::invalid_input(format!(
                    "unknown row kind `{other}` (expected +I, -U, +U or -D)"
                )));
            }
        })
    }

    /// The upsert operation for this row; `UPDATE_BEFORE` is refused.
    pub fn operation(self) -> Result<UpsertOperation> {
        match self {
            RowKind::Insert | RowKind::UpdateAfter => Ok(UpsertOperation::Upsert),
            RowKind::Delete => Ok(UpsertOperation::Delete),
            RowKind::UpdateBefore => Err(Error::new(
                ErrorKind::Unsupported,
                "update_before rows are not supported by the maxcompute sink (send update_after rows only)",
            )),
        }
    }
}

/// How to create an upsert session.
#[derive(Clone, Debug)]
pub struct UpsertOptions {
    /// Slots asked for (`slotnum`); default 1.
    pub slots: u32,
    /// Session lifetime in hours, 1..=24 (`lifecycle`); default: the server's (24).
    pub lifecycle_hours: Option<u32>,
    /// How long [`UpsertSession::commit`] waits for `COMMITTED`; default 120 s.
    pub commit_timeout: Duration,
    /// First delay between commit polls, doubling up to 8 s; default 1 s.
    pub commit_poll_interval: Duration,
}

impl Default for UpsertOptions {
    fn default() -> Self {
        UpsertOptions {
            slots: 1,
            lifecycle_hours: None,
            commit_timeout: Duration::from_secs(120),
            commit_poll_interval: Duration::from_secs(1),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct Route {
    slot: String,
    server: String,
}

/// An open upsert session; see the module doc.
#[derive(Debug)]
pub struct UpsertSession {
    tunnel: TableTunnel,
    table: TableId,
    partition: Option<PartitionSpec>,
    options: UpsertOptions,
    id: String,
    status: UpsertStatus,
    /// Route per bucket id.
    routes: Vec<Route>,
    schema: TableSchema,
    record_schema: TableSchema,
    hash_keys: Vec<String>,
    hasher: RecordHasher,
    buckets: Vec<BlockEncoder>,
    rows_sent: u64,
}

impl TableTunnel {
    /// Create an upsert session on `table` (and `partition`).
    pub async fn create_upsert(
        &self,
        table: &TableId,
        partition: Option<&PartitionSpec>,
        options: UpsertOptions,
    ) -> Result<UpsertSession> {
        let what = format!(
            "upsert session on maxcompute table {table}{}",
            partition.map(|p| format!(" ({p})")).unwrap_or_default()
        );
        let mut req = self
            .request(Method::POST, upserts_path(table), partition)
            .query("slotnum", options.slots.max(1).to_string())
            .header("Content-Length", "0");
        if let Some(h) = options.lifecycle_hours.filter(|h| (1..=24).contains(h)) {
            req = req.query("lifecycle", h.to_string());
        }
        let resp = self.http.send(&req, "create", &what).await?;
        if !resp.is_success() {
            return Err(resp.error("create", &what));
        }
        let session =
            UpsertSession::from_json(self, table, partition, options, resp.text()?, &what)?;
        tracing::info!(session = %session.id, table = %table, buckets = session.routes.len(), "maxcompute upsert session created");
        Ok(session)
    }

    /// Reload an existing upsert session by id (after a restart).
    pub async fn reload_upsert(
        &self,
        table: &TableId,
        partition: Option<&PartitionSpec>,
        upsert_id: &str,
        options: UpsertOptions,
    ) -> Result<UpsertSession> {
        let what = describe("upsert", upsert_id, table, partition);
        let resp = self
            .http
            .send(
                &reload_request(self, table, partition, upsert_id),
                "reload",
                &what,
            )
            .await?;
        if !resp.is_success() {
            return Err(resp.error("reload", &what));
        }
        UpsertSession::from_json(self, table, partition, options, resp.text()?, &what)
    }
}

fn upserts_path(table: &TableId) -> String {
    format!("{}/upserts", table.resource())
}

fn reload_request(
    tunnel: &TableTunnel,
    table: &TableId,
    partition: Option<&PartitionSpec>,
    id: &str,
) -> crate::http::OdpsRequest {
    tunnel
        .request(Method::GET, upserts_path(table), partition)
        .query("upsertid", id)
}

/// The session document's fields.
struct Parsed {
    id: String,
    status: UpsertStatus,
    routes: Vec<Route>,
    schema: Option<TableSchema>,
    hash_keys: Vec<String>,
    hasher: HasherKind,
}

fn parse_session(body: &str, what: &str) -> Result<Parsed> {
    let doc: Json = serde_json::from_str(body)
        .map_err(|e| protocol(what, "session is not valid json").with_source(e))?;
    let id = doc
        .get("id")
        .and_then(Json::as_str)
        .ok_or_else(|| protocol(what, "session has no id"))?
        .to_owned();
    let status = UpsertStatus::parse(doc.get("status").and_then(Json::as_str).unwrap_or(""));
    let mut routes: Vec<Option<Route>> = Vec::new();
    for slot in doc
        .get("slots")
        .and_then(Json::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[])
    {
        let slot_id = match slot.get("slot_id") {
            Some(Json::String(s)) => s.clone(),
            Some(Json::Number(n)) => n.to_string(),
            _ => return Err(protocol(what, "a slot has no slot_id")),
        };
        let server = slot
            .get("worker_addr")
            .and_then(Json::as_str)
            .filter(|s| !s.is_empty())
            .ok_or_else(|| protocol(what, format!("slot {slot_id} has no worker_addr")))?;
        for b in slot
            .get("buckets")
            .and_then(Json::as_array)
            .map(Vec::as_slice)
            .unwrap_or(&[])
        {
            let b = b
                .as_u64()
                .and_then(|b| usize::try_from(b).ok())
                .filter(|b| *b < 1 << 16)
                .ok_or_else(|| protocol(what, format!("slot {slot_id} has a bad bucket id")))?;
            if routes.len() <= b {
                routes.resize(b + 1, None);
            }
            routes[b] = Some(Route {
                slot: slot_id.clone(),
                server: server.to_owned(),
            });
        }
    }
    let routes = routes
        .into_iter()
        .enumerate()
        .map(|(i, r)| r.ok_or_else(|| protocol(what, format!("bucket {i} has no slot"))))
        .collect::<Result<Vec<_>>>()?;
    let schema = match doc.get("schema") {
        Some(s) if s.is_object() => Some(parse_schema_json(s, what)?.0),
        _ => None,
    };
    let hash_keys = doc
        .get("hash_key")
        .and_then(Json::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Json::as_str)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default();
    let hasher = HasherKind::from_name(doc.get("hasher").and_then(Json::as_str).unwrap_or(""))?;
    Ok(Parsed {
        id,
        status,
        routes,
        schema,
        hash_keys,
        hasher,
    })
}

impl UpsertSession {
    fn from_json(
        tunnel: &TableTunnel,
        table: &TableId,
        partition: Option<&PartitionSpec>,
        options: UpsertOptions,
        body: &str,
        what: &str,
    ) -> Result<Self> {
        let p = parse_session(body, what)?;
        let schema = p
            .schema
            .ok_or_else(|| protocol(what, "session has no schema"))?;
        if p.hash_keys.is_empty() {
            return Err(protocol(what, "session names no hash keys"));
        }
        let hasher = RecordHasher::new(&schema, p.hasher, &p.hash_keys)
            .map_err(|e| e.while_doing(what.to_owned()))?;
        let record_schema = upsert_schema(&schema)?;
        let buckets = (0..p.routes.len())
            .map(|_| BlockEncoder::new(&record_schema))
            .collect();
        Ok(UpsertSession {
            tunnel: tunnel.clone(),
            table: table.clone(),
            partition: partition.cloned(),
            options,
            id: p.id,
            status: p.status,
            routes: p.routes,
            schema,
            record_schema,
            hash_keys: p.hash_keys,
            hasher,
            buckets,
            rows_sent: 0,
        })
    }

    fn what(&self) -> String {
        describe("upsert", &self.id, &self.table, self.partition.as_ref())
    }

    /// The session id (keep it in the checkpoint to resume after a crash).
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The table.
    pub fn table(&self) -> &TableId {
        &self.table
    }

    /// The partition written, if any.
    pub fn partition(&self) -> Option<&PartitionSpec> {
        self.partition.as_ref()
    }

    /// The status as of the last create, reload or commit.
    pub fn status(&self) -> UpsertStatus {
        self.status
    }

    /// The table's data columns (what a row passed to [`UpsertSession::upsert`] holds).
    pub fn schema(&self) -> &TableSchema {
        &self.schema
    }

    /// The hash key columns (the primary key).
    pub fn hash_keys(&self) -> &[String] {
        &self.hash_keys
    }

    /// The number of buckets.
    pub fn bucket_count(&self) -> usize {
        self.routes.len()
    }

    /// Rows sent to the server so far (buffered rows not included).
    pub fn rows_sent(&self) -> u64 {
        self.rows_sent
    }

    /// Re-read status and routing from the server.
    pub async fn reload(&mut self) -> Result<()> {
        let what = self.what();
        let resp = self
            .tunnel
            .http
            .send(
                &reload_request(&self.tunnel, &self.table, self.partition.as_ref(), &self.id),
                "reload",
                &what,
            )
            .await?;
        if !resp.is_success() {
            return Err(resp.error("reload", &what));
        }
        let p = parse_session(resp.text()?, &what)?;
        if p.id != self.id {
            return Err(protocol(
                &what,
                format!("server answered for session {}", p.id),
            ));
        }
        if p.routes.len() != self.routes.len() {
            return Err(protocol(
                &what,
                format!(
                    "bucket count changed from {} to {}",
                    self.routes.len(),
                    p.routes.len()
                ),
            ));
        }
        self.status = p.status;
        self.routes = p.routes;
        Ok(())
    }

    /// Insert or replace `row` (one value per table column).
    pub async fn upsert(&mut self, row: Vec<Value>) -> Result<()> {
        self.write(row, UpsertOperation::Upsert).await
    }

    /// Delete the row with `row`'s primary key (other values may be null).
    pub async fn delete(&mut self, row: Vec<Value>) -> Result<()> {
        self.write(row, UpsertOperation::Delete).await
    }

    /// Buffer one row; its bucket's block is sent when it grows past 1 MiB.
    pub async fn write(&mut self, mut row: Vec<Value>, op: UpsertOperation) -> Result<()> {
        let bucket = self.buffer(&mut row, op)?;
        if self.buckets[bucket].len() > BUCKET_BUFFER_BYTES {
            self.send_bucket(bucket).await?;
        }
        Ok(())
    }

    fn buffer(&mut self, row: &mut Vec<Value>, op: UpsertOperation) -> Result<usize> {
        if row.len() != self.schema.len() {
            return Err(Error::invalid_input(format!(
                "row has {} values for the {} columns of {}",
                row.len(),
                self.schema.len(),
                self.table
            )));
        }
        let bucket = self.hasher.bucket(row, self.routes.len() as u32)? as usize;
        push_hidden_values(row, op, None);
        let written = self.buckets[bucket].write_record(row);
        row.truncate(self.schema.len());
        written?;
        Ok(bucket)
    }

    /// Convert `batch` with `converter` (built for [`UpsertSession::schema`]) and buffer each row
    /// with the operation `kind_of(row index)` says. Rows that do not fit, and `UPDATE_BEFORE`
    /// rows, are returned (to dead-letter); the rest are buffered.
    pub async fn write_batch(
        &mut self,
        converter: &BatchConverter,
        batch: &RecordBatch,
        kind_of: impl Fn(usize) -> Result<RowKind>,
    ) -> Result<Vec<RowError>> {
        let prepared = converter.prepare(batch)?;
        let mut errors = Vec::new();
        let mut row = Vec::with_capacity(self.record_schema.len());
        for i in 0..prepared.num_rows() {
            let op = match kind_of(i).and_then(RowKind::operation) {
                Ok(op) => op,
                Err(e) => {
                    errors.push(RowError::new(i, None, e.to_string()));
                    continue;
                }
            };
            if let Err(e) = prepared.row(i, &mut row) {
                errors.push(e);
                continue;
            }
            match self.buffer(&mut row, op) {
                Ok(bucket) => {
                    if self.buckets[bucket].len() > BUCKET_BUFFER_BYTES {
                        self.send_bucket(bucket).await?;
                    }
                }
                Err(e) if e.kind() == ErrorKind::InvalidInput => {
                    errors.push(RowError::new(i, None, e.to_string()));
                }
                Err(e) => return Err(e),
            }
        }
        Ok(errors)
    }

    /// Send every buffered row.
    pub async fn flush(&mut self) -> Result<()> {
        for bucket in 0..self.buckets.len() {
            if self.buckets[bucket].record_count() > 0 {
                self.send_bucket(bucket).await?;
            }
        }
        Ok(())
    }

    async fn send_bucket(&mut self, bucket: usize) -> Result<()> {
        let what = self.what();
        let count = self.buckets[bucket].record_count();
        let block = self.buckets[bucket].finish().to_vec();
        let (body, encoding) = match self.tunnel.compression {
            Some(c) => (c.compress(&block)?, Some(c.content_encoding())),
            None => (block, None),
        };
        let op = format!("write bucket {bucket} of");
        let mut retry = Retry::new(SEND_RETRY);
        loop {
            let route = self.routes[bucket].clone();
            let mut req = self
                .tunnel
                .request(
                    Method::PUT,
                    upserts_path(&self.table),
                    self.partition.as_ref(),
                )
                .query("upsertid", self.id.clone())
                .query("bucketid", bucket.to_string())
                .query("slotid", route.slot.clone())
                .query("record_count", count.to_string())
                .header(ROUTED_SERVER_HEADER, route.server.clone())
                .header("Content-Length", body.len().to_string())
                .body(body.clone());
            if let Some(enc) = encoding {
                req = req.header("Content-Encoding", enc);
            }
            let failure = match self.tunnel.http.send(&req, &op, &what).await {
                Ok(resp) if resp.is_success() => break,
                Ok(resp) if resp.status == 308 => {
                    match resp.header(ROUTED_SERVER_HEADER).filter(|s| !s.is_empty()) {
                        Some(server) => {
                            tracing::info!(session = %self.id, bucket, server, "upsert slot moved");
                            self.routes[bucket].server = server.to_owned();
                        }
                        None => self.reload().await?,
                    }
                    resp.error(&op, &what).with_retryable(true)
                }
                Ok(resp) => resp.error(&op, &what),
                Err(e) => e,
            };
            match failure.kind() {
                ErrorKind::Io => {
                    retry.backoff(failure).await?;
                    // 502/504 or a lost answer: the slot map may have changed.
                    let _ = self.reload().await;
                }
                ErrorKind::Throttled => retry.backoff(failure).await?,
                // A moved slot (308) is tried again at once, at its new server.
                _ => retry.retry_now(failure)?,
            }
        }
        self.buckets[bucket].reset();
        self.rows_sent += count;
        tracing::info!(session = %self.id, table = %self.table, bucket, rows = count, "tunnel block written");
        Ok(())
    }

    fn commit_request(&self) -> crate::http::OdpsRequest {
        let server = self
            .routes
            .first()
            .map(|r| r.server.clone())
            .unwrap_or_default();
        self.tunnel
            .request(
                Method::POST,
                upserts_path(&self.table),
                self.partition.as_ref(),
            )
            .query("upsertid", self.id.clone())
            .header(ROUTED_SERVER_HEADER, server)
            .header("Content-Length", "0")
    }

    /// Flush, commit, and wait until the server reports `COMMITTED`. Safe to call again after
    /// a failure or on a reloaded session: a committed session is success, and "session not
    /// found" while waiting counts as committed (as in the SDKs).
    pub async fn commit(&mut self) -> Result<()> {
        let what = self.what();
        if self.status == UpsertStatus::Committed {
            return Ok(());
        }
        self.flush().await?;
        let started = tokio::time::Instant::now();
        let poll = RetryPolicy::new(self.options.commit_poll_interval, COMMIT_POLL_MAX);
        let mut delays = poll.delays();
        let mut last_failure: Option<Error> = None;
        loop {
            match self.status {
                UpsertStatus::Committed => break,
                UpsertStatus::Normal | UpsertStatus::Committing | UpsertStatus::Unknown => {}
                other => {
                    return Err(Error::new(
                        ErrorKind::Conflict,
                        format!(
                            "{what} is {}, it cannot commit",
                            other.as_str().to_ascii_lowercase()
                        ),
                    )
                    .with_retryable(false)
                    .with_context("session_status", other.as_str()));
                }
            }
            if started.elapsed() > self.options.commit_timeout {
                let mut e = Error::new(
                    ErrorKind::StateUnknown,
                    format!(
                        "{what} did not reach committed within {} s",
                        self.options.commit_timeout.as_secs()
                    ),
                );
                if let Some(f) = last_failure {
                    e = e.with_source(f);
                }
                return Err(e);
            }
            if self.status != UpsertStatus::Committing {
                match self
                    .tunnel
                    .http
                    .send(&self.commit_request(), "commit", &what)
                    .await
                {
                    Ok(resp) if resp.is_success() => {}
                    Ok(resp) => {
                        let e = resp.error("commit", &what);
                        if odps_code(&e) == Some(codes::UPSERT_SESSION_NOT_FOUND)
                            && last_failure.is_some()
                        {
                            self.status = UpsertStatus::Committed;
                            break;
                        }
                        if !e.is_retryable() {
                            return Err(e);
                        }
                        last_failure = Some(e);
                    }
                    Err(e) if e.is_retryable() => last_failure = Some(e),
                    Err(e) => return Err(e),
                }
            }
            match self.reload().await {
                Ok(()) => {}
                Err(e) if odps_code(&e) == Some(codes::UPSERT_SESSION_NOT_FOUND) => {
                    self.status = UpsertStatus::Committed;
                    break;
                }
                Err(e) if e.is_retryable() => last_failure = Some(e),
                Err(e) => return Err(e),
            }
            if self.status == UpsertStatus::Committed {
                break;
            }
            tokio::time::sleep(delays.next().unwrap_or(COMMIT_POLL_MAX)).await;
        }
        tracing::info!(session = %self.id, table = %self.table, rows = self.rows_sent, "maxcompute upsert session committed");
        Ok(())
    }

    /// Abort the session (its rows are discarded).
    pub async fn abort(&mut self) -> Result<()> {
        let what = self.what();
        let server = self
            .routes
            .first()
            .map(|r| r.server.clone())
            .unwrap_or_default();
        let req = self
            .tunnel
            .request(
                Method::DELETE,
                upserts_path(&self.table),
                self.partition.as_ref(),
            )
            .query("upsertid", self.id.clone())
            .header(ROUTED_SERVER_HEADER, server)
            .header("Content-Length", "0");
        let resp = self.tunnel.http.send(&req, "abort", &what).await?;
        if !resp.is_success() {
            return Err(resp.error("abort", &what));
        }
        self.status = UpsertStatus::Aborted;
        for b in &mut self.buckets {
            b.reset();
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn row_kinds_parse_and_update_before_is_refused() {
        for (s, kind) in [
            ("+I", RowKind::Insert),
            ("insert", RowKind::Insert),
            ("-U", RowKind::UpdateBefore),
            ("+U", RowKind::UpdateAfter),
            ("UPDATE_AFTER", RowKind::UpdateAfter),
            ("-D", RowKind::Delete),
            ("delete", RowKind::Delete),
        ] {
            assert_eq!(RowKind::parse(s).unwrap(), kind, "{s}");
        }
        assert!(RowKind::parse("?").is_err());
        let e = RowKind::UpdateBefore.operation().unwrap_err();
        assert!(e.to_string().contains("update_before"), "{e}");
        assert_eq!(
            RowKind::Delete.operation().unwrap(),
            UpsertOperation::Delete
        );
    }

    #[test]
    fn session_document_gives_routes_per_bucket() {
        let body = r#"{"id":"u1","status":"normal","hash_key":["id"],"hasher":"default",
            "slots":[{"slot_id":"0","worker_addr":"w0:1","buckets":[0,2]},{"slot_id":1,"worker_addr":"w1:1","buckets":[1]}],
            "schema":{"columns":[{"name":"id","type":"bigint"}]}}"#;
        let p = parse_session(body, "s").unwrap();
        assert_eq!(p.status, UpsertStatus::Normal);
        assert_eq!(p.routes.len(), 3);
        assert_eq!(p.routes[1].slot, "1");
        assert_eq!(p.routes[2].server, "w0:1");
        let gap = r#"{"id":"u1","slots":[{"slot_id":"0","worker_addr":"w","buckets":[0,2]}]}"#;
        assert!(parse_session(gap, "s").is_err());
    }
}
