//! SDK failures as floe errors, named by the object's URL.
//!
//! A status means what [`floe_core::http::kind_for_status`] says for a write and
//! [`floe_core::http::kind_for_idempotent_status`] for a read; S3's codes refine it (`SlowDown`
//! and codes naming throttling are `Throttled` whatever the status).
//!
//! | what happened | kind | retryable |
//! |---|---|---|
//! | 404 (`NoSuchKey`, `NotFound`, `NoSuchBucket`) | `NotFound` | no |
//! | 401, 403 (`AccessDenied`, `SignatureDoesNotMatch`, `InvalidAccessKeyId`, …) | `Auth` | no |
//! | 409, 412 (`PreconditionFailed`, `ConditionalRequestConflict`) | `Conflict` | yes |
//! | 429, 503 (`SlowDown`), codes naming throttling | `Throttled` | yes |
//! | 408, other 5xx, timeouts, connection failures on a read | `Io` | yes |
//! | the same on a write (PUT, DELETE): the write may have happened | `StateUnknown` | yes |
//! | other 4xx | `InvalidInput` | no |
//! | a status that is no error (a 3xx the SDK did not follow) | `Protocol` | no |
//! | a response that does not parse | `Protocol` | no |
//! | the request could not be built | `Unexpected` | no |
//!
//! The SDK has already retried what it considers transient (its standard retry mode) before an
//! error reaches floe. The S3 error code is kept as the `s3_code` context pair.

use aws_sdk_s3::config::http::HttpResponse;
use aws_sdk_s3::error::{ProvideErrorMetadata, SdkError};
use floe_core::{Error, ErrorKind};

/// Whether the call writes (its outcome is unknown when it fails without an answer).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Op {
    Read,
    Write,
}

/// The context key under which the S3 error code is kept.
pub const CODE_CONTEXT: &str = "s3_code";

/// Map an SDK error of `verb` (e.g. "get") on `url`.
pub(crate) fn map<E>(verb: &str, url: &str, op: Op, err: SdkError<E, HttpResponse>) -> Error
where
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
{
    let unknown_outcome = || match op {
        Op::Read => ErrorKind::Io,
        Op::Write => ErrorKind::StateUnknown,
    };
    let (kind, detail, status, code) = match &err {
        SdkError::ConstructionFailure(_) => (
            ErrorKind::Unexpected,
            "the request could not be built".to_owned(),
            None,
            None,
        ),
        SdkError::TimeoutError(_) => (unknown_outcome(), "timed out".to_owned(), None, None),
        SdkError::DispatchFailure(d) => {
            let what = if d.is_timeout() {
                "timed out"
            } else if d.is_io() {
                "connection failed"
            } else {
                "request failed"
            };
            // A connection that never opened sent nothing; `is_io` covers both cases, so a
            // write is treated as unknown (the caller checks before retrying).
            (unknown_outcome(), what.to_owned(), None, None)
        }
        SdkError::ResponseError(r) => (
            ErrorKind::Protocol,
            "the response could not be read".to_owned(),
            Some(r.raw().status().as_u16()),
            None,
        ),
        SdkError::ServiceError(s) => {
            let status = s.raw().status().as_u16();
            let code = s.err().code().map(str::to_owned);
            let kind = kind_of(status, code.as_deref().unwrap_or(""), op);
            let detail = match (&code, s.err().message()) {
                (Some(c), Some(m)) => format!("{c} (http {status}): {m}"),
                (Some(c), None) => format!("{c} (http {status})"),
                _ => format!("http {status}"),
            };
            (kind, detail, Some(status), code)
        }
        _ => (unknown_outcome(), "request failed".to_owned(), None, None),
    };
    let mut e =
        Error::new(kind, format!("failed to {verb} {url}: {detail}")).with_context("url", url);
    if let Some(s) = status {
        e = e.with_context("http_status", s.to_string());
    }
    if let Some(c) = code {
        e = e.with_context(CODE_CONTEXT, c);
    }
    e.with_source(err)
}

fn kind_of(status: u16, code: &str, op: Op) -> ErrorKind {
    let lower = code.to_ascii_lowercase();
    let kind = match op {
        Op::Read => floe_core::http::kind_for_idempotent_status(status),
        Op::Write => floe_core::http::kind_for_status(status),
    };
    match kind {
        ErrorKind::InvalidInput | ErrorKind::Io | ErrorKind::StateUnknown
            if lower.contains("slowdown") || lower.contains("throttl") =>
        {
            ErrorKind::Throttled
        }
        kind => kind,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_and_codes_map_to_kinds() {
        for (status, code, op, kind, retryable) in [
            (404, "NoSuchKey", Op::Read, ErrorKind::NotFound, false),
            (403, "AccessDenied", Op::Read, ErrorKind::Auth, false),
            (
                403,
                "SignatureDoesNotMatch",
                Op::Write,
                ErrorKind::Auth,
                false,
            ),
            (
                412,
                "PreconditionFailed",
                Op::Write,
                ErrorKind::Conflict,
                true,
            ),
            (
                409,
                "ConditionalRequestConflict",
                Op::Write,
                ErrorKind::Conflict,
                true,
            ),
            (503, "SlowDown", Op::Read, ErrorKind::Throttled, true),
            (429, "", Op::Read, ErrorKind::Throttled, true),
            (500, "InternalError", Op::Read, ErrorKind::Io, true),
            (
                500,
                "InternalError",
                Op::Write,
                ErrorKind::StateUnknown,
                true,
            ),
            (
                400,
                "InvalidArgument",
                Op::Write,
                ErrorKind::InvalidInput,
                false,
            ),
        ] {
            let k = kind_of(status, code, op);
            assert_eq!(k, kind, "{status} {code}");
            assert_eq!(
                Error::new(k, "x").is_retryable(),
                retryable,
                "{status} {code}"
            );
        }
    }
}
