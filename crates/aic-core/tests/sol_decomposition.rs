//! The SOL decomposition (`Engine::evaluate_ops_sol`, spec 20 §0.7): every SOL / SOL_FULL
//! worked example of spec 20 (G6, G7, G8e, the SOL values of G9b/G9c, EW3, EM4, CA9a–CA10b,
//! GA4a–GA4d, AR3, AR5, NC3, NC3b, NC4, NC7, P3, P4, M6a–M6c, D1c, MM4, MM5, GM2, CM4, B4, the
//! §16.1 Overlap in SOL mode, the §16.2 MM1b Fallback), the per-family conventions, name folding, and the invariant that
//! the decomposed time is the SOL-mode latency: checked against the SOL-mode engine for every
//! op of the golden SOL cases and against the reference's recorded SOL answers
//! (`goldens/edge.json`, `evaluate_ops` queries of the `db=SOL` cases).
//!
//! Tolerance as in `spec_examples/common.rs`.

#[path = "spec_examples/common.rs"]
mod common;

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

use aic_core::engine::SolResult;
use aic_core::{AicError, Engine, EngineSpec, ErrorClass};
use serde_json::{json, Value};

use common::*;

const DSV3_H200_VLLM: &str = "mla/DeepSeek-V3/h200_sxm/vllm/tp8-pp1-dp1-mtp1-ep8";
const DSV3_H200_TRTLLM: &str = "mla/DeepSeek-V3/h200_sxm/trtllm/tp8-pp1-dp1-mtp1-ep8/fmha=bfloat16";
const QWEN_MOE_H200_VLLM: &str = "moe/Qwen3-30B-A3B/h200_sxm/vllm/tp2-pp1-dp1-mtp2-ep1";

// ---------------------------------------------------------------------------------------------
// Helpers

/// A golden case's engine with `database_mode` set to SOL, built once per id.
fn sol_engine(id: &str) -> &'static Engine {
    engine_in_mode(id, "SOL")
}

/// A golden case's engine in another database mode, built once per (id, mode).
fn engine_in_mode(id: &str, mode: &str) -> &'static Engine {
    static ENGINES: OnceLock<Mutex<HashMap<String, &'static Engine>>> = OnceLock::new();
    let key = format!("{id}#{mode}");
    let mut map = ENGINES.get_or_init(Default::default).lock().unwrap_or_else(|p| p.into_inner());
    if let Some(e) = map.get(&key) {
        return e;
    }
    let mut spec = case_spec(id);
    spec["engine"]["database_mode"] = json!(mode);
    let spec = EngineSpec::from_json(&spec.to_string()).unwrap_or_else(|e| panic!("spec of {id}: {e}"));
    let engine: &'static Engine =
        Box::leak(Box::new(Engine::from_spec(spec, None).unwrap_or_else(|e| panic!("engine of {id}: {e}"))));
    map.insert(key, engine);
    engine
}

/// `evaluate_ops_sol_json` on an op list.
fn sol_eval(
    engine: &Engine,
    ops: &[Value],
    is_context: bool,
    b: u32,
    s: u32,
    prefix: u32,
) -> Result<Vec<SolResult>, AicError> {
    engine.evaluate_ops_sol_json(&Value::Array(ops.to_vec()).to_string(), is_context, b, s, prefix, 1.0, None)
}

/// The single entry of one op's decomposition (context pass when `ctx`).
fn sol1(engine: &Engine, op: &Value, ctx: bool, b: u32, s: u32, prefix: u32) -> SolResult {
    let mut v = sol_eval(engine, std::slice::from_ref(op), ctx, b, s, prefix)
        .unwrap_or_else(|e| panic!("decomposition failed: {e}"));
    assert_eq!(v.len(), 1, "expected one folded entry, got {v:?}");
    v.pop().unwrap()
}

/// The decomposition error of one op.
fn sol1_err(engine: &Engine, op: &Value, ctx: bool, b: u32, s: u32, prefix: u32) -> AicError {
    match sol_eval(engine, std::slice::from_ref(op), ctx, b, s, prefix) {
        Ok(v) => panic!("expected an error, got {v:?}"),
        Err(e) => e,
    }
}

/// Asserts the parts given as printed in the spec (`None` = not printed).
#[track_caller]
fn check_parts(id: &str, r: &SolResult, time: &str, math: Option<&str>, mem: Option<&str>) {
    check(&format!("{id} sol_time"), r.sol_time_ms, time);
    if let Some(m) = math {
        check(&format!("{id} sol_math"), r.sol_math_ms, m);
    }
    if let Some(m) = mem {
        check(&format!("{id} sol_mem"), r.sol_mem_ms, m);
    }
}

/// Asserts that the decomposed time is exactly what the SOL-mode engine reports for the op,
/// and returns that SOL-mode result's tag.
#[track_caller]
fn check_matches_sol_mode(
    engine_id: &str,
    op: &Value,
    ctx: bool,
    b: u32,
    s: u32,
    prefix: u32,
    r: &SolResult,
) -> String {
    let mode = single(eval(sol_engine(engine_id), std::slice::from_ref(op), ctx, b, s, prefix, 1.0, None));
    assert_eq!(r.sol_time_ms, mode.latency_ms, "{}: decomposed time vs SOL-mode latency", r.name);
    mode.source.as_str().to_string()
}

fn single(r: Result<Vec<aic_core::OpResult>, AicError>) -> aic_core::OpResult {
    let mut v = r.unwrap_or_else(|e| panic!("evaluation failed: {e}"));
    assert_eq!(v.len(), 1, "expected one folded entry, got {v:?}");
    v.pop().unwrap()
}

/// Asserts a `NoSolDecomposition` error naming `op` (a `ValueError` at the Python boundary).
#[track_caller]
fn check_no_decomposition(e: &AicError, op: &str, kind: &str) {
    assert!(matches!(e, AicError::NoSolDecomposition { .. }), "unexpected error {e:?}");
    assert_eq!(e.class(), ErrorClass::Value);
    let text = e.to_string();
    assert!(text.contains(&format!("\"{op}\"")) && text.contains(kind), "error text {text:?} lacks {op:?} / {kind:?}");
}

/// The op named `name` anywhere in a case's lists (also inside Fallback / Overlap members).
fn nested_op(id: &str, name: &str) -> Value {
    fn find(ops: &[Value], name: &str) -> Option<Value> {
        for op in ops {
            let inner = op.as_object().unwrap().values().next().unwrap();
            if inner["name"] == name {
                return Some(op.clone());
            }
            let mut members: Vec<Value> = Vec::new();
            for key in ["group_a", "group_b", "fallback"] {
                if let Some(v) = inner.get(key).and_then(Value::as_array) {
                    members.extend(v.iter().cloned());
                }
            }
            if let Some(p) = inner.get("primary") {
                members.push(p.clone());
            }
            if let Some(found) = find(&members, name) {
                return Some(found);
            }
        }
        None
    }
    let all: Vec<Value> = context_ops(id).into_iter().chain(generation_ops(id)).collect();
    find(&all, name).unwrap_or_else(|| panic!("op {name} not in {id}"))
}

fn sf1(op: &Value) -> Value {
    with(op, &[("scale_factor", json!(1.0))])
}

// ---------------------------------------------------------------------------------------------
// §1.4 Gemm

/// 20 §1.4 G6: `context_qkv_gemm` (sf 64) is math bound: (3.474190, 3.474190, 0.9786709).
/// G7: the logits GEMM at b 4 is memory bound (math 0.003146).
#[test]
fn gemm_g6_g7_roofline_parts() {
    let e = engine(H200_VLLM);
    let qkv = spec_op(H200_VLLM, "context_qkv_gemm");
    let r = sol1(e, &qkv, true, 1, 1024, 0);
    check_parts("G6", &r, "3.474190", Some("3.474190"), Some("0.9786709"));
    assert_eq!(r.sol_time_ms, r.sol_math_ms.max(r.sol_mem_ms), "G6: a leaf's time is the larger part");
    assert_eq!(check_matches_sol_mode(H200_VLLM, &qkv, true, 1, 1024, 0, &r), "sol");

    let logits = sf1(&spec_op(H200_VLLM, "generation_logits_gemm"));
    assert_eq!(logits["Gemm"]["n"], 75968);
    let r = sol1(e, &logits, false, 4, 2000, 0);
    check_parts("G7", &r, "0.1622002", Some("0.003146"), Some("0.1622002"));
    assert!(r.sol_mem_ms > r.sol_math_ms, "G7 is memory bound: {r:?}");
    check_matches_sol_mode(H200_VLLM, &logits, false, 4, 2000, 0, &r);
}

/// 20 §1.4 G9b/G9c: the SOL a `below_grid_sol` miss degrades to in SILICON mode is this same
/// roofline (both memory bound).
#[test]
fn gemm_g9b_g9c_below_grid_sol_values_are_the_roofline() {
    let e = engine(H200_VLLM);
    let qkv = sf1(&spec_op(H200_VLLM, "context_qkv_gemm"));
    for (id, n, k, want) in [("G9b", 4, 4, "3.42e-06"), ("G9c", 2, 5120, "0.002189653")] {
        let op = with(&qkv, &[("n", json!(n)), ("k", json!(k)), ("below_grid_sol", json!(true))]);
        let r = sol1(e, &op, true, 1, 1024, 0);
        check_parts(id, &r, want, None, Some(want));
        assert!(r.sol_math_ms < r.sol_mem_ms, "{id} is memory bound: {r:?}");
        let silicon = single(eval(e, std::slice::from_ref(&op), true, 1, 1024, 0, 1.0, None));
        assert_eq!(silicon.source.as_str(), "sol");
        assert_eq!(silicon.latency_ms, r.sol_time_ms, "{id}: SILICON below-grid answer = SOL time");
    }
}

/// 20 §1.4 G8e: an fp8_static GEMM in SOL mode is its fp8 GEMM roofline (the floor), tag
/// `estimated`; SOL_FULL math 0.02714211, mem 0.007645867.
#[test]
fn gemm_g8e_fp8_static_is_the_fp8_roofline() {
    let op = sf1(&with(&spec_op(H200_VLLM, "context_qkv_gemm"), &[("quant_mode", json!("fp8_static"))]));
    let r = sol1(engine(H200_VLLM), &op, true, 1, 1024, 0);
    check_parts("G8e", &r, "0.02714211", Some("0.02714211"), Some("0.007645867"));
    assert_eq!(check_matches_sol_mode(H200_VLLM, &op, true, 1, 1024, 0, &r), "estimated");
}

// ---------------------------------------------------------------------------------------------
// §2, §3 memory ops

/// 20 §2 EW3, §3 EM4: MemOp in SOL mode is pure memory, `(0, time)`.
#[test]
fn memory_ops_ew3_em4_are_pure_memory() {
    let e = engine(H200_VLLM);
    let ew = spec_op(H200_VLLM, "context_add_norm_1");
    let r = sol1(e, &ew, true, 1, 1024, 0);
    check_parts("EW3", &r, "0.5592405", Some("0"), Some("0.5592405"));
    assert_eq!(check_matches_sol_mode(H200_VLLM, &ew, true, 1, 1024, 0, &r), "sol");
    let em = spec_op(H200_VLLM, "context_embedding");
    let r = sol1(e, &em, true, 1, 1024, 0);
    check_parts("EM4", &r, "0.002184533", Some("0"), Some("0.002184533"));
    check_matches_sol_mode(H200_VLLM, &em, true, 1, 1024, 0, &r);
}

// ---------------------------------------------------------------------------------------------
// §4 ContextAttention, §5 GenerationAttention

/// 20 §4.5 CA9a: `(sol_math_T, sol_mem_T + 1.1·extras_sol)` with `time = T + 1.1·extras_sol`:
/// (0.5567114, 0.5558704, 0.2524993). CA9b, CA10a, CA10b: prefix, window, fp8 dtypes.
#[test]
fn context_attention_ca9a_to_ca10b() {
    let e = engine(H200_VLLM);
    let op = spec_op(H200_VLLM, "context_attention");
    let r = sol1(e, &op, true, 1, 1024, 0);
    check_parts("CA9a", &r, "0.5567114", Some("0.5558704"), Some("0.2524993"));
    assert!(r.sol_time_ms > r.sol_math_ms.max(r.sol_mem_ms), "CA9a: extras ride on top of the max");
    assert_eq!(check_matches_sol_mode(H200_VLLM, &op, true, 1, 1024, 0, &r), "sol");

    let r = sol1(e, &op, true, 2, 1000, 3000);
    check("CA9b", r.sol_time_ms, "7.422511");
    check_matches_sol_mode(H200_VLLM, &op, true, 2, 1000, 3000, &r);

    let window = sf1(&with(&op, &[("window_size", json!(1024))]));
    let r = sol1(e, &window, true, 1, 4096, 0);
    check("CA10a", r.sol_time_ms, "0.06949694");
    check_matches_sol_mode(H200_VLLM, &window, true, 1, 4096, 0, &r);

    let fp8 = sf1(&with(&op, &[("kv_cache_dtype", json!("fp8")), ("fmha_quant_mode", json!("fp8"))]));
    let r = sol1(e, &fp8, true, 2, 1000, 3000);
    check("CA10b", r.sol_time_ms, "0.05799471");
    check_matches_sol_mode(H200_VLLM, &fp8, true, 2, 1000, 3000, &r);
}

/// Context parallelism: both zig-zag chunks add part by part, and the imbalance scales every
/// part (spec 20 §0.7 composition rule).
#[test]
fn context_attention_cp_chunks_and_imbalance_compose_part_by_part() {
    let e = engine(H200_VLLM);
    let op = sf1(&with(&spec_op(H200_VLLM, "context_attention"), &[("use_qk_norm", json!(false))]));
    let cp2 = with(&op, &[("cp_size", json!(2))]);
    let whole = sol1(e, &cp2, true, 1, 2048, 0);
    check_matches_sol_mode(H200_VLLM, &cp2, true, 1, 2048, 0, &whole);
    // c = 512: chunks T(512, 0) and T(512, 1536). Each single-chunk call carries the extras X
    // once (on the memory side), the cp call once in total:
    // time = T1 + T2 + X, math = m1 + m2, mem = mem1 + mem2 + X.
    let first = sol1(e, &op, true, 1, 512, 0);
    let last = sol1(e, &op, true, 1, 512, 1536);
    // X = 1.1 · MemOpSOL extras without qk-norm: 2·(2q + 2kv) + 2·kv·μf bytes, q = 32·128,
    // kv = 4·128, μf = 2 → 20480 B at 4.8e12 B/s.
    let x = 1.1 * 20480.0 / 4.8e12 * 1000.0;
    check_rel("cp2 math", whole.sol_math_ms, first.sol_math_ms + last.sol_math_ms);
    check_rel("cp2 mem", whole.sol_mem_ms, first.sol_mem_ms + last.sol_mem_ms - x);
    check_rel("cp2 time", whole.sol_time_ms, first.sol_time_ms + last.sol_time_ms - x);

    let json_ops = Value::Array(vec![op.clone()]).to_string();
    let scaled = e.evaluate_ops_sol_json(&json_ops, true, 1, 1024, 0, 1.5, None).unwrap().pop().unwrap();
    let plain = sol1(e, &op, true, 1, 1024, 0);
    check_rel("imbalance time", scaled.sol_time_ms, 1.5 * plain.sol_time_ms);
    check_rel("imbalance math", scaled.sol_math_ms, 1.5 * plain.sol_math_ms);
    check_rel("imbalance mem", scaled.sol_mem_ms, 1.5 * plain.sol_mem_ms);
}

/// 20 §5 GA4a–GA4d: decode attention is memory bound; GA4a math 2.649271e-4, GA4b (KV fp8 →
/// fp8 FLOPS) math 1.324636e-4.
#[test]
fn generation_attention_ga4a_to_ga4d() {
    let e = engine(H200_VLLM);
    let op = sf1(&spec_op(H200_VLLM, "generation_attention"));
    let r = sol1(e, &op, false, 8, 2000, 0);
    check_parts("GA4a", &r, "0.00685056", Some("2.649271e-4"), Some("0.00685056"));
    assert_eq!(check_matches_sol_mode(H200_VLLM, &op, false, 8, 2000, 0, &r), "sol");
    let fp8 = with(&op, &[("kv_cache_dtype", json!("fp8"))]);
    let r = sol1(e, &fp8, false, 8, 2000, 0);
    check_parts("GA4b", &r, "0.003438933", Some("1.324636e-4"), Some("0.003438933"));
    check_matches_sol_mode(H200_VLLM, &fp8, false, 8, 2000, 0, &r);
    let window = with(&op, &[("window_size", json!(512))]);
    let r = sol1(e, &window, false, 8, 2000, 0);
    check("GA4c", r.sol_time_ms, "0.001774933");
    check_matches_sol_mode(H200_VLLM, &window, false, 8, 2000, 0, &r);
    let r = sol1(e, &fp8, false, 256, 100, 0);
    check("GA4d", r.sol_time_ms, "0.006280533");
    check_matches_sol_mode(H200_VLLM, &fp8, false, 256, 100, 0, &r);
}

// ---------------------------------------------------------------------------------------------
// §7–§9 communication

fn ar(tp: u32) -> Value {
    json!({"CustomAllReduce": {"name": "ar", "scale_factor": 1.0, "hidden_size": 4096, "tp_size": tp,
        "quant": "half", "seq_split": 1}})
}

fn nccl(operation: &str, gpus: u32) -> Value {
    json!({"Nccl": {"name": "nccl", "scale_factor": 1.0, "hidden_size": 4096.0, "num_gpus": gpus,
        "dtype": "half", "operation": operation, "seq_split": 1}})
}

/// 20 §9 AR3, AR5: the custom all-reduce publishes its time without parts, `(0, 0)`; tp 1 is
/// a zero result (tag `empirical` even in SOL mode) contributing zeros.
#[test]
fn custom_allreduce_ar3_ar5_time_without_parts() {
    let e = engine(H200_VLLM);
    let r = sol1(e, &ar(1), true, 1, 256, 0);
    check_parts("AR3", &r, "0", Some("0"), Some("0"));
    assert_eq!(check_matches_sol_mode(H200_VLLM, &ar(1), true, 1, 256, 0, &r), "empirical");
    for (tp, want) in [(2, "0.004660338"), (8, "0.008155591"), (16, "0.0786432")] {
        let r = sol1(e, &ar(tp), true, 1, 256, 0);
        check_parts(&format!("AR5 tp{tp}"), &r, want, Some("0"), Some("0"));
        assert_eq!(check_matches_sol_mode(H200_VLLM, &ar(tp), true, 1, 256, 0, &r), "sol");
    }
}

/// 20 §9 NC3, NC3b, NC4, NC7: NCCL is pure data movement, `(0, time)`; one GPU and unknown
/// operations are zero.
#[test]
fn nccl_nc3_nc3b_nc4_nc7_pure_memory() {
    let e = engine(H200_VLLM);
    for operation in ["all_gather", "reduce_scatter", "alltoall"] {
        let r = sol1(e, &nccl(operation, 4), true, 1, 256, 0);
        check_parts(&format!("NC3 {operation}"), &r, "0.003495253", Some("0"), Some("0.003495253"));
        check_matches_sol_mode(H200_VLLM, &nccl(operation, 4), true, 1, 256, 0, &r);
    }
    let r = sol1(e, &nccl("all_reduce", 4), true, 1, 256, 0);
    check_parts("NC3 all_reduce", &r, "0.006990507", Some("0"), Some("0.006990507"));
    let r = sol1(e, &nccl("all_gather", 16), true, 1, 256, 0);
    check_parts("NC3b", &r, "0.0393216", Some("0"), Some("0.0393216"));
    let r = sol1(e, &nccl("all_gather", 1), true, 1, 256, 0);
    check_parts("NC4", &r, "0", Some("0"), Some("0"));
    assert_eq!(check_matches_sol_mode(H200_VLLM, &nccl("all_gather", 1), true, 1, 256, 0, &r), "sol");
    let r = sol1(e, &nccl("broadcast", 4), true, 1, 256, 0);
    check_parts("NC7", &r, "0", Some("0"), Some("0"));
}

/// 20 §9 P3: P2P is `(0, time)` = (0.2097152, 0, 0.2097152); P4: the spec's `context_p2p`
/// (pp 1) is a zero `silicon` result contributing zeros.
#[test]
fn p2p_p3_p4() {
    let e = engine(H200_VLLM);
    let p2p = json!({"P2P": {"name": "p2p", "scale_factor": 1.0, "pp_size": 2, "hidden_size": 5120, "seq_split": 1}});
    let r = sol1(e, &p2p, true, 1, 1024, 0);
    check_parts("P3", &r, "0.2097152", Some("0"), Some("0.2097152"));
    check_matches_sol_mode(H200_VLLM, &p2p, true, 1, 1024, 0, &r);
    let spec_p2p = spec_op(H200_VLLM, "context_p2p");
    let r = sol1(e, &spec_p2p, true, 1, 1024, 0);
    check_parts("P4", &r, "0", Some("0"), Some("0"));
    assert_eq!(check_matches_sol_mode(H200_VLLM, &spec_p2p, true, 1, 1024, 0, &r), "silicon");
}

// ---------------------------------------------------------------------------------------------
// §10 Moe, §11 MoeDispatch

fn moe_base() -> Value {
    json!({"Moe": {"name": "context_moe", "scale_factor": 48.0, "hidden_size": 2048, "inter_size": 768,
        "topk": 8, "num_experts": 128, "moe_tp_size": 1, "moe_ep_size": 2, "attention_dp_size": 1,
        "quant_mode": "bfloat16", "workload_distribution": "power_law_1.2", "is_gated": true,
        "moe_backend": null, "enable_eplb": false, "is_context": true}})
}

/// 20 §10.4 M6a: (6.564086, 1.876063, 6.564086); M6b, M6c.
#[test]
fn moe_m6a_to_m6c() {
    let e = engine(QWEN_MOE_H200_VLLM);
    let r = sol1(e, &moe_base(), true, 1, 1024, 0);
    check_parts("M6a", &r, "6.564086", Some("1.876063"), Some("6.564086"));
    assert_eq!(check_matches_sol_mode(QWEN_MOE_H200_VLLM, &moe_base(), true, 1, 1024, 0, &r), "sol");
    check("M6b", sol1(e, &moe_base(), true, 1, 3, 0).sol_time_ms, "1.133998");
    let ungated = with(&moe_base(), &[("is_gated", json!(false)), ("scale_factor", json!(1.0))]);
    let r = sol1(e, &ungated, true, 1, 1024, 0);
    check("M6c", r.sol_time_ms, "0.09349803");
    check_matches_sol_mode(QWEN_MOE_H200_VLLM, &ungated, true, 1, 1024, 0, &r);
}

/// 20 §11.2 D1c: MoeDispatch publishes no decomposition (its SOL-mode answer is 0.4473924,
/// tag `silicon`); with `attn_ar_modeled` its result is zero and contributes zeros.
#[test]
fn dispatch_d1c_has_no_decomposition() {
    let e = engine(QWEN_MOE_H200_VLLM);
    let pre = with(
        &spec_op(QWEN_MOE_H200_VLLM, "context_moe_pre_dispatch"),
        &[("moe_tp_size", json!(1)), ("moe_ep_size", json!(2))],
    );
    let mode = single(eval(sol_engine(QWEN_MOE_H200_VLLM), std::slice::from_ref(&pre), true, 1, 1024, 0, 1.0, None));
    check("D1c", mode.latency_ms, "0.4473924");
    check_source(&mode, "silicon");
    let err = sol1_err(e, &pre, true, 1, 1024, 0);
    check_no_decomposition(&err, "context_moe_pre_dispatch", "MoeDispatch");
    let modeled = with(&pre, &[("attn_ar_modeled", json!(true))]);
    let r = sol1(e, &modeled, true, 1, 1024, 0);
    check_parts("D1d", &r, "0", Some("0"), Some("0"));
}

// ---------------------------------------------------------------------------------------------
// §14 MLA

/// 20 §14.5 MM4 (first): (0.3311337, 0.3311337, 0.1998848); MM5 (first): (0.1521454,
/// 0.01862627, 0.1521454); second calls as printed.
#[test]
fn mla_modules_mm4_mm5() {
    let e = engine(DSV3_H200_VLLM);
    let cm = nested_op(DSV3_H200_VLLM, "context_mla_module");
    let r = sol1(e, &cm, true, 1, 1024, 0);
    check_parts("MM4 first", &r, "0.3311337", Some("0.3311337"), Some("0.1998848"));
    assert_eq!(check_matches_sol_mode(DSV3_H200_VLLM, &cm, true, 1, 1024, 0, &r), "sol");
    let r = sol1(e, &cm, true, 2, 1000, 3000);
    check("MM4 second", r.sol_time_ms, "4.421112");
    check_matches_sol_mode(DSV3_H200_VLLM, &cm, true, 2, 1000, 3000, &r);
    let gm = nested_op(DSV3_H200_VLLM, "generation_mla_module");
    let r = sol1(e, &gm, false, 8, 2048, 0);
    check_parts("MM5 first", &r, "0.1521454", Some("0.01862627"), Some("0.1521454"));
    check_matches_sol_mode(DSV3_H200_VLLM, &gm, false, 8, 2048, 0, &r);
    let r = sol1(e, &gm, false, 64, 8192, 0);
    check("MM5 second", r.sol_time_ms, "3.908945");
    check_matches_sol_mode(DSV3_H200_VLLM, &gm, false, 64, 8192, 0, &r);
}

/// 20 §14.5 GM2 (GenerationMla), CM4 (ContextMla, fmha bf16), B4 (MlaBmm, memory bound).
#[test]
fn mla_kernels_gm2_cm4_b4() {
    let e = engine(DSV3_H200_TRTLLM);
    let gm = nested_op(DSV3_H200_TRTLLM, "generation_attention");
    assert!(gm.get("GenerationMla").is_some(), "{gm}");
    for (b, s, want) in [(8, 2048, "0.1234119"), (256, 16384, "30.81370")] {
        let r = sol1(e, &gm, false, b, s, 0);
        check(&format!("GM2 b{b}"), r.sol_time_ms, want);
        assert_eq!(r.sol_time_ms, r.sol_math_ms.max(r.sol_mem_ms));
        check_matches_sol_mode(DSV3_H200_TRTLLM, &gm, false, b, s, 0, &r);
    }
    let cm = sf1(&with(&nested_op(DSV3_H200_TRTLLM, "context_attention"), &[("fmha_quant_mode", json!("bfloat16"))]));
    assert!(cm.get("ContextMla").is_some(), "{cm}");
    let r = sol1(e, &cm, true, 1, 1024, 0);
    check("CM4", r.sol_time_ms, "0.005428422");
    check_matches_sol_mode(DSV3_H200_TRTLLM, &cm, true, 1, 1024, 0, &r);
    let cp2 = with(&cm, &[("cp_size", json!(2))]);
    let whole = sol1(e, &cp2, true, 1, 2048, 0);
    check_matches_sol_mode(DSV3_H200_TRTLLM, &cp2, true, 1, 2048, 0, &whole);
    let (first, last) = (sol1(e, &cm, true, 1, 512, 0), sol1(e, &cm, true, 1, 512, 1536));
    check_rel("ContextMla cp2 math", whole.sol_math_ms, first.sol_math_ms + last.sol_math_ms);
    check_rel("ContextMla cp2 mem", whole.sol_mem_ms, first.sol_mem_ms + last.sol_mem_ms);

    let pre = sf1(&nested_op(DSV3_H200_TRTLLM, "generation_bmm_pre"));
    let r = sol1(e, &pre, false, 64, 2048, 0);
    check_parts("B4", &r, "0.0003549867", None, Some("0.0003549867"));
    assert!(r.sol_math_ms < r.sol_mem_ms, "B4 is memory bound: {r:?}");
    check_matches_sol_mode(DSV3_H200_TRTLLM, &pre, false, 64, 2048, 0, &r);
}

// ---------------------------------------------------------------------------------------------
// §16 composites

/// 20 §16.1: the DeepSeek `generation_moe_overlap` reports 4.582064 in SOL mode but publishes
/// no decomposition; 20 §16.2 MM1b: a Fallback answered by its primary passes the primary's
/// split through verbatim.
#[test]
fn overlap_raises_fallback_primary_passes_through() {
    let e = engine(DSV3_H200_TRTLLM);
    let overlap = spec_op(DSV3_H200_TRTLLM, "generation_moe_overlap");
    let mode = single(eval(sol_engine(DSV3_H200_TRTLLM), std::slice::from_ref(&overlap), false, 8, 2048, 0, 1.0, None));
    check("overlap SOL", mode.latency_ms, "4.582064");
    let err = sol1_err(e, &overlap, false, 8, 2048, 0);
    check_no_decomposition(&err, "generation_moe_overlap", "Overlap");

    let vllm = engine(DSV3_H200_VLLM);
    let block = spec_op(DSV3_H200_VLLM, "context_mla_block");
    assert!(block.get("Fallback").is_some(), "{block}");
    let r = sol1(vllm, &block, true, 1, 1024, 0);
    check_parts("MM1b SOL_FULL", &r, "0.3311337", Some("0.3311337"), Some("0.1998848"));
    let module = sol1(vllm, &nested_op(DSV3_H200_VLLM, "context_mla_module"), true, 1, 1024, 0);
    assert_eq!(
        (r.sol_time_ms, r.sol_math_ms, r.sol_mem_ms),
        (module.sol_time_ms, module.sol_math_ms, module.sol_mem_ms)
    );
    check_matches_sol_mode(DSV3_H200_VLLM, &block, true, 1, 1024, 0, &r);
}

// ---------------------------------------------------------------------------------------------
// Entry point behaviour

/// Entries fold by name (parts summed, first-appearance order), whatever the engine's own
/// database mode; bad JSON is a configuration error naming the entry point.
#[test]
fn folding_mode_independence_and_bad_json() {
    let e = engine(H200_VLLM);
    assert_eq!(e.spec().engine.database_mode, aic_core::DatabaseMode::Silicon);
    let qkv = spec_op(H200_VLLM, "context_qkv_gemm");
    let norm = spec_op(H200_VLLM, "context_add_norm_1");
    let renamed = with(&norm, &[("name", json!("context_qkv_gemm"))]);
    let ops = [qkv.clone(), norm.clone(), renamed];
    let folded = sol_eval(e, &ops, true, 1, 1024, 0).unwrap();
    assert_eq!(folded.iter().map(|r| r.name.as_str()).collect::<Vec<_>>(), ["context_qkv_gemm", "context_add_norm_1"]);
    let (g, n) = (sol1(e, &qkv, true, 1, 1024, 0), sol1(e, &norm, true, 1, 1024, 0));
    assert_eq!(folded[0].sol_time_ms, g.sol_time_ms + n.sol_time_ms);
    assert_eq!(folded[0].sol_math_ms, g.sol_math_ms + n.sol_math_ms);
    assert_eq!(folded[0].sol_mem_ms, g.sol_mem_ms + n.sol_mem_ms);
    assert_eq!(folded[1], n);

    let from_sol_engine = sol_eval(sol_engine(H200_VLLM), &ops, true, 1, 1024, 0).unwrap();
    assert_eq!(folded, from_sol_engine);

    // A compute call like the others: it resets the last provenance tier (SOL notes none).
    let empirical = engine_in_mode(H200_VLLM, "EMPIRICAL");
    eval(empirical, std::slice::from_ref(&qkv), true, 1, 1000, 0, 1.0, None).unwrap();
    assert!(empirical.last_provenance().is_some());
    assert_eq!(sol_eval(empirical, std::slice::from_ref(&qkv), true, 1, 1024, 0).unwrap()[0], g);
    assert_eq!(empirical.last_provenance(), None);

    // The argument checks of `evaluate_ops_json`: scale and op numbers must be finite, >= 0.
    let one = Value::Array(vec![qkv.clone()]).to_string();
    let err = e.evaluate_ops_sol_json(&one, true, 1, 1024, 0, f64::NAN, None).unwrap_err();
    assert!(err.to_string().contains("imbalance_correction_scale"), "{err}");
    let err = sol_eval(e, &[with(&qkv, &[("scale_factor", json!(-2.0))])], true, 1, 1024, 0).unwrap_err();
    assert!(err.to_string().contains("scale_factor"), "{err}");

    // The overflow rule of every other estimate: a scale that drives the SOL past the limit
    // raises the same error `evaluate_ops_json` raises, instead of returning (inf, inf, inf).
    let huge = with(&qkv, &[("scale_factor", json!(1e300))]);
    let err = sol_eval(e, std::slice::from_ref(&huge), true, u32::MAX, u32::MAX, 0).unwrap_err();
    assert_eq!(err.class(), ErrorClass::Value);
    assert!(err.to_string().contains("overflowed to"), "{err}");
    let err = eval(e, &[huge], true, u32::MAX, u32::MAX, 0, 1.0, None).unwrap_err();
    assert!(err.to_string().contains("overflowed to"), "{err}");

    let err = e.evaluate_ops_sol_json("[{\"Gemm\": {}}]", true, 1, 1, 0, 1.0, None).unwrap_err();
    assert_eq!(err.class(), ErrorClass::Value);
    assert!(err.to_string().contains("evaluate_ops_sol_json: invalid op list JSON"), "{err}");
}

/// Every op of the golden SOL cases (both phases, two shapes each): the decomposed time is
/// bit-for-bit the SOL-mode latency; ops without a split fail with `NoSolDecomposition`
/// exactly when their SOL result is not zero, and only for MoeDispatch / Overlap / Fallback.
#[test]
fn every_golden_sol_case_op_decomposes_to_its_sol_mode_latency() {
    let cases = [
        "edge/Qwen3-32B/h200_sxm/vllm/tp2-pp1-dp1/db=SOL",
        "edge/Meta-Llama-3.1-70B/h100_sxm/trtllm/tp4-pp1-dp1/db=SOL",
        "edge/Qwen3-30B-A3B/b200_sxm/vllm/tp4-pp1-dp1-mtp4-ep1/db=SOL",
        "edge/Qwen3-235B-A22B/h200_sxm/vllm/tp8-pp1-dp1-mtp2-ep4/db=SOL",
        "edge/DeepSeek-V3/h200_sxm/trtllm/tp8-pp1-dp1-mtp1-ep8/db=SOL",
        "edge/Qwen3-32B/b200_sxm/vllm/tp8-pp1-dp1/db=SOL",
        DSV3_H200_VLLM,
    ];
    let mut decomposed = 0;
    let mut refused = 0;
    for id in cases {
        let e = engine(id);
        let mode_engine = sol_engine(id);
        for (ctx, ops, shapes) in [
            (true, context_ops(id), [(1u32, 1024u32, 0u32), (2, 1000, 3000)]),
            (false, generation_ops(id), [(8, 2048, 0), (64, 8192, 0)]),
        ] {
            for op in &ops {
                let kind = op.as_object().unwrap().keys().next().unwrap().clone();
                for (b, s, p) in shapes {
                    let mode = single(eval(mode_engine, std::slice::from_ref(op), ctx, b, s, p, 1.0, None));
                    match sol_eval(e, std::slice::from_ref(op), ctx, b, s, p) {
                        Ok(r) => {
                            assert_eq!(r.len(), 1);
                            assert_eq!(r[0].sol_time_ms, mode.latency_ms, "{id} {kind} {} at ({b},{s},{p})", mode.name);
                            assert!(r[0].sol_math_ms >= 0.0 && r[0].sol_mem_ms >= 0.0, "{r:?}");
                            decomposed += 1;
                        }
                        Err(err) => {
                            assert!(matches!(err, AicError::NoSolDecomposition { .. }), "{id} {kind}: {err}");
                            assert!(
                                ["MoeDispatch", "Overlap", "Fallback"].contains(&kind.as_str()),
                                "{id} {kind}: {err}"
                            );
                            assert_ne!(mode.latency_ms, 0.0, "{id} {kind}: a zero result must decompose to zeros");
                            refused += 1;
                        }
                    }
                }
            }
        }
    }
    assert!(decomposed > 100 && refused > 0, "decomposed {decomposed}, refused {refused}");
}

/// The reference's recorded SOL answers (`evaluate_ops` queries of the `db=SOL` golden
/// cases): the decomposed time agrees to 1e-9 relative wherever the op publishes a split, and
/// errors stay errors.
#[test]
fn golden_sol_evaluate_ops_queries_agree_with_decomposed_time() {
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../goldens/edge.json")).unwrap();
    let corpus: Value = serde_json::from_str(&text).unwrap();
    let mut checked = 0;
    for case in corpus["cases"].as_array().unwrap() {
        if case["compile"]["database_mode"] != "SOL" || !case["compile_error"].is_null() {
            continue;
        }
        let id = case["id"].as_str().unwrap();
        let e = engine(id);
        for q in case["queries"].as_array().unwrap().iter().filter(|q| q["kind"] == "evaluate_ops") {
            let a = &q["args"];
            let ops = a["ops"].to_string();
            let u = |k: &str| a[k].as_u64().unwrap() as u32;
            let got = e.evaluate_ops_sol_json(
                &ops,
                a["is_context"].as_bool().unwrap(),
                u("batch_size"),
                u("s"),
                u("prefix"),
                a["imbalance_correction_scale"].as_f64().unwrap(),
                a["x"].as_u64(),
            );
            if !q["error"].is_null() {
                assert!(got.is_err(), "{id}: reference raised {} but we decomposed {got:?}", q["error"]);
                continue;
            }
            let want = q["value"].as_array().unwrap();
            match got {
                Ok(rows) => {
                    assert_eq!(rows.len(), want.len(), "{id}: {rows:?} vs {want:?}");
                    for (r, w) in rows.iter().zip(want) {
                        assert_eq!(r.name, w[0].as_str().unwrap());
                        check_rel(&format!("{id} {}", r.name), r.sol_time_ms, w[1].as_f64().unwrap());
                    }
                    checked += 1;
                }
                Err(err) => {
                    assert!(matches!(err, AicError::NoSolDecomposition { .. }), "{id}: {err}");
                    assert!(want.iter().any(|w| w[1].as_f64().unwrap() != 0.0), "{id}: {err}");
                }
            }
        }
    }
    assert!(checked >= 30, "only {checked} golden SOL queries checked");
}
