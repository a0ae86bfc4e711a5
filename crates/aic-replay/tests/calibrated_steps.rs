//! A calibrated replay: every prefill pass × `prefill_scale`, every decode step × `decode_scale`
//! + `decode_overhead_ms`, and `request_overhead_ms` added to each request's TTFT and E2E.
//! At concurrency 1 with fixed lengths nothing queues or batches, so the calibrated figures are
//! the plain replay's figures transformed by exactly those rules (up to the simulator's
//! nanosecond clock); bad constants are refused naming the field.

mod common;

use aic_replay::{Lengths, Replay, ReplayError, ReplayOptions, Role, RoleBuilder, StepCalibration};

const NS_MS: f64 = 1e-6;

fn run(calibration: StepCalibration, request_overhead_ms: f64) -> aic_replay::ReplayReport {
    let (isl, osl) = (2048usize, 64usize);
    let workload = common::closed_loop(3, 1, Lengths::Fixed(isl), Lengths::Fixed(osl), 0);
    let role = RoleBuilder::new(Role::Aggregated, common::engine())
        .facts(common::facts())
        .calibration(calibration)
        .build()
        .unwrap();
    let options = ReplayOptions { per_request: true, request_overhead_ms: Some(request_overhead_ms), ..ReplayOptions::default() };
    Replay::aggregated(role, 1, workload).with_options(options).run().unwrap().report
}

#[test]
fn calibration_scales_passes_and_shifts_requests() {
    let plain = run(StepCalibration::IDENTITY, 0.0);
    let cal = StepCalibration { prefill_scale: 1.5, decode_scale: 0.8, decode_overhead_ms: 2.0 };
    let got = run(cal, 40.0);
    let osl = 64.0;
    // TTFT: the one prefill pass scaled, plus the request overhead.
    let want_ttft = 1.5 * plain.ttft_ms.mean + 40.0;
    assert!((got.ttft_ms.mean - want_ttft).abs() <= 2.0 * NS_MS, "{} vs {want_ttft}", got.ttft_ms.mean);
    // TPOT: each of the osl − 1 decode steps scaled plus the per-step overhead.
    let want_tpot = 0.8 * plain.tpot_ms.mean + 2.0;
    assert!((got.tpot_ms.mean - want_tpot).abs() <= 4.0 * NS_MS, "{} vs {want_tpot}", got.tpot_ms.mean);
    // E2E: the calibrated TTFT plus osl − 1 calibrated steps.
    let want_e2e = want_ttft + (osl - 1.0) * want_tpot;
    assert!((got.e2e_ms.mean - want_e2e).abs() <= osl * NS_MS, "{} vs {want_e2e}", got.e2e_ms.mean);
    for r in &got.per_request {
        assert!((r.ttft_ms.unwrap() - want_ttft).abs() <= 2.0 * NS_MS);
    }
    // The overhead moves every percentile alike.
    assert!((got.ttft_ms.p99 - got.ttft_ms.min - (plain.ttft_ms.p99 - plain.ttft_ms.min) * 1.5).abs() <= 4.0 * NS_MS);
}

#[test]
fn identity_calibration_changes_nothing() {
    let a = run(StepCalibration::IDENTITY, 0.0);
    let workload = common::closed_loop(3, 1, Lengths::Fixed(2048), Lengths::Fixed(64), 0);
    let options = ReplayOptions { per_request: true, ..ReplayOptions::default() };
    let b = Replay::aggregated(common::role(Role::Aggregated), 1, workload).with_options(options).run().unwrap().report;
    assert_eq!(a.ttft_ms, b.ttft_ms);
    assert_eq!(a.tpot_ms, b.tpot_ms);
    assert_eq!(a.e2e_ms, b.e2e_ms);
}

#[test]
fn bad_constants_are_refused_by_name() {
    for (cal, field) in [
        (StepCalibration { prefill_scale: 0.0, ..StepCalibration::IDENTITY }, "prefill_scale"),
        (StepCalibration { decode_scale: f64::NAN, ..StepCalibration::IDENTITY }, "decode_scale"),
        (StepCalibration { decode_overhead_ms: -1.0, ..StepCalibration::IDENTITY }, "decode_overhead_ms"),
    ] {
        let err = RoleBuilder::new(Role::Aggregated, common::engine()).facts(common::facts()).calibration(cal).build().unwrap_err();
        assert!(matches!(err, ReplayError::InvalidDeployment { .. }), "{err}");
        assert!(err.to_string().contains(field), "{err}");
    }
    let workload = common::closed_loop(2, 1, Lengths::Fixed(128), Lengths::Fixed(8), 0);
    let options = ReplayOptions { request_overhead_ms: Some(f64::INFINITY), ..ReplayOptions::default() };
    let err = Replay::aggregated(common::role(Role::Aggregated), 1, workload).with_options(options).run().unwrap_err();
    assert!(err.to_string().contains("request_overhead_ms"), "{err}");
}

/// A request carrying calibration constants: the role takes its group's step corrections
/// (the exact `system/backend/mode` key wins over the pooled ones) and the group's
/// `ttft_overhead_ms`; an explicit `request_overhead_ms` replaces that overhead; a constant out
/// of range is refused.
#[test]
fn request_calibration_takes_the_roles_group() {
    use serde_json::{json, Value};
    let constants = json!({"version": 1, "groups": {
        "h200_sxm/vllm/agg": {"tpot_scale": 0.8, "tpot_overhead_ms": 2.0, "ttft_scale": 1.5,
                              "ttft_queue": 0.9, "ttft_overhead_ms": 40.0},
        "*/*/*": {"tpot_scale": 3.0, "tpot_overhead_ms": 9.0, "ttft_scale": 3.0,
                  "ttft_queue": 0.0, "ttft_overhead_ms": 500.0}}});
    let request = |calibration: Option<Value>, options: Value| {
        let mut r = json!({
            "mode": {"kind": "agg", "engine": {"spec": {"path": common::spec_path()}, "facts": common::facts()}},
            "workload": {"kind": "generated", "requests": 3, "arrival": {"closed_loop": {"concurrency": 1}},
                         "isl": 2048, "osl": 64, "seed": 0},
            "options": options});
        if let Some(c) = calibration {
            r["calibration"] = c;
        }
        let systems = common::systems();
        aic_replay::run_json(&r.to_string(), Some(&systems)).map(|a| serde_json::from_str::<Value>(&a).unwrap())
    };
    let mean = |a: &Value, key: &str| a["report"][key]["mean"].as_f64().unwrap();
    let plain = request(None, json!({})).unwrap();
    let cal = request(Some(constants.clone()), json!({})).unwrap();
    let want_ttft = 1.5 * mean(&plain, "ttft_ms") + 40.0;
    assert!((mean(&cal, "ttft_ms") - want_ttft).abs() <= 2.0 * NS_MS, "{} vs {want_ttft}", mean(&cal, "ttft_ms"));
    let want_tpot = 0.8 * mean(&plain, "tpot_ms") + 2.0;
    assert!((mean(&cal, "tpot_ms") - want_tpot).abs() <= 4.0 * NS_MS, "{} vs {want_tpot}", mean(&cal, "tpot_ms"));
    let zero = request(Some(constants.clone()), json!({"request_overhead_ms": 0.0})).unwrap();
    assert!((mean(&zero, "ttft_ms") - 1.5 * mean(&plain, "ttft_ms")).abs() <= 2.0 * NS_MS);
    let mut bad = constants;
    bad["groups"]["h200_sxm/vllm/agg"]["ttft_scale"] = json!(-1.0);
    let err = request(Some(bad), json!({})).unwrap_err();
    assert!(err.to_string().contains("ttft_scale"), "{err}");
}
