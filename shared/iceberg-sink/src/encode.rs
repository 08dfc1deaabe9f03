//! Parquet data files whose columns are encoded on a pool of threads.
//!
//! Encoding (dictionaries, levels, zstd) is the one stage of landing rows that a single writer
//! did on a single thread: decoding is shared out over several, so on two cores the writer was
//! the stage everything waited for. Here a batch is cut into its leaf columns
//! ([`compute_leaves`], no copy) and each leaf is queued to its column; a pool of encoding
//! threads, one a core, takes whichever column has leaves waiting and encodes them, so the
//! columns of a batch are encoded side by side while the writer hands over the next batch.
//! Each column's leaves are encoded in the order given (one thread at a time holds a column's
//! writer), so the file is the one a single-threaded writer of the same batches would write.
//!
//! A row group is closed when it holds the rows the properties allow (the batch that crosses
//! the limit is split there, as parquet's own writer splits it), or when the file closes: the
//! columns are drained, their chunks appended in order, and the bytes handed to the table's
//! storage. At most [`IN_FLIGHT_ROWS`] rows of a file wait to be encoded, so memory stays that
//! of a few batches (counted in rows, not batches: a small object's batch is a few hundred).
//!
//! The data file's metrics (sizes, value, null and NaN counts, lower and upper bounds) come
//! from the file's own Parquet metadata, as Iceberg's Parquet writer computes them.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Condvar, LazyLock, Mutex, OnceLock, PoisonError};

use arrow_array::cast::AsArray;
use arrow_array::types::{Float32Type, Float64Type};
use arrow_array::{Array, ArrayRef, RecordBatch};
use arrow_schema::{DataType, Field, SchemaRef as ArrowSchemaRef};
use bytes::Bytes;
use iceberg::io::{FileWrite, OutputFile};
use iceberg::spec::{
    DataContentType, DataFileBuilder, DataFileFormat, Datum, PrimitiveType, SchemaRef, Struct, Type,
};
use iceberg::writer::CurrentFileStatus;
use iceberg::writer::file_writer::{FileWriter, FileWriterBuilder};
use parquet::arrow::PARQUET_FIELD_ID_META_KEY;
use parquet::arrow::arrow_writer::{
    ArrowColumnWriter, ArrowLeafColumn, ArrowRowGroupWriterFactory, ArrowWriter,
    ArrowWriterOptions, compute_leaves,
};
use parquet::file::metadata::ParquetMetaData;
use parquet::file::properties::WriterProperties;
use parquet::file::statistics::Statistics;
use parquet::file::writer::SerializedFileWriter;

/// At most this many rows of a file wait to be encoded, or are being encoded (four batches of
/// the default 8,192 rows).
const IN_FLIGHT_ROWS: usize = 32 << 10;

fn iceberg_error(what: &str, e: impl std::fmt::Display) -> iceberg::Error {
    iceberg::Error::new(iceberg::ErrorKind::Unexpected, format!("{what}: {e}"))
}

/// Builds [`ParallelParquetWriter`]s: the data files of one table schema.
#[derive(Clone)]
pub(crate) struct ParallelParquetBuilder {
    props: WriterProperties,
    schema: SchemaRef,
    arrow: ArrowSchemaRef,
}

impl ParallelParquetBuilder {
    /// Files of `schema` (the Iceberg schema; `arrow` its Arrow form, with field ids) written
    /// with `props`.
    pub(crate) fn new(props: WriterProperties, schema: SchemaRef, arrow: ArrowSchemaRef) -> Self {
        ParallelParquetBuilder {
            props,
            schema,
            arrow,
        }
    }
}

impl FileWriterBuilder for ParallelParquetBuilder {
    type R = ParallelParquetWriter;

    async fn build(&self, output_file: OutputFile) -> iceberg::Result<Self::R> {
        Ok(ParallelParquetWriter {
            builder: self.clone(),
            output: output_file,
            open: None,
            rows: 0,
            nan_counts: HashMap::new(),
        })
    }
}

/// One data file being written (opened at its first rows).
pub(crate) struct ParallelParquetWriter {
    builder: ParallelParquetBuilder,
    output: OutputFile,
    open: Option<Open>,
    rows: usize,
    nan_counts: HashMap<i32, u64>,
}

struct Open {
    out: Box<dyn FileWrite>,
    file: SerializedFileWriter<Vec<u8>>,
    factory: ArrowRowGroupWriterFactory,
    /// The row group being encoded, and its rows so far.
    group: Option<(Arc<Group>, usize)>,
    row_groups: usize,
    /// Bytes handed to `out`.
    flushed: usize,
}

impl Open {
    /// Hand what the file writer has buffered to the storage.
    async fn flush(&mut self) -> iceberg::Result<()> {
        let bytes = std::mem::take(self.file.inner_mut());
        if !bytes.is_empty() {
            self.flushed += bytes.len();
            self.out.write(Bytes::from(bytes)).await?;
        }
        Ok(())
    }

    /// Close the row group being encoded (if any): drain its columns, append their chunks.
    async fn close_group(&mut self) -> iceberg::Result<()> {
        let Some((group, _)) = self.group.take() else {
            return Ok(());
        };
        group.drained(0).await;
        let writers = group.take_writers()?;
        let mut rg = (self.file.next_row_group()).map_err(|e| iceberg_error("row group", e))?;
        for w in writers {
            let chunk = w.close().map_err(|e| iceberg_error("column close", e))?;
            (chunk.append_to_row_group(&mut rg)).map_err(|e| iceberg_error("column chunk", e))?;
        }
        rg.close()
            .map_err(|e| iceberg_error("row group close", e))?;
        self.row_groups += 1;
        self.flush().await
    }
}

impl ParallelParquetWriter {
    async fn open(&mut self) -> iceberg::Result<&mut Open> {
        if self.open.is_none() {
            let options = ArrowWriterOptions::new().with_properties(self.builder.props.clone());
            let arrow =
                ArrowWriter::try_new_with_options(Vec::new(), self.builder.arrow.clone(), options)
                    .map_err(|e| iceberg_error("failed to build the parquet writer", e))?;
            let (file, factory) = (arrow.into_serialized_writer())
                .map_err(|e| iceberg_error("failed to build the parquet writer", e))?;
            let out = self.output.writer().await?;
            self.open = Some(Open {
                out,
                file,
                factory,
                group: None,
                row_groups: 0,
                flushed: 0,
            });
        }
        Ok(self.open.as_mut().expect("opened above"))
    }

    /// Queue `batch` (at most the rows its row group still takes) to its columns.
    async fn write_within_group(&mut self, batch: &RecordBatch) -> iceberg::Result<()> {
        let max_rows = self.builder.props.max_row_group_row_count();
        let arrow = self.builder.arrow.clone();
        let open = self.open().await?;
        if open.group.is_none() {
            let writers = (open.factory.create_column_writers(open.row_groups))
                .map_err(|e| iceberg_error("column writers", e))?;
            open.group = Some((Group::new(writers), 0));
        }
        let (group, rows) = open.group.as_mut().expect("made above");
        let mut leaves = Vec::with_capacity(arrow.fields().len());
        for (field, column) in arrow.fields().iter().zip(batch.columns()) {
            leaves.extend(compute_leaves(field, column).map_err(|e| iceberg_error("levels", e))?);
        }
        let n = batch.num_rows();
        group.drained(IN_FLIGHT_ROWS.saturating_sub(n)).await;
        group.queue(leaves, n)?;
        *rows += batch.num_rows();
        if max_rows.is_some_and(|m| *rows >= m) {
            open.close_group().await?;
        }
        Ok(())
    }
}

impl FileWriter for ParallelParquetWriter {
    async fn write(&mut self, batch: &RecordBatch) -> iceberg::Result<()> {
        if batch.num_rows() == 0 {
            return Ok(());
        }
        if batch.num_columns() != self.builder.arrow.fields().len() {
            return Err(iceberg::Error::new(
                iceberg::ErrorKind::DataInvalid,
                format!(
                    "a batch of {} columns for a file of {}",
                    batch.num_columns(),
                    self.builder.arrow.fields().len()
                ),
            ));
        }
        self.rows += batch.num_rows();
        count_nans(&self.builder.arrow, batch, &mut self.nan_counts);
        let max_rows = self.builder.props.max_row_group_row_count();
        let mut rest = batch.clone();
        while rest.num_rows() > 0 {
            let in_group = self
                .open
                .as_ref()
                .and_then(|o| o.group.as_ref())
                .map_or(0, |(_, rows)| *rows);
            let room = max_rows.map_or(usize::MAX, |m| m.saturating_sub(in_group).max(1));
            let take = rest.num_rows().min(room);
            let part = rest.slice(0, take);
            rest = rest.slice(take, rest.num_rows() - take);
            self.write_within_group(&part).await?;
        }
        Ok(())
    }

    async fn close(mut self) -> iceberg::Result<Vec<DataFileBuilder>> {
        let Some(mut open) = self.open.take() else {
            return Ok(Vec::new());
        };
        open.close_group().await?;
        let metadata = (open.file.finish()).map_err(|e| iceberg_error("parquet footer", e))?;
        open.flush().await?;
        open.out.close().await?;
        let builder = data_file(
            &self.builder.schema,
            &metadata,
            open.flushed,
            self.output.location().to_string(),
            std::mem::take(&mut self.nan_counts),
        )?;
        Ok(vec![builder])
    }
}

impl CurrentFileStatus for ParallelParquetWriter {
    fn current_file_path(&self) -> String {
        self.output.location().to_string()
    }

    fn current_row_num(&self) -> usize {
        self.rows
    }

    fn current_written_size(&self) -> usize {
        self.open.as_ref().map_or(0, |o| {
            let buffered = o.file.inner().len();
            let encoding = o.group.as_ref().map_or(0, |(g, _)| g.estimated_bytes());
            o.flushed + buffered + encoding
        })
    }
}

/// A row group's column writers and the leaves waiting for them.
struct Group {
    state: Mutex<GroupState>,
    /// Woken whenever a column's leaves were encoded.
    progress: tokio::sync::Notify,
}

struct GroupState {
    columns: Vec<Column>,
    /// Rows queued or being encoded, summed over the columns (a batch of n rows adds n a
    /// column until each of its leaves is encoded).
    pending: usize,
    /// The first encoding error.
    failed: Option<String>,
}

struct Column {
    /// `None` while an encoding thread holds it.
    writer: Option<ArrowColumnWriter>,
    /// Leaves waiting, with their rows.
    queue: VecDeque<(ArrowLeafColumn, usize)>,
    /// Whether the column is on the pool's queue or being encoded.
    scheduled: bool,
    /// Its writer's estimate of the bytes it holds encoded.
    estimated: usize,
}

impl Group {
    fn new(writers: Vec<ArrowColumnWriter>) -> Arc<Group> {
        let columns = writers
            .into_iter()
            .map(|w| Column {
                writer: Some(w),
                queue: VecDeque::new(),
                scheduled: false,
                estimated: 0,
            })
            .collect();
        Arc::new(Group {
            state: Mutex::new(GroupState {
                columns,
                pending: 0,
                failed: None,
            }),
            progress: tokio::sync::Notify::new(),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, GroupState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn estimated_bytes(&self) -> usize {
        self.lock().columns.iter().map(|c| c.estimated).sum()
    }

    /// Wait until at most `rows` rows are queued or being encoded.
    async fn drained(&self, rows: usize) {
        loop {
            let woken = self.progress.notified();
            tokio::pin!(woken);
            woken.as_mut().enable();
            let done = {
                let s = self.lock();
                s.pending <= rows.saturating_mul(s.columns.len())
            };
            if done {
                return;
            }
            woken.await;
        }
    }

    /// Queue one leaf to each column, in column order; schedule the columns that were idle.
    fn queue(self: &Arc<Self>, leaves: Vec<ArrowLeafColumn>, rows: usize) -> iceberg::Result<()> {
        let mut ready = Vec::new();
        {
            let mut s = self.lock();
            if let Some(e) = &s.failed {
                return Err(iceberg_error("encoding failed", e));
            }
            if leaves.len() != s.columns.len() {
                return Err(iceberg_error(
                    "leaf columns",
                    format!("{} for {} column writers", leaves.len(), s.columns.len()),
                ));
            }
            s.pending += rows * leaves.len();
            for (i, leaf) in leaves.into_iter().enumerate() {
                let column = &mut s.columns[i];
                column.queue.push_back((leaf, rows));
                if !column.scheduled {
                    column.scheduled = true;
                    ready.push(i);
                }
            }
        }
        POOL.submit(self, ready);
        Ok(())
    }

    /// The column writers, every leaf encoded (see [`Group::drained`]).
    fn take_writers(&self) -> iceberg::Result<Vec<ArrowColumnWriter>> {
        let mut s = self.lock();
        if let Some(e) = &s.failed {
            return Err(iceberg_error("encoding failed", e));
        }
        s.columns
            .iter_mut()
            .map(|c| {
                c.writer
                    .take()
                    .ok_or_else(|| iceberg_error("column writers", "a column is still encoding"))
            })
            .collect()
    }

    /// Encode what column `i` has queued (on an encoding thread).
    fn encode(self: &Arc<Self>, i: usize) {
        let (mut writer, leaves) = {
            let mut s = self.lock();
            let column = &mut s.columns[i];
            match column.writer.take() {
                Some(w) => (w, std::mem::take(&mut column.queue)),
                None => return,
            }
        };
        let mut failed = None;
        for (leaf, _) in &leaves {
            // A panic here would leave the file's writer waiting for leaves never encoded.
            let wrote =
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| writer.write(leaf)));
            match wrote {
                Ok(Ok(())) => {}
                Ok(Err(e)) => failed = Some(e.to_string()),
                Err(_) => failed = Some("a column's encoder panicked".to_owned()),
            }
            if failed.is_some() {
                break;
            }
        }
        let estimated = writer.get_estimated_total_bytes();
        let again = {
            let mut s = self.lock();
            s.pending -= leaves.iter().map(|(_, rows)| rows).sum::<usize>();
            if s.failed.is_none() {
                s.failed = failed;
            }
            let column = &mut s.columns[i];
            column.writer = Some(writer);
            column.estimated = estimated;
            column.scheduled = !column.queue.is_empty();
            column.scheduled
        };
        drop(leaves);
        self.progress.notify_waiters();
        if again {
            // More came while these were encoded: back of the line, so other columns go first.
            POOL.submit(self, vec![i]);
        }
    }
}

/// The encoding threads of the process, one a core, started at the first file; the columns
/// waiting for one, oldest first.
struct Pool {
    jobs: Mutex<VecDeque<(Arc<Group>, usize)>>,
    ready: Condvar,
    /// How many threads started (set at the first file).
    threads: OnceLock<usize>,
}

static POOL: LazyLock<Pool> = LazyLock::new(|| Pool {
    jobs: Mutex::new(VecDeque::new()),
    ready: Condvar::new(),
    threads: OnceLock::new(),
});

impl Pool {
    fn submit(&'static self, group: &Arc<Group>, columns: Vec<usize>) {
        if columns.is_empty() {
            return;
        }
        let threads = *self.threads.get_or_init(|| {
            let mut started = 0;
            for n in 0..std::thread::available_parallelism().map_or(2, |n| n.get()) {
                let spawned = std::thread::Builder::new()
                    .name(format!("floe-encode-{n}"))
                    .spawn(|| POOL.work());
                match spawned {
                    Ok(_) => started += 1,
                    Err(e) => {
                        tracing::warn!(error = %e, "could not start a Parquet encoding thread")
                    }
                }
            }
            started
        });
        if threads == 0 {
            // No thread could be started: encode here rather than wait for none.
            for c in columns {
                group.encode(c);
            }
            return;
        }
        let n = columns.len();
        let mut jobs = self.jobs.lock().unwrap_or_else(PoisonError::into_inner);
        jobs.extend(columns.into_iter().map(|c| (group.clone(), c)));
        drop(jobs);
        if n == 1 {
            self.ready.notify_one();
        } else {
            self.ready.notify_all();
        }
    }

    fn work(&self) {
        loop {
            let (group, column) = {
                let mut jobs = self.jobs.lock().unwrap_or_else(PoisonError::into_inner);
                loop {
                    if let Some(job) = jobs.pop_front() {
                        break job;
                    }
                    jobs = self
                        .ready
                        .wait(jobs)
                        .unwrap_or_else(PoisonError::into_inner);
                }
            };
            group.encode(column);
        }
    }
}

/// Count the NaN values of every float and double column of `batch` (nested ones too), by
/// field id, as Iceberg's `nan_value_counts` (every such column has an entry, 0 included).
fn count_nans(schema: &ArrowSchemaRef, batch: &RecordBatch, into: &mut HashMap<i32, u64>) {
    for (field, column) in schema.fields().iter().zip(batch.columns()) {
        count_field_nans(field, column, into);
    }
}

fn field_id(field: &Field) -> Option<i32> {
    field
        .metadata()
        .get(PARQUET_FIELD_ID_META_KEY)?
        .parse()
        .ok()
}

fn count_field_nans(field: &Field, array: &ArrayRef, into: &mut HashMap<i32, u64>) {
    let nans = match array.data_type() {
        DataType::Float32 => Some(
            (array.as_primitive::<Float32Type>().iter())
                .filter(|v| v.is_some_and(f32::is_nan))
                .count(),
        ),
        DataType::Float64 => Some(
            (array.as_primitive::<Float64Type>().iter())
                .filter(|v| v.is_some_and(f64::is_nan))
                .count(),
        ),
        DataType::Struct(fields) => {
            for (f, c) in fields.iter().zip(array.as_struct().columns()) {
                count_field_nans(f, c, into);
            }
            None
        }
        DataType::List(element) => {
            let list = array.as_list::<i32>();
            count_field_nans(element, &reached(list.values(), list.offsets()), into);
            None
        }
        DataType::LargeList(element) => {
            let list = array.as_list::<i64>();
            count_field_nans(element, &reached(list.values(), list.offsets()), into);
            None
        }
        DataType::Map(entries, _) => {
            let map = array.as_map();
            let entries_array: ArrayRef = Arc::new(map.entries().clone());
            count_field_nans(entries, &reached(&entries_array, map.offsets()), into);
            None
        }
        _ => None,
    };
    if let (Some(n), Some(id)) = (nans, field_id(field)) {
        *into.entry(id).or_insert(0) += n as u64;
    }
}

/// The values of a (possibly sliced) list or map array that its rows reach.
fn reached<O: arrow_array::OffsetSizeTrait>(
    values: &ArrayRef,
    offsets: &arrow_buffer::OffsetBuffer<O>,
) -> ArrayRef {
    let first = offsets.first().map_or(0, |o| o.as_usize());
    let last = offsets.last().map_or(0, |o| o.as_usize());
    values.slice(first, last.saturating_sub(first))
}

/// The data file `metadata` describes: its metrics by field id, as Iceberg's Parquet writer
/// reads them from the file's footer (bounds only where Parquet's statistics are exact).
fn data_file(
    schema: &SchemaRef,
    metadata: &ParquetMetaData,
    size: usize,
    path: String,
    nan_counts: HashMap<i32, u64>,
) -> iceberg::Result<DataFileBuilder> {
    let mut sizes: HashMap<i32, u64> = HashMap::new();
    let mut values: HashMap<i32, u64> = HashMap::new();
    let mut nulls: HashMap<i32, u64> = HashMap::new();
    let mut lower: HashMap<i32, Datum> = HashMap::new();
    let mut upper: HashMap<i32, Datum> = HashMap::new();
    for rg in metadata.row_groups() {
        for column in rg.columns() {
            let info = column.column_descr().self_type().get_basic_info();
            if !info.has_id() {
                continue;
            }
            let id = info.id();
            *sizes.entry(id).or_insert(0) += column.compressed_size() as u64;
            *values.entry(id).or_insert(0) += column.num_values() as u64;
            let Some(stats) = column.statistics() else {
                continue;
            };
            if let Some(n) = stats.null_count_opt() {
                *nulls.entry(id).or_insert(0) += n;
            }
            let Some(field) = schema.field_by_id(id) else {
                continue;
            };
            let Type::Primitive(ty) = field.field_type.as_ref() else {
                continue;
            };
            if stats.min_is_exact()
                && let Some(min) = bound(ty, stats, stats.min_bytes_opt())
            {
                match lower.get(&id) {
                    Some(have) if *have <= min => {}
                    _ => {
                        lower.insert(id, min);
                    }
                }
            }
            if stats.max_is_exact()
                && let Some(max) = bound(ty, stats, stats.max_bytes_opt())
            {
                match upper.get(&id) {
                    Some(have) if *have >= max => {}
                    _ => {
                        upper.insert(id, max);
                    }
                }
            }
        }
    }
    let mut builder = DataFileBuilder::default();
    builder
        .content(DataContentType::Data)
        .file_path(path)
        .file_format(DataFileFormat::Parquet)
        .partition(Struct::empty())
        .record_count(metadata.file_metadata().num_rows() as u64)
        .file_size_in_bytes(size as u64)
        .column_sizes(sizes)
        .value_counts(values)
        .null_value_counts(nulls)
        .nan_value_counts(nan_counts)
        .lower_bounds(lower)
        .upper_bounds(upper)
        .split_offsets(Some(
            metadata
                .row_groups()
                .iter()
                .filter_map(|rg| rg.file_offset())
                .collect(),
        ));
    Ok(builder)
}

/// A column's bound as an Iceberg value: Parquet keeps it in its physical type's plain
/// encoding, which is Iceberg's single-value form but for decimals stored as integers (Iceberg
/// writes decimals big-endian).
fn bound(ty: &PrimitiveType, stats: &Statistics, bytes: Option<&[u8]>) -> Option<Datum> {
    let bytes = bytes?;
    if let PrimitiveType::Decimal { .. } = ty {
        let unscaled = match stats {
            Statistics::Int32(_) => i128::from(i32::from_le_bytes(bytes.try_into().ok()?)),
            Statistics::Int64(_) => i128::from(i64::from_le_bytes(bytes.try_into().ok()?)),
            _ => return Datum::try_from_bytes(bytes, ty.clone()).ok(),
        };
        return Datum::try_from_bytes(&unscaled.to_be_bytes(), ty.clone()).ok();
    }
    Datum::try_from_bytes(bytes, ty.clone()).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::Float64Array;
    use iceberg::io::FileIOBuilder;
    use iceberg::spec::{ListType, MapType, NestedField, Schema, StructType};
    use iceberg::writer::file_writer::ParquetWriterBuilder;

    /// The test schema, its Arrow form, the writer's default properties, a folder and a FileIO.
    fn fixture() -> (
        SchemaRef,
        ArrowSchemaRef,
        WriterProperties,
        tempfile::TempDir,
        iceberg::io::FileIO,
    ) {
        let schema = schema();
        let arrow: ArrowSchemaRef =
            Arc::new(iceberg::arrow::schema_to_arrow_schema(&schema).unwrap());
        let props = crate::writer::writer_properties(&Default::default()).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let io = FileIOBuilder::new(Arc::new(iceberg::io::LocalFsStorageFactory)).build();
        (schema, arrow, props, dir, io)
    }

    fn schema() -> SchemaRef {
        let f = |id, name: &str, ty: PrimitiveType| {
            Arc::new(NestedField::optional(id, name, Type::Primitive(ty)))
        };
        Arc::new(
            Schema::builder()
                .with_fields(vec![
                    Arc::new(NestedField::required(
                        1,
                        "id",
                        Type::Primitive(PrimitiveType::Long),
                    )),
                    f(2, "name", PrimitiveType::String),
                    f(3, "amount", PrimitiveType::Double),
                    f(4, "ratio", PrimitiveType::Float),
                    f(5, "ok", PrimitiveType::Boolean),
                    f(6, "day", PrimitiveType::Date),
                    f(7, "ts", PrimitiveType::Timestamptz),
                    f(
                        8,
                        "price",
                        PrimitiveType::Decimal {
                            precision: 10,
                            scale: 2,
                        },
                    ),
                    Arc::new(NestedField::optional(
                        9,
                        "point",
                        Type::Struct(StructType::new(vec![
                            f(10, "x", PrimitiveType::Int),
                            f(11, "y", PrimitiveType::Double),
                        ])),
                    )),
                    Arc::new(NestedField::optional(
                        12,
                        "scores",
                        Type::List(ListType::new(Arc::new(NestedField::list_element(
                            13,
                            Type::Primitive(PrimitiveType::Double),
                            false,
                        )))),
                    )),
                    Arc::new(NestedField::optional(
                        14,
                        "tags",
                        Type::Map(MapType::new(
                            Arc::new(NestedField::map_key_element(
                                15,
                                Type::Primitive(PrimitiveType::String),
                            )),
                            Arc::new(NestedField::map_value_element(
                                16,
                                Type::Primitive(PrimitiveType::Float),
                                false,
                            )),
                        )),
                    )),
                ])
                .build()
                .unwrap(),
        )
    }

    /// Batch `n` of `rows` rows: every type, nulls, and NaNs in the double column (which JSON
    /// cannot spell, so it is replaced after decoding).
    fn batch(arrow: &ArrowSchemaRef, n: usize, rows: usize) -> RecordBatch {
        let mut lines = String::new();
        for r in 0..rows {
            let i = n * rows + r;
            let name = if i.is_multiple_of(7) {
                "null".to_owned()
            } else {
                format!("\"user-{}\"", i % 53)
            };
            lines.push_str(&format!(
                "{{\"id\":{i},\"name\":{name},\"amount\":1.5,\"ratio\":{},\"ok\":{},\"day\":\"2026-12-{:02}\",\
                 \"ts\":\"2026-12-07T10:{:02}:00Z\",\"price\":\"{}.{:02}\",\"point\":{{\"x\":{},\"y\":{}.25}},\
                 \"scores\":[{}.5,{}],\"tags\":{{\"k{}\":{}.75}}}}\n",
                (i % 13) as f32 / 4.0,
                i.is_multiple_of(3),
                1 + i % 28,
                i % 60,
                (i * 37) % 100_000,
                i % 100,
                i as i32 - 500,
                i % 11,
                i % 5,
                i % 17,
                i % 4,
                i % 9,
            ));
        }
        let mut decoder = arrow_json::ReaderBuilder::new(arrow.clone())
            .build_decoder()
            .unwrap();
        decoder.decode(lines.as_bytes()).unwrap();
        let decoded = decoder.flush().unwrap().unwrap();
        let amounts: Float64Array = (0..rows)
            .map(|r| match (n * rows + r) % 10 {
                0 => None,
                1 => Some(f64::NAN),
                k => Some(k as f64 * 0.5 - n as f64),
            })
            .collect();
        let mut columns = decoded.columns().to_vec();
        columns[2] = Arc::new(amounts);
        RecordBatch::try_new(arrow.clone(), columns).unwrap()
    }

    async fn write<B: FileWriterBuilder>(
        builder: B,
        io: &iceberg::io::FileIO,
        path: &str,
        batches: &[RecordBatch],
    ) -> iceberg::spec::DataFile {
        let mut w = builder.build(io.new_output(path).unwrap()).await.unwrap();
        for b in batches {
            w.write(b).await.unwrap();
        }
        let mut files = w.close().await.unwrap();
        assert_eq!(files.len(), 1);
        files.remove(0).partition_spec_id(0).build().unwrap()
    }

    /// The files are Iceberg's own Parquet writer's, byte for byte, and so are their metrics:
    /// batches that cross row groups, nested columns, nulls, NaNs, every bound type.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn files_and_metrics_are_those_of_icebergs_own_parquet_writer() {
        let (schema, arrow, _, dir, io) = fixture();
        let batches: Vec<_> = (0..9).map(|n| batch(&arrow, n, 700)).collect();
        let opts = crate::writer::WriterOptions {
            row_group_rows: 1000,
            ..Default::default()
        };
        let props = crate::writer::writer_properties(&opts).unwrap();
        let ours_path = format!("{}/ours.parquet", dir.path().display());
        let theirs_path = format!("{}/theirs.parquet", dir.path().display());
        let ours = write(
            ParallelParquetBuilder::new(props.clone(), schema.clone(), arrow.clone()),
            &io,
            &ours_path,
            &batches,
        )
        .await;
        let theirs = write(
            ParquetWriterBuilder::new(props, schema.clone()),
            &io,
            &theirs_path,
            &batches,
        )
        .await;
        let (a, b) = (
            std::fs::read(&ours_path).unwrap(),
            std::fs::read(&theirs_path).unwrap(),
        );
        assert!(
            a == b,
            "the files differ ({} and {} bytes)",
            a.len(),
            b.len()
        );
        assert_eq!(ours.record_count(), 6300);
        assert_eq!(ours.split_offsets().map(|s| s.len()), Some(7));
        assert_eq!(ours.record_count(), theirs.record_count());
        assert_eq!(ours.file_size_in_bytes(), theirs.file_size_in_bytes());
        assert_eq!(ours.file_size_in_bytes(), a.len() as u64);
        assert_eq!(ours.column_sizes(), theirs.column_sizes());
        assert_eq!(ours.value_counts(), theirs.value_counts());
        assert_eq!(ours.null_value_counts(), theirs.null_value_counts());
        assert_eq!(ours.nan_value_counts(), theirs.nan_value_counts());
        assert_eq!(ours.nan_value_counts().get(&3), Some(&630));
        assert_eq!(ours.lower_bounds(), theirs.lower_bounds());
        assert_eq!(ours.upper_bounds(), theirs.upper_bounds());
        assert_eq!(ours.lower_bounds().len(), 13, "{:?}", ours.lower_bounds());
        assert_eq!(ours.split_offsets(), theirs.split_offsets());
    }

    /// Files written at the same time (a partitioned table's, or several tables') share the
    /// encoding threads and stay each what it would be alone.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn files_written_together_share_the_threads_and_stay_apart() {
        let (schema, arrow, props, dir, io) = fixture();
        let builder = ParallelParquetBuilder::new(props.clone(), schema.clone(), arrow.clone());
        let batches: Vec<Vec<_>> = (0..3)
            .map(|f| {
                (0..6)
                    .map(|n| batch(&arrow, f * 10 + n, 300 + 50 * f))
                    .collect()
            })
            .collect();
        let mut writers = Vec::new();
        for f in 0..3 {
            let out = io.new_output(format!("{}/ours-{f}.parquet", dir.path().display()));
            writers.push(builder.build(out.unwrap()).await.unwrap());
        }
        for n in 0..6 {
            for (w, b) in writers.iter_mut().zip(&batches) {
                w.write(&b[n]).await.unwrap();
            }
        }
        for w in writers {
            w.close().await.unwrap();
        }
        for (f, batches) in batches.iter().enumerate() {
            let theirs = format!("{}/theirs-{f}.parquet", dir.path().display());
            let reference = ParquetWriterBuilder::new(props.clone(), schema.clone());
            write(reference, &io, &theirs, batches).await;
            let ours = std::fs::read(format!("{}/ours-{f}.parquet", dir.path().display()));
            assert!(
                ours.unwrap() == std::fs::read(&theirs).unwrap(),
                "file {f} differs"
            );
        }
    }

    /// A file given no rows is not made.
    #[tokio::test]
    async fn no_rows_no_file() {
        let (schema, arrow, props, dir, io) = fixture();
        let path = format!("{}/none.parquet", dir.path().display());
        let builder = ParallelParquetBuilder::new(props, schema, arrow.clone());
        let mut w = builder.build(io.new_output(&path).unwrap()).await.unwrap();
        w.write(&RecordBatch::new_empty(arrow)).await.unwrap();
        assert!(w.close().await.unwrap().is_empty());
        assert!(!std::path::Path::new(&path).exists());
    }
}
