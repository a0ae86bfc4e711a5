//! Attention ops (spec 20 §4–§5, 11 §4–§5). Context attention reads the lane's slice at the
//! full sequence `s + prefix`, corrects for the cached prefix and adds constant fused-kernel
//! extras; generation attention averages five lookups spread ±10 % around the KV position.

use std::sync::{Arc, OnceLock};

use crate::data::tables::{AttentionTable, PerfDatabase, SliceKey};
use crate::error::{AicError, Result};
use crate::lookup::sol::{
    context_attention_sol_ms, generation_attention_roofline, generation_attention_sol_ms, AttentionSolParams, Roofline,
};
use crate::lookup::{anchor_message, Grid, HoldIndex, Miss, Val};
use crate::spec::{Backend, ContextAttentionOp, DatabaseMode, GenerationAttentionOp};

use super::empirical::{estimate, not_implemented, util_at, ProvenanceTier};
use super::{OpValue, Shape, SolSplit, Source, TransferKinds};

/// Prefill head-size utilisation ratio of a backend (spec 20 §4.4), log2-interpolated and
/// clamped at the ends.
fn prefill_head_ratio(backend: Backend, head: f64) -> f64 {
    let heads = [64.0f64, 128.0, 192.0, 256.0, 512.0];
    let ratios: [f64; 5] = match backend {
        Backend::Trtllm => [0.58, 1.00, 1.10, 1.17, 1.20],
        Backend::Sglang => [0.60, 1.00, 1.18, 1.32, 1.38],
        Backend::Vllm => [0.60, 1.00, 1.27, 1.51, 1.60],
    };
    if head <= heads[0] {
        return ratios[0];
    }
    if head >= heads[4] {
        return ratios[4];
    }
    let i = heads.iter().position(|&h| h >= head).unwrap();
    if heads[i] == head {
        return ratios[i];
    }
    let (l0, l1) = (heads[i - 1].log2(), heads[i].log2());
    ratios[i - 1] + (head.log2() - l0) / (l1 - l0) * (ratios[i] - ratios[i - 1])
}

/// The empirical reference slice of an attention op (spec 20 §4.4, §5; settled by spec 35
/// §10.2). The window ladder `[w, 0]` is window-major: at each window the op's own head size,
/// then the cross-head-size transfer. The transfer's reference head is chosen once, among the
/// head sizes collected for the key at any window (128 when collected, else the nearest in log
/// space); a window where that head has no slice is skipped (no other head is tried there).
/// The transfer is tried only when `xshape` is enabled (spec 20 §4.4 "if `xshape` is enabled").
/// Returns the grid, the slice's SOL parameters and the reference head of a transfer.
fn empirical_slice<'t>(
    table: &'t AttentionTable,
    lane_order: &[String],
    key: SliceKey,
    params: &AttentionSolParams,
    xshape: bool,
) -> Option<(&'t Grid, AttentionSolParams, Option<u32>)> {
    let windows: &[u32] = if key.window > 0 { &[key.window, 0] } else { &[0] };
    let at = |head: u32, w: u32| AttentionSolParams { head: f64::from(head), window: f64::from(w), ..*params };
    let reference = || {
        let heads = table.head_sizes(&key);
        if heads.is_empty() {
            None
        } else if heads.contains(&128) {
            Some(128)
        } else {
            let target = f64::from(key.head).log2();
            heads
                .iter()
                .copied()
                .min_by(|a, b| (f64::from(*a).log2() - target).abs().total_cmp(&(f64::from(*b).log2() - target).abs()))
        }
    };
    for &w in windows {
        // Own head size at this window ...
        if let Some((_, grid)) = table.select(lane_order, &SliceKey { window: w, ..key }) {
            return Some((grid, at(key.head, w), None));
        }
        // ... then the transfer from the reference head at this window.
        if let Some(head) = reference().filter(|_| xshape) {
            if let Some((_, grid)) = table.select(lane_order, &SliceKey { head, window: w, ..key }) {
                return Some((grid, at(head, w), Some(head)));
            }
        }
    }
    None
}

/// The slice a compiled attention op reads: the chosen lane's grid, and the hold index for
/// the op's head count (built on the first hold, so engines that never leave the collected
/// range never pay for it).
#[derive(Debug)]
struct ResolvedSlice {
    grid: Arc<Grid>,
    heads: f64,
    hold_index: OnceLock<Option<HoldIndex>>,
}

impl ResolvedSlice {
    /// Looks `q` (whose first coordinate is the op's head count) up in the slice.
    fn lookup(&self, q: &[f64], sol: &dyn Fn(&[f64]) -> f64) -> std::result::Result<Val, Miss> {
        self.grid.lookup_indexed(q, sol, self.index(sol))
    }

    /// Looks up the queries `q` with its last coordinate replaced by each of `lasts`.
    fn lookup_many(&self, q: &[f64], lasts: &[f64], sol: &dyn Fn(&[f64]) -> f64, out: &mut [std::result::Result<Val, Miss>]) {
        self.grid.lookup_many_indexed(q, lasts, sol, self.index(sol), out)
    }

    /// The hold index for the op's head count, built on first use with the op's SOL (the
    /// only SOL this slice is ever queried with).
    fn index(&self, sol: &dyn Fn(&[f64]) -> f64) -> Option<&HoldIndex> {
        self.hold_index.get_or_init(|| HoldIndex::build(&self.grid, &[self.heads], sol)).as_ref()
    }
}

fn resolve_slice(
    table: Result<&Arc<AttentionTable>>,
    lane_order: &[String],
    key: SliceKey,
    heads: u32,
    what: &str,
    label: &str,
) -> Result<ResolvedSlice> {
    let table = table?;
    let grid = match table.select(lane_order, &key) {
        Some((_, grid)) => grid.clone(),
        None => {
            return Err(AicError::perf(format!(
                "{what} attention data missing for {key}: tried lane_order {lane_order:?}, then fell \
                 back through table lanes {:?} at {label}",
                table.lane_names()
            )))
        }
    };
    Ok(ResolvedSlice { grid, heads: f64::from(heads), hold_index: OnceLock::new() })
}

/// Compiled `ContextAttention`.
#[derive(Debug)]
pub struct ContextAttentionEval {
    pub(crate) name: String,
    scale_factor: f64,
    n: f64,
    /// The op's own KV heads (the SOL-mode formula uses them, not the slice's).
    n_kv: f64,
    cp_size: u32,
    /// `1.1 ×` the constant fused-kernel extras (ms).
    extras: f64,
    /// `1.1 ×` the extras at the raw bandwidth (SOL mode).
    extras_sol: f64,
    key: SliceKey,
    lane_order: Vec<String>,
    sol: Result<AttentionSolParams>,
    slice: Result<ResolvedSlice>,
    db: Arc<PerfDatabase>,
}

impl ContextAttentionEval {
    pub(crate) fn compile(op: &ContextAttentionOp, db: &Arc<PerfDatabase>) -> Self {
        let sys = &db.system;
        let q = f64::from(op.n) * f64::from(op.head_size);
        let kv = f64::from(op.n_kv) * f64::from(op.head_size);
        let mf = op.fmha_quant_mode.bytes_per_elem();
        let extras_with = |mem_op: &dyn Fn(f64) -> f64| {
            let mut extras = 2.0 * mem_op(2.0 * q + 2.0 * kv) + mem_op(kv * mf) + mem_op(kv * mf);
            if op.use_qk_norm {
                extras += 2.0 * (2.0 * mem_op(2.0 * q) + 2.0 * mem_op(2.0 * kv));
            }
            extras
        };
        let extras = extras_with(&|b| sys.mem_op_ms(b));
        let extras_sol = extras_with(&|b| sys.mem_op_sol_ms(b));
        let key = SliceKey {
            fmha: Some(op.fmha_quant_mode),
            kv: op.kv_cache_dtype,
            n_kv_lookup: if op.n_kv == op.n { 0 } else { op.n_kv },
            head: op.head_size,
            window: op.window_size,
        };
        let sol = sys
            .flops(op.fmha_quant_mode.as_str(), op.fmha_quant_mode.flops_key())
            .map(|flops| AttentionSolParams {
                head: f64::from(op.head_size),
                window: f64::from(op.window_size),
                n_kv_lookup: f64::from(key.n_kv_lookup),
                kv_bytes: op.kv_cache_dtype.bytes_per_elem(),
                flops,
                mem_bw: sys.gpu.mem_bw,
            });
        let slice = resolve_slice(db.context_attention(), &op.lane_order, key, op.n, "context", &db.label());
        ContextAttentionEval {
            name: op.name.clone(),
            scale_factor: op.scale_factor,
            n: f64::from(op.n),
            n_kv: f64::from(op.n_kv),
            cp_size: op.cp_size,
            extras: 1.1 * extras,
            extras_sol: 1.1 * extras_sol,
            key,
            lane_order: op.lane_order.clone(),
            sol,
            slice,
            db: db.clone(),
        }
    }

    /// The table term for `s_chunk` new tokens after `p` cached ones.
    fn fmha(&self, slice: &ResolvedSlice, params: &AttentionSolParams, batch: u64, s_chunk: u64, p: u64) -> Result<OpValue> {
        let full = s_chunk + p;
        let q = [self.n, full as f64, batch as f64];
        let sol = |c: &[f64]| context_attention_sol_ms(params, c[0], c[1], c[2]);
        let v = slice
            .lookup(&q, &sol)
            .map_err(|m| AicError::perf(anchor_message(&["num_heads", "seq_len", "batch"], &q, m)))?;
        let f = full as f64;
        let pf = p as f64;
        let corr = if full == 0 { 0.0 } else { (f * f - pf * pf) / (f * f) };
        Ok(OpValue::new(v.latency * corr, v.energy * corr, Source::Silicon))
    }

    /// The SOL-mode FMHA roofline (prefix-aware, the op's own KV heads; spec 20 §4.3).
    fn fmha_roofline(&self, params: &AttentionSolParams, b: u64, s_chunk: u64, p: u64) -> Roofline {
        let (b, full, p, n, h, w) = (b as f64, (s_chunk + p) as f64, p as f64, self.n, params.head, params.window);
        let ops = if w > 0.0 && full > w {
            2.0 * b * (full - p) * w * n * h * 2.0
        } else {
            2.0 * b * (full * full - p * p) * n * h * 2.0 / 2.0
        };
        let mem = 2.0 * b * (n * (full - p) * h + n * (full - p) * h) + params.kv_bytes * b * (2.0 * self.n_kv * full * h);
        Roofline::new(ops, params.flops, mem, params.mem_bw)
    }

    /// The empirical FMHA term: query SOL over the reference slice's utilisation.
    fn fmha_empirical(&self, params: &AttentionSolParams, b: u64, s_chunk: u64, p: u64, transfers: TransferKinds) -> Result<OpValue> {
        let full = s_chunk + p;
        let q = [self.n, full as f64, b as f64];
        let table = self.db.context_attention()?;
        let (grid, ref_params, transfer) =
            empirical_slice(table, &self.lane_order, self.key, params, transfers.allows(ProvenanceTier::Xshape))
                .ok_or_else(|| not_implemented(&q))?;
        let sample_sol = |c: &[f64]| context_attention_sol_ms(&ref_params, c[0], c[1], c[2]);
        let util = util_at(grid.points().map(|(c, l)| (c, l.latency)), &sample_sol, &q)
            .ok_or_else(|| not_implemented(&q))?;
        let scale = match transfer {
            Some(reference) => {
                let backend = self.db.resolver.backend();
                prefill_head_ratio(backend, params.head) / prefill_head_ratio(backend, f64::from(reference))
            }
            None => 1.0,
        };
        let sol_q = self.fmha_roofline(params, b, s_chunk, p).ms();
        let tier = if transfer.is_some() { ProvenanceTier::Xshape } else { ProvenanceTier::Empirical };
        Ok(estimate(sol_q / (util * scale), tier))
    }

    /// One FMHA term in the shape's database mode.
    fn term(&self, params: &AttentionSolParams, b: u64, s_chunk: u64, p: u64, shape: &Shape) -> Result<OpValue> {
        let (mode, transfers) = (shape.mode, shape.transfers);
        match mode {
            DatabaseMode::Sol => Ok(SolSplit::leaf(self.fmha_roofline(params, b, s_chunk, p)).value(Source::Sol)),
            DatabaseMode::Empirical => self.fmha_empirical(params, b, s_chunk, p, transfers),
            DatabaseMode::Silicon | DatabaseMode::Hybrid => {
                let silicon = self
                    .slice
                    .as_ref()
                    .map_err(Clone::clone)
                    .and_then(|slice| self.fmha(slice, params, b, s_chunk, p));
                match silicon {
                    Err(e) if mode == DatabaseMode::Hybrid && e.is_perf_data_missing() => {
                        self.fmha_empirical(params, b, s_chunk, p, transfers)
                    }
                    other => other,
                }
            }
        }
    }

    /// Latency at a shape (scale factor included).
    pub fn eval(&self, shape: &Shape) -> Result<OpValue> {
        if shape.is_sol() {
            return Ok(self.sol_split(shape)?.value(Source::Sol));
        }
        let params = self.sol.as_ref().map_err(Clone::clone)?;
        let (b, s, p) = (shape.batch, shape.s, shape.prefix);
        let term = if self.cp_size > 1 {
            let c = s.div_ceil(2 * u64::from(self.cp_size)).max(1);
            let first = self.term(params, b, c, p, shape)?;
            let last = self.term(params, b, c, p + s - c.min(s), shape)?;
            first.add(last)
        } else {
            self.term(params, b, s, p, shape)?
        };
        let mut out = term.add(OpValue::new(self.extras, 0.0, Source::Empirical));
        if shape.seq_scale != 1.0 {
            out = out.scale(shape.seq_scale);
        }
        Ok(out.finish(self.scale_factor))
    }

    /// The SOL-mode answer with its parts (spec 20 §4.3): the FMHA roofline (both zig-zag
    /// chunks under context parallelism) plus the MemOpSOL extras on the memory side, then the
    /// imbalance and scale factor.
    pub(crate) fn sol_split(&self, shape: &Shape) -> Result<SolSplit> {
        let params = self.sol.as_ref().map_err(Clone::clone)?;
        let (b, s, p) = (shape.batch, shape.s, shape.prefix);
        let chunk = |s_chunk: u64, p: u64| SolSplit::leaf(self.fmha_roofline(params, b, s_chunk, p));
        let term = if self.cp_size > 1 {
            let c = s.div_ceil(2 * u64::from(self.cp_size)).max(1);
            chunk(c, p) + chunk(c, p + s - c.min(s))
        } else {
            chunk(s, p)
        };
        let mut out = term + SolSplit::memory(self.extras_sol);
        if shape.seq_scale != 1.0 {
            out = out.scale(shape.seq_scale);
        }
        Ok(out.finish(self.scale_factor))
    }
}

/// The five KV positions spread ±10 % around `s`: `s_min + floor((s_max − s_min)·i/4)`.
fn five_samples(s: u64) -> [u64; 5] {
    let sf = s as f64;
    let s_min = ((0.9 * sf).floor() as u64).max(1);
    let s_max = ((1.1 * sf).floor() as u64).max(s_min);
    std::array::from_fn(|i| s_min + (s_max - s_min) * i as u64 / 4)
}

/// Compiled `GenerationAttention`.
#[derive(Debug)]
pub struct GenerationAttentionEval {
    pub(crate) name: String,
    scale_factor: f64,
    n: f64,
    n_kv: f64,
    key: SliceKey,
    lane_order: Vec<String>,
    sol: Result<AttentionSolParams>,
    slice: Result<ResolvedSlice>,
    db: Arc<PerfDatabase>,
}

impl GenerationAttentionEval {
    pub(crate) fn compile(op: &GenerationAttentionOp, db: &Arc<PerfDatabase>) -> Self {
        let sys = &db.system;
        let key = SliceKey {
            fmha: None,
            kv: op.kv_cache_dtype,
            n_kv_lookup: if op.n_kv == op.n { 0 } else { op.n_kv },
            head: op.head_size,
            window: op.window_size,
        };
        let flops_key = op.kv_cache_dtype.decode_flops_key(sys.gpu.sm_version);
        let sol = sys.flops(op.kv_cache_dtype.as_str(), flops_key).map(|flops| AttentionSolParams {
            head: f64::from(op.head_size),
            window: f64::from(op.window_size),
            n_kv_lookup: f64::from(key.n_kv_lookup),
            kv_bytes: op.kv_cache_dtype.bytes_per_elem(),
            flops,
            mem_bw: sys.gpu.mem_bw,
        });
        let slice =
            resolve_slice(db.generation_attention(), &op.lane_order, key, op.n, "generation", &db.label());
        GenerationAttentionEval {
            name: op.name.clone(),
            scale_factor: op.scale_factor,
            n: f64::from(op.n),
            n_kv: f64::from(op.n_kv),
            key,
            lane_order: op.lane_order.clone(),
            sol,
            slice,
            db: db.clone(),
        }
    }

    /// The SOL-mode roofline at `(b, s)` with the op's own KV heads (single evaluation).
    fn sol_roofline(&self, params: &AttentionSolParams, b: f64, s: f64) -> Roofline {
        generation_attention_roofline(params, self.n, self.n_kv, b, s)
    }

    /// The empirical value at `(b, s)`: query SOL over the reference slice's utilisation.
    fn empirical(&self, params: &AttentionSolParams, b: f64, s: f64, transfers: TransferKinds) -> Result<OpValue> {
        let q = [self.n, b, s];
        let table = self.db.generation_attention()?;
        let (grid, ref_params, transfer) =
            empirical_slice(table, &self.lane_order, self.key, params, transfers.allows(ProvenanceTier::Xshape))
                .ok_or_else(|| not_implemented(&q))?;
        let sample_sol = |c: &[f64]| generation_attention_sol_ms(&ref_params, c[0], c[1], c[2]);
        let util = util_at(grid.points().map(|(c, l)| (c, l.latency)), &sample_sol, &q)
            .ok_or_else(|| not_implemented(&q))?;
        let tier = if transfer.is_some() { ProvenanceTier::Xshape } else { ProvenanceTier::Empirical };
        Ok(estimate(self.sol_roofline(params, b, s).ms() / util, tier))
    }

    /// Latency at a shape (scale factor included): the table's five-sample mean, the SOL, or
    /// the empirical estimate, by database mode.
    pub fn eval(&self, shape: &Shape) -> Result<OpValue> {
        let params = self.sol.as_ref().map_err(Clone::clone)?;
        let b = shape.batch as f64;
        let mut out = match shape.mode {
            DatabaseMode::Sol => return Ok(self.sol_split(shape)?.value(Source::Sol)),
            DatabaseMode::Empirical => self.empirical(params, b, shape.s as f64, shape.transfers)?,
            DatabaseMode::Silicon | DatabaseMode::Hybrid => match self.silicon(params, shape) {
                Err(e) if shape.mode == DatabaseMode::Hybrid && e.is_perf_data_missing() => {
                    self.empirical(params, b, shape.s as f64, shape.transfers)?
                }
                other => other?,
            },
        };
        if shape.gen_scale != 1.0 {
            out = out.scale(shape.gen_scale);
        }
        Ok(out.finish(self.scale_factor))
    }

    /// The SOL-mode answer with its parts (spec 20 §5 step 2), imbalance and scale included.
    pub(crate) fn sol_split(&self, shape: &Shape) -> Result<SolSplit> {
        let params = self.sol.as_ref().map_err(Clone::clone)?;
        let mut out = SolSplit::leaf(self.sol_roofline(params, shape.batch as f64, shape.s as f64));
        if shape.gen_scale != 1.0 {
            out = out.scale(shape.gen_scale);
        }
        Ok(out.finish(self.scale_factor))
    }

    /// Mean of five table lookups at `s_min + floor((s_max − s_min)·i/4)`.
    fn silicon(&self, params: &AttentionSolParams, shape: &Shape) -> Result<OpValue> {
        let slice = self.slice.as_ref().map_err(Clone::clone)?;
        let b = shape.batch as f64;
        let sol = |c: &[f64]| generation_attention_sol_ms(params, c[0], c[1], c[2]);
        let lasts = five_samples(shape.s).map(|si| si as f64);
        let mut found = [Err(Miss::EmptyTable); 5];
        slice.lookup_many(&[self.n, b, 0.0], &lasts, &sol, &mut found);
        let mut lat = 0.0;
        let mut energy = 0.0;
        for (v, &si) in found.into_iter().zip(&lasts) {
            let v = v.map_err(|m| AicError::perf(anchor_message(&["num_heads", "batch", "seq_len"], &[self.n, b, si], m)))?;
            lat += v.latency;
            energy += v.energy;
        }
        Ok(OpValue::new(lat / 5.0, energy / 5.0, Source::Silicon))
    }
}
