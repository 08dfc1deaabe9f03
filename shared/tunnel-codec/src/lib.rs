//! The MaxCompute Tunnel protobuf record stream: types, values, the block encoder and decoder,
//! checksums, block compression, the upsert record layout and bucket hashing. Pure: no IO.
//!
//! A block is what one `PUT …?uploadid=…&blockid=N` (or an upsert bucket `PUT`) carries:
//!
//! ```text
//! record*  = { tag(field) value }*  END_RECORD crc32c(record)
//! trailer  = META_COUNT zigzag(count)  META_CHECKSUM crc32c(record crcs)
//! ```
//!
//! Modules: [`types`] (column types and their strings), [`schema`], [`value`], [`decimal`],
//! [`wire`] (varints and tags), [`crc`], [`encode`], [`decode`], [`compress`], [`upsert`],
//! [`hasher`], and [`arrow_frame`] (the Arrow tunnel's block framing).
//!
//! ```
//! use floe_tunnel_codec::{BlockEncoder, TableSchema, Value, decode_block};
//! let schema = TableSchema::from_type_strings([("id", "bigint"), ("name", "string")]).unwrap();
//! let mut encoder = BlockEncoder::new(&schema);
//! encoder.write_record(&[Value::BigInt(1), Value::String("a".into())]).unwrap();
//! let block = encoder.finish().to_vec();
//! let decoded = decode_block(&schema, &block).unwrap();
//! assert_eq!(decoded.records[0][0], Value::BigInt(1));
//! ```

pub mod arrow_frame;
pub mod compress;
pub mod crc;
pub mod decimal;
pub mod decode;
pub mod encode;
pub mod hasher;
pub mod schema;
pub mod types;
pub mod upsert;
pub mod value;
pub mod wire;

pub use compress::Compression;
pub use decimal::Decimal;
pub use decode::{BlockDecoder, DecodedBlock, decode_block};
pub use encode::BlockEncoder;
pub use floe_core::{Error, ErrorKind, Result};
pub use hasher::{HasherKind, RecordHasher};
pub use schema::{Column, TableSchema};
pub use types::{DataType, DecimalType, StructField};
pub use upsert::{UpsertOperation, push_hidden_values, upsert_schema};
pub use value::{Timestamp, Value};
pub use wire::{ChecksumVarint, TRAILER_MAX_BYTES};
