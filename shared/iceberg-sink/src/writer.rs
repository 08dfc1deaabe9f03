//! Writing Arrow batches into a table's data files.
//!
//! The writer stack is iceberg-rust's, layered as its writer module describes:
//! Parquet (zstd, column statistics) → rolling at a target size → data file → fanout by the
//! table's partition spec; only the Parquet layer is floe's own, encoding a file's columns on
//! several threads ([`crate::encode`]). [`TableWriter::close`] returns the data files; committing them is a
//! separate step (the committer), so the batching policy decides when snapshots are made.

use std::collections::BTreeMap;
use std::sync::Arc;

use arrow_array::RecordBatch;
use arrow_schema::SchemaRef as ArrowSchemaRef;
use floe_core::{Error, Result};
use iceberg::arrow::RecordBatchPartitionSplitter;
use iceberg::spec::{DataFile, DataFileFormat, Struct};
use iceberg::table::Table;
use iceberg::writer::base_writer::data_file_writer::{DataFileWriter, DataFileWriterBuilder};
use iceberg::writer::file_writer::location_generator::{
    DefaultFileNameGenerator, DefaultLocationGenerator,
};
use iceberg::writer::file_writer::rolling_writer::RollingFileWriterBuilder;
use iceberg::writer::partitioning::PartitioningWriter;
use iceberg::writer::partitioning::fanout_writer::FanoutWriter;
use iceberg::writer::{IcebergWriter, IcebergWriterBuilder};
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::properties::WriterProperties;

use crate::catalog::from_iceberg;
use crate::changes::{Changes, RowChanges};
use crate::encode::ParallelParquetBuilder;
use crate::sources::{Ordinals, SourceRows, SourceTracker};

/// Writer settings.
#[derive(Clone, Debug)]
pub struct WriterOptions {
    /// Roll to a new data file past this many bytes (default 128 MiB).
    pub target_file_size_bytes: usize,
    /// Rows per Parquet row group (default 131 072): bounds the memory one open file holds.
    pub row_group_rows: usize,
    /// zstd level (default 1: fast, and still far smaller than the input).
    pub zstd_level: i32,
    /// The Parquet codec; `None`: zstd at `zstd_level`. Set from Kafka Connect's
    /// `iceberg.tables.write-props.*` ([`WriteProps`]).
    pub compression: Option<Compression>,
    /// Data file names start with this (floe uses the batch id, so files trace back to batches).
    pub file_prefix: String,
    /// Upserts and deletes by key (see [`crate::changes`]); `None`: every row is appended.
    pub changes: Option<RowChanges>,
}

/// The writer properties floe takes (Kafka Connect's `iceberg.tables.write-props.*`, Iceberg's
/// names): `write.parquet.compression-codec` (`zstd`, `snappy`, `gzip`, `lz4`, `uncompressed`),
/// `write.parquet.compression-level` (zstd 1–22, gzip 0–9), `write.target-file-size-bytes`,
/// `write.parquet.row-group-limit` (rows per row group).
pub const WRITE_PROPS: [&str; 4] = [
    "write.parquet.compression-codec",
    "write.parquet.compression-level",
    "write.target-file-size-bytes",
    "write.parquet.row-group-limit",
];

/// Writer properties ([`WRITE_PROPS`]), parsed once from the configuration.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct WriteProps {
    compression: Option<Compression>,
    zstd_level: Option<i32>,
    target_file_size_bytes: Option<usize>,
    row_group_rows: Option<usize>,
}

impl WriteProps {
    /// Parse `props`; an unknown property or a bad value is an error naming
    /// `<option>.<property>` (`option` is where they were given).
    pub fn parse(props: &std::collections::BTreeMap<String, String>, option: &str) -> Result<Self> {
        let at = |k: &str| format!("{option}.{k}");
        let number = |k: &str, v: &str| {
            v.trim()
                .parse::<u64>()
                .map_err(|_| Error::config(&at(k), format!("`{v}` is not a whole number")))
        };
        let level = match props.get("write.parquet.compression-level") {
            Some(v) => Some(number("write.parquet.compression-level", v)?),
            None => None,
        };
        let bad_level = |e: parquet::errors::ParquetError| {
            Error::config(&at("write.parquet.compression-level"), e)
        };
        let mut out = WriteProps::default();
        for (k, v) in props {
            match k.as_str() {
                "write.parquet.compression-codec" => {
                    out.compression = Some(match v.trim().to_ascii_lowercase().as_str() {
                        "zstd" => Compression::ZSTD(
                            ZstdLevel::try_new(level.unwrap_or(1) as i32).map_err(bad_level)?,
                        ),
                        "snappy" => Compression::SNAPPY,
                        "gzip" => Compression::GZIP(
                            parquet::basic::GzipLevel::try_new(level.unwrap_or(6) as u32)
                                .map_err(bad_level)?,
                        ),
                        "lz4" => Compression::LZ4_RAW,
                        "uncompressed" | "none" => Compression::UNCOMPRESSED,
                        other => {
                            return Err(Error::config(
                                &at(k),
                                format!(
                                    "codec `{other}` is not one of zstd, snappy, gzip, lz4, uncompressed"
                                ),
                            ));
                        }
                    });
                }
                "write.parquet.compression-level" => {}
                "write.target-file-size-bytes" => {
                    out.target_file_size_bytes = Some(number(k, v)?.max(1) as usize);
                }
                "write.parquet.row-group-limit" => {
                    out.row_group_rows = Some(number(k, v)?.max(1) as usize);
                }
                other => {
                    return Err(Error::config(
                        &at(other),
                        format!("floe's writer takes {}", WRITE_PROPS.join(", ")),
                    ));
                }
            }
        }
        if let Some(l) = level
            && out.compression.is_none()
        {
            ZstdLevel::try_new(l as i32).map_err(bad_level)?;
            out.zstd_level = Some(l as i32);
        }
        Ok(out)
    }
}

impl WriteProps {
    /// These properties, with `base`'s where these have none (a route's own over the
    /// `[iceberg]` defaults).
    pub fn or(self, base: &WriteProps) -> WriteProps {
        WriteProps {
            compression: self.compression.or(base.compression),
            zstd_level: self.zstd_level.or(base.zstd_level),
            target_file_size_bytes: self.target_file_size_bytes.or(base.target_file_size_bytes),
            row_group_rows: self.row_group_rows.or(base.row_group_rows),
        }
    }

    /// `write.target-file-size-bytes`, when given.
    pub fn target_file_size_bytes(&self) -> Option<usize> {
        self.target_file_size_bytes
    }
}

impl WriterOptions {
    /// These options with `props` applied over them.
    pub fn with_write_props(mut self, props: &WriteProps) -> Self {
        self.compression = props.compression.or(self.compression);
        self.zstd_level = props.zstd_level.unwrap_or(self.zstd_level);
        self.target_file_size_bytes =
            (props.target_file_size_bytes).unwrap_or(self.target_file_size_bytes);
        self.row_group_rows = props.row_group_rows.unwrap_or(self.row_group_rows);
        self
    }
}

impl Default for WriterOptions {
    fn default() -> Self {
        WriterOptions {
            target_file_size_bytes: 128 << 20,
            row_group_rows: 128 * 1024,
            zstd_level: 1,
            compression: None,
            file_prefix: "floe".into(),
            changes: None,
        }
    }
}

type Builder = DataFileWriterBuilder<
    ParallelParquetBuilder,
    DefaultLocationGenerator,
    DefaultFileNameGenerator,
>;
type Writer =
    DataFileWriter<ParallelParquetBuilder, DefaultLocationGenerator, DefaultFileNameGenerator>;

struct Partitioned {
    splitter: RecordBatchPartitionSplitter,
    fanout: FanoutWriter<Builder>,
}

enum Inner {
    Unpartitioned(Box<Writer>),
    Partitioned(Box<Partitioned>),
}

/// Writes batches of one table's Arrow schema into data files.
pub struct TableWriter {
    arrow_schema: ArrowSchemaRef,
    inner: Inner,
    rows: u64,
    changes: Option<Box<Changes>>,
    /// Rows numbered per partition (see [`crate::sources`]).
    ordinals: Ordinals,
    /// Which source each row came from.
    sources: SourceTracker,
}

impl std::fmt::Debug for TableWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TableWriter")
            .field("rows", &self.rows)
            .finish_non_exhaustive()
    }
}

/// The Arrow schema of a table's current schema (with Parquet field ids), which batches given to
/// [`TableWriter::write`] must have.
pub fn arrow_schema(table: &Table) -> Result<ArrowSchemaRef> {
    let schema = table.metadata().current_schema();
    let arrow = iceberg::arrow::schema_to_arrow_schema(schema).map_err(from_iceberg)?;
    Ok(Arc::new(arrow))
}

/// A column chunk's dictionary stops growing past this many bytes and the rest of the chunk is
/// written plain (Parquet's fallback). Parquet's default, 1 MiB, is exactly a 131,072-row group
/// of distinct 8-byte values: an id or a timestamp column went through the dictionary whole, to
/// fall back at its last value, and interning those values was the largest part of encoding.
/// At 256 KiB such a column falls back after a quarter of the group, while a column of 10,000
/// distinct short strings still fits its dictionary.
pub const DICTIONARY_PAGE_BYTES: usize = 256 << 10;

/// The Parquet writer properties of `opts` (what every data file of a [`TableWriter`] is written
/// with).
pub fn writer_properties(opts: &WriterOptions) -> Result<WriterProperties> {
    let compression = match opts.compression {
        Some(c) => c,
        None => Compression::ZSTD(
            ZstdLevel::try_new(opts.zstd_level).map_err(|e| Error::config("zstd-level", e))?,
        ),
    };
    Ok(WriterProperties::builder()
        .set_compression(compression)
        .set_max_row_group_row_count(Some(opts.row_group_rows.max(1)))
        .set_dictionary_page_size_limit(DICTIONARY_PAGE_BYTES)
        .build())
}

impl TableWriter {
    /// A writer for `table`'s current schema and default partition spec.
    pub async fn new(table: &Table, opts: &WriterOptions) -> Result<Self> {
        let metadata = table.metadata();
        let schema = metadata.current_schema().clone();
        let props = writer_properties(opts)?;
        let changes = match &opts.changes {
            Some(c) => Some(Box::new(
                Changes::new(table, c, &opts.file_prefix, props.clone()).await?,
            )),
            None => None,
        };
        let arrow = arrow_schema(table)?;
        let parquet = ParallelParquetBuilder::new(props, schema.clone(), arrow.clone());
        let location = DefaultLocationGenerator::new(metadata).map_err(from_iceberg)?;
        let names =
            DefaultFileNameGenerator::new(opts.file_prefix.clone(), None, DataFileFormat::Parquet);
        let rolling = RollingFileWriterBuilder::new(
            parquet,
            opts.target_file_size_bytes,
            table.file_io().clone(),
            location,
            names,
        );
        let builder = DataFileWriterBuilder::new(rolling);
        let spec = metadata.default_partition_spec().clone();
        let inner = if spec.is_unpartitioned() {
            Inner::Unpartitioned(Box::new(builder.build(None).await.map_err(from_iceberg)?))
        } else {
            Inner::Partitioned(Box::new(Partitioned {
                splitter: RecordBatchPartitionSplitter::try_new_with_computed_values(schema, spec)
                    .map_err(from_iceberg)?,
                fanout: FanoutWriter::new(builder),
            }))
        };
        Ok(TableWriter {
            arrow_schema: arrow,
            inner,
            rows: 0,
            changes,
            ordinals: Ordinals::default(),
            sources: SourceTracker::default(),
        })
    }

    /// The Arrow schema batches must have.
    pub fn arrow_schema(&self) -> &ArrowSchemaRef {
        &self.arrow_schema
    }

    /// Rows written so far.
    pub fn rows(&self) -> u64 {
        self.rows
    }

    /// The rows written from now on come from `source` (`None`: from no source worth
    /// tracking). [`TableWriter::close_with_sources`] says where each source's rows went.
    pub fn set_source(&mut self, source: Option<u64>) {
        self.sources.current = source;
    }

    /// Write one batch (split by partition when the table is partitioned).
    pub async fn write(&mut self, batch: RecordBatch) -> Result<()> {
        if batch.num_rows() == 0 {
            return Ok(());
        }
        match &mut self.inner {
            Inner::Unpartitioned(w) => {
                let slot = self.ordinals.slot(&Struct::empty());
                let rows = match &mut self.changes {
                    Some(c) => (c.split(None, slot, self.ordinals.next(slot), &batch)).await?,
                    None => batch,
                };
                let n = rows.num_rows() as u64;
                self.rows += n;
                let first = self.ordinals.take(slot, n);
                self.sources.note(slot, first, n);
                if n > 0 {
                    w.write(rows).await.map_err(from_iceberg)?;
                }
            }
            Inner::Partitioned(p) => {
                for (key, part) in p.splitter.split(&batch).map_err(from_iceberg)? {
                    let slot = self.ordinals.slot(key.data());
                    let rows = match &mut self.changes {
                        Some(c) => {
                            let next = self.ordinals.next(slot);
                            c.split(Some(&key), slot, next, &part).await?
                        }
                        None => part,
                    };
                    let n = rows.num_rows() as u64;
                    self.rows += n;
                    let first = self.ordinals.take(slot, n);
                    self.sources.note(slot, first, n);
                    if n > 0 {
                        p.fanout.write(key, rows).await.map_err(from_iceberg)?;
                    }
                }
            }
        }
        Ok(())
    }

    /// Finish every open file and return the data files.
    /// With row changes, the delete files follow the data files.
    pub async fn close(self) -> Result<Vec<DataFile>> {
        Ok(self.close_with_sources().await?.0)
    }

    /// [`TableWriter::close`], and where the rows of each source named by
    /// [`TableWriter::set_source`] went: runs of rows in the data files, in the order written.
    pub async fn close_with_sources(
        self,
    ) -> Result<(Vec<DataFile>, BTreeMap<u64, Vec<SourceRows>>)> {
        let mut files = match self.inner {
            Inner::Unpartitioned(mut w) => w.close().await.map_err(from_iceberg)?,
            Inner::Partitioned(p) => p.fanout.close().await.map_err(from_iceberg)?,
        };
        let sources = self.sources.resolve(&self.ordinals.files(&files))?;
        if let Some(changes) = self.changes {
            let deletes = changes.close(&files, &self.ordinals).await?;
            files.extend(deletes);
        }
        Ok((files, sources))
    }
}
