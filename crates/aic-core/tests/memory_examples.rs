//! The worked examples of spec 41 §9 (and the §6.2 validation messages) through the public
//! memory API, on hand-built op lists whose weights match the examples.

use std::path::Path;

use aic_core::data::system::SystemSpec;
use aic_core::memory::{
    estimate_kv_cache, estimate_kv_cache_unbuilt, estimate_num_gpu_blocks, KvCacheEstimate,
    KvCacheRequest, MemoryFraction, ModelFacts, ModelFamily,
};
use aic_core::{AicError, EngineSpec};
use serde_json::{json, Value};

fn system(name: &str) -> SystemSpec {
    SystemSpec::load(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data/systems"),
        name,
    )
    .unwrap()
}

fn gemm(name: &str, n: u64, k: u64, q: &str, sf: f64) -> Value {
    json!({"Gemm": {"name": name, "scale_factor": sf, "n": n, "k": k, "quant_mode": q,
        "scale_num_tokens": 1}})
}

/// Qwen3-32B context ops (weights only) at attention TP `tp`, bf16.
fn qwen3_32b_ops(tp: u64) -> Vec<Value> {
    vec![
        json!({"Embedding": {"name": "context_embedding", "scale_factor": 1.0,
            "vocab_size": 151936 / tp, "hidden_size": 5120, "quant_mode": "bfloat16"}}),
        gemm("context_qkv_gemm", 10240 / tp, 5120, "bfloat16", 64.0),
        gemm("context_proj_gemm", 5120, 8192 / tp, "bfloat16", 64.0),
        gemm("context_gate_ffn1_gemm", 51200 / tp, 5120, "bfloat16", 64.0),
        gemm("context_ffn2_gemm", 5120, 25600 / tp, "bfloat16", 64.0),
        gemm("context_logits_gemm", 151936 / tp, 5120, "bfloat16", 1.0),
    ]
}

/// DeepSeek-V3 tp 8 ep 8 fp8_block context ops (weights only; the MLA module falls back to
/// its projection chain).
fn deepseek_v3_ops() -> Vec<Value> {
    let f = "fp8_block";
    vec![
        json!({"Embedding": {"name": "context_embedding", "scale_factor": 1.0,
            "vocab_size": 129280, "hidden_size": 7168, "quant_mode": "bfloat16"}}),
        json!({"Fallback": {"name": "context_mla_block",
            "primary": {"MlaModuleContext": {"name": "context_mla_module", "scale_factor": 61.0,
                "num_heads": 16, "kv_cache_dtype": "fp8", "fmha_quant_mode": "bfloat16",
                "gemm_quant_mode": f}},
            "fallback": [gemm("context_downscale_gemm", 2112, 7168, f, 61.0),
                gemm("context_q_b_proj_gemm", 3072, 1536, f, 61.0),
                gemm("context_kv_b_proj_gemm", 4096, 512, f, 61.0),
                gemm("context_proj_gemm", 7168, 2048, f, 61.0)]}}),
        gemm("context_shared_gate_up_gemm", 512, 7168, f, 61.0),
        gemm("context_shared_ffn2_gemm", 7168, 256, f, 61.0),
        gemm("context_router_gemm", 256, 7168, "bfloat16", 61.0),
        json!({"Moe": {"name": "context_moe", "scale_factor": 61.0, "hidden_size": 7168,
            "inter_size": 2048, "topk": 8, "num_experts": 256, "moe_tp_size": 1,
            "moe_ep_size": 8, "attention_dp_size": 1, "quant_mode": f,
            "workload_distribution": "power_law_1.01"}}),
        gemm("context_logits_gemm", 16160, 7168, "bfloat16", 1.0),
    ]
}

/// One op carrying exactly `bytes` of bf16 weight (for examples that only state W).
fn weight_blob(bytes: u64) -> Vec<Value> {
    vec![gemm("blob", 1, 1, "bfloat16", (bytes / 2) as f64)]
}

fn spec(engine: Value, ops: Vec<Value>) -> EngineSpec {
    let mut e = json!({"model_name": "m", "system_name": "h200_sxm", "backend": "vllm"});
    for (k, v) in engine.as_object().unwrap() {
        e[k] = v.clone();
    }
    serde_json::from_value(
        json!({"schema_version": 15, "engine": e, "context_ops": ops,
        "generation_ops": []}),
    )
    .unwrap()
}

fn facts(v: Value) -> ModelFacts {
    serde_json::from_value(v).unwrap()
}

fn qwen3_32b() -> ModelFacts {
    facts(
        json!({"architecture": "Qwen3ForCausalLM", "family": "LLAMA", "num_layers": 64,
        "hidden_size": 5120, "num_attention_heads": 64, "num_key_value_heads": 8,
        "head_dim": 128, "vocab_size": 151936, "intermediate_size": 25600,
        "torch_dtype": "bfloat16", "max_position_embeddings": 40960}),
    )
}

fn deepseek_v3() -> ModelFacts {
    facts(
        json!({"architecture": "DeepseekV3ForCausalLM", "family": "DEEPSEEK",
        "num_layers": 61, "hidden_size": 7168, "num_attention_heads": 128,
        "num_key_value_heads": 128, "head_dim": 56, "num_experts": 256, "topk": 8,
        "kv_lora_rank": 512, "qk_rope_head_dim": 64}),
    )
}

fn request(tokens: u64, fraction: MemoryFraction) -> KvCacheRequest {
    KvCacheRequest::new(tokens, 256, fraction)
}

fn msg(e: AicError) -> String {
    match e {
        AicError::Value(m) => m,
        other => panic!("unexpected error kind: {other}"),
    }
}

fn check(e: &KvCacheEstimate, bytes: u64, per_token: u64, tokens: u64) {
    assert_eq!(
        (
            e.total_kv_size_bytes,
            e.kv_size_per_token_bytes,
            e.total_kv_size_tokens
        ),
        (bytes, per_token, tokens),
        "{e:?}"
    );
}

#[test]
fn example_1_qwen3_32b_vllm_tp2_with_tolerance() {
    let s = spec(
        json!({"tp_size": 2, "backend_version": "0.24.0", "kv_cache_dtype": "bfloat16"}),
        qwen3_32b_ops(2),
    );
    let mut r = request(8192, MemoryFraction::OfTotal(0.9));
    r.tolerance_fraction = Some(0.05);
    let e = estimate_kv_cache(&s, &qwen3_32b(), &system("h200_sxm"), &r).unwrap();
    check(&e, 98507266457, 131072, 751550);
    assert_eq!(e.total_gpu_capacity_bytes, 151397597184);
    assert_eq!(e.source, "native");
    let b = e.memory_breakdown.unwrap();
    assert_eq!(
        (
            b.weights_bytes,
            b.activations_bytes,
            b.runtime_overhead_bytes,
            b.comm_overhead_bytes
        ),
        (32761446400, 872415232, 3758096384, 358612992)
    );
    let adj = e.tolerance_adjusted.unwrap();
    assert_eq!(
        (adj.total_kv_size_bytes, adj.total_kv_size_tokens),
        (93581903134, 713973)
    );
    assert_eq!(adj.tolerance_fraction, 0.05);
    assert_eq!(estimate_num_gpu_blocks(&e, 16).unwrap(), 44623);
    let mut raw = e.clone();
    raw.tolerance_adjusted = None;
    assert_eq!(estimate_num_gpu_blocks(&raw, 16).unwrap(), 46971);
    assert!(msg(estimate_num_gpu_blocks(&raw, 0).unwrap_err()).contains("positive integer"));
    // nextn does not change the result.
    let mut s2 = s.clone();
    s2.engine.nextn = Some(2);
    assert_eq!(
        estimate_kv_cache(&s2, &qwen3_32b(), &system("h200_sxm"), &r).unwrap(),
        e
    );
    // max_batch_size does not either.
    let mut r2 = r.clone();
    r2.max_batch_size = 1;
    assert_eq!(
        estimate_kv_cache(&s, &qwen3_32b(), &system("h200_sxm"), &r2).unwrap(),
        e
    );
    // JSON shape: the reference's keys, in its order.
    let v = serde_json::to_value(&e).unwrap();
    let keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(keys.len(), 7);
    assert_eq!(
        v["tolerance_adjusted"]["total_kv_size_tokens"],
        json!(713973)
    );
    assert_eq!(
        v["memory_breakdown"]["comm_overhead_bytes"],
        json!(358612992)
    );
}

#[test]
fn example_2_pipeline_parallel() {
    let s = spec(json!({"tp_size": 2, "pp_size": 2}), qwen3_32b_ops(2));
    let e = estimate_kv_cache(
        &s,
        &qwen3_32b(),
        &system("h200_sxm"),
        &request(8192, MemoryFraction::OfTotal(0.9)),
    )
    .unwrap();
    check(&e, 114887989657, 131072, 876525);
    assert_eq!(e.memory_breakdown.unwrap().weights_bytes, 16380723200);
}

#[test]
fn example_3_capacity_override() {
    let s = spec(json!({"tp_size": 2}), qwen3_32b_ops(2));
    let mut r = request(8192, MemoryFraction::OfTotal(0.9));
    r.gpu_memory_capacity_bytes_override = Some(85899345920);
    let e = estimate_kv_cache(&s, &qwen3_32b(), &system("h200_sxm"), &r).unwrap();
    assert_eq!(e.total_gpu_capacity_bytes, 85899345920);
    check(&e, 39558840320, 131072, 301810);
    r.memory_fraction = MemoryFraction::OfTotal(0.2);
    let err = msg(estimate_kv_cache(&s, &qwen3_32b(), &system("h200_sxm"), &r).unwrap_err());
    assert_eq!(
        err,
        "no KV budget: non-KV memory (37750571008 bytes) meets/exceeds the KV-cache memory \
         limit (capacity=85899345920 bytes)"
    );
    // Budget errors never fall back to the naive path.
    r.allow_naive_fallback = true;
    assert!(
        msg(estimate_kv_cache(&s, &qwen3_32b(), &system("h200_sxm"), &r).unwrap_err())
            .starts_with("no KV budget")
    );
}

#[test]
fn example_4_trtllm_tp4_fp8_kv() {
    let s = spec(
        json!({"tp_size": 4, "backend": "trtllm", "kv_cache_dtype": "fp8"}),
        qwen3_32b_ops(4),
    );
    let e = estimate_kv_cache(
        &s,
        &qwen3_32b(),
        &system("h200_sxm"),
        &request(8192, MemoryFraction::OfFree(0.9)),
    )
    .unwrap();
    check(&e, 117158982451, 32768, 3575408);
    let b = e.memory_breakdown.unwrap();
    assert_eq!(
        (b.weights_bytes, b.activations_bytes, b.comm_overhead_bytes),
        (16380723200, 671088640, 411041792)
    );
}

#[test]
fn example_5_deepseek_v3_trtllm() {
    let s = spec(
        json!({"tp_size": 8, "moe_ep_size": 8, "backend": "trtllm", "kv_cache_dtype": "fp8",
            "activation_dtype": "bfloat16"}),
        deepseek_v3_ops(),
    );
    let e = estimate_kv_cache(
        &s,
        &deepseek_v3(),
        &system("h200_sxm"),
        &request(8192, MemoryFraction::OfFree(0.9)),
    )
    .unwrap();
    check(&e, 49264577740, 35136, 1402111);
    let b = e.memory_breakdown.unwrap();
    assert_eq!(
        (b.weights_bytes, b.activations_bytes),
        (90845872128, 1644167168)
    );
}

#[test]
fn example_6_gpt_oss_binary_search() {
    let s = spec(
        json!({"tp_size": 4, "moe_ep_size": 4, "backend": "trtllm"}),
        weight_blob(15126589440),
    );
    let f = facts(
        json!({"architecture": "GptOssForCausalLM", "family": "MOE", "num_layers": 36,
        "hidden_size": 2880, "num_attention_heads": 64, "num_key_value_heads": 8, "head_dim": 64,
        "num_experts": 128, "topk": 4, "max_position_embeddings": 131072}),
    );
    let e = estimate_kv_cache(
        &s,
        &f,
        &system("h200_sxm"),
        &request(8192, MemoryFraction::OfFree(0.9)),
    )
    .unwrap();
    check(&e, 118287702835, 18432, 12834909);
    assert_eq!(e.memory_breakdown.unwrap().activations_bytes, 671088640);
}

#[test]
fn example_7_qwen3_30b_a3b_sglang() {
    let s = spec(
        json!({"tp_size": 4, "moe_ep_size": 4, "backend": "sglang"}),
        weight_blob(15129247744),
    );
    let f = facts(
        json!({"architecture": "Qwen3MoeForCausalLM", "family": "MOE", "num_layers": 48,
        "hidden_size": 2048, "num_attention_heads": 32, "num_key_value_heads": 4, "head_dim": 128,
        "num_experts": 128, "topk": 8}),
    );
    let e = estimate_kv_cache(
        &s,
        &f,
        &system("h200_sxm"),
        &request(8192, MemoryFraction::OfTotal(0.85)),
    )
    .unwrap();
    check(&e, 107634674892, 24576, 4379666);
    let b = e.memory_breakdown.unwrap();
    assert_eq!(
        (
            b.weights_bytes,
            b.activations_bytes,
            b.runtime_overhead_bytes,
            b.comm_overhead_bytes
        ),
        (15129247744, 1003277516, 4509715660, 411041792)
    );
}

#[test]
fn example_8_deepseek_v3_sglang() {
    let s = spec(
        json!({"tp_size": 8, "moe_ep_size": 8, "backend": "sglang", "kv_cache_dtype": "fp8"}),
        deepseek_v3_ops(),
    );
    let e = estimate_kv_cache(
        &s,
        &deepseek_v3(),
        &system("h200_sxm"),
        &request(4096, MemoryFraction::OfTotal(0.85)),
    )
    .unwrap();
    check(&e, 31773347020, 35136, 904296);
    assert_eq!(e.memory_breakdown.unwrap().activations_bytes, 1147981004);
}

#[test]
fn example_9_qwen3_0_6b_activation_floor() {
    let f = facts(
        json!({"architecture": "Qwen3ForCausalLM", "family": "LLAMA", "num_layers": 28,
        "hidden_size": 1024, "num_attention_heads": 16, "num_key_value_heads": 8, "head_dim": 128}),
    );
    let s = spec(json!({"tp_size": 1}), weight_blob(1503133696));
    let e = estimate_kv_cache(
        &s,
        &f,
        &system("h200_sxm"),
        &request(16, MemoryFraction::OfTotal(0.9)),
    )
    .unwrap();
    check(&e, 130923207065, 114688, 1141559);
    let b = e.memory_breakdown.unwrap();
    assert_eq!((b.activations_bytes, b.comm_overhead_bytes), (73400320, 0));
    let s = spec(
        json!({"tp_size": 1, "backend": "sglang"}),
        weight_blob(1503133696),
    );
    let e = estimate_kv_cache(
        &s,
        &f,
        &system("h200_sxm"),
        &request(16, MemoryFraction::OfTotal(0.9)),
    )
    .unwrap();
    check(&e, 130136460492, 114688, 1134699);
    let b = e.memory_breakdown.unwrap();
    assert_eq!(
        (b.activations_bytes, b.runtime_overhead_bytes),
        (108527615, 4509715660)
    );
}

#[test]
fn example_10_native_failure_falls_back_to_naive() {
    // tp 3 has no activation coefficient: the native build fails.
    let s = spec(json!({"tp_size": 3}), qwen3_32b_ops(2));
    let r = request(8192, MemoryFraction::OfTotal(0.9));
    let err = msg(estimate_kv_cache(&s, &qwen3_32b(), &system("h200_sxm"), &r).unwrap_err());
    assert!(
        err.starts_with(
            "unsupported model/backend/GPU for KV-cache estimation: model=m, backend=vllm, gpu_sku=h200_sxm: "
        ),
        "{err}"
    );
    let mut r = r;
    r.allow_naive_fallback = true;
    r.gpu_memory_capacity_bytes_override = Some(85899345920);
    let mut s = s;
    s.engine.tp_size = 2;
    s.engine.cp_size = 1;
    // Native-unbuildable model (spec not compiled): the unbuilt entry point.
    let e =
        estimate_kv_cache_unbuilt(&s.engine, Some(&qwen3_32b()), &r, "no backend version").unwrap();
    assert_eq!(e.source, "naive_fallback");
    check(&e, 41973448704, 131072, 320232);
    assert_eq!(e.memory_breakdown, None);
    r.allow_naive_fallback = false;
    let err =
        msg(
            estimate_kv_cache_unbuilt(&s.engine, Some(&qwen3_32b()), &r, "no backend version")
                .unwrap_err(),
        );
    assert_eq!(
        err,
        "unsupported model/backend/GPU for KV-cache estimation: model=m, backend=vllm, \
         gpu_sku=h200_sxm: no backend version"
    );
    // Through estimate_kv_cache: an unimplemented KV family fails the native build.
    let mut f = qwen3_32b();
    f.family = ModelFamily::Qwen35;
    r.allow_naive_fallback = true;
    let e = estimate_kv_cache(&s, &f, &system("h200_sxm"), &r).unwrap();
    check(&e, 41973448704, 131072, 320232);
}

#[test]
fn validation_order_and_messages() {
    let s = spec(json!({"tp_size": 2}), qwen3_32b_ops(2));
    let sys = system("h200_sxm");
    let f = qwen3_32b();
    let run = |r: &KvCacheRequest, backend: &str| {
        let mut s = s.clone();
        s.engine.backend = serde_json::from_value(json!(backend)).unwrap();
        msg(estimate_kv_cache(&s, &f, &sys, r).unwrap_err())
    };
    let mut r = request(8192, MemoryFraction::OfFree(1.5));
    r.tolerance_fraction = Some(1.0);
    assert_eq!(
        run(&r, "vllm"),
        "incompatible memory fraction: backend 'vllm' does not accept memory_fraction_kind \
         'of_free' (expected 'of_total')"
    );
    assert_eq!(
        run(&request(8192, MemoryFraction::OfTotal(0.9)), "trtllm"),
        "incompatible memory fraction: backend 'trtllm' does not accept memory_fraction_kind \
         'of_total' (expected 'of_free')"
    );
    assert_eq!(
        run(&r, "trtllm"),
        "kv_cache_memory_fraction must be finite and in [0, 1], got 1.5"
    );
    r.memory_fraction = MemoryFraction::OfFree(f64::NAN);
    assert_eq!(
        run(&r, "trtllm"),
        "kv_cache_memory_fraction must be finite and in [0, 1], got nan"
    );
    r.memory_fraction = MemoryFraction::OfFree(0.9);
    assert_eq!(
        run(&r, "trtllm"),
        "tolerance_fraction must be finite and in [0, 1), got 1.0"
    );
    r.tolerance_fraction = Some(0.0);
    r.naive_kv_reservation = -0.5;
    assert_eq!(
        run(&r, "trtllm"),
        "naive_kv_reservation must be finite and in [0, 1], got -0.5"
    );
    // Validation precedes the build: an unbuildable spec still reports the request error.
    let mut bad = s.clone();
    bad.engine.tp_size = 3;
    bad.engine.backend = serde_json::from_value(json!("trtllm")).unwrap();
    assert!(
        msg(estimate_kv_cache(&bad, &f, &sys, &r).unwrap_err()).starts_with("naive_kv_reservation")
    );
    // Tolerance 0 keeps the bytes.
    r.naive_kv_reservation = 0.8;
    let mut s2 = s.clone();
    s2.engine.backend = serde_json::from_value(json!("trtllm")).unwrap();
    let e = estimate_kv_cache(&s2, &f, &sys, &r).unwrap();
    let adj = e.tolerance_adjusted.unwrap();
    assert_eq!(adj.total_kv_size_bytes, e.total_kv_size_bytes);
    assert_eq!(adj.total_kv_size_tokens, e.total_kv_size_bytes / 131072);
    // A zero capacity override is rejected.
    r.gpu_memory_capacity_bytes_override = Some(0);
    assert!(msg(estimate_kv_cache(&s2, &f, &sys, &r).unwrap_err()).contains("capacity"));
}

#[test]
fn missing_per_token_metadata() {
    let s = spec(json!({"tp_size": 2}), qwen3_32b_ops(2));
    let mut f = qwen3_32b();
    f.num_key_value_heads = 0;
    let err = msg(estimate_kv_cache(
        &s,
        &f,
        &system("h200_sxm"),
        &request(8192, MemoryFraction::OfTotal(0.9)),
    )
    .unwrap_err());
    assert_eq!(
        err,
        "insufficient model metadata; missing: kv_size_per_token_bytes"
    );
}

#[test]
fn spec12_memory_on_gb200_and_l40s() {
    // Spec 12 §9: the system supplies capacity, other_mem and nccl_mem[min(tp, 8)].
    let s = spec(
        json!({"system_name": "gb200", "tp_size": 8, "backend_version": "0.24.0"}),
        qwen3_32b_ops(8),
    );
    let e = estimate_kv_cache(&s, &qwen3_32b(), &system("gb200"), &request(8192, MemoryFraction::OfTotal(0.9)))
        .unwrap();
    check(&e, 165776680550, 32768, 5059102);
    let b = e.memory_breakdown.unwrap();
    assert_eq!(
        (b.weights_bytes, b.activations_bytes, b.runtime_overhead_bytes, b.comm_overhead_bytes),
        (8190361600, 671088640, 3758096384, 411041792)
    );
}

#[test]
fn spec12_memory_on_a_system_without_perf_data() {
    // Spec 12 §3.3: the reference's attribute error, verbatim, whatever the version.
    for version in [json!(null), json!("0.24.0")] {
        let s = spec(
            json!({"system_name": "l4", "backend_version": version}),
            qwen3_32b_ops(1),
        );
        let err = msg(
            estimate_kv_cache(&s, &qwen3_32b(), &system("l4"), &request(8192, MemoryFraction::OfTotal(0.9)))
                .unwrap_err(),
        );
        assert_eq!(
            err,
            "unsupported model/backend/GPU for KV-cache estimation: model=m, backend=vllm, \
             gpu_sku=l4: 'NoneType' object has no attribute 'system_spec'"
        );
    }
}
