//! Spec 31 (Qwen3.5 / Gated-DeltaNet) worked examples as tests: the `Gdn` SOL formulas and the
//! twenty examples of §7 (E1–E11, T1–T3, S2, O1–O2, B1–B2), the state-dtype gate, database-mode
//! indifference (§6.6), the MoE dispatch facts of §8 and the engine-level checks of §6.7 / §7.
//!
//! Engines come from the golden cases of `goldens/qwen35.json`; single ops are the compiled
//! `Gdn` ops of those cases with fields edited in memory. Tolerance as in
//! `spec_examples/common.rs`.

#[path = "spec_examples/common.rs"]
mod common;

use aic_core::ops::gdn_sol_ms;
use aic_core::spec::GdnOp;
use aic_core::StaticRun;
use serde_json::{json, Value};

use common::*;

const H200_VLLM: &str = "qwen35/Qwen3.5-397B-A17B/h200_sxm/vllm/tp8-pp1-dp1-mtp1-ep8";
const H200_VLLM_SOL: &str = "qwen35/Qwen3.5-397B-A17B/h200_sxm/vllm/tp8-pp1-dp1-mtp1-ep8/db=SOL";
const H200_VLLM_EMPIRICAL: &str = "qwen35/Qwen3.5-397B-A17B/h200_sxm/vllm/tp8-pp1-dp1-mtp1-ep8/db=EMPIRICAL";
const H200_VLLM_HYBRID: &str = "qwen35/Qwen3.5-397B-A17B/h200_sxm/vllm/tp8-pp1-dp1-mtp1-ep8/db=HYBRID";
const H200_VLLM_NEXTN1: &str = "qwen35/Qwen3.5-397B-A17B/h200_sxm/vllm/tp8-pp1-dp1-mtp1-ep8/nextn1";
const H200_TRTLLM: &str = "qwen35/Qwen3.5-397B-A17B/h200_sxm/trtllm/tp8-pp1-dp1-mtp1-ep8";
const H200_SGLANG: &str = "qwen35/Qwen3.5-397B-A17B/h200_sxm/sglang/tp8-pp1-dp1-mtp1-ep8";
const B200_VLLM: &str = "qwen35/Qwen3.5-397B-A17B/b200_sxm/vllm/tp8-pp1-dp1-mtp1-ep8";
const H100_TRTLLM_27B: &str = "qwen35/Qwen3.5-27B/h100_sxm/trtllm/tp1-pp1-dp1";
const B200_SGLANG_35B: &str = "qwen35/Qwen3.5-35B-A3B/b200_sxm/sglang/tp2-pp1-dp2-mtp1-ep4";

const SCAN: &str = "context_gdn_scan";
const CONV: &str = "context_gdn_conv1d";
const UPDATE: &str = "generation_gdn_conv1d";
const RECURRENCE: &str = "generation_gdn_recurrence";

/// A compiled `Gdn` op of a case at scale factor 1.
fn gdn(id: &str, name: &str) -> Value {
    with(&spec_op(id, name), &[("scale_factor", json!(1.0))])
}

fn op_struct(v: &Value) -> GdnOp {
    serde_json::from_value(v["Gdn"].clone()).unwrap()
}

#[test]
fn sol_formulas() {
    // §7 SOL: h200 (4.8e12 B/s) and b200 (7.7e12 B/s), shard gk 2 / gv 8, b 2, s 3000.
    let ops = [SCAN, CONV, UPDATE, RECURRENCE].map(|n| op_struct(&gdn(H200_VLLM, n)));
    let [scan, conv, update, rec] = &ops;
    assert_eq!(gdn_sol_ms(conv, 2.0, 3000.0, 4.8e12), 0.023039999999999998);
    assert_eq!(gdn_sol_ms(scan, 2.0, 3000.0, 4.8e12), 0.01688576);
    assert_eq!(gdn_sol_ms(update, 2.0, 3000.0, 4.8e12), 7.68e-06);
    assert_eq!(gdn_sol_ms(rec, 2.0, 3000.0, 4.8e12), 0.00043903999999999997);
    check("b200 conv1d_fn", gdn_sol_ms(conv, 2.0, 3000.0, 7.7e12), "0.014362597402597403");
    check("b200 scan", gdn_sol_ms(scan, 2.0, 3000.0, 7.7e12), "0.010526188051948052");
    check("b200 conv1d_update", gdn_sol_ms(update, 2.0, 3000.0, 7.7e12), "4.787532467532467e-06");
    check("b200 recurrence", gdn_sol_ms(rec, 2.0, 3000.0, 7.7e12), "0.00027368727272727273");
    // §6.5 golden point: the scan with phase `generation` uses x = b but still counts chunks.
    let mut gen_scan = scan.clone();
    gen_scan.phase = "generation".into();
    check("generation-phase scan", gdn_sol_ms(&gen_scan, 2.0, 2048.0, 4.8e12), "0.007429546666666667");
    // Unknown kernel: x · d_model · 2 read and written.
    let mut foo = rec.clone();
    foo.kernel_source = "foo".into();
    check("E10 formula", gdn_sol_ms(&foo, 8.0, 100.0, 4.8e12), "2.7306666666666664e-05");
}

#[test]
fn sol_fallback_for_a_missing_key_is_scaled() {
    // gv 7 (no such key) at sf 45: 45 × the formula, tag `sol`.
    let e = engine(H200_VLLM);
    for (name, expected) in [(CONV, "0.9504"), (SCAN, "0.6720768"), (UPDATE, "0.0003168"), (RECURRENCE, "0.0172896")] {
        let op = with(&gdn(H200_VLLM, name), &[("num_v_heads", json!(7)), ("scale_factor", json!(45.0))]);
        let r = if name.starts_with("context") { ctx1(e, &op, 2, 3000, 0) } else { gen1(e, &op, 2, 3000) };
        check(name, r.latency_ms, expected);
        check_source(&r, "sol");
    }
}

#[test]
fn h200_vllm_examples() {
    let e = engine(H200_VLLM);
    let scan = gdn(H200_VLLM, SCAN);
    let rec = gdn(H200_VLLM, RECURRENCE);
    let cases: [(&str, &Value, bool, u32, u32, &str, &str); 10] = [
        ("E1", &scan, true, 1, 1024, "0.05913599967956543", "silicon"),
        ("E2", &scan, true, 3, 1500, "0.08155333920381963", "silicon"),
        ("E3", &scan, true, 1, 65536, "2.7974755223561365", "silicon"),
        ("E4", &scan, true, 128, 100, "0.09797612635773702", "silicon"),
        ("E6", &rec, false, 64, 2048, "0.01642848014831543", "silicon"),
        ("E7", &rec, false, 100, 2048, "0.029126760363578797", "silicon"),
        ("E8", &rec, false, 4096, 2048, "1.069291534423828", "silicon"),
        ("E11", &scan, true, 2, 0, "0.00043903999999999997", "sol"),
        ("E5", &gdn(H200_VLLM, CONV), true, 5, 777, "0.012435701304348186", "silicon"),
        (
            "E10",
            &with(&rec, &[("kernel_source", json!("foo"))]),
            false,
            8,
            100,
            "2.7306666666666664e-05",
            "sol",
        ),
    ];
    for (id, op, context, b, s, expected, tag) in cases {
        let r = if context { ctx1(e, op, b, s, 0) } else { gen1(e, op, b, s) };
        check(id, r.latency_ms, expected);
        check_source(&r, tag);
    }
    // E9: a bf16 state sends the scan to SOL (σ = 2); the conv kernel ignores the dtype.
    let bf16 = with(&scan, &[("mamba_ssm_dtype", json!("bfloat16"))]);
    let r = ctx1(e, &bf16, 2, 2048, 0);
    check("E9", r.latency_ms, "0.011578026666666668");
    check_source(&r, "sol");
    let conv_bf16 = with(&gdn(H200_VLLM, CONV), &[("mamba_ssm_dtype", json!("bfloat16"))]);
    check_source(&ctx1(e, &conv_bf16, 5, 777, 0), "silicon");
    // The op's own phase decides: a generation-phase op in a context pass reads the batch curve.
    let r = ctx1(e, &rec, 64, 2048, 0);
    check("recurrence in a context pass", r.latency_ms, "0.01642848014831543");
    // A name the loader normalises away never hits; the direct physical name does.
    let raw = with(&rec, &[("kernel_source", json!("fused_recurrent_gated_delta_rule"))]);
    check_source(&gen1(e, &raw, 64, 2048), "sol");
    let physical = with(&scan, &[("kernel_source", json!("chunk_gated_delta_rule_flashinfer"))]);
    check("flashinfer by name", ctx1(e, &physical, 1, 1024, 0).latency_ms, "0.05913599967956543");
}

#[test]
fn trtllm_sglang_h100_b200_examples() {
    let t = engine(H200_TRTLLM);
    let r = ctx1(t, &gdn(H200_TRTLLM, SCAN), 1, 1024, 0);
    check("T1", r.latency_ms, "0.05963647842407227");
    check("T2", ctx1(t, &gdn(H200_TRTLLM, SCAN), 48, 20000, 0).latency_ms, "50.18167748451232");
    let r = gen1(t, &gdn(H200_TRTLLM, RECURRENCE), 8, 100);
    check("T3", r.latency_ms, "0.0017561599999999999");
    check_source(&r, "sol");
    // T1 equals the sglang engine's own row (S1).
    let s = engine(H200_SGLANG);
    check("S1", ctx1(s, &gdn(H200_SGLANG, SCAN), 1, 1024, 0).latency_ms, "0.05963647842407227");
    check("S2", gen1(s, &gdn(H200_SGLANG, RECURRENCE), 64, 100).latency_ms, "0.016301120519638064");
    let o = engine(H100_TRTLLM_27B);
    check("O1", ctx1(o, &gdn(H100_TRTLLM_27B, SCAN), 12, 12000, 0).latency_ms, "13.258188222348691");
    let r = gen1(o, &gdn(H100_TRTLLM_27B, RECURRENCE), 8, 100);
    check("O2", r.latency_ms, "0.013935999572277069");
    check_source(&r, "silicon");
    check("O2 SOL", gdn_sol_ms(&op_struct(&gdn(H100_TRTLLM_27B, RECURRENCE)), 8.0, 100.0, 3.35e12), "0.01510262447761194");
    let b = engine(B200_SGLANG_35B);
    check("B1", ctx1(b, &gdn(B200_SGLANG_35B, SCAN), 4, 3000, 0).latency_ms, "0.3650393234193325");
    check("B2", gen1(b, &gdn(B200_SGLANG_35B, UPDATE), 48, 100).latency_ms, "0.0030027200281620026");
    // b200 SOL through an engine (bandwidth from the system YAML).
    let bv = engine(B200_VLLM);
    let miss = with(&gdn(B200_VLLM, SCAN), &[("num_v_heads", json!(7))]);
    let expected = gdn_sol_ms(&op_struct(&miss), 2.0, 3000.0, 7.7e12);
    check_rel("b200 miss", ctx1(bv, &miss, 2, 3000, 0).latency_ms, expected);
}

#[test]
fn database_mode_is_ignored() {
    // §6.6: the scan at (2, 3000), sf 45, answers from the table in every mode on vllm.
    for id in [H200_VLLM, H200_VLLM_SOL, H200_VLLM_EMPIRICAL, H200_VLLM_HYBRID] {
        let r = ctx1(engine(id), &spec_op(id, SCAN), 2, 3000, 0);
        check(id, r.latency_ms, "7.078798558562995");
        check_source(&r, "silicon");
    }
    let r = ctx1(engine(H200_TRTLLM), &spec_op(H200_TRTLLM, SCAN), 2, 3000, 0);
    check("trtllm SILICON", r.latency_ms, "6.830051327683032");
}

#[test]
fn moe_dispatch_facts() {
    // §8: vllm pre-dispatch drops the modelled attention all-reduce; trtllm prices it.
    let e = engine(H200_VLLM);
    let pre = ctx1(e, &spec_op(H200_VLLM, "context_gdn_moe_pre_dispatch"), 2, 1024, 0);
    check("vllm pre", pre.latency_ms, "0.0");
    let post = ctx1(e, &spec_op(H200_VLLM, "context_gdn_moe_post_dispatch"), 2, 1024, 0);
    check("vllm post", post.latency_ms, "3.9225169658660883");
    let unmodelled = with(&spec_op(H200_VLLM, "context_gdn_moe_pre_dispatch"), &[("attn_ar_modeled", json!(false))]);
    check("vllm pre unmodelled", ctx1(e, &unmodelled, 2, 1024, 0).latency_ms, "3.9225169658660883");
    let t = engine(H200_TRTLLM);
    for name in ["context_gdn_moe_pre_dispatch", "context_gdn_moe_post_dispatch"] {
        check(name, ctx1(t, &spec_op(H200_TRTLLM, name), 2, 1024, 0).latency_ms, "5.46266884803772");
    }
}

#[test]
fn engine_level_checks() {
    let e = engine(H200_VLLM);
    let prefill = e.prefill_latency_ms(2, 3000, 1000).unwrap();
    check("prefill(2, 3000, 1000)", prefill, "110.13413386487325");
    let scan = spec_op(H200_VLLM, SCAN);
    check("scan at (2, 2000)", ctx1(e, &scan, 2, 2000, 1000).latency_ms, "4.83412111736834");
    // Static run, beam 2: the recurrence sees batch 4, the GEMMs x = 8.
    let mut run = StaticRun::new(4, 2048, 3);
    run.beam_width = 2;
    let (_, generation) = e.run_static_per_op(&run).unwrap();
    let rec = entry(&generation, RECURRENCE);
    check("static recurrence", rec.latency_ms, "0.43217280507087713");
    let rec_op = spec_op(H200_VLLM, RECURRENCE);
    let by_hand = gen1(e, &rec_op, 4, 2049).latency_ms + gen1(e, &rec_op, 4, 2050).latency_ms;
    check_rel("static recurrence by hand", rec.latency_ms, by_hand);
    check("static in_proj", entry(&generation, "generation_gdn_in_proj_gemm").latency_ms / 2.0, "0.4343599826097489");
    // Mixed step: the scan is priced in pass 1 at batch 1, s = T1 − P1 = 3016 − 600.
    let mixed = e.mixed_step_breakdown_per_op(3000, 16, 1000, 128, 200, 1.0, 1.0).unwrap();
    check("mixed scan", entry(&mixed[0], SCAN).latency_ms, "5.754443534463645");
    check_rel("mixed scan by hand", entry(&mixed[0], SCAN).latency_ms, ctx1(e, &scan, 1, 2416, 0).latency_ms);
    // nextn 1: the decode step's recurrence is the op at b = 2 × 16.
    let n = engine(H200_VLLM_NEXTN1);
    let step = n.decode_step_per_op(16, 1024, 128, 1.0).unwrap();
    check("decode step recurrence", entry(&step, RECURRENCE).latency_ms, "0.4289227205514908");
}

#[test]
fn gdn_wire_form() {
    // §4.6: every field but `mamba_ssm_dtype` is required; the dtype defaults to float32.
    let mut spec = case_spec(H200_VLLM);
    let e = engine(H200_VLLM);
    let op = gdn(H200_VLLM, SCAN);
    let mut no_dtype = op.clone();
    no_dtype["Gdn"].as_object_mut().unwrap().remove("mamba_ssm_dtype");
    let parsed: aic_core::Op = serde_json::from_value(no_dtype.clone()).unwrap();
    match parsed {
        aic_core::Op::Gdn(g) => assert_eq!(g.mamba_ssm_dtype, "float32"),
        other => panic!("not a Gdn op: {other:?}"),
    }
    check_rel("default dtype", ctx1(e, &no_dtype, 3, 1500, 0).latency_ms, ctx1(e, &op, 3, 1500, 0).latency_ms);
    let mut no_conv = op.clone();
    no_conv["Gdn"].as_object_mut().unwrap().remove("d_conv");
    let err = eval(e, &[no_conv], true, 1, 1, 0, 1.0, None).unwrap_err().to_string();
    assert!(err.contains("invalid op list JSON: missing field `d_conv`"), "{err}");
    // The compiled spec survives the binary wire format (Gdn is the last variant).
    spec["schema_version"] = json!(15);
    let parsed = aic_core::EngineSpec::from_json(&spec.to_string()).unwrap();
    let bytes = aic_core::spec::encode_spec(&parsed);
    assert_eq!(aic_core::EngineSpec::from_bytes(&bytes).unwrap(), parsed);
}
