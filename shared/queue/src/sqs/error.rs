//! SQS failures as floe errors: the error code first, then the status as
//! [`floe_core::http::kind_for_idempotent_status`] says (every SQS call floe makes is safe to
//! repeat, so a 5xx is plain `Io`).
//!
//! | what happened | kind | retryable |
//! |---|---|---|
//! | `ReceiptHandleIsInvalid`, `MessageNotInflight` (the receipt is stale) | `NotFound` | no |
//! | `AWS.SimpleQueueService.NonExistentQueue` / `QueueDoesNotExist`, 404 | `NotFound` | no |
//! | 401, 403, `AccessDenied`, `InvalidClientTokenId`, `SignatureDoesNotMatch` | `Auth` | no |
//! | 429, 503, codes naming throttling, `RequestThrottled`, `KmsThrottled` | `Throttled` | yes |
//! | 409, 412 | `Conflict` | yes |
//! | other 5xx, timeouts, connection failures | `Io` | yes |
//! | other 4xx | `InvalidInput` | no |
//!
//! The SQS error code is kept as the `sqs_code` context pair.

use aws_sdk_sqs::config::http::HttpResponse;
use aws_sdk_sqs::error::{ProvideErrorMetadata, SdkError};
use floe_core::{Error, ErrorKind};

/// The context key of the SQS error code.
pub const CODE_CONTEXT: &str = "sqs_code";

/// Codes that say a receipt handle no longer works.
pub const STALE_RECEIPT_CODES: [&str; 2] = ["ReceiptHandleIsInvalid", "MessageNotInflight"];

/// Map an SDK error of `op` on `queue`.
pub(crate) fn map<E>(op: &str, queue: &str, err: SdkError<E, HttpResponse>) -> Error
where
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
{
    let (kind, detail, status, code) = match &err {
        SdkError::ServiceError(s) => {
            let status = s.raw().status().as_u16();
            let code = s.err().code().map(str::to_owned);
            let kind = kind_of(status, code.as_deref().unwrap_or(""));
            let detail = match (&code, s.err().message()) {
                (Some(c), Some(m)) => format!("{c} (http {status}): {m}"),
                (Some(c), None) => format!("{c} (http {status})"),
                _ => format!("http {status}"),
            };
            (kind, detail, Some(status), code)
        }
        SdkError::ConstructionFailure(_) => (
            ErrorKind::Unexpected,
            "the request could not be built".to_owned(),
            None,
            None,
        ),
        SdkError::ResponseError(r) => (
            ErrorKind::Protocol,
            "the response could not be read".to_owned(),
            Some(r.raw().status().as_u16()),
            None,
        ),
        SdkError::TimeoutError(_) => (ErrorKind::Io, "timed out".to_owned(), None, None),
        _ => (ErrorKind::Io, "request failed".to_owned(), None, None),
    };
    let mut e = Error::new(
        kind,
        format!("failed to {op} on sqs queue {queue}: {detail}"),
    )
    .with_context("queue", queue);
    if let Some(s) = status {
        e = e.with_context("http_status", s.to_string());
    }
    if let Some(c) = code {
        e = e.with_context(CODE_CONTEXT, c);
    }
    e.with_source(err)
}

/// The kind for an SQS error code and HTTP status.
pub(crate) fn kind_of(status: u16, code: &str) -> ErrorKind {
    let lower = code.to_ascii_lowercase();
    if STALE_RECEIPT_CODES.contains(&code)
        || lower.contains("nonexistentqueue")
        || lower.contains("queuedoesnotexist")
    {
        ErrorKind::NotFound
    } else if matches!(
        code,
        "AccessDenied" | "AccessDeniedException" | "InvalidClientTokenId" | "SignatureDoesNotMatch"
    ) {
        ErrorKind::Auth
    } else if lower.contains("throttl") {
        ErrorKind::Throttled
    } else {
        floe_core::http::kind_for_idempotent_status(status)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_map_to_kinds() {
        for (status, code, kind) in [
            (400, "ReceiptHandleIsInvalid", ErrorKind::NotFound),
            (400, "MessageNotInflight", ErrorKind::NotFound),
            (
                400,
                "AWS.SimpleQueueService.NonExistentQueue",
                ErrorKind::NotFound,
            ),
            (400, "QueueDoesNotExist", ErrorKind::NotFound),
            (403, "InvalidClientTokenId", ErrorKind::Auth),
            (400, "ThrottlingException", ErrorKind::Throttled),
            (400, "RequestThrottled", ErrorKind::Throttled),
            (500, "InternalError", ErrorKind::Io),
            (400, "InvalidParameterValue", ErrorKind::InvalidInput),
        ] {
            assert_eq!(kind_of(status, code), kind, "{status} {code}");
        }
    }
}
