//! The SOL decomposition of an op (spec 20 §0.7): its speed-of-light time together with the
//! compute and memory parts it came from.
//!
//! Each op's SOL branch builds a [`SolSplit`] once; the normal SOL-mode estimate reports its
//! `time_ms` and the `evaluate_ops_sol` entry point reports all three, so both read the same
//! computation. At a leaf `time = max(math, mem)`; the combinators below then add and scale
//! the three numbers side by side, exactly as the op composes its latency, so after
//! composition `time` is no longer the max of the parts.

use crate::error::{AicError, Result};
use crate::lookup::sol::Roofline;

use super::{OpValue, Source};

/// An op's SOL time with its compute (`math_ms`) and memory (`mem_ms`) parts, ms.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct SolSplit {
    /// The SOL latency, as the SOL-mode estimate reports it.
    pub time_ms: f64,
    /// The compute part.
    pub math_ms: f64,
    /// The memory part.
    pub mem_ms: f64,
}

impl SolSplit {
    /// All zero: what an op contributes when its SOL result is zero and carries no split.
    pub const ZERO: SolSplit = SolSplit { time_ms: 0.0, math_ms: 0.0, mem_ms: 0.0 };

    /// A roofline leaf: `time = max(math, mem)`, computed as the scalar SOL computes it.
    #[inline]
    pub fn leaf(r: Roofline) -> SolSplit {
        SolSplit { time_ms: r.ms(), math_ms: r.math_s * 1000.0, mem_ms: r.mem_s * 1000.0 }
    }

    /// A pure data movement (MemOp, NCCL, P2P): `(0, time)`.
    #[inline]
    pub fn memory(time_ms: f64) -> SolSplit {
        SolSplit { time_ms, math_ms: 0.0, mem_ms: time_ms }
    }

    /// A time published without parts (the custom all-reduce): `(0, 0)`.
    #[inline]
    pub fn time_only(time_ms: f64) -> SolSplit {
        SolSplit { time_ms, math_ms: 0.0, mem_ms: 0.0 }
    }

    /// Every component times `f`.
    #[inline]
    pub fn scale(self, f: f64) -> SolSplit {
        SolSplit { time_ms: self.time_ms * f, math_ms: self.math_ms * f, mem_ms: self.mem_ms * f }
    }

    /// Every component floored at 0.
    #[inline]
    pub fn clamp(self) -> SolSplit {
        SolSplit { time_ms: self.time_ms.max(0.0), math_ms: self.math_ms.max(0.0), mem_ms: self.mem_ms.max(0.0) }
    }

    /// Clamp, then multiply by the op's scale factor (how every leaf op ends).
    #[inline]
    pub fn finish(self, scale_factor: f64) -> SolSplit {
        self.clamp().scale(scale_factor)
    }

    /// The SOL-mode estimate this split stands for: latency `time_ms`, energy 0.
    #[inline]
    pub fn value(self, source: Source) -> OpValue {
        OpValue::new(self.time_ms, 0.0, source)
    }
}

impl std::ops::Add for SolSplit {
    type Output = SolSplit;

    /// Component-wise sum.
    #[inline]
    fn add(self, other: SolSplit) -> SolSplit {
        SolSplit {
            time_ms: self.time_ms + other.time_ms,
            math_ms: self.math_ms + other.math_ms,
            mem_ms: self.mem_ms + other.mem_ms,
        }
    }
}

/// The split of an op whose SOL path publishes none (spec 20 §0.7): `(0, 0, 0)` when its SOL
/// result is zero, otherwise an error naming the op.
pub(crate) fn undecomposed(name: &str, kind: &'static str, value: OpValue) -> Result<SolSplit> {
    if value.latency == 0.0 && value.energy == 0.0 {
        return Ok(SolSplit::ZERO);
    }
    Err(AicError::NoSolDecomposition { op: name.to_string(), kind, sol_ms: value.latency })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leaf_time_is_the_larger_part() {
        let s = SolSplit::leaf(Roofline { math_s: 2e-6, mem_s: 5e-6 });
        assert_eq!(s.time_ms, 5e-6 * 1000.0);
        assert_eq!(s.math_ms, 2e-6 * 1000.0);
        assert_eq!(s.mem_ms, s.time_ms);
    }

    #[test]
    fn composition_adds_and_scales_every_part() {
        let a = SolSplit { time_ms: 3.0, math_ms: 3.0, mem_ms: 1.0 };
        let b = SolSplit::memory(0.5);
        let s = (a + b).scale(2.0);
        assert_eq!(s, SolSplit { time_ms: 7.0, math_ms: 6.0, mem_ms: 3.0 });
        assert_eq!(
            SolSplit { time_ms: -1.0, math_ms: 2.0, mem_ms: -3.0 }.finish(2.0),
            SolSplit { time_ms: 0.0, math_ms: 4.0, mem_ms: 0.0 }
        );
    }

    #[test]
    fn undecomposed_zero_contributes_nothing_and_nonzero_names_the_op() {
        let zero = OpValue::zero(Source::Empirical);
        assert_eq!(undecomposed("ar", "CustomAllReduce", zero).unwrap(), SolSplit::ZERO);
        let err = undecomposed("moe_overlap", "Overlap", OpValue::new(4.5, 0.0, Source::Mixed)).unwrap_err();
        let text = err.to_string();
        assert!(text.contains("\"moe_overlap\"") && text.contains("Overlap") && text.contains("4.5"), "{text}");
    }
}
