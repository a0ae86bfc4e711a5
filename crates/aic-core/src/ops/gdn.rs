//! The `Gdn` op (spec 31 §6): one Gated-DeltaNet kernel of a Qwen3.5 linear-attention layer.
//! It has its own module because its rules differ from every other table-backed op: an exact
//! shape key (no nearest-shape transfer), vLLM 0.24.0 physical-kernel aliases, a state-dtype
//! gate, a memory-bound byte SOL it degrades to on any data problem (tag `sol`, never an
//! error), and indifference to the database mode.

use std::sync::Arc;

use crate::data::tables::{GdnKey, PerfDatabase, GDN_RECURRENCE_KERNEL};
use crate::error::Result;
use crate::lookup::Grid;
use crate::spec::{Backend, GdnOp};

use super::{sol_split, OpValue, Shape, SolSplit, Source};

/// The chunked prefill scan kernel (the state-dtype gate and the vLLM alias apply to it).
const SCAN_KERNEL: &str = "chunk_gated_delta_rule";
/// vLLM 0.24.0's physical kernels behind the canonical scan (spec 31 §6.4 step 2).
const VLLM_SCAN_ALIASES: [&str; 3] =
    ["chunk_gated_delta_rule_flashinfer", "chunk_gated_delta_rule_triton", "chunk_gated_delta_rule_cutedsl"];
/// Scan chunk length in tokens (the SOL's inter-chunk state traffic).
const CHUNK: f64 = 64.0;

/// The SOL of a `Gdn` op in ms at `(b, s)` (spec 31 §6.5): bytes read plus bytes written over
/// the memory bandwidth, summed, divided, then scaled to ms in exactly that order.
pub fn gdn_sol_ms(op: &GdnOp, b: f64, s: f64, mem_bw: f64) -> f64 {
    let x = if op.phase == "context" && s > 0.0 { b * s } else { b };
    let (nk, hk) = (f64::from(op.num_k_heads), f64::from(op.head_k_dim));
    let (nv, hv) = (f64::from(op.num_v_heads), f64::from(op.head_v_dim));
    let dc = f64::from(op.d_conv);
    let c = 2.0 * nk * hk + nv * hv;
    let state = nv * hk * hv;
    let sigma = match op.mamba_ssm_dtype.as_str() {
        "bfloat16" | "float16" => 2.0,
        _ => 4.0,
    };
    let chunks = if s > 0.0 { (s / CHUNK).floor() } else { 0.0 };
    let h = chunks * state * 2.0 * b;
    let (read, write) = match op.kernel_source.as_str() {
        "causal_conv1d_fn" | "causal_conv1d_update" => (x * c * (dc + 1.0) * 2.0, x * c * 2.0),
        SCAN_KERNEL => (x * c * 2.0 + state * sigma * b + h, x * nv * hv * 2.0 + state * sigma * b + h),
        GDN_RECURRENCE_KERNEL => (x * c * 2.0 + state * sigma * b, x * nv * hv * 2.0 + state * sigma * b),
        _ => {
            let d = f64::from(op.d_model);
            (x * d * 2.0, x * d * 2.0)
        }
    };
    (read + write) / mem_bw.max(1.0) * 1000.0
}

/// Compiled `Gdn`: the grid that answers it, resolved once (none → the SOL fallback).
#[derive(Debug)]
pub struct GdnEval {
    pub(crate) name: String,
    op: GdnOp,
    mem_bw: f64,
    /// The exact-key grid, or `None` when the op answers with its SOL (state-dtype gate,
    /// table load failure, ambiguous alias, missing key).
    grid: Option<Arc<Grid>>,
    generation: bool,
}

impl GdnEval {
    pub(crate) fn compile(op: &GdnOp, db: &Arc<PerfDatabase>) -> Self {
        let key = |kernel: &str| GdnKey {
            kernel_source: kernel.to_string(),
            phase: op.phase.clone(),
            d_model: u64::from(op.d_model),
            d_conv: u64::from(op.d_conv),
            num_k_heads: u64::from(op.num_k_heads),
            head_k_dim: u64::from(op.head_k_dim),
            num_v_heads: u64::from(op.num_v_heads),
            head_v_dim: u64::from(op.head_v_dim),
        };
        let own = key(&op.kernel_source);
        let generation = own.is_generation();
        let state_kernel = op.kernel_source == SCAN_KERNEL || op.kernel_source == GDN_RECURRENCE_KERNEL;
        let grid = if state_kernel && op.mamba_ssm_dtype != "float32" {
            None
        } else if let Ok(table) = db.gdn() {
            let vllm_0240 = db.resolver.backend() == Backend::Vllm && db.resolver.version() == "0.24.0";
            let aliases: &[&str] = match (op.kernel_source.as_str(), op.phase.as_str()) {
                (SCAN_KERNEL, "context") if vllm_0240 => &VLLM_SCAN_ALIASES,
                (GDN_RECURRENCE_KERNEL, "generation") if vllm_0240 => {
                    &["fused_recurrent_gated_delta_rule_packed_decode"]
                }
                _ => &[],
            };
            let found: Vec<Arc<Grid>> = aliases.iter().filter_map(|k| table.grid(&key(k))).collect();
            match found.len() {
                0 => table.grid(&own),
                1 => found.into_iter().next(),
                // Ambiguous physical kernels: a perf-database error, answered by the SOL.
                _ => None,
            }
        } else {
            None
        };
        GdnEval { name: op.name.clone(), op: op.clone(), mem_bw: db.system.gpu.mem_bw, grid, generation }
    }

    /// The op's SOL in ms at `(b, s)`.
    fn sol(&self, b: f64, s: f64) -> f64 {
        gdn_sol_ms(&self.op, b, s, self.mem_bw)
    }

    /// Latency at a shape (scale factor included). Reads `batch` and `s` only; the database
    /// mode, prefix, token count and beam width do not enter. Never fails.
    pub fn eval(&self, shape: &Shape) -> Result<OpValue> {
        let (b, s) = (shape.batch as f64, shape.s as f64);
        let found = match &self.grid {
            Some(grid) if self.generation => grid.lookup(&[b], &|c| self.sol(c[0], s)).ok(),
            Some(grid) if shape.s > 0 => grid.lookup(&[b, s], &|c| self.sol(c[0], c[1])).ok(),
            _ => None,
        };
        let value = match found {
            Some(v) => OpValue::new(v.latency, v.energy, Source::Silicon),
            None => OpValue::new(self.sol(b, s), 0.0, Source::Sol),
        };
        Ok(value.finish(self.op.scale_factor))
    }

    /// The SOL decomposition: not published for `Gdn` (its SOL-mode answer is the table's).
    pub(crate) fn sol_split(&self, shape: &Shape) -> Result<SolSplit> {
        sol_split::undecomposed(&self.name, "Gdn", self.eval(shape)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The Qwen3.5-397B-A17B shard at tp 8 (spec 31 §7): gk 2, gv 8.
    fn shard(kernel: &str, phase: &str) -> GdnOp {
        GdnOp {
            name: "g".into(),
            scale_factor: 1.0,
            kernel_source: kernel.into(),
            phase: phase.into(),
            d_model: 4096,
            d_conv: 4,
            num_k_heads: 2,
            head_k_dim: 128,
            num_v_heads: 8,
            head_v_dim: 128,
            mamba_ssm_dtype: "float32".into(),
        }
    }

    #[test]
    fn sol_is_bytes_over_bandwidth_in_the_reference_order() {
        // Spec 31 §6.5 / §7: sum, ÷ BW, × 1000 shows in the last bit.
        let conv = shard("causal_conv1d_fn", "context");
        assert_eq!(gdn_sol_ms(&conv, 2.0, 3000.0, 4.8e12), 0.023039999999999998);
        assert_eq!(gdn_sol_ms(&shard(SCAN_KERNEL, "context"), 2.0, 3000.0, 4.8e12), 0.01688576);
        assert_eq!(gdn_sol_ms(&shard("causal_conv1d_update", "generation"), 2.0, 3000.0, 4.8e12), 7.68e-06);
        assert_eq!(gdn_sol_ms(&shard(GDN_RECURRENCE_KERNEL, "generation"), 2.0, 3000.0, 4.8e12), 0.00043903999999999997);
        // s = 0 → x = b; a bf16 state halves σ.
        assert_eq!(gdn_sol_ms(&conv, 2.0, 0.0, 4.8e12), gdn_sol_ms(&shard("causal_conv1d_fn", "generation"), 2.0, 0.0, 4.8e12));
        let mut bf16 = shard(SCAN_KERNEL, "context");
        bf16.mamba_ssm_dtype = "bfloat16".into();
        assert_eq!(gdn_sol_ms(&bf16, 2.0, 2048.0, 4.8e12), 0.011578026666666668);
        // Unknown kernel: x · d_model · 2 each way.
        assert_eq!(gdn_sol_ms(&shard("foo", "generation"), 8.0, 100.0, 4.8e12), 8.0 * 4096.0 * 2.0 * 2.0 / 4.8e12 * 1000.0);
    }
}
