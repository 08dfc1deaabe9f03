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
