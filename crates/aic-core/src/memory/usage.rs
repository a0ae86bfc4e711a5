//! The non-KV memory model (spec 41 §5): weights, activations, NCCL buffers and runtime
//! overhead per GPU, plus the KV cache of a given batch.

use crate::data::system::SystemSpec;
use crate::error::{AicError, Result};
use crate::spec::{Backend, EngineSpec, KvQuant, Op};

use super::facts::{ModelFacts, ModelFamily};
use super::kv::KvCacheModel;
use super::weights::model_weight_bytes;

/// Bytes in one GiB (the reference reports this model in GiB; ×2³⁰ is exact).
pub const GIB: f64 = 1_073_741_824.0;

/// TRT-LLM / vLLM activation floor, 70 MiB.
const MIN_ACT_TRTLLM_VLLM: f64 = 73_400_320.0;
/// SGLang activation floor, 90 MiB.
const MIN_ACT_SGLANG: f64 = 94_371_840.0;

/// How multi-token prediction scales the activations (§5 step 8).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MtpScaling {
    /// No MTP scaling (the capacity estimate uses this).
    #[default]
    Off,
    /// A decode-only step: activations × (nextn + 1).
    DecodeOnly,
    /// A mixed step with `decode_tokens` decode tokens among the step's tokens.
    Mixed {
        /// Decode tokens in the step.
        decode_tokens: u64,
    },
}

/// Inputs of the non-KV memory model besides the model, backend and system.
#[derive(Debug, Clone, PartialEq)]
pub struct MemoryUsageParams {
    /// Requests in flight.
    pub batch_size: u64,
    /// Per-iteration token count; 0 means `(isl − prefix) · batch_size`.
    pub num_tokens: u64,
    /// Input length per request.
    pub isl: u64,
    /// Output length per request.
    pub osl: u64,
    /// Cached prefix per request.
    pub prefix: u64,
    /// Beam width.
    pub beam_width: u64,
    /// KV length per request; `None` means `isl + beam_width · osl`.
    pub max_seq_len: Option<u64>,
    /// MTP activation scaling.
    pub mtp_scaling: MtpScaling,
}

/// Memory per GPU in bytes (unfloored; the reference's GiB values × 2³⁰).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MemoryUsage {
    /// Model weights (§2.2).
    pub weights: f64,
    /// Activation workspace.
    pub activations: f64,
    /// KV cache of the batch.
    pub kv_cache: f64,
    /// NCCL buffers.
    pub nccl: f64,
    /// Other runtime memory.
    pub others: f64,
    /// Sum of the five.
    pub total: f64,
}

/// Activation coefficient `C[family][t]` for `t = min(tp, 8)`.
fn activation_coefficient(family: &ModelFamily, backend: Backend, t: u32) -> Option<f64> {
    use ModelFamily as F;
    let sglang = backend == Backend::Sglang;
    let row: [f64; 4] = match family {
        F::Llama if sglang => [14.0, 8.5, 6.5, 6.5],
        F::Llama => [11.0, 6.5, 5.0, 5.0],
        F::Moe
        | F::Gemma4Mix
        | F::Step3p7
        | F::Deepseek
        | F::DeepseekV32
        | F::DeepseekV4
        | F::KimiK25 => {
            if sglang {
                [28.0, 17.0, 13.0, 13.0]
            } else {
                [22.0, 13.0, 10.0, 10.0]
            }
        }
        F::KimiK3 if sglang => [28.0, 17.0, 13.0, 13.0],
        F::Gpt | F::KimiK3 | F::Qwen35 | F::Other(_) => {
            if sglang {
                [13.0, 8.0, 6.5, 6.5]
            } else {
                [10.0, 6.0, 5.0, 5.0]
            }
        }
    };
    let idx = match t {
        1 => 0,
        2 => 1,
        4 => 2,
        8 => 3,
        _ => return None,
    };
    Some(row[idx])
}

/// The KV dtype of a compiled spec: the engine's `kv_cache_dtype`, else the first attention
/// op's, else bfloat16.
pub(crate) fn spec_kv_quant(spec: &EngineSpec) -> Result<KvQuant> {
    if let Some(name) = spec.engine.kv_cache_dtype.as_deref() {
        return KvQuant::parse(name)
            .ok_or_else(|| AicError::value(format!("unknown KV-cache dtype '{name}'")));
    }
    fn op_kv(op: &Op) -> Option<KvQuant> {
        match op {
            Op::ContextAttention(o) => Some(o.kv_cache_dtype),
            Op::GenerationAttention(o) => Some(o.kv_cache_dtype),
            Op::ContextMla(o) => Some(o.kv_cache_dtype),
            Op::GenerationMla(o) => Some(o.kv_cache_dtype),
            Op::MlaModuleContext(o) | Op::MlaModuleGeneration(o) => Some(o.kv_cache_dtype),
            Op::DsaContext(o) | Op::DsaGeneration(o) => Some(o.kv_cache_dtype),
            Op::Dsv4Context(o) | Op::Dsv4Generation(o) => Some(o.kv_cache_dtype),
            Op::MsaContext(o) | Op::MsaGeneration(o) => Some(o.kv_cache_dtype),
            Op::Fallback(o) => op_kv(&o.primary).or_else(|| o.fallback.iter().find_map(op_kv)),
            Op::Overlap(o) => o.group_a.iter().chain(&o.group_b).find_map(op_kv),
            _ => None,
        }
    }
    Ok(spec
        .context_ops
        .iter()
        .chain(&spec.generation_ops)
        .find_map(op_kv)
        .unwrap_or(KvQuant::Bfloat16))
}

/// Activation bytes (§5 steps 2–9).
fn activation_bytes(
    spec: &EngineSpec,
    facts: &ModelFacts,
    params: &MemoryUsageParams,
    t: u32,
) -> Result<f64> {
    let engine = &spec.engine;
    let backend = engine.backend;
    let family = &facts.family;
    let h = facts.attention_width() as f64;
    let tokens = if params.num_tokens > 0 {
        params.num_tokens as f64
    } else {
        (params.isl as f64 - params.prefix as f64) * params.batch_size as f64
    };
    let coeff = activation_coefficient(family, backend, t).ok_or_else(|| {
        AicError::value(format!(
            "no activation coefficient for tp_size {} (min(tp_size, 8) = {t} must be 1, 2, 4 or 8)",
            engine.tp_size
        ))
    })?;
    let mut act = 2.0 * tokens * h * coeff;
    let dispatch_family = matches!(
        family,
        ModelFamily::Gemma4Mix
            | ModelFamily::Step3p7
            | ModelFamily::Deepseek
            | ModelFamily::DeepseekV32
            | ModelFamily::DeepseekV4
            | ModelFamily::KimiK25
    );
    if dispatch_family && facts.num_experts > 0 {
        let residual = backend == Backend::Sglang
            || matches!(family, ModelFamily::Gemma4Mix | ModelFamily::Step3p7);
        let w = if residual {
            facts.hidden_size as f64
        } else {
            h
        };
        act += tokens
            * w
            * engine.attention_dp_size as f64
            * facts.num_experts as f64
            * facts.topk as f64
            / engine.moe_ep_size.max(1) as f64
            / 128.0
            * 4.0;
    }
    let floor = if backend == Backend::Sglang {
        MIN_ACT_SGLANG
    } else {
        MIN_ACT_TRTLLM_VLLM
    };
    act = act.max(floor);
    let nextn = engine.nextn();
    if nextn > 0 {
        match params.mtp_scaling {
            MtpScaling::Off => {}
            MtpScaling::DecodeOnly => act *= (nextn + 1) as f64,
            MtpScaling::Mixed { decode_tokens } => {
                if tokens > 0.0 {
                    let d = decode_tokens as f64;
                    // The reference multiplies first, then divides (spec 50 §5.1): with d = 0
                    // this is `act × tokens / tokens`, not always `act`.
                    act = act * (tokens - d + d * (nextn + 1) as f64) / tokens;
                }
            }
        }
    }
    if backend == Backend::Sglang {
        act *= 1.0 + 0.15;
    }
    Ok(act)
}

/// The memory model of spec 41 §5 for a compiled spec, its model facts and a system.
/// Errors are the cases where the reference fails to build the model (a TP size outside the
/// coefficient tables, an unknown KV dtype, an unimplemented KV family, a missing NCCL entry).
pub fn memory_usage(
    spec: &EngineSpec,
    facts: &ModelFacts,
    system: &SystemSpec,
    params: &MemoryUsageParams,
) -> Result<MemoryUsage> {
    let engine = &spec.engine;
    let t = engine.tp_size.min(8);
    let weights = model_weight_bytes(spec) / GIB * GIB;
    let activations = activation_bytes(spec, facts, params, t)? / GIB * GIB;
    let kv_model = KvCacheModel::for_engine(facts, spec_kv_quant(spec)?, engine)?;
    let seq = params
        .max_seq_len
        .unwrap_or(params.isl + params.beam_width * params.osl);
    let kv_cache = params.batch_size as f64 * kv_model.kv_bytes(seq) / GIB * GIB;
    let nccl = *system.misc.nccl_mem.get(&t).ok_or_else(|| {
        AicError::value(format!(
            "system '{}' has no nccl_mem entry for {t} GPUs",
            system.name
        ))
    })? as f64
        / GIB
        * GIB;
    let mut others = system.misc.other_mem as f64 / GIB;
    if engine.backend == Backend::Sglang {
        others *= 1.0 + 0.20;
    }
    let others = others * GIB;
    Ok(MemoryUsage {
        weights,
        activations,
        kv_cache,
        nccl,
        others,
        total: weights + activations + kv_cache + nccl + others,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::kv::tests::gqa;
    use crate::memory::weights::tests::{deepseek_v3_tp8_ep8_ops, qwen3_32b_tp2_ops, spec_with};
    use std::path::Path;

    pub(crate) fn h200() -> SystemSpec {
        SystemSpec::load(
            &Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data/systems"),
            "h200_sxm",
        )
        .unwrap()
    }

    fn params(num_tokens: u64) -> MemoryUsageParams {
        MemoryUsageParams {
            batch_size: 256,
            num_tokens,
            isl: 1,
            osl: 1,
            prefix: 0,
            beam_width: 1,
            max_seq_len: Some(1),
            mtp_scaling: MtpScaling::Off,
        }
    }

    #[test]
    fn coefficient_table() {
        use ModelFamily as F;
        let c = |f: &F, b, t| activation_coefficient(f, b, t).unwrap();
        assert_eq!(c(&F::Llama, Backend::Vllm, 2), 6.5);
        assert_eq!(c(&F::Llama, Backend::Trtllm, 1), 11.0);
        assert_eq!(c(&F::Llama, Backend::Sglang, 4), 6.5);
        assert_eq!(c(&F::Moe, Backend::Trtllm, 8), 10.0);
        assert_eq!(c(&F::Deepseek, Backend::Sglang, 2), 17.0);
        assert_eq!(c(&F::KimiK3, Backend::Vllm, 1), 10.0);
        assert_eq!(c(&F::KimiK3, Backend::Sglang, 1), 28.0);
        assert_eq!(c(&F::Gpt, Backend::Sglang, 1), 13.0);
        assert_eq!(c(&F::Other("X".into()), Backend::Vllm, 4), 5.0);
        assert!(activation_coefficient(&F::Llama, Backend::Vllm, 3).is_none());
    }

    #[test]
    fn qwen3_32b_vllm_tp2() {
        let mut spec = spec_with(qwen3_32b_tp2_ops(), 1);
        spec.engine.tp_size = 2;
        let facts = gqa("Qwen3ForCausalLM", ModelFamily::Llama, 64, 64, 8, 128);
        let u = memory_usage(&spec, &facts, &h200(), &params(8192)).unwrap();
        assert_eq!(u.weights, 32761446400.0);
        assert_eq!(u.activations, 872415232.0);
        assert_eq!(u.others, 3758096384.0);
        assert_eq!(u.nccl, 358612992.0);
        assert_eq!(u.kv_cache, 256.0 * 131072.0);
        // MTP scaling applies only when asked for and nextn > 0.
        spec.engine.nextn = Some(2);
        let mut p = params(8192);
        assert_eq!(
            memory_usage(&spec, &facts, &h200(), &p)
                .unwrap()
                .activations,
            872415232.0
        );
        p.mtp_scaling = MtpScaling::DecodeOnly;
        assert_eq!(
            memory_usage(&spec, &facts, &h200(), &p)
                .unwrap()
                .activations,
            3.0 * 872415232.0
        );
        p.mtp_scaling = MtpScaling::Mixed {
            decode_tokens: 4096,
        };
        assert_eq!(
            memory_usage(&spec, &facts, &h200(), &p)
                .unwrap()
                .activations,
            2.0 * 872415232.0
        );
        // tokens from (isl − prefix) · batch when num_tokens is 0.
        let mut p = params(0);
        p.isl = 40;
        p.prefix = 8;
        p.max_seq_len = None;
        p.osl = 10;
        let u = memory_usage(&spec, &facts, &h200(), &p).unwrap();
        assert_eq!(u.activations, 2.0 * 32.0 * 256.0 * 8192.0 * 6.5);
        assert_eq!(u.kv_cache, 256.0 * 50.0 * 131072.0);
    }

    #[test]
    fn deepseek_dispatch_workspace() {
        let mut spec = spec_with(deepseek_v3_tp8_ep8_ops(), 1);
        spec.engine.tp_size = 8;
        spec.engine.moe_ep_size = 8;
        spec.engine.backend = Backend::Trtllm;
        let mut facts = gqa(
            "DeepseekV3ForCausalLM",
            ModelFamily::Deepseek,
            61,
            128,
            128,
            56,
        );
        facts.num_experts = 256;
        facts.topk = 8;
        let u = memory_usage(&spec, &facts, &h200(), &params(8192)).unwrap();
        assert_eq!(u.activations, 1644167168.0);
        spec.engine.backend = Backend::Sglang;
        let u = memory_usage(&spec, &facts, &h200(), &params(4096)).unwrap();
        assert_eq!(u.activations, 1147981004.8);
        assert_eq!(u.others, 4509715660.8);
    }

    #[test]
    fn sglang_floor_artifact() {
        let mut spec = spec_with(qwen3_32b_tp2_ops(), 1);
        spec.engine.backend = Backend::Sglang;
        let facts = gqa("Qwen3ForCausalLM", ModelFamily::Llama, 28, 16, 8, 128);
        let u = memory_usage(&spec, &facts, &h200(), &params(16)).unwrap();
        assert_eq!(u.activations as u64, 108527615);
        assert_eq!(u.nccl, 0.0);
        spec.engine.backend = Backend::Vllm;
        let u = memory_usage(&spec, &facts, &h200(), &params(16)).unwrap();
        assert_eq!(u.activations, 73400320.0);
    }

    #[test]
    fn tp_outside_tables_fails() {
        let mut spec = spec_with(qwen3_32b_tp2_ops(), 1);
        spec.engine.tp_size = 3;
        let facts = gqa("Qwen3ForCausalLM", ModelFamily::Llama, 64, 64, 8, 128);
        let err = memory_usage(&spec, &facts, &h200(), &params(8192)).unwrap_err();
        assert!(err.to_string().contains("tp_size 3"), "{err}");
        spec.engine.tp_size = 16;
        assert!(memory_usage(&spec, &facts, &h200(), &params(8192)).is_ok());
    }
}
