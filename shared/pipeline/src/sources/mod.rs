//! Cloud sources: a bucket listing (backfill) and a queue of bucket notifications (MNS, SQS),
//! feeding [`Pipeline::ingest`](crate::Pipeline::ingest).
//!
//! - [`stores`]: the object stores of the buckets events name, and the object-store checkpoint.
//! - [`queue`]: [`Pipeline::poll_queue`](crate::Pipeline::poll_queue): receive, filter by the
//!   startup decision, parse, ingest, delete what is staged.
//! - [`backfill`]: [`Pipeline::backfill`](crate::Pipeline::backfill): the `SNAPSHOT` /
//!   `INITIAL` listing, resumable page by page.
//! - [`land`]: [`Pipeline::land`](crate::Pipeline::land): deliveries of any source landed in
//!   batches of whole deliveries, with a verdict (acknowledge or leave) for each.
//! - [`local`]: the local folder source, a scan against the object records.
//! - [`rounds`]: `floe run` over a cloud source: one pass (listing, then the queue until an empty
//!   poll, then commit) or continuously.
//!
//! The startup decision (`floe_queue::startup`) says which phase a source is in; it is taken
//! once per source name and kept in the checkpoint table, so every instance and every later run
//! agree on it:
//!
//! ```text
//!  cursor/<name> ── Listing ──▶ backfill(deadline): for each `path` prefix
//!                    │            list a page (token from cursor/<name>/backfill/<prefix>)
//!                    │            ─▶ ingest (claims dedupe by bucket/key/eTag) ─▶ staged
//!                    │            ─▶ save the next token ─▶ … ─▶ prefix done
//!                    │          every prefix done ─▶ mark the listing done
//!                    ▼
//!               ─ Queue ────▶ poll_queue(deadline): receive (rate limited)
//!                    │            poison (> max-deliveries) ─▶ dead letter + delete
//!                    │            enqueued before the start ─▶ delete unprocessed
//!                    │            parse ─▶ ingest (visibility kept) ─▶ all changes done?
//!                    │                 yes ─▶ delete (the ack point: what it produced is staged)
//!                    │                 no  ─▶ left for redelivery, its error remembered
//!                    ▼
//!               ─ Done (SNAPSHOT after its listing): nothing more
//! ```
//!
//! Checkpoint keys of a source, next to the decision at `cursor/<name>`:
//! `cursor/<name>/backfill/<prefix>` ([`backfill::PrefixState`]) and
//! `cursor/<name>/failed/<message id>` ([`queue::MessageFailure`], kept for the dedupe TTL).

pub mod backfill;
pub mod land;
pub mod local;
pub mod queue;
pub mod rounds;
pub mod stores;

use std::sync::Arc;

use floe_checkpoint::CheckpointStore;
#[cfg(feature = "queue-clients")]
use floe_core::Secret;
use floe_core::{Error, ObjectChange, Result};
#[cfg(feature = "queue-clients")]
use floe_queue::mns::{MnsClient, MnsConfig, MnsConsumer};
#[cfg(feature = "queue-clients")]
use floe_queue::sqs::{SqsConfig, SqsConsumer};
use floe_queue::{Poller, QueueConsumer, RateLimiter, StartupCursor};
#[cfg(feature = "queue-clients")]
use floe_signing::{CredentialSource, Credentials};
use futures::future::BoxFuture;

pub use backfill::{BackfillReport, PrefixProgress};
pub use queue::PollReport;

use crate::config::{CloudSourceConfig, QueueConfig};
use crate::protocol::claim::normalize_etag;

/// A cloud source, opened: its cursor, its queue (if any) and the rate limiter its queue and
/// listing share.
#[derive(Debug)]
pub struct CloudSource {
    /// The configuration.
    pub config: CloudSourceConfig,
    /// The startup decision under `cursor/<name>`.
    pub cursor: StartupCursor,
    /// The queue with the consumer options applied (mns, sqs).
    pub poller: Option<Poller>,
    /// `scan.rate-limit.records-per-second`, shared by the queue and the listing.
    pub limiter: Option<Arc<RateLimiter>>,
}

impl CloudSource {
    /// Open the source: the cursor, and the queue client when `queues` can open it (no request
    /// is sent); without `queues` a configured queue is never opened.
    pub async fn open(
        config: &CloudSourceConfig,
        checkpoint: Arc<dyn CheckpointStore>,
        queues: Option<QueueOpener>,
    ) -> Result<Self> {
        let limiter = config
            .options
            .records_per_second
            .map(|r| Arc::new(RateLimiter::new(r)));
        let consumer = match (&config.queue, queues) {
            (Some(queue), Some(open)) => Some(open(queue).await?),
            _ => None,
        };
        let poller = match consumer {
            None => None,
            Some(c) => {
                let p = Poller::new(c, config.options.clone())
                    .map_err(|e| source_option(e, "source"))?;
                Some(match &limiter {
                    Some(l) => p.with_limiter(l.clone()),
                    None => p,
                })
            }
        };
        Ok(CloudSource {
            cursor: StartupCursor::new(checkpoint, config.name.clone())
                .map_err(|e| source_option(e, "source"))?,
            config: config.clone(),
            poller,
            limiter,
        })
    }

    /// `cursor/<name>/`: where the source's own keys live.
    pub fn key_prefix(&self) -> String {
        format!("{}/", self.cursor.key())
    }
}

/// Opens the client of a configured queue; no request is sent.
pub type QueueOpener = for<'a> fn(&'a QueueConfig) -> BoxFuture<'a, Result<Arc<dyn QueueConsumer>>>;

/// The queue clients this crate was built with: MNS and SQS under the `queue-clients` feature,
/// else none, and a configured queue is then never opened. A function that never polls opens
/// its pipeline without them ([`Pipeline::open_without_queue_clients`](crate::Pipeline::open_without_queue_clients)),
/// so they are not linked into it even when cargo turned the feature on for the whole workspace.
pub fn queue_clients() -> Option<QueueOpener> {
    #[cfg(feature = "queue-clients")]
    {
        Some(|queue| Box::pin(open_consumer(queue)))
    }
    #[cfg(not(feature = "queue-clients"))]
    {
        None
    }
}

/// The queue's client, built without sending a request.
#[cfg(feature = "queue-clients")]
async fn open_consumer(queue: &QueueConfig) -> Result<Arc<dyn QueueConsumer>> {
    Ok(match queue {
        QueueConfig::Mns {
            endpoint,
            queue,
            access_key_id,
            access_key_secret,
            security_token,
        } => {
            let credentials = mns_credentials(
                access_key_id.as_deref(),
                access_key_secret.as_ref(),
                security_token.as_ref(),
                |k| std::env::var(k).ok(),
            )?;
            let client = MnsClient::new(MnsConfig::new(endpoint, queue, credentials))
                .map_err(|e| source_option(e, "source"))?;
            Arc::new(MnsConsumer::new(client))
        }
        QueueConfig::Sqs {
            queue_url,
            endpoint,
            region,
            access_key_id,
            access_key_secret,
            security_token,
        } => {
            let mut c = SqsConfig::new(queue_url);
            if let Some(e) = endpoint {
                c = c.with_endpoint(e);
            }
            if let Some(r) = region {
                c = c.with_region(r);
            }
            if let (Some(id), Some(secret)) = (access_key_id, access_key_secret) {
                c = c.with_keys(id, secret.clone(), security_token.clone());
            }
            let consumer = SqsConsumer::new(c)
                .await
                .map_err(|e| source_option(e, "source"))?;
            Arc::new(consumer)
        }
    })
}

/// MNS keys from the configuration (as they are), else the platform's: on Function Compute the
/// latest invocation's keys, else the `ALIBABA_CLOUD_*` environment variables read now, else the
/// rest of the Alibaba credential chain ([`floe_signing::alibaba`]).
#[cfg(feature = "queue-clients")]
fn mns_credentials(
    id: Option<&str>,
    secret: Option<&Secret>,
    token: Option<&Secret>,
    env: impl Fn(&str) -> Option<String>,
) -> Result<CredentialSource> {
    if let (Some(id), Some(secret)) = (id, secret) {
        let c = Credentials::new(id, secret.clone());
        return Ok(CredentialSource::fixed(match token {
            Some(t) => c.with_security_token(t.clone()),
            None => c,
        }));
    }
    Ok(floe_signing::alibaba::default_source(env))
}

/// A configuration error of a queue crate, named under `section` (`source.endpoint`).
fn source_option(e: Error, section: &str) -> Error {
    crate::config::source::in_section(e, section)
}

/// A change as the sources hand it to ingest: the ETag normalised (see
/// [`normalize_etag`]), so a listing and an event of one version record the same identity.
pub(crate) fn normalized(mut c: ObjectChange) -> ObjectChange {
    c.etag = c.etag.as_deref().map(normalize_etag);
    c
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(feature = "queue-clients")]
    #[test]
    fn mns_keys_come_from_the_config_then_the_environment() {
        let s = mns_credentials(Some("AK"), Some(&Secret::new("SK")), None, |_| None).unwrap();
        assert!(matches!(&s, CredentialSource::Static(c) if c.access_key_id() == "AK"));
        let s = mns_credentials(None, None, None, |k| Some(format!("env-{k}"))).unwrap();
        let CredentialSource::Alibaba(c) = s else {
            panic!("{s:?}")
        };
        assert_eq!(c.access_key_id(), "env-ALIBABA_CLOUD_ACCESS_KEY_ID");
        assert!(c.security_token().is_some());
        // No keys anywhere: the rest of the Alibaba chain, asked at the first request.
        let s = mns_credentials(None, None, None, |_| None).unwrap();
        assert!(matches!(s, CredentialSource::AlibabaChain(_)), "{s:?}");
    }

    #[test]
    fn queue_errors_are_named_under_the_section() {
        let e = source_option(Error::config("endpoint", "bad"), "source");
        assert!(e.to_string().contains("`source.endpoint`: bad"), "{e}");
        let e = source_option(Error::config("source.x", "bad"), "source");
        assert!(e.to_string().contains("`source.x`"), "{e}");
    }
}
