//! A MaxCompute target's save modes, run once before its first session (`setup/<target>`).

use floe_checkpoint::{StoreExt, Version, now_ms};
use floe_core::{Error, ErrorKind, Result};
use floe_decode::TableSchema;
use floe_maxcompute::{
    MaxComputeSink, MaxComputeSinkConfig, PartitionSpec, SaveModeTarget, UpstreamTable,
    apply_data_save_mode, apply_schema_save_mode, data_save_mode_statement,
};

use super::Part;
use crate::protocol::records::{SetupRecord, setup_key};
use crate::targets::{Committer, TargetId};

impl Committer<'_> {
    /// Run the save modes of a target once, before its first session, and remember that they
    /// ran (`setup/<target>`), so no later commit or rerun applies them again.
    ///
    /// A crash before the record is written runs the schema mode and the data checks again:
    /// harmless, since no session of the target has started, so nothing floe landed can be
    /// dropped. The one statement that changes data (`DROP_DATA`'s `TRUNCATE`, the `custom_sql`
    /// of `CUSTOM_PROCESSING`) is submitted by floe and its SQL instance recorded; after a
    /// crash, recovery waits for that instance instead of submitting it again. (Only a crash
    /// between the submission and its record, one HTTP answer wide, can repeat it, still before
    /// any session of the target.)
    pub(super) async fn maxcompute_setup(
        &self,
        target: &TargetId,
        sink: &MaxComputeSink,
        cfg: &MaxComputeSinkConfig,
        first: &Part<'_>,
        partition: Option<&PartitionSpec>,
    ) -> Result<()> {
        let key = setup_key(target);
        let (mut record, mut version) = match self.checkpoint.get_json::<SetupRecord>(&key).await? {
            Some((r, _)) if r.done => return Ok(()),
            Some((r, v)) => (r, Some(v)),
            None => (
                SetupRecord {
                    at_ms: now_ms(),
                    schema: String::new(),
                    data: format!("{:?}", cfg.data_save_mode),
                    data_instance: None,
                    data_sql: None,
                    done: false,
                },
                None,
            ),
        };
        let detail = first.detail;
        let client = sink.client();
        if record.data_instance.is_none() {
            let schema = TableSchema::from_json(&detail.upstream_schema)?;
            let upstream = upstream_table(first.staged.table.as_str(), schema, &detail.route);
            let outcome = apply_schema_save_mode(
                client,
                cfg.schema_save_mode,
                &SaveModeTarget {
                    table: &detail.table,
                    partition,
                    create_template: &cfg.save_mode_create_template,
                    upstream: &upstream,
                },
            )
            .await?;
            record.schema = format!("{:?}: {outcome:?}", cfg.schema_save_mode);
            let custom_sql = cfg.custom_sql.as_deref();
            let mode = cfg.data_save_mode;
            match data_save_mode_statement(client, mode, custom_sql, &detail.table, partition)
                .await?
            {
                Some(statement) => {
                    let id = client
                        .submit_sql(&statement.sql, &statement.settings)
                        .await?;
                    record.data_instance = Some(id);
                    record.data_sql = Some(statement.sql);
                    version = Some(self.save_setup(&key, &record, version.as_ref()).await?);
                }
                // The modes that only check (or do nothing) are safe to run again.
                None => {
                    apply_data_save_mode(client, mode, custom_sql, &detail.table, partition).await?
                }
            }
        }
        self.faults.hit("commit.mc.after-save-modes").await;
        if let (Some(id), Some(sql)) = (&record.data_instance, &record.data_sql)
            && let Err(e) = client.wait_sql(id, sql).await
        {
            if !e.is_retryable() {
                // It failed on the server: the next try submits it again.
                record.data_instance = None;
                record.data_sql = None;
                self.save_setup(&key, &record, version.as_ref()).await?;
            }
            return Err(e);
        }
        record.done = true;
        record.at_ms = now_ms();
        self.save_setup(&key, &record, version.as_ref()).await?;
        tracing::info!(target = %target, schema = %record.schema, data = %record.data, "maxcompute save modes applied");
        Ok(())
    }

    async fn save_setup(
        &self,
        key: &str,
        record: &SetupRecord,
        version: Option<&Version>,
    ) -> Result<Version> {
        let saved = match version {
            Some(v) => self.checkpoint.update_json(key, record, v, None).await?,
            None => self.checkpoint.insert_json(key, record, None).await?,
        };
        saved.ok_or_else(|| {
            Error::new(
                ErrorKind::Conflict,
                format!("{key} changed under its committer"),
            )
        })
    }
}

/// The upstream table the create template is filled from: the staged table's names, its
/// schema, and its key. floe's schemas declare one key, the identifier fields (the primary
/// key), so `${rowtype_unique_key}` gives the same columns as `${rowtype_primary_key}`: a
/// primary key is unique, and floe knows no other unique key.
fn upstream_table(staging: &str, schema: TableSchema, route: &str) -> UpstreamTable {
    let (database, table_name) = staging.rsplit_once('.').unwrap_or(("", staging));
    UpstreamTable {
        database: database.to_owned(),
        table_name: table_name.to_owned(),
        unique_keys: schema.identifier_fields.clone(),
        schema,
        comment: format!("landed by floe (route {route})"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_unique_key_placeholder_gets_the_schemas_key() {
        let schema = TableSchema::from_json(
            r#"{"fields":[{"name":"id","type":"long","required":true},{"name":"v","type":"string"}],"identifierFields":["id"]}"#,
        )
        .unwrap();
        assert_eq!(
            schema.identifier_fields,
            ["id"],
            "the fixture declares a key"
        );
        let upstream = upstream_table("floe_staging.orders", schema, "r");
        assert_eq!(upstream.unique_keys, ["id"]);
        assert_eq!(
            (upstream.database.as_str(), upstream.table_name.as_str()),
            ("floe_staging", "orders")
        );
        let sql = floe_maxcompute::render_create_table(
            "CREATE TABLE `${table}` (${rowtype_fields}) TBLPROPERTIES ('unique'='${rowtype_unique_key}');",
            "orders",
            &upstream,
            None,
        )
        .unwrap();
        assert!(sql.contains("'unique'='`id`'"), "{sql}");
    }
}
