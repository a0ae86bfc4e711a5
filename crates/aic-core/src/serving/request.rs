//! The JSON surface of the serving layer: one `cli_estimate` request in, the reference's
//! `EstimateResult` fields (plus memory record, verdicts and per-op lists) out. The bindings
//! (Python, C) pass compiled specs and model facts; everything numeric happens here.

use std::path::Path;
use std::sync::Arc;

use serde::Deserialize;
use serde_json::Value;

use crate::engine::{Engine, RunMode};
use super::error::Result;
use crate::error::AicError;
use crate::memory::ModelFacts;
use crate::spec::EngineSpec;

use super::agg::{agg_estimate, AggParams};
use super::checks;
use super::disagg::{disagg_estimate, DisaggParams, RoleParams};
use super::row::Row;
use super::static_mode::{static_estimate, StaticParams};
use super::worker::{MemoryGib, Worker, WorkerLabels};

/// A worker as the front end sends it: compiled spec (JSON text), model facts, labels.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct WorkerInput {
    /// The compiled EngineSpec, JSON text.
    pub spec: String,
    /// Model facts for the memory model.
    pub facts: ModelFacts,
    /// Labels the rows report.
    pub labels: WorkerLabels,
}

impl WorkerInput {
    /// Loads the engine and the system.
    pub fn load(&self, systems_path: Option<&Path>) -> Result<Worker> {
        self.load_with(systems_path, false)
    }

    /// Loads the engine and the system; `quant_transfer` turns on
    /// [`Engine::allow_quant_transfer`] (the calibrated estimate).
    pub fn load_with(&self, systems_path: Option<&Path>, quant_transfer: bool) -> Result<Worker> {
        let spec = EngineSpec::from_json(&self.spec)?;
        let root = spec
            .engine
            .systems_path
            .as_ref()
            .map(std::path::PathBuf::from)
            .or_else(|| systems_path.map(Path::to_path_buf))
            .or_else(crate::data::default_systems_path)
            .ok_or_else(|| AicError::value("no systems folder: pass systems_path or set AIC_SYSTEMS_PATH"))?;
        let mut engine = Engine::from_spec(spec, Some(&root))?;
        if quant_transfer {
            engine.allow_quant_transfer();
        }
        // The engine's database loaded this system from the same root: share it rather than
        // parse the YAML again (a sweep loads one worker per layout and role).
        let system = Arc::clone(&engine.database().system);
        Ok(Worker {
            engine: Arc::new(engine),
            facts: Arc::new(self.facts.clone()),
            system,
            labels: self.labels.clone(),
        })
    }
}

/// Per-role disagg knobs.
#[derive(Debug, Clone, Copy, Deserialize)]
pub struct RoleInput {
    /// Requests per worker.
    pub batch_size: u32,
    /// Worker count.
    pub num_workers: u32,
    /// KV-budget fraction override.
    #[serde(default)]
    pub free_gpu_memory_fraction: Option<f64>,
    /// KV length per request.
    #[serde(default)]
    pub max_seq_len: Option<u64>,
}

/// One `cli_estimate` request (spec 50 §1.1, after the front end's validation and compile).
#[derive(Debug, Clone, Deserialize)]
pub struct EstimateRequest {
    /// `static`, `static_ctx`, `static_gen`, `agg` or `disagg`.
    pub mode: String,
    /// Input tokens.
    pub isl: u32,
    /// Output tokens.
    pub osl: u32,
    /// Cached prefix tokens.
    #[serde(default)]
    pub prefix: u32,
    /// Requests per rank (static, agg).
    #[serde(default)]
    pub batch_size: u32,
    /// Agg context-token budget (`None` → isl).
    #[serde(default)]
    pub ctx_tokens: Option<u32>,
    /// Static decode stride.
    #[serde(default = "default_stride")]
    pub stride: u32,
    /// MTP acceptance (with `nextn > 0`).
    #[serde(default)]
    pub nextn_accepted: Option<f64>,
    /// KV-budget fraction override (agg).
    #[serde(default)]
    pub free_gpu_memory_fraction: Option<f64>,
    /// KV length per request (agg TRT-LLM).
    #[serde(default)]
    pub max_seq_len: Option<u64>,
    /// The worker (static, agg).
    #[serde(default)]
    pub worker: Option<WorkerInput>,
    /// Disagg prefill worker.
    #[serde(default)]
    pub prefill_worker: Option<WorkerInput>,
    /// Disagg decode worker.
    #[serde(default)]
    pub decode_worker: Option<WorkerInput>,
    /// Disagg prefill knobs.
    #[serde(default)]
    pub prefill: Option<RoleInput>,
    /// Disagg decode knobs.
    #[serde(default)]
    pub decode: Option<RoleInput>,
    /// The calibrated estimate (agg, disagg) instead of parity with the reference.
    #[serde(default)]
    pub calibrated: bool,
    /// Calibrated: the measured total concurrency (`None`: from the batch sizes).
    #[serde(default)]
    pub concurrency: Option<u32>,
    /// Calibrated: the constants document (`data/calibration/serving.json`).
    #[serde(default)]
    pub calibration: Option<Value>,
}

impl EstimateRequest {
    /// Checks every number of the request against its domain (see [`super::checks`]) before
    /// any engine is loaded: `isl`, `osl` and (static modes) `stride` and `batch_size` at least
    /// 1, the MTP acceptance finite and `≥ 0`, a memory fraction in `(0, 1]`, a KV slot of at
    /// least `isl + osl`, at least one worker and one request per disagg role, a measured
    /// concurrency of at least 1. (`prefix < isl`, the agg batch size and context budget keep
    /// the engine's and the reference's own errors.)
    pub fn check(&self) -> Result<()> {
        checks::positive_count("isl", self.isl.into(), "input tokens per request")?;
        checks::positive_count("osl", self.osl.into(), "output tokens per request, the first one included")?;
        if matches!(self.mode.as_str(), "static" | "static_ctx" | "static_gen") {
            checks::positive_count("stride", self.stride.into(), "decode steps each priced step stands for")?;
            checks::positive_count("batch_size", self.batch_size.into(), "requests per rank in the static batch")?;
        }
        if let Some(a) = self.nextn_accepted {
            checks::non_negative_number("nextn_accepted", a, "average accepted draft tokens per step")?;
        }
        checks::memory_fraction("free_gpu_memory_fraction", self.free_gpu_memory_fraction)?;
        checks::max_seq_len("max_seq_len", self.max_seq_len, self.isl, self.osl)?;
        for (role, input) in [("prefill", &self.prefill), ("decode", &self.decode)] {
            if let Some(r) = input {
                checks::positive_count(&format!("{role}_batch_size"), r.batch_size.into(), "requests per worker")?;
                checks::positive_count(&format!("{role}_num_workers"), r.num_workers.into(), "workers of that role")?;
                checks::memory_fraction(&format!("{role}_free_gpu_memory_fraction"), r.free_gpu_memory_fraction)?;
                checks::max_seq_len(&format!("{role}_max_seq_len"), r.max_seq_len, self.isl, self.osl)?;
            }
        }
        if let Some(c) = self.concurrency {
            checks::positive_count("concurrency", c.into(), "requests in flight")?;
        }
        Ok(())
    }

    /// The disagg knobs of the request; both roles are required.
    fn disagg_params(&self) -> Result<DisaggParams> {
        let role = |r: Option<RoleInput>, what: &str| {
            let r = r.ok_or_else(|| missing(what))?;
            Ok::<_, AicError>((
                RoleParams {
                    batch_size: r.batch_size,
                    max_seq_len: r.max_seq_len,
                    free_gpu_memory_fraction: r.free_gpu_memory_fraction,
                },
                r.num_workers,
            ))
        };
        let (prefill, prefill_workers) = role(self.prefill, "prefill")?;
        let (decode, decode_workers) = role(self.decode, "decode")?;
        Ok(DisaggParams {
            isl: self.isl,
            osl: self.osl,
            prefix: self.prefix,
            accepted: self.nextn_accepted,
            prefill,
            prefill_workers,
            decode,
            decode_workers,
        })
    }
}

fn default_stride() -> u32 {
    32
}

fn missing(what: &str) -> AicError {
    AicError::value(format!("serving request: {what} is required for this mode"))
}

fn ops_json(ops: &[(String, f64)]) -> String {
    let mut out = String::from("{");
    for (i, (k, v)) in ops.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        out.push_str(&format!("{}: {}", Value::from(k.as_str()), Value::from(*v)));
    }
    out.push('}');
    out
}

fn opt_str(v: &Option<String>) -> String {
    v.as_ref().map_or("null".to_string(), |s| Value::from(s.as_str()).to_string())
}

/// The `EstimateResult` summary fields plus `raw`.
#[allow(clippy::too_many_arguments)]
fn result_json(row: &Row, mode: &str, version: &str, batch_size: u32, ctx_tokens: u32, tp: u32, pp: u32, warning: &Option<String>) -> String {
    let v = |k: &str| row.get(k).map_or("null".to_string(), |_| {
        let mut single = Row::new();
        single.set(k, row.get(k).cloned().unwrap_or(super::row::Val::Null));
        let text = single.to_json_text();
        text[text.find(": ").unwrap_or(0) + 2..text.len() - 1].to_string()
    });
    format!(
        "{{\"ttft\": {}, \"tpot\": {}, \"power_w\": {}, \"mode\": {}, \"backend_version\": {}, \
         \"batch_size\": {batch_size}, \"ctx_tokens\": {ctx_tokens}, \"tp_size\": {tp}, \"pp_size\": {pp}, \
         \"kv_cache_warning\": {}, \"raw\": {}}}",
        v("ttft"),
        v("tpot"),
        v("power_w"),
        Value::from(mode),
        Value::from(version),
        opt_str(warning),
        row.to_json_text()
    )
}

fn memory_json(m: &MemoryGib, oom: bool, kv_over: bool) -> (String, String) {
    (m.to_json_text(), format!("{{\"oom\": {oom}, \"kv_cache_oom\": {kv_over}}}"))
}

/// Runs one `cli_estimate` request; the answer is JSON text
/// `{"result", "memory", "oom", "per_ops"}` (spec 50 §11's estimate-case layout). A request
/// that does not parse is an error naming the field at fault ([`super::request_json`]).
pub fn estimate_json(request: &str, systems_path: Option<&Path>) -> Result<String> {
    let req: EstimateRequest = super::request_json::parse("serving request", request)?;
    estimate(&req, systems_path)
}

/// Runs one parsed `cli_estimate` request (see [`estimate_json`]); the request is checked
/// first ([`EstimateRequest::check`]).
pub fn estimate(req: &EstimateRequest, systems_path: Option<&Path>) -> Result<String> {
    req.check()?;
    if req.calibrated {
        return calibrated_estimate(req, systems_path);
    }
    let accepted = req.nextn_accepted;
    match req.mode.as_str() {
        "static" | "static_ctx" | "static_gen" => {
            let w = req.worker.as_ref().ok_or_else(|| missing("worker"))?.load(systems_path)?;
            let mode = RunMode::parse(&req.mode)?;
            let p = StaticParams {
                mode,
                batch_size: req.batch_size,
                isl: req.isl,
                osl: req.osl,
                prefix: req.prefix,
                stride: req.stride,
                scale: 1.0,
                kv_seq: None,
            };
            let est = static_estimate(&w, &p, accepted)?;
            let (tp, pp, _) = w.tp_pp_dp();
            let result = result_json(&est.eval.row, &req.mode, w.version(), req.batch_size, req.isl, tp, pp, &est.kv_cache_warning);
            let (memory, oom) = memory_json(&est.eval.memory, est.verdict.oom, est.verdict.kv_over);
            let per_ops = format!(
                "{{\"context\": {}, \"generation\": {}}}",
                ops_json(&est.eval.context),
                ops_json(&est.eval.generation)
            );
            Ok(format!("{{\"result\": {result}, \"memory\": {memory}, \"oom\": {oom}, \"per_ops\": {per_ops}}}"))
        }
        "agg" => {
            let w = req.worker.as_ref().ok_or_else(|| missing("worker"))?.load(systems_path)?;
            let p = AggParams {
                batch_size: req.batch_size,
                ctx_tokens: req.ctx_tokens.unwrap_or(req.isl),
                isl: req.isl,
                osl: req.osl,
                prefix: req.prefix,
                tokens_per_iteration: if w.nextn() > 0 { 1.0 + accepted.unwrap_or(0.0) } else { 1.0 },
                max_seq_len: if w.backend() == crate::spec::Backend::Trtllm { req.max_seq_len } else { None },
                free_gpu_memory_fraction: req.free_gpu_memory_fraction,
            };
            let est = agg_estimate(&w, &p)?;
            let (tp, pp, _) = w.tp_pp_dp();
            let result = result_json(&est.eval.row, "agg", w.version(), req.batch_size, p.ctx_tokens, tp, pp, &est.kv_cache_warning);
            let (memory, oom) = memory_json(&est.eval.memory, est.eval.verdict.oom, est.eval.verdict.kv_over);
            let per_ops = agg_per_ops(&w, &p, &est.eval.schedule)?;
            Ok(format!("{{\"result\": {result}, \"memory\": {memory}, \"oom\": {oom}, \"per_ops\": {per_ops}}}"))
        }
        "disagg" => {
            let pw = req.prefill_worker.as_ref().ok_or_else(|| missing("prefill_worker"))?.load(systems_path)?;
            let dw = req.decode_worker.as_ref().ok_or_else(|| missing("decode_worker"))?.load(systems_path)?;
            let p = req.disagg_params()?;
            let est = disagg_estimate(&pw, &dw, &p)?;
            let (tp, pp, _) = pw.tp_pp_dp();
            let result = result_json(&est.row, "disagg", pw.version(), p.prefill.batch_size, 0, tp, pp, &None);
            // Empty phase dicts are left out (osl = 1: no decode entries).
            let mut per_ops = format!("{{\"prefill\": {}", ops_json(&est.prefill.eval.context));
            if !est.decode.eval.generation.is_empty() {
                per_ops.push_str(&format!(", \"decode\": {}", ops_json(&est.decode.eval.generation)));
            }
            per_ops.push('}');
            Ok(format!("{{\"result\": {result}, \"memory\": null, \"oom\": null, \"per_ops\": {per_ops}}}"))
        }
        other => Err(AicError::value(format!(
            "Unsupported estimate mode: '{other}'. Use 'agg', 'disagg', 'afd', 'static', 'static_ctx', or 'static_gen'."
        )).into()),
    }
}

/// Agg `per_ops`: the mixed step's and the decode step's per-op dicts and the schedule (§3.5).
fn agg_per_ops(w: &Worker, p: &AggParams, s: &super::agg::Schedule) -> Result<String> {
    let [shared, ctx_attn, gen_attn] =
        w.engine.mixed_step_breakdown_per_op(p.ctx_tokens, s.g, p.isl, p.osl, p.prefix, 1.0, 1.0)?;
    let mut mix = ops_json(&shared.into_iter().map(|o| (o.name, o.latency_ms)).collect::<Vec<_>>());
    mix.pop();
    // The attention parts are summed with Python's `sum` (integer 0 when the part is empty).
    for (name, part) in [("context_attention (scaled)", &ctx_attn), ("generation_attention", &gen_attn)] {
        let value = if part.is_empty() {
            "0".to_string()
        } else {
            Value::from(part.iter().fold(0.0, |a, o| a + o.latency_ms)).to_string()
        };
        if mix.len() > 1 {
            mix.push_str(", ");
        }
        mix.push_str(&format!("{}: {value}", Value::from(name)));
    }
    mix.push('}');
    let mut out = format!("{{\"mix_step\": {mix}");
    if s.genonly_reqs > 0 {
        let gen: Vec<(String, f64)> = w
            .engine
            .decode_step_per_op(s.genonly_reqs, p.isl, p.osl, 1.0)?
            .into_iter()
            .map(|o| (o.name, o.latency_ms))
            .collect();
        out.push_str(&format!(", \"genonly_step\": {}", ops_json(&gen)));
    }
    let n = f64::from(w.nextn());
    let sched = [
        ("num_mix_steps", s.mix_steps),
        ("num_genonly_steps", s.genonly_steps),
        ("mix_step_latency_ms", s.l_mix),
        ("genonly_step_latency_ms", s.l_gen),
        ("mix_step_energy_wms", 0.0),
        ("genonly_step_energy_wms", 0.0),
        ("mix_efficiency", 1.0),
        ("decode_iterations", s.d),
        ("mix_context_tokens", f64::from(p.ctx_tokens)),
        ("mix_decode_requests", f64::from(s.g)),
        ("mix_decode_query_tokens", f64::from(s.g) * (n + 1.0)),
        ("decode_tokens_per_iteration", p.tokens_per_iteration),
    ];
    let sched: Vec<(String, f64)> = sched.iter().map(|(k, v)| (k.to_string(), *v)).collect();
    out.push_str(&format!(", \"scheduling\": {}}}", ops_json(&sched)));
    Ok(out)
}

/// The agg parameters of a request.
fn agg_params(req: &EstimateRequest, w: &Worker) -> AggParams {
    AggParams {
        batch_size: req.batch_size,
        ctx_tokens: req.ctx_tokens.unwrap_or(req.isl),
        isl: req.isl,
        osl: req.osl,
        prefix: req.prefix,
        tokens_per_iteration: if w.nextn() > 0 { 1.0 + req.nextn_accepted.unwrap_or(0.0) } else { 1.0 },
        max_seq_len: if w.backend() == crate::spec::Backend::Trtllm { req.max_seq_len } else { None },
        free_gpu_memory_fraction: req.free_gpu_memory_fraction,
    }
}

/// Replaces the latency figures of a result row by the calibrated ones.
fn set_calibrated(row: &mut Row, f: &super::calibrated::CalibratedFigures, osl: u32) {
    row.set("ttft", f.ttft);
    row.set("tpot", f.tpot);
    row.set("request_latency", f.ttft + f.tpot * f64::from(osl.saturating_sub(1)));
    row.set("tokens/s/user", if osl > 1 && f.tpot > 0.0 { 1000.0 / f.tpot } else { 0.0 });
}

/// A calibrated request (agg or disagg): the parity evaluation without the memory stop, the
/// corrections of [`super::calibrated`], and a `calibration` entry in `result`.
fn calibrated_estimate(req: &EstimateRequest, systems_path: Option<&Path>) -> Result<String> {
    use super::calibrated::{calibrated_agg, calibrated_disagg, from_request};
    let cal = from_request(req.calibration.as_ref())?;
    let (text, figures) = match req.mode.as_str() {
        "agg" => {
            let w = req.worker.as_ref().ok_or_else(|| missing("worker"))?.load_with(systems_path, true)?;
            let p = agg_params(req, &w);
            let (mut eval, figures) = calibrated_agg(&w, &p, &cal, req.concurrency)?;
            set_calibrated(&mut eval.row, &figures, req.osl);
            eval.row.set("power_w", super::row::Val::Null);
            let (tp, pp, _) = w.tp_pp_dp();
            let result = result_json(&eval.row, "agg", w.version(), req.batch_size, p.ctx_tokens, tp, pp, &None);
            let (memory, oom) = memory_json(&eval.memory, eval.verdict.oom, eval.verdict.kv_over);
            (format!("{{\"result\": {result}, \"memory\": {memory}, \"oom\": {oom}, \"per_ops\": null}}"), figures)
        }
        "disagg" => {
            let pw = req.prefill_worker.as_ref().ok_or_else(|| missing("prefill_worker"))?.load_with(systems_path, true)?;
            let dw = req.decode_worker.as_ref().ok_or_else(|| missing("decode_worker"))?.load_with(systems_path, true)?;
            let p = req.disagg_params()?;
            let (mut row, figures) = calibrated_disagg(&pw, &dw, &p, &cal, req.concurrency)?;
            set_calibrated(&mut row, &figures, req.osl);
            row.set("power_w", super::row::Val::Null);
            let (tp, pp, _) = pw.tp_pp_dp();
            let result = result_json(&row, "disagg", pw.version(), p.prefill.batch_size, 0, tp, pp, &None);
            (format!("{{\"result\": {result}, \"memory\": null, \"oom\": null, \"per_ops\": null}}"), figures)
        }
        other => {
            return Err(AicError::value(format!(
                "calibrated estimate: mode '{other}' is not calibrated (use 'agg' or 'disagg')"
            )).into())
        }
    };
    let mut out: Value = serde_json::from_str(&text)
        .map_err(|e| AicError::value(format!("calibrated estimate: internal JSON error: {e}")))?;
    out["result"]["calibration"] = figures.to_json();
    Ok(out.to_string())
}
