//! The empirical (utilisation transfer) estimate (spec 20 §0.6): the utilisation
//! `SOL / latency` of collected points, normalised in log space per axis, read at the query by
//! inverse-distance weighting of the two nearest samples (query clamped to the collected
//! range), and the nearest-reference choice used by the transfer ladders. Every answered
//! estimate notes its provenance tier (own slice or which transfer) through [`estimate`].

pub(crate) use crate::engine::provenance::ProvenanceTier;
use crate::engine::provenance::note;
use crate::error::AicError;

use super::{OpValue, Source};

/// The result of an empirical estimate (energy 0, tag `empirical`), noting that an estimate
/// of `tier` answered for the call in progress.
pub(crate) fn estimate(latency: f64, tier: ProvenanceTier) -> OpValue {
    note(tier);
    OpValue::new(latency, 0.0, Source::Empirical)
}

/// Utilisation at `query` from collected points `(coordinates, latency)`; `sol` is the op's
/// roofline evaluated at a sample's coordinates. `None` when no sample has positive util.
pub(crate) fn util_at<'a>(
    points: impl Iterator<Item = (&'a [u64], f64)>,
    sol: &dyn Fn(&[f64]) -> f64,
    query: &[f64],
) -> Option<f64> {
    util_near(points, sol, query, 2)
}

/// As [`util_at`], weighting the `neighbours` (1 or 2) nearest samples.
pub(crate) fn util_near<'a>(
    points: impl Iterator<Item = (&'a [u64], f64)>,
    sol: &dyn Fn(&[f64]) -> f64,
    query: &[f64],
    neighbours: usize,
) -> Option<f64> {
    let dims = query.len();
    let mut logs: Vec<f64> = Vec::new();
    let mut utils: Vec<f64> = Vec::new();
    let mut raw = vec![0.0; dims];
    for (c, latency) in points {
        for (r, v) in raw.iter_mut().zip(c) {
            *r = *v as f64;
        }
        let s = sol(&raw);
        if !(latency > 0.0 && latency.is_finite() && s > 0.0 && s.is_finite()) {
            continue;
        }
        logs.extend(raw.iter().map(|v| v.max(1e-9).ln()));
        utils.push(s / latency);
    }
    if utils.is_empty() {
        return None;
    }
    let n = utils.len();
    let mut min = vec![f64::INFINITY; dims];
    let mut max = vec![f64::NEG_INFINITY; dims];
    for i in 0..n {
        for a in 0..dims {
            let v = logs[i * dims + a];
            min[a] = min[a].min(v);
            max[a] = max[a].max(v);
        }
    }
    let span: Vec<f64> = (0..dims).map(|a| if max[a] - min[a] == 0.0 { 1.0 } else { max[a] - min[a] }).collect();
    let q: Vec<f64> = (0..dims)
        .map(|a| ((query[a].max(1e-9).ln() - min[a]) / span[a]).clamp(0.0, 1.0))
        .collect();
    let mut best: [(f64, usize); 2] = [(f64::INFINITY, usize::MAX); 2];
    for i in 0..n {
        let mut d2 = 0.0;
        for a in 0..dims {
            let diff = (logs[i * dims + a] - min[a]) / span[a] - q[a];
            d2 += diff * diff;
        }
        let d = d2.sqrt();
        if d < best[0].0 {
            best[1] = best[0];
            best[0] = (d, i);
        } else if d < best[1].0 {
            best[1] = (d, i);
        }
    }
    let (d0, i0) = best[0];
    if d0 == 0.0 || best[1].1 == usize::MAX || neighbours < 2 {
        return Some(utils[i0]);
    }
    let (d1, i1) = best[1];
    Some((utils[i0] / d0 + utils[i1] / d1) / (1.0 / d0 + 1.0 / d1))
}

/// Index of the candidate nearest to `query` in log space normalised over the candidates
/// (no clamping; first wins ties).
pub(crate) fn nearest_candidate(candidates: &[Vec<f64>], query: &[f64]) -> Option<usize> {
    let first = candidates.first()?;
    let dims = first.len();
    let ln = |v: f64| v.max(1e-9).ln();
    let mut min = vec![f64::INFINITY; dims];
    let mut max = vec![f64::NEG_INFINITY; dims];
    for c in candidates {
        for a in 0..dims {
            min[a] = min[a].min(ln(c[a]));
            max[a] = max[a].max(ln(c[a]));
        }
    }
    let span: Vec<f64> = (0..dims).map(|a| if max[a] - min[a] == 0.0 { 1.0 } else { max[a] - min[a] }).collect();
    let mut best = (f64::INFINITY, 0usize);
    for (i, c) in candidates.iter().enumerate() {
        let d2: f64 = (0..dims)
            .map(|a| {
                let diff = (ln(c[a]) - min[a]) / span[a] - (ln(query[a]) - min[a]) / span[a];
                diff * diff
            })
            .sum();
        if d2 < best.0 {
            best = (d2, i);
        }
    }
    Some(best.1)
}

/// The error when no transfer source exists.
pub(crate) fn not_implemented(query: &[f64]) -> AicError {
    let q: Vec<String> = query.iter().map(|v| format!("{v:?}")).collect();
    AicError::EmpiricalNotImplemented(format!(
        "No empirical utilisation data to estimate this op at query=[{}]: no own-shape, \
         cross-shape, or sibling transfer reference available.",
        q.join(", ")
    ))
}
