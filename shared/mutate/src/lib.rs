//! Seeded input mutation for fuzz-style tests that run under `cargo test`.
//!
//! Nightly (and so `cargo fuzz`) is not available where CI runs, so each parser and decoder also
//! has a bounded loop here: start from valid inputs, apply a few random edits, feed the result to
//! the code under test, and require an answer or an error, never a panic. The generator is
//! seeded, so a failure names an iteration that reproduces.

/// splitmix64: small, fast, seedable; plenty to drive mutations.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    /// A generator from a seed.
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (0 when `n` is 0).
    pub fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next_u64() % n as u64) as usize
        }
    }

    /// A random byte.
    pub fn byte(&mut self) -> u8 {
        self.next_u64() as u8
    }
}

/// Byte values that often sit on edges (signs, varint continuation, ASCII, NUL).
const EDGE_BYTES: [u8; 7] = [0x00, 0x01, 0x7f, 0x80, 0xff, b'"', b'\\'];

/// Random edits of byte strings: bit flips, byte changes, inserts, deletes, truncation, duplicated
/// slices, slices of other valid inputs ("donors"), and dictionary tokens of the format.
#[derive(Clone, Debug, Default)]
pub struct Mutator<'a> {
    /// Format tokens worth inserting (`</Message>`, `"key":`, a long varint).
    pub tokens: &'a [&'a [u8]],
    /// Other valid inputs to splice pieces from.
    pub donors: &'a [&'a [u8]],
}

impl Mutator<'_> {
    /// Apply one random edit to `b`.
    pub fn mutate_once(&self, rng: &mut Rng, b: &mut Vec<u8>) {
        let at = rng.below(b.len() + 1);
        match rng.below(10) {
            0 if !b.is_empty() => {
                let i = rng.below(b.len());
                b[i] ^= 1 << rng.below(8);
            }
            1 if !b.is_empty() => {
                let i = rng.below(b.len());
                b[i] = rng.byte();
            }
            2 => {
                let n = 1 + rng.below(8);
                let bytes: Vec<u8> = (0..n).map(|_| rng.byte()).collect();
                b.splice(at..at, bytes);
            }
            3 if !b.is_empty() => {
                let end = (at + 1 + rng.below(16)).min(b.len());
                b.drain(at.min(end)..end);
            }
            4 => b.truncate(at),
            5 if !b.is_empty() => {
                let from = rng.below(b.len());
                let end = (from + 1 + rng.below(64)).min(b.len());
                let piece = b[from..end].to_vec();
                b.splice(at..at, piece);
            }
            6 if !self.donors.is_empty() => {
                let other = self.donors[rng.below(self.donors.len())];
                if !other.is_empty() {
                    let from = rng.below(other.len());
                    let end = (from + 1 + rng.below(200)).min(other.len());
                    b.splice(at..at, other[from..end].iter().copied());
                }
            }
            7 if !self.tokens.is_empty() => {
                let t = self.tokens[rng.below(self.tokens.len())];
                b.splice(at..at, t.iter().copied());
            }
            8 if !b.is_empty() => {
                let i = rng.below(b.len());
                b[i] = EDGE_BYTES[rng.below(EDGE_BYTES.len())];
            }
            _ => b.insert(at, rng.byte()),
        }
    }

    /// Apply 1..=`max_edits` random edits to a copy of `seed`.
    pub fn mutant(&self, rng: &mut Rng, seed: &[u8], max_edits: usize) -> Vec<u8> {
        let mut b = seed.to_vec();
        for _ in 0..1 + rng.below(max_edits.max(1)) {
            self.mutate_once(rng, &mut b);
        }
        b
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_mutants() {
        let m = Mutator {
            tokens: &[b"<x>"],
            donors: &[b"donor bytes"],
        };
        let run = |seed| {
            let mut rng = Rng::new(seed);
            (0..100)
                .map(|_| m.mutant(&mut rng, b"hello world", 4))
                .collect::<Vec<_>>()
        };
        assert_eq!(run(7), run(7));
        assert_ne!(run(7), run(8));
        assert!(run(7).iter().any(|b| b.windows(3).any(|w| w == b"<x>")));
    }
}
