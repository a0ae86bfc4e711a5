//! The calibrated serving estimate on the shipped example spec (Qwen3-32B, h200, vLLM, tp 2):
//! identity constants give the parity TPOT and the one-request prefill, fitted-style constants
//! give the closed form of `serving::calibrated`, the `LatencyModel` wrapper corrects engine
//! steps, and the shipped constants file loads.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use aic_core::data::system::SystemSpec;
use aic_core::engine::LatencyModel;
use aic_core::memory::ModelFacts;
use aic_core::serving::agg::{agg_eval, AggParams};
use aic_core::serving::calibrated::{calibrated_agg, calibrated_disagg};
use aic_core::serving::disagg::{DisaggParams, RoleParams};
use aic_core::serving::{CalibratedLatencyModel, Calibration, StepCorrection, Worker, WorkerLabels};
use aic_core::Engine;

const FACTS: &str = r#"{"architecture": "Qwen3ForCausalLM", "family": "LLAMA", "num_layers": 64,
 "hidden_size": 5120, "num_attention_heads": 64, "num_key_value_heads": 8, "head_dim": 128,
 "num_experts": 0, "topk": 0, "kv_lora_rank": null, "qk_rope_head_dim": null,
 "index_head_dim": null, "max_position_embeddings": 40960, "vocab_size": 151936,
 "intermediate_size": 25600, "moe_intermediate_size": null, "torch_dtype": "bfloat16",
 "sliding_window": null}"#;

const C: StepCorrection = StepCorrection {
    tpot_scale: 0.9,
    tpot_overhead_ms: 1.5,
    ttft_scale: 1.2,
    ttft_queue: 0.5,
    ttft_overhead_ms: 20.0,
};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data/systems")
}

fn engine() -> Engine {
    let spec = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/specs/qwen3-32b_h200_vllm_tp2.json");
    Engine::from_spec_file(&spec, Some(&root())).unwrap()
}

fn worker() -> Worker {
    Worker {
        engine: Arc::new(engine()),
        facts: Arc::new(serde_json::from_str::<ModelFacts>(FACTS).unwrap()),
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

fn cal(key: &str, c: Option<StepCorrection>) -> Calibration {
    let mut groups = BTreeMap::new();
    if let Some(c) = c {
        groups.insert(key.to_string(), c);
    }
    Calibration { version: 1, provenance: String::new(), groups, classes: BTreeMap::new(), hybrid: None }
}

fn agg() -> AggParams {
    AggParams {
        batch_size: 16,
        ctx_tokens: 2048,
        isl: 2048,
        osl: 256,
        prefix: 0,
        tokens_per_iteration: 1.0,
        max_seq_len: None,
        free_gpu_memory_fraction: None,
    }
}

#[test]
fn identity_constants_keep_the_parity_tpot() {
    let w = worker();
    let parity = agg_eval(&w, &agg()).unwrap();
    let (_, f) = calibrated_agg(&w, &agg(), &cal("", None), None).unwrap();
    assert_eq!(f.tpot, parity.row.f("tpot"));
    assert_eq!(f.parity_ttft, parity.row.f("ttft"));
    assert_eq!(f.ttft, w.engine.prefill_latency_ms(1, 2048, 0).unwrap());
    assert_eq!((f.requests_per_rank, f.group.as_str()), (16.0, ""));
    // The class splits add up to the figures they split.
    assert!((f.tpot_classes.total() - f.parity_tpot).abs() < 1e-9 * f.parity_tpot);
    assert!((f.prefill_classes.total() - f.prefill_one_ms).abs() < 1e-9 * f.prefill_one_ms);
    assert!(f.tpot_classes.0[0] > 0.0 && f.prefill_classes.0[1] > 0.0, "GEMM and attention time present");
    assert!(f.prefill_all_ms.unwrap() > f.prefill_one_ms);
    assert_eq!(f.hybrid, (false, false));
}

#[test]
fn agg_applies_the_closed_form_at_the_measured_concurrency() {
    let w = worker();
    let (_, f) = calibrated_agg(&w, &agg(), &cal("h200_sxm/vllm/agg", Some(C)), Some(9)).unwrap();
    assert_eq!(f.group, "h200_sxm/vllm/agg");
    let t1 = w.engine.prefill_latency_ms(1, 2048, 0).unwrap();
    assert!((f.ttft - (1.2 * t1 * (1.0 + 0.5 * 4.0) + 20.0)).abs() < 1e-9 * f.ttft);
    assert!((f.tpot - (0.9 * f.parity_tpot + 1.5)).abs() < 1e-12 * f.tpot);
}

#[test]
fn disagg_uses_the_requests_per_prefill_rank() {
    let w = worker();
    let role = |b| RoleParams { batch_size: b, max_seq_len: None, free_gpu_memory_fraction: None };
    let p = DisaggParams {
        isl: 2048,
        osl: 256,
        prefix: 0,
        accepted: None,
        prefill: role(1),
        prefill_workers: 2,
        decode: role(32),
        decode_workers: 1,
    };
    let (row, f) = calibrated_disagg(&w, &w, &p, &cal("*/vllm/*", Some(C)), None).unwrap();
    // 32 decode requests over 2 prefill workers: 16 arrive together per prefill rank.
    assert_eq!((f.requests_per_rank, f.group.as_str()), (16.0, "*/vllm/*"));
    assert_eq!(f.parity_tpot, row.f("tpot"));
    assert!(f.ttft > f.parity_ttft / 1.8);
}

#[test]
fn latency_model_wrapper_corrects_engine_steps() {
    let e = engine();
    let m = CalibratedLatencyModel::with_correction(&e, C);
    let raw = e.decode_step_ms(8, 2048, 256).unwrap();
    assert!((m.decode_step_ms(8, 2048, 256).unwrap() - (0.9 * raw + 1.5)).abs() < 1e-12 * raw);
    let pre = e.prefill_ms(1, 2048, 0).unwrap();
    assert!((m.prefill_ms(1, 2048, 0).unwrap() - 1.2 * pre).abs() < 1e-12 * pre);
}

#[test]
fn shipped_constants_load_and_cover_every_backend() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data/calibration/serving.json");
    let cal = Calibration::load(&path).unwrap();
    for backend in ["trtllm", "vllm", "sglang"] {
        let (_, key) = cal.lookup("l40s", backend, "agg");
        assert!(key.starts_with('*'), "{backend}: {key}");
    }
}
