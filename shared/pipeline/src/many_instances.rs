//! Several instances at once on one checkpoint table and one catalog: the paths that only
//! concurrency opens (leases that run out, two committers on one commit record), each a
//! scenario that must land every row exactly once.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use floe_iceberg::FloeCatalog;

use crate::config::{FloeConfig, parse};
use crate::crash_points::{CONFIG, ids, local_catalog, write_bucket};
use crate::pipeline::Pipeline;

/// A catalog whose table commits reach the inner catalog only after `delay` (a slow catalog,
/// a commit slower than the lease).
#[derive(Debug)]
struct SlowCommits(Arc<dyn FloeCatalog>, Duration);

floe_iceberg::wrap_catalog!(SlowCommits, 0, |self, ident, requirements, updates| {
    tokio::time::sleep(self.1).await;
    self.0.commit_updates(ident, requirements, updates).await
});

/// An instance with its own owner, over the checkpoint table in `dir` and `catalog`.
async fn instance(dir: &Path, catalog: Arc<dyn FloeCatalog>, lease_ms: u64) -> Pipeline {
    let raw = parse(CONFIG, false).unwrap();
    let mut config = FloeConfig::from_raw(raw, dir).unwrap();
    config.commit.lease_ms = lease_ms;
    Pipeline::builder(config)
        .catalog(catalog)
        .build()
        .await
        .unwrap()
}

/// A committer whose catalog takes 3 s per commit, with `lease-ms = 1000`: a second committer
/// takes the lease meanwhile and finishes the first one's commit record. Before floe owned the
/// commit retries, the first one's 409 was retried inside iceberg and appended the batches a
/// second time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_slower_than_the_lease_lands_once() {
    let dir = tempfile::tempdir().unwrap();
    write_bucket(dir.path());
    let catalog = local_catalog(dir.path()).await;
    let stager = instance(dir.path(), catalog.clone(), 1000).await;
    let staged = stager.run_once(false).await.unwrap();
    assert!(staged.commits.commits.is_empty(), "{:?}", staged.commits);
    assert!(!stager.staged_summary().await.unwrap().is_empty());

    let slow: Arc<dyn FloeCatalog> = Arc::new(SlowCommits(catalog.clone(), Duration::from_secs(3)));
    let first = instance(dir.path(), slow, 1000).await;
    let second = instance(dir.path(), catalog.clone(), 1000).await;
    let (a, b) = tokio::join!(first.commit(true), async {
        tokio::time::sleep(Duration::from_millis(1500)).await;
        second.commit(true).await
    });
    // Whichever finishes the commit (the second when it starts before the first's append
    // returns, as it does unless this machine is loaded), the other stops with a conflict or
    // finds nothing left; a further pass finishes what a stopped one left.
    let (a, b) = (a.unwrap(), b.unwrap());
    let finished = a.commits.len() + b.commits.len();
    assert!(finished >= 1, "{a:?}\n{b:?}");
    for f in a.failed.iter().chain(&b.failed) {
        assert_eq!(
            f.error.kind(),
            floe_core::ErrorKind::Conflict,
            "{a:?}\n{b:?}"
        );
    }
    second.commit(true).await.unwrap();

    assert_eq!(ids(&catalog).await, (1..=9).collect::<Vec<_>>());
    let again = stager.commit(true).await.unwrap();
    assert!(again.commits.is_empty(), "{again:?}");
    assert!(stager.staged_summary().await.unwrap().is_empty());
}

/// A committer whose lease ran out while it was stalled, and was taken by another committer
/// that committed everything, must not touch the target when it wakes: renewing the lease
/// (compare-and-set on the version it wrote) fails and it stops.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_committer_whose_lease_was_taken_stops() {
    let dir = tempfile::tempdir().unwrap();
    write_bucket(dir.path());
    let catalog = local_catalog(dir.path()).await;
    let stager = instance(dir.path(), catalog.clone(), 1000).await;
    stager.run_once(false).await.unwrap();
    let target = crate::targets::TargetId::iceberg("floe", "t.events");
    assert!(stager.staged_summary().await.unwrap().contains_key(&target));

    let first = instance(dir.path(), catalog.clone(), 1000).await;
    let stalled = first.committer();
    assert!(stalled.hold_lease(&target).await.unwrap());
    stalled.renew_lease(true).await.unwrap();
    let second = instance(dir.path(), catalog.clone(), 1000).await;
    assert_eq!(
        second.commit(true).await.unwrap().busy,
        vec![target.to_string()],
        "a live lease keeps other committers out"
    );
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let took_over = second.commit(true).await.unwrap();
    assert_eq!(took_over.commits.len(), 1, "{took_over:?}");

    let e = stalled.renew_lease(true).await.unwrap_err();
    assert_eq!(e.kind(), floe_core::ErrorKind::Conflict, "{e}");
    assert!(e.to_string().contains("lease"), "{e}");
    assert_eq!(ids(&catalog).await, (1..=9).collect::<Vec<_>>());
}

/// Two routes, two tables; the first table is dropped (by someone else) while its batches wait.
/// Its commit fails and is reported, and the other table still commits: before each target
/// failed on its own, the first failure ended the pass and every target after it waited
/// forever.
#[tokio::test]
async fn a_failing_target_does_not_hold_up_the_others() {
    let dir = tempfile::tempdir().unwrap();
    for (sub, id) in [("x", 1), ("y", 2)] {
        let d = dir.path().join("bucket").join(sub);
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("o.ndjson"), format!("{{\"id\":{id}}}\n")).unwrap();
    }
    let catalog = local_catalog(dir.path()).await;
    let two_routes = CONFIG.replace(
        "[[routes]]\ntable = \"t.events\"\nsuffix = \".ndjson\"\n",
        "[[routes]]\nprefix = \"x/\"\ntable = \"t.x\"\n\n[[routes]]\nprefix = \"y/\"\ntable = \"t.y\"\n",
    );
    assert!(two_routes.contains("t.x"));
    let raw = parse(&two_routes, false).unwrap();
    let config = FloeConfig::from_raw(raw, dir.path()).unwrap();
    let p = Pipeline::builder(config)
        .catalog(catalog.clone())
        .build()
        .await
        .unwrap();
    let staged = p.run_once(false).await.unwrap();
    assert_eq!(staged.rows(), 2, "{staged:?}");
    let x = iceberg::TableIdent::from_strs(["t", "x"]).unwrap();
    catalog.drop_table(&x).await.unwrap();

    let report = p.commit(true).await.unwrap();
    assert_eq!(report.commits.len(), 1, "{report:?}");
    assert_eq!(report.commits[0].target, "iceberg:floe:t.y");
    assert_eq!(report.failed.len(), 1, "{report:?}");
    assert_eq!(report.failed[0].target, "iceberg:floe:t.x");
    let e = report.failed[0].error.to_string();
    assert!(e.contains("t.x"), "the error names the table: {e}");
    let y = iceberg::TableIdent::from_strs(["t", "y"]).unwrap();
    assert_eq!(crate::crash_points::ids_of(&catalog, &y).await, vec![2]);
}

/// A store that counts its reads and refuses them with a 403 while `deny` is set (a bucket
/// policy, an expired token, a missing KMS grant), passing everything to the inner store.
#[derive(Debug)]
struct Watched {
    inner: Arc<dyn floe_storage::ObjectStore>,
    deny: Arc<std::sync::atomic::AtomicBool>,
    gets: Arc<std::sync::atomic::AtomicUsize>,
    /// Each read waits this long first (a large object, a slow network).
    delay: Duration,
    /// Only reads of keys ending so wait (`None`: every read).
    slow_key: Option<&'static str>,
    /// The keys read, in order.
    read: Arc<std::sync::Mutex<Vec<String>>>,
}

impl Watched {
    fn new(inner: impl floe_storage::ObjectStore + 'static) -> Self {
        Watched {
            inner: Arc::new(inner),
            deny: Default::default(),
            gets: Default::default(),
            delay: Duration::ZERO,
            slow_key: None,
            read: Default::default(),
        }
    }

    fn check(&self, key: &str) -> floe_core::Result<()> {
        self.gets.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        self.read.lock().unwrap().push(key.to_owned());
        if self.deny.load(std::sync::atomic::Ordering::SeqCst) {
            return Err(floe_core::Error::new(
                floe_core::ErrorKind::Auth,
                format!("GET {key}: 403 AccessDenied"),
            ));
        }
        Ok(())
    }
}

#[async_trait::async_trait]
impl floe_storage::ObjectStore for Watched {
    fn provider(&self) -> floe_core::Provider {
        self.inner.provider()
    }
    fn bucket(&self) -> &str {
        self.inner.bucket()
    }
    fn url(&self, key: &str) -> String {
        self.inner.url(key)
    }
    async fn list(
        &self,
        prefix: &str,
        token: Option<&str>,
        max_keys: usize,
    ) -> floe_core::Result<floe_storage::ListPage> {
        self.inner.list(prefix, token, max_keys).await
    }
    async fn head(&self, key: &str) -> floe_core::Result<Option<floe_storage::ObjectMeta>> {
        self.inner.head(key).await
    }
    async fn get(&self, key: &str) -> floe_core::Result<floe_storage::GetResult> {
        self.check(key)?;
        if self.slow_key.is_none_or(|k| key.ends_with(k)) {
            tokio::time::sleep(self.delay).await;
        }
        self.inner.get(key).await
    }
    async fn get_range(&self, key: &str, start: u64, end: u64) -> floe_core::Result<bytes::Bytes> {
        self.check(key)?;
        if self.slow_key.is_none_or(|k| key.ends_with(k)) {
            tokio::time::sleep(self.delay).await;
        }
        self.inner.get_range(key, start, end).await
    }
    async fn put(
        &self,
        key: &str,
        body: bytes::Bytes,
        mode: floe_storage::PutMode,
    ) -> floe_core::Result<Option<String>> {
        self.inner.put(key, body, mode).await
    }
    async fn delete(&self, key: &str) -> floe_core::Result<()> {
        self.inner.delete(key).await
    }
    async fn delete_if_match(&self, key: &str, etag: &str) -> floe_core::Result<bool> {
        self.inner.delete_if_match(key, etag).await
    }
}

/// Reads denied (403) at delivery: the objects are given back, not dead-lettered and recorded
/// as done (before, a permission error was taken for a bad object and its rows were lost);
/// once the deny is lifted the next pass lands every row.
#[tokio::test]
async fn a_denied_read_is_retried_not_dead_lettered() {
    let dir = tempfile::tempdir().unwrap();
    write_bucket(dir.path());
    let catalog = local_catalog(dir.path()).await;
    let mut p = instance(dir.path(), catalog.clone(), 1000).await;
    let store =
        Watched::new(floe_storage::LocalStore::new(dir.path().join("bucket"), "b").unwrap());
    let deny = store.deny.clone();
    deny.store(true, std::sync::atomic::Ordering::SeqCst);
    p.stores = Arc::new(crate::sources::stores::SingleStore(Arc::new(store)));

    let denied = p.run_once(true).await.unwrap();
    assert_eq!(denied.dead_letters(), 0, "{denied:?}");
    assert_eq!(denied.rows(), 0, "{denied:?}");
    let failures = denied.failures();
    assert_eq!(failures.len(), 3, "{failures:?}");
    assert!(failures.iter().all(|f| f.contains("403")), "{failures:?}");

    deny.store(false, std::sync::atomic::Ordering::SeqCst);
    let landed = p.run_once(true).await.unwrap();
    assert!(landed.failures().is_empty(), "{:?}", landed.failures());
    assert_eq!(ids(&catalog).await, (1..=9).collect::<Vec<_>>());
}

/// The change of an object `key` of bucket `landing` at version `etag` (an OSS-style event:
/// the ETag in uppercase, `seq` its sequencer).
fn created(key: &str, etag: &str, seq: u32) -> floe_core::ObjectChange {
    floe_core::ObjectChange {
        etag: Some(etag.to_ascii_uppercase()),
        sequencer: Some(format!("{seq:016X}")),
        event_name: "ObjectCreated:Put".into(),
        ..floe_core::ObjectChange::created(floe_core::Provider::S3, "landing", key)
    }
}

/// An instance over `dir`'s checkpoint and `catalog` whose every read of the bucket folder
/// waits `delay` first.
async fn reading_slowly(dir: &Path, catalog: Arc<dyn FloeCatalog>, delay: Duration) -> Pipeline {
    let mut p = instance(dir, catalog, 1000).await;
    let mut store = Watched::new(floe_storage::LocalStore::new(dir.join("bucket"), "b").unwrap());
    store.delay = delay;
    p.stores = Arc::new(crate::sources::stores::SingleStore(Arc::new(store)));
    p
}

/// The change of `key` in `dir`'s bucket folder as it is now (its local ETag), sequencer `seq`.
async fn local_change(dir: &Path, key: &str, seq: u32) -> floe_core::ObjectChange {
    use floe_storage::ObjectStore;
    let local = floe_storage::LocalStore::new(dir.join("bucket"), "b").unwrap();
    let etag = local.head(key).await.unwrap().unwrap().etag.unwrap();
    created(key, &etag, seq)
}

/// An invocation's stop time reached while one object of its batch still reads (a read
/// slower than what the function has left, well within `object-timeout-ms`): the read and the
/// objects after it are given back and the batch stages those read in time before the
/// function is cut off. Before, the read ran on past the deadline and the whole batch with it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_still_running_at_the_stop_time_is_given_back_and_the_rest_lands() {
    let dir = tempfile::tempdir().unwrap();
    write_bucket(dir.path());
    let catalog = local_catalog(dir.path()).await;
    let raw = parse(CONFIG, false).unwrap();
    let mut config = FloeConfig::from_raw(raw, dir.path()).unwrap();
    config.ingest.batch_objects = 3;
    assert_eq!(config.ingest.object_timeout_ms, 600_000);
    let mut p = Pipeline::builder(config)
        .catalog(catalog.clone())
        .build()
        .await
        .unwrap();
    let mut store =
        Watched::new(floe_storage::LocalStore::new(dir.path().join("bucket"), "b").unwrap());
    store.delay = Duration::from_secs(60);
    store.slow_key = Some("b.ndjson");
    p.stores = Arc::new(crate::sources::stores::SingleStore(Arc::new(store)));
    let mut changes = Vec::new();
    for (key, seq) in ["a.ndjson", "b.ndjson", "c.ndjson"].iter().zip(1..) {
        changes.push(local_change(dir.path(), key, seq).await);
    }
    let stop_at = std::time::Instant::now() + Duration::from_millis(500);
    let landing = tokio::time::timeout(Duration::from_secs(30), p.land_changes(&changes, stop_at))
        .await
        .expect("landing stops at the stop time")
        .unwrap();
    use crate::protocol::Outcome;
    // One batch: a read in time and staged; b cut short at the stop time; c, not read yet
    // then, given back with it.
    let outcomes = &landing.batches[0].outcomes;
    let stopped = |o: &Outcome, what: &str| matches!(o, Outcome::Failed(e) if e.is_retryable() && e.to_string().contains(what));
    assert!(
        matches!(outcomes[0], Outcome::Staged)
            && stopped(&outcomes[1], "still running at the invocation's stop time")
            && stopped(&outcomes[2], "not read before the invocation's stop time"),
        "{outcomes:?}"
    );
    p.commit(true).await.unwrap();
    assert_eq!(ids(&catalog).await, [1, 2, 3]);
}

/// One event pushed twice at once (a trigger's duplicate delivery) to two instances, the
/// first one's read slow: the second finds the object claimed by a live batch. A pushed
/// trigger cannot hide the message until the claim ends as a queue does, so the second waits
/// the claim out within its invocation and answers done (a duplicate) instead of failing the
/// invocation and spending one of the trigger's few retries.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pushed_duplicate_waits_out_the_live_claim_instead_of_failing() {
    let dir = tempfile::tempdir().unwrap();
    write_bucket(dir.path());
    let catalog = local_catalog(dir.path()).await;
    let open = |delay: Duration| reading_slowly(dir.path(), catalog.clone(), delay);
    let mut event = crate::sources::land::Deliveries::default();
    event.push([local_change(dir.path(), "a.ndjson", 1).await]);
    let slow = open(Duration::from_millis(1500)).await;
    let other = open(Duration::ZERO).await;
    let stop_at = std::time::Instant::now() + Duration::from_secs(20);
    let (first, second) = tokio::join!(slow.land(&event, stop_at), async {
        tokio::time::sleep(Duration::from_millis(300)).await;
        other.land_waiting_out_busy(&event, stop_at).await
    });
    use crate::protocol::ack::Ack;
    let (first, second) = (first.unwrap(), second.unwrap());
    assert!(matches!(first.acks[..], [Ack::Done]), "{first:?}");
    assert!(matches!(second.acks[..], [Ack::Done]), "{second:?}");
    assert!(
        second
            .batches
            .iter()
            .any(|b| matches!(b.outcomes[..], [crate::protocol::Outcome::Busy])),
        "the second met the live claim first: {second:?}"
    );
    slow.commit(true).await.unwrap();
    assert_eq!(ids(&catalog).await, [1, 2, 3]);
}

/// Two appends to one object delivered to two instances at once, the first one's read slow:
/// the second must not claim over the first one's live claim (its bytes start where the first
/// one's end, and what landed is the first batch's to say). Before, it claimed the newer
/// version over the claim, counted nothing as landed, and landed the whole object: lines 1 to 3
/// twice. Now it is busy until the first batch stages, then lands lines 4 to 6.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn appends_to_one_object_on_two_instances_land_each_line_once() {
    let dir = tempfile::tempdir().unwrap();
    let bucket = dir.path().join("bucket");
    std::fs::create_dir(&bucket).unwrap();
    let catalog = local_catalog(dir.path()).await;
    let grow = |upto: i64, seq: u32| {
        let body: String = (1..=upto).map(|i| format!("{{\"id\":{i}}}\n")).collect();
        std::fs::write(bucket.join("app.ndjson"), &body).unwrap();
        floe_core::ObjectChange {
            size: Some(body.len() as u64),
            event_name: "ObjectCreated:AppendObject".into(),
            ..created("app.ndjson", &format!("E{seq}"), seq)
        }
    };
    let open = |delay: Duration| reading_slowly(dir.path(), catalog.clone(), delay);
    let first = grow(3, 1);
    let second = grow(6, 2);
    let slow = open(Duration::from_millis(800)).await;
    let fast = open(Duration::ZERO).await;
    let (a, b) = tokio::join!(slow.ingest(std::slice::from_ref(&first)), async {
        tokio::time::sleep(Duration::from_millis(300)).await;
        fast.ingest(std::slice::from_ref(&second)).await
    });
    use crate::protocol::Outcome;
    let (a, b) = (a.unwrap(), b.unwrap());
    assert!(matches!(a.outcomes[..], [Outcome::Staged]), "{a:?}");
    assert!(matches!(b.outcomes[..], [Outcome::Busy]), "{b:?}");
    let again = fast.ingest(std::slice::from_ref(&second)).await.unwrap();
    assert!(matches!(again.outcomes[..], [Outcome::Staged]), "{again:?}");
    assert_eq!(again.rows, 3, "{again:?}");
    fast.commit(true).await.unwrap();
    assert_eq!(ids(&catalog).await, (1..=6).collect::<Vec<_>>());
}

/// An object overwritten between its first event and the read (on s3s-fs): the first change
/// must not land the second version's rows under the first version's name, or the second
/// change lands them again. Read by key, `t.events` held 3, 3, 4, 4; now the first change finds
/// its version gone (stale) and the second lands 3, 4 once. Both orders of delivery.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_object_overwritten_before_its_read_lands_each_version_once() {
    let s3s = floe_testbed::servers::S3sFs::start()
        .await
        .expect("start s3s-fs");
    s3s.create_bucket("landing").unwrap();
    let store = floe_storage::S3Store::new(
        floe_storage::S3StoreConfig::new(floe_core::Provider::S3, "landing")
            .with_endpoint(s3s.endpoint())
            .with_region(floe_testbed::servers::S3sFs::REGION)
            .with_path_style(true)
            .with_keys(
                floe_testbed::servers::S3sFs::ACCESS_KEY_ID,
                floe_testbed::servers::S3sFs::SECRET_ACCESS_KEY,
                None,
            ),
    )
    .await
    .unwrap();
    let store: Arc<dyn floe_storage::ObjectStore> = Arc::new(store);
    let put = |key: &'static str, ids: &'static [i64]| {
        let store = store.clone();
        async move {
            let body: String = ids.iter().map(|i| format!("{{\"id\":{i}}}\n")).collect();
            store
                .put(key, body.into(), floe_storage::PutMode::Overwrite)
                .await
                .unwrap()
                .unwrap()
        }
    };
    for first_v1 in [true, false] {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("bucket")).unwrap();
        let catalog = local_catalog(dir.path()).await;
        let mut p = instance(dir.path(), catalog.clone(), 1000).await;
        p.stores = Arc::new(crate::sources::stores::SingleStore(store.clone()));
        let key = if first_v1 {
            "v1-first.ndjson"
        } else {
            "v2-first.ndjson"
        };
        let v1 = created(key, &put(key, &[1, 2]).await, 1);
        let v2 = created(key, &put(key, &[3, 4]).await, 2);
        let order = if first_v1 { [v1, v2] } else { [v2, v1] };
        for change in &order {
            let report = p.ingest(std::slice::from_ref(change)).await.unwrap();
            assert!(report.outcomes.iter().all(|o| o.is_done()), "{report:?}");
        }
        p.commit(true).await.unwrap();
        assert_eq!(ids(&catalog).await, vec![3, 4], "v1 first: {first_v1}");
    }
}

/// The object-store checkpoint keeps a finished batch or commit as a tombstone: before, every
/// commit pass listed and read all of them, so a pass grew with history (31 reads after 30
/// batches). The pass now removes the tombstones it meets, the committers purge dead entries
/// once an hour, and an idle pass after 30 finished batches reads next to nothing.
#[tokio::test]
async fn an_idle_commit_pass_does_not_read_finished_history() {
    let dir = tempfile::tempdir().unwrap();
    let bucket = dir.path().join("bucket");
    std::fs::create_dir_all(&bucket).unwrap();
    for i in 0..30 {
        std::fs::write(
            bucket.join(format!("o{i:02}.ndjson")),
            format!("{{\"id\":{i}}}\n"),
        )
        .unwrap();
    }
    std::fs::create_dir_all(dir.path().join("state")).unwrap();
    let state =
        Watched::new(floe_storage::LocalStore::new(dir.path().join("state"), "state").unwrap());
    let gets = state.gets.clone();
    let checkpoint: Arc<dyn floe_checkpoint::CheckpointStore> = Arc::new(
        floe_checkpoint::ObjectStoreCheckpoint::new(Arc::new(state), "floe/checkpoint/"),
    );
    let catalog = local_catalog(dir.path()).await;
    let raw = parse(
        &CONFIG.replace("batch-objects = 2", "batch-objects = 1"),
        false,
    )
    .unwrap();
    let config = FloeConfig::from_raw(raw, dir.path()).unwrap();
    let p = Pipeline::builder(config)
        .catalog(catalog.clone())
        .checkpoint(checkpoint)
        .build()
        .await
        .unwrap();
    let run = p.run_once(true).await.unwrap();
    assert_eq!(run.batches.len(), 30);
    assert_eq!(run.commits.commits.len(), 1, "{:?}", run.commits);
    // The first pass of the hour also purged: the 30 batch tombstones and the commit's.
    assert_eq!(run.commits.purged, 31, "{:?}", run.commits);
    assert_eq!(p.commit(true).await.unwrap().purged, 0, "once an hour");
    gets.store(0, std::sync::atomic::Ordering::SeqCst);
    let idle = p.commit(true).await.unwrap();
    assert!(idle.commits.is_empty());
    let read = gets.load(std::sync::atomic::Ordering::SeqCst);
    assert!(read <= 3, "an idle pass read {read} checkpoint objects");
}

/// An object whose read takes longer than `claim-timeout-ms`: the batch's heartbeat stays fresh
/// while it reads, so a second instance wanting the object finds it busy. Before, the heartbeat
/// was refreshed only between objects: the second instance declared the batch abandoned and took
/// its objects, the first one's work was lost, and an object slower than the timeout could be
/// taken over again and again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_object_keeps_its_batch_alive() {
    let dir = tempfile::tempdir().unwrap();
    write_bucket(dir.path());
    let catalog = local_catalog(dir.path()).await;
    let open = |delay: Duration| {
        let (dir, catalog) = (dir.path().to_owned(), catalog.clone());
        async move {
            let raw = parse(CONFIG, false).unwrap();
            let mut config = FloeConfig::from_raw(raw, &dir).unwrap();
            config.ingest.claim_timeout_ms = 300;
            let mut p = Pipeline::builder(config)
                .catalog(catalog)
                .build()
                .await
                .unwrap();
            let mut store =
                Watched::new(floe_storage::LocalStore::new(dir.join("bucket"), "b").unwrap());
            store.delay = delay;
            p.stores = Arc::new(crate::sources::stores::SingleStore(Arc::new(store)));
            p
        }
    };
    let slow = open(Duration::from_millis(700)).await;
    let other = open(Duration::ZERO).await;
    let (first, second) = tokio::join!(slow.run_once(false), async {
        tokio::time::sleep(Duration::from_millis(500)).await;
        other.run_once(false).await
    });
    let (first, second) = (first.unwrap(), second.unwrap());
    let outcomes = |r: &crate::passes::RunReport| -> Vec<String> {
        r.batches
            .iter()
            .flat_map(|b| b.outcomes.iter().map(|o| format!("{o:?}")))
            .collect()
    };
    assert_eq!(
        outcomes(&first)[..2],
        ["Staged", "Staged"],
        "the slow batch staged: {:?}",
        outcomes(&first)
    );
    assert!(
        outcomes(&second).iter().any(|o| o == "Busy"),
        "{:?}",
        outcomes(&second)
    );
    slow.run_once(true).await.unwrap();
    assert_eq!(ids(&catalog).await, (1..=9).collect::<Vec<_>>());
}

/// One object whose read hangs (a stalled connection, a huge object) in a batch with others:
/// after `object-timeout-ms` it is given back for a later delivery and the rest of its batch
/// lands. Before, the batch waited on it for as long as it hung, and a deadline reached meanwhile
/// failed every message batched with it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hanging_object_is_given_back_and_the_rest_of_its_batch_lands() {
    let dir = tempfile::tempdir().unwrap();
    write_bucket(dir.path());
    let catalog = local_catalog(dir.path()).await;
    let raw = parse(CONFIG, false).unwrap();
    let mut config = FloeConfig::from_raw(raw, dir.path()).unwrap();
    config.ingest.object_timeout_ms = 300;
    let mut p = Pipeline::builder(config.clone())
        .catalog(catalog.clone())
        .build()
        .await
        .unwrap();
    let mut store =
        Watched::new(floe_storage::LocalStore::new(dir.path().join("bucket"), "b").unwrap());
    store.delay = Duration::from_secs(60);
    store.slow_key = Some("b.ndjson");
    p.stores = Arc::new(crate::sources::stores::SingleStore(Arc::new(store)));
    let run = tokio::time::timeout(Duration::from_secs(30), p.run_once(true))
        .await
        .expect("the pass does not wait for the hanging object")
        .unwrap();
    assert_eq!(ids(&catalog).await, [1, 2, 3, 7, 8, 9]);
    let failures = run.failures();
    assert!(
        failures
            .iter()
            .any(|f| f.contains("object-timeout-ms = 300")),
        "{failures:?}"
    );
    let p = Pipeline::builder(config)
        .catalog(catalog.clone())
        .build()
        .await
        .unwrap();
    p.run_once(true).await.unwrap();
    assert_eq!(ids(&catalog).await, (1..=9).collect::<Vec<_>>());
}

/// An object larger than `max-object-bytes` is set aside unread (dead-lettered, named with the
/// limit) and the rest of its batch lands.
#[tokio::test]
async fn an_object_over_the_size_limit_is_set_aside_unread() {
    let dir = tempfile::tempdir().unwrap();
    write_bucket(dir.path());
    let catalog = local_catalog(dir.path()).await;
    let raw = parse(CONFIG, false).unwrap();
    let mut config = FloeConfig::from_raw(raw, dir.path()).unwrap();
    config.ingest.max_object_bytes = 60;
    let mut p = Pipeline::builder(config)
        .catalog(catalog.clone())
        .build()
        .await
        .unwrap();
    let store =
        Watched::new(floe_storage::LocalStore::new(dir.path().join("bucket"), "b").unwrap());
    let read = store.read.clone();
    p.stores = Arc::new(crate::sources::stores::SingleStore(Arc::new(store)));
    let run = p.run_once(true).await.unwrap();
    assert_eq!(ids(&catalog).await, [1, 2, 3, 7, 8, 9]);
    assert_eq!(run.dead_letters(), 1, "{run:?}");
    let letters = read_tree(&dir.path().join("dead-letter"));
    assert!(letters.contains("max-object-bytes = 60"), "{letters}");
    let read = read.lock().unwrap().clone();
    assert!(!read.iter().any(|k| k.ends_with("b.ndjson")), "{read:?}");
}

/// Every file under `dir`, concatenated.
fn read_tree(dir: &Path) -> String {
    let mut out = String::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.push_str(&read_tree(&path));
        } else {
            out.push_str(&std::fs::read_to_string(&path).unwrap());
        }
    }
    out
}
