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
    Samples::prepare(points, sol, query.len()).map(|s| s.util_near(query, neighbours))
}

/// The samples of one slice under one roofline, prepared for queries: each usable point's
/// coordinates in normalised log space and its utilisation `SOL / latency`. They depend on
/// the slice and the roofline only, so an op that asks many shapes of one slice prepares them
/// once ([`Samples::util_near`] answers exactly what [`util_near`] answers).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Samples {
    dims: usize,
    /// `(ln(c) − min) / span` per sample and axis, sample-major.
    normalised: Vec<f64>,
    utils: Vec<f64>,
    min: Vec<f64>,
    span: Vec<f64>,
}

impl Samples {
    /// The usable samples of `points` (positive finite latency and SOL); `None` when none is.
    pub(crate) fn prepare<'a>(
        points: impl Iterator<Item = (&'a [u64], f64)>,
        sol: &dyn Fn(&[f64]) -> f64,
        dims: usize,
    ) -> Option<Samples> {
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
        let normalised = (0..n * dims).map(|j| (logs[j] - min[j % dims]) / span[j % dims]).collect();
        Some(Samples { dims, normalised, utils, min, span })
    }

    /// Utilisation at `query` (clamped to the collected range in normalised log space) by
    /// inverse-distance weighting of the `neighbours` (1 or 2) nearest samples.
    pub(crate) fn util_near(&self, query: &[f64], neighbours: usize) -> f64 {
        let dims = self.dims;
        let q: Vec<f64> = (0..dims)
            .map(|a| ((query[a].max(1e-9).ln() - self.min[a]) / self.span[a]).clamp(0.0, 1.0))
            .collect();
        let mut best: [(f64, usize); 2] = [(f64::INFINITY, usize::MAX); 2];
        for (i, row) in self.normalised.chunks_exact(dims).enumerate() {
            let mut d2 = 0.0;
            for a in 0..dims {
                let diff = row[a] - q[a];
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
        let utils = &self.utils;
        let (d0, i0) = best[0];
        if d0 == 0.0 || best[1].1 == usize::MAX || neighbours < 2 {
            return utils[i0];
        }
        let (d1, i1) = best[1];
        (utils[i0] / d0 + utils[i1] / d1) / (1.0 / d0 + 1.0 / d1)
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The reference walk, written out as spec 20 §0.6 states it: every query recomputes the
    /// samples' SOL, logarithms and normalisation.
    fn walk(points: &[(Vec<u64>, f64)], sol: &dyn Fn(&[f64]) -> f64, query: &[f64], neighbours: usize) -> Option<f64> {
        let dims = query.len();
        let (mut logs, mut utils) = (Vec::new(), Vec::new());
        for (c, latency) in points {
            let raw: Vec<f64> = c.iter().map(|v| *v as f64).collect();
            let s = sol(&raw);
            if !(*latency > 0.0 && latency.is_finite() && s > 0.0 && s.is_finite()) {
                continue;
            }
            logs.extend(raw.iter().map(|v| v.max(1e-9).ln()));
            utils.push(s / latency);
        }
        let n = utils.len();
        if n == 0 {
            return None;
        }
        let (mut min, mut max) = (vec![f64::INFINITY; dims], vec![f64::NEG_INFINITY; dims]);
        for i in 0..n {
            for a in 0..dims {
                min[a] = min[a].min(logs[i * dims + a]);
                max[a] = max[a].max(logs[i * dims + a]);
            }
        }
        let span: Vec<f64> = (0..dims).map(|a| if max[a] - min[a] == 0.0 { 1.0 } else { max[a] - min[a] }).collect();
        let q: Vec<f64> = (0..dims).map(|a| ((query[a].max(1e-9).ln() - min[a]) / span[a]).clamp(0.0, 1.0)).collect();
        let mut best = [(f64::INFINITY, usize::MAX); 2];
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
        let ((d0, i0), (d1, i1)) = (best[0], best[1]);
        if d0 == 0.0 || i1 == usize::MAX || neighbours < 2 {
            return Some(utils[i0]);
        }
        Some((utils[i0] / d0 + utils[i1] / d1) / (1.0 / d0 + 1.0 / d1))
    }

    #[test]
    fn prepared_samples_answer_bit_for_bit_what_the_walk_answers() {
        // A 3-D grid with a skewed latency surface, one unusable sample and exact-hit queries.
        let mut points = Vec::new();
        for (i, m) in [1_u64, 8, 64, 512, 4096].into_iter().enumerate() {
            for (j, n) in [1024_u64, 4096, 8192].into_iter().enumerate() {
                let latency = 0.01 * (m as f64).powf(0.8) * (1.0 + 0.1 * j as f64) + 0.003 * i as f64;
                points.push((vec![m, n, 5120], latency));
            }
        }
        points.push((vec![2, 2048, 5120], 0.0));
        let sol = |c: &[f64]| 2.0 * c[0] * c[1] * c[2] / 989e12 * 1e3;
        let samples = Samples::prepare(points.iter().map(|(c, l)| (c.as_slice(), *l)), &sol, 3).unwrap();
        for q in [[1.0, 1024.0, 5120.0], [3.0, 3000.0, 5120.0], [100.0, 8192.0, 5120.0], [1e6, 1.0, 5120.0], [512.0, 4096.0, 5120.0]] {
            for k in [1, 2] {
                let want = walk(&points, &sol, &q, k).unwrap();
                assert_eq!(samples.util_near(&q, k).to_bits(), want.to_bits(), "{q:?} k={k}");
            }
        }
        assert!(Samples::prepare(std::iter::empty(), &sol, 3).is_none());
    }
}
