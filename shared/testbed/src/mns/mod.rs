//! An MNS queue emulator: a real HTTP server on `127.0.0.1` (ephemeral port) that speaks the
//! consumer side of the MNS queue API closely enough to test a client over the wire.
//!
//! ```text
//! test ──MnsEmulator::start(config)──▶ axum server (127.0.0.1:<port>)
//!   │  send_message / send_message_at         │ verify MNS signature (floe-signing)
//!   │  advance_clock                          │ GET    …/messages[?numOfMessages&waitseconds]
//!   └─ requests() (what clients sent)         │ DELETE …/messages[?ReceiptHandle] (batch: XML body)
//!                                             │ PUT    …/messages?ReceiptHandle&VisibilityTimeout
//! ```
//! What it models: per-queue visibility timeouts, `DequeueCount`, receipt handles that
//! expire at `NextVisibleTime` and are replaced by ChangeMessageVisibility, long polls that
//! return as soon as a message becomes available, batch limits (1..=16 messages, 0..=30 s),
//! 404 `MessageNotExist` for an empty poll, 404 `QueueNotExist`, 403 `SignatureDoesNotMatch`,
//! the `<Error>` body with an `x-mns-request-id` header, and BatchDeleteMessage's `<Errors>`.
//!
//! Choices where the public docs are silent (so tests should not depend on more than
//! "stale"): a handle replaced by ChangeMessageVisibility gives 400 `ReceiptHandleError`; an
//! expired handle, or one of a deleted message, gives 404 `MessageNotExist`; a handle the
//! emulator never issued gives 400 `ReceiptHandleError`; a partial BatchDeleteMessage answers
//! 404 with `<Errors>`.
//!
//! Time: the emulator's clock is the system clock plus an offset that
//! [`MnsEmulator::advance_clock`] moves forward, so visibility expiry can be tested without
//! waiting; short visibility timeouts (milliseconds) work too.

mod queue;
mod server;
mod xml;

pub use server::{MnsEmulator, MnsEmulatorConfig, RecordedRequest};

/// The JSON body OSS sends for an `ObjectCreated:PutObject` of `key` (ETag `etag`, `size` bytes)
/// in `bucket` of `region` at `time_ms` (raw; OSS itself base64-encodes it into the message).
pub fn oss_put_event(
    region: &str,
    bucket: &str,
    key: &str,
    etag: &str,
    size: u64,
    time_ms: i64,
) -> String {
    let time = chrono::DateTime::from_timestamp_millis(time_ms).expect("a time in range");
    serde_json::json!({"events": [{
        "eventName": "ObjectCreated:PutObject",
        "eventSource": "acs:oss",
        "eventTime": time.to_rfc3339(),
        "eventVersion": "1.0",
        "oss": {
            "bucket": {"arn": format!("acs:oss:{region}:1234567890:{bucket}"), "name": bucket, "ownerIdentity": "1234567890"},
            "object": {"deltaSize": size, "eTag": etag, "key": key, "size": size},
            "ossSchemaVersion": "1.0",
            "ruleId": "floe"
        },
        "region": region,
        "requestParameters": {"sourceIPAddress": "10.0.0.1"},
        "responseElements": {"requestId": "5F2A"},
        "userIdentity": {"principalId": "1234567890"}
    }]})
    .to_string()
}
