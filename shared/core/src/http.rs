//! What an HTTP status means to floe, before a client looks at its own error codes.
//!
//! Every client (S3, OSS, SQS, MNS, MaxCompute, the Iceberg REST and S3 Tables catalogs) starts
//! from [`kind_for_status`] and refines it with what the service says in the body (S3's
//! `SlowDown`, MaxCompute's `ODPS-…` codes, an Iceberg REST exception type, …), so that one
//! status means one thing everywhere unless a service documents otherwise.
//!
//! | status | kind | retryable by default |
//! |---|---|---|
//! | 400 | `InvalidInput` | no |
//! | 401, 403 | `Auth` | no |
//! | 404 | `NotFound` | no |
//! | 409, 412 | `Conflict` (a compare-and-set or optimistic write lost) | yes |
//! | 429 | `Throttled` | yes |
//! | 503 | `Throttled` (the service asks to come back later) | yes |
//! | 408, 500, 502, 504, any other 5xx | `StateUnknown`: the request may have been applied, check before repeating a write | yes |
//! | any other 4xx (405, 413, 422, …) | `InvalidInput`: the request itself is wrong, repeating it gives the same answer | no |
//! | anything else (1xx, 2xx, 3xx that reach an error path) | `Protocol` | no |
//!
//! A request that is safe to repeat (a read, a delete by id, a queue receive) has no outcome to
//! check: [`kind_for_idempotent_status`] turns `StateUnknown` into `Io`, which is retried as it
//! is.

use crate::error::{Error, ErrorKind};

/// The kind of an error answer with `status` to a request that may have changed something; see
/// the module doc for the table.
pub fn kind_for_status(status: u16) -> ErrorKind {
    match status {
        400 => ErrorKind::InvalidInput,
        401 | 403 => ErrorKind::Auth,
        404 => ErrorKind::NotFound,
        409 | 412 => ErrorKind::Conflict,
        429 | 503 => ErrorKind::Throttled,
        408 | 500..=599 => ErrorKind::StateUnknown,
        402..=499 => ErrorKind::InvalidInput,
        _ => ErrorKind::Protocol,
    }
}

/// [`kind_for_status`] for a request that is safe to repeat: an unknown outcome is plain `Io`.
pub fn kind_for_idempotent_status(status: u16) -> ErrorKind {
    match kind_for_status(status) {
        ErrorKind::StateUnknown => ErrorKind::Io,
        kind => kind,
    }
}

impl Error {
    /// An error of [`kind_for_status`]`(status)` with an `http_status` context pair.
    pub fn from_status(status: u16, message: impl Into<String>) -> Self {
        Error::new(kind_for_status(status), message).with_context("http_status", status.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_table() {
        use ErrorKind::*;
        for (status, kind, retryable) in [
            (400, InvalidInput, false),
            (401, Auth, false),
            (403, Auth, false),
            (404, NotFound, false),
            (405, InvalidInput, false),
            (408, StateUnknown, true),
            (409, Conflict, true),
            (412, Conflict, true),
            (413, InvalidInput, false),
            (422, InvalidInput, false),
            (429, Throttled, true),
            (500, StateUnknown, true),
            (501, StateUnknown, true),
            (502, StateUnknown, true),
            (503, Throttled, true),
            (504, StateUnknown, true),
            (599, StateUnknown, true),
            (200, Protocol, false),
            (304, Protocol, false),
        ] {
            assert_eq!(kind_for_status(status), kind, "{status}");
            let e = Error::from_status(status, "x");
            assert_eq!((e.kind(), e.is_retryable()), (kind, retryable), "{status}");
            assert_eq!(e.context(), [("http_status", status.to_string())]);
        }
    }

    #[test]
    fn idempotent_requests_have_no_unknown_outcome() {
        assert_eq!(kind_for_idempotent_status(500), ErrorKind::Io);
        assert_eq!(kind_for_idempotent_status(408), ErrorKind::Io);
        assert_eq!(kind_for_idempotent_status(503), ErrorKind::Throttled);
        assert_eq!(kind_for_idempotent_status(404), ErrorKind::NotFound);
    }
}
