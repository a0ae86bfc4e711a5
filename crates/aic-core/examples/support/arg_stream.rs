//! The argument stream shared by the criterion benchmarks and the profiling example: a cheap
//! deterministic xorshift, so every call gets fresh arguments (no memo can hide the work) and
//! a profile repeats the benchmark's exact sequence.

/// A xorshift stream of integer arguments.
pub struct Args(pub u64);

impl Args {
    /// The next value in `lo..hi`.
    pub fn next(&mut self, lo: u32, hi: u32) -> u32 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        lo + (self.0 % u64::from(hi - lo)) as u32
    }
}
