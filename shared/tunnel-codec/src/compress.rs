//! Block compression: what a block `PUT` may carry under `Content-Encoding`.
//!
//! | variant | `Content-Encoding` | format |
//! |---|---|---|
//! | [`Compression::Deflate`] | `deflate` | zlib stream (RFC 1950), level 1 like the SDK |
//! | [`Compression::Zstd`] | `zstd` | one zstd frame, level 3 |
//! | [`Compression::Snappy`] | `x-snappy-framed` | the snappy framing format |
//! | [`Compression::Lz4`] | `x-lz4-frame` | one LZ4 frame |
//!
//! Decompression takes a limit on the output size, so a small hostile input cannot expand without
//! bound.

use std::io::{Read, Write};

use floe_core::{Error, ErrorKind, Result};

/// A block compression; see the module doc.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Compression {
    /// `deflate`: zlib stream.
    Deflate,
    /// `zstd`.
    Zstd,
    /// `x-snappy-framed`.
    Snappy,
    /// `x-lz4-frame`.
    Lz4,
}

/// The zlib level pyodps uses by default.
const DEFLATE_LEVEL: u32 = 1;
/// zstd's own default level.
const ZSTD_LEVEL: i32 = 3;

impl Compression {
    /// Every compression.
    pub const ALL: [Compression; 4] = [
        Compression::Deflate,
        Compression::Zstd,
        Compression::Snappy,
        Compression::Lz4,
    ];

    /// The `Content-Encoding` header value.
    pub fn content_encoding(self) -> &'static str {
        match self {
            Compression::Deflate => "deflate",
            Compression::Zstd => "zstd",
            Compression::Snappy => "x-snappy-framed",
            Compression::Lz4 => "x-lz4-frame",
        }
    }

    /// The compression of a `Content-Encoding` value; `None` for no header or `identity`.
    pub fn from_content_encoding(encoding: Option<&str>) -> Result<Option<Self>> {
        let Some(e) = encoding.map(str::trim) else {
            return Ok(None);
        };
        if e.is_empty() || e.eq_ignore_ascii_case("identity") {
            return Ok(None);
        }
        Compression::ALL
            .into_iter()
            .find(|c| c.content_encoding().eq_ignore_ascii_case(e))
            .map(Some)
            .ok_or_else(|| {
                Error::new(
                    ErrorKind::Unsupported,
                    format!("unsupported content-encoding `{e}`"),
                )
            })
    }

    /// Compress `input`, appending to `out`.
    pub fn compress_into(self, input: &[u8], out: &mut Vec<u8>) -> Result<()> {
        let failed = |e: std::io::Error| {
            Error::unexpected(format!("{} compression failed", self.content_encoding()))
                .with_source(e)
        };
        match self {
            Compression::Deflate => {
                let mut w =
                    flate2::write::ZlibEncoder::new(out, flate2::Compression::new(DEFLATE_LEVEL));
                w.write_all(input).map_err(failed)?;
                w.finish().map_err(failed)?;
            }
            Compression::Zstd => {
                let mut w = zstd::stream::write::Encoder::new(out, ZSTD_LEVEL).map_err(failed)?;
                w.set_pledged_src_size(Some(input.len() as u64))
                    .map_err(failed)?;
                w.write_all(input).map_err(failed)?;
                w.finish().map_err(failed)?;
            }
            Compression::Snappy => {
                let mut w = snap::write::FrameEncoder::new(out);
                w.write_all(input).map_err(failed)?;
                w.flush().map_err(failed)?;
            }
            Compression::Lz4 => {
                let mut w = lz4_flex::frame::FrameEncoder::new(out);
                w.write_all(input).map_err(failed)?;
                w.finish().map_err(|e| {
                    Error::unexpected(format!("x-lz4-frame compression failed: {e}"))
                })?;
            }
        }
        Ok(())
    }

    /// Compress `input` into a new buffer.
    pub fn compress(self, input: &[u8]) -> Result<Vec<u8>> {
        let mut out = Vec::with_capacity(input.len() / 2 + 64);
        self.compress_into(input, &mut out)?;
        Ok(out)
    }

    /// Decompress `input`; more than `max_len` bytes of output is an error.
    pub fn decompress(self, input: &[u8], max_len: usize) -> Result<Vec<u8>> {
        let mut out = Vec::new();
        let limit = max_len as u64 + 1;
        let read = match self {
            Compression::Deflate => flate2::read::ZlibDecoder::new(input)
                .take(limit)
                .read_to_end(&mut out),
            Compression::Zstd => match zstd::stream::read::Decoder::with_buffer(input) {
                Ok(d) => d.single_frame().take(limit).read_to_end(&mut out),
                Err(e) => Err(e),
            },
            Compression::Snappy => snap::read::FrameDecoder::new(input)
                .take(limit)
                .read_to_end(&mut out),
            Compression::Lz4 => lz4_flex::frame::FrameDecoder::new(input)
                .take(limit)
                .read_to_end(&mut out),
        };
        read.map_err(|e| {
            Error::new(
                ErrorKind::Protocol,
                format!("corrupt {} block", self.content_encoding()),
            )
            .with_source(e)
        })?;
        if out.len() > max_len {
            return Err(Error::new(
                ErrorKind::Protocol,
                format!(
                    "{} block inflates beyond {max_len} bytes",
                    self.content_encoding()
                ),
            ));
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_compression_round_trips_and_names_its_encoding() {
        let data: Vec<u8> = (0..20_000u32)
            .flat_map(|i| (i % 251).to_le_bytes())
            .collect();
        for c in Compression::ALL {
            let z = c.compress(&data).unwrap();
            assert!(z.len() < data.len(), "{c:?}");
            assert_eq!(c.decompress(&z, data.len()).unwrap(), data, "{c:?}");
            let e = c.decompress(&z, data.len() - 1).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::Protocol, "{c:?}");
            assert!(
                c.decompress(&z[..z.len() / 2], data.len()).is_err(),
                "{c:?}"
            );
            assert_eq!(
                Compression::from_content_encoding(Some(c.content_encoding())).unwrap(),
                Some(c)
            );
            assert_eq!(c.decompress(&c.compress(&[]).unwrap(), 0).unwrap(), b"");
        }
        assert_eq!(Compression::from_content_encoding(None).unwrap(), None);
        assert_eq!(
            Compression::from_content_encoding(Some("identity")).unwrap(),
            None
        );
        assert_eq!(
            Compression::from_content_encoding(Some("X-Snappy-Framed")).unwrap(),
            Some(Compression::Snappy)
        );
        assert!(Compression::from_content_encoding(Some("br")).is_err());
    }

    #[test]
    fn garbage_is_a_protocol_error() {
        for c in Compression::ALL {
            let e = c
                .decompress(b"definitely not compressed", 1 << 20)
                .unwrap_err();
            assert_eq!(e.kind(), ErrorKind::Protocol, "{c:?}");
        }
    }
}
