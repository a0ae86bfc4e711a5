//! The `Mamba2` op (spec 33 §7): one Mamba2 state-space kernel of a Nemotron-H layer (conv1d
//! and chunked scan in prefill, conv update and selective state update in decode). It has its
//! own module because its rules are its own: the generation rows are never read (every
//! generation op answers its SOL), a d_model key fallback in ascending key order, a
//! memory-bound byte SOL it degrades to on any data problem (tag `sol`, never an error), and
//! indifference to the database mode.

use std::sync::Arc;

use crate::data::tables::{Mamba2Key, PerfDatabase};
use crate::error::{AicError, Result};
use crate::lookup::Grid;
use crate::spec::Mamba2Op;

use super::{OpValue, Shape, SolSplit, Source};

/// The SOL of a `Mamba2` op in ms at `(b, s)` (spec 33 §7.4): bytes over the memory
/// bandwidth, products left to right, divided, then scaled to ms.
pub fn mamba2_sol_ms(op: &Mamba2Op, b: f64, s: f64, mem_bw: f64) -> f64 {
    let x = if op.phase == "context" && s > 0.0 { b * s } else { b };
    let di = f64::from(op.nheads) * f64::from(op.head_dim);
    let (ng, ds) = (f64::from(op.n_groups), f64::from(op.d_state));
    let bytes = match op.kernel_source.as_str() {
        "causal_conv1d_fn" | "causal_conv1d_update" => {
            let cd = di + 2.0 * ng * ds;
            x * cd * (f64::from(op.d_conv) + 1.0) * 2.0 + x * cd * 2.0
        }
        _ => x * (di + ng * ds * 2.0 + f64::from(op.nheads)) * 2.0 + x * di * 2.0,
    };
    bytes / mem_bw.max(1.0) * 1000.0
}

/// Compiled `Mamba2`: the grid that answers it, resolved once (none → the SOL).
#[derive(Debug)]
pub struct Mamba2Eval {
    pub(crate) name: String,
    op: Mamba2Op,
    mem_bw: f64,
    /// The context grid of the exact key or its d_model fallback; `None` for generation ops,
    /// a table load failure or no matching key.
    grid: Option<Arc<Grid>>,
}

impl Mamba2Eval {
    pub(crate) fn compile(op: &Mamba2Op, db: &Arc<PerfDatabase>) -> Self {
        let key = Mamba2Key {
            kernel_source: op.kernel_source.clone(),
            phase: op.phase.clone(),
            d_model: u64::from(op.d_model),
            d_state: u64::from(op.d_state),
            d_conv: u64::from(op.d_conv),
            nheads: u64::from(op.nheads),
            head_dim: u64::from(op.head_dim),
            n_groups: u64::from(op.n_groups),
            chunk_size: u64::from(op.chunk_size),
        };
        // Step 1 (quirk): the generation rows are never used.
        let grid = if key.is_generation() {
            None
        } else {
            db.mamba2().ok().and_then(|t| t.grid_or_fallback(&key)).filter(|g| g.depth() == 2)
        };
        Mamba2Eval { name: op.name.clone(), op: op.clone(), mem_bw: db.system.gpu.mem_bw, grid }
    }

    /// The op's SOL in ms at `(b, s)`.
    fn sol(&self, b: f64, s: f64) -> f64 {
        mamba2_sol_ms(&self.op, b, s, self.mem_bw)
    }

    /// Latency at a shape (scale factor included). Reads `batch` and `s` only; the database
    /// mode, prefix, token count and beam width do not enter. Never fails.
    pub fn eval(&self, shape: &Shape) -> Result<OpValue> {
        let (b, s) = (shape.batch as f64, shape.s as f64);
        let found = match &self.grid {
            Some(grid) if shape.s > 0 => grid.lookup(&[b, s], &|c| self.sol(c[0], c[1])).ok(),
            _ => None,
        };
        let value = match found {
            Some(v) => OpValue::new(v.latency, v.energy, Source::Silicon),
            None => OpValue::new(self.sol(b, s), 0.0, Source::Sol),
        };
        Ok(value.finish(self.op.scale_factor))
    }

    /// The SOL decomposition: the reference raises for every Mamba2 op (spec 33 §7.3).
    pub(crate) fn sol_split(&self, shape: &Shape) -> Result<SolSplit> {
        Err(AicError::NoSolDecomposition { op: self.name.clone(), kind: "Mamba2", sol_ms: self.eval(shape)?.latency })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Nemotron-3-Nano's Mamba2 layer (spec 33 §7.5).
    fn nano(kernel: &str, phase: &str) -> Mamba2Op {
        Mamba2Op {
            name: "m".into(),
            scale_factor: 23.0,
            kernel_source: kernel.into(),
            phase: phase.into(),
            d_model: 2688,
            d_state: 128,
            d_conv: 4,
            nheads: 64,
            head_dim: 64,
            n_groups: 8,
            chunk_size: 128,
        }
    }

    #[test]
    fn sol_worked_examples() {
        let sol = |op: &Mamba2Op, b: f64, s: f64, bw: f64| mamba2_sol_ms(op, b, s, bw) * op.scale_factor;
        let gen_conv = nano("causal_conv1d_update", "generation");
        let gen_ssm = nano("selective_state_update", "generation");
        assert_eq!(sol(&gen_conv, 16.0, 2048.0, 4.8e12), 0.00565248);
        assert_eq!(sol(&gen_ssm, 16.0, 2048.0, 4.8e12), 0.0015799466666666668);
        let ctx_ssm = nano("mamba_chunk_scan_combined", "context");
        assert_eq!(sol(&ctx_ssm, 4.0, 1000.0, 4.8e12), 0.39498666666666665);
        assert_eq!(sol(&ctx_ssm, 1.0, 128.0, 4.8e12), 0.012639573333333334);
        let ctx_conv = nano("causal_conv1d_fn", "context");
        assert_eq!(sol(&ctx_conv, 4.0, 1000.0, 4.8e12), 1.41312);
        assert_eq!(sol(&ctx_conv, 1.0, 128.0, 4.8e12), 0.04521984);
        assert_eq!(sol(&gen_conv, 1.0, 1025.0, 7.7e12), 0.0002202264935064935);
        assert_eq!(sol(&gen_ssm, 100.0, 4096.0, 3.35e12), 0.014148776119402986);
        // Unknown kernel names use the SSM byte model.
        assert_eq!(sol(&nano("foo", "context"), 4.0, 1000.0, 4.8e12), 0.39498666666666665);
        // s = 0: x = b.
        assert_eq!(mamba2_sol_ms(&ctx_conv, 3.0, 0.0, 4.8e12), mamba2_sol_ms(&gen_conv, 3.0, 5.0, 4.8e12));
    }
}
