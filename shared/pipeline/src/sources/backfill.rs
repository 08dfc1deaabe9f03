//! [`Pipeline::backfill`]: the `SNAPSHOT` / `INITIAL` listing of the `path` prefixes, page by
//! page, resumable from any point.
//!
//! ```text
//!  for each prefix (cursor/<name>/backfill/<prefix> = {token, listed, done}):
//!    list one page after `token` (ListObjectsV2 / OSS list, `page-size` keys)
//!    rate limit (one token per object) ─▶ ingest the page's objects
//!       │  ✗ backfill.after-ingest   a restart lists the page again: its objects are duplicates
//!    save {token: next, listed, done: no next}   (compare-and-set)
//!       │  ✗ backfill.after-page     a restart continues with the next page
//!  every prefix done ─▶ mark the listing done (INITIAL hands over to the queue)
//! ```
//!
//! A page's token is saved only once every object of the page is done (staged, duplicate,
//! ignored or dead-lettered). Objects that failed retryably, or that a live batch elsewhere is
//! landing, are tried again a few times; if they still are not done the backfill stops there,
//! and the next call lists that page again. An object refused for good (`on-error = fail`) is
//! written to the dead-letter destination with its error, so it does not block the listing.
//!
//! Listed objects become created changes with the listing's ETag (normalised: no quotes,
//! lowercase) and the modification time as event time; a queue event for the same version has
//! the same bucket, key and ETag, so an object seen by both lands once. A listing without ETags
//! (s3s-fs lists none) is completed with a HEAD per object, a few at a time, because the ETag is
//! what identifies the version.

use std::time::{Duration, Instant};

use floe_checkpoint::{StoreExt, now_ms};
use floe_core::retry::{Retry, RetryPolicy};
use floe_core::{Error, ErrorKind, ObjectChange, Operation, Result};
use floe_queue::Phase;
use floe_storage::{ObjectMeta, ObjectStore};
use futures::{StreamExt, TryStreamExt};
use serde::{Deserialize, Serialize};

use super::land::far_future;
use super::{CloudSource, normalized};
use crate::deadletter::{DeadLetter, DeadLetterWriter};
use crate::ingest::BatchReport;
use crate::pipeline::Pipeline;
use crate::protocol::ack::Ack;

/// Tries of a page's objects that are not done before the backfill stops at that page.
const PAGE_TRIES: u32 = 3;
/// The waits between tries of a page: 0.5 s, then 1 s.
const PAGE_RETRY: RetryPolicy =
    RetryPolicy::new(Duration::from_millis(500), Duration::from_secs(4))
        .with_max_attempts(PAGE_TRIES);
/// HEAD requests in flight when a listing reports no ETags.
const HEADS_IN_FLIGHT: usize = 16;

/// Progress of one prefix, under `cursor/<name>/backfill/<prefix>`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PrefixState {
    /// The continuation token of the next page; `None` before the first page (and after the
    /// last).
    pub token: Option<String>,
    /// Objects listed and landed so far.
    pub listed: u64,
    /// Whether the last page is done.
    pub done: bool,
    /// When the first page was listed, ms since the epoch.
    pub started_ms: i64,
    /// When the state last moved.
    pub updated_ms: i64,
}

/// Where one prefix stands (reports and progress lines).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PrefixProgress {
    /// The prefix (empty: the whole bucket).
    pub prefix: String,
    /// Objects listed and landed so far, over every run.
    pub listed: u64,
    /// Objects of the page just landed (0 in a report).
    pub page: usize,
    /// Whether the prefix is finished.
    pub done: bool,
}

/// Why [`Pipeline::backfill`] returned.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum BackfillStop {
    /// Every prefix is listed; the listing is marked done.
    #[default]
    Done,
    /// It stopped before the deadline; the next call resumes.
    Deadline,
    /// Objects of a page are still not done; the next call lists that page again.
    Failures,
    /// The source's listing finished earlier (an `INITIAL` source past its listing).
    NotListing,
}

/// What [`Pipeline::backfill`] did.
#[derive(Debug, Default)]
pub struct BackfillReport {
    /// Why it returned.
    pub stop: BackfillStop,
    /// Pages listed in this call.
    pub pages: usize,
    /// Objects listed in this call.
    pub listed: u64,
    /// Objects refused for good and dead-lettered.
    pub dead_lettered: usize,
    /// Every prefix, where it stands.
    pub prefixes: Vec<PrefixProgress>,
    /// Why objects are not done (when [`BackfillStop::Failures`]).
    pub failures: Vec<String>,
    /// The ingest batches.
    pub batches: Vec<BatchReport>,
}

fn prefix_key(src: &CloudSource, prefix: &str) -> String {
    format!("{}backfill/{prefix}", src.key_prefix())
}

fn listed_change(src: &CloudSource, bucket: &str, meta: ObjectMeta) -> ObjectChange {
    normalized(ObjectChange {
        operation: Operation::Created,
        provider: src.config.provider,
        bucket: bucket.to_owned(),
        key: meta.key,
        region: src.config.store.region.clone(),
        size: Some(meta.size),
        etag: meta.etag,
        version_id: meta.version_id,
        sequencer: None,
        event_time: meta.last_modified,
        event_name: crate::protocol::claim::LISTING_EVENT.into(),
        message_id: None,
    })
}

/// The listed objects with their ETags: those the listing left without one are asked for it
/// (an object gone meanwhile is dropped: its removal is the queue's to report).
async fn with_etags(store: &dyn ObjectStore, objects: Vec<ObjectMeta>) -> Result<Vec<ObjectMeta>> {
    if objects.iter().all(|m| m.etag.is_some()) {
        return Ok(objects);
    }
    let found: Vec<Option<ObjectMeta>> =
        futures::stream::iter(objects.into_iter().map(|m| async move {
            if m.etag.is_some() {
                return Ok::<_, floe_core::Error>(Some(m));
            }
            Ok(store.head(&m.key).await?.map(|h| ObjectMeta {
                etag: h.etag,
                version_id: h.version_id.or(m.version_id),
                last_modified: m.last_modified.or(h.last_modified),
                size: h.size,
                ..m
            }))
        }))
        .buffered(HEADS_IN_FLIGHT)
        .try_collect()
        .await?;
    Ok(found.into_iter().flatten().collect())
}

impl Pipeline {
    /// Reach what a cloud source names: the queue's attributes (no message is touched) and one
    /// key of the bucket. A queue or bucket that is not there, or that the credentials cannot
    /// use, is a configuration error naming it (`floe run` and `floe config check --connect` ask
    /// before landing anything). A local folder was checked when the pipeline opened.
    pub async fn check_source(&self) -> Result<()> {
        let Some(src) = &self.cloud else {
            return Ok(());
        };
        // A SNAPSHOT source never touches its queue, not even to look at it.
        if let Some(poller) = &src.poller
            && src.config.startup.mode != floe_queue::StartupMode::Snapshot
        {
            let consumer = poller.consumer();
            match consumer.check().await {
                Ok(()) => {}
                Err(e) if matches!(e.kind(), ErrorKind::NotFound | ErrorKind::Auth) => {
                    let option = match src.config.queue {
                        Some(crate::config::QueueConfig::Mns { .. }) => "source.queue-name",
                        _ => "source.queue-url",
                    };
                    return Err(Error::config(
                        option,
                        format!("cannot use the queue {}: {e}", consumer.queue()),
                    ));
                }
                Err(e) => return Err(e),
            }
        }
        let Some(listing) = &src.config.listing else {
            return Ok(());
        };
        let probe = ObjectChange {
            key: String::new(),
            ..listed_change(src, &listing.bucket, ObjectMeta::default())
        };
        let store = self.stores.store(&probe)?;
        let prefix = listing.prefixes.first().map(String::as_str).unwrap_or("");
        match store.list(prefix, None, 1).await {
            Ok(_) => Ok(()),
            Err(e) if matches!(e.kind(), ErrorKind::NotFound | ErrorKind::Auth) => {
                let option = match src.config.provider {
                    floe_core::Provider::Oss => "source.oss-bucket",
                    _ => "source.bucket",
                };
                Err(Error::config(
                    option,
                    format!("cannot list {}: {e}", store.url(prefix)),
                ))
            }
            Err(e) => Err(e),
        }
    }

    /// [`Pipeline::backfill_with`] without progress lines.
    pub async fn backfill(&self, deadline: Instant) -> Result<BackfillReport> {
        self.backfill_with(deadline, &mut |_| {}).await
    }

    /// List the source's `path` prefixes and land every object, resuming where an earlier
    /// call (of any instance) stopped; see the module doc. Stops listing before `deadline`
    /// (when less time is left than the longest page took, at least a second); `on_page` is
    /// called after every page. When every prefix is done the listing is marked done, and an
    /// `INITIAL` source moves on to its queue.
    pub async fn backfill_with(
        &self,
        deadline: Instant,
        on_page: &mut (dyn FnMut(&PrefixProgress) + Send),
    ) -> Result<BackfillReport> {
        let src = self.cloud_source()?.clone();
        let Some(listing) = src.config.listing.clone() else {
            return Err(Error::config(
                "source.path",
                "the source lists no bucket: set oss-bucket (or bucket) and scan.startup.mode = SNAPSHOT or INITIAL",
            ));
        };
        let mut report = BackfillReport::default();
        // A source whose startup mode lists nothing (a queue source that names its bucket) is
        // backfilled when asked as a one-off SNAPSHOT of the bucket: a resumable position of its
        // own, the queue's cursor untouched. An object the queue delivers too lands once.
        let one_off = !src.config.lists();
        if !one_off {
            let decision = src.cursor.start(&src.config.startup, now_ms()).await?;
            if decision.phase() != Phase::Listing {
                report.stop = BackfillStop::NotListing;
                return Ok(report);
            }
        }
        // The store of the listed bucket is the one its changes resolve to.
        let probe = ObjectChange {
            key: String::new(),
            ..listed_change(&src, &listing.bucket, ObjectMeta::default())
        };
        let store = self.stores.store(&probe)?;
        let prefixes: Vec<String> = if listing.prefixes.is_empty() {
            vec![String::new()]
        } else {
            listing.prefixes.clone()
        };
        let mut reserve = Duration::from_secs(1);
        let mut stopped = None;
        for prefix in &prefixes {
            let key = if one_off {
                format!("{}snapshot/{prefix}", src.key_prefix())
            } else {
                prefix_key(&src, prefix)
            };
            let (mut state, mut version) =
                match self.checkpoint.get_json::<PrefixState>(&key).await? {
                    Some((s, v)) => (s, Some(v)),
                    None => (PrefixState::default(), None),
                };
            while !state.done && stopped.is_none() {
                let remaining = deadline.saturating_duration_since(Instant::now());
                if remaining <= reserve {
                    stopped = Some(BackfillStop::Deadline);
                    break;
                }
                let started = Instant::now();
                let page = store
                    .list(prefix, state.token.as_deref(), listing.page_size)
                    .await?;
                let objects = with_etags(store.as_ref(), page.objects).await?;
                let changes: Vec<ObjectChange> = objects
                    .into_iter()
                    .map(|m| listed_change(&src, &listing.bucket, m))
                    .collect();
                if let Some(l) = &src.limiter
                    && !changes.is_empty()
                {
                    l.acquire(changes.len()).await;
                }
                if let Err(failures) = self.land_page(&changes, &mut report).await? {
                    report.failures = failures;
                    stopped = Some(BackfillStop::Failures);
                    break;
                }
                self.faults.hit("backfill.after-ingest").await;
                report.pages += 1;
                report.listed += changes.len() as u64;

                // Save where the next page starts (compare-and-set: another instance may have
                // moved the same prefix on; then continue from its state).
                let mut next = state.clone();
                next.token = page.next_token;
                next.done = next.token.is_none();
                next.listed += changes.len() as u64;
                next.started_ms = if state.started_ms == 0 {
                    now_ms()
                } else {
                    state.started_ms
                };
                next.updated_ms = now_ms();
                let written = match &version {
                    None => self.checkpoint.insert_json(&key, &next, None).await?,
                    Some(v) => self.checkpoint.update_json(&key, &next, v, None).await?,
                };
                match written {
                    Some(v) => {
                        state = next;
                        version = Some(v);
                    }
                    None => {
                        tracing::info!(prefix = %prefix, "another instance moved this prefix on; continuing from its position");
                        match self.checkpoint.get_json::<PrefixState>(&key).await? {
                            Some((s, v)) => {
                                state = s;
                                version = Some(v);
                            }
                            None => {
                                state = PrefixState::default();
                                version = None;
                            }
                        }
                    }
                }
                self.faults.hit("backfill.after-page").await;
                let progress = PrefixProgress {
                    prefix: prefix.clone(),
                    listed: state.listed,
                    page: changes.len(),
                    done: state.done,
                };
                tracing::info!(prefix = %prefix, listed = state.listed, done = state.done, "backfill page landed");
                on_page(&progress);
                reserve = reserve.max(started.elapsed());
            }
            report.prefixes.push(PrefixProgress {
                prefix: prefix.clone(),
                listed: state.listed,
                page: 0,
                done: state.done,
            });
        }
        if let Some(stop) = stopped {
            report.stop = stop;
            return Ok(report);
        }
        if !one_off {
            src.cursor.mark_listing_done(now_ms()).await?;
        }
        tracing::info!(source = %src.config.name, "backfill done");
        report.stop = BackfillStop::Done;
        Ok(report)
    }

    /// Land one page: `Ok(Ok(()))` when every object is done, `Ok(Err(why))` when some are
    /// still not done after [`PAGE_TRIES`] tries.
    async fn land_page(
        &self,
        changes: &[ObjectChange],
        report: &mut BackfillReport,
    ) -> Result<std::result::Result<(), Vec<String>>> {
        let mut pending: Vec<ObjectChange> = changes.to_vec();
        let mut tries = Retry::new(PAGE_RETRY);
        while !pending.is_empty() {
            let landing = self.land_changes(&pending, far_future()).await?;
            let mut retry = Vec::new();
            let mut refused = Vec::new();
            let mut why = Vec::new();
            for (c, verdict) in pending.iter().zip(landing.acks) {
                match verdict {
                    Ack::Done => {}
                    Ack::Leave { why: e, .. } if !e.is_retryable() => {
                        refused.push((c.clone(), e.to_string()))
                    }
                    Ack::Leave { why: e, .. } => {
                        why.push(format!("{}: {e}", c.url()));
                        retry.push(c.clone());
                    }
                }
            }
            let batches = landing.batches;
            report.batches.extend(batches);
            if !refused.is_empty() {
                self.dead_letter_listed(&refused).await?;
                report.dead_lettered += refused.len();
            }
            if retry.is_empty() {
                return Ok(Ok(()));
            }
            let not_done = Error::new(ErrorKind::Conflict, why.join("; "));
            let Ok(delay) = tries.next_delay(not_done) else {
                return Ok(Err(why));
            };
            tracing::warn!(
                objects = retry.len(),
                attempt = tries.attempts(),
                "backfill: objects not done; trying again"
            );
            tries.sleep(delay).await;
            pending = retry;
        }
        Ok(Ok(()))
    }

    /// Dead letters for listed objects refused for good, so the listing can go on.
    async fn dead_letter_listed(&self, refused: &[(ObjectChange, String)]) -> Result<()> {
        let batch = format!("backfill-{}", uuid::Uuid::now_v7());
        let mut dead = DeadLetterWriter::new(self.dead_letters.clone(), &batch);
        for (c, reason) in refused {
            let url = self
                .stores
                .store(c)
                .map(|s| s.url(&c.key))
                .unwrap_or_else(|_| c.url());
            tracing::warn!(url = %url, reason = %reason, "listed object refused; dead-lettered");
            dead.add(&DeadLetter {
                time: chrono::Utc::now().to_rfc3339(),
                batch: batch.clone(),
                route: String::new(),
                bucket: c.bucket.clone(),
                key: c.key.clone(),
                url,
                line: None,
                reason: format!("refused during the backfill: {reason}"),
                raw: String::new(),
            })
            .await?;
        }
        dead.flush().await
    }
}
