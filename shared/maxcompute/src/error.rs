//! MaxCompute failures as floe errors: the service's error code decides the kind and whether a
//! retry may help; without a code it knows, the status does, starting from
//! [`floe_core::http::kind_for_status`] with one refinement: every 5xx (503 included) and a 408
//! are [`ErrorKind::Io`] here, the kind this crate's commit paths turn into a check of the
//! session's state (see below). MaxCompute throttles with codes, not with 503.
//!
//! | code / status | kind | retryable |
//! |---|---|---|
//! | `SignatureNotMatch`, `AuthorizationRequired`, `Unauthorized`, `NoPermission`, `InvalidAccessKeyId`, `AuthenticationRequestExpired`, other 401/403 | `Auth` | no |
//! | `NoSuch*` (`NoSuchObject`, `NoSuchTable`, `NoSuchPartition`, `NoSuchProject`, `NoSuchSchema`), `UpsertSessionNotFound`, `StreamSessionNotFound`, other 404 | `NotFound` | no |
//! | `ObjectAlreadyExists`, `TableModified`, `SchemaModified`, 409, 412 | `Conflict` | no |
//! | `RequestQuotaExceeded`, `SlotExceeded`, `QPSExceeded`, `FlowExceeded`, 429, codes naming throttling | `Throttled` | yes |
//! | 5xx, 408, `InternalServerError`, `ServiceUnavailable` | `Io` | yes |
//! | other 4xx | `InvalidInput` | no |
//!
//! REST errors come as `<Error><Code/><Message/><RequestId/><HostId/></Error>` XML and tunnel
//! errors as `{"Code":…,"Message":…,"RequestId":…}` JSON; both are read. The code is kept as the
//! `odps_code` context pair ([`odps_code`] reads it back) and the request id as `request_id`.
//!
//! A write whose response never arrived (or came back 5xx) has an unknown outcome; callers that
//! must not repeat such a write (commits) turn [`ErrorKind::Io`] into a check of the session's
//! state rather than a blind retry.

use floe_core::{Error, ErrorKind};

/// The context key under which the service's error code is kept.
pub const CODE_CONTEXT: &str = "odps_code";

/// Error codes the crate looks at.
pub mod codes {
    /// The signature did not match.
    pub const SIGNATURE_NOT_MATCH: &str = "SignatureNotMatch";
    /// Generic not-found.
    pub const NO_SUCH_OBJECT: &str = "NoSuchObject";
    /// No such table.
    pub const NO_SUCH_TABLE: &str = "NoSuchTable";
    /// No such partition.
    pub const NO_SUCH_PARTITION: &str = "NoSuchPartition";
    /// The upsert session is gone (after a commit, it counts as committed).
    pub const UPSERT_SESSION_NOT_FOUND: &str = "UpsertSessionNotFound";
    /// The object exists already.
    pub const OBJECT_ALREADY_EXISTS: &str = "ObjectAlreadyExists";
}

/// The service's error code carried by `error`, if it came from an error response.
pub fn odps_code(error: &Error) -> Option<&str> {
    error
        .context()
        .iter()
        .find(|(k, _)| *k == CODE_CONTEXT)
        .map(|(_, v)| v.as_str())
}

/// The parsed body of an error response (all fields empty when the body said nothing useful).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ErrorBody {
    /// `Code`, e.g. `NoSuchTable` or `ODPS-0130131: Table not found`.
    pub code: String,
    /// `Message`.
    pub message: String,
    /// `RequestId`.
    pub request_id: String,
}

impl ErrorBody {
    /// Read an XML `<Error>` document or a JSON object; `None` when the body is neither.
    pub fn parse(body: &[u8]) -> Option<ErrorBody> {
        let text = std::str::from_utf8(body).ok()?.trim();
        if text.starts_with('{') {
            let v: serde_json::Value = serde_json::from_str(text).ok()?;
            let field = |k: &str| {
                v.get(k)
                    .map(|x| match x {
                        serde_json::Value::String(s) => s.clone(),
                        serde_json::Value::Null => String::new(),
                        other => other.to_string(),
                    })
                    .unwrap_or_default()
            };
            let b = ErrorBody {
                code: field("Code"),
                message: field("Message"),
                request_id: field("RequestId"),
            };
            return (!b.code.is_empty() || !b.message.is_empty()).then_some(b);
        }
        if text.starts_with('<') {
            let doc = crate::xml::Element::parse(text).ok()?;
            let b = ErrorBody {
                code: doc.child_text("Code").unwrap_or_default(),
                message: doc.child_text("Message").unwrap_or_default(),
                request_id: doc.child_text("RequestId").unwrap_or_default(),
            };
            return (!b.code.is_empty() || !b.message.is_empty()).then_some(b);
        }
        None
    }
}

/// The error for a non-success response to `op` on `what` (a project, table or session).
pub(crate) fn from_response(
    op: &str,
    what: &str,
    status: u16,
    body: &[u8],
    request_id: Option<&str>,
) -> Error {
    let parsed = ErrorBody::parse(body);
    let code = parsed.as_ref().map(|b| b.code.as_str()).unwrap_or("");
    let kind = kind_of(status, code);
    let detail = match &parsed {
        Some(b) if !b.code.is_empty() => {
            format!("{} (http {status}): {}", b.code, one_line(&b.message))
        }
        Some(b) => format!("http {status}: {}", one_line(&b.message)),
        None => {
            let text = String::from_utf8_lossy(body);
            let text = one_line(&text);
            if text.is_empty() {
                format!("http {status}")
            } else {
                format!("http {status}: {text}")
            }
        }
    };
    let mut e = Error::new(kind, format!("failed to {op} {what}: {detail}"))
        .with_context("http_status", status.to_string());
    if !code.is_empty() {
        e = e.with_context(CODE_CONTEXT, code);
    }
    let rid = parsed
        .as_ref()
        .map(|b| b.request_id.as_str())
        .filter(|r| !r.is_empty())
        .or(request_id);
    if let Some(rid) = rid {
        e = e.with_context("request_id", rid);
    }
    e
}

/// The error for a request that got no (complete) response.
pub(crate) fn from_transport(op: &str, what: &str, e: reqwest::Error) -> Error {
    let why = if e.is_timeout() {
        "timed out"
    } else if e.is_connect() {
        "could not connect"
    } else {
        "request failed"
    };
    Error::new(ErrorKind::Io, format!("failed to {op} {what}: {why}")).with_source(e)
}

/// At most 300 characters on one line: error messages stay one line whatever the server said.
fn one_line(s: &str) -> String {
    let joined = s.split_whitespace().collect::<Vec<_>>().join(" ");
    if joined.chars().count() > 300 {
        let mut t: String = joined.chars().take(300).collect();
        t.push('…');
        t
    } else {
        joined
    }
}

fn kind_of(status: u16, code: &str) -> ErrorKind {
    // Codes may be a bare class name or `ODPS-0130131: Table not found …`.
    let name = code.split(':').next().unwrap_or("").trim();
    let lower = code.to_ascii_lowercase();
    match name {
        "SignatureNotMatch"
        | "AuthorizationRequired"
        | "Unauthorized"
        | "NoPermission"
        | "InvalidAccessKeyId"
        | "AuthenticationRequestExpired"
        | "ODPS-0130013" => ErrorKind::Auth,
        "NoSuchObject"
        | "NoSuchTable"
        | "NoSuchPartition"
        | "NoSuchProject"
        | "NoSuchSchema"
        | "NoSuchPath"
        | "UpsertSessionNotFound"
        | "StreamSessionNotFound"
        | "ODPS-0130131" => ErrorKind::NotFound,
        "ObjectAlreadyExists" | "TableModified" | "SchemaModified" => ErrorKind::Conflict,
        "RequestQuotaExceeded" | "SlotExceeded" | "QPSExceeded" | "FlowExceeded" => {
            ErrorKind::Throttled
        }
        _ if status == 429 || lower.contains("throttl") => ErrorKind::Throttled,
        "InternalServerError" | "ServiceUnavailable" => ErrorKind::Io,
        _ => match floe_core::http::kind_for_status(status) {
            // An unknown outcome is `Io` in this crate (see the module doc).
            ErrorKind::StateUnknown => ErrorKind::Io,
            _ if status >= 500 => ErrorKind::Io,
            kind => kind,
        },
    }
}

/// Conflicts from the service (an object that exists already) are not worth retrying as they
/// are: [`ErrorKind::Conflict`] defaults to retryable for compare-and-set losers, so the
/// response mapping turns it off.
pub(crate) fn settle(e: Error) -> Error {
    if e.kind() == ErrorKind::Conflict {
        e.with_retryable(false)
    } else {
        e
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_and_statuses_map_to_kinds() {
        for (status, body, kind, retryable) in [
            (
                403,
                "<Error><Code>SignatureNotMatch</Code><Message>m</Message></Error>",
                ErrorKind::Auth,
                false,
            ),
            (
                404,
                "<Error><Code>NoSuchTable</Code><Message>t</Message></Error>",
                ErrorKind::NotFound,
                false,
            ),
            (
                400,
                r#"{"Code":"UpsertSessionNotFound","Message":"gone"}"#,
                ErrorKind::NotFound,
                false,
            ),
            (
                409,
                "<Error><Code>ObjectAlreadyExists</Code></Error>",
                ErrorKind::Conflict,
                false,
            ),
            (
                400,
                r#"{"Code":"QPSExceeded","Message":"slow"}"#,
                ErrorKind::Throttled,
                true,
            ),
            (503, "", ErrorKind::Io, true),
            (500, "oops", ErrorKind::Io, true),
            (
                400,
                r#"{"Code":"InvalidArgument","Message":"x"}"#,
                ErrorKind::InvalidInput,
                false,
            ),
            (401, "", ErrorKind::Auth, false),
            (
                400,
                "<Error><Code>ODPS-0130131: Table not found</Code><Message>x</Message></Error>",
                ErrorKind::NotFound,
                false,
            ),
        ] {
            let e = settle(from_response(
                "get",
                "table p.t",
                status,
                body.as_bytes(),
                Some("rid"),
            ));
            assert_eq!(e.kind(), kind, "{status} {body}");
            assert_eq!(e.is_retryable(), retryable, "{status} {body}");
        }
        let e = from_response(
            "get",
            "table p.t",
            404,
            b"<Error><Code>NoSuchTable</Code><Message>table not\n found</Message><RequestId>r1</RequestId></Error>",
            None,
        );
        assert_eq!(
            e.to_string(),
            "failed to get table p.t: NoSuchTable (http 404): table not found"
        );
        assert_eq!(odps_code(&e), Some("NoSuchTable"));
        assert!(
            e.context()
                .iter()
                .any(|(k, v)| *k == "request_id" && v == "r1")
        );
    }
}
