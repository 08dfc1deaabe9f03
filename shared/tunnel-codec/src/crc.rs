//! The record stream's checksums: CRC32C (Castagnoli), appended to across calls.
//!
//! A record's checksum covers, for each non-null column, the field number as int32 LE and then the
//! column's value bytes (see `encode.rs`); the block checksum covers each record checksum as
//! uint32 LE. Both start from 0, and feeding bytes in pieces gives the CRC of their concatenation.

/// A running CRC32C.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Crc32c(u32);

impl Crc32c {
    /// A checksum of nothing yet.
    pub fn new() -> Self {
        Crc32c(0)
    }

    /// Feed `bytes`.
    #[inline]
    pub fn update(&mut self, bytes: &[u8]) {
        self.0 = crc32c::crc32c_append(self.0, bytes);
    }

    /// Feed an int32 as 4 little-endian bytes.
    #[inline]
    pub fn update_i32(&mut self, v: i32) {
        self.update(&v.to_le_bytes());
    }

    /// Feed an int64 as 8 little-endian bytes.
    #[inline]
    pub fn update_i64(&mut self, v: i64) {
        self.update(&v.to_le_bytes());
    }

    /// Feed a uint32 as 4 little-endian bytes.
    #[inline]
    pub fn update_u32(&mut self, v: u32) {
        self.update(&v.to_le_bytes());
    }

    /// The checksum so far.
    #[inline]
    pub fn value(&self) -> u32 {
        self.0
    }

    /// Start again from 0.
    #[inline]
    pub fn reset(&mut self) {
        self.0 = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn castagnoli_check_value_and_piecewise_feeding() {
        // The standard check value of CRC-32C over "123456789".
        let mut c = Crc32c::new();
        c.update(b"123456789");
        assert_eq!(c.value(), 0xE306_9283);
        let mut p = Crc32c::new();
        p.update(b"1234");
        p.update(b"56789");
        assert_eq!(p, c);
    }
}
