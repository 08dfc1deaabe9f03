//! Object stores floe reads from (and keeps some state in): a local folder treated as a bucket,
//! S3 and OSS.
//!
//! One trait, [`ObjectStore`], with what the pipeline needs: paged listing, streaming reads,
//! ranged reads (Parquet footers), and conditional writes (`If-None-Match: *`, `If-Match`) for
//! state shared between serverless instances.

mod local;
mod store;

pub use local::LocalStore;
pub use store::{ByteStream, GetResult, ListPage, ObjectMeta, ObjectStore, PutMode, collect_body};
