//! The KV-cache capacity estimate (spec 41 §6): request validation, the native path over a
//! compiled spec, the budget → bytes/tokens answer, and the tolerance margin and block count
//! of §8.

use serde::{Deserialize, Serialize};

use crate::data::system::SystemSpec;
use crate::error::{AicError, Result};
use crate::spec::{Backend, EngineConfig, EngineSpec};

use super::facts::ModelFacts;
use super::kv::KvCacheModel;
use super::naive::naive_estimate;
use super::usage::{memory_usage, spec_kv_quant, MemoryUsageParams, MtpScaling};

/// Default share of free memory the naive fallback gives the KV cache.
pub const DEFAULT_NAIVE_KV_RESERVATION: f64 = 0.80;

fn default_reservation() -> f64 {
    DEFAULT_NAIVE_KV_RESERVATION
}

/// Which memory the KV-cache fraction is taken of (`of_free` for TRT-LLM, `of_total` for
/// vLLM and SGLang). JSON: `{"kind": "of_total", "value": 0.9}`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", content = "value", rename_all = "snake_case")]
pub enum MemoryFraction {
    /// Budget = `C · f − non_kv`.
    OfTotal(f64),
    /// Budget = `(C − non_kv) · f`.
    OfFree(f64),
}

impl MemoryFraction {
    /// The wire name of the kind.
    pub fn kind(&self) -> &'static str {
        match self {
            MemoryFraction::OfTotal(_) => "of_total",
            MemoryFraction::OfFree(_) => "of_free",
        }
    }

    /// The fraction `f`.
    pub fn value(&self) -> f64 {
        match self {
            MemoryFraction::OfTotal(f) | MemoryFraction::OfFree(f) => *f,
        }
    }
}

/// What to estimate: the serving engine's token budget and memory policy (spec 41 §6.1; the
/// model, system, parallelism and quantization come from the compiled spec).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KvCacheRequest {
    /// Per-iteration token budget; sizes the activations.
    pub max_num_tokens: u64,
    /// Maximum batch size (only used when `max_num_tokens` is 0).
    pub max_batch_size: u64,
    /// KV-cache memory fraction and its kind.
    pub memory_fraction: MemoryFraction,
    /// Replaces the system's per-GPU capacity when given.
    #[serde(default)]
    pub gpu_memory_capacity_bytes_override: Option<u64>,
    /// Optional safety margin `t ∈ [0, 1)` (§8).
    #[serde(default)]
    pub tolerance_fraction: Option<f64>,
    /// Use the naive estimate (§7) when the native build fails.
    #[serde(default)]
    pub allow_naive_fallback: bool,
    /// Share of free memory the naive estimate gives the KV cache, `r ∈ [0, 1]`.
    #[serde(default = "default_reservation")]
    pub naive_kv_reservation: f64,
}

impl KvCacheRequest {
    /// A request with the defaults of §6.1 (no override, no tolerance, no naive fallback).
    pub fn new(max_num_tokens: u64, max_batch_size: u64, memory_fraction: MemoryFraction) -> Self {
        KvCacheRequest {
            max_num_tokens,
            max_batch_size,
            memory_fraction,
            gpu_memory_capacity_bytes_override: None,
            tolerance_fraction: None,
            allow_naive_fallback: false,
            naive_kv_reservation: DEFAULT_NAIVE_KV_RESERVATION,
        }
    }
}

/// Non-KV memory per GPU, each component truncated to whole bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemoryBreakdown {
    /// Model weights.
    pub weights_bytes: u64,
    /// Activation workspace.
    pub activations_bytes: u64,
    /// Other runtime memory.
    pub runtime_overhead_bytes: u64,
    /// NCCL buffers.
    pub comm_overhead_bytes: u64,
}

/// The KV capacity after the tolerance margin (§8).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ToleranceAdjusted {
    /// The margin `t`.
    pub tolerance_fraction: f64,
    /// `floor(total_kv_size_bytes · (1 − t))`.
    pub total_kv_size_bytes: u64,
    /// Tokens that fit in the adjusted bytes.
    pub total_kv_size_tokens: u64,
}

/// The KV-cache estimate, serialised with the reference's key names.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KvCacheEstimate {
    /// Per-GPU memory used for the estimate.
    pub total_gpu_capacity_bytes: u64,
    /// KV budget per GPU, floored.
    pub total_kv_size_bytes: u64,
    /// KV bytes one token takes per GPU, floored.
    pub kv_size_per_token_bytes: u64,
    /// Tokens that fit in the (unfloored) budget.
    pub total_kv_size_tokens: u64,
    /// `"native"` or `"naive_fallback"`.
    pub source: String,
    /// Non-KV components (native path only).
    pub memory_breakdown: Option<MemoryBreakdown>,
    /// The tolerance-adjusted capacity when a tolerance was requested.
    pub tolerance_adjusted: Option<ToleranceAdjusted>,
}

/// Python `repr(float)` for the values shown in validation messages.
pub(crate) fn py_float(x: f64) -> String {
    if x.is_nan() {
        return "nan".into();
    }
    if x.is_infinite() {
        return if x > 0.0 { "inf".into() } else { "-inf".into() };
    }
    let a = x.abs();
    if a != 0.0 && !(1e-4..1e16).contains(&a) {
        let s = format!("{x:e}");
        let (mant, exp) = s.split_once('e').unwrap_or((&s, "0"));
        let exp: i32 = exp.parse().unwrap_or(0);
        let sign = if exp < 0 { '-' } else { '+' };
        return format!("{mant}e{sign}{:02}", exp.abs());
    }
    let s = format!("{x}");
    if s.contains('.') {
        s
    } else {
        format!("{s}.0")
    }
}

/// §6.2 checks 1–4 (the backend is always known here; nextn is unsigned).
pub(crate) fn validate(backend: Backend, request: &KvCacheRequest) -> Result<()> {
    let expected = match backend {
        Backend::Trtllm => "of_free",
        Backend::Vllm | Backend::Sglang => "of_total",
    };
    let kind = request.memory_fraction.kind();
    if kind != expected {
        return Err(AicError::value(format!(
            "incompatible memory fraction: backend '{}' does not accept memory_fraction_kind \
             '{kind}' (expected '{expected}')",
            backend.as_str()
        )));
    }
    let f = request.memory_fraction.value();
    if !(f.is_finite() && (0.0..=1.0).contains(&f)) {
        return Err(AicError::value(format!(
            "kv_cache_memory_fraction must be finite and in [0, 1], got {}",
            py_float(f)
        )));
    }
    if let Some(t) = request.tolerance_fraction {
        if !(t.is_finite() && (0.0..1.0).contains(&t)) {
            return Err(AicError::value(format!(
                "tolerance_fraction must be finite and in [0, 1), got {}",
                py_float(t)
            )));
        }
    }
    let r = request.naive_kv_reservation;
    if !(r.is_finite() && (0.0..=1.0).contains(&r)) {
        return Err(AicError::value(format!(
            "naive_kv_reservation must be finite and in [0, 1], got {}",
            py_float(r)
        )));
    }
    Ok(())
}

/// The message of an error without its variant prefix.
fn plain_message(e: &AicError) -> String {
    match e {
        AicError::Value(m) => m.clone(),
        other => other.to_string(),
    }
}

/// The error for a model the native path cannot build (§6.3 step 1).
fn unsupported(engine: &EngineConfig, cause: &str) -> AicError {
    AicError::value(format!(
        "unsupported model/backend/GPU for KV-cache estimation: model={}, backend={}, \
         gpu_sku={}: {cause}",
        engine.model_name,
        engine.backend.as_str(),
        engine.system_name
    ))
}

/// The "no KV budget" error (§6.3 step 5).
pub(crate) fn no_budget(non_kv: f64, capacity: f64) -> AicError {
    AicError::value(format!(
        "no KV budget: non-KV memory ({} bytes) meets/exceeds the KV-cache memory limit \
         (capacity={} bytes)",
        non_kv.trunc() as i128,
        capacity.trunc() as i128
    ))
}

/// Builds the common output fields, applying the tolerance margin with the given inverse.
pub(crate) fn finish(
    capacity: f64,
    budget: f64,
    per_token: f64,
    tokens_from_bytes: &dyn Fn(f64) -> u64,
    source: &str,
    memory_breakdown: Option<MemoryBreakdown>,
    tolerance: Option<f64>,
) -> KvCacheEstimate {
    let total_kv_size_bytes = budget.floor() as u64;
    let tolerance_adjusted = tolerance.map(|t| {
        let adj = (total_kv_size_bytes as f64 * (1.0 - t)).floor();
        ToleranceAdjusted {
            tolerance_fraction: t,
            total_kv_size_bytes: adj as u64,
            total_kv_size_tokens: tokens_from_bytes(adj),
        }
    });
    KvCacheEstimate {
        total_gpu_capacity_bytes: capacity.trunc() as u64,
        total_kv_size_bytes,
        kv_size_per_token_bytes: per_token.floor() as u64,
        total_kv_size_tokens: tokens_from_bytes(budget),
        source: source.to_string(),
        memory_breakdown,
        tolerance_adjusted,
    }
}

/// The native build: the KV model and the §5 memory model at the estimate's operating point.
fn native_build(
    spec: &EngineSpec,
    facts: &ModelFacts,
    system: &SystemSpec,
    request: &KvCacheRequest,
) -> Result<(KvCacheModel, [f64; 4])> {
    // Without perf data for the backend the reference has no database to read the system
    // from, and fails with its attribute error (spec 12 §3.3, reproduced verbatim).
    if crate::data::versions::versions_with_tables(&system.data_dir, spec.engine.backend.as_str()).is_empty() {
        return Err(AicError::value("'NoneType' object has no attribute 'system_spec'"));
    }
    let kv_model = KvCacheModel::for_engine(facts, spec_kv_quant(spec)?, &spec.engine)?;
    let params = MemoryUsageParams {
        batch_size: request.max_batch_size,
        num_tokens: request.max_num_tokens,
        isl: 1,
        osl: 1,
        prefix: 0,
        beam_width: 1,
        max_seq_len: Some(1),
        mtp_scaling: MtpScaling::Off,
    };
    let u = memory_usage(spec, facts, system, &params)?;
    Ok((kv_model, [u.weights, u.activations, u.others, u.nccl]))
}

/// The KV-cache capacity of a compiled engine on one GPU (spec 41 §6), falling back to the
/// naive estimate (§7) when the native build fails and the request allows it.
pub fn estimate_kv_cache(
    spec: &EngineSpec,
    facts: &ModelFacts,
    system: &SystemSpec,
    request: &KvCacheRequest,
) -> Result<KvCacheEstimate> {
    let engine = &spec.engine;
    validate(engine.backend, request)?;
    let (kv_model, [w, a, o, n]) = match native_build(spec, facts, system, request) {
        Ok(built) => built,
        Err(_) if request.allow_naive_fallback => {
            return naive_estimate(Some(facts), engine, request)
        }
        Err(e) => return Err(unsupported(engine, &plain_message(&e))),
    };
    let non_kv = w + a + o + n;
    let per_token = kv_model.bytes_per_token();
    if !(per_token.is_finite() && per_token > 0.0) {
        return Err(AicError::value(
            "insufficient model metadata; missing: kv_size_per_token_bytes",
        ));
    }
    let capacity = request
        .gpu_memory_capacity_bytes_override
        .unwrap_or(system.gpu.mem_capacity) as f64;
    if !(capacity.is_finite() && capacity > 0.0) {
        return Err(AicError::value(format!(
            "GPU memory capacity must be finite and > 0, got {} bytes",
            capacity.trunc() as i128
        )));
    }
    let budget = match request.memory_fraction {
        MemoryFraction::OfFree(f) => (capacity - non_kv) * f,
        MemoryFraction::OfTotal(f) => capacity * f - non_kv,
    };
    if budget.is_nan() || budget <= 0.0 {
        return Err(no_budget(non_kv, capacity));
    }
    let breakdown = MemoryBreakdown {
        weights_bytes: w.trunc() as u64,
        activations_bytes: a.trunc() as u64,
        runtime_overhead_bytes: o.trunc() as u64,
        comm_overhead_bytes: n.trunc() as u64,
    };
    Ok(finish(
        capacity,
        budget,
        per_token,
        &|b| kv_model.tokens_from_bytes(b),
        "native",
        Some(breakdown),
        request.tolerance_fraction,
    ))
}

/// The estimate for an engine whose spec could not be compiled (`build_error` is the
/// compile failure): the naive estimate when allowed, else the "unsupported model" error.
/// `facts` is `None` when no model config is available.
pub fn estimate_kv_cache_unbuilt(
    engine: &EngineConfig,
    facts: Option<&ModelFacts>,
    request: &KvCacheRequest,
    build_error: &str,
) -> Result<KvCacheEstimate> {
    validate(engine.backend, request)?;
    if request.allow_naive_fallback {
        naive_estimate(facts, engine, request)
    } else {
        Err(unsupported(engine, build_error))
    }
}

/// KV blocks of `scheduler_block_size` tokens (§8): the tolerance-adjusted tokens when a
/// tolerance was requested, else the raw tokens, floor-divided by the block size.
pub fn estimate_num_gpu_blocks(
    estimate: &KvCacheEstimate,
    scheduler_block_size: u64,
) -> Result<u64> {
    if scheduler_block_size == 0 {
        return Err(AicError::value(
            "scheduler_block_size must be a positive integer, got 0",
        ));
    }
    let tokens = estimate
        .tolerance_adjusted
        .map_or(estimate.total_kv_size_tokens, |t| t.total_kv_size_tokens);
    Ok(tokens / scheduler_block_size)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn python_float_repr() {
        assert_eq!(py_float(1.5), "1.5");
        assert_eq!(py_float(2.0), "2.0");
        assert_eq!(py_float(-0.1), "-0.1");
        assert_eq!(py_float(f64::NAN), "nan");
        assert_eq!(py_float(f64::INFINITY), "inf");
        assert_eq!(py_float(f64::NEG_INFINITY), "-inf");
        assert_eq!(py_float(1e-5), "1e-05");
        assert_eq!(py_float(1.5e20), "1.5e+20");
        assert_eq!(py_float(0.0), "0.0");
    }

    #[test]
    fn fraction_json() {
        let f: MemoryFraction =
            serde_json::from_value(serde_json::json!({"kind": "of_free", "value": 0.9})).unwrap();
        assert_eq!(f, MemoryFraction::OfFree(0.9));
        let r: KvCacheRequest = serde_json::from_value(serde_json::json!({
            "max_num_tokens": 8192, "max_batch_size": 256,
            "memory_fraction": {"kind": "of_total", "value": 0.9}}))
        .unwrap();
        assert_eq!(
            r,
            KvCacheRequest::new(8192, 256, MemoryFraction::OfTotal(0.9))
        );
    }
}
