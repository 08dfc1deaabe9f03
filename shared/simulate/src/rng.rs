//! The simulation's one source of chance: floe-mutate's seeded SplitMix64, so a seed replays
//! the same run step for step.

/// A seeded generator picking schedules and faults.
pub struct Rng(floe_mutate::Rng);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(floe_mutate::Rng::new(seed ^ 0x5EED_F10E_0000_0000))
    }

    /// A number in `0..n` (`n > 0`).
    pub fn below(&mut self, n: u64) -> u64 {
        self.0.next_u64() % n
    }

    /// True with probability `p`.
    pub fn chance(&mut self, p: f64) -> bool {
        p > 0.0 && (self.0.next_u64() >> 11) as f64 / (1u64 << 53) as f64 <= p
    }
}
