//! S3 and OSS buckets through the S3 API (`aws-sdk-s3`).
//!
//! - [`config`]: [`S3StoreConfig`], field by field, and the credential rules.
//! - `client`: building the SDK client (rustls on ring, retries, timeouts, checksums).
//! - [`error`]: SDK failures as floe errors naming `s3://bucket/key` (or `oss://…`).
//! - `store`: the [`ObjectStore`](crate::ObjectStore) calls.
//! - [`upload`]: [`Upload`], an object written in parts as its bytes come.
//!
//! OSS goes through its S3-compatible endpoint with request checksum calculation and response
//! checksum validation set to "when required": OSS rejects the newer default checksums. Its
//! URLs are `oss://bucket/key`; S3's are `s3://bucket/key`.
//!
//! Conditional writes: `PutMode::IfAbsent` sends `If-None-Match: *`, `PutMode::IfMatch` sends
//! `If-Match: "<etag>"`; a 412 answer is `Ok(None)`. A 409 (`ConditionalRequestConflict`, a
//! concurrent conditional write on the same key) is an error of kind `Conflict`. Whether OSS's
//! S3-compatible endpoint honours both headers is not documented in the material floe was
//! built from: check it against a real bucket before relying on the object-store checkpoint
//! backend on OSS.

mod client;
pub mod config;
pub mod error;
mod store;
pub mod upload;

pub use config::{ChecksumPolicy, S3StoreConfig};
pub use store::S3Store;
pub use upload::Upload;

/// Where a store built from `config` takes its keys (see [`S3StoreConfig`]), the environment
/// read now; `None` means the AWS default chain.
pub fn credential_source(
    config: &S3StoreConfig,
) -> floe_core::Result<Option<floe_signing::CredentialSource>> {
    client::credential_source(config, |v| std::env::var(v).ok())
}
