//! MNS failures as floe errors: the error code decides the kind and whether a retry may help;
//! without a code it means, the status does, as [`floe_core::http::kind_for_idempotent_status`]
//! says (every MNS call floe makes is safe to repeat: a received message whose answer was lost
//! comes back after its visibility timeout, deletes and visibility changes go by receipt).
//!
//! | code / status | kind | retryable |
//! |---|---|---|
//! | `SignatureDoesNotMatch`, `AccessDenied`, `InvalidAccessKeyId`, `TimeExpired`, other 401/403 | `Auth` | no |
//! | `QueueNotExist`, `MessageNotExist`, other 404 | `NotFound` | no |
//! | `ReceiptHandleError`, `InvalidArgument`, other 4xx | `InvalidInput` | no |
//! | 409, 412 | `Conflict` | yes |
//! | 429, 503, codes naming throttling or a QPS limit | `Throttled` | yes |
//! | other 5xx, network failures, timeouts | `Io` | yes |
//!
//! The MNS code is kept as the `mns_code` context pair; [`mns_code`] reads it back and
//! [`is_stale_receipt_handle`] answers the question a consumer asks after delete or
//! change-visibility fails.

use floe_core::{Error, ErrorKind};

use super::xml::ErrorBody;

/// Error codes the client treats specially.
pub mod codes {
    /// No such queue (404).
    pub const QUEUE_NOT_EXIST: &str = "QueueNotExist";
    /// No message (empty poll) or the receipt handle has expired (404).
    pub const MESSAGE_NOT_EXIST: &str = "MessageNotExist";
    /// The receipt handle is malformed or was replaced (400).
    pub const RECEIPT_HANDLE_ERROR: &str = "ReceiptHandleError";
    /// The signature did not match (403).
    pub const SIGNATURE_DOES_NOT_MATCH: &str = "SignatureDoesNotMatch";
    /// The key may not do this (403).
    pub const ACCESS_DENIED: &str = "AccessDenied";
    /// Unknown access key id (403).
    pub const INVALID_ACCESS_KEY_ID: &str = "InvalidAccessKeyId";
    /// The request `Date` is too far from the server's clock (403).
    pub const TIME_EXPIRED: &str = "TimeExpired";
    /// A parameter is out of range (400).
    pub const INVALID_ARGUMENT: &str = "InvalidArgument";
}

/// The context key under which the MNS error code is kept.
pub const CODE_CONTEXT: &str = "mns_code";

/// The MNS error code carried by `error`, if it came from an MNS error response.
pub fn mns_code(error: &Error) -> Option<&str> {
    error
        .context()
        .iter()
        .find(|(k, _)| *k == CODE_CONTEXT)
        .map(|(_, v)| v.as_str())
}

/// Whether `error` says a receipt handle is no longer valid (expired, or replaced by
/// ChangeMessageVisibility): the message will be, or already was, delivered again.
pub fn is_stale_receipt_handle(error: &Error) -> bool {
    matches!(
        mns_code(error),
        Some(codes::MESSAGE_NOT_EXIST | codes::RECEIPT_HANDLE_ERROR)
    )
}

/// The error for a non-success HTTP response of `op` on `queue`.
pub(crate) fn from_response(
    op: &str,
    queue: &str,
    status: u16,
    body: Option<&ErrorBody>,
    request_id: Option<&str>,
) -> Error {
    let code = body.map(|b| b.code.as_str()).unwrap_or("");
    let kind = kind_of(status, code);
    let detail = match body {
        Some(b) if !b.code.is_empty() => format!("{} (http {status}): {}", b.code, b.message),
        _ => format!("http {status}"),
    };
    let mut e = Error::new(
        kind,
        format!("failed to {op} on mns queue {queue}: {detail}"),
    )
    .with_context("queue", queue)
    .with_context("http_status", status.to_string());
    if !code.is_empty() {
        e = e.with_context(CODE_CONTEXT, code);
    }
    let rid = body
        .map(|b| b.request_id.as_str())
        .filter(|r| !r.is_empty())
        .or(request_id);
    if let Some(rid) = rid {
        e = e.with_context("request_id", rid);
    }
    e
}

fn kind_of(status: u16, code: &str) -> ErrorKind {
    let lower = code.to_ascii_lowercase();
    match code {
        codes::SIGNATURE_DOES_NOT_MATCH
        | codes::ACCESS_DENIED
        | codes::INVALID_ACCESS_KEY_ID
        | codes::TIME_EXPIRED => ErrorKind::Auth,
        codes::QUEUE_NOT_EXIST | codes::MESSAGE_NOT_EXIST => ErrorKind::NotFound,
        _ if lower.contains("throttl") || lower.contains("qpslimit") => ErrorKind::Throttled,
        _ => floe_core::http::kind_for_idempotent_status(status),
    }
}

/// The error for a request that got no (complete) response.
pub(crate) fn from_transport(op: &str, queue: &str, e: reqwest::Error) -> Error {
    let what = if e.is_timeout() {
        "timed out"
    } else if e.is_connect() {
        "could not connect"
    } else {
        "request failed"
    };
    Error::new(
        ErrorKind::Io,
        format!("failed to {op} on mns queue {queue}: {what}"),
    )
    .with_context("queue", queue)
    .with_source(e)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_and_statuses_map_to_kinds() {
        for (status, code, kind, retryable) in [
            (403, "SignatureDoesNotMatch", ErrorKind::Auth, false),
            (403, "AccessDenied", ErrorKind::Auth, false),
            (401, "", ErrorKind::Auth, false),
            (404, "QueueNotExist", ErrorKind::NotFound, false),
            (404, "MessageNotExist", ErrorKind::NotFound, false),
            (400, "ReceiptHandleError", ErrorKind::InvalidInput, false),
            (400, "InvalidArgument", ErrorKind::InvalidInput, false),
            (429, "", ErrorKind::Throttled, true),
            (503, "Throttling", ErrorKind::Throttled, true),
            (500, "InternalError", ErrorKind::Io, true),
            (502, "", ErrorKind::Io, true),
        ] {
            let body = ErrorBody {
                code: code.into(),
                message: "m".into(),
                request_id: "rid".into(),
                host_id: String::new(),
            };
            let e = from_response("receive", "q", status, Some(&body), None);
            assert_eq!(e.kind(), kind, "{status} {code}");
            assert_eq!(e.is_retryable(), retryable, "{status} {code}");
            if !code.is_empty() {
                assert_eq!(mns_code(&e), Some(code));
            }
        }
        let e = from_response("delete", "q", 404, None, Some("rid"));
        assert_eq!(e.to_string(), "failed to delete on mns queue q: http 404");
        assert!(
            e.context()
                .iter()
                .any(|(k, v)| *k == "request_id" && v == "rid")
        );
    }
}
