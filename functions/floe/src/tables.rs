//! `floe tables list|show`.

use std::process::ExitCode;

use floe_core::{Error, Result};
use floe_iceberg::{FloeCatalog, from_iceberg, load_table, parse_ident};
use futures::TryStreamExt;
use iceberg::{Catalog, TableIdent};

use crate::cli::{ConfigArg, ShowArgs};

async fn catalog_of(config: &std::path::Path) -> Result<std::sync::Arc<dyn FloeCatalog>> {
    let config = floe_pipeline::FloeConfig::load(config)?;
    floe_iceberg::open_catalog(&config.catalog).await
}

/// `floe tables list`.
pub async fn list(args: ConfigArg) -> Result<ExitCode> {
    let catalog = catalog_of(&args.config).await?;
    for t in floe_iceberg::all_tables(catalog.as_ref()).await? {
        let table = load_table(catalog.as_ref(), &t).await?;
        let (snapshots, rows) = table
            .as_ref()
            .map(|t| {
                let m = t.metadata();
                let rows = m
                    .current_snapshot()
                    .and_then(|s| {
                        s.summary()
                            .additional_properties
                            .get("total-records")
                            .cloned()
                    })
                    .unwrap_or_else(|| "0".into());
                (m.snapshots().count(), rows)
            })
            .unwrap_or((0, "0".into()));
        println!("{t}\t{rows} rows\t{snapshots} snapshots");
    }
    Ok(ExitCode::SUCCESS)
}

/// An Iceberg type as it is written in schema JSON: `long`, `list<string>`, `struct<a:int>`.
fn type_name(t: &iceberg::spec::Type) -> String {
    use iceberg::spec::Type;
    match t {
        Type::Primitive(p) => p.to_string(),
        Type::Struct(s) => {
            let fields: Vec<String> = s
                .fields()
                .iter()
                .map(|f| format!("{}:{}", f.name, type_name(&f.field_type)))
                .collect();
            format!("struct<{}>", fields.join(","))
        }
        Type::List(l) => format!("list<{}>", type_name(&l.element_field.field_type)),
        Type::Map(m) => format!(
            "map<{},{}>",
            type_name(&m.key_field.field_type),
            type_name(&m.value_field.field_type)
        ),
    }
}

/// Print a table's description and its first `rows` rows.
pub async fn describe(catalog: &dyn Catalog, ident: &TableIdent, rows: usize) -> Result<()> {
    let table = load_table(catalog, ident).await?.ok_or_else(|| {
        Error::new(
            floe_core::ErrorKind::NotFound,
            format!("table {ident} does not exist"),
        )
    })?;
    let m = table.metadata();
    println!("table {ident}");
    println!("  location: {}", m.location());
    let schema = m.current_schema();
    let fields: Vec<String> = schema
        .as_struct()
        .fields()
        .iter()
        .map(|f| {
            format!(
                "{}: {}{}",
                f.name,
                type_name(&f.field_type),
                if f.required { " not null" } else { "" }
            )
        })
        .collect();
    println!("  schema: {}", fields.join(", "));
    let spec = m.default_partition_spec();
    let parts: Vec<String> = spec
        .fields()
        .iter()
        .map(|f| format!("{} ({})", f.name, f.transform))
        .collect();
    println!(
        "  partitioned by: {}",
        if parts.is_empty() {
            "nothing".into()
        } else {
            parts.join(", ")
        }
    );
    let mut snapshots: Vec<_> = m.snapshots().collect();
    snapshots.sort_by_key(|s| s.sequence_number());
    for s in &snapshots {
        let p = &s.summary().additional_properties;
        println!(
            "  snapshot {} at {}: +{} rows, {} files, total {} rows, floe commit {}",
            s.snapshot_id(),
            s.timestamp().map(|t| t.to_rfc3339()).unwrap_or_default(),
            p.get("added-records").map(String::as_str).unwrap_or("0"),
            p.get("added-data-files").map(String::as_str).unwrap_or("0"),
            p.get("total-records").map(String::as_str).unwrap_or("?"),
            p.get(floe_iceberg::COMMIT_ID_PROP)
                .map(String::as_str)
                .unwrap_or("-")
        );
    }
    if snapshots.is_empty() {
        println!("  no snapshots yet");
        return Ok(());
    }
    if rows == 0 {
        return Ok(());
    }
    let scan = table.scan().select_all().build().map_err(from_iceberg)?;
    // floe's read: iceberg-rust's own does not apply deletion vectors (format v3).
    let mut stream = floe_iceberg::scan::read(&table, &scan).await?;
    let mut batches = Vec::new();
    let mut n = 0;
    while n < rows {
        let Some(b) = stream.try_next().await.map_err(from_iceberg)? else {
            break;
        };
        let take = b.num_rows().min(rows - n);
        n += take;
        batches.push(b.slice(0, take));
    }
    let text = arrow_cast::pretty::pretty_format_batches(&batches)
        .map_err(|e| Error::unexpected("failed to format rows").with_source(e))?;
    println!("{text}");
    Ok(())
}

/// `floe tables show`.
pub async fn show(args: ShowArgs) -> Result<ExitCode> {
    let catalog = catalog_of(&args.config.config).await?;
    let ident = parse_ident(&args.table)?;
    describe(catalog.as_ref(), &ident, args.rows).await?;
    Ok(ExitCode::SUCCESS)
}
