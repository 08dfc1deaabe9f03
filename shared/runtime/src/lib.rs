//! The functions' platform adapters: one binary serves AWS Lambda and Alibaba Function Compute
//! 3.0, chosen by its environment.
//!
//! ```text
//!  main.rs ── start(name, build) ──► JSON logs ─► Platform::from_env()
//!                │                                   │
//!                └─ build(Startup) once: config,     ├─ Lambda: AWS_LAMBDA_RUNTIME_API set
//!                   pipeline, clients                │    lambda_runtime: GET …/invocation/next,
//!                   (failure: Lambda /init/error,    │    POST …/{id}/response | …/{id}/error
//!                    exit 2 for config, else 1)      └─ FC: HTTP server on 0.0.0.0:$FC_SERVER_PORT
//!                                                         POST /invoke, POST /initialize, HTTP trigger
//!  each invocation ──► Event { input, context: Invocation { request_id, deadline, credentials,
//!                      metrics } } ──► Function::call ──► Output | floe_core::Error
//!                      (span with the request id; one EMF metrics line at the end)
//! ```
//!
//! - [`function`]: the [`Function`] trait, [`Event`], [`Input`], [`Output`], HTTP types.
//! - [`invocation`]: [`Invocation`], [`Deadline`], [`Platform`], FC's [`StsCredentials`].
//! - [`error`]: how an error becomes a Lambda `Diagnostic` (`Retryable` / `NonRetryable`) or
//!   an HTTP status with `x-fc-status`.
//! - [`lambda`], [`fc`]: the two adapters.
//! - [`logging`]: JSON logs with the request id; [`metrics`]: the metric names and EMF lines.

pub mod error;
pub mod fc;
pub mod function;
pub mod invocation;
mod invoke;
pub mod lambda;
pub mod logging;
pub mod metrics;

use std::future::Future;
use std::process::ExitCode;
use std::sync::Arc;

use floe_core::{ErrorKind, Result};

pub use error::ErrorType;
pub use function::{Event, Function, HttpRequest, HttpResponse, Input, Output};
pub use invocation::{Deadline, Invocation, Platform, SharedCredentials, StsCredentials};
pub use metrics::{Metric, Metrics};

/// What a function's start-up gets to build its dependencies with.
#[derive(Clone, Debug)]
pub struct Startup {
    /// The platform the process runs on.
    pub platform: Platform,
    /// The function's name.
    pub function: &'static str,
    /// The latest credentials FC passed with a request (empty on Lambda, where the SDK's
    /// default chain reads the role's credentials from the environment).
    pub credentials: SharedCredentials,
}

/// Run a function binary: set up JSON logs, pick the platform, `build` the function once
/// (configuration, pipeline, clients), then serve invocations until the platform stops the
/// process. Returns the exit code for `main`.
pub fn start<F, B, Fut>(name: &'static str, build: B) -> ExitCode
where
    F: Function,
    B: FnOnce(Startup) -> Fut,
    Fut: Future<Output = Result<F>>,
{
    logging::init();
    let platform = Platform::from_env();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            tracing::error!(error = %e, "failed to start the async runtime");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(async move {
        let startup = Startup {
            platform,
            function: name,
            credentials: SharedCredentials::default(),
        };
        let credentials = startup.credentials.clone();
        let function: Arc<dyn Function> = match build(startup).await {
            Ok(f) => Arc::new(f),
            Err(e) => {
                tracing::error!(
                    function = name,
                    platform = platform.as_str(),
                    error = %error::error_message(&e),
                    "start-up failed"
                );
                if platform == Platform::Lambda
                    && let Err(report) = lambda::report_init_error(&e).await
                {
                    tracing::error!(error = %report, "could not report the start-up failure");
                }
                return exit_code(&e);
            }
        };
        let served = match platform {
            Platform::Lambda => lambda::run(function, name).await,
            Platform::Fc => fc::run(function, name, credentials).await,
        };
        match served {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                tracing::error!(error = %error::error_message(&e), "serving stopped");
                exit_code(&e)
            }
        }
    })
}

/// 2 for invalid configuration (the message names the option), 1 for anything else.
fn exit_code(e: &floe_core::Error) -> ExitCode {
    if e.kind() == ErrorKind::Config {
        ExitCode::from(2)
    } else {
        ExitCode::FAILURE
    }
}
