//! Protobuf primitives of the record stream: varints, zigzag, the special tags.

use crate::types::WireType;

/// Field number of the tag that ends a record; its varint value is the record's CRC32C.
pub const END_RECORD: u32 = 33_553_408;
/// Field number of the trailer tag holding the record count (zigzag varint).
pub const META_COUNT: u32 = 33_554_430;
/// Field number of the trailer tag holding the CRC32C of the record checksums.
pub const META_CHECKSUM: u32 = 33_554_431;
/// Field number of the tag that ends the optional server metrics in a downloaded block.
pub const END_METRICS: u32 = 33_554_176;

/// The most bytes [`crate::BlockEncoder::finish`] appends: two 4-byte tags and two varints.
pub const TRAILER_MAX_BYTES: usize = 4 + 10 + 4 + 10;

/// How a checksum is written as a varint.
///
/// Checksums are uint32. The Java SDK and pyodps's pure-python writer write them as unsigned
/// varints (at most 5 bytes); pyodps's C writer sign-extends values ≥ 2^31 to a 10-byte varint.
/// Readers keep the low 32 bits, so the server takes both.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ChecksumVarint {
    /// Unsigned, at most 5 bytes (the default).
    #[default]
    Unsigned,
    /// Sign-extended from int32, 10 bytes when ≥ 2^31 (what pyodps's C writer emits).
    SignExtended,
}

impl ChecksumVarint {
    /// The varint value of checksum `crc` in this style.
    #[inline]
    pub fn varint_value(self, crc: u32) -> u64 {
        match self {
            ChecksumVarint::Unsigned => u64::from(crc),
            ChecksumVarint::SignExtended => crc as i32 as i64 as u64,
        }
    }
}

/// Append `v` as a varint.
#[inline]
pub fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    if v < 0x80 {
        out.push(v as u8);
        return;
    }
    let mut tmp = [0u8; 10];
    let mut n = 0;
    while v >= 0x80 {
        tmp[n] = (v as u8) | 0x80;
        v >>= 7;
        n += 1;
    }
    tmp[n] = v as u8;
    out.extend_from_slice(&tmp[..=n]);
}

/// The varint bytes of a tag, precomputed once per column.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tag {
    bytes: [u8; 5],
    len: u8,
}

impl Tag {
    /// The tag `(field << 3) | wire_type`.
    pub fn new(field: u32, wire_type: WireType) -> Self {
        let mut v = Vec::with_capacity(5);
        put_varint(&mut v, (u64::from(field) << 3) | wire_type as u64);
        let mut bytes = [0u8; 5];
        let len = v.len().min(5);
        bytes[..len].copy_from_slice(&v[..len]);
        Tag {
            bytes,
            len: len as u8,
        }
    }

    /// The encoded tag.
    #[inline]
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes[..usize::from(self.len)]
    }
}

/// Zigzag-encode a sint64.
#[inline]
pub fn zigzag64(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

/// Zigzag-decode a sint64.
#[inline]
pub fn unzigzag64(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

/// Zigzag-encode a sint32.
#[inline]
pub fn zigzag32(v: i32) -> u32 {
    ((v << 1) ^ (v >> 31)) as u32
}

/// Zigzag-decode a sint32.
#[inline]
pub fn unzigzag32(v: u32) -> i32 {
    ((v >> 1) as i32) ^ -((v & 1) as i32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn special_tags_have_their_documented_bytes() {
        let t = |f| Tag::new(f, WireType::Varint).as_bytes().to_vec();
        assert_eq!(t(END_RECORD), [0x80, 0xc0, 0xff, 0x7f]);
        assert_eq!(t(META_COUNT), [0xf0, 0xff, 0xff, 0x7f]);
        assert_eq!(t(META_CHECKSUM), [0xf8, 0xff, 0xff, 0x7f]);
    }

    #[test]
    fn varints_and_zigzag() {
        for (v, bytes) in [
            (0u64, vec![0u8]),
            (127, vec![0x7f]),
            (128, vec![0x80, 0x01]),
            (u64::MAX, [vec![0xff; 9], vec![0x01]].concat()),
        ] {
            let mut out = Vec::new();
            put_varint(&mut out, v);
            assert_eq!(out, bytes, "{v}");
        }
        for v in [0i64, -1, 1, i64::MIN, i64::MAX, -2] {
            assert_eq!(unzigzag64(zigzag64(v)), v);
        }
        assert_eq!(zigzag64(-1), 1);
        assert_eq!(zigzag64(1), 2);
        for v in [0i32, -1, 1, i32::MIN, i32::MAX] {
            assert_eq!(unzigzag32(zigzag32(v)), v);
        }
        let crc = 0x8923_6d80_u32;
        assert_eq!(ChecksumVarint::Unsigned.varint_value(crc), 0x8923_6d80);
        assert_eq!(
            ChecksumVarint::SignExtended.varint_value(crc),
            0xffff_ffff_8923_6d80
        );
    }
}
