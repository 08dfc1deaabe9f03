//! `schema_save_mode` and `data_save_mode`: what happens to the target table before writing.
//!
//! | schema_save_mode | table absent | table present |
//! |---|---|---|
//! | `RECREATE_SCHEMA` | create (and the partition) | with a partition spec: drop and re-add the partition; without: drop and re-create the table |
//! | `CREATE_SCHEMA_WHEN_NOT_EXIST` | create (and the partition) | add the partition if missing |
//! | `ERROR_WHEN_SCHEMA_NOT_EXIST` | error | nothing |
//! | `IGNORE` | nothing | nothing |
//!
//! | data_save_mode | effect (table or partition) |
//! |---|---|
//! | `DROP_DATA` | `TRUNCATE TABLE` (the partition's when a spec is set) |
//! | `APPEND_DATA` | nothing |
//! | `CUSTOM_PROCESSING` | run `custom_sql` |
//! | `ERROR_WHEN_DATA_EXISTS` | error if `SELECT COUNT(*)` finds rows |
//!
//! Schema first, then data. Every statement runs as an SQL job through the REST API.

use floe_core::{Error, ErrorKind, Result};
use serde::{Deserialize, Serialize};

use crate::client::MaxComputeClient;
use crate::meta::TableId;
use crate::partition::PartitionSpec;
use crate::sql;
use crate::template::{UpstreamTable, render_create_table};

/// `schema_save_mode`; default `CREATE_SCHEMA_WHEN_NOT_EXIST`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum SchemaSaveMode {
    /// Drop and re-create the table (or partition).
    RecreateSchema,
    /// Create the table (or partition) when missing.
    #[default]
    CreateSchemaWhenNotExist,
    /// Fail when the table is missing.
    ErrorWhenSchemaNotExist,
    /// Do nothing.
    Ignore,
}

/// `data_save_mode`; default `APPEND_DATA`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum DataSaveMode {
    /// Keep the table, delete its data.
    DropData,
    /// Keep table and data.
    #[default]
    AppendData,
    /// Run `custom_sql`.
    CustomProcessing,
    /// Fail when the table (or partition) has rows.
    ErrorWhenDataExists,
}

/// What [`apply_schema_save_mode`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SchemaOutcome {
    /// The table was created.
    Created,
    /// The table was dropped and created again.
    Recreated,
    /// The table was there and kept (a partition may have been added or re-made).
    Kept,
    /// Nothing was checked (`IGNORE`).
    Ignored,
}

/// Where the save modes act.
#[derive(Clone, Debug)]
pub struct SaveModeTarget<'a> {
    /// The target table.
    pub table: &'a TableId,
    /// The `partition_spec` option.
    pub partition: Option<&'a PartitionSpec>,
    /// The `save_mode_create_template` option.
    pub create_template: &'a str,
    /// The upstream table the template is filled from.
    pub upstream: &'a UpstreamTable,
}

/// SQL task settings for statements on `table` (its schema, when not the default one).
fn settings(table: &TableId) -> serde_json::Map<String, serde_json::Value> {
    let mut s = serde_json::Map::new();
    if let Some(schema) = &table.schema {
        s.insert("odps.namespace.schema".into(), "true".into());
        s.insert("odps.default.schema".into(), schema.clone().into());
    }
    s
}

async fn run(client: &MaxComputeClient, table: &TableId, statement: &str) -> Result<()> {
    client
        .run_sql_with(statement, &settings(table))
        .await
        .map(drop)
}

async fn create(client: &MaxComputeClient, target: &SaveModeTarget<'_>) -> Result<()> {
    let ddl = render_create_table(
        target.create_template,
        &target.table.name,
        target.upstream,
        target.partition,
    )?;
    run(client, target.table, &ddl).await?;
    tracing::info!(table = %target.table, "maxcompute table created");
    Ok(())
}

async fn add_partition(client: &MaxComputeClient, target: &SaveModeTarget<'_>) -> Result<()> {
    if let Some(p) = target.partition {
        run(
            client,
            target.table,
            &sql::add_partition(target.table, p, true),
        )
        .await?;
    }
    Ok(())
}

/// Apply `mode` to the target; see the module doc.
pub async fn apply_schema_save_mode(
    client: &MaxComputeClient,
    mode: SchemaSaveMode,
    target: &SaveModeTarget<'_>,
) -> Result<SchemaOutcome> {
    if mode == SchemaSaveMode::Ignore {
        return Ok(SchemaOutcome::Ignored);
    }
    let exists = client.table_exists(target.table).await?;
    match (mode, exists) {
        (SchemaSaveMode::ErrorWhenSchemaNotExist, false) => Err(Error::new(
            ErrorKind::NotFound,
            format!(
                "maxcompute table {} does not exist (schema_save_mode = ERROR_WHEN_SCHEMA_NOT_EXIST)",
                target.table
            ),
        )
        .with_context("option", "schema_save_mode")),
        (SchemaSaveMode::ErrorWhenSchemaNotExist, true) => Ok(SchemaOutcome::Kept),
        (_, false) => {
            create(client, target).await?;
            add_partition(client, target).await?;
            Ok(SchemaOutcome::Created)
        }
        (SchemaSaveMode::RecreateSchema, true) => match target.partition {
            Some(p) => {
                run(client, target.table, &sql::drop_partition(target.table, p, true)).await?;
                run(client, target.table, &sql::add_partition(target.table, p, false)).await?;
                Ok(SchemaOutcome::Kept)
            }
            None => {
                run(client, target.table, &sql::drop_table(target.table, true)).await?;
                create(client, target).await?;
                Ok(SchemaOutcome::Recreated)
            }
        },
        (_, true) => {
            add_partition(client, target).await?;
            Ok(SchemaOutcome::Kept)
        }
    }
}

/// A statement a data save mode runs, with its task settings.
#[derive(Clone, Debug, PartialEq)]
pub struct SaveModeStatement {
    /// The SQL.
    pub sql: String,
    /// Task settings (the table's schema, when not the default one).
    pub settings: serde_json::Map<String, serde_json::Value>,
}

/// The statement `mode` runs to change the target's data: `DROP_DATA`'s `TRUNCATE` (none when
/// its partition does not exist) and `CUSTOM_PROCESSING`'s `custom_sql`; `None` for the modes
/// that change nothing. A committer that must not run it twice after a crash submits it itself
/// ([`MaxComputeClient::submit_sql`]), keeps the instance id, and waits on that id
/// ([`MaxComputeClient::wait_sql`]) instead of submitting again.
pub async fn data_save_mode_statement(
    client: &MaxComputeClient,
    mode: DataSaveMode,
    custom_sql: Option<&str>,
    table: &TableId,
    partition: Option<&PartitionSpec>,
) -> Result<Option<SaveModeStatement>> {
    let sql = match mode {
        DataSaveMode::AppendData | DataSaveMode::ErrorWhenDataExists => return Ok(None),
        DataSaveMode::DropData => {
            if let Some(p) = partition
                && !client.partition_exists(table, p).await?
            {
                return Ok(None);
            }
            sql::truncate(table, partition)
        }
        DataSaveMode::CustomProcessing => custom_sql
            .filter(|s| !s.trim().is_empty())
            .ok_or_else(|| {
                Error::config(
                    "custom_sql",
                    "is required when data_save_mode = CUSTOM_PROCESSING",
                )
            })?
            .to_owned(),
    };
    Ok(Some(SaveModeStatement {
        sql,
        settings: settings(table),
    }))
}

/// Apply `mode` to the target's data; `custom_sql` is run for `CUSTOM_PROCESSING`.
pub async fn apply_data_save_mode(
    client: &MaxComputeClient,
    mode: DataSaveMode,
    custom_sql: Option<&str>,
    table: &TableId,
    partition: Option<&PartitionSpec>,
) -> Result<()> {
    match mode {
        DataSaveMode::AppendData | DataSaveMode::DropData | DataSaveMode::CustomProcessing => {
            match data_save_mode_statement(client, mode, custom_sql, table, partition).await? {
                Some(s) => client.run_sql_with(&s.sql, &s.settings).await.map(drop),
                None => Ok(()),
            }
        }
        DataSaveMode::ErrorWhenDataExists => {
            if let Some(p) = partition
                && !client.partition_exists(table, p).await?
            {
                return Ok(());
            }
            let mut s = settings(table);
            s.insert("odps.sql.allow.fullscan".into(), "true".into());
            let rows = client
                .run_sql_with(&sql::count_rows(table, partition), &s)
                .await?
                .single_integer()?;
            if rows > 0 {
                let place = match partition {
                    Some(p) => format!("partition {p} of maxcompute table {table}"),
                    None => format!("maxcompute table {table}"),
                };
                return Err(Error::new(
                    ErrorKind::Conflict,
                    format!(
                        "{place} already has {rows} rows (data_save_mode = ERROR_WHEN_DATA_EXISTS)"
                    ),
                )
                .with_retryable(false)
                .with_context("option", "data_save_mode"));
            }
            Ok(())
        }
    }
}
