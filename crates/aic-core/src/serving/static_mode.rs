//! Static modes (`static`, `static_ctx`, `static_gen`; spec 50 §2): one static step-engine run,
//! per-op folded, turned into TTFT / TPOT / throughput. The disagg workers (§4.1) and the
//! sweep's worker candidates reuse [`static_eval`] with their latency correction scale.

use crate::engine::{OpResult, RunMode, StaticRun};
use super::error::Result;
use crate::memory::MtpScaling;

use super::row::{Row, Val};
use super::worker::{MemoryArgs, MemoryGib, Verdict, Worker, BudgetRole};

/// Arguments of one static evaluation.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StaticParams {
    /// Which phases run.
    pub mode: RunMode,
    /// Requests per rank.
    pub batch_size: u32,
    /// Input tokens per request (prefix included).
    pub isl: u32,
    /// Output tokens per request.
    pub osl: u32,
    /// Cached prefix tokens.
    pub prefix: u32,
    /// Decode quadrature stride.
    pub stride: u32,
    /// Latency correction multiplied into every per-op latency before folding (1.0 static,
    /// 1.1 disagg prefill, 1.08 disagg decode).
    pub scale: f64,
    /// KV length per request for the memory model; `None` takes the mode's default (§5.2).
    pub kv_seq: Option<u64>,
}

/// What one static evaluation produced.
#[derive(Debug, Clone)]
pub struct StaticEval {
    /// The §8 static row (unrounded, unprojected), with `power_w` ungated.
    pub row: Row,
    /// Folded context per-op latencies (scaled).
    pub context: Vec<(String, f64)>,
    /// Folded generation per-op latencies (scaled).
    pub generation: Vec<(String, f64)>,
    /// Memory record.
    pub memory: MemoryGib,
    /// Latency-weighted share of ops with energy (§7).
    pub power_coverage: f64,
    /// The energy-weighted power (ungated), W.
    pub power_w: f64,
}

/// Folds a per-op list by name in list order, each latency × `s` (spec 50 §2.1).
fn fold(ops: &[OpResult], s: f64) -> (Vec<(String, f64)>, Vec<(String, f64)>) {
    let mut lat: Vec<(String, f64)> = Vec::with_capacity(ops.len());
    let mut energy: Vec<(String, f64)> = Vec::with_capacity(ops.len());
    for op in ops {
        match lat.iter().position(|(n, _)| *n == op.name) {
            Some(i) => {
                lat[i].1 += op.latency_ms * s;
                energy[i].1 += op.energy_wms * s;
            }
            None => {
                lat.push((op.name.clone(), op.latency_ms * s));
                energy.push((op.name.clone(), op.energy_wms * s));
            }
        }
    }
    (lat, energy)
}

/// Python's `sum(d.values())`: the integer 0 for an empty dict, else a float.
fn py_sum(values: &[(String, f64)]) -> Val {
    if values.is_empty() {
        return Val::Int(0);
    }
    let mut total = 0.0;
    for (_, v) in values {
        total += v;
    }
    Val::Float(total)
}

/// Adds two values with Python's int/float rules.
fn add(a: &Val, b: &Val) -> Val {
    match (a, b) {
        (Val::Int(x), Val::Int(y)) => Val::Int(x + y),
        _ => Val::Float(a.num().unwrap_or(0.0) + b.num().unwrap_or(0.0)),
    }
}

/// The memory arguments of a static role (spec 50 §5.2).
pub fn static_memory_args(p: &StaticParams) -> MemoryArgs {
    let b = u64::from(p.batch_size);
    let (isl, osl) = (u64::from(p.isl), u64::from(p.osl));
    match p.mode {
        RunMode::Static => MemoryArgs {
            batch: b,
            tokens: 0,
            kv_seq: p.kv_seq.unwrap_or(isl + osl),
            mtp: MtpScaling::Mixed { decode_tokens: 0 },
        },
        RunMode::StaticCtx => MemoryArgs {
            batch: b,
            tokens: 0,
            kv_seq: p.kv_seq.unwrap_or(isl + 1),
            mtp: MtpScaling::Mixed { decode_tokens: 0 },
        },
        RunMode::StaticGen => MemoryArgs {
            batch: b,
            tokens: b,
            kv_seq: p.kv_seq.unwrap_or(isl + osl),
            mtp: MtpScaling::DecodeOnly,
        },
    }
}

/// One static evaluation: step engine, folding, the §2.2 formulas and the memory model.
pub fn static_eval(w: &Worker, p: &StaticParams) -> Result<StaticEval> {
    let run = StaticRun {
        batch_size: p.batch_size,
        beam_width: 1,
        isl: p.isl,
        osl: p.osl,
        prefix: p.prefix,
        seq_scale: 1.0,
        gen_scale: 1.0,
        mode: p.mode,
        stride: p.stride,
    };
    let (ctx_ops, gen_ops) = w.engine.run_static_per_op(&run)?;
    let (context, ctx_energy) = fold(&ctx_ops, p.scale);
    let (generation, gen_energy) = fold(&gen_ops, p.scale);
    let cl = py_sum(&context);
    let gl = py_sum(&generation);

    let (tp, pp, dp) = w.tp_pp_dp();
    let b = i64::from(p.batch_size);
    let osl = i64::from(p.osl);
    let ttft = add(&Val::Int(0), &cl);
    let gl_f = gl.num().unwrap_or(0.0);
    let cl_f = cl.num().unwrap_or(0.0);
    let tpot = if osl <= 1 { 0.0 } else { gl_f / (osl - 1) as f64 };
    let mut request_latency = ttft.num().unwrap_or(0.0) + tpot * (osl - 1).max(0) as f64;
    if request_latency == 0.0 {
        request_latency = 0.0 + cl_f + gl_f;
    }
    let global_bs = b * i64::from(dp);
    let seq_s = if request_latency == 0.0 {
        0.0
    } else {
        global_bs as f64 / request_latency * 1000.0 * f64::from(pp)
    };
    // Static rows divide by tp · pp · dp only (spec 50 §2.2), also for a context-parallel
    // worker: its `num_total_gpus` counts the cp GPUs, its per-GPU rates do not. The disagg
    // sweep orders prefill candidates by this `seq/s/gpu` (§9.4), which decides tied pairs
    // (deploy golden q30a3b_b200_sglang_dynamo: the cp2 prefill row wins the tie).
    let seq_s_gpu = seq_s / f64::from(tp) / f64::from(pp) / f64::from(dp);
    let tokens_s = match p.mode {
        RunMode::Static => seq_s * osl as f64,
        RunMode::StaticGen => seq_s * (osl - 1) as f64,
        RunMode::StaticCtx => seq_s * 1.0,
    };
    let tokens_s_gpu = tokens_s / f64::from(tp) / f64::from(pp) / f64::from(dp);
    let tokens_s_user = if tpot == 0.0 { 0.0 } else { 1000.0 / tpot };

    // Power (§7): coverage of ops with energy, and the energy-weighted average.
    let mut covered = 0.0;
    let mut all = 0.0;
    let mut energy = 0.0;
    for ((_, lat), (_, e)) in context.iter().zip(&ctx_energy).chain(generation.iter().zip(&gen_energy)) {
        all += lat;
        if *e > 0.0 {
            covered += lat;
        }
        energy += e;
    }
    let power_coverage = if all > 0.0 { (covered / all).clamp(0.0, 1.0) } else { 0.0 };
    let denom = cl_f + gl_f;
    let power_w = if denom > 0.0 { energy / denom } else { 0.0 };

    let memory = w.memory(
        u64::from(p.isl),
        u64::from(p.osl),
        u64::from(p.prefix),
        static_memory_args(p),
    )?;

    let mut row = Row::new();
    row.set("model", w.model());
    row.set("isl", p.isl);
    row.set("osl", p.osl);
    row.set("prefix", p.prefix);
    row.set("concurrency", global_bs);
    row.set("request_rate", 0.0);
    row.set("bs", p.batch_size);
    row.set("global_bs", global_bs);
    row.set("ttft", ttft);
    row.set("tpot", tpot);
    row.set("seq/s", seq_s);
    row.set("seq/s/gpu", seq_s_gpu);
    row.set("tokens/s", tokens_s);
    row.set("tokens/s/gpu", tokens_s_gpu);
    row.set("tokens/s/user", tokens_s_user);
    row.set("request_latency", request_latency);
    row.set("encoder_latency", 0_i64);
    row.set("encoder_memory", 0.0);
    row.set("context_latency", cl);
    row.set("generation_latency", gl);
    w.set_layout_columns(&mut row);
    row.set("memory", memory.total);
    row.set("backend", w.backend().as_str());
    row.set("version", w.version());
    row.set("system", w.system_name());
    row.set("power_w", power_w);
    Ok(StaticEval { row, context, generation, memory, power_coverage, power_w })
}

/// Which speculative-decoding projection a static row gets (spec 50 §6).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProjectionRole {
    /// `static`: throughputs scale by the request-latency ratio.
    Static,
    /// `static_gen` and the disagg decode worker: throughputs scale by `p`.
    Decode,
}

/// The MTP projection of a rounded static row with `p = 1 + accepted` (spec 50 §6): the row
/// is rounded, projected and rounded again.
pub fn project_mtp(row: &mut Row, p: f64, osl: u32, role: ProjectionRole) {
    row.round3();
    let old_rl = row.f("request_latency");
    let tpot = row.f("tpot") / p;
    row.set("tpot", tpot);
    row.set("generation_latency", row.f("generation_latency") / p);
    let rl = row.f("ttft") + tpot * f64::from(osl.saturating_sub(1));
    row.set("request_latency", rl);
    let ratio = match role {
        ProjectionRole::Static => {
            if rl == 0.0 {
                1.0
            } else {
                old_rl / rl
            }
        }
        ProjectionRole::Decode => p,
    };
    for key in ["request_rate", "seq/s", "seq/s/gpu", "tokens/s", "tokens/s/gpu"] {
        row.set(key, row.f(key) * ratio);
    }
    row.set("tokens/s/user", row.f("tokens/s/user") * p);
    row.round3();
}

/// Result of a `cli_estimate` static mode.
#[derive(Debug, Clone)]
pub struct StaticEstimate {
    /// The evaluation (its row is the reported `raw`, projected for MTP, power gated).
    pub eval: StaticEval,
    /// OOM verdict (never an error in static modes, §2.4).
    pub verdict: Verdict,
    /// The OOM warning text, if any.
    pub kv_cache_warning: Option<String>,
}

/// `cli_estimate` in a static mode (spec 50 §2): the row, the memory record, the OOM warning.
/// `accepted` is the MTP acceptance when `nextn > 0` (projection only when it is > 0).
pub fn static_estimate(w: &Worker, p: &StaticParams, accepted: Option<f64>) -> Result<StaticEstimate> {
    let mut eval = static_eval(w, p)?;
    let verdict = w.verdict(&eval.memory, None, BudgetRole::Worker);
    let kv_cache_warning = verdict.oom.then(|| {
        let (tp, pp, dp) = w.tp_pp_dp();
        format!(
            "OOM: the model '{}' does not fit in GPU memory on system '{}' with the given \
             parallelism (tp={tp}, pp={pp}, dp={dp}) and batch_size={}. Reduce batch_size, \
             increase tp/pp, use quantization, or pick a system with more VRAM per GPU.",
            w.model(),
            w.system_name(),
            p.batch_size
        )
    });
    // The reported row: power gated on coverage (§7), then the MTP projection (§6).
    let gated = if eval.power_coverage >= 0.9 { Val::Float(eval.power_w) } else { Val::Null };
    eval.row.set("power_w", gated);
    if let Some(a) = accepted.filter(|a| *a > 0.0 && w.nextn() > 0) {
        let role = match p.mode {
            RunMode::Static => Some(ProjectionRole::Static),
            RunMode::StaticGen => Some(ProjectionRole::Decode),
            RunMode::StaticCtx => None,
        };
        if let Some(role) = role {
            project_mtp(&mut eval.row, 1.0 + a, p.osl, role);
        }
    }
    eval.row.set("power_coverage", eval.power_coverage);
    Ok(StaticEstimate { eval, verdict, kv_cache_warning })
}
