//! DeepSeek-V4 compressed-attention ops `Dsv4Context` / `Dsv4Generation` (spec 34 §5).
//!
//! A V4 attention block (q/kv/o projections, the KV compressor, for CSA the indexer with its
//! top-k, windowed plus compressed attention) is priced as one op from the per-kind module
//! tables. It has its own module because its rules are its own: per-rank head slices chosen by
//! a nearest-head rule, an integer SOL with causal-window and compressed pair counts, a CSA
//! top-k correction subtracted after the grid, an empirical estimate anchored on the prefix
//! axis, and a context-parallel composition (chunked indexer logits, top-k of the last chunk,
//! NCCL all-gathers).

use std::sync::{Arc, OnceLock};

use crate::data::tables::{Dsv4Calibration, Dsv4Delta, Dsv4Key, PerfDatabase};
use crate::error::{AicError, Result};
use crate::lookup::sol::Roofline;
use crate::lookup::{anchor_message, Grid};
use crate::spec::{CommQuant, DatabaseMode, Dsv4Kind, Dsv4Op, FlopsKey, KvQuant};

use super::comm::nccl;
use super::dsa::sparse_lookup;
use super::empirical::{estimate, not_implemented, util_at, ProvenanceTier};
use super::{by_mode, OpValue, Shape, SolSplit, Source, TransferKinds};

/// Rates and element widths of a DSV4 SOL.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Dsv4Rates {
    /// FLOPS of the gemm mode.
    pub f_gemm: f64,
    /// bf16 FLOPS.
    pub f_bf16: f64,
    /// fp8 FLOPS.
    pub f_fp8: f64,
    /// FLOPS of the attention math.
    pub f_attn: f64,
    /// Memory bandwidth, bytes/s.
    pub mem_bw: f64,
    /// Bytes per gemm element.
    pub mu_gemm: f64,
    /// Bytes per KV element.
    pub mu_kv: f64,
    /// Bytes per element of the attention mode (rope term).
    pub mu_attn: f64,
}

/// `Σ_{j<q} min(p + j + 1, lim)`, times `b` (spec 34 §5.5).
pub fn causal_pairs(b: u128, q: u128, p: u128, lim: u128) -> u128 {
    if lim == 0 || q == 0 {
        0
    } else if p >= lim {
        b * q * lim
    } else if p + q <= lim {
        b * ((p + q) * (p + q + 1) - p * (p + 1)) / 2
    } else {
        b * (lim * (lim + 1) - p * (p + 1)) / 2 + b * (p + q - lim) * lim
    }
}

/// Compressed pairs of `q` new tokens after `p` cached ones at ratio `r`, each capped at
/// `lim`, times `b` (spec 34 §5.5).
pub fn compressed_pairs(b: u128, q: u128, p: u128, r: u128, lim: u128) -> u128 {
    if r == 0 || q == 0 || lim == 0 {
        return 0;
    }
    let s = |n: i128| -> i128 {
        if n < 0 {
            return 0;
        }
        let r = r as i128;
        let a = n / r;
        r * a * (a - 1) / 2 + a * (n % r + 1)
    };
    let (st, en, ss) = ((p + 1) as i128, (p + q) as i128, (lim * r) as i128);
    let v = if en < ss {
        s(en) - s(st - 1)
    } else if st >= ss {
        (q * lim) as i128
    } else {
        s(ss - 1) - s(st - 1) + (en - ss + 1) * lim as i128
    };
    b * v.max(0) as u128
}

/// The DSV4 roofline (spec 34 §5.5): context at `(b, s, prefix)`, generation at `(b, s)`.
pub fn dsv4_roofline(op: &Dsv4Op, r: &Dsv4Rates, context: bool, b: u64, s: u64, prefix: u64) -> Roofline {
    let (b, s, p) = (u128::from(b), u128::from(s), u128::from(prefix));
    let nh = u128::from(op.num_heads);
    let (h, q, o, d, rr) = (
        u128::from(op.hidden_size),
        u128::from(op.q_lora_rank),
        u128::from(op.o_lora_rank),
        u128::from(op.head_dim),
        u128::from(op.rope_head_dim),
    );
    let (ih, id, k) = (u128::from(op.index_n_heads), u128::from(op.index_head_dim), u128::from(op.index_topk));
    let w = u128::from(op.window_size.unwrap_or(128));
    let g = u128::from(op.groups().max(1));
    let csa = op.attn_kind == Dsv4Kind::Csa;
    let cr = u128::from(op.attn_kind.ratio());
    let (tokens, kvl) = if context { (b * s, p + s) } else { (b, s.saturating_sub(1)) };
    let proj = 2 * tokens * (h * q + q * nh * d + h * d + g * o * h);
    let absorb = 2 * tokens * nh * d * o;
    let cm: u128 = if csa { 2 } else { 1 };
    let mut comp = 4 * tokens * h * cm * d + 2 * tokens * cm * d;
    if csa {
        comp += 4 * tokens * h * 2 * id + 2 * tokens * 2 * id;
    }
    let lim = if csa { k } else { kvl / cr };
    let (wp, cpairs) = if context {
        (causal_pairs(b, s, p, w), compressed_pairs(b, s, p, cr, lim))
    } else {
        (b * kvl.min(w), b * (kvl / cr).min(lim))
    };
    let att = 4 * nh * d * (wp + cpairs);
    let (idx, idx_bf16, icache) = if csa {
        let cl = kvl / 4;
        let iq = tokens;
        (2 * iq * q * ih * id + 2 * iq * cl * ih * id, 2 * iq * h * ih, (b * cl) as f64 * (id as f64 * 0.5))
    } else {
        (0, 0, 0.0)
    };
    let mut wg = (h * q + q * nh * d + h * d + g * o * h) as f64 * r.mu_gemm + (2 * h * cm * d) as f64 * r.mu_gemm;
    let mut wb = (nh * d * o) as f64 * 2.0;
    if csa {
        wg += (q * ih * id) as f64 * r.mu_gemm;
        wb += (h * ih) as f64 * 2.0;
    }
    let act = (tokens * (h + q + nh * d + d + g * o)) as f64 * r.mu_gemm;
    let kvb = ((wp + cpairs) * d) as f64 * r.mu_kv;
    let rope = (tokens * nh * rr) as f64 * r.mu_attn;
    let math = (proj + comp) as f64 / r.f_gemm
        + (absorb + idx_bf16) as f64 / r.f_bf16
        + idx as f64 / r.f_fp8
        + att as f64 / r.f_attn;
    let mem = (wg + wb + act + kvb + icache + rope) / r.mem_bw;
    Roofline { math_s: math, mem_s: mem }
}

/// 1-D resolution over points with ascending distinct coordinates: exact, clamp to the end
/// values outside, linear inside; `None` when empty.
fn interp_1d(pts: &[(u64, f64)], x: u64) -> Option<f64> {
    let (first, last) = (pts.first()?, pts.last()?);
    if x <= first.0 {
        return Some(first.1);
    }
    if x >= last.0 {
        return Some(last.1);
    }
    let i = pts.partition_point(|(c, _)| *c < x);
    let (x1, y1) = pts[i];
    if x1 == x {
        return Some(y1);
    }
    let (x0, y0) = pts[i - 1];
    Some(y0 + (y1 - y0) * ((x as f64 - x0 as f64) / (x1 as f64 - x0 as f64)))
}

/// The top-k correction Δ at `(p, i, bs)` (spec 34 §5.4): exact key, else chained 1-D
/// interpolation prefix → isl → batch; `max(0, ·)`, 0 when nothing resolves.
pub fn topk_delta(delta: &Dsv4Delta, p: u64, i: u64, bs: u64) -> f64 {
    if let Some(v) = delta.exact(p, i, bs) {
        return v.max(0.0);
    }
    let mut over_batch: Vec<(u64, f64)> = Vec::new();
    let mut over_isl: Vec<(u64, f64)> = Vec::new();
    for (b, isls) in delta.nested() {
        over_isl.clear();
        for (isl, steps) in isls {
            if let Some(v) = interp_1d(steps, p) {
                over_isl.push((*isl, v));
            }
        }
        if let Some(v) = interp_1d(&over_isl, i) {
            over_batch.push((*b, v));
        }
    }
    interp_1d(&over_batch, bs).map_or(0.0, |v| v.max(0.0))
}

#[inline]
fn count(v: f64) -> u64 {
    if v > 0.0 {
        v as u64
    } else {
        0
    }
}

/// Chunk length of the context-parallel indexer-logits sum.
const MQA_CHUNK: u64 = 8192;

/// Compiled `Dsv4Context` / `Dsv4Generation`.
#[derive(Debug)]
pub struct Dsv4Eval {
    pub(crate) name: String,
    op: Dsv4Op,
    context: bool,
    key: Dsv4Key,
    db: Arc<PerfDatabase>,
    /// Rates, resolved on first use (a missing FLOPS entry is kept and reported every time).
    rates: OnceLock<Result<Dsv4Rates>>,
    /// The op's slice, resolved on first use.
    grid: OnceLock<Result<Arc<Grid>>>,
    /// The calibration table when the op is CSA and the correction is on.
    calibration: OnceLock<Option<Arc<Dsv4Calibration>>>,
}

impl Dsv4Eval {
    pub(crate) fn compile(op: &Dsv4Op, context: bool, db: &Arc<PerfDatabase>) -> Self {
        let fmha = if context { op.fmha_quant_mode.as_str().to_string() } else { String::new() };
        Dsv4Eval {
            name: op.name.clone(),
            op: op.clone(),
            context,
            key: [fmha, op.kv_cache_dtype.as_str().to_string(), op.gemm_quant_mode.as_str().to_string()],
            db: db.clone(),
            rates: OnceLock::new(),
            grid: OnceLock::new(),
            calibration: OnceLock::new(),
        }
    }

    fn rates(&self) -> Result<Dsv4Rates> {
        self.rates.get_or_init(|| self.resolve_rates()).clone()
    }

    fn resolve_rates(&self) -> Result<Dsv4Rates> {
        let o = &self.op;
        let sys = &self.db.system;
        let f_gemm = sys.flops(o.gemm_quant_mode.as_str(), o.gemm_quant_mode.flops_key())?;
        let f_bf16 = sys.flops("bfloat16", FlopsKey::Bfloat16)?;
        let f_fp8 = sys.flops("fp8", FlopsKey::Fp8)?;
        let (f_attn, mu_attn) = if self.context {
            (sys.flops(o.fmha_quant_mode.as_str(), o.fmha_quant_mode.flops_key())?, o.fmha_quant_mode.bytes_per_elem())
        } else if o.kv_cache_dtype == KvQuant::Fp8 && sys.gpu.sm_version.is_some_and(|v| v >= 89) {
            (f_fp8, 1.0)
        } else {
            (f_bf16, 2.0)
        };
        Ok(Dsv4Rates {
            f_gemm,
            f_bf16,
            f_fp8,
            f_attn,
            mem_bw: sys.gpu.mem_bw,
            mu_gemm: o.gemm_quant_mode.bytes_per_elem(),
            mu_kv: o.kv_cache_dtype.bytes_per_elem(),
            mu_attn,
        })
    }

    fn sol_ms(&self, r: &Dsv4Rates, b: u64, s: u64, p: u64) -> f64 {
        dsv4_roofline(&self.op, r, self.context, b, s, p).ms()
    }

    fn missing(&self) -> AicError {
        AicError::perf(format!(
            "DSV4 module data missing for ModuleKey {{ fmha_quant: {:?}, kv_quant: {:?}, gemm_quant: {:?} }}",
            self.key[0], self.key[1], self.key[2]
        ))
    }

    /// The op's slice: table load, key, native then local heads.
    fn grid(&self) -> Result<Arc<Grid>> {
        self.grid.get_or_init(|| self.resolve_grid()).clone()
    }

    fn resolve_grid(&self) -> Result<Arc<Grid>> {
        let table = self.db.dsv4().module(&self.db.resolver, self.op.attn_kind, self.context)?;
        match table.grid(&self.key, u64::from(self.op.native_heads), u64::from(self.op.num_heads)) {
            Some(g) => Ok(g.clone()),
            None => Err(self.missing()),
        }
    }

    /// The CSA top-k correction at a shape (0 for HCA or without calibration).
    fn correction(&self, b: u64, s: u64, p: u64) -> Result<f64> {
        let cal = self.calibration.get_or_init(|| {
            let off = std::env::var("AIC_DSV4_TOPK_CORRECTION").is_ok_and(|v| v == "0");
            if self.op.attn_kind != Dsv4Kind::Csa || off {
                return None;
            }
            self.db.dsv4().calibration(&self.db.resolver).ok().cloned()
        });
        let Some(cal) = cal else {
            return Ok(0.0);
        };
        let native = u64::from(self.op.native_heads);
        let d = if self.context {
            cal.dv1.get(&native).map(|d| topk_delta(d, p, s, b))
        } else {
            cal.dv2.get(&native).map(|d| topk_delta(d, s.saturating_sub(1), 1, b))
        };
        Ok(d.unwrap_or(0.0))
    }

    fn silicon(&self, r: &Dsv4Rates, b: u64, s: u64, p: u64) -> Result<OpValue> {
        let grid = self.grid()?;
        let v = if self.context {
            let q = [p as f64, s as f64, b as f64];
            let sol = |c: &[f64]| self.sol_ms(r, count(c[2]), count(c[1]), count(c[0]));
            grid.lookup(&q, &sol).map_err(|m| AicError::perf(anchor_message(&["step", "isl", "batch"], &q, m)))?
        } else {
            let q = [b as f64, s as f64];
            let sol = |c: &[f64]| self.sol_ms(r, count(c[0]), count(c[1]), 0);
            grid.lookup(&q, &sol).map_err(|m| AicError::perf(anchor_message(&["batch", "s_total"], &q, m)))?
        };
        let delta = self.correction(b, s, p)?;
        let (mut lat, mut energy) = (v.latency, v.energy);
        if delta > 0.0 {
            let new = (lat - delta).max(0.0);
            if lat != 0.0 {
                energy *= new / lat;
            }
            lat = new;
        }
        Ok(OpValue::new(lat, energy, Source::Silicon))
    }

    fn empirical(&self, r: &Dsv4Rates, b: u64, s: u64, p: u64) -> Result<OpValue> {
        let grid = self.grid().ok();
        let points: Vec<(&[u64], f64)> =
            grid.as_ref().map(|g| g.points().map(|(c, l)| (c, l.latency)).collect()).unwrap_or_default();
        let latency_sol = self.sol_ms(r, b, s, p);
        let util = if self.context {
            let steps: std::collections::BTreeSet<u64> = points.iter().map(|(c, _)| c[0]).collect();
            let anchored = steps.len() >= 2
                && steps.first().is_some_and(|&lo| lo <= p)
                && steps.last().is_some_and(|&hi| p <= hi);
            if anchored {
                let q = [p as f64, s as f64, b as f64];
                let sol = |c: &[f64]| self.sol_ms(r, count(c[2]), count(c[1]), count(c[0]));
                util_at(points.iter().copied(), &sol, &q).ok_or_else(|| not_implemented(&q))?
            } else {
                let q = [(s + p) as f64, b as f64];
                let coords: Vec<[u64; 2]> = points.iter().filter(|(c, _)| c[0] == 0).map(|(c, _)| [c[1], c[2]]).collect();
                let lats: Vec<f64> = points.iter().filter(|(c, _)| c[0] == 0).map(|(_, l)| *l).collect();
                let sol = |c: &[f64]| self.sol_ms(r, count(c[1]), count(c[0]), 0);
                util_at(coords.iter().map(|c| &c[..]).zip(lats.iter().copied()), &sol, &q)
                    .ok_or_else(|| not_implemented(&q))?
            }
        } else {
            let q = [b as f64, s as f64];
            let sol = |c: &[f64]| self.sol_ms(r, count(c[0]), count(c[1]), 0);
            util_at(points.iter().copied(), &sol, &q).ok_or_else(|| not_implemented(&q))?
        };
        Ok(estimate(latency_sol / util, ProvenanceTier::Empirical))
    }

    /// The unscaled, unclamped module value in a mode.
    fn module(&self, mode: DatabaseMode, r: &Dsv4Rates, b: u64, s: u64, p: u64) -> Result<OpValue> {
        by_mode(
            mode,
            || Ok(OpValue::new(self.sol_ms(r, b, s, p), 0.0, Source::Sol)),
            || self.silicon(r, b, s, p),
            || self.empirical(r, b, s, p),
        )
    }

    /// Latency at a shape, scale factor included.
    pub fn eval(&self, shape: &Shape) -> Result<OpValue> {
        let r = self.rates()?;
        let (b, s) = (shape.batch, shape.s);
        let p = if self.context { shape.prefix } else { 0 };
        if self.context && self.op.cp_size > 1 {
            return self.eval_cp(shape.mode, shape.transfers, &r, b, s, p);
        }
        Ok(self.module(shape.mode, &r, b, s, p)?.finish(self.op.scale_factor))
    }

    /// Chunked indexer logits `MQA(x)` (spec 34 §5.6); `None` when absent.
    fn mqa(&self, b: u64, x: u64, p: u64) -> Option<f64> {
        let table = self.db.dsv4().paged_mqa(&self.db.resolver).ok()?;
        let grid = table.grid(u64::from(self.op.native_heads), u64::from(self.op.tp_size))?;
        let mut sum = 0.0;
        let mut off = 0;
        while off < x {
            let chunk = (x - off).min(MQA_CHUNK);
            let past = p + off;
            let q = [past as f64, chunk as f64, b as f64];
            let sol = |c: &[f64]| {
                let (st, i, bb) = (c[0].max(0.0).floor(), c[1].max(0.0).floor(), c[2].max(0.0).floor());
                bb * (st * i + i * i / 2.0)
            };
            let v = grid.lookup(&q, &sol).ok()?.latency;
            if !v.is_finite() {
                return None;
            }
            sum += v;
            off += MQA_CHUNK;
        }
        Some(sum)
    }

    /// The context-parallel composition (spec 34 §5.6): tag `estimated`, no clamp.
    fn eval_cp(&self, mode: DatabaseMode, transfers: TransferKinds, r: &Dsv4Rates, b: u64, s: u64, p: u64) -> Result<OpValue> {
        let c = self.op.cp_size;
        let pc = s.div_ceil(u64::from(c)).max(1);
        let mut lat = self.module(mode, r, b, pc, p)?.latency;
        let d = u64::from(self.op.head_dim);
        let cf = f64::from(c);
        let ag = |e: u64| -> Result<f64> {
            Ok(nccl(&self.db, mode, transfers, CommQuant::Half, "all_gather", u64::from(c), e as f64)?.latency)
        };
        match self.op.attn_kind {
            Dsv4Kind::Csa => {
                let native = u64::from(self.op.native_heads);
                let mqa_s = self.mqa(b, s, p);
                let mqa_pc = self.mqa(b, pc, p);
                let cal = self.db.dsv4().calibration(&self.db.resolver).ok();
                let tl_table = cal.as_ref().and_then(|c| c.top_last.get(&native));
                let tl = |x: u64| -> Result<Option<f64>> {
                    match tl_table {
                        Some(t) => sparse_lookup(t, b, x, p),
                        None => Ok(None),
                    }
                };
                let tl_s = tl(s)?;
                let tl_pc = tl(pc)?;
                let (Some(ms), Some(mp), Some(ts), Some(tp)) = (mqa_s, mqa_pc, tl_s, tl_pc) else {
                    return Err(AicError::perf(format!(
                        "DeepSeek-V4 CSA CP modeling needs sparse tables (paged_mqa_logits + csa_topk_calib \
                         top_last) at num_heads={native}, b={b}; collect dsv4_paged_mqa_logits_module / \
                         dsv4_csa_topk_calib first."
                    )));
                };
                lat += (ms / cf - mp) + (ts / cf - tp);
                lat += ag(b * s * u64::from(self.op.index_head_dim))?;
                lat += ag(b * (s / 4) * d)?;
            }
            Dsv4Kind::Hca => {
                let w = match self.op.window_size {
                    Some(w) if w > 0 => u64::from(w),
                    _ => s,
                };
                lat += ag(b * s.min(w) * d)?;
                lat += ag(b * (s / 128) * d)?;
            }
        }
        Ok(OpValue::new(lat * self.op.scale_factor, 0.0, Source::Estimated))
    }

    /// The SOL with its parts.
    pub(crate) fn sol_split(&self, shape: &Shape) -> Result<SolSplit> {
        if self.context && self.op.cp_size > 1 {
            return super::sol_split::undecomposed(&self.name, "Dsv4Context", self.eval(shape)?);
        }
        let r = self.rates()?;
        let p = if self.context { shape.prefix } else { 0 };
        Ok(SolSplit::leaf(dsv4_roofline(&self.op, &r, self.context, shape.batch, shape.s, p)).finish(self.op.scale_factor))
    }
}
