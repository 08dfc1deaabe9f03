//! The SQLite backend: one table in a local database file (the embedded default).
//!
//! Versions are random 64-bit values rather than counters, so a key deleted and written again
//! never repeats a version a slow writer may still hold (no ABA). The database runs in WAL mode
//! with a busy timeout, so several local processes can share it.
//!
//! SQLite's calls block, so each operation runs on tokio's blocking pool with a connection of
//! its own, and a whole operation (a `write_many` of hundreds of writes in one transaction, a
//! `get_many`) is one hand-off there and back. Statements are single-row and prepared once per
//! connection: running a cached statement costs a few microseconds, where a hand-off per
//! statement and a row at a time back (the async driver's way) cost hundreds.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, LazyLock, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use floe_core::{Error, ErrorKind, Result};
use rusqlite::config::DbConfig;
use rusqlite::{Connection, ErrorCode, OptionalExtension, TransactionBehavior, params};
use tokio::sync::Semaphore;

use crate::store::{CheckpointStore, Entry, Version, Write, now_ms};

/// The SQLite checkpoint store.
#[derive(Debug, Clone)]
pub struct SqliteStore {
    pool: Arc<Pool>,
}

/// The connections of one store: at most `permits` in use at once, idle ones kept for reuse.
#[derive(Debug)]
struct Pool {
    /// The file; `None` for the in-memory database, whose one connection is the database.
    path: Option<PathBuf>,
    idle: Mutex<Vec<Connection>>,
    permits: Arc<Semaphore>,
}

/// Connections a file-backed store opens at most (SQLite serialises writers anyway; readers in
/// WAL mode run beside them).
const FILE_CONNECTIONS: usize = 4;

/// Whether `e` is another process holding the lock past the busy timeout: the connection is
/// as good as before.
fn is_busy(e: &rusqlite::Error) -> bool {
    matches!(
        e.sqlite_error_code(),
        Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked)
    )
}

fn db_err(what: &str, e: rusqlite::Error) -> Error {
    Error::new(
        if is_busy(&e) {
            ErrorKind::Conflict
        } else {
            ErrorKind::Io
        },
        format!("checkpoint table: {what}"),
    )
    .with_source(e)
}

/// A fresh version: a bijective mix of a per-process random start plus a counter, so versions
/// never repeat within a process and are as unlikely to meet across processes as random ones,
/// without asking the kernel for randomness per write.
fn new_version() -> Version {
    static START: LazyLock<u64> = LazyLock::new(|| uuid::Uuid::new_v4().as_u64_pair().0);
    static COUNT: AtomicU64 = AtomicU64::new(0);
    let mut z = START.wrapping_add(COUNT.fetch_add(1, Ordering::Relaxed));
    // SplitMix64's finaliser: a bijection on u64.
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    Version(format!("{:016x}", z ^ (z >> 31)))
}

/// A TTL in milliseconds, for [`NOW_MS`]` + ?` (NULL without one: the sum is NULL).
fn ttl_ms(ttl: Option<Duration>) -> Option<i64> {
    ttl.map(|t| i64::try_from(t.as_millis()).unwrap_or(i64::MAX / 4))
}

/// The time in SQL, milliseconds since the epoch. Writes judge and set expiry with it: SQLite
/// reads the clock when the statement runs, after any wait for another process's lock, so an
/// entry written after a long wait still lives its whole TTL (a time bound before the wait
/// could make a lease dead on arrival).
const NOW_MS: &str = "CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER)";

/// An insert unless a live entry is there (an expired one is replaced): one change when it won.
static INSERT: LazyLock<String> = LazyLock::new(|| {
    format!(
        "INSERT INTO floe_checkpoint (key, value, version, expires_at)
         VALUES (?1, ?2, ?3, ?4 + {NOW_MS})
         ON CONFLICT(key) DO UPDATE SET value = excluded.value, version = excluded.version,
           expires_at = excluded.expires_at
         WHERE floe_checkpoint.expires_at IS NOT NULL AND floe_checkpoint.expires_at <= {NOW_MS}"
    )
});

/// A replacement of a live entry still at version `?5`: one change when it won.
static UPDATE: LazyLock<String> = LazyLock::new(|| {
    format!(
        "UPDATE floe_checkpoint SET value = ?2, version = ?3, expires_at = ?4 + {NOW_MS}
         WHERE key = ?1 AND version = ?5 AND (expires_at IS NULL OR expires_at > {NOW_MS})"
    )
});

const GET: &str = "SELECT value, version, expires_at FROM floe_checkpoint
                   WHERE key = ?1 AND (expires_at IS NULL OR expires_at > ?2)";

/// Range scan on the primary key: prefix <= key < prefix + U+10FFFF.
const SCAN: &str = "SELECT key, value, version, expires_at FROM floe_checkpoint
                    WHERE key >= ?1 AND key < ?2 AND (expires_at IS NULL OR expires_at > ?3)
                    ORDER BY key";

const PURGE: &str = "DELETE FROM floe_checkpoint
                     WHERE key >= ?1 AND key < ?2 AND expires_at IS NOT NULL AND expires_at <= ?3";

/// The upper bound of the keys under `prefix`.
fn upper(prefix: &str) -> String {
    format!("{prefix}\u{10ffff}")
}

/// One conditional write, owned so it can go to the blocking pool: without `expected` an
/// insert, with it a replacement.
struct Cas {
    key: String,
    value: Vec<u8>,
    ttl: Option<i64>,
    expected: Option<String>,
}

impl From<&Write<'_>> for Cas {
    fn from(w: &Write<'_>) -> Self {
        match w {
            Write::Insert { key, value, ttl } => Cas {
                key: (*key).to_owned(),
                value: value.clone(),
                ttl: ttl_ms(*ttl),
                expected: None,
            },
            Write::Update {
                key,
                value,
                expected,
                ttl,
            } => Cas {
                key: (*key).to_owned(),
                value: value.clone(),
                ttl: ttl_ms(*ttl),
                expected: Some(expected.0.clone()),
            },
        }
    }
}

/// Apply one [`Cas`] with the connection's cached statements; its new version if it won.
fn write_one(conn: &Connection, w: &Cas) -> rusqlite::Result<Option<Version>> {
    let version = new_version();
    let changed = match &w.expected {
        None => conn
            .prepare_cached(&INSERT)?
            .execute(params![w.key, w.value, version.0, w.ttl])?,
        Some(expected) => conn
            .prepare_cached(&UPDATE)?
            .execute(params![w.key, w.value, version.0, w.ttl, expected])?,
    };
    Ok((changed == 1).then_some(version))
}

fn entry(key: String, row: &rusqlite::Row<'_>, from: usize) -> rusqlite::Result<Entry> {
    Ok(Entry {
        key,
        value: row.get(from)?,
        version: Version(row.get(from + 1)?),
        expires_at_ms: row.get(from + 2)?,
    })
}

fn get_one(conn: &Connection, key: &str, now: i64) -> rusqlite::Result<Option<Entry>> {
    conn.prepare_cached(GET)?
        .query_row(params![key, now], |r| entry(key.to_owned(), r, 0))
        .optional()
}

fn scan_all(conn: &Connection, prefix: &str, now: i64) -> rusqlite::Result<Vec<Entry>> {
    conn.prepare_cached(SCAN)?
        .query_map(params![prefix, upper(prefix), now], |r| {
            entry(r.get(0)?, r, 1)
        })?
        .collect()
}

fn purge(conn: &Connection, prefix: &str, now: i64) -> rusqlite::Result<u64> {
    let gone = conn
        .prepare_cached(PURGE)?
        .execute(params![prefix, upper(prefix), now])?;
    Ok(gone as u64)
}

/// A new connection to `path`, set up as every connection of the store is.
fn connect(path: Option<&Path>) -> rusqlite::Result<Connection> {
    let conn = match path {
        Some(path) => Connection::open(path)?,
        None => Connection::open_in_memory()?,
    };
    conn.busy_timeout(Duration::from_secs(30))?;
    // The mode answers with a row; an in-memory database stays "memory".
    let _mode: String = conn.query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))?;
    // Every commit synced: a power loss must not undo a claim or a mark already acted on.
    conn.execute_batch("PRAGMA synchronous = FULL")?;
    // No checkpoint of the WAL into the database when a connection closes: a short-lived
    // process (every `floe run`) would pay it, a copy and a sync, on its way out. The WAL is
    // as durable as the database, the next opener reads it, and commits still checkpoint it
    // once it passes SQLite's threshold (1,000 pages), so it stays small.
    conn.set_db_config(DbConfig::SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, true)?;
    conn.set_prepared_statement_cache_capacity(16);
    Ok(conn)
}

impl SqliteStore {
    /// Open (creating if needed) the database at `path`.
    pub async fn open(path: &Path) -> Result<Self> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| {
                Error::from(e).while_doing(format!("failed to create {}", dir.display()))
            })?;
        }
        Self::start(Some(path.to_owned()), FILE_CONNECTIONS).await
    }

    /// A private in-memory database (tests).
    pub async fn in_memory() -> Result<Self> {
        // One connection: each connection would be its own database.
        Self::start(None, 1).await
    }

    async fn start(path: Option<PathBuf>, connections: usize) -> Result<Self> {
        let store = SqliteStore {
            pool: Arc::new(Pool {
                path,
                idle: Mutex::new(Vec::new()),
                permits: Arc::new(Semaphore::new(connections)),
            }),
        };
        store
            .run("failed to create table", |conn| {
                conn.execute_batch(
                    "CREATE TABLE IF NOT EXISTS floe_checkpoint (
                        key TEXT PRIMARY KEY NOT NULL,
                        value BLOB NOT NULL,
                        version TEXT NOT NULL,
                        expires_at INTEGER
                    )",
                )
            })
            .await?;
        Ok(store)
    }

    /// Run `f` with a connection on the blocking pool; `what` names a failure.
    async fn run<T, F>(&self, what: &'static str, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&mut Connection) -> rusqlite::Result<T> + Send + 'static,
    {
        let permit = (self.pool.permits.clone().acquire_owned().await)
            .map_err(|e| Error::unexpected("checkpoint connections closed").with_source(e))?;
        let pool = self.pool.clone();
        tokio::task::spawn_blocking(move || {
            // The permit travels with the work, so a caller that gives up cannot let another
            // operation take more connections than the pool allows (for the in-memory
            // database: a second, empty database).
            let _permit = permit;
            let idle = pool.idle.lock().unwrap_or_else(|p| p.into_inner()).pop();
            let mut conn = match idle {
                Some(conn) => conn,
                None => connect(pool.path.as_deref()).map_err(|e| db_err("failed to open", e))?,
            };
            let out = f(&mut conn);
            // A connection that failed is not kept (its transaction rolled back when dropped,
            // but the connection itself may be what failed); the next call opens another. A
            // lock held too long by another process says nothing against the connection, and
            // reopening on each would repeat the open under contention. The in-memory
            // database's one connection is the database, so it always stays.
            if out.as_ref().map_or_else(is_busy, |_| true) || pool.path.is_none() {
                pool.idle
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .push(conn);
            }
            out.map_err(|e| db_err(what, e))
        })
        .await
        .map_err(|e| Error::unexpected("checkpoint table: a call failed").with_source(e))?
    }

    async fn write_single(&self, w: Cas) -> Result<Option<Version>> {
        let what = if w.expected.is_some() {
            "failed to update"
        } else {
            "failed to insert"
        };
        self.run(what, move |conn| write_one(conn, &w)).await
    }
}

#[async_trait]
impl CheckpointStore for SqliteStore {
    async fn get(&self, key: &str) -> Result<Option<Entry>> {
        let key = key.to_owned();
        self.run("failed to read", move |conn| get_one(conn, &key, now_ms()))
            .await
    }

    async fn put_if_absent(
        &self,
        key: &str,
        value: &[u8],
        ttl: Option<Duration>,
    ) -> Result<Option<Version>> {
        self.write_single(Cas {
            key: key.to_owned(),
            value: value.to_owned(),
            ttl: ttl_ms(ttl),
            expected: None,
        })
        .await
    }

    async fn put_if_version(
        &self,
        key: &str,
        value: &[u8],
        expected: &Version,
        ttl: Option<Duration>,
    ) -> Result<Option<Version>> {
        self.write_single(Cas {
            key: key.to_owned(),
            value: value.to_owned(),
            ttl: ttl_ms(ttl),
            expected: Some(expected.0.clone()),
        })
        .await
    }

    async fn delete_if_version(&self, key: &str, expected: &Version) -> Result<bool> {
        let (key, expected) = (key.to_owned(), expected.0.clone());
        self.run("failed to delete", move |conn| {
            let gone = conn
                .prepare_cached("DELETE FROM floe_checkpoint WHERE key = ?1 AND version = ?2")?
                .execute(params![key, expected])?;
            Ok(gone == 1)
        })
        .await
    }

    async fn scan(&self, prefix: &str) -> Result<Vec<Entry>> {
        let prefix = prefix.to_owned();
        self.run("failed to scan", move |conn| {
            scan_all(conn, &prefix, now_ms())
        })
        .await
    }

    async fn purge_expired(&self, prefix: &str) -> Result<u64> {
        let prefix = prefix.to_owned();
        self.run("failed to purge", move |conn| {
            purge(conn, &prefix, now_ms())
        })
        .await
    }

    async fn scan_and_purge(&self, prefix: &str) -> Result<Vec<Entry>> {
        // One trip for both; the purge judges death by the same clock reading as the scan.
        let prefix = prefix.to_owned();
        self.run("failed to scan", move |conn| {
            let now = now_ms();
            let live = scan_all(conn, &prefix, now)?;
            purge(conn, &prefix, now)?;
            Ok(live)
        })
        .await
    }

    async fn get_many(&self, keys: &[String]) -> Result<Vec<Option<Entry>>> {
        let keys = keys.to_vec();
        self.run("failed to read", move |conn| {
            // One read transaction: the entries come from one snapshot of the table.
            let tx = conn.transaction()?;
            let now = now_ms();
            let found = keys
                .iter()
                .map(|k| get_one(&tx, k, now))
                .collect::<rusqlite::Result<_>>()?;
            tx.commit()?;
            Ok(found)
        })
        .await
    }

    async fn write_many(&self, writes: &[Write<'_>]) -> Result<Vec<Option<Version>>> {
        // One transaction, one disk sync for the lot, applied in order (a key written twice
        // sees its first write). IMMEDIATE takes the write lock at the start, waiting out
        // another process's under the busy timeout, where a deferred one could fail to upgrade.
        let writes: Vec<Cas> = writes.iter().map(Cas::from).collect();
        self.run("failed to write", move |conn| {
            let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
            let out = writes
                .iter()
                .map(|w| write_one(&tx, w))
                .collect::<rusqlite::Result<_>>()?;
            tx.commit()?;
            Ok(out)
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_do_not_repeat_and_look_random() {
        let versions: Vec<Version> = (0..10_000).map(|_| new_version()).collect();
        let distinct: std::collections::HashSet<&str> =
            versions.iter().map(|v| v.0.as_str()).collect();
        assert_eq!(distinct.len(), versions.len());
        assert!(versions.iter().all(|v| v.0.len() == 16));
        // Consecutive counts come out far apart, not as neighbours.
        let a = u64::from_str_radix(&versions[0].0, 16).unwrap();
        let b = u64::from_str_radix(&versions[1].0, 16).unwrap();
        assert!((a ^ b).count_ones() > 8, "{a:x} {b:x}");
    }

    fn idle(store: &SqliteStore) -> usize {
        store.pool.idle.lock().unwrap().len()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_connection_that_failed_is_replaced_but_the_in_memory_one_is_kept() {
        let dir = tempfile::tempdir().unwrap();
        let file = SqliteStore::open(&dir.path().join("c.db")).await.unwrap();
        assert_eq!(idle(&file), 1);
        let failed = file
            .run("failed on purpose", |conn| {
                conn.execute_batch("SELECT * FROM no_such_table")
            })
            .await
            .unwrap_err();
        assert!(failed.to_string().contains("failed on purpose"), "{failed}");
        assert_eq!(idle(&file), 0, "the failed connection is dropped");
        assert!(file.put_if_absent("k", b"v", None).await.unwrap().is_some());
        assert_eq!(idle(&file), 1, "a fresh one took its place");

        let memory = SqliteStore::in_memory().await.unwrap();
        memory.put_if_absent("k", b"v", None).await.unwrap();
        let _ = memory
            .run("failed on purpose", |conn| {
                conn.execute_batch("SELECT * FROM no_such_table")
            })
            .await
            .unwrap_err();
        assert_eq!(idle(&memory), 1);
        assert!(
            memory.get("k").await.unwrap().is_some(),
            "the database is still there"
        );
    }
}
