//! The naive KV-cache estimate (spec 41 §7): for models the native path cannot build, a
//! config-only weight count and a fixed reservation of the remaining memory.

use crate::error::{AicError, Result};
use crate::spec::EngineConfig;

use super::estimate::{finish, no_budget, validate, KvCacheEstimate, KvCacheRequest};
use super::facts::ModelFacts;

/// Element width from the checkpoint dtype string (§7 step 2).
fn dtype_width(dtype: Option<&str>) -> u128 {
    let d = dtype.unwrap_or("").to_lowercase();
    match d.as_str() {
        "float32" | "fp32" => 4,
        "bfloat16" | "float16" | "bf16" | "fp16" | "half" => 2,
        _ if d.contains("fp8") || d.contains("float8") || d.contains("int8") => 1,
        _ => 2,
    }
}

fn missing(what: &str) -> AicError {
    AicError::value(format!("insufficient model metadata; missing: {what}"))
}

fn required(v: u64, what: &str) -> Result<u128> {
    if v > 0 {
        Ok(u128::from(v))
    } else {
        Err(missing(what))
    }
}

/// The naive estimate (§7) without validation; `facts == None` means no config was found.
pub(crate) fn naive_estimate(
    facts: Option<&ModelFacts>,
    engine: &EngineConfig,
    request: &KvCacheRequest,
) -> Result<KvCacheEstimate> {
    let facts = facts.ok_or_else(|| {
        AicError::value(format!(
            "insufficient model metadata: no HF config for '{}' (not a local directory / not \
             pre-cached, and HF download is disabled)",
            engine.model_name
        ))
    })?;
    let d = dtype_width(facts.torch_dtype.as_deref());
    let tp = u128::from(engine.tp_size.max(1));
    let pp = u128::from(engine.pp_size.max(1));
    let moe_tp = u128::from(engine.moe_tp_size.max(1));
    let moe_ep = u128::from(engine.moe_ep_size.max(1));
    let hidden = required(facts.hidden_size, "hidden_size")?;
    let layers = required(facts.num_layers, "num_hidden_layers")?;
    let vocab = required(facts.vocab_size.unwrap_or(0), "vocab_size")?;
    let kv_heads_per_rank = u128::from(facts.num_key_value_heads).div_ceil(tp);
    let head_dim = u128::from(facts.head_dim);

    // Per-token KV (linear rate).
    let mla = facts.kv_lora_rank.is_some();
    let per_token = match facts.kv_lora_rank {
        Some(lora) => {
            let rope = facts
                .qk_rope_head_dim
                .ok_or_else(|| missing("qk_rope_head_dim"))?;
            layers * (u128::from(lora) + u128::from(rope)) * d
        }
        None => 2 * kv_heads_per_rank * head_dim * layers * d,
    };

    // Weights per GPU.
    let emb = 2 * vocab * hidden;
    let attn = 4 * hidden * hidden;
    let experts = u128::from(facts.num_experts);
    let weights = if experts > 0 {
        let moe_inter = facts
            .moe_intermediate_size
            .or(facts.intermediate_size)
            .ok_or_else(|| missing("moe_intermediate_size"))?;
        let expert = experts * 3 * hidden * u128::from(moe_inter) / (moe_tp * moe_ep);
        (emb + layers * attn) * d / (tp * pp) + layers * expert * d / pp
    } else {
        let inter = facts.intermediate_size.map_or(4 * hidden, u128::from);
        (emb + layers * (attn + 3 * hidden * inter)) * d / (tp * pp)
    };
    let weights = weights as f64;

    let capacity = request.gpu_memory_capacity_bytes_override.ok_or_else(|| {
        AicError::value(
            "naive fallback requires gpu_memory_capacity_bytes_override (the naive estimate has \
             no system capacity)",
        )
    })? as f64;
    let budget = (capacity - weights).max(0.0) * request.naive_kv_reservation;
    if budget <= 0.0 {
        return Err(no_budget(weights, capacity));
    }

    let per_token = per_token as f64;
    let hybrid = facts
        .sliding_window
        .filter(|s| !mla && s.window > 0 && s.window_layers > 0);
    let tokens = |b: f64| -> u64 {
        if b <= 0.0 {
            return 0;
        }
        match hybrid {
            Some(s) => {
                let q = (2 * kv_heads_per_rank * head_dim * d) as f64;
                let r = (s.window_layers + s.global_layers) as f64 * q;
                let bw = r * s.window as f64;
                if b <= bw {
                    (b / r).floor() as u64
                } else if s.global_layers == 0 {
                    s.window
                } else {
                    s.window + ((b - bw) / (s.global_layers as f64 * q)).floor() as u64
                }
            }
            None if per_token > 0.0 => (b / per_token).floor() as u64,
            None => 0,
        }
    };
    Ok(finish(
        capacity,
        budget,
        per_token,
        &tokens,
        "naive_fallback",
        None,
        request.tolerance_fraction,
    ))
}

/// The naive estimate (spec 41 §7) on its own, after the §6.2 validation: what the reference
/// answers for a model the native path cannot build when `allow_naive_fallback` is set.
pub fn estimate_kv_cache_naive(
    facts: Option<&ModelFacts>,
    engine: &EngineConfig,
    request: &KvCacheRequest,
) -> Result<KvCacheEstimate> {
    validate(engine.backend, request)?;
    naive_estimate(facts, engine, request)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::estimate::MemoryFraction;
    use crate::memory::facts::{ModelFamily, SlidingWindowSplit};
    use crate::memory::kv::tests::gqa;

    const C80: u64 = 85_899_345_920;

    fn engine(tp: u32, moe_tp: u32, moe_ep: u32) -> EngineConfig {
        serde_json::from_value(serde_json::json!({"model_name": "local/model",
            "system_name": "h100_sxm", "backend": "vllm", "tp_size": tp,
            "moe_tp_size": moe_tp, "moe_ep_size": moe_ep}))
        .unwrap()
    }

    fn request() -> KvCacheRequest {
        let mut r = KvCacheRequest::new(8192, 256, MemoryFraction::OfTotal(0.9));
        r.gpu_memory_capacity_bytes_override = Some(C80);
        r.allow_naive_fallback = true;
        r
    }

    fn facts(hidden: u64, layers: u64, heads: u64, kv: u64, head: u64) -> ModelFacts {
        let mut f = gqa(
            "UnknownForCausalLM",
            ModelFamily::Other("X".into()),
            layers,
            heads,
            kv,
            head,
        );
        f.hidden_size = hidden;
        f.torch_dtype = Some("bfloat16".into());
        f
    }

    #[test]
    fn widths() {
        assert_eq!(dtype_width(Some("float32")), 4);
        assert_eq!(dtype_width(Some("FP32")), 4);
        assert_eq!(dtype_width(Some("half")), 2);
        assert_eq!(dtype_width(Some("float8_e4m3")), 1);
        assert_eq!(dtype_width(Some("int8")), 1);
        assert_eq!(dtype_width(Some("weird")), 2);
        assert_eq!(dtype_width(None), 2);
    }

    #[test]
    fn gqa_example() {
        let mut f = facts(4096, 32, 32, 8, 128);
        f.intermediate_size = Some(14336);
        f.vocab_size = Some(128256);
        let e = estimate_kv_cache_naive(Some(&f), &engine(2, 1, 1), &request()).unwrap();
        assert_eq!(e.source, "naive_fallback");
        assert_eq!(e.memory_breakdown, None);
        assert_eq!(e.total_gpu_capacity_bytes, C80);
        assert_eq!(e.kv_size_per_token_bytes, 65536);
        assert_eq!(e.total_kv_size_bytes, 61651235635);
        assert_eq!(e.total_kv_size_tokens, 940723);
        // weights 8835301376: (C − W) · 0.8 floors to the bytes above.
        assert_eq!(
            ((C80 as f64 - 8835301376.0) * 0.8).floor() as u64,
            61651235635
        );
        let mut r = request();
        r.tolerance_fraction = Some(0.1);
        let e = estimate_kv_cache_naive(Some(&f), &engine(2, 1, 1), &r).unwrap();
        let adj = e.tolerance_adjusted.unwrap();
        assert_eq!(
            (adj.total_kv_size_bytes, adj.total_kv_size_tokens),
            (55486112071, 846650)
        );
        let mut r = request();
        r.naive_kv_reservation = 0.5;
        let e = estimate_kv_cache_naive(Some(&f), &engine(2, 1, 1), &r).unwrap();
        assert_eq!(
            (e.total_kv_size_bytes, e.total_kv_size_tokens),
            (38532022272, 587952)
        );
    }

    #[test]
    fn mla_example() {
        let mut f = facts(5120, 40, 40, 40, 128);
        f.intermediate_size = Some(12288);
        f.vocab_size = Some(102400);
        f.kv_lora_rank = Some(512);
        f.qk_rope_head_dim = Some(64);
        let e = estimate_kv_cache_naive(Some(&f), &engine(4, 1, 1), &request()).unwrap();
        assert_eq!(e.kv_size_per_token_bytes, 46080);
        assert_eq!(e.total_kv_size_bytes, 63602425856);
        assert_eq!(e.total_kv_size_tokens, 1380260);
        f.qk_rope_head_dim = None;
        let err = estimate_kv_cache_naive(Some(&f), &engine(4, 1, 1), &request()).unwrap_err();
        assert!(err.to_string().contains("qk_rope_head_dim"), "{err}");
    }

    #[test]
    fn sliding_window_example() {
        let mut f = facts(2560, 34, 8, 4, 256);
        f.intermediate_size = Some(10240);
        f.vocab_size = Some(262144);
        f.sliding_window = Some(SlidingWindowSplit {
            window: 1024,
            window_layers: 29,
            global_layers: 5,
        });
        let e = estimate_kv_cache_naive(Some(&f), &engine(1, 1, 1), &request()).unwrap();
        assert_eq!(e.kv_size_per_token_bytes, 139264);
        assert_eq!(e.total_kv_size_bytes, 60867739648);
        assert_eq!(e.total_kv_size_tokens, 2966118);
        // Below the window: every layer grows.
        let mut r = request();
        r.naive_kv_reservation = 0.001;
        let e = estimate_kv_cache_naive(Some(&f), &engine(1, 1, 1), &r).unwrap();
        let b = (C80 as f64 - 9814671360.0) * 0.001;
        assert!(b <= 139264.0 * 1024.0);
        assert_eq!(e.total_kv_size_tokens, (b / 139264.0).floor() as u64);
        // Only window layers: capped at the window.
        f.sliding_window = Some(SlidingWindowSplit {
            window: 1024,
            window_layers: 34,
            global_layers: 0,
        });
        let e = estimate_kv_cache_naive(Some(&f), &engine(1, 1, 1), &request()).unwrap();
        assert_eq!(e.total_kv_size_tokens, 1024);
    }

    #[test]
    fn moe_example() {
        let mut f = facts(2048, 24, 16, 4, 128);
        f.intermediate_size = Some(6144);
        f.moe_intermediate_size = Some(1024);
        f.num_experts = 64;
        f.vocab_size = Some(151936);
        f.torch_dtype = Some("float8_e4m3".into());
        let e = estimate_kv_cache_naive(Some(&f), &engine(2, 1, 4), &request()).unwrap();
        assert_eq!(e.kv_size_per_token_bytes, 12288);
        assert_eq!(e.total_kv_size_bytes, 66376748236);
        assert_eq!(e.total_kv_size_tokens, 5401753);
    }

    #[test]
    fn supported_architecture_example() {
        // Qwen/Qwen3-32B normalized values, tp 2.
        let mut f = gqa("Qwen3ForCausalLM", ModelFamily::Llama, 64, 64, 8, 128);
        f.hidden_size = 5120;
        f.intermediate_size = Some(25600);
        f.vocab_size = Some(151936);
        f.torch_dtype = Some("bfloat16".into());
        let e = estimate_kv_cache_naive(Some(&f), &engine(2, 1, 1), &request()).unwrap();
        assert_eq!(e.kv_size_per_token_bytes, 131072);
        assert_eq!(e.total_kv_size_bytes, 41973448704);
        assert_eq!(e.total_kv_size_tokens, 320232);
    }

    #[test]
    fn naive_errors() {
        let err = estimate_kv_cache_naive(None, &engine(2, 1, 1), &request()).unwrap_err();
        assert!(
            err.to_string().contains("no HF config for 'local/model'"),
            "{err}"
        );
        let mut f = facts(4096, 32, 32, 8, 128);
        let err = estimate_kv_cache_naive(Some(&f), &engine(2, 1, 1), &request()).unwrap_err();
        assert!(err.to_string().contains("missing: vocab_size"), "{err}");
        f.vocab_size = Some(128256);
        let mut r = request();
        r.gpu_memory_capacity_bytes_override = None;
        let err = estimate_kv_cache_naive(Some(&f), &engine(2, 1, 1), &r).unwrap_err();
        assert!(
            err.to_string()
                .contains("requires gpu_memory_capacity_bytes_override"),
            "{err}"
        );
        let mut r = request();
        r.gpu_memory_capacity_bytes_override = Some(1000);
        let err = estimate_kv_cache_naive(Some(&f), &engine(2, 1, 1), &r).unwrap_err();
        assert!(err.to_string().contains("no KV budget"), "{err}");
    }
}
