//! The worked examples of spec 32 (DeepSeek-V3.2 / GLM-5.x DSA modules) as tests: the integer
//! SOL formulas (§5.3 S1–S8), the SILICON lookups and holds (§5.9 C1–G6, K-rows), the
//! duplicate-row rule (§4.3 rule 6), the `full_frac` amortisation (§3.4, §5.5), the empirical
//! variants (§5.6 E1–E8), context parallelism (§5.7) and the weight formula (§7.1).
//!
//! Engines come from the golden cases of `goldens/dsa.json`; ops are the cases' own DSA ops
//! with fields edited in memory.

#[path = "spec_examples/common.rs"]
mod common;

use aic_core::{Engine, EngineSpec, ErrorClass};
use serde_json::{json, Value};

use common::*;

const GLM_B200_TRTLLM_BF16: &str = "dsa/GLM-5/b200_sxm/trtllm/tp8-pp1-dp1-mtp1-ep8";
const GLM_B200_SGLANG_TP8: &str = "dsa/GLM-5-FP8/b200_sxm/sglang/tp8-pp1-dp1-mtp1-ep8";
const GLM_B200_SGLANG_ADP8: &str = "dsa/GLM-5-FP8/b200_sxm/sglang/tp1-pp1-dp8-mtp1-ep8";
const GLM_H200_TRTLLM_KVBF16: &str = "dsa/GLM-5-FP8/h200_sxm/trtllm/tp8-pp1-dp1-mtp1-ep8/kvcache=bfloat16";
const GLM_H200_TRTLLM: &str = "dsa/GLM-5-FP8/h200_sxm/trtllm/tp8-pp1-dp1-mtp1-ep8";
const GLM_H200_SGLANG_ADP8: &str = "dsa/GLM-5-FP8/h200_sxm/sglang/tp1-pp1-dp8-mtp1-ep8";
const GLM_H100_SGLANG: &str = "dsa/GLM-5-FP8/h100_sxm/sglang/tp8-pp1-dp1-mtp1-ep8";
const DSV32_NVFP4_B200_TRTLLM: &str = "dsa/DeepSeek-V3.2-NVFP4/b200_sxm/trtllm/tp8-pp1-dp1-mtp1-ep8";
const DSV32_H200_VLLM: &str = "dsa/DeepSeek-V3.2/h200_sxm/vllm/tp8-pp1-dp1-mtp1-ep8";
const GLM_H200_VLLM: &str = "dsa/GLM-5-FP8/h200_sxm/vllm/tp8-pp1-dp1-mtp1-ep8";
const GLM_B200_VLLM: &str = "dsa/GLM-5-FP8/b200_sxm/vllm/tp8-pp1-dp1-mtp1-ep8";
const DSV32_H100_VLLM: &str = "dsa/DeepSeek-V3.2/h100_sxm/vllm/tp8-pp1-dp1-mtp1-ep8";

/// The case's DSA op of a phase with `scale_factor` 1 and the given fields replaced.
fn dsa(id: &str, context: bool, changes: &[(&str, Value)]) -> Value {
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

// ---------------------------------------------------------------------------------------------
// §5.3 SOL

#[test]
fn sol_context_and_generation() {
    let e = engine(GLM_H200_TRTLLM_KVBF16);
    let op = dsa(GLM_H200_TRTLLM_KVBF16, true, &[]);
    let sol = |op: &Value, ctx: bool, b: u32, s: u32, p: u32| {
        let json = Value::Array(vec![op.clone()]).to_string();
        e.evaluate_ops_sol_json(&json, ctx, b, s, p, 1.0, None).unwrap()[0].clone()
    };
    let s1 = sol(&op, true, 1, 1024, 0);
    check("S1", s1.sol_time_ms, "0.10057052512032356");
    check("S1 mem", s1.sol_mem_ms, "0.021326506666666665");
    check("S2", sol(&op, true, 4, 8192, 1000).sol_time_ms, "5.312711208897877");
    let s3 = sol(&op, true, 2, 1000, 3000);
    check("S3", s3.sol_time_ms, "0.28361383215369057");
    check("S3 mem", s3.sol_mem_ms, "0.029110453333333335");
    let gen = dsa(GLM_H200_TRTLLM_KVBF16, false, &[]);
    let s6 = sol(&gen, false, 8, 2048, 0);
    check("S6", s6.sol_time_ms, "0.02199552");
    check("S6 math", s6.sol_math_ms, "0.0010697807724974722");
    let s7 = sol(&gen, false, 64, 100000, 0);
    check("S7", s7.sol_time_ms, "0.22507008");
    check("S7 math", s7.sol_math_ms, "0.034521369625884736");
    // S5: the skip pass zeroes the indexer terms; w = 0.25 blends the parts componentwise
    let e = engine(DSV32_NVFP4_B200_TRTLLM);
    let op = dsa(DSV32_NVFP4_B200_TRTLLM, true, &[]);
    let json = Value::Array(vec![op]).to_string();
    let s4 = e.evaluate_ops_sol_json(&json, true, 1, 1024, 0, 1.0, None).unwrap()[0].clone();
    check("S4", s4.sol_time_ms, "0.019633537024");
    check("S4 mem", s4.sol_mem_ms, "0.0064025267532467536");
    let gen = dsa(DSV32_NVFP4_B200_TRTLLM, false, &[]);
    let json = Value::Array(vec![gen]).to_string();
    let s8 = e.evaluate_ops_sol_json(&json, false, 8, 2048, 0, 1.0, None).unwrap()[0].clone();
    check("S8", s8.sol_time_ms, "0.005049250909090909");
    check("S8 math", s8.sol_math_ms, "0.00040311921777777776");
}

#[test]
fn sol_mode_amortisation() {
    let e = engine_in(GLM_H200_TRTLLM_KVBF16, "SOL");
    let op = dsa(GLM_H200_TRTLLM_KVBF16, true, &[("full_frac", json!(0.2692307692307692))]);
    check("SOL amortised ctx", ctx1(e, &op, 1, 4096, 0).latency_ms, "0.4947977888764098");
    let e = engine_in(GLM_B200_SGLANG_TP8, "SOL");
    let gen = dsa(GLM_B200_SGLANG_TP8, false, &[("full_frac", json!(0.2692307692307692))]);
    check("SOL amortised gen", gen1(e, &gen, 8, 4096).latency_ms, "0.012766753246753247");
    let e = engine(GLM_B200_SGLANG_TP8);
    let op = dsa(GLM_B200_SGLANG_TP8, true, &[("full_frac", json!(0.25))]);
    let json = Value::Array(vec![op]).to_string();
    let split = e.evaluate_ops_sol_json(&json, true, 1, 4096, 0, 1.0, None).unwrap()[0].clone();
    check("SOL_FULL w", split.sol_time_ms, "0.21690377102222225");
    check("SOL_FULL w mem", split.sol_mem_ms, "0.01658028883116883");
}

// ---------------------------------------------------------------------------------------------
// §5.9 SILICON lookups and holds

#[test]
fn silicon_context_interpolation_and_holds() {
    let e = engine(GLM_B200_TRTLLM_BF16);
    let op = dsa(GLM_B200_TRTLLM_BF16, true, &[]);
    let c = |b, s, p| ctx1(e, &op, b, s, p).latency_ms;
    check("C1", c(1, 1024, 0), "0.2684");
    check("C2", c(1, 1000, 0), "0.2630703125");
    check("C3", c(3, 1024, 0), "0.6376499999999999");
    check("C4", c(1, 1024, 64), "0.28075000000000006");
    check("C5 hold", c(1, 40000, 0), "25.591504499178487");
    check("C6 hold", c(1, 1024, 1000), "0.33406850710705976");
    check("C7 hold", c(512, 1024, 0), "85.23535199149957");
    check_source(&ctx1(e, &op, 1, 40000, 0), "silicon");
}

#[test]
fn silicon_generation_interpolation_and_holds() {
    let e = engine(GLM_B200_TRTLLM_BF16);
    let op = dsa(GLM_B200_TRTLLM_BF16, false, &[]);
    let g = |b, s| gen1(e, &op, b, s).latency_ms;
    check("G1", g(1, 1025), "0.0723");
    check("G2", g(1, 1000), "0.07224140625");
    check("G3", g(3, 1025), "0.07985");
    check("G4 hold", g(1, 200000), "0.14965367640505756");
    check("G5 hold", g(2048, 1025), "0.8520082905031958");
    check("G6", g(8, 2049), "0.2264");
    check("G6b", g(8, 2048), "0.22625654296874997");
}

#[test]
fn buckets_and_head_counts() {
    // K1: bf16-KV sglang rows back the trtllm bucket too
    let e = engine(GLM_B200_SGLANG_TP8);
    let k1 = dsa(GLM_B200_SGLANG_TP8, true, &[("kv_cache_dtype", json!("bfloat16"))]);
    check("K1", ctx1(e, &k1, 1, 4096, 0).latency_ms, "2.3183");
    let k2 = dsa(GLM_B200_SGLANG_TP8, true, &[]);
    check("K2", ctx1(e, &k2, 2, 3000, 0).latency_ms, "1.19955");
    check("K4", ctx1(e, &k1, 1, 100, 5000).latency_ms, "1.084468408203125");
    // K3: h200 sglang kv fp8 only in flashmla_kv (bucket fallback), isl beyond 8192 → hold
    let e = engine(GLM_H200_SGLANG_ADP8);
    let k3 = dsa(GLM_H200_SGLANG_ADP8, true, &[("num_heads", json!(8)), ("gemm_quant_mode", json!("fp8_block"))]);
    check("K3", ctx1(e, &k3, 1, 16384, 0).latency_ms, "18.455247069910232");
    // K9: below the table's smallest head count (hold)
    let e = engine(GLM_B200_SGLANG_TP8);
    let k9c = dsa(GLM_B200_SGLANG_TP8, true, &[("num_heads", json!(4)), ("kv_cache_dtype", json!("bfloat16"))]);
    let k9g = dsa(GLM_B200_SGLANG_TP8, false, &[("num_heads", json!(4)), ("kv_cache_dtype", json!("bfloat16"))]);
    check("K9 ctx", ctx1(e, &k9c, 1, 1024, 0).latency_ms, "0.2891417011203385");
    check("K9 gen", gen1(e, &k9g, 4, 1024).latency_ms, "0.06163498328970299");
    // K10: between 8 and 16 heads
    let e = engine(GLM_H200_TRTLLM_KVBF16);
    let k10c = dsa(GLM_H200_TRTLLM_KVBF16, true, &[("num_heads", json!(12))]);
    let k10g = dsa(GLM_H200_TRTLLM_KVBF16, false, &[("num_heads", json!(12))]);
    check("K10 ctx", ctx1(e, &k10c, 1, 1024, 0).latency_ms, "1.57155");
    check("K10 gen", gen1(e, &k10g, 4, 1024).latency_ms, "0.25329697265625");
}

#[test]
fn vllm_and_long_context_rows() {
    // K5 / K7: h200 vllm GLM kv fp8 gemm bf16
    let e = engine(GLM_H200_VLLM);
    check("K5", ctx1(e, &dsa(GLM_H200_VLLM, true, &[]), 4, 3000, 0).latency_ms, "13.07649296875");
    check("K7", gen1(e, &dsa(GLM_H200_VLLM, false, &[]), 64, 100000).latency_ms, "0.5179881744384766");
    // K6: b200 vllm DeepSeek-V3.2 16 heads kv fp8 gemm nvfp4, with a prefix
    let e = engine(GLM_B200_VLLM);
    let k6 = dsa(
        GLM_B200_VLLM,
        true,
        &[("architecture", json!("DeepseekV32ForCausalLM")), ("num_heads", json!(16)), ("gemm_quant_mode", json!("nvfp4"))],
    );
    check("K6", ctx1(e, &k6, 1, 8192, 4096).latency_ms, "5.681438605641001");
    // K8: h100 trtllm DeepSeek-V3.2 16 heads kv bf16 fp8_block, S beyond the grid (hold)
    let mut spec = case_spec(DSV32_H100_VLLM);
    spec["engine"]["backend"] = json!("trtllm");
    spec["engine"]["backend_version"] = json!("1.3.0rc20");
    let e = Engine::from_spec(EngineSpec::from_json(&spec.to_string()).unwrap(), None).unwrap();
    let k8 = dsa(DSV32_H100_VLLM, false, &[("kv_cache_dtype", json!("bfloat16")), ("gemm_quant_mode", json!("fp8_block"))]);
    check("K8", gen1(&e, &k8, 1, 2000000).latency_ms, "1.361137582947537");
}

#[test]
fn engine_buckets_and_binary_round_trip() {
    // §6: the DSA ops are the attention buckets of a mixed step
    let e = engine(GLM_B200_SGLANG_TP8);
    let parts = e.mixed_step_breakdown(512, 128, 2048, 512, 256, 1.0, 1.0).unwrap();
    check("mixed total", parts[0], "58.820054280921426");
    check("mixed shared", parts[1], "31.755883216351908");
    check("mixed ctx attention", parts[2], "17.4559125");
    check("mixed gen attention", parts[3], "9.608258564569521");
    // the wire variants survive the binary format
    let spec = EngineSpec::from_json(&case_spec(GLM_B200_SGLANG_TP8).to_string()).unwrap();
    assert_eq!(EngineSpec::from_bytes(&spec.to_bytes()).unwrap(), spec);
    // decode-time defaults: cp_size 1, full_frac 1.0, no projection modes; index_topk required
    let mut op = dsa(GLM_B200_SGLANG_TP8, true, &[]);
    let inner = op["DsaContext"].as_object_mut().unwrap();
    for key in ["cp_size", "full_frac", "attn_projection_quant_modes"] {
        inner.remove(key);
    }
    let parsed: aic_core::Op = serde_json::from_value(op.clone()).unwrap();
    let aic_core::Op::DsaContext(d) = parsed else { panic!("not a DsaContext") };
    assert_eq!((d.cp_size, d.full_frac, d.attn_projection_quant_modes), (1, 1.0, None));
    op["DsaContext"].as_object_mut().unwrap().remove("index_topk");
    let err = serde_json::from_value::<aic_core::Op>(op).unwrap_err().to_string();
    assert!(err.contains("missing field `index_topk`"), "{err}");
}

#[test]
fn duplicate_rows_last_wins_within_a_file() {
    let e = engine(GLM_H100_SGLANG);
    let fields = [
        ("architecture", json!("DeepseekV32ForCausalLM")),
        ("num_heads", json!(16)),
        ("kv_cache_dtype", json!("bfloat16")),
        ("gemm_quant_mode", json!("fp8_block")),
    ];
    let ctx = dsa(GLM_H100_SGLANG, true, &fields);
    check("dup ctx (1, 4)", ctx1(e, &ctx, 1, 4, 0).latency_ms, "0.8173");
    check("dup ctx (4, 4)", ctx1(e, &ctx, 4, 4, 0).latency_ms, "0.8241");
    let gen = dsa(GLM_H100_SGLANG, false, &fields);
    check("dup gen (1, 2)", gen1(e, &gen, 1, 2).latency_ms, "0.0719");
}

#[test]
fn key_misses_and_flops() {
    let e = engine(GLM_H200_TRTLLM);
    let op = dsa(GLM_H200_TRTLLM, true, &[]);
    check_perf_miss(&ctx1_err(e, &op, 1, 1024, 0), "context DSA module data missing for DsaKey");
    let gen = dsa(GLM_H200_TRTLLM, false, &[]);
    check_perf_miss(&gen_err(e, &gen, 1, 1024), "generation DSA module data missing for DsaKey");
    let nvfp4 = dsa(GLM_H200_TRTLLM, true, &[("gemm_quant_mode", json!("nvfp4"))]);
    assert_eq!(ctx1_err(e, &nvfp4, 1, 1024, 0).class(), ErrorClass::MissingSystemFlops);
}

// ---------------------------------------------------------------------------------------------
// §3.4 / §5.5 full_frac

#[test]
fn full_frac_layers() {
    use aic_core::ops::full_frac;
    check_rel("{}", full_frac(78, None, None, None), 1.0);
    check_rel("freq 4 offset 3", full_frac(78, Some(4), None, Some(3)), 0.2692307692307692);
    check_rel("freq 4", full_frac(78, Some(4), None, None), 0.2692307692307692);
    check_rel("freq 3 offset 1", full_frac(10, Some(3), None, Some(1)), 0.4);
    check_rel("pattern", full_frac(6, Some(1), Some("FFSSFS"), None), 0.5);
    check_rel("short pattern", full_frac(6, None, Some("FS"), None), 0.8333333333333334);
    check_rel("freq 0", full_frac(78, Some(0), None, None), 1.0);
    check_rel("freq 2 offset 0", full_frac(7, Some(2), None, Some(0)), 0.42857142857142855);
}

#[test]
fn amortisation_blends_full_and_skip_tables() {
    let e = engine(GLM_B200_SGLANG_TP8);
    let w = json!(0.2692307692307692);
    let ctx = dsa(GLM_B200_SGLANG_TP8, true, &[("full_frac", w.clone())]);
    check("w ctx", ctx1(e, &ctx, 1, 4096, 0).latency_ms, "0.8319769230769231");
    let gen = dsa(GLM_B200_SGLANG_TP8, false, &[("full_frac", w.clone())]);
    check("w gen", gen1(e, &gen, 8, 4096).latency_ms, "0.047076453575721156");
    // trtllm has no skip rows: degrades to w = 1
    let e = engine(GLM_H200_TRTLLM_KVBF16);
    let ctx = dsa(GLM_H200_TRTLLM_KVBF16, true, &[("full_frac", w)]);
    check("w degraded", ctx1(e, &ctx, 1, 4096, 0).latency_ms, "6.7129");
}

// ---------------------------------------------------------------------------------------------
// §5.6 empirical

#[test]
fn empirical_variants() {
    let e = engine_in(GLM_H200_TRTLLM_KVBF16, "EMPIRICAL");
    let ctx = dsa(GLM_H200_TRTLLM_KVBF16, true, &[]);
    check("E1", ctx1(e, &ctx, 3, 3000, 0).latency_ms, "13.788254020905976");
    check("E2", ctx1(e, &ctx, 1, 4096, 1000).latency_ms, "6.86205432783033");
    let gen = dsa(GLM_H200_TRTLLM_KVBF16, false, &[]);
    check("E3", gen1(e, &gen, 3, 3000).latency_ms, "0.26705955650152235");
    let ctx12 = dsa(GLM_H200_TRTLLM_KVBF16, true, &[("num_heads", json!(12))]);
    check("E4", ctx1(e, &ctx12, 2, 3000, 500).latency_ms, "8.70167590305184");
    let e = engine_in(GLM_B200_SGLANG_TP8, "EMPIRICAL");
    let ctx4 = dsa(GLM_B200_SGLANG_TP8, true, &[("num_heads", json!(4))]);
    check("E5", ctx1(e, &ctx4, 2, 3000, 64).latency_ms, "1.080215941604522");
    let e = engine_in(DSV32_H200_VLLM, "EMPIRICAL");
    let ctx = dsa(DSV32_H200_VLLM, true, &[]);
    check("E6", ctx1(e, &ctx, 1, 100000, 0).latency_ms, "357.73698095609524");
    // E8: no key, not GLM → the error names the (n, s + p, b) query
    for mode in ["EMPIRICAL", "HYBRID"] {
        let e = engine_in(GLM_H200_TRTLLM, mode);
        let op = dsa(GLM_H200_TRTLLM, true, &[("architecture", json!("DeepseekV32ForCausalLM")), ("num_heads", json!(16))]);
        let err = ctx1_err(e, &op, 1, 1024, 0);
        assert_eq!(err.class(), ErrorClass::EmpiricalNotImplemented, "{err}");
        assert!(err.to_string().contains("query=[16.0, 1024.0, 1.0]"), "{err}");
        let glm = dsa(GLM_H200_TRTLLM, true, &[]);
        let err = ctx1_err(e, &glm, 1, 1024, 0);
        assert!(err.to_string().contains("query=[8.0, 0.0, 1024.0, 1.0]"), "{err}");
    }
}

#[test]
fn empirical_inside_the_sglang_prefix_range() {
    // E7: h100 sglang, DeepSeek-V3.2 16 heads kv fp8 fp8_block, p inside the prefix range
    let e = engine_in(GLM_H100_SGLANG, "EMPIRICAL");
    let op = dsa(
        GLM_H100_SGLANG,
        true,
        &[("architecture", json!("DeepseekV32ForCausalLM")), ("num_heads", json!(16)), ("gemm_quant_mode", json!("fp8_block"))],
    );
    check("E7", ctx1(e, &op, 4, 512, 200000).latency_ms, "9.471976717084411");
}

// ---------------------------------------------------------------------------------------------
// §5.7 context parallelism

#[test]
fn context_parallel_composition() {
    let e = engine(GLM_B200_SGLANG_ADP8);
    let op = |cp: u32| dsa(GLM_B200_SGLANG_ADP8, true, &[("cp_size", json!(cp))]);
    let r = ctx1(e, &op(4), 1, 8192, 0);
    check("CP4", r.latency_ms, "0.80677625");
    check_source(&r, "estimated");
    check("CP2 16384", ctx1(e, &op(2), 1, 16384, 0).latency_ms, "3.5788184263947866");
    check("CP4 16384", ctx1(e, &op(4), 1, 16384, 0).latency_ms, "1.7877855949342243");
    check("CP8 16384", ctx1(e, &op(8), 1, 16384, 0).latency_ms, "0.913726125");
    check("CP2 (3, 6000, 100)", ctx1(e, &op(2), 3, 6000, 100).latency_ms, "3.634564209605253");
    let sf = with(&op(4), &[("scale_factor", json!(78.0))]);
    check("CP4 sf 78", ctx1(e, &sf, 1, 8192, 0).latency_ms, "62.9285475");
    let w = with(&op(4), &[("full_frac", json!(0.2692307692307692))]);
    check("CP4 w", ctx1(e, &w, 1, 8192, 0).latency_ms, "0.7499160096153846");
    check_perf_miss(&ctx1_err(e, &op(4), 1, 32768, 0), "exceeds the collected sparse-kernel grid (max isl=16384)");
    let eight = with(&op(4), &[("num_heads", json!(8))]);
    check_perf_miss(&ctx1_err(e, &eight, 1, 8192, 0), "DSA CP modeling needs sparse tables");
    let sol = engine_in(GLM_B200_SGLANG_ADP8, "SOL");
    check("CP4 SOL", ctx1(sol, &op(4), 1, 8192, 0).latency_ms, "0.5081971992800001");
    let emp = engine_in(GLM_B200_SGLANG_ADP8, "EMPIRICAL");
    check("CP4 EMPIRICAL", ctx1(emp, &op(4), 1, 8192, 0).latency_ms, "0.8058008913894517");
    // the base's key miss precedes the isl error
    let miss = with(&op(4), &[("gemm_quant_mode", json!("nvfp4"))]);
    check_perf_miss(&ctx1_err(e, &miss, 1, 32768, 0), "context DSA module data missing for DsaKey");
    let fmha = with(&op(4), &[("fmha_quant_mode", json!("fp8"))]);
    check_perf_miss(&ctx1_err(e, &fmha, 1, 32768, 0), "fmha_quant: \"fp8\"");
    // h200 (kv fp8, gemm fp8_block), cp 2 / 4 / 8
    let h = engine(GLM_H200_SGLANG_ADP8);
    let hop = |cp: u32| dsa(GLM_H200_SGLANG_ADP8, true, &[("cp_size", json!(cp)), ("gemm_quant_mode", json!("fp8_block"))]);
    check("h200 CP2", ctx1(h, &hop(2), 1, 4096, 512).latency_ms, "2.42255775");
    check("h200 CP4", ctx1(h, &hop(4), 1, 4096, 512).latency_ms, "1.05479175");
    check("h200 CP8", ctx1(h, &hop(8), 1, 4096, 512).latency_ms, "1.06706025");
    // order of checks: the sparse tables precede the FLOPS (nvfp4 on h200) ...
    let dsv = with(&hop(2), &[("architecture", json!("DeepseekV32ForCausalLM")), ("num_heads", json!(16)), ("gemm_quant_mode", json!("nvfp4"))]);
    check_perf_miss(&ctx1_err(h, &dsv, 1, 1024, 0), "for DeepseekV32ForCausalLM (num_heads=16); collect dsv32_mqa_logits/dsv32_topk first.");
    let glm8 = with(&hop(2), &[("num_heads", json!(8)), ("gemm_quant_mode", json!("nvfp4"))]);
    check_perf_miss(&ctx1_err(h, &glm8, 1, 4096, 0), "(num_heads=8)");
    // ... and with the 64-head sparse tables present the base resolves the FLOPS
    let glm64 = with(&hop(2), &[("gemm_quant_mode", json!("nvfp4"))]);
    assert_eq!(ctx1_err(h, &glm64, 1, 4096, 0).class(), ErrorClass::MissingSystemFlops);
    // SOL_FULL refuses CP
    let json = Value::Array(vec![op(4)]).to_string();
    let err = e.evaluate_ops_sol_json(&json, true, 1, 8192, 0, 1.0, None).unwrap_err();
    assert_eq!(err.class(), ErrorClass::Value);
    assert!(err.to_string().contains("DSA context SOL_FULL decomposition is not supported for cp_size=4"), "{err}");
}

// ---------------------------------------------------------------------------------------------
// §7.1 weights

#[test]
fn weight_bytes_per_projection() {
    use aic_core::memory::op_weight_bytes;
    let op: aic_core::Op = serde_json::from_value(dsa(GLM_B200_TRTLLM_BF16, true, &[("scale_factor", json!(78.0))])).unwrap();
    check_rel("GLM 8 heads bf16", op_weight_bytes(&op), 6757810176.0);
    let op: aic_core::Op =
        serde_json::from_value(dsa(DSV32_NVFP4_B200_TRTLLM, true, &[("scale_factor", json!(61.0))])).unwrap();
    check_rel("DSV3.2 NVFP4 16 heads", op_weight_bytes(&op), 4773249024.0);
}

// ---------------------------------------------------------------------------------------------
// Beyond the reference: the sibling GEMM-quant transfer of the calibrated estimate

/// A case's engine in `mode` with [`Engine::allow_quant_transfer`] on (built per call).
fn engine_with_transfer(id: &str, mode: &str) -> Engine {
    let mut spec = case_spec(id);
    spec["engine"]["database_mode"] = json!(mode);
    let mut e = Engine::from_spec(EngineSpec::from_json(&spec.to_string()).unwrap(), None).unwrap();
    assert!(!e.quant_transfer());
    e.allow_quant_transfer();
    assert!(e.quant_transfer());
    e
}

#[test]
fn quant_transfer_reads_a_same_profile_sibling_slice_with_the_own_sol() {
    // GLM-5 on b200 sglang: the DSA tables hold gemm bfloat16 and fp8_block, no fp8. fp8 and
    // fp8_block share the (1 byte, fp8 compute) profile and so the SOL: with the transfer the
    // fp8 module reads the fp8_block samples and equals the fp8_block estimate bit for bit.
    let id = GLM_B200_SGLANG_TP8;
    let fp8 = |ctx| dsa(id, ctx, &[("gemm_quant_mode", json!("fp8"))]);
    let block = |ctx| dsa(id, ctx, &[("gemm_quant_mode", json!("fp8_block"))]);
    let plain = engine_in(id, "EMPIRICAL");
    let err = ctx1_err(plain, &fp8(true), 1, 1024, 0);
    assert_eq!(err.class(), ErrorClass::EmpiricalNotImplemented, "the reference's answer stays: {err}");
    // SILICON: the reference's text leads, then what the table holds and the way out.
    let miss = ctx1_err(engine(id), &fp8(true), 1, 1024, 0).to_string();
    assert!(miss.starts_with("perf database error: context DSA module data missing for DsaKey"), "{miss}");
    assert!(miss.contains("measured for GlmMoeDsaForCausalLM: (fmha bfloat16, kv bfloat16, gemm bfloat16)"), "{miss}");
    assert!(miss.contains("gemm fp8_block)") && miss.contains("only the GEMM quant mode differs"), "{miss}");
    let on = engine_with_transfer(id, "EMPIRICAL");
    for (b, s, p) in [(1, 1024, 0), (2, 3000, 64), (4, 8192, 1000)] {
        let want = ctx1(plain, &block(true), b, s, p).latency_ms;
        assert_eq!(ctx1(&on, &fp8(true), b, s, p).latency_ms, want, "context b={b} s={s} p={p}");
    }
    for (b, s) in [(1, 1024), (8, 4096), (64, 20000)] {
        let want = gen1(plain, &block(false), b, s).latency_ms;
        assert_eq!(gen1(&on, &fp8(false), b, s).latency_ms, want, "generation b={b} s={s}");
    }
    // HYBRID: the table misses the key, the empirical estimate transfers.
    let hybrid = engine_with_transfer(id, "HYBRID");
    assert_eq!(ctx1(&hybrid, &fp8(true), 1, 1024, 0).latency_ms, ctx1(plain, &block(true), 1, 1024, 0).latency_ms);
    let err = ctx1_err(engine_in(id, "HYBRID"), &fp8(true), 1, 1024, 0);
    assert_eq!(err.class(), ErrorClass::EmpiricalNotImplemented, "{err}");
    // A module whose own slice exists is untouched by the switch.
    assert_eq!(ctx1(&on, &block(true), 2, 3000, 64).latency_ms, ctx1(plain, &block(true), 2, 3000, 64).latency_ms);
}

#[test]
fn quant_transfer_rescales_another_profile_by_the_gemm_util_levels() {
    // nvfp4 (0.5625 byte, fp4 compute) has no same-profile slice: the nearest by
    // (|Δcompute|, |Δbytes|) is fp8_block (Δcompute 2) ahead of bfloat16 (Δcompute 3). Its
    // utilisation is read with its own SOL, so the estimate is the fp8_block one times
    // SOL_nvfp4 / SOL_fp8_block at the query, divided by the level ratio 0.30 / 0.45.
    let id = GLM_B200_SGLANG_TP8;
    let nvfp4 = |ctx| dsa(id, ctx, &[("gemm_quant_mode", json!("nvfp4"))]);
    let block = |ctx| dsa(id, ctx, &[("gemm_quant_mode", json!("fp8_block"))]);
    let plain = engine_in(id, "EMPIRICAL");
    let on = engine_with_transfer(id, "EMPIRICAL");
    let sol = |op: &Value, ctx: bool, b: u32, s: u32, p: u32| {
        let json = Value::Array(vec![op.clone()]).to_string();
        plain.evaluate_ops_sol_json(&json, ctx, b, s, p, 1.0, None).unwrap()[0].sol_time_ms
    };
    let levels = 0.30 / 0.45;
    for (b, s, p) in [(1, 1024, 0), (2, 3000, 64)] {
        let reference = ctx1(plain, &block(true), b, s, p).latency_ms;
        let want = reference * sol(&nvfp4(true), true, b, s, p) / sol(&block(true), true, b, s, p) / levels;
        check_rel(&format!("context b={b} s={s} p={p}"), ctx1(&on, &nvfp4(true), b, s, p).latency_ms, want);
    }
    let reference = gen1(plain, &block(false), 8, 4096).latency_ms;
    let want = reference * sol(&nvfp4(false), false, 8, 4096, 0) / sol(&block(false), false, 8, 4096, 0) / levels;
    check_rel("generation b=8 s=4096", gen1(&on, &nvfp4(false), 8, 4096).latency_ms, want);
    // Without the switch: the reference's error.
    let err = ctx1_err(plain, &nvfp4(true), 1, 1024, 0);
    assert_eq!(err.class(), ErrorClass::EmpiricalNotImplemented, "{err}");
}
