//! At concurrency 1 with fixed lengths nothing queues or batches, so the replay must give aic's
//! own numbers: TTFT is the prefill of one `isl`-token prompt with nothing cached, and TPOT the
//! mean of aic's decode-step latencies over the contexts the request decodes at (`isl + 1` up to
//! `isl + osl − 1` tokens, the fed token included).
//!
//! aisimulate-core keeps its virtual clock in `std::time::Duration` (whole nanoseconds), so each
//! pass lands on the clock rounded to the nanosecond: the comparison allows that rounding, half
//! a nanosecond per pass, and nothing more.

mod common;

use aic_replay::{Lengths, Replay, ReplayOptions, Role};

const NS_MS: f64 = 1e-6;

#[test]
fn concurrency_one_gives_aics_prefill_and_mean_decode_step() {
    let (isl, osl) = (2048usize, 64usize);
    let workload = common::closed_loop(3, 1, Lengths::Fixed(isl), Lengths::Fixed(osl), 0);
    let options = ReplayOptions { per_request: true, ..ReplayOptions::default() };
    let outcome = Replay::aggregated(common::role(Role::Aggregated), 1, workload).with_options(options).run().unwrap();
    let engine = common::engine();

    let ttft = engine.prefill_latency_ms(1, isl as u32, 0).unwrap();
    let steps: Vec<f64> = (isl + 1..isl + osl)
        .map(|len| engine.decode_step_latency_ms(1, (len - 1) as u32, 0, 1.0).unwrap())
        .collect();
    assert_eq!(steps.len(), osl - 1);
    let tpot = steps.iter().sum::<f64>() / steps.len() as f64;
    // Decode steps at different contexts differ, so the test can tell a right context from a
    // neighbouring one.
    assert!(steps.last().unwrap() > steps.first().unwrap());

    let records = &outcome.report.per_request;
    assert_eq!(records.len(), 3);
    for r in records {
        assert_eq!((r.input_tokens, r.output_tokens, r.reused_input_tokens), (isl, osl, 0));
        let got_ttft = r.ttft_ms.unwrap();
        assert!((got_ttft - ttft).abs() <= NS_MS, "TTFT {got_ttft} vs aic {ttft}");
        let got_tpot = (r.e2e_ms.unwrap() - got_ttft) / (osl - 1) as f64;
        // Each of the osl − 1 steps and the prefill carry up to half a nanosecond of rounding.
        let slack = NS_MS * (osl as f64) / (osl - 1) as f64;
        assert!((got_tpot - tpot).abs() <= slack, "TPOT {got_tpot} vs aic {tpot}");
    }
    let report = &outcome.report;
    assert!((report.ttft_ms.mean - ttft).abs() <= NS_MS, "{} vs {ttft}", report.ttft_ms.mean);
    assert!((report.tpot_ms.mean - tpot).abs() <= 2.0 * NS_MS, "{} vs {tpot}", report.tpot_ms.mean);
}

#[test]
fn tolerance_is_below_a_one_token_context_shift() {
    // The nanosecond slack above must not hide pricing the decode steps one token off.
    let engine = common::engine();
    let (isl, osl) = (2048usize, 64usize);
    let mean = |shift: usize| {
        (isl + 1..isl + osl)
            .map(|len| engine.decode_step_latency_ms(1, (len - 1 + shift) as u32, 0, 1.0).unwrap())
            .sum::<f64>()
            / (osl - 1) as f64
    };
    let shift = (mean(1) - mean(0)).abs();
    eprintln!("one-token shift moves TPOT by {shift:e} ms");
    assert!(shift > 2.0 * NS_MS, "{shift}");
}
