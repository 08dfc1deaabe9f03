//! The simulated world every actor shares: the clock, the bucket, the queue, the checkpoint
//! table, the Iceberg tables, and the faults. Each call here is one atomic step of a service;
//! actors reach it through [`crate::exec::op`], which first yields to the scheduler and then
//! lets the fault plan fail the call (before it applies) or lose its answer (after).

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use floe_core::ObjectChange;
use floe_iceberg::StagedFile;
use floe_pipeline::protocol::records::{
    BatchRecord, CommitRecord, DoneRecord, Lease, ObjRecord, Owner,
};
use floe_pipeline::targets::TargetId;

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
}

struct Entry {
    value: Value,
    version: u64,
    expires_at: Option<i64>,
}

/// One version of an object in the bucket.
#[derive(Clone, Debug)]
pub struct ObjectVersion {
    pub etag: String,
    pub rows: u64,
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
    pub current: Option<i64>,
    /// Commit ids of the snapshots still in the history.
    pub history: Vec<String>,
    /// The `floe.commit-ids` property.
    pub commit_ids: VecDeque<String>,
    /// Batches the table took: named by the snapshots in the history (their `floe.checkpoint`
    /// summaries) or by the `floe.batch-ids` property.
    pub batches: BTreeSet<String>,
    /// The `floe.batch-ids` property.
    pub batch_ids: VecDeque<String>,
}

impl TableView {
    /// `floe_iceberg::find_commit`: in the history or in the property.
    pub fn has(&self, commit_id: &str) -> bool {
        self.history.iter().any(|c| c == commit_id)
            || self.commit_ids.iter().any(|c| c == commit_id)
    }
}

#[derive(Default)]
pub struct Table {
    /// (snapshot id, commit id, batches taken) of the snapshots not expired.
    snapshots: Vec<(i64, Option<String>, Vec<String>)>,
    current: Option<i64>,
    commit_ids: VecDeque<String>,
    batch_ids: VecDeque<String>,
    /// Rows of each (key, object version) the table holds.
    pub rows: BTreeMap<(String, u64), u64>,
    pub snapshots_made: u64,
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
    /// Staged data files: (key, object version, rows) each holds.
    pub files: BTreeMap<String, Vec<(String, u64, u64)>>,
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
}

impl World {
    pub fn new(opts: Options, seed: u64) -> Self {
        let mut tables = BTreeMap::new();
        for t in crate::TABLES {
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

    // --- the tables

    pub fn load(&self, target: &TargetId) -> TableView {
        let t = &self.tables[target];
        TableView {
            current: t.current,
            history: t
                .snapshots
                .iter()
                .filter_map(|(_, c, _)| c.clone())
                .collect(),
            batches: (t.snapshots.iter().flat_map(|(_, _, b)| b.clone()))
                .chain(t.batch_ids.iter().cloned())
                .collect(),
            batch_ids: t.batch_ids.clone(),
            commit_ids: t.commit_ids.clone(),
        }
    }

    /// One commit attempt of `files` under `commit_id`, asserting the table is still at
    /// `base.current` (a 409 otherwise) — unless `opts.rebase` makes it re-apply on whatever the
    /// table holds, as iceberg's transaction did before floe answered its reload. Files of
    /// batches a snapshot of `base` took are left out (`floe_iceberg`'s batch check; unless
    /// `opts.no_batch_check`); `Ok(None)` when none is left.
    pub fn commit(
        &mut self,
        target: &TargetId,
        base: &TableView,
        commit_id: &str,
        files: &[StagedFile],
    ) -> Result<Option<i64>, &'static str> {
        let id = self.id() as i64;
        let rebase = self.opts.rebase;
        let current = self.load(target);
        let base = if rebase { &current } else { base };
        let batch_of = |f: &StagedFile| {
            let rest = f.path.trim_start_matches("sim://");
            rest.split('/').next().unwrap_or_default().to_owned()
        };
        let check = !self.opts.no_batch_check;
        let files: Vec<&StagedFile> = files
            .iter()
            .filter(|f| !check || !base.batches.contains(&batch_of(f)))
            .collect();
        let batches: Vec<String> = files.iter().map(|f| batch_of(f)).collect();
        let contents: Vec<(String, u64, u64)> = files
            .iter()
            .flat_map(|f| self.files[&f.path].clone())
            .collect();
        let t = self.tables.get_mut(target).expect("known table");
        if t.current != base.current {
            return Err("409: the table moved since it was loaded");
        }
        if files.is_empty() {
            return Ok(None);
        }
        t.snapshots
            .push((id, Some(commit_id.to_owned()), batches.clone()));
        t.current = Some(id);
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
        t.snapshots_made += 1;
        for (key, version, rows) in contents {
            *t.rows.entry((key, version)).or_default() += rows;
            self.stats.rows_landed += rows;
        }
        self.stats.commits += 1;
        Ok(Some(id))
    }

    /// Another writer commits to the table (its snapshot carries no floe commit id).
    pub fn foreign_commit(&mut self, target: &TargetId) {
        let id = self.id() as i64;
        let t = self.tables.get_mut(target).expect("known table");
        t.snapshots.push((id, None, Vec::new()));
        t.current = Some(id);
    }

    /// Table maintenance expires every snapshot but the current one.
    pub fn expire_snapshots(&mut self) {
        for t in self.tables.values_mut() {
            let keep = t.snapshots.len().saturating_sub(1);
            t.snapshots.drain(..keep);
        }
        self.stats.expiries += 1;
    }

    /// Whether the process that wrote `owner` is known dead to a judge on `host` (the real
    /// check reads /proc, so it only sees its own host).
    pub fn owner_dead(&self, owner: &Owner, host: &str) -> bool {
        owner.host == host && !self.alive.contains(&(owner.host.clone(), owner.pid))
    }

    /// Nothing left to do: every message gone, nothing staged and waiting, no commit open.
    pub fn drained(&self) -> bool {
        self.queue.iter().all(|m| m.gone)
            && self.scan("commit/").is_empty()
            && self.scan("batch/").iter().all(|(_, v, _)| match v {
                Value::Batch(b) => b.state != floe_pipeline::protocol::records::BatchState::Staged,
                _ => true,
            })
    }
}
