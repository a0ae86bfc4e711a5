//! Warm-up requests: `ReplayOptions::warmup_requests` leaves the first requests by arrival out
//! of the TTFT / TPOT / E2E figures, as a benchmark's warm-up requests are. A closed loop's
//! first wave arrives at once and queues for prefill; after it, the slots turn over one by one.

mod common;

use aic_replay::{Lengths, Replay, ReplayError, ReplayOptions, Role};

fn run(warmup_requests: usize) -> Result<aic_replay::ReplayReport, ReplayError> {
    run_with(warmup_requests, true)
}

fn run_with(warmup_requests: usize, per_request: bool) -> Result<aic_replay::ReplayReport, ReplayError> {
    let workload = common::closed_loop(24, 8, Lengths::Fixed(2048), Lengths::Fixed(32), 0);
    let options = ReplayOptions { per_request, warmup_requests, ..ReplayOptions::default() };
    Ok(Replay::aggregated(common::role(Role::Aggregated), 1, workload).with_options(options).run()?.report)
}

#[test]
fn warmup_requests_leave_the_first_arrivals_out() {
    let all = run(0).unwrap();
    let steady = run(8).unwrap();
    // The schedule is the same: counts, throughput and every request's own latencies agree.
    assert_eq!(all.requests, steady.requests);
    assert_eq!(all.per_request, steady.per_request);
    assert_eq!(all.throughput, steady.throughput);
    // The figures are those of the requests after the first 8 arrivals.
    let mut records: Vec<_> = all.per_request.iter().collect();
    records.sort_by(|a, b| a.arrival_ms.partial_cmp(&b.arrival_ms).unwrap());
    let kept: Vec<f64> = records.iter().skip(8).map(|r| r.ttft_ms.unwrap()).collect();
    assert_eq!(steady.ttft_ms.samples, 16);
    let mean = kept.iter().sum::<f64>() / kept.len() as f64;
    assert!((steady.ttft_ms.mean - mean).abs() <= 1e-9 * mean.abs().max(1.0));
    assert_eq!(steady.ttft_ms.max, kept.iter().cloned().fold(f64::MIN, f64::max));
    // The first wave queues behind each other's prefills: leaving it out lowers the tail.
    assert!(steady.ttft_ms.max <= all.ttft_ms.max);
}

#[test]
fn warmup_does_not_need_per_request_output() {
    // The figures are the same whether the report keeps the per-request records or not.
    let kept = run_with(8, true).unwrap();
    let lean = run_with(8, false).unwrap();
    assert!(lean.per_request.is_empty());
    assert_eq!(kept.ttft_ms, lean.ttft_ms);
    assert_eq!(kept.tpot_ms, lean.tpot_ms);
    assert_eq!(kept.e2e_ms, lean.e2e_ms);
}

#[test]
fn warmup_that_leaves_nothing_is_refused_by_name() {
    let err = run(24).unwrap_err();
    assert!(err.to_string().contains("options.warmup_requests"), "{err}");
}
