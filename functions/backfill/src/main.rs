//! `floe-backfill`: lists bucket prefixes and lands what it finds, over HTTP (function URL, FC
//! HTTP trigger) or as an event. Packaged as `bootstrap` for Lambda and FC custom runtimes; see
//! `floe_backfill`.

use floe_pipeline::{FloeConfig, Pipeline};

fn main() -> std::process::ExitCode {
    floe_runtime::start("backfill", |_startup| async {
        let config = FloeConfig::from_env()?;
        let pipeline = Pipeline::open_without_queue_clients(config).await?;
        Ok(floe_backfill::Deps::new(pipeline))
    })
}
