//! The fixed object-metadata schema of the OSS CDC connector, and rows of it.
//!
//! | column | type | from |
//! |---|---|---|
//! | `key` | string NOT NULL | object key |
//! | `url` | string | `oss://bucket/key`, `s3://…`, `file://…` |
//! | `region` | string | bucket region |
//! | `bucket` | string | bucket name |
//! | `fileName` | string | last segment of the key |
//! | `size` | long | bytes |
//! | `modificationTime` | timestamptz (ms precision) | event time / last modified |
//! | `eTag` | string | entity tag |
//!
//! floe adds `operation` (`created` / `removed`) by default, and knows `eventName`, `versionId`,
//! `sequencer` and `content` (the object's bytes, `content` mode) when a table declares them.
//! A table may declare any subset that includes `key`; names match case-insensitively.

use std::sync::Arc;

use arrow_array::builder::{
    BinaryBuilder, Int64Builder, StringBuilder, TimestampMicrosecondBuilder,
};
use arrow_array::{ArrayRef, RecordBatch, new_null_array};
use arrow_cast::cast::{CastOptions, cast_with_options};
use arrow_schema::SchemaRef;
use floe_core::{Error, ObjectChange, Result};

use crate::types::{Field, IcebergType, TableSchema};

/// A column floe knows how to fill from an object change.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MetaColumn {
    /// `key`
    Key,
    /// `url`
    Url,
    /// `region`
    Region,
    /// `bucket`
    Bucket,
    /// `fileName`
    FileName,
    /// `size`
    Size,
    /// `modificationTime`
    ModificationTime,
    /// `eTag`
    ETag,
    /// `operation`
    Operation,
    /// `eventName`
    EventName,
    /// `versionId`
    VersionId,
    /// `sequencer`
    Sequencer,
    /// `content`
    Content,
}

const ALL: [(MetaColumn, &str); 13] = [
    (MetaColumn::Key, "key"),
    (MetaColumn::Url, "url"),
    (MetaColumn::Region, "region"),
    (MetaColumn::Bucket, "bucket"),
    (MetaColumn::FileName, "fileName"),
    (MetaColumn::Size, "size"),
    (MetaColumn::ModificationTime, "modificationTime"),
    (MetaColumn::ETag, "eTag"),
    (MetaColumn::Operation, "operation"),
    (MetaColumn::EventName, "eventName"),
    (MetaColumn::VersionId, "versionId"),
    (MetaColumn::Sequencer, "sequencer"),
    (MetaColumn::Content, "content"),
];

impl MetaColumn {
    /// The column for a name, case-insensitively.
    pub fn from_name(name: &str) -> Option<MetaColumn> {
        ALL.iter()
            .find(|(_, n)| n.eq_ignore_ascii_case(name))
            .map(|(c, _)| *c)
    }

    /// The canonical column name.
    pub fn name(self) -> &'static str {
        ALL.iter()
            .find(|(c, _)| *c == self)
            .map(|(_, n)| *n)
            .unwrap_or("")
    }

    fn iceberg_type(self) -> IcebergType {
        match self {
            MetaColumn::Size => IcebergType::Long,
            MetaColumn::ModificationTime => IcebergType::Timestamptz,
            MetaColumn::Content => IcebergType::Binary,
            _ => IcebergType::String,
        }
    }
}

/// The table schema for metadata rows: `columns` (any names floe knows, including `key`), or by
/// default the connector's eight columns plus `operation` (and `content` when `with_content`).
pub fn metadata_schema(columns: Option<&[String]>, with_content: bool) -> Result<TableSchema> {
    let mut chosen: Vec<(MetaColumn, String)> = Vec::new();
    match columns {
        Some(names) => {
            for name in names {
                let col = MetaColumn::from_name(name).ok_or_else(|| {
                    Error::config(
                        "columns",
                        format!(
                            "`{name}` is not a metadata column; known: {}",
                            ALL.iter().map(|(_, n)| *n).collect::<Vec<_>>().join(", ")
                        ),
                    )
                })?;
                if chosen.iter().any(|(c, _)| *c == col) {
                    return Err(Error::config("columns", format!("`{name}` is named twice")));
                }
                chosen.push((col, name.clone()));
            }
            if !chosen.iter().any(|(c, _)| *c == MetaColumn::Key) {
                return Err(Error::config(
                    "columns",
                    "the metadata columns must include `key`",
                ));
            }
        }
        None => {
            for (c, n) in &ALL[..9] {
                chosen.push((*c, (*n).to_owned()));
            }
            if with_content {
                chosen.push((MetaColumn::Content, "content".into()));
            }
        }
    }
    let fields = chosen
        .into_iter()
        .map(|(c, name)| {
            if c == MetaColumn::Key {
                Field::required(name, c.iceberg_type())
            } else {
                Field::optional(name, c.iceberg_type())
            }
        })
        .collect();
    Ok(TableSchema::new(fields))
}

/// One metadata row: the change, its URL, and the object's bytes for `content` (None when the
/// object was over the size limit, was removed, or content was not asked for).
#[derive(Debug)]
pub struct MetaRow<'a> {
    /// The change.
    pub change: &'a ObjectChange,
    /// The object's URL.
    pub url: String,
    /// The object's bytes, for a `content` column.
    pub content: Option<Vec<u8>>,
}

/// Build a batch of `target` (the table's Arrow schema) from metadata rows. Columns are matched by
/// name case-insensitively; a column floe does not know is null (an error when it is required).
pub fn metadata_batch(target: &SchemaRef, rows: &[MetaRow<'_>]) -> Result<RecordBatch> {
    let n = rows.len();
    let mut columns = Vec::with_capacity(target.fields().len());
    for field in target.fields() {
        let Some(col) = MetaColumn::from_name(field.name()) else {
            if !field.is_nullable() {
                return Err(Error::invalid_input(format!(
                    "table column `{}` is required but is not a metadata column floe can fill",
                    field.name()
                )));
            }
            columns.push(new_null_array(field.data_type(), n));
            continue;
        };
        let strings = |f: &dyn Fn(&MetaRow<'_>) -> Option<String>| -> ArrayRef {
            let mut b = StringBuilder::with_capacity(n, n * 16);
            for r in rows {
                b.append_option(f(r));
            }
            Arc::new(b.finish())
        };
        let array: ArrayRef = match col {
            MetaColumn::Key => strings(&|r| Some(r.change.key.clone())),
            MetaColumn::Url => strings(&|r| Some(r.url.clone())),
            MetaColumn::Region => strings(&|r| r.change.region.clone()),
            MetaColumn::Bucket => strings(&|r| Some(r.change.bucket.clone())),
            MetaColumn::FileName => strings(&|r| Some(r.change.file_name().to_owned())),
            MetaColumn::ETag => strings(&|r| r.change.etag.clone()),
            MetaColumn::Operation => strings(&|r| Some(r.change.operation.as_str().to_owned())),
            MetaColumn::EventName => strings(&|r| Some(r.change.event_name.clone())),
            MetaColumn::VersionId => strings(&|r| r.change.version_id.clone()),
            MetaColumn::Sequencer => strings(&|r| r.change.sequencer.clone()),
            MetaColumn::Size => {
                let mut b = Int64Builder::with_capacity(n);
                for r in rows {
                    b.append_option(r.change.size.and_then(|s| i64::try_from(s).ok()));
                }
                Arc::new(b.finish())
            }
            MetaColumn::ModificationTime => {
                let mut b = TimestampMicrosecondBuilder::with_capacity(n);
                for r in rows {
                    // The connector's precision is milliseconds.
                    b.append_option(r.change.event_time.map(|t| t.timestamp_millis() * 1000));
                }
                Arc::new(b.finish().with_timezone("+00:00"))
            }
            MetaColumn::Content => {
                let mut b = BinaryBuilder::new();
                for r in rows {
                    b.append_option(r.content.as_deref());
                }
                Arc::new(b.finish())
            }
        };
        let array = if array.data_type() == field.data_type() {
            array
        } else {
            cast_with_options(&array, field.data_type(), &CastOptions::default()).map_err(|e| {
                Error::invalid_input(format!(
                    "metadata column `{}` does not fit the table's type {}",
                    field.name(),
                    field.data_type()
                ))
                .with_source(e)
            })?
        };
        columns.push(array);
    }
    RecordBatch::try_new_with_options(
        target.clone(),
        columns,
        &arrow_array::RecordBatchOptions::new().with_row_count(Some(n)),
    )
    .map_err(|e| Error::invalid_input("metadata rows do not fit the table").with_source(e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_and_declared_metadata_schemas() {
        let s = metadata_schema(None, false).unwrap();
        let names: Vec<_> = s.fields.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "key",
                "url",
                "region",
                "bucket",
                "fileName",
                "size",
                "modificationTime",
                "eTag",
                "operation"
            ]
        );
        assert!(s.fields[0].required);
        assert_eq!(s.fields[6].ty, IcebergType::Timestamptz);

        let declared = ["KEY".to_owned(), "filename".to_owned(), "Size".to_owned()];
        let s = metadata_schema(Some(&declared), false).unwrap();
        assert_eq!(s.fields[0].name, "KEY");
        assert!(s.fields[0].required);
        assert_eq!(s.fields[2].ty, IcebergType::Long);

        let e = metadata_schema(Some(&["bucket".to_owned()]), false).unwrap_err();
        assert!(e.to_string().contains("must include `key`"), "{e}");
        let e = metadata_schema(Some(&["key".to_owned(), "colour".to_owned()]), false).unwrap_err();
        assert!(
            e.to_string().contains("`colour` is not a metadata column"),
            "{e}"
        );
    }
}
