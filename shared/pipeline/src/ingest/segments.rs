//! NDJSON objects decoded on several threads at once.
//!
//! Decoding JSON takes more CPU than encoding the same rows as Parquet, so with one decoder the
//! writer waits for it. The object is cut at line ends into segments
//! ([`floe_decode::decode::LineCutter`]), the segments are decoded by a few threads of the
//! object's own, and their rows are handed to the writer in the object's order.
//!
//! ```text
//!  body ─► cutter ─┬─► jobs ─► decoding threads (one decoder each) ─► a reply per segment ─┐
//!                  └─► the replies' receivers, in order (at most `DEPTH`) ─► writer ◄──────┘
//! ```
//!
//! The writer awaits each segment's reply itself, in the object's order: a decoded segment
//! wakes the writer straight from its decoding thread, with no task in between to be scheduled
//! first (on two busy cores every hand-off is a wait). A segment the writer has not taken yet
//! holds its decoded rows, so the segments between the cutter and the writer are bounded; the
//! threads are a fixed few (each thread's allocations stay in its own allocator arena, so a
//! pool that grew to many threads would hold more memory).

use std::sync::{Arc, LazyLock, Mutex, mpsc};

use arrow_schema::SchemaRef;
use floe_core::{Error, Result};
use floe_decode::Names;
use floe_decode::decode::{DecodedSegment, LineCutter, Segment, SegmentDecoder};
use futures::StreamExt;
use tokio::sync::oneshot;

use super::read::{Step, unreadable};

/// Segments waiting for or under decoding, or decoded and waiting for the writer, per decoding
/// thread; enough that no thread waits for the writer to take the oldest.
const DEPTH_PER_THREAD: usize = 2;

/// How much lower the decoding threads' scheduling priority is than the rest of the process's
/// (nice steps). The writer is the one thread of an object's pipeline whose work cannot be
/// shared out: on two cores, a decoding thread woken with a segment preempted it, and every
/// preemption is writer time lost. Niced, the decoders take what the writer leaves; they are
/// several, so they still fill the cores.
const DECODE_NICENESS: i32 = 5;

/// Lower the calling thread's priority by [`DECODE_NICENESS`] (on Linux a thread id names one
/// thread; elsewhere it stays as it is). Best effort: a failure leaves the thread as it was.
/// Not undone: an unprivileged thread cannot raise its priority again, so only the object's
/// own decoding threads, which do nothing else and end with it, call it.
fn lower_priority() {
    #[cfg(target_os = "linux")]
    {
        use rustix::process::{getpriority_process, setpriority_process};
        let me = Some(rustix::thread::gettid());
        if let Ok(now) = getpriority_process(me) {
            let _ = setpriority_process(me, now.saturating_add(DECODE_NICENESS).min(19));
        }
    }
}

/// How the segments of one object decode: its table's schema, rows per batch and name matching.
pub(super) struct Decoders {
    schema: SchemaRef,
    batch_rows: usize,
    names: Names,
}

impl Decoders {
    pub(super) fn new(schema: SchemaRef, batch_rows: usize, names: Names) -> Self {
        Decoders {
            schema,
            batch_rows,
            names,
        }
    }
}

type Reply = oneshot::Sender<Result<DecodedSegment>>;

/// Where a segment's decoded rows arrive (what the writer awaits).
pub(super) type Answer = oneshot::Receiver<Result<DecodedSegment>>;

/// The decoding threads of one object. Dropping it closes their queue: each ends after its
/// segment (they are not waited for: a segment is a few milliseconds of work, and waiting
/// would block the runtime).
struct Pool {
    jobs: mpsc::Sender<(Segment, Reply)>,
}

impl Pool {
    /// `width` threads, each with its own decoder.
    fn start(width: usize, decoders: &Decoders) -> Result<Pool> {
        let (jobs, queue) = mpsc::channel::<(Segment, Reply)>();
        let queue = Arc::new(Mutex::new(queue));
        for _ in 0..width {
            let mut decoder =
                SegmentDecoder::new(decoders.schema.clone(), decoders.batch_rows, decoders.names)
                    .map_err(unreadable)?;
            let queue = queue.clone();
            std::thread::Builder::new()
                .name("floe-decode".into())
                .spawn(move || {
                    lower_priority();
                    loop {
                        let job = match queue.lock() {
                            Ok(q) => q.recv(),
                            Err(_) => return,
                        };
                        let Ok((segment, reply)) = job else {
                            return;
                        };
                        let _ = reply.send(decoder.decode(segment).map_err(unreadable));
                    }
                })
                .map_err(|e| {
                    Error::unexpected("failed to start a decoding thread").with_source(e)
                })?;
        }
        Ok(Pool { jobs })
    }

    /// Queue a segment; its decoded rows arrive on the receiver.
    fn submit(&self, segment: Segment) -> Result<Answer> {
        let (reply, answer) = oneshot::channel();
        self.jobs
            .send((segment, reply))
            .map_err(|_| Error::unexpected("the decoding threads stopped"))?;
        Ok(answer)
    }
}

/// How many threads decode one object: the cores there are, at least two (one core still
/// overlaps the reading and writing with decoding) and at most four. Asked once a process:
/// on Linux the answer reads the cgroup's CPU quota from files.
fn width() -> usize {
    static WIDTH: LazyLock<usize> =
        LazyLock::new(|| std::thread::available_parallelism().map_or(2, |n| n.get().clamp(2, 4)));
    *WIDTH
}

/// How many segments may be cut and not yet taken by the writer: enough that no decoding
/// thread waits for the writer to take the oldest.
pub(super) fn depth() -> usize {
    width() * DEPTH_PER_THREAD
}

/// Read `body`, cut it into segments and decode them on the object's threads, sending the
/// writer each segment's [`Answer`] in the object's order (`tx` holds at most [`depth`]);
/// stops when the writer stops listening.
pub(super) async fn decode(
    mut body: floe_storage::ByteStream,
    mut cutter: LineCutter,
    decoders: Decoders,
    tx: tokio::sync::mpsc::Sender<Step>,
) {
    let pool = match Pool::start(width(), &decoders) {
        Ok(p) => p,
        Err(e) => {
            let _ = tx.send(Step::Failed(e)).await;
            return;
        }
    };
    let mut segments = Vec::new();
    let mut bytes = 0u64;
    loop {
        let ended = match body.next().await {
            Some(Ok(chunk)) => {
                bytes += chunk.len() as u64;
                cutter
                    .push(chunk, &mut segments)
                    .map_err(unreadable)
                    .map(|()| false)
            }
            Some(Err(e)) => Err(e),
            None => cutter
                .finish(&mut segments)
                .map_err(unreadable)
                .map(|()| true),
        };
        let ended = match ended {
            Ok(ended) => ended,
            Err(e) => {
                let _ = tx.send(Step::Failed(e)).await;
                return;
            }
        };
        for segment in segments.drain(..) {
            let step = match pool.submit(segment) {
                Ok(answer) => Step::Segment(answer),
                Err(e) => Step::Failed(e),
            };
            let failed = matches!(step, Step::Failed(_));
            if tx.send(step).await.is_err() || failed {
                return;
            }
        }
        if ended {
            let _ = tx.send(Step::Read(bytes)).await;
            return;
        }
        // What was read so far, for progress: without waiting for room in the channel (a
        // full channel has rows for the writer, which says more).
        let _ = tx.try_send(Step::Read(bytes));
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use rustix::process::getpriority_process;

    #[test]
    fn a_decoding_thread_runs_below_the_rest_and_only_it() {
        let spawner = Some(rustix::thread::gettid());
        let before = getpriority_process(spawner).unwrap();
        let (mine, theirs) = std::thread::spawn(move || {
            super::lower_priority();
            let me = Some(rustix::thread::gettid());
            (
                getpriority_process(me).unwrap(),
                getpriority_process(spawner).unwrap(),
            )
        })
        .join()
        .unwrap();
        assert_eq!(mine, (before + super::DECODE_NICENESS).min(19));
        assert_eq!(
            theirs, before,
            "the thread that started it keeps its priority"
        );
    }
}
