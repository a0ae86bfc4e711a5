//! The timing model's phase evidence is aic's per-op results of every step it priced, weighted by
//! how often it priced it, and a new measurement epoch forgets the uses but not the memo.

mod common;

use std::sync::Arc;

use aic_replay::AicTimingModel;
use aisimulate_core::engine::TimingModel;

#[test]
fn evidence_weights_per_op_results_by_use_and_resets_per_epoch() {
    let engine = common::engine();
    let model = AicTimingModel::new(Arc::clone(&engine));
    let p = model.predict_prefill_ms(2, 3000, 1024).unwrap();
    assert_eq!(p, model.predict_prefill_ms(2, 3000, 1024).unwrap());
    let d = model.predict_decode_ms(8, 8 * 2500, 2500, 1 << 20).unwrap();
    assert_eq!(model.stats().engine_calls, 2);

    let summary = model.evidence_summary().unwrap();
    let prefill_ops = engine.prefill_per_op(2, 3000, 1024).unwrap();
    let decode_ops = engine.decode_step_per_op(8, 2499, 0, 1.0).unwrap();
    assert_eq!(summary.prefill.operations.len(), prefill_ops.len());
    for (got, op) in summary.prefill.operations.iter().zip(&prefill_ops) {
        assert_eq!((got.name.as_str(), got.latency_ms), (op.name.as_str(), 2.0 * op.latency_ms));
    }
    for (got, op) in summary.decode.operations.iter().zip(&decode_ops) {
        assert_eq!((got.name.as_str(), got.latency_ms), (op.name.as_str(), op.latency_ms));
    }
    // The per-op walk and the total agree up to summation order.
    assert!((summary.decode.latency_ms - d).abs() <= 1e-12 * d, "{} vs {d}", summary.decode.latency_ms);
    assert!((summary.prefill.latency_ms - 2.0 * p).abs() <= 1e-12 * p);

    model.reset_evidence().unwrap();
    let empty = model.evidence_summary().unwrap();
    assert_eq!((empty.prefill.latency_ms, empty.decode.latency_ms), (0.0, 0.0));
    model.predict_decode_ms(8, 8 * 2500, 2500, 1 << 20).unwrap();
    assert_eq!(model.stats().engine_calls, 2, "the memo survives the reset");
    assert_eq!(model.evidence_summary().unwrap().decode.latency_ms, summary.decode.latency_ms);
}
