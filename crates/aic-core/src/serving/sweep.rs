//! The deployment sweep (`cli_default`, spec 50 §9): for a GPU budget, every parallel layout ×
//! batch × context budget (agg) and every prefill × decode worker pair with its worker counts
//! (disagg), filtered by the latency targets, then the Pareto front and the picks.
//!
//! Each point is one of the closed forms of [`super::agg`] / [`super::static_mode`]; points do
//! not depend on the TPOT constraint, so each is evaluated once per layout and replayed for
//! the 75 constraints. Layouts run in parallel (rayon); results are collected in layout order,
//! so the output does not depend on the thread count.

use std::collections::HashMap;
use std::path::Path;

use rayon::prelude::*;
use serde::Deserialize;
use serde_json::Value;

use super::error::Result;
use crate::error::AicError;
use crate::spec::Backend;

use super::agg::{agg_eval, AggParams};
use super::checks;
use super::disagg::{compose_degraded, decode_worker_scaled, prefill_worker_scaled, DisaggFactors, RoleParams};
use super::error::ServingError;
use super::numeric::py_floordiv;
use super::request::WorkerInput;
use super::row::{Row, Val};
use super::worker::Worker;

/// One parallel layout of an experiment role: its compiled worker, or why it failed to build.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct LayoutInput {
    /// The compiled worker.
    #[serde(default)]
    pub worker: Option<WorkerInput>,
    /// The compile error, when the layout could not be built.
    #[serde(default)]
    pub error: Option<String>,
}

/// A `cli_default` request after the front end compiled every layout (spec 50 §9).
#[derive(Debug, Clone, Deserialize)]
pub struct SweepRequest {
    /// GPU budget.
    pub total_gpus: u32,
    /// Input tokens.
    pub isl: u32,
    /// Output tokens.
    pub osl: u32,
    /// Cached prefix tokens.
    #[serde(default)]
    pub prefix: u32,
    /// TTFT target, ms.
    pub ttft: f64,
    /// TPOT target, ms (used by the picks only).
    pub tpot: f64,
    /// Request-latency target, ms (replaces the TPOT grid by (ttft, tpot) pairs).
    #[serde(default)]
    pub request_latency: Option<f64>,
    /// MTP acceptance.
    #[serde(default)]
    pub nextn_accepted: Option<f64>,
    /// KV-budget fraction override.
    #[serde(default)]
    pub free_gpu_memory_fraction: Option<f64>,
    /// KV length per request.
    #[serde(default)]
    pub max_seq_len: Option<u64>,
    /// Best configs kept per experiment.
    #[serde(default = "default_top_n")]
    pub top_n: usize,
    /// Filter candidates by the TPOT / request-latency target before picking.
    #[serde(default)]
    pub strict_sla: bool,
    /// Agg layouts (empty: no agg experiment).
    #[serde(default)]
    pub agg: Vec<LayoutInput>,
    /// Disagg prefill layouts (empty: no disagg experiment).
    #[serde(default)]
    pub prefill: Vec<LayoutInput>,
    /// Disagg decode layouts.
    #[serde(default)]
    pub decode: Vec<LayoutInput>,
    /// The experiments to run, `"agg"` and / or `"disagg"` (spec 51 §2); default: agg when
    /// `agg` has layouts, disagg when `prefill` and `decode` have layouts and the budget is at
    /// least 2 GPUs.
    #[serde(default)]
    pub modes: Option<Vec<String>>,
    /// The chunked-prefill context-token grid for agg points (spec 51 §6.7).
    #[serde(default)]
    pub enable_chunked_prefill: bool,
    /// The disagg search knobs (spec 51 §5.2).
    #[serde(default)]
    pub disagg_options: DisaggOptions,
    /// A load to carry: picks by the fewest GPUs instead of throughput (spec 51 §4.3).
    #[serde(default)]
    pub load_target: Option<LoadTarget>,
    /// Also answer the best configs and fronts with the inclusive TPOT (spec 51 §6.8).
    #[serde(default)]
    pub inclusive_tpot: bool,
}

fn default_top_n() -> usize {
    5
}

/// The disagg search knobs of an experiment (spec 51 §5.2); every default is `cli default`'s.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DisaggOptions {
    /// Allowed replica sizes `Pg·Wp + Dg·Wd` (`None`: 1, 2, 4, 8, 16, 24, …, 128; empty: every
    /// size up to the cap).
    pub num_gpu_per_replica: Option<Vec<u32>>,
    /// Cap on the replica size (`None`: 128); the effective cap is `min(total_gpus, cap)`.
    pub max_gpu_per_replica: Option<u32>,
    /// Prefill worker counts scanned: 1 … this.
    pub max_prefill_workers: u32,
    /// Decode worker counts scanned: 1 … this.
    pub max_decode_workers: u32,
    /// Prefill batch sizes: 1 … this.
    pub prefill_max_batch_size: i64,
    /// Decode batch sizes: the §9.1 schedule up to this (above 512: the schedule plus this).
    pub decode_max_batch_size: i64,
    /// Multiplier on the static prefill latency.
    pub prefill_latency_correction: f64,
    /// Multiplier on the static decode latency.
    pub decode_latency_correction: f64,
    /// Prefill degradation of the rate match.
    pub rate_match_prefill_degradation: f64,
    /// Decode degradation of the rate match.
    pub rate_match_decode_degradation: f64,
    /// The TTFT factor (`factor·ttft < target`, row ttft = `factor·P.ttft`).
    pub autoscale_ttft_correction_factor: f64,
}

impl Default for DisaggOptions {
    fn default() -> DisaggOptions {
        let f = DisaggFactors::default();
        DisaggOptions {
            num_gpu_per_replica: None,
            max_gpu_per_replica: None,
            max_prefill_workers: 32,
            max_decode_workers: 32,
            prefill_max_batch_size: 1,
            decode_max_batch_size: 512,
            prefill_latency_correction: f.prefill_latency_correction,
            decode_latency_correction: f.decode_latency_correction,
            rate_match_prefill_degradation: f.prefill_degradation,
            rate_match_decode_degradation: f.decode_degradation,
            autoscale_ttft_correction_factor: f.ttft_factor,
        }
    }
}

impl DisaggOptions {
    /// The coupling factors, each checked finite and `> 0` (spec 51 §5.2: an experiment with
    /// another value fails with this message).
    pub fn factors(&self) -> std::result::Result<DisaggFactors, String> {
        for (name, v) in [
            ("prefill_latency_correction", self.prefill_latency_correction),
            ("decode_latency_correction", self.decode_latency_correction),
            ("rate_match_prefill_degradation", self.rate_match_prefill_degradation),
            ("rate_match_decode_degradation", self.rate_match_decode_degradation),
            ("autoscale_ttft_correction_factor", self.autoscale_ttft_correction_factor),
        ] {
            if !(v.is_finite() && v > 0.0) {
                return Err(format!("{name} must be a positive finite number, got {}.", py_float_text(v)));
            }
        }
        Ok(DisaggFactors {
            prefill_latency_correction: self.prefill_latency_correction,
            decode_latency_correction: self.decode_latency_correction,
            prefill_degradation: self.rate_match_prefill_degradation,
            decode_degradation: self.rate_match_decode_degradation,
            ttft_factor: self.autoscale_ttft_correction_factor,
        })
    }

    /// The allowed replica sizes as a lookup table indexed by GPUs (§9.1, 51 §5.2).
    fn allowed_replicas(&self, total_gpus: u32) -> Vec<bool> {
        let cap = total_gpus.min(self.max_gpu_per_replica.unwrap_or(128)) as usize;
        let mut v = vec![false; cap + 1];
        match &self.num_gpu_per_replica {
            None => {
                for g in [1_usize, 2, 4].into_iter().chain((8..=128).step_by(8)) {
                    if g <= cap {
                        v[g] = true;
                    }
                }
            }
            Some(list) if list.is_empty() => v.iter_mut().skip(1).for_each(|x| *x = true),
            Some(list) => {
                for &g in list {
                    if (g as usize) <= cap {
                        v[g as usize] = true;
                    }
                }
            }
        }
        v
    }

    /// Prefill batch sizes (51 §5.2: `1 … max(pmb, 1)`).
    fn prefill_batches(&self) -> Vec<u32> {
        (1..=self.prefill_max_batch_size.clamp(1, i64::from(u32::MAX)) as u32).collect()
    }

    /// Decode batch sizes (51 §5.2): the §9.1 schedule up to the cap; above 512 the whole
    /// schedule plus the cap; a cap below 1 is 1.
    fn decode_batches(&self) -> Vec<u32> {
        let cap = self.decode_max_batch_size.max(1);
        let mut v: Vec<u32> = decode_batches().into_iter().filter(|&b| i64::from(b) <= cap).collect();
        if cap > 512 {
            v.push(cap.min(i64::from(u32::MAX)) as u32);
        }
        v
    }
}

/// Python's `repr` of a float for messages (`1.0`, `0.5`, `nan`, `inf`).
fn py_float_text(v: f64) -> String {
    if v.is_nan() {
        "nan".into()
    } else if v.is_infinite() {
        if v > 0.0 { "inf".into() } else { "-inf".into() }
    } else if v == v.trunc() && v.abs() < 1e16 {
        format!("{v:.1}")
    } else {
        format!("{v}")
    }
}

/// The load an experiment must carry (spec 51 §4): a request rate or a number of requests in
/// flight (exactly one).
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LoadTarget {
    /// Requests per second.
    #[serde(default)]
    pub request_rate: Option<f64>,
    /// Requests in flight.
    #[serde(default)]
    pub concurrency: Option<f64>,
}

/// Agg batch sizes (§9.1).
pub fn agg_batches() -> Vec<u32> {
    let mut v: Vec<u32> = (1..=15).collect();
    v.extend((16..=32).step_by(4));
    v.extend((40..=64).step_by(8));
    v.extend((80..=256).step_by(16));
    v.extend((288..=512).step_by(32));
    v
}

/// Disagg decode batch sizes (§9.1).
pub fn decode_batches() -> Vec<u32> {
    let mut v: Vec<u32> = (1..=15).collect();
    v.extend((16..=32).step_by(2));
    v.extend((36..=128).step_by(4));
    v.extend((136..=512).step_by(8));
    v
}

/// Agg context-token budgets for a prompt length (§9.1).
pub fn ctx_tokens_list(isl: u32) -> Vec<u32> {
    let isl64 = u64::from(isl.max(1));
    let cmax = 8192_u64.max(2 * isl64);
    let s1 = isl64.max(512);
    let s2 = (1024_u64.max(s1).max(cmax / 8) as f64 / isl64 as f64).ceil() as u64 * isl64;
    let mut out = Vec::new();
    let mut v = 0_u64;
    loop {
        v += if v < 8192 { s1 } else { s2 };
        if v > cmax {
            break;
        }
        out.push(v);
    }
    for extra in [isl64, 2 * isl64] {
        if !out.contains(&extra) {
            out.push(extra);
        }
    }
    out.sort_unstable();
    out.into_iter().map(|x| x as u32).collect()
}

/// Agg context-token budgets with chunked prefill (spec 51 §6.7): 512-token steps up to
/// 8192, then `max(1024, Cmax // 8)`, no snapping to multiples of `isl`, plus `isl` and `2·isl`.
pub fn ctx_tokens_list_chunked(isl: u32) -> Vec<u32> {
    let isl64 = u64::from(isl.max(1));
    let cmax = 8192_u64.max(2 * isl64);
    let s1 = 512_u64;
    let s2 = 1024_u64.max(s1).max(cmax / 8);
    let mut out = Vec::new();
    let mut v = 0_u64;
    loop {
        v += if v < 8192 { s1 } else { s2 };
        if v > cmax {
            break;
        }
        out.push(v);
    }
    for extra in [isl64, 2 * isl64] {
        if !out.contains(&extra) {
            out.push(extra);
        }
    }
    out.sort_unstable();
    out.into_iter().map(|x| x as u32).collect()
}

/// The `(ttft, tpot)` constraints (§9.1): the TPOT grid at the user's TTFT, or the
/// request-latency pairs.
pub fn constraints(ttft: f64, osl: u32, request_latency: Option<f64>) -> Vec<(f64, f64)> {
    match request_latency.filter(|r| *r > 0.0) {
        None => {
            let mut grid: Vec<f64> = (1..=19).map(f64::from).collect();
            grid.extend((20..=295).step_by(5).map(f64::from));
            grid.into_iter().map(|t| (ttft, t)).collect()
        }
        Some(r) => {
            let mut cands: Vec<f64> =
                vec![300.0, 400.0, 500.0, 600.0, 800.0, 1000.0, 1200.0, 1400.0, 1600.0, 2000.0, 3000.0, 5000.0, 8000.0];
            for f in [0.1, 0.2, 0.3, 0.5, 0.7] {
                let v = f * r;
                if !(300.0..=8000.0).contains(&v) {
                    cands.push(v);
                }
            }
            cands.push(ttft);
            let mut kept: Vec<f64> = cands.into_iter().filter(|c| *c < r).collect();
            kept.sort_by(|a, b| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal));
            kept.dedup();
            kept.into_iter().map(|c| (c, (r - c) / (f64::from(osl) - 1.0))).collect()
        }
    }
}

/// Outcome of one evaluated point.
#[derive(Debug, Clone)]
enum Point {
    Evaluated,
    Miss,
    OutOfMemory,
}

fn classify(e: ServingError) -> Result<Point> {
    if e.is_perf_data_missing() {
        Ok(Point::Miss)
    } else {
        Err(e)
    }
}

/// Sorts rows by one column, descending, keeping ties in input order.
fn sort_desc(rows: &mut [Row], key: &str) {
    rows.sort_by(|a, b| b.f(key).partial_cmp(&a.f(key)).unwrap_or(std::cmp::Ordering::Equal));
}

fn finish_row(mut r: Row) -> Row {
    r.set("_moe_comm_fallbacks", Val::EmptyList);
    r
}

/// One evaluated agg point: its rounded row and the unrounded values the filters read.
#[derive(Debug)]
struct AggPoint {
    rounded: Row,
    ttft: f64,
    tpot: f64,
    seq_s_rounded: f64,
}

/// What one layout's sweep gave: its kept rows, and whether it ran out of memory at every
/// point it tried (the layout does not fit at all).
#[derive(Debug, Default)]
struct LayoutRows {
    rows: Vec<Row>,
    out_of_memory: bool,
}

/// Agg sweep of one layout over every constraint (§9.3). Returns the kept rows (each point
/// once: equal points give equal rows, different points differ in `bs` or `ctx_tokens`).
fn agg_layout(w: &Worker, req: &SweepRequest, cons: &[(f64, f64)]) -> Result<LayoutRows> {
    let p_iter = if w.nextn() > 0 { 1.0 + req.nextn_accepted.unwrap_or(0.0) } else { 1.0 };
    let speculative = p_iter > 1.0;
    let batches = agg_batches();
    let ctxs = if req.enable_chunked_prefill { ctx_tokens_list_chunked(req.isl) } else { ctx_tokens_list(req.isl) };
    let mut memo: HashMap<(u32, u32), Option<Point>> = HashMap::new();
    let mut points: Vec<AggPoint> = Vec::new();
    let mut index: HashMap<(u32, u32), usize> = HashMap::new();
    let (isl, osl) = (f64::from(req.isl), f64::from(req.osl));
    let mut out = Vec::new();
    let mut emitted: std::collections::HashSet<(u32, u32)> = std::collections::HashSet::new();
    for &(ttft_c, tau) in cons {
        let mut kept: Vec<usize> = Vec::new();
        let mut seen_q: Vec<f64> = Vec::new();
        for &b in &batches {
            for &c in &ctxs {
                let k = (f64::from(c) / isl).ceil();
                let bf = f64::from(b);
                if bf - k < 0.0 || (b > 1 && bf - k < 1.0) {
                    break;
                }
                if !speculative {
                    let bs = isl * bf / f64::from(c) / osl;
                    if bs > 1.0 {
                        let q = py_floordiv(bf, bs);
                        if q > 1.0 && seen_q.contains(&q) {
                            continue;
                        }
                        seen_q.push(q);
                    }
                }
                if let std::collections::hash_map::Entry::Vacant(slot) = memo.entry((b, c)) {
                    let params = AggParams {
                        batch_size: b,
                        ctx_tokens: c,
                        isl: req.isl,
                        osl: req.osl,
                        prefix: req.prefix,
                        tokens_per_iteration: p_iter,
                        max_seq_len: if w.backend() == Backend::Trtllm { req.max_seq_len } else { None },
                        free_gpu_memory_fraction: req.free_gpu_memory_fraction,
                    };
                    let point = match agg_eval(w, &params) {
                        Ok(e) if e.verdict.oom || e.verdict.kv_over => Point::OutOfMemory,
                        Ok(mut e) => {
                            // The candidate table's counter columns are float columns (b = 1
                            // rows hold integers in `cli_estimate`, 1.0 in the sweep table).
                            for key in ["num_ctx_reqs", "num_gen_reqs", "num_tokens", "gen_tokens"] {
                                let v = e.row.f(key);
                                e.row.set(key, v);
                            }
                            let (ttft, tpot) = (e.row.f("ttft"), e.row.f("tpot"));
                            let mut rounded = e.row;
                            rounded.round3();
                            let seq_s_rounded = rounded.f("seq/s");
                            index.insert((b, c), points.len());
                            points.push(AggPoint { rounded: finish_row(rounded), ttft, tpot, seq_s_rounded });
                            Point::Evaluated
                        }
                        Err(e) => classify(e)?,
                    };
                    slot.insert(Some(point));
                }
                match memo[&(b, c)].as_ref() {
                    Some(Point::Miss) | None => continue,
                    Some(Point::OutOfMemory) => break,
                    Some(Point::Evaluated) => {
                        let i = index[&(b, c)];
                        if points[i].tpot <= tau && points[i].ttft <= ttft_c {
                            kept.push(i);
                        }
                    }
                }
            }
        }
        // Sorted by rounded seq/s, descending, ties in loop order; the first 10 kept.
        kept.sort_by(|&x, &y| {
            points[y].seq_s_rounded.partial_cmp(&points[x].seq_s_rounded).unwrap_or(std::cmp::Ordering::Equal)
        });
        for &i in kept.iter().take(10) {
            let key = (points[i].rounded.f("bs") as u32, points[i].rounded.f("ctx_tokens") as u32);
            if emitted.insert(key) {
                out.push(points[i].rounded.clone());
            }
        }
    }
    let out_of_memory = points.is_empty() && memo.values().any(|p| matches!(p, Some(Point::OutOfMemory)));
    Ok(LayoutRows { rows: out, out_of_memory })
}

/// Worker candidates of one disagg layout (§9.4 step 1). The disagg workers never get the
/// request's `max_seq_len` (spec 51 §6.5: it reaches agg points only).
fn worker_candidates(w: &Worker, req: &SweepRequest, factors: &DisaggFactors, prefill: bool) -> Result<LayoutRows> {
    let opts = &req.disagg_options;
    let batches = if prefill { opts.prefill_batches() } else { opts.decode_batches() };
    let mut rows = Vec::new();
    let mut out_of_memory = false;
    for b in batches {
        let role = RoleParams { batch_size: b, max_seq_len: None, free_gpu_memory_fraction: req.free_gpu_memory_fraction };
        let res = if prefill {
            prefill_worker_scaled(w, req.isl, req.prefix, &role, factors.prefill_latency_correction)
        } else {
            decode_worker_scaled(w, req.isl, req.osl, req.nextn_accepted, &role, factors.decode_latency_correction)
        };
        match res {
            Ok(wr) if wr.verdict.oom || wr.verdict.kv_over => {
                out_of_memory = rows.is_empty();
                break;
            }
            Ok(wr) => rows.push(wr.row),
            Err(e) => match classify(e)? {
                Point::Miss => continue,
                _ => unreachable!("classify returns Miss or an error"),
            },
        }
    }
    Ok(LayoutRows { rows, out_of_memory })
}

/// The numbers of a worker candidate the disagg composition reads.
#[derive(Debug, Clone, Copy)]
struct Cand {
    ttft: f64,
    tpot: f64,
    seq_s: f64,
    seq_s_gpu: f64,
    global_bs: f64,
    gpus: f64,
    tp: f64,
}

impl Cand {
    fn of(r: &Row) -> Cand {
        Cand {
            ttft: r.f("ttft"),
            tpot: r.f("tpot"),
            seq_s: r.f("seq/s"),
            seq_s_gpu: r.f("seq/s/gpu"),
            global_bs: r.f("global_bs"),
            gpus: r.f("num_total_gpus"),
            tp: r.f("tp"),
        }
    }
}

/// The search bounds of the worker-count scan.
#[derive(Debug, Clone, Copy)]
struct CountScan<'a> {
    allowed: &'a [bool],
    max_prefill: u32,
    max_decode: u32,
    factors: &'a DisaggFactors,
}

/// The worker counts of a prefill / decode pair (§9.4): `Wd` outer, `Wp` inner, 1…32 (or the
/// experiment's caps), the replica size allowed, maximising `min(P·Wp·0.9, D·Wd·0.92) / G` from
/// 0.0 (strictly greater replaces). `None` when no count gives a positive rate.
fn worker_counts(p: &Cand, d: &Cand, scan: &CountScan) -> Option<(u32, u32)> {
    let (pg, dg) = (p.gpus as i64, d.gpus as i64);
    let allowed = scan.allowed;
    let mut best_v = 0.0;
    let mut choice = None;
    for wd in 1..=i64::from(scan.max_decode) {
        for wp in 1..=i64::from(scan.max_prefill) {
            let g = pg * wp + dg * wd;
            if g < 0 || g as usize >= allowed.len() || !allowed[g as usize] {
                continue;
            }
            let a = p.seq_s * wp as f64 * scan.factors.prefill_degradation;
            let b = d.seq_s * wd as f64 * scan.factors.decode_degradation;
            let v = (if b < a { b } else { a }) / g as f64;
            if v > best_v {
                best_v = v;
                choice = Some((wp as u32, wd as u32));
            }
        }
    }
    choice
}

/// `(tokens/s/gpu, gpus)` of the composed row, computed as [`compose_degraded`] does.
fn composed_throughput(p: &Cand, d: &Cand, wp: u32, wd: u32, osl: u32, f: &DisaggFactors) -> (f64, f64) {
    let a = p.seq_s * f64::from(wp) * f.prefill_degradation;
    let b = d.seq_s * f64::from(wd) * f.decode_degradation;
    let seq_s = if b < a { b } else { a };
    let gpus = p.gpus as i64 * i64::from(wp) + d.gpus as i64 * i64::from(wd);
    (seq_s * f64::from(osl) / gpus as f64, gpus as f64)
}

/// The disagg candidate table (§9.4 steps 2-3). `prefill` / `decode` are the worker
/// candidates with the index of their layout.
fn disagg_table(
    prefill: &[(Row, usize)],
    decode: &[(Row, usize)],
    workers: (&[Worker], &[Worker]),
    req: &SweepRequest,
    cons: &[(f64, f64)],
    sglang: bool,
    factors: &DisaggFactors,
) -> Vec<Row> {
    let allowed = req.disagg_options.allowed_replicas(req.total_gpus);
    let scan = CountScan {
        allowed: &allowed,
        max_prefill: req.disagg_options.max_prefill_workers,
        max_decode: req.disagg_options.max_decode_workers,
        factors,
    };
    let pc: Vec<Cand> = prefill.iter().map(|(r, _)| Cand::of(r)).collect();
    let dc: Vec<Cand> = decode.iter().map(|(r, _)| Cand::of(r)).collect();
    // Decode candidates grouped by `parallel`, groups in ascending string order (§9.4 (d)).
    let mut group_names: Vec<String> = Vec::new();
    let mut group_of: Vec<usize> = Vec::with_capacity(decode.len());
    for (r, _) in decode {
        let name = r.s("parallel");
        let g = match group_names.iter().position(|n| n == name) {
            Some(g) => g,
            None => {
                group_names.push(name.to_string());
                group_names.len() - 1
            }
        };
        group_of.push(g);
    }
    let mut group_order: Vec<usize> = (0..group_names.len()).collect();
    group_order.sort_by(|&a, &b| group_names[a].cmp(&group_names[b]));
    // Worker counts depend only on the (prefill, decode) candidate pair, not the constraint.
    let mut counts: HashMap<(usize, usize), Option<(u32, u32)>> = HashMap::new();
    // Each winner: (prefill candidate, decode candidate, Wp, Wd) with its composed row.
    let mut seen: std::collections::HashSet<(usize, usize, u32, u32, u64)> = std::collections::HashSet::new();
    let mut table: Vec<Row> = Vec::new();
    for &(ttft_c, tau) in cons {
        // Prefill: 1.8·ttft < ttft_c, by seq/s/gpu desc then global_bs asc (stable), first 32.
        let mut ps: Vec<usize> = (0..pc.len()).filter(|&i| factors.ttft_factor * pc[i].ttft < ttft_c).collect();
        ps.sort_by(|&a, &b| {
            pc[b].seq_s_gpu
                .partial_cmp(&pc[a].seq_s_gpu)
                .unwrap_or(std::cmp::Ordering::Equal)
                .then(pc[a].global_bs.partial_cmp(&pc[b].global_bs).unwrap_or(std::cmp::Ordering::Equal))
        });
        ps.truncate(32);
        let mut winners: Vec<(f64, Row, (usize, usize, u32, u32))> = Vec::new();
        for &g in &group_order {
            let mut rows: Vec<usize> =
                (0..dc.len()).filter(|&i| group_of[i] == g && dc[i].tpot > 0.0 && dc[i].tpot < tau).collect();
            if rows.is_empty() {
                continue;
            }
            rows.sort_by(|&a, &b| dc[b].seq_s_gpu.partial_cmp(&dc[a].seq_s_gpu).unwrap_or(std::cmp::Ordering::Equal));
            rows.truncate(16);
            // (tokens/s/gpu, −gpus) of the group's best pair so far, and the pair.
            let mut best: Option<(f64, f64, usize, usize, u32, u32)> = None;
            for &di in &rows {
                for &pi in &ps {
                    if sglang && pc[pi].tp != dc[di].tp {
                        continue;
                    }
                    let choice = *counts.entry((pi, di)).or_insert_with(|| worker_counts(&pc[pi], &dc[di], &scan));
                    let Some((wp, wd)) = choice else { continue };
                    let (tpg, gpus) = composed_throughput(&pc[pi], &dc[di], wp, wd, req.osl, factors);
                    let better = match &best {
                        None => true,
                        Some(b) => tpg > b.0 || (tpg == b.0 && -gpus > b.1),
                    };
                    if better {
                        best = Some((tpg, -gpus, pi, di, wp, wd));
                    }
                }
            }
            if let Some((_, _, pi, di, wp, wd)) = best {
                let mut p = prefill[pi].0.clone();
                let ttft_p = factors.ttft_factor * pc[pi].ttft;
                p.set("ttft", ttft_p);
                let (d, dl) = (&decode[di].0, decode[di].1);
                let mut row = compose_degraded(
                    (&p, &workers.0[prefill[pi].1]),
                    (d, &workers.1[dl]),
                    ttft_p,
                    (wp, wd),
                    (req.isl, req.osl, req.prefix),
                    (factors.prefill_degradation, factors.decode_degradation),
                );
                row.round3();
                let tpg = row.f("tokens/s/gpu");
                winners.push((tpg, finish_row(row), (pi, di, wp, wd)));
            }
        }
        winners.sort_by(|a, b| b.0.partial_cmp(&a.0).unwrap_or(std::cmp::Ordering::Equal));
        for (_, row, (pi, di, wp, wd)) in winners.into_iter().take(5) {
            // Exact duplicates are the same pair and counts at the same prefill TTFT.
            if seen.insert((pi, di, wp, wd, row.f("ttft").to_bits())) {
                table.push(row);
            }
        }
    }
    sort_desc(&mut table, "tokens/s/gpu");
    table
}

/// Why an experiment produced no table: the exception class the reference raises for it and
/// its message (spec 51 §0.3).
#[derive(Debug, Clone, PartialEq)]
pub struct Failure {
    /// The exception class name (`InsufficientMemoryError`, `RuntimeError`, `ValueError`, …).
    pub kind: &'static str,
    /// The message.
    pub message: String,
}

impl Failure {
    /// `{"type": …, "message": …}`.
    pub fn to_json(&self) -> Value {
        serde_json::json!({"type": self.kind, "message": self.message})
    }
}

/// One experiment run: its name (`agg` / `disagg`), its candidate table (empty: it recorded
/// nothing) and its failure when it raised.
#[derive(Debug, Clone)]
pub struct Experiment {
    /// `agg` or `disagg`.
    pub name: &'static str,
    /// The candidate table, sorted by `tokens/s/gpu` descending.
    pub candidates: Vec<Row>,
    /// The error that stopped it (its outcome), if any.
    pub failure: Option<Failure>,
}

/// Why a role found no rows: the first layout error, or all layouts out of memory.
fn role_failure(errors: &[String], all_out_of_memory: bool, no_results: &str, memory: &str) -> Option<Failure> {
    if let Some(e) = errors.first() {
        return Some(Failure {
            kind: "RuntimeError",
            message: format!("{no_results}: no results for any parallel configuration. Selected exception: {e}"),
        });
    }
    all_out_of_memory.then(|| Failure {
        kind: "InsufficientMemoryError",
        message: format!(
            "{memory}: no results \u{2014} model does not fit in GPU memory for any parallel config. Try increasing \
             {}, using a quantized model, or a system with more VRAM per GPU.",
            if memory == "sweep_agg" { "--total-gpus" } else { "GPU budget" }
        ),
    })
}

/// The loaded workers (or load errors) of every distinct layout of a request's roles. The
/// agg and prefill roles usually list the same layouts, and a decode layout often compiles to
/// the same spec as an agg one: each distinct layout builds its engine once.
struct LoadedLayouts<'a> {
    layouts: Vec<&'a LayoutInput>,
    loaded: Vec<std::result::Result<Worker, String>>,
}

impl<'a> LoadedLayouts<'a> {
    fn load(roles: &[&'a [LayoutInput]], root: Option<&Path>) -> LoadedLayouts<'a> {
        let mut layouts: Vec<&LayoutInput> = Vec::new();
        for l in roles.iter().flat_map(|r| r.iter()) {
            if !layouts.contains(&l) {
                layouts.push(l);
            }
        }
        let loaded = layouts
            .par_iter()
            .map(|l| match (&l.worker, &l.error) {
                (Some(w), _) => w.load(root).map_err(|e| e.to_string()),
                (None, Some(e)) => Err(e.clone()),
                (None, None) => Err("layout has neither a worker nor an error".to_string()),
            })
            .collect();
        LoadedLayouts { layouts, loaded }
    }

    /// The workers of one role in its order, and the errors of its failed layouts.
    fn role(&self, layouts: &[LayoutInput]) -> (Vec<Worker>, Vec<String>) {
        let mut workers = Vec::new();
        let mut errors = Vec::new();
        for l in layouts {
            let i = self.layouts.iter().position(|seen| *seen == l).expect("every role layout was loaded");
            match &self.loaded[i] {
                Ok(w) => workers.push(w.clone()),
                Err(e) => errors.push(e.clone()),
            }
        }
        (workers, errors)
    }
}


/// Runs a sweep request; the answer is JSON text with `chosen_exp`, `best_throughputs`,
/// `best_latencies`, `outcomes`, `best_configs`, `pareto_fronts` and `candidates`
/// (spec 50 §11's sweep-case layout).
pub fn sweep_json(request: &str, systems_path: Option<&Path>) -> Result<String> {
    let req: SweepRequest = serde_json::from_str(request).map_err(|e| {
        AicError::value(format!("invalid sweep request JSON: {e}{}", super::request::json_number_hint(request)))
    })?;
    sweep(&req, systems_path)
}

impl SweepRequest {
    /// Checks every number of the request against its domain (see [`super::checks`]): a GPU
    /// budget, `isl`, `osl` and `top_n` of at least 1, latency targets finite and `> 0`, the
    /// MTP acceptance finite and `≥ 0`, a memory fraction in `(0, 1]`, a KV slot of at least
    /// `isl + osl`.
    pub fn check(&self) -> Result<()> {
        checks::positive_count("total_gpus", self.total_gpus.into(), "the GPU budget")?;
        checks::positive_count("isl", self.isl.into(), "input tokens per request")?;
        checks::positive_count("osl", self.osl.into(), "output tokens per request, the first one included")?;
        checks::positive_number("ttft", self.ttft, "the TTFT target in ms")?;
        checks::positive_number("tpot", self.tpot, "the TPOT target in ms")?;
        if let Some(r) = self.request_latency {
            checks::positive_number("request_latency", r, "the end-to-end latency target in ms")?;
        }
        if let Some(a) = self.nextn_accepted {
            checks::non_negative_number("nextn_accepted", a, "average accepted draft tokens per step")?;
        }
        checks::memory_fraction("free_gpu_memory_fraction", self.free_gpu_memory_fraction)?;
        checks::max_seq_len("max_seq_len", self.max_seq_len, self.isl, self.osl)?;
        checks::positive_count("top_n", self.top_n as u64, "best configurations kept per experiment")?;
        if let Some(modes) = &self.modes {
            for m in modes {
                if m != "agg" && m != "disagg" {
                    return Err(AicError::value(format!("modes: unknown serving mode {m:?}; use \"agg\" or \"disagg\"")).into());
                }
            }
        }
        let o = &self.disagg_options;
        checks::positive_count("disagg_options.max_prefill_workers", o.max_prefill_workers.into(), "prefill worker counts scanned")?;
        checks::positive_count("disagg_options.max_decode_workers", o.max_decode_workers.into(), "decode worker counts scanned")?;
        if let Some(cap) = o.max_gpu_per_replica {
            checks::positive_count("disagg_options.max_gpu_per_replica", cap.into(), "the largest replica in GPUs")?;
        }
        if let Some(t) = &self.load_target {
            match (t.request_rate, t.concurrency) {
                (Some(v), None) => checks::positive_number("load_target.request_rate", v, "requests per second to carry")?,
                (None, Some(v)) => checks::positive_number("load_target.concurrency", v, "requests in flight to carry")?,
                _ => {
                    return Err(AicError::value("load_target: give exactly one of request_rate or concurrency").into())
                }
            }
        }
        Ok(())
    }
}

/// Runs a parsed sweep request (see [`sweep_json`]); the request is checked first
/// ([`SweepRequest::check`]).
pub fn sweep(req: &SweepRequest, systems_path: Option<&Path>) -> Result<String> {
    req.check()?;
    let out = crate::parallel::install(|| sweep_on_pool(req, systems_path));
    crate::data::prefetch::wait_for_prefetches();
    out
}

/// [`sweep`] on a pool with threads in this process (see `crate::parallel`).
fn sweep_on_pool(req: &SweepRequest, systems_path: Option<&Path>) -> Result<String> {
    let experiments = run_experiments(req, systems_path)?;
    let results: Vec<super::plan::ExperimentResult> = experiments
        .into_iter()
        .map(|e| super::plan::ExperimentResult::picked(e.name.to_string(), String::new(), e, req))
        .collect();
    Ok(super::plan::answer_json(&results, None))
}

impl SweepRequest {
    /// Whether the request asks for experiment `mode` (`agg` / `disagg`), by `modes` or by
    /// its layouts.
    fn wants(&self, mode: &str) -> bool {
        match &self.modes {
            Some(m) => m.iter().any(|x| x == mode),
            None => match mode {
                "agg" => !self.agg.is_empty(),
                _ => !self.prefill.is_empty() && !self.decode.is_empty(),
            },
        }
    }

    /// The pick rules of this request's experiments.
    pub fn pick_rules(&self) -> super::picks::PickRules {
        super::picks::PickRules {
            total_gpus: self.total_gpus,
            tpot: self.tpot,
            request_latency: self.request_latency,
            top_n: self.top_n,
            strict_sla: self.strict_sla,
            load_target: self.load_target,
        }
    }
}

/// Runs the experiments a request asks for (agg, then disagg), each to its candidate table or
/// its failure (spec 51 §0.2-§0.3). A request error (not an experiment's) is an `Err`.
pub fn run_experiments(req: &SweepRequest, systems_path: Option<&Path>) -> Result<Vec<Experiment>> {
    let cons = constraints(req.ttft, req.osl, req.request_latency);
    let mut experiments = Vec::new();
    let all = LoadedLayouts::load(&[&req.agg, &req.prefill, &req.decode], systems_path);

    if req.wants("agg") {
        let (agg_workers, mut agg_errors) = all.role(&req.agg);
        let per_layout: Vec<Result<LayoutRows>> = agg_workers.par_iter().map(|w| agg_layout(w, req, &cons)).collect();
        let mut agg_rows = Vec::new();
        let mut all_oom = !agg_workers.is_empty();
        for r in per_layout {
            match r {
                // Each layout emitted every point once, whatever constraints kept it.
                Ok(layout) => {
                    all_oom &= layout.out_of_memory;
                    agg_rows.extend(layout.rows);
                }
                Err(e) => {
                    all_oom = false;
                    agg_errors.push(e.to_string());
                }
            }
        }
        sort_desc(&mut agg_rows, "tokens/s/gpu");
        let failure = if agg_rows.is_empty() {
            role_failure(&agg_errors, all_oom, "sweep_agg", "sweep_agg")
        } else {
            None
        };
        experiments.push(Experiment { name: "agg", candidates: agg_rows, failure });
    }

    if req.wants("disagg") && req.total_gpus >= 2 && !req.prefill.is_empty() && !req.decode.is_empty() {
        experiments.push(disagg_experiment(req, &all, &cons));
    }
    Ok(experiments)
}

/// The disagg experiment (§9.4): worker candidates per role, then the composed table.
fn disagg_experiment(req: &SweepRequest, all: &LoadedLayouts, cons: &[(f64, f64)]) -> Experiment {
    let factors = match req.disagg_options.factors() {
        Ok(f) => f,
        Err(message) => {
            return Experiment { name: "disagg", candidates: Vec::new(), failure: Some(Failure { kind: "ValueError", message }) }
        }
    };
    let role = |layouts: &[LayoutInput], prefill: bool| -> (Vec<Worker>, Vec<(Row, usize)>, Vec<String>, bool) {
        let (ws, mut errors) = all.role(layouts);
        let per: Vec<Result<LayoutRows>> = ws.par_iter().map(|w| worker_candidates(w, req, &factors, prefill)).collect();
        let mut rows = Vec::new();
        let mut all_oom = !ws.is_empty();
        for (i, r) in per.into_iter().enumerate() {
            match r {
                Ok(layout) => {
                    all_oom &= layout.out_of_memory;
                    rows.extend(layout.rows.into_iter().map(|row| (row, i)));
                }
                Err(e) => {
                    all_oom = false;
                    errors.push(e.to_string());
                }
            }
        }
        (ws, rows, errors, all_oom)
    };
    let (pw, prows, perrors, poom) = role(&req.prefill, true);
    if prows.is_empty() {
        let failure = role_failure(&perrors, poom, "sweep_disagg", "sweep_disagg/prefill");
        return Experiment { name: "disagg", candidates: Vec::new(), failure };
    }
    let (dw, drows, derrors, doom) = role(&req.decode, false);
    if drows.is_empty() {
        let failure = role_failure(&derrors, doom, "sweep_disagg", "sweep_disagg/decode");
        return Experiment { name: "disagg", candidates: Vec::new(), failure };
    }
    let sglang = pw.first().is_some_and(|w| w.backend() == Backend::Sglang);
    let table = disagg_table(&prows, &drows, (&pw, &dw), req, cons, sglang, &factors);
    // Both roles have workers but no pair composes a row: no rows and no error (51 §0.3).
    Experiment { name: "disagg", candidates: table, failure: None }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ctx_lists_match_spec() {
        assert_eq!(ctx_tokens_list(4000), vec![4000, 8000]);
        assert_eq!(ctx_tokens_list(2000), vec![2000, 4000, 6000, 8000]);
        assert_eq!(ctx_tokens_list(3000), vec![3000, 6000]);
        assert_eq!(ctx_tokens_list(6000), vec![6000, 12000]);
        let l300 = ctx_tokens_list(300);
        assert_eq!(l300.len(), 18);
        assert_eq!(&l300[..4], &[300, 512, 600, 1024]);
        assert_eq!(*l300.last().unwrap(), 8192);
        let l500 = ctx_tokens_list(500);
        assert_eq!(l500.len(), 18);
        assert_eq!(&l500[..4], &[500, 512, 1000, 1024]);
    }

    #[test]
    fn chunked_ctx_lists_match_spec_51() {
        // Spec 51 §6.7 table.
        let l2000 = ctx_tokens_list_chunked(2000);
        assert_eq!(l2000.len(), 18);
        assert_eq!(&l2000[..5], &[512, 1024, 1536, 2000, 2048]);
        assert!(l2000.contains(&4000) && *l2000.last().unwrap() == 8192);
        assert_eq!(ctx_tokens_list_chunked(4000).len(), 18);
        let l6000 = ctx_tokens_list_chunked(6000);
        assert_eq!(l6000.len(), 20);
        assert!(l6000.contains(&9692) && l6000.contains(&11192) && l6000.contains(&12000));
        let l10000 = ctx_tokens_list_chunked(10000);
        assert_eq!(l10000.len(), 22);
        assert_eq!(&l10000[16..], &[10000, 10692, 13192, 15692, 18192, 20000]);
        assert_eq!(ctx_tokens_list_chunked(300), ctx_tokens_list(300));
    }

    #[test]
    fn disagg_options_lists() {
        let o = DisaggOptions::default();
        assert_eq!(o.prefill_batches(), vec![1]);
        assert_eq!(o.decode_batches(), decode_batches());
        let allowed = o.allowed_replicas(8);
        let sizes: Vec<usize> = (0..allowed.len()).filter(|&g| allowed[g]).collect();
        assert_eq!(sizes, vec![1, 2, 4, 8]);
        let custom = DisaggOptions {
            num_gpu_per_replica: Some(vec![4, 8, 12, 16]),
            max_gpu_per_replica: Some(16),
            decode_max_batch_size: 256,
            prefill_max_batch_size: 3,
            ..DisaggOptions::default()
        };
        let allowed = custom.allowed_replicas(16);
        assert_eq!((0..allowed.len()).filter(|&g| allowed[g]).collect::<Vec<_>>(), vec![4, 8, 12, 16]);
        assert_eq!(*custom.decode_batches().last().unwrap(), 256);
        assert_eq!(custom.prefill_batches(), vec![1, 2, 3]);
        let big = DisaggOptions { decode_max_batch_size: 600, ..DisaggOptions::default() };
        assert_eq!(big.decode_batches().len(), decode_batches().len() + 1);
        assert_eq!(DisaggOptions { decode_max_batch_size: 0, ..DisaggOptions::default() }.decode_batches(), vec![1]);
        let every = DisaggOptions { num_gpu_per_replica: Some(vec![]), ..DisaggOptions::default() };
        assert!(every.allowed_replicas(6)[1..].iter().all(|x| *x));
    }

    #[test]
    fn bad_degradation_names_itself() {
        let o = DisaggOptions { rate_match_decode_degradation: 0.0, ..DisaggOptions::default() };
        assert_eq!(o.factors().unwrap_err(), "rate_match_decode_degradation must be a positive finite number, got 0.0.");
        let o = DisaggOptions { prefill_latency_correction: f64::NAN, ..DisaggOptions::default() };
        assert!(o.factors().unwrap_err().starts_with("prefill_latency_correction must be"));
    }

    #[test]
    fn memory_failures_read_as_the_reference_records_them() {
        // Spec 51 §4.5 rec_escalate_llama405b_gb200_trt_hybrid, budget 4.
        let agg = role_failure(&[], true, "sweep_agg", "sweep_agg").unwrap();
        assert_eq!(agg.kind, "InsufficientMemoryError");
        assert_eq!(
            agg.message,
            "sweep_agg: no results \u{2014} model does not fit in GPU memory for any parallel config. Try increasing \
             --total-gpus, using a quantized model, or a system with more VRAM per GPU."
        );
        let pre = role_failure(&[], true, "sweep_disagg", "sweep_disagg/prefill").unwrap();
        assert!(pre.message.starts_with("sweep_disagg/prefill: no results"));
        assert!(pre.message.contains("Try increasing GPU budget,"));
        let err = role_failure(&["ValueError: bad".to_string()], true, "sweep_agg", "sweep_agg").unwrap();
        assert_eq!(err.kind, "RuntimeError");
        assert!(role_failure(&[], false, "sweep_agg", "sweep_agg").is_none());
    }

    #[test]
    fn request_latency_pairs() {
        // spec 50 §9.1: R 12000, osl 500, ttft 1000 → 14 pairs from (300, 23.44…) to (8400, 7.21…).
        let pairs = constraints(1000.0, 500, Some(12000.0));
        assert_eq!(pairs.len(), 14);
        assert_eq!(pairs[0], (300.0, 23.44689378757515));
        assert_eq!(*pairs.last().unwrap(), (8400.0, 7.214428857715431));
        assert_eq!(constraints(2000.0, 1000, None).len(), 75);
    }

    #[test]
    fn batch_lists() {
        let a = agg_batches();
        assert_eq!(*a.last().unwrap(), 512);
        assert!(a.contains(&240) && a.contains(&288) && !a.contains(&272));
        let d = decode_batches();
        assert!(d.contains(&18) && d.contains(&124) && d.contains(&136) && !d.contains(&132));
    }

    #[test]
    fn shared_layouts_keep_each_roles_order() {
        let failed = |e: &str| LayoutInput { worker: None, error: Some(e.to_string()) };
        let agg = vec![failed("a"), failed("b")];
        let decode = vec![failed("c"), failed("a")];
        let all = LoadedLayouts::load(&[&agg, &agg, &decode], None);
        assert_eq!(all.layouts.len(), 3, "identical layouts load once");
        assert_eq!(all.role(&agg).1, vec!["a".to_string(), "b".to_string()]);
        assert_eq!(all.role(&decode).1, vec!["c".to_string(), "a".to_string()]);
        assert!(all.role(&decode).0.is_empty());
    }
}
