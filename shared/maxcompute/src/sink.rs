//! The sink's start-up in one place: options → credentials → REST client → tunnel, then per
//! target table: resolve its name, apply the save modes, read its metadata and check it against
//! the options. What is left to the committer is writing and committing sessions.
//!
//! ```text
//! MaxComputeSink::connect(config, env)        validate, credentials, client, tunnel endpoint
//!   └─ open_table(vars, upstream)             table_name placeholders, schema_save_mode,
//!        │                                    data_save_mode, get_table, check_table
//!        ├─ begin_upload(&target) / begin_upsert(&target)
//!        ├─ converter(&target, arrow schema)  Arrow batches → rows
//!        └─ resume(&record)                   after a crash
//! ```

use arrow_schema::Schema;
use floe_core::Result;

use crate::client::MaxComputeClient;
use crate::config::{InsertStrategy, MaxComputeSinkConfig};
use crate::meta::{TableId, TableMeta};
use crate::partition::PartitionSpec;
use crate::rows::BatchConverter;
use crate::save_mode::{SaveModeTarget, apply_data_save_mode, apply_schema_save_mode};
use crate::session::{Resumed, SessionRecord, resume};
use crate::template::UpstreamTable;
use crate::tunnel::TableTunnel;
use crate::upload::{UploadOptions, UploadSession};
use crate::upsert::{UpsertOptions, UpsertSession};

/// A connected sink: its options, REST client and tunnel.
#[derive(Clone, Debug)]
pub struct MaxComputeSink {
    config: MaxComputeSinkConfig,
    client: MaxComputeClient,
    tunnel: TableTunnel,
}

/// One target table, ready for sessions.
#[derive(Clone, Debug)]
pub struct TargetTable {
    /// The table.
    pub id: TableId,
    /// The `partition_spec` option, parsed.
    pub partition: Option<PartitionSpec>,
    /// Its metadata as read after the save modes ran.
    pub meta: TableMeta,
}

impl MaxComputeSink {
    /// Validate `config`, resolve credentials (`env` reads the environment: pass
    /// `|k| std::env::var(k).ok()`), build the client and find the tunnel.
    pub async fn connect(
        config: MaxComputeSinkConfig,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Self> {
        config.validate()?;
        let credentials = config.credentials(env)?;
        let client = MaxComputeClient::new(config.client_config(credentials))?;
        let tunnel = TableTunnel::connect(&client, config.tunnel_options()).await?;
        Ok(MaxComputeSink {
            config,
            client,
            tunnel,
        })
    }

    /// The options.
    pub fn config(&self) -> &MaxComputeSinkConfig {
        &self.config
    }

    /// The REST client.
    pub fn client(&self) -> &MaxComputeClient {
        &self.client
    }

    /// The tunnel.
    pub fn tunnel(&self) -> &TableTunnel {
        &self.tunnel
    }

    /// Resolve the target table for `vars` (the `table_name` placeholders), run the save modes
    /// with `upstream` as the template's source, and check the table against the options.
    pub async fn open_table(
        &self,
        vars: impl Fn(&str) -> Option<String>,
        upstream: &UpstreamTable,
    ) -> Result<TargetTable> {
        let name = self.config.resolve_table_name(vars)?;
        let id = self.config.table_id(&name);
        let partition = self.config.partition()?;
        let target = SaveModeTarget {
            table: &id,
            partition: partition.as_ref(),
            create_template: &self.config.save_mode_create_template,
            upstream,
        };
        apply_schema_save_mode(&self.client, self.config.schema_save_mode, &target).await?;
        apply_data_save_mode(
            &self.client,
            self.config.data_save_mode,
            self.config.custom_sql.as_deref(),
            &id,
            partition.as_ref(),
        )
        .await?;
        let meta = self.client.get_table(&id).await?;
        self.config.check_table(&meta)?;
        Ok(TargetTable {
            id,
            partition,
            meta,
        })
    }

    /// A converter from batches of `arrow` to the table's rows (with `datetime_format`).
    pub fn converter(&self, target: &TargetTable, arrow: &Schema) -> Result<BatchConverter> {
        BatchConverter::new(&target.meta.columns, arrow, &self.config.datetime_format)
    }

    /// A new upload session on the target (overwriting when `overwrite` is set).
    pub async fn begin_upload(&self, target: &TargetTable) -> Result<UploadSession> {
        let options = UploadOptions {
            overwrite: self.config.overwrite,
            create_partition: false,
        };
        self.tunnel
            .create_upload(&target.id, target.partition.as_ref(), &options)
            .await
    }

    /// A new upsert session on the target.
    pub async fn begin_upsert(&self, target: &TargetTable) -> Result<UpsertSession> {
        self.tunnel
            .create_upsert(
                &target.id,
                target.partition.as_ref(),
                UpsertOptions::default(),
            )
            .await
    }

    /// Whether inserts go through upsert sessions (`insert_strategy = upsert`).
    pub fn upserts(&self) -> bool {
        self.config.insert_strategy == InsertStrategy::Upsert
    }

    /// Where a checkpointed session stands after a crash; see [`crate::session`].
    pub async fn resume(&self, record: &SessionRecord) -> Result<Resumed> {
        resume(&self.tunnel, record).await
    }
}
