//! Aggregated serving (`agg`, spec 50 §3): the continuous-batching model. A request's life is
//! `S` mixed iterations (a context chunk of `C` tokens plus `g` decodes) followed by decode-only
//! iterations; TTFT and TPOT come from one mixed step and one decode step of the engine.

use super::error::Result;
use crate::memory::MtpScaling;
use crate::spec::Backend;

use super::error::ServingError;
use super::numeric::{py_floordiv, py_float_str};
use super::row::{Row, Val};
use super::worker::{BudgetRole, MemoryArgs, MemoryGib, Verdict, Worker};

/// Arguments of one agg evaluation.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AggParams {
    /// Requests resident per attention-DP rank.
    pub batch_size: u32,
    /// Per-iteration context-token budget `C`.
    pub ctx_tokens: u32,
    /// Input tokens per request (prefix included).
    pub isl: u32,
    /// Output tokens per request.
    pub osl: u32,
    /// Cached prefix tokens.
    pub prefix: u32,
    /// Tokens per decode iteration `p` (1 + accepted drafts with MTP, else 1.0).
    pub tokens_per_iteration: f64,
    /// KV length per request for the memory model (TRT-LLM only; `None` → `isl + osl`).
    pub max_seq_len: Option<u64>,
    /// KV-budget fraction override.
    pub free_gpu_memory_fraction: Option<f64>,
}

/// The schedule of §3.2 and the step latencies of §3.3.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Schedule {
    /// Mixed iterations.
    pub mix_steps: f64,
    /// Decode-only iterations.
    pub genonly_steps: f64,
    /// Requests in a decode-only iteration.
    pub genonly_reqs: u32,
    /// Mixed iterations counted in TPOT.
    pub tpot_mix_steps: f64,
    /// Decodes riding in a mixed step.
    pub g: u32,
    /// Decode iterations per request.
    pub d: f64,
    /// Iterations to push all prompts through.
    pub s: f64,
    /// Mixed-step latency, ms.
    pub l_mix: f64,
    /// Decode-only step latency, ms.
    pub l_gen: f64,
}

/// One agg evaluation.
#[derive(Debug, Clone)]
pub struct AggEval {
    /// The §8 agg row (unrounded), `power_w` ungated (0.0 without energy).
    pub row: Row,
    /// Schedule and step latencies.
    pub schedule: Schedule,
    /// Memory record.
    pub memory: MemoryGib,
    /// Verdicts.
    pub verdict: Verdict,
}

/// Schedules the agg run and calls the two engine steps (§3.2, §3.3).
pub fn schedule(w: &Worker, p: &AggParams) -> Result<Schedule> {
    if p.ctx_tokens == 0 {
        return Err(ServingError::ZeroCtxTokens);
    }
    if p.batch_size == 0 {
        return Err(ServingError::BadArgument(
            "batch_size must be at least 1 for agg mode (requests resident per rank)".into(),
        ));
    }
    let vllm = w.backend() == Backend::Vllm;
    let (isl, osl, c, b) = (f64::from(p.isl), i64::from(p.osl), f64::from(p.ctx_tokens), p.batch_size);
    let d = 1.0 + (osl - 1).max(0) as f64 / p.tokens_per_iteration;
    let s = ((f64::from(p.isl) * f64::from(b)) / c).ceil();
    let (mix_steps, g, genonly_steps, genonly_reqs, tpot_mix_steps);
    if b > 1 {
        let bf = f64::from(b);
        g = if vllm || s < d {
            (i64::from(b) - (c / isl).ceil() as i64).max(1) as u32
        } else {
            (py_floordiv(bf, s / d) as i64).max(1) as u32
        };
        mix_steps = s;
        if s >= d {
            genonly_steps = 0.0;
            genonly_reqs = 0;
            tpot_mix_steps = s;
        } else {
            genonly_steps = d - s;
            genonly_reqs = b;
            tpot_mix_steps = if vllm { s } else { (s - 3.0).max(1.0) };
        }
    } else {
        mix_steps = 1.0;
        g = 0;
        genonly_steps = (d - 1.0).max(0.0);
        genonly_reqs = 1;
        tpot_mix_steps = 0.0;
    }
    let l_mix = w.engine.mixed_step_breakdown(p.ctx_tokens, g, p.isl, p.osl, p.prefix, 1.0, 1.0)?[0];
    let l_gen = if genonly_reqs > 0 {
        w.engine.decode_step_latency_ms(genonly_reqs, p.isl, p.osl, 1.0)?
    } else {
        0.0
    };
    Ok(Schedule { mix_steps, genonly_steps, genonly_reqs, tpot_mix_steps, g, d, s, l_mix, l_gen })
}

/// The memory arguments of agg (spec 50 §5.2), `num_gen_reqs` as in §3.5.
fn agg_memory(w: &Worker, p: &AggParams) -> Result<MemoryGib> {
    let (isl, osl, prefix) = (u64::from(p.isl), u64::from(p.osl), u64::from(p.prefix));
    let b = u64::from(p.batch_size);
    let c = u64::from(p.ctx_tokens);
    if w.backend() == Backend::Trtllm {
        let args = MemoryArgs {
            batch: b,
            tokens: 8192,
            kv_seq: p.max_seq_len.unwrap_or(isl + osl),
            mtp: MtpScaling::DecodeOnly,
        };
        return w.memory(isl, osl, prefix, args);
    }
    if b > 1 {
        let ctx_reqs = (f64::from(p.ctx_tokens) / f64::from(p.isl)).ceil();
        let gen_reqs = (b as f64 - ctx_reqs) as i64;
        let tokens = (gen_reqs + c as i64).max(0) as u64;
        let args = MemoryArgs {
            batch: b,
            tokens,
            kv_seq: isl + osl,
            mtp: MtpScaling::Mixed { decode_tokens: gen_reqs.max(0) as u64 },
        };
        return w.memory(isl, osl, prefix, args);
    }
    let first = w.memory(
        isl,
        osl,
        prefix,
        MemoryArgs { batch: 1, tokens: c, kv_seq: isl + osl, mtp: MtpScaling::Mixed { decode_tokens: 0 } },
    )?;
    if osl > 1 {
        let second = w.memory(
            isl,
            osl,
            prefix,
            MemoryArgs { batch: 1, tokens: 1, kv_seq: isl + osl, mtp: MtpScaling::DecodeOnly },
        )?;
        if second.total > first.total {
            return Ok(second);
        }
    }
    Ok(first)
}

/// One agg evaluation (§3.4, §3.5) with its memory and verdicts; no error for OOM here.
pub fn agg_eval(w: &Worker, p: &AggParams) -> Result<AggEval> {
    let sch = schedule(w, p)?;
    let vllm = w.backend() == Backend::Vllm;
    let b = i64::from(p.batch_size);
    let osl = i64::from(p.osl);
    let (isl, c) = (f64::from(p.isl), f64::from(p.ctx_tokens));
    let overhead = if vllm { w.facts.num_layers as f64 * 0.8 } else { 0.0 };
    let qf = if vllm {
        if b <= 1 {
            1.0
        } else {
            (1.0 + (b as f64).log2() / 8.0).min(2.0)
        }
    } else {
        (2.0 + (sch.s - 3.0) / 2.0 / 10.0).min(4.0)
    };
    let ttft = 0.0 + (sch.l_mix * (isl / c).ceil() + overhead) * qf;
    let steps = sch.tpot_mix_steps + sch.genonly_steps;
    let tpot = if steps <= 0.0 {
        0.0
    } else {
        (sch.l_mix * sch.tpot_mix_steps + sch.l_gen * sch.genonly_steps) / steps / p.tokens_per_iteration
    };
    let t_total = 0.0 + sch.mix_steps * sch.l_mix + sch.genonly_steps * sch.l_gen;
    let mut x = if osl > 1 && t_total > 0.0 {
        1000.0 / t_total * b as f64 * (osl - 1) as f64
    } else {
        0.0
    };
    let request_latency = ttft + tpot * (osl - 1).max(0) as f64;
    if vllm && request_latency > 0.0 {
        let cap = (b * (osl - 1).max(0)) as f64 * 1000.0 / request_latency;
        if cap < x {
            x = cap;
        }
    }
    let (tp, pp, dp) = w.tp_pp_dp();
    let scale = i64::from(pp * dp);
    let tokens_s = x * scale as f64;
    let seq_s = if osl > 1 { tokens_s / (osl - 1) as f64 } else { 0.0 };
    let cp = w.cp();
    let tokens_s_gpu = tokens_s / f64::from(pp) / f64::from(tp) / f64::from(dp) / f64::from(cp);
    let seq_s_gpu = seq_s / f64::from(pp) / f64::from(tp) / f64::from(dp) / f64::from(cp);
    let tokens_s_user = if osl > 1 && tpot > 0.0 { 1000.0 / tpot } else { 0.0 };
    let (num_ctx, num_gen, num_tokens) = if b > 1 {
        let ctx = (c / isl).ceil();
        let gen = b as f64 - ctx;
        (Val::Float(ctx), Val::Float(gen), Val::Float(gen + c))
    } else {
        (Val::Int(1), Val::Int(1), Val::Int(i64::from(p.ctx_tokens)))
    };
    let balance = f64::from(p.isl) * b as f64 / c / sch.d;

    let memory = agg_memory(w, p)?;
    let verdict = w.verdict(&memory, p.free_gpu_memory_fraction, BudgetRole::Agg);

    let mut row = Row::new();
    row.set("model", w.model());
    row.set("isl", p.isl);
    row.set("osl", p.osl);
    row.set("prefix", p.prefix);
    row.set("concurrency", b * scale);
    row.set("request_rate", seq_s);
    row.set("bs", p.batch_size);
    row.set("global_bs", b * i64::from(dp));
    row.set("ttft", ttft);
    row.set("tpot", tpot);
    row.set("request_latency", request_latency);
    row.set("encoder_latency", 0_i64);
    row.set("encoder_memory", 0.0);
    row.set("seq/s", seq_s);
    row.set("seq/s/gpu", seq_s_gpu);
    row.set("tokens/s", tokens_s);
    row.set("tokens/s/gpu", tokens_s_gpu);
    row.set("tokens/s/user", tokens_s_user);
    w.set_layout_columns(&mut row);
    row.set("memory", memory.total);
    row.set("balance_score", balance);
    row.set("num_ctx_reqs", num_ctx);
    row.set("num_gen_reqs", num_gen.clone());
    row.set("num_tokens", num_tokens);
    row.set("ctx_tokens", p.ctx_tokens);
    row.set("gen_tokens", num_gen);
    row.set("backend", w.backend().as_str());
    row.set("version", w.version());
    row.set("system", w.system_name());
    row.set("power_w", 0.0);
    Ok(AggEval { row, schedule: sch, memory, verdict })
}

/// Result of `cli_estimate` in agg mode.
#[derive(Debug, Clone)]
pub struct AggEstimate {
    /// The evaluation; its row is the reported `raw` (power hidden, coverage 0.0).
    pub eval: AggEval,
    /// The KV-budget warning, if any.
    pub kv_cache_warning: Option<String>,
}

/// `cli_estimate` in agg mode (spec 50 §3, §5.4): OOM is an error, KV over budget a warning.
pub fn agg_estimate(w: &Worker, p: &AggParams) -> Result<AggEstimate> {
    let mut eval = agg_eval(w, p)?;
    if eval.verdict.oom {
        let (tp, pp, dp) = w.tp_pp_dp();
        return Err(ServingError::AggOutOfMemory {
            model: w.model().to_string(),
            system: w.system_name().to_string(),
            tp,
            pp,
            dp,
        });
    }
    let kv_cache_warning = eval.verdict.kv_over.then(|| {
        let f = p.free_gpu_memory_fraction.map_or("backend default".to_string(), py_float_str);
        format!(
            "Requested batch_size ({}) exceeds estimated KV cache capacity \
             (free_gpu_memory_fraction={f}). The serving runtime will queue excess requests, \
             causing significantly higher TTFT and inaccurate TPOT.",
            p.batch_size
        )
    });
    eval.row.set("power_w", Val::Null);
    eval.row.set("power_coverage", 0.0);
    Ok(AggEstimate { eval, kv_cache_warning })
}
