//! The worked examples of spec 50 (serving level) on the shipped example spec
//! (Qwen3-32B, h200, vLLM, tp 2): S1 (static), A1 (agg) and D1 (disagg), bit-exact.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use aic_core::data::system::SystemSpec;
use aic_core::engine::RunMode;
use aic_core::memory::ModelFacts;
use aic_core::serving::agg::{agg_estimate, AggParams};
use aic_core::serving::disagg::{disagg_estimate, DisaggParams, RoleParams};
use aic_core::serving::static_mode::{static_estimate, StaticParams};
use aic_core::serving::{Worker, WorkerLabels};
use aic_core::Engine;

const FACTS: &str = r#"{"architecture": "Qwen3ForCausalLM", "family": "LLAMA", "num_layers": 64,
 "hidden_size": 5120, "num_attention_heads": 64, "num_key_value_heads": 8, "head_dim": 128,
 "num_experts": 0, "topk": 0, "kv_lora_rank": null, "qk_rope_head_dim": null,
 "index_head_dim": null, "max_position_embeddings": 40960, "vocab_size": 151936,
 "intermediate_size": 25600, "moe_intermediate_size": null, "torch_dtype": "bfloat16",
 "sliding_window": null}"#;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data/systems")
}

fn worker() -> Worker {
    let spec = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/specs/qwen3-32b_h200_vllm_tp2.json");
    let engine = Engine::from_spec_file(&spec, Some(&root())).unwrap();
    let facts: ModelFacts = serde_json::from_str(FACTS).unwrap();
    Worker {
        engine: Arc::new(engine),
        facts: Arc::new(facts),
        system: Arc::new(SystemSpec::load(&root(), "h200_sxm").unwrap()),
        labels: WorkerLabels {
            gemm: "bfloat16".into(),
            kvcache: "bfloat16".into(),
            fmha: "bfloat16".into(),
            moe: "bfloat16".into(),
            comm: "half".into(),
            moe_tp: None,
            moe_ep: None,
        },
    }
}

#[test]
fn s1_static() {
    let w = worker();
    let p = StaticParams { mode: RunMode::Static, batch_size: 8, isl: 2048, osl: 256, prefix: 0, stride: 32, scale: 1.0, kv_seq: None };
    let est = static_estimate(&w, &p, None).unwrap();
    let r = &est.eval.row;
    assert_eq!(r.f("context_latency"), 878.0051658592473);
    // The per-op sum, not the engine's run_static total (…452).
    assert_eq!(r.f("generation_latency"), 2843.437016587453);
    assert_eq!(r.f("tpot"), 11.150733398382169);
    assert_eq!(r.f("request_latency"), 3721.4421824467004);
    assert_eq!(r.f("seq/s"), 2.149704229649033);
    assert_eq!(r.f("tokens/s/gpu"), 275.1621413950762);
    assert_eq!(r.f("tokens/s/user"), 89.68019988219676);
    assert_eq!(est.eval.memory.total, 38.220458984375);
    assert!(est.kv_cache_warning.is_none());
}

#[test]
fn a1_agg() {
    let w = worker();
    let p = AggParams {
        batch_size: 32,
        ctx_tokens: 2048,
        isl: 2048,
        osl: 256,
        prefix: 0,
        tokens_per_iteration: 1.0,
        max_seq_len: None,
        free_gpu_memory_fraction: None,
    };
    let est = agg_estimate(&w, &p).unwrap();
    let s = est.eval.schedule;
    assert_eq!((s.g, s.mix_steps, s.genonly_steps, s.tpot_mix_steps), (31, 32.0, 224.0, 32.0));
    assert_eq!(s.l_mix, 109.0813478388027);
    assert_eq!(s.l_gen, 13.577413513057028);
    let r = &est.eval.row;
    assert_eq!(r.f("ttft"), 260.4571902380544);
    assert_eq!(r.f("tpot"), 25.51540530377524);
    // Little's-law cap of vLLM.
    assert_eq!(r.f("tokens/s"), 1205.8723246474851);
    assert_eq!(r.f("request_latency"), 6766.88554270074);
    assert_eq!(r.f("num_tokens"), 2079.0);
    assert_eq!(est.eval.memory.total, 43.551658630371094);
}

#[test]
fn d1_disagg() {
    let w = worker();
    let role = |b| RoleParams { batch_size: b, max_seq_len: None, free_gpu_memory_fraction: None };
    let p = DisaggParams {
        isl: 2048,
        osl: 256,
        prefix: 0,
        accepted: None,
        prefill: role(1),
        prefill_workers: 2,
        decode: role(64),
        decode_workers: 1,
    };
    let est = disagg_estimate(&w, &w, &p).unwrap();
    assert_eq!(est.prefill.eval.row.f("context_latency"), 113.3494964745582);
    assert_eq!(est.decode.eval.row.f("generation_latency"), 4484.494444611716);
    let r = &est.row;
    assert_eq!(r.f("ttft"), 204.028);
    assert_eq!(r.f("tpot"), 17.586);
    assert_eq!(r.f("seq/s"), 13.129);
    assert_eq!(r.f("seq/s/gpu"), 2.188);
    assert_eq!(r.f("tokens/s"), 3361.106);
    assert_eq!(r.f("tokens/s/gpu"), 560.184);
    assert_eq!(r.f("request_latency"), 4688.458);
    assert_eq!(r.f("(p)memory"), 34.799);
    assert_eq!(r.f("(d)memory"), 52.414);
}
