//! Reading one object into rows of its table: records, metadata, or content.

use std::io::Read;
use std::sync::Arc;

use arrow_array::RecordBatch;
use floe_core::{Error, ErrorKind, ObjectChange, Result};
use floe_decode::TableSchema;
use floe_decode::cdc::{MetaRow, metadata_batch, metadata_schema};
use floe_decode::decode::{
    BadRecord, Compression, Decoded, Format, LineCutter, LineNumbers, ParquetDecoder, detect,
    stream_decoder,
};
use floe_decode::infer::{arrow_to_iceberg, infer_schema};
use floe_iceberg::TableWriter;
use floe_storage::{GetResult, ObjectStore, collect_body};
use futures::StreamExt;

use crate::config::{Mode, RouteConfig};
use crate::protocol::claim::normalize_etag;

/// Where an object's decoded rows go: its table's writer, or a fan-out over the tables its
/// records name (a route with `route-field`).
pub trait RowSink: Send {
    /// The schema rows are decoded to.
    fn arrow_schema(&self) -> &arrow_schema::SchemaRef;
    /// Take a batch of rows.
    fn write(&mut self, batch: RecordBatch) -> impl Future<Output = Result<()>> + Send;
    /// Rows of the batches written so far that the sink would not take (a record that
    /// matches no table of a route's static routing), as bad records for the route's
    /// `on-error`.
    fn rejected(&mut self) -> Vec<BadRecord> {
        Vec::new()
    }
}

impl RowSink for TableWriter {
    fn arrow_schema(&self) -> &arrow_schema::SchemaRef {
        TableWriter::arrow_schema(self)
    }
    fn write(&mut self, batch: RecordBatch) -> impl Future<Output = Result<()>> + Send {
        TableWriter::write(self, batch)
    }
}

/// An error that makes the object unreadable whatever its kind: trying again cannot help (an
/// unknown format, a corrupt stream, an object that is gone). The route's `on-error` decides.
pub fn unreadable(e: Error) -> Error {
    e.with_retryable(false)
}

/// An error worth trying the object again for (a local disk hiccup while staging it).
fn retry(e: Error) -> Error {
    e.with_retryable(true)
}

/// A bad record under the `fail` policy: the object is rejected whole.
fn rejected(url: &str, bad: BadRecord) -> Error {
    let record = match bad.line {
        Some(line) => format!("record at line {line}"),
        None => "a record".to_owned(),
    };
    Error::invalid_input(format!(
        "{url}: {record} rejected under on-error = fail: {}",
        bad.reason
    ))
    .with_retryable(false)
}

/// The context key of an error saying the object is no longer the version its change names
/// (the value: the ETag it has now).
const SUPERSEDED: &str = "superseded_by";

/// Whether `e` says the object was overwritten after its change (see [`get_change`]): the
/// change is stale, the newer version's own change lands it.
pub fn is_superseded(e: &Error) -> bool {
    e.context().iter().any(|(k, _)| *k == SUPERSEDED)
}

/// Read the version of the object that `change` names. Reading by key alone gives whatever the
/// object holds now: when it was overwritten after the event, the first change would land the
/// second version's rows under the first version's name, and the second change land them
/// again. So the answer's ETag must be the change's (compared as [`normalize_etag`] does: OSS
/// events write it in uppercase, S3 listings quote it); one GET gives body and ETag together.
/// A change without an ETag reads what is there, and so does a change of a local folder, whose
/// ETags are floe's own (modification time and size: an event made elsewhere cannot name
/// them). A missing object is unreadable whatever the retry.
///
/// An append (see [`crate::protocol::claim::lands_as_append`]) is read by range instead: bytes
/// `from..size` (`from` 0 unless given), which later appends leave as they are, so the object
/// growing meanwhile does not make the change stale; an object shorter than the change says
/// was replaced, and the change is stale.
pub async fn get_change(store: &Arc<dyn ObjectStore>, change: &ObjectChange) -> Result<GetResult> {
    get_change_from(store, change, None).await
}

/// [`get_change`] from `from` on, for an append.
pub async fn get_change_from(
    store: &Arc<dyn ObjectStore>,
    change: &ObjectChange,
    from: Option<u64>,
) -> Result<GetResult> {
    if let Some(from) = from.or(change.is_append().then_some(0)) {
        return get_appended(store, change, from).await;
    }
    let got = store.get(&change.key).await.map_err(gone_unreadable)?;
    same_version(store, change, &got.meta)?;
    Ok(got)
}

/// [`get_change`] on the calling thread, for a store whose objects are local files (see
/// [`ObjectStore::get_blocking`]): the object's metadata and its body's chunks. `None` for the
/// other stores, and for an append (read by range). It blocks (`spawn_blocking`).
pub(crate) fn get_change_blocking(
    store: &Arc<dyn ObjectStore>,
    change: &ObjectChange,
) -> Option<Result<(floe_storage::ObjectMeta, Vec<bytes::Bytes>)>> {
    if change.is_append() {
        return None;
    }
    let got = store.get_blocking(&change.key)?;
    Some(got.map_err(gone_unreadable).and_then(|(meta, chunks)| {
        same_version(store, change, &meta)?;
        Ok((meta, chunks))
    }))
}

/// A missing object is unreadable whatever the retry.
fn gone_unreadable(e: Error) -> Error {
    match e.kind() {
        ErrorKind::NotFound => unreadable(e),
        _ => e,
    }
}

/// An error when the object read is not the version the change names (by ETag; a local file's
/// are floe's own, and not checked).
fn same_version(
    store: &Arc<dyn ObjectStore>,
    change: &ObjectChange,
    meta: &floe_storage::ObjectMeta,
) -> Result<()> {
    if let (Some(want), Some(have)) = (&change.etag, &meta.etag)
        && store.local_path(&change.key).is_none()
        && normalize_etag(want) != normalize_etag(have)
    {
        return Err(Error::new(
            ErrorKind::Conflict,
            format!(
                "{} was overwritten after this change (the change names ETag {want}, the object has {have})",
                store.url(&change.key)
            ),
        )
        .with_context(SUPERSEDED, have.clone())
        .with_retryable(false));
    }
    Ok(())
}

/// Bytes `from..size` of an appended object (see [`get_change`]).
async fn get_appended(
    store: &Arc<dyn ObjectStore>,
    change: &ObjectChange,
    from: u64,
) -> Result<GetResult> {
    let url = store.url(&change.key);
    let size = change.size.ok_or_else(|| {
        unreadable(Error::invalid_input(format!(
            "the append to {url} names no size"
        )))
    })?;
    let bytes = store
        .get_range(&change.key, from, size)
        .await
        .map_err(|e| match e.kind() {
            ErrorKind::NotFound => unreadable(e),
            // Shorter than the append left it: replaced since.
            ErrorKind::InvalidInput => Error::new(
                ErrorKind::Conflict,
                format!("{url} is shorter than the {size} bytes this append left it with"),
            )
            .with_context(SUPERSEDED, String::new())
            .with_source(e)
            .with_retryable(false),
            _ => e,
        })?;
    let meta = floe_storage::ObjectMeta {
        key: change.key.clone(),
        size: bytes.len() as u64,
        etag: change.etag.clone(),
        ..Default::default()
    };
    let body: floe_storage::ByteStream = Box::pin(futures::stream::once(async { Ok(bytes) }));
    Ok(GetResult { meta, body })
}

/// [`get_change`] (from `from` on, for an append), and the object's format and compression
/// (from its name, its headers or the route).
async fn open_object(
    store: &Arc<dyn ObjectStore>,
    change: &ObjectChange,
    route: &RouteConfig,
    from: Option<u64>,
) -> Result<(GetResult, Format, Compression)> {
    let got = get_change_from(store, change, from).await?;
    with_format(got, store, change, route, from)
}

/// The answer of [`get_change_from`] and the object's format and compression.
fn with_format(
    got: GetResult,
    store: &Arc<dyn ObjectStore>,
    change: &ObjectChange,
    route: &RouteConfig,
    from: Option<u64>,
) -> Result<(GetResult, Format, Compression)> {
    let (format, compression) = object_format(
        change,
        route,
        got.meta.content_type.as_deref(),
        got.meta.content_encoding.as_deref(),
    )
    .map_err(unreadable)?;
    if from.is_some_and(|f| f > 0) && !appends_by_range(&format) {
        return Err(unreadable(Error::invalid_input(format!(
            "{} was appended to, but its format ({}) cannot be read from the middle: only \
             json, ndjson and headerless csv objects land appends",
            store.url(&change.key),
            format.name()
        ))));
    }
    Ok((got, format, compression))
}

/// Whether the appended bytes of an object in `format` decode on their own: JSON records
/// (compressed or not: an appended gzip member or zstd frame is whole), CSV without a header.
fn appends_by_range(format: &Format) -> bool {
    match format {
        Format::Ndjson | Format::Json => true,
        Format::Csv(o) => !o.header,
        Format::Parquet => false,
    }
}

/// What reading an object produced (rows go straight to the writer).
#[derive(Debug, Default)]
pub struct ObjectStats {
    /// Rows written.
    pub rows: u64,
    /// Bytes read from the store.
    pub bytes: u64,
    /// Bad records set aside (handed to `on_bad`).
    pub bad: u64,
}

/// Callback for a bad record: returns an error to reject the object (`fail` policy).
pub type OnBad<'a> = &'a mut (dyn FnMut(BadRecord) -> std::result::Result<(), BadRecord> + Send);

/// The object's format and compression, or an unreadable-object error saying how to fix it.
pub fn object_format(
    change: &ObjectChange,
    route: &RouteConfig,
    content_type: Option<&str>,
    content_encoding: Option<&str>,
) -> Result<(Format, Compression)> {
    detect(&change.key, content_type, content_encoding, route.format.as_ref()).ok_or_else(|| {
        Error::invalid_input(format!(
            "cannot tell the format of {}: name it .ndjson/.json/.csv/.parquet (optionally .gz/.zst) or set `format` on route `{}`",
            change.key, route.name
        ))
    })
}

/// Called with the bytes read so far, about every 64 MiB of a large object.
pub type OnBytes<'a> = &'a (dyn Fn(u64) + Send + Sync);

/// The bytes a change lands: the whole object, or for an append those from `from` on (see
/// [`get_change`]).
pub struct ChangeBytes<'a> {
    pub change: &'a ObjectChange,
    pub from: Option<u64>,
    /// The whole object's [`get_change`], when it was read ahead (and perhaps decoded).
    pub(crate) early: Option<super::prefetch::Fetch>,
}

/// Stream the records of the bytes `what` lands into `writer`. An error carries the object
/// (context `object`); [`Error::is_retryable`] says whether trying the object again may help.
pub async fn read_records(
    store: &Arc<dyn ObjectStore>,
    what: ChangeBytes<'_>,
    route: &RouteConfig,
    writer: &mut impl RowSink,
    batch_rows: usize,
    on_bad: OnBad<'_>,
    on_bytes: OnBytes<'_>,
) -> Result<ObjectStats> {
    let ChangeBytes {
        change,
        from,
        early,
    } = what;
    let url = store.url(&change.key);
    let read = async {
        let mut stats = ObjectStats::default();
        let read_ahead = early.is_some();
        let mut ahead = None;
        let opened = match early {
            Some(fetch) => super::prefetch::fetched(fetch).await.and_then(|f| {
                ahead = f.decoded;
                with_format(f.got, store, change, route, from)
            }),
            None => open_object(store, change, route, from).await,
        };
        let (got, format, compression) =
            opened.map_err(|e| e.while_doing(format!("failed to read {url}")))?;
        let schema = writer.arrow_schema().clone();
        if format == Format::Parquet {
            let file = parquet_file(store, &change.key, got).await?;
            let mut dec =
                ParquetDecoder::new(file, schema, batch_rows, route.names).map_err(unreadable)?;
            stats.bytes = change.size.unwrap_or(0);
            while let Some(out) = dec.next_batch().map_err(unreadable)? {
                drain(out, writer, on_bad, &mut stats, &url).await?;
            }
            return Ok(stats);
        }
        if let Some(decoded) = ahead.filter(|d| d.fits(&format, compression, &schema, route.names))
        {
            // Decoded by its fetch: the same batches and bad records, in the same order, as
            // decoding it here would give.
            stats.bytes = decoded.bytes;
            for out in decoded.outputs {
                drain(out, writer, on_bad, &mut stats, &url).await?;
            }
            return Ok(stats);
        }
        if format == Format::Ndjson && !(read_ahead && got.meta.size <= DECODE_INLINE_BYTES) {
            // Cut at line ends and decoded on several threads, so that decoding, the slower
            // half, keeps up with the encoder (see `super::segments`).
            let cutter = LineCutter::new(compression, SEGMENT_BYTES).map_err(unreadable)?;
            let decoders = super::segments::Decoders::new(schema, batch_rows, route.names);
            let (tx, rx) = tokio::sync::mpsc::channel::<Step>(super::segments::depth());
            let producer = tokio::spawn(super::segments::decode(got.body, cutter, decoders, tx));
            return write_steps(rx, producer, writer, on_bad, on_bytes, &url).await;
        }
        let mut dec = stream_decoder(&format, compression, schema, batch_rows, route.names)
            .map_err(unreadable)?;
        if read_ahead && got.meta.size <= DECODE_INLINE_BYTES {
            // Small and in memory already: a task and a channel would cost more than the
            // decoding they would overlap.
            let mut body = got.body;
            while let Some(chunk) = body.next().await {
                let chunk = chunk?;
                stats.bytes += chunk.len() as u64;
                dec.push(&chunk).map_err(unreadable)?;
                drain(dec.take(), writer, on_bad, &mut stats, &url).await?;
            }
            dec.finish().map_err(unreadable)?;
            drain(dec.take(), writer, on_bad, &mut stats, &url).await?;
            return Ok(stats);
        }
        // Decoding (JSON/CSV parsing) and encoding (Parquet, zstd) each take about half the time:
        // the decoder runs as its own task, a few batches ahead of the writer, so both cores work.
        let (tx, rx) = tokio::sync::mpsc::channel::<Step>(4);
        let producer = tokio::spawn(decode_stream(got.body, dec, tx));
        write_steps(rx, producer, writer, on_bad, on_bytes, &url).await
    };
    read.await
        .map_err(|e| e.with_context("object", url.clone()))
}

/// Write what a decoding task sends until it ends or fails; the stats of the whole object.
async fn write_steps(
    mut rx: tokio::sync::mpsc::Receiver<Step>,
    producer: tokio::task::JoinHandle<()>,
    writer: &mut impl RowSink,
    on_bad: OnBad<'_>,
    on_bytes: OnBytes<'_>,
    url: &str,
) -> Result<ObjectStats> {
    let mut stats = ObjectStats::default();
    let mut reported = 0u64;
    let mut failure = None;
    let mut numbers = LineNumbers::default();
    while let Some(step) = rx.recv().await {
        let written = match step {
            Step::Read(bytes) => {
                stats.bytes = bytes;
                if bytes - reported >= 64 << 20 {
                    reported = bytes;
                    on_bytes(bytes);
                }
                Ok(())
            }
            Step::Decoded(out) => drain(out, writer, on_bad, &mut stats, url).await,
            Step::Segment(answer) => match answer.await {
                Ok(Ok(segment)) => {
                    drain(numbers.place(segment), writer, on_bad, &mut stats, url).await
                }
                Ok(Err(f)) => Err(f),
                Err(_) => Err(Error::unexpected("a decoding thread stopped")),
            },
            Step::Failed(f) => Err(f),
        };
        if let Err(f) = written {
            failure = Some(f);
            break;
        }
    }
    drop(rx);
    let _ = producer.await;
    match failure {
        Some(f) => Err(f),
        None => Ok(stats),
    }
}

/// NDJSON decoded in parallel is cut into segments of about this many bytes (decompressed):
/// large enough that handing one to a thread costs nothing next to decoding it, small enough
/// that the few in flight hold little memory.
const SEGMENT_BYTES: usize = 512 << 10;

/// A body read ahead and at most this large is decoded on the writer's task.
const DECODE_INLINE_BYTES: u64 = 1 << 20;

/// What the decoding task hands the writer.
pub(super) enum Step {
    /// Bytes of the object read so far.
    Read(u64),
    /// Batches and bad records.
    Decoded(Decoded),
    /// A segment of the object, decoding on a thread of its own (see `super::segments`): the
    /// writer awaits its rows, segments in the object's order.
    Segment(super::segments::Answer),
    /// The object could not be read further.
    Failed(Error),
}

/// Read the body and decode it, sending batches as they come; stops when the writer stops
/// listening.
async fn decode_stream(
    mut body: floe_storage::ByteStream,
    mut dec: Box<dyn floe_decode::decode::StreamDecoder>,
    tx: tokio::sync::mpsc::Sender<Step>,
) {
    let mut bytes = 0u64;
    while let Some(chunk) = body.next().await {
        let chunk = match chunk {
            Ok(c) => c,
            Err(e) => {
                let _ = tx.send(Step::Failed(e)).await;
                return;
            }
        };
        bytes += chunk.len() as u64;
        if let Err(e) = dec.push(&chunk) {
            let _ = tx.send(Step::Failed(unreadable(e))).await;
            return;
        }
        if tx.send(Step::Read(bytes)).await.is_err()
            || tx.send(Step::Decoded(dec.take())).await.is_err()
        {
            return;
        }
    }
    let last = match dec.finish() {
        Ok(()) => Step::Decoded(dec.take()),
        Err(e) => Step::Failed(unreadable(e)),
    };
    let _ = tx.send(last).await;
}

async fn drain(
    out: Decoded,
    writer: &mut impl RowSink,
    on_bad: OnBad<'_>,
    stats: &mut ObjectStats,
    url: &str,
) -> Result<()> {
    for bad in out.bad {
        stats.bad += 1;
        on_bad(bad).map_err(|bad| rejected(url, bad))?;
    }
    for batch in out.batches {
        stats.rows += batch.num_rows() as u64;
        // A failed write of the destination is not the object's fault: try it again.
        writer
            .write(batch)
            .await
            .map_err(|e| retry(e.while_doing("failed to write the table's data files")))?;
        for bad in writer.rejected() {
            stats.rows -= 1;
            stats.bad += 1;
            on_bad(bad).map_err(|bad| rejected(url, bad))?;
        }
    }
    Ok(())
}

/// A Parquet object as a local file: the file itself for a local store, else a temporary copy
/// of `got` (the object as read, its version checked) streamed to disk (Parquet needs random
/// access; memory stays flat).
async fn parquet_file(
    store: &Arc<dyn ObjectStore>,
    key: &str,
    got: GetResult,
) -> Result<std::fs::File> {
    if let Some(path) = store.local_path(key) {
        drop(got);
        return std::fs::File::open(&path).map_err(|e| {
            unreadable(Error::from(e).while_doing(format!("failed to open {}", path.display())))
        });
    }
    let mut tmp = tempfile::tempfile()
        .map_err(|e| retry(Error::from(e).while_doing("failed to create a temporary file")))?;
    let mut body = got.body;
    while let Some(chunk) = body.next().await {
        let chunk = chunk?;
        std::io::Write::write_all(&mut tmp, &chunk).map_err(|e| retry(Error::from(e)))?;
    }
    std::io::Seek::rewind(&mut tmp).map_err(|e| retry(Error::from(e)))?;
    Ok(tmp)
}

/// The schema for a table a route creates: declared, the metadata schema, or inferred from this
/// object's first records.
pub async fn table_schema_for(
    store: &Arc<dyn ObjectStore>,
    change: &ObjectChange,
    route: &RouteConfig,
) -> Result<TableSchema> {
    if let Some(s) = &route.schema {
        return Ok(s.clone());
    }
    match route.mode {
        Mode::Metadata => metadata_schema(route.columns.as_deref(), false).map_err(unreadable),
        Mode::Content => metadata_schema(route.columns.as_deref(), true).map_err(unreadable),
        Mode::Records => infer_object_schema(store, change, route).await,
    }
}

/// A table schema inferred from this object: its first records (first MiB, decompressed), or
/// its Parquet footer. Used to create a table and for schema evolution.
pub async fn infer_object_schema(
    store: &Arc<dyn ObjectStore>,
    change: &ObjectChange,
    route: &RouteConfig,
) -> Result<TableSchema> {
    let mut schema = infer_as_written(store, change, route).await?;
    if route.names == floe_decode::Names::CaseInsensitive {
        // `ID` in one record and `id` in another are one column, as decoding reads them.
        schema.fold_case_variants();
    }
    Ok(schema)
}

/// [`infer_object_schema`] with every spelling of a name a field of its own.
async fn infer_as_written(
    store: &Arc<dyn ObjectStore>,
    change: &ObjectChange,
    route: &RouteConfig,
) -> Result<TableSchema> {
    let (got, format, compression) = open_object(store, change, route, None).await?;
    if format == Format::Parquet {
        let file = parquet_file(store, &change.key, got).await?;
        let builder = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(file)
            .map_err(|e| {
                unreadable(Error::invalid_input("not a readable parquet file").with_source(e))
            })?;
        let mut schema = arrow_to_iceberg(builder.schema()).map_err(unreadable)?;
        for f in &mut schema.fields {
            f.required = false;
        }
        return Ok(schema);
    }
    // Sample the first MiB (decompressed).
    const SAMPLE: usize = 1 << 20;
    let mut raw = Vec::new();
    let mut body = got.body;
    let mut complete = true;
    while let Some(chunk) = body.next().await {
        raw.extend_from_slice(&chunk?);
        if raw.len() >= SAMPLE {
            complete = false;
            break;
        }
    }
    let sample = match compression {
        Compression::None => raw,
        Compression::Gzip => read_some(
            flate2::read::MultiGzDecoder::new(&raw[..]),
            SAMPLE,
            &mut complete,
        ),
        Compression::Zstd => match zstd::stream::read::Decoder::new(&raw[..]) {
            Ok(d) => read_some(d, SAMPLE, &mut complete),
            Err(e) => {
                return Err(unreadable(
                    Error::invalid_input("corrupt zstd stream").with_source(e),
                ));
            }
        },
    };
    infer_schema(&format, &sample, complete, route.infer_max_records)
        .map_err(|e| unreadable(e.while_doing(format!("cannot create table from {}", change.key))))
}

fn read_some(mut r: impl Read, limit: usize, complete: &mut bool) -> Vec<u8> {
    let mut out = Vec::new();
    let mut buf = [0u8; 64 * 1024];
    loop {
        match r.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                out.extend_from_slice(&buf[..n]);
                if out.len() >= limit {
                    *complete = false;
                    break;
                }
            }
            Err(_) => {
                *complete = false;
                break;
            }
        }
    }
    out
}

/// One metadata row's content: the object's bytes when the route wants content and the object is
/// within the size limit (bigger objects carry only their url).
pub async fn content_of(
    store: &Arc<dyn ObjectStore>,
    change: &ObjectChange,
    route: &RouteConfig,
) -> Result<Option<Vec<u8>>> {
    if route.mode != Mode::Content || change.operation == floe_core::Operation::Removed {
        return Ok(None);
    }
    let limit = route.content_max_bytes;
    if change.size.is_some_and(|s| s > limit) {
        return Ok(None);
    }
    let got = get_change(store, change).await?;
    if got.meta.size > limit {
        return Ok(None);
    }
    collect_body(got.body, limit as usize).await.map(Some)
}

/// Metadata rows as a batch of the table's schema.
pub fn metadata_rows(
    schema: &arrow_schema::SchemaRef,
    rows: &[MetaRow<'_>],
) -> Result<RecordBatch> {
    metadata_batch(schema, rows)
}

#[cfg(test)]
mod tests {
    use arrow_array::Array;
    use arrow_schema::{DataType, Field, Schema, SchemaRef};
    use floe_core::Provider;
    use floe_storage::LocalStore;

    use super::super::prefetch::{Candidate, Prefetch};
    use super::*;

    /// A sink that keeps the batches it is given.
    struct Keep {
        schema: SchemaRef,
        batches: Vec<RecordBatch>,
    }

    impl RowSink for Keep {
        fn arrow_schema(&self) -> &SchemaRef {
            &self.schema
        }
        async fn write(&mut self, batch: RecordBatch) -> Result<()> {
            self.batches.push(batch);
            Ok(())
        }
    }

    impl Keep {
        /// The `id` column (a long) of the batches kept, in order.
        fn ids(&self) -> Vec<i64> {
            (self.batches.iter())
                .flat_map(|b| {
                    let ids = b
                        .column(0)
                        .as_any()
                        .downcast_ref::<arrow_array::Int64Array>();
                    ids.unwrap().values().to_vec()
                })
                .collect()
        }
    }

    /// [`read_records`] into a [`Keep`] of `sink`, bad records taken: what was kept, the bad
    /// records' lines, and the stats.
    async fn read_keeping(
        store: &Arc<dyn ObjectStore>,
        what: ChangeBytes<'_>,
        route: &RouteConfig,
        sink: SchemaRef,
        batch_rows: usize,
    ) -> (Keep, Vec<Option<u64>>, Result<ObjectStats>) {
        let mut keep = Keep {
            schema: sink,
            batches: Vec::new(),
        };
        let mut bad = Vec::new();
        let mut on_bad = |b: BadRecord| {
            bad.push(b.line);
            Ok(())
        };
        let stats = read_records(
            store,
            what,
            route,
            &mut keep,
            batch_rows,
            &mut on_bad,
            &|_| {},
        )
        .await;
        (keep, bad, stats)
    }

    fn schema(id: DataType) -> SchemaRef {
        Arc::new(Schema::new(vec![
            Field::new("id", id, true),
            Field::new("name", DataType::Utf8, true),
        ]))
    }

    /// Read `obj-1.ndjson` read ahead and decoded to `ahead`, into a sink of `sink`: the
    /// batches written and the bad records' lines.
    async fn read_decoded_ahead(ahead: SchemaRef, sink: SchemaRef) -> (Keep, Vec<Option<u64>>) {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("data");
        std::fs::create_dir_all(&data).unwrap();
        let body =
            "{\"id\":1,\"name\":\"a\"}\n{\"id\":{},\"name\":\"b\"}\n{\"id\":3,\"name\":\"c\"}\n";
        let names = ["obj-0.ndjson", "obj-1.ndjson"];
        for n in names {
            std::fs::write(data.join(n), body).unwrap();
        }
        let config = ndjson_route(dir.path(), &data);
        let route = &config.routes[0];
        let store: Arc<dyn ObjectStore> = Arc::new(LocalStore::new(&data, "b").unwrap());
        let changes: Vec<ObjectChange> = (names.iter())
            .map(|n| ObjectChange {
                size: Some(body.len() as u64),
                ..ObjectChange::created(Provider::Local, "b", *n)
            })
            .collect();
        let candidates = (changes.iter().enumerate())
            .map(|(idx, change)| Candidate {
                idx,
                store: store.clone(),
                change: change.clone(),
                slot: "t.e".into(),
                declared: route.format.clone(),
            })
            .collect();
        let mut window = Prefetch::new(candidates);
        window.decode_for("t.e", &ahead, 100, floe_decode::Names::default());
        drop(window.take(0));
        let early = window.take(1);
        assert!(early.is_some());
        let what = ChangeBytes {
            change: &changes[1],
            from: None,
            early,
        };
        let (keep, bad, stats) = read_keeping(&store, what, route, sink, 100).await;
        let stats = stats.unwrap();
        assert_eq!(stats.bytes, body.len() as u64);
        assert_eq!(stats.rows + stats.bad, 3);
        (keep, bad)
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn records_decoded_ahead_go_to_a_writer_of_the_schema_decoded_to() {
        let (keep, bad) =
            read_decoded_ahead(schema(DataType::Int64), schema(DataType::Int64)).await;
        assert_eq!(
            bad,
            [Some(2)],
            "the record whose id is an object is no long"
        );
        assert_eq!(keep.ids(), [1, 3]);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_writer_of_another_schema_has_the_object_decoded_again() {
        // Decoded ahead with `id` a long; the writer's `id` is a string (its schema changed in
        // between): the rows are decoded again, to the writer's schema.
        let (keep, bad) = read_decoded_ahead(schema(DataType::Int64), schema(DataType::Utf8)).await;
        assert!(bad.len() < 3, "{bad:?}");
        assert!(!keep.batches.is_empty());
        for b in &keep.batches {
            assert_eq!(b.schema(), schema(DataType::Utf8));
            assert!(
                b.column(0)
                    .as_any()
                    .downcast_ref::<arrow_array::StringArray>()
                    .is_some()
            );
        }
    }

    /// A route over `dir` reading NDJSON into `t.e` (`id` long, `name` string).
    fn ndjson_route(dir: &std::path::Path, data: &std::path::Path) -> crate::FloeConfig {
        std::fs::write(dir.join("schema.json"), r#"{"iceberg":{"schema":{"fields":[{"name":"id","type":"long"},{"name":"name","type":"string"}]}}}"#).unwrap();
        let toml = format!(
            "[source]\ntype = \"local\"\nfolder = \"{}\"\n\n[iceberg]\ncatalog.uri = \"c.db\"\ncatalog.warehouse = \"w\"\n\n[[routes]]\ntable = \"t.e\"\nschema = \"schema.json\"\nformat = \"ndjson\"\n",
            data.display()
        );
        std::fs::write(dir.join("floe.toml"), toml).unwrap();
        crate::FloeConfig::load(&dir.join("floe.toml")).unwrap()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_large_object_decoded_on_several_threads_keeps_its_order_and_bad_lines() {
        // Large enough to be cut into many segments (and read in several chunks); every 97th
        // record is bad, every 89th has a key in another case.
        let mut body = String::new();
        let mut want_bad = Vec::new();
        let mut want_ids = Vec::new();
        for i in 0..60_000u64 {
            let line = i + 1;
            if i % 97 == 5 {
                body.push_str(&format!("{{\"id\":\"no {i}\",\"name\":\"x\"}}\n"));
                want_bad.push(Some(line));
            } else if i % 89 == 7 {
                body.push_str(&format!("{{\"ID\":{i},\"Name\":\"folded\"}}\n"));
                want_ids.push(i as i64);
            } else {
                body.push_str(&format!("{{\"id\":{i},\"name\":\"record number {i}\"}}\n"));
                want_ids.push(i as i64);
            }
        }
        assert!(body.len() > 4 * SEGMENT_BYTES);
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("data");
        std::fs::create_dir_all(&data).unwrap();
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        std::io::Write::write_all(&mut gz, body.as_bytes()).unwrap();
        let gz = gz.finish().unwrap();
        std::fs::write(data.join("big.ndjson"), &body).unwrap();
        std::fs::write(data.join("big.ndjson.gz"), &gz).unwrap();
        let config = ndjson_route(dir.path(), &data);
        let route = &config.routes[0];
        let store: Arc<dyn ObjectStore> = Arc::new(LocalStore::new(&data, "b").unwrap());
        for (name, size) in [("big.ndjson", body.len()), ("big.ndjson.gz", gz.len())] {
            let change = ObjectChange {
                size: Some(size as u64),
                ..ObjectChange::created(Provider::Local, "b", name)
            };
            let what = ChangeBytes {
                change: &change,
                from: None,
                early: None,
            };
            let (keep, bad, stats) =
                read_keeping(&store, what, route, schema(DataType::Int64), 1000).await;
            let stats = stats.unwrap();
            assert_eq!(stats.bytes, size as u64, "{name}");
            assert_eq!(stats.rows, want_ids.len() as u64, "{name}");
            assert_eq!(
                bad, want_bad,
                "{name}: bad records at their lines, in order"
            );
            assert_eq!(keep.ids(), want_ids, "{name}: rows in the object's order");

            // Under `on-error = fail` the first bad record rejects the object, naming its line.
            let what = ChangeBytes {
                change: &change,
                from: None,
                early: None,
            };
            let mut fail = |b: BadRecord| Err(b);
            let mut keep = Keep {
                schema: schema(DataType::Int64),
                batches: Vec::new(),
            };
            let err = read_records(&store, what, route, &mut keep, 1000, &mut fail, &|_| {})
                .await
                .unwrap_err();
            assert!(
                err.to_string().contains("record at line 6 rejected"),
                "{err}"
            );
            assert!(!err.is_retryable());
        }
    }
}
