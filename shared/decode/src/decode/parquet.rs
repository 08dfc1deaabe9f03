//! Parquet objects: read row group by row group (memory follows the row group, not the object),
//! columns matched to the target by name and cast; values that do not fit are bad records.

use parquet::arrow::arrow_reader::{ParquetRecordBatchReader, ParquetRecordBatchReaderBuilder};
use parquet::file::reader::ChunkReader;

use arrow_array::RecordBatch;
use floe_core::{Error, Result};

use super::convert::Conformer;
use super::{BadRecord, Decoded, truncate_raw};

/// Reads a Parquet file into batches of the target schema.
pub struct ParquetDecoder {
    reader: ParquetRecordBatchReader,
    conformer: Conformer,
    rows_seen: u64,
}

impl ParquetDecoder {
    /// Open `file` (a `std::fs::File` or `bytes::Bytes`) for `target`, its columns found by
    /// `names`.
    pub fn new<R: ChunkReader + 'static>(
        file: R,
        target: arrow_schema::SchemaRef,
        batch_rows: usize,
        names: crate::Names,
    ) -> Result<Self> {
        let builder = ParquetRecordBatchReaderBuilder::try_new(file)
            .map_err(|e| Error::invalid_input("not a readable parquet file").with_source(e))?;
        let source = builder.schema().clone();
        let reader = builder
            .with_batch_size(batch_rows.max(1))
            .build()
            .map_err(|e| Error::invalid_input("failed to read parquet file").with_source(e))?;
        Ok(ParquetDecoder {
            reader,
            conformer: Conformer::for_schema(target, source, names),
            rows_seen: 0,
        })
    }

    /// The next batch of good rows and the bad ones; `None` at the end.
    pub fn next_batch(&mut self) -> Result<Option<Decoded>> {
        let Some(batch) = self.reader.next() else {
            return Ok(None);
        };
        let batch = batch
            .map_err(|e| Error::invalid_input("failed to read parquet row group").with_source(e))?;
        let (good, bad) = self
            .conformer
            .conform(&batch)
            .map_err(|e| Error::invalid_input("failed to convert parquet rows").with_source(e))?;
        let mut out = Decoded::default();
        for (row, reason) in bad {
            out.bad.push(BadRecord {
                line: Some(self.rows_seen + row as u64 + 1),
                raw: row_as_json(&batch, row),
                reason,
            });
        }
        self.rows_seen += batch.num_rows() as u64;
        if good.num_rows() > 0 {
            out.batches.push(good);
        }
        Ok(Some(out))
    }
}

/// One row of a batch as a JSON object, for dead letters.
pub(crate) fn row_as_json(batch: &RecordBatch, row: usize) -> String {
    let one = batch.slice(row, 1);
    let mut buf = Vec::new();
    {
        let mut w = arrow_json::LineDelimitedWriter::new(&mut buf);
        if w.write(&one).is_err() || w.finish().is_err() {
            return String::new();
        }
    }
    truncate_raw(buf.trim_ascii())
}
