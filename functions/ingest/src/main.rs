//! `floe-ingest`: object events from triggers (FC OSS / MNS, Lambda S3 / SQS) land as staged
//! rows. Packaged as `bootstrap` for Lambda and FC custom runtimes; see `floe_ingest`.

use floe_pipeline::{FloeConfig, Pipeline};

fn main() -> std::process::ExitCode {
    floe_runtime::start("ingest", |_startup| async {
        let config = FloeConfig::from_env()?;
        let pipeline = Pipeline::open_without_queue_clients(config).await?;
        Ok(floe_ingest::Deps::new(pipeline))
    })
}
