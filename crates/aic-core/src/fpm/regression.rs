//! Regression fallback fits (spec 42 §9): a non-negative linear least-squares fit over every
//! subset of active slopes, a weighted hinge for prefill, and the small dense solver both use.

/// A fitted latency model over one workload kind's features.
#[derive(Debug, Clone, PartialEq)]
pub enum RegressionFit {
    /// `y = intercept + Σ slopes[j]·x[j]` (slopes ≥ 0).
    Linear {
        /// Intercept `a`.
        intercept: f64,
        /// Slopes `b_j` (inactive ones are 0).
        slopes: Vec<f64>,
    },
    /// `y = intercept + slope·x + hinge_slope·max(x − knot, 0)` (1-D).
    Hinge {
        /// Intercept `a`.
        intercept: f64,
        /// Slope below the knot `b` (≥ 0).
        slope: f64,
        /// Slope change at the knot `c` (`b + c ≥ 0`).
        hinge_slope: f64,
        /// Knot position `k`.
        knot: f64,
    },
}

impl RegressionFit {
    /// The fitted value at `x` (not floored).
    pub fn predict(&self, x: &[f64]) -> f64 {
        match self {
            RegressionFit::Linear { intercept, slopes } => {
                let mut y = *intercept;
                for (b, v) in slopes.iter().zip(x) {
                    y += b * v;
                }
                y
            }
            RegressionFit::Hinge { intercept, slope, hinge_slope, knot } => {
                let v = x[0];
                intercept + slope * v + hinge_slope * (v - knot).max(0.0)
            }
        }
    }
}

const PIVOT_EPS: f64 = 1e-12;

/// Gauss–Jordan elimination with partial pivoting (the last row wins pivot ties); `None` when
/// a pivot's magnitude is below 1e-12.
pub fn gauss_jordan(mut a: Vec<Vec<f64>>, mut b: Vec<f64>) -> Option<Vec<f64>> {
    let n = b.len();
    for col in 0..n {
        let mut pivot = col;
        let mut best = a[col][col].abs();
        for (r, row) in a.iter().enumerate().skip(col + 1) {
            let v = row[col].abs();
            if v >= best {
                best = v;
                pivot = r;
            }
        }
        if best.is_nan() || best < PIVOT_EPS {
            return None;
        }
        a.swap(col, pivot);
        b.swap(col, pivot);
        let p = a[col][col];
        for v in &mut a[col][col..] {
            *v /= p;
        }
        b[col] /= p;
        let pivot_row = a[col].clone();
        for (r, row) in a.iter_mut().enumerate() {
            let f = row[col];
            if r == col || f == 0.0 {
                continue;
            }
            for (v, pv) in row[col..].iter_mut().zip(&pivot_row[col..]) {
                *v -= f * pv;
            }
            b[r] -= f * b[col];
        }
    }
    Some(b)
}

/// Solves a normal-equation system whose unknown 0 is the intercept; on failure retries once
/// with a ridge `1e-9·max(Σ|diag|, 1)` on every other diagonal entry.
pub fn solve_normal(a: Vec<Vec<f64>>, b: Vec<f64>) -> Option<Vec<f64>> {
    if let Some(x) = gauss_jordan(a.clone(), b.clone()) {
        return Some(x);
    }
    let trace: f64 = (0..b.len()).map(|i| a[i][i].abs()).sum();
    let ridge = 1e-9 * trace.max(1.0);
    let mut a = a;
    for (i, row) in a.iter_mut().enumerate().skip(1) {
        row[i] += ridge;
    }
    gauss_jordan(a, b)
}

/// Normal equations `(XᵀX, Xᵀy)` of weighted rows.
fn normal_equations(rows: &[(Vec<f64>, f64)]) -> (Vec<Vec<f64>>, Vec<f64>) {
    let p = rows.first().map_or(0, |r| r.0.len());
    let mut xtx = vec![vec![0.0; p]; p];
    let mut xty = vec![0.0; p];
    for (row, y) in rows {
        for i in 0..p {
            for j in 0..p {
                xtx[i][j] += row[i] * row[j];
            }
            xty[i] += row[i] * y;
        }
    }
    (xtx, xty)
}

/// Non-negative linear least squares over every subset of active slopes; `None` when there
/// are fewer than `min_observations` samples, no subset solves, or (with more samples than
/// dimensions) no slope is positive.
pub fn fit_nonnegative_linear(samples: &[(&[f64], f64)], dim: usize, min_observations: usize) -> Option<RegressionFit> {
    let n = samples.len();
    if n == 0 || n < min_observations {
        return None;
    }
    let mut best: Option<(f64, f64, Vec<f64>)> = None;
    for mask in 0..(1usize << dim) {
        let active: Vec<usize> = (0..dim).filter(|j| mask >> j & 1 == 1).collect();
        let rows: Vec<(Vec<f64>, f64)> = samples
            .iter()
            .map(|(x, y)| {
                let mut row = Vec::with_capacity(active.len() + 1);
                row.push(1.0);
                row.extend(active.iter().map(|&j| x[j]));
                (row, *y)
            })
            .collect();
        let (xtx, xty) = normal_equations(&rows);
        let Some(theta) = solve_normal(xtx, xty) else { continue };
        if theta.iter().any(|v| !v.is_finite()) || theta[1..].iter().any(|b| *b < 0.0) {
            continue;
        }
        let mut slopes = vec![0.0; dim];
        for (k, &j) in active.iter().enumerate() {
            slopes[j] = theta[k + 1];
        }
        let intercept = theta[0];
        let mut ssr = 0.0;
        for (x, y) in samples {
            let mut pred = intercept;
            for (b, v) in slopes.iter().zip(x.iter()) {
                pred += b * v;
            }
            let r = y - pred;
            ssr += r * r;
        }
        if best.as_ref().is_none_or(|(s, _, _)| ssr < *s) {
            best = Some((ssr, intercept, slopes));
        }
    }
    let (_, intercept, slopes) = best?;
    if n <= dim || slopes.iter().any(|b| *b > 0.0) {
        Some(RegressionFit::Linear { intercept, slopes })
    } else {
        None
    }
}

/// Candidate knots of the hinge fit over 1-D samples (§9).
pub fn hinge_knots(xs: &[f64]) -> Vec<f64> {
    let mut distinct: Vec<f64> = xs.to_vec();
    distinct.sort_by(f64::total_cmp);
    distinct.dedup();
    let m = distinct.len();
    if m < 3 {
        return Vec::new();
    }
    let (lo, hi) = (distinct[0], distinct[m - 1]);
    let mut cands: Vec<f64> = (1..=4).map(|j| distinct[j * (m - 1) / 5]).collect();
    if lo > 0.0 {
        let (ll, lh) = (lo.ln(), hi.ln());
        for i in 1..=8 {
            let t = i as f64 / 9.0;
            cands.push((ll + t * (lh - ll)).exp());
        }
    }
    cands.retain(|k| *k > lo && *k < hi);
    cands.sort_by(f64::total_cmp);
    let mut knots: Vec<f64> = Vec::with_capacity(cands.len());
    for k in cands {
        if let Some(last) = knots.last() {
            if (k - last).abs() <= 1e-9 * k.abs().max(last.abs()).max(1.0) {
                continue;
            }
        }
        knots.push(k);
    }
    knots
}

/// Weighted hinge fit over 1-D samples (weights `1/max(y, 25)`); the knot with the lowest
/// weighted RMS wins. `None` when no knot gives an admissible fit.
pub fn fit_weighted_hinge(samples: &[(&[f64], f64)]) -> Option<RegressionFit> {
    let xs: Vec<f64> = samples.iter().map(|(x, _)| x[0]).collect();
    let mut best: Option<(f64, RegressionFit)> = None;
    for knot in hinge_knots(&xs) {
        let rows: Vec<(Vec<f64>, f64)> = samples
            .iter()
            .map(|(x, y)| {
                let w = 1.0 / y.max(25.0);
                let v = x[0];
                (vec![w, w * v, w * (v - knot).max(0.0)], w * y)
            })
            .collect();
        let (xtx, xty) = normal_equations(&rows);
        let Some(theta) = solve_normal(xtx, xty) else { continue };
        let (a, b, c) = (theta[0], theta[1], theta[2]);
        let upper = b + c;
        if !(a.is_finite() && b.is_finite() && upper.is_finite()) || b < -1e-6 || upper < -1e-6 {
            continue;
        }
        let b = b.max(0.0);
        let c = upper.max(0.0) - b;
        let fit = RegressionFit::Hinge { intercept: a, slope: b, hinge_slope: c, knot };
        let mut sq = 0.0;
        for (x, y) in samples {
            let w = 1.0 / y.max(25.0);
            let r = w * (fit.predict(x) - y);
            sq += r * r;
        }
        let score = (sq / samples.len() as f64).sqrt();
        if best.as_ref().is_none_or(|(s, _)| score < *s) {
            best = Some((score, fit));
        }
    }
    best.map(|(_, f)| f)
}

/// The fit of one kind's samples: the weighted hinge for 1-D data with at least
/// `max(min_observations, 6)` samples when it succeeds, else the non-negative linear fit.
pub fn fit_samples(samples: &[(&[f64], f64)], dim: usize, min_observations: usize) -> Option<RegressionFit> {
    if dim == 1 && samples.len() >= min_observations.max(6) {
        if let Some(fit) = fit_weighted_hinge(samples) {
            return Some(fit);
        }
    }
    fit_nonnegative_linear(samples, dim, min_observations)
}
