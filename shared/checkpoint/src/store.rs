//! The store trait and the typed helpers on top of it.

use std::fmt::Debug;
use std::time::Duration;

use async_trait::async_trait;
use floe_core::{Error, Result};
use serde::Serialize;
use serde::de::DeserializeOwned;

/// An entry's version: opaque, compared for equality only (a counter in SQLite, an ETag in an
/// object store).
#[derive(Clone, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct Version(pub String);

/// One entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    /// The key.
    pub key: String,
    /// The value (floe writes JSON).
    pub value: Vec<u8>,
    /// The version to pass to conditional writes.
    pub version: Version,
    /// When the entry expires, in ms since the epoch.
    pub expires_at_ms: Option<i64>,
}

/// Milliseconds since the epoch, now.
pub fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

/// One conditional write of a [`CheckpointStore::write_many`].
#[derive(Clone, Debug)]
pub enum Write<'a> {
    /// `put_if_absent`.
    Insert {
        /// The key.
        key: &'a str,
        /// The value.
        value: Vec<u8>,
        /// Time to live.
        ttl: Option<Duration>,
    },
    /// `put_if_version`.
    Update {
        /// The key.
        key: &'a str,
        /// The value.
        value: Vec<u8>,
        /// The version it must still have.
        expected: &'a Version,
        /// Time to live.
        ttl: Option<Duration>,
    },
}

/// A checkpoint table backend; see the crate doc.
#[async_trait]
pub trait CheckpointStore: Send + Sync + Debug {
    /// The entry under `key`, unless absent or expired.
    async fn get(&self, key: &str) -> Result<Option<Entry>>;

    /// Write `value` under `key` if no live entry is there. `None` when one is.
    async fn put_if_absent(
        &self,
        key: &str,
        value: &[u8],
        ttl: Option<Duration>,
    ) -> Result<Option<Version>>;

    /// Replace the entry under `key` if its version is still `expected`. `None` when it is not
    /// (changed, deleted or expired since it was read).
    async fn put_if_version(
        &self,
        key: &str,
        value: &[u8],
        expected: &Version,
        ttl: Option<Duration>,
    ) -> Result<Option<Version>>;

    /// Delete the entry under `key` if its version is still `expected`.
    async fn delete_if_version(&self, key: &str, expected: &Version) -> Result<bool>;

    /// Every live entry whose key starts with `prefix`, in key order.
    async fn scan(&self, prefix: &str) -> Result<Vec<Entry>>;

    /// Remove the dead entries (expired, or deleted and kept as tombstones) whose key starts
    /// with `prefix` (`""`: all of them); returns how many went.
    async fn purge_expired(&self, prefix: &str) -> Result<u64>;

    /// [`CheckpointStore::scan`], also removing the dead entries met under `prefix`, so a
    /// prefix scanned often does not grow with its history. Only for prefixes whose keys are
    /// never written again once dead (ids): a removal that races a revival of its key can
    /// erase the revived entry on a store that ignores conditional deletes.
    async fn scan_and_purge(&self, prefix: &str) -> Result<Vec<Entry>> {
        let live = self.scan(prefix).await?;
        self.purge_expired(prefix).await?;
        Ok(live)
    }

    /// `get` of several keys, in order. Backends that can read them in one request do.
    async fn get_many(&self, keys: &[String]) -> Result<Vec<Option<Entry>>> {
        let mut out = Vec::with_capacity(keys.len());
        for k in keys {
            out.push(self.get(k).await?);
        }
        Ok(out)
    }

    /// Several independent conditional writes; each succeeds or loses on its own (`None`), as if
    /// made one after another. Backends that can apply them in one transaction (one disk sync)
    /// do.
    async fn write_many(&self, writes: &[Write<'_>]) -> Result<Vec<Option<Version>>> {
        let mut out = Vec::with_capacity(writes.len());
        for w in writes {
            out.push(match w {
                Write::Insert { key, value, ttl } => self.put_if_absent(key, value, *ttl).await?,
                Write::Update {
                    key,
                    value,
                    expected,
                    ttl,
                } => self.put_if_version(key, value, expected, *ttl).await?,
            });
        }
        Ok(out)
    }
}

/// JSON helpers over any store.
#[async_trait]
pub trait StoreExt: CheckpointStore {
    /// `get` and decode.
    async fn get_json<T: DeserializeOwned + Send>(
        &self,
        key: &str,
    ) -> Result<Option<(T, Version)>> {
        match self.get(key).await? {
            None => Ok(None),
            Some(e) => Ok(Some((decode(&e)?, e.version))),
        }
    }

    /// `get_many` and decode each entry found.
    async fn get_many_json<T: DeserializeOwned + Send>(
        &self,
        keys: &[String],
    ) -> Result<Vec<Option<(T, Version)>>> {
        let found = self.get_many(keys).await?;
        found
            .into_iter()
            .map(|e| e.map(|e| Ok((decode(&e)?, e.version))).transpose())
            .collect()
    }

    /// Encode and `put_if_absent`.
    async fn insert_json<T: Serialize + Sync>(
        &self,
        key: &str,
        value: &T,
        ttl: Option<Duration>,
    ) -> Result<Option<Version>> {
        self.put_if_absent(key, &encode(value)?, ttl).await
    }

    /// Encode and `put_if_version`.
    async fn update_json<T: Serialize + Sync>(
        &self,
        key: &str,
        value: &T,
        expected: &Version,
        ttl: Option<Duration>,
    ) -> Result<Option<Version>> {
        self.put_if_version(key, &encode(value)?, expected, ttl)
            .await
    }

    /// `scan` and decode every entry.
    async fn scan_json<T: DeserializeOwned + Send>(
        &self,
        prefix: &str,
    ) -> Result<Vec<(String, T, Version)>> {
        decode_all(self.scan(prefix).await?)
    }

    /// `scan_and_purge` and decode every entry.
    async fn scan_and_purge_json<T: DeserializeOwned + Send>(
        &self,
        prefix: &str,
    ) -> Result<Vec<(String, T, Version)>> {
        decode_all(self.scan_and_purge(prefix).await?)
    }
}

impl<S: CheckpointStore + ?Sized> StoreExt for S {}

/// Encode a value as floe writes checkpoint entries (JSON).
pub fn encode<T: Serialize>(value: &T) -> Result<Vec<u8>> {
    serde_json::to_vec(value)
        .map_err(|e| Error::unexpected("failed to encode checkpoint entry").with_source(e))
}

fn decode<T: DeserializeOwned>(e: &Entry) -> Result<T> {
    serde_json::from_slice(&e.value).map_err(|err| {
        Error::new(
            floe_core::ErrorKind::Protocol,
            format!(
                "checkpoint entry `{}` does not hold what floe expects",
                e.key
            ),
        )
        .with_source(err)
    })
}

fn decode_all<T: DeserializeOwned>(entries: Vec<Entry>) -> Result<Vec<(String, T, Version)>> {
    let mut out = Vec::with_capacity(entries.len());
    for e in entries {
        let v = decode(&e)?;
        out.push((e.key, v, e.version));
    }
    Ok(out)
}
