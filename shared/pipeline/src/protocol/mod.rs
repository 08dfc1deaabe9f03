//! The exactly-once protocol, as plain functions and types over values: no IO, no tokio.
//!
//! The drivers (ingest, commit, the sources) read the checkpoint table, ask these functions what
//! to do, and write what they answer with a compare-and-set. Every decision that makes a row land
//! once lives here, so it can be tested (and simulated) without a server:
//!
//! - [`records`]: the checkpoint table's keys and the records under them.
//! - [`claim`]: what the recorded state of an object says about a change of it.
//! - [`batch`]: an ingest batch's states, heartbeats, and how a claim holder is judged.
//! - [`commit`]: which staged batches a committer takes and when, and how batches are marked.
//! - [`lease`]: one committer per target.
//! - [`ack`]: what became of a change, and when its message may be acknowledged.
//!
//! State lives in the checkpoint table (see [`records`] for the layout); every write there is a
//! compare-and-set, so any number of ingest and commit instances may run at once. Data files are
//! written once, straight into each table's data folder; only their commit makes them visible.
//! Every target of a batch commits the same files: Iceberg appends them, MaxCompute uploads
//! their rows (`crate::maxcompute`); a route whose only target is MaxCompute stages under the
//! staging location, into a table kept in the checkpoint table (`crate::targets::staging`).
//!
//! ```text
//!  INGEST (any number at once)                         checkpoint table
//!  ─────────────────────────────────────────────────   ──────────────────────────────────────
//!  route each change ── no route / removal in ──────►  obj/…  = ignored
//!        │              records mode
//!  open batch B ────────────────────────────────────►  batch/B = running (owner, heartbeat)
//!        │  ✗1                                             ▲ heartbeat while reading
//!  claim each object ───────────────────────────────►  obj/…  : absent | older version
//!        │  ✗2   same version staged → duplicate             → claimed by B
//!        │       claimed by live batch → busy (retry later)
//!        │       claimed by dead batch → batch/X := abandoned, take it
//!  read objects → Arrow → Parquet data files (tables created on first use)
//!        │  ✗3   bad records → dead-letter writer; object that must be retried or is rejected
//!        │       → its claim is given back and the batch rewrites without it
//!  flush dead letters  ✗4
//!  stage: batch/B running → staged (+ files per target)   ◄── ONE compare-and-set; fails if
//!        │  ✗5                                              another instance abandoned B
//!  mark objects staged (best effort) ────────────────►  obj/…  = staged by B
//!        │  ✗6
//!  acknowledge the messages
//!
//!  COMMIT (one per target, under lease/T)
//!  ─────────────────────────────────────────────────
//!  take lease/T (TTL; a dead local holder is replaced) ─► lease/T
//!        │  ✗7
//!  finish every commit/T/C left by an earlier committer (below, from its state)
//!  choose staged batches not committed for T (when due: interval, max files, max bytes)
//!  write commit/T/C = pending [batches] ─────────────►  commit/T/C = pending
//!        │  ✗8
//!  ICEBERG: append all their files in one snapshot, summary floe.commit-id = C
//!        │  ✗9   before every retry, the table history is searched for C
//!  MAXCOMPUTE (module maxcompute): the same staged files, uploaded
//!        save modes, once per table ────────────────────►  setup/T (SQL instance, then done)
//!        │  ✗M1
//!        create a tunnel session ───────────────────────►  commit/T/C.session = {id}
//!        │  ✗M2
//!        one block per row group (ids by position) / upsert rows; bad rows → on-error
//!        ─────────────────────────────────────────────────►  session.blocks, commit_requested
//!        │  ✗M3
//!        commit the session
//!        │  ✗M4
//!  commit/T/C := done (snapshot id) ─────────────────►  commit/T/C = done
//!        │  ✗10
//!  each batch: committed[T] = C; when every target has it:
//!        done/B (TTL) and delete batch/B  ────────────►  done/B
//!        │  ✗11
//!  delete commit/T/C, release lease/T
//! ```
//!
//! What recovery does after a crash at each point (the fault hook names them; tests crash at
//! each one and check every row lands exactly once):
//!
//! | crash | left behind | recovery |
//! |---|---|---|
//! | ✗1 `ingest.after-batch-open` | batch/B running, no claims | B goes stale; nothing refers to it |
//! | ✗2 `ingest.after-claim` | claims by a running B | a redelivery (or rescan) finds B dead (stale heartbeat, or its local process gone), marks it abandoned and takes the objects |
//! | ✗3 `ingest.after-write` | data files nobody references | as ✗2; the files stay invisible (removed by table maintenance) |
//! | ✗4 `ingest.after-dead-letter` | dead letters of a batch that will not stage | as ✗2; the retry writes its own (duplicates only among the dead letters, named by batch) |
//! | ✗5 `ingest.after-stage` | batch/B staged, objects still claimed by B | a redelivery sees B staged: duplicate; the committer commits B |
//! | ✗6 `ingest.after-mark` | messages not acknowledged | redelivery: duplicates, skipped |
//! | ✗7 `commit.after-lease` | a lease held by a dead process | taken over when its TTL ends, at once by a process on the same host |
//! | ✗8 `commit.after-record` | commit/T/C pending, table untouched | the next committer finds C pending, does not find C in the history, appends the same batches under C |
//! | ✗8a `commit.after-replaced-rows` | replacing routes: position delete files written for the rows the commit replaces, table untouched | as ✗8: the deletes are worked out again from the same `rows/` records (unchanged until the commit is in) and written anew; the first ones stay unreferenced |
//! | ✗9a `commit.after-batch-snapshot` | row changes: the snapshots of the commit's first batches exist (one per batch, under `C.<n>`), commit/T/C pending | the next committer finds C not in the table, makes the batches' snapshots again: those already made are found by their ids and batches and left, the rest are made |
//! | ✗9 `commit.after-append` | the snapshot exists, commit/T/C pending | the next committer finds C in the table history and does not append again |
//! | ✗M1 `commit.mc.after-save-modes` | save modes applied, `DROP_DATA`'s / `custom_sql`'s SQL instance recorded, setup/T not done | the next committer waits for the recorded instance instead of submitting the statement again, then marks setup/T done; no session has started, so nothing landed can be dropped |
//! | ✗M2 `commit.mc.after-session` | an open session with no blocks, its id in commit/T/C | the session is reloaded and the blocks it lacks are written (an expired one is replaced by a new session) |
//! | ✗M3 `commit.mc.after-blocks` | every block on the server, `commit_requested` | the session is reloaded: open → committed (upsert: without sending its rows again); expired → redone with a new session; blocks keep their ids, dead letters their names |
//! | ✗M4 `commit.mc.after-commit` | the session committed, commit/T/C pending | the reload finds it committed: nothing is sent again |
//! | ✗10 `commit.after-done` | commit/T/C done, batches unmarked | the next committer marks the batches (they are not chosen again while C exists) |
//! | ✗10a `commit.after-settle` | replacing routes: `rows/` records say what the table holds after C, commit/T/C done, batches unmarked | as ✗10; settling again changes no record (a crash within it leaves some records updated: settling again updates the rest) |
//! | ✗11 `commit.after-batches` | some batches marked | as ✗10 for the rest |
//!
//! MaxCompute never sees a file twice: a block id is the position of its row group among the
//! commit's files, so a block rewritten after a crash replaces the one the server has; the
//! session id is in the commit record before anything is written, and only its state (reloaded)
//! decides what recovery does.
//!
//! An object is identified by bucket, key and version (eTag, version id): the same version is
//! landed once however often it is delivered; a newer version lands as new rows (and, on a
//! replacing route, deletes the rows of the version before: see [`replace`]); an older one
//! arriving late (S3 sequencer, else event time) is skipped.

pub mod ack;
pub mod batch;
pub mod claim;
pub mod commit;
pub mod lease;
pub mod records;
pub mod replace;

pub use ack::{Ack, Outcome};
pub use claim::Decision;
