//! The MaxCompute sink's IO layers: a REST client (tables, partitions, SQL jobs), the table
//! tunnel (upload and upsert sessions), the Arrow → tunnel row conversion, the type mapping, and
//! the save modes, plus the sink's options.
//!
//! How a committer uses it ([`sink::MaxComputeSink`] does the start-up steps in one call):
//!
//! ```text
//! config = MaxComputeSinkConfig::from_json(…)?; config.validate()?
//! client = MaxComputeClient::new(config.client_config(config.credentials(env)?))?
//! table  = config.table_id(&config.resolve_table_name(vars)?)
//! apply_schema_save_mode(&client, config.schema_save_mode, &target)?   // once, at start
//! apply_data_save_mode(&client, config.data_save_mode, …)?
//! meta   = client.get_table(&table)?; config.check_table(&meta)?
//! tunnel = TableTunnel::connect(&client, config.tunnel_options())?
//!
//! upload: s = tunnel.create_upload(&table, partition, &UploadOptions{overwrite, ..})?
//!         record = SessionRecord::for_upload(&s)            → checkpoint
//!         conv = BatchConverter::new(s.schema(), &arrow_schema, &config.datetime_format)?
//!         bad = s.write_batch(block_id, &conv, &batch)?     → record.blocks += block_id; dead-letter bad
//!         record.commit_requested = true                     → checkpoint
//!         s.commit(&record.blocks)?
//! upsert: s = tunnel.create_upsert(&table, partition, UpsertOptions::default())?
//!         bad = s.write_batch(&conv, &batch, |row| RowKind::parse(op_of(row)))?
//!         s.commit()?
//! after a crash: match resume(&tunnel, &record)? { Committed | Upload(s) | Upsert(s) | Expired }
//! ```
//!
//! Modules: [`arrow_block`] (upload blocks in the tunnel's Arrow format), [`config`], [`client`] (REST), [`instance`] (SQL jobs), [`meta`] (table ids and
//! metadata), [`partition`], [`tunnel`], [`upload`], [`upsert`], [`download`] (record counts),
//! [`session`] (checkpoint record
//! and recovery), [`types`] (type mapping), [`rows`] (Arrow → rows), [`datetime`], [`sql`],
//! [`template`], [`save_mode`], [`sink`] (start-up in one place), [`error`].

pub mod arrow_block;
pub mod client;
pub mod config;
pub mod datetime;
pub mod download;
pub mod error;
mod http;
pub mod instance;
pub mod meta;
pub mod partition;
pub mod rows;
pub mod save_mode;
pub mod session;
pub mod sink;
pub mod sql;
pub mod template;
pub mod tunnel;
pub mod types;
pub mod upload;
pub mod upsert;
mod xml;

pub use arrow_block::ArrowBlockEncoder;
pub use client::{ClientConfig, MaxComputeClient};
pub use config::{InsertStrategy, MaxComputeSinkConfig, TunnelFormat};
pub use instance::{InstanceStatus, SqlOutput, TaskResult};
pub use meta::{PartitionColumn, TableId, TableMeta};
pub use partition::PartitionSpec;
pub use rows::{BatchConverter, Converted, RowError};
pub use save_mode::{
    DataSaveMode, SaveModeStatement, SaveModeTarget, SchemaOutcome, SchemaSaveMode,
    apply_data_save_mode, apply_schema_save_mode, data_save_mode_statement,
};
pub use session::{Resumed, SessionKind, SessionRecord, resume, resume_with};
pub use sink::{MaxComputeSink, TargetTable};
pub use template::{DEFAULT_CREATE_TEMPLATE, UpstreamTable, render_create_table};
pub use tunnel::{TableTunnel, TunnelOptions};
pub use upload::{UploadOptions, UploadSession, UploadStatus};
pub use upsert::{RowKind, UpsertOptions, UpsertSession, UpsertStatus};
