//! Claims: taking objects for a batch in the checkpoint table, judging the batch that holds a
//! claim we want, giving an object back, and recording the objects floe does not land.

use floe_checkpoint::{StoreExt, Version, Write, encode, now_ms};
use floe_core::{ObjectChange, Result};

use super::route::Routed;
use super::{Claimed, Run};
use crate::pipeline::Pipeline;
use crate::protocol::Outcome;
use crate::protocol::batch::{self, Holder};
use crate::protocol::claim::{
    Decision, append_start, decide, lands_as_append, may_record_ignored, obj_record, same_version,
};
use crate::protocol::records::{BatchRecord, ObjRecord, ObjState, batch_key, done_key, obj_key};

enum Judged {
    /// Alive and working: leave the object to it.
    Live,
    /// It staged (the object is landed).
    Staged,
    /// Dead, abandoned or gone: its objects may be taken.
    Gone,
}

impl Pipeline {
    /// Claim the routed changes for the batch. First a create-if-absent of every object's
    /// record, all together: an object never seen (the common case) is claimed by that alone,
    /// with no read of a record that is not there (on an object store each read is a round
    /// trip). The rest are read and judged together, and written in one more round; an object
    /// claimed by another batch, or a lost race, takes the one-object path. The claimed come
    /// back in the order given (the first object of a new table shapes its schema).
    pub(super) async fn claim_all(
        &self,
        run: &mut Run<'_>,
        routed: &[(usize, Routed)],
    ) -> Result<Vec<Claimed>> {
        let mut claimed = Vec::new();
        let keys: Vec<String> = routed
            .iter()
            .map(|(i, _)| obj_key(&run.changes[*i].bucket, &run.changes[*i].key))
            .collect();
        let claimed_by_me = || ObjState::Claimed {
            batch: run.batch.clone(),
        };
        let mut values = Vec::with_capacity(routed.len());
        for (i, _) in routed {
            let mine = claim_record(&run.changes[*i], claimed_by_me(), None);
            values.push((encode(&mine)?, self.record_ttl(&mine)));
        }
        let creates: Vec<Write<'_>> = (keys.iter().zip(values))
            .map(|(key, (value, ttl))| Write::Insert { key, value, ttl })
            .collect();
        let created = self.checkpoint.write_many(&creates).await?;
        drop(creates);
        let mut seen = Vec::new();
        for (j, version) in created.into_iter().enumerate() {
            match version {
                Some(version) => {
                    claimed.push(claimed_as(&routed[j], keys[j].clone(), version, None))
                }
                None => seen.push(j),
            }
        }
        if seen.is_empty() {
            claimed.sort_by_key(|c| c.idx);
            return Ok(claimed);
        }

        let seen_keys: Vec<String> = seen.iter().map(|j| keys[*j].clone()).collect();
        let existing = self.checkpoint.get_many(&seen_keys).await?;
        let mut fast: Vec<(usize, Option<(ObjRecord, Version)>)> = Vec::new();
        let mut slow = Vec::new();
        for (j, entry) in seen.into_iter().zip(existing) {
            let i = routed[j].0;
            let rec = match entry {
                None => None,
                Some(e) => match serde_json::from_slice::<ObjRecord>(&e.value) {
                    Ok(r) => Some((r, e.version)),
                    Err(_) => {
                        slow.push(j);
                        continue;
                    }
                },
            };
            match decide(rec.as_ref().map(|(r, _)| r), &run.changes[i], &run.batch) {
                Decision::Claim => fast.push((j, rec)),
                Decision::Duplicate => run.outcomes[i] = Some(Outcome::Duplicate),
                Decision::Stale => run.outcomes[i] = Some(Outcome::Stale),
                Decision::ClaimedBy(_) => slow.push(j),
            }
        }
        let mut values = Vec::with_capacity(fast.len());
        for (j, prev) in &fast {
            let change = &run.changes[routed[*j].0];
            let mine = claim_record(change, claimed_by_me(), prev.as_ref().map(|(r, _)| r));
            values.push((encode(&mine)?, self.record_ttl(&mine)));
        }
        let writes: Vec<Write<'_>> = fast
            .iter()
            .zip(values)
            .map(|((j, rec), (value, ttl))| match rec {
                None => Write::Insert {
                    key: &keys[*j],
                    value,
                    ttl,
                },
                Some((_, v)) => Write::Update {
                    key: &keys[*j],
                    value,
                    expected: v,
                    ttl,
                },
            })
            .collect();
        let results = self.checkpoint.write_many(&writes).await?;
        drop(writes);
        for ((j, prev), result) in fast.into_iter().zip(results) {
            match result {
                Some(version) => {
                    claimed.push(claimed_as(&routed[j], keys[j].clone(), version, prev))
                }
                None => slow.push(j),
            }
        }
        slow.sort_unstable();
        for j in slow {
            let i = routed[j].0;
            match self.claim(&run.changes[i], &run.batch).await {
                Ok(Ok((key, version, prev))) => {
                    claimed.push(claimed_as(&routed[j], key, version, prev))
                }
                Ok(Err(outcome)) => run.outcomes[i] = Some(outcome),
                // A claim write whose answer was lost may have landed: the object's record
                // would name this batch while the batch went on without it, and staging would
                // make it look landed. End the batch; its claims are taken over once it is
                // judged gone.
                Err(e) => return Err(e),
            }
        }
        claimed.sort_by_key(|c| c.idx);
        Ok(claimed)
    }

    /// Remember an object floe deliberately does not land (so a folder rescan does not offer it
    /// again, and a redelivery is recognised).
    pub(super) async fn record_ignored(&self, c: &ObjectChange, reason: &str) -> Result<()> {
        let key = obj_key(&c.bucket, &c.key);
        let state = ObjState::Ignored {
            reason: reason.into(),
        };
        let rec = obj_record(c, state, now_ms());
        for _ in 0..5 {
            match self.checkpoint.get_json::<ObjRecord>(&key).await? {
                None => {
                    if self
                        .checkpoint
                        .insert_json(&key, &rec, self.dedupe_ttl)
                        .await?
                        .is_some()
                    {
                        return Ok(());
                    }
                }
                Some((old, v)) => {
                    if !may_record_ignored(&old, c) {
                        return Ok(());
                    }
                    if self
                        .checkpoint
                        .update_json(&key, &rec, &v, self.dedupe_ttl)
                        .await?
                        .is_some()
                    {
                        return Ok(());
                    }
                }
            }
        }
        Ok(())
    }

    /// Claim one change for `batch`: `Ok(Ok(..))` claimed, `Ok(Err(outcome))` not ours to do.
    #[allow(clippy::type_complexity)]
    async fn claim(
        &self,
        c: &ObjectChange,
        batch: &str,
    ) -> Result<std::result::Result<(String, Version, Option<(ObjRecord, Version)>), Outcome>> {
        let key = obj_key(&c.bucket, &c.key);
        for _ in 0..10 {
            let existing = self.checkpoint.get_json::<ObjRecord>(&key).await?;
            let decision = decide(existing.as_ref().map(|(r, _)| r), c, batch);
            let decision = match decision {
                Decision::ClaimedBy(other) => match self.judge_batch(&other).await? {
                    Judged::Live => return Ok(Err(Outcome::Busy)),
                    Judged::Staged => {
                        if let Some((rec, v)) = &existing {
                            let mut fixed = rec.clone();
                            fixed.state = ObjState::Staged {
                                batch: other.clone(),
                            };
                            let _ = self
                                .checkpoint
                                .update_json(&key, &fixed, v, self.record_ttl(&fixed))
                                .await;
                            // An append of a later version lands after what that batch
                            // staged: decide again on the record as it is now.
                            if lands_as_append(Some(rec), c) && !same_version(rec, c) {
                                continue;
                            }
                        }
                        return Ok(Err(Outcome::Duplicate));
                    }
                    Judged::Gone => Decision::Claim,
                },
                d => d,
            };
            match decision {
                Decision::Duplicate => return Ok(Err(Outcome::Duplicate)),
                Decision::Stale => return Ok(Err(Outcome::Stale)),
                Decision::ClaimedBy(_) => return Ok(Err(Outcome::Busy)),
                Decision::Claim => {
                    let state = ObjState::Claimed {
                        batch: batch.to_owned(),
                    };
                    let mine = claim_record(c, state, existing.as_ref().map(|(r, _)| r));
                    let ttl = self.record_ttl(&mine);
                    let written = match &existing {
                        None => self.checkpoint.insert_json(&key, &mine, ttl).await?,
                        Some((_, v)) => self.checkpoint.update_json(&key, &mine, v, ttl).await?,
                    };
                    if let Some(version) = written {
                        return Ok(Ok((key, version, existing)));
                    }
                    // Lost a race: look again.
                }
            }
        }
        Ok(Err(Outcome::Busy))
    }

    /// Decide about a batch that holds a claim we want.
    async fn judge_batch(&self, other: &str) -> Result<Judged> {
        let timeout = self.config.ingest.claim_timeout_ms;
        for _ in 0..5 {
            let found = self
                .checkpoint
                .get_json::<BatchRecord>(&batch_key(other))
                .await?;
            let done = match &found {
                None => self.checkpoint.get(&done_key(other)).await?.is_some(),
                Some(_) => false,
            };
            let rec = found.as_ref().map(|(r, _)| r);
            let dead = rec.is_some_and(|r| crate::host::is_dead_local_process(&r.owner));
            match batch::judge(rec, done, now_ms(), timeout, dead) {
                Holder::Live => return Ok(Judged::Live),
                Holder::Staged => return Ok(Judged::Staged),
                Holder::Gone => return Ok(Judged::Gone),
                Holder::Abandon(abandoned) => {
                    let Some((_, v)) = &found else {
                        continue;
                    };
                    let ttl = Some(batch::abandoned_ttl(timeout));
                    if self
                        .checkpoint
                        .update_json(&batch_key(other), &abandoned, v, ttl)
                        .await?
                        .is_some()
                    {
                        tracing::warn!(
                            batch = other,
                            "took over the objects of a batch that stopped"
                        );
                        return Ok(Judged::Gone);
                    }
                }
            }
        }
        Ok(Judged::Live)
    }

    /// Give an object back: restore what its record held before our claim.
    pub(super) async fn release(&self, c: &Claimed) -> Result<()> {
        match &c.prev {
            None => {
                self.checkpoint
                    .delete_if_version(&c.key, &c.version)
                    .await?;
            }
            Some((prev, _)) => {
                self.checkpoint
                    .update_json(&c.key, prev, &c.version, self.record_ttl(prev))
                    .await?;
            }
        }
        Ok(())
    }

    /// How long an object's record is kept: the dedupe TTL, except for an appended object's,
    /// kept for good: it holds where the next append starts, and an append after it expired
    /// would land the object again from the start.
    pub(super) fn record_ttl(&self, rec: &ObjRecord) -> Option<std::time::Duration> {
        match rec.from {
            Some(_) => None,
            None => self.dedupe_ttl,
        }
    }
}

/// The record of `change` in `state`; an append's notes where it lands from, given the record
/// before (see [`crate::protocol::claim::append_start`]).
/// The claim of a routed change: its record `key` at `version`, over `prev`.
fn claimed_as(
    (idx, r): &(usize, Routed),
    key: String,
    version: Version,
    prev: Option<(ObjRecord, Version)>,
) -> Claimed {
    Claimed {
        idx: *idx,
        key,
        version,
        prev,
        route: r.route,
        table: r.table.clone(),
        maxcompute: r.maxcompute.clone(),
    }
}

pub(super) fn claim_record(
    change: &ObjectChange,
    state: ObjState,
    prev: Option<&ObjRecord>,
) -> ObjRecord {
    let mut rec = obj_record(change, state, now_ms());
    if lands_as_append(prev, change) {
        rec.from = Some(append_start(prev));
    }
    rec
}
