//! The Iceberg sink: catalogs, the Parquet writer stack and the exactly-once committer.

pub mod rest;
pub mod s3tables;
