//! Replaying dead-lettered objects once they are fixed (`floe dead-letters replay`).
//!
//! A replay lands an object's *current* version through the normal path: a HEAD gives its ETag,
//! version id, size and modification time; that becomes a created change, as a listing would
//! report it; [`Pipeline::ingest`] claims and lands it under the checkpoint table's rules, and
//! the caller commits. So the rules of every other delivery hold:
//!
//! - the version that was dead-lettered is already recorded (its claim was marked staged with
//!   the rest of its batch, or failed for good): replaying it unchanged is a duplicate and lands
//!   nothing. Fix the object (write it again: a new ETag) and the new version lands;
//! - a version that already landed (replayed before, or delivered by the queue or a listing
//!   meanwhile) is a duplicate: replaying twice lands once;
//! - an object that is gone is reported, not landed.
//!
//! Which objects to replay is the caller's choice. An object whose letters are about single
//! records (`line` set) had its other records landed: replaying a fixed version lands every
//! record of it again, next to the rows already there (routes append). `floe dead-letters
//! replay` therefore takes only objects set aside whole unless told otherwise
//! (see [`crate::deadletter::LetteredObject::is_partial`]).
//!
//! One case a whole-object letter does not cover: an object whose stream broke part way through
//! (a gzip member cut short after some megabytes) is set aside whole, but the rows decoded before
//! the break were written and land with its batch; replaying its fixed version lands those rows
//! again. The letter does not record how many rows came before the break.

use floe_checkpoint::StoreExt;
use floe_core::{Error, ObjectChange, Operation, Provider, Result};

use crate::config::SourceConfig;
use crate::ingest::BatchTotals;
use crate::pipeline::Pipeline;
use crate::protocol::Outcome;
use crate::protocol::records::{ObjRecord, ObjState, obj_key};
use crate::sources::land::far_future;
use crate::sources::normalized;

/// One object of a replay and what became of it.
#[derive(Debug)]
pub struct ReplayItem {
    /// Its bucket.
    pub bucket: String,
    /// Its key.
    pub key: String,
    /// Its URL.
    pub url: String,
    /// The version replayed (`None`: the object is gone).
    pub change: Option<ObjectChange>,
    /// What ingest made of it (`None`: the object is gone).
    pub outcome: Option<Outcome>,
    /// For a duplicate: the batch the checkpoint table says landed (or set aside) this version,
    /// so a caller can tell a version that was dead-lettered and not fixed yet (the batch of
    /// its letters) from one that landed since.
    pub recorded_batch: Option<String>,
}

/// What a replay did (before its commit).
#[derive(Debug, Default)]
pub struct ReplayReport {
    /// One item per object asked for, in order.
    pub items: Vec<ReplayItem>,
    /// Sums over the ingest batches.
    pub totals: BatchTotals,
    /// Bad records set aside again.
    pub bad_records: u64,
}

impl Pipeline {
    /// The change that lands the current version of `bucket`/`key`, as a listing reports it;
    /// `None` when there is no such object.
    pub async fn current_change(&self, bucket: &str, key: &str) -> Result<Option<ObjectChange>> {
        let (provider, region) = match &self.config.source {
            SourceConfig::Local { bucket: ours, .. } => {
                if bucket != ours {
                    return Err(Error::invalid_input(format!(
                        "bucket `{bucket}` is not the local source's (`{ours}`)"
                    ))
                    .with_retryable(false));
                }
                (Provider::Local, None)
            }
            SourceConfig::Cloud(c) => (c.provider, c.store.region.clone()),
        };
        let mut change = ObjectChange {
            operation: Operation::Created,
            provider,
            bucket: bucket.to_owned(),
            key: key.to_owned(),
            region,
            size: None,
            etag: None,
            version_id: None,
            sequencer: None,
            event_time: None,
            event_name: "ObjectCreated:Replay".into(),
            message_id: None,
        };
        let store = self.stores.store(&change)?;
        let Some(meta) = store.head(key).await? else {
            return Ok(None);
        };
        change.size = Some(meta.size);
        change.etag = meta.etag;
        change.version_id = meta.version_id;
        change.event_time = meta.last_modified;
        Ok(Some(normalized(change)))
    }

    /// Land the current versions of `objects` (bucket, key) through ingest; see the module doc.
    /// Nothing is committed: call [`Pipeline::commit`] after.
    pub async fn replay(&self, objects: &[(String, String)]) -> Result<ReplayReport> {
        let mut items = Vec::with_capacity(objects.len());
        let mut changes = Vec::new();
        for (bucket, key) in objects {
            let change = self.current_change(bucket, key).await?;
            let url = match &change {
                Some(c) => self.stores.store(c)?.url(key),
                None => format!("{bucket}/{key}"),
            };
            if let Some(c) = &change {
                changes.push(c.clone());
            }
            items.push(ReplayItem {
                bucket: bucket.clone(),
                key: key.clone(),
                url,
                change,
                outcome: None,
                recorded_batch: None,
            });
        }
        let batches = self.land_changes(&changes, far_future()).await?.batches;
        let totals = BatchTotals::of(&batches);
        let bad_records = batches.iter().map(|b| b.bad_records).sum();
        let mut outcomes = batches.into_iter().flat_map(|b| b.outcomes);
        for item in items.iter_mut().filter(|i| i.change.is_some()) {
            item.outcome = outcomes.next();
            if matches!(item.outcome, Some(Outcome::Duplicate)) {
                item.recorded_batch = self
                    .checkpoint
                    .get_json::<ObjRecord>(&obj_key(&item.bucket, &item.key))
                    .await?
                    .and_then(|(r, _)| match r.state {
                        ObjState::Staged { batch } | ObjState::Claimed { batch } => Some(batch),
                        _ => None,
                    });
            }
        }
        Ok(ReplayReport {
            items,
            totals,
            bad_records,
        })
    }
}
