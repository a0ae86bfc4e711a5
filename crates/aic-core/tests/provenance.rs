//! Provenance tiers of empirical estimates (spec 20 §0.6, §17.1; spec 40 §9, §12): every worked
//! example of spec 20 that lists a provenance (`source / provenance` columns of §1.4, §4.5,
//! §9.1, §10.4) checked for both its value and its tier, plus the call semantics of
//! `last_provenance()` — worst tier of the last call, reset by every compute method, `None`
//! for table and analytic answers, per thread — and the batch API's merge across workers.
//!
//! The goldens do not record provenance, so whole-engine checks use the edge cases in HYBRID
//! and EMPIRICAL mode, whose tier follows from the examples (every op on its own slice →
//! `empirical`; an int8_wo GEMM has no table → `xprofile`).

#[path = "spec_examples/common.rs"]
mod common;

use aic_core::engine::provenance::{last_provenance, with_provenance};
use aic_core::engine::ProvenanceTier;
use aic_core::{BatchKind, Engine, StaticRun};
use serde_json::{json, Value};

use common::*;

const EMPIRICAL: &str = "edge/Qwen3-32B/h200_sxm/vllm/tp2-pp1-dp1/db=EMPIRICAL";
const HYBRID: &str = "edge/Qwen3-32B/h200_sxm/vllm/tp2-pp1-dp1/db=HYBRID";
const INT8_WO_HYBRID: &str = "edge/Qwen3-32B/h200_sxm/vllm/tp2-pp1-dp1/gemm=int8_wo/db=HYBRID";
const INT8_WO_EMPIRICAL: &str =
    "edge/Qwen3-32B/h200_sxm/vllm/tp2-pp1-dp1/gemm=int8_wo/db=EMPIRICAL";

use ProvenanceTier::{Empirical, Xprofile, Xquant, Xshape};

/// One op evaluated in a context pass on `engine`, with the tier of that call.
fn ctx_tier(
    engine: &Engine,
    op: &Value,
    b: u32,
    s: u32,
    prefix: u32,
) -> (OpResult1, Option<ProvenanceTier>) {
    let r = ctx1(engine, op, b, s, prefix);
    let tier = engine.last_provenance();
    (
        OpResult1 {
            latency_ms: r.latency_ms,
            source: r.source.as_str(),
        },
        tier,
    )
}

/// The parts of a single-op result these tests read.
struct OpResult1 {
    latency_ms: f64,
    source: &'static str,
}

fn qkv_sf1() -> Value {
    with(
        &spec_op(H200_VLLM, "context_qkv_gemm"),
        &[("scale_factor", json!(1.0))],
    )
}

fn attention_no_qk_norm() -> Value {
    with(
        &spec_op(H200_VLLM, "context_attention"),
        &[("use_qk_norm", json!(false)), ("scale_factor", json!(1.0))],
    )
}

fn allreduce(tp: u32) -> Value {
    json!({"CustomAllReduce": {"name": "ar", "scale_factor": 1.0, "hidden_size": 4096, "tp_size": tp,
        "quant": "half", "seq_split": 1}})
}

fn nccl(gpus: u32, operation: &str) -> Value {
    json!({"Nccl": {"name": "nccl", "scale_factor": 1.0, "hidden_size": 4096.0, "num_gpus": gpus,
        "dtype": "half", "operation": operation, "seq_split": 1}})
}

/// 20 §10.4 base op (Qwen3-30B-A3B, tp 1 ep 2).
fn moe_base() -> Value {
    json!({"Moe": {"name": "context_moe", "scale_factor": 48.0, "hidden_size": 2048, "inter_size": 768,
        "topk": 8, "num_experts": 128, "moe_tp_size": 1, "moe_ep_size": 2, "attention_dp_size": 1,
        "quant_mode": "bfloat16", "workload_distribution": "power_law_1.2", "is_gated": true,
        "moe_backend": null, "enable_eplb": false, "is_context": true}})
}

/// 20 §1.4 G10a–G10d (EMPIRICAL): the GEMM's own quant → tier `empirical`.
#[test]
fn gemm_own_quant_is_empirical() {
    let e = engine(EMPIRICAL);
    let (r, tier) = ctx_tier(e, &qkv_sf1(), 1, 1000, 0);
    check("G10a", r.latency_ms, "0.07734528");
    assert_eq!((r.source, tier), ("empirical", Some(Empirical)));
    let op = with(&qkv_sf1(), &[("n", json!(6000)), ("k", json!(5000))]);
    let (r, tier) = ctx_tier(e, &op, 1, 3000, 0);
    check("G10b", r.latency_ms, "0.2206246");
    assert_eq!(tier, Some(Empirical));
    let (r, tier) = ctx_tier(e, &qkv_sf1(), 1, 1024, 0);
    check("G10d", r.latency_ms, "0.06753333");
    assert_eq!(tier, Some(Empirical));
}

/// 20 §1.4 G11a–G11e (HYBRID): quants without GEMM rows transfer from the same profile
/// (`xquant`) or the nearest other profile (`xprofile`); a table hit notes nothing.
#[test]
fn gemm_transfers_are_xquant_and_xprofile() {
    let e = engine(HYBRID);
    let quant = |q: &str| with(&qkv_sf1(), &[("quant_mode", json!(q))]);
    for (id, q, value, want) in [
        ("G11a", "int8_wo", "0.08595152", Xprofile),
        ("G11b", "int4_wo", "0.1050519", Xprofile),
        ("G11c", "w4a16_nvfp4", "0.1050519", Xprofile),
        ("G11d", "sq", "0.05780266", Xquant),
        ("G11e", "fp8_ootb", "0.05780266", Xquant),
    ] {
        let (r, tier) = ctx_tier(e, &quant(q), 1, 1024, 0);
        check(id, r.latency_ms, value);
        assert_eq!((r.source, tier), ("empirical", Some(want)), "{id}");
    }
    // G1-like table hit in HYBRID: silicon, no tier, and the previous call's tier is gone.
    let (r, tier) = ctx_tier(e, &qkv_sf1(), 1, 1024, 0);
    assert_eq!((r.source, tier), ("silicon", None));
    // G9d: a below-grid shape misses the table in HYBRID and is estimated from its own quant.
    let op = with(
        &qkv_sf1(),
        &[
            ("n", json!(4)),
            ("k", json!(4)),
            ("below_grid_sol", json!(true)),
        ],
    );
    let (r, tier) = ctx_tier(e, &op, 1, 1024, 0);
    check("G9d", r.latency_ms, "0.0003200769");
    assert_eq!(tier, Some(Empirical));
}

/// 20 §4.5 CA11a/CA11b (EMPIRICAL, own head size) and CA12a/CA12b (HYBRID, head 96 →
/// cross-head-size transfer from head 128 → `xshape`).
#[test]
fn context_attention_own_slice_and_cross_head_size() {
    let (r, tier) = ctx_tier(engine(EMPIRICAL), &attention_no_qk_norm(), 3, 3000, 0);
    check("CA11a", r.latency_ms, "0.4392930");
    assert_eq!((r.source, tier), ("empirical", Some(Empirical)));
    let (r, tier) = ctx_tier(engine(EMPIRICAL), &attention_no_qk_norm(), 2, 1500, 500);
    check("CA11b", r.latency_ms, "0.1625629");
    assert_eq!(tier, Some(Empirical));
    let op = with(&attention_no_qk_norm(), &[("head_size", json!(96))]);
    let (r, tier) = ctx_tier(engine(HYBRID), &op, 1, 1024, 0);
    check("CA12a", r.latency_ms, "0.04453350");
    assert_eq!((r.source, tier), ("empirical", Some(Xshape)));
    let (r, tier) = ctx_tier(engine(HYBRID), &op, 3, 3000, 0);
    check("CA12b", r.latency_ms, "0.3963832");
    assert_eq!(tier, Some(Xshape));
    // head 128 hits the table in HYBRID: no estimate ran.
    let (_, tier) = ctx_tier(engine(HYBRID), &attention_no_qk_norm(), 1, 1024, 0);
    assert_eq!(tier, None);
}

/// 20 §9.1 AR6 / NC8 (EMPIRICAL): beyond one node the curve of 8 ranks serves 16 → `xshape`;
/// within a node the own curve → `empirical`; zero short-circuits (tp 1, one GPU, an unknown
/// operation) run no estimate.
#[test]
fn comm_capped_ranks_are_xshape() {
    let e = engine(EMPIRICAL);
    let (r, tier) = ctx_tier(e, &allreduce(16), 1, 256, 0);
    check("AR6", r.latency_ms, "0.1745928");
    assert_eq!(tier, Some(Xshape));
    let (r, tier) = ctx_tier(e, &allreduce(8), 1, 256, 0);
    check("AR1 empirical", r.latency_ms, "0.01810592");
    assert_eq!(tier, Some(Empirical));
    let (r, tier) = ctx_tier(e, &nccl(16, "all_gather"), 1, 256, 0);
    check("NC8", r.latency_ms, "0.2358643");
    assert_eq!(tier, Some(Xshape));
    let (r, tier) = ctx_tier(e, &nccl(8, "all_gather"), 1, 256, 0);
    check("NC1 empirical", r.latency_ms, "0.02446");
    assert_eq!(tier, Some(Empirical));
    for (id, op) in [
        ("AR3", allreduce(1)),
        ("NC4", nccl(1, "all_gather")),
        ("NC7", nccl(8, "broadcast")),
    ] {
        let (r, tier) = ctx_tier(e, &op, 1, 256, 0);
        assert_eq!(
            (r.latency_ms, r.source, tier),
            (0.0, "empirical", None),
            "{id}"
        );
    }
}

/// 20 §10.4 M7a (EMPIRICAL, own curve) and M8a/M8b (HYBRID, w4a16_mxfp4 has no slice at this
/// shape: nearest shape of the same quant → `xshape`).
#[test]
fn moe_own_curve_and_cross_shape() {
    let (r, tier) = ctx_tier(engine(EMPIRICAL), &moe_base(), 1, 1000, 0);
    check("M7a", r.latency_ms, "13.83545");
    assert_eq!(tier, Some(Empirical));
    let op = with(
        &moe_base(),
        &[
            ("quant_mode", json!("w4a16_mxfp4")),
            ("scale_factor", json!(1.0)),
        ],
    );
    let (r, tier) = ctx_tier(engine(HYBRID), &op, 1, 1024, 0);
    check("M8a", r.latency_ms, "0.1740436");
    assert_eq!((r.source, tier), ("empirical", Some(Xshape)));
    let (r, tier) = ctx_tier(engine(HYBRID), &op, 1, 64, 0);
    check("M8b", r.latency_ms, "0.06565572");
    assert_eq!(tier, Some(Xshape));
}

/// Analytic ops (MemOp-based Elementwise / Embedding, P2P) never note a tier, even though
/// their tag is `empirical` (20 §0.6).
#[test]
fn analytic_ops_note_nothing() {
    let e = engine(EMPIRICAL);
    for name in ["context_add_norm_1", "context_embedding"] {
        let (r, tier) = ctx_tier(e, &spec_op(EMPIRICAL, name), 1, 1024, 0);
        assert_eq!((r.source, tier), ("empirical", None), "{name}");
    }
    let p2p = json!({"P2P": {"name": "p2p", "scale_factor": 1.0, "pp_size": 2, "hidden_size": 5120, "seq_split": 1}});
    let (r, tier) = ctx_tier(e, &p2p, 1, 1024, 0);
    check("P1", r.latency_ms, "0.2197152");
    assert_eq!(tier, None);
}

/// The worst tier of one call wins: an op list with an own-slice GEMM, an `xquant` and an
/// `xprofile` transfer reports `xprofile`, whatever the order.
#[test]
fn a_call_reports_its_worst_tier() {
    let e = engine(HYBRID);
    let ops = [
        with(
            &qkv_sf1(),
            &[("name", json!("a")), ("quant_mode", json!("int8_wo"))],
        ),
        with(
            &qkv_sf1(),
            &[("name", json!("b")), ("quant_mode", json!("sq"))],
        ),
        with(&qkv_sf1(), &[("name", json!("c"))]),
    ];
    let r = eval(e, &ops, true, 1, 1024, 0, 1.0, None).unwrap();
    assert_eq!(r.len(), 3);
    assert_eq!(e.last_provenance(), Some(Xprofile));
    let reversed: Vec<Value> = ops.iter().rev().cloned().collect();
    let (r, tier) = e.with_provenance(|e| eval(e, &reversed, true, 1, 1024, 0, 1.0, None));
    assert_eq!((r.unwrap().len(), tier), (3, Some(Xprofile)));
}

/// Whole-engine calls on the edge goldens: every compute method resets the tier; HYBRID with
/// every table present notes nothing, EMPIRICAL notes `empirical` (all own slices), an int8_wo
/// GEMM (no rows) `xprofile` in both modes. The values themselves are checked by
/// golden_parity; here only that they are unchanged by tracking.
#[test]
fn engine_calls_report_the_tier_of_the_last_call() {
    let hybrid = engine(HYBRID);
    let empirical = engine(EMPIRICAL);
    let int8_hybrid = engine(INT8_WO_HYBRID);
    let int8_empirical = engine(INT8_WO_EMPIRICAL);
    let run = StaticRun::new(2, 1024, 64);
    for (e, want) in [
        (hybrid, None),
        (empirical, Some(Empirical)),
        (int8_hybrid, Some(Xprofile)),
        (int8_empirical, Some(Xprofile)),
    ] {
        let v = e.prefill_latency_ms(1, 1024, 0).unwrap();
        assert_eq!(e.last_provenance(), want);
        let (again, tier) = e.with_provenance(|e| e.prefill_latency_ms(1, 1024, 0));
        assert_eq!((again.unwrap(), tier), (v, want));
        e.decode_latency_ms(4, 1024, 64).unwrap();
        assert_eq!(e.last_provenance(), want);
        e.decode_step_latency_ms(8, 1024, 64, 1.0).unwrap();
        assert_eq!(e.last_provenance(), want);
        e.mixed_step_latency_ms(512, 8, 1024, 64, 0, 1.0, 1.0)
            .unwrap();
        assert_eq!(e.last_provenance(), want);
        e.mixed_step_breakdown_per_op(512, 8, 1024, 64, 0, 1.0, 1.0)
            .unwrap();
        assert_eq!(e.last_provenance(), want);
        e.run_static(&run).unwrap();
        assert_eq!(e.last_provenance(), want);
        e.run_static_per_op(&run).unwrap();
        assert_eq!(e.last_provenance(), want);
        e.decode_step_per_op(8, 1024, 64, 1.0).unwrap();
        assert_eq!(e.last_provenance(), want);
    }
    // A call that returns before estimating anything still resets the tier.
    int8_empirical.prefill_latency_ms(1, 1024, 0).unwrap();
    assert_eq!(last_provenance(), Some(Xprofile));
    assert_eq!(
        int8_empirical
            .decode_step_latency_ms(0, 1024, 64, 1.0)
            .unwrap(),
        0.0
    );
    assert_eq!(last_provenance(), None);
    // So does a call that fails.
    int8_empirical.prefill_latency_ms(1, 1024, 0).unwrap();
    assert!(int8_empirical.prefill_latency_ms(1, 1024, 1024).is_err());
    assert_eq!(last_provenance(), None);
}

/// `last_provenance` is per thread: a call on another thread neither sees nor changes this
/// thread's last call; `with_provenance` ties a tier to one call on any thread.
#[test]
fn last_provenance_is_per_thread() {
    let int8 = engine(INT8_WO_EMPIRICAL);
    let hybrid = engine(HYBRID);
    hybrid.prefill_latency_ms(1, 1024, 0).unwrap();
    assert_eq!(hybrid.last_provenance(), None);
    let other = std::thread::spawn(move || {
        int8.prefill_latency_ms(1, 1024, 0).unwrap();
        int8.last_provenance()
    })
    .join()
    .unwrap();
    assert_eq!(other, Some(Xprofile));
    assert_eq!(hybrid.last_provenance(), None);
    let ((), tier) = with_provenance(|| {
        hybrid.prefill_latency_ms(1, 1024, 0).unwrap();
        int8.prefill_latency_ms(1, 1024, 0).unwrap();
    });
    assert_eq!(tier, Some(Xprofile));
}

/// An EMPIRICAL engine whose only op (both phases) is a 16-rank all-reduce: a cheap estimate
/// that always transfers from the 8-rank curve (`xshape`).
fn allreduce16_engine() -> Engine {
    let mut spec = case_spec(EMPIRICAL);
    spec["context_ops"] = json!([allreduce(16)]);
    spec["generation_ops"] = json!([allreduce(16)]);
    let spec = aic_core::EngineSpec::from_json(&spec.to_string()).unwrap();
    Engine::from_spec(spec, None).unwrap()
}

/// The batch API runs points on worker threads and still reports the worst tier of the whole
/// batch on the calling thread, for every thread count.
#[test]
fn batch_reports_the_worst_tier_of_all_points() {
    let e = allreduce16_engine();
    let n = 1000;
    let a: Vec<u32> = (0..n).map(|i| 1 + (i % 4) as u32).collect();
    let b: Vec<u32> = (0..n).map(|i| 512 + 8 * i as u32).collect();
    let c = vec![0u32; n];
    for threads in [Some(1), Some(2), Some(3), None] {
        let (out, tier) =
            e.with_provenance(|e| e.estimate_batch(BatchKind::Prefill, &a, &b, &c, threads));
        assert_eq!(out.unwrap().len(), n);
        assert_eq!(tier, Some(Xshape), "threads {threads:?}");
        assert_eq!(e.last_provenance(), Some(Xshape));
    }
    let h = engine(HYBRID);
    h.estimate_batch(BatchKind::Prefill, &a[..300], &b[..300], &c[..300], Some(2))
        .unwrap();
    assert_eq!(h.last_provenance(), None);
}
