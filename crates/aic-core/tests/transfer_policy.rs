//! The engine's transfer policy (spec 20 §0.4; spec 51 §6.2): `transfer_policy` in the engine
//! configuration names the empirical transfer kinds a HYBRID / EMPIRICAL estimate may use. Each
//! worked example of spec 20 that answers by a transfer (G11a–e, CA12a/b, M8a/b, AR6, NC8, the
//! MSA cross-op transfer, the DSA sibling transfer of the calibrated path) is checked three ways:
//! no policy (today's value), a policy enabling the kind (the same value), and a policy without
//! it (`EmpiricalNotImplemented`, or the next enabled rung of the ladder).

#[path = "spec_examples/common.rs"]
mod common;

use aic_core::engine::ProvenanceTier;
use aic_core::{AicError, Engine, EngineSpec, ErrorClass};
use serde_json::{json, Value};

use common::*;

const EMPIRICAL: &str = "edge/Qwen3-32B/h200_sxm/vllm/tp2-pp1-dp1/db=EMPIRICAL";
const HYBRID: &str = "edge/Qwen3-32B/h200_sxm/vllm/tp2-pp1-dp1/db=HYBRID";
const MSA_SGLANG: &str = "sparse_linear/MiniMax-M3/h200_sxm/sglang/tp8-pp1-dp1-mtp1-ep8";
const GLM_B200_SGLANG_TP8: &str = "dsa/GLM-5-FP8/b200_sxm/sglang/tp8-pp1-dp1-mtp1-ep8";

/// A case's engine with `policy` as its `transfer_policy` (`None`: the key absent) and,
/// when given, another database mode.
fn engine_with(id: &str, mode: Option<&str>, policy: Option<&[&str]>) -> Result<Engine, AicError> {
    let mut spec = case_spec(id);
    if let Some(mode) = mode {
        spec["engine"]["database_mode"] = json!(mode);
    }
    match policy {
        Some(kinds) => spec["engine"]["transfer_policy"] = json!(kinds),
        None => {
            spec["engine"].as_object_mut().unwrap().remove("transfer_policy");
        }
    }
    Engine::from_spec(EngineSpec::from_json(&spec.to_string())?, None)
}

fn policy_engine(id: &str, policy: &[&str]) -> Engine {
    engine_with(id, None, Some(policy)).unwrap_or_else(|e| panic!("engine of {id} with {policy:?}: {e}"))
}

/// A single-op context evaluation's error, which must be `EmpiricalNotImplemented`.
fn not_implemented(engine: &Engine, op: &Value, b: u32, s: u32, label: &str) {
    let err = ctx1_err(engine, op, b, s, 0);
    assert_eq!(err.class(), ErrorClass::EmpiricalNotImplemented, "{label}: {err}");
}

fn qkv_sf1() -> Value {
    with(&spec_op(HYBRID, "context_qkv_gemm"), &[("scale_factor", json!(1.0))])
}

fn allreduce(tp: u32) -> Value {
    json!({"CustomAllReduce": {"name": "ar", "scale_factor": 1.0, "hidden_size": 4096, "tp_size": tp,
        "quant": "half", "seq_split": 1}})
}

fn nccl(gpus: u32, operation: &str) -> Value {
    json!({"Nccl": {"name": "nccl", "scale_factor": 1.0, "hidden_size": 4096.0, "num_gpus": gpus,
        "dtype": "half", "operation": operation, "seq_split": 1}})
}

/// 20 §10.4 base op (Qwen3-30B-A3B, tp 1 ep 2) in w4a16_mxfp4, which has no slice at this shape.
fn moe_mxfp4() -> Value {
    json!({"Moe": {"name": "context_moe", "scale_factor": 1.0, "hidden_size": 2048, "inter_size": 768,
        "topk": 8, "num_experts": 128, "moe_tp_size": 1, "moe_ep_size": 2, "attention_dp_size": 1,
        "quant_mode": "w4a16_mxfp4", "workload_distribution": "power_law_1.2", "is_gated": true,
        "moe_backend": null, "enable_eplb": false, "is_context": true}})
}

#[test]
fn no_policy_and_the_full_list_are_todays_engine() {
    let absent = engine_with(HYBRID, None, None).unwrap();
    assert_eq!(absent.transfer_kinds(), aic_core::ops::TransferKinds::ALL);
    let all = policy_engine(HYBRID, &["xshape", "xquant", "xprofile", "xop"]);
    assert_eq!(all.transfer_kinds(), aic_core::ops::TransferKinds::ALL);
    let null = {
        let mut spec = case_spec(HYBRID);
        spec["engine"]["transfer_policy"] = Value::Null;
        Engine::from_spec(EngineSpec::from_json(&spec.to_string()).unwrap(), None).unwrap()
    };
    assert_eq!(null.transfer_kinds(), aic_core::ops::TransferKinds::ALL);
    let op = with(&qkv_sf1(), &[("quant_mode", json!("int8_wo"))]);
    for e in [&absent, &all, &null] {
        check("G11a", ctx1(e, &op, 1, 1024, 0).latency_ms, "0.08595152");
    }
}

#[test]
fn an_unknown_kind_is_a_config_error_naming_it() {
    let err = engine_with(HYBRID, None, Some(&["xshape", "bogus"])).unwrap_err();
    assert!(matches!(err, AicError::InvalidConfig(_)), "{err}");
    assert_eq!(err.class(), ErrorClass::Value);
    let text = err.to_string();
    assert!(text.contains("engine.transfer_policy: unknown transfer kind/preset 'bogus'"), "{text}");
    assert!(text.contains("valid kinds: xop, xprofile, xquant, xshape; presets: aggressive, balanced, conservative, off"), "{text}");
}

/// 20 §1.4 G11a–G11e: the xprofile examples need `xprofile`, the xquant ones `xquant`.
#[test]
fn gemm_ladder_follows_the_policy() {
    let quant = |q: &str| with(&qkv_sf1(), &[("quant_mode", json!(q))]);
    let xprofile = [("G11a", "int8_wo", "0.08595152"), ("G11b", "int4_wo", "0.1050519"), ("G11c", "w4a16_nvfp4", "0.1050519")];
    let xquant = [("G11d", "sq", "0.05780266"), ("G11e", "fp8_ootb", "0.05780266")];
    let only_xquant = policy_engine(HYBRID, &["xquant"]);
    let only_xprofile = policy_engine(HYBRID, &["xprofile"]);
    let off = policy_engine(HYBRID, &[]);
    for (id, q, value) in xprofile {
        check(id, ctx1(&only_xprofile, &quant(q), 1, 1024, 0).latency_ms, value);
        assert_eq!(only_xprofile.last_provenance(), Some(ProvenanceTier::Xprofile), "{id}");
        not_implemented(&only_xquant, &quant(q), 1, 1024, id);
        not_implemented(&off, &quant(q), 1, 1024, id);
    }
    for (id, q, value) in xquant {
        check(id, ctx1(&only_xquant, &quant(q), 1, 1024, 0).latency_ms, value);
        assert_eq!(only_xquant.last_provenance(), Some(ProvenanceTier::Xquant), "{id}");
        not_implemented(&off, &quant(q), 1, 1024, id);
        // Without xquant the ladder moves on to the nearest other profile.
        let r = ctx1(&only_xprofile, &quant(q), 1, 1024, 0);
        assert_eq!(only_xprofile.last_provenance(), Some(ProvenanceTier::Xprofile), "{id}");
        assert_ne!(r.latency_ms, value.parse::<f64>().unwrap(), "{id}");
    }
    // The own table answers whatever the policy.
    let r = ctx1(&off, &qkv_sf1(), 1, 1024, 0);
    assert_eq!(r.source.as_str(), "silicon");
}

/// 20 §4.5 CA12a/CA12b: head 96 transfers from head 128 only with `xshape`.
#[test]
fn attention_cross_head_size_needs_xshape() {
    let op = with(
        &spec_op(HYBRID, "context_attention"),
        &[("use_qk_norm", json!(false)), ("scale_factor", json!(1.0)), ("head_size", json!(96))],
    );
    let on = policy_engine(HYBRID, &["xshape"]);
    check("CA12a", ctx1(&on, &op, 1, 1024, 0).latency_ms, "0.04453350");
    check("CA12b", ctx1(&on, &op, 3, 3000, 0).latency_ms, "0.3963832");
    assert_eq!(on.last_provenance(), Some(ProvenanceTier::Xshape));
    let without = policy_engine(HYBRID, &["xquant", "xprofile", "xop"]);
    not_implemented(&without, &op, 1, 1024, "CA12a");
    not_implemented(&without, &op, 3, 3000, "CA12b");
}

/// 20 §10.4 M8a/M8b: the nearest shape of the same quant needs `xshape`.
#[test]
fn moe_cross_shape_needs_xshape() {
    let on = policy_engine(HYBRID, &["xshape"]);
    check("M8a", ctx1(&on, &moe_mxfp4(), 1, 1024, 0).latency_ms, "0.1740436");
    check("M8b", ctx1(&on, &moe_mxfp4(), 1, 64, 0).latency_ms, "0.06565572");
    assert_eq!(on.last_provenance(), Some(ProvenanceTier::Xshape));
    let off = policy_engine(HYBRID, &[]);
    not_implemented(&off, &moe_mxfp4(), 1, 1024, "M8a");
    // Without xshape the ladder goes on to the other rungs and never answers with xshape.
    let rest = policy_engine(HYBRID, &["xquant", "xprofile"]);
    if let Ok(v) = eval(&rest, &[moe_mxfp4()], true, 1, 1024, 0, 1.0, None) {
        assert_ne!(v[0].latency_ms, "0.1740436".parse::<f64>().unwrap());
        assert!(matches!(rest.last_provenance(), Some(ProvenanceTier::Xquant | ProvenanceTier::Xprofile)));
    }
}

/// 20 §9.1 AR6 / NC8: 16 ranks read the 8-rank curve only with `xshape`; 8 ranks are their
/// own curve whatever the policy.
#[test]
fn comm_beyond_the_collected_width_needs_xshape() {
    let on = engine_with(EMPIRICAL, None, Some(&["xshape"])).unwrap();
    check("AR6", ctx1(&on, &allreduce(16), 1, 256, 0).latency_ms, "0.1745928");
    check("NC8", ctx1(&on, &nccl(16, "all_gather"), 1, 256, 0).latency_ms, "0.2358643");
    let off = engine_with(EMPIRICAL, None, Some(&[])).unwrap();
    not_implemented(&off, &allreduce(16), 1, 256, "AR6");
    not_implemented(&off, &nccl(16, "all_gather"), 1, 256, "NC8");
    check("AR1 empirical", ctx1(&off, &allreduce(8), 1, 256, 0).latency_ms, "0.01810592");
    check("NC1 empirical", ctx1(&off, &nccl(8, "all_gather"), 1, 256, 0).latency_ms, "0.02446");
}

/// Spec 36 §5.5: MSA has no measured data on sglang; HYBRID answers by the `xop` transfer.
#[test]
fn msa_cross_op_transfer_needs_xop() {
    let op = with(&spec_op(MSA_SGLANG, "context_attention"), &[("scale_factor", json!(1.0))]);
    let on = engine_with(MSA_SGLANG, Some("HYBRID"), Some(&["xop"])).unwrap();
    check("sglang ctx xop", ctx1(&on, &op, 2, 3000, 0).latency_ms, "0.850246874101848");
    let off = engine_with(MSA_SGLANG, Some("HYBRID"), Some(&["xshape", "xquant", "xprofile"])).unwrap();
    let err = ctx1_err(&off, &op, 2, 3000, 0);
    assert_eq!(err.class(), ErrorClass::EmpiricalNotImplemented, "{err}");
    assert!(err.to_string().contains("xop"), "{err}");
}

/// The calibrated path's DSA sibling transfer (`allow_quant_transfer`) stays on under no
/// policy, and its rungs follow the policy when one is given.
#[test]
fn dsa_sibling_transfer_follows_the_policy() {
    let dsa = |q: &str| {
        with(
            &spec_op(GLM_B200_SGLANG_TP8, "context_attention"),
            &[("scale_factor", json!(1.0)), ("gemm_quant_mode", json!(q))],
        )
    };
    let build = |policy: Option<&[&str]>| {
        let mut e = engine_with(GLM_B200_SGLANG_TP8, Some("EMPIRICAL"), policy).unwrap();
        e.allow_quant_transfer();
        e
    };
    let block = ctx1(&build(None), &dsa("fp8_block"), 1, 1024, 0).latency_ms;
    // fp8 ← fp8_block is xquant.
    assert_eq!(ctx1(&build(None), &dsa("fp8"), 1, 1024, 0).latency_ms, block);
    assert_eq!(ctx1(&build(Some(&["xquant"])), &dsa("fp8"), 1, 1024, 0).latency_ms, block);
    not_implemented(&build(Some(&[])), &dsa("fp8"), 1, 1024, "fp8 off");
    // nvfp4 ← fp8_block is xprofile.
    let nvfp4 = ctx1(&build(None), &dsa("nvfp4"), 1, 1024, 0).latency_ms;
    assert_eq!(ctx1(&build(Some(&["xprofile"])), &dsa("nvfp4"), 1, 1024, 0).latency_ms, nvfp4);
    not_implemented(&build(Some(&["xquant", "xshape", "xop"])), &dsa("nvfp4"), 1, 1024, "nvfp4 without xprofile");
}
