//! The one error type of floe's crates, in iceberg-rust's shape: a kind, a one-line lowercase message
//! that names the thing, context pairs, an optional source, and whether a retry may succeed.
//!
//! Retry loops ask [`Error::is_retryable`] and nothing else. Platform edges map the kind to their own
//! vocabulary (a Lambda `Diagnostic` type, an FC `x-fc-status`).

use std::fmt;

/// `Result` with floe's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What went wrong, coarsely: enough for a caller to decide what to do next.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// Configuration is invalid; the message names the option.
    Config,
    /// Input data (an event, an object, a record) is malformed or does not fit its target.
    InvalidInput,
    /// A peer answered with something that breaks its protocol (bad XML, bad checksum, missing field).
    Protocol,
    /// Credentials were refused or a signature did not match.
    Auth,
    /// The thing asked for does not exist.
    NotFound,
    /// A compare-and-set or optimistic commit lost against a concurrent writer.
    Conflict,
    /// The outcome of a write is unknown (timeout, 5xx after the request was sent): check before retrying.
    StateUnknown,
    /// The peer asked us to slow down, or a quota was hit.
    Throttled,
    /// Network or file-system failure.
    Io,
    /// The invocation's deadline is too close to start or finish the work.
    Deadline,
    /// Not supported by floe or by the peer.
    Unsupported,
    /// A bug or an impossible state.
    Unexpected,
}

impl ErrorKind {
    /// A stable name for logs and metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorKind::Config => "config",
            ErrorKind::InvalidInput => "invalid_input",
            ErrorKind::Protocol => "protocol",
            ErrorKind::Auth => "auth",
            ErrorKind::NotFound => "not_found",
            ErrorKind::Conflict => "conflict",
            ErrorKind::StateUnknown => "state_unknown",
            ErrorKind::Throttled => "throttled",
            ErrorKind::Io => "io",
            ErrorKind::Deadline => "deadline",
            ErrorKind::Unsupported => "unsupported",
            ErrorKind::Unexpected => "unexpected",
        }
    }

    /// Whether an error of this kind is retryable unless said otherwise: a lost compare-and-set,
    /// throttling, a network failure, an unknown outcome (after checking it), and a deadline (the
    /// next invocation has a fresh one).
    pub fn retryable_by_default(self) -> bool {
        matches!(
            self,
            ErrorKind::Conflict
                | ErrorKind::Throttled
                | ErrorKind::Io
                | ErrorKind::StateUnknown
                | ErrorKind::Deadline
        )
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

type Source = Box<dyn std::error::Error + Send + Sync + 'static>;

/// floe's error: see the module doc.
pub struct Error {
    kind: ErrorKind,
    message: String,
    context: Vec<(&'static str, String)>,
    source: Option<Source>,
    retryable: bool,
}

impl Error {
    /// A new error; the message is lowercase, one line, and names the thing.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Error {
            kind,
            message: message.into(),
            context: Vec::new(),
            source: None,
            retryable: kind.retryable_by_default(),
        }
    }

    /// Shorthand for a configuration error naming `option`.
    pub fn config(option: &str, problem: impl fmt::Display) -> Self {
        Error::new(
            ErrorKind::Config,
            format!("invalid option `{option}`: {problem}"),
        )
        .with_context("option", option)
    }

    /// Shorthand for an [`ErrorKind::InvalidInput`] error.
    pub fn invalid_input(message: impl Into<String>) -> Self {
        Error::new(ErrorKind::InvalidInput, message)
    }

    /// Shorthand for an [`ErrorKind::Unexpected`] error.
    pub fn unexpected(message: impl Into<String>) -> Self {
        Error::new(ErrorKind::Unexpected, message)
    }

    /// Attach a context pair (printed after the message).
    pub fn with_context(mut self, key: &'static str, value: impl Into<String>) -> Self {
        self.context.push((key, value.into()));
        self
    }

    /// Attach the underlying error.
    pub fn with_source(mut self, source: impl Into<Source>) -> Self {
        self.source = Some(source.into());
        self
    }

    /// Override whether a retry may succeed.
    pub fn with_retryable(mut self, retryable: bool) -> Self {
        self.retryable = retryable;
        self
    }

    /// The kind.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// The message without context or source.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The context pairs.
    pub fn context(&self) -> &[(&'static str, String)] {
        &self.context
    }

    /// Whether the same operation may succeed if tried again.
    pub fn is_retryable(&self) -> bool {
        self.retryable
    }

    /// Prefix the message with what was being done: `failed to read x: <message>`.
    pub fn while_doing(mut self, what: impl fmt::Display) -> Self {
        self.message = format!("{what}: {}", self.message);
        self
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)?;
        if let Some(source) = &self.source {
            write!(f, ": {source}")?;
        }
        Ok(())
    }
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} error: {self}", self.kind)?;
        for (k, v) in &self.context {
            write!(f, " [{k}={v}]")?;
        }
        if self.retryable {
            f.write_str(" (retryable)")?;
        }
        Ok(())
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source
            .as_deref()
            .map(|s| s as &(dyn std::error::Error + 'static))
    }
}

impl From<std::io::Error> for Error {
    fn from(e: std::io::Error) -> Self {
        let kind = match e.kind() {
            std::io::ErrorKind::NotFound => ErrorKind::NotFound,
            std::io::ErrorKind::InvalidData | std::io::ErrorKind::UnexpectedEof => {
                ErrorKind::InvalidInput
            }
            _ => ErrorKind::Io,
        };
        Error::new(kind, "i/o error").with_source(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_has_message_and_source_debug_has_kind_and_context() {
        let io = std::io::Error::other("disk full");
        let e = Error::new(ErrorKind::Io, "failed to write /tmp/x")
            .with_context("path", "/tmp/x")
            .with_source(io);
        assert_eq!(e.to_string(), "failed to write /tmp/x: disk full");
        let d = format!("{e:?}");
        assert!(d.starts_with("io error: failed to write"), "{d}");
        assert!(
            d.contains("[path=/tmp/x]") && d.contains("(retryable)"),
            "{d}"
        );
    }

    #[test]
    fn retryable_defaults_follow_the_kind() {
        for (kind, retryable) in [
            (ErrorKind::Conflict, true),
            (ErrorKind::Throttled, true),
            (ErrorKind::Io, true),
            (ErrorKind::StateUnknown, true),
            (ErrorKind::Deadline, true),
            (ErrorKind::Config, false),
            (ErrorKind::InvalidInput, false),
            (ErrorKind::Auth, false),
        ] {
            assert_eq!(Error::new(kind, "x").is_retryable(), retryable, "{kind}");
        }
        assert!(
            !Error::new(ErrorKind::Io, "x")
                .with_retryable(false)
                .is_retryable()
        );
    }

    #[test]
    fn config_error_names_the_option() {
        let e = Error::config("batch-size", "must be 1..=16, got 17");
        assert_eq!(
            e.to_string(),
            "invalid option `batch-size`: must be 1..=16, got 17"
        );
        assert_eq!(e.kind(), ErrorKind::Config);
    }
}
