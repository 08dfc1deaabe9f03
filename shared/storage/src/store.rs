//! The object store trait.

use std::fmt::Debug;
use std::path::PathBuf;
use std::pin::Pin;

use async_trait::async_trait;
use bytes::Bytes;
use chrono::{DateTime, Utc};
use floe_core::{Provider, Result};
use futures::{Stream, StreamExt};

/// What a listing or a HEAD says about an object.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ObjectMeta {
    /// The key.
    pub key: String,
    /// Size in bytes.
    pub size: u64,
    /// Entity tag without quotes.
    pub etag: Option<String>,
    /// Last modification time.
    pub last_modified: Option<DateTime<Utc>>,
    /// Version id (versioned buckets).
    pub version_id: Option<String>,
    /// `Content-Type`, when the store reports it (GET/HEAD, not listings).
    pub content_type: Option<String>,
    /// `Content-Encoding`, when the store reports it.
    pub content_encoding: Option<String>,
}

/// One page of a listing.
#[derive(Clone, Debug, Default)]
pub struct ListPage {
    /// Objects in key order.
    pub objects: Vec<ObjectMeta>,
    /// The token to pass for the next page; `None` at the end.
    pub next_token: Option<String>,
}

/// A streamed object body.
pub type ByteStream = Pin<Box<dyn Stream<Item = Result<Bytes>> + Send>>;

/// A GET: the object's metadata and its body as a stream of chunks.
pub struct GetResult {
    /// Metadata from the response.
    pub meta: ObjectMeta,
    /// The body.
    pub body: ByteStream,
}

impl Debug for GetResult {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GetResult")
            .field("meta", &self.meta)
            .finish_non_exhaustive()
    }
}

/// Conditions on a write.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PutMode {
    /// Write unconditionally.
    Overwrite,
    /// Write only if no object has the key (`If-None-Match: *`).
    IfAbsent,
    /// Write only if the object's ETag is still this one (`If-Match`).
    IfMatch(String),
}

/// An object store; see the crate doc.
#[async_trait]
pub trait ObjectStore: Send + Sync + Debug {
    /// Which store this is (for URLs and event shapes).
    fn provider(&self) -> Provider;

    /// The bucket name.
    fn bucket(&self) -> &str;

    /// The object's URL: `oss://bucket/key`, `s3://bucket/key`, `file:///abs/path`.
    fn url(&self, key: &str) -> String;

    /// One page of the objects whose keys start with `prefix`, after `token` (from the previous
    /// page), at most `max_keys`.
    async fn list(&self, prefix: &str, token: Option<&str>, max_keys: usize) -> Result<ListPage>;

    /// The object's metadata, `None` if there is no such object.
    async fn head(&self, key: &str) -> Result<Option<ObjectMeta>>;

    /// Stream the object. A missing object is an error of kind `NotFound`.
    async fn get(&self, key: &str) -> Result<GetResult>;

    /// Bytes `start..end` of the object.
    async fn get_range(&self, key: &str, start: u64, end: u64) -> Result<Bytes>;

    /// Write an object. Returns the new ETag, or `None` when the condition did not hold.
    async fn put(&self, key: &str, body: Bytes, mode: PutMode) -> Result<Option<String>>;

    /// Delete an object (no error if it is already gone).
    async fn delete(&self, key: &str) -> Result<()>;

    /// Delete the object only if its ETag is still `etag` (`If-Match` on DELETE). `Ok(true)`
    /// when it was deleted, `Ok(false)` when it had changed or was gone.
    ///
    /// AWS S3 honours the header on general purpose buckets (since September 2025); a server
    /// that ignores it (s3s-fs 0.14.1 does) deletes unconditionally, so callers that need the
    /// condition must not depend on it alone.
    async fn delete_if_match(&self, key: &str, etag: &str) -> Result<bool>;

    /// The object's path when it is a local file, so readers that need random access (Parquet)
    /// can open it directly instead of fetching ranges.
    fn local_path(&self, _key: &str) -> Option<PathBuf> {
        None
    }

    /// For a store whose objects are local files: the whole object read on the calling thread,
    /// as [`ObjectStore::get`] would give it (its metadata, its body's chunks), without the
    /// hand-offs to a blocking thread and back that an async read of a file costs. It blocks:
    /// call it where blocking is allowed (`spawn_blocking`). `None` for the other stores.
    fn get_blocking(&self, _key: &str) -> Option<Result<(ObjectMeta, Vec<Bytes>)>> {
        None
    }
}

/// Read a whole body into memory (small objects only: checkpoint entries, content mode).
pub async fn collect_body(mut body: ByteStream, limit: usize) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    while let Some(chunk) = body.next().await {
        let chunk = chunk?;
        if out.len() + chunk.len() > limit {
            return Err(floe_core::Error::invalid_input(format!(
                "object is larger than the {limit}-byte limit"
            )));
        }
        out.extend_from_slice(&chunk);
    }
    Ok(out)
}
