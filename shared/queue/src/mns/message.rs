//! What the MNS calls return: received messages, a changed visibility, batch-delete failures.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use floe_core::{Error, Result};

/// One received message, as the service sent it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReceivedMessage {
    /// `MessageId`.
    pub message_id: String,
    /// `ReceiptHandle`: valid until `next_visible_time_ms`; needed to delete the message.
    pub receipt_handle: String,
    /// `MessageBody`, raw (entities resolved, nothing else): maybe base64, maybe JSON; see
    /// [`ReceivedMessage::decoded_body`].
    pub body: String,
    /// `MessageBodyMD5` (uppercase hex of the body as sent).
    pub body_md5: String,
    /// `EnqueueTime`, epoch milliseconds.
    pub enqueue_time_ms: i64,
    /// `FirstDequeueTime`, epoch milliseconds.
    pub first_dequeue_time_ms: i64,
    /// `NextVisibleTime`, epoch milliseconds: the handle expires then.
    pub next_visible_time_ms: i64,
    /// `DequeueCount`: how many times the message has been received, this time included.
    pub dequeue_count: u32,
    /// `Priority`.
    pub priority: u32,
    /// `MessageGroupId`, for FIFO queues.
    pub message_group_id: Option<String>,
}

impl ReceivedMessage {
    /// The body's bytes; see [`decode_body`].
    pub fn decoded_body(&self) -> Result<Vec<u8>> {
        decode_body(&self.body).map_err(|e| e.with_context("message_id", self.message_id.clone()))
    }
}

/// Decode a message body that may or may not be base64 (SDKs differ in their defaults).
///
/// The body is trimmed; if it then starts with `{` it is JSON and returned as is, otherwise it
/// is base64-decoded (ASCII whitespace inside is ignored, as line-wrapping encoders add it).
pub fn decode_body(raw: &str) -> Result<Vec<u8>> {
    let trimmed = raw.trim();
    if trimmed.starts_with('{') {
        return Ok(trimmed.as_bytes().to_vec());
    }
    let compact: String = trimmed
        .chars()
        .filter(|c| !c.is_ascii_whitespace())
        .collect();
    STANDARD.decode(compact.as_bytes()).map_err(|e| {
        Error::invalid_input("mns message body is neither json nor base64").with_source(e)
    })
}

/// The result of ChangeMessageVisibility.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChangedVisibility {
    /// The new receipt handle; the old one no longer works.
    pub receipt_handle: String,
    /// When the message becomes visible again, epoch milliseconds.
    pub next_visible_time_ms: i64,
}

/// One receipt handle that BatchDeleteMessage could not delete.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BatchDeleteFailure {
    /// The handle, as sent.
    pub receipt_handle: String,
    /// `ErrorCode`, e.g. `MessageNotExist` (an expired handle: harmless) or `ReceiptHandleError`.
    pub error_code: String,
    /// `ErrorMessage`.
    pub error_message: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bodies_are_json_or_base64() {
        for (raw, want) in [
            ("{\"a\":1}", Some("{\"a\":1}")),
            ("  {\"a\":1}\n", Some("{\"a\":1}")),
            ("eyJhIjoxfQ==", Some("{\"a\":1}")),
            (" eyJhIjox\nfQ== ", Some("{\"a\":1}")),
            ("", Some("")),
            ("not base64!", None),
        ] {
            let got = decode_body(raw).ok();
            assert_eq!(got.as_deref(), want.map(str::as_bytes), "{raw:?}");
        }
    }
}
