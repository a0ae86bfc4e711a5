//! MLA ops (spec 20 §14, 11 §8): op-level context / generation MLA kernels, the fused MLA
//! modules and the decode BMMs. SOL formulas hard-code the DeepSeek dimensions (q/k+v width
//! 320 in prefill; 1088 and 576 in decode; BMM 128×512).

use std::sync::Arc;

use crate::data::tables::{MlaModuleTable, PerfDatabase};
use crate::error::{AicError, Result};
use crate::lookup::sol::Roofline;
use crate::lookup::{anchor_message, Grid};
use crate::spec::{ContextMlaOp, GemmQuant, GenerationMlaOp, KvQuant, MlaBmmOp, MlaModuleOp};

use super::empirical::{estimate, not_implemented, util_at, ProvenanceTier};
use super::{by_mode, OpValue, Shape, SolSplit, Source};

/// Context MLA roofline at a coordinate `(n, full, b)` with `p` cached tokens (spec 20 §14.1).
fn context_mla_roofline(n: f64, full: f64, b: f64, p: f64, kv_bytes: f64, flops: f64, mem_bw: f64) -> Roofline {
    let s = full - p;
    let ops = b * n * 320.0 * (full * full - p * p);
    let mem = b * n * (kv_bytes * full * 320.0 + 2.0 * s * 320.0);
    Roofline::new(ops, flops, mem, mem_bw)
}

/// Context MLA SOL at a coordinate `(n, full, b)` with `p` cached tokens, ms.
fn context_mla_sol(n: f64, full: f64, b: f64, p: f64, kv_bytes: f64, flops: f64, mem_bw: f64) -> f64 {
    context_mla_roofline(n, full, b, p, kv_bytes, flops, mem_bw).ms()
}

/// Decode MLA attention terms `(ops, bytes)` at `(n, b, s)`.
fn generation_mla_terms(n: f64, b: f64, s: f64, kv_bytes: f64) -> (f64, f64) {
    (2.0 * b * n * 1088.0 * s, b * (n * 1088.0 * 2.0 + (s - 1.0) * 576.0 * kv_bytes))
}

/// Decode MLA roofline at `(n, b, s)` (spec 20 §14.2).
fn generation_mla_roofline(n: f64, b: f64, s: f64, kv_bytes: f64, flops: f64, mem_bw: f64) -> Roofline {
    let (ops, bytes) = generation_mla_terms(n, b, s, kv_bytes);
    Roofline::new(ops, flops, bytes, mem_bw)
}

/// Decode MLA module roofline at `(n, b, s)`: the attention terms plus both BMMs, folded in
/// before the max (spec 20 §14.3).
#[allow(clippy::too_many_arguments)]
fn generation_module_roofline(n: f64, b: f64, s: f64, kv_bytes: f64, f_attn: f64, f_gemm: f64, gemm_bytes: f64, mem_bw: f64) -> Roofline {
    let (ops_a, bytes_a) = generation_mla_terms(n, b, s, kv_bytes);
    let ops_b = 4.0 * b * n * 128.0 * 512.0;
    let bytes_b = 2.0 * n * (b * 640.0 + 128.0 * 512.0) * gemm_bytes;
    Roofline { math_s: ops_a / f_attn + ops_b / f_gemm, mem_s: (bytes_a + bytes_b) / mem_bw }
}

/// Decode BMM roofline at `t` tokens and `nh` heads (spec 20 §14.4).
fn bmm_roofline(t: f64, nh: f64, flops: f64, bytes_per_elem: f64, mem_bw: f64) -> Roofline {
    Roofline::new(2.0 * t * nh * 128.0 * 512.0, flops, nh * (t * 640.0 + 128.0 * 512.0) * bytes_per_elem, mem_bw)
}

/// Looks up a context-type MLA grid at `full = s + p`, with the prefix correction.
fn context_lookup(grid: &Grid, n: f64, b: u64, s: u64, p: u64, kv_bytes: f64, flops: f64, mem_bw: f64) -> Result<OpValue> {
    let full = s + p;
    let q = [n, full as f64, b as f64];
    let sol = |c: &[f64]| context_mla_sol(c[0], c[1], c[2], 0.0, kv_bytes, flops, mem_bw);
    let v = grid
        .lookup(&q, &sol)
        .map_err(|m| AicError::perf(anchor_message(&["num_heads", "seq_len", "batch"], &q, m)))?;
    let (f, pf) = (full as f64, p as f64);
    let corr = if full == 0 { 0.0 } else { (f * f - pf * pf) / (f * f) };
    Ok(OpValue::new(v.latency * corr, v.energy * corr, Source::Silicon))
}

/// The context-type MLA term (op-level kernel or module) in a database mode; `grid` is the
/// slice (or why it is missing).
#[allow(clippy::too_many_arguments)]
fn context_term(
    mode: crate::spec::DatabaseMode,
    grid: &Result<&Grid>,
    n: f64,
    b: u64,
    s: u64,
    p: u64,
    kv_bytes: f64,
    flops: f64,
    mem_bw: f64,
) -> Result<OpValue> {
    let sol_q = || context_mla_sol(n, (s + p) as f64, b as f64, p as f64, kv_bytes, flops, mem_bw);
    by_mode(
        mode,
        || Ok(context_sol_split(n, b, s, p, kv_bytes, flops, mem_bw).value(Source::Sol)),
        || context_lookup(grid.as_ref().map_err(Clone::clone)?, n, b, s, p, kv_bytes, flops, mem_bw),
        || {
            let q = [n, (s + p) as f64, b as f64];
            let grid = grid.as_ref().map_err(|_| not_implemented(&q))?;
            let sample = |c: &[f64]| context_mla_sol(c[0], c[1], c[2], 0.0, kv_bytes, flops, mem_bw);
            let util = util_at(grid.points().map(|(c, l)| (c, l.latency)), &sample, &q)
                .ok_or_else(|| not_implemented(&q))?;
            Ok(estimate(sol_q() / util, ProvenanceTier::Empirical))
        },
    )
}

/// The SOL-mode context-type MLA term with its parts (unscaled).
fn context_sol_split(n: f64, b: u64, s: u64, p: u64, kv_bytes: f64, flops: f64, mem_bw: f64) -> SolSplit {
    SolSplit::leaf(context_mla_roofline(n, (s + p) as f64, b as f64, p as f64, kv_bytes, flops, mem_bw))
}

/// A generation-type MLA value (single lookup at `(heads, batch, s)`) in a database mode.
fn generation_term(
    mode: crate::spec::DatabaseMode,
    grid: &Result<&Grid>,
    q: [f64; 3],
    sol: &dyn Fn(&[f64]) -> f64,
) -> Result<OpValue> {
    by_mode(
        mode,
        || Ok(OpValue::new(sol(&q), 0.0, Source::Sol)),
        || {
            let grid = grid.as_ref().map_err(Clone::clone)?;
            let v = grid
                .lookup(&q, sol)
                .map_err(|m| AicError::perf(anchor_message(&["num_heads", "batch", "seq_len"], &q, m)))?;
            Ok(OpValue::new(v.latency, v.energy, Source::Silicon))
        },
        || {
            let grid = grid.as_ref().map_err(|_| not_implemented(&q))?;
            let util = util_at(grid.points().map(|(c, l)| (c, l.latency)), sol, &q)
                .ok_or_else(|| not_implemented(&q))?;
            Ok(estimate(sol(&q) / util, ProvenanceTier::Empirical))
        },
    )
}

fn decode_flops(db: &PerfDatabase, kv: KvQuant) -> Result<f64> {
    db.system.flops(kv.as_str(), kv.decode_flops_key(db.system.gpu.sm_version))
}

/// Compiled `ContextMla`.
#[derive(Debug)]
pub struct ContextMlaEval {
    pub(crate) name: String,
    op: ContextMlaOp,
    db: Arc<PerfDatabase>,
}

impl ContextMlaEval {
    pub(crate) fn compile(op: &ContextMlaOp, db: &Arc<PerfDatabase>) -> Self {
        ContextMlaEval { name: op.name.clone(), op: op.clone(), db: db.clone() }
    }

    /// Table term at the full sequence (zig-zag chunks under context parallelism); no extras.
    pub fn eval(&self, shape: &Shape) -> Result<OpValue> {
        if shape.is_sol() {
            return Ok(self.sol_split(shape)?.value(Source::Sol));
        }
        let o = &self.op;
        let flops = self.db.system.flops(o.fmha_quant_mode.as_str(), o.fmha_quant_mode.flops_key())?;
        let table = self.db.mla_kernel(true);
        let grid: Result<&Grid> = match &table {
            Err(e) => Err(e.clone()),
            Ok(t) => t.slice(&[o.fmha_quant_mode.as_str(), o.kv_cache_dtype.as_str()]).ok_or_else(|| {
                AicError::perf(format!(
                    "context MLA data missing for ContextKey {{ fmha_quant: {:?}, kv_quant: {:?} }} at {}; \
                     the table has (fmha_quant, kv_quant) slices {}: compile with a listed \
                     fmha_quant_mode (e.g. fmha_quant_mode=\"bfloat16\")",
                    o.fmha_quant_mode.as_str(),
                    o.kv_cache_dtype.as_str(),
                    self.db.label(),
                    t.keys().join(", ")
                ))
            }),
        };
        let (n, kvb, bw) = (f64::from(o.num_heads), o.kv_cache_dtype.bytes_per_elem(), self.db.system.gpu.mem_bw);
        let (b, s, p, mode) = (shape.batch, shape.s, shape.prefix, shape.mode);
        let term = if o.cp_size > 1 {
            let c = s.div_ceil(2 * u64::from(o.cp_size)).max(1);
            context_term(mode, &grid, n, b, c, p, kvb, flops, bw)?
                .add(context_term(mode, &grid, n, b, c, p + s - c.min(s), kvb, flops, bw)?)
        } else {
            context_term(mode, &grid, n, b, s, p, kvb, flops, bw)?
        };
        Ok(term.finish(o.scale_factor))
    }

    /// The SOL-mode answer with its parts (spec 20 §14.1; both zig-zag chunks under context
    /// parallelism).
    pub(crate) fn sol_split(&self, shape: &Shape) -> Result<SolSplit> {
        let o = &self.op;
        let flops = self.db.system.flops(o.fmha_quant_mode.as_str(), o.fmha_quant_mode.flops_key())?;
        let (n, kvb, bw) = (f64::from(o.num_heads), o.kv_cache_dtype.bytes_per_elem(), self.db.system.gpu.mem_bw);
        let (b, s, p) = (shape.batch, shape.s, shape.prefix);
        let term = if o.cp_size > 1 {
            let c = s.div_ceil(2 * u64::from(o.cp_size)).max(1);
            context_sol_split(n, b, c, p, kvb, flops, bw) + context_sol_split(n, b, c, p + s - c.min(s), kvb, flops, bw)
        } else {
            context_sol_split(n, b, s, p, kvb, flops, bw)
        };
        Ok(term.finish(o.scale_factor))
    }
}

/// Compiled `GenerationMla`.
#[derive(Debug)]
pub struct GenerationMlaEval {
    pub(crate) name: String,
    op: GenerationMlaOp,
    db: Arc<PerfDatabase>,
}

impl GenerationMlaEval {
    pub(crate) fn compile(op: &GenerationMlaOp, db: &Arc<PerfDatabase>) -> Self {
        GenerationMlaEval { name: op.name.clone(), op: op.clone(), db: db.clone() }
    }

    /// One lookup at `(heads, batch, s)` (no sample averaging).
    pub fn eval(&self, shape: &Shape) -> Result<OpValue> {
        if shape.is_sol() {
            return Ok(self.sol_split(shape)?.value(Source::Sol));
        }
        let o = &self.op;
        let flops = decode_flops(&self.db, o.kv_cache_dtype)?;
        let table = self.db.mla_kernel(false);
        let grid: Result<&Grid> = match &table {
            Err(e) => Err(e.clone()),
            Ok(t) => t.slice(&[o.kv_cache_dtype.as_str()]).ok_or_else(|| {
                AicError::perf(format!(
                    "generation MLA data missing for KvOnlyKey {{ kv_quant: {:?} }} at {}; the table \
                     has kv_quant slices {}",
                    o.kv_cache_dtype.as_str(),
                    self.db.label(),
                    t.keys().join(", ")
                ))
            }),
        };
        let kvb = o.kv_cache_dtype.bytes_per_elem();
        let bw = self.db.system.gpu.mem_bw;
        let q = [f64::from(o.num_heads), shape.batch as f64, shape.s as f64];
        let sol = |c: &[f64]| generation_mla_roofline(c[0], c[1], c[2], kvb, flops, bw).ms();
        Ok(generation_term(shape.mode, &grid, q, &sol)?.finish(o.scale_factor))
    }

    /// The SOL-mode answer with its parts (spec 20 §14.2).
    pub(crate) fn sol_split(&self, shape: &Shape) -> Result<SolSplit> {
        let o = &self.op;
        let flops = decode_flops(&self.db, o.kv_cache_dtype)?;
        let (n, kvb, bw) = (f64::from(o.num_heads), o.kv_cache_dtype.bytes_per_elem(), self.db.system.gpu.mem_bw);
        let roofline = generation_mla_roofline(n, shape.batch as f64, shape.s as f64, kvb, flops, bw);
        Ok(SolSplit::leaf(roofline).finish(o.scale_factor))
    }
}

/// Compiled `MlaModuleContext` / `MlaModuleGeneration`.
#[derive(Debug)]
pub struct MlaModuleEval {
    pub(crate) name: String,
    op: MlaModuleOp,
    context: bool,
    db: Arc<PerfDatabase>,
}

impl MlaModuleEval {
    pub(crate) fn compile(op: &MlaModuleOp, context: bool, db: &Arc<PerfDatabase>) -> Self {
        MlaModuleEval { name: op.name.clone(), op: op.clone(), context, db: db.clone() }
    }

    fn missing(&self, table: &MlaModuleTable) -> AicError {
        let have = format!("; the table has slices {}", table.keys().join(", "));
        let o = &self.op;
        let native = match o.native_num_heads {
            Some(n) => format!(" native_heads=Some({n})"),
            None => " native_heads=None".to_string(),
        };
        if self.context {
            AicError::perf(format!(
                "context MLA module data missing for ModuleKey {{ fmha_quant: {:?}, kv_quant: {:?}, gemm_quant: {:?} }}{native} at {}{have}",
                o.fmha_quant_mode.as_str(),
                o.kv_cache_dtype.as_str(),
                o.gemm_quant_mode.as_str(),
                self.db.label()
            ))
        } else {
            AicError::perf(format!(
                "generation MLA module data missing for GenModuleKey {{ kv_quant: {:?}, gemm_quant: {:?} }}{native} at {}{have}",
                o.kv_cache_dtype.as_str(),
                o.gemm_quant_mode.as_str(),
                self.db.label()
            ))
        }
    }

    /// Context: table at `s + prefix` with the prefix correction; generation: one lookup.
    pub fn eval(&self, shape: &Shape) -> Result<OpValue> {
        if shape.is_sol() {
            return Ok(self.sol_split(shape)?.value(Source::Sol));
        }
        let o = &self.op;
        let db = &*self.db;
        let bw = db.system.gpu.mem_bw;
        let kvb = o.kv_cache_dtype.bytes_per_elem();
        let n = f64::from(o.num_heads);
        let table = db.mla_module(self.context);
        let grid = |key: &[&str]| -> Result<&Grid> {
            match &table {
                Err(e) => Err(e.clone()),
                Ok(t) => t.slice(key, o.native_num_heads).ok_or_else(|| self.missing(t)),
            }
        };
        if self.context {
            let flops = db.system.flops(o.fmha_quant_mode.as_str(), o.fmha_quant_mode.flops_key())?;
            let g = grid(&[o.fmha_quant_mode.as_str(), o.kv_cache_dtype.as_str(), o.gemm_quant_mode.as_str()]);
            let v = context_term(shape.mode, &g, n, shape.batch, shape.s, shape.prefix, kvb, flops, bw)?;
            return Ok(v.finish(o.scale_factor));
        }
        let f_attn = decode_flops(db, o.kv_cache_dtype)?;
        let f_gemm = db.system.flops(o.gemm_quant_mode.as_str(), o.gemm_quant_mode.flops_key())?;
        let g = grid(&[o.kv_cache_dtype.as_str(), o.gemm_quant_mode.as_str()]);
        let gemm_bytes = o.gemm_quant_mode.bytes_per_elem();
        let sol = |c: &[f64]| generation_module_roofline(c[0], c[1], c[2], kvb, f_attn, f_gemm, gemm_bytes, bw).ms();
        let q = [n, shape.batch as f64, shape.s as f64];
        Ok(generation_term(shape.mode, &g, q, &sol)?.finish(o.scale_factor))
    }

    /// The SOL-mode answer with its parts: the context MLA roofline (gemm quant does not
    /// enter), or the decode MLA terms with both BMMs folded in (spec 20 §14.3).
    pub(crate) fn sol_split(&self, shape: &Shape) -> Result<SolSplit> {
        let o = &self.op;
        let db = &*self.db;
        let (n, kvb, bw) = (f64::from(o.num_heads), o.kv_cache_dtype.bytes_per_elem(), db.system.gpu.mem_bw);
        let split = if self.context {
            let flops = db.system.flops(o.fmha_quant_mode.as_str(), o.fmha_quant_mode.flops_key())?;
            context_sol_split(n, shape.batch, shape.s, shape.prefix, kvb, flops, bw)
        } else {
            let f_attn = decode_flops(db, o.kv_cache_dtype)?;
            let f_gemm = db.system.flops(o.gemm_quant_mode.as_str(), o.gemm_quant_mode.flops_key())?;
            let gemm_bytes = o.gemm_quant_mode.bytes_per_elem();
            let (b, s) = (shape.batch as f64, shape.s as f64);
            SolSplit::leaf(generation_module_roofline(n, b, s, kvb, f_attn, f_gemm, gemm_bytes, bw))
        };
        Ok(split.finish(o.scale_factor))
    }
}

/// Compiled `MlaBmm`.
#[derive(Debug)]
pub struct MlaBmmEval {
    pub(crate) name: String,
    op: MlaBmmOp,
    db: Arc<PerfDatabase>,
}

impl MlaBmmEval {
    pub(crate) fn compile(op: &MlaBmmOp, db: &Arc<PerfDatabase>) -> Self {
        MlaBmmEval { name: op.name.clone(), op: op.clone(), db: db.clone() }
    }

    /// The curve at the decode batch, with per-slice quant fallback to bfloat16 and head routing
    /// to the next power of two.
    pub fn eval(&self, shape: &Shape) -> Result<OpValue> {
        let o = &self.op;
        let db = &*self.db;
        let quant = o.quant_mode;
        let flops = db.system.flops(quant.as_str(), quant.flops_key())?;
        let bpe = quant.bytes_per_elem();
        let bw = db.system.gpu.mem_bw;
        let t = shape.batch as f64;
        let sol_at = |t: f64, nh: f64| bmm_roofline(t, nh, flops, bpe, bw).ms();
        if shape.is_sol() {
            return Ok(self.sol_split(shape)?.value(Source::Sol));
        }
        let table = db.mla_bmm()?;
        let which = if o.is_pre { "mla_gen_pre" } else { "mla_gen_post" };
        let bf16 = GemmQuant::Bfloat16.as_str();
        let slice = table
            .slice(quant.as_str(), which)
            .or_else(|| table.slice(bf16, which))
            .ok_or_else(|| {
                AicError::perf(format!(
                    "MLA BMM data missing for quant={}, {which} at {}",
                    quant.as_str(),
                    db.label()
                ))
            })?;
        // Head routing, existence judged on the quant chosen at quant level.
        let level_quant = if table.has_quant(quant.as_str()) { quant.as_str() } else { bf16 };
        let heads = u64::from(o.num_heads);
        let exists = table.slice(level_quant, which).is_some_and(|s| s.contains_key(&heads));
        let (used_heads, factor) = if heads.is_power_of_two() || exists {
            (heads, 1.0)
        } else {
            let p = heads.next_power_of_two();
            (p, heads as f64 / p as f64)
        };
        let curve = slice.get(&used_heads).ok_or_else(|| {
            AicError::perf(format!("MLA BMM data missing for num_heads={used_heads} at {}", db.label()))
        })?;
        let nh = used_heads as f64;
        let sol = |c: &[f64]| sol_at(c[0], nh);
        if shape.mode == crate::spec::DatabaseMode::Empirical {
            let util = util_at(curve.points().map(|(c, l)| (c, l.latency)), &sol, &[t])
                .ok_or_else(|| not_implemented(&[t]))?;
            let v = sol_at(t, f64::from(o.num_heads)) / util;
            return Ok(estimate(v, ProvenanceTier::Empirical).finish(o.scale_factor));
        }
        let v = curve
            .lookup(&[t], &sol)
            .map_err(|m| AicError::perf(anchor_message(&["num_tokens"], &[t], m)))?;
        Ok(OpValue::new(v.latency * factor, v.energy * factor, Source::Silicon).finish(o.scale_factor))
    }

    /// The SOL-mode answer with its parts: the requested quant and head count, no head or
    /// quant routing (spec 20 §14.4).
    pub(crate) fn sol_split(&self, shape: &Shape) -> Result<SolSplit> {
        let o = &self.op;
        let db = &*self.db;
        let flops = db.system.flops(o.quant_mode.as_str(), o.quant_mode.flops_key())?;
        let roofline = bmm_roofline(shape.batch as f64, f64::from(o.num_heads), flops, o.quant_mode.bytes_per_elem(), db.system.gpu.mem_bw);
        Ok(SolSplit::leaf(roofline).finish(o.scale_factor))
    }
}

