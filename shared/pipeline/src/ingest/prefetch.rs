//! Reading ahead: while one object of a batch is decoded and written, the bodies of the next
//! few small ones are already being fetched. A GET to OSS or S3 costs tens of milliseconds
//! before its first byte; a batch of small objects read one after the other pays that once per
//! object, read ahead it pays it about once per window.
//!
//! Only whole small objects of record routes are read ahead (a known size up to
//! [`MAX_OBJECT_BYTES`], not an append, not Parquet, which is read from a file). A fetch is the
//! same [`get_change`] the object's own read would make, so a superseded object fails the same
//! way; its answer waits, in memory, for its turn. Fetches still running when the batch stops
//! reading are cancelled (a local file's read, on a blocking thread, is not stopped once
//! started: it is short).
//!
//! Local files cost no wait, only the CPU that reads and decodes them: they are read in runs
//! of [`LOCAL_RUN`] consecutive objects, one blocking thread a run, one run a core. Handing
//! each file to a thread of its own wakes a thread per file, and that wake, not the reading,
//! was most of a small file's cost; more files at once than cores would only share the cores,
//! the file the writer waits for, first in line, decoded no sooner than the rest.
//!
//! Once the writer of an object's table is open, its schema is known and the fetch decodes the
//! object too (up to [`DECODE_AHEAD_BYTES`]): JSON parsing is most of a small object's cost,
//! and so it runs on the other core, several objects at once, while the writer encodes the
//! objects before. The batches and bad records wait, in order, for the object's turn, and are
//! used only if the writer's schema is still the one decoded to; any doubt (a decoding error,
//! an unknown format, another schema) leaves the object to be decoded in its turn, from the
//! bytes fetched.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use arrow_schema::SchemaRef;
use bytes::Bytes;
use floe_core::{Error, ObjectChange, Result};
use floe_decode::Names;
use floe_decode::decode::{Compression, Decoded, Format, detect, stream_decoder};
use floe_storage::{GetResult, ObjectMeta, ObjectStore};
use futures::StreamExt;
use tokio::task::JoinHandle;

use super::read::{get_change, get_change_blocking, object_format};
use crate::config::RouteConfig;

/// Objects larger than this are read as they stream, in their turn.
pub(crate) const MAX_OBJECT_BYTES: u64 = 4 << 20;
/// At most this many objects are fetched ahead at once...
const MAX_AHEAD: usize = 8;
/// ...holding at most this many bytes between them.
const MAX_AHEAD_BYTES: u64 = 16 << 20;
/// Local files are read this many to a run (see the module doc)...
const LOCAL_RUN: usize = 8;
/// ...and at most this many runs at once: one a core.
static LOCAL_RUNS: std::sync::LazyLock<usize> =
    std::sync::LazyLock::new(|| std::thread::available_parallelism().map_or(2, |n| n.get()));
/// Objects up to this size are decoded by their fetch (see the module doc).
pub(crate) const DECODE_AHEAD_BYTES: u64 = 1 << 20;

/// One object that may be read ahead.
pub(crate) struct Candidate {
    /// The change's index in the batch.
    pub(crate) idx: usize,
    pub(crate) store: Arc<dyn ObjectStore>,
    pub(crate) change: ObjectChange,
    /// The writer slot its rows go to (see [`Prefetch::decode_for`]).
    pub(crate) slot: String,
    /// The format its route declares, if any.
    pub(crate) declared: Option<Format>,
}

impl Candidate {
    /// The bytes its fetch holds (a candidate's size is known; see [`worth_reading_ahead`]).
    fn size(&self) -> u64 {
        self.change.size.unwrap_or(MAX_OBJECT_BYTES)
    }

    /// Whether it is a local file (read in runs, see the module doc).
    fn is_local(&self) -> bool {
        self.store.local_path(&self.change.key).is_some()
    }
}

/// Whether the object `change` names is read ahead under `route` (see the module doc).
pub(crate) fn worth_reading_ahead(
    change: &ObjectChange,
    route: &RouteConfig,
    append: bool,
) -> bool {
    !append
        && change.size.is_some_and(|s| s <= MAX_OBJECT_BYTES)
        && !matches!(
            object_format(change, route, None, None),
            Ok((Format::Parquet, _))
        )
}

/// What a fetch started ahead gives.
pub(crate) struct Fetched {
    /// The object as [`get_change`] answers it, its body read to the end.
    pub(crate) got: GetResult,
    /// Its records, when it was decoded ahead.
    pub(crate) decoded: Option<DecodedAhead>,
}

/// An object's records decoded by its fetch: the whole object, without error.
pub(crate) struct DecodedAhead {
    /// The schema decoded to, and how names found its columns.
    schema: SchemaRef,
    names: Names,
    format: Format,
    compression: Compression,
    /// What the decoder gave after each chunk and at the end, in order.
    pub(crate) outputs: Vec<Decoded>,
    /// Bytes decoded.
    pub(crate) bytes: u64,
}

impl DecodedAhead {
    /// Whether these are the records the object's own read would decode: same format and
    /// compression, same target schema and name matching.
    pub(crate) fn fits(
        &self,
        format: &Format,
        compression: Compression,
        schema: &SchemaRef,
        names: Names,
    ) -> bool {
        self.names == names
            && self.format == *format
            && self.compression == compression
            && (Arc::ptr_eq(&self.schema, schema) || self.schema == *schema)
    }
}

/// The schema a slot's objects are decoded to, and the rows per batch.
#[derive(Clone)]
struct DecodeAs {
    schema: SchemaRef,
    batch_rows: usize,
    names: Names,
}

/// A fetch started ahead: a task of its own, or a place in a run of local files. Dropping it
/// cancels it (a file of a run not yet read is skipped; one being read is not stopped: it is
/// short).
pub(crate) struct Fetch(Ahead);

enum Ahead {
    Task(JoinHandle<Result<Fetched>>),
    InRun(tokio::sync::oneshot::Receiver<Result<Fetched>>),
}

impl Drop for Fetch {
    fn drop(&mut self) {
        if let Ahead::Task(task) = &self.0 {
            task.abort();
        }
    }
}

/// The read-ahead window over a batch's objects, taken in the order given.
#[derive(Default)]
pub(crate) struct Prefetch {
    waiting: VecDeque<Candidate>,
    running: VecDeque<(usize, u64, Fetch)>,
    /// Per writer slot, how the fetches started from now on decode its objects.
    decode: HashMap<String, DecodeAs>,
}

impl Prefetch {
    /// A window over `candidates` (in the order they will be read); nothing starts until the
    /// first [`Prefetch::take`].
    pub(crate) fn new(candidates: Vec<Candidate>) -> Self {
        Prefetch {
            waiting: candidates.into(),
            running: VecDeque::new(),
            decode: HashMap::new(),
        }
    }

    /// The fetches started from now on of objects bound for `slot` decode them to `schema`, in
    /// batches of up to `batch_rows` rows, the records' names matched by `names`. Only for a writer whose schema stays as it is while
    /// the batch reads (no schema evolution): a record decoded ahead to an older schema would
    /// be decoded again in its turn.
    pub(crate) fn decode_for(
        &mut self,
        slot: &str,
        schema: &SchemaRef,
        batch_rows: usize,
        names: Names,
    ) {
        if (self.decode.get(slot)).is_some_and(|d| {
            Arc::ptr_eq(&d.schema, schema) && d.batch_rows == batch_rows && d.names == names
        }) {
            return;
        }
        self.decode.insert(
            slot.to_owned(),
            DecodeAs {
                schema: schema.clone(),
                batch_rows,
                names,
            },
        );
    }

    /// The fetch of change `idx`, if it was read ahead; the objects before it that were not
    /// asked for (set aside unread) are dropped, and the window moves on.
    pub(crate) fn take(&mut self, idx: usize) -> Option<Fetch> {
        while self.running.front().is_some_and(|(i, _, _)| *i < idx) {
            self.running.pop_front();
        }
        while self.waiting.front().is_some_and(|c| c.idx < idx) {
            self.waiting.pop_front();
        }
        // An empty window starts its first fetch whatever the size: this one, if it is next.
        self.fill();
        let mine = match self.running.front() {
            Some((i, _, _)) if *i == idx => self.running.pop_front().map(|(_, _, f)| f),
            _ => None,
        };
        self.fill();
        mine
    }

    /// The bytes the running fetches hold.
    fn held(&self) -> u64 {
        self.running.iter().map(|(_, s, _)| s).sum()
    }

    /// Start fetches until the window is full. An empty window starts one whatever its size.
    fn fill(&mut self) {
        loop {
            let Some(next) = self.waiting.front() else {
                return;
            };
            let over = self.held() + next.size() > MAX_AHEAD_BYTES;
            if !self.running.is_empty() {
                // A run starts only when it can be whole (or the last): runs of one, each a
                // thread woken, would be no better than a thread a file.
                let room = if next.is_local() {
                    let free = (LOCAL_RUN * *LOCAL_RUNS).saturating_sub(self.running.len());
                    free >= LOCAL_RUN.min(self.waiting.len())
                } else {
                    self.running.len() < MAX_AHEAD
                };
                if !room || over {
                    return;
                }
            }
            if next.is_local() {
                self.start_run();
            } else {
                self.start_one();
            }
        }
    }

    /// How the fetch of `c` decodes it.
    fn plan(&self, c: &Candidate) -> Option<DecodeAs> {
        (self.decode.get(&c.slot).cloned()).filter(|_| c.size() <= DECODE_AHEAD_BYTES)
    }

    /// Fetch the next candidate in a task of its own.
    fn start_one(&mut self) {
        let Some(c) = self.waiting.pop_front() else {
            return;
        };
        let (idx, size, plan) = (c.idx, c.size(), self.plan(&c));
        let fetch = tokio::spawn(async move {
            let (meta, chunks) = fetch_whole(&c.store, &c.change).await?;
            Ok(fetched_as(&c, meta, chunks, plan))
        });
        self.running
            .push_back((idx, size, Fetch(Ahead::Task(fetch))));
    }

    /// Read the next local files, up to [`LOCAL_RUN`] of them and within the window's bytes,
    /// one after the other on a blocking thread (see the module doc).
    fn start_run(&mut self) {
        let mut run = Vec::with_capacity(LOCAL_RUN);
        let mut held = self.held();
        while let Some(c) = self.waiting.front() {
            let first = run.is_empty() && self.running.is_empty();
            if run.len() == LOCAL_RUN
                || !c.is_local()
                || (!first && held + c.size() > MAX_AHEAD_BYTES)
            {
                break;
            }
            let Some(c) = self.waiting.pop_front() else {
                break;
            };
            let (tx, rx) = tokio::sync::oneshot::channel();
            held += c.size();
            self.running
                .push_back((c.idx, c.size(), Fetch(Ahead::InRun(rx))));
            let plan = self.plan(&c);
            run.push((c, plan, tx));
        }
        tokio::task::spawn_blocking(move || {
            for (c, plan, tx) in run {
                if tx.is_closed() {
                    continue;
                }
                let _ = tx.send(read_local(&c, plan));
            }
        });
    }
}

/// A local file read (and decoded) on the calling, blocking thread.
fn read_local(c: &Candidate, plan: Option<DecodeAs>) -> Result<Fetched> {
    let (meta, chunks) = match get_change_blocking(&c.store, &c.change) {
        Some(got) => {
            let (meta, chunks) = got?;
            (meta, chunks.into_iter().map(Ok).collect())
        }
        None => tokio::runtime::Handle::current().block_on(fetch_whole(&c.store, &c.change))?,
    };
    Ok(fetched_as(c, meta, chunks, plan))
}

/// The object as [`get_change`] answers it, its body read to the end (held as the chunks
/// came, no copy).
async fn fetch_whole(
    store: &Arc<dyn ObjectStore>,
    change: &ObjectChange,
) -> Result<(ObjectMeta, Vec<Result<Bytes>>)> {
    let got = get_change(store, change).await?;
    let chunks: Vec<Result<Bytes>> = got.body.collect().await;
    Ok((got.meta, chunks))
}

/// What the fetch of `c` gives: the object's `meta` and `chunks`, decoded as `plan` says.
fn fetched_as(
    c: &Candidate,
    meta: ObjectMeta,
    chunks: Vec<Result<Bytes>>,
    plan: Option<DecodeAs>,
) -> Fetched {
    let decoded = plan.and_then(|p| decode_ahead(c, &meta, &chunks, p));
    let body: floe_storage::ByteStream = Box::pin(futures::stream::iter(chunks));
    Fetched {
        got: GetResult { meta, body },
        decoded,
    }
}

/// Decode a fetched object as `plan` says; `None` when anything is in doubt (the object's own
/// read then decodes it, and reports what went wrong).
fn decode_ahead(
    c: &Candidate,
    meta: &ObjectMeta,
    chunks: &[Result<Bytes>],
    plan: DecodeAs,
) -> Option<DecodedAhead> {
    let (format, compression) = detect(
        &c.change.key,
        meta.content_type.as_deref(),
        meta.content_encoding.as_deref(),
        c.declared.as_ref(),
    )?;
    if format == Format::Parquet {
        return None;
    }
    let schema = plan.schema.clone();
    let mut dec = stream_decoder(&format, compression, schema, plan.batch_rows, plan.names).ok()?;
    let mut outputs = Vec::with_capacity(chunks.len() + 1);
    let mut bytes = 0;
    for chunk in chunks {
        let chunk = chunk.as_ref().ok()?;
        bytes += chunk.len() as u64;
        dec.push(chunk).ok()?;
        outputs.push(dec.take());
    }
    dec.finish().ok()?;
    outputs.push(dec.take());
    Some(DecodedAhead {
        schema: plan.schema,
        names: plan.names,
        format,
        compression,
        outputs,
        bytes,
    })
}

/// The answer of a fetch started ahead. A wait given up (the object's read timed out, the
/// batch stopped) cancels the fetch (see [`Fetch`]).
pub(crate) async fn fetched(mut fetch: Fetch) -> Result<Fetched> {
    let failed = |e: String| Error::unexpected(format!("object read-ahead task failed: {e}"));
    match &mut fetch.0 {
        Ahead::Task(task) => task.await.map_err(|e| failed(e.to_string()))?,
        Ahead::InRun(rx) => rx.await.map_err(|e| failed(e.to_string()))?,
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use async_trait::async_trait;
    use floe_core::Provider;
    use floe_storage::{ListPage, LocalStore, ObjectMeta, PutMode};
    use tokio::sync::Semaphore;

    use super::*;

    /// A local store whose GETs wait at a gate the test opens, counting those started.
    #[derive(Debug)]
    struct Gated {
        inner: LocalStore,
        started: AtomicUsize,
        gate: Semaphore,
    }

    #[async_trait]
    impl ObjectStore for Gated {
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
            self.started.fetch_add(1, Ordering::SeqCst);
            let _pass = self
                .gate
                .acquire()
                .await
                .map_err(|_| Error::unexpected("gate"))?;
            self.inner.get(key).await
        }
        async fn get_range(&self, key: &str, start: u64, end: u64) -> Result<Bytes> {
            self.inner.get_range(key, start, end).await
        }
        async fn put(&self, key: &str, body: Bytes, mode: PutMode) -> Result<Option<String>> {
            self.inner.put(key, body, mode).await
        }
        async fn delete(&self, key: &str) -> Result<()> {
            self.inner.delete(key).await
        }
        async fn delete_if_match(&self, key: &str, etag: &str) -> Result<bool> {
            self.inner.delete_if_match(key, etag).await
        }
    }

    /// `n` objects of `size` bytes (their bytes: the index, repeated), as candidates 0..n.
    fn objects(dir: &std::path::Path, n: usize, size: usize) -> (Arc<Gated>, Vec<Candidate>) {
        let store = Arc::new(Gated {
            inner: LocalStore::new(dir, "b").unwrap(),
            started: AtomicUsize::new(0),
            gate: Semaphore::new(0),
        });
        let candidates = (0..n)
            .map(|i| {
                let key = format!("o{i:02}");
                std::fs::write(dir.join(&key), vec![i as u8; size]).unwrap();
                Candidate {
                    idx: i,
                    store: store.clone(),
                    change: ObjectChange {
                        size: Some(size as u64),
                        ..ObjectChange::created(Provider::Local, "b", key)
                    },
                    slot: "t".into(),
                    declared: Some(Format::Ndjson),
                }
            })
            .collect();
        (store, candidates)
    }

    async fn started_settles(store: &Gated) -> usize {
        let mut last = usize::MAX;
        loop {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            let now = store.started.load(Ordering::SeqCst);
            if now == last {
                return now;
            }
            last = now;
        }
    }

    async fn body_of(fetch: Fetch) -> Vec<u8> {
        let got = fetched(fetch).await.unwrap().got;
        floe_storage::collect_body(got.body, usize::MAX)
            .await
            .unwrap()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_window_reads_ahead_in_order_and_drops_the_objects_passed_over() {
        let dir = tempfile::tempdir().unwrap();
        let (store, candidates) = objects(dir.path(), 20, 1000);
        let mut window = Prefetch::new(candidates);
        assert_eq!(
            started_settles(&store).await,
            0,
            "nothing before the first take"
        );

        let first = window.take(0).expect("object 0 is read ahead");
        assert_eq!(
            started_settles(&store).await,
            1 + MAX_AHEAD,
            "the object asked for and a full window behind it"
        );
        store.gate.add_permits(100);
        assert_eq!(body_of(first).await, vec![0u8; 1000]);

        // 1 and 2 were set aside unread: 3 is next, and the window moves past it.
        let third = window.take(3).expect("object 3 is read ahead");
        assert_eq!(body_of(third).await, vec![3u8; 1000]);
        assert!(
            window.take(2).is_none(),
            "a dropped object is not handed out"
        );
        for i in 4..20 {
            let fetch = window.take(i).expect("every later object is read ahead");
            assert_eq!(body_of(fetch).await, vec![i as u8; 1000]);
        }
        assert!(window.take(20).is_none());
        assert_eq!(
            store.started.load(Ordering::SeqCst),
            20,
            "each object fetched once"
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn local_files_are_read_in_runs_each_decoded_in_its_turn() {
        let dir = tempfile::tempdir().unwrap();
        let store: Arc<dyn ObjectStore> = Arc::new(LocalStore::new(dir.path(), "b").unwrap());
        let n = 3 * LOCAL_RUN * *LOCAL_RUNS + 3;
        let candidates: Vec<Candidate> = (0..n)
            .map(|i| {
                let key = format!("o{i:03}.ndjson");
                std::fs::write(dir.path().join(&key), format!("{{\"id\":{i}}}\n")).unwrap();
                Candidate {
                    idx: i,
                    store: store.clone(),
                    change: ObjectChange {
                        size: Some(10),
                        ..ObjectChange::created(Provider::Local, "b", key)
                    },
                    slot: "t".into(),
                    declared: None,
                }
            })
            .collect();
        let schema = Arc::new(arrow_schema::Schema::new(vec![arrow_schema::Field::new(
            "id",
            arrow_schema::DataType::Int64,
            true,
        )]));
        let mut window = Prefetch::new(candidates);
        window.decode_for("t", &schema, 100, Names::default());
        let first = window.take(0).unwrap();
        assert_eq!(
            window.running.len() + 1,
            LOCAL_RUN * *LOCAL_RUNS,
            "a run a core, whole runs only"
        );
        let mut seen = vec![fetched(first).await.unwrap()];
        // Objects passed over (1 and 2) are dropped unread; the rest come in order, each
        // decoded to its own rows.
        for i in 3..n {
            let fetch = window.take(i).expect("every later object is read ahead");
            seen.push(fetched(fetch).await.unwrap());
            assert!(
                window.running.len() <= LOCAL_RUN * *LOCAL_RUNS,
                "never more than a run a core"
            );
        }
        assert!(window.take(n).is_none());
        let ids: Vec<i64> = seen
            .iter()
            .map(|f| {
                let d = f.decoded.as_ref().expect("decoded by its fetch");
                let rows: Vec<_> = d.outputs.iter().flat_map(|o| &o.batches).collect();
                let ids = rows[0].column(0).as_any();
                ids.downcast_ref::<arrow_array::Int64Array>()
                    .unwrap()
                    .value(0)
            })
            .collect();
        let want: Vec<i64> = std::iter::once(0).chain(3..n as i64).collect();
        assert_eq!(ids, want);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_window_holds_no_more_than_its_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let (store, candidates) = objects(dir.path(), 10, 3 << 20);
        let mut window = Prefetch::new(candidates);
        let _first = window.take(0).unwrap();
        // 3 MiB each: 5 of them fit in 16 MiB, the sixth would not.
        assert_eq!(started_settles(&store).await, 1 + 5);
        drop(window);
        store.gate.add_permits(100);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_wait_given_up_cancels_its_fetch() {
        let dir = tempfile::tempdir().unwrap();
        let (store, candidates) = objects(dir.path(), 1, 10);
        let mut window = Prefetch::new(candidates);
        let fetch = window.take(0).unwrap();
        let Ahead::Task(task) = &fetch.0 else {
            panic!("a store of no local files: a task a fetch")
        };
        let probe = task.abort_handle();
        let waited =
            tokio::time::timeout(std::time::Duration::from_millis(20), fetched(fetch)).await;
        assert!(waited.is_err(), "the gate is shut: the wait times out");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        assert!(
            probe.is_finished(),
            "the fetch was cancelled, not left running"
        );
        store.gate.add_permits(1);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_object_not_read_ahead_is_left_to_its_own_read() {
        let dir = tempfile::tempdir().unwrap();
        let (store, mut candidates) = objects(dir.path(), 4, 10);
        candidates.remove(1);
        let mut window = Prefetch::new(candidates);
        store.gate.add_permits(100);
        assert!(window.take(0).is_some());
        assert!(window.take(1).is_none(), "not a candidate");
        assert_eq!(body_of(window.take(2).unwrap()).await, vec![2u8; 10]);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn fetches_decode_ahead_once_their_slot_has_a_schema() {
        let dir = tempfile::tempdir().unwrap();
        let (store, candidates) = objects(dir.path(), 12, 10);
        for c in &candidates {
            let i = c.idx;
            std::fs::write(dir.path().join(&c.change.key), format!("{{\"id\":{i}}}\n")).unwrap();
        }
        store.gate.add_permits(100);
        let schema = Arc::new(arrow_schema::Schema::new(vec![arrow_schema::Field::new(
            "id",
            arrow_schema::DataType::Int64,
            true,
        )]));
        let mut window = Prefetch::new(candidates);
        let first = fetched(window.take(0).unwrap()).await.unwrap();
        assert!(first.decoded.is_none(), "no schema yet: read only");

        // Fetches started from now on decode; those already running do not.
        window.decode_for("t", &schema, 100, Names::default());
        let mut decoded = Vec::new();
        for i in 1..12 {
            let f = fetched(window.take(i).unwrap()).await.unwrap();
            decoded.push(f.decoded.map(|d| {
                assert!(d.fits(
                    &Format::Ndjson,
                    Compression::None,
                    &schema,
                    Names::default()
                ));
                assert!(!d.fits(&Format::Ndjson, Compression::None, &schema, Names::Exact));
                let other = Arc::new(arrow_schema::Schema::new(vec![arrow_schema::Field::new(
                    "id",
                    arrow_schema::DataType::Utf8,
                    true,
                )]));
                assert!(!d.fits(&Format::Ndjson, Compression::None, &other, Names::default()));
                assert!(!d.fits(&Format::Json, Compression::None, &schema, Names::default()));
                let rows: Vec<_> = d.outputs.iter().flat_map(|o| &o.batches).collect();
                assert_eq!(rows.len(), 1);
                let ids = rows[0].column(0).as_any();
                let ids = ids.downcast_ref::<arrow_array::Int64Array>().unwrap();
                assert_eq!(ids.value(0), i as i64);
                d.bytes
            }));
        }
        // 1..=MAX_AHEAD started with the first take, before the schema was known.
        assert!(decoded[..MAX_AHEAD].iter().all(Option::is_none));
        assert!(decoded[MAX_AHEAD..].iter().all(Option::is_some));
    }
}
