//! Aggregated and disaggregated replays end to end through the real aisimulate-core engine, the
//! first through the JSON entry point the bindings use.

mod common;

use aic_replay::{run_json, Lengths, Replay, Role};
use serde_json::{json, Value};

fn engine_json() -> Value {
    json!({"spec": {"path": common::spec_path()}, "facts": common::facts()})
}

#[test]
fn aggregated_trace_through_run_json() {
    let request = json!({
        "mode": {"kind": "agg", "engine": engine_json(), "workers": 1},
        "workload": {"kind": "trace", "path": common::trace_path()},
        "options": {"timeline": true},
    });
    let systems = common::systems();
    let answer: Value = serde_json::from_str(&run_json(&request.to_string(), Some(&systems)).unwrap()).unwrap();
    let report = &answer["report"];
    assert_eq!(report["mode"], "agg");
    assert_eq!(report["requests"]["requests"], 40);
    assert_eq!(report["requests"]["completed"], 40);
    // The trace's lines share hash_ids: later requests find their prefix cached.
    assert!(report["prefix_cache"]["reused_ratio"].as_f64().unwrap() > 0.1, "{}", report["prefix_cache"]);
    for key in ["ttft_ms", "tpot_ms", "itl_ms", "e2e_ms"] {
        let s = &report[key];
        let (mean, p50, p90, p99) =
            (s["mean"].as_f64().unwrap(), s["p50"].as_f64().unwrap(), s["p90"].as_f64().unwrap(), s["p99"].as_f64().unwrap());
        assert!(mean > 0.0 && p50 <= p90 && p90 <= p99, "{key}: {s}");
    }
    let t = &report["throughput"];
    assert_eq!(t["gpus"], 2);
    assert_eq!(t["output_tokens_per_s_per_gpu"].as_f64().unwrap() * 2.0, t["output_tokens_per_s"].as_f64().unwrap());
    let kv = &report["kv_usage"];
    assert!(kv["peak"].as_f64().unwrap() > 0.0 && kv["peak"].as_f64().unwrap() <= 1.0, "{kv}");
    assert!(!report["timeline"].as_array().unwrap().is_empty());
    // The roles show the memory model's capacity and the vLLM defaults.
    let role = &report["roles"][0];
    assert_eq!((role["kv"]["source"].as_str(), role["kv"]["block_size"].as_u64()), (Some("aic_memory_model"), Some(16)));
    assert_eq!(role["max_num_batched_tokens"], 8192);
    // This spec's tables carry no power: the figure is withheld, not zero.
    assert_eq!(report["power"]["coverage"], 0.0);
    assert!(report["power"]["power_w_per_gpu"].is_null());
    assert!(answer["stats"]["wall_ms"].as_f64().unwrap() > 0.0);
}

#[test]
fn disaggregated_generated_workload_runs_end_to_end() {
    let workload = common::closed_loop(64, 16, Lengths::Fixed(2048), Lengths::Fixed(128), 3);
    let replay = Replay::disaggregated(common::role(Role::Prefill), 1, common::role(Role::Decode), 1, workload);
    let report = replay.run().unwrap().report;
    assert_eq!(report.mode, "disagg");
    assert_eq!((report.requests.requests, report.requests.completed), (64, 64));
    assert_eq!(report.requests.output_tokens, 64 * 128);
    assert_eq!(report.throughput.gpus, 4);
    assert_eq!(report.roles.iter().map(|r| r.role).collect::<Vec<_>>(), ["prefill", "decode"]);
    // Prefill workers do not decode: every request's first token comes from a prefill pass, so
    // TTFT is at least one unqueued prefill.
    let prefill = common::engine().prefill_latency_ms(1, 2048, 0).unwrap();
    assert!(report.ttft_ms.min >= prefill * (1.0 - 1e-9), "{} < {prefill}", report.ttft_ms.min);
    assert!(report.tpot_ms.mean > 0.0);
}

#[test]
fn aggregated_and_disaggregated_differ_in_ttft_under_load() {
    // The same load on one agg worker and on a 1P1D pair: the two topologies run different
    // schedules (mixed passes on one worker, separate prefill and decode workers).
    let workload = || common::closed_loop(64, 32, Lengths::Fixed(2048), Lengths::Fixed(128), 5);
    let agg = Replay::aggregated(common::role(Role::Aggregated), 1, workload()).run().unwrap().report;
    let disagg = Replay::disaggregated(common::role(Role::Prefill), 1, common::role(Role::Decode), 1, workload())
        .run()
        .unwrap()
        .report;
    assert_ne!(agg.ttft_ms.mean, disagg.ttft_ms.mean);
    assert_ne!(agg.tpot_ms.mean, disagg.tpot_ms.mean);
}
