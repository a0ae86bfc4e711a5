//! Phase evidence for aisimulate-core's power figures: aic's per-op latency and energy (W·ms,
//! from the perf tables that carry power) for every step a replay priced, weighted by how often
//! it priced it.
//!
//! It exists apart from [`crate::timing`] because it is computed once, after the replay, from the
//! memo of distinct steps ([`Engine::prefill_per_op`], [`Engine::decode_step_per_op`] once per
//! distinct argument tuple), so the replay's hot path pays nothing for it.

use aic_core::{Engine, OpResult};
use aisimulate_core::engine::{TimingEvidenceSource, TimingOperationEvidence, TimingPhaseEvidence};

use crate::timing::{Memo, StepKey};

/// Which phase's steps to collect.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PhaseKind {
    Prefill,
    Decode,
}

/// The per-op results of one step, straight from the engine.
fn step_ops(engine: &Engine, key: StepKey) -> aic_core::Result<Vec<OpResult>> {
    match key {
        StepKey::Prefill { batch, isl, prefix } => engine.prefill_per_op(batch, isl, prefix),
        StepKey::Decode { batch, isl } => engine.decode_step_per_op(batch, isl, 0, 1.0),
    }
}

/// The evidence of one operation used `uses` times. An op without energy (its table carries no
/// power, or an analytic op) is latency-only evidence, never a zero-watt measurement.
fn operation(op: &OpResult, uses: u64) -> anyhow::Result<TimingOperationEvidence> {
    let n = uses as f64;
    let energy = (op.energy_wms > 0.0).then_some(op.energy_wms * n);
    TimingOperationEvidence::new(
        op.name.clone(),
        op.latency_ms * n,
        energy,
        TimingEvidenceSource::from_provider(op.source.as_str()),
    )
}

/// The accumulated evidence of one phase over the used memo entries (in key order, so the sums
/// are the same bits on every run).
pub(crate) fn phase_evidence(
    engine: &Engine,
    kind: PhaseKind,
    used: &[(StepKey, Memo)],
) -> anyhow::Result<TimingPhaseEvidence> {
    let mut operations = Vec::new();
    for (key, memo) in used {
        let wanted = matches!(
            (kind, key),
            (PhaseKind::Prefill, StepKey::Prefill { .. }) | (PhaseKind::Decode, StepKey::Decode { .. })
        );
        if !wanted {
            continue;
        }
        for op in step_ops(engine, *key)? {
            operations.push(operation(&op, memo.uses)?);
        }
    }
    TimingPhaseEvidence::try_from_operations(operations)
}

#[cfg(test)]
mod tests {
    use aic_core::Source;

    use super::*;

    fn op(name: &str, latency_ms: f64, energy_wms: f64) -> OpResult {
        OpResult { name: name.into(), latency_ms, energy_wms, source: Source::Silicon }
    }

    #[test]
    fn energy_scales_with_uses_and_missing_energy_is_latency_only() {
        let measured = operation(&op("gemm", 2.0, 1400.0), 3).unwrap();
        assert_eq!((measured.latency_ms, measured.energy_wms, measured.covered_latency_ms), (6.0, Some(4200.0), 6.0));
        assert_eq!(measured.source, TimingEvidenceSource::Silicon);
        let unmeasured = operation(&op("norm", 0.5, 0.0), 4).unwrap();
        assert_eq!((unmeasured.latency_ms, unmeasured.energy_wms, unmeasured.covered_latency_ms), (2.0, None, 0.0));
        let phase = TimingPhaseEvidence::try_from_operations(vec![measured, unmeasured]).unwrap();
        assert_eq!((phase.latency_ms, phase.energy_wms, phase.covered_latency_ms), (8.0, Some(4200.0), 6.0));
    }
}
