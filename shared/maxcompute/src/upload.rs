//! Tunnel upload sessions: append to (or overwrite) a table or partition in blocks, then commit
//! all blocks at once.
//!
//! ```text
//!   create ──► NORMAL ──write block 0..N (any order, re-PUT replaces)──► commit ──► CLOSED
//!     │          │  ▲                                                      │
//!     │          │  └── reload by id (after a crash) ──────────────────────┘ (unknown outcome:
//!     │          └── 24 h unused ──► EXPIRED (start again with a new session)   reload decides)
//!   POST <res>?uploads=1[&partition][&overwrite=true]
//! ```
//! Commit first reloads the session and checks that the server's block list is exactly the
//! blocks the caller wrote (as the SDKs do; no block list goes on the wire), then `POST`s. When
//! the commit's answer is lost, a reload tells: `CLOSED` means it committed.

use std::collections::BTreeSet;

use arrow_array::RecordBatch;
use floe_core::{Error, ErrorKind, Result};
use floe_tunnel_codec::{BlockEncoder, TableSchema, Value};
use reqwest::Method;
use serde_json::Value as Json;

use crate::meta::{PartitionColumn, TableId, parse_schema_json};
use crate::partition::PartitionSpec;
use crate::rows::{BatchConverter, RowError};
use crate::tunnel::{TableTunnel, describe, protocol};

/// The largest block id a session accepts (ids are `0..=19999`).
pub const MAX_BLOCK_ID: u32 = 19_999;

/// An upload session's state as the server reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum UploadStatus {
    /// Open for blocks.
    Normal,
    /// Committing.
    Closing,
    /// Committed.
    Closed,
    /// Cancelled.
    Canceled,
    /// Not committed within its lifetime; its blocks are gone.
    Expired,
    /// Broken on the server side.
    Critical,
    /// A status this client does not know.
    Unknown,
}

impl UploadStatus {
    /// The status as the service spells it (`NORMAL`, `CLOSED`…).
    pub fn as_str(self) -> &'static str {
        match self {
            UploadStatus::Normal => "NORMAL",
            UploadStatus::Closing => "CLOSING",
            UploadStatus::Closed => "CLOSED",
            UploadStatus::Canceled => "CANCELED",
            UploadStatus::Expired => "EXPIRED",
            UploadStatus::Critical => "CRITICAL",
            UploadStatus::Unknown => "UNKNOWN",
        }
    }

    fn parse(s: &str) -> Self {
        match s.trim().to_ascii_uppercase().as_str() {
            "NORMAL" => UploadStatus::Normal,
            "CLOSING" => UploadStatus::Closing,
            "CLOSED" => UploadStatus::Closed,
            "CANCELED" | "CANCELLED" => UploadStatus::Canceled,
            "EXPIRED" => UploadStatus::Expired,
            "CRITICAL" => UploadStatus::Critical,
            _ => UploadStatus::Unknown,
        }
    }
}

/// How to create an upload session.
#[derive(Clone, Debug, Default)]
pub struct UploadOptions {
    /// Replace the table's (or partition's) contents at commit (`overwrite=true`).
    pub overwrite: bool,
    /// Create the partition if it does not exist (`create_partition=true`).
    pub create_partition: bool,
}

/// An open upload session; see the module doc.
#[derive(Clone, Debug)]
pub struct UploadSession {
    tunnel: TableTunnel,
    table: TableId,
    partition: Option<PartitionSpec>,
    id: String,
    status: UploadStatus,
    server_blocks: Vec<u32>,
    schema: TableSchema,
    partition_columns: Vec<PartitionColumn>,
    overwrite: bool,
}

impl TableTunnel {
    /// Create an upload session on `table` (and `partition`).
    pub async fn create_upload(
        &self,
        table: &TableId,
        partition: Option<&PartitionSpec>,
        options: &UploadOptions,
    ) -> Result<UploadSession> {
        let what = format!(
            "upload session on maxcompute table {table}{}",
            partition.map(|p| format!(" ({p})")).unwrap_or_default()
        );
        let mut req = self
            .request(Method::POST, table.resource(), partition)
            .query("uploads", "1")
            .header("Content-Length", "0");
        if options.overwrite {
            req = req.query("overwrite", "true");
        }
        if options.create_partition {
            req = req.query("create_partition", "true");
        }
        let resp = self.http.send(&req, "create", &what).await?;
        if !resp.is_success() {
            return Err(resp.error("create", &what));
        }
        let mut session = UploadSession {
            tunnel: self.clone(),
            table: table.clone(),
            partition: partition.cloned(),
            id: String::new(),
            status: UploadStatus::Unknown,
            server_blocks: Vec::new(),
            schema: TableSchema::default(),
            partition_columns: Vec::new(),
            overwrite: options.overwrite,
        };
        session.apply(resp.text()?, &what)?;
        tracing::info!(session = %session.id, table = %table, overwrite = options.overwrite, "maxcompute upload session created");
        Ok(session)
    }

    /// Reload an existing upload session by id (after a restart). `overwrite` is what it was
    /// created with (the server does not report it; it is kept for [`UploadSession::overwrite`]).
    pub async fn reload_upload(
        &self,
        table: &TableId,
        partition: Option<&PartitionSpec>,
        upload_id: &str,
        overwrite: bool,
    ) -> Result<UploadSession> {
        let mut session = UploadSession {
            tunnel: self.clone(),
            table: table.clone(),
            partition: partition.cloned(),
            id: upload_id.to_owned(),
            status: UploadStatus::Unknown,
            server_blocks: Vec::new(),
            schema: TableSchema::default(),
            partition_columns: Vec::new(),
            overwrite,
        };
        session.reload().await?;
        Ok(session)
    }
}

impl UploadSession {
    fn what(&self) -> String {
        describe("upload", &self.id, &self.table, self.partition.as_ref())
    }

    /// Read a session document into `self`.
    fn apply(&mut self, body: &str, what: &str) -> Result<()> {
        let doc: Json = serde_json::from_str(body)
            .map_err(|e| protocol(what, "session is not valid json").with_source(e))?;
        let id = doc
            .get("UploadID")
            .and_then(Json::as_str)
            .ok_or_else(|| protocol(what, "session has no UploadID"))?;
        if !self.id.is_empty() && self.id != id {
            return Err(protocol(what, format!("server answered for session {id}")));
        }
        self.id = id.to_owned();
        self.status = UploadStatus::parse(doc.get("Status").and_then(Json::as_str).unwrap_or(""));
        self.server_blocks = doc
            .get("UploadedBlockList")
            .and_then(Json::as_array)
            .map(|blocks| {
                blocks
                    .iter()
                    .filter_map(|b| {
                        let v = b.get("BlockID").unwrap_or(b);
                        v.as_u64()
                            .or_else(|| v.as_str().and_then(|s| s.parse().ok()))
                            .and_then(|n| u32::try_from(n).ok())
                    })
                    .collect()
            })
            .unwrap_or_default();
        self.server_blocks.sort_unstable();
        if let Some(schema) = doc.get("Schema") {
            let (columns, partitions) = parse_schema_json(schema, what)?;
            self.schema = columns;
            self.partition_columns = partitions;
        }
        Ok(())
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

    /// Whether committing replaces the table's (or partition's) contents.
    pub fn overwrite(&self) -> bool {
        self.overwrite
    }

    /// The status as of the last create, reload or commit.
    pub fn status(&self) -> UploadStatus {
        self.status
    }

    /// The blocks the server held as of the last create, reload or commit, ascending.
    pub fn server_blocks(&self) -> &[u32] {
        &self.server_blocks
    }

    /// The record schema (data columns) blocks must be encoded with.
    pub fn schema(&self) -> &TableSchema {
        &self.schema
    }

    /// The table's partition columns.
    pub fn partition_columns(&self) -> &[PartitionColumn] {
        &self.partition_columns
    }

    /// An encoder for this session's records.
    pub fn block_encoder(&self) -> BlockEncoder {
        BlockEncoder::new(&self.schema)
    }

    /// Re-read the status and block list from the server.
    pub async fn reload(&mut self) -> Result<()> {
        let what = self.what();
        let req = self
            .tunnel
            .request(Method::GET, self.table.resource(), self.partition.as_ref())
            .query("uploadid", self.id.clone());
        let resp = self.tunnel.http.send(&req, "reload", &what).await?;
        if !resp.is_success() {
            return Err(resp.error("reload", &what));
        }
        let body = resp.text()?.to_owned();
        self.apply(&body, &what)
    }

    /// PUT one encoded block (the bytes of [`BlockEncoder::finish`]) as `block_id`, compressed
    /// with the tunnel's compression. Writing the same id again replaces the block.
    pub async fn write_block(&self, block_id: u32, block: &[u8]) -> Result<()> {
        self.put_block(block_id, block, false).await
    }

    /// PUT one Arrow-format block (the bytes of [`crate::ArrowBlockEncoder::finish`]) as
    /// `block_id`: the same request with an empty `arrow` query parameter.
    pub async fn write_arrow_block(&self, block_id: u32, block: &[u8]) -> Result<()> {
        self.put_block(block_id, block, true).await
    }

    async fn put_block(&self, block_id: u32, block: &[u8], arrow: bool) -> Result<()> {
        let what = self.what();
        if block_id > MAX_BLOCK_ID {
            return Err(Error::invalid_input(format!(
                "block id {block_id} is out of range 0..={MAX_BLOCK_ID} for {what}"
            )));
        }
        let mut req = self
            .tunnel
            .request(Method::PUT, self.table.resource(), self.partition.as_ref())
            .query("uploadid", self.id.clone())
            .query("blockid", block_id.to_string());
        if arrow {
            req = req.query("arrow", String::new());
        }
        req = req.header("Content-Type", "application/octet-stream");
        let body = match self.tunnel.compression {
            Some(c) => {
                req = req.header("Content-Encoding", c.content_encoding());
                c.compress(block)?
            }
            None => block.to_vec(),
        };
        let bytes = body.len();
        let req = req.body(body);
        let op = format!("write block {block_id} of");
        let resp = self.tunnel.http.send(&req, &op, &what).await?;
        if !resp.is_success() {
            return Err(resp.error(&op, &what));
        }
        tracing::info!(session = %self.id, table = %self.table, block = block_id, bytes, arrow, "tunnel block written");
        Ok(())
    }

    /// Encode `rows` (one value per schema column) and write them as `block_id`.
    pub async fn write_rows(&self, block_id: u32, rows: &[Vec<Value>]) -> Result<()> {
        let mut enc = self.block_encoder();
        for row in rows {
            enc.write_record(row)
                .map_err(|e| e.while_doing(format!("block {block_id} of {}", self.what())))?;
        }
        self.write_block(block_id, enc.finish()).await
    }

    /// Convert `batch` with `converter` (built for [`UploadSession::schema`]), write the rows
    /// that fit as `block_id`, and return the ones that do not (to dead-letter).
    pub async fn write_batch(
        &self,
        block_id: u32,
        converter: &BatchConverter,
        batch: &RecordBatch,
    ) -> Result<Vec<RowError>> {
        let mut enc = self.block_encoder();
        let errors = converter.encode_batch(batch, &mut enc)?;
        self.write_block(block_id, enc.finish()).await?;
        Ok(errors)
    }

    /// Commit the blocks `blocks` (every block written, exactly): reload, check the server holds
    /// exactly these blocks, then commit. A session found `CLOSED` (committed by an earlier
    /// attempt whose answer was lost) is success; one found `EXPIRED` is an error.
    pub async fn commit(&mut self, blocks: &[u32]) -> Result<()> {
        let what = self.what();
        self.reload().await?;
        match self.status {
            UploadStatus::Closed => return Ok(()),
            UploadStatus::Normal => {}
            other => return Err(status_error(&what, other)),
        }
        let want: BTreeSet<u32> = blocks.iter().copied().collect();
        let have: BTreeSet<u32> = self.server_blocks.iter().copied().collect();
        if want != have {
            let missing: Vec<String> = want.difference(&have).map(u32::to_string).collect();
            let extra: Vec<String> = have.difference(&want).map(u32::to_string).collect();
            return Err(Error::new(
                ErrorKind::Protocol,
                format!(
                    "blocks do not match for {what}: missing on the server [{}], unexpected on the server [{}]",
                    missing.join(","),
                    extra.join(",")
                ),
            )
            .with_retryable(false));
        }
        let req = self
            .tunnel
            .request(Method::POST, self.table.resource(), self.partition.as_ref())
            .query("uploadid", self.id.clone())
            .header("Content-Length", "0");
        let outcome = self.tunnel.http.send(&req, "commit", &what).await;
        let failure = match outcome {
            Ok(resp) if resp.is_success() => {
                if let Ok(text) = resp.text()
                    && !text.trim().is_empty()
                {
                    let text = text.to_owned();
                    self.apply(&text, &what)?;
                }
                self.status = UploadStatus::Closed;
                tracing::info!(session = %self.id, table = %self.table, blocks = blocks.len(), "maxcompute upload session committed");
                return Ok(());
            }
            Ok(resp) => resp.error("commit", &what),
            Err(e) => e,
        };
        if !matches!(failure.kind(), ErrorKind::Io | ErrorKind::Conflict) {
            return Err(failure);
        }
        // The answer was lost, the server failed, or another committer got there first (the
        // session is no longer open): its state decides.
        match self.reload().await {
            Ok(()) if self.status == UploadStatus::Closed => {
                tracing::info!(session = %self.id, table = %self.table, "maxcompute upload commit outcome was unknown; the session is committed");
                Ok(())
            }
            Ok(()) if self.status == UploadStatus::Normal => Err(failure),
            Ok(()) => Err(status_error(&what, self.status)),
            Err(_) => Err(Error::new(
                ErrorKind::StateUnknown,
                format!("commit of {what} has an unknown outcome: {failure}"),
            )),
        }
    }
}

fn status_error(what: &str, status: UploadStatus) -> Error {
    let kind = match status {
        UploadStatus::Closing => ErrorKind::StateUnknown,
        _ => ErrorKind::Conflict,
    };
    Error::new(
        kind,
        format!(
            "{what} is {}, not open",
            status.as_str().to_ascii_lowercase()
        ),
    )
    .with_retryable(status == UploadStatus::Closing)
    .with_context("session_status", status.as_str())
}
