//! A deterministic simulation of floe's exactly-once protocol.
//!
//! Several ingest instances, several committers, table maintenance and a writer run as futures
//! under one seeded scheduler ([`exec`]): between any two calls to a service the scheduler may
//! run another actor, move the simulated clock, crash the actor (its future is dropped; it
//! restarts later as a new process), or stall it past its claim timeout or its lease. Every
//! call may fail before it applies or lose its answer after; table commits also meet other
//! writers (409), and snapshot management outside floe expires snapshots. The writer puts,
//! overwrites and removes objects while they are being landed, and its events may arrive twice
//! or late.
//!
//! Of the two tables one appends every version it lands (`on-change = append`) and one
//! replaces an object's rows when it changes (`on-change = replace`): a commit to it deletes
//! the rows of the version it replaces by position, in the snapshot that adds the new rows, and
//! records where each object's rows are (`rows/` records). Maintenance (`floe maintain`)
//! compacts both under the commit lease, moving the `rows/` records of the files it rewrites,
//! expires their snapshots and removes orphan files.
//!
//! The actors ([`ingest`], [`commit`], [`maintain`]) make the calls the real drivers make, in
//! their order, and take every decision from the kernel, `floe_pipeline::protocol` (claims,
//! batch states, the holder and lease rules, the commit plan, marking, the rows a commit
//! replaces and what it records, where a compaction moved them, the files orphan removal keeps,
//! the ack verdict); the services ([`world`]) keep the real contracts: compare-and-set on
//! versions that never repeat, TTLs on the clock, receipts that go stale at redelivery, a table
//! commit that asserts the snapshot it was built on, a position delete that reaches only the
//! rows of the one data file it names, files that stay under a table's location until orphan
//! removal deletes them.
//!
//! After the faults stop and everything drains, [`check`] holds the invariant: in the
//! replacing table every object's rows are exactly those of its latest version (none when it
//! was removed) and its `rows/` record says where they are; in the appending table every
//! version is in once or not at all, the latest exactly once; no table reads a file that was
//! removed; nothing dead-lettered, nothing left staged or half committed. A run is a function
//! of its seed: a failing seed replays with `floe-simulate --seed N --trace`.

pub mod check;
pub mod commit;
pub mod exec;
pub mod ingest;
pub mod maintain;
pub mod rng;
pub mod world;

use std::cell::RefCell;
use std::rc::Rc;

use floe_core::{ObjectChange, Operation, Provider};
use floe_pipeline::protocol::records::Owner;
use floe_pipeline::targets::TargetId;

use exec::{Shared, Task, poll_once, step};
use world::{Message, ObjectVersion, Stats, World};

/// The bucket the writer writes to.
pub const BUCKET: &str = "landing";

/// The tables (a key's first path segment names its table), and whether each replaces the rows
/// of an object that changes (`on-change = replace`) or appends every version.
pub const TABLES: [(&str, bool); 2] = [("a", false), ("b", true)];

/// Whether `target` replaces the rows of an object that changes.
pub fn replaces(opts: &Options, target: &TargetId) -> bool {
    !opts.appends_only
        && (TABLES.iter()).any(|(t, replace)| *replace && ingest::target_table(target) == *t)
}

/// The shape of a run and how often things go wrong.
#[derive(Clone, Debug)]
pub struct Options {
    pub instances: usize,
    pub committers: usize,
    /// `floe maintain` processes (0: no maintenance).
    pub maintainers: usize,
    /// Both tables append (`on-change = append`): the batch check is then the one guard
    /// against a batch landing twice (a replacing table also drops rows of a version it holds).
    pub appends_only: bool,
    /// Objects put (new keys and overwrites) or removed.
    pub puts: u64,
    /// Of those, the share that removes an object (one that exists).
    pub removes: f64,
    /// Distinct keys they go to (fewer keys, more overwrites).
    pub keys: u64,
    pub claim_timeout_ms: u64,
    pub lease_ms: u64,
    pub visibility_ms: i64,
    pub dedupe_ttl_ms: i64,
    pub max_deliveries: u32,
    pub commit_interval_ms: u64,
    pub max_files: u64,
    /// Per call: refused before applying; applied with the answer lost.
    pub fail: f64,
    pub lost: f64,
    /// Per table commit attempt: another writer committed first.
    pub foreign: f64,
    /// Per step: an actor crashes; an actor stalls; snapshots are expired outside floe.
    pub crash: f64,
    pub stall: f64,
    pub expire: f64,
    /// Maintenance runs again within this many steps.
    pub maintain_every: u64,
    /// Maintenance expires snapshots older than this.
    pub expire_age_ms: i64,
    /// Orphan removal keeps files younger than this (`--orphans-older-than-hours`: a running
    /// batch names its files only when it stages).
    pub orphan_age_ms: i64,
    /// Re-apply an append on the table as it is at commit time instead of the table checked
    /// (what iceberg's transaction did before floe answered its reload): a known bug, which the
    /// batch check alone also catches.
    pub rebase: bool,
    /// Append a commit's batches even when the table took them under another commit (what floe
    /// did before its batch check, summaries and `floe.batch-ids`): a known bug, to show the
    /// simulation finds it.
    pub no_batch_check: bool,
    /// Go on without an object whose claim write failed (what floe did before): a known bug.
    pub claim_error_continues: bool,
    /// A compaction that leaves the `rows/` records pointing at the files it rewrote: a known
    /// bug (the next change of an object deletes positions in a file the table no longer
    /// reads, and its old rows stay).
    pub compaction_keeps_rows: bool,
    /// Orphan removal that does not keep the files staged batches name: a known bug.
    pub orphans_ignore_batches: bool,
    /// Maintenance that compacts while a commit is in flight: a known bug (the commit records
    /// where its rows are in files the compaction rewrote).
    pub maintain_in_flight: bool,
    /// Steps before giving up on draining.
    pub max_steps: u64,
    /// Print every call and decision (to replay a failing seed).
    pub trace: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            instances: 3,
            committers: 2,
            maintainers: 1,
            appends_only: false,
            puts: 16,
            removes: 0.15,
            keys: 5,
            claim_timeout_ms: 2_000,
            lease_ms: 1_000,
            visibility_ms: 3_000,
            dedupe_ttl_ms: 3_600_000,
            max_deliveries: 10,
            commit_interval_ms: 300,
            max_files: 6,
            fail: 0.02,
            lost: 0.02,
            foreign: 0.05,
            crash: 0.004,
            stall: 0.004,
            expire: 0.002,
            maintain_every: 400,
            expire_age_ms: 2_000,
            orphan_age_ms: 10_000,
            rebase: false,
            no_batch_check: false,
            claim_error_continues: false,
            compaction_keeps_rows: false,
            orphans_ignore_batches: false,
            maintain_in_flight: false,
            max_steps: 400_000,
            trace: false,
        }
    }
}

impl Options {
    /// More of everything: four instances, three committers, two maintainers, a lease of half a
    /// second, and crashes, stalls and snapshot expiry several times as often. A message may be
    /// delivered sixteen times: with one call in twelve failing, ten failed deliveries in a row
    /// of a message received beside others (each delivery a dozen calls or more) is chance,
    /// not a message that cannot land.
    pub fn heavy() -> Self {
        Options {
            max_deliveries: 16,
            instances: 4,
            committers: 3,
            maintainers: 2,
            maintain_every: 200,
            puts: 24,
            keys: 4,
            lease_ms: 500,
            max_files: 3,
            crash: 0.01,
            stall: 0.01,
            expire: 0.01,
            fail: 0.04,
            lost: 0.04,
            foreign: 0.1,
            ..Options::default()
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Ingest,
    Commit,
    Maintain,
    Writer,
}

struct Actor {
    kind: Kind,
    host: String,
    pid: u32,
    task: Option<Task>,
    /// Not scheduled before this time (a stall, or a crashed process not yet restarted).
    asleep_until: i64,
}

/// Run one seed: the stats, or what broke the invariant.
pub fn run(seed: u64, opts: &Options) -> Result<Stats, String> {
    let w: Shared = Rc::new(RefCell::new(World::new(opts.clone(), seed)));
    let mut actors = Vec::new();
    let mut pids = 0u32;
    let mut spawn = |kind: Kind, host: String, w: &Shared| {
        pids += 1;
        let owner = Owner {
            host: host.clone(),
            pid: pids,
            run: format!("run-{pids}"),
            pid_space: Some(host.clone()),
        };
        w.borrow_mut().alive.insert((host.clone(), pids));
        let task: Task = match kind {
            Kind::Ingest => Box::pin(ingest::run(w.clone(), owner)),
            Kind::Commit => Box::pin(commit::run(w.clone(), owner)),
            Kind::Maintain => Box::pin(maintain::run(w.clone(), owner)),
            Kind::Writer => Box::pin(writer(w.clone())),
        };
        Actor {
            kind,
            host,
            pid: pids,
            task: Some(task),
            asleep_until: 0,
        }
    };
    for i in 0..opts.instances {
        actors.push(spawn(Kind::Ingest, format!("h{}", i % 2), &w));
    }
    for i in 0..opts.committers {
        actors.push(spawn(Kind::Commit, format!("h{}", i % 2), &w));
    }
    for i in 0..opts.maintainers {
        actors.push(spawn(Kind::Maintain, format!("h{}", (i + 1) % 2), &w));
    }
    actors.push(spawn(Kind::Writer, "user".into(), &w));

    let mut writer_done_at: Option<u64> = None;
    for n in 0..opts.max_steps {
        let mut world = w.borrow_mut();
        world.stats.steps = n;
        world.now += world.rng.below(11) as i64;
        let now = world.now;
        if !world.quiet {
            let pick = world.rng.below(actors.len() as u64) as usize;
            let a = &mut actors[pick];
            if a.kind != Kind::Writer && a.task.is_some() {
                if world.rng.chance(opts.crash) {
                    // The process dies: its future is dropped mid-call; it comes back later.
                    a.task = None;
                    world.alive.remove(&(a.host.clone(), a.pid));
                    a.asleep_until = now + world.rng.below(opts.lease_ms * 3) as i64;
                    world.stats.crashes += 1;
                    if opts.trace {
                        eprintln!("{:>8} p{} CRASHED", now % 1_000_000, a.pid);
                    }
                } else if world.rng.chance(opts.stall) {
                    let longest = opts.claim_timeout_ms.max(opts.lease_ms) * 2;
                    a.asleep_until = a.asleep_until.max(now + world.rng.below(longest) as i64);
                    world.stats.stalls += 1;
                    if opts.trace {
                        eprintln!(
                            "{:>8} p{} stalls until {}",
                            now % 1_000_000,
                            a.pid,
                            a.asleep_until % 1_000_000
                        );
                    }
                }
            }
            if world.rng.chance(opts.expire) {
                world.expire_snapshots();
            }
        }
        // Restart crashed processes, as new processes on the same host.
        for a in actors.iter_mut() {
            if a.task.is_none() && a.kind != Kind::Writer && a.asleep_until <= now {
                let (kind, host) = (a.kind, a.host.clone());
                drop(world);
                *a = spawn(kind, host, &w);
                world = w.borrow_mut();
            }
        }
        let ready: Vec<usize> = (0..actors.len())
            .filter(|&i| actors[i].task.is_some() && actors[i].asleep_until <= now)
            .collect();
        if ready.is_empty() {
            continue;
        }
        let pick = ready[world.rng.below(ready.len() as u64) as usize];
        if writer_done_at.is_some_and(|at| n > at + 2_000) {
            world.quiet = true;
        }
        if world.quiet && world.drained() {
            let stats = world.stats.clone();
            drop(world);
            return check::invariant(&w.borrow()).map(|()| stats);
        }
        world.current = actors[pick].pid;
        drop(world);
        let a = &mut actors[pick];
        if poll_once(a.task.as_mut().expect("ready")) {
            a.task = None;
            if a.kind == Kind::Writer {
                writer_done_at = Some(n);
            }
        }
    }
    let world = w.borrow();
    Err(format!(
        "stuck: not drained after {} steps; {}",
        opts.max_steps,
        check::describe(&world)
    ))
}

/// The user: puts objects (new keys and overwrites) and removes some, each with its event; an
/// event may be delivered twice, or late (after the next change of its key).
async fn writer(w: Shared) {
    let (puts, keys) = {
        let world = w.borrow();
        (world.opts.puts, world.opts.keys)
    };
    let mut late: Vec<ObjectChange> = Vec::new();
    for seq in 1..=puts {
        let change = {
            let mut world = w.borrow_mut();
            let k = world.rng.below(keys);
            let table = TABLES[(k % TABLES.len() as u64) as usize].0;
            let key = format!("{table}/k{k}");
            let removes = world.opts.removes;
            let remove = world.rng.chance(removes);
            let rows = 1 + world.rng.below(3);
            let versions = world.bucket.entry(key.clone()).or_default();
            let exists = versions.last().is_some_and(|v| !v.removed);
            let mut c = ObjectChange::created(Provider::S3, BUCKET, key);
            c.sequencer = Some(format!("{seq:012X}"));
            if remove && exists {
                versions.push(ObjectVersion {
                    etag: String::new(),
                    rows: 0,
                    removed: true,
                });
                c.operation = Operation::Removed;
                world.stats.removals += 1;
            } else {
                let etag = format!("{:032x}", (seq << 8) | (versions.len() as u64 + 1));
                versions.push(ObjectVersion {
                    etag: etag.clone(),
                    rows,
                    removed: false,
                });
                c.etag = Some(etag.to_uppercase());
                c.size = Some(rows);
            }
            world.stats.versions += 1;
            c
        };
        let (twice, delay) = {
            let mut world = w.borrow_mut();
            (world.rng.chance(0.1), world.rng.chance(0.1))
        };
        if delay {
            late.push(change);
        } else {
            for c in std::mem::take(&mut late)
                .into_iter()
                .chain([change.clone()])
            {
                enqueue(&w, c);
            }
            if twice {
                enqueue(&w, change);
            }
        }
        let pause = w.borrow_mut().rng.below(40);
        for _ in 0..pause {
            step().await;
        }
    }
    for c in late {
        enqueue(&w, c);
    }
}

fn enqueue(w: &Shared, change: ObjectChange) {
    let mut world = w.borrow_mut();
    let id = world.id();
    let now = world.now;
    world.queue.push(Message {
        id,
        change,
        visible_at: now,
        receives: 0,
        receipt: 0,
        gone: false,
        dead_lettered: false,
    });
    world.stats.messages += 1;
    if world.opts.trace {
        let c = &world.queue[world.queue.len() - 1].change;
        eprintln!(
            "{:>8} message {id}: {} {:?} seq {:?}",
            now % 1_000_000,
            c.key,
            c.etag,
            c.sequencer
        );
    }
}
