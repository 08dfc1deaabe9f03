//! The SQLite backend: one table in a local database file (the embedded default).
//!
//! Versions are random 64-bit values rather than counters, so a key deleted and written again
//! never repeats a version a slow writer may still hold (no ABA). The database runs in WAL mode
//! with a busy timeout, so several local processes can share it.

use std::path::Path;
use std::str::FromStr;
use std::sync::LazyLock;
use std::time::Duration;

use async_trait::async_trait;
use floe_core::{Error, ErrorKind, Result};
use sqlx::Row;
use sqlx::Sqlite;
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions};

use crate::store::{CheckpointStore, Entry, Version, Write, now_ms};

/// The SQLite checkpoint store.
#[derive(Debug, Clone)]
pub struct SqliteStore {
    pool: SqlitePool,
}

fn db_err(what: &str, e: sqlx::Error) -> Error {
    let busy = matches!(&e, sqlx::Error::Database(d) if d.message().contains("locked") || d.message().contains("busy"));
    Error::new(
        if busy {
            ErrorKind::Conflict
        } else {
            ErrorKind::Io
        },
        format!("checkpoint table: {what}"),
    )
    .with_source(e)
}

fn new_version() -> Version {
    Version(format!("{:016x}", uuid::Uuid::new_v4().as_u64_pair().0))
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

impl SqliteStore {
    /// Open (creating if needed) the database at `path`.
    pub async fn open(path: &Path) -> Result<Self> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| {
                Error::from(e).while_doing(format!("failed to create {}", dir.display()))
            })?;
        }
        let opts = SqliteConnectOptions::from_str(&format!("sqlite://{}", path.display()))
            .map_err(|e| Error::config("checkpoint.path", e))?
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .busy_timeout(Duration::from_secs(30));
        Self::connect(opts).await
    }

    /// A private in-memory database (tests).
    pub async fn in_memory() -> Result<Self> {
        let opts = SqliteConnectOptions::from_str("sqlite::memory:")
            .map_err(|e| Error::unexpected("bad sqlite options").with_source(e))?;
        Self::connect(opts).await
    }

    async fn connect(opts: SqliteConnectOptions) -> Result<Self> {
        // One connection for an in-memory database (each connection would be its own database).
        let pool = SqlitePoolOptions::new()
            .max_connections(if opts.get_filename().as_os_str() == ":memory:" {
                1
            } else {
                4
            })
            .connect_with(opts)
            .await
            .map_err(|e| db_err("failed to open", e))?;
        sqlx::query(
            "CREATE TABLE IF NOT EXISTS floe_checkpoint (
                key TEXT PRIMARY KEY NOT NULL,
                value BLOB NOT NULL,
                version TEXT NOT NULL,
                expires_at INTEGER
            )",
        )
        .execute(&pool)
        .await
        .map_err(|e| db_err("failed to create table", e))?;
        Ok(SqliteStore { pool })
    }
}

/// One conditional write as its statement binds it: without `expected` an insert unless a
/// live entry exists (an expired one is replaced), with it a replacement of a live entry still
/// at that version.
struct Cas<'a> {
    key: &'a str,
    value: &'a [u8],
    ttl: Option<Duration>,
    expected: Option<&'a Version>,
}

impl<'a> From<&'a Write<'a>> for Cas<'a> {
    fn from(w: &'a Write<'a>) -> Self {
        match w {
            Write::Insert { key, value, ttl } => Cas {
                key,
                value,
                ttl: *ttl,
                expected: None,
            },
            Write::Update {
                key,
                value,
                expected,
                ttl,
            } => Cas {
                key,
                value,
                ttl: *ttl,
                expected: Some(*expected),
            },
        }
    }
}

/// The most writes of distinct keys one statement of [`write_distinct`] carries.
///
/// SQLite compiles a multi-row statement row by row, and compiling costs about five times what
/// running costs (some 15 µs a row against 3 µs on this project's machines), and every process
/// compiles each statement shape anew. So a run of writes goes as statements of this many rows
/// and then of falling powers of two ([`chunks`]): a handful of shapes, each compiled once per
/// connection and reused, where one statement per run (a shape per run length) compiled the
/// whole run each time.
const ROWS_PER_STATEMENT: usize = 32;
const _: () = assert!(ROWS_PER_STATEMENT.is_power_of_two());

/// The row counts of the statements that carry `n` writes: [`ROWS_PER_STATEMENT`] while that
/// many are left, then the powers of two of the remainder, largest first.
fn chunks(n: usize) -> impl Iterator<Item = usize> {
    let full = n / ROWS_PER_STATEMENT;
    let rest = n % ROWS_PER_STATEMENT;
    std::iter::repeat_n(ROWS_PER_STATEMENT, full).chain(
        (0..usize::BITS)
            .rev()
            .map(|bit| 1usize << bit)
            .filter(move |size| rest & size != 0),
    )
}

/// The statement for `rows` conditional writes of distinct keys, inserts or updates, each row
/// bound as [`bind`] does; `RETURNING key` names the writes that won.
fn cas_sql(update: bool, rows: usize) -> String {
    if update {
        // VALUES columns are column1.. : key, value, new version, ttl, expected version.
        let rows = vec!["(?, ?, ?, ?, ?)"; rows].join(", ");
        format!(
            "UPDATE floe_checkpoint SET value = v.column2, version = v.column3,
               expires_at = v.column4 + {NOW_MS}
             FROM (VALUES {rows}) AS v
             WHERE floe_checkpoint.key = v.column1 AND floe_checkpoint.version = v.column5
               AND (floe_checkpoint.expires_at IS NULL OR floe_checkpoint.expires_at > {NOW_MS})
             RETURNING floe_checkpoint.key"
        )
    } else {
        let rows = vec![format!("(?, ?, ?, ? + {NOW_MS})"); rows].join(", ");
        format!(
            "INSERT INTO floe_checkpoint (key, value, version, expires_at) VALUES {rows}
             ON CONFLICT(key) DO UPDATE SET value = excluded.value, version = excluded.version,
               expires_at = excluded.expires_at
             WHERE floe_checkpoint.expires_at IS NOT NULL AND floe_checkpoint.expires_at <= {NOW_MS}
             RETURNING key"
        )
    }
}

/// The [`cas_sql`] text for a statement of `rows` rows, `rows` one of [`chunks`]' sizes (built
/// once: the statement cache knows a statement by its text).
fn statement(update: bool, rows: usize) -> &'static str {
    const SHAPES: usize = ROWS_PER_STATEMENT.ilog2() as usize + 1;
    static SQL: LazyLock<[[String; SHAPES]; 2]> = LazyLock::new(|| {
        [false, true].map(|update| std::array::from_fn(|bit| cas_sql(update, 1 << bit)))
    });
    debug_assert!(rows.is_power_of_two() && rows <= ROWS_PER_STATEMENT);
    &SQL[usize::from(update)][rows.ilog2() as usize]
}

fn cas_failed(update: bool) -> &'static str {
    if update {
        "failed to update"
    } else {
        "failed to insert"
    }
}

type Query<'q> = sqlx::query::Query<'q, Sqlite, sqlx::sqlite::SqliteArguments<'q>>;

/// Bind one row of a [`cas_sql`] statement.
fn bind<'q>(q: Query<'q>, w: &Cas<'q>, version: &'q Version) -> Query<'q> {
    let q = q
        .bind(w.key)
        .bind(w.value)
        .bind(&version.0)
        .bind(ttl_ms(w.ttl));
    match w.expected {
        Some(expected) => q.bind(&expected.0),
        None => q,
    }
}

/// One conditional write, on its own.
async fn write_one<'c, E: sqlx::Executor<'c, Database = Sqlite>>(
    ex: E,
    w: Cas<'_>,
) -> Result<Option<Version>> {
    let version = new_version();
    let won = bind(
        sqlx::query(statement(w.expected.is_some(), 1)),
        &w,
        &version,
    )
    .fetch_optional(ex)
    .await
    .map_err(|e| db_err(cas_failed(w.expected.is_some()), e))?;
    Ok(won.map(|_| version))
}

/// Writes of distinct keys as a few multi-row statements: the inserts, then the updates.
async fn write_distinct(
    tx: &mut sqlx::Transaction<'_, Sqlite>,
    writes: &[Cas<'_>],
) -> Result<Vec<Option<Version>>> {
    let mut out: Vec<Option<Version>> = vec![None; writes.len()];
    let (updates, inserts): (Vec<usize>, Vec<usize>) =
        (0..writes.len()).partition(|&i| writes[i].expected.is_some());
    for (update, of_kind) in [(false, inserts), (true, updates)] {
        let mut rest = of_kind.as_slice();
        for size in chunks(rest.len()) {
            let (chunk, after) = rest.split_at(size);
            rest = after;
            let versions: Vec<Version> = chunk.iter().map(|_| new_version()).collect();
            let mut q = sqlx::query(statement(update, size));
            for (&i, version) in chunk.iter().zip(&versions) {
                q = bind(q, &writes[i], version);
            }
            let won: std::collections::HashSet<String> = (q.fetch_all(&mut **tx).await)
                .map_err(|e| db_err(cas_failed(update), e))?
                .iter()
                .map(|r| r.get(0))
                .collect();
            for (&i, version) in chunk.iter().zip(versions) {
                if won.contains(writes[i].key) {
                    out[i] = Some(version);
                }
            }
        }
    }
    Ok(out)
}

#[async_trait]
impl CheckpointStore for SqliteStore {
    async fn get(&self, key: &str) -> Result<Option<Entry>> {
        let row = sqlx::query(
            "SELECT value, version, expires_at FROM floe_checkpoint
             WHERE key = ? AND (expires_at IS NULL OR expires_at > ?)",
        )
        .bind(key)
        .bind(now_ms())
        .fetch_optional(&self.pool)
        .await
        .map_err(|e| db_err("failed to read", e))?;
        Ok(row.map(|r| Entry {
            key: key.to_owned(),
            value: r.get(0),
            version: Version(r.get(1)),
            expires_at_ms: r.get(2),
        }))
    }

    async fn put_if_absent(
        &self,
        key: &str,
        value: &[u8],
        ttl: Option<Duration>,
    ) -> Result<Option<Version>> {
        let w = Cas {
            key,
            value,
            ttl,
            expected: None,
        };
        write_one(&self.pool, w).await
    }

    async fn put_if_version(
        &self,
        key: &str,
        value: &[u8],
        expected: &Version,
        ttl: Option<Duration>,
    ) -> Result<Option<Version>> {
        let w = Cas {
            key,
            value,
            ttl,
            expected: Some(expected),
        };
        write_one(&self.pool, w).await
    }

    async fn delete_if_version(&self, key: &str, expected: &Version) -> Result<bool> {
        let done = sqlx::query("DELETE FROM floe_checkpoint WHERE key = ? AND version = ?")
            .bind(key)
            .bind(&expected.0)
            .execute(&self.pool)
            .await
            .map_err(|e| db_err("failed to delete", e))?;
        Ok(done.rows_affected() == 1)
    }

    async fn scan(&self, prefix: &str) -> Result<Vec<Entry>> {
        // Range scan on the primary key: prefix <= key < prefix + U+10FFFF.
        let upper = format!("{prefix}\u{10ffff}");
        let rows = sqlx::query(
            "SELECT key, value, version, expires_at FROM floe_checkpoint
             WHERE key >= ? AND key < ? AND (expires_at IS NULL OR expires_at > ?)
             ORDER BY key",
        )
        .bind(prefix)
        .bind(&upper)
        .bind(now_ms())
        .fetch_all(&self.pool)
        .await
        .map_err(|e| db_err("failed to scan", e))?;
        Ok(rows
            .into_iter()
            .map(|r| Entry {
                key: r.get(0),
                value: r.get(1),
                version: Version(r.get(2)),
                expires_at_ms: r.get(3),
            })
            .collect())
    }

    async fn get_many(&self, keys: &[String]) -> Result<Vec<Option<Entry>>> {
        let mut found = std::collections::HashMap::new();
        for chunk in keys.chunks(500) {
            let marks = vec!["?"; chunk.len()].join(", ");
            let sql = format!(
                "SELECT key, value, version, expires_at FROM floe_checkpoint
                 WHERE key IN ({marks}) AND (expires_at IS NULL OR expires_at > ?)"
            );
            let mut q = sqlx::query(&sql);
            for k in chunk {
                q = q.bind(k);
            }
            let rows = q
                .bind(now_ms())
                .fetch_all(&self.pool)
                .await
                .map_err(|e| db_err("failed to read", e))?;
            for r in rows {
                let e = Entry {
                    key: r.get(0),
                    value: r.get(1),
                    version: Version(r.get(2)),
                    expires_at_ms: r.get(3),
                };
                found.insert(e.key.clone(), e);
            }
        }
        Ok(keys.iter().map(|k| found.remove(k)).collect())
    }

    async fn write_many(&self, writes: &[Write<'_>]) -> Result<Vec<Option<Version>>> {
        // One transaction: one disk sync for the lot. Each statement is a hand-off to the
        // connection's thread, so runs of writes to distinct keys go many to a statement (a key
        // written again starts the next run: the writes of a key apply in order).
        let mut tx = self
            .pool
            .begin()
            .await
            .map_err(|e| db_err("failed to begin", e))?;
        let writes: Vec<Cas<'_>> = writes.iter().map(Cas::from).collect();
        let mut out = Vec::with_capacity(writes.len());
        let mut rest = writes.as_slice();
        while !rest.is_empty() {
            let mut keys = std::collections::HashSet::new();
            let run = rest.iter().take_while(|w| keys.insert(w.key)).count();
            out.extend(write_distinct(&mut tx, &rest[..run]).await?);
            rest = &rest[run..];
        }
        tx.commit()
            .await
            .map_err(|e| db_err("failed to commit", e))?;
        Ok(out)
    }

    async fn purge_expired(&self, prefix: &str) -> Result<u64> {
        let upper = format!("{prefix}\u{10ffff}");
        let done = sqlx::query(
            "DELETE FROM floe_checkpoint
             WHERE key >= ? AND key < ? AND expires_at IS NOT NULL AND expires_at <= ?",
        )
        .bind(prefix)
        .bind(&upper)
        .bind(now_ms())
        .execute(&self.pool)
        .await
        .map_err(|e| db_err("failed to purge", e))?;
        Ok(done.rows_affected())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_of_writes_goes_as_full_statements_then_falling_powers_of_two() {
        assert_eq!(chunks(0).count(), 0);
        assert_eq!(chunks(1).collect::<Vec<_>>(), [1]);
        assert_eq!(chunks(32).collect::<Vec<_>>(), [32]);
        assert_eq!(
            chunks(500).collect::<Vec<_>>(),
            [[32; 15].as_slice(), &[16, 4]].concat()
        );
        for n in 0..300 {
            let sizes: Vec<usize> = chunks(n).collect();
            assert_eq!(sizes.iter().sum::<usize>(), n, "{n} writes");
            assert!(sizes.windows(2).all(|w| w[0] >= w[1]), "{n}: {sizes:?}");
            assert!(
                sizes
                    .iter()
                    .all(|&s| s.is_power_of_two() && s <= ROWS_PER_STATEMENT),
                "{n}: {sizes:?}"
            );
            // Each statement's text comes from the table of shapes.
            for &s in &sizes {
                assert_eq!(statement(true, s), cas_sql(true, s));
                assert_eq!(statement(false, s), cas_sql(false, s));
            }
        }
    }
}
