//! Decoding objects into Arrow: the streaming decoders that turn bytes into batches of a table's
//! schema, with the Iceberg type model, schema inference and the CDC metadata schema they use.
//! Pure: no IO. Callers hand in bytes (in chunks of any size) and get batches of the target
//! table's Arrow schema, plus the bad records set aside with their line and reason.

pub mod cdc;
pub mod decode;
pub mod infer;
pub mod names;
pub mod partition;
pub mod types;

pub use names::Names;
pub use types::{Field, IcebergType, TableSchema};
