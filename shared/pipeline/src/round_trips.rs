//! Round trips to the checkpoint table. On OSS or S3 every checkpoint request is one, so what a
//! batch or a commit costs is how many it makes one after another: a new object is claimed
//! without reading its (absent) record, and requests that do not depend on each other (a batch's
//! claims, a commit's marks) are in flight together.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use floe_checkpoint::{CheckpointStore, Entry, ObjectStoreCheckpoint, Version};
use floe_core::Result;
use floe_storage::LocalStore;

use crate::config::{FloeConfig, parse};
use crate::crash_points::{CONFIG, ids, local_catalog, write_bucket};
use crate::pipeline::Pipeline;

/// The object-store checkpoint table on a local folder, each request taking `rtt`: counts the
/// reads of object records, and how many requests on batch and done records were in flight
/// at once.
#[derive(Debug)]
struct Distant {
    inner: ObjectStoreCheckpoint,
    rtt: Duration,
    obj_reads: AtomicU64,
    now: AtomicUsize,
    most: AtomicUsize,
}

impl Distant {
    fn new(dir: &std::path::Path, rtt: Duration) -> Arc<Self> {
        let state = LocalStore::new(dir.join("state"), "state").unwrap();
        Arc::new(Distant {
            inner: ObjectStoreCheckpoint::new(Arc::new(state), "floe/checkpoint/"),
            rtt,
            obj_reads: AtomicU64::new(0),
            now: AtomicUsize::new(0),
            most: AtomicUsize::new(0),
        })
    }

    async fn trip<T>(&self, key: &str, f: impl Future<Output = T>) -> T {
        let counted = key.starts_with("batch/") || key.starts_with("done/");
        if counted {
            let n = self.now.fetch_add(1, Ordering::SeqCst) + 1;
            self.most.fetch_max(n, Ordering::SeqCst);
        }
        tokio::time::sleep(self.rtt).await;
        let out = f.await;
        if counted {
            self.now.fetch_sub(1, Ordering::SeqCst);
        }
        out
    }

    /// The most requests on batch and done records in flight at once since the last call.
    fn most_in_flight(&self) -> usize {
        self.most.swap(0, Ordering::SeqCst)
    }
}

#[async_trait]
impl CheckpointStore for Distant {
    async fn get(&self, key: &str) -> Result<Option<Entry>> {
        if key.starts_with("obj/") {
            self.obj_reads.fetch_add(1, Ordering::Relaxed);
        }
        self.trip(key, self.inner.get(key)).await
    }
    async fn put_if_absent(
        &self,
        key: &str,
        value: &[u8],
        ttl: Option<Duration>,
    ) -> Result<Option<Version>> {
        self.trip(key, self.inner.put_if_absent(key, value, ttl))
            .await
    }
    async fn put_if_version(
        &self,
        key: &str,
        value: &[u8],
        expected: &Version,
        ttl: Option<Duration>,
    ) -> Result<Option<Version>> {
        self.trip(key, self.inner.put_if_version(key, value, expected, ttl))
            .await
    }
    async fn delete_if_version(&self, key: &str, expected: &Version) -> Result<bool> {
        self.trip(key, self.inner.delete_if_version(key, expected))
            .await
    }
    async fn scan(&self, prefix: &str) -> Result<Vec<Entry>> {
        self.trip("", self.inner.scan(prefix)).await
    }
    async fn purge_expired(&self, prefix: &str) -> Result<u64> {
        self.trip("", self.inner.purge_expired(prefix)).await
    }
}

async fn pipeline(dir: &std::path::Path, config: &str, store: Arc<Distant>) -> Pipeline {
    let config = FloeConfig::from_raw(parse(config, false).unwrap(), dir).unwrap();
    Pipeline::builder(config)
        .catalog(local_catalog(dir).await)
        .checkpoint(store)
        .build()
        .await
        .unwrap()
}

/// An object never seen is claimed by a create-if-absent alone (no read of a record that is
/// not there); a new version of an object seen before is read, judged and claimed over the old
/// record.
#[tokio::test]
async fn objects_never_seen_are_claimed_without_reading_their_records() {
    let dir = tempfile::tempdir().unwrap();
    write_bucket(dir.path());
    let store = Distant::new(dir.path(), Duration::ZERO);
    let p = pipeline(dir.path(), CONFIG, store.clone()).await;
    let first = p.run_once(false).await.unwrap();
    assert_eq!(first.rows(), 9, "{first:?}");
    assert_eq!(store.obj_reads.load(Ordering::Relaxed), 0);

    for o in ["a.ndjson", "b.ndjson", "c.ndjson"] {
        let path = dir.path().join("bucket").join(o);
        let mut text = std::fs::read(&path).unwrap();
        text.extend_from_slice(b"{\"id\":100}\n");
        std::fs::write(&path, text).unwrap();
    }
    let again = p.run_once(false).await.unwrap();
    assert_eq!(again.rows(), 12, "{again:?}");
    assert_eq!(store.obj_reads.load(Ordering::Relaxed), 3);
}

/// A commit of eight batches reads their records and marks them together, not one after
/// another.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_reads_and_marks_its_batches_together() {
    let dir = tempfile::tempdir().unwrap();
    let bucket = dir.path().join("bucket");
    std::fs::create_dir_all(&bucket).unwrap();
    for i in 1..=8 {
        std::fs::write(
            bucket.join(format!("{i}.ndjson")),
            format!("{{\"id\":{i}}}\n"),
        )
        .unwrap();
    }
    let store = Distant::new(dir.path(), Duration::from_millis(20));
    let one_per_batch = CONFIG.replace("batch-objects = 2", "batch-objects = 1");
    let p = pipeline(dir.path(), &one_per_batch, store.clone()).await;
    let staged = p.run_once(false).await.unwrap();
    assert_eq!(staged.batches.len(), 8, "{staged:?}");
    store.most_in_flight();

    let committed = p.commit(true).await.unwrap();
    assert_eq!(committed.commits.len(), 1, "{committed:?}");
    assert!(
        store.most_in_flight() >= 4,
        "the commit read and marked its batches one after another"
    );
    assert_eq!(
        ids(&local_catalog(dir.path()).await).await,
        (1..=8).collect::<Vec<_>>()
    );
    assert!(p.staged_summary().await.unwrap().is_empty());
}
