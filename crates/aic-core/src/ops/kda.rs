//! The `Kda` op (spec 36 §6): one Kimi delta attention kernel of a Kimi-K3 linear-attention
//! layer. It has its own module because its rules are its own: phase-dependent effective
//! coordinates (a verify op divides the engine's token count back into requests of
//! `draft_tokens`), kernel re-routing onto fused decode kernels a table may hold instead, a
//! nearest-head-shard fallback, a memory-bound byte SOL it degrades to on any data problem (tag
//! `sol`, never an error), and no database-mode dispatch at all.

use std::sync::Arc;

use crate::data::tables::{KdaKey, KdaTable, PerfDatabase};
use crate::error::Result;
use crate::lookup::Grid;
use crate::spec::KdaOp;

use super::{sol_split, OpValue, Shape, SolSplit, Source};

/// The SOL byte model's name for a kernel (spec 36 §6.6).
fn sol_kernel(kernel: &str) -> &str {
    match kernel {
        "chunk_kda_with_fused_gate" | "flashkda_fwd" => "chunk_kda",
        "fused_kda_decode" => "fused_recurrent_kda_packed_decode",
        "fused_recurrent_kda" => "fused_sigmoid_gating_delta_rule_update",
        other => other,
    }
}

/// The SOL of a KDA kernel in ms at effective `(b, s)` (spec 36 §6.6): bytes read plus bytes
/// written over the memory bandwidth. `kernel` is the (routed) kernel name.
pub fn kda_sol_ms(op: &KdaOp, kernel: &str, b: f64, s: f64, mem_bw: f64) -> f64 {
    let x = if matches!(op.phase.as_str(), "context" | "verify") && s > 0.0 { b * s } else { b };
    let p = f64::from(op.num_v_heads) * f64::from(op.head_v_dim);
    let st = f64::from(op.num_v_heads) * f64::from(op.head_k_dim) * f64::from(op.head_v_dim) * 4.0;
    let c = f64::from(op.d_conv);
    let conv_update = (x * 3.0 * p * (c + 1.0) * 2.0, x * 3.0 * p * 2.0);
    let packed = (x * 4.0 * p * 2.0 + st * b, x * p * 2.0 + st * b);
    let sigmoid = (x * 4.0 * p * 2.0 + st * b, x * p * 2.0 + st * x);
    let (read, write) = match sol_kernel(kernel) {
        "causal_conv1d_fn_qkv3" => (3.0 * x * p * (c + 1.0) * 2.0, 3.0 * x * p * 2.0),
        "causal_conv1d_update" => conv_update,
        "chunk_kda" => {
            let hc = if s > 0.0 { (s / 64.0).floor() * st * b } else { 0.0 };
            (8.0 * x * p + st * b + hc, 2.0 * x * p + st * b + hc)
        }
        "fused_recurrent_kda_packed_decode" => packed,
        "fused_sigmoid_gating_delta_rule_update" => sigmoid,
        "fused_kda_decode_mtp_dspark" => (conv_update.0 + sigmoid.0, conv_update.1 + sigmoid.1),
        "kda_fused_decode" => (conv_update.0 + packed.0, conv_update.1 + packed.1),
        _ => {
            let d = f64::from(op.d_model);
            (x * d * 2.0, x * d * 2.0)
        }
    };
    (read + write) / mem_bw * 1000.0
}

/// The effective `(b, s)` of a phase (spec 36 §6.2).
pub fn kda_coordinates(phase: &str, draft_tokens: i64, b: u64, s: u64) -> (f64, f64) {
    match phase {
        "verify" if draft_tokens > 0 => {
            let d = draft_tokens as f64;
            ((b as f64 / d).round_ties_even().max(1.0), d)
        }
        "verify" => (b as f64, 0.0),
        "generation" => (b as f64, 0.0),
        _ => (b as f64, s as f64),
    }
}

/// How a compiled op answers (spec 36 §6.4).
#[derive(Debug)]
enum Route {
    /// The kernel is fused into its partner: exactly 0.
    Zero,
    /// Look up `kernel` (exact or nearest shard); `None` grid → SOL.
    Lookup { kernel: String, grid: Option<Arc<Grid>> },
}

/// Compiled `Kda`.
#[derive(Debug)]
pub struct KdaEval {
    pub(crate) name: String,
    op: KdaOp,
    mem_bw: f64,
    route: Route,
}

impl KdaEval {
    pub(crate) fn compile(op: &KdaOp, db: &Arc<PerfDatabase>) -> Self {
        let key = |kernel: &str| KdaKey {
            kernel_source: kernel.to_string(),
            phase: op.phase.clone(),
            d_model: u64::from(op.d_model),
            d_conv: u64::from(op.d_conv),
            num_k_heads: u64::from(op.num_k_heads),
            head_k_dim: u64::from(op.head_k_dim),
            num_v_heads: u64::from(op.num_v_heads),
            head_v_dim: u64::from(op.head_v_dim),
        };
        let table: Option<&Arc<KdaTable>> = db.kda().ok();
        let route = Self::route(op, table, &key);
        let route = match route {
            Route::Lookup { kernel, .. } => {
                let grid = table.and_then(|t| t.grid_or_nearest(&key(&kernel)));
                Route::Lookup { kernel, grid }
            }
            zero => zero,
        };
        KdaEval { name: op.name.clone(), op: op.clone(), mem_bw: db.system.gpu.mem_bw, route }
    }

    /// The kernel routing of spec 36 §6.4 (an unloadable table has no rows).
    fn route(op: &KdaOp, table: Option<&Arc<KdaTable>>, key: &dyn Fn(&str) -> KdaKey) -> Route {
        let k = op.kernel_source.as_str();
        let conv = k == "causal_conv1d_update";
        let own = || Route::Lookup { kernel: k.to_string(), grid: None };
        let Some(t) = table else { return own() };
        let routed = |to: &str| if conv { Route::Zero } else { Route::Lookup { kernel: to.to_string(), grid: None } };
        match op.phase.as_str() {
            "verify"
                if (conv || k == "fused_sigmoid_gating_delta_rule_update")
                    && !t.has_kernel(k, "verify")
                    && t.has_kernel("fused_kda_decode_mtp_dspark", "verify") =>
            {
                routed("fused_kda_decode_mtp_dspark")
            }
            "generation"
                if (conv || k == "fused_recurrent_kda_packed_decode")
                    && !t.contains(&key(k))
                    && t.contains(&key("kda_fused_decode")) =>
            {
                routed("kda_fused_decode")
            }
            _ => own(),
        }
    }

    /// Latency at a shape (scale factor included). Reads `batch` and `s` only; the database
    /// mode does not enter (spec 36 §6.5). Never fails.
    pub fn eval(&self, shape: &Shape) -> Result<OpValue> {
        let (kernel, grid) = match &self.route {
            Route::Zero => return Ok(OpValue::zero(Source::Silicon)),
            Route::Lookup { kernel, grid } => (kernel.as_str(), grid),
        };
        let (b, s) = kda_coordinates(&self.op.phase, self.op.draft_tokens, shape.batch, shape.s);
        let sol = |b: f64, s: f64| kda_sol_ms(&self.op, kernel, b, s, self.mem_bw);
        let found = match grid {
            Some(g) if self.op.phase == "generation" => g.lookup(&[b], &|c| sol(c[0], s)).ok(),
            Some(g) if s > 0.0 => g.lookup(&[b, s], &|c| sol(c[0], c[1])).ok(),
            _ => None,
        };
        let value = match found {
            Some(v) => OpValue::new(v.latency, v.energy, Source::Silicon),
            None => OpValue::new(sol(b, s), 0.0, Source::Sol),
        };
        Ok(value.finish(self.op.scale_factor))
    }

    /// The SOL decomposition: not published for `Kda` (a routed-to-zero op reports zeros).
    pub(crate) fn sol_split(&self, shape: &Shape) -> Result<SolSplit> {
        sol_split::undecomposed(&self.name, "Kda", self.eval(shape)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Kimi-K3's 12-head shard at tp 8 (spec 36 §4.3).
    fn shard(kernel: &str, phase: &str, draft: i64, scale: f64) -> KdaOp {
        KdaOp {
            name: "k".into(),
            scale_factor: scale,
            kernel_source: kernel.into(),
            phase: phase.into(),
            d_model: 7168,
            d_conv: 4,
            num_k_heads: 12,
            head_k_dim: 128,
            num_v_heads: 12,
            head_v_dim: 128,
            draft_tokens: draft,
        }
    }

    fn close(a: f64, b: f64) -> bool {
        ((a - b) / b).abs() <= 1e-9
    }

    /// Spec 36 §6.6 worked SOLs (h200, ×69 layers as compiled).
    #[test]
    fn sol_worked_examples() {
        let bw = 4.8e12;
        let conv = shard("causal_conv1d_fn_qkv3", "context", 0, 69.0);
        assert!(close(kda_sol_ms(&conv, "causal_conv1d_fn_qkv3", 2.0, 3000.0, bw) * 69.0, 4.76928));
        let chunk = shard("chunk_kda", "context", 0, 69.0);
        assert!(close(kda_sol_ms(&chunk, "chunk_kda", 2.0, 3000.0, bw) * 69.0, 3.45013248));
        let upd = shard("causal_conv1d_update", "generation", 0, 69.0);
        assert!(close(kda_sol_ms(&upd, "causal_conv1d_update", 8.0, 0.0, bw) * 69.0, 0.00635904));
        let rec = shard("fused_recurrent_kda_packed_decode", "generation", 0, 69.0);
        assert!(close(kda_sol_ms(&rec, "fused_recurrent_kda_packed_decode", 8.0, 0.0, bw) * 69.0, 0.18264576));
        let ver = shard("fused_recurrent_kda", "verify", 8, 69.0);
        let (b, s) = kda_coordinates("verify", 8, 8, 2049);
        assert_eq!((b, s), (1.0, 8.0));
        assert!(close(kda_sol_ms(&ver, "fused_recurrent_kda", b, s, bw) * 69.0, 0.10351104));
        let mut wide = shard("flashkda_fwd", "context", 0, 1.0);
        wide.d_model = 4096;
        assert!(close(kda_sol_ms(&wide, "flashkda_fwd", 1.0, 2048.0, bw), 0.01736704));
    }

    /// Spec 36 §6.2: round half to even, at least one request.
    #[test]
    fn verify_coordinates_round_half_even() {
        assert_eq!(kda_coordinates("verify", 8, 20, 5), (2.0, 8.0));
        assert_eq!(kda_coordinates("verify", 8, 28, 5), (4.0, 8.0));
        assert_eq!(kda_coordinates("verify", 8, 64, 5), (8.0, 8.0));
        assert_eq!(kda_coordinates("verify", 8, 2, 5), (1.0, 8.0));
        assert_eq!(kda_coordinates("verify", 0, 8, 5), (8.0, 0.0));
        assert_eq!(kda_coordinates("generation", 0, 8, 2049), (8.0, 0.0));
        assert_eq!(kda_coordinates("context", 0, 2, 3000), (2.0, 3000.0));
    }

    /// Verify with no draft tokens: `x = b` in the sigmoid byte model (spec 36 §6.5).
    #[test]
    fn verify_without_draft_tokens_prices_the_batch() {
        let ver = shard("fused_recurrent_kda", "verify", 0, 1.0);
        let (b, s) = kda_coordinates("verify", 0, 8, 2049);
        assert!(close(kda_sol_ms(&ver, "fused_recurrent_kda", b, s, 4.8e12), 0.00264704));
    }
}
