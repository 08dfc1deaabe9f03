//! Errors at the platform edge. Handlers return floe's [`Error`]; its `is_retryable()` decides
//! what the platform is told:
//!
//! | | Lambda | FC event (`/invoke`) | HTTP (FC trigger, Lambda function URL) |
//! |---|---|---|---|
//! | retryable | `Diagnostic { error_type: "Retryable" }` | 404, `x-fc-status: 404` | 503 (FC: + `x-fc-status: 404`) |
//! | not retryable | `Diagnostic { error_type: "NonRetryable" }` | 404, `x-fc-status: 404` | 400 / 403 / 404 / 500 / 501 by kind (FC: + `x-fc-status: 404`) |
//!
//! The body (FC) or `errorMessage` (Lambda) is `<kind>: <message>`; neither carries secrets,
//! since floe's error messages never do.

use floe_core::{Error, ErrorKind};
use lambda_runtime::Diagnostic;
use serde_json::{Value, json};

/// Whether the platform (or the caller) should deliver the event again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorType {
    /// A later try may succeed (throttling, a conflict, a network failure, a busy object).
    Retryable,
    /// The same event will fail again (invalid input or configuration, refused credentials).
    NonRetryable,
}

impl ErrorType {
    /// The type of `e`, from [`Error::is_retryable`].
    pub fn of(e: &Error) -> Self {
        if e.is_retryable() {
            ErrorType::Retryable
        } else {
            ErrorType::NonRetryable
        }
    }

    /// `Retryable` / `NonRetryable`: Lambda's `errorType`, FC's `errorType` in the body.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorType::Retryable => "Retryable",
            ErrorType::NonRetryable => "NonRetryable",
        }
    }
}

/// The one-line message the platform records: `<kind>: <message>` plus context pairs.
pub fn error_message(e: &Error) -> String {
    let mut msg = format!("{}: {e}", e.kind());
    for (k, v) in e.context() {
        msg.push_str(&format!(" [{k}={v}]"));
    }
    msg
}

/// The Lambda diagnostic for `e`.
pub fn diagnostic(e: &Error) -> Diagnostic {
    Diagnostic {
        error_type: ErrorType::of(e).as_str().to_owned(),
        error_message: error_message(e),
    }
}

/// The JSON body of an error answer (FC, HTTP): `errorType`, `errorMessage`, `errorKind`.
pub fn error_body(e: &Error) -> Value {
    json!({
        "errorType": ErrorType::of(e).as_str(),
        "errorMessage": error_message(e),
        "errorKind": e.kind().as_str(),
    })
}

/// The HTTP status an HTTP caller gets for `e`.
pub fn http_status(e: &Error) -> u16 {
    if e.is_retryable() {
        return 503;
    }
    match e.kind() {
        ErrorKind::Config | ErrorKind::InvalidInput => 400,
        ErrorKind::Auth => 403,
        ErrorKind::NotFound => 404,
        ErrorKind::Unsupported => 501,
        ErrorKind::Deadline => 503,
        _ => 500,
    }
}

/// The status (and `x-fc-status`) of a failed FC event invocation, as FC's custom runtime
/// contract defines it.
pub const FC_FAILED_STATUS: u16 = 404;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retryability_picks_the_type_and_the_status() {
        for (e, ty, status) in [
            (Error::new(ErrorKind::Io, "x"), "Retryable", 503),
            (Error::new(ErrorKind::Conflict, "x"), "Retryable", 503),
            (Error::invalid_input("x"), "NonRetryable", 400),
            (Error::config("path", "x"), "NonRetryable", 400),
            (Error::new(ErrorKind::Auth, "x"), "NonRetryable", 403),
            (Error::new(ErrorKind::Unsupported, "x"), "NonRetryable", 501),
            (
                Error::new(ErrorKind::Io, "x").with_retryable(false),
                "NonRetryable",
                500,
            ),
        ] {
            let d = diagnostic(&e);
            assert_eq!(d.error_type, ty, "{e:?}");
            assert_eq!(http_status(&e), status, "{e:?}");
            assert_eq!(error_body(&e)["errorType"], ty, "{e:?}");
        }
    }

    #[test]
    fn message_has_kind_and_context() {
        let e = Error::config("batch-size", "must be 1..=16, got 17");
        assert_eq!(
            error_message(&e),
            "config: invalid option `batch-size`: must be 1..=16, got 17 [option=batch-size]"
        );
    }
}
