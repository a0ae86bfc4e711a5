//! A precomputed candidate index for the utilisation hold (spec 11 §1.4) of one op.
//!
//! The hold needs the few leaves nearest to the query in joint log2 space. An op always queries
//! its grid with the same leading coordinates (an attention op's head count), so only the last
//! two axes vary. [`HoldIndex`] cuts the box spanned by the leaves on those two axes into cells
//! and keeps, per cell, every leaf that can be among the `NEAR` nearest for *some* query inside
//! the cell: a leaf whose smallest possible distance to the cell does not exceed the `NEAR`-th
//! smallest largest-possible distance of any leaf. A query then ranks only its cell's list,
//! with the same arithmetic and the same (distance, key order) tie rule as the full
//! branch-and-bound walk, so the anchors, and hence the result, are identical. Queries outside
//! the box, or with other leading coordinates, take the full walk.

use std::sync::OnceLock;

use super::grid::{Grid, Nearest, NEAR};

/// Cells per varying axis.
const CELLS_PER_AXIS: usize = 128;

/// Candidate leaves per cell for one grid and one set of leading (fixed) query coordinates.
/// Each cell's list is computed on the first query that lands in it (a pass over the leaves,
/// tens of microseconds), so building the index costs one pass and untouched cells cost nothing.
#[derive(Debug)]
pub struct HoldIndex {
    /// `log2` of the fixed leading query coordinates (compared exactly at query time).
    fixed_log2: Vec<f64>,
    /// Per leaf (flat index), the squared log2 distance over the fixed axes; NaN for leaves the
    /// hold never considers (latency not positive and finite).
    offsets: Vec<f64>,
    /// The leaves the hold considers, ascending.
    usable: Vec<u32>,
    /// Per leaf (flat index), the SOL the index was built with at the leaf's coordinates (NaN
    /// for leaves the hold never considers): the hold reads anchors' SOL from here.
    leaf_sol: Vec<f64>,
    /// Lower corner of the box on the two varying axes (log2).
    lo: [f64; 2],
    /// Upper corner of the box on the two varying axes (log2).
    hi: [f64; 2],
    /// Cell size per varying axis (log2 units).
    step: [f64; 2],
    /// Cells per varying axis.
    cells: [usize; 2],
    /// Per cell, its candidate leaves in ascending flat (key) order, once computed.
    candidates: Vec<OnceLock<Box<[u32]>>>,
}

impl HoldIndex {
    /// Builds the index of `grid` for queries whose leading `grid.depth() − 2` coordinates are
    /// `fixed` (raw values, e.g. `[num_heads]`), for holds under the SOL function `sol` (the
    /// index caches each leaf's SOL, so it must only serve lookups with this same `sol`).
    /// `None` for grids with fewer than two axes, a `fixed` of the wrong length, or no usable
    /// leaf.
    pub fn build(grid: &Grid, fixed: &[f64], sol: &dyn Fn(&[f64]) -> f64) -> Option<HoldIndex> {
        let d = grid.depth();
        if d < 2 || fixed.len() != d - 2 {
            return None;
        }
        let fixed_log2: Vec<f64> = fixed.iter().map(|&v| super::grid::log2_clamped(v)).collect();
        let coords = grid.coords_log2();
        let leaves = grid.leaves();
        let mut offsets = vec![f64::NAN; leaves.len()];
        let mut leaf_sol = vec![f64::NAN; leaves.len()];
        let mut point = [0.0f64; 8];
        let mut lo = [f64::INFINITY; 2];
        let mut hi = [f64::NEG_INFINITY; 2];
        let mut usable: Vec<u32> = Vec::new();
        for (i, leaf) in leaves.iter().enumerate() {
            if !(leaf.latency > 0.0 && leaf.latency.is_finite()) {
                continue;
            }
            let c = &coords[i * d..(i + 1) * d];
            // The same accumulation order as the walk: ((0 + d0²) + d1²) + ...
            let mut off = 0.0;
            for (a, &q) in fixed_log2.iter().enumerate() {
                off += (c[a] - q) * (c[a] - q);
            }
            offsets[i] = off;
            for (slot, &c) in point.iter_mut().zip(grid.coords_of(i)) {
                *slot = c as f64;
            }
            leaf_sol[i] = sol(&point[..d]);
            for v in 0..2 {
                lo[v] = lo[v].min(c[d - 2 + v]);
                hi[v] = hi[v].max(c[d - 2 + v]);
            }
            usable.push(i as u32);
        }
        if usable.is_empty() {
            return None;
        }
        let mut cells = [1usize; 2];
        let mut step = [1.0f64; 2];
        for v in 0..2 {
            let span = hi[v] - lo[v];
            if span > 0.0 {
                cells[v] = CELLS_PER_AXIS;
                step[v] = span / CELLS_PER_AXIS as f64;
            }
        }
        let candidates = (0..cells[0] * cells[1]).map(|_| OnceLock::new()).collect();
        Some(HoldIndex { fixed_log2, offsets, usable, leaf_sol, lo, hi, step, cells, candidates })
    }

    /// The candidate leaves of cell `(cx, cy)`: every usable leaf whose smallest possible
    /// squared distance to the cell is within the `NEAR`-th smallest largest-possible one.
    fn cell_candidates(&self, grid: &Grid, cx: usize, cy: usize) -> Box<[u32]> {
        let d = grid.depth();
        let coords = grid.coords_log2();
        let rect = [cell_range(self.lo[0], self.step[0], cx), cell_range(self.lo[1], self.step[1], cy)];
        let at = |i: u32| &coords[i as usize * d..(i as usize + 1) * d];
        let mut upper: Vec<f64> = self
            .usable
            .iter()
            .map(|&i| {
                let c = at(i);
                self.offsets[i as usize] + far2(c[d - 2], rect[0]) + far2(c[d - 1], rect[1])
            })
            .collect();
        let k = NEAR.min(upper.len());
        let (_, kth, _) = upper.select_nth_unstable_by(k - 1, f64::total_cmp);
        // Rounding slack: the query-time distances are computed in another order.
        let bound = *kth * (1.0 + 1e-9) + 1e-12;
        self.usable
            .iter()
            .copied()
            .filter(|&i| {
                let c = at(i);
                self.offsets[i as usize] + near2(c[d - 2], rect[0]) + near2(c[d - 1], rect[1]) <= bound
            })
            .collect()
    }

    /// Fills `near` with the nearest usable leaves of `ql` (the query in log2, all axes) and
    /// returns true, or returns false (leaving `near` untouched) when the query is outside the
    /// box or its leading coordinates are not the ones the index was built for.
    pub(crate) fn nearest(&self, grid: &Grid, ql: &[f64], near: &mut Nearest) -> bool {
        let d = ql.len();
        if ql[..d - 2] != self.fixed_log2[..] {
            return false;
        }
        let mut cell = [0usize; 2];
        for v in 0..2 {
            let q = ql[d - 2 + v];
            if !(q >= self.lo[v] && q <= self.hi[v]) {
                return false;
            }
            cell[v] = (((q - self.lo[v]) / self.step[v]) as usize).min(self.cells[v] - 1);
        }
        let list = self.candidates[cell[0] * self.cells[1] + cell[1]]
            .get_or_init(|| self.cell_candidates(grid, cell[0], cell[1]));
        let coords = grid.coords_log2();
        let (x, y) = (ql[d - 2], ql[d - 1]);
        for &i in list.iter() {
            let p = &coords[i as usize * d..(i as usize + 1) * d];
            let sum = (self.offsets[i as usize] + (p[d - 2] - x) * (p[d - 2] - x)) + (p[d - 1] - y) * (p[d - 1] - y);
            near.offer(sum.sqrt(), i);
        }
        true
    }

    /// The cached SOL at leaf `i`'s coordinates (NaN for a leaf the hold never considers).
    #[inline]
    pub(crate) fn leaf_sol(&self, i: usize) -> f64 {
        self.leaf_sol[i]
    }

    /// Candidate entries over the cells computed so far (a size measure for tests and tuning).
    pub fn candidate_entries(&self) -> usize {
        self.candidates.iter().filter_map(OnceLock::get).map(|c| c.len()).sum()
    }
}

/// The closed range of cell `i` on one axis, widened slightly so that a query the cell lookup
/// assigns to it lies inside despite rounding.
fn cell_range(lo: f64, step: f64, i: usize) -> (f64, f64) {
    let a = lo + step * i as f64;
    let b = lo + step * (i + 1) as f64;
    let slack = 1e-9 * (1.0 + a.abs().max(b.abs()));
    (a - slack, b + slack)
}

/// Squared distance from `c` to the nearest point of `range`.
fn near2(c: f64, range: (f64, f64)) -> f64 {
    let gap = if c < range.0 {
        range.0 - c
    } else if c > range.1 {
        c - range.1
    } else {
        0.0
    };
    gap * gap
}

/// Squared distance from `c` to the farthest point of `range`.
fn far2(c: f64, range: (f64, f64)) -> f64 {
    let gap = (c - range.0).abs().max((range.1 - c).abs());
    gap * gap
}
