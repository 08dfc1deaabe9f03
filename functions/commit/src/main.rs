//! `floe-commit`: commits staged files, one snapshot per table, on a schedule. Packaged as
//! `bootstrap` for Lambda and FC custom runtimes; see `floe_commit`.

use floe_pipeline::{FloeConfig, Pipeline};

fn main() -> std::process::ExitCode {
    floe_runtime::start("commit", |_startup| async {
        let config = FloeConfig::from_env()?;
        let pipeline = Pipeline::open_without_queue_clients(config).await?;
        Ok(floe_commit::Deps::new(pipeline))
    })
}
