//! The SQLite backend against the conformance suite, in memory and on disk, and shared by two
//! store handles on one file (as two local processes would).

use std::sync::Arc;

use floe_checkpoint::{CheckpointStore, SqliteStore, conformance};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_memory_passes_the_suite() {
    let store: Arc<dyn CheckpointStore> = Arc::new(SqliteStore::in_memory().await.unwrap());
    conformance::run_all(store, "mem").await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn file_backed_passes_the_suite_and_two_handles_never_lose_an_update() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("nested/checkpoint.db");
    let store: Arc<dyn CheckpointStore> = Arc::new(SqliteStore::open(&path).await.unwrap());
    conformance::run_all(store.clone(), "file").await.unwrap();
    // A second pool on the same file, as another process would open it.
    let other: Arc<dyn CheckpointStore> = Arc::new(SqliteStore::open(&path).await.unwrap());
    conformance::concurrent_counter(&[store, other], "two", 8, 25)
        .await
        .unwrap();
}

/// A write that waits for another process's lock must not come out already expired: an entry's
/// TTL runs from when it is written. (It ran from when the write began, so a lease taken after
/// a long wait could be dead on arrival, and its holder's first renewal failed.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_entry_written_after_a_lock_wait_lives_its_whole_ttl() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("checkpoint.db");
    let store = SqliteStore::open(&path).await.unwrap();
    // Another process holds the write lock for 400 ms.
    let (locked_tx, locked) = std::sync::mpsc::channel();
    let holder = path.clone();
    let release = std::thread::spawn(move || {
        let other = rusqlite::Connection::open(holder).unwrap();
        other.execute_batch("BEGIN IMMEDIATE").unwrap();
        locked_tx.send(()).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(400));
        other.execute_batch("COMMIT").unwrap();
    });
    locked.recv().unwrap();
    let ttl = Some(std::time::Duration::from_millis(200));
    let started = std::time::Instant::now();
    let inserted = store.put_if_absent("lease/t", b"x", ttl).await.unwrap();
    assert!(
        started.elapsed() >= std::time::Duration::from_millis(300),
        "it waited"
    );
    assert!(inserted.is_some());
    assert!(
        store.get("lease/t").await.unwrap().is_some(),
        "alive right after it was written"
    );
    let updated = store
        .put_if_version("lease/t", b"y", &inserted.unwrap(), ttl)
        .await
        .unwrap();
    assert!(updated.is_some(), "and can be renewed");
    release.join().unwrap();
}
