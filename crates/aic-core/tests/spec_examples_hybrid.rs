//! Spec 35's worked engine examples (hybrid-attention families) as tests: §10.2 W1–W5, S1–S4
//! (Llama-4 Scout windowed attention, SILICON and SOL), M1–M3 (MiMo-V2-Flash), O1 (gpt-oss),
//! G1–G3 (Gemma 4), MB1–MB2 (the window-major ladder with the cross-head transfer on b200
//! trtllm, HYBRID), the recorded HYBRID / EMPIRICAL regression points and the whole-model
//! numbers of §10.3.
//!
//! Engines come from the golden cases of `goldens/hybrid.json` (recorded engine config and op
//! lists), single ops are the cases' first op of a name with fields overridden. Tolerance as in
//! `spec_examples/common.rs`.

#[path = "spec_examples/common.rs"]
mod common;

use serde_json::json;

use common::*;

const SCOUT_H200_VLLM: &str = "hybrid/Llama-4-Scout-17B-16E-Instruct/h200_sxm/vllm/tp4-pp1-dp1-mtp4-epx";
const SCOUT_H200_VLLM_SOL: &str = "hybrid/Llama-4-Scout-17B-16E-Instruct/h200_sxm/vllm/tp4-pp1-dp1-mtp4-epx/db=SOL";
const SCOUT_H200_VLLM_EMP: &str =
    "hybrid/Llama-4-Scout-17B-16E-Instruct/h200_sxm/vllm/tp4-pp1-dp1-mtp4-epx/db=EMPIRICAL";
const MIMO_H200_TRTLLM: &str = "hybrid/MiMo-V2-Flash/h200_sxm/trtllm/tp4-pp1-dp1-mtpx-ep4";
const MIMO_B200_TRTLLM: &str = "hybrid/MiMo-V2-Flash/b200_sxm/trtllm/tp4-pp1-dp1-mtpx-ep4";
const MIMO_B200_TRTLLM_HYBRID: &str = "hybrid/MiMo-V2-Flash/b200_sxm/trtllm/tp4-pp1-dp1-mtpx-ep4/db=HYBRID";
const STEP_H200_TRTLLM_HYBRID: &str = "hybrid/Step-3.7-Flash/h200_sxm/trtllm/tp4-pp1-dp1-mtpx-ep4/nextn1/db=HYBRID";
const GPT_OSS_20B_H200_VLLM: &str = "hybrid/gpt-oss-20b/h200_sxm/vllm/tp2-pp1-dp1-mtp2-epx";
const GEMMA_26B_H200_VLLM: &str = "hybrid/gemma-4-26B-A4B/h200_sxm/vllm/tp1-pp1-dp1";

/// Scout's context attention op (n 10, n_kv 2, head 128) at a window.
fn scout_ctx(id: &str, window: u32) -> serde_json::Value {
    with(&spec_op(id, "context_attention"), &[("window_size", json!(window)), ("scale_factor", json!(1.0))])
}

fn scout_gen(id: &str, window: u32) -> serde_json::Value {
    with(&spec_op(id, "generation_attention"), &[("window_size", json!(window)), ("scale_factor", json!(1.0))])
}

/// 35 §10.2 W1–W5: Scout tp 4 on h200 vllm 0.24.0, the window-8192 slice and window 0.
#[test]
fn scout_w1_to_w5_windowed_slices_silicon() {
    let e = engine(SCOUT_H200_VLLM);
    let w = scout_ctx(SCOUT_H200_VLLM, 8192);
    check("W1", ctx1(e, &w, 1, 16384, 0).latency_ms, "0.8870633661995443");
    check("W2", ctx1(e, &w, 2, 4096, 12288).latency_ms, "0.7742163559049479");
    check("W3", ctx1(e, &scout_ctx(SCOUT_H200_VLLM, 0), 1, 16384, 0).latency_ms, "1.0973727127164712");
    let g = scout_gen(SCOUT_H200_VLLM, 8192);
    let w4 = gen1(e, &g, 8, 20000);
    check("W4", w4.latency_ms, "0.03254185469995718");
    check_source(&w4, "silicon");
    check("W5", gen1(e, &g, 8, 4000).latency_ms, "0.019636739581862156");
}

/// 35 §10.2 S1–S4: the windowed SOL (context ops `2·b·s·w·n·h·2` once `s > w`; decode KV length
/// `min(s − 1, w)`).
#[test]
fn scout_s1_to_s4_windowed_sol() {
    let e = engine(SCOUT_H200_VLLM_SOL);
    let w = scout_ctx(SCOUT_H200_VLLM_SOL, 8192);
    let s1 = ctx1(e, &w, 1, 16384, 0);
    check("S1", s1.latency_ms, "0.6948396278638356");
    check_source(&s1, "sol");
    check("S2", ctx1(e, &w, 2, 4096, 12288).latency_ms, "0.34742063526525113");
    let g = scout_gen(SCOUT_H200_VLLM_SOL, 8192);
    check("S3", gen1(e, &g, 8, 20000).latency_ms, "0.013989546666666667");
    check("S4", gen1(e, &g, 8, 4000).latency_ms, "0.006833493333333333");
}

/// 35 §10.2 M1–M3 (MiMo on h200 trtllm, head 192, fp8), O1 (gpt-oss-20b banded attention)
/// and G1–G3 (Gemma 4 sliding head 256 and global head 512 slices), all SILICON.
#[test]
fn mimo_gpt_oss_gemma_silicon_points() {
    let e = engine(MIMO_H200_TRTLLM);
    let ctx = spec_op(MIMO_H200_TRTLLM, "context_attention");
    let sliding = with(&ctx, &[("n_kv", json!(2)), ("window_size", json!(128)), ("scale_factor", json!(1.0))]);
    check("M1", ctx1(e, &sliding, 1, 4096, 0).latency_ms, "0.1090015101410675");
    let global = with(&ctx, &[("n_kv", json!(1)), ("window_size", json!(0)), ("scale_factor", json!(1.0))]);
    check("M2", ctx1(e, &global, 2, 2048, 0).latency_ms, "0.16680384736150106");
    let gen = with(
        &spec_op(MIMO_H200_TRTLLM, "generation_attention"),
        &[("n_kv", json!(2)), ("window_size", json!(128)), ("scale_factor", json!(1.0))],
    );
    check("M3", gen1(e, &gen, 32, 4096).latency_ms, "0.009392275761517037");

    let e = engine(GPT_OSS_20B_H200_VLLM);
    let banded = with(&spec_op(GPT_OSS_20B_H200_VLLM, "context_attention"), &[("scale_factor", json!(1.0))]);
    check("O1", ctx1(e, &banded, 1, 4096, 0).latency_ms, "0.06427493479054769");

    let e = engine(GEMMA_26B_H200_VLLM);
    let sliding = with(&spec_op(GEMMA_26B_H200_VLLM, "context_attention"), &[("scale_factor", json!(1.0))]);
    check("G1", ctx1(e, &sliding, 1, 8192, 0).latency_ms, "0.35245204369232175");
    check("G2", ctx1(e, &sliding, 1, 512, 0).latency_ms, "0.048217387497475936");
    let global = with(
        &sliding,
        &[("n_kv", json!(2)), ("head_size", json!(512)), ("window_size", json!(0))],
    );
    check("G3", ctx1(e, &global, 1, 8192, 0).latency_ms, "3.0419316353719075");
}

/// 35 §10.2 MB1, MB2: MiMo's sliding op (head 192, window 128) on b200 trtllm in HYBRID. No
/// head-192 slice exists; the ladder is window-major and the transfer's reference head (128) is
/// chosen among the heads of every window, so window 128 is skipped (no (128, w128) slice) and
/// the head-128 window-0 slice answers, with the trtllm prefill ratio 1.10/1.00 (context only).
#[test]
fn mimo_mb1_mb2_window_major_cross_head_transfer() {
    let e = engine(MIMO_B200_TRTLLM_HYBRID);
    let ctx = with(
        &spec_op(MIMO_B200_TRTLLM_HYBRID, "context_attention"),
        &[("n_kv", json!(2)), ("window_size", json!(128)), ("scale_factor", json!(1.0))],
    );
    let mb1 = ctx1(e, &ctx, 1, 4096, 0);
    check("MB1", mb1.latency_ms, "0.05775560445817194");
    check_source(&mb1, "empirical");
    let gen = with(
        &spec_op(MIMO_B200_TRTLLM_HYBRID, "generation_attention"),
        &[("n_kv", json!(2)), ("window_size", json!(128)), ("scale_factor", json!(1.0))],
    );
    check("MB2", gen1(e, &gen, 32, 4096).latency_ms, "0.0008871884886524271");
    // Global layers (head 192, window 0) take the same transfer.
    let global = with(&ctx, &[("n_kv", json!(1)), ("window_size", json!(0))]);
    check("MiMo b200 HYBRID global", ctx1(e, &global, 2, 2048, 0).latency_ms, "0.11160240082146035");
    // In SILICON the same engine raises the missing head-192 slice.
    let silicon = engine(MIMO_B200_TRTLLM);
    let err = ctx1_err(silicon, &global, 2, 2048, 0);
    assert!(err.to_string().contains("head_size: 192"), "{err}");
}

/// 35 §10.2 regression points recorded by the reference: Step-3.7 h200 trtllm HYBRID (window
/// 512 exists nowhere: ladder to window 0; the MoE transfers across shapes) and Scout in
/// EMPIRICAL.
#[test]
fn step_and_scout_hybrid_empirical_points() {
    let e = engine(STEP_H200_TRTLLM_HYBRID);
    let ctx = spec_op(STEP_H200_TRTLLM_HYBRID, "context_attention");
    let sliding = with(&ctx, &[("window_size", json!(512)), ("scale_factor", json!(1.0))]);
    check("Step sliding ctx", ctx1(e, &sliding, 1, 4096, 0).latency_ms, "0.08796954455777486");
    let gen = with(
        &spec_op(STEP_H200_TRTLLM_HYBRID, "generation_attention"),
        &[("window_size", json!(512)), ("scale_factor", json!(1.0))],
    );
    check("Step sliding decode", gen1(e, &gen, 16, 4096).latency_ms, "0.0052114063113484765");
    let moe = with(&spec_op(STEP_H200_TRTLLM_HYBRID, "context_global_moe"), &[("scale_factor", json!(1.0))]);
    let r = ctx1(e, &moe, 1, 2048, 0);
    check("Step context_global_moe", r.latency_ms, "0.7431358505134007");

    let e = engine(SCOUT_H200_VLLM_EMP);
    let w = scout_ctx(SCOUT_H200_VLLM_EMP, 8192);
    check("Scout EMPIRICAL W1", ctx1(e, &w, 1, 16384, 0).latency_ms, "0.8870633661995442");
    check("Scout EMPIRICAL W2", ctx1(e, &w, 2, 4096, 12288).latency_ms, "0.44806736908854167");
}

/// 35 §10.3: whole-model numbers of Scout (h200 vllm tp 4) and gemma-4-26B (h200 vllm tp 1).
#[test]
fn whole_model_numbers() {
    let e = engine(SCOUT_H200_VLLM);
    check("Scout prefill(1,1024,0)", e.prefill_latency_ms(1, 1024, 0).unwrap(), "30.60633480421591");
    check("Scout prefill(1,16384,0)", e.prefill_latency_ms(1, 16384, 0).unwrap(), "276.14820168509823");
    check("Scout decode(8,2048,128)", e.decode_latency_ms(8, 2048, 128).unwrap(), "1201.391521504209");
    let e = engine(GEMMA_26B_H200_VLLM);
    check("gemma prefill(1,1024,0)", e.prefill_latency_ms(1, 1024, 0).unwrap(), "23.852462068832434");
    check("gemma decode(8,2048,128)", e.decode_latency_ms(8, 2048, 128).unwrap(), "1048.950341533113");
}

/// The engine evaluates ops that differ only in name and scale factor once per walk (Scout's
/// global and sliding blocks share every op but attention). The per-op answers must be the
/// bits each op gives on its own (`evaluate_ops_json` shares nothing).
#[test]
fn shared_twin_ops_give_the_bits_of_their_own_evaluation() {
    for id in [SCOUT_H200_VLLM, MIMO_H200_TRTLLM, GEMMA_26B_H200_VLLM] {
        let e = engine(id);
        for (b, s, prefix) in [(1u32, 1024u32, 0u32), (4, 3000, 1000), (2, 16384, 0)] {
            let run = aic_core::StaticRun { prefix, ..aic_core::StaticRun::new(b, s, 2) };
            let (ctx, _) = e.run_static_per_op(&run).unwrap();
            let alone = eval(e, &context_ops(id), true, b, s - prefix, prefix, 1.0, None).unwrap();
            assert_eq!(ctx.len(), alone.len(), "{id}");
            for (shared, own) in ctx.iter().zip(&alone) {
                assert_eq!(shared.name, own.name, "{id}");
                assert_eq!(shared.latency_ms.to_bits(), own.latency_ms.to_bits(), "{id} {}", own.name);
                assert_eq!(shared.energy_wms.to_bits(), own.energy_wms.to_bits(), "{id} {}", own.name);
                assert_eq!(shared.source, own.source, "{id} {}", own.name);
            }
            let total: f64 = ctx.iter().map(|o| o.latency_ms).sum();
            assert!(total > 0.0);
        }
    }
}
