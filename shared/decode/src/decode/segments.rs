//! Newline-delimited JSON cut at line ends into segments that decode on their own.
//!
//! Decoding is the slower half of landing a large object (encoding Parquet is the other): one
//! decoder on one core leaves the encoder's core idle part of the time. A line of NDJSON is a
//! whole record, so the object can be cut at line ends into segments of a few MiB, decoded on
//! several threads at once, and their rows put back in the object's order:
//!
//! ```text
//!  chunks ─► [decompress] ─► LineCutter ─► Segment ─► SegmentDecoder (one per thread) ─┐
//!                                       └► Segment ─► SegmentDecoder ───────────────────┤
//!                                                                                       ▼
//!                         LineNumbers (in object order: lines of bad records) ◄── DecodedSegment
//! ```
//!
//! The cutter copies nothing: a segment is the object's own chunks, sliced at line ends. Each
//! segment decodes to the same rows and bad records as the object's decoder would give for those
//! lines, with line numbers counted from the segment's start; [`LineNumbers`] makes them the
//! object's. A record longer than the longest accepted (64 MiB) is cut off where it passes that
//! length and its rest skipped, so memory stays bounded; it is a bad record as it is for the
//! object's decoder.

use bytes::Bytes;
use floe_core::Result;

use super::json::{Framing, JsonDecoder, MAX_RECORD_BYTES};
use super::{Codec, Compression, Conformer, Decoded, StreamDecoder};
use crate::Names;
use arrow_schema::SchemaRef;

/// Whole lines of an object (the last segment of an object may end without a line end).
#[derive(Debug, Default)]
pub struct Segment {
    /// The bytes, in order: slices of the object's chunks.
    pub chunks: Vec<Bytes>,
    /// The segment ends inside a record longer than the longest accepted, whose rest (up to and
    /// including its line end) was skipped.
    cut_record: bool,
}

/// Cuts an object's bytes (decompressing them first when they are compressed) into segments of
/// about `target` bytes ending at line ends.
pub struct LineCutter {
    codec: Option<Codec>,
    target: usize,
    pending: Vec<Bytes>,
    pending_len: usize,
    /// Bytes since the last line end (the record being read).
    since_line_end: usize,
    /// Skipping the rest of a record that was too long.
    skipping: bool,
}

impl LineCutter {
    /// A cutter for an object compressed with `compression`, making segments of about `target`
    /// bytes (decompressed).
    pub fn new(compression: Compression, target: usize) -> Result<Self> {
        Ok(LineCutter {
            codec: Codec::new(compression)?,
            target: target.max(1),
            pending: Vec::new(),
            pending_len: 0,
            since_line_end: 0,
            skipping: false,
        })
    }

    /// Take the object's next chunk; segments completed by it are added to `out`. An error
    /// means the object cannot be read further (a corrupt compressed stream).
    pub fn push(&mut self, chunk: Bytes, out: &mut Vec<Segment>) -> Result<()> {
        let Some(codec) = &mut self.codec else {
            self.cut(chunk, out);
            return Ok(());
        };
        // Small slices: one compressed chunk never expands into one large buffer.
        let mut pieces = Vec::new();
        for piece in chunk.chunks(64 * 1024) {
            codec.write(piece).map_err(|e| codec.corrupt(e))?;
            let inflated = codec.output();
            if !inflated.is_empty() {
                pieces.push(Bytes::from(inflated));
            }
        }
        for piece in pieces {
            self.cut(piece, out);
        }
        Ok(())
    }

    /// The object ended: its last segment, if any, is added to `out`.
    pub fn finish(&mut self, out: &mut Vec<Segment>) -> Result<()> {
        if let Some(codec) = &mut self.codec {
            codec.finish().map_err(|e| codec.corrupt(e))?;
            let inflated = codec.output();
            if !inflated.is_empty() {
                self.cut(Bytes::from(inflated), out);
            }
        }
        self.emit(false, out);
        Ok(())
    }

    fn cut(&mut self, mut chunk: Bytes, out: &mut Vec<Segment>) {
        if self.skipping {
            let Some(end) = memchr::memchr(b'\n', &chunk) else {
                return;
            };
            self.skipping = false;
            self.since_line_end = 0;
            chunk = chunk.slice(end + 1..);
        }
        if chunk.is_empty() {
            return;
        }
        // Cut at the first line end past the target size, as often as the chunk allows.
        while self.pending_len + chunk.len() >= self.target {
            let from = self
                .target
                .saturating_sub(self.pending_len)
                .saturating_sub(1);
            let Some(end) = memchr::memchr(b'\n', &chunk[from..]).map(|i| from + i) else {
                break;
            };
            self.add(chunk.slice(..=end));
            self.emit(false, out);
            self.since_line_end = 0;
            chunk = chunk.slice(end + 1..);
        }
        if !chunk.is_empty() {
            self.since_line_end = match memchr::memrchr(b'\n', &chunk) {
                Some(end) => chunk.len() - end - 1,
                None => self.since_line_end + chunk.len(),
            };
            self.add(chunk);
        }
        if self.since_line_end > MAX_RECORD_BYTES {
            // The record under way is too long to land: its decoder sees it pass the limit
            // and sets it aside; the rest of it is not kept.
            self.emit(true, out);
            self.skipping = true;
            self.since_line_end = 0;
        }
    }

    fn add(&mut self, chunk: Bytes) {
        self.pending_len += chunk.len();
        self.pending.push(chunk);
    }

    fn emit(&mut self, cut_record: bool, out: &mut Vec<Segment>) {
        if self.pending_len == 0 {
            return;
        }
        self.pending_len = 0;
        out.push(Segment {
            chunks: std::mem::take(&mut self.pending),
            cut_record,
        });
    }
}

/// A segment's rows and bad records, its bad records' lines counted from the segment's start.
#[derive(Debug, Default)]
pub struct DecodedSegment {
    decoded: Decoded,
    /// Line ends the segment spans (the next segment starts this many lines further on).
    lines: u64,
}

/// Decodes segments, one after another, with the object's decoder settings (one per thread:
/// made once, reused for every segment it takes).
pub struct SegmentDecoder {
    decoder: JsonDecoder,
}

impl SegmentDecoder {
    /// A decoder of NDJSON segments into batches of `target`, `batch_rows` rows at most, names
    /// matched as `names` says.
    pub fn new(target: SchemaRef, batch_rows: usize, names: Names) -> Result<Self> {
        let conformer = Conformer::for_typed_source(target, names);
        Ok(SegmentDecoder {
            decoder: JsonDecoder::new(conformer, Framing::Lines, batch_rows)?,
        })
    }

    /// Decode one segment.
    pub fn decode(&mut self, segment: Segment) -> Result<DecodedSegment> {
        self.decoder.restart_lines();
        for chunk in &segment.chunks {
            self.decoder.push(chunk)?;
        }
        self.decoder.finish()?;
        let lines = self.decoder.line_ends() + u64::from(segment.cut_record);
        Ok(DecodedSegment {
            decoded: self.decoder.take(),
            lines,
        })
    }
}

/// Puts decoded segments back into the object: taken in the object's order, their bad records'
/// lines become the object's.
#[derive(Debug, Default)]
pub struct LineNumbers {
    before: u64,
}

impl LineNumbers {
    /// The next segment's rows and bad records, lines counted from the object's start.
    pub fn place(&mut self, segment: DecodedSegment) -> Decoded {
        let DecodedSegment { mut decoded, lines } = segment;
        for bad in &mut decoded.bad {
            if let Some(line) = &mut bad.line {
                *line += self.before;
            }
        }
        self.before += lines;
        decoded
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow_array::{Array, Int64Array, RecordBatch};
    use arrow_schema::{DataType, Field, Schema};

    use super::*;
    use crate::decode::Format;
    use crate::decode::{BadRecord, stream_decoder};

    fn schema() -> SchemaRef {
        Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int64, false),
            Field::new("name", DataType::Utf8, true),
        ]))
    }

    /// The object's rows (ids) and bad records, decoded whole by the object's decoder.
    fn whole(object: &[u8], chunk: usize, compression: Compression) -> (Vec<i64>, Vec<BadRecord>) {
        let mut dec = stream_decoder(&Format::Ndjson, compression, schema(), 7, Names::default())
            .expect("decoder");
        for piece in object.chunks(chunk) {
            dec.push(piece).expect("push");
        }
        dec.finish().expect("finish");
        flatten(vec![dec.take()])
    }

    /// The same, cut into segments of about `target` bytes and put back together.
    fn segmented(
        object: &[u8],
        chunk: usize,
        target: usize,
        compression: Compression,
    ) -> (Vec<i64>, Vec<BadRecord>, usize) {
        let mut cutter = LineCutter::new(compression, target).expect("cutter");
        let mut segments = Vec::new();
        for piece in object.chunks(chunk) {
            cutter
                .push(Bytes::copy_from_slice(piece), &mut segments)
                .expect("push");
        }
        cutter.finish(&mut segments).expect("finish");
        let count = segments.len();
        let mut decoder = SegmentDecoder::new(schema(), 7, Names::default()).expect("decoder");
        let mut numbers = LineNumbers::default();
        let decoded = segments
            .into_iter()
            .map(|s| numbers.place(decoder.decode(s).expect("decode")))
            .collect();
        let (ids, bad) = flatten(decoded);
        (ids, bad, count)
    }

    fn flatten(decoded: Vec<Decoded>) -> (Vec<i64>, Vec<BadRecord>) {
        let mut ids = Vec::new();
        let mut bad = Vec::new();
        for d in decoded {
            bad.extend(d.bad);
            for b in &d.batches {
                ids.extend(ids_of(b));
            }
        }
        (ids, bad)
    }

    fn ids_of(batch: &RecordBatch) -> Vec<i64> {
        let col = batch
            .column(0)
            .as_any()
            .downcast_ref::<Int64Array>()
            .expect("id column");
        (0..col.len()).map(|i| col.value(i)).collect()
    }

    /// Records with a few bad ones and blank lines among them, ending without a line end.
    fn object(n: i64) -> Vec<u8> {
        let mut out = Vec::new();
        for i in 0..n {
            let line = match i % 13 {
                5 => format!("{{\"id\": \"not a number {i}\"}}\n"),
                9 => "\n".to_owned(),
                11 => format!("{{\"ID\": {i}, \"Name\": \"folded\"}}\n"),
                _ => format!("{{\"id\": {i}, \"name\": \"record {i}\"}}\n"),
            };
            out.extend_from_slice(line.as_bytes());
        }
        out.extend_from_slice(b"{\"id\": -1}");
        out
    }

    #[test]
    fn segments_decode_to_the_rows_and_bad_lines_of_the_whole_object() {
        let data = object(500);
        let (want_ids, want_bad) = whole(&data, 4096, Compression::None);
        assert!(want_bad.len() > 30, "the object has bad records");
        for (chunk, target) in [
            (1, 64),
            (17, 100),
            (333, 1000),
            (4096, 2000),
            (1 << 20, 512),
        ] {
            let (ids, bad, segments) = segmented(&data, chunk, target, Compression::None);
            assert_eq!(ids, want_ids, "chunk {chunk} target {target}");
            assert_eq!(bad, want_bad, "chunk {chunk} target {target}");
            assert!(segments > 3, "{segments} segments for chunk {chunk}");
        }
    }

    #[test]
    fn compressed_objects_are_cut_after_decompressing() {
        let data = object(300);
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        std::io::Write::write_all(&mut gz, &data).expect("gzip");
        let gz = gz.finish().expect("gzip");
        let (want_ids, want_bad) = whole(&data, 4096, Compression::None);
        let (ids, bad, segments) = segmented(&gz, 100, 700, Compression::Gzip);
        assert_eq!((ids, bad), (want_ids, want_bad));
        assert!(segments > 3);

        let mut cutter = LineCutter::new(Compression::Gzip, 100).expect("cutter");
        let err = cutter
            .push(Bytes::from_static(b"not gzip at all"), &mut Vec::new())
            .and_then(|()| cutter.finish(&mut Vec::new()))
            .expect_err("not gzip");
        assert!(err.to_string().contains("corrupt gzip stream"), "{err}");
    }

    #[test]
    fn a_record_too_long_is_set_aside_at_its_line_and_its_rest_not_kept() {
        let mut data = b"{\"id\": 1}\n".to_vec();
        let chunk = vec![b'x'; 1 << 20];
        let mut cutter = LineCutter::new(Compression::None, 4096).expect("cutter");
        let mut segments = Vec::new();
        cutter
            .push(Bytes::from(std::mem::take(&mut data)), &mut segments)
            .expect("push");
        cutter
            .push(
                Bytes::from_static(b"{\"id\": 2, \"name\": \""),
                &mut segments,
            )
            .expect("push");
        let mut held = 0;
        for _ in 0..(MAX_RECORD_BYTES >> 20) + 2 {
            cutter
                .push(Bytes::from(chunk.clone()), &mut segments)
                .expect("push");
            held = held.max(cutter.pending_len);
        }
        cutter
            .push(Bytes::from_static(b"xx\"}\n{\"id\": 3}\n"), &mut segments)
            .expect("push");
        cutter.finish(&mut segments).expect("finish");
        assert!(held <= MAX_RECORD_BYTES + (2 << 20), "held {held} bytes");
        let mut decoder = SegmentDecoder::new(schema(), 7, Names::default()).expect("decoder");
        let mut numbers = LineNumbers::default();
        let decoded: Vec<Decoded> = segments
            .into_iter()
            .map(|s| numbers.place(decoder.decode(s).expect("decode")))
            .collect();
        let (ids, bad) = flatten(decoded);
        assert_eq!(ids, vec![1, 3]);
        assert_eq!(bad.len(), 1);
        assert_eq!(bad[0].line, Some(2));
        assert!(bad[0].reason.contains("record longer than"), "{:?}", bad[0]);
    }
}
