//! The simulated world every actor shares: the clock, the bucket, the queue, the checkpoint
//! table, the Iceberg tables and the files under their locations, and the faults. Each call
//! here is one atomic step of a service; actors reach it through [`crate::exec::op`], which
//! first yields to the scheduler and then lets the fault plan fail the call (before it applies)
//! or lose its answer (after).
//!
//! A table is what Iceberg makes of it, at the grain floe depends on: snapshots naming data
//! files and position delete files, each file's rows by position (which object version each
//! row came from), a delete applying to the rows of the one data file it names. A file is
//! written to the table's location before any snapshot names it, and stays there until orphan
//! removal deletes it; a table naming a file that is not there has lost its rows.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::rc::Rc;

use floe_core::ObjectChange;
use floe_iceberg::orphans::ListedFile;
use floe_pipeline::protocol::records::{
    BatchRecord, CommitRecord, DoneRecord, Lease, ObjRecord, ObjectRows, Owner,
};
use floe_pipeline::targets::TargetId;
use floe_pipeline::targets::maintain::MaintRecord;

use crate::Options;
use crate::rng::Rng;

/// What the checkpoint table holds, typed (the real one holds the same records as JSON).
#[derive(Clone, Debug)]
pub enum Value {
    Obj(ObjRecord),
    Batch(BatchRecord),
    Done(DoneRecord),
    Commit(CommitRecord),
    Lease(Lease),
    /// A queue message's unfinished deliveries: how many only waited for another's claim.
    Failure {
        busy: u32,
    },
    /// `rows/<target>/…`: the version of an object a replacing table holds, and where its rows are.
    Rows(ObjectRows),
    /// `maint/<target>`: a compaction in flight.
    Maint(MaintRecord),
}

struct Entry {
    value: Value,
    version: u64,
    expires_at: Option<i64>,
}

/// One version of an object in the bucket: a put, or the object's removal.
#[derive(Clone, Debug)]
pub struct ObjectVersion {
    /// Empty for a removal.
    pub etag: String,
    pub rows: u64,
    pub removed: bool,
}

/// What a file under a table's location holds.
#[derive(Clone, Debug)]
pub enum Content {
    /// A data file: the object version (key, version number) each row came from, by position.
    Data(Vec<(String, u64)>),
    /// A position delete file: rows of the one data file it names.
    Deletes {
        file: String,
        positions: BTreeSet<u64>,
    },
}

/// A file under a table's location.
#[derive(Clone, Debug)]
pub struct StoredFile {
    pub table: TargetId,
    pub written_at: i64,
    pub content: Content,
}

/// A file a table commit adds, and the batch it comes from (the batch check leaves out the
/// files of batches the table already took).
#[derive(Clone, Debug)]
pub struct Add {
    pub path: String,
    pub batch: String,
    /// A position delete file (else a data file).
    pub deletes: bool,
}

/// A snapshot: its summary (floe's commit id and the batches it took) and the files it reads.
#[derive(Clone, Debug)]
pub struct Snapshot {
    pub id: i64,
    pub commit_id: Option<String>,
    pub batches: Vec<String>,
    pub at: i64,
    /// Data files, each with how many manifest entries name it: a file added twice is read
    /// twice.
    pub data: BTreeMap<String, u32>,
    pub deletes: BTreeSet<String>,
}

/// A queue message carrying one change.
#[derive(Clone, Debug)]
pub struct Message {
    pub id: u64,
    pub change: ObjectChange,
    pub visible_at: i64,
    pub receives: u32,
    /// Changes at every receive: only the latest receipt may delete or hide the message.
    pub receipt: u64,
    pub gone: bool,
    pub dead_lettered: bool,
}

/// A table's state as a load returns it.
#[derive(Clone, Debug)]
pub struct TableView {
    pub current: Option<Rc<Snapshot>>,
    /// The snapshots not expired, oldest first (the current one last).
    pub snapshots: Vec<Rc<Snapshot>>,
    /// The `floe.commit-ids` property.
    pub commit_ids: VecDeque<String>,
    /// The `floe.batch-ids` property.
    pub batch_ids: VecDeque<String>,
}

impl TableView {
    pub fn current_id(&self) -> Option<i64> {
        self.current.as_ref().map(|s| s.id)
    }

    /// `floe_iceberg::find_commit`: in the history or in the property.
    pub fn has(&self, commit_id: &str) -> bool {
        (self.snapshots.iter()).any(|s| s.commit_id.as_deref() == Some(commit_id))
            || self.commit_ids.iter().any(|c| c == commit_id)
    }

    /// Batches the table took: named by the snapshots in the history (their `floe.checkpoint`
    /// summaries) or by the `floe.batch-ids` property.
    pub fn batches(&self) -> BTreeSet<String> {
        (self
            .snapshots
            .iter()
            .flat_map(|s| s.batches.iter().cloned()))
        .chain(self.batch_ids.iter().cloned())
        .collect()
    }

    /// Whether the current snapshot reads the data file `path`.
    pub fn live(&self, path: &str) -> bool {
        self.current
            .as_ref()
            .is_some_and(|s| s.data.contains_key(path))
    }

    /// Every file a snapshot of the history reads (`floe_iceberg::orphans::referenced_files`).
    pub fn referenced(&self) -> BTreeSet<String> {
        (self.snapshots.iter())
            .flat_map(|s| s.data.keys().chain(&s.deletes).cloned())
            .collect()
    }
}

#[derive(Default)]
pub struct Table {
    /// The snapshots not expired, oldest first.
    snapshots: Vec<Rc<Snapshot>>,
    current: Option<i64>,
    commit_ids: VecDeque<String>,
    batch_ids: VecDeque<String>,
    pub snapshots_made: u64,
}

impl Table {
    fn head(&self) -> Option<&Rc<Snapshot>> {
        let id = self.current?;
        self.snapshots.iter().rev().find(|s| s.id == id)
    }

    fn push(&mut self, snapshot: Snapshot) {
        self.current = Some(snapshot.id);
        self.snapshots.push(Rc::new(snapshot));
        self.snapshots_made += 1;
    }
}

/// How an operation went, as the fault plan decides.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    None,
    /// Refused before it applied (a 5xx, a connection reset).
    Fail,
    /// Applied, and the answer lost (a timeout after the write landed).
    Lost,
}

pub struct World {
    pub opts: Options,
    pub rng: Rng,
    pub now: i64,
    /// No more faults: the run is draining.
    pub quiet: bool,
    checkpoint: BTreeMap<String, Entry>,
    next_version: u64,
    /// The bucket: each key's versions, oldest first.
    pub bucket: BTreeMap<String, Vec<ObjectVersion>>,
    pub queue: Vec<Message>,
    next_receipt: u64,
    pub tables: BTreeMap<TargetId, Table>,
    /// The files under the tables' locations, by path.
    pub files: BTreeMap<String, StoredFile>,
    pub next_id: u64,
    /// Processes alive, by (host, pid).
    pub alive: BTreeSet<(String, u32)>,
    pub stats: Stats,
    /// The pid of the actor being polled (for the trace).
    pub current: u32,
}

/// What happened in a run.
#[derive(Clone, Debug, Default)]
pub struct Stats {
    pub steps: u64,
    pub crashes: u64,
    pub stalls: u64,
    pub faults: u64,
    pub versions: u64,
    pub messages: u64,
    pub rows_landed: u64,
    pub commits: u64,
    pub takeovers: u64,
    pub expiries: u64,
    pub removals: u64,
    /// Rows a commit deleted by position.
    pub rows_deleted: u64,
    pub compactions: u64,
    pub records_moved: u64,
    pub orphans_removed: u64,
}

impl Stats {
    /// Add another run's.
    pub fn add(&mut self, o: &Stats) {
        let Stats {
            steps,
            crashes,
            stalls,
            faults,
            versions,
            messages,
            rows_landed,
            commits,
            takeovers,
            expiries,
            removals,
            rows_deleted,
            compactions,
            records_moved,
            orphans_removed,
        } = o;
        self.steps += steps;
        self.crashes += crashes;
        self.stalls += stalls;
        self.faults += faults;
        self.versions += versions;
        self.messages += messages;
        self.rows_landed += rows_landed;
        self.commits += commits;
        self.takeovers += takeovers;
        self.expiries += expiries;
        self.removals += removals;
        self.rows_deleted += rows_deleted;
        self.compactions += compactions;
        self.records_moved += records_moved;
        self.orphans_removed += orphans_removed;
    }
}

impl World {
    pub fn new(opts: Options, seed: u64) -> Self {
        let mut tables = BTreeMap::new();
        for (t, _) in crate::TABLES {
            tables.insert(TargetId::iceberg("sim", t), Table::default());
        }
        World {
            opts,
            rng: Rng::new(seed),
            now: 1_700_000_000_000,
            quiet: false,
            checkpoint: BTreeMap::new(),
            next_version: 0,
            bucket: BTreeMap::new(),
            queue: Vec::new(),
            next_receipt: 0,
            tables,
            files: BTreeMap::new(),
            next_id: 0,
            alive: BTreeSet::new(),
            stats: Stats::default(),
            current: 0,
        }
    }

    pub fn id(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id
    }

    /// Whether the next call fails, loses its answer, or goes through.
    pub fn fault(&mut self) -> Fault {
        if self.quiet {
            return Fault::None;
        }
        let (fail, lost) = (self.opts.fail, self.opts.lost);
        let f = if self.rng.chance(fail) {
            Fault::Fail
        } else if self.rng.chance(lost) {
            Fault::Lost
        } else {
            Fault::None
        };
        if f != Fault::None {
            self.stats.faults += 1;
        }
        f
    }

    // --- the checkpoint table: compare-and-set on versions that never repeat, TTL on the clock

    fn live(&self, key: &str) -> Option<&Entry> {
        self.checkpoint
            .get(key)
            .filter(|e| e.expires_at.is_none_or(|t| t > self.now))
    }

    fn expiry(&self, ttl_ms: Option<i64>) -> Option<i64> {
        ttl_ms.map(|t| self.now + t)
    }

    fn put(&mut self, key: &str, value: Value, ttl_ms: Option<i64>) -> u64 {
        self.next_version += 1;
        let entry = Entry {
            value,
            version: self.next_version,
            expires_at: self.expiry(ttl_ms),
        };
        self.checkpoint.insert(key.to_owned(), entry);
        self.next_version
    }

    pub fn get(&self, key: &str) -> Option<(Value, u64)> {
        self.live(key).map(|e| (e.value.clone(), e.version))
    }

    pub fn insert(&mut self, key: &str, value: Value, ttl_ms: Option<i64>) -> Option<u64> {
        if self.live(key).is_some() {
            return None;
        }
        Some(self.put(key, value, ttl_ms))
    }

    pub fn update(
        &mut self,
        key: &str,
        value: Value,
        expected: u64,
        ttl_ms: Option<i64>,
    ) -> Option<u64> {
        if self.live(key)?.version != expected {
            return None;
        }
        Some(self.put(key, value, ttl_ms))
    }

    pub fn delete(&mut self, key: &str, expected: u64) -> bool {
        let found = self
            .checkpoint
            .get(key)
            .is_some_and(|e| e.version == expected);
        if found {
            self.checkpoint.remove(key);
        }
        found
    }

    pub fn scan(&self, prefix: &str) -> Vec<(String, Value, u64)> {
        self.checkpoint
            .range(prefix.to_owned()..)
            .take_while(|(k, _)| k.starts_with(prefix))
            .filter(|(k, _)| self.live(k).is_some())
            .map(|(k, e)| (k.clone(), e.value.clone(), e.version))
            .collect()
    }

    // --- the queue

    /// Receive up to `max` visible messages, each invisible for the visibility timeout.
    pub fn receive(&mut self, max: usize) -> Vec<(Message, u64)> {
        let (now, vis) = (self.now, self.opts.visibility_ms);
        let mut out = Vec::new();
        for m in self
            .queue
            .iter_mut()
            .filter(|m| !m.gone && m.visible_at <= now)
        {
            if out.len() == max {
                break;
            }
            self.next_receipt += 1;
            m.receipt = self.next_receipt;
            m.receives += 1;
            m.visible_at = now + vis;
            out.push((m.clone(), m.receipt));
        }
        out
    }

    fn message(&mut self, id: u64, receipt: u64) -> Option<&mut Message> {
        self.queue
            .iter_mut()
            .find(|m| m.id == id && m.receipt == receipt && !m.gone)
    }

    /// Delete a message with its receipt (a stale receipt deletes nothing).
    pub fn delete_message(&mut self, id: u64, receipt: u64, dead_letter: bool) {
        if let Some(m) = self.message(id, receipt) {
            m.gone = true;
            m.dead_lettered = dead_letter;
        }
    }

    /// Keep a message invisible for `ms` more.
    pub fn hide(&mut self, id: u64, receipt: u64, ms: i64) {
        let now = self.now;
        if let Some(m) = self.message(id, receipt) {
            m.visible_at = m.visible_at.max(now + ms);
        }
    }

    // --- the tables and their files

    pub fn load(&self, target: &TargetId) -> TableView {
        let t = &self.tables[target];
        TableView {
            current: t.head().cloned(),
            snapshots: t.snapshots.clone(),
            batch_ids: t.batch_ids.clone(),
            commit_ids: t.commit_ids.clone(),
        }
    }

    /// Write a file under `target`'s location.
    pub fn write_file(&mut self, target: &TargetId, path: &str, content: Content) {
        let file = StoredFile {
            table: target.clone(),
            written_at: self.now,
            content,
        };
        self.files.insert(path.to_owned(), file);
    }

    /// One commit attempt of `files` under `commit_id`, asserting the table is still at
    /// `base.current` (a 409 otherwise) — unless `opts.rebase` makes it re-apply on whatever the
    /// table holds, as iceberg's transaction did before floe answered its reload. Files of
    /// batches a snapshot of `base` took are left out (`floe_iceberg`'s batch check; unless
    /// `opts.no_batch_check`); `Ok(None)` when none is left. The commit ids and batch ids it
    /// takes go into the table's properties, as `floe_iceberg::append_exactly_once` sets them.
    pub fn commit(
        &mut self,
        target: &TargetId,
        base: &TableView,
        commit_id: &str,
        files: &[Add],
    ) -> Result<Option<i64>, &'static str> {
        let id = self.id() as i64;
        let current = self.load(target);
        let base = if self.opts.rebase { &current } else { base };
        let taken = if self.opts.no_batch_check {
            BTreeSet::new()
        } else {
            base.batches()
        };
        let files: Vec<&Add> = files.iter().filter(|f| !taken.contains(&f.batch)).collect();
        let mut batches: Vec<String> = files.iter().map(|f| f.batch.clone()).collect();
        batches.dedup();
        if current.current_id() != base.current_id() {
            return Err("409: the table moved since it was loaded");
        }
        if files.is_empty() {
            return Ok(None);
        }
        let (mut data, mut deletes) = match &base.current {
            Some(s) => (s.data.clone(), s.deletes.clone()),
            None => Default::default(),
        };
        for f in &files {
            if f.deletes {
                deletes.insert(f.path.clone());
            } else {
                *data.entry(f.path.clone()).or_default() += 1;
                if let Some(StoredFile {
                    content: Content::Data(rows),
                    ..
                }) = self.files.get(&f.path)
                {
                    self.stats.rows_landed += rows.len() as u64;
                }
            }
        }
        let snapshot = Snapshot {
            id,
            commit_id: Some(commit_id.to_owned()),
            batches: batches.clone(),
            at: self.now,
            data,
            deletes,
        };
        let t = self.tables.get_mut(target).expect("known table");
        t.push(snapshot);
        let mut ids = base.commit_ids.clone();
        ids.push_back(commit_id.to_owned());
        while ids.len() > floe_iceberg::commit::RECENT_COMMIT_IDS {
            ids.pop_front();
        }
        t.commit_ids = ids;
        let mut recent = base.batch_ids.clone();
        recent.retain(|b| !batches.contains(b));
        recent.extend(batches.iter().cloned());
        while recent.len() > floe_iceberg::commit::RECENT_BATCH_IDS {
            recent.pop_front();
        }
        t.batch_ids = recent;
        self.stats.commits += 1;
        Ok(Some(id))
    }

    /// A compaction's `replace` snapshot (`floe_iceberg::maintain::rewrite_updates`): `removed`
    /// data and delete files out, `added` in, its commit id in the summary, asserting the table
    /// is still at `base.current`.
    pub fn rewrite(
        &mut self,
        target: &TargetId,
        base: &TableView,
        commit_id: &str,
        removed: &BTreeSet<String>,
        added: &[String],
    ) -> Result<i64, &'static str> {
        let id = self.id() as i64;
        let t = self.tables.get_mut(target).expect("known table");
        let Some(head) = t.head().filter(|_| t.current == base.current_id()).cloned() else {
            return Err("409: the table moved since it was loaded");
        };
        let mut data: BTreeMap<String, u32> = (head.data.iter())
            .filter(|(p, _)| !removed.contains(*p))
            .map(|(p, n)| (p.clone(), *n))
            .collect();
        data.extend(added.iter().map(|p| (p.clone(), 1)));
        t.push(Snapshot {
            id,
            commit_id: Some(commit_id.to_owned()),
            batches: Vec::new(),
            at: self.now,
            data,
            deletes: head.deletes.difference(removed).cloned().collect(),
        });
        self.stats.compactions += 1;
        Ok(id)
    }

    /// Expire the snapshots `ids` (`floe_iceberg::maintain::expire_updates`), asserting the
    /// table is still at `base.current`.
    pub fn expire(
        &mut self,
        target: &TargetId,
        base: &TableView,
        ids: &BTreeSet<i64>,
    ) -> Result<(), &'static str> {
        let t = self.tables.get_mut(target).expect("known table");
        if t.current != base.current_id() {
            return Err("409: the table moved since it was loaded");
        }
        t.snapshots.retain(|s| !ids.contains(&s.id));
        self.stats.expiries += 1;
        Ok(())
    }

    /// An empty snapshot on `base.current` (`floe_iceberg::delta::snapshot_updates` of no
    /// files): the table moves on, and a commit built on `base` can no longer land.
    pub fn fence(&mut self, target: &TargetId, base: &TableView) -> Result<i64, &'static str> {
        let id = self.id() as i64;
        let now = self.now;
        let t = self.tables.get_mut(target).expect("known table");
        let Some(head) = t.head().filter(|_| t.current == base.current_id()).cloned() else {
            return Err("409: the table moved since it was loaded");
        };
        t.push(Snapshot {
            id,
            commit_id: None,
            batches: Vec::new(),
            at: now,
            data: head.data.clone(),
            deletes: head.deletes.clone(),
        });
        Ok(id)
    }

    /// Another writer commits to the table (its snapshot carries no floe commit id).
    pub fn foreign_commit(&mut self, target: &TargetId) {
        let id = self.id() as i64;
        let now = self.now;
        let t = self.tables.get_mut(target).expect("known table");
        let (data, deletes) = match t.head() {
            Some(s) => (s.data.clone(), s.deletes.clone()),
            None => Default::default(),
        };
        t.push(Snapshot {
            id,
            commit_id: None,
            batches: Vec::new(),
            at: now,
            data,
            deletes,
        });
    }

    /// Snapshot management outside floe (the catalog's own, as S3 Tables runs it) expires every
    /// snapshot but the current one.
    pub fn expire_snapshots(&mut self) {
        for t in self.tables.values_mut() {
            let keep = t.snapshots.len().saturating_sub(1);
            t.snapshots.drain(..keep);
        }
        self.stats.expiries += 1;
    }

    /// The files under `target`'s location, as a listing returns them.
    pub fn list(&self, target: &TargetId) -> Vec<ListedFile> {
        (self.files.iter())
            .filter(|(_, f)| &f.table == target)
            .map(|(path, f)| ListedFile {
                path: path.clone(),
                size: 1,
                modified_ms: f.written_at,
            })
            .collect()
    }

    /// The rows a data file holds once the table's delete files are applied: (position, key,
    /// version) of each, or the first file the table reads that is not there.
    pub fn read_rows(
        &self,
        view: &TableView,
        path: &str,
    ) -> Result<Vec<(u64, String, u64)>, String> {
        let missing = |p: &str| format!("{p} is read by the table but was removed");
        let Some(StoredFile {
            content: Content::Data(rows),
            ..
        }) = self.files.get(path)
        else {
            return Err(missing(path));
        };
        let mut deleted = BTreeSet::new();
        for d in view.current.iter().flat_map(|s| &s.deletes) {
            match self.files.get(d) {
                Some(StoredFile {
                    content: Content::Deletes { file, positions },
                    ..
                }) => {
                    if file == path {
                        deleted.extend(positions.iter().copied());
                    }
                }
                _ => return Err(missing(d)),
            }
        }
        Ok((rows.iter().enumerate())
            .filter(|(i, _)| !deleted.contains(&(*i as u64)))
            .map(|(i, (k, v))| (i as u64, k.clone(), *v))
            .collect())
    }

    /// Whether the process that wrote `owner` is known dead to a judge on `host` (the real
    /// check reads /proc, so it only sees its own host).
    pub fn owner_dead(&self, owner: &Owner, host: &str) -> bool {
        owner.host == host && !self.alive.contains(&(owner.host.clone(), owner.pid))
    }

    /// Nothing left to do: every message gone, nothing staged and waiting, no commit open, no
    /// compaction in a table with its `rows/` records left for the next holder of the lease to
    /// move (one that has not landed may stay: it moves nothing).
    pub fn drained(&self) -> bool {
        let landed = |t: &str, v: &Value| match v {
            Value::Maint(m) => (t.strip_prefix("maint/").and_then(|t| t.parse().ok()))
                .is_some_and(|t: TargetId| self.load(&t).has(&m.id)),
            _ => false,
        };
        self.queue.iter().all(|m| m.gone)
            && self.scan("commit/").is_empty()
            && !self.scan("maint/").iter().any(|(k, v, _)| landed(k, v))
            && self.scan("batch/").iter().all(|(_, v, _)| match v {
                Value::Batch(b) => b.state != floe_pipeline::protocol::records::BatchState::Staged,
                _ => true,
            })
    }
}
