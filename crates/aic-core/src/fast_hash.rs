//! A fast, non-cryptographic hasher for the load-time maps keyed by small integers and short
//! strings (grid keys, GEMM shapes, table slices). The standard SipHash is built to resist
//! hash flooding, which costs about a quarter of the instructions of loading a system's tables;
//! the keys here come from the shipped data files, so a multiply-rotate word hash (the FxHash
//! construction) is enough.

use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasherDefault, Hasher};

/// Multiply-rotate hasher over machine words.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct WordHasher {
    hash: u64,
}

const SEED: u64 = 0x51_7c_c1_b7_27_22_0a_95;

impl WordHasher {
    #[inline]
    fn add(&mut self, word: u64) {
        self.hash = (self.hash.rotate_left(5) ^ word).wrapping_mul(SEED);
    }
}

impl Hasher for WordHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for chunk in &mut chunks {
            self.add(u64::from_le_bytes(chunk.try_into().expect("8-byte chunk")));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut word = [0u8; 8];
            word[..rest.len()].copy_from_slice(rest);
            self.add(u64::from_le_bytes(word));
        }
    }

    #[inline]
    fn write_u8(&mut self, v: u8) {
        self.add(u64::from(v));
    }

    #[inline]
    fn write_u32(&mut self, v: u32) {
        self.add(u64::from(v));
    }

    #[inline]
    fn write_u64(&mut self, v: u64) {
        self.add(v);
    }

    #[inline]
    fn write_usize(&mut self, v: usize) {
        self.add(v as u64);
    }

    #[inline]
    fn finish(&self) -> u64 {
        self.hash
    }
}

/// Builds [`WordHasher`]s.
pub(crate) type FastHash = BuildHasherDefault<WordHasher>;

/// A `HashMap` with [`WordHasher`].
pub(crate) type FastHashMap<K, V> = HashMap<K, V, FastHash>;

/// A `HashSet` with [`WordHasher`].
pub(crate) type FastHashSet<K> = HashSet<K, FastHash>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_work_and_hashes_spread() {
        let mut m: FastHashMap<(u64, u64, u64), usize> = FastHashMap::default();
        for i in 0..10_000u64 {
            m.insert((i, i * 7, i % 13), i as usize);
        }
        assert_eq!(m.len(), 10_000);
        assert_eq!(m[&(42, 294, 3)], 42);
        let mut s: FastHashSet<String> = FastHashSet::default();
        s.insert("bfloat16".to_string());
        assert!(s.contains("bfloat16") && !s.contains("fp8"));
        let h = |v: u64| {
            let mut x = WordHasher::default();
            x.write_u64(v);
            x.finish()
        };
        assert_ne!(h(1), h(2));
    }
}
