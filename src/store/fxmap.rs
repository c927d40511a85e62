//! [`FastMap`]: a `HashMap` hashed with FxHash's step instead of SipHash,
//! for the engine's and the store's hot maps keyed by schedule and tenant
//! names and by statement addresses. SipHash resists keys chosen to collide;
//! these keys come from the operator's own configuration and from the
//! program's text, and SipHash was about 4 % of a run's lifecycle.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// A `HashMap` with [`FxHasher`]. Build one with `FastMap::default()`.
pub type FastMap<K, V> = HashMap<K, V, BuildHasherDefault<FxHasher>>;

/// FxHash (as in rustc): each word is mixed in by a rotate, an xor and a
/// multiplication by an odd constant; bytes are taken eight at a time.
#[derive(Default, Clone, Copy)]
pub struct FxHasher(u64);

const SEED: u64 = 0x51_7c_c1_b7_27_22_0a_95;

impl FxHasher {
    #[inline]
    fn add(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(SEED);
    }
}

impl Hasher for FxHasher {
    #[inline]
    fn finish(&self) -> u64 {
        self.0
    }

    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            let mut w = [0u8; 8];
            w.copy_from_slice(c);
            self.add(u64::from_le_bytes(w));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut w = [0u8; 8];
            w[..rest.len()].copy_from_slice(rest);
            self.add(u64::from_le_bytes(w));
        }
    }

    #[inline]
    fn write_u8(&mut self, n: u8) {
        self.add(u64::from(n));
    }

    #[inline]
    fn write_u32(&mut self, n: u32) {
        self.add(u64::from(n));
    }

    #[inline]
    fn write_u64(&mut self, n: u64) {
        self.add(n);
    }

    #[inline]
    fn write_usize(&mut self, n: usize) {
        self.add(n as u64);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::hash::{BuildHasher, BuildHasherDefault};

    fn hash(s: &str) -> u64 {
        BuildHasherDefault::<FxHasher>::default().hash_one(s)
    }

    #[test]
    fn strings_that_differ_anywhere_hash_apart() {
        // Every byte position, including the tail after the last whole word,
        // and the length (str's hash appends a 0xff byte) take part.
        let base = "schedule-0123456789-abcdef";
        let mut seen = std::collections::HashSet::new();
        assert!(seen.insert(hash(base)));
        for i in 0..base.len() {
            let mut b = base.as_bytes().to_vec();
            b[i] ^= 1;
            assert!(seen.insert(hash(std::str::from_utf8(&b).unwrap())), "byte {i}");
        }
        assert!(seen.insert(hash(&base[..base.len() - 1])));
        assert!(seen.insert(hash("")));
    }

    #[test]
    fn a_fast_map_is_a_map() {
        let mut m: FastMap<String, u32> = FastMap::default();
        for i in 0..1000 {
            m.insert(format!("s{i}"), i);
        }
        assert_eq!(m.len(), 1000);
        assert!((0..1000).all(|i| m.get(&format!("s{i}")) == Some(&i)));
    }
}
