//! Disaggregated serving (`disagg`, spec 50 §4): a prefill worker (static context run ×1.1)
//! and a decode worker (static generation run ×1.08), each rounded like the reference's
//! tables, rate-matched with the worker counts and the 0.9 / 0.92 / 1.8 coupling factors.

use crate::engine::RunMode;
use super::error::Result;

use super::error::ServingError;
use super::row::{Row, Val};
use super::static_mode::{project_mtp, static_eval, ProjectionRole, StaticEval, StaticParams};
use super::worker::{BudgetRole, Verdict, Worker};

/// Latency correction of the prefill worker.
pub const PREFILL_SCALE: f64 = 1.1;
/// Latency correction of the decode worker.
pub const DECODE_SCALE: f64 = 1.08;
/// Prefill throughput degradation when composed.
pub const PREFILL_DEGRADATION: f64 = 0.9;
/// Decode throughput degradation when composed.
pub const DECODE_DEGRADATION: f64 = 0.92;
/// Queueing correction of the TTFT.
pub const TTFT_FACTOR: f64 = 1.8;

/// The coupling factors of a disagg composition (spec 50 §4, 51 §5.2): the latency corrections
/// of the two workers, the rate-matching degradations and the TTFT queueing factor. `cli default`
/// uses [`DisaggFactors::default`]; experiment files may set each.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DisaggFactors {
    /// Multiplier on the static prefill latency ([`PREFILL_SCALE`]).
    pub prefill_latency_correction: f64,
    /// Multiplier on the static decode latency ([`DECODE_SCALE`]).
    pub decode_latency_correction: f64,
    /// Prefill throughput degradation of the rate match ([`PREFILL_DEGRADATION`]).
    pub prefill_degradation: f64,
    /// Decode throughput degradation of the rate match ([`DECODE_DEGRADATION`]).
    pub decode_degradation: f64,
    /// TTFT factor of the prefill worker ([`TTFT_FACTOR`]).
    pub ttft_factor: f64,
}

impl Default for DisaggFactors {
    fn default() -> DisaggFactors {
        DisaggFactors {
            prefill_latency_correction: PREFILL_SCALE,
            decode_latency_correction: DECODE_SCALE,
            prefill_degradation: PREFILL_DEGRADATION,
            decode_degradation: DECODE_DEGRADATION,
            ttft_factor: TTFT_FACTOR,
        }
    }
}

/// Per-role knobs of a disagg worker.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RoleParams {
    /// Requests per worker rank.
    pub batch_size: u32,
    /// KV length per request for the memory model (`None`: the role's default).
    pub max_seq_len: Option<u64>,
    /// KV-budget fraction override.
    pub free_gpu_memory_fraction: Option<f64>,
}

/// One worker candidate: its rounded (and, for decode with MTP, projected) row.
#[derive(Debug, Clone)]
pub struct WorkerRow {
    /// The rounded row (power ungated).
    pub row: Row,
    /// The unrounded evaluation (per-op lists, memory).
    pub eval: StaticEval,
    /// Memory verdicts.
    pub verdict: Verdict,
}

/// Evaluates the prefill worker (§4.1).
pub fn prefill_worker(w: &Worker, isl: u32, prefix: u32, r: &RoleParams) -> Result<WorkerRow> {
    prefill_worker_scaled(w, isl, prefix, r, PREFILL_SCALE)
}

/// [`prefill_worker`] with another latency correction than [`PREFILL_SCALE`].
pub fn prefill_worker_scaled(w: &Worker, isl: u32, prefix: u32, r: &RoleParams, scale: f64) -> Result<WorkerRow> {
    let p = StaticParams {
        mode: RunMode::StaticCtx,
        batch_size: r.batch_size,
        isl,
        osl: 1,
        prefix,
        stride: 32,
        scale,
        kv_seq: r.max_seq_len,
    };
    let eval = static_eval(w, &p)?;
    let verdict = w.verdict(&eval.memory, r.free_gpu_memory_fraction, BudgetRole::Worker);
    let mut row = eval.row.clone();
    row.round3();
    Ok(WorkerRow { row, eval, verdict })
}

/// Evaluates the decode worker (§4.1), projected for MTP with `p = 1 + accepted`.
pub fn decode_worker(w: &Worker, isl: u32, osl: u32, accepted: Option<f64>, r: &RoleParams) -> Result<WorkerRow> {
    decode_worker_scaled(w, isl, osl, accepted, r, DECODE_SCALE)
}

/// [`decode_worker`] with another latency correction than [`DECODE_SCALE`].
pub fn decode_worker_scaled(
    w: &Worker,
    isl: u32,
    osl: u32,
    accepted: Option<f64>,
    r: &RoleParams,
    scale: f64,
) -> Result<WorkerRow> {
    let p = StaticParams {
        mode: RunMode::StaticGen,
        batch_size: r.batch_size,
        isl,
        osl,
        prefix: 0,
        stride: 32,
        scale,
        kv_seq: r.max_seq_len,
    };
    let eval = static_eval(w, &p)?;
    let verdict = w.verdict(&eval.memory, r.free_gpu_memory_fraction, BudgetRole::Worker);
    let mut row = eval.row.clone();
    row.round3();
    if let Some(a) = accepted.filter(|a| *a > 0.0 && w.nextn() > 0) {
        project_mtp(&mut row, 1.0 + a, osl, ProjectionRole::Decode);
    }
    Ok(WorkerRow { row, eval, verdict })
}

/// The worker-role values the composed row copies.
struct RoleView<'a> {
    row: &'a Row,
    worker: &'a Worker,
}

/// Composes the disagg row from the two rounded worker rows and the worker counts (§4.2),
/// unrounded. `ttft_p` is the prefill TTFT after the 1.8 correction.
#[allow(clippy::too_many_arguments)]
pub fn compose(
    prefill: (&Row, &Worker),
    decode: (&Row, &Worker),
    ttft_p: f64,
    wp: u32,
    wd: u32,
    isl: u32,
    osl: u32,
    prefix: u32,
) -> Row {
    compose_degraded(prefill, decode, ttft_p, (wp, wd), (isl, osl, prefix), (PREFILL_DEGRADATION, DECODE_DEGRADATION))
}

/// [`compose`] with the rate-match degradations `(prefill, decode)` given; `workers` is
/// `(Wp, Wd)`, `lengths` `(isl, osl, prefix)`.
pub fn compose_degraded(
    prefill: (&Row, &Worker),
    decode: (&Row, &Worker),
    ttft_p: f64,
    workers: (u32, u32),
    lengths: (u32, u32, u32),
    degradation: (f64, f64),
) -> Row {
    let (p, pw) = prefill;
    let (d, dw) = decode;
    let (wp, wd) = workers;
    let (isl, osl, prefix) = lengths;
    let seq_s = (p.f("seq/s") * f64::from(wp) * degradation.0)
        .min_py(d.f("seq/s") * f64::from(wd) * degradation.1);
    let gpus = p.f("num_total_gpus") as i64 * i64::from(wp) + d.f("num_total_gpus") as i64 * i64::from(wd);
    let seq_s_gpu = seq_s / gpus as f64;
    let tokens_s = seq_s * f64::from(osl);
    let tokens_s_gpu = tokens_s / gpus as f64;
    let decode_time = d.f("tpot") * f64::from(osl.saturating_sub(1));
    let request_latency = ttft_p + decode_time;
    let denom = ttft_p + decode_time;
    let power_w = if denom != 0.0 {
        (p.f("power_w") * ttft_p + d.f("power_w") * decode_time) / denom
    } else {
        0.0
    };
    let mut row = Row::new();
    row.set("model", pw.model());
    row.set("isl", isl);
    row.set("osl", osl);
    row.set("prefix", prefix);
    row.set("concurrency", d.get("concurrency").cloned().map_or(Val::Null, |c| mul(&c, wd)));
    row.set("request_rate", seq_s);
    for (tag, v, workers) in [("(p)", RoleView { row: p, worker: pw }, wp), ("(d)", RoleView { row: d, worker: dw }, wd)] {
        row.set(&format!("{tag}bs"), v.row.get("bs").cloned().unwrap_or(Val::Null));
        row.set(&format!("{tag}global_bs"), v.row.get("global_bs").cloned().unwrap_or(Val::Null));
        row.set(&format!("{tag}workers"), workers);
        let _ = v.worker;
    }
    row.set("ttft", ttft_p);
    row.set("tpot", d.f("tpot"));
    row.set("request_latency", request_latency);
    row.set("encoder_latency", 0.0);
    row.set("seq/s", seq_s);
    row.set("seq/s/gpu", seq_s_gpu);
    row.set("tokens/s", tokens_s);
    row.set("tokens/s/gpu", tokens_s_gpu);
    row.set("tokens/s/user", d.f("tokens/s/user"));
    row.set("(p)seq/s/worker", p.f("seq/s"));
    row.set("(d)seq/s/worker", d.f("seq/s"));
    row.set("num_total_gpus", gpus);
    for (tag, v) in [("(p)", RoleView { row: p, worker: pw }), ("(d)", RoleView { row: d, worker: dw })] {
        for key in ["tp", "pp", "dp", "moe_tp", "moe_ep"] {
            row.set(&format!("{tag}{key}"), v.row.get(key).cloned().unwrap_or(Val::Null));
        }
        if tag == "(p)" {
            row.set("(p)cp", v.row.get("cp").cloned().unwrap_or(Val::Int(1)));
        }
        for key in ["parallel", "gemm", "kvcache", "fmha", "moe", "comm", "memory", "backend", "version", "system"] {
            row.set(&format!("{tag}{key}"), v.row.get(key).cloned().unwrap_or(Val::Null));
        }
        let _ = v.worker;
    }
    row.set("(e)workers", 0_i64);
    row.set("(e)tp", 0_i64);
    row.set("(e)pp", 0_i64);
    row.set("(e)bs", 0_i64);
    row.set("(e)parallel", "");
    row.set("(e)memory", 0.0);
    row.set("power_w", power_w);
    row
}

/// `a × k` with Python's int/float rules.
fn mul(a: &Val, k: u32) -> Val {
    match a {
        Val::Int(i) => Val::Int(i * i64::from(k)),
        other => Val::Float(other.num().unwrap_or(0.0) * f64::from(k)),
    }
}

/// Python's `min(a, b)` for floats: `b` only when strictly smaller.
trait MinPy {
    fn min_py(self, other: f64) -> f64;
}
impl MinPy for f64 {
    fn min_py(self, other: f64) -> f64 {
        if other < self {
            other
        } else {
            self
        }
    }
}

/// Arguments of a `cli_estimate` disagg run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DisaggParams {
    /// Input tokens per request.
    pub isl: u32,
    /// Output tokens per request.
    pub osl: u32,
    /// Cached prefix tokens.
    pub prefix: u32,
    /// MTP acceptance (decode projection), when `nextn > 0`.
    pub accepted: Option<f64>,
    /// Prefill role knobs.
    pub prefill: RoleParams,
    /// Prefill workers.
    pub prefill_workers: u32,
    /// Decode role knobs.
    pub decode: RoleParams,
    /// Decode workers.
    pub decode_workers: u32,
}

/// Result of `cli_estimate` in disagg mode.
#[derive(Debug, Clone)]
pub struct DisaggEstimate {
    /// The composed, rounded row (`raw`; power hidden, coverage 0.0).
    pub row: Row,
    /// The prefill worker.
    pub prefill: WorkerRow,
    /// The decode worker.
    pub decode: WorkerRow,
}

/// `cli_estimate` in disagg mode (spec 50 §4): OOM or KV over budget in either worker is an
/// error (§4.3).
pub fn disagg_estimate(pw: &Worker, dw: &Worker, p: &DisaggParams) -> Result<DisaggEstimate> {
    let prefill = prefill_worker(pw, p.isl, p.prefix, &p.prefill)?;
    let decode = decode_worker(dw, p.isl, p.osl, p.accepted, &p.decode)?;
    for (v, w) in [(&prefill.verdict, pw), (&decode.verdict, dw)] {
        if v.oom || v.kv_over {
            return Err(ServingError::DisaggOutOfMemory {
                model: w.model().to_string(),
                system: w.system_name().to_string(),
            });
        }
    }
    let ttft_p = prefill.row.f("ttft") * TTFT_FACTOR;
    let mut row = compose(
        (&prefill.row, pw),
        (&decode.row, dw),
        ttft_p,
        p.prefill_workers,
        p.decode_workers,
        p.isl,
        p.osl,
        p.prefix,
    );
    row.round3();
    row.set("power_w", Val::Null);
    row.set("power_coverage", 0.0);
    Ok(DisaggEstimate { row, prefill, decode })
}
