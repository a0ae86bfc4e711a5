//! The worked examples of spec 36 §5 (MiniMax-M3 `MsaContext` / `MsaGeneration`) as tests: the
//! SOL roofline (§5.2), the silicon lookups with their holds and off-grid heads (§5.4), the
//! generation FMHA blanking and key misses (§5.3, §5.7), the database modes and the GLM-5 DSA
//! transfer (§5.5, §5.6), and the engine-level values of §8.
//!
//! Engines come from the MiniMax-M3 cases of `sparse_linear.json`; ops are the cases' own MSA ops
//! with fields edited in memory.

#[path = "spec_examples/common.rs"]
mod common;

use aic_core::engine::provenance::ProvenanceTier;
use aic_core::{Engine, EngineSpec, ErrorClass};
use serde_json::{json, Value};

use common::*;

const H200_VLLM: &str = "sparse_linear/MiniMax-M3/h200_sxm/vllm/tp8-pp1-dp1-mtp1-ep8";
const H200_SGLANG: &str = "sparse_linear/MiniMax-M3/h200_sxm/sglang/tp8-pp1-dp1-mtp1-ep8";
const H200_SGLANG_16: &str = "sparse_linear/MiniMax-M3/h200_sxm/sglang/v0.5.16/tp8-pp1-dp1-mtp1-ep8";
const B200_TRTLLM_23: &str = "sparse_linear/MiniMax-M3/b200_sxm/trtllm/v1.3.0rc23/tp8-pp1-dp1-mtp1-ep8";
const H200_TRTLLM: &str = "sparse_linear/MiniMax-M3/h200_sxm/trtllm/tp4-pp1-dp1-mtp1-ep4";

/// The case's MSA op of a phase with `scale_factor` 1 and the given fields replaced.
fn msa(id: &str, context: bool, changes: &[(&str, Value)]) -> Value {
    let name = if context { "context_attention" } else { "generation_attention" };
    let mut all = vec![("scale_factor", json!(1.0))];
    all.extend(changes.iter().cloned());
    with(&spec_op(id, name), &all)
}

/// The engine of a case in another database mode.
fn engine_in(id: &str, mode: &str) -> &'static Engine {
    use std::collections::HashMap;
    use std::sync::{Mutex, OnceLock};
    static ENGINES: OnceLock<Mutex<HashMap<String, &'static Engine>>> = OnceLock::new();
    let key = format!("{id}@{mode}");
    let mut map = ENGINES.get_or_init(Default::default).lock().unwrap_or_else(|p| p.into_inner());
    if let Some(e) = map.get(&key) {
        return e;
    }
    let mut spec = case_spec(id);
    spec["engine"]["database_mode"] = json!(mode);
    let spec = EngineSpec::from_json(&spec.to_string()).unwrap();
    let e: &'static Engine = Box::leak(Box::new(Engine::from_spec(spec, None).unwrap()));
    map.insert(key, e);
    e
}

fn gen_err(engine: &Engine, op: &Value, b: u32, s: u32) -> aic_core::AicError {
    match eval(engine, std::slice::from_ref(op), false, b, s, 0, 1.0, None) {
        Ok(v) => panic!("expected an error, got {v:?}"),
        Err(e) => e,
    }
}

// §5.2 SOL (through the SOL-mode engine: the op publishes no decomposition)

#[test]
fn sol_mode_prices_the_roofline() {
    let e = engine_in(H200_VLLM, "SOL");
    let c = ctx1(e, &msa(H200_VLLM, true, &[]), 2, 3000, 0);
    check("ctx b2 s3000", c.latency_ms, "0.24353078202628917");
    check_source(&c, "sol");
    check("ctx b3 s5000 p1500", ctx1(e, &msa(H200_VLLM, true, &[]), 3, 5000, 1500).latency_ms, "0.6505806057997978");
    let g = gen1(e, &msa(H200_VLLM, false, &[]), 8, 2049);
    check("gen b8 s2049", g.latency_ms, "0.008963413333333333");
    check("gen b1 s100", gen1(e, &msa(H200_VLLM, false, &[]), 1, 100).latency_ms, "0.007220373333333333");
    assert_eq!(g.energy_wms, 0.0);
}

#[test]
fn sol_decomposition_is_refused() {
    let e = engine_in(H200_VLLM, "SOL");
    let json = Value::Array(vec![msa(H200_VLLM, true, &[])]).to_string();
    let err = e.evaluate_ops_sol_json(&json, true, 2, 3000, 0, 1.0, None).unwrap_err();
    assert!(err.to_string().contains("context_attention"), "{err}");
}

// §5.4 silicon

#[test]
fn silicon_context_worked_values() {
    let e = engine(H200_VLLM);
    let op = msa(H200_VLLM, true, &[]);
    let c = ctx1(e, &op, 2, 3000, 0);
    check("b2 s3000", c.latency_ms, "0.81787734375");
    check_source(&c, "silicon");
    assert_eq!(c.energy_wms, 0.0);
    check("b1 s1024 exact", ctx1(e, &op, 1, 1024, 0).latency_ms, "0.1145");
    check("prefix 1500 hold", ctx1(e, &op, 3, 5000, 1500).latency_ms, "2.336385342880571");
    check("isl hold", ctx1(e, &op, 1, 200000, 0).latency_ms, "35.68681215152931");
    let nh6 = msa(H200_VLLM, true, &[("num_heads", json!(6))]);
    check("nh 6 interpolates", ctx1(e, &nh6, 1, 1000, 0).latency_ms, "0.1040859375");
    let fp8 = msa(H200_VLLM, true, &[("kv_cache_dtype", json!("fp8"))]);
    check("kv fp8 slice", ctx1(e, &fp8, 1, 2048, 0).latency_ms, "0.3829");
    let sf60 = msa(H200_VLLM, true, &[("scale_factor", json!(60.0))]);
    check("scale 60", ctx1(e, &sf60, 2, 3000, 0).latency_ms, "49.072640625");
}

#[test]
fn silicon_generation_worked_values() {
    let e = engine(H200_VLLM);
    let op = msa(H200_VLLM, false, &[]);
    check("b8 s2049", gen1(e, &op, 8, 2049).latency_ms, "0.02980205078125");
    check("b5 s7777", gen1(e, &op, 5, 7777).latency_ms, "0.03201035766601562");
    check("b1 s100", gen1(e, &op, 1, 100).latency_ms, "0.0273");
    check("hold", gen1(e, &op, 512, 300000).latency_ms, "5.471672837716579");
    let fp8b = msa(H200_VLLM, false, &[("gemm_quant_mode", json!("fp8_block"))]);
    check("fp8_block slice", gen1(e, &fp8b, 16, 4096).latency_ms, "0.0425");
    let sf60 = msa(H200_VLLM, false, &[("scale_factor", json!(60.0))]);
    check("scale 60", gen1(e, &sf60, 8, 2049).latency_ms, "1.788123046875");
}

/// §5.3 step 2: generation keys blank the FMHA component, context keys keep it.
#[test]
fn generation_key_ignores_fmha_context_key_does_not() {
    let e = engine(H200_VLLM);
    let gen = msa(H200_VLLM, false, &[("fmha_quant_mode", json!("fp8"))]);
    check("gen fmha fp8", gen1(e, &gen, 8, 2049).latency_ms, "0.02980205078125");
    let ctx = msa(H200_VLLM, true, &[("fmha_quant_mode", json!("fp8"))]);
    let err = ctx1_err(e, &ctx, 1, 2048, 0);
    check_perf_miss(&err, "context MSA module data missing for DsaKey { architecture: \"MiniMaxM3ForCausalLM\", fmha_quant: \"fp8\"");
}

// §5.7 errors

#[test]
fn missing_table_and_key_messages() {
    let e = engine(H200_SGLANG);
    let err = ctx1_err(e, &msa(H200_SGLANG, true, &[]), 1, 1024, 0);
    assert_eq!(
        err.to_string(),
        "perf database error: perf database error: perf database error: no DSA module rows loaded from 1 \
         source(s) (first: systems/data/h200_sxm/sglang/0.5.14/msa_context_module_perf.parquet)"
    );
    let e = engine(B200_TRTLLM_23);
    let fp8 = msa(B200_TRTLLM_23, true, &[("kv_cache_dtype", json!("fp8"))]);
    assert_eq!(
        ctx1_err(e, &fp8, 1, 1024, 0).to_string(),
        "perf database error: context MSA module data missing for DsaKey { architecture: \"MiniMaxM3ForCausalLM\", \
         fmha_quant: \"bfloat16\", kv_quant: \"fp8\", gemm_quant: \"bfloat16\" } at systems/data/b200_sxm/trtllm/1.3.0rc23"
    );
    let e = engine(H200_SGLANG_16);
    let fp8b = msa(H200_SGLANG_16, false, &[("gemm_quant_mode", json!("fp8_block"))]);
    assert_eq!(
        gen_err(e, &fp8b, 8, 2049).to_string(),
        "perf database error: generation MSA module data missing for DsaKey { architecture: \"MiniMaxM3ForCausalLM\", \
         fmha_quant: \"\", kv_quant: \"bfloat16\", gemm_quant: \"fp8_block\" } at systems/data/h200_sxm/sglang/0.5.16"
    );
}

// §5.5 / §5.6 the cross-op transfer

#[test]
fn empirical_transfers_the_glm5_dsa_utilisation() {
    let e = engine_in(H200_VLLM, "EMPIRICAL");
    let c = ctx1(e, &msa(H200_VLLM, true, &[]), 2, 3000, 0);
    check("ctx b2 s3000", c.latency_ms, "1.1846927200726747");
    check_source(&c, "empirical");
    assert_eq!(e.last_provenance(), Some(ProvenanceTier::Xop));
    let sf60 = msa(H200_VLLM, true, &[("scale_factor", json!(60.0))]);
    check("ctx × 60", ctx1(e, &sf60, 2, 3000, 0).latency_ms, "71.08156320436048");
    check("gen b8 s2049", gen1(e, &msa(H200_VLLM, false, &[]), 8, 2049).latency_ms, "0.1025694582678282");
    let op = msa(H200_VLLM, true, &[]);
    check("ctx b1 s1024", ctx1(e, &op, 1, 1024, 0).latency_ms, "0.5254829073389805");
    check("ctx prefix 1500", ctx1(e, &op, 3, 5000, 1500).latency_ms, "3.1152853814359895");
    check("ctx s 200000", ctx1(e, &op, 1, 200000, 0).latency_ms, "30.982923459065166");
    check("ctx prefix 64", ctx1(e, &op, 2, 3000, 64).latency_ms, "1.2198723946597134");
    let fp8 = msa(H200_VLLM, true, &[("kv_cache_dtype", json!("fp8"))]);
    check("ctx kv fp8", ctx1(e, &fp8, 1, 2048, 0).latency_ms, "0.9258784382076181");
    let k2 = msa(H200_VLLM, true, &[("dsa_scale_k", json!(2.0))]);
    check("dsa_scale_k 2", ctx1(e, &k2, 1, 2048, 0).latency_ms, "0.2693008869211717");
    let gen = msa(H200_VLLM, false, &[]);
    check("gen b1 s100", gen1(e, &gen, 1, 100).latency_ms, "0.07214161770944648");
    check("gen hold", gen1(e, &gen, 512, 300000).latency_ms, "0.39503629773801485");
    let nh6 = msa(H200_VLLM, true, &[("num_heads", json!(6))]);
    check("nh 6", ctx1(e, &nh6, 1, 1000, 0).latency_ms, "0.47433376587923715");
    // `dsa_scale_k = 0` divides to infinity (the reference returns `inf`); our engine's
    // overflow rule turns a non-finite pass into an error instead.
    let k0 = msa(H200_VLLM, true, &[("dsa_scale_k", json!(0.0))]);
    assert!(eval(e, std::slice::from_ref(&k0), true, 1, 2048, 0, 1.0, None).is_err());
}

#[test]
fn hybrid_uses_the_table_when_it_answers_and_the_transfer_on_a_miss() {
    let e = engine_in(H200_VLLM, "HYBRID");
    let c = ctx1(e, &msa(H200_VLLM, true, &[]), 2, 3000, 0);
    check("table", c.latency_ms, "0.81787734375");
    check_source(&c, "silicon");
    let e = engine_in(H200_SGLANG, "HYBRID");
    check("sglang ctx xop", ctx1(e, &msa(H200_SGLANG, true, &[]), 2, 3000, 0).latency_ms, "0.850246874101848");
    check("sglang gen xop", gen1(e, &msa(H200_SGLANG, false, &[]), 8, 2049).latency_ms, "0.03590134792767448");
}

#[test]
fn transfer_failures_are_empirical_not_implemented() {
    let e = engine_in(H200_VLLM, "EMPIRICAL");
    let ctx = msa(H200_VLLM, true, &[("fmha_quant_mode", json!("fp8"))]);
    let err = ctx1_err(e, &ctx, 1, 2048, 0);
    assert_eq!(err.class(), ErrorClass::EmpiricalNotImplemented);
    assert_eq!(
        err.to_string(),
        "empirical estimation not implemented: MSA context: no DSA util to transfer from \
         (arch=GlmMoeDsaForCausalLM, b=1, s=2048); collect MSA/DSA data or set msa_dsa_scale_k against an \
         available quant."
    );
    let gen = msa(H200_VLLM, false, &[("fmha_quant_mode", json!("fp8"))]);
    assert!(gen_err(e, &gen, 8, 2049).to_string().contains("MSA generation: no DSA util to transfer from"));
    // HYBRID generation never gets there: the blanked MSA key answers.
    let h = engine_in(H200_VLLM, "HYBRID");
    check("hybrid gen fmha fp8", gen1(h, &gen, 8, 2049).latency_ms, "0.02980205078125");
}

#[test]
fn trtllm_rc20_empirical_with_the_compiled_scale() {
    let e = engine_in(H200_TRTLLM, "EMPIRICAL");
    // The case is tp 4; the spec's points use the tp 8 head shard (8 query heads, 1 KV head).
    let tp8 = [("scale_factor", json!(60.0)), ("num_heads", json!(8)), ("num_kv_heads", json!(1))];
    let ctx = msa(H200_TRTLLM, true, &tp8);
    check("ctx", ctx1(e, &ctx, 2, 3000, 0).latency_ms, "186.98767394394739");
    let gen = msa(H200_TRTLLM, false, &tp8);
    check("gen", gen1(e, &gen, 8, 2049).latency_ms, "10.266725989668908");
}

// §8 engine level

#[test]
fn engine_level_values() {
    let e = engine(H200_VLLM);
    check("prefill 1 1024", e.prefill_latency_ms(1, 1024, 0).unwrap(), "57.585468431512446");
    check("prefill 2 3000", e.prefill_latency_ms(2, 3000, 0).unwrap(), "211.35863137757696");
    check("prefill prefix", e.prefill_latency_ms(1, 4096, 1024).unwrap(), "119.61143811949762");
    check("decode", e.decode_latency_ms(8, 2048, 128).unwrap(), "2039.1478374393905");
    let sol = engine_in(H200_VLLM, "SOL");
    check("SOL prefill", sol.prefill_latency_ms(1, 1024, 0).unwrap(), "33.49064839257836");
    let hy = engine_in(H200_SGLANG, "HYBRID");
    check("sglang HYBRID prefill", hy.prefill_latency_ms(1, 1024, 0).unwrap(), "77.42596482931958");
    check("sglang HYBRID decode", hy.decode_latency_ms(8, 2048, 128).unwrap(), "2245.9023478068766");
    let si = engine(H200_SGLANG);
    assert_eq!(si.prefill_latency_ms(1, 1024, 0).unwrap_err().class(), ErrorClass::PerfDataNotAvailable);
}
