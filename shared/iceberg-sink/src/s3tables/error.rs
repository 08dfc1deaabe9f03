//! Control-plane answers as floe errors, and floe errors as iceberg ones for the catalog.
//!
//! The floe kind is [`floe_core::http::kind_for_status`] for UpdateTableMetadataLocation (with
//! every 5xx, 503 included, an unknown outcome: the pointer may have moved) and
//! [`floe_core::http::kind_for_idempotent_status`] for every other call, which changes nothing.
//!
//! | status | floe kind | iceberg kind (catalog) |
//! |---|---|---|
//! | 400, other 4xx | `InvalidInput` | `DataInvalid` |
//! | 401, 403 | `Auth` | `Unexpected` |
//! | 404 | `NotFound` | `NamespaceNotFound` / `TableNotFound` |
//! | 409, 412 | `Conflict` (retryable) | `*AlreadyExists` on create, `CatalogCommitConflicts` (retryable) on commit |
//! | 429, 503 (not on UpdateTableMetadataLocation) | `Throttled` | `Unexpected`, retryable |
//! | 408, 5xx on UpdateTableMetadataLocation | `StateUnknown` | commit state unknown (not retryable) |
//! | 408, other 5xx elsewhere | `Io` | `Unexpected`, retryable |

use floe_core::{Error, ErrorKind};

use crate::rest::error::{commit_state_unknown, error_detail};

/// Whether a request changes the table pointer (its failures may leave the state unknown).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Call {
    /// UpdateTableMetadataLocation.
    UpdateLocation,
    /// Anything else.
    Other,
}

/// The floe error for a non-2xx control-plane answer to `what`.
pub(crate) fn control_plane_error(call: Call, what: &str, status: u16, body: &[u8]) -> Error {
    let (server_type, server_message) = error_detail(body);
    let server_type = server_type
        .rsplit('#')
        .next()
        .unwrap_or_default()
        .to_owned();
    let detail = [format!("http {status}"), server_type.clone()]
        .into_iter()
        .filter(|s| !s.is_empty())
        .collect::<Vec<_>>()
        .join(" ");
    let message = if server_message.is_empty() {
        format!("{what}: {detail}")
    } else {
        format!("{what}: {detail}: {}", server_message.trim())
    };
    let kind = match call {
        Call::UpdateLocation if (500..=599).contains(&status) => ErrorKind::StateUnknown,
        Call::UpdateLocation => floe_core::http::kind_for_status(status),
        Call::Other => floe_core::http::kind_for_idempotent_status(status),
    };
    Error::new(kind, message)
        .with_context("status", status.to_string())
        .with_context("server_type", server_type)
}

/// The floe error for a control-plane request that got no answer.
pub(crate) fn control_plane_transport_error(call: Call, what: &str, e: reqwest::Error) -> Error {
    let maybe_sent = !e.is_connect() && !e.is_builder();
    let kind = if call == Call::UpdateLocation && maybe_sent {
        ErrorKind::StateUnknown
    } else {
        ErrorKind::Io
    };
    Error::new(kind, format!("{what}: request failed")).with_source(e)
}

/// What a floe error means to the catalog method that got it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Meaning {
    /// A namespace operation: 404 is NamespaceNotFound, 409 NamespaceAlreadyExists.
    Namespace,
    /// A table operation: 404 is TableNotFound (or NamespaceNotFound when the server says so),
    /// 409 TableAlreadyExists.
    Table,
    /// UpdateTableMetadataLocation: 409 is a commit conflict.
    Commit,
}

/// Convert a control-plane (or other floe) error for a catalog method.
pub(crate) fn to_iceberg(e: Error, meaning: Meaning) -> iceberg::Error {
    use iceberg::ErrorKind as K;
    let message = e.message().to_owned();
    let says_namespace = message.to_ascii_lowercase().contains("namespace");
    let (kind, retryable) = match e.kind() {
        ErrorKind::NotFound if meaning == Meaning::Namespace || says_namespace => {
            (K::NamespaceNotFound, false)
        }
        ErrorKind::NotFound => (K::TableNotFound, false),
        ErrorKind::Conflict => match meaning {
            Meaning::Namespace => (K::NamespaceAlreadyExists, false),
            Meaning::Table => (K::TableAlreadyExists, false),
            Meaning::Commit => (K::CatalogCommitConflicts, true),
        },
        ErrorKind::StateUnknown => {
            let detail = message.clone();
            return commit_state_unknown(&message, None, detail);
        }
        ErrorKind::InvalidInput => (K::DataInvalid, false),
        ErrorKind::Unsupported => (K::FeatureUnsupported, false),
        _ => (K::Unexpected, e.is_retryable()),
    };
    iceberg::Error::new(kind, message)
        .with_retryable(retryable)
        .with_source(e)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rest::is_commit_state_unknown;

    #[test]
    fn statuses_and_meanings() {
        let body =
            br#"{"__type":"ConflictException","message":"The version token does not match."}"#;
        let e = control_plane_error(
            Call::UpdateLocation,
            "failed to update table a.b",
            409,
            body,
        );
        assert_eq!(e.kind(), ErrorKind::Conflict);
        assert!(e.to_string().contains("ConflictException"), "{e}");
        let i = to_iceberg(e, Meaning::Commit);
        assert_eq!(i.kind(), iceberg::ErrorKind::CatalogCommitConflicts);
        assert!(i.retryable());

        let e = control_plane_error(Call::UpdateLocation, "failed to update table a.b", 503, b"");
        assert_eq!(e.kind(), ErrorKind::StateUnknown);
        let i = to_iceberg(e, Meaning::Commit);
        assert!(is_commit_state_unknown(&i) && !i.retryable());

        let nf = br#"{"__type":"NotFoundException","message":"The specified namespace does not exist."}"#;
        let i = to_iceberg(
            control_plane_error(Call::Other, "x", 404, nf),
            Meaning::Table,
        );
        assert_eq!(i.kind(), iceberg::ErrorKind::NamespaceNotFound);
        let i = to_iceberg(
            control_plane_error(Call::Other, "x", 404, b"{}"),
            Meaning::Table,
        );
        assert_eq!(i.kind(), iceberg::ErrorKind::TableNotFound);
        let i = to_iceberg(
            control_plane_error(Call::Other, "x", 409, b"{}"),
            Meaning::Namespace,
        );
        assert_eq!(i.kind(), iceberg::ErrorKind::NamespaceAlreadyExists);
        let e = control_plane_error(Call::Other, "x", 429, b"{}");
        assert_eq!(e.kind(), ErrorKind::Throttled);
        assert!(to_iceberg(e, Meaning::Table).retryable());
        let e = control_plane_error(Call::Other, "x", 403, b"{}");
        assert_eq!(e.kind(), ErrorKind::Auth);
    }
}
