//! Object decoders: bytes of an object in, Arrow batches of the target table's schema out.
//!
//! ```text
//!  object bytes ─► decompress (gzip / zstd) ─► frame records (lines, JSON documents, CSV)
//!        (chunks of any size)                         │
//!                                                     ▼
//!        bad records ◄── conform to the target ◄── decode a batch (arrow-json / csv-core)
//!        (line, raw, reason)    schema (row by row)
//! ```
//!
//! JSON records that are plain objects skip the middle: the typed reader (module `typed`) reads
//! them straight into builders of the target schema and converts as the conformer does;
//! arrow-json and the conformer take what it is not sure of.
//!
//! Decoders are push-based ([`StreamDecoder::push`] any chunk, [`StreamDecoder::finish`] at the
//! end) so the caller streams an object of any size through a bounded amount of memory: one batch
//! of records plus one chunk. Parquet needs random access and has its own [`ParquetDecoder`].

mod convert;
mod csv;
mod fold;
mod json;
mod parquet;
mod segments;
mod typed;
#[cfg(test)]
mod typed_tests;

use std::io::Write;

use arrow_array::RecordBatch;
use arrow_schema::SchemaRef;
use floe_core::{Error, Result};

pub use self::csv::{CsvDecoder, CsvOptions};
pub use self::json::{Framing, JsonDecoder, split_json_records};
pub use self::parquet::ParquetDecoder;
pub use self::segments::{DecodedSegment, LineCutter, LineNumbers, Segment, SegmentDecoder};
pub use convert::{Conformer, parse_date, parse_timestamp_nanos};

/// Longest raw text kept for a bad record.
const MAX_RAW_BYTES: usize = 64 * 1024;

/// A record that could not be landed, with where it was and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BadRecord {
    /// 1-based line (or row, for Parquet) where the record starts.
    pub line: Option<u64>,
    /// The record's text (truncated to 64 KiB).
    pub raw: String,
    /// Why it was set aside; names the field where there is one.
    pub reason: String,
}

/// What a decoder produced since it was last asked.
#[derive(Debug, Default)]
pub struct Decoded {
    /// Batches of good records, in the target schema.
    pub batches: Vec<RecordBatch>,
    /// Records set aside.
    pub bad: Vec<BadRecord>,
}

/// A push-based decoder of one object.
pub trait StreamDecoder: Send {
    /// Feed the next chunk of the object. An error here means the object as a whole cannot be
    /// read further (say, a corrupt gzip stream); bad records are reported through [`Self::take`].
    fn push(&mut self, bytes: &[u8]) -> Result<()>;
    /// The object ended.
    fn finish(&mut self) -> Result<()>;
    /// Take the batches and bad records produced so far.
    fn take(&mut self) -> Decoded;
}

/// Record formats.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Format {
    /// One JSON object per line.
    Ndjson,
    /// A JSON array of objects, or JSON objects one after another.
    Json,
    /// Comma (or otherwise) separated values.
    Csv(CsvOptions),
    /// Apache Parquet.
    Parquet,
}

impl Format {
    /// The format's name in configuration.
    pub fn name(&self) -> &'static str {
        match self {
            Format::Ndjson => "ndjson",
            Format::Json => "json",
            Format::Csv(_) => "csv",
            Format::Parquet => "parquet",
        }
    }

    /// Parse a configured format name.
    pub fn parse(name: &str) -> Option<Format> {
        Some(match name.to_ascii_lowercase().as_str() {
            "ndjson" | "jsonl" | "json-lines" => Format::Ndjson,
            "json" => Format::Json,
            "csv" => Format::Csv(CsvOptions::default()),
            "tsv" => Format::Csv(CsvOptions {
                delimiter: b'\t',
                ..CsvOptions::default()
            }),
            "parquet" => Format::Parquet,
            _ => return None,
        })
    }
}

/// Stream compressions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Compression {
    /// Not compressed.
    None,
    /// gzip (one or more members).
    Gzip,
    /// Zstandard.
    Zstd,
}

/// Work out an object's format and compression from its key's extensions (`.ndjson.gz`,
/// `.csv.zst`), then its content type / encoding; `declared` (a route's `format`) wins for the
/// format. `None` when nothing says what it is.
pub fn detect(
    key: &str,
    content_type: Option<&str>,
    content_encoding: Option<&str>,
    declared: Option<&Format>,
) -> Option<(Format, Compression)> {
    let name = key.rsplit('/').next().unwrap_or(key).to_ascii_lowercase();
    let (stem, mut compression) = if let Some(s) = name
        .strip_suffix(".gz")
        .or_else(|| name.strip_suffix(".gzip"))
    {
        (s, Compression::Gzip)
    } else if let Some(s) = name
        .strip_suffix(".zst")
        .or_else(|| name.strip_suffix(".zstd"))
    {
        (s, Compression::Zstd)
    } else {
        (name.as_str(), Compression::None)
    };
    if compression == Compression::None {
        match content_encoding.map(str::to_ascii_lowercase).as_deref() {
            Some("gzip") => compression = Compression::Gzip,
            Some("zstd") => compression = Compression::Zstd,
            _ => {}
        }
    }
    let ext = stem.rsplit_once('.').map(|(_, e)| e).unwrap_or("");
    let by_ext = match ext {
        "ndjson" | "jsonl" => Some(Format::Ndjson),
        "json" => Some(Format::Json),
        "csv" => Some(Format::Csv(CsvOptions::default())),
        "tsv" => Format::parse("tsv"),
        "parquet" => Some(Format::Parquet),
        _ => None,
    };
    let by_type = content_type.and_then(|ct| {
        let ct = ct
            .split(';')
            .next()
            .unwrap_or("")
            .trim()
            .to_ascii_lowercase();
        match ct.as_str() {
            "application/x-ndjson" | "application/jsonl" | "application/json-seq" => {
                Some(Format::Ndjson)
            }
            "application/json" => Some(Format::Json),
            "text/csv" => Some(Format::Csv(CsvOptions::default())),
            "application/vnd.apache.parquet" | "application/x-parquet" => Some(Format::Parquet),
            "application/gzip" | "application/x-gzip" => {
                compression = Compression::Gzip;
                None
            }
            "application/zstd" => {
                compression = Compression::Zstd;
                None
            }
            _ => None,
        }
    });
    let format = declared.cloned().or(by_ext).or(by_type)?;
    Some((format, compression))
}

/// A streaming decoder for `format` (not Parquet) behind `compression`, producing batches of at
/// most `batch_rows` rows of `target`, the data's names matched to its columns by `names`.
pub fn stream_decoder(
    format: &Format,
    compression: Compression,
    target: SchemaRef,
    batch_rows: usize,
    names: crate::Names,
) -> Result<Box<dyn StreamDecoder>> {
    let inner: Box<dyn StreamDecoder> = match format {
        Format::Ndjson => Box::new(JsonDecoder::new(
            Conformer::for_typed_source(target, names),
            Framing::Lines,
            batch_rows,
        )?),
        Format::Json => Box::new(JsonDecoder::new(
            Conformer::for_typed_source(target, names),
            Framing::Documents,
            batch_rows,
        )?),
        Format::Csv(opts) => Box::new(CsvDecoder::new(target, opts, batch_rows, names)),
        Format::Parquet => {
            return Err(Error::unexpected(
                "parquet objects are read with ParquetDecoder, not streamed",
            ));
        }
    };
    Ok(match Codec::new(compression)? {
        None => inner,
        Some(codec) => Box::new(Decompressing { codec, inner }),
    })
}

enum Codec {
    Gzip(Box<flate2::write::MultiGzDecoder<Vec<u8>>>),
    Zstd(zstd::stream::write::Decoder<'static, Vec<u8>>),
}

impl Codec {
    /// The decompressor for `compression` (`None`: not compressed).
    fn new(compression: Compression) -> Result<Option<Codec>> {
        Ok(match compression {
            Compression::None => None,
            Compression::Gzip => Some(Codec::Gzip(Box::new(flate2::write::MultiGzDecoder::new(
                Vec::new(),
            )))),
            Compression::Zstd => Some(Codec::Zstd(
                zstd::stream::write::Decoder::new(Vec::new())
                    .map_err(|e| Error::unexpected("failed to start zstd").with_source(e))?,
            )),
        })
    }

    /// The error for a stream this codec cannot decompress.
    fn corrupt(&self, e: std::io::Error) -> Error {
        Error::invalid_input(format!("corrupt {} stream", self.name())).with_source(e)
    }

    fn name(&self) -> &'static str {
        match self {
            Codec::Gzip(_) => "gzip",
            Codec::Zstd(_) => "zstd",
        }
    }

    fn write(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        match self {
            Codec::Gzip(d) => d.write_all(bytes),
            Codec::Zstd(d) => d.write_all(bytes),
        }
    }

    fn finish(&mut self) -> std::io::Result<()> {
        match self {
            Codec::Gzip(d) => d.try_finish(),
            Codec::Zstd(d) => d.flush(),
        }
    }

    fn output(&mut self) -> Vec<u8> {
        match self {
            Codec::Gzip(d) => std::mem::take(d.get_mut()),
            Codec::Zstd(d) => std::mem::take(d.get_mut()),
        }
    }
}

/// Decompresses before the record decoder. Input is fed in small slices so one compressed chunk
/// never expands into a large buffer.
struct Decompressing {
    codec: Codec,
    inner: Box<dyn StreamDecoder>,
}

impl StreamDecoder for Decompressing {
    fn push(&mut self, bytes: &[u8]) -> Result<()> {
        for piece in bytes.chunks(64 * 1024) {
            if let Err(e) = self.codec.write(piece) {
                return Err(self.codec.corrupt(e));
            }
            let out = self.codec.output();
            self.inner.push(&out)?;
        }
        Ok(())
    }

    fn finish(&mut self) -> Result<()> {
        if let Err(e) = self.codec.finish() {
            return Err(self.codec.corrupt(e));
        }
        let out = self.codec.output();
        self.inner.push(&out)?;
        self.inner.finish()
    }

    fn take(&mut self) -> Decoded {
        self.inner.take()
    }
}

/// Text of a bad record, valid UTF-8 (lossy), at most 64 KiB.
pub(crate) fn truncate_raw(bytes: &[u8]) -> String {
    let cut = &bytes[..bytes.len().min(MAX_RAW_BYTES)];
    String::from_utf8_lossy(cut).into_owned()
}
