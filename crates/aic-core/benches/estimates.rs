//! Per-estimate cost of the engine on warm tables (issue 6): one decode step, one prefill, a
//! decode step at the mid-trajectory position, a mixed step, a long decode and a static run,
//! for a dense, a MoE, an MLA, a DSA (GLM-5-FP8, b200 trtllm), a Qwen3.5 (Gated-DeltaNet
//! hybrid), a hybrid-attention (Llama-4 Scout), a Nemotron 3 Super (Mamba2 hybrid), a
//! DeepSeek-V4 (Flash-FP8, h200 sglang: mHC + CSA/HCA) and a MiniMax-M3 (h200 vllm: MSA)
//! engine. Arguments change on every call so no memo can hide the work. Run: `cargo bench -p aic-core --bench estimates`.

use std::hint::black_box;
use std::path::Path;

use aic_core::{BatchKind, Engine, EngineSpec, StaticRun};
use criterion::{criterion_group, criterion_main, Criterion, Throughput};

fn golden_engine(file: &str, id: &str) -> Engine {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../goldens").join(file);
    let doc: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let case = doc["cases"].as_array().unwrap().iter().find(|c| c["id"] == id).unwrap();
    let spec = serde_json::json!({
        "schema_version": 15,
        "engine": case["resolved"]["engine"],
        "context_ops": case["spec_ops"]["context"],
        "generation_ops": case["spec_ops"]["generation"],
    });
    Engine::from_spec(EngineSpec::from_json(&spec.to_string()).unwrap(), None).unwrap()
}

#[path = "../examples/support/arg_stream.rs"]
mod arg_stream;
use arg_stream::Args;

fn bench_engine(c: &mut Criterion, label: &str, engine: &Engine) {
    // Warm every table the engine touches.
    engine.prefill_latency_ms(1, 1024, 0).unwrap();
    engine.decode_latency_ms(1, 1024, 2).unwrap();
    let mut g = c.benchmark_group(label);
    let mut a = Args(0x9e3779b97f4a7c15);
    g.bench_function("decode_osl2", |b| {
        b.iter(|| black_box(engine.decode_latency_ms(a.next(1, 256), a.next(128, 8192), 2).unwrap()))
    });
    g.bench_function("decode_step", |b| {
        b.iter(|| black_box(engine.decode_step_latency_ms(a.next(1, 256), a.next(128, 8192), a.next(2, 1024), 1.0).unwrap()))
    });
    g.bench_function("prefill", |b| {
        b.iter(|| black_box(engine.prefill_latency_ms(a.next(1, 8), a.next(128, 8192), 0).unwrap()))
    });
    g.bench_function("mixed_step", |b| {
        b.iter(|| {
            black_box(
                engine
                    .mixed_step_latency_ms(a.next(256, 4096), a.next(1, 128), a.next(512, 8192), a.next(2, 1024), 0, 1.0, 1.0)
                    .unwrap(),
            )
        })
    });
    g.bench_function("decode_osl1024_stride32", |b| {
        b.iter(|| black_box(engine.decode_latency_ms(a.next(1, 256), a.next(128, 8192), 1024).unwrap()))
    });
    g.bench_function("static_run_osl512", |b| {
        b.iter(|| black_box(engine.run_static(&StaticRun::new(a.next(1, 16), a.next(128, 4096), 512)).unwrap()))
    });
    g.finish();
}

/// The batch API: 4096 decode (osl 2) points per call, distinct arguments, on one thread and
/// on every core; criterion reports estimates per second.
fn bench_batch(c: &mut Criterion, label: &str, engine: &Engine) {
    const POINTS: usize = 4096;
    let mut a = Args(0x2545_f491_4f6c_dd1d);
    let batch: Vec<u32> = (0..POINTS).map(|_| a.next(1, 256)).collect();
    let isl: Vec<u32> = (0..POINTS).map(|_| a.next(128, 8192)).collect();
    let osl = vec![2u32; POINTS];
    let mut g = c.benchmark_group(label);
    g.throughput(Throughput::Elements(POINTS as u64));
    let mut out = vec![0.0; POINTS];
    g.bench_function("decode_osl2_batch_1thread", |b| {
        b.iter(|| engine.estimate_batch_into(BatchKind::Decode, &batch, &isl, &osl, Some(1), &mut out).unwrap())
    });
    g.bench_function("decode_osl2_batch_all_cores", |b| {
        b.iter(|| engine.estimate_batch_into(BatchKind::Decode, &batch, &isl, &osl, None, &mut out).unwrap())
    });
    g.finish();
}

fn estimates(c: &mut Criterion) {
    let dense = golden_engine("dense.json", "dense/Qwen3-32B/h200_sxm/vllm/tp2-pp1-dp1");
    bench_engine(c, "dense_qwen3_32b_tp2", &dense);
    bench_batch(c, "dense_qwen3_32b_tp2_batch", &dense);
    let moe = golden_engine("moe.json", "moe/Qwen3-30B-A3B/h200_sxm/vllm/tp4-pp1-dp1-mtp1-ep4");
    bench_engine(c, "moe_qwen3_30b_a3b_tp4_ep4", &moe);
    let mla = golden_engine("mla.json", "mla/DeepSeek-V3/h200_sxm/vllm/tp8-pp1-dp1-mtp1-ep8");
    bench_engine(c, "mla_deepseek_v3_tp8_ep8", &mla);
    let dsa = golden_engine("dsa.json", "dsa/GLM-5-FP8/b200_sxm/trtllm/tp8-pp1-dp1-mtp1-ep8");
    bench_engine(c, "dsa_glm5_fp8_b200_tp8_ep8", &dsa);
    let gdn = golden_engine("qwen35.json", "qwen35/Qwen3.5-397B-A17B/h200_sxm/vllm/tp8-pp1-dp1-mtp1-ep8");
    bench_engine(c, "qwen35_397b_a17b_tp8_ep8", &gdn);
    // Hybrid attention (spec 35): two layer-type blocks, a global and a window-8192 attention
    // op per phase.
    let scout = golden_engine("hybrid.json", "hybrid/Llama-4-Scout-17B-16E-Instruct/h200_sxm/vllm/tp4-pp1-dp1-mtp4-epx");
    bench_engine(c, "hybrid_llama4_scout_tp4", &scout);
    let mamba = golden_engine("nemotron.json", "nemotron/NVIDIA-Nemotron-3-Super-120B-A12B-FP8/h200_sxm/vllm/tp4-pp1-dp1-mtp1-ep4");
    bench_engine(c, "nemotron3_super_120b_fp8_tp4_ep4", &mamba);
    let dsv4 = golden_engine("dsv4.json", "dsv4/DeepSeek-V4-Flash-FP8/h200_sxm/sglang/tp8-pp1-dp1-mtpx-ep8");
    bench_engine(c, "dsv4_flash_fp8_h200_sglang_tp8_ep8", &dsv4);
    // MiniMax-M3 (spec 36): one MSA op per phase answered from the MSA module grids.
    let msa = golden_engine("sparse_linear.json", "sparse_linear/MiniMax-M3/h200_sxm/vllm/tp8-pp1-dp1-mtp1-ep8");
    bench_engine(c, "msa_minimax_m3_h200_vllm_tp8_ep8", &msa);
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(30).measurement_time(std::time::Duration::from_secs(2)).warm_up_time(std::time::Duration::from_millis(500));
    targets = estimates
}
criterion_main!(benches);
