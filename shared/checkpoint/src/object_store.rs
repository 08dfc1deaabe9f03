//! The object-store backend: one object per entry in any [`ObjectStore`] (an S3 or OSS bucket
//! that serverless instances on either cloud can share), made safe with conditional requests.
//!
//! Layout: the entry `k` lives in the object `<prefix><escaped k>`, where the escape
//! percent-encodes every byte but ASCII letters, digits, `-` and `_`. The names are flat (no
//! `/` inside), so a key and a key under it (`s` and `s/a`) never clash on stores that map
//! keys to paths, and no name starts with `.`. The escape is one fixed string per character
//! and prefix-free, so "key starts with p" ⇔ "name starts with escape(p)": `scan` is a
//! listing.
//!
//! The object is JSON: `{"format":1,"key","write_id","expires_at_ms","deleted","value"}`
//! (`value` in base64). `write_id` is random, so every write has a new ETag even when the value
//! repeats (no ABA). The entry's [`Version`] is `<etag>/<expires_at_ms>`: the ETag does the
//! compare-and-set, and carrying the expiry (fixed for the life of that ETag) lets a
//! conditional write refuse an expired entry without reading it first.
//!
//! | call | requests |
//! |---|---|
//! | `get` | GET; expired or deleted reads as absent |
//! | `put_if_absent` | PUT `If-None-Match: *`; on 412, GET: a live entry wins (`None`), a dead one (expired or deleted) is replaced with PUT `If-Match: <its etag>` so two writers reviving it cannot both win |
//! | `put_if_version` | PUT `If-Match: <etag>`, unless the version says it has expired |
//! | `delete_if_version` | PUT `If-Match` of a tombstone (`deleted: true`): the tombstone, not a DELETE, is the atomic step |
//! | `scan` | paged listing, then a GET per object |
//! | `purge_expired` | listing, GET, then DELETE `If-Match: <etag>` of each dead object |
//! | `scan_and_purge` | `scan`, and the DELETEs of `purge_expired` for the dead objects it read |
//!
//! Why tombstones: a plain DELETE cannot be made conditional on every store (s3s-fs ignores
//! `If-Match` on DELETE; AWS honours it since September 2025), and an unconditional DELETE
//! racing a writer that just revived the key would erase that writer's entry. Tombstones are
//! removed by `purge_expired`, with `If-Match` on the DELETE: exact where the store honours it;
//! where it does not, a purge that races a revival of the same key can still erase it, so run
//! purges where that matters only on stores that honour conditional deletes.
//!
//! Expiry is judged by the writer's clock against `expires_at_ms`. An entry that expires while
//! the PUT of `put_if_version` is in flight is still updated (the window is one request long);
//! SQLite checks both in one statement.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use bytes::Bytes;
use floe_core::{Error, ErrorKind, Result};
use floe_storage::{ObjectStore, PutMode, collect_body};
use futures::future::BoxFuture;
use futures::{StreamExt, TryStreamExt};
use serde::{Deserialize, Serialize};

use crate::store::{CheckpointStore, Entry, Version, Write, now_ms};

/// Largest entry object read back, in bytes.
const MAX_ENTRY_BYTES: usize = 16 << 20;
/// GETs in flight at once during `scan` and `purge_expired`.
const SCAN_PARALLELISM: usize = 8;
/// Requests in flight at once for `get_many` and `write_many`: a batch's claims and marks go
/// out together (each is its own round trip to the store).
const MANY_PARALLELISM: usize = 32;
/// Rounds of `put_if_absent` when the object keeps changing under it.
const MAX_INSERT_ROUNDS: usize = 8;

/// The checkpoint table as objects under a prefix of a bucket.
#[derive(Debug, Clone)]
pub struct ObjectStoreCheckpoint {
    store: Arc<dyn ObjectStore>,
    prefix: String,
}

/// The stored object.
#[derive(Serialize, Deserialize)]
struct Stored {
    format: u32,
    key: String,
    write_id: String,
    expires_at_ms: Option<i64>,
    deleted: bool,
    value: String,
}

/// What a GET found.
struct Found {
    etag: String,
    stored: Stored,
}

impl Found {
    fn live(&self, now: i64) -> bool {
        !self.stored.deleted && self.stored.expires_at_ms.is_none_or(|t| t > now)
    }

    fn version(&self) -> Version {
        version(&self.etag, self.stored.expires_at_ms)
    }
}

/// `<etag>/<expires_at_ms>` (`-` for none). ETags never contain `/` (hex, `-N` suffixes).
fn version(etag: &str, expires_at_ms: Option<i64>) -> Version {
    match expires_at_ms {
        Some(t) => Version(format!("{etag}/{t}")),
        None => Version(format!("{etag}/-")),
    }
}

/// The ETag and expiry in a version; `None` for a version this backend did not make.
fn parse_version(v: &Version) -> Option<(&str, Option<i64>)> {
    let (etag, expiry) = v.0.rsplit_once('/')?;
    match expiry {
        "-" => Some((etag, None)),
        t => Some((etag, Some(t.parse().ok()?))),
    }
}

/// The object-name escape of a key (see the module doc).
fn escape(key: &str) -> String {
    let mut out = String::with_capacity(key.len());
    for b in key.bytes() {
        if b.is_ascii_alphanumeric() || b == b'-' || b == b'_' {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

fn write_key<'a>(w: &Write<'a>) -> &'a str {
    match w {
        Write::Insert { key, .. } | Write::Update { key, .. } => key,
    }
}

fn expiry(ttl: Option<Duration>) -> Option<i64> {
    ttl.map(|t| now_ms().saturating_add(i64::try_from(t.as_millis()).unwrap_or(i64::MAX / 2)))
}

impl ObjectStoreCheckpoint {
    /// A table in `store` under `prefix` (e.g. `floe/checkpoint/`; a `/` is added when the
    /// prefix is not empty and lacks one).
    pub fn new(store: Arc<dyn ObjectStore>, prefix: impl Into<String>) -> Self {
        let mut prefix = prefix.into();
        if !prefix.is_empty() && !prefix.ends_with('/') {
            prefix.push('/');
        }
        ObjectStoreCheckpoint { store, prefix }
    }

    fn name(&self, key: &str) -> String {
        format!("{}{}", self.prefix, escape(key))
    }

    fn encode(key: &str, value: &[u8], expires_at_ms: Option<i64>, deleted: bool) -> Result<Bytes> {
        let stored = Stored {
            format: 1,
            key: key.to_owned(),
            write_id: uuid::Uuid::new_v4().simple().to_string(),
            expires_at_ms,
            deleted,
            value: STANDARD.encode(value),
        };
        serde_json::to_vec(&stored)
            .map(Bytes::from)
            .map_err(|e| Error::unexpected("failed to encode a checkpoint entry").with_source(e))
    }

    /// One write of a `write_many`.
    fn write_one<'a>(&'a self, w: &'a Write<'a>) -> BoxFuture<'a, Result<Option<Version>>> {
        match w {
            Write::Insert { key, value, ttl } => self.put_if_absent(key, value, *ttl),
            Write::Update {
                key,
                value,
                expected,
                ttl,
            } => self.put_if_version(key, value, expected, *ttl),
        }
    }

    /// GET and decode the object of `name`; `None` when there is none.
    async fn fetch(&self, name: &str) -> Result<Option<Found>> {
        let got = match self.store.get(name).await {
            Ok(g) => g,
            Err(e) if e.kind() == ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e.while_doing("checkpoint table: failed to read an entry")),
        };
        let url = self.store.url(name);
        let etag = got.meta.etag.clone().ok_or_else(|| {
            Error::new(
                ErrorKind::Protocol,
                format!("checkpoint entry {url} came without an etag"),
            )
        })?;
        let bytes = collect_body(got.body, MAX_ENTRY_BYTES).await?;
        let stored: Stored = serde_json::from_slice(&bytes).map_err(|e| {
            Error::new(
                ErrorKind::Protocol,
                format!("checkpoint entry {url} is not a floe checkpoint object"),
            )
            .with_source(e)
        })?;
        Ok(Some(Found { etag, stored }))
    }

    fn entry(key: String, found: Found) -> Result<Entry> {
        let value = STANDARD
            .decode(found.stored.value.as_bytes())
            .map_err(|e| {
                Error::new(
                    ErrorKind::Protocol,
                    format!("checkpoint entry `{key}` has a value that is not base64"),
                )
                .with_source(e)
            })?;
        Ok(Entry {
            key,
            value,
            version: found.version(),
            expires_at_ms: found.stored.expires_at_ms,
        })
    }

    /// A conditional PUT of an object expiring at `expires_at_ms`; a lost race (412, or 409
    /// from a concurrent conditional write) is `None`.
    async fn put(
        &self,
        name: &str,
        body: Bytes,
        expires_at_ms: Option<i64>,
        mode: PutMode,
    ) -> Result<Option<Version>> {
        match self.store.put(name, body, mode).await {
            Ok(etag) => Ok(etag.map(|e| version(&e, expires_at_ms))),
            Err(e) if e.kind() == ErrorKind::Conflict => Ok(None),
            Err(e) => Err(e.while_doing("checkpoint table: failed to write an entry")),
        }
    }

    /// Every object name under `name_prefix`, listed page by page.
    async fn list_names(&self, name_prefix: &str) -> Result<Vec<String>> {
        let mut names = Vec::new();
        let mut token: Option<String> = None;
        loop {
            let page = self
                .store
                .list(name_prefix, token.as_deref(), 1000)
                .await
                .map_err(|e| e.while_doing("checkpoint table: failed to list entries"))?;
            names.extend(page.objects.into_iter().map(|m| m.key));
            match page.next_token {
                Some(t) => token = Some(t),
                None => return Ok(names),
            }
        }
    }

    /// GET every object under `name_prefix`, a few at a time: `(name, found)`.
    /// Delete dead objects, each only while its ETag is the one read (`If-Match`); returns how
    /// many went.
    async fn remove(&self, dead: impl IntoIterator<Item = (String, Found)>) -> Result<u64> {
        let removed: Vec<bool> = futures::stream::iter(dead)
            .map(|(name, f)| async move { self.store.delete_if_match(&name, &f.etag).await })
            .buffer_unordered(SCAN_PARALLELISM)
            .try_collect()
            .await?;
        Ok(removed.into_iter().filter(|r| *r).count() as u64)
    }

    async fn fetch_all(&self, name_prefix: &str) -> Result<Vec<(String, Found)>> {
        let names = self.list_names(name_prefix).await?;
        let found: Vec<Option<(String, Found)>> = futures::stream::iter(names)
            .map(|name| async move { Ok::<_, Error>(self.fetch(&name).await?.map(|f| (name, f))) })
            .buffered(SCAN_PARALLELISM)
            .try_collect()
            .await?;
        Ok(found.into_iter().flatten().collect())
    }
}

#[async_trait]
impl CheckpointStore for ObjectStoreCheckpoint {
    async fn get(&self, key: &str) -> Result<Option<Entry>> {
        match self.fetch(&self.name(key)).await? {
            Some(f) if f.live(now_ms()) => Ok(Some(Self::entry(key.to_owned(), f)?)),
            _ => Ok(None),
        }
    }

    async fn put_if_absent(
        &self,
        key: &str,
        value: &[u8],
        ttl: Option<Duration>,
    ) -> Result<Option<Version>> {
        let name = self.name(key);
        for _ in 0..MAX_INSERT_ROUNDS {
            let expires = expiry(ttl);
            let body = Self::encode(key, value, expires, false)?;
            if let Some(v) = self
                .put(&name, body.clone(), expires, PutMode::IfAbsent)
                .await?
            {
                return Ok(Some(v));
            }
            match self.fetch(&name).await? {
                Some(f) if f.live(now_ms()) => return Ok(None),
                // Dead: replace exactly the dead object; a concurrent reviver loses with 412.
                Some(f) => {
                    let dead = PutMode::IfMatch(f.etag);
                    if let Some(v) = self.put(&name, body, expires, dead).await? {
                        return Ok(Some(v));
                    }
                }
                // Gone between the two requests (purged): try to create it again.
                None => {}
            }
        }
        Err(Error::new(
            ErrorKind::Conflict,
            format!("checkpoint table: `{key}` kept changing while it was being inserted"),
        ))
    }

    async fn put_if_version(
        &self,
        key: &str,
        value: &[u8],
        expected: &Version,
        ttl: Option<Duration>,
    ) -> Result<Option<Version>> {
        let Some((etag, expires)) = parse_version(expected) else {
            return Ok(None);
        };
        if expires.is_some_and(|t| t <= now_ms()) {
            return Ok(None);
        }
        let new_expiry = expiry(ttl);
        let body = Self::encode(key, value, new_expiry, false)?;
        self.put(
            &self.name(key),
            body,
            new_expiry,
            PutMode::IfMatch(etag.to_owned()),
        )
        .await
    }

    async fn delete_if_version(&self, key: &str, expected: &Version) -> Result<bool> {
        let Some((etag, _)) = parse_version(expected) else {
            return Ok(false);
        };
        let dead_at = Some(now_ms());
        let body = Self::encode(key, &[], dead_at, true)?;
        Ok(self
            .put(
                &self.name(key),
                body,
                dead_at,
                PutMode::IfMatch(etag.to_owned()),
            )
            .await?
            .is_some())
    }

    /// The GETs in flight together (in the order asked).
    async fn get_many(&self, keys: &[String]) -> Result<Vec<Option<Entry>>> {
        let reads: Vec<BoxFuture<'_, Result<Option<Entry>>>> =
            keys.iter().map(|k| self.get(k)).collect();
        futures::stream::iter(reads)
            .buffered(MANY_PARALLELISM)
            .try_collect()
            .await
    }

    /// The conditional PUTs in flight together when every write names its own key (each is
    /// judged on its own either way); a key named twice keeps the writes in order, one after
    /// another. On an error the writes still in flight may or may not land, as a write whose
    /// answer was lost: callers treat an error as an unknown outcome of every write.
    async fn write_many(&self, writes: &[Write<'_>]) -> Result<Vec<Option<Version>>> {
        let distinct: std::collections::HashSet<&str> = writes.iter().map(write_key).collect();
        let parallelism = if distinct.len() == writes.len() {
            MANY_PARALLELISM
        } else {
            1
        };
        let puts: Vec<BoxFuture<'_, Result<Option<Version>>>> =
            writes.iter().map(|w| self.write_one(w)).collect();
        futures::stream::iter(puts)
            .buffered(parallelism)
            .try_collect()
            .await
    }

    async fn scan(&self, prefix: &str) -> Result<Vec<Entry>> {
        let now = now_ms();
        let mut out = Vec::new();
        for (_, f) in self.fetch_all(&self.name(prefix)).await? {
            if f.live(now) && f.stored.key.starts_with(prefix) {
                let key = f.stored.key.clone();
                out.push(Self::entry(key, f)?);
            }
        }
        out.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(out)
    }

    async fn purge_expired(&self, prefix: &str) -> Result<u64> {
        let now = now_ms();
        let dead = (self.fetch_all(&self.name(prefix)).await?)
            .into_iter()
            .filter(|(_, f)| !f.live(now));
        self.remove(dead).await
    }

    async fn scan_and_purge(&self, prefix: &str) -> Result<Vec<Entry>> {
        let now = now_ms();
        let (live, dead): (Vec<_>, Vec<_>) = (self.fetch_all(&self.name(prefix)).await?)
            .into_iter()
            .partition(|(_, f)| f.live(now));
        if let Err(e) = self.remove(dead).await {
            tracing::warn!(prefix, error = %e, "failed to remove dead checkpoint entries; the next scan tries again");
        }
        let mut out = Vec::with_capacity(live.len());
        for (_, f) in live {
            if f.stored.key.starts_with(prefix) {
                out.push(Self::entry(f.stored.key.clone(), f)?);
            }
        }
        out.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use floe_core::Provider;
    use floe_storage::{GetResult, ListPage, LocalStore, ObjectMeta};
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// A local store whose GETs and PUTs each take a round trip, counting how many were in
    /// flight at once.
    #[derive(Debug)]
    struct Distant {
        inner: LocalStore,
        now: AtomicUsize,
        most: AtomicUsize,
    }

    impl Distant {
        async fn trip<T>(&self, f: impl std::future::Future<Output = T>) -> T {
            let n = self.now.fetch_add(1, Ordering::SeqCst) + 1;
            self.most.fetch_max(n, Ordering::SeqCst);
            tokio::time::sleep(Duration::from_millis(20)).await;
            let out = f.await;
            self.now.fetch_sub(1, Ordering::SeqCst);
            out
        }
    }

    #[async_trait]
    impl ObjectStore for Distant {
        fn provider(&self) -> Provider {
            self.inner.provider()
        }
        fn bucket(&self) -> &str {
            self.inner.bucket()
        }
        fn url(&self, key: &str) -> String {
            self.inner.url(key)
        }
        async fn list(&self, prefix: &str, token: Option<&str>, max: usize) -> Result<ListPage> {
            self.inner.list(prefix, token, max).await
        }
        async fn head(&self, key: &str) -> Result<Option<ObjectMeta>> {
            self.inner.head(key).await
        }
        async fn get(&self, key: &str) -> Result<GetResult> {
            self.trip(self.inner.get(key)).await
        }
        async fn get_range(&self, key: &str, start: u64, end: u64) -> Result<Bytes> {
            self.inner.get_range(key, start, end).await
        }
        async fn put(&self, key: &str, body: Bytes, mode: PutMode) -> Result<Option<String>> {
            self.trip(self.inner.put(key, body, mode)).await
        }
        async fn delete(&self, key: &str) -> Result<()> {
            self.inner.delete(key).await
        }
        async fn delete_if_match(&self, key: &str, etag: &str) -> Result<bool> {
            self.inner.delete_if_match(key, etag).await
        }
    }

    /// Over a real network every request is a round trip: a batch's claims and marks (ten
    /// independent keys) go out together, not one after another; writes naming the same key
    /// twice keep their order.
    #[tokio::test]
    async fn many_reads_and_writes_of_distinct_keys_are_in_flight_together() {
        let dir = tempfile::tempdir().unwrap();
        let distant = Arc::new(Distant {
            inner: LocalStore::new(dir.path(), "state").unwrap(),
            now: AtomicUsize::new(0),
            most: AtomicUsize::new(0),
        });
        let table = ObjectStoreCheckpoint::new(distant.clone(), "floe/checkpoint/");
        let keys: Vec<String> = (0..10).map(|i| format!("obj/{i}")).collect();
        let writes: Vec<Write<'_>> = (keys.iter())
            .map(|k| Write::Insert {
                key: k,
                value: k.as_bytes().to_vec(),
                ttl: None,
            })
            .collect();
        let won = table.write_many(&writes).await.unwrap();
        assert!(won.iter().all(Option::is_some), "{won:?}");
        assert!(
            distant.most.swap(0, Ordering::SeqCst) >= 8,
            "the ten inserts went one after another"
        );
        let got = table.get_many(&keys).await.unwrap();
        let values: Vec<Vec<u8>> = got.into_iter().map(|e| e.unwrap().value).collect();
        assert_eq!(
            values,
            keys.iter()
                .map(|k| k.as_bytes().to_vec())
                .collect::<Vec<_>>()
        );
        assert!(
            distant.most.swap(0, Ordering::SeqCst) >= 8,
            "the ten reads went one after another"
        );

        // The same key twice: the second insert sees the first.
        let twice = [
            Write::Insert {
                key: "obj/x",
                value: b"1".to_vec(),
                ttl: None,
            },
            Write::Insert {
                key: "obj/x",
                value: b"2".to_vec(),
                ttl: None,
            },
        ];
        let won = table.write_many(&twice).await.unwrap();
        assert_eq!(
            won.iter().map(Option::is_some).collect::<Vec<_>>(),
            [true, false]
        );
        assert_eq!(table.get("obj/x").await.unwrap().unwrap().value, b"1");
    }

    #[test]
    fn escaped_names_are_flat_and_keep_prefixes() {
        assert_eq!(escape("obj/ab12"), "obj%2Fab12");
        let v = version("abc-2", Some(17));
        assert_eq!(parse_version(&v), Some(("abc-2", Some(17))));
        assert_eq!(parse_version(&version("e", None)), Some(("e", None)));
        assert_eq!(parse_version(&Version("7".into())), None);
        assert_eq!(escape("cursor/my.source"), "cursor%2Fmy%2Esource");
        assert_eq!(escape("日"), "%E6%97%A5");
        for (key, prefix) in [
            ("s/a", "s/"),
            ("stage/t/b-1", "stage/t/"),
            ("a%b", "a%"),
            ("日本", "日"),
        ] {
            assert!(escape(key).starts_with(&escape(prefix)), "{key} {prefix}");
        }
        for (key, prefix) in [("sa", "s/"), ("s", "s/"), ("b%", "a%")] {
            assert!(!escape(key).starts_with(&escape(prefix)), "{key} {prefix}");
        }
    }
}
