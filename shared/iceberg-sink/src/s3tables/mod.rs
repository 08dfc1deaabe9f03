//! The `s3tables` catalog: Iceberg tables managed through the S3 Tables control-plane API
//! (SigV4, signing name `s3tables`), which also reaches Alibaba OSS Tables through its
//! S3 Tables-compatible endpoint.
//!
//! - [`config`]: [`S3TablesConfig`] from Kafka Connect style properties;
//! - [`client`]: [`S3TablesClient`], one method per control-plane operation;
//! - [`catalog`]: [`S3TablesCatalog`], the `iceberg::Catalog` (metadata files written by floe,
//!   commits guarded by the `versionToken`);
//! - [`admin`]: [`S3TablesAdmin`], the `aws s3tables …` steps of the seed (buckets, namespaces,
//!   tables from a schema document, maintenance configuration and job status);
//! - [`metadata`]: the CreateTable `metadata` document;
//! - [`error`]: control-plane statuses as floe and iceberg errors.

pub mod admin;
pub mod catalog;
pub mod client;
pub mod config;
pub mod error;
pub mod metadata;

pub use admin::S3TablesAdmin;
pub use catalog::S3TablesCatalog;
pub use client::S3TablesClient;
pub use config::{S3TablesConfig, Signature, managed_maintenance};
