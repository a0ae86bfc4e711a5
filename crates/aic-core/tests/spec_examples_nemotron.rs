//! Spec 33 (Nemotron-H / Mamba2) worked examples as tests: the `Mamba2` SOL (§7.4), the table
//! examples of §7.5 (bracket, ragged blend, holds, d_model key fallback, SOL fallbacks), the
//! generation-table bypass, database-mode indifference, the SOL_FULL refusal, the wire form and
//! the engine-level checks of §5.
//!
//! Engines come from the golden cases of `goldens/nemotron.json`; single ops are the compiled
//! `Mamba2` ops of those cases with fields edited in memory. Tolerance as in
//! `spec_examples/common.rs`.

#[path = "spec_examples/common.rs"]
mod common;

use aic_core::ops::mamba2_sol_ms;
use aic_core::spec::Mamba2Op;
use aic_core::{ErrorClass, StaticRun};
use serde_json::{json, Value};

use common::*;

const NANO_H200: &str = "nemotron/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16/h200_sxm/trtllm/tp1-pp1-dp1";
const NANO_H200_SOL: &str = "nemotron/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16/h200_sxm/trtllm/tp1-pp1-dp1/db=SOL";
const NANO_H200_EMPIRICAL: &str = "nemotron/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16/h200_sxm/trtllm/tp1-pp1-dp1/db=EMPIRICAL";
const NANO_H200_HYBRID: &str = "nemotron/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16/h200_sxm/trtllm/tp1-pp1-dp1/db=HYBRID";
const NANO_H200_TP2: &str = "nemotron/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16/h200_sxm/trtllm/tp2-pp1-dp1-mtp1-ep2";
const NANO_H200_VLLM: &str = "nemotron/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16/h200_sxm/vllm/tp2-pp1-dp1-mtp1-ep2";
const NANO_B200: &str = "nemotron/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16/b200_sxm/trtllm/tp2-pp1-dp1-mtp1-ep2";
const NANO_H100: &str = "nemotron/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16/h100_sxm/trtllm/tp1-pp1-dp1";

const CONV: &str = "context_mamba_conv1d";
const SSM: &str = "context_mamba_ssm";
const UPDATE: &str = "generation_mamba_conv1d";
const STATE: &str = "generation_mamba_ssm";

/// A compiled `Mamba2` op of a case at scale factor `sf`.
fn mamba(id: &str, name: &str, sf: f64) -> Value {
    with(&spec_op(id, name), &[("scale_factor", json!(sf))])
}

fn op_struct(v: &Value) -> Mamba2Op {
    serde_json::from_value(v["Mamba2"].clone()).unwrap()
}

#[test]
fn sol_formula_examples() {
    // §7.5 SOL table (Nano dims, scale 23).
    let sf = |v: f64| v * 23.0;
    let [conv, ssm, update, state] = [CONV, SSM, UPDATE, STATE].map(|n| op_struct(&mamba(NANO_H200, n, 1.0)));
    assert_eq!(sf(mamba2_sol_ms(&update, 16.0, 2048.0, 4.8e12)), 0.00565248);
    assert_eq!(sf(mamba2_sol_ms(&state, 16.0, 2048.0, 4.8e12)), 0.0015799466666666668);
    assert_eq!(sf(mamba2_sol_ms(&ssm, 4.0, 1000.0, 4.8e12)), 0.39498666666666665);
    assert_eq!(sf(mamba2_sol_ms(&ssm, 1.0, 128.0, 4.8e12)), 0.012639573333333334);
    assert_eq!(sf(mamba2_sol_ms(&conv, 4.0, 1000.0, 4.8e12)), 1.41312);
    assert_eq!(sf(mamba2_sol_ms(&conv, 1.0, 128.0, 4.8e12)), 0.04521984);
    assert_eq!(sf(mamba2_sol_ms(&update, 1.0, 1025.0, 7.7e12)), 0.0002202264935064935);
    check("h100 generation SSM", sf(mamba2_sol_ms(&state, 100.0, 4096.0, 3.35e12)), "0.014148776119402986");
}

#[test]
fn table_examples_h200() {
    let e = engine(NANO_H200);
    let conv = mamba(NANO_H200, CONV, 1.0);
    let r = ctx1(e, &mamba(NANO_H200, CONV, 23.0), 4, 1000, 0);
    check("(4, 1000) x 23", r.latency_ms, "1.0502374745439738");
    check_source(&r, "silicon");
    check("(5, 3000)", ctx1(e, &conv, 5, 3000, 0).latency_ms, "0.12795094412285835");
    check("(128, 512) hold", ctx1(e, &conv, 128, 512, 0).latency_ms, "0.7663983963068807");
    check("(128, 100) x 23", ctx1(e, &mamba(NANO_H200, CONV, 23.0), 128, 100, 0).latency_ms, "14.897101811993828");
    check("(48, 20000) top-level hold", ctx1(e, &conv, 48, 20000, 0).latency_ms, "7.390171609173468");
    check("(2, 70000) seq hold", ctx1(e, &conv, 2, 70000, 0).latency_ms, "1.1450087052226927");
    check("(40, 10000)", ctx1(e, &conv, 40, 10000, 0).latency_ms, "3.097852032172429");
    // Exact leaf.
    check("(4, 2048) exact", ctx1(e, &conv, 4, 2048, 0).latency_ms, "0.07605760097503662");
    // s = 0 and b = 0 answer the SOL.
    let r = ctx1(e, &conv, 3, 0, 0);
    check_source(&r, "sol");
    assert_eq!(r.latency_ms, mamba2_sol_ms(&op_struct(&conv), 3.0, 0.0, 4.8e12));
    let r = ctx1(e, &conv, 0, 100, 0);
    assert_eq!(r.latency_ms, 0.0);
    check_source(&r, "sol");
    // The SSM kernels have no rows: SOL.
    let r = ctx1(e, &mamba(NANO_H200, SSM, 23.0), 4, 1000, 0);
    check("context SSM", r.latency_ms, "0.39498666666666665");
    check_source(&r, "sol");
}

#[test]
fn other_systems_and_backends() {
    check("b200 (4, 1000)", ctx1(engine(NANO_B200), &mamba(NANO_B200, CONV, 23.0), 4, 1000, 0).latency_ms, "0.9556936674052849");
    check("h100 (4, 1000)", ctx1(engine(NANO_H100), &mamba(NANO_H100, CONV, 23.0), 4, 1000, 0).latency_ms, "1.110614826763049");
    // vLLM has no Mamba2 table: SOL.
    let v = engine(NANO_H200_VLLM);
    let r = ctx1(v, &mamba(NANO_H200_VLLM, CONV, 23.0), 4, 1000, 0);
    check("vllm (4, 1000)", r.latency_ms, "1.41312");
    check_source(&r, "sol");
    check("vllm (1, 128)", ctx1(v, &mamba(NANO_H200_VLLM, CONV, 23.0), 1, 128, 0).latency_ms, "0.04521984");
}

#[test]
fn d_model_key_fallback() {
    let e = engine(NANO_H200);
    let conv = mamba(NANO_H200, CONV, 23.0);
    let expected = "1.0502374745439738";
    check("nheads 128", ctx1(e, &with(&conv, &[("nheads", json!(128))]), 4, 1000, 0).latency_ms, expected);
    check(
        "d_state 64, n_groups 2",
        ctx1(e, &with(&conv, &[("d_state", json!(64)), ("n_groups", json!(2))]), 4, 1000, 0).latency_ms,
        expected,
    );
    let generic_4k = with(&conv, &[("d_model", json!(8192)), ("nheads", json!(32)), ("d_state", json!(64))]);
    check("GENERIC_4K key", ctx1(e, &generic_4k, 4, 1000, 0).latency_ms, "1.057584879687056");
    check("GENERIC_4K key h100", ctx1(engine(NANO_H100), &generic_4k, 4, 1000, 0).latency_ms, "1.1089898309204729");
    let generic_1k = with(
        &conv,
        &[("d_model", json!(1024)), ("nheads", json!(16)), ("d_state", json!(64)), ("n_groups", json!(4))],
    );
    check("GENERIC_1K key", ctx1(e, &generic_1k, 4, 1000, 0).latency_ms, "0.3250555446487851");
    let r = ctx1(e, &with(&conv, &[("d_model", json!(5000))]), 4, 1000, 0);
    check("no key", r.latency_ms, "1.41312");
    check_source(&r, "sol");
    // A foreign kernel name or phase finds no key: SOL (an unknown name uses the SSM bytes).
    let r = ctx1(e, &with(&conv, &[("kernel_source", json!("causal_conv1d_update"))]), 4, 1000, 0);
    check("conv update in context", r.latency_ms, "1.41312");
    check_source(&r, "sol");
    check("unknown kernel", ctx1(e, &with(&conv, &[("kernel_source", json!("foo"))]), 4, 1000, 0).latency_ms, "0.39498666666666665");
}

#[test]
fn generation_rows_are_never_read() {
    // §7.3 step 1: the generation conv kernel has rows but answers its SOL, in either pass.
    let e = engine(NANO_H200);
    let update = mamba(NANO_H200, UPDATE, 23.0);
    for r in [gen1(e, &update, 16, 2048), ctx1(e, &update, 16, 2048, 0)] {
        check("generation conv", r.latency_ms, "0.00565248");
        check_source(&r, "sol");
    }
    check("generation SSM", gen1(e, &mamba(NANO_H200, STATE, 23.0), 16, 2048).latency_ms, "0.0015799466666666668");
    // A context-phase op in a generation pass still reads its grid.
    check("context op, generation pass", gen1(e, &mamba(NANO_H200, CONV, 23.0), 4, 1000).latency_ms, "1.0502374745439738");
}

#[test]
fn database_modes_do_not_apply() {
    let conv = mamba(NANO_H200, CONV, 23.0);
    for id in [NANO_H200, NANO_H200_SOL, NANO_H200_EMPIRICAL, NANO_H200_HYBRID] {
        let r = ctx1(engine(id), &conv, 4, 1000, 0);
        check(id, r.latency_ms, "1.0502374745439738");
        check_source(&r, "silicon");
    }
}

#[test]
fn sol_full_entry_point_refuses_mamba2() {
    let e = engine(NANO_H200);
    let ops = Value::Array(vec![spec_op(NANO_H200, CONV)]).to_string();
    let err = e.evaluate_ops_sol_json(&ops, true, 4, 1000, 0, 1.0, None).unwrap_err();
    assert_eq!(err.class(), ErrorClass::Value);
    assert!(err.to_string().contains("context_mamba_conv1d"), "{err}");
}

#[test]
fn wire_form() {
    // §7.1: all eleven fields are required.
    let e = engine(NANO_H200);
    let mut op = spec_op(NANO_H200, CONV);
    op["Mamba2"].as_object_mut().unwrap().remove("chunk_size");
    let err = eval(e, &[op], true, 1, 1, 0, 1.0, None).unwrap_err().to_string();
    assert!(err.contains("invalid op list JSON: missing field `chunk_size`"), "{err}");
    let bad = with(&spec_op(NANO_H200, CONV), &[("nheads", json!(-1))]);
    let err = eval(e, &[bad], true, 1, 1, 0, 1.0, None).unwrap_err().to_string();
    assert!(err.contains("invalid value: integer `-1`, expected u32"), "{err}");
    // The compiled spec survives the binary wire format (Mamba2 is the last variant).
    let mut spec = case_spec(NANO_H200);
    spec["schema_version"] = json!(15);
    let parsed = aic_core::EngineSpec::from_json(&spec.to_string()).unwrap();
    let bytes = aic_core::spec::encode_spec(&parsed);
    assert_eq!(aic_core::EngineSpec::from_bytes(&bytes).unwrap(), parsed);
}

#[test]
fn engine_level_checks() {
    // §5.1 per-op check: Nano h200 trtllm tp 1, static (4, 1, 2048, 128).
    let e = engine(NANO_H200);
    let (context, generation) = e.run_static_per_op(&StaticRun::new(4, 2048, 128)).unwrap();
    check("static conv1d", entry(&context, CONV).latency_ms, "1.7493248224258424");
    check("static ssm", entry(&context, SSM).latency_ms, "0.8089326933333334");
    check("static conv update", entry(&generation, UPDATE).latency_ms, "0.17946623999999997");
    check("static ssm update", entry(&generation, STATE).latency_ms, "0.05016330666666667");
    // §5: tp 2 ep 2, beam 2, prefix 512: the context Mamba op sees (b 3, s 1536).
    let t = engine(NANO_H200_TP2);
    let mut run = StaticRun::new(3, 2048, 5);
    run.beam_width = 2;
    run.prefix = 512;
    let (context, _) = t.run_static_per_op(&run).unwrap();
    check("prefix static conv1d", entry(&context, CONV).latency_ms, "1.080484801903367");
    check("prefix static ssm", entry(&context, SSM).latency_ms, "0.45502464000000004");
    // Mixed step: pass 1 prices the Mamba op at batch 1 over T1 − P1 tokens.
    let mixed = t.mixed_step_breakdown_per_op(1000, 16, 2048, 128, 0, 1.0, 1.0).unwrap();
    let conv = spec_op(NANO_H200_TP2, CONV);
    check_rel("mixed conv1d", entry(&mixed[0], CONV).latency_ms, ctx1(t, &conv, 1, 1016, 0).latency_ms);
}
