//! Running one invocation the same way on every platform: inside its span, timed, with its
//! outcome logged and its metrics written as one EMF line.

use std::time::Instant;

use floe_core::Result;
use tracing::Instrument as _;

use crate::error::{ErrorType, error_message};
use crate::function::{Event, Function, Input, Output};
use crate::invocation::Invocation;
use crate::logging::invocation_span;
use crate::metrics::{Metric, conflicts_so_far};

/// Call `function` with `input` and `context`.
pub(crate) async fn invoke(
    function: &dyn Function,
    input: Input,
    context: Invocation,
) -> Result<Output> {
    let metrics = context.metrics.clone();
    let name = context.function;
    let request_id = context.request_id.clone();
    let span = invocation_span(name, &request_id, context.platform.as_str());
    let started = Instant::now();
    let conflicts_before = conflicts_so_far();
    let result = function
        .call(Event { input, context })
        .instrument(span.clone())
        .await;
    let conflicts = conflicts_so_far().saturating_sub(conflicts_before);
    if conflicts > 0 {
        metrics.count(Metric::Conflicts, conflicts);
    }
    let duration_ms = started.elapsed().as_millis() as u64;
    span.in_scope(|| match &result {
        Ok(_) => tracing::info!(duration_ms, "invocation finished"),
        Err(e) => {
            metrics.count(Metric::Errors, 1);
            tracing::error!(
                duration_ms,
                error_type = ErrorType::of(e).as_str(),
                error = %error_message(e),
                "invocation failed"
            );
        }
    });
    println!("{}", metrics.emf_line(name, &request_id));
    result
}
