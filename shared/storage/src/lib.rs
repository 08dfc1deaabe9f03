//! Object stores floe reads from (and keeps some state in): a local folder treated as a bucket,
//! S3 and OSS.
//!
//! One trait, [`ObjectStore`], with what the pipeline needs: paged listing, streaming reads,
//! ranged reads (Parquet footers), and conditional writes (`If-None-Match: *`, `If-Match`) for
//! state shared between serverless instances.
//!
//! - [`LocalStore`]: a folder as a bucket.
//! - [`S3Store`] ([`s3`]): AWS S3, S3-compatible servers and Alibaba OSS through `aws-sdk-s3`.
//! - [`PrefixedStore`]: any of them seen through a key prefix (a folder of a bucket used as a
//!   store of its own: the dead-letter destination `s3://state/floe/dead-letter/`).
//! - [`probe_conditional_writes`]: asks a store once whether it honours those conditions.

mod local;
mod prefixed;
mod probe;
pub mod s3;
mod store;

pub use local::LocalStore;
pub use prefixed::{PrefixedStore, key_prefix};
pub use probe::probe_conditional_writes;
pub use s3::{ChecksumPolicy, S3Store, S3StoreConfig};
pub use store::{ByteStream, GetResult, ListPage, ObjectMeta, ObjectStore, PutMode, collect_body};
