//! The worked examples of spec 34 (DeepSeek-V4: `Mhc`, `Dsv4Context` / `Dsv4Generation`) as
//! tests: SILICON lookups with the CSA top-k correction and holds (§5.8), the SOL (§5.5), the
//! empirical estimate (§5.7), context parallelism (§5.6), mHC (§6), engine-level prefill /
//! decode / mixed step (§4.4, §4.5, §5.2) and weight bytes (§7).
//!
//! Engines come from the golden cases of `goldens/dsv4.json`; ops are the cases' own ops with
//! fields edited in memory.

#[path = "spec_examples/common.rs"]
mod common;

use aic_core::{Engine, EngineSpec};
use serde_json::{json, Value};

use common::*;

const FLASH_H200_SGLANG: &str = "dsv4/DeepSeek-V4-Flash-FP8/h200_sxm/sglang/tp8-pp1-dp1-mtpx-ep8";
const FLASH_B200_TRTLLM: &str = "dsv4/DeepSeek-V4-Flash-FP8/b200_sxm/trtllm/v1.3.0rc23/tp8-pp1-dp1-mtpx-ep8";
const FLASH_H200_SGLANG_TP16: &str = "dsv4/DeepSeek-V4-Flash-FP8/h200_sxm/sglang/tp16-pp1-dp1-mtpx-ep16";
const FLASH_B200_SGLANG: &str = "dsv4/DeepSeek-V4-Flash-FP8/b200_sxm/sglang/tp8-pp1-dp1-mtpx-ep8";

/// The engine of a case in another database mode.
fn engine_in(id: &str, mode: &str) -> Engine {
    let mut spec = case_spec(id);
    spec["engine"]["database_mode"] = json!(mode);
    Engine::from_spec(EngineSpec::from_json(&spec.to_string()).unwrap(), None).unwrap()
}

/// The first attention op of a phase (Csa for Flash) with fields replaced.
fn attn(id: &str, context: bool, changes: &[(&str, Value)]) -> Value {
    let name = if context { "context_attention" } else { "generation_attention" };
    with(&spec_op(id, name), changes)
}

fn hca(id: &str, context: bool, scale: f64) -> Value {
    attn(id, context, &[("attn_kind", json!("Hca")), ("scale_factor", json!(scale))])
}

// §5.8 SILICON

#[test]
fn silicon_context_and_generation() {
    let e = engine(FLASH_H200_SGLANG);
    let csa = attn(FLASH_H200_SGLANG, true, &[]);
    check("Csa (1,1000,0)", ctx1(e, &csa, 1, 1000, 0).latency_ms, "7.457428125");
    check("Csa (1,128,0)", ctx1(e, &csa, 1, 128, 0).latency_ms, "2.4843");
    check("Csa (2,2000,1000) with Δv1", ctx1(e, &csa, 2, 2000, 1000).latency_ms, "30.834787604003907");
    check("Csa (1,16384,0) hold", ctx1(e, &csa, 1, 16384, 0).latency_ms, "166.71763032355278");
    check("Csa (1024,8192,0)", ctx1(e, &csa, 1024, 8192, 0).latency_ms, "60756.17207407245");
    check("Csa (2000,100,0)", ctx1(e, &csa, 2000, 100, 0).latency_ms, "913.8621771243597");
    let h = hca(FLASH_H200_SGLANG, true, 22.0);
    check("Hca (1,16384,0) hold", ctx1(e, &h, 1, 16384, 0).latency_ms, "60.5898974721963");
    let gen = attn(FLASH_H200_SGLANG, false, &[]);
    check("Csa gen (8,1025)", gen1(e, &gen, 8, 1025).latency_ms, "1.5393000000000001");
    check("Csa gen (2048,1000) hold", gen1(e, &gen, 2048, 1000).latency_ms, "16.88077779622501");
    let hg = hca(FLASH_H200_SGLANG, false, 22.0);
    check("Hca gen (1,100000) hold", gen1(e, &hg, 1, 100000).latency_ms, "1.0448673004150393");
}

#[test]
fn silicon_nearest_head_slice() {
    // b200 trtllm rc23, Flash tp 16: local 4 heads answer from the 8-head slice.
    let id = FLASH_B200_TRTLLM;
    let e = engine(id);
    let local4 = [("num_heads", json!(4)), ("tp_size", json!(16))];
    let csa = attn(id, true, &local4);
    check("Csa tp16 (1,1000,0)", ctx1(e, &csa, 1, 1000, 0).latency_ms, "4.3118578125");
    let mut changes = local4.to_vec();
    changes.extend([("attn_kind", json!("Hca")), ("scale_factor", json!(22.0))]);
    check("Hca tp16 (1,1000,0)", ctx1(e, &attn(id, true, &changes), 1, 1000, 0).latency_ms, "3.55361875");
    let _ = FLASH_H200_SGLANG_TP16;
}

// §5.5 SOL, §5.7 EMPIRICAL

#[test]
fn sol_and_empirical() {
    let id = FLASH_H200_SGLANG;
    let sol = engine_in(id, "SOL");
    let csa = attn(id, true, &[]);
    check("SOL Csa (2,2000,1000)", ctx1(&sol, &csa, 2, 2000, 1000).latency_ms, "5.501295519999999");
    check("SOL Hca ctx (1,100,5000)", ctx1(&sol, &hca(id, true, 22.0), 1, 100, 5000).latency_ms, "0.16954197333333332");
    check("SOL Hca gen (8,1025)", gen1(&sol, &hca(id, false, 22.0), 8, 1025).latency_ms, "0.12792149333333333");
    let unit = |op: &Value| with(op, &[("scale_factor", json!(1.0))]);
    check("SOL_ctx Csa (1,16384,0)", ctx1(&sol, &unit(&csa), 1, 16384, 0).latency_ms, "1.4242959422123356");
    check("SOL_ctx Hca (1,16384,0)", ctx1(&sol, &unit(&hca(id, true, 1.0)), 1, 16384, 0).latency_ms, "0.5034977808048534");
    let emp = engine_in(id, "EMPIRICAL");
    check("EMP Csa (2,2000,1000)", ctx1(&emp, &csa, 2, 2000, 1000).latency_ms, "31.10774746564361");
    check("EMP Hca ctx (1,100,5000)", ctx1(&emp, &hca(id, true, 22.0), 1, 100, 5000).latency_ms, "1.3870159463895562");
    check("EMP Hca gen (8,1025)", gen1(&emp, &hca(id, false, 22.0), 8, 1025).latency_ms, "0.99");
}

// §5.6 context parallelism

#[test]
fn context_parallel_composition() {
    let id = FLASH_H200_SGLANG;
    let e = engine(id);
    let cp = |c: u32| attn(id, true, &[("cp_size", json!(c))]);
    check("Csa cp2 (1,4096,0)", ctx1(e, &cp(2), 1, 4096, 0).latency_ms, "16.237021499999997");
    check("Csa cp4 (2,3000,1000)", ctx1(e, &cp(4), 2, 3000, 1000).latency_ms, "13.679622962860106");
    check("Csa cp8 (4,1000,0)", ctx1(e, &cp(8), 4, 1000, 0).latency_ms, "4.824847904296874");
    let hcp = |c: u32| attn(id, true, &[("cp_size", json!(c)), ("attn_kind", json!("Hca")), ("scale_factor", json!(22.0))]);
    check("Hca cp2 (1,16384,0)", ctx1(e, &hcp(2), 1, 16384, 0).latency_ms, "29.84476");
    check("Hca cp8 (1,20000,0)", ctx1(e, &hcp(8), 1, 20000, 0).latency_ms, "11.044472656249999");
    let h21 = attn(id, true, &[("cp_size", json!(4)), ("attn_kind", json!("Hca"))]);
    check("Hca cp4 (2,3000,1000) scale 21", ctx1(e, &h21, 2, 3000, 1000).latency_ms, "7.079943819580079");
    let err = eval(e, &[cp(2)], true, 1, 16384, 0, 1.0, None).unwrap_err().to_string();
    assert!(err.contains("DSA CP: isl=16384 exceeds the collected sparse-kernel grid (max isl=8192)"), "{err}");
    let sol = engine_in(id, "SOL");
    check("SOL Csa cp2 (1,4096,0)", ctx1(&sol, &cp(2), 1, 4096, 0).latency_ms, "2.818521443010448");
    let b200 = engine(FLASH_B200_SGLANG);
    let b4 = attn(FLASH_B200_SGLANG, true, &[("cp_size", json!(2)), ("num_heads", json!(16)), ("tp_size", json!(4))]);
    check("b200 Csa tp4 cp2 (1,16384,0)", ctx1(b200, &b4, 1, 16384, 0).latency_ms, "50.3146035");
}

// §6 mHC

#[test]
fn mhc_curve_hold_sol_empirical() {
    let id = FLASH_H200_SGLANG;
    let e = engine(id);
    let pre = spec_op(id, "context_mhc_pre");
    let post = spec_op(id, "context_mhc_post");
    let tokens = |op: &Value, x: u64| single_x(e, op, x);
    check("pre 3000", tokens(&pre, 3000), "6.0571546875");
    check("pre 2e6 hold", tokens(&pre, 2_000_000), "3258.6208108563737");
    check("post 1000", tokens(&post, 1000), "1.8511499999999999");
    let sol = engine_in(id, "SOL");
    check("SOL pre 3000", single_x(&sol, &pre, 3000), "3.5418112075");
    check("SOL post 3000 unscaled", single_x(&sol, &with(&post, &[("scale_factor", json!(1.0))]), 3000), "0.0822477025");
    let emp = engine_in(id, "EMPIRICAL");
    check("EMP pre 3000", single_x(&emp, &pre, 3000), "6.018221482535627");
}

fn single_x(e: &Engine, op: &Value, x: u64) -> f64 {
    let r = eval(e, std::slice::from_ref(op), true, 1, 1, 0, 1.0, Some(x)).unwrap();
    r[0].latency_ms
}

// §4.4, §5.2: engine-level answers

#[test]
fn engine_prefill_and_mixed_step() {
    let e = engine(FLASH_H200_SGLANG);
    check("prefill(1,1000,0)", e.prefill_latency_ms(1, 1000, 0).unwrap(), "37.84097137487077");
    check("mixed(1024,16,1024,128,0)", e.mixed_step_latency_ms(1024, 16, 1024, 128, 0, 1.0, 1.0).unwrap(), "41.5940740606994");
    check("mixed(4096,64,4096,256,0)", e.mixed_step_latency_ms(4096, 64, 4096, 256, 0, 1.0, 1.0).unwrap(), "117.891392768723");
    check("mixed(512,128,2048,512,0)", e.mixed_step_latency_ms(512, 128, 2048, 512, 0, 1.0, 1.0).unwrap(), "30.67309069060922");
}

// §7 weights

#[test]
fn weight_bytes_per_op() {
    let ops = context_ops(FLASH_H200_SGLANG);
    let expected: [f64; 16] = [
        1059061760.0, 67637796.0, 0.0, 892244640.0, 605553344.0, 67637796.0, 0.0, 90177536.0, 0.0, 45088768.0,
        90177536.0, 0.0, 34628173824.0, 0.0, 132382720.0, 0.0,
    ];
    assert_eq!(ops.len(), 16);
    for (op, want) in ops.iter().zip(expected) {
        let op: aic_core::Op = serde_json::from_value(op.clone()).unwrap();
        assert_eq!(aic_core::memory::op_weight_bytes(&op), want, "{}", op.name());
    }
}
