//! The Arrow tunnel's block framing (the body of `PUT …&blockid=N&arrow`), without Arrow itself.
//!
//! The payload is a stream of Arrow IPC encapsulated RecordBatch messages with no schema message
//! (the server has the schema); this module frames and unframes those bytes:
//!
//! ```text
//! u32 BE chunk size (65536 by default; absent when the payload is empty)
//! payload bytes, and after every full chunk of them a u32 BE CRC32C of that chunk
//! u32 BE CRC32C of the whole payload
//! ```

use floe_core::{Error, ErrorKind, Result};

use crate::crc::Crc32c;

/// The chunk size pyodps uses by default.
pub const DEFAULT_CHUNK_SIZE: u32 = 65_536;

/// Frames payload bytes as they are written; [`ArrowBlockWriter::finish`] adds the final CRC.
#[derive(Clone, Debug)]
pub struct ArrowBlockWriter {
    out: Vec<u8>,
    chunk_size: u32,
    in_chunk: u32,
    chunk_crc: Crc32c,
    payload_crc: Crc32c,
}

impl ArrowBlockWriter {
    /// A writer with chunks of `chunk_size` bytes (at least 1).
    pub fn new(chunk_size: u32) -> Result<Self> {
        if chunk_size == 0 {
            return Err(Error::invalid_input(
                "arrow block chunk size must be at least 1",
            ));
        }
        Ok(ArrowBlockWriter {
            out: Vec::new(),
            chunk_size,
            in_chunk: 0,
            chunk_crc: Crc32c::new(),
            payload_crc: Crc32c::new(),
        })
    }

    /// Append payload bytes (IPC messages, in any pieces).
    pub fn write(&mut self, mut bytes: &[u8]) {
        if bytes.is_empty() {
            return;
        }
        if self.out.is_empty() {
            self.out.extend_from_slice(&self.chunk_size.to_be_bytes());
        }
        while !bytes.is_empty() {
            let room = (self.chunk_size - self.in_chunk) as usize;
            let (piece, rest) = bytes.split_at(room.min(bytes.len()));
            self.out.extend_from_slice(piece);
            self.chunk_crc.update(piece);
            self.payload_crc.update(piece);
            self.in_chunk += piece.len() as u32;
            if self.in_chunk == self.chunk_size {
                self.out
                    .extend_from_slice(&self.chunk_crc.value().to_be_bytes());
                self.chunk_crc.reset();
                self.in_chunk = 0;
            }
            bytes = rest;
        }
    }

    /// Bytes framed so far.
    pub fn len(&self) -> usize {
        self.out.len()
    }

    /// Whether nothing was written.
    pub fn is_empty(&self) -> bool {
        self.out.is_empty()
    }

    /// Append the final CRC and hand over the block.
    pub fn finish(mut self) -> Vec<u8> {
        self.out
            .extend_from_slice(&self.payload_crc.value().to_be_bytes());
        self.out
    }
}

fn protocol(at: usize, problem: impl std::fmt::Display) -> Error {
    Error::new(
        ErrorKind::Protocol,
        format!("arrow tunnel block: {problem} (byte {at})"),
    )
    .with_context("offset", at.to_string())
}

fn be_u32(block: &[u8], at: usize) -> u32 {
    let mut b = [0u8; 4];
    b.copy_from_slice(&block[at..at + 4]);
    u32::from_be_bytes(b)
}

/// Check every CRC of a framed block and return its payload and chunk size (`None` when empty).
pub fn unframe_arrow_block(block: &[u8]) -> Result<(Vec<u8>, Option<u32>)> {
    if block.len() < 4 {
        return Err(protocol(0, format!("{} bytes is too short", block.len())));
    }
    if block.len() == 4 {
        let stored = be_u32(block, 0);
        if stored != 0 {
            return Err(protocol(
                0,
                format!("empty payload with checksum {stored:#010x}"),
            ));
        }
        return Ok((Vec::new(), None));
    }
    if block.len() < 9 {
        return Err(protocol(0, format!("{} bytes is too short", block.len())));
    }
    let chunk_size = be_u32(block, 0);
    if chunk_size == 0 {
        return Err(protocol(0, "chunk size 0"));
    }
    let chunk = chunk_size as usize;
    let mut payload = Vec::with_capacity(block.len() - 8);
    let mut payload_crc = Crc32c::new();
    let mut pos = 4;
    loop {
        let left = block.len() - pos;
        if left == 4 {
            break;
        }
        // A full chunk is always followed by its CRC, and the final CRC comes last.
        let full = left >= chunk + 8;
        let n = if full { chunk } else { left - 4 };
        if !full && n >= chunk {
            return Err(protocol(pos, "full chunk without its checksum"));
        }
        let data = &block[pos..pos + n];
        payload.extend_from_slice(data);
        payload_crc.update(data);
        pos += n;
        if full {
            let mut c = Crc32c::new();
            c.update(data);
            let stored = be_u32(block, pos);
            if stored != c.value() {
                return Err(protocol(
                    pos,
                    format!(
                        "chunk checksum mismatch: stored {stored:#010x}, computed {:#010x}",
                        c.value()
                    ),
                ));
            }
            pos += 4;
        }
    }
    let stored = be_u32(block, pos);
    if stored != payload_crc.value() {
        return Err(protocol(
            pos,
            format!(
                "payload checksum mismatch: stored {stored:#010x}, computed {:#010x}",
                payload_crc.value()
            ),
        ));
    }
    Ok((payload, Some(chunk_size)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_round_trip_at_every_boundary() {
        let payload: Vec<u8> = (0..100u8).collect();
        for chunk in [1u32, 2, 7, 10, 50, 99, 100, 101, 65_536] {
            for len in [0usize, 1, 9, 10, 11, 50, 99, 100] {
                let mut w = ArrowBlockWriter::new(chunk).unwrap();
                // Written in uneven pieces.
                for piece in payload[..len].chunks(3) {
                    w.write(piece);
                }
                let block = w.finish();
                let full_chunks = len / chunk as usize;
                let header = if len == 0 { 0 } else { 4 };
                assert_eq!(
                    block.len(),
                    header + len + 4 * full_chunks + 4,
                    "{chunk} {len}"
                );
                let (back, size) = unframe_arrow_block(&block).unwrap();
                assert_eq!(back, &payload[..len], "{chunk} {len}");
                assert_eq!(size, (len > 0).then_some(chunk));
            }
        }
        assert!(ArrowBlockWriter::new(0).is_err());
    }

    #[test]
    fn corruption_is_a_protocol_error() {
        let mut w = ArrowBlockWriter::new(8).unwrap();
        w.write(&[7u8; 20]);
        let block = w.finish();
        for i in 0..block.len() {
            let mut bad = block.clone();
            bad[i] ^= 0x10;
            let e = unframe_arrow_block(&bad).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::Protocol, "byte {i}");
        }
        for n in 0..block.len() {
            assert!(unframe_arrow_block(&block[..n]).is_err(), "cut at {n}");
        }
    }
}
