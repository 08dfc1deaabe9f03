//! Deletion vectors: how a format v3 table's rows are deleted by position.
//!
//! The v3 spec forbids adding position delete files; a deletion vector (DV) takes their place:
//! the deleted positions of one data file as a bitmap, stored as a `deletion-vector-v1` blob of
//! a Puffin file. The blob is, per the Puffin spec: the length of what follows up to the
//! checksum (4 bytes, big-endian), the magic `D1 D3 39 64`, the positions as a 64-bit Roaring
//! bitmap in the portable serialization (what `roaring`'s `RoaringTreemap` writes: a
//! little-endian count of 32-bit bitmaps, then each one's key and bitmap), and a CRC-32 of the
//! magic and the bitmap (big-endian). Its manifest entry is a position delete file in `puffin`
//! format naming the data file (`referenced_data_file`), the blob's place in the Puffin file
//! (`content_offset`, `content_size_in_bytes`) and its cardinality (`record_count`).
//!
//! A snapshot holds at most one DV per data file, and a DV written for a data file must hold
//! every earlier delete of it, so readers can ignore the position delete files it supersedes.
//! floe writes one DV per data file it deletes from ([`write_vectors`], when the rows are
//! known); when the snapshot is made, [`merge_for_snapshot`] folds into one DV every DV of the
//! snapshot for the same data file, the DV the parent snapshot holds for it, and the positions
//! of the parent's position delete files for it, and names the entries the merged DV replaces,
//! which the snapshot marks deleted ([`crate::delta`]). A data file removed by compaction takes
//! its DV with it ([`crate::maintain`]). Old blobs stay in their Puffin files: positions are
//! only ever added to a data file's DV, so a reader that applies every blob of a Puffin file
//! still deletes the right rows.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io::Cursor;

use floe_core::{Error, Result};
use iceberg::io::FileIO;
use iceberg::puffin::{Blob, CompressionCodec, DELETION_VECTOR_V1, PuffinReader, PuffinWriter};
use iceberg::spec::{
    DataContentType, DataFile, DataFileBuilder, DataFileFormat, ManifestContentType, ManifestEntry,
    SnapshotRef, Struct,
};
use iceberg::table::Table;
use roaring::RoaringTreemap;

use crate::catalog::from_iceberg;

/// The magic that starts a `deletion-vector-v1` blob's content.
pub const MAGIC: [u8; 4] = [0xD1, 0xD3, 0x39, 0x64];

/// Blob property naming the data file a DV deletes from.
pub const REFERENCED_DATA_FILE: &str = "referenced-data-file";

/// Blob property holding a DV's cardinality.
pub const CARDINALITY: &str = "cardinality";

/// The `deletion-vector-v1` blob of `positions`.
pub fn encode(positions: &RoaringTreemap) -> Vec<u8> {
    let bitmap = positions.serialized_size();
    let mut blob = Vec::with_capacity(bitmap + 12);
    blob.extend_from_slice(&((bitmap + MAGIC.len()) as u32).to_be_bytes());
    blob.extend_from_slice(&MAGIC);
    // Writing into a Vec cannot fail.
    let _ = positions.serialize_into(&mut blob);
    let crc = crc32fast::hash(&blob[4..]);
    blob.extend_from_slice(&crc.to_be_bytes());
    blob
}

/// The positions of a `deletion-vector-v1` blob; `what` names the blob in errors (its file and
/// offset). The length, magic and checksum are checked.
pub fn decode(blob: &[u8], what: &str) -> Result<RoaringTreemap> {
    let bad = |problem: String| Error::invalid_input(format!("deletion vector {what}: {problem}"));
    if blob.len() < 12 {
        return Err(bad(format!(
            "{} bytes, too short for a deletion vector",
            blob.len()
        )));
    }
    let length = u32::from_be_bytes([blob[0], blob[1], blob[2], blob[3]]) as usize;
    if length + 8 != blob.len() {
        return Err(bad(format!(
            "its length field says {length} bytes of vector, the blob holds {}",
            blob.len() - 8
        )));
    }
    let body = &blob[4..4 + length];
    if body[..4] != MAGIC {
        return Err(bad(format!(
            "bad magic {:02x?} (want {MAGIC:02x?})",
            &body[..4]
        )));
    }
    let stored = u32::from_be_bytes([
        blob[4 + length],
        blob[5 + length],
        blob[6 + length],
        blob[7 + length],
    ]);
    let computed = crc32fast::hash(body);
    if stored != computed {
        return Err(bad(format!(
            "checksum mismatch (stored {stored:08x}, computed {computed:08x})"
        )));
    }
    let mut bitmap = Cursor::new(&body[4..]);
    let positions = RoaringTreemap::deserialize_from(&mut bitmap)
        .map_err(|e| bad(format!("unreadable bitmap: {e}")))?;
    if bitmap.position() as usize != length - 4 {
        return Err(bad(format!(
            "{} bytes after the bitmap",
            length - 4 - bitmap.position() as usize
        )));
    }
    if positions.max().is_some_and(|p| p > i64::MAX as u64) {
        return Err(bad("a position past 2^63 - 1".to_owned()));
    }
    Ok(positions)
}

/// Whether `file` is a deletion vector (a position delete in a Puffin file).
pub fn is_vector(file: &DataFile) -> bool {
    file.content_type() == DataContentType::PositionDeletes
        && file.file_format() == DataFileFormat::Puffin
}

/// A deletion vector to write: the data file it deletes from, that file's partition and spec,
/// and the positions.
#[derive(Clone, Debug)]
pub struct Vector {
    /// The data file's path, as the table's manifests name it.
    pub data_file: String,
    /// The data file's partition.
    pub partition: Struct,
    /// The data file's partition spec.
    pub spec_id: i32,
    /// Deleted positions.
    pub positions: RoaringTreemap,
}

/// Write `vectors` (at most one per data file) as the blobs of one Puffin file under the
/// table's data folder; returns their delete files, in order, still to be committed.
pub async fn write_vectors(table: &Table, vectors: &[Vector]) -> Result<Vec<DataFile>> {
    if vectors.is_empty() {
        return Ok(Vec::new());
    }
    let path = format!(
        "{}/data/floe-dv-{}.puffin",
        table.metadata().location().trim_end_matches('/'),
        uuid::Uuid::now_v7()
    );
    let bytes = puffin_bytes(vectors).await?;
    let size = bytes.len() as u64;
    // The blobs' places, as the footer records them (what readers check the entries against).
    let places = blob_places(bytes.clone(), &path).await?;
    let output = table.file_io().new_output(&path).map_err(from_iceberg)?;
    output.write(bytes).await.map_err(|e| {
        from_iceberg(e).while_doing(format!("failed to write deletion vectors {path}"))
    })?;
    (vectors.iter().zip(places))
        .map(|(v, (offset, length))| {
            DataFileBuilder::default()
                .content(DataContentType::PositionDeletes)
                .file_path(path.clone())
                .file_format(DataFileFormat::Puffin)
                .partition(v.partition.clone())
                .partition_spec_id(v.spec_id)
                .record_count(v.positions.len())
                .file_size_in_bytes(size)
                .referenced_data_file(Some(v.data_file.clone()))
                .content_offset(Some(offset as i64))
                .content_size_in_bytes(Some(length as i64))
                .build()
                .map_err(|e| Error::unexpected(format!("deletion vector file: {e}")))
        })
        .collect()
}

/// A Puffin file holding one uncompressed `deletion-vector-v1` blob per vector, its footer
/// uncompressed too (DuckDB's reader and pyiceberg's read no other). Written in memory: the
/// file is small, and its size goes in the manifest.
async fn puffin_bytes(vectors: &[Vector]) -> Result<bytes::Bytes> {
    let memory = FileIO::new_with_memory();
    let output = memory
        .new_output("memory:///dv.puffin")
        .map_err(from_iceberg)?;
    let props = HashMap::from([(
        iceberg::puffin::CREATED_BY_PROPERTY.to_owned(),
        format!("floe {}", env!("CARGO_PKG_VERSION")),
    )]);
    let mut writer = PuffinWriter::new(&output, props, false)
        .await
        .map_err(from_iceberg)?;
    for v in vectors {
        let blob = Blob::builder()
            .r#type(DELETION_VECTOR_V1.to_owned())
            // The positions are of the `_pos` metadata column, as Iceberg's Java writer says.
            .fields(vec![iceberg::metadata_columns::RESERVED_FIELD_ID_POS])
            // A DV is written before its snapshot exists: -1, as the spec's writers do.
            .snapshot_id(-1)
            .sequence_number(-1)
            .data(encode(&v.positions))
            .properties(HashMap::from([
                (REFERENCED_DATA_FILE.to_owned(), v.data_file.clone()),
                (CARDINALITY.to_owned(), v.positions.len().to_string()),
            ]))
            .build();
        writer
            .add(blob, CompressionCodec::None)
            .await
            .map_err(from_iceberg)?;
    }
    writer.close().await.map_err(from_iceberg)?;
    output.to_input_file().read().await.map_err(from_iceberg)
}

/// Each blob's (offset, length) in the Puffin file `bytes`, as its footer says.
async fn blob_places(bytes: bytes::Bytes, path: &str) -> Result<Vec<(u64, u64)>> {
    let memory = FileIO::new_with_memory();
    let output = memory
        .new_output("memory:///read.puffin")
        .map_err(from_iceberg)?;
    output.write(bytes).await.map_err(from_iceberg)?;
    let reader = PuffinReader::new(output.to_input_file());
    let footer = reader.file_metadata().await.map_err(|e| {
        from_iceberg(e).while_doing(format!("failed to read back the footer of {path}"))
    })?;
    Ok((footer.blobs().iter())
        .map(|b| (b.offset(), b.length()))
        .collect())
}

/// The positions of deletion vector `dv`: its blob read from its Puffin file, checked, and its
/// cardinality checked against the entry's record count.
pub async fn read_vector(io: &FileIO, dv: &DataFile) -> Result<RoaringTreemap> {
    let path = dv.file_path();
    let (Some(offset), Some(length)) = (dv.content_offset(), dv.content_size_in_bytes()) else {
        return Err(Error::invalid_input(format!(
            "deletion vector in {path} has no content offset and size"
        )));
    };
    let what = format!("{path} at {offset}+{length}");
    if offset < 0 || length < 0 {
        return Err(Error::invalid_input(format!(
            "deletion vector {what}: a negative offset or size"
        )));
    }
    let (start, end) = (offset as u64, offset as u64 + length as u64);
    let reader = (io.new_input(path).map_err(from_iceberg)?)
        .reader()
        .await
        .map_err(|e| from_iceberg(e).while_doing(format!("failed to open {path}")))?;
    let blob = reader.read(start..end).await.map_err(|e| {
        from_iceberg(e).while_doing(format!("failed to read deletion vector {what}"))
    })?;
    if blob.len() as u64 != end - start {
        return Err(Error::invalid_input(format!(
            "deletion vector {what}: the file ends after {} bytes of it",
            blob.len()
        )));
    }
    let positions = decode(&blob, &what)?;
    if positions.len() != dv.record_count() {
        return Err(Error::invalid_input(format!(
            "deletion vector {what}: {} positions, its manifest entry says {}",
            positions.len(),
            dv.record_count()
        )));
    }
    Ok(positions)
}

/// The deleted positions, per data file, of the position delete files `files` (Parquet position
/// delete files and deletion vectors).
pub async fn deleted_positions(
    io: &FileIO,
    files: &[&DataFile],
) -> Result<HashMap<String, RoaringTreemap>> {
    let mut out: HashMap<String, RoaringTreemap> = HashMap::new();
    for f in files {
        if is_vector(f) {
            let data_file = f.referenced_data_file().ok_or_else(|| {
                Error::invalid_input(format!(
                    "deletion vector in {} names no data file",
                    f.file_path()
                ))
            })?;
            *out.entry(data_file).or_default() |= read_vector(io, f).await?;
            continue;
        }
        for (data_file, pos) in crate::delta::read_position_deletes(io, f.file_path()).await? {
            out.entry(data_file).or_default().insert(pos);
        }
    }
    Ok(out)
}

/// A manifest entry's identity within a snapshot: its file and, for a blob, its offset (one
/// Puffin file holds the DVs of several data files).
pub(crate) type EntryKey = (String, Option<i64>);

/// The key of `file`'s entry.
pub(crate) fn entry_key(file: &DataFile) -> EntryKey {
    (file.file_path().to_owned(), file.content_offset())
}

/// The delete files of a v3 snapshot, at most one DV per data file (see the module doc).
pub(crate) struct Merged {
    /// The snapshot's delete files: its equality deletes, its DVs that needed no merging, and
    /// the merged ones.
    pub(crate) files: Vec<DataFile>,
    /// Entries of the parent snapshot the merged DVs replace (to mark deleted).
    pub(crate) replaced: BTreeSet<EntryKey>,
}

/// Fold the DVs among `deleting` (the delete files a snapshot on top of `parent` adds) with each
/// other and with what `parent` holds for the same data files; see the module doc.
pub(crate) async fn merge_for_snapshot(
    table: &Table,
    parent: Option<&SnapshotRef>,
    deleting: Vec<DataFile>,
) -> Result<Merged> {
    let (vectors, mut files): (Vec<DataFile>, Vec<DataFile>) =
        deleting.into_iter().partition(is_vector);
    let mut by_data_file: BTreeMap<String, Vec<DataFile>> = BTreeMap::new();
    for v in vectors {
        let data_file = v.referenced_data_file().ok_or_else(|| {
            Error::invalid_input(format!(
                "deletion vector in {} names no data file",
                v.file_path()
            ))
        })?;
        by_data_file.entry(data_file).or_default().push(v);
    }
    let mut replaced = BTreeSet::new();
    if by_data_file.is_empty() {
        return Ok(Merged { files, replaced });
    }
    // What the parent holds against those data files: a DV, or position delete files naming
    // one of them (or naming none: a position delete file may cover a whole partition).
    let mut earlier: HashMap<String, Vec<DataFile>> = HashMap::new();
    let mut partition_wide: Vec<DataFile> = Vec::new();
    if let Some(parent) = parent {
        let partitions: BTreeSet<String> = (by_data_file.values())
            .map(|v| format!("{:?}", v[0].partition()))
            .collect();
        for e in live_deletes(table, parent).await? {
            let file = e.data_file();
            if file.content_type() != DataContentType::PositionDeletes {
                continue;
            }
            match file.referenced_data_file() {
                Some(d) if by_data_file.contains_key(&d) => {
                    earlier.entry(d).or_default().push(file.clone())
                }
                Some(_) => {}
                None if partitions.contains(&format!("{:?}", file.partition())) => {
                    partition_wide.push(file.clone())
                }
                None => {}
            }
        }
    }
    let io = table.file_io();
    let wide: Vec<&DataFile> = partition_wide.iter().collect();
    let mut wide_positions = deleted_positions(io, &wide).await?;
    let mut merged: Vec<Vector> = Vec::new();
    for (data_file, mut new) in by_data_file {
        let old = earlier.remove(&data_file).unwrap_or_default();
        let wide = wide_positions.remove(&data_file);
        if new.len() == 1 && old.is_empty() && wide.is_none() {
            files.append(&mut new);
            continue;
        }
        let all: Vec<&DataFile> = new.iter().chain(&old).collect();
        let mut positions = (deleted_positions(io, &all).await?)
            .remove(&data_file)
            .unwrap_or_default();
        positions |= wide.unwrap_or_default();
        // Old DVs go, and position delete files of this data file alone; a partition-wide
        // one stays (readers ignore it for a data file with a DV, which now holds its rows).
        replaced.extend(old.iter().map(entry_key));
        merged.push(Vector {
            data_file,
            partition: new[0].partition().clone(),
            spec_id: table.metadata().default_partition_spec_id(),
            positions,
        });
    }
    files.extend(write_vectors(table, &merged).await?);
    Ok(Merged { files, replaced })
}

/// The live entries of `snapshot`'s delete manifests.
pub(crate) async fn live_deletes(
    table: &Table,
    snapshot: &SnapshotRef,
) -> Result<Vec<ManifestEntry>> {
    let list = crate::delta::manifest_list(table, snapshot).await?;
    let mut out = Vec::new();
    for manifest in list.entries() {
        if manifest.content != ManifestContentType::Deletes {
            continue;
        }
        let loaded = (manifest.load_manifest(table.file_io()).await).map_err(|e| {
            from_iceberg(e).while_doing(format!(
                "failed to read manifest {}",
                manifest.manifest_path
            ))
        })?;
        out.extend(
            (loaded.entries().iter())
                .filter(|e| e.is_alive())
                .map(|e| e.as_ref().clone()),
        );
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(positions: &[u64]) -> RoaringTreemap {
        positions.iter().copied().collect()
    }

    #[test]
    fn a_vector_round_trips() {
        for positions in [
            set(&[]),
            set(&[0]),
            set(&[1, 3, 5, 70_000]),
            // Past 32 bits: a second key.
            set(&[2, 1 << 32, (1 << 32) + 9]),
            (0..10_000).collect(),
        ] {
            let blob = encode(&positions);
            assert_eq!(&blob[4..8], &MAGIC);
            assert_eq!(decode(&blob, "t").unwrap(), positions);
        }
    }

    #[test]
    fn the_blob_is_framed_as_the_spec_says() {
        let blob = encode(&set(&[1, 3]));
        let length = u32::from_be_bytes(blob[..4].try_into().unwrap()) as usize;
        assert_eq!(length + 8, blob.len());
        // One 32-bit bitmap (a little-endian count of 1), key 0.
        assert_eq!(&blob[8..16], &1u64.to_le_bytes());
        assert_eq!(&blob[16..20], &0u32.to_le_bytes());
        let crc = u32::from_be_bytes(blob[blob.len() - 4..].try_into().unwrap());
        assert_eq!(crc, crc32fast::hash(&blob[4..blob.len() - 4]));
    }

    #[test]
    fn a_damaged_vector_is_refused_with_what_is_wrong() {
        let good = encode(&set(&[1, 3, 5]));
        let err = |bytes: &[u8]| decode(bytes, "f.puffin at 4+30").unwrap_err().to_string();

        let mut magic = good.clone();
        magic[5] ^= 0xff;
        let e = err(&magic);
        assert!(
            e.contains("bad magic") && e.contains("f.puffin at 4+30"),
            "{e}"
        );

        let mut crc = good.clone();
        let last = crc.len() - 1;
        crc[last] ^= 1;
        assert!(err(&crc).contains("checksum mismatch"), "{}", err(&crc));

        let mut bitmap = good.clone();
        bitmap[20] ^= 0x40;
        assert!(err(&bitmap).contains("checksum mismatch"));

        let e = err(&good[..good.len() - 1]);
        assert!(e.contains("length field"), "{e}");
        assert!(err(&good[..7]).contains("too short"));

        // Well framed, but a position with its top bit set (the spec keeps it 0).
        let high = encode(&set(&[1 << 63]));
        assert!(err(&high).contains("past 2^63"), "{}", err(&high));
    }
}
