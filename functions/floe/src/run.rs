//! `floe run` and `floe commit`.

use std::process::ExitCode;
use std::sync::Arc;

use floe_core::Result;
use floe_pipeline::pipeline::ProgressEvent;
use floe_pipeline::{FloeConfig, Pipeline};

use crate::cli::{BackfillArgs, ConfigArg, RunArgs};
use crate::output::{print_backfill, print_report};

/// Open the pipeline of a configuration file, and reach its source (a bucket that is not there
/// fails here, with exit status 2, rather than as an empty pass).
pub async fn open(config: &std::path::Path) -> Result<Pipeline> {
    let config = FloeConfig::load(config)?;
    let pipeline = Pipeline::open(config).await?;
    pipeline.check_source().await?;
    Ok(pipeline)
}

/// `floe run`.
pub async fn run(args: RunArgs) -> Result<ExitCode> {
    let mut pipeline = open(&args.config.config).await?;
    if args.progress {
        pipeline.set_progress(Arc::new(|event| match event {
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

/// `floe backfill`: list and land, resumably, then commit.
pub async fn backfill(args: BackfillArgs) -> Result<ExitCode> {
    let pipeline = open(&args.config.config).await?;
    let deadline = std::time::Instant::now()
        + std::time::Duration::from_secs(args.max_seconds.unwrap_or(100 * 365 * 24 * 3600));
    let progress = args.progress;
    let mut report = pipeline
        .backfill_with(deadline, &mut |p| {
            if progress {
                let prefix = if p.prefix.is_empty() {
                    "(all)"
                } else {
                    &p.prefix
                };
                eprintln!(
                    "backfill {prefix}: {} objects landed{}",
                    p.listed,
                    if p.done { ", done" } else { "" }
                );
            }
        })
        .await?;
    let mut run = floe_pipeline::RunReport {
        changes: report.listed as usize,
        batches: std::mem::take(&mut report.batches),
        ..Default::default()
    };
    run.commits = pipeline.commit(!args.no_commit).await?;
    print_backfill(&report);
    print_report(&run);
    Ok(
        if report.stop == floe_pipeline::sources::backfill::BackfillStop::Failures
            || !run.failures().is_empty()
        {
            ExitCode::from(3)
        } else {
            ExitCode::SUCCESS
        },
    )
}

/// `floe commit`.
/// `floe maintain`: one line per table, then a JSON report per table.
pub async fn maintain(args: crate::cli::MaintainArgs) -> Result<ExitCode> {
    let pipeline = open(&args.config.config).await?;
    if args.expire_older_than_hours.is_nan() || args.expire_older_than_hours < 0.0 {
        return Err(floe_core::Error::config(
            "--expire-older-than-hours",
            "expected a number of hours, 0 or more",
        ));
    }
    let floor = floe_pipeline::targets::orphans::MIN_ORPHAN_AGE_HOURS;
    if args.orphans_older_than_hours.is_nan() || args.orphans_older_than_hours < floor {
        return Err(floe_core::Error::config(
            "--orphans-older-than-hours",
            format!(
                "expected {floor} hours or more: a younger file may belong to an ingest batch \
                 still writing (or use --keep-orphans)"
            ),
        ));
    }
    let opts = floe_pipeline::targets::maintain::MaintainOptions {
        compact: !args.no_compact,
        expire_older_than: Some(std::time::Duration::from_secs_f64(
            args.expire_older_than_hours * 3600.0,
        )),
        keep_snapshots: args.keep_snapshots,
        remove_orphans_older_than: (!args.keep_orphans)
            .then(|| std::time::Duration::from_secs_f64(args.orphans_older_than_hours * 3600.0)),
    };
    let done = match &args.table {
        Some(t) => pipeline.maintain(std::slice::from_ref(t), &opts).await?,
        None => pipeline.maintain_all(&opts).await?,
    };
    for t in &done {
        println!(
            "{}: {} files rewritten into {}, {} delete files applied, {} snapshots expired, {} records moved{}{}",
            t.table,
            t.files_rewritten,
            t.files_written,
            t.delete_files_dropped,
            t.snapshots_expired,
            t.records_moved,
            match &t.orphans {
                Some(o) => format!(
                    ", {} orphan files removed ({} bytes; {} kept for staged batches)",
                    o.removed, o.removed_bytes, o.protected
                ),
                None => String::new(),
            },
            if t.skipped.is_empty() {
                String::new()
            } else {
                format!("; left alone: {}", t.skipped.join("; "))
            }
        );
    }
    Ok(ExitCode::SUCCESS)
}

pub async fn commit(args: ConfigArg) -> Result<ExitCode> {
    let pipeline = open(&args.config).await?;
    let report = floe_pipeline::RunReport {
        commits: pipeline.commit(true).await?,
        ..Default::default()
    };
    print_report(&report);
    Ok(if report.failures().is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(3)
    })
}
