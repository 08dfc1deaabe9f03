//! The event model: every payload floe receives becomes a list of [`ObjectChange`]s.
//!
//! Shapes understood by [`parse_payload`]:
//!
//! | payload | where it comes from |
//! |---|---|
//! | `{"events":[…]}` | FC OSS trigger; an MNS message body (raw JSON or base64) |
//! | `{"Records":[{"eventSource":"aws:s3",…}]}` | Lambda S3 notification; an SQS message body |
//! | `{"Records":[{"eventSource":"aws:sqs","body":…}]}` | Lambda SQS event source (body: S3 JSON or an SNS envelope) |
//! | `{"Type":"Notification","Message":…}` | an SQS body when SNS sits between S3 and SQS |
//! | `{"Records":[{"EventSource":"aws:sns","Sns":{…}}]}` | Lambda SNS event |
//! | `{"Event":"s3:TestEvent",…}` | sent once when S3 notifications are configured: acknowledged, ignored |
//!
//! FC's MNS queue and topic triggers wrap an MNS body in an envelope of their own:
//! [`pushed_messages`] reads any pushed payload, envelopes included, into its messages.
//!
//! Keys: S3 sends keys form-URL-encoded (`+` for space, `%2F` for `/` in moto), so they are always
//! decoded. OSS samples show plain UTF-8 keys and no documentation says otherwise, so OSS keys are
//! kept as sent unless [`ParseOptions::oss_keys_url_encoded`] says to decode them.

mod key;
mod parse;
mod pushed;

use std::fmt;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

pub use key::{decode_form_component, file_name};
pub use parse::{Message, ParseOptions, Parsed, decode_mns_body, parse_payload};
pub use pushed::{MnsMessage, Pushed, mns_messages, pushed_messages};

/// What happened to the object.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Operation {
    /// Created or overwritten.
    Created,
    /// Deleted (or a delete marker was placed on it).
    Removed,
}

impl Operation {
    /// `created` / `removed`.
    pub fn as_str(self) -> &'static str {
        match self {
            Operation::Created => "created",
            Operation::Removed => "removed",
        }
    }
}

impl fmt::Display for Operation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Which object store the change happened in; decides the URL scheme.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Provider {
    /// Alibaba Cloud OSS (`oss://`).
    Oss,
    /// AWS S3 or an S3-compatible store (`s3://`).
    S3,
    /// A local folder treated as a bucket (`file://`).
    Local,
}

/// One normalised object change, whatever payload it came in.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ObjectChange {
    /// Created or removed.
    pub operation: Operation,
    /// The store, for the URL scheme.
    pub provider: Provider,
    /// Bucket name (for a local folder: the configured bucket name).
    pub bucket: String,
    /// Object key, decoded.
    pub key: String,
    /// Region of the bucket, without an `oss-` prefix.
    pub region: Option<String>,
    /// Size in bytes (absent for removals).
    pub size: Option<u64>,
    /// The entity tag without quotes.
    pub etag: Option<String>,
    /// Version id, when the bucket is versioned.
    pub version_id: Option<String>,
    /// S3's per-key ordering token (hex, compare after left-padding).
    pub sequencer: Option<String>,
    /// When the change happened (or the object's modification time for listings).
    pub event_time: Option<DateTime<Utc>>,
    /// The event name without the `oss:`/`s3:` prefix, e.g. `ObjectCreated:PutObject`.
    pub event_name: String,
    /// The delivering message's id (SQS `messageId`, MNS `MessageId`), when there was one.
    pub message_id: Option<String>,
}

impl ObjectChange {
    /// A creation of `key` in `bucket`, with nothing else known (no size, version, sequencer
    /// or time): what a probe or a test needs; fill the rest with struct update syntax.
    pub fn created(provider: Provider, bucket: impl Into<String>, key: impl Into<String>) -> Self {
        ObjectChange {
            operation: Operation::Created,
            provider,
            bucket: bucket.into(),
            key: key.into(),
            region: None,
            size: None,
            etag: None,
            version_id: None,
            sequencer: None,
            event_time: None,
            event_name: String::new(),
            message_id: None,
        }
    }

    /// The object's URL: `oss://bucket/key`, `s3://bucket/key` or `file:///abs/path`.
    ///
    /// For a local folder, `bucket` holds the folder's absolute path in [`ObjectChange::url_root`]
    /// form; callers that know the folder pass it to [`ObjectChange::url_with_root`].
    pub fn url(&self) -> String {
        match self.provider {
            Provider::Oss => format!("oss://{}/{}", self.bucket, self.key),
            Provider::S3 => format!("s3://{}/{}", self.bucket, self.key),
            Provider::Local => format!("file://{}/{}", self.bucket, self.key),
        }
    }

    /// Whether the change appended to the object (OSS `AppendObject`): the bytes it had before
    /// are unchanged, so only the bytes after what already landed are new.
    pub fn is_append(&self) -> bool {
        self.operation == Operation::Created && self.event_name == "ObjectCreated:AppendObject"
    }

    /// The last path segment of the key.
    pub fn file_name(&self) -> &str {
        file_name(&self.key)
    }

    /// Compare two S3 sequencers for the same key: `Some(Less)` when `self` is older.
    /// `None` when either side has none (OSS, local, moto).
    pub fn sequencer_cmp(&self, other: &ObjectChange) -> Option<std::cmp::Ordering> {
        compare_sequencers_opt(self.sequencer.as_deref(), other.sequencer.as_deref())
    }
}

/// Compare two optional sequencers; `None` when either is missing.
pub fn compare_sequencers_opt(a: Option<&str>, b: Option<&str>) -> Option<std::cmp::Ordering> {
    Some(compare_sequencers(a?, b?))
}

/// Compare two S3 sequencer values: hex strings of varying length, compared after left-padding
/// the shorter with zeros (AWS's documented rule).
pub fn compare_sequencers(a: &str, b: &str) -> std::cmp::Ordering {
    let width = a.len().max(b.len());
    let pad = |s: &str| format!("{s:0>width$}").to_ascii_uppercase();
    pad(a).cmp(&pad(b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sequencers_compare_after_padding() {
        use std::cmp::Ordering::*;
        assert_eq!(compare_sequencers("0A", "00B"), Less);
        assert_eq!(
            compare_sequencers("0055AED6DCD90281E5", "0055AED6DCD90281E6"),
            Less
        );
        assert_eq!(compare_sequencers("FF", "0FF"), Equal);
        assert_eq!(compare_sequencers("100", "FF"), Greater);
    }
}
