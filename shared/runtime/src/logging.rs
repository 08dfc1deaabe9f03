//! JSON logs: one object per line on stdout, with the invocation's span (function, request id)
//! on every line of an invocation. The level comes from `FLOE_LOG`, else `RUST_LOG`, else
//! `AWS_LAMBDA_LOG_LEVEL` (Lambda's advanced logging controls), else `info`.

use tracing_subscriber::EnvFilter;
use tracing_subscriber::Layer as _;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

use crate::metrics::ConflictCounter;

/// Install the JSON subscriber (and the conflict counter). Safe to call more than once: later
/// calls do nothing.
pub fn init() {
    let directive = ["FLOE_LOG", "RUST_LOG", "AWS_LAMBDA_LOG_LEVEL"]
        .iter()
        .find_map(|k| std::env::var(k).ok().filter(|v| !v.is_empty()))
        .map(|v| v.to_ascii_lowercase())
        .unwrap_or_else(|| "info".into());
    let filter = EnvFilter::try_new(&directive).unwrap_or_else(|_| EnvFilter::new("info"));
    let fmt = tracing_subscriber::fmt::layer()
        .json()
        .with_ansi(false)
        .with_current_span(true)
        .with_span_list(false)
        .flatten_event(true)
        .with_target(true)
        .with_writer(std::io::stdout);
    let _ = tracing_subscriber::registry()
        .with(ConflictCounter)
        .with(fmt.with_filter(filter))
        .try_init();
}

/// The span of one invocation; every log line inside it carries these fields.
pub fn invocation_span(function: &str, request_id: &str, platform: &str) -> tracing::Span {
    tracing::info_span!("invocation", function, request_id, platform)
}
