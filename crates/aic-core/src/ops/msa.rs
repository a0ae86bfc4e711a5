//! MiniMax sparse-attention ops `MsaContext` / `MsaGeneration` (spec 36 §5).
//!
//! MiniMax-M3 prices its whole attention block (Q/K/V/O and indexer projections, block indexer,
//! top-k block-sparse attention) as one op. It exists apart from the DSA op because its roofline
//! counts blocks rather than an MLA latent, its context grid is `(heads, prefix, seq, batch)` with
//! no correction for the prefix, its generation slices merge every FMHA dtype, and where the MSA
//! table cannot answer (HYBRID on a miss, EMPIRICAL always) it borrows the utilisation of a DSA
//! architecture at the same workload (the cross-op transfer) instead of estimating from its own
//! rows.

use std::sync::{Arc, OnceLock};

use crate::data::tables::{DsaBucket, DsaKey, PerfDatabase};
use crate::error::{AicError, Result};
use crate::lookup::sol::Roofline;
use crate::lookup::{anchor_message, Grid};
use crate::spec::{DatabaseMode, FlopsKey, MsaOp};

use super::dsa::{context_roofline as dsa_context_roofline, generation_roofline as dsa_generation_roofline};
use super::empirical::{estimate, ProvenanceTier};
use super::{DsaDims, DsaRates, OpValue, Shape, SolSplit, Source, TransferKinds};

/// The architecture of every shipped MSA row.
pub const MSA_ARCH: &str = "MiniMaxM3ForCausalLM";

/// Hardware rates and element widths of an MSA roofline (spec 36 §5.2).
#[derive(Debug, Clone, Copy)]
pub struct MsaRates {
    /// FLOPS of the GEMM quant mode.
    pub f_gemm: f64,
    /// FP8 FLOPS (the indexer always runs in fp8).
    pub f_fp8: f64,
    /// FLOPS of the FMHA quant mode.
    pub f_fmha: f64,
    /// Memory bandwidth, bytes/s.
    pub mem_bw: f64,
    /// Bytes per GEMM weight element.
    pub mu_gemm: f64,
    /// Bytes per KV element.
    pub mu_kv: f64,
    /// Bytes per FMHA element.
    pub mu_fmha: f64,
}

/// `SOL_msa` (spec 36 §5.2) of `op` at `(b, s, prefix)`, `nh` query heads; exact integer
/// counts. `context` picks the prefill (t = b·s) or decode (t = b, KV = s − 1) form.
pub fn msa_roofline(op: &MsaOp, r: &MsaRates, context: bool, b: u64, s: u64, prefix: u64, nh: u64) -> Roofline {
    let u = |v: u32| u128::from(v);
    let (h, nkv, hd, vd) = (u(op.hidden_size), u(op.num_kv_heads), u(op.head_dim), u(op.v_head_dim));
    let (inh, ihd, topk, bk) = (u(op.index_n_heads), u(op.index_head_dim), u(op.index_topk), u(op.block_size));
    let (b, s, p, nh) = (u128::from(b), u128::from(s), u128::from(prefix), u128::from(nh));
    let (t, full, kv) = if context { (b * s, p + s, p + s) } else { (b, s, s.saturating_sub(1)) };
    let gemm_ops = 2 * t * h * (nh * hd) + 2 * t * h * (2 * nkv * hd) + 2 * t * (nh * vd) * h + 2 * t * h * (inh * ihd);
    let (pairs, score_len, eff_kv) = if context {
        let pairs = if full <= topk {
            b * (full * (full + 1) - p * (p + 1)) / 2
        } else if p >= topk {
            t * topk
        } else {
            b * (topk * (topk + 1) - p * (p + 1)) / 2 + b * (full - topk) * topk
        };
        (pairs, full, full.min(topk))
    } else {
        (t * kv.min(topk), kv, kv.min(topk))
    };
    let attn_ops = 2 * nh * (hd + vd) * pairs;
    let blocks = if score_len > topk && bk > 0 { score_len.div_ceil(bk) } else { 0 };
    let idx_ops = 2 * t * inh * ihd * blocks;
    let w = h * nh * hd + h * 2 * nkv * hd + nh * vd * h + h * inh * ihd;
    let bytes = w as f64 * r.mu_gemm
        + (b * nkv * eff_kv * (hd + vd)) as f64 * r.mu_kv
        + (b * blocks * inh * ihd) as f64
        + (t * nh * hd) as f64 * r.mu_fmha * 2.0;
    let math = gemm_ops as f64 / r.f_gemm + idx_ops as f64 / r.f_fp8 + attn_ops as f64 / r.f_fmha;
    Roofline { math_s: math, mem_s: bytes / r.mem_bw }
}

/// A coordinate of the resolver as an integer count.
#[inline]
fn count(v: f64) -> u64 {
    if v > 0.0 {
        v as u64
    } else {
        0
    }
}

/// Compiled `MsaContext` / `MsaGeneration`.
#[derive(Debug)]
pub struct MsaEval {
    pub(crate) name: String,
    op: MsaOp,
    context: bool,
    db: Arc<PerfDatabase>,
    /// The op's rates, or the missing-FLOPS error every query reports first.
    rates: Result<MsaRates>,
    /// The DSA rates of the transfer (the generation attention math runs in bf16).
    dsa_rates: Result<DsaRates>,
    /// The MSA grid of the op's key, resolved on first silicon use.
    grid: OnceLock<Result<Grid>>,
    /// The DSA grid of the transfer probe, resolved on first use.
    dsa_grid: OnceLock<Option<Grid>>,
}

impl MsaEval {
    pub(crate) fn compile(op: &MsaOp, context: bool, db: &Arc<PerfDatabase>) -> Self {
        let sys = &db.system;
        let rates = (|| {
            Ok(MsaRates {
                f_gemm: sys.flops(op.gemm_quant_mode.as_str(), op.gemm_quant_mode.flops_key())?,
                f_fp8: sys.flops("fp8", FlopsKey::Fp8)?,
                f_fmha: sys.flops(op.fmha_quant_mode.as_str(), op.fmha_quant_mode.flops_key())?,
                mem_bw: sys.gpu.mem_bw,
                mu_gemm: op.gemm_quant_mode.bytes_per_elem(),
                mu_kv: op.kv_cache_dtype.bytes_per_elem(),
                mu_fmha: op.fmha_quant_mode.bytes_per_elem(),
            })
        })();
        let dsa_rates = rates.as_ref().map_err(Clone::clone).and_then(|r| {
            let f_attn = if context { r.f_fmha } else { sys.flops("bfloat16", FlopsKey::Bfloat16)? };
            Ok(DsaRates {
                f_gemm: r.f_gemm,
                f_fp8: r.f_fp8,
                f_attn,
                mem_bw: r.mem_bw,
                mu_gemm: r.mu_gemm,
                mu_kv: r.mu_kv,
                mu_fmha: r.mu_fmha,
            })
        });
        MsaEval {
            name: op.name.clone(),
            op: op.clone(),
            context,
            db: db.clone(),
            rates,
            dsa_rates,
            grid: OnceLock::new(),
            dsa_grid: OnceLock::new(),
        }
    }

    fn heads(&self) -> u64 {
        u64::from(self.op.num_heads)
    }

    fn phase(&self) -> &'static str {
        if self.context {
            "context"
        } else {
            "generation"
        }
    }

    /// The MSA table key of the op: generation keys blank the FMHA component (spec 36 §5.3).
    fn key(&self) -> DsaKey {
        let o = &self.op;
        let fmha = if self.context { o.fmha_quant_mode.as_str().to_string() } else { String::new() };
        [MSA_ARCH.to_string(), fmha, o.kv_cache_dtype.as_str().to_string(), o.gemm_quant_mode.as_str().to_string()]
    }

    /// The grid of the op's key (bucket `trtllm` first), or why there is none.
    fn resolve_grid(&self) -> Result<Grid> {
        let table = self.db.msa().module(&self.db.resolver, self.context).map_err(|e| match e {
            AicError::PerfData(m) => AicError::perf(format!("perf database error: perf database error: {m}")),
            other => other,
        })?;
        let key = self.key();
        let missing = || {
            AicError::perf(format!(
                "{} MSA module data missing for DsaKey {{ architecture: {:?}, fmha_quant: {:?}, kv_quant: {:?}, \
                 gemm_quant: {:?} }} at {}",
                self.phase(),
                key[0],
                key[1],
                key[2],
                key[3],
                self.db.label()
            ))
        };
        let slice = table.slice(&key).ok_or_else(missing)?;
        slice.grid(DsaBucket::Trtllm).cloned().ok_or_else(missing)
    }

    /// The MSA table answer (spec 36 §5.4), unscaled.
    fn silicon(&self, r: &MsaRates, b: u64, s: u64, p: u64) -> Result<f64> {
        let grid = self.grid.get_or_init(|| self.resolve_grid()).as_ref().map_err(Clone::clone)?;
        let n = self.heads() as f64;
        let (op, ctx) = (&self.op, self.context);
        let v = if ctx {
            let q = [n, p as f64, s as f64, b as f64];
            let sol = |c: &[f64]| msa_roofline(op, r, ctx, count(c[3]), count(c[2]), count(c[1]), count(c[0])).ms();
            grid.lookup(&q, &sol)
                .map_err(|m| AicError::perf(anchor_message(&["num_heads", "prefix", "seq_len", "batch"], &q, m)))?
        } else {
            let q = [n, b as f64, s as f64];
            let sol = |c: &[f64]| msa_roofline(op, r, ctx, count(c[1]), count(c[2]), 0, count(c[0])).ms();
            grid.lookup(&q, &sol)
                .map_err(|m| AicError::perf(anchor_message(&["num_heads", "batch", "seq_len"], &q, m)))?
        };
        Ok(v.latency)
    }

    /// The DSA grid of the probe: key `(dsa architecture, fmha, kv, gemm)` of the op, bucket
    /// `trtllm` first, from the database's own DSA tables (spec 36 §5.6).
    fn resolve_dsa_grid(&self) -> Option<Grid> {
        let o = &self.op;
        let table = self.db.dsa().module(&self.db.resolver, self.context, crate::data::tables::DsaPart::Full).ok()?;
        let key: DsaKey = [
            o.dsa_architecture.clone(),
            o.fmha_quant_mode.as_str().to_string(),
            o.kv_cache_dtype.as_str().to_string(),
            o.gemm_quant_mode.as_str().to_string(),
        ];
        table.slice(&key)?.grid(DsaBucket::Trtllm).cloned()
    }

    /// `util_dsa = SOL_dsa / L_dsa` at the workload, or `None` when the probe cannot answer.
    fn dsa_util(&self, b: u64, s: u64, p: u64) -> Option<f64> {
        let r = self.dsa_rates.as_ref().ok()?;
        let grid = self.dsa_grid.get_or_init(|| self.resolve_dsa_grid()).as_ref()?;
        let d = DsaDims::of(&self.op.dsa_architecture);
        let n = self.heads();
        let (sol, lat) = if self.context {
            let q = [n as f64, p as f64, s as f64, b as f64];
            let f = |c: &[f64]| dsa_context_roofline(&d, r, count(c[3]), count(c[2]), count(c[1]), count(c[0]), false).ms();
            (dsa_context_roofline(&d, r, b, s, p, n, false).ms(), grid.lookup(&q, &f).ok()?.latency)
        } else {
            let q = [n as f64, b as f64, s as f64];
            let f = |c: &[f64]| dsa_generation_roofline(&d, r, count(c[1]), count(c[2]), count(c[0])).ms();
            (dsa_generation_roofline(&d, r, b, s, n).ms(), grid.lookup(&q, &f).ok()?.latency)
        };
        let lat = lat.max(0.0);
        (sol > 0.0 && lat > 0.0).then(|| sol / lat)
    }

    /// The cross-op transfer (spec 36 §5.5): `SOL_msa / (util_dsa · dsa_scale_k)`, unscaled.
    /// Disabled by a transfer policy without `xop`: MSA then has no empirical answer.
    fn xop(&self, sol: f64, b: u64, s: u64, p: u64, transfers: TransferKinds) -> Result<OpValue> {
        if !transfers.allows(ProvenanceTier::Xop) {
            return Err(AicError::EmpiricalNotImplemented(format!(
                "MSA {}: no measured MSA data and the transfer policy disables the cross-op (xop) \
                 transfer from DSA; enable xop in transfer_policy or use SILICON/SOL data.",
                self.phase()
            )));
        }
        let util = self.dsa_util(b, s, p).ok_or_else(|| {
            AicError::EmpiricalNotImplemented(format!(
                "MSA {}: no DSA util to transfer from (arch={}, b={b}, s={s}); collect MSA/DSA data or set \
                 msa_dsa_scale_k against an available quant.",
                self.phase(),
                self.op.dsa_architecture
            ))
        })?;
        Ok(estimate(sol / (util * self.op.dsa_scale_k), ProvenanceTier::Xop))
    }

    /// Latency at a runtime shape, its own scale factor included; energy is always 0.
    pub fn eval(&self, shape: &Shape) -> Result<OpValue> {
        let r = self.rates.as_ref().map_err(Clone::clone)?;
        let (b, s, p) = (shape.batch, shape.s, if self.context { shape.prefix } else { 0 });
        let sol = || msa_roofline(&self.op, r, self.context, b, s, p, self.heads()).ms();
        let silicon = || self.silicon(r, b, s, p).map(|v| OpValue::new(v, 0.0, Source::Silicon));
        let v = match shape.mode {
            DatabaseMode::Sol => OpValue::new(sol(), 0.0, Source::Sol),
            DatabaseMode::Silicon => silicon()?,
            DatabaseMode::Hybrid => match silicon() {
                Err(e) if e.is_perf_data_missing() => self.xop(sol(), b, s, p, shape.transfers)?,
                other => other?,
            },
            DatabaseMode::Empirical => self.xop(sol(), b, s, p, shape.transfers)?,
        };
        Ok(v.finish(self.op.scale_factor))
    }

    /// MSA publishes no math/memory split (spec 36 §5.5): the per-op decomposition refuses it.
    pub(crate) fn sol_split(&self, shape: &Shape) -> Result<SolSplit> {
        let kind = if self.context { "MsaContext" } else { "MsaGeneration" };
        Err(AicError::NoSolDecomposition { op: self.name.clone(), kind, sol_ms: self.eval(shape)?.latency })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::{FmhaQuant, GemmQuant, KvQuant};

    /// The compiled MiniMax-M3 op at tp 8 (spec 36 §4.2 worked example A), scale 1.
    fn m3() -> MsaOp {
        MsaOp {
            name: "context_attention".into(),
            scale_factor: 1.0,
            num_heads: 8,
            num_kv_heads: 1,
            hidden_size: 6144,
            head_dim: 128,
            v_head_dim: 128,
            index_n_heads: 4,
            index_head_dim: 128,
            index_topk: 2048,
            block_size: 128,
            kv_cache_dtype: KvQuant::Bfloat16,
            fmha_quant_mode: FmhaQuant::Bfloat16,
            gemm_quant_mode: GemmQuant::Bfloat16,
            dsa_architecture: "GlmMoeDsaForCausalLM".into(),
            dsa_scale_k: 1.0,
        }
    }

    /// h200_sxm: bf16 989 TFLOPS, fp8 1978 TFLOPS, 4.8 TB/s.
    fn h200() -> MsaRates {
        MsaRates {
            f_gemm: 989e12,
            f_fp8: 1978e12,
            f_fmha: 989e12,
            mem_bw: 4.8e12,
            mu_gemm: 2.0,
            mu_kv: 2.0,
            mu_fmha: 2.0,
        }
    }

    fn close(a: f64, b: f64) -> bool {
        ((a - b) / b).abs() <= 1e-9
    }

    /// Spec 36 §5.2 worked SOLs on h200.
    #[test]
    fn sol_worked_examples() {
        let (op, r) = (m3(), h200());
        let c = msa_roofline(&op, &r, true, 2, 3000, 0, 8);
        assert!(close(c.ms(), 0.24353078202628917), "{}", c.ms());
        assert!(close(c.mem_s * 1000.0, 61300736.0 / 4.8e12 * 1000.0));
        let c = msa_roofline(&op, &r, true, 3, 5000, 1500, 8);
        assert!(close(c.ms(), 0.6505806057997978), "{}", c.ms());
        let g = msa_roofline(&op, &r, false, 8, 2049, 0, 8);
        assert!(close(g.ms(), 0.008963413333333333), "{}", g.ms());
        assert!(close(g.mem_s * 1000.0, 43024384.0 / 4.8e12 * 1000.0));
        let g = msa_roofline(&op, &r, false, 1, 100, 0, 8);
        assert!(close(g.ms(), 0.007220373333333333), "{}", g.ms());
    }

    /// h100 has the bandwidth 3.35e12; the decode point stays memory-bound.
    #[test]
    fn sol_h100_generation() {
        let r = MsaRates { mem_bw: 3.35e12, ..h200() };
        let g = msa_roofline(&m3(), &r, false, 8, 2049, 0, 8);
        assert!(close(g.ms(), 0.012843099701492538), "{}", g.ms());
    }
}
