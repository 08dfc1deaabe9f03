//! `floe config check`: read a configuration as floe reads it and say what it means; with
//! `--connect`, reach everything it names (checkpoint store and its conditional writes, source
//! bucket, catalog) without landing anything.

use std::process::ExitCode;

use floe_core::Result;
use floe_iceberg::from_iceberg;
use floe_pipeline::config::{CheckpointConfig, QueueConfig, SourceConfig};
use floe_pipeline::{FloeConfig, Pipeline};

use crate::cli::ConfigCheckArgs;

/// `floe config check`.
pub async fn check(args: ConfigCheckArgs) -> Result<ExitCode> {
    let config = FloeConfig::load(&args.config.config)?;
    for line in describe(&config) {
        println!("{line}");
    }
    if args.connect {
        let pipeline = Pipeline::open(config).await?;
        println!("reached: checkpoint table (conditional writes honoured)");
        pipeline.check_source().await?;
        println!("reached: source");
        if pipeline.config().opens_iceberg_catalog() {
            pipeline
                .catalog()
                .list_namespaces(None)
                .await
                .map_err(from_iceberg)
                .map_err(|e| e.while_doing("failed to list the catalog's namespaces"))?;
            println!("reached: catalog {}", pipeline.catalog_name());
        }
        if let Some(root) = pipeline.check_staging().await? {
            println!("reached: staging location {root} (written and deleted a file)");
        }
    }
    println!("ok: {}", args.config.config.display());
    Ok(ExitCode::SUCCESS)
}

/// One line per part of the configuration, secrets left out.
fn describe(c: &FloeConfig) -> Vec<String> {
    let mut out = Vec::new();
    out.push(match &c.source {
        SourceConfig::Local { folder, bucket, .. } => {
            format!("source: folder {} as bucket {bucket}", folder.display())
        }
        SourceConfig::Cloud(s) => {
            let queue = match &s.queue {
                Some(QueueConfig::Sqs { queue_url, .. }) => format!("sqs queue {queue_url}"),
                Some(QueueConfig::Mns {
                    endpoint, queue, ..
                }) => format!("mns queue {queue} at {endpoint}"),
                None => "no queue".into(),
            };
            let listing = match &s.listing {
                Some(l) if l.prefixes.is_empty() => format!("bucket {} (all keys)", l.bucket),
                Some(l) => format!("bucket {} ({})", l.bucket, l.prefixes.join(", ")),
                None => "no bucket listing".into(),
            };
            format!(
                "source: {} `{}`: {queue}; {listing}; startup {}",
                match s.provider {
                    floe_core::Provider::Oss => "oss",
                    _ => "s3",
                },
                s.name,
                s.startup.mode
            )
        }
    });
    let catalog = &c.catalog;
    if !c.opens_iceberg_catalog() {
        out.push("iceberg: no catalog (no route targets iceberg)".to_owned());
    } else {
        out.push(format!(
            "iceberg: catalog `{}` ({:?}){}",
            catalog.name,
            catalog.kind,
            catalog
                .props
                .get("warehouse")
                .map(|w| format!(", warehouse {w}"))
                .unwrap_or_default()
        ));
    }
    out.push(match &c.checkpoint {
        CheckpointConfig::Sqlite { path } => format!("checkpoint: sqlite {}", path.display()),
        CheckpointConfig::ObjectStore {
            provider,
            bucket,
            prefix,
            ..
        } => format!(
            "checkpoint: object store {}://{bucket}/{prefix}",
            match provider {
                floe_core::Provider::Oss => "oss",
                _ => "s3",
            }
        ),
    });
    out.push(format!("dead letters: {}", c.dead_letter.location()));
    for r in &c.routes {
        let mut targets = Vec::new();
        if r.targets.iceberg {
            targets.push(format!("iceberg {}", r.table));
        }
        if let Some(m) = &r.targets.maxcompute {
            targets.push(format!("maxcompute {}", m.table_name));
        }
        let prefixes = if r.prefixes.is_empty() {
            "every key".to_owned()
        } else {
            r.prefixes.join(", ")
        };
        out.push(format!(
            "route {}: {prefixes} as {:?} -> {}",
            r.name,
            r.mode,
            targets.join(" and ")
        ));
    }
    if let Some(m) = &c.maxcompute {
        out.push(format!(
            "maxcompute: project {} at {}",
            m.project, m.endpoint
        ));
    }
    out
}
