//! The dead-letter destination: records and objects floe could not land, with why.
//!
//! Each batch writes its dead letters as NDJSON to `<day>/<batch>-<part>.ndjson` in the
//! dead-letter store (a folder locally), one line per bad record or unreadable object:
//! `{"time","batch","route","bucket","key","url","line","reason","raw"}`. Parts roll at 8 MiB so
//! a batch full of bad records never holds more than that in memory.

use std::sync::Arc;

use bytes::Bytes;
use floe_core::Result;
use floe_storage::{ObjectStore, PutMode};
use serde::Serialize;

const PART_BYTES: usize = 8 << 20;

/// One dead letter.
#[derive(Clone, Debug, Serialize)]
pub struct DeadLetter {
    /// When it was set aside (RFC 3339).
    pub time: String,
    /// The batch.
    pub batch: String,
    /// The route.
    pub route: String,
    /// Bucket of the object.
    pub bucket: String,
    /// Key of the object.
    pub key: String,
    /// URL of the object.
    pub url: String,
    /// Line (or row) of the record; absent for a whole object.
    pub line: Option<u64>,
    /// Why.
    pub reason: String,
    /// The record's text (truncated), or empty for a whole object.
    pub raw: String,
}

/// A batch's dead-letter writer.
#[derive(Debug)]
pub struct DeadLetterWriter {
    store: Arc<dyn ObjectStore>,
    batch: String,
    day: String,
    buf: Vec<u8>,
    part: u32,
    count: u64,
}

impl DeadLetterWriter {
    /// A writer for `batch` into `store`.
    pub fn new(store: Arc<dyn ObjectStore>, batch: &str) -> Self {
        DeadLetterWriter {
            store,
            batch: batch.to_owned(),
            day: chrono::Utc::now().format("%Y-%m-%d").to_string(),
            buf: Vec::new(),
            part: 0,
            count: 0,
        }
    }

    /// The same writer filing under `day` (`YYYY-MM-DD`) rather than today, so that writing
    /// the same letters again after a crash replaces the same object.
    pub fn on_day(mut self, day: String) -> Self {
        self.day = day;
        self
    }

    /// Dead letters written (or buffered) so far.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// Add one; flushes a part when the buffer is full.
    pub async fn add(&mut self, letter: &DeadLetter) -> Result<()> {
        serde_json::to_writer(&mut self.buf, letter).map_err(|e| {
            floe_core::Error::unexpected("failed to encode a dead letter").with_source(e)
        })?;
        self.buf.push(b'\n');
        self.count += 1;
        if self.buf.len() >= PART_BYTES {
            self.flush().await?;
        }
        Ok(())
    }

    /// Drop what is buffered and not yet written (a batch restarting its writing).
    pub fn discard_pending(&mut self) {
        let lines = self.buf.iter().filter(|b| **b == b'\n').count() as u64;
        self.count -= lines.min(self.count);
        self.buf.clear();
    }

    /// Write what is buffered.
    pub async fn flush(&mut self) -> Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        let key = format!("{}/{}-{:04}.ndjson", self.day, self.batch, self.part);
        let body = Bytes::from(std::mem::take(&mut self.buf));
        self.store
            .put(&key, body, PutMode::Overwrite)
            .await
            .map_err(|e| {
                e.while_doing(format!(
                    "failed to write dead letters to {}",
                    self.store.url(&key)
                ))
            })?;
        self.part += 1;
        Ok(())
    }
}
