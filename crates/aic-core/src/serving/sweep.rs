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
use crate::spec::Backend;

use super::agg::{agg_eval, AggParams};
use super::checks;
use super::disagg::{compose, decode_worker, prefill_worker, RoleParams, TTFT_FACTOR};
use super::error::ServingError;
use super::numeric::{py_floordiv, round3};
use super::pareto::{best_configs, group_key, pareto_front, with_cluster_throughput, PickTargets};
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
    /// Agg layouts.
    pub agg: Vec<LayoutInput>,
    /// Disagg prefill layouts (empty: no disagg experiment).
    #[serde(default)]
    pub prefill: Vec<LayoutInput>,
    /// Disagg decode layouts.
    #[serde(default)]
    pub decode: Vec<LayoutInput>,
}

fn default_top_n() -> usize {
    5
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

/// Replica sizes a disagg deployment may use (§9.1), as a lookup table indexed by GPUs.
fn allowed_gpus(total: u32) -> Vec<bool> {
    let cap = total.min(128) as usize;
    let mut v = vec![false; 129];
    for g in [1_usize, 2, 4].into_iter().chain((8..=128).step_by(8)) {
        if g <= cap {
            v[g] = true;
        }
    }
    v
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

/// Agg sweep of one layout over every constraint (§9.3). Returns the kept rows with the
/// `(b, C)` of each (a row's identity: equal points give equal rows, different points differ
/// in `bs` or `ctx_tokens`).
fn agg_layout(w: &Worker, req: &SweepRequest, cons: &[(f64, f64)]) -> Result<Vec<((u32, u32), Row)>> {
    let p_iter = if w.nextn() > 0 { 1.0 + req.nextn_accepted.unwrap_or(0.0) } else { 1.0 };
    let speculative = p_iter > 1.0;
    let batches = agg_batches();
    let ctxs = ctx_tokens_list(req.isl);
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
                out.push((key, points[i].rounded.clone()));
            }
        }
    }
    Ok(out)
}

/// Worker candidates of one disagg layout (§9.4 step 1).
fn worker_candidates(w: &Worker, req: &SweepRequest, prefill: bool) -> Result<Vec<Row>> {
    let batches = if prefill { vec![1] } else { decode_batches() };
    let mut rows = Vec::new();
    for b in batches {
        let role = RoleParams { batch_size: b, max_seq_len: req.max_seq_len, free_gpu_memory_fraction: req.free_gpu_memory_fraction };
        let res = if prefill {
            prefill_worker(w, req.isl, req.prefix, &role)
        } else {
            decode_worker(w, req.isl, req.osl, req.nextn_accepted, &role)
        };
        match res {
            Ok(wr) if wr.verdict.oom || wr.verdict.kv_over => break,
            Ok(wr) => rows.push(wr.row),
            Err(e) => match classify(e)? {
                Point::Miss => continue,
                _ => unreachable!("classify returns Miss or an error"),
            },
        }
    }
    Ok(rows)
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

/// The worker counts of a prefill / decode pair (§9.4): `Wd` outer, `Wp` inner, 1…32, the
/// replica size allowed, maximising `min(P·Wp·0.9, D·Wd·0.92) / G` from 0.0 (strictly greater
/// replaces). `None` when no count gives a positive rate.
fn worker_counts(p: &Cand, d: &Cand, allowed: &[bool]) -> Option<(u32, u32)> {
    let (pg, dg) = (p.gpus as i64, d.gpus as i64);
    let mut best_v = 0.0;
    let mut choice = None;
    for wd in 1..=32_i64 {
        for wp in 1..=32_i64 {
            let g = pg * wp + dg * wd;
            if g < 0 || g as usize >= allowed.len() || !allowed[g as usize] {
                continue;
            }
            let a = p.seq_s * wp as f64 * 0.9;
            let b = d.seq_s * wd as f64 * 0.92;
            let v = (if b < a { b } else { a }) / g as f64;
            if v > best_v {
                best_v = v;
                choice = Some((wp as u32, wd as u32));
            }
        }
    }
    choice
}

/// `(tokens/s/gpu, gpus)` of the composed row, computed as [`compose`] does.
fn composed_throughput(p: &Cand, d: &Cand, wp: u32, wd: u32, osl: u32) -> (f64, f64) {
    let a = p.seq_s * f64::from(wp) * 0.9;
    let b = d.seq_s * f64::from(wd) * 0.92;
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
) -> Vec<Row> {
    let allowed = allowed_gpus(req.total_gpus);
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
        let mut ps: Vec<usize> = (0..pc.len()).filter(|&i| TTFT_FACTOR * pc[i].ttft < ttft_c).collect();
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
                    let choice = *counts.entry((pi, di)).or_insert_with(|| worker_counts(&pc[pi], &dc[di], &allowed));
                    let Some((wp, wd)) = choice else { continue };
                    let (tpg, gpus) = composed_throughput(&pc[pi], &dc[di], wp, wd, req.osl);
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
                let ttft_p = TTFT_FACTOR * pc[pi].ttft;
                p.set("ttft", ttft_p);
                let (d, dl) = (&decode[di].0, decode[di].1);
                let mut row = compose((&p, &workers.0[prefill[pi].1]), (d, &workers.1[dl]), ttft_p, wp, wd, req.isl, req.osl, req.prefix);
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

/// One experiment's outcome.
struct Experiment {
    name: &'static str,
    candidates: Vec<Row>,
    error: Option<String>,
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

fn rows_json(rows: &[Row]) -> String {
    let items: Vec<String> = rows.iter().map(Row::to_json_text).collect();
    format!("[{}]", items.join(", "))
}

/// Runs a sweep request; the answer is JSON text with `chosen_exp`, `best_throughputs`,
/// `best_latencies`, `outcomes`, `best_configs`, `pareto_fronts` and `candidates`
/// (spec 50 §11's sweep-case layout).
pub fn sweep_json(request: &str, systems_path: Option<&Path>) -> Result<String> {
    let req: SweepRequest = super::request_json::parse("sweep request", request)?;
    sweep(&req, systems_path)
}

impl SweepRequest {
    /// Checks every number of the request against its domain (see [`super::checks`]): a GPU
    /// budget, `isl`, `osl` and `top_n` of at least 1, a `prefix` below `isl`, latency targets
    /// finite and `> 0`, the MTP acceptance finite and `≥ 0`, a memory fraction in `(0, 1]`, a
    /// KV slot of at least `isl + osl`.
    pub fn check(&self) -> Result<()> {
        checks::positive_count("total_gpus", self.total_gpus.into(), "the GPU budget")?;
        checks::positive_count("isl", self.isl.into(), "input tokens per request")?;
        checks::positive_count("osl", self.osl.into(), "output tokens per request, the first one included")?;
        checks::prefix_below_isl(self.prefix, self.isl)?;
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
    let cons = constraints(req.ttft, req.osl, req.request_latency);
    let mut experiments = Vec::new();

    // Agg.
    let all = LoadedLayouts::load(&[&req.agg, &req.prefill, &req.decode], systems_path);
    let (agg_workers, mut agg_errors) = all.role(&req.agg);
    let per_layout: Vec<Result<Vec<((u32, u32), Row)>>> =
        agg_workers.par_iter().map(|w| agg_layout(w, req, &cons)).collect();
    let mut agg_rows = Vec::new();
    for r in per_layout {
        match r {
            // Exact duplicates are the same point seen under several constraints; each layout
            // already emitted every point once.
            Ok(rows) => agg_rows.extend(rows.into_iter().map(|(_, row)| row)),
            Err(e) => agg_errors.push(e.to_string()),
        }
    }
    sort_desc(&mut agg_rows, "tokens/s/gpu");
    let agg_error = agg_rows.is_empty().then(|| match agg_errors.first() {
        Some(e) => format!("sweep_agg: no results for any parallel configuration. Selected exception: {e}"),
        None => ServingError::NoFeasibleConfig.to_string(),
    });
    experiments.push(Experiment { name: "agg", candidates: agg_rows, error: agg_error });

    // Disagg.
    if req.total_gpus >= 2 && !req.prefill.is_empty() && !req.decode.is_empty() {
        let (pw, mut errors) = all.role(&req.prefill);
        let (dw, derr) = all.role(&req.decode);
        errors.extend(derr);
        let cands = |ws: &[Worker], prefill: bool| -> Vec<(Row, usize)> {
            let per: Vec<Result<Vec<Row>>> = ws.par_iter().map(|w| worker_candidates(w, req, prefill)).collect();
            let mut out = Vec::new();
            for (i, r) in per.into_iter().enumerate() {
                if let Ok(rows) = r {
                    out.extend(rows.into_iter().map(|row| (row, i)));
                }
            }
            out
        };
        let prows = cands(&pw, true);
        let drows = cands(&dw, false);
        let sglang = pw.first().is_some_and(|w| w.backend() == Backend::Sglang);
        let table = disagg_table(&prows, &drows, (&pw, &dw), req, &cons, sglang);
        let error = table.is_empty().then(|| match errors.first() {
            Some(e) => format!("sweep_disagg: no results for any parallel configuration. Selected exception: {e}"),
            None => ServingError::NoFeasibleConfig.to_string(),
        });
        experiments.push(Experiment { name: "disagg", candidates: table, error });
    }

    if experiments.iter().all(|e| e.candidates.is_empty()) {
        return Err(ServingError::NoFeasibleConfig);
    }

    let targets = PickTargets { tpot: req.tpot, request_latency: req.request_latency.filter(|r| *r > 0.0), top_n: req.top_n };
    let mut parts = Vec::new();
    let mut best_tp = Vec::new();
    let mut best_lat = Vec::new();
    let mut outcomes = Vec::new();
    let (mut chosen, mut chosen_v) = ("agg", f64::NEG_INFINITY);
    let (mut best_json, mut pareto_json, mut cand_json) = (Vec::new(), Vec::new(), Vec::new());
    for e in &experiments {
        let disagg = e.name == "disagg";
        let mut rows = with_cluster_throughput(&e.candidates, req.total_gpus);
        if req.strict_sla {
            rows.retain(|r| match targets.request_latency {
                Some(rl) => r.f("request_latency") <= rl,
                None => r.f("tpot") <= targets.tpot,
            });
        }
        let (x_key, minimise) = if targets.request_latency.is_some() { ("request_latency", true) } else { ("tokens/s/user", false) };
        let front = pareto_front(&rows, x_key, minimise);
        let best = best_configs(&rows, disagg, &targets);
        let v = best.first().map_or(0.0, |r| r.f("tokens/s/gpu_cluster"));
        if v > chosen_v {
            chosen_v = v;
            chosen = e.name;
        }
        best_tp.push(format!("\"{}\": {}", e.name, Value::from(v)));
        best_lat.push(match best.first() {
            Some(r) => format!(
                "\"{}\": {{\"ttft\": {}, \"tpot\": {}, \"request_latency\": {}}}",
                e.name,
                Value::from(r.f("ttft")),
                Value::from(r.f("tpot")),
                Value::from(r.f("request_latency"))
            ),
            None => format!("\"{}\": {{}}", e.name),
        });
        outcomes.push(format!(
            "\"{}\": {}",
            e.name,
            e.error.as_ref().map_or("null".to_string(), |m| Value::from(m.as_str()).to_string())
        ));
        best_json.push(format!("\"{}\": {}", e.name, rows_json(&best)));
        pareto_json.push(format!("\"{}\": {}", e.name, rows_json(&front)));
        cand_json.push(format!("\"{}\": {}", e.name, rows_json(&e.candidates)));
        let _ = group_key(disagg);
    }
    parts.push(format!("\"chosen_exp\": {}", Value::from(chosen)));
    parts.push(format!("\"best_throughputs\": {{{}}}", best_tp.join(", ")));
    parts.push(format!("\"best_latencies\": {{{}}}", best_lat.join(", ")));
    parts.push(format!("\"outcomes\": {{{}}}", outcomes.join(", ")));
    parts.push(format!("\"best_configs\": {{{}}}", best_json.join(", ")));
    parts.push(format!("\"pareto_fronts\": {{{}}}", pareto_json.join(", ")));
    parts.push(format!("\"candidates\": {{{}}}", cand_json.join(", ")));
    let _ = round3;
    Ok(format!("{{{}}}", parts.join(", ")))
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
