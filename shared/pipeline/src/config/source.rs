//! `[source]` for buckets and queues, and `[checkpoint] type = "object-store"`.
//!
//! The queue options keep the OSS CDC connector's names (`../seeds/oss-cdc-connector.txt`), so a
//! connector's `WITH (…)` block carries over option for option:
//!
//! ```toml
//! [source]
//! type = "mns"                      # mns | sqs (queue, optionally after a listing) | oss | s3 (listing only)
//! name = "oss-events"               # the source's name in the checkpoint table (default: type-queue)
//! endpoint = "http://1234.mns.cn-hangzhou.aliyuncs.com"
//! region = "cn-hangzhou"
//! queue-name = "oss-events"
//! # access-key-id / access-key-secret: leave them out to sign with the platform's keys (on FC the
//! # latest invocation's); keys written here (even "${env:…}") are used as they are, never renewed
//! scan.startup.mode = "INITIAL"     # EARLIEST_OFFSET | LATEST_OFFSET | COMMITTED_OFFSET | TIMESTAMP | INITIAL | SNAPSHOT
//! oss-endpoint = "https://oss-cn-hangzhou.aliyuncs.com"
//! oss-bucket = "landing"
//! path = "data/log/,data/csv/"
//! batch-size = 8
//! polling-wait-time = "5s"
//! ```
//!
//! | option | types | default | meaning |
//! |---|---|---|---|
//! | `name` | all | `<type>-<queue or bucket>` | the source's name: its cursor is `cursor/<name>` in the checkpoint table (letters, digits, `-`, `_`, `.`) |
//! | `endpoint` | mns (required), sqs | sqs: AWS's | the MNS account endpoint `http(s)://<account>.mns.<region>.aliyuncs.com`; for SQS an endpoint override |
//! | `region` | mns (required), sqs | sqs: the URL's region, then `AWS_REGION` | the queue's region; for MNS also the OSS region's fallback |
//! | `queue-name` | mns (required), oss | | the MNS queue; on an `oss` source it makes the source `mns` |
//! | `queue-url` | sqs (required), s3 | | the SQS queue URL; on an `s3` source it makes the source `sqs` (events from that queue, `bucket` for backfills) |
//! | `access-key-id`, `access-key-secret`, `security-token` | mns, sqs | MNS: the platform's keys (on Function Compute the latest invocation's `x-fc-*` keys, else `ALIBABA_CLOUD_ACCESS_KEY_ID` / `_SECRET` / `ALIBABA_CLOUD_SECURITY_TOKEN`), asked before each request; SQS: the AWS default chain | the queue's keys (secret and token are never printed); also the object store's unless `s3.*` keys are set |
//! | `scan.startup.mode` | mns, sqs | `COMMITTED_OFFSET` | see below; `oss` / `s3` sources accept only `SNAPSHOT` (their default) |
//! | `scan.startup.timestamp-millis` | mns, sqs | | the start of `TIMESTAMP`, epoch ms; required by it |
//! | `batch-size` | mns, sqs | 1 | messages per receive: 1–16 (MNS), 1–10 (SQS) |
//! | `polling-wait-time` | mns, sqs | `10s` | long-poll wait, whole seconds: 0–30 s (MNS), 0–20 s (SQS) |
//! | `delete-max-retries` | mns, sqs | 3 | retries of a failed delete (0–100) |
//! | `max-deliveries` | mns, sqs | 5 | a message received more often is dead-lettered with its last error and deleted (1–1000) |
//! | `visibility-extension` | mns, sqs | `30s` | how much longer a message stays hidden per extension while its batch runs |
//! | `scan.rate-limit.records-per-second` | all | none | messages and listed objects handed out per second (> 0) |
//! | `path` | all | everything | comma-separated key prefixes the `SNAPSHOT` / `INITIAL` listing covers |
//! | `oss-bucket` (or `bucket`) | mns, oss (required); sqs, s3 (`bucket`) | | the bucket the listing covers; required by `SNAPSHOT`, `INITIAL` and `path` |
//! | `oss-endpoint` | mns, oss | `https://oss-<oss-region>.aliyuncs.com` | OSS's endpoint; `s3.endpoint` wins when set; a bare host gets `https://` |
//! | `oss-region` | mns, oss | `region` | OSS's region (`cn-hangzhou`) |
//! | `oss-enable-v4-signature` | mns, oss | false | floe always signs OSS requests with SigV4 through OSS's S3-compatible API; `true` only checks that `oss-region` (or `region`) is set, as the connector does |
//! | `page-size` | all | 1000 | objects per listing page (1–1000): one page is one ingest step and one saved continuation token |
//! | `s3.endpoint` | all | AWS's (S3), `oss-endpoint` (OSS) | the object store's endpoint for reading objects |
//! | `s3.region` | all | `oss-region`, `region` (mns, sqs), then `AWS_REGION` | its signing region |
//! | `s3.path-style-access` | all | false | `endpoint/bucket/key` addressing (local servers need it; OSS refuses it) |
//! | `s3.access-key-id`, `s3.secret-access-key`, `s3.session-token` | all | the queue's keys, then the default chain | keys for reading objects |
//!
//! Startup modes, exactly as wired (the decision is taken once per source and kept under
//! `cursor/<name>`; see `floe_queue::startup`). A queue has no offsets: a message's position is
//! its enqueue time, and a message is deleted only after what it produced is staged, so every
//! message still in the queue is unfinished work.
//!
//! | mode | lists `path` | takes from the queue |
//! |---|---|---|
//! | `EARLIEST_OFFSET` | no | every message in the queue, whenever enqueued |
//! | `LATEST_OFFSET` | no | messages enqueued from the first start on; older ones are deleted unprocessed |
//! | `COMMITTED_OFFSET` | no | resumes the stored decision; with none, decides as `LATEST_OFFSET` |
//! | `TIMESTAMP` | no | messages enqueued from `scan.startup.timestamp-millis` on; older ones are deleted unprocessed |
//! | `INITIAL` | yes, first (resumable) | once the listing is done: messages enqueued from the listing's start on; older ones are deleted unprocessed (the listing saw their objects). An object seen by both lands once |
//! | `SNAPSHOT` | yes | nothing: the queue is never touched |
//!
//! `[checkpoint] type = "object-store"`: the checkpoint table as objects in a bucket (conditional
//! writes), for instances that share no disk:
//!
//! | option | default | meaning |
//! |---|---|---|
//! | `url` | | `s3://bucket/prefix/` or `oss://bucket/prefix/`: provider, bucket and prefix in one (the form the deployment templates use); or set the three below |
//! | `bucket` | required without `url` | the bucket |
//! | `prefix` | `floe/checkpoint/` | the key prefix of the entries |
//! | `provider` | the source's (`oss` for mns/oss, else `s3`) | `s3` or `oss` |
//! | `endpoint`, `region`, `path-style-access`, `access-key-id`, `secret-access-key`, `session-token` | the source's object-store settings | as the `s3.*` options of the source |
//!
//! `[dead-letter]` with `path = "s3://bucket/prefix/"` or `"oss://bucket/prefix/"` takes the same
//! six connection options with the same defaults (no `provider`: the scheme names the store; an
//! `oss://` bucket with no endpoint gets `https://oss-<region>.aliyuncs.com`); see
//! [`DeadLetterConfig`].

use floe_core::{Error, Provider, Result, Secret};
use floe_queue::{QueueKind, QueueOptions, StartupConfig, StartupMode};

use super::opts::Opts;
use super::{CheckpointConfig, DeadLetterConfig, SourceConfig};

/// Options that `floe_queue` reads (its error messages name them without the section).
const QUEUE_OPTION_KEYS: [&str; 6] = floe_queue::options::keys::ALL;

/// How to reach the object store objects are read from (and, for the object-store checkpoint,
/// written to). Unset fields fall back as the module doc says.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct StoreSettings {
    /// Endpoint URL; default none (AWS's regional endpoint, or OSS's from the region).
    pub endpoint: Option<String>,
    /// Signing region; default none (`AWS_REGION`, the profile).
    pub region: Option<String>,
    /// Path-style addressing; default false.
    pub path_style: bool,
    /// Access key id; default none (the default credential chain).
    pub access_key_id: Option<String>,
    /// Secret access key.
    pub secret_access_key: Option<Secret>,
    /// Session / STS token.
    pub session_token: Option<Secret>,
}

/// Which queue a cloud source pulls.
#[derive(Clone, Debug, PartialEq)]
pub enum QueueConfig {
    /// Alibaba MNS.
    Mns {
        /// `endpoint`: the account endpoint.
        endpoint: String,
        /// `queue-name`.
        queue: String,
        /// `access-key-id`; none: `ALIBABA_CLOUD_ACCESS_KEY_ID`.
        access_key_id: Option<String>,
        /// `access-key-secret`; none: `ALIBABA_CLOUD_ACCESS_KEY_SECRET`.
        access_key_secret: Option<Secret>,
        /// `security-token`; none: `ALIBABA_CLOUD_SECURITY_TOKEN` when the keys come from the
        /// environment.
        security_token: Option<Secret>,
    },
    /// AWS SQS.
    Sqs {
        /// `queue-url`.
        queue_url: String,
        /// `endpoint`: an endpoint override; default AWS's.
        endpoint: Option<String>,
        /// `region`; default the URL's, then `AWS_REGION`.
        region: Option<String>,
        /// `access-key-id`; none: the AWS default chain.
        access_key_id: Option<String>,
        /// `access-key-secret`.
        access_key_secret: Option<Secret>,
        /// `security-token`.
        security_token: Option<Secret>,
    },
}

/// The `SNAPSHOT` / `INITIAL` listing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ListingConfig {
    /// `oss-bucket` / `bucket`.
    pub bucket: String,
    /// `path`: prefixes; empty means the whole bucket.
    pub prefixes: Vec<String>,
    /// `page-size`: objects per listing page (default 1000).
    pub page_size: usize,
}

/// A bucket or queue source (`type = "s3" | "oss" | "mns" | "sqs"`); see the module doc.
#[derive(Clone, Debug, PartialEq)]
pub struct CloudSourceConfig {
    /// `name`: the cursor's name.
    pub name: String,
    /// The store objects come from by default: OSS for `mns` / `oss`, S3 for `sqs` / `s3`.
    pub provider: Provider,
    /// The queue, for `mns` / `sqs`.
    pub queue: Option<QueueConfig>,
    /// `scan.startup.mode` and `scan.startup.timestamp-millis`.
    pub startup: StartupConfig,
    /// The consumer options (`batch-size`, …, `scan.rate-limit.records-per-second`).
    pub options: QueueOptions,
    /// The listing, when a bucket is configured.
    pub listing: Option<ListingConfig>,
    /// The object store's settings (with every fallback applied).
    pub store: StoreSettings,
}

impl CloudSourceConfig {
    /// Whether the startup mode lists the bucket.
    pub fn lists(&self) -> bool {
        matches!(
            self.startup.mode,
            StartupMode::Snapshot | StartupMode::Initial
        )
    }
}

/// Re-issue a configuration error of another crate (`floe_queue` names `batch-size`) under its
/// full name (`source.batch-size`); names already under `section` stay as they are.
pub(crate) fn in_section(e: Error, section: &str) -> Error {
    if e.kind() != floe_core::ErrorKind::Config {
        return e;
    }
    let Some((_, option)) = e.context().iter().find(|(k, _)| *k == "option") else {
        return e;
    };
    if option.starts_with(&format!("{section}.")) {
        return e;
    }
    let option = option.clone();
    let problem = e
        .message()
        .split_once("`: ")
        .map(|(_, p)| p.to_owned())
        .unwrap_or_else(|| e.message().to_owned());
    Error::config(&format!("{section}.{option}"), problem)
}

/// An endpoint URL: `http(s)://…`, or a bare host given `https://` (the connector's examples
/// write `oss-endpoint` both ways).
fn endpoint(o: &Opts, key: &str, value: String) -> Result<String> {
    let v = value.trim().trim_end_matches('/').to_owned();
    if v.is_empty() || v.contains(char::is_whitespace) {
        return Err(o.err(key, format!("`{value}` is not an endpoint")));
    }
    if v.starts_with("http://") || v.starts_with("https://") {
        Ok(v)
    } else if v.contains("://") {
        Err(o.err(key, format!("`{value}` must be an http(s) url")))
    } else {
        Ok(format!("https://{v}"))
    }
}

fn secret(o: &Opts, key: &str) -> Result<Option<Secret>> {
    Ok(o.string(key)?.filter(|s| !s.is_empty()).map(Secret::new))
}

/// A key pair where both or neither must be set.
fn key_pair(o: &Opts, id_key: &str, secret_key: &str) -> Result<(Option<String>, Option<Secret>)> {
    let id = o.string(id_key)?.filter(|s| !s.is_empty());
    let secret = secret(o, secret_key)?;
    match (&id, &secret) {
        (Some(_), None) => Err(o.err(secret_key, format!("is required with `{id_key}`"))),
        (None, Some(_)) => Err(o.err(id_key, format!("is required with `{secret_key}`"))),
        _ => Ok((id, secret)),
    }
}

/// The name a source gets when `name` is not set: `<type>-<thing>` with characters outside
/// the cursor alphabet replaced.
fn default_name(kind: &str, thing: &str) -> String {
    let clean: String = thing
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                c
            } else {
                '-'
            }
        })
        .collect();
    format!("{kind}-{clean}")
}

/// The region of an SQS queue URL `https://sqs.<region>.amazonaws.com/<account>/<queue>`.
fn sqs_url_region(url: &str) -> Option<String> {
    let host = url.split("://").nth(1)?.split('/').next()?;
    let rest = host.strip_prefix("sqs.")?;
    let region = rest.split('.').next()?;
    (!region.is_empty() && rest.contains("amazonaws")).then(|| region.to_owned())
}

/// `[source]` of `type = "s3" | "oss" | "mns" | "sqs"`.
pub(super) fn cloud_source(kind: &str, o: &Opts) -> Result<SourceConfig> {
    // A bucket source that names its notification queue takes its events from that queue: the
    // way a user describes "S3 bucket, events through SQS" (or "OSS bucket, events through MNS").
    let kind = match kind {
        "s3" if o.has("queue-url") => "sqs",
        "oss" if o.has("queue-name") => "mns",
        other => other,
    };
    let queue_kind = match kind {
        "mns" => Some(QueueKind::Mns),
        "sqs" => Some(QueueKind::Sqs),
        _ => None,
    };
    let provider = match kind {
        "mns" | "oss" => Provider::Oss,
        _ => Provider::S3,
    };

    // Everything floe_queue parses goes through one map, read here so `finish` knows them.
    let mut queue_opts = std::collections::BTreeMap::new();
    for key in QUEUE_OPTION_KEYS.iter().copied().chain([
        floe_queue::startup::keys::MODE,
        floe_queue::startup::keys::TIMESTAMP_MILLIS,
    ]) {
        if let Some(v) = o.string(key)? {
            queue_opts.insert(key.to_owned(), v);
        }
    }
    let options = if let Some(k) = queue_kind {
        QueueOptions::from_options(&queue_opts, k).map_err(|e| in_section(e, "source"))?
    } else {
        for key in QUEUE_OPTION_KEYS {
            if key != floe_queue::options::keys::RATE_LIMIT && queue_opts.contains_key(key) {
                return Err(o.err(key, format!("a `{kind}` source has no queue")));
            }
        }
        // The rate limit's checks are the queue's: parse with any kind.
        QueueOptions::from_options(&queue_opts, QueueKind::Sqs)
            .map_err(|e| in_section(e, "source"))?
    };
    let startup = if queue_kind.is_some() {
        StartupConfig::from_options(&queue_opts).map_err(|e| in_section(e, "source"))?
    } else {
        let mut opts = queue_opts.clone();
        opts.entry(floe_queue::startup::keys::MODE.to_owned())
            .or_insert_with(|| "SNAPSHOT".into());
        let s = StartupConfig::from_options(&opts).map_err(|e| in_section(e, "source"))?;
        if s.mode != StartupMode::Snapshot {
            return Err(o.err(
                floe_queue::startup::keys::MODE,
                format!(
                    "a `{kind}` source only lists its bucket (SNAPSHOT); for {} use an mns or sqs source",
                    s.mode
                ),
            ));
        }
        s
    };

    // The queue.
    let mut region = o.string("region")?.filter(|s| !s.is_empty());
    let (access_key_id, access_key_secret) = if queue_kind.is_some() {
        key_pair(o, "access-key-id", "access-key-secret")?
    } else {
        (None, None)
    };
    let security_token = if queue_kind.is_some() {
        secret(o, "security-token")?
    } else {
        None
    };
    let queue = match queue_kind {
        Some(QueueKind::Mns) => {
            let ep = endpoint(o, "endpoint", o.required("endpoint")?)?;
            if region.is_none() {
                return Err(o.err("region", "is required (the mns region, e.g. cn-hangzhou)"));
            }
            let queue = o.required("queue-name")?;
            if queue.is_empty()
                || !queue
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-')
            {
                return Err(o.err(
                    "queue-name",
                    format!("`{queue}` is not an mns queue name (letters, digits and `-`)"),
                ));
            }
            Some(QueueConfig::Mns {
                endpoint: ep,
                queue,
                access_key_id: access_key_id.clone(),
                access_key_secret: access_key_secret.clone(),
                security_token: security_token.clone(),
            })
        }
        Some(QueueKind::Sqs) => {
            let url = o.required("queue-url")?;
            region = region.or_else(|| sqs_url_region(&url));
            if !(url.starts_with("https://") || url.starts_with("http://")) || url.ends_with('/') {
                return Err(o.err(
                    "queue-url",
                    format!(
                        "`{url}` is not an sqs queue url (https://sqs.<region>.amazonaws.com/<account>/<queue>)"
                    ),
                ));
            }
            let ep = o
                .string("endpoint")?
                .map(|e| endpoint(o, "endpoint", e))
                .transpose()?;
            Some(QueueConfig::Sqs {
                region: region.clone(),
                queue_url: url,
                endpoint: ep,
                access_key_id: access_key_id.clone(),
                access_key_secret: access_key_secret.clone(),
                security_token: security_token.clone(),
            })
        }
        None => None,
    };

    // OSS options (the connector's) and the object store.
    let oss = provider == Provider::Oss;
    let oss_only = |key: &str| -> Result<()> {
        if !oss && o.has(key) {
            return Err(o.err(key, format!("is an oss option; a `{kind}` source reads s3")));
        }
        Ok(())
    };
    for key in [
        "oss-endpoint",
        "oss-region",
        "oss-enable-v4-signature",
        "oss-bucket",
    ] {
        oss_only(key)?;
    }
    let oss_region = o.string("oss-region")?.filter(|s| !s.is_empty());
    let v4 = o.bool("oss-enable-v4-signature", false)?;
    if v4 && oss_region.is_none() && region.is_none() {
        return Err(o.err(
            "oss-region",
            "is required when oss-enable-v4-signature is true (or set region)",
        ));
    }
    let oss_endpoint = o
        .string("oss-endpoint")?
        .map(|e| endpoint(o, "oss-endpoint", e))
        .transpose()?;
    let (s3_id, s3_secret) = key_pair(o, "s3.access-key-id", "s3.secret-access-key")?;
    let s3_token = secret(o, "s3.session-token")?;
    let store_region = o
        .string("s3.region")?
        .filter(|s| !s.is_empty())
        .or_else(|| oss_region.clone())
        .or_else(|| {
            if oss || kind == "sqs" {
                region.clone()
            } else {
                None
            }
        });
    let store_endpoint = match o.string("s3.endpoint")? {
        Some(e) => Some(endpoint(o, "s3.endpoint", e)?),
        None => oss_endpoint.or_else(|| {
            if oss {
                store_region
                    .as_ref()
                    .map(|r| format!("https://oss-{}.aliyuncs.com", r.trim_start_matches("oss-")))
            } else {
                None
            }
        }),
    };
    let (store_id, store_secret, store_token) = if s3_id.is_some() {
        (s3_id, s3_secret, s3_token)
    } else {
        (access_key_id, access_key_secret, security_token)
    };
    let store = StoreSettings {
        endpoint: store_endpoint,
        region: store_region,
        path_style: o.bool("s3.path-style-access", false)?,
        access_key_id: store_id,
        secret_access_key: store_secret,
        session_token: store_token,
    };

    // The listing.
    let bucket = match (o.string("oss-bucket")?, o.string("bucket")?) {
        (Some(_), Some(_)) => {
            return Err(o.err("bucket", "set either oss-bucket or bucket, not both"));
        }
        (a, b) => a.or(b).filter(|s| !s.is_empty()),
    };
    let bucket_key = if oss { "oss-bucket" } else { "bucket" };
    if let Some(b) = &bucket
        && (b.contains('/') || b.contains(char::is_whitespace))
    {
        return Err(o.err(bucket_key, format!("`{b}` is not a bucket name")));
    }
    let prefixes = o.list("path")?;
    let page_size = o.u64_in("page-size", 1000, 1..=1000)? as usize;
    let lists = matches!(startup.mode, StartupMode::Snapshot | StartupMode::Initial);
    if bucket.is_none() && (lists || !prefixes.is_empty()) {
        let why = if lists {
            format!("is required by scan.startup.mode = {}", startup.mode)
        } else {
            "is required with `path`".to_owned()
        };
        return Err(o.err(bucket_key, why));
    }
    if lists && oss && store.endpoint.is_none() {
        return Err(o.err(
            "oss-endpoint",
            format!(
                "is required by scan.startup.mode = {} (or set oss-region)",
                startup.mode
            ),
        ));
    }
    let listing = bucket.map(|bucket| ListingConfig {
        bucket,
        prefixes,
        page_size,
    });

    let name = match o.string("name")? {
        Some(n) => n,
        None => match (&queue, &listing) {
            (Some(QueueConfig::Mns { queue, .. }), _) => default_name(kind, queue),
            (Some(QueueConfig::Sqs { queue_url, .. }), _) => default_name(
                kind,
                queue_url.rsplit('/').next().unwrap_or(queue_url.as_str()),
            ),
            (None, Some(l)) => default_name(kind, &l.bucket),
            (None, None) => return Err(o.err(bucket_key, "is required")),
        },
    };
    if name.is_empty()
        || !name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
    {
        return Err(o.err(
            "name",
            format!("`{name}` is not a source name (letters, digits, `-`, `_`, `.`)"),
        ));
    }
    Ok(SourceConfig::Cloud(Box::new(CloudSourceConfig {
        name,
        provider,
        queue,
        startup,
        options,
        listing,
        store,
    })))
}

/// The connection options a section writing to a bucket of its own may set
/// (`[checkpoint] type = "object-store"`, `[dead-letter]` with a bucket path).
pub(super) const STORE_OVERRIDE_KEYS: [&str; 6] = [
    "endpoint",
    "region",
    "path-style-access",
    "access-key-id",
    "secret-access-key",
    "session-token",
];

/// [`STORE_OVERRIDE_KEYS`] read from `o` over `base`: what is set replaces it; keys replace
/// `base`'s keys as a whole (a new key id never goes out with the old secret or token).
fn store_overrides(o: &Opts, base: StoreSettings) -> Result<StoreSettings> {
    let token = secret(o, "session-token")?;
    let (id, key_secret) = key_pair(o, "access-key-id", "secret-access-key")?;
    Ok(StoreSettings {
        endpoint: match o.string("endpoint")? {
            Some(e) => Some(endpoint(o, "endpoint", e)?),
            None => base.endpoint,
        },
        region: o.string("region")?.or(base.region),
        path_style: o.bool("path-style-access", base.path_style)?,
        access_key_id: id.clone().or(base.access_key_id),
        secret_access_key: if id.is_some() {
            key_secret
        } else {
            base.secret_access_key
        },
        session_token: if id.is_some() {
            token
        } else {
            base.session_token
        },
    })
}

/// `s3://bucket/prefix/` or `oss://bucket/prefix/`: the provider, the bucket and the key prefix
/// (`/`-terminated; empty for the bucket's root). None when it is not such a url.
pub(crate) fn object_url(url: &str) -> Option<(Provider, String, String)> {
    let (scheme, rest) = url.trim().split_once("://")?;
    let provider = match scheme {
        "s3" => Provider::S3,
        "oss" => Provider::Oss,
        _ => return None,
    };
    let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
    if bucket.is_empty() || bucket.contains(char::is_whitespace) {
        return None;
    }
    let prefix = floe_storage::key_prefix(prefix)?;
    Some((provider, bucket.to_owned(), prefix))
}

/// `[checkpoint] type = "object-store"`; unset settings come from the source's object store.
pub(super) fn object_store_checkpoint(o: &Opts, source: &SourceConfig) -> Result<CheckpointConfig> {
    let (default_provider, base) = match source {
        SourceConfig::Cloud(c) => (c.provider, c.store.clone()),
        SourceConfig::Local { .. } => (Provider::S3, StoreSettings::default()),
    };
    let (provider, bucket, prefix) = match o.string("url")? {
        Some(url) => {
            for key in ["provider", "bucket", "prefix"] {
                if o.has(key) {
                    return Err(o.err(key, "set either `url` or provider/bucket/prefix, not both"));
                }
            }
            let (provider, bucket, prefix) = object_url(&url).ok_or_else(|| {
                o.err(
                    "url",
                    format!("`{url}` is not `s3://bucket/prefix/` or `oss://bucket/prefix/`"),
                )
            })?;
            (provider, bucket, prefix)
        }
        None => {
            let provider = match o.string("provider")?.as_deref() {
                None => default_provider,
                Some("s3") => Provider::S3,
                Some("oss") => Provider::Oss,
                Some(other) => {
                    return Err(o.err("provider", format!("`{other}`: expected s3 or oss")));
                }
            };
            let bucket = o.required("bucket")?;
            if bucket.is_empty() || bucket.contains('/') {
                return Err(o.err("bucket", format!("`{bucket}` is not a bucket name")));
            }
            let prefix = o
                .string("prefix")?
                .unwrap_or_else(|| "floe/checkpoint/".into());
            (provider, bucket, prefix)
        }
    };
    let store = store_overrides(o, base)?;
    if provider == Provider::Oss && store.endpoint.is_none() {
        return Err(o.err("endpoint", "an oss checkpoint bucket needs an endpoint"));
    }
    Ok(CheckpointConfig::ObjectStore {
        provider,
        bucket,
        prefix,
        store,
    })
}

/// `[dead-letter]`: `path` a folder (relative to the config file, through `resolve`), or
/// `s3://bucket/prefix/` / `oss://bucket/prefix/` with the connection options of
/// [`STORE_OVERRIDE_KEYS`] over the source's object-store settings (as the object-store
/// checkpoint takes them). The scheme names the store, so there is no `provider` option.
pub(super) fn dead_letter(
    o: &Opts,
    source: &SourceConfig,
    resolve: impl Fn(&str) -> std::path::PathBuf,
) -> Result<DeadLetterConfig> {
    let path = o.string("path")?.unwrap_or_else(|| "dead-letter".into());
    if o.has("provider") {
        return Err(o.err(
            "provider",
            "the scheme of `path` names the store (s3://… or oss://…); remove `provider`",
        ));
    }
    if !path.contains("://") {
        if path.trim().is_empty() {
            return Err(o.err("path", "is empty"));
        }
        if let Some(key) = STORE_OVERRIDE_KEYS.iter().find(|k| o.has(k)) {
            return Err(o.err(
                key,
                format!("only applies when `path` is an s3:// or oss:// location, not the folder `{path}`"),
            ));
        }
        return Ok(DeadLetterConfig::Local {
            path: resolve(&path),
        });
    }
    let Some((provider, bucket, prefix)) = object_url(&path) else {
        return Err(o.err(
            "path",
            format!(
                "`{path}` is not a dead-letter location: use a folder, \
                 s3://bucket/prefix/ or oss://bucket/prefix/"
            ),
        ));
    };
    let base = match source {
        SourceConfig::Cloud(c) => c.store.clone(),
        SourceConfig::Local { .. } => StoreSettings::default(),
    };
    let mut store = store_overrides(o, base)?;
    if provider == Provider::Oss && store.endpoint.is_none() {
        match &store.region {
            Some(r) => {
                store.endpoint = Some(format!(
                    "https://oss-{}.aliyuncs.com",
                    r.trim_start_matches("oss-")
                ))
            }
            None => {
                return Err(o.err(
                    "endpoint",
                    "an oss dead-letter bucket needs an endpoint (or a region)",
                ));
            }
        }
    }
    Ok(DeadLetterConfig::ObjectStore {
        provider,
        bucket: bucket.to_owned(),
        prefix,
        store,
    })
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::super::{FloeConfig, parse};
    use super::*;

    fn load(source: &str, extra: &str) -> Result<FloeConfig> {
        let text = format!("[source]\n{source}\n{extra}[[routes]]\ntable = \"a.b\"\n");
        FloeConfig::from_raw(parse(&text, false)?, Path::new("/cfg"))
    }

    fn cloud(c: &FloeConfig) -> &CloudSourceConfig {
        match &c.source {
            SourceConfig::Cloud(c) => c,
            other => panic!("not a cloud source: {other:?}"),
        }
    }

    const MNS: &str = "type = \"mns\"\nendpoint = \"http://1.mns.cn-hangzhou.aliyuncs.com\"\nregion = \"cn-hangzhou\"\nqueue-name = \"q-1\"\naccess-key-id = \"AK\"\naccess-key-secret = \"very-secret-sk\"\n";

    #[test]
    fn the_connector_examples_parse() {
        // Example 1: incremental from the queue, defaults everywhere.
        let c = load(MNS, "").unwrap();
        let s = cloud(&c);
        assert_eq!(s.name, "mns-q-1");
        assert_eq!(s.provider, Provider::Oss);
        assert_eq!(s.startup.mode, StartupMode::CommittedOffset);
        assert_eq!(s.options, QueueOptions::default());
        assert!(s.listing.is_none());
        assert_eq!(
            s.store.endpoint.as_deref(),
            Some("https://oss-cn-hangzhou.aliyuncs.com")
        );
        assert_eq!(s.store.region.as_deref(), Some("cn-hangzhou"));
        assert_eq!(s.store.access_key_id.as_deref(), Some("AK"));
        assert!(!format!("{c:?}").contains("very-secret"), "{c:?}");

        // Example 3: INITIAL over a path, with a bare oss-endpoint host (example 5's form).
        let c = load(
            &format!(
                "{MNS}scan.startup.mode = \"INITIAL\"\noss-endpoint = \"oss-cn-hangzhou.aliyuncs.com\"\noss-bucket = \"b\"\npath = \"data/log/,data/csv/\"\n"
            ),
            "",
        )
        .unwrap();
        let s = cloud(&c);
        assert!(s.lists());
        let l = s.listing.as_ref().unwrap();
        assert_eq!(l.bucket, "b");
        assert_eq!(l.prefixes, ["data/log/", "data/csv/"]);
        assert_eq!(
            s.store.endpoint.as_deref(),
            Some("https://oss-cn-hangzhou.aliyuncs.com")
        );

        // Example 4: tuning.
        let c = load(
            &format!("{MNS}batch-size = \"8\"\npolling-wait-time = \"5s\"\nmax-deliveries = 2\n"),
            "",
        )
        .unwrap();
        let s = cloud(&c);
        assert_eq!(s.options.batch_size, 8);
        assert_eq!(s.options.polling_wait, std::time::Duration::from_secs(5));
        assert_eq!(s.options.max_deliveries, 2);
    }

    #[test]
    fn sqs_and_bucket_sources() {
        let c = load(
            "type = \"sqs\"\nqueue-url = \"https://sqs.eu-west-1.amazonaws.com/1/landing-events\"\ns3.path-style-access = true\n",
            "",
        )
        .unwrap();
        let s = cloud(&c);
        assert_eq!(s.name, "sqs-landing-events");
        assert_eq!(s.provider, Provider::S3);
        let Some(QueueConfig::Sqs { region, .. }) = &s.queue else {
            panic!("{s:?}")
        };
        assert_eq!(region.as_deref(), Some("eu-west-1"));
        assert_eq!(s.store.region.as_deref(), Some("eu-west-1"));
        assert!(s.store.path_style);
        assert_eq!(s.store.endpoint, None);

        let c = load("type = \"s3\"\nbucket = \"landing\"\npath = \"a/\"\n", "").unwrap();
        let s = cloud(&c);
        assert_eq!(s.name, "s3-landing");
        assert_eq!(s.startup.mode, StartupMode::Snapshot);
        assert!(s.queue.is_none());
        assert_eq!(s.listing.as_ref().unwrap().prefixes, ["a/"]);

        let c = load(
            "type = \"oss\"\noss-bucket = \"b\"\noss-region = \"cn-beijing\"\n",
            "[checkpoint]\ntype = \"object-store\"\nbucket = \"state\"\n",
        )
        .unwrap();
        assert_eq!(
            cloud(&c).store.endpoint.as_deref(),
            Some("https://oss-cn-beijing.aliyuncs.com")
        );
        let CheckpointConfig::ObjectStore {
            provider,
            bucket,
            prefix,
            store,
        } = &c.checkpoint
        else {
            panic!("{:?}", c.checkpoint)
        };
        assert_eq!(
            (*provider, bucket.as_str(), prefix.as_str()),
            (Provider::Oss, "state", "floe/checkpoint/")
        );
        assert_eq!(store.region.as_deref(), Some("cn-beijing"));
    }

    #[test]
    fn the_deployment_templates_spellings() {
        // An s3 bucket whose events come through a queue, as template.yaml writes it.
        let c = load(
            "type = \"s3\"\nbucket = \"landing\"\nregion = \"eu-west-1\"\n\
             queue-url = \"https://sqs.eu-west-1.amazonaws.com/1/landing-events\"\npath = \"logs/\"\n",
            "[checkpoint]\ntype = \"object-store\"\nurl = \"s3://state/floe/checkpoint/\"\n",
        )
        .unwrap();
        let s = cloud(&c);
        assert_eq!(s.name, "sqs-landing-events");
        assert!(matches!(s.queue, Some(QueueConfig::Sqs { .. })), "{s:?}");
        assert_eq!(s.startup.mode, StartupMode::CommittedOffset);
        assert_eq!(s.listing.as_ref().unwrap().bucket, "landing");
        let CheckpointConfig::ObjectStore {
            provider,
            bucket,
            prefix,
            ..
        } = &c.checkpoint
        else {
            panic!("{:?}", c.checkpoint)
        };
        assert_eq!(
            (*provider, bucket.as_str(), prefix.as_str()),
            (Provider::S3, "state", "floe/checkpoint/")
        );

        // An oss bucket whose events come through an MNS queue; the checkpoint url without a
        // trailing slash still names a folder.
        let c = load(
            &format!("{MNS}type = \"oss\"\noss-bucket = \"landing\"\n").replacen(
                "type = \"mns\"\n",
                "",
                1,
            ),
            "[checkpoint]\ntype = \"object-store\"\nurl = \"oss://state/floe\"\n",
        )
        .unwrap();
        assert!(matches!(cloud(&c).queue, Some(QueueConfig::Mns { .. })));
        let CheckpointConfig::ObjectStore {
            provider, prefix, ..
        } = &c.checkpoint
        else {
            panic!("{:?}", c.checkpoint)
        };
        assert_eq!((*provider, prefix.as_str()), (Provider::Oss, "floe/"));

        assert_eq!(
            object_url("s3://b"),
            Some((Provider::S3, "b".into(), String::new()))
        );
        for bad in ["gs://b/p/", "s3:///p/", "s3://b//p", "b/p"] {
            assert_eq!(object_url(bad), None, "{bad}");
        }
    }

    #[test]
    fn every_bad_option_is_named() {
        let sqs = "type = \"sqs\"\nqueue-url = \"https://sqs.us-east-1.amazonaws.com/1/q\"\n";
        let cases: Vec<(String, &str, &str)> = vec![
            (
                MNS.replace("queue-name = \"q-1\"\n", ""),
                "",
                "source.queue-name",
            ),
            (
                MNS.replace("region = \"cn-hangzhou\"\n", ""),
                "",
                "source.region",
            ),
            (
                MNS.replace("endpoint = \"http://1.mns.cn-hangzhou.aliyuncs.com\"\n", ""),
                "",
                "source.endpoint",
            ),
            (
                MNS.replace("queue-name = \"q-1\"", "queue-name = \"q_1\""),
                "",
                "source.queue-name",
            ),
            (
                MNS.replace("access-key-id = \"AK\"\n", ""),
                "",
                "source.access-key-id",
            ),
            (format!("{MNS}batch-size = 17\n"), "", "source.batch-size"),
            (format!("{sqs}batch-size = 11\n"), "", "source.batch-size"),
            (
                format!("{MNS}polling-wait-time = \"31s\"\n"),
                "",
                "source.polling-wait-time",
            ),
            (
                format!("{MNS}delete-max-retries = \"-1\"\n"),
                "",
                "source.delete-max-retries",
            ),
            (
                format!("{MNS}max-deliveries = 0\n"),
                "",
                "source.max-deliveries",
            ),
            (
                format!("{MNS}scan.rate-limit.records-per-second = 0\n"),
                "",
                "source.scan.rate-limit.records-per-second",
            ),
            (
                format!("{MNS}scan.startup.mode = \"NEWEST\"\n"),
                "",
                "source.scan.startup.mode",
            ),
            (
                format!("{MNS}scan.startup.mode = \"TIMESTAMP\"\n"),
                "",
                "source.scan.startup.timestamp-millis",
            ),
            (
                format!("{MNS}scan.startup.mode = \"SNAPSHOT\"\n"),
                "",
                "source.oss-bucket",
            ),
            (format!("{MNS}path = \"a/\"\n"), "", "source.oss-bucket"),
            (
                format!("{MNS}oss-enable-v4-signature = \"yes\"\n"),
                "",
                "source.oss-enable-v4-signature",
            ),
            (format!("{MNS}colour = 1\n"), "", "source.colour"),
            (format!("{MNS}page-size = 5000\n"), "", "source.page-size"),
            (format!("{MNS}name = \"a/b\"\n"), "", "source.name"),
            (
                format!("{sqs}oss-bucket = \"b\"\n"),
                "",
                "source.oss-bucket",
            ),
            (
                "type = \"sqs\"\nqueue-url = \"sqs/q\"\n".into(),
                "",
                "source.queue-url",
            ),
            (
                format!("{sqs}s3.access-key-id = \"a\"\n"),
                "",
                "source.s3.secret-access-key",
            ),
            (
                format!("{sqs}s3.endpoint = \"ftp://x\"\n"),
                "",
                "source.s3.endpoint",
            ),
            ("type = \"s3\"\n".into(), "", "source.bucket"),
            (
                "type = \"s3\"\nbucket = \"b\"\nbatch-size = 2\n".into(),
                "",
                "source.batch-size",
            ),
            (
                "type = \"s3\"\nbucket = \"b\"\nscan.startup.mode = \"INITIAL\"\n".into(),
                "",
                "source.scan.startup.mode",
            ),
            (
                "type = \"oss\"\noss-bucket = \"b\"\n".into(),
                "",
                "source.oss-endpoint",
            ),
            (
                sqs.into(),
                "[checkpoint]\ntype = \"object-store\"\n",
                "checkpoint.bucket",
            ),
            (
                sqs.into(),
                "[checkpoint]\ntype = \"object-store\"\nbucket = \"b\"\nprovider = \"gcs\"\n",
                "checkpoint.provider",
            ),
            (
                sqs.into(),
                "[checkpoint]\ntype = \"object-store\"\nbucket = \"b\"\npath = \"x\"\n",
                "checkpoint.path",
            ),
            (
                sqs.into(),
                "[checkpoint]\ntype = \"object-store\"\nurl = \"gs://b/p/\"\n",
                "checkpoint.url",
            ),
            (
                sqs.into(),
                "[checkpoint]\ntype = \"object-store\"\nurl = \"s3://b/p/\"\nbucket = \"c\"\n",
                "checkpoint.bucket",
            ),
            (
                "type = \"s3\"\nbucket = \"b\"\nqueue-url = \"sqs/q\"\n".into(),
                "",
                "source.queue-url",
            ),
        ];
        for (source, extra, option) in cases {
            let err = load(&source, extra).unwrap_err();
            assert_eq!(err.kind(), floe_core::ErrorKind::Config, "{option}: {err}");
            assert!(
                err.to_string().contains(&format!("`{option}`")),
                "{option}: {err}"
            );
        }
    }

    #[test]
    fn dead_letters_go_to_a_folder_or_a_bucket_prefix() {
        let s3 = "type = \"s3\"\nbucket = \"landing\"\ns3.endpoint = \"http://127.0.0.1:9000\"\ns3.region = \"us-east-1\"\ns3.path-style-access = true\ns3.access-key-id = \"AK\"\ns3.secret-access-key = \"very-secret-sk\"\n";
        // The default: a folder next to the config file.
        let c = load(s3, "").unwrap();
        assert_eq!(
            c.dead_letter,
            DeadLetterConfig::Local {
                path: "/cfg/dead-letter".into()
            }
        );
        let c = load(s3, "[dead-letter]\npath = \"/var/dl\"\n").unwrap();
        assert_eq!(c.dead_letter.location(), "/var/dl");

        // s3://: the source's connection.
        let c = load(
            s3,
            "[dead-letter]\npath = \"s3://state/floe/dead-letter\"\n",
        )
        .unwrap();
        let DeadLetterConfig::ObjectStore {
            provider,
            bucket,
            prefix,
            store,
        } = &c.dead_letter
        else {
            panic!("{:?}", c.dead_letter)
        };
        assert_eq!(
            (*provider, bucket.as_str(), prefix.as_str()),
            (Provider::S3, "state", "floe/dead-letter/")
        );
        assert_eq!(store, &cloud(&c).store);
        assert_eq!(c.dead_letter.location(), "s3://state/floe/dead-letter/");
        assert!(!format!("{c:?}").contains("very-secret"), "{c:?}");

        // Overrides; new keys replace the source's as a pair.
        let c = load(
            s3,
            "[dead-letter]\npath = \"s3://state/\"\nendpoint = \"minio:9000\"\nregion = \"eu-west-1\"\npath-style-access = false\naccess-key-id = \"AK2\"\nsecret-access-key = \"SK2\"\n",
        )
        .unwrap();
        let DeadLetterConfig::ObjectStore { prefix, store, .. } = &c.dead_letter else {
            panic!()
        };
        assert_eq!(prefix, "");
        assert_eq!(store.endpoint.as_deref(), Some("https://minio:9000"));
        assert_eq!(store.region.as_deref(), Some("eu-west-1"));
        assert!(!store.path_style);
        assert_eq!(store.access_key_id.as_deref(), Some("AK2"));
        assert_eq!(store.session_token, None);

        // oss://: the source's OSS endpoint, or one made from the region.
        let c = load(
            "type = \"oss\"\noss-bucket = \"b\"\noss-region = \"cn-beijing\"\n",
            "[dead-letter]\npath = \"oss://state/floe/dead-letter/\"\n",
        )
        .unwrap();
        let DeadLetterConfig::ObjectStore {
            provider, store, ..
        } = &c.dead_letter
        else {
            panic!()
        };
        assert_eq!(*provider, Provider::Oss);
        assert_eq!(
            store.endpoint.as_deref(),
            Some("https://oss-cn-beijing.aliyuncs.com")
        );
        let c = load(
            "folder = \"b\"\n",
            "[dead-letter]\npath = \"oss://state/dl/\"\nregion = \"cn-hangzhou\"\n",
        )
        .unwrap();
        let DeadLetterConfig::ObjectStore { store, .. } = &c.dead_letter else {
            panic!()
        };
        assert_eq!(
            store.endpoint.as_deref(),
            Some("https://oss-cn-hangzhou.aliyuncs.com")
        );
    }

    #[test]
    fn bad_dead_letter_options_are_named() {
        let local = "folder = \"b\"\n";
        let cases = [
            ("path = \"gs://state/dl/\"", "dead-letter.path"),
            ("path = \"file:///tmp/dl\"", "dead-letter.path"),
            ("path = \"s3://\"", "dead-letter.path"),
            ("path = \"s3:///dl/\"", "dead-letter.path"),
            ("path = \"s3://state/a//b/\"", "dead-letter.path"),
            ("path = \"s3://state/../b/\"", "dead-letter.path"),
            ("path = \"\"", "dead-letter.path"),
            ("path = \"oss://state/dl/\"", "dead-letter.endpoint"),
            (
                "path = \"s3://state/dl/\"\nprovider = \"oss\"",
                "dead-letter.provider",
            ),
            (
                "path = \"dl\"\nendpoint = \"http://x\"",
                "dead-letter.endpoint",
            ),
            (
                "path = \"s3://state/\"\naccess-key-id = \"a\"",
                "dead-letter.secret-access-key",
            ),
            (
                "path = \"s3://state/\"\nendpoint = \"ftp://x\"",
                "dead-letter.endpoint",
            ),
            ("path = \"s3://state/\"\ncolour = 1", "dead-letter.colour"),
        ];
        for (section, option) in cases {
            let err = load(local, &format!("[dead-letter]\n{section}\n")).unwrap_err();
            assert_eq!(err.kind(), floe_core::ErrorKind::Config, "{option}: {err}");
            assert!(
                err.to_string().contains(&format!("`{option}`")),
                "{option}: {err}"
            );
        }
        // A secret is never in the message.
        let err = load(
            local,
            "[dead-letter]\npath = \"s3://state/\"\nsecret-access-key = \"very-secret-sk\"\n",
        )
        .unwrap_err();
        assert!(!err.to_string().contains("very-secret"), "{err}");
    }
}
