//! The deterministic pseudo-random generator of the property-style tests (xorshift64*): no
//! crate needed, and a failure reproduces from its seed. Also the one fixed clock the tests parse
//! against, [`NOW`].

/// The agent's clock in every test: times are valid within the skew around it. Fixed, so a
/// failure reproduces.
pub const NOW: u64 = 1_700_000_000_000_000_000;

pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// A value in `0..n` (`n > 0`).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    /// An index into a slice of `len` items (`len > 0`).
    pub fn index(&mut self, len: usize) -> usize {
        (self.next() % len as u64) as usize
    }
}
