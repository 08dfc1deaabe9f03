//! `floe run` and `floe commit`.

use std::process::ExitCode;
use std::sync::Arc;

use floe_core::Result;
use floe_pipeline::pipeline::ProgressEvent;
use floe_pipeline::{FloeConfig, Pipeline};

use crate::cli::{ConfigArg, RunArgs};
use crate::output::print_report;

/// Open the pipeline of a configuration file.
pub async fn open(config: &std::path::Path) -> Result<Pipeline> {
    let config = FloeConfig::load(config)?;
    Pipeline::open(config).await
}

/// `floe run`.
pub async fn run(args: RunArgs) -> Result<ExitCode> {
    let mut pipeline = open(&args.config.config).await?;
    if args.progress {
        pipeline.progress = Some(Arc::new(|event| match event {
            ProgressEvent::Reading { change, read } => {
                let pct = change
                    .size
                    .filter(|s| *s > 0)
                    .map(|s| format!(" ({}%)", read * 100 / s))
                    .unwrap_or_default();
                eprintln!("      {}: {} MiB read{pct}", change.key, read >> 20);
            }
            ProgressEvent::Done {
                change,
                done,
                total,
                rows,
            } => {
                eprintln!("[{done}/{total}] {} ({rows} rows)", change.key);
            }
        }));
    }
    if args.watch {
        println!("watching; Ctrl-C stops (staged work is committed first)");
        pipeline
            .watch(print_report, async {
                let _ = tokio::signal::ctrl_c().await;
            })
            .await?;
        return Ok(ExitCode::SUCCESS);
    }
    let report = pipeline.run_once(!args.no_commit).await?;
    print_report(&report);
    Ok(if report.failures().is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(3)
    })
}

/// `floe commit`.
pub async fn commit(args: ConfigArg) -> Result<ExitCode> {
    let pipeline = open(&args.config).await?;
    let commits = pipeline.commit(true).await?;
    print_report(&floe_pipeline::RunReport {
        commits,
        ..Default::default()
    });
    Ok(ExitCode::SUCCESS)
}
