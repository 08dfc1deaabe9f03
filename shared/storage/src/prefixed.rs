//! A store seen through a key prefix: `s3://state/floe/dead-letter/` used as if it were a
//! bucket of its own.
//!
//! Every key the caller gives is put behind the prefix before it reaches the inner store, and
//! every key the inner store reports (listings, HEAD, GET) comes back without it, so code written
//! against a whole bucket (the dead-letter writer, its readers) works unchanged under a prefix.
//! URLs are the inner store's, with the full key: they name the real object.
//!
//! Listing tokens are passed through untouched: they are the inner store's, and only ever
//! handed back to it.

use std::path::PathBuf;
use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use floe_core::{Error, Provider, Result};

use crate::store::{GetResult, ListPage, ObjectMeta, ObjectStore, PutMode};

/// An [`ObjectStore`] under a key prefix of another.
#[derive(Debug, Clone)]
pub struct PrefixedStore {
    inner: Arc<dyn ObjectStore>,
    prefix: String,
}

/// `prefix` as a folder of keys: a missing trailing `/` added, an empty prefix kept empty (the
/// whole store). None when a segment is empty (`a//b`, `/a`), `.` or `..`: such a prefix would
/// not name the folder it seems to.
pub fn key_prefix(prefix: &str) -> Option<String> {
    let mut prefix = prefix.to_owned();
    if !prefix.is_empty() && !prefix.ends_with('/') {
        prefix.push('/');
    }
    let bad = |s: &str| s.is_empty() || s == "." || s == "..";
    (prefix.is_empty() || !prefix.trim_end_matches('/').split('/').any(bad)).then_some(prefix)
}

impl PrefixedStore {
    /// `inner` seen through `prefix`. A leading `/` is dropped and a missing trailing `/` is
    /// added (a prefix names a folder); an empty prefix is the whole store. A prefix with an
    /// empty, `.` or `..` segment is refused: it would not name the folder it seems to.
    pub fn new(inner: Arc<dyn ObjectStore>, prefix: &str) -> Result<Self> {
        let trimmed = prefix.trim_start_matches('/');
        let prefix = key_prefix(trimmed).ok_or_else(|| {
            Error::invalid_input(format!(
                "`{trimmed}` is not a key prefix (empty, `.` or `..` segment)"
            ))
        })?;
        Ok(PrefixedStore { inner, prefix })
    }

    /// The prefix, empty or ending in `/`.
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// The store underneath.
    pub fn inner(&self) -> &Arc<dyn ObjectStore> {
        &self.inner
    }

    fn full(&self, key: &str) -> String {
        format!("{}{key}", self.prefix)
    }

    /// A key the inner store reported, without the prefix (`None` when it is outside it).
    fn relative(&self, key: &str) -> Option<String> {
        key.strip_prefix(&self.prefix).map(str::to_owned)
    }

    fn strip(&self, mut meta: ObjectMeta) -> ObjectMeta {
        if let Some(k) = self.relative(&meta.key) {
            meta.key = k;
        }
        meta
    }
}

#[async_trait]
impl ObjectStore for PrefixedStore {
    fn provider(&self) -> Provider {
        self.inner.provider()
    }

    fn bucket(&self) -> &str {
        self.inner.bucket()
    }

    fn url(&self, key: &str) -> String {
        self.inner.url(&self.full(key))
    }

    async fn list(&self, prefix: &str, token: Option<&str>, max_keys: usize) -> Result<ListPage> {
        let page = self.inner.list(&self.full(prefix), token, max_keys).await?;
        Ok(ListPage {
            objects: page
                .objects
                .into_iter()
                .filter_map(|m| {
                    let key = self.relative(&m.key)?;
                    Some(ObjectMeta { key, ..m })
                })
                .collect(),
            next_token: page.next_token,
        })
    }

    async fn head(&self, key: &str) -> Result<Option<ObjectMeta>> {
        Ok(self
            .inner
            .head(&self.full(key))
            .await?
            .map(|m| self.strip(m)))
    }

    async fn get(&self, key: &str) -> Result<GetResult> {
        let got = self.inner.get(&self.full(key)).await?;
        Ok(GetResult {
            meta: self.strip(got.meta),
            body: got.body,
        })
    }

    async fn get_range(&self, key: &str, start: u64, end: u64) -> Result<Bytes> {
        self.inner.get_range(&self.full(key), start, end).await
    }

    async fn put(&self, key: &str, body: Bytes, mode: PutMode) -> Result<Option<String>> {
        self.inner.put(&self.full(key), body, mode).await
    }

    async fn delete(&self, key: &str) -> Result<()> {
        self.inner.delete(&self.full(key)).await
    }

    async fn delete_if_match(&self, key: &str, etag: &str) -> Result<bool> {
        self.inner.delete_if_match(&self.full(key), etag).await
    }

    fn local_path(&self, key: &str) -> Option<PathBuf> {
        self.inner.local_path(&self.full(key))
    }

    fn get_blocking(&self, key: &str) -> Option<Result<(ObjectMeta, Vec<Bytes>)>> {
        let got = self.inner.get_blocking(&self.full(key))?;
        Some(got.map(|(meta, chunks)| (self.strip(meta), chunks)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{LocalStore, collect_body};

    async fn keys(store: &dyn ObjectStore, prefix: &str, page: usize) -> Vec<String> {
        let mut out = Vec::new();
        let mut token = None;
        loop {
            let p = store.list(prefix, token.as_deref(), page).await.unwrap();
            out.extend(p.objects.into_iter().map(|m| m.key));
            match p.next_token {
                Some(t) => token = Some(t),
                None => return out,
            }
        }
    }

    #[tokio::test]
    async fn keys_go_behind_the_prefix_and_come_back_without_it() {
        let dir = tempfile::tempdir().unwrap();
        let bucket: Arc<dyn ObjectStore> = Arc::new(LocalStore::new(dir.path(), "state").unwrap());
        bucket
            .put(
                "floe/other.txt",
                Bytes::from("not ours"),
                PutMode::Overwrite,
            )
            .await
            .unwrap();
        bucket
            .put(
                "floe/dead-letterX/y",
                Bytes::from("a sibling"),
                PutMode::Overwrite,
            )
            .await
            .unwrap();
        let store = PrefixedStore::new(bucket.clone(), "/floe/dead-letter").unwrap();
        assert_eq!(store.prefix(), "floe/dead-letter/");
        assert_eq!(store.bucket(), "state");

        for k in [
            "2026-01-02/b-0000.ndjson",
            "2026-01-02/b-0001.ndjson",
            "2026-01-03/c.ndjson",
        ] {
            assert!(
                store
                    .put(k, Bytes::from(k), PutMode::Overwrite)
                    .await
                    .unwrap()
                    .is_some()
            );
        }
        // The objects are in the bucket under the prefix.
        let got = bucket
            .get("floe/dead-letter/2026-01-03/c.ndjson")
            .await
            .unwrap();
        assert_eq!(
            collect_body(got.body, 100).await.unwrap(),
            b"2026-01-03/c.ndjson"
        );
        // Listing sees only what is under the prefix, keys relative, across pages.
        assert_eq!(
            keys(&store, "", 1).await,
            [
                "2026-01-02/b-0000.ndjson",
                "2026-01-02/b-0001.ndjson",
                "2026-01-03/c.ndjson"
            ]
        );
        assert_eq!(
            keys(&store, "2026-01-03/", 10).await,
            ["2026-01-03/c.ndjson"]
        );
        // HEAD, GET and ranges speak relative keys too.
        let meta = store.head("2026-01-03/c.ndjson").await.unwrap().unwrap();
        assert_eq!(meta.key, "2026-01-03/c.ndjson");
        assert!(store.head("other.txt").await.unwrap().is_none());
        let got = store.get("2026-01-02/b-0001.ndjson").await.unwrap();
        assert_eq!(got.meta.key, "2026-01-02/b-0001.ndjson");
        assert_eq!(
            store
                .get_range("2026-01-03/c.ndjson", 0, 4)
                .await
                .unwrap()
                .as_ref(),
            b"2026"
        );
        // URLs name the real object.
        assert!(
            store
                .url("2026-01-03/c.ndjson")
                .ends_with("/floe/dead-letter/2026-01-03/c.ndjson"),
            "{}",
            store.url("2026-01-03/c.ndjson")
        );
        assert_eq!(
            store.local_path("x").unwrap(),
            dir.path()
                .canonicalize()
                .unwrap()
                .join("floe/dead-letter/x")
        );
        // Conditional writes keep their meaning.
        assert!(
            store
                .put(
                    "2026-01-03/c.ndjson",
                    Bytes::from("again"),
                    PutMode::IfAbsent
                )
                .await
                .unwrap()
                .is_none()
        );
        store.delete("2026-01-03/c.ndjson").await.unwrap();
        assert!(
            bucket
                .head("floe/dead-letter/2026-01-03/c.ndjson")
                .await
                .unwrap()
                .is_none()
        );
        assert!(bucket.head("floe/other.txt").await.unwrap().is_some());
    }

    #[test]
    fn prefixes_are_folders() {
        let dir = tempfile::tempdir().unwrap();
        let bucket: Arc<dyn ObjectStore> = Arc::new(LocalStore::new(dir.path(), "b").unwrap());
        assert_eq!(PrefixedStore::new(bucket.clone(), "").unwrap().prefix(), "");
        assert_eq!(
            PrefixedStore::new(bucket.clone(), "a/b/").unwrap().prefix(),
            "a/b/"
        );
        for bad in ["a//b", "a/../b", "./a", "a/./"] {
            assert!(PrefixedStore::new(bucket.clone(), bad).is_err(), "{bad}");
        }
    }
}
