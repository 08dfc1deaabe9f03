//! `floe-poll`: pulls the configured source (MNS or SQS queue; the local folder) until near its
//! deadline, on a schedule. Packaged as `bootstrap` for Lambda and FC custom runtimes; see
//! `floe_poll`.

use floe_pipeline::{FloeConfig, Pipeline};

fn main() -> std::process::ExitCode {
    floe_runtime::start("poll", |_startup| async {
        let config = FloeConfig::from_env()?;
        let pipeline = Pipeline::open(config).await?;
        Ok(floe_poll::Deps::new(pipeline))
    })
}
