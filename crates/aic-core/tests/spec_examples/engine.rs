//! Worked examples of spec 40 §13.1 (Qwen/Qwen3-32B, h200_sxm, vllm 0.24.0, tp 2): E1 prefill
//! breakdown, E2 prefix, E3 stride quadrature, E4 run_static with scales, E5 mixed step
//! breakdowns, E6 decode step, E7 pipeline parallel, E8 name folding.

use aic_core::{RunMode, StaticRun};
use serde_json::json;

use crate::common::*;

#[allow(clippy::too_many_arguments)]
fn run(
    bs: u32,
    isl: u32,
    osl: u32,
    prefix: u32,
    seq_scale: f64,
    gen_scale: f64,
    mode: RunMode,
    stride: u32,
) -> StaticRun {
    static_run(bs, 1, isl, osl, prefix, seq_scale, gen_scale, mode, stride)
}

/// 40 §13.1 E1: `predict_prefill_latency(1, 1024, 0)` and its per-op breakdown (logits x = 1).
#[test]
fn e1_prefill_total_and_per_op_breakdown() {
    let e = engine(H200_VLLM);
    check("prefill(1,1024,0)", e.prefill_latency_ms(1, 1024, 0).unwrap(), "53.67781995651973");
    let expected = [
        ("context_embedding", "0.005731", "empirical"),
        ("context_add_norm_1", "0.891051", "empirical"),
        ("context_qkv_gemm", "4.322133", "silicon"),
        ("context_attention", "4.765041", "mixed"),
        ("context_proj_gemm", "3.362190", "silicon"),
        ("context_add_norm_2", "0.891051", "empirical"),
        ("context_gate_ffn1_gemm", "20.816743", "silicon"),
        ("context_act_gate", "1.502720", "empirical"),
        ("context_ffn2_gemm", "10.291930", "silicon"),
        ("context_logits_gemm", "0.200427", "silicon"),
        ("context_embedding_ar", "0.051386", "silicon"),
        ("context_ar_1", "3.288709", "silicon"),
        ("context_ar_2", "3.288709", "silicon"),
        ("context_p2p", "0.000000", "silicon"),
    ];
    let (ctx, gen) = e.run_static_per_op(&run(1, 1024, 2, 0, 1.0, 1.0, RunMode::StaticCtx, 32)).unwrap();
    assert!(gen.is_empty(), "static_ctx has no generation entries: {gen:?}");
    assert_eq!(ctx.len(), expected.len(), "{ctx:?}");
    for (r, (name, ms, tag)) in ctx.iter().zip(expected) {
        assert_eq!(r.name, name);
        check(name, r.latency_ms, ms);
        check_source(r, tag);
    }
    check("sum of per-op", total(&ctx), "53.67781995651973");
}

/// 40 §13.1 E2: prefix only changes `context_attention`; more prefill checks.
#[test]
fn e2_prefix_changes_only_context_attention() {
    let e = engine(H200_VLLM);
    check("prefill(2,4096,1024)", e.prefill_latency_ms(2, 4096, 1024).unwrap(), "340.81331245516674");
    check("prefill(2,3072,0)", e.prefill_latency_ms(2, 3072, 0).unwrap(), "330.0016001901521");
    let with_prefix = e.run_static_per_op(&run(2, 4096, 2, 1024, 1.0, 1.0, RunMode::StaticCtx, 32)).unwrap().0;
    let without = e.run_static_per_op(&run(2, 3072, 2, 0, 1.0, 1.0, RunMode::StaticCtx, 32)).unwrap().0;
    assert_eq!(with_prefix.len(), without.len());
    for (a, b) in with_prefix.iter().zip(&without) {
        assert_eq!(a.name, b.name);
        if a.name == "context_attention" {
            check("attention s3072 prefix1024", a.latency_ms, "33.25577105459147");
            check("attention s3072 prefix0", b.latency_ms, "22.44405878957682");
        } else {
            check_rel(&a.name, a.latency_ms, b.latency_ms);
        }
    }
    check("prefill(4,2000,0)", e.prefill_latency_ms(4, 2000, 0).unwrap(), "425.31825683020776");
    check("prefill(8,512,100)", e.prefill_latency_ms(8, 512, 100).unwrap(), "167.17587419930678");
}

/// 40 §13.1 E3: stride-32 quadrature of `predict_decode_latency(1, 1024, 128)` over the
/// steps at s 1025, 1057, 1089, 1121 (weights 32, 32, 32, 31), the single-step breakdown at
/// s 1025, and the `generation_attention` entry of `run_static_per_op`.
#[test]
fn e3_decode_stride_quadrature_and_step_breakdown() {
    let e = engine(H200_VLLM);
    let ops = generation_ops(H200_VLLM);
    let step = |s| total(&eval(e, &ops, false, 1, s, 0, 1.0, None).unwrap());
    let steps = [
        (1025, 32.0, "10.651440465599965"),
        (1057, 32.0, "10.65307153239292"),
        (1089, 32.0, "10.654574199325761"),
        (1121, 31.0, "10.655762999933879"),
    ];
    let mut sum = 0.0;
    for (s, w, want) in steps {
        let v = step(s);
        check(&format!("step s{s}"), v, want);
        sum += w * v;
    }
    let decode = e.decode_latency_ms(1, 1024, 128).unwrap();
    check("decode(1,1024,128)", decode, "1353.019411312147");
    check_rel("decode = Σ w·step", decode, sum);
    check("decode(1,1024,2)", e.decode_latency_ms(1, 1024, 2).unwrap(), "10.651440465599965");

    let expected = [
        ("generation_embedding", "0.003003"),
        ("generation_add_norm_1", "0.192683"),
        ("generation_qkv_gemm", "0.999424"),
        ("generation_attention", "0.860713"),
        ("generation_proj_gemm", "0.881152"),
        ("generation_add_norm_2", "0.192683"),
        ("generation_gate_ffn1_gemm", "4.127623"),
        ("generation_act_gate", "0.19328"),
        ("generation_ffn2_gemm", "2.404732"),
        ("generation_logits_gemm", "0.200427"),
        ("generation_embedding_ar", "0.004618"),
        ("generation_ar_1", "0.295552"),
        ("generation_ar_2", "0.295552"),
        ("generation_p2p", "0"),
    ];
    let (_, gen) = e.run_static_per_op(&run(1, 1024, 2, 0, 1.0, 1.0, RunMode::StaticGen, 32)).unwrap();
    assert_eq!(gen.len(), expected.len(), "{gen:?}");
    for (r, (name, ms)) in gen.iter().zip(expected) {
        assert_eq!(r.name, name);
        check(name, r.latency_ms, ms);
    }

    let attn = spec_op(H200_VLLM, "generation_attention");
    let attn_at = |s| gen1(e, &attn, 1, s).latency_ms;
    let parts = [
        (1025, 32.0, "0.8607127766124905"),
        (1057, 32.0, "0.8623438434054455"),
        (1089, 32.0, "0.8638465103382865"),
        (1121, 31.0, "0.865035310946405"),
    ];
    let mut attn_sum = 0.0;
    for (s, w, want) in parts {
        let v = attn_at(s);
        check(&format!("generation_attention s{s}"), v, want);
        attn_sum += w * v;
    }
    let (_, gen) = e.run_static_per_op(&run(1, 1024, 128, 0, 1.0, 1.0, RunMode::Static, 32)).unwrap();
    let entry = entry(&gen, "generation_attention");
    check("run_static_per_op generation_attention", entry.latency_ms, "109.59699481073767");
    check_rel("entry = Σ w·attention", entry.latency_ms, attn_sum);
}

/// 40 §13.1 E3 "other": more decode totals and the stride argument of `run_static`.
#[test]
fn e3_decode_totals_and_static_gen_strides() {
    let e = engine(H200_VLLM);
    check("decode(16,2048,500)", e.decode_latency_ms(16, 2048, 500).unwrap(), "6240.280674352241");
    check("decode(64,100,33)", e.decode_latency_ms(64, 100, 33).unwrap(), "390.9519441651081");
    for (stride, want) in
        [(1, "1092.9652723979036"), (0, "1092.9652723979036"), (7, "1092.9315097195858"), (32, "1092.7916886062192")]
    {
        let r = e.run_static(&run(4, 1024, 100, 0, 1.0, 1.0, RunMode::StaticGen, stride)).unwrap();
        check(&format!("static_gen stride {stride} total"), r.total_ms, want);
        check(&format!("static_gen stride {stride} generation"), r.generation_ms, want);
        check(&format!("static_gen stride {stride} context"), r.context_ms, "0");
    }
}

/// 40 §13.1 E4: `run_static` with correction scales: only `context_attention` follows the
/// seq scale, only `generation_attention` the gen scale; negative scales clamp to 0.
#[test]
fn e4_run_static_with_correction_scales() {
    let e = engine(H200_VLLM);
    let triple = |r: aic_core::StaticResult| [r.context_ms, r.generation_ms, r.total_ms];
    let unit = run(4, 1024, 64, 0, 1.0, 1.0, RunMode::Static, 32);
    let scaled = run(4, 1024, 64, 0, 2.0, 3.0, RunMode::Static, 32);
    for (label, args, want) in [
        ("(4,1024,64) scales 1,1", unit, ["210.9363387337269", "695.2762845847253", "906.2126233184522"]),
        ("(4,1024,64) scales 2,3", scaled, ["220.75277110423636", "817.0058985581429", "1037.7586696623794"]),
        (
            "(4,1024,2) scales 0,-1",
            run(4, 1024, 2, 0, 0.0, -1.0, RunMode::Static, 32),
            ["201.11990636321747", "10.070023453936772", "211.18992981715425"],
        ),
        (
            "(4,1024,2) scales 1,1",
            run(4, 1024, 2, 0, 1.0, 1.0, RunMode::Static, 32),
            ["210.9363387337269", "11.034163968500538", "221.97050270222744"],
        ),
    ] {
        let got = triple(e.run_static(&args).unwrap());
        for (i, part) in ["context", "generation", "total"].iter().enumerate() {
            check(&format!("{label} {part}"), got[i], want[i]);
        }
    }
    let (c1, g1) = e.run_static_per_op(&unit).unwrap();
    let (c2, g2) = e.run_static_per_op(&scaled).unwrap();
    for (a, b) in c1.iter().zip(&c2) {
        let k = if a.name == "context_attention" { 2.0 } else { 1.0 };
        check_rel(&b.name, b.latency_ms, k * a.latency_ms);
    }
    for (a, b) in g1.iter().zip(&g2) {
        let k = if a.name == "generation_attention" { 3.0 } else { 1.0 };
        check_rel(&b.name, b.latency_ms, k * a.latency_ms);
    }
    let (c0, g0) = e.run_static_per_op(&run(4, 1024, 2, 0, 0.0, -1.0, RunMode::Static, 32)).unwrap();
    assert_eq!(entry(&c0, "context_attention").latency_ms, 0.0);
    assert_eq!(entry(&g0, "generation_attention").latency_ms, 0.0);
}

/// `(ctx_tokens, gen_tokens, isl, osl, prefix, seq_scale, gen_scale)` of a mixed step.
type MixedArgs = (u32, u32, u32, u32, u32, f64, f64);

/// 40 §13.1 E5: `mixed_step_breakdown` = [total, pass 1 (non-attention ops over the combined
/// tokens), pass 2 (context attention ÷ ceil(isl/ctx)), pass 3 (decode attention at the
/// mid-trajectory position)].
#[test]
fn e5_mixed_step_breakdowns() {
    let e = engine(H200_VLLM);
    let cases: [(MixedArgs, [&str; 4]); 6] = [
        ((1024, 2, 1024, 8, 0, 1.0, 1.0), ["63.823556", "58.192469", "4.765041", "0.866046"]),
        ((512, 32, 4096, 1000, 1024, 1.0, 1.0), ["35.776995", "27.994186", "2.516411", "5.266397"]),
        ((8192, 16, 4000, 500, 0, 1.0, 1.0), ["466.621742", "413.977195", "49.572515", "3.072032"]),
        ((3000, 0, 1000, 100, 200, 1.0, 1.0), ["125.043328", "117.360885", "7.682443", "0"]),
        ((0, 64, 2000, 200, 0, 1.0, 1.0), ["16.15834", "11.072845", "0", "5.085494"]),
        (
            (1024, 16, 2048, 256, 0, 1.3, 1.7),
            ["67.21541648350974", "58.424868152653026", "5.281775700000651", "3.5087726308560616"],
        ),
    ];
    for ((ctx, gen, isl, osl, prefix, ss, gs), want) in cases {
        let got = e.mixed_step_breakdown(ctx, gen, isl, osl, prefix, ss, gs).unwrap();
        let label = format!("mixed({ctx},{gen},{isl},{osl},{prefix},{ss},{gs})");
        for i in 0..4 {
            check(&format!("{label}[{i}]"), got[i], want[i]);
        }
        check_rel(
            &format!("{label} latency = total"),
            e.mixed_step_latency_ms(ctx, gen, isl, osl, prefix, ss, gs).unwrap(),
            got[0],
        );
    }
    // The full-precision pass values of the first two cases.
    let got = e.mixed_step_breakdown(1024, 2, 1024, 8, 0, 1.0, 1.0).unwrap();
    check("pass 2 = context_attention at b 1, s 1024", got[2], "4.765040610001221");
    check("pass 3 = generation_attention at b 2, s 1029", got[3], "0.8660463699139654");
    let gen_attn = spec_op(H200_VLLM, "generation_attention");
    check("generation_attention b2 s1029", gen1(e, &gen_attn, 2, 1029).latency_ms, "0.8660463699139654");
    let got = e.mixed_step_breakdown(512, 32, 4096, 1000, 1024, 1.0, 1.0).unwrap();
    let ctx_attn = spec_op(H200_VLLM, "context_attention");
    let pass2 = ctx1(e, &ctx_attn, 1, 3072, 1024).latency_ms;
    check("context_attention b1 s3072 prefix1024", pass2, "20.13129080709391");
    check_rel("pass 2 = attention / 8", got[2], pass2 / 8.0);
    check("pass 3 at b 32, s 4597", got[3], "5.2663972396714");
    check("generation_attention b32 s4597", gen1(e, &gen_attn, 32, 4597).latency_ms, "5.2663972396714");
}

/// 40 §13.1 E6: a decode step runs every generation op at s = isl + osl/2 + 1.
#[test]
fn e6_decode_step_at_mid_trajectory() {
    let e = engine(H200_VLLM);
    check("decode_step(16,2048,256)", e.decode_step_latency_ms(16, 2048, 256, 1.0).unwrap(), "12.452729948930944");
    check("decode(16,2176,2)", e.decode_latency_ms(16, 2176, 2).unwrap(), "12.452729948930944");
    check("decode_step gen scale 1.5", e.decode_step_latency_ms(16, 2048, 256, 1.5).unwrap(), "13.484721899182727");
    check("decode_step(4,0,0)", e.decode_step_latency_ms(4, 0, 0, 1.0).unwrap(), "10.74461861825346");
    check("decode_step(4,5,3)", e.decode_step_latency_ms(4, 5, 3, 1.0).unwrap(), "10.838330623215233");
    let per_op = e.decode_step_per_op(16, 2048, 256, 1.0).unwrap();
    check("decode_step_per_op sum", total(&per_op), "12.452729948930944");
}

/// 40 §13.1 E7: with pp 2, `context_p2p` (scale 1) contributes 0.8488608 ms (empirical);
/// every other context entry is unchanged.
#[test]
fn e7_pipeline_parallel_adds_p2p_only() {
    let scale = |id, name| spec_op(id, name).as_object().unwrap().values().next().unwrap()["scale_factor"].clone();
    assert_eq!(scale(H200_VLLM_PP2, "context_qkv_gemm"), json!(64.0), "layer scale factors stay 64");
    assert_eq!(scale(H200_VLLM_PP2, "context_p2p"), json!(1.0));
    let args = run(4, 1024, 64, 0, 1.0, 1.0, RunMode::Static, 32);
    let (pp1, _) = engine(H200_VLLM).run_static_per_op(&args).unwrap();
    let (pp2, _) = engine(H200_VLLM_PP2).run_static_per_op(&args).unwrap();
    assert_eq!(pp1.len(), pp2.len());
    for (a, b) in pp1.iter().zip(&pp2) {
        assert_eq!(a.name, b.name);
        if b.name == "context_p2p" {
            check("context_p2p pp2", b.latency_ms, "0.8488608");
            check_source(b, "empirical");
        } else {
            check_rel(&b.name, b.latency_ms, a.latency_ms);
            assert_eq!(a.source, b.source, "{}", b.name);
        }
    }
}

/// 40 §13.1 E8: `evaluate_ops_json` folds a list containing the same op twice into one entry
/// (the sum), in first-appearance order.
#[test]
fn e8_evaluate_ops_folds_same_named_ops() {
    let e = engine(H200_VLLM);
    let attn = spec_op(H200_VLLM, "context_attention");
    let gemm = spec_op(H200_VLLM, "context_qkv_gemm");
    let r = eval(e, &[attn.clone(), gemm, attn], true, 4, 2048, 0, 1.0, None).unwrap();
    assert_eq!(r.len(), 2, "{r:?}");
    assert_eq!(r[0].name, "context_attention");
    assert_eq!(r[1].name, "context_qkv_gemm");
    let single = ctx1(e, &spec_op(H200_VLLM, "context_attention"), 4, 2048, 0);
    check_rel("folded attention", r[0].latency_ms, 2.0 * single.latency_ms);
    check_source(&r[0], "mixed");
    let x100 = eval(e, &[json!(spec_op(H200_VLLM, "context_attention"))], true, 4, 2048, 0, 1.0, Some(100)).unwrap();
    check_rel("x override leaves attention unchanged", x100[0].latency_ms, single.latency_ms);
}
