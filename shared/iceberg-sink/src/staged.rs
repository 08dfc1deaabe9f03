//! Data files kept in the checkpoint table between staging and commit.
//!
//! A staged file is iceberg's own JSON form of the `DataFile` plus the partition spec and schema
//! ids needed to read it back, so a committer in another process restores it exactly.

use floe_core::{Error, Result};
use iceberg::spec::{
    DataFile, FormatVersion, deserialize_data_file_from_json, serialize_data_file_to_json,
};
use iceberg::table::Table;
use serde::{Deserialize, Serialize};

use crate::catalog::from_iceberg;

/// A data file written but not yet committed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StagedFile {
    /// iceberg's JSON of the data file.
    pub data_file: String,
    /// The partition spec it was written for.
    pub spec_id: i32,
    /// The schema it was written with.
    pub schema_id: i32,
    /// Rows in the file (0 for a delete file: they are not rows of the table).
    pub rows: u64,
    /// A delete file (position or equality deletes), not a data file.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub deletes: bool,
    /// Bytes of the file.
    pub bytes: u64,
    /// Where the file is.
    pub path: String,
}

impl StagedFile {
    /// Record a data file written for `table`'s current schema and default partition spec (what
    /// [`crate::TableWriter`] writes).
    pub fn new(table: &Table, file: DataFile) -> Result<Self> {
        let metadata = table.metadata();
        let spec_id = metadata.default_partition_spec_id();
        let spec = metadata.partition_spec_by_id(spec_id).ok_or_else(|| {
            Error::unexpected(format!("data file names unknown partition spec {spec_id}"))
        })?;
        let schema = metadata.current_schema();
        let partition_type = spec.partition_type(schema).map_err(from_iceberg)?;
        let deletes = file.content_type() != iceberg::spec::DataContentType::Data;
        let rows = if deletes { 0 } else { file.record_count() };
        let bytes = file.file_size_in_bytes();
        let path = file.file_path().to_owned();
        let data_file = serialize_data_file_to_json(file, &partition_type, FormatVersion::V2)
            .map_err(from_iceberg)?;
        Ok(StagedFile {
            data_file,
            spec_id,
            schema_id: metadata.current_schema_id(),
            rows,
            deletes,
            bytes,
            path,
        })
    }

    /// Restore the data file against `table`'s metadata.
    pub fn to_data_file(&self, table: &Table) -> Result<DataFile> {
        let metadata = table.metadata();
        let spec = metadata.partition_spec_by_id(self.spec_id).ok_or_else(|| {
            Error::invalid_input(format!(
                "staged file {} names unknown partition spec {}",
                self.path, self.spec_id
            ))
        })?;
        let schema = metadata.schema_by_id(self.schema_id).ok_or_else(|| {
            Error::invalid_input(format!(
                "staged file {} names unknown schema {}",
                self.path, self.schema_id
            ))
        })?;
        let partition_type = spec.partition_type(schema).map_err(from_iceberg)?;
        deserialize_data_file_from_json(&self.data_file, self.spec_id, &partition_type, schema)
            .map_err(from_iceberg)
    }
}
