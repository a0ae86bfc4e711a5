//! The specs' MoE and MLA worked examples (spec documents 11-lookup, 20-operators, 40-engine)
//! as tests, in every database mode the examples use (SILICON, HYBRID, EMPIRICAL, SOL):
//! 11 §1.6 (MoE energy rows), §7.4 E1–E6, §8.5 L1–L7; 20 §10.4 M1–M9c, §11.2 D1–D8,
//! §14.5 MM/GM/CM/B, §16.1 DeepSeek Overlap, §16.2 FB1–FB4, FB6; 40 §13.2 and §13.3.
//!
//! Engines come from the golden cases (`goldens/{moe,mla,edge}.json`), with the engine JSON
//! (and, where the example needs another parallel layout or `nextn`, the compiled op fields)
//! edited in memory. Tolerance as in `spec_examples/common.rs`.

#[path = "spec_examples/common.rs"]
mod common;

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

use aic_core::{Engine, EngineSpec, ErrorClass, RunMode};
use serde_json::{json, Value};

use common::*;

// ---------------------------------------------------------------------------------------------
// Engines

/// Qwen3-30B-A3B h200 vllm 0.24.0 tp 2, moe_tp 2 (edited to moe_tp 1, moe_ep 2 below).
const QWEN_MOE_H200_VLLM: &str = "moe/Qwen3-30B-A3B/h200_sxm/vllm/tp2-pp1-dp1-mtp2-ep1";
const QWEN_MOE_H200_SGLANG_EP4: &str = "moe/Qwen3-30B-A3B/h200_sxm/sglang/tp4-pp1-dp1-mtp1-ep4";
const QWEN_MOE_H200_TRTLLM_EP4: &str = "moe/Qwen3-30B-A3B/h200_sxm/trtllm/tp4-pp1-dp1-mtp1-ep4";
const QWEN_MOE_B200_TRTLLM_EP4: &str = "moe/Qwen3-30B-A3B/b200_sxm/trtllm/tp4-pp1-dp1-mtp1-ep4";
const QWEN_MOE_B200_VLLM: &str = "moe/Qwen3-30B-A3B/b200_sxm/vllm/tp2-pp1-dp1-mtp2-ep1";
const QWEN_MOE_H100_SGLANG: &str = "edge/Qwen3-30B-A3B/h100_sxm/sglang/tp2-pp1-dp1-mtp1-ep2";
const DSV3_H200_VLLM: &str = "mla/DeepSeek-V3/h200_sxm/vllm/tp8-pp1-dp1-mtp1-ep8";
const DSV3_H200_SGLANG: &str = "mla/DeepSeek-V3/h200_sxm/sglang/tp8-pp1-dp1-mtp1-ep8/fmha=bfloat16";
const DSV3_H200_TRTLLM: &str = "mla/DeepSeek-V3/h200_sxm/trtllm/tp8-pp1-dp1-mtp1-ep8/fmha=bfloat16";
const DSV3_H200_TRTLLM_NEXTN1: &str = "mla/DeepSeek-V3/h200_sxm/trtllm/tp8-pp1-dp1-mtp1-ep8/nextn1/fmha=bfloat16";
const DSV3_H100_TRTLLM: &str = "mla/DeepSeek-V3/h100_sxm/trtllm/tp8-pp1-dp1-mtp1-ep8/fmha=bfloat16";

/// An engine built from an edited spec, once per key.
fn built(key: &str, make: impl FnOnce() -> Value) -> &'static Engine {
    static ENGINES: OnceLock<Mutex<HashMap<String, &'static Engine>>> = OnceLock::new();
    let mut map = ENGINES.get_or_init(Default::default).lock().unwrap_or_else(|p| p.into_inner());
    if let Some(e) = map.get(key) {
        return e;
    }
    let spec = make();
    let spec = EngineSpec::from_json(&spec.to_string()).unwrap_or_else(|e| panic!("spec of {key}: {e}"));
    let engine: &'static Engine =
        Box::leak(Box::new(Engine::from_spec(spec, None).unwrap_or_else(|e| panic!("engine of {key}: {e}"))));
    map.insert(key.to_string(), engine);
    engine
}

/// Applies `f` to the inner object of every op (recursing into Fallback / Overlap members).
fn walk_ops(ops: &mut Value, f: &dyn Fn(&str, &mut serde_json::Map<String, Value>)) {
    let Some(list) = ops.as_array_mut() else { return };
    for op in list {
        walk_op(op, f);
    }
}

fn walk_op(op: &mut Value, f: &dyn Fn(&str, &mut serde_json::Map<String, Value>)) {
    let obj = op.as_object_mut().unwrap();
    let kind = obj.keys().next().unwrap().clone();
    let inner = obj.get_mut(&kind).unwrap().as_object_mut().unwrap();
    f(&kind, inner);
    for key in ["group_a", "group_b", "fallback"] {
        if let Some(v) = inner.get_mut(key) {
            walk_ops(v, f);
        }
    }
    if let Some(p) = inner.get_mut("primary") {
        walk_op(p, f);
    }
}

/// The spec of a case with engine fields replaced.
fn spec_with(id: &str, engine_changes: &[(&str, Value)]) -> Value {
    let mut spec = case_spec(id);
    let eng = spec["engine"].as_object_mut().unwrap();
    for (k, v) in engine_changes {
        eng.insert((*k).to_string(), v.clone());
    }
    spec
}

/// Qwen3-30B-A3B h200 vllm 0.24.0 tp 2 with moe_tp 1, moe_ep 2 (20 §10.4, §11.2; 40 §13.2),
/// in the given database mode.
fn qwen_ep2_spec(mode: &str) -> Value {
    let mut spec = spec_with(
        QWEN_MOE_H200_VLLM,
        &[("moe_tp_size", json!(1)), ("moe_ep_size", json!(2)), ("database_mode", json!(mode))],
    );
    for list in ["context_ops", "generation_ops"] {
        walk_ops(&mut spec[list], &|kind, inner| {
            if kind == "Moe" || kind == "MoeDispatch" {
                inner.insert("moe_tp_size".into(), json!(1));
                inner.insert("moe_ep_size".into(), json!(2));
            }
        });
    }
    spec
}

fn qwen_ep2(mode: &str) -> &'static Engine {
    built(&format!("qwen-ep2/{mode}"), || qwen_ep2_spec(mode))
}

/// A golden case's engine in another database mode.
fn in_mode(id: &str, mode: &str) -> &'static Engine {
    if mode == "SILICON" {
        return engine(id);
    }
    built(&format!("{id}#{mode}"), || spec_with(id, &[("database_mode", json!(mode))]))
}

/// The op named `name` anywhere in a list (also inside Fallback / Overlap members).
fn find_nested(ops: &[Value], name: &str) -> Option<Value> {
    for op in ops {
        let inner = op.as_object().unwrap().values().next().unwrap();
        if inner["name"] == name {
            return Some(op.clone());
        }
        for key in ["group_a", "group_b", "fallback"] {
            if let Some(v) = inner.get(key).and_then(Value::as_array) {
                if let Some(found) = find_nested(v, name) {
                    return Some(found);
                }
            }
        }
        if let Some(p) = inner.get("primary") {
            if let Some(found) = find_nested(std::slice::from_ref(p), name) {
                return Some(found);
            }
        }
    }
    None
}

fn nested_op(id: &str, name: &str) -> Value {
    let all: Vec<Value> = context_ops(id).into_iter().chain(generation_ops(id)).collect();
    find_nested(&all, name).unwrap_or_else(|| panic!("op {name} not in {id}"))
}

fn ep2_ctx_ops() -> Vec<Value> {
    qwen_ep2_spec("SILICON")["context_ops"].as_array().unwrap().clone()
}

fn ep2_op(name: &str) -> Value {
    let spec = qwen_ep2_spec("SILICON");
    let all: Vec<Value> = spec["context_ops"]
        .as_array()
        .unwrap()
        .iter()
        .chain(spec["generation_ops"].as_array().unwrap())
        .cloned()
        .collect();
    find_nested(&all, name).unwrap_or_else(|| panic!("op {name} not in the ep2 spec"))
}

// ---------------------------------------------------------------------------------------------
// 11 §1.6 MoE energy rows

/// 11 §1.6: b200 vllm 0.24.0 database, moe rows of 0.22.0 (power columns), balanced bf16
/// shape (8192, 5120, topk 22, 512 experts): exact, interior and beyond-the-end energy.
#[test]
fn lookup_1_6_moe_energy_rows_b200() {
    let e = engine(QWEN_MOE_B200_VLLM);
    let op = json!({"Moe": {"name": "moe", "scale_factor": 1.0, "hidden_size": 8192, "inter_size": 5120,
        "topk": 22, "num_experts": 512, "moe_tp_size": 1, "moe_ep_size": 1, "attention_dp_size": 1,
        "quant_mode": "bfloat16", "workload_distribution": "balanced", "is_gated": true,
        "moe_backend": null, "enable_eplb": false, "is_context": true}});
    let r = ctx1(e, &op, 1, 1, 0);
    check("t=1 latency", r.latency_ms, "0.8226133347");
    check("t=1 energy", r.energy_wms, "632.8726333");
    check_source(&r, "silicon");
    let r = ctx1(e, &op, 3, 1, 0);
    check("t=3 latency", r.latency_ms, "2.413398012");
    check("t=3 energy", r.energy_wms, "2193.399407");
    let r = ctx1(e, &op, 30000, 1, 0);
    check("t=30000 latency", r.latency_ms, "272.2587756");
    check("t=30000 energy", r.energy_wms, "261908.4771");
}

// ---------------------------------------------------------------------------------------------
// 11 §7.4 MoE lookup E1–E6

fn dsv3_moe(adp: u32, quant: &str) -> Value {
    json!({"Moe": {"name": "moe", "scale_factor": 1.0, "hidden_size": 7168, "inter_size": 2048, "topk": 8,
        "num_experts": 256, "moe_tp_size": 1, "moe_ep_size": 8, "attention_dp_size": adp,
        "quant_mode": quant, "workload_distribution": "power_law_1.01", "is_gated": true,
        "moe_backend": null, "enable_eplb": false, "is_context": true}})
}

/// 11 §7.4 E1–E3: interior lerp, beyond-the-end SOL scaling, attention-DP token count.
#[test]
fn lookup_7_4_e1_to_e3_moe_curve_h200_vllm() {
    let e = qwen_ep2("SILICON");
    check("rows t=768", ctx1(e, &dsv3_moe(1, "fp8_block"), 768, 1, 0).latency_ms, "0.5964928150");
    check("rows t=1024", ctx1(e, &dsv3_moe(1, "fp8_block"), 1024, 1, 0).latency_ms, "0.6479936122");
    check("rows t=16384", ctx1(e, &dsv3_moe(1, "fp8_block"), 16384, 1, 0).latency_ms, "7.0373695374");
    let r = ctx1(e, &dsv3_moe(1, "fp8_block"), 1000, 1, 0);
    check("E1", r.latency_ms, "0.643165412545");
    check_source(&r, "silicon");
    check("E2", ctx1(e, &dsv3_moe(1, "fp8_block"), 20000, 1, 0).latency_ms, "8.590538986027");
    check("E3", ctx1(e, &dsv3_moe(8, "fp8_block"), 2500, 1, 0).latency_ms, "8.590538986027");
}

/// 11 §7.4 E4: TRT-LLM nvfp4 low-latency table up to 128 tokens (b200 trtllm 1.3.0rc20).
#[test]
fn lookup_7_4_e4_trtllm_low_latency_split() {
    let e = engine(QWEN_MOE_B200_TRTLLM_EP4);
    check("E4 t=128", ctx1(e, &dsv3_moe(1, "nvfp4"), 128, 1, 0).latency_ms, "0.123135995865");
    check("E4 t=129", ctx1(e, &dsv3_moe(1, "nvfp4"), 129, 1, 0).latency_ms, "0.272514405847");
}

/// 11 §7.4 E5: a singleton curve (h100 sglang 0.5.14, w4a16_mxfp4): exact, hold above, miss below.
#[test]
fn lookup_7_4_e5_singleton_curve() {
    let e = engine(QWEN_MOE_H100_SGLANG);
    let op = json!({"Moe": {"name": "moe", "scale_factor": 1.0, "hidden_size": 3584, "inter_size": 3072,
        "topk": 16, "num_experts": 896, "moe_tp_size": 1, "moe_ep_size": 128, "attention_dp_size": 1,
        "quant_mode": "w4a16_mxfp4", "workload_distribution": "power_law_1.01", "is_gated": true,
        "moe_backend": null, "enable_eplb": false, "is_context": true}});
    check("E5 t=6144", ctx1(e, &op, 6144, 1, 0).latency_ms, "24.63357177734375");
    check("E5 t=12288", ctx1(e, &op, 12288, 1, 0).latency_ms, "49.2671435546875");
    let err = ctx1_err(e, &op, 3072, 1, 0);
    check_perf_miss(&err, "cannot infer low-token latency from a singleton");
}

/// 11 §7.4 E6: integer-floor SOL at t = 1 (T//ep = 0) makes the hold at t = 2 ~660× larger.
#[test]
fn lookup_7_4_e6_integer_floor_sensitivity() {
    let e = engine(QWEN_MOE_B200_VLLM);
    let op = json!({"Moe": {"name": "moe", "scale_factor": 1.0, "hidden_size": 5120, "inter_size": 8192,
        "topk": 1, "num_experts": 16, "moe_tp_size": 1, "moe_ep_size": 2, "attention_dp_size": 1,
        "quant_mode": "nvfp4", "workload_distribution": "balanced", "is_gated": true,
        "moe_backend": null, "enable_eplb": false, "is_context": true}});
    check("E6 t=1", ctx1(e, &op, 1, 1, 0).latency_ms, "0.0219039991");
    check("E6 t=2", ctx1(e, &op, 2, 1, 0).latency_ms, "14.405152970");
}

// ---------------------------------------------------------------------------------------------
// 11 §8.5 MLA L1–L7

fn mla_module(kind: &str) -> Value {
    json!({kind: {"name": "m", "scale_factor": 1.0, "num_heads": 16, "kv_cache_dtype": "fp8",
        "fmha_quant_mode": "bfloat16", "gemm_quant_mode": "fp8_block", "native_num_heads": 128}})
}

/// 11 §8.5 L1–L4: module tables (h200 vllm 0.24.0): sqrt seq blend, prefix factor,
/// generation raw seq / batch lerp.
#[test]
fn lookup_8_5_l1_to_l4_mla_module_tables() {
    let e = engine(DSV3_H200_VLLM);
    let ctx = mla_module("MlaModuleContext");
    let r = ctx1(e, &ctx, 1, 3000, 0);
    check("L1", r.latency_ms, "0.526750913663");
    check_source(&r, "silicon");
    check("L2", ctx1(e, &ctx, 1, 2000, 1000).latency_ms, "0.468223034367");
    let gen = mla_module("MlaModuleGeneration");
    let r = gen1(e, &gen, 64, 2000);
    check("L3", r.latency_ms, "0.150878417969");
    check_source(&r, "silicon");
    check("L4", gen1(e, &gen, 100, 2000).latency_ms, "0.169999078369");
}

/// 11 §8.5 L5/L6: op-level ContextMla / GenerationMla (h200 sglang 0.5.14).
#[test]
fn lookup_8_5_l5_l6_op_level_mla() {
    let e = engine(DSV3_H200_SGLANG);
    let c = json!({"ContextMla": {"name": "c", "scale_factor": 1.0, "num_heads": 16, "kv_cache_dtype": "fp8",
        "fmha_quant_mode": "bfloat16", "cp_size": 1}});
    let r = ctx1(e, &c, 2, 5000, 0);
    check("L5", r.latency_ms, "1.446911839171");
    check_source(&r, "silicon");
    let g = json!({"GenerationMla": {"name": "g", "scale_factor": 1.0, "num_heads": 16, "kv_cache_dtype": "fp8"}});
    check("L6 b32", gen1(e, &g, 32, 3000).latency_ms, "0.213227395108");
    check("L6 b40", gen1(e, &g, 40, 3000).latency_ms, "0.260075868771");
}

fn bmm(heads: u32, quant: &str, pre: bool) -> Value {
    json!({"MlaBmm": {"name": "b", "scale_factor": 1.0, "num_heads": heads, "quant_mode": quant, "is_pre": pre}})
}

/// 11 §8.5 L7: MLA BMM curve, non-power-of-two heads, hold beyond the end, bf16 quant
/// fallback keeping the fp8 SOL (h200 vllm), missing head slice.
#[test]
fn lookup_8_5_l7_mla_bmm() {
    let e = engine(DSV3_H200_SGLANG);
    let r = gen1(e, &bmm(16, "fp8", true), 100, 1);
    check("L7 t=100", r.latency_ms, "0.010180799756");
    check_source(&r, "silicon");
    check("L7 heads 12", gen1(e, &bmm(12, "fp8", true), 100, 1).latency_ms, "0.007635599817");
    check("L7 t=20000", gen1(e, &bmm(16, "fp8", true), 20000, 1).latency_ms, "0.580929893752");
    let v = engine(DSV3_H200_VLLM);
    check("L7 vllm bf16 rows", gen1(v, &bmm(16, "fp8", true), 100, 1).latency_ms, "0.004439200135");
    let err = match eval(e, &[bmm(256, "fp8", true)], false, 100, 1, 0, 1.0, None) {
        Ok(r) => panic!("expected a miss, got {r:?}"),
        Err(err) => err,
    };
    check_perf_miss(&err, "MLA BMM data missing for num_heads=256");
}

// ---------------------------------------------------------------------------------------------
// 20 §10.4 Moe M1–M9c

fn m_base() -> Value {
    json!({"Moe": {"name": "context_moe", "scale_factor": 48.0, "hidden_size": 2048, "inter_size": 768,
        "topk": 8, "num_experts": 128, "moe_tp_size": 1, "moe_ep_size": 2, "attention_dp_size": 1,
        "quant_mode": "bfloat16", "workload_distribution": "power_law_1.2", "is_gated": true,
        "moe_backend": null, "enable_eplb": false, "is_context": true}})
}

/// 20 §10.4 M1–M5b (SILICON): exact rows, generation tokens, attention DP, lerp, distribution,
/// unknown distribution falls back to `uniform` (miss).
#[test]
fn moe_m1_to_m5b_silicon() {
    let e = qwen_ep2("SILICON");
    assert_eq!(ep2_op("context_moe"), m_base(), "edited spec op = the §10.4 base op");
    let r = ctx1(e, &m_base(), 1, 1024, 0);
    check("M1", r.latency_ms, "13.98436");
    check_source(&r, "silicon");
    let r = gen1(e, &m_base(), 64, 2048);
    check("M2", r.latency_ms, "8.287335");
    check_source(&r, "silicon");
    check("M3", ctx1(e, &with(&m_base(), &[("attention_dp_size", json!(4))]), 1, 1024, 0).latency_ms, "29.84325");
    check("M4", ctx1(e, &m_base(), 1, 1000, 0).latency_ms, "13.83336");
    let r = ctx1(e, &with(&m_base(), &[("workload_distribution", json!("balanced"))]), 1, 1024, 0);
    check("M5", r.latency_ms, "11.94547");
    check_source(&r, "silicon");
    let err = ctx1_err(e, &with(&m_base(), &[("workload_distribution", json!("power_law_9.9"))]), 1, 1024, 0);
    check_perf_miss(&err, "uniform");
}

/// 20 §10.4 M6a–M6c (SOL): integer-floor SOL.
#[test]
fn moe_m6a_to_m6c_sol() {
    let e = qwen_ep2("SOL");
    let r = ctx1(e, &m_base(), 1, 1024, 0);
    check("M6a", r.latency_ms, "6.564086");
    check_source(&r, "sol");
    check("M6b", ctx1(e, &m_base(), 1, 3, 0).latency_ms, "1.133998");
    let op = with(&m_base(), &[("is_gated", json!(false)), ("scale_factor", json!(1.0))]);
    check("M6c", ctx1(e, &op, 1, 1024, 0).latency_ms, "0.09349803");
}

/// 20 §10.4 M7a/M7b (EMPIRICAL): util from the curve; beyond the end = SILICON hold.
#[test]
fn moe_m7a_m7b_empirical() {
    let e = qwen_ep2("EMPIRICAL");
    let r = ctx1(e, &m_base(), 1, 1000, 0);
    check("M7a", r.latency_ms, "13.83545");
    check_source(&r, "empirical");
    let r = ctx1(e, &m_base(), 1, 20000, 0);
    check("M7b", r.latency_ms, "116.0693");
    check_source(&r, "empirical");
    check("M7b SILICON", ctx1(qwen_ep2("SILICON"), &m_base(), 1, 20000, 0).latency_ms, "116.0693");
}

/// 20 §10.4 M8a/M8b (HYBRID): w4a16_mxfp4 has no slice at this shape → nearest same-quant shape.
#[test]
fn moe_m8a_m8b_hybrid_cross_shape() {
    let e = qwen_ep2("HYBRID");
    let op = with(&m_base(), &[("quant_mode", json!("w4a16_mxfp4")), ("scale_factor", json!(1.0))]);
    let r = ctx1(e, &op, 1, 1024, 0);
    check("M8a", r.latency_ms, "0.1740436");
    check_source(&r, "empirical");
    let r = ctx1(e, &op, 1, 64, 0);
    check("M8b", r.latency_ms, "0.06565572");
    check_source(&r, "empirical");
}

/// 20 §10.4 M9a–M9c: sglang 0.5.14 tp4 ep4; enable_eplb scales context tokens by 0.8.
#[test]
fn moe_m9a_to_m9c_sglang_eplb() {
    let e = engine(QWEN_MOE_H200_SGLANG_EP4);
    let op = with(&spec_op(QWEN_MOE_H200_SGLANG_EP4, "context_moe"), &[("scale_factor", json!(1.0))]);
    let r = ctx1(e, &op, 1, 1024, 0);
    check("M9a", r.latency_ms, "0.2143603");
    check_source(&r, "silicon");
    let eplb = with(&op, &[("enable_eplb", json!(true))]);
    check("M9b", ctx1(e, &eplb, 1, 1280, 0).latency_ms, "0.2143603");
    let gen_flag = with(&eplb, &[("is_context", json!(false))]);
    check("M9c", ctx1(e, &gen_flag, 1, 1280, 0).latency_ms, "0.2445750");
}

// ---------------------------------------------------------------------------------------------
// 20 §11.2 MoeDispatch D1–D8

/// 20 §11.2 D1–D1d: vllm tp2 ep2 pre/post dispatch = 48 × AR(2); SOL mode keeps `silicon`;
/// attn_ar_modeled zeroes it.
#[test]
fn dispatch_d1_vllm_allreduce() {
    let e = qwen_ep2("SILICON");
    let pre = ep2_op("context_moe_pre_dispatch");
    let post = ep2_op("context_moe_post_dispatch");
    let r = ctx1(e, &pre, 1, 1024, 0);
    check("D1", r.latency_ms, "0.9835316");
    check_source(&r, "silicon");
    check("D1b", ctx1(e, &post, 1, 1024, 0).latency_ms, "0.9835316");
    let r = ctx1(qwen_ep2("SOL"), &pre, 1, 1024, 0);
    check("D1c", r.latency_ms, "0.4473924");
    check_source(&r, "silicon");
    check("D1d", ctx1(e, &with(&pre, &[("attn_ar_modeled", json!(true))]), 1, 1024, 0).latency_ms, "0");
}

/// 20 §11.2 D2/D3: vllm with larger ep and attention DP (AR + all-gather, reduce-scatter).
#[test]
fn dispatch_d2_d3_vllm_ep_adp() {
    let e = qwen_ep2("SILICON");
    let sf1 = |op: Value, ep: u32, adp: u32| {
        with(&op, &[("scale_factor", json!(1.0)), ("moe_ep_size", json!(ep)), ("attention_dp_size", json!(adp))])
    };
    check("D2", ctx1(e, &sf1(ep2_op("context_moe_pre_dispatch"), 4, 2), 1, 1024, 0).latency_ms, "0.07371264");
    check("D3", ctx1(e, &sf1(ep2_op("context_moe_post_dispatch"), 4, 4), 1, 1024, 0).latency_ms, "0.05772");
}

/// 20 §11.2 D4–D6c: sglang tp4 ep4 dispatch rules (tp, ep/adp, context parallel).
#[test]
fn dispatch_d4_to_d6c_sglang() {
    let id = QWEN_MOE_H200_SGLANG_EP4;
    let e = engine(id);
    let pre = with(&spec_op(id, "context_moe_pre_dispatch"), &[("scale_factor", json!(1.0))]);
    let post = with(&spec_op(id, "context_moe_post_dispatch"), &[("scale_factor", json!(1.0))]);
    let r = ctx1(e, &pre, 1, 1024, 0);
    check("D4", r.latency_ms, "0.02455136");
    check_source(&r, "silicon");
    let ep8 = [("moe_ep_size", json!(8)), ("attention_dp_size", json!(2))];
    check("D5", ctx1(e, &with(&pre, &ep8), 1, 1024, 0).latency_ms, "0.07754");
    check("D5b", ctx1(e, &with(&post, &ep8), 1, 1024, 0).latency_ms, "0.0802");
    check("D6", ctx1(e, &with(&pre, &[("attn_cp_size", json!(2))]), 1, 1024, 0).latency_ms, "0.03577");
    let dec = [
        ("moe_ep_size", json!(2)),
        ("attention_dp_size", json!(2)),
        ("attn_cp_size", json!(2)),
        ("is_context", json!(false)),
        ("scale_factor", json!(1.0)),
    ];
    let gpre = with(&spec_op(id, "generation_moe_pre_dispatch"), &dec);
    let gpost = with(&spec_op(id, "generation_moe_post_dispatch"), &dec);
    check("D6b", gen1(e, &gpre, 1, 1024).latency_ms, "0");
    check("D6c", gen1(e, &gpost, 1, 1024).latency_ms, "0.00249728");
}

/// 20 §11.2 D7/D7b (h200 trtllm, SM 90) and D8 (b200 trtllm, SM 100, moe quant element scaling).
#[test]
fn dispatch_d7_d8_trtllm() {
    let id = QWEN_MOE_H200_TRTLLM_EP4;
    let e = engine(id);
    let pre = with(&spec_op(id, "context_moe_pre_dispatch"), &[("scale_factor", json!(1.0))]);
    let r = ctx1(e, &pre, 1, 1024, 0);
    check("D7", r.latency_ms, "0.03593664");
    check_source(&r, "silicon");
    check("D7b", ctx1(e, &with(&pre, &[("attention_dp_size", json!(4))]), 1, 1024, 0).latency_ms, "0.0644");
    let id = QWEN_MOE_B200_TRTLLM_EP4;
    let e = engine(id);
    let pre = with(
        &spec_op(id, "context_moe_pre_dispatch"),
        &[("scale_factor", json!(1.0)), ("attention_dp_size", json!(4))],
    );
    for (q, want) in [("bfloat16", "0.05719"), ("fp8", "0.04985"), ("nvfp4", "0.02817625")] {
        let r = ctx1(e, &with(&pre, &[("moe_quant", json!(q))]), 1, 1024, 0);
        check(&format!("D8 {q}"), r.latency_ms, want);
    }
}

// ---------------------------------------------------------------------------------------------
// 20 §14.5 MLA family

/// 20 §14.5 MM1–MM3 (SILICON, h200 vllm DeepSeek-V3 tp8): module ops and the whole Fallback.
#[test]
fn mla_mm1_to_mm3_module_silicon() {
    let e = engine(DSV3_H200_VLLM);
    let cm = nested_op(DSV3_H200_VLLM, "context_mla_module");
    let r = ctx1(e, &cm, 1, 1024, 0);
    check("MM1", r.latency_ms, "14.43870");
    check_source(&r, "silicon");
    let block = spec_op(DSV3_H200_VLLM, "context_mla_block");
    let r = ctx1(e, &block, 1, 1024, 0);
    check("MM1b", r.latency_ms, "14.43870");
    check_source(&r, "silicon");
    check("MM2", ctx1(e, &cm, 1, 1024, 1024).latency_ms, "18.01178");
    let gm = nested_op(DSV3_H200_VLLM, "generation_mla_module");
    let r = gen1(e, &gm, 8, 2048);
    check("MM3 s2048", r.latency_ms, "7.905392");
    check_source(&r, "silicon");
    check("MM3 s3000", gen1(e, &gm, 8, 3000).latency_ms, "7.999075");
}

/// 20 §14.5 MM4/MM5 (SOL): module SOLs.
#[test]
fn mla_mm4_mm5_module_sol() {
    let e = in_mode(DSV3_H200_VLLM, "SOL");
    let cm = nested_op(DSV3_H200_VLLM, "context_mla_module");
    let r = ctx1(e, &cm, 1, 1024, 0);
    check("MM4 first", r.latency_ms, "0.3311337");
    check_source(&r, "sol");
    check("MM4 second", ctx1(e, &cm, 2, 1000, 3000).latency_ms, "4.421112");
    let gm = nested_op(DSV3_H200_VLLM, "generation_mla_module");
    let r = gen1(e, &gm, 8, 2048);
    check("MM5 first", r.latency_ms, "0.1521454");
    check_source(&r, "sol");
    check("MM5 second", gen1(e, &gm, 64, 8192).latency_ms, "3.908945");
}

/// 20 §14.5 GM1/GM2: GenerationMla (h200 trtllm), SILICON and SOL.
#[test]
fn mla_gm1_gm2_generation_mla() {
    let op = nested_op(DSV3_H200_TRTLLM, "generation_attention");
    assert!(op.get("GenerationMla").is_some(), "{op}");
    let e = engine(DSV3_H200_TRTLLM);
    let r = gen1(e, &op, 8, 2048);
    check("GM1 s2048", r.latency_ms, "1.110037");
    check_source(&r, "silicon");
    check("GM1 s3000", gen1(e, &op, 8, 3000).latency_ms, "1.198355");
    let s = in_mode(DSV3_H200_TRTLLM, "SOL");
    let r = gen1(s, &op, 8, 2048);
    check("GM2 b8", r.latency_ms, "0.1234119");
    check_source(&r, "sol");
    check("GM2 b256", gen1(s, &op, 256, 16384).latency_ms, "30.81370");
}

fn cm_op() -> Value {
    let op = nested_op(DSV3_H200_TRTLLM, "context_attention");
    assert!(op.get("ContextMla").is_some(), "{op}");
    with(&op, &[("fmha_quant_mode", json!("bfloat16")), ("scale_factor", json!(1.0))])
}

/// 20 §14.5 CM1–CM6: ContextMla (h200 trtllm): raw row, prefix, context parallel, SOL,
/// imbalance ignored, fp8 FMHA miss.
#[test]
fn mla_cm1_to_cm6_context_mla() {
    let e = engine(DSV3_H200_TRTLLM);
    let r = ctx1(e, &cm_op(), 1, 1024, 0);
    check("CM1", r.latency_ms, "0.03821333");
    check_source(&r, "silicon");
    check("CM2", ctx1(e, &cm_op(), 1, 1024, 1024).latency_ms, "0.06777200");
    check("CM3", ctx1(e, &with(&cm_op(), &[("cp_size", json!(2))]), 1, 2048, 0).latency_ms, "0.07718700");
    let r = ctx1(in_mode(DSV3_H200_TRTLLM, "SOL"), &cm_op(), 1, 1024, 0);
    check("CM4", r.latency_ms, "0.005428422");
    check_source(&r, "sol");
    check("CM5", ctx1_imb(e, &cm_op(), 1, 1024, 0, 2.0).latency_ms, "0.03821333");
    let err = ctx1_err(e, &with(&cm_op(), &[("fmha_quant_mode", json!("fp8"))]), 1, 1024, 0);
    assert_eq!(err.class(), ErrorClass::PerfDataNotAvailable, "{err}");
}

/// 20 §14.5 B1–B6: MlaBmm (h200 trtllm).
#[test]
fn mla_b1_to_b6_bmm() {
    let e = engine(DSV3_H200_TRTLLM);
    let pre = with(&nested_op(DSV3_H200_TRTLLM, "generation_bmm_pre"), &[("scale_factor", json!(1.0))]);
    assert_eq!(pre["MlaBmm"]["quant_mode"], "fp8");
    assert_eq!(pre["MlaBmm"]["num_heads"], 16);
    let r = gen1(e, &pre, 64, 2048);
    check("B1", r.latency_ms, "0.00856");
    check_source(&r, "silicon");
    check("B2", gen1(e, &with(&pre, &[("num_heads", json!(24))]), 64, 2048).latency_ms, "0.0073056");
    check("B3", gen1(e, &with(&pre, &[("quant_mode", json!("fp8_block"))]), 64, 2048).latency_ms, "0.0043264");
    let r = gen1(in_mode(DSV3_H200_TRTLLM, "SOL"), &pre, 64, 2048);
    check("B4", r.latency_ms, "0.0003549867");
    check_source(&r, "sol");
    check("B5", gen1(e, &with(&pre, &[("is_pre", json!(false))]), 64, 2048).latency_ms, "0.0094496");
    check("B6", ctx1(e, &pre, 64, 2048, 0).latency_ms, "0.00856");
}

// ---------------------------------------------------------------------------------------------
// 20 §16 composites

/// 20 §16.1: the DeepSeek `generation_moe_overlap` (h200 trtllm), SILICON and SOL.
#[test]
fn overlap_deepseek_generation_moe() {
    let op = spec_op(DSV3_H200_TRTLLM, "generation_moe_overlap");
    let r = gen1(engine(DSV3_H200_TRTLLM), &op, 8, 2048);
    check("overlap SILICON", r.latency_ms, "10.14059");
    check_source(&r, "mixed");
    let e = engine(DSV3_H200_TRTLLM);
    for (name, want) in [
        ("generation_router_gemm", "0.3715307"),
        ("generation_moe_pre_dispatch", "0.3623302"),
        ("generation_moe", "9.044396"),
        ("generation_moe_post_dispatch", "0.3623302"),
        ("generation_shared_gate_up_gemm", "0.7393525"),
        ("generation_shared_act_gate", "0.1831952"),
        ("generation_shared_ffn2_gemm", "0.3032107"),
    ] {
        check(name, gen1(e, &nested_op(DSV3_H200_TRTLLM, name), 8, 2048).latency_ms, want);
    }
    let r = gen1(in_mode(DSV3_H200_TRTLLM, "SOL"), &op, 8, 2048);
    check("overlap SOL", r.latency_ms, "4.582064");
    check_source(&r, "mixed");
}

/// 20 §16.2 FB1/FB2 (h200 trtllm DeepSeek): a missing fp8 primary uses the chain; a bf16
/// primary hit is returned verbatim.
#[test]
fn fallback_fb1_fb2_trtllm() {
    let e = engine(DSV3_H200_TRTLLM);
    let block = spec_op(DSV3_H200_TRTLLM, "context_mla_block");
    let r = ctx1(e, &block, 1, 1024, 0);
    check("FB2", r.latency_ms, "10.55300");
    check_source(&r, "silicon");
    let mut fp8 = block.clone();
    fp8["Fallback"]["primary"]["MlaModuleContext"]["fmha_quant_mode"] = json!("fp8");
    let r = ctx1(e, &fp8, 1, 1024, 0);
    check("FB1", r.latency_ms, "8.877972");
    check_source(&r, "silicon");
}

/// 20 §16.2 FB3/FB3b (h200 vllm DeepSeek): HYBRID primary evaluated as SILICON misses → chain
/// (mixed); EMPIRICAL raises "empirical not implemented" through the Fallback.
#[test]
fn fallback_fb3_fb3b_vllm_hybrid_empirical() {
    let mut block = spec_op(DSV3_H200_VLLM, "context_mla_block");
    block["Fallback"]["primary"]["MlaModuleContext"]["gemm_quant_mode"] = json!("fp8");
    let r = ctx1(in_mode(DSV3_H200_VLLM, "HYBRID"), &block, 1, 1024, 0);
    check("FB3", r.latency_ms, "24.59597");
    check_source(&r, "mixed");
    let err = ctx1_err(in_mode(DSV3_H200_VLLM, "EMPIRICAL"), &block, 1, 1024, 0);
    assert_ne!(err.class(), ErrorClass::PerfDataNotAvailable, "{err}");
    assert!(err.to_string().to_lowercase().contains("empirical"), "{err}");
}

/// 20 §16.2 FB4 (h100 sglang 0.5.14): no module file → the chain.
#[test]
fn fallback_fb4_sglang_no_module_file() {
    let e = engine(QWEN_MOE_H100_SGLANG);
    let op = json!({"Fallback": {"name": "blk",
        "primary": {"MlaModuleContext": {"name": "m", "scale_factor": 1.0, "num_heads": 16,
            "kv_cache_dtype": "fp8", "fmha_quant_mode": "bfloat16", "gemm_quant_mode": "fp8_block",
            "native_num_heads": 128}},
        "fallback": [{"ContextMla": {"name": "c", "scale_factor": 1.0, "num_heads": 16,
            "kv_cache_dtype": "fp8", "fmha_quant_mode": "bfloat16", "cp_size": 1}}]}});
    let r = ctx1(e, &op, 1, 1024, 0);
    check("FB4", r.latency_ms, "0.05894400");
    check_source(&r, "silicon");
}

/// 20 §16.2 FB6 (h100 trtllm): a missing FLOPS entry in the primary is not caught.
#[test]
fn fallback_fb6_missing_flops_propagates() {
    let e = engine(DSV3_H100_TRTLLM);
    let op = json!({"Fallback": {"name": "blk",
        "primary": {"MlaModuleGeneration": {"name": "m", "scale_factor": 1.0, "num_heads": 16,
            "kv_cache_dtype": "fp8", "fmha_quant_mode": "bfloat16", "gemm_quant_mode": "nvfp4",
            "native_num_heads": 128}},
        "fallback": []}});
    let err = match eval(e, &[op], false, 8, 2048, 0, 1.0, None) {
        Ok(r) => panic!("expected an error, got {r:?}"),
        Err(err) => err,
    };
    assert_eq!(err.class(), ErrorClass::MissingSystemFlops, "{err}");
    assert!(err.to_string().contains("fp4_tc_flops"), "{err}");
}

// ---------------------------------------------------------------------------------------------
// 40 §13.2 Qwen3-30B-A3B h200 vllm tp2 ep2

fn run(bs: u32, isl: u32, osl: u32, prefix: u32, mode: RunMode) -> aic_core::StaticRun {
    static_run(bs, 1, isl, osl, prefix, 1.0, 1.0, mode, 32)
}

/// 40 §13.2: run_static(4, 1, 2048, 64) and its per-op breakdowns.
#[test]
fn engine_13_2_qwen_moe_run_static_and_per_op() {
    let e = qwen_ep2("SILICON");
    let r = e.run_static(&run(4, 2048, 64, 0, RunMode::Static)).unwrap();
    check("context", r.context_ms, "87.89351574406646");
    check("generation", r.generation_ms, "369.9515582294755");
    check("total", r.total_ms, "457.84507397354196");
    let (ctx, gen) = e.run_static_per_op(&run(4, 2048, 64, 0, RunMode::Static)).unwrap();
    let want_ctx = [
        ("context_embedding", "0.011738"),
        ("context_add_norm_1", "1.821722"),
        ("context_qkv_gemm", "5.477504"),
        ("context_attention", "9.578634"),
        ("context_proj_gemm", "4.398677"),
        ("context_add_norm_2", "1.821722"),
        ("context_router_gemm", "0.396117"),
        ("context_moe_pre_dispatch", "6.952689"),
        ("context_moe", "50.337177"),
        ("context_moe_post_dispatch", "6.952689"),
        ("context_embedding_ar", "0.144848"),
        ("context_p2p", "0"),
    ];
    assert_eq!(ctx.len(), want_ctx.len(), "{ctx:?}");
    for (r, (name, ms)) in ctx.iter().zip(want_ctx) {
        assert_eq!(r.name, name);
        check(name, r.latency_ms, ms);
    }
    check_source(entry(&ctx, "context_attention"), "mixed");
    let want_gen = [
        ("generation_embedding", "0.189269"),
        ("generation_add_norm_1", "9.123610"),
        ("generation_qkv_gemm", "19.877761"),
        ("generation_attention", "46.702185"),
        ("generation_proj_gemm", "19.065985"),
        ("generation_add_norm_2", "9.123610"),
        ("generation_router_gemm", "15.254400"),
        ("generation_moe_pre_dispatch", "13.768151"),
        ("generation_moe", "217.728009"),
        ("generation_moe_post_dispatch", "13.768151"),
        ("generation_logits_gemm", "5.063592"),
        ("generation_embedding_ar", "0.286836"),
        ("generation_p2p", "0"),
    ];
    for (name, ms) in want_gen {
        check(name, entry(&gen, name).latency_ms, ms);
    }
    assert_eq!(gen.len(), want_gen.len(), "{gen:?}");
    check_rel("Σ context per-op", total(&ctx), r.context_ms);
    check_rel("Σ generation per-op", total(&gen), r.generation_ms);
}

/// 40 §13.2: mixed step breakdown and decode step.
#[test]
fn engine_13_2_qwen_moe_mixed_and_decode_step() {
    let e = qwen_ep2("SILICON");
    let got = e.mixed_step_breakdown(2048, 16, 2048, 64, 0, 1.0, 1.0).unwrap();
    let want = ["31.799199544800082", "26.775443737750376", "4.1445223344824225", "0.8792334725672846"];
    for i in 0..4 {
        check(&format!("mixed[{i}]"), got[i], want[i]);
    }
    check("decode_step(32,2048,64)", e.decode_step_latency_ms(32, 2048, 64, 1.0).unwrap(), "10.85984160953955");
}

/// The §13.2 energy engine: b200_sxm, vllm 0.22.0, same model and parallelism.
fn b200_v022() -> &'static Engine {
    built("qwen-ep2/b200/0.22.0", || {
        let mut spec = qwen_ep2_spec("SILICON");
        spec["engine"]["system_name"] = json!("b200_sxm");
        spec["engine"]["backend_version"] = json!("0.22.0");
        spec
    })
}

/// 40 §13.2: energy on b200 vllm 0.22.0 (evaluate_context_ops / evaluate_ops_json, x override).
#[test]
fn engine_13_2_energy_b200_vllm_0_22_0() {
    let e = b200_v022();
    let ops = ep2_ctx_ops();
    let (attn, moe) = (ops[3].clone(), ops[8].clone());
    let r = eval(e, &[attn.clone(), moe.clone()], true, 4, 2048, 0, 1.0, None).unwrap();
    let a = entry(&r, "context_attention");
    check("attention latency", a.latency_ms, "6.135160017812501");
    check("attention energy", a.energy_wms, "4006.166482628906");
    check_source(a, "mixed");
    let m = entry(&r, "context_moe");
    check("moe latency", m.latency_ms, "42.41257457386364");
    check("moe energy", m.energy_wms, "23078.471636286224");
    check_source(m, "silicon");
    let r = eval(e, &[attn.clone(), moe.clone(), attn.clone()], true, 4, 2048, 0, 1.0, None).unwrap();
    check("folded attention latency", entry(&r, "context_attention").latency_ms, "12.270320035625002");
    check("folded attention energy", entry(&r, "context_attention").energy_wms, "8012.332965257812");
    let r = eval(e, &[attn.clone(), moe.clone(), attn], true, 4, 2048, 0, 1.0, Some(100)).unwrap();
    check("x=100 moe latency", entry(&r, "context_moe").latency_ms, "6.569414588290911");
    check("x=100 moe energy", entry(&r, "context_moe").energy_wms, "5884.117483156698");
    check("x=100 attention", entry(&r, "context_attention").latency_ms, "12.270320035625002");
}

/// 40 §13.2: Overlap / Fallback composites on the b200 vllm 0.22.0 engine.
#[test]
fn engine_13_2_composites_b200_vllm_0_22_0() {
    let e = b200_v022();
    let ops = ep2_ctx_ops();
    let (attn, moe, qkv) = (ops[3].clone(), ops[8].clone(), ops[2].clone());
    let one = |op: Value| {
        let r = eval(e, &[op], true, 4, 2048, 0, 1.0, None).unwrap();
        assert_eq!(r.len(), 1, "{r:?}");
        r.into_iter().next().unwrap()
    };
    let r = one(json!({"Overlap": {"name": "ov", "group_a": [moe.clone()], "group_b": [attn.clone(), attn.clone()]}}));
    check("overlap latency", r.latency_ms, "42.41257457386364");
    check("overlap energy", r.energy_wms, "31090.804601544034");
    check_source(&r, "mixed");
    let r = one(json!({"Fallback": {"name": "fb", "primary": qkv.clone(), "fallback": [attn.clone(), moe.clone()]}}));
    check("fallback chain latency", r.latency_ms, "48.54773459167614");
    check("fallback chain energy", r.energy_wms, "27084.63811891513");
    check_source(&r, "mixed");
    let r = one(json!({"Fallback": {"name": "fb", "primary": attn.clone(), "fallback": [moe]}}));
    check("fallback primary latency", r.latency_ms, "6.135160017812501");
    check("fallback primary energy", r.energy_wms, "4006.166482628906");
    check_source(&r, "mixed");
    for op in [
        json!({"Fallback": {"name": "fb", "primary": qkv, "fallback": []}}),
        json!({"Overlap": {"name": "ov", "group_a": [], "group_b": []}}),
    ] {
        let r = one(op);
        check("empty latency", r.latency_ms, "0");
        check("empty energy", r.energy_wms, "0");
        check_source(&r, "empirical");
    }
}

// ---------------------------------------------------------------------------------------------
// 40 §13.3 DeepSeek-V3 h200 trtllm tp8 ep8, FMHA bf16

/// 40 §13.3: run_static(1, 1, 4096, 2) and the per-op breakdowns.
#[test]
fn engine_13_3_deepseek_run_static_and_per_op() {
    let e = engine(DSV3_H200_TRTLLM);
    let r = e.run_static(&run(1, 4096, 2, 0, RunMode::Static)).unwrap();
    check("context", r.context_ms, "164.59780526149999");
    check("generation", r.generation_ms, "7.112759817517864");
    check("total", r.total_ms, "171.71056507901784");
    let (ctx, gen) = e.run_static_per_op(&run(1, 4096, 2, 0, RunMode::Static)).unwrap();
    let want_ctx = [
        ("context_embedding", "0.018292"),
        ("context_add_norm_1", "3.914183"),
        ("context_mla_block", "40.6992"),
        ("context_add_norm_2", "3.914183"),
        ("context_shared_gate_up_gemm", "4.715576"),
        ("context_shared_act_gate", "0.282942"),
        ("context_shared_ffn2_gemm", "3.080061"),
        ("context_router_gemm", "1.707349"),
        ("context_moe_pre_dispatch", "17.477110"),
        ("context_moe", "71.253854"),
        ("context_moe_post_dispatch", "17.477110"),
        ("context_logits_gemm", "0.057945"),
        ("context_p2p", "0"),
    ];
    assert_eq!(ctx.len(), want_ctx.len(), "{ctx:?}");
    for (r, (name, ms)) in ctx.iter().zip(want_ctx) {
        assert_eq!(r.name, name);
        check(name, r.latency_ms, ms);
    }
    let primary = nested_op(DSV3_H200_TRTLLM, "context_mla_module");
    check_rel("block = primary alone", entry(&ctx, "context_mla_block").latency_ms, ctx1(e, &primary, 1, 4096, 0).latency_ms);
    let want_gen = [
        ("generation_embedding", "0.003004"),
        ("generation_add_norm_1", "0.183911"),
        ("generation_mla_block", "3.4221"),
        ("generation_add_norm_2", "0.183911"),
        ("generation_moe_overlap", "3.261889624247948"),
        ("generation_logits_gemm", "0.057945"),
        ("generation_p2p", "0"),
    ];
    assert_eq!(gen.len(), want_gen.len(), "{gen:?}");
    for (r, (name, ms)) in gen.iter().zip(want_gen) {
        assert_eq!(r.name, name);
        check(name, r.latency_ms, ms);
    }
    check_source(entry(&gen, "generation_moe_overlap"), "mixed");
    for (name, ms) in [
        ("generation_router_gemm", "0.362682"),
        ("generation_moe_pre_dispatch", "0.213012"),
        ("generation_moe", "2.473184"),
        ("generation_moe_post_dispatch", "0.213012"),
        ("generation_shared_gate_up_gemm", "0.728161"),
        ("generation_shared_act_gate", "0.183024"),
        ("generation_shared_ffn2_gemm", "0.300803"),
    ] {
        check(name, gen1(e, &nested_op(DSV3_H200_TRTLLM, name), 1, 4097).latency_ms, ms);
    }
}

/// 40 §13.3: prefill with prefix, prefix effect confined to `context_mla_block`, mixed steps.
#[test]
fn engine_13_3_deepseek_prefix_and_mixed() {
    let e = engine(DSV3_H200_TRTLLM);
    check("prefill(4,2048,1024)", e.prefill_latency_ms(4, 2048, 1024).unwrap(), "175.47624921958405");
    let (a, _) = e.run_static_per_op(&run(2, 4096, 2, 1024, RunMode::StaticCtx)).unwrap();
    let (b, _) = e.run_static_per_op(&run(2, 3072, 2, 0, RunMode::StaticCtx)).unwrap();
    assert_eq!(a.len(), b.len());
    for (x, y) in a.iter().zip(&b) {
        assert_eq!(x.name, y.name);
        if x.name == "context_mla_block" {
            check("block prefix 1024", x.latency_ms, "72.24496875");
            check("block prefix 0", y.latency_ms, "55.6625");
        } else {
            check_rel(&x.name, x.latency_ms, y.latency_ms);
        }
    }
    let got = e.mixed_step_breakdown(4096, 8, 4096, 1024, 0, 1.0, 1.0).unwrap();
    for (i, w) in ["165.25913102170085", "165.25913102170085", "0", "0"].iter().enumerate() {
        check(&format!("mixed(4096,8,4096,1024)[{i}]"), got[i], w);
    }
    let got = e.mixed_step_breakdown(1024, 32, 8192, 1000, 2048, 1.0, 1.0).unwrap();
    for (i, w) in ["65.34362921077134", "65.34362921077134", "0", "0"].iter().enumerate() {
        check(&format!("mixed(1024,32,8192,1000,2048)[{i}]"), got[i], w);
    }
}

/// The §13.3 engine compiled with nextn 2: from the nextn-1 case, `nextn` 2 and generation
/// layer scale 63 (62 with nextn 1), embedding/logits 63/61.
fn dsv3_nextn2() -> &'static Engine {
    built("dsv3-trtllm/nextn2", || {
        let mut spec = case_spec(DSV3_H200_TRTLLM_NEXTN1);
        spec["engine"]["nextn"] = json!(2);
        walk_ops(&mut spec["generation_ops"], &|_, inner| {
            if let Some(sf) = inner.get("scale_factor").and_then(Value::as_f64) {
                if sf == 62.0 {
                    inner.insert("scale_factor".into(), json!(63.0));
                } else if sf == 62.0 / 61.0 {
                    inner.insert("scale_factor".into(), json!(63.0 / 61.0));
                }
            }
        });
        spec
    })
}

/// 40 §13.3 MTP nextn 2: decode at batch × 3, decode step, mixed step.
#[test]
fn engine_13_3_deepseek_nextn2() {
    assert_eq!(63.0_f64 / 61.0, 1.0327868852459017);
    let e = dsv3_nextn2();
    check("decode(8,2048,2)", e.decode_latency_ms(8, 2048, 2).unwrap(), "20.094318515995376");
    let ops = dsv3_nextn2_gen_ops();
    check("one step b24 s2049", total(&eval(e, &ops, false, 24, 2049, 0, 1.0, None).unwrap()), "20.094318515995376");
    check("one step b8 s2049", total(&eval(e, &ops, false, 8, 2049, 0, 1.0, None).unwrap()), "14.702184640064118");
    check("decode(8,2048,100)", e.decode_latency_ms(8, 2048, 100).unwrap(), "1990.241927614792");
    check("decode_step(8,2048,100)", e.decode_step_latency_ms(8, 2048, 100, 1.0).unwrap(), "20.1077767679485");
    let got = e.mixed_step_breakdown(1024, 8, 2048, 100, 0, 1.0, 1.0).unwrap();
    for (i, w) in ["65.09169592456203", "65.09169592456203", "0", "0"].iter().enumerate() {
        check(&format!("mixed(1024,8,2048,100)[{i}]"), got[i], w);
    }
}

fn dsv3_nextn2_gen_ops() -> Vec<Value> {
    let mut ops = Value::Array(generation_ops(DSV3_H200_TRTLLM_NEXTN1));
    walk_ops(&mut ops, &|_, inner| {
        if let Some(sf) = inner.get("scale_factor").and_then(Value::as_f64) {
            if sf == 62.0 {
                inner.insert("scale_factor".into(), json!(63.0));
            } else if sf == 62.0 / 61.0 {
                inner.insert("scale_factor".into(), json!(63.0 / 61.0));
            }
        }
    });
    ops.as_array().unwrap().clone()
}

/// 11 §8.1 / 40 §13.3: with the default fp8 FMHA (as compiled for trtllm), the module key and
/// the chain's `ContextMla(fmha fp8)` both miss, so the SILICON prefill fails.
#[test]
fn engine_13_3_deepseek_default_fp8_fmha_context_mla_miss() {
    let id = "mla/DeepSeek-V3/h200_sxm/trtllm/tp8-pp1-dp1-mtp1-ep8";
    let err = engine(id).prefill_latency_ms(1, 1024, 0).unwrap_err();
    check_perf_miss(&err, "context MLA data missing for ContextKey");
    assert!(err.to_string().contains("fmha_quant: \"fp8\", kv_quant: \"fp8\""), "{err}");
}
