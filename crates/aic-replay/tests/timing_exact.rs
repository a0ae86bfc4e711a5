//! The timing model answers every call of a real replay with exactly the number a direct
//! `Engine` call gives for the arguments the scheduler passed (bit for bit), through the module
//! docs' mapping: prefill `(batch, mean_isl, mean_prefix)` → `prefill_latency_ms(batch, mean_isl,
//! mean_prefix)`, decode at mean sequence length `L` → `decode_step_latency_ms(batch, L − 1, 0,
//! 1.0)`.

mod common;

use aic_core::{Engine, LatencyModel};
use aic_replay::{Lengths, Replay, ReplayOptions, Role, SchedulerOverrides, TimingCall};

fn recording() -> ReplayOptions {
    ReplayOptions { record_timing_calls: true, ..ReplayOptions::default() }
}

/// Recomputes every call with the engine; returns (prefill calls with a cached prefix, prefill
/// calls with batch > 1, decode calls with batch > 1).
fn check_calls(engine: &Engine, calls: &[TimingCall]) -> (usize, usize, usize) {
    let (mut with_prefix, mut batched_prefill, mut batched_decode) = (0, 0, 0);
    for call in calls {
        match *call {
            TimingCall::Prefill { batch, mean_isl, mean_prefix, latency_ms } => {
                assert!(batch > 0 && mean_isl > mean_prefix, "{call:?}");
                let direct = engine.prefill_latency_ms(batch as u32, mean_isl as u32, mean_prefix as u32).unwrap();
                assert_eq!(latency_ms.to_bits(), direct.to_bits(), "{call:?} vs {direct}");
                with_prefix += usize::from(mean_prefix > 0);
                batched_prefill += usize::from(batch > 1);
            }
            TimingCall::Decode { batch, mean_context_length, active_kv_tokens, latency_ms, .. } => {
                assert!(batch > 0 && mean_context_length >= 2, "{call:?}");
                assert_eq!(mean_context_length, active_kv_tokens / batch, "{call:?}");
                let isl = (mean_context_length - 1) as u32;
                let direct = engine.decode_step_latency_ms(batch as u32, isl, 0, 1.0).unwrap();
                assert_eq!(latency_ms.to_bits(), direct.to_bits(), "{call:?} vs {direct}");
                let via_trait = LatencyModel::decode_step_ms(engine, batch as u32, isl, 0).unwrap();
                assert_eq!(latency_ms.to_bits(), via_trait.to_bits());
                batched_decode += usize::from(batch > 1);
            }
        }
    }
    (with_prefix, batched_prefill, batched_decode)
}

#[test]
fn aggregated_trace_with_chunks_and_prefix_hits_matches_direct_engine_calls() {
    // A small pass budget makes the long prompts of the trace prefill in chunks.
    let scheduler = SchedulerOverrides { max_num_batched_tokens: Some(1024), ..Default::default() };
    let role = common::role_with(Role::Aggregated, scheduler);
    let outcome = Replay::aggregated(role, 1, common::trace()).with_options(recording()).run().unwrap();
    let [(Role::Aggregated, calls)] = outcome.timing_calls.as_slice() else { panic!("one aggregated role") };
    assert!(calls.len() > 100, "{} calls", calls.len());
    let (with_prefix, batched_prefill, batched_decode) = check_calls(&common::engine(), calls);
    assert!(with_prefix > 0, "chunked prefills and prefix hits price a cached prefix");
    assert!(batched_prefill > 0 && batched_decode > 0);
    let stats = outcome.stats.timing[0].stats;
    assert_eq!(stats.calls, calls.len() as u64);
    assert!(stats.engine_calls < stats.calls, "repeated steps come from the memo");
    assert!(outcome.report.prefix_cache.reused_ratio > 0.0);
}

#[test]
fn disaggregated_roles_match_direct_engine_calls() {
    let workload = common::closed_loop(48, 16, Lengths::Fixed(3000), Lengths::Fixed(40), 1);
    let replay = Replay::disaggregated(common::role(Role::Prefill), 1, common::role(Role::Decode), 2, workload)
        .with_options(recording());
    let outcome = replay.run().unwrap();
    let engine = common::engine();
    assert_eq!(outcome.timing_calls.len(), 2);
    for (role, calls) in &outcome.timing_calls {
        check_calls(&engine, calls);
        let prefills = calls.iter().filter(|c| matches!(c, TimingCall::Prefill { .. })).count();
        let decodes = calls.len() - prefills;
        match role {
            Role::Prefill => assert!(prefills > 0 && decodes == 0, "prefill role: {prefills} prefills, {decodes} decodes"),
            Role::Decode => assert!(prefills == 0 && decodes > 0, "decode role: {prefills} prefills, {decodes} decodes"),
            Role::Aggregated => panic!("no aggregated role in a disaggregated replay"),
        }
    }
}
