//! DeepSeek Sparse Attention ops `DsaContext` / `DsaGeneration` (spec 32 §5).
//!
//! DeepSeek-V3.2 and GLM-5.x price their whole attention block (projections, the indexer with
//! its top-k, sparse MLA, o_proj) as one op answered from the DSA module tables. This module
//! exists because none of that fits the MLA ops: the SOL is an integer formula with a top-k
//! regime split, the context grid has a real prefix axis, layers sharing a top-k index are
//! amortised through `full_frac`, the empirical estimate has four calibration variants, and a
//! context op with `cp_size > 1` composes its own context-parallel cost from sparse sub-kernel
//! tables and NCCL all-gathers.

use std::collections::BTreeSet;
use std::sync::Arc;

use crate::data::tables::{
    is_no_dsa_rows, DsaBucket, DsaKey, DsaModuleTable, DsaPart, PerfDatabase, SparseKernel, SparseKernelTable,
};
use crate::error::{AicError, Result};
use crate::lookup::sol::Roofline;
use crate::lookup::{anchor_message, Grid};
use crate::spec::{CommQuant, DatabaseMode, DsaOp, FlopsKey, GemmQuant};

use super::comm::nccl;
use super::empirical::{estimate, not_implemented, util_at, ProvenanceTier};
use super::util_levels::gemm_util_level;
use super::{by_mode, OpValue, Shape, SolSplit, Source, TransferKinds};

/// The architecture string of GLM-5.x.
pub const GLM_ARCH: &str = "GlmMoeDsaForCausalLM";

/// Fixed per-architecture dimensions of a DSA block (spec 32 §5.1); the config's values are
/// not used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DsaDims {
    /// Hidden size.
    pub h: u128,
    /// `q_lora_rank`.
    pub q_lora: u128,
    /// `kv_lora_rank`.
    pub kv_lora: u128,
    /// `qk_nope_head_dim`.
    pub qk_nope: u128,
    /// `qk_rope_head_dim`.
    pub qk_rope: u128,
    /// `v_head_dim`.
    pub v: u128,
    /// Top-k of the sparse attention.
    pub topk: u128,
    /// Indexer head dim.
    pub ihd: u128,
    /// Indexer heads.
    pub inh: u128,
}

impl DsaDims {
    /// The dimensions of an architecture (any other string uses DeepSeek-V3.2's).
    pub fn of(architecture: &str) -> DsaDims {
        if architecture == GLM_ARCH {
            DsaDims { h: 6144, q_lora: 2048, kv_lora: 512, qk_nope: 192, qk_rope: 64, v: 256, topk: 2048, ihd: 128, inh: 32 }
        } else {
            DsaDims { h: 7168, q_lora: 1536, kv_lora: 512, qk_nope: 128, qk_rope: 64, v: 128, topk: 2048, ihd: 128, inh: 64 }
        }
    }

    fn qk(&self) -> u128 {
        self.qk_nope + self.qk_rope
    }

    /// `kv_lora + qk_rope`: the latent KV width per token.
    fn a(&self) -> u128 {
        self.kv_lora + self.qk_rope
    }

    /// `q_lora + kv_lora + qk_rope + ihd`: the fused down-projection width.
    fn p(&self) -> u128 {
        self.q_lora + self.kv_lora + self.qk_rope + self.ihd
    }

    /// Indexer-cache bytes per token: `ihd + ceil(ihd/128)·4`.
    fn e_idx(&self) -> u128 {
        self.ihd + self.ihd.div_ceil(128) * 4
    }

    /// Weight elements of the block at `n` heads.
    pub fn weight_elems(&self, n: u128) -> u128 {
        self.h * self.p() + self.q_lora * n * self.qk() + self.q_lora * self.inh * self.ihd + self.h * self.inh + n * self.v * self.h
    }

    /// GEMM operations for `t` tokens at `n` heads.
    fn gemm_ops(&self, t: u128, n: u128) -> u128 {
        2 * t * self.h * self.p()
            + 2 * t * self.q_lora * (n * self.qk())
            + 2 * t * self.q_lora * (self.inh * self.ihd)
            + 2 * t * self.h * self.inh
            + 2 * t * (n * self.v) * self.h
            + 2 * n * t * self.qk_nope * self.kv_lora
            + 2 * n * t * self.kv_lora * self.v
    }
}

/// Hardware rates and element widths a DSA SOL needs.
#[derive(Debug, Clone, Copy)]
pub struct DsaRates {
    /// FLOPS of the GEMM quant mode.
    pub f_gemm: f64,
    /// FP8 FLOPS (indexer logits).
    pub f_fp8: f64,
    /// FLOPS of the attention math (context: the FMHA mode; generation: bf16).
    pub f_attn: f64,
    /// Memory bandwidth, bytes/s.
    pub mem_bw: f64,
    /// Bytes per GEMM weight element.
    pub mu_gemm: f64,
    /// Bytes per KV element.
    pub mu_kv: f64,
    /// Bytes per FMHA element.
    pub mu_fmha: f64,
}

/// Context roofline `SOLc(b, s, p, n; skip)` (spec 32 §5.3), exact integer counts.
pub fn context_roofline(d: &DsaDims, r: &DsaRates, b: u64, s: u64, p: u64, n: u64, skip: bool) -> Roofline {
    let (b, s, p, n) = (u128::from(b), u128::from(s), u128::from(p), u128::from(n));
    let t = b * s;
    let f = s + p;
    let topk = d.topk;
    let gemm_ops = d.gemm_ops(t, n);
    let idx_ops = if skip || f <= topk { 0 } else { 2 * t * d.inh * d.ihd * f };
    let pairs = if f <= topk {
        b * (f * (f + 1) - p * (p + 1)) / 2
    } else if p >= topk {
        t * topk
    } else {
        b * (topk * (topk + 1) - p * (p + 1)) / 2 + b * (f - topk) * topk
    };
    let attn_ops = 2 * n * (d.a() + d.kv_lora) * pairs;
    let w = d.weight_elems(n);
    let idx_bytes = if skip || f <= topk { 0 } else { b * f * d.e_idx() };
    let bytes = w as f64 * r.mu_gemm
        + (b * n * f.min(topk) * d.a()) as f64 * r.mu_kv
        + idx_bytes as f64
        + (t * n * d.qk()) as f64 * r.mu_fmha * 2.0;
    let math = gemm_ops as f64 / r.f_gemm + idx_ops as f64 / r.f_fp8 + attn_ops as f64 / r.f_attn;
    Roofline { math_s: math, mem_s: bytes / r.mem_bw }
}

/// Generation roofline `SOLg(b, s, n)` (spec 32 §5.3): one new token per request.
pub fn generation_roofline(d: &DsaDims, r: &DsaRates, b: u64, s: u64, n: u64) -> Roofline {
    let (b, s, n) = (u128::from(b), u128::from(s), u128::from(n));
    let gemm_ops = d.gemm_ops(b, n);
    let idx_ops = 2 * b * d.inh * d.ihd * s;
    let attn_ops = 2 * b * n * (d.a() + d.kv_lora) * s.min(d.topk);
    let bytes =
        d.weight_elems(n) as f64 * r.mu_gemm + (b * s * d.e_idx()) as f64 + (b * s.min(d.topk) * d.a()) as f64 * r.mu_kv;
    let math = gemm_ops as f64 / r.f_gemm + idx_ops as f64 / r.f_fp8 + attn_ops as f64 / r.f_attn;
    Roofline { math_s: math, mem_s: bytes / r.mem_bw }
}

/// `full_frac` of a layer pattern (spec 32 §3.4): the share of the `layers` layers that compute
/// their own top-k index.
pub fn full_frac(layers: u32, freq: Option<i64>, pattern: Option<&str>, offset: Option<i64>) -> f64 {
    let freq = freq.unwrap_or(1);
    let pattern = pattern.filter(|p| !p.is_empty());
    if freq <= 1 && pattern.is_none() {
        return 1.0;
    }
    let chars: Vec<char> = pattern.map(|p| p.chars().collect()).unwrap_or_default();
    let skips = |l: i64| -> bool {
        if pattern.is_some() {
            (l as usize) < chars.len() && chars[l as usize] == 'S'
        } else if let Some(off) = offset {
            (l - off + 1).max(0).rem_euclid(freq) != 0
        } else {
            (l - 1).max(0).rem_euclid(freq) != 0
        }
    };
    let full = (0..i64::from(layers)).filter(|&l| !skips(l)).count();
    full as f64 / f64::from(layers)
}

/// A SOL callback over sample coordinates.
type SolFn<'a> = Box<dyn Fn(&[f64]) -> f64 + 'a>;

/// A coordinate of the resolver as an integer count.
#[inline]
fn count(v: f64) -> u64 {
    if v > 0.0 {
        v as u64
    } else {
        0
    }
}

/// Compiled `DsaContext` / `DsaGeneration`.
#[derive(Debug)]
pub struct DsaEval {
    pub(crate) name: String,
    op: DsaOp,
    context: bool,
    dims: DsaDims,
    key: DsaKey,
    db: Arc<PerfDatabase>,
    /// Price a missing GEMM-quant slice from a measured sibling slice (see
    /// [`DsaEval::allow_quant_transfer`]); off unless the engine turned it on.
    quant_transfer: bool,
}

/// A measured slice standing in for the op's missing GEMM-quant slice: its grid, the rates its
/// samples' utilisation is read with, the utilisation rescale and the provenance tier.
struct Sibling<'a> {
    grid: &'a Grid,
    rates: DsaRates,
    util_scale: f64,
    tier: ProvenanceTier,
}

impl DsaEval {
    pub(crate) fn compile(op: &DsaOp, context: bool, db: &Arc<PerfDatabase>) -> Self {
        DsaEval {
            name: op.name.clone(),
            op: op.clone(),
            context,
            dims: DsaDims::of(&op.architecture),
            key: [
                op.architecture.clone(),
                op.fmha_quant_mode.as_str().to_string(),
                op.kv_cache_dtype.as_str().to_string(),
                op.gemm_quant_mode.as_str().to_string(),
            ],
            db: db.clone(),
            quant_transfer: false,
        }
    }

    /// Lets the empirical estimate (HYBRID, EMPIRICAL) price a module whose GEMM quant mode has
    /// no slice from a measured slice of another GEMM quant mode with the same architecture,
    /// FMHA and KV dtypes: the GEMM transfer ladder of spec 20 §1.3 applied to the module's
    /// GEMM key. First a slice of the same (bytes, compute) profile, read with the op's own SOL
    /// (`xquant`: `fp8` ← `fp8_block`); else the nearest other profile by (|Δcompute|, |Δbytes|),
    /// read with its own SOL and rescaled by the GEMM utilisation levels (`xprofile`: `nvfp4` ←
    /// `fp8_block`). The reference has no such rung (its DSA estimate raises
    /// `EmpiricalNotImplementedError`), so only the calibrated serving estimate turns it on.
    pub(crate) fn allow_quant_transfer(&mut self) {
        self.quant_transfer = true;
    }

    /// The sibling slice of [`DsaEval::allow_quant_transfer`] for one part and bucket, if any;
    /// the `xquant` and `xprofile` rungs only when `transfers` enables them.
    fn sibling(&self, r: &DsaRates, part: DsaPart, bucket: DsaBucket, transfers: TransferKinds) -> Option<Sibling<'_>> {
        let table = self.table(part).ok()?;
        let query = self.op.gemm_quant_mode;
        let profile = |g: GemmQuant| (g.bytes_per_elem(), g.compute_multiplier());
        let own = profile(query);
        let candidates: Vec<(GemmQuant, &Grid)> = table
            .slices()
            .into_iter()
            .filter(|(k, _)| k[..3] == self.key[..3] && k[3] != self.key[3])
            .filter_map(|(k, slice)| Some((GemmQuant::parse(&k[3])?, slice.grid(bucket)?)))
            .collect();
        let same_profile = candidates.iter().find(|(g, _)| profile(*g) == own);
        if let Some((_, grid)) = same_profile.filter(|_| transfers.allows(ProvenanceTier::Xquant)) {
            return Some(Sibling { grid, rates: *r, util_scale: 1.0, tier: ProvenanceTier::Xquant });
        }
        let mut others: Vec<(f64, f64, GemmQuant, &Grid)> = candidates
            .into_iter()
            .map(|(g, grid)| {
                let (bytes, compute) = profile(g);
                ((compute - own.1).abs(), (bytes - own.0).abs(), g, grid)
            })
            .collect();
        others.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.total_cmp(&b.1)));
        if !transfers.allows(ProvenanceTier::Xprofile) {
            return None;
        }
        others.into_iter().find_map(|(_, _, g, grid)| {
            let f_gemm = self.db.system.flops(g.as_str(), g.flops_key()).ok()?;
            Some(Sibling {
                grid,
                rates: DsaRates { f_gemm, mu_gemm: g.bytes_per_elem(), ..*r },
                util_scale: gemm_util_level(query) / gemm_util_level(g),
                tier: ProvenanceTier::Xprofile,
            })
        })
    }

    /// Resolves the three FLOPS (gemm quant, fp8, attention) and the element widths.
    fn rates(&self) -> Result<DsaRates> {
        let o = &self.op;
        let sys = &self.db.system;
        let f_gemm = sys.flops(o.gemm_quant_mode.as_str(), o.gemm_quant_mode.flops_key())?;
        let f_fp8 = sys.flops("fp8", FlopsKey::Fp8)?;
        let f_attn = if self.context {
            sys.flops(o.fmha_quant_mode.as_str(), o.fmha_quant_mode.flops_key())?
        } else {
            sys.flops("bfloat16", FlopsKey::Bfloat16)?
        };
        Ok(DsaRates {
            f_gemm,
            f_fp8,
            f_attn,
            mem_bw: sys.gpu.mem_bw,
            mu_gemm: o.gemm_quant_mode.bytes_per_elem(),
            mu_kv: o.kv_cache_dtype.bytes_per_elem(),
            mu_fmha: o.fmha_quant_mode.bytes_per_elem(),
        })
    }

    fn heads(&self) -> u64 {
        u64::from(self.op.num_heads)
    }

    /// The op's roofline at a runtime shape for one part.
    fn roofline(&self, r: &DsaRates, b: u64, s: u64, p: u64, part: DsaPart) -> Roofline {
        if self.context {
            context_roofline(&self.dims, r, b, s, p, self.heads(), part == DsaPart::Skip)
        } else {
            generation_roofline(&self.dims, r, b, s, self.heads())
        }
    }

    fn table(&self, part: DsaPart) -> Result<&Arc<DsaModuleTable>> {
        self.db.dsa().module(&self.db.resolver, self.context, part)
    }

    /// The missing-key error (the reference's text), with what the table does hold after it.
    fn missing(&self, table: &DsaModuleTable) -> AicError {
        let o = &self.op;
        let key = format!(
            "DsaKey {{ architecture: {:?}, fmha_quant: {:?}, kv_quant: {:?}, gemm_quant: {:?} }}",
            o.architecture,
            o.fmha_quant_mode.as_str(),
            o.kv_cache_dtype.as_str(),
            o.gemm_quant_mode.as_str()
        );
        let hint = self.missing_hint(table);
        if self.context {
            AicError::perf(format!("context DSA module data missing for {key}{hint}"))
        } else {
            AicError::perf(format!("generation DSA module data missing for {key} at {}{hint}", self.db.label()))
        }
    }

    /// What the table holds instead of the op's key: the measured (fmha, kv, gemm) dtypes of
    /// its architecture, else the architectures it has rows for; and, when only the GEMM quant
    /// mode differs, the rule that reads such a module from a sibling slice.
    fn missing_hint(&self, table: &DsaModuleTable) -> String {
        let slices = table.slices();
        let same_arch: Vec<&DsaKey> = slices.iter().map(|(k, _)| *k).filter(|k| k[0] == self.key[0]).collect();
        if same_arch.is_empty() {
            let mut archs: Vec<&str> = slices.iter().map(|(k, _)| k[0].as_str()).collect();
            archs.dedup();
            return format!("; the table has rows for {} only", if archs.is_empty() { "no architecture".to_string() } else { archs.join(", ") });
        }
        let held: Vec<String> =
            same_arch.iter().map(|k| format!("(fmha {}, kv {}, gemm {})", k[1], k[2], k[3])).collect();
        let mut hint = format!("; measured for {}: {}", self.key[0], held.join(", "));
        if same_arch.iter().any(|k| k[1..3] == self.key[1..3]) {
            hint.push_str(
                "; only the GEMM quant mode differs: compile with a measured one, or use the calibrated \
                 estimate (`--calibrated`; `AicEngine.from_spec(..., quant_transfer=True)` for an engine), \
                 which reads the module from a sibling GEMM quant's slice",
            );
        }
        hint
    }

    /// The grid of one part for a bucket request, or why there is none.
    fn grid(&self, part: DsaPart, bucket: DsaBucket) -> Result<&Grid> {
        let table = self.table(part)?;
        let slice = table.slice(&self.key).ok_or_else(|| self.missing(table))?;
        slice.grid(bucket).ok_or_else(|| self.missing(table))
    }

    /// The table answer of one part (spec 32 §5.4 steps 2–6).
    fn silicon(&self, r: &DsaRates, part: DsaPart, bucket: DsaBucket, b: u64, s: u64, p: u64) -> Result<OpValue> {
        let grid = self.grid(part, bucket)?;
        let n = self.heads() as f64;
        let (d, skip) = (&self.dims, part == DsaPart::Skip);
        let v = if self.context {
            let q = [n, p as f64, s as f64, b as f64];
            let sol = |c: &[f64]| context_roofline(d, r, count(c[3]), count(c[2]), count(c[1]), count(c[0]), skip).ms();
            grid.lookup(&q, &sol)
                .map_err(|m| AicError::perf(anchor_message(&["num_heads", "prefix", "seq_len", "batch"], &q, m)))?
        } else {
            let q = [n, b as f64, s as f64];
            let sol = |c: &[f64]| generation_roofline(d, r, count(c[1]), count(c[2]), count(c[0])).ms();
            grid.lookup(&q, &sol)
                .map_err(|m| AicError::perf(anchor_message(&["num_heads", "batch", "seq_len"], &q, m)))?
        };
        Ok(OpValue::new(v.latency, v.energy, Source::Silicon))
    }

    /// The utilisation estimate of one part (spec 32 §5.6), from a sibling slice when the op's
    /// own slice is missing and [`DsaEval::allow_quant_transfer`] is on.
    #[allow(clippy::too_many_arguments)]
    fn empirical(
        &self,
        r: &DsaRates,
        part: DsaPart,
        bucket: DsaBucket,
        b: u64,
        s: u64,
        p: u64,
        transfers: TransferKinds,
    ) -> Result<OpValue> {
        let latency_sol = self.roofline(r, b, s, p, part).ms();
        // (no error text built for a miss: the empirical estimate handles it)
        let own = self.table(part).ok().and_then(|t| t.slice(&self.key)).and_then(|slice| slice.grid(bucket));
        if own.is_none() && self.quant_transfer {
            if let Some(sib) = self.sibling(r, part, bucket, transfers) {
                let util = self.utilisation(Some(sib.grid), &sib.rates, part, b, s, p)?;
                return Ok(estimate(latency_sol / (util * sib.util_scale), sib.tier));
            }
        }
        let util = self.utilisation(own, r, part, b, s, p)?;
        Ok(estimate(latency_sol / util, ProvenanceTier::Empirical))
    }

    /// The utilisation `SOL / latency` at the query read from `grid`'s samples with the rates
    /// `r` (spec 32 §5.6 steps 1–6).
    fn utilisation(&self, grid: Option<&Grid>, r: &DsaRates, part: DsaPart, b: u64, s: u64, p: u64) -> Result<f64> {
        let n = self.heads();
        let (d, skip) = (&self.dims, part == DsaPart::Skip);
        let exact = grid.is_some_and(|g| g.points().any(|(c, _)| c[0] == n));
        let mut coords: Vec<u64> = Vec::new();
        let mut lats: Vec<f64> = Vec::new();
        if self.context {
            let has_prefix = grid.is_some() || self.op.architecture == GLM_ARCH;
            let pk: BTreeSet<u64> = match grid {
                Some(g) => g.points().filter(|(c, _)| !exact || c[0] == n).map(|(c, _)| c[1]).collect(),
                None => BTreeSet::new(),
            };
            let interp = pk.len() >= 2 && pk.first().is_some_and(|&lo| lo <= p) && pk.last().is_some_and(|&hi| p <= hi);
            let points = grid.map(|g| g.points().collect::<Vec<_>>()).unwrap_or_default();
            let (query, sol): (Vec<f64>, SolFn<'_>) = if has_prefix && (interp || !pk.contains(&0)) {
                if exact {
                    for (c, l) in points.iter().filter(|(c, _)| c[0] == n) {
                        coords.extend_from_slice(&c[1..]);
                        lats.push(l.latency);
                    }
                    let sol = move |c: &[f64]| context_roofline(d, r, count(c[2]), count(c[1]), count(c[0]), n, skip).ms();
                    (vec![p as f64, s as f64, b as f64], Box::new(sol))
                } else {
                    for (c, l) in &points {
                        coords.extend_from_slice(c);
                        lats.push(l.latency);
                    }
                    let sol = move |c: &[f64]| {
                        context_roofline(d, r, count(c[3]), count(c[2]), count(c[1]), count(c[0]), skip).ms()
                    };
                    (vec![n as f64, p as f64, s as f64, b as f64], Box::new(sol))
                }
            } else if has_prefix {
                if exact {
                    for (c, l) in points.iter().filter(|(c, _)| c[0] == n && c[1] == 0) {
                        coords.extend_from_slice(&c[2..]);
                        lats.push(l.latency);
                    }
                    let sol = move |c: &[f64]| context_roofline(d, r, count(c[1]), count(c[0]), 0, n, skip).ms();
                    (vec![(s + p) as f64, b as f64], Box::new(sol))
                } else {
                    for (c, l) in points.iter().filter(|(c, _)| c[1] == 0) {
                        coords.extend_from_slice(&[c[0], c[2], c[3]]);
                        lats.push(l.latency);
                    }
                    let sol =
                        move |c: &[f64]| context_roofline(d, r, count(c[2]), count(c[1]), 0, count(c[0]), skip).ms();
                    (vec![n as f64, (s + p) as f64, b as f64], Box::new(sol))
                }
            } else {
                let sol = |_: &[f64]| 0.0;
                (vec![n as f64, (s + p) as f64, b as f64], Box::new(sol))
            };
            let dims = query.len();
            let samples = coords.chunks_exact(dims).zip(lats.iter().copied());
            util_at(samples, &*sol, &query).ok_or_else(|| not_implemented(&query))
        } else {
            let Some(g) = grid else {
                return Err(not_implemented(&[n as f64, b as f64, s as f64]));
            };
            if exact {
                // samples (b, S) of the head, ordered by S then b
                let mut pts: Vec<([u64; 2], f64)> =
                    g.points().filter(|(c, _)| c[0] == n).map(|(c, l)| ([c[1], c[2]], l.latency)).collect();
                pts.sort_by_key(|(c, _)| (c[1], c[0]));
                for (c, l) in &pts {
                    coords.extend_from_slice(c);
                    lats.push(*l);
                }
                let sol = move |c: &[f64]| generation_roofline(d, r, count(c[0]), count(c[1]), n).ms();
                let query = [b as f64, s as f64];
                util_at(coords.chunks_exact(2).zip(lats.iter().copied()), &sol, &query)
                    .ok_or_else(|| not_implemented(&query))
            } else {
                // samples (heads, b, S) of every head, ordered by heads, S, b
                let mut pts: Vec<([u64; 3], f64)> = g.points().map(|(c, l)| ([c[0], c[1], c[2]], l.latency)).collect();
                pts.sort_by_key(|(c, _)| (c[0], c[2], c[1]));
                for (c, l) in &pts {
                    coords.extend_from_slice(c);
                    lats.push(*l);
                }
                let sol = move |c: &[f64]| generation_roofline(d, r, count(c[1]), count(c[2]), count(c[0])).ms();
                let query = [n as f64, b as f64, s as f64];
                util_at(coords.chunks_exact(3).zip(lats.iter().copied()), &sol, &query)
                    .ok_or_else(|| not_implemented(&query))
            }
        }
    }

    /// One part in a non-SOL database mode.
    #[allow(clippy::too_many_arguments)]
    fn part(&self, shape: &Shape, r: &DsaRates, part: DsaPart, bucket: DsaBucket, b: u64, s: u64, p: u64) -> Result<OpValue> {
        by_mode(
            shape.mode,
            || Ok(OpValue::new(self.roofline(r, b, s, p, part).ms(), 0.0, Source::Sol)),
            || self.silicon(r, part, bucket, b, s, p),
            || self.empirical(r, part, bucket, b, s, p, shape.transfers),
        )
    }

    /// The effective `full_frac` outside the SOL modes: the skip table is probed first and a
    /// table without any skip row degrades the op to `w = 1` (spec 32 §5.5).
    fn effective_frac(&self) -> Result<f64> {
        let w = self.op.full_frac;
        if w >= 1.0 {
            return Ok(w);
        }
        match self.table(DsaPart::Skip) {
            Err(e) if is_no_dsa_rows(&e) => Ok(1.0),
            Err(e) => Err(e),
            Ok(_) => Ok(w),
        }
    }

    /// Latency (and energy) at a runtime shape, its own scale factor included.
    pub fn eval(&self, shape: &Shape) -> Result<OpValue> {
        if self.context && self.op.cp_size > 1 {
            return self.eval_cp(shape);
        }
        let r = self.rates()?;
        let (b, s, p) = (shape.batch, shape.s, if self.context { shape.prefix } else { 0 });
        if shape.is_sol() {
            return Ok(self.sol_split_at(&r, b, s, p).value(Source::Sol));
        }
        let w = self.effective_frac()?;
        let full = self.part(shape, &r, DsaPart::Full, DsaBucket::Trtllm, b, s, p)?;
        let v = if w >= 1.0 {
            full
        } else {
            let skip = self.part(shape, &r, DsaPart::Skip, DsaBucket::Trtllm, b, s, p)?;
            OpValue::new(
                w * full.latency + (1.0 - w) * skip.latency,
                w * full.energy + (1.0 - w) * skip.energy,
                full.source.combine(skip.source),
            )
        };
        Ok(v.finish(self.op.scale_factor))
    }

    /// The amortised SOL with its parts (unscaled).
    fn sol_split_at(&self, r: &DsaRates, b: u64, s: u64, p: u64) -> SolSplit {
        let w = self.op.full_frac;
        let full = SolSplit::leaf(self.roofline(r, b, s, p, DsaPart::Full));
        let v = if w >= 1.0 {
            full
        } else {
            let skip = SolSplit::leaf(self.roofline(r, b, s, p, DsaPart::Skip));
            full.scale(w) + skip.scale(1.0 - w)
        };
        v.finish(self.op.scale_factor)
    }

    /// The SOL-mode answer with its parts; refused for a context-parallel context op.
    pub(crate) fn sol_split(&self, shape: &Shape) -> Result<SolSplit> {
        if self.context && self.op.cp_size > 1 {
            return Err(AicError::config(format!(
                "DSA context SOL_FULL decomposition is not supported for cp_size={} because the CP sparse \
                 MQA/top-k deltas are latency-only",
                self.op.cp_size
            )));
        }
        let r = self.rates()?;
        let p = if self.context { shape.prefix } else { 0 };
        Ok(self.sol_split_at(&r, shape.batch, shape.s, p))
    }

    /// The context-parallel composition (spec 32 §5.7): tag `estimated`, energy 0, no clamp.
    fn eval_cp(&self, shape: &Shape) -> Result<OpValue> {
        let w = if shape.is_sol() { self.op.full_frac } else { self.effective_frac()? };
        let full = self.cp_pass(shape, DsaPart::Full)?;
        let lat = if w >= 1.0 { full } else { w * full + (1.0 - w) * self.cp_pass(shape, DsaPart::Skip)? };
        Ok(OpValue::new(lat, 0.0, Source::Estimated))
    }

    /// One (full or skip) context-parallel pass, scaled.
    fn cp_pass(&self, shape: &Shape, part: DsaPart) -> Result<f64> {
        let skip = part == DsaPart::Skip;
        let cp = self.op.cp_size;
        let n = self.heads();
        let prefix = if self.op.architecture == "DeepseekV32ForCausalLM" { "dsv32" } else { "glm5" };
        let sparse = if skip {
            None
        } else {
            let tables = self.db.dsa().sparse(&self.db.resolver, prefix)?;
            let kernels = [SparseKernel::Mqa, SparseKernel::TopkLast, SparseKernel::TopkFlat];
            let empty: Vec<String> =
                kernels.iter().filter(|k| tables.table(**k, n).is_empty()).map(|k| format!("'{}'", k.as_str())).collect();
            if !empty.is_empty() {
                return Err(AicError::perf(format!(
                    "DSA CP modeling needs sparse tables [{}] for {} (num_heads={n}); collect \
                     {prefix}_mqa_logits/{prefix}_topk first.",
                    empty.join(", "),
                    self.op.architecture
                )));
            }
            Some(tables)
        };
        let (b, s, p, mode) = (shape.batch, shape.s, shape.prefix, shape.mode);
        let per = s.div_ceil(u64::from(cp)).max(1);
        let r = self.rates()?;
        let base = if mode == DatabaseMode::Sol {
            self.roofline(&r, b, per, p, part).ms()
        } else {
            self.part(shape, &r, part, DsaBucket::FlashmlaKv, b, per, p)?.latency
        };
        let mut lat = base;
        if let Some(tables) = sparse {
            let mqa = tables.table(SparseKernel::Mqa, n);
            let mf = sparse_lookup(mqa, b, s, p)?;
            let mp = sparse_lookup(mqa, b, per, p)?;
            let tl = sparse_lookup(tables.table(SparseKernel::TopkLast, n), b, s, p)?;
            let tf = sparse_lookup(tables.table(SparseKernel::TopkFlat, n), b, per, p)?;
            if let (Some(mf), Some(mp), Some(tl), Some(tf)) = (mf, mp, tl, tf) {
                let c = f64::from(cp);
                lat += (mf / c - mp) + (tl / c - tf);
            }
        }
        let tokens = (b * s) as f64;
        let gather = |width: u128| -> Result<f64> {
            Ok(nccl(&self.db, mode, shape.transfers, CommQuant::Half, "all_gather", u64::from(cp), tokens * width as f64)?.latency)
        };
        let ag_k = if skip { 0.0 } else { gather(self.dims.ihd)? };
        let ag_l = gather(self.dims.kv_lora + self.dims.qk_rope)?;
        lat += ag_k + ag_l;
        Ok(lat * self.op.scale_factor)
    }
}

/// A sparse sub-kernel latency at `(batch b, isl i, step st)` (spec 32 §5.7 step 4): nearest
/// batch, nearest isl (an isl beyond the collected grid is an error), linear in step.
pub(crate) fn sparse_lookup(table: &SparseKernelTable, b: u64, i: u64, st: u64) -> Result<Option<f64>> {
    let Some(isls) = table.batch_slice(b) else {
        return Ok(None);
    };
    let Some((&max_isl, _)) = isls.iter().next_back() else {
        return Ok(None);
    };
    if i > max_isl {
        return Err(AicError::perf(format!(
            "DSA CP: isl={i} exceeds the collected sparse-kernel grid (max isl={max_isl}); mqa/topk scale \
             super-linearly with isl, so clamping the isl axis would silently under-estimate. Re-collect with \
             AIC_CHUNKED_PREFILL_SIZE >= {i} (docs/CONTEXT_PARALLEL_DSA_MODELING.md §9.1)."
        )));
    }
    let Some(steps) = crate::data::tables::nearest_entry(isls, i) else {
        return Ok(None);
    };
    if let Some(v) = steps.get(&st) {
        return Ok(Some(*v));
    }
    let lo = steps.range(..=st).next_back().or_else(|| steps.iter().next());
    let hi = steps.range(st..).next().or_else(|| steps.iter().next_back());
    let (Some((&s0, &v0)), Some((&s1, &v1))) = (lo, hi) else {
        return Ok(None);
    };
    if s0 == s1 {
        return Ok(Some(v0));
    }
    let t = (st as f64 - s0 as f64) / (s1 as f64 - s0 as f64);
    Ok(Some(v0 + (v1 - v0) * t))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Spec 32 §5.3 S1/S2 intermediates: exact integer counts.
    #[test]
    fn sol_integer_terms() {
        let d = DsaDims::of(GLM_ARCH);
        assert_eq!(d.weight_elems(8), 42270720);
        assert_eq!(d.gemm_ops(1024, 8), 90328530944);
        assert_eq!(d.gemm_ops(4 * 8192, 8), 2890512990208);
        assert_eq!(d.e_idx(), 132);
        assert_eq!(DsaDims::of(GLM_ARCH).p(), 2752);
        assert_eq!(DsaDims::of("DeepseekV32ForCausalLM").p(), 2240);
        assert_eq!(DsaDims::of("anything else"), DsaDims::of("DeepseekV32ForCausalLM"));
        assert_eq!(DsaDims::of("DeepseekV32ForCausalLM").weight_elems(16), 48496640);
    }

    #[test]
    fn sparse_lookup_of_an_empty_table_is_none() {
        let t = SparseKernelTable::default();
        assert!(t.is_empty());
        assert_eq!(sparse_lookup(&t, 1, 1024, 0).unwrap(), None);
    }
}
