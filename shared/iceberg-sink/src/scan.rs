//! Reading a table's current rows with its deletion vectors applied.
//!
//! iceberg-rust 0.10's reader applies position delete files and equality deletes, but it reads
//! every position delete file as Parquet, so a deletion vector (a blob of a Puffin file, format
//! v3) fails the read. floe hands the reader each data file's DV as the position delete file it
//! stands for: the DV's positions as a small Parquet position delete file made in memory, served
//! by a FileIO that answers those paths from memory and every other path from the table's own
//! FileIO. The reader then applies them with the table's equality deletes, as it applies any
//! position delete file. Compaction ([`crate::maintain`]) and `floe tables show` read through
//! this; a table without DVs is read by iceberg-rust's reader as it is.

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::ops::Range;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use floe_core::{Error, Result};
use futures::TryStreamExt;
use futures::stream::BoxStream;
use iceberg::arrow::{ArrowReader, ArrowReaderBuilder};
use iceberg::io::{
    FileIO, FileIOBuilder, FileMetadata, FileRead, FileWrite, InputFile, OutputFile, Storage,
    StorageConfig, StorageFactory,
};
use iceberg::scan::{ArrowRecordBatchStream, FileScanTask, FileScanTaskDeleteFile, TableScan};
use iceberg::spec::{DataContentType, DataFile, FormatVersion};
use iceberg::table::Table;
use serde::{Deserialize, Serialize};

use crate::catalog::from_iceberg;

/// Where the in-memory position delete files live: no real storage path starts so.
const MEMORY_PREFIX: &str = "floe-dv-memory://";

/// The deletion vectors of a table's current snapshot, and a reader that applies them.
pub struct Vectors {
    /// Each data file's DVs (one in a valid snapshot).
    by_data_file: HashMap<String, Vec<DataFile>>,
    /// The Puffin files they are in (the reader must not open them).
    puffins: HashSet<String>,
    /// The in-memory position delete files made so far, by path.
    memory: Arc<Mutex<HashMap<String, Bytes>>>,
    /// The table's default partition spec (a task's when it names none).
    spec_id: i32,
    /// The table's FileIO, with the in-memory files in front of it.
    io: FileIO,
}

impl Vectors {
    /// The DVs of `table`'s current snapshot (none before format v3, which has them).
    pub async fn of_current(table: &Table) -> Result<Self> {
        Self::of(
            table,
            table.metadata().current_snapshot().map(|s| s.snapshot_id()),
        )
        .await
    }

    /// The DVs of `table`'s snapshot `snapshot_id` (a branch's head, say).
    pub async fn of(table: &Table, snapshot_id: Option<i64>) -> Result<Self> {
        let mut by_data_file: HashMap<String, Vec<DataFile>> = HashMap::new();
        let mut puffins = HashSet::new();
        let v3 = table.metadata().format_version() >= FormatVersion::V3;
        let snapshot = snapshot_id.and_then(|id| table.metadata().snapshot_by_id(id));
        if let Some(snapshot) = snapshot.filter(|_| v3) {
            for e in crate::dv::live_deletes(table, snapshot).await? {
                let file = e.data_file();
                if !crate::dv::is_vector(file) {
                    continue;
                }
                puffins.insert(file.file_path().to_owned());
                let data_file = file.referenced_data_file().ok_or_else(|| {
                    Error::invalid_input(format!(
                        "deletion vector in {} names no data file",
                        file.file_path()
                    ))
                })?;
                by_data_file
                    .entry(data_file)
                    .or_default()
                    .push(file.clone());
            }
        }
        let memory = Arc::new(Mutex::new(HashMap::new()));
        let io = FileIOBuilder::new(Arc::new(Overlay {
            inner: Some(table.file_io().clone()),
            memory: memory.clone(),
        }))
        .build();
        Ok(Vectors {
            by_data_file,
            puffins,
            memory,
            spec_id: table.metadata().default_partition_spec_id(),
            io,
        })
    }

    /// Whether the snapshot has no DVs.
    pub fn is_empty(&self) -> bool {
        self.by_data_file.is_empty()
    }

    /// `task` for [`Vectors::reader`]: its data file's DV in place of the Puffin files.
    pub async fn prepare(&self, mut task: FileScanTask) -> Result<FileScanTask> {
        if self.is_empty() {
            return Ok(task);
        }
        task.deletes
            .retain(|d| !self.puffins.contains(&d.file_path));
        let Some(dvs) = self.by_data_file.get(&task.data_file_path) else {
            return Ok(task);
        };
        let refs: Vec<&DataFile> = dvs.iter().collect();
        let positions = (crate::dv::deleted_positions(&self.io, &refs).await?)
            .remove(&task.data_file_path)
            .unwrap_or_default();
        if positions.is_empty() {
            return Ok(task);
        }
        let positions: Vec<i64> = positions.iter().map(|p| p as i64).collect();
        let bytes = crate::delta::encode_position_deletes(&task.data_file_path, &positions)?;
        let path = format!("{MEMORY_PREFIX}{}.parquet", uuid::Uuid::new_v4());
        task.deletes.push(FileScanTaskDeleteFile {
            file_path: path.clone(),
            file_size_in_bytes: bytes.len() as u64,
            file_type: DataContentType::PositionDeletes,
            partition_spec_id: (task.partition_spec.as_ref()).map_or(self.spec_id, |s| s.spec_id()),
            equality_ids: None,
        });
        (self.memory.lock())
            .map_err(|_| Error::unexpected("the in-memory deletes were poisoned"))?
            .insert(path, Bytes::from(bytes));
        Ok(task)
    }

    /// A reader of prepared tasks (iceberg-rust's own for a table without DVs).
    pub fn reader(&self, table: &Table) -> ArrowReader {
        if self.is_empty() {
            return table.reader_builder().build();
        }
        // The reader spawns its reads on the runtime it runs in, as the table's own does.
        match iceberg::Runtime::try_current() {
            Ok(runtime) => ArrowReaderBuilder::new(self.io.clone(), runtime).build(),
            Err(_) => table.reader_builder().build(),
        }
    }
}

/// The rows `scan` (a scan of `table`'s current snapshot) selects, with the table's deletion
/// vectors applied.
pub async fn read(table: &Table, scan: &TableScan) -> Result<ArrowRecordBatchStream> {
    let vectors = Vectors::of_current(table).await?;
    let tasks: Vec<FileScanTask> = (scan.plan_files().await.map_err(from_iceberg)?)
        .try_collect()
        .await
        .map_err(from_iceberg)?;
    let mut prepared = Vec::with_capacity(tasks.len());
    for task in tasks {
        prepared.push(Ok(vectors.prepare(task).await?));
    }
    let stream = Box::pin(futures::stream::iter(prepared));
    let result = vectors.reader(table).read(stream).map_err(from_iceberg)?;
    Ok(result.stream())
}

/// The storage of a [`Vectors`] FileIO: the in-memory files, in front of the table's FileIO.
/// It is never serialized (a deserialized one has no table to read and says so).
#[derive(Clone, Default, Serialize, Deserialize)]
struct Overlay {
    #[serde(skip)]
    inner: Option<FileIO>,
    #[serde(skip)]
    memory: Arc<Mutex<HashMap<String, Bytes>>>,
}

impl fmt::Debug for Overlay {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Overlay")
    }
}

impl Overlay {
    fn inner(&self) -> iceberg::Result<&FileIO> {
        self.inner.as_ref().ok_or_else(|| {
            iceberg::Error::new(
                iceberg::ErrorKind::Unexpected,
                "a deserialized deletion vector overlay has no table storage",
            )
        })
    }

    fn in_memory(&self, path: &str) -> Option<Bytes> {
        if !path.starts_with(MEMORY_PREFIX) {
            return None;
        }
        self.memory.lock().ok()?.get(path).cloned()
    }

    fn missing(path: &str) -> iceberg::Error {
        iceberg::Error::new(
            iceberg::ErrorKind::DataInvalid,
            format!("{path}: no such in-memory file"),
        )
    }
}

#[typetag::serde]
impl StorageFactory for Overlay {
    fn build(&self, _config: &StorageConfig) -> iceberg::Result<Arc<dyn Storage>> {
        Ok(Arc::new(self.clone()))
    }
}

/// An in-memory file's ranged reads.
struct MemoryRead(Bytes);

#[async_trait::async_trait]
impl FileRead for MemoryRead {
    async fn read(&self, range: Range<u64>) -> iceberg::Result<Bytes> {
        let (start, end) = (range.start as usize, range.end as usize);
        if start > end || end > self.0.len() {
            return Err(iceberg::Error::new(
                iceberg::ErrorKind::DataInvalid,
                format!("range {range:?} past {} bytes", self.0.len()),
            ));
        }
        Ok(self.0.slice(start..end))
    }
}

#[async_trait::async_trait]
#[typetag::serde]
impl Storage for Overlay {
    async fn exists(&self, path: &str) -> iceberg::Result<bool> {
        if path.starts_with(MEMORY_PREFIX) {
            return Ok(self.in_memory(path).is_some());
        }
        self.inner()?.exists(path).await
    }

    async fn metadata(&self, path: &str) -> iceberg::Result<FileMetadata> {
        if path.starts_with(MEMORY_PREFIX) {
            let bytes = self.in_memory(path).ok_or_else(|| Self::missing(path))?;
            return Ok(FileMetadata {
                size: bytes.len() as u64,
            });
        }
        self.inner()?.new_input(path)?.metadata().await
    }

    async fn read(&self, path: &str) -> iceberg::Result<Bytes> {
        if path.starts_with(MEMORY_PREFIX) {
            return self.in_memory(path).ok_or_else(|| Self::missing(path));
        }
        self.inner()?.new_input(path)?.read().await
    }

    async fn reader(&self, path: &str) -> iceberg::Result<Box<dyn FileRead>> {
        if path.starts_with(MEMORY_PREFIX) {
            let bytes = self.in_memory(path).ok_or_else(|| Self::missing(path))?;
            return Ok(Box::new(MemoryRead(bytes)));
        }
        self.inner()?.new_input(path)?.reader().await
    }

    async fn write(&self, path: &str, bs: Bytes) -> iceberg::Result<()> {
        self.inner()?.new_output(path)?.write(bs).await
    }

    async fn writer(&self, path: &str) -> iceberg::Result<Box<dyn FileWrite>> {
        self.inner()?.new_output(path)?.writer().await
    }

    async fn delete(&self, path: &str) -> iceberg::Result<()> {
        self.inner()?.delete(path).await
    }

    async fn delete_prefix(&self, path: &str) -> iceberg::Result<()> {
        self.inner()?.delete_prefix(path).await
    }

    async fn delete_stream(&self, paths: BoxStream<'static, String>) -> iceberg::Result<()> {
        self.inner()?.delete_stream(paths).await
    }

    fn new_input(&self, path: &str) -> iceberg::Result<InputFile> {
        if path.starts_with(MEMORY_PREFIX) {
            return Ok(InputFile::new(Arc::new(self.clone()), path.to_owned()));
        }
        self.inner()?.new_input(path)
    }

    fn new_output(&self, path: &str) -> iceberg::Result<OutputFile> {
        self.inner()?.new_output(path)
    }
}
