//! How HTTP answers of a catalog become errors, and the "commit state unknown" marker.
//!
//! A commit whose answer is a 5xx (or whose connection dropped after the request was sent) may
//! or may not have landed. Retrying it blindly could append the same files twice, so such an
//! error is not retryable for iceberg's own retry loop; it carries a [`CommitStateUnknown`]
//! source that [`is_commit_state_unknown`] finds, and the committer then checks the table history
//! for its commit id before doing anything else.

use std::fmt;

use iceberg::{Error, ErrorKind};
use serde::Deserialize;

/// The source attached to an error whose commit may or may not have been applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommitStateUnknown {
    /// The HTTP status the server answered, if it answered.
    pub status: Option<u16>,
    /// What happened, one line.
    pub detail: String,
}

impl fmt::Display for CommitStateUnknown {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.status {
            Some(s) => write!(f, "commit state unknown (http {s}): {}", self.detail),
            None => write!(f, "commit state unknown: {}", self.detail),
        }
    }
}

impl std::error::Error for CommitStateUnknown {}

/// Whether `e` says a commit's outcome is unknown (see the module doc).
pub fn is_commit_state_unknown(e: &Error) -> bool {
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        if s.downcast_ref::<CommitStateUnknown>().is_some() {
            return true;
        }
        source = s.source();
    }
    false
}

/// An iceberg error for a commit whose outcome is unknown; not retryable (see the module doc).
pub fn commit_state_unknown(what: &str, status: Option<u16>, detail: impl Into<String>) -> Error {
    let marker = CommitStateUnknown {
        status,
        detail: detail.into(),
    };
    Error::new(
        ErrorKind::Unexpected,
        format!("{what}: commit state unknown, check the table history before retrying"),
    )
    .with_retryable(false)
    .with_source(marker)
}

/// Convert an iceberg error to floe's; see [`crate::catalog::from_iceberg`] (one mapping for
/// every catalog, including the commit-state-unknown marker).
pub fn into_floe_error(e: Error) -> floe_core::Error {
    crate::catalog::from_iceberg(e)
}

/// The operation an HTTP answer belongs to: it decides what a 404 or 409 means.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Op {
    /// `GET /v1/config`.
    Config,
    /// Reading or listing namespaces, or listing a namespace's tables.
    Namespace,
    /// Creating a namespace.
    CreateNamespace,
    /// Reading, dropping a table.
    Table,
    /// Creating, registering or renaming a table (a 409 means the target exists).
    CreateTable,
    /// Committing to a table.
    Commit,
}

/// The REST spec's error body: `{"error":{"message","type","code"}}`.
#[derive(Deserialize)]
struct ErrorBody {
    error: ErrorModel,
}

#[derive(Deserialize)]
struct ErrorModel {
    #[serde(default)]
    message: String,
    #[serde(default, rename = "type")]
    kind: String,
}

/// What the server said about an error: its type and message, from the REST error body or
/// from the JSON bodies of AWS-style services (`{"__type"|"code", "message"|"Message"}`).
pub(crate) fn error_detail(body: &[u8]) -> (String, String) {
    if let Ok(b) = serde_json::from_slice::<ErrorBody>(body) {
        return (b.error.kind, b.error.message);
    }
    if let Ok(v) = serde_json::from_slice::<serde_json::Value>(body) {
        let pick = |keys: &[&str]| {
            keys.iter()
                .find_map(|k| v.get(*k).and_then(|x| x.as_str()))
                .unwrap_or_default()
                .to_owned()
        };
        return (
            pick(&["__type", "code", "Code", "type"]),
            pick(&["message", "Message"]),
        );
    }
    let text = String::from_utf8_lossy(body);
    (String::new(), text.chars().take(200).collect())
}

/// The error for a non-success HTTP answer to `what` (e.g. `failed to load table a.b`).
pub(crate) fn http_error(op: Op, what: &str, status: u16, body: &[u8]) -> Error {
    let (server_type, server_message) = error_detail(body);
    let detail = match (server_type.is_empty(), server_message.is_empty()) {
        (true, true) => format!("http {status}"),
        (false, true) => format!("http {status} {server_type}"),
        (true, false) => format!("http {status}: {}", one_line(&server_message)),
        (false, false) => format!("http {status} {server_type}: {}", one_line(&server_message)),
    };
    if op == Op::Commit && matches!(status, 500 | 502 | 503 | 504) {
        return commit_state_unknown(what, Some(status), detail);
    }
    let says = |word: &str| {
        server_type.to_ascii_lowercase().contains(word)
            || server_message.to_ascii_lowercase().starts_with(word)
    };
    let (kind, retryable) = match status {
        404 => {
            let namespace = says("namespace")
                || (!says("table") && matches!(op, Op::Namespace | Op::CreateNamespace));
            if namespace {
                (ErrorKind::NamespaceNotFound, false)
            } else {
                (ErrorKind::TableNotFound, false)
            }
        }
        409 => match op {
            Op::CreateNamespace => (ErrorKind::NamespaceAlreadyExists, false),
            Op::CreateTable => (ErrorKind::TableAlreadyExists, false),
            Op::Commit => (ErrorKind::CatalogCommitConflicts, true),
            _ => (ErrorKind::Unexpected, false),
        },
        400 | 422 => (ErrorKind::DataInvalid, false),
        406 | 501 => (ErrorKind::FeatureUnsupported, false),
        // Whether anything else is worth another try is floe's shared reading of the status
        // (429, 503, 408 and 5xx are; 401, 403 and other 4xx are not).
        _ => (
            ErrorKind::Unexpected,
            floe_core::http::kind_for_status(status).retryable_by_default(),
        ),
    };
    let message = match status {
        401 | 403 => format!("{what}: not authorized ({detail})"),
        _ => format!("{what}: {detail}"),
    };
    Error::new(kind, message).with_retryable(retryable)
}

/// The error for a request that got no HTTP answer. A commit that may have reached the server
/// has an unknown outcome; anything else is a retryable transport failure.
pub(crate) fn transport_error(op: Op, what: &str, e: reqwest::Error) -> Error {
    let maybe_sent = !e.is_connect() && !e.is_builder();
    if op == Op::Commit && maybe_sent {
        return commit_state_unknown(what, None, one_line(&e.to_string()));
    }
    Error::new(ErrorKind::Unexpected, format!("{what}: request failed"))
        .with_retryable(!e.is_builder())
        .with_source(e)
}

/// A server message on one line, capped in length.
fn one_line(s: &str) -> String {
    let joined = s.split_whitespace().collect::<Vec<_>>().join(" ");
    if joined.chars().count() > 300 {
        let mut cut: String = joined.chars().take(300).collect();
        cut.push('…');
        cut
    } else {
        joined
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_map_by_operation() {
        let rest =
            |t: &str, m: &str| format!(r#"{{"error":{{"message":"{m}","type":"{t}","code":0}}}}"#);
        let cases: Vec<(Op, u16, String, ErrorKind, bool)> = vec![
            (
                Op::Table,
                404,
                rest("NoSuchTableException", "x"),
                ErrorKind::TableNotFound,
                false,
            ),
            (
                Op::Table,
                404,
                rest("NoSuchNamespaceException", "x"),
                ErrorKind::NamespaceNotFound,
                false,
            ),
            (
                Op::Table,
                404,
                rest("NotFoundError", "Namespace nope not found"),
                ErrorKind::NamespaceNotFound,
                false,
            ),
            (
                Op::Namespace,
                404,
                rest("NotFoundError", "Namespace nope not found"),
                ErrorKind::NamespaceNotFound,
                false,
            ),
            (
                Op::Namespace,
                404,
                String::new(),
                ErrorKind::NamespaceNotFound,
                false,
            ),
            (
                Op::Table,
                404,
                String::new(),
                ErrorKind::TableNotFound,
                false,
            ),
            (
                Op::CreateNamespace,
                409,
                rest("AlreadyExistsError", "x"),
                ErrorKind::NamespaceAlreadyExists,
                false,
            ),
            (
                Op::CreateTable,
                409,
                rest("AlreadyExistsException", "x"),
                ErrorKind::TableAlreadyExists,
                false,
            ),
            (
                Op::Commit,
                409,
                rest("CommitFailedException", "x"),
                ErrorKind::CatalogCommitConflicts,
                true,
            ),
            (Op::Table, 503, String::new(), ErrorKind::Unexpected, true),
            (Op::Table, 400, String::new(), ErrorKind::DataInvalid, false),
            (Op::Config, 401, String::new(), ErrorKind::Unexpected, false),
        ];
        for (op, status, body, kind, retryable) in cases {
            let e = http_error(op, "failed to x", status, body.as_bytes());
            assert_eq!(e.kind(), kind, "{op:?} {status} {body}");
            assert_eq!(e.retryable(), retryable, "{op:?} {status} {body}");
            assert!(!is_commit_state_unknown(&e), "{op:?} {status}");
        }
    }

    #[test]
    fn commit_5xx_is_state_unknown_and_not_retryable() {
        for status in [500, 502, 503, 504] {
            let e = http_error(Op::Commit, "failed to commit table a.b", status, b"oops");
            assert!(is_commit_state_unknown(&e), "{status}");
            assert!(!e.retryable(), "{status}");
            assert!(
                e.message().contains("commit state unknown"),
                "{}",
                e.message()
            );
            let f = into_floe_error(e);
            assert_eq!(f.kind(), floe_core::ErrorKind::StateUnknown, "{status}");
        }
    }

    #[test]
    fn floe_error_keeps_kind_and_retryability() {
        let e = http_error(Op::Commit, "failed to commit table a.b", 409, b"{}");
        let f = into_floe_error(e);
        assert_eq!(f.kind(), floe_core::ErrorKind::Conflict);
        assert!(f.is_retryable());
        let f = into_floe_error(http_error(Op::Table, "failed to load table a.b", 404, b""));
        assert_eq!(f.kind(), floe_core::ErrorKind::NotFound);
        assert!(!f.is_retryable());
    }

    #[test]
    fn aws_style_error_bodies_are_read() {
        let (t, m) = error_detail(br#"{"__type":"ConflictException","message":"stale token"}"#);
        assert_eq!(
            (t.as_str(), m.as_str()),
            ("ConflictException", "stale token")
        );
        let (t, m) = error_detail(b"<html>boom</html>");
        assert_eq!((t.as_str(), m.as_str()), ("", "<html>boom</html>"));
    }
}
