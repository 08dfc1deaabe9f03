//! floe's own Iceberg REST catalog client.
//!
//! iceberg-rust's REST client cannot sign requests with AWS SigV4, which AWS S3 Tables
//! (signing name `s3tables`), Alibaba OSS Tables (`osstables`) and Glue (`glue`) require, so floe
//! speaks the REST spec itself, over reqwest with rustls:
//!
//! - [`config`]: [`RestCatalogConfig`], read from Kafka Connect Iceberg sink property names;
//! - [`auth`]: none, bearer, OAuth2 client credentials (refreshed before expiry), SigV4;
//! - [`catalog`]: [`RestCatalog`], the `iceberg::Catalog` implementation;
//! - [`file_io`]: the tables' FileIO (`file://`, `s3://`, and `oss://` through S3);
//! - [`s3_storage`]: that FileIO's storage for `s3://` and `oss://`, on floe's own S3 client;
//! - [`error`]: HTTP answers as errors, and the commit-state-unknown marker
//!   ([`is_commit_state_unknown`]) a committer checks before retrying.
//!
//! The HTTP layer (`client`) is shared with the S3 Tables control-plane client.

pub mod auth;
pub mod catalog;
pub(crate) mod client;
pub mod config;
pub mod error;
pub mod file_io;
pub mod s3_storage;

pub use auth::{SigningClock, system_clock};
pub use catalog::{RestCatalog, RestCatalogBuilder};
pub use config::{AuthConfig, RestCatalogConfig};
pub use error::{CommitStateUnknown, into_floe_error, is_commit_state_unknown};
pub use file_io::{TableFileIo, merge_table_props, table_file_io};
