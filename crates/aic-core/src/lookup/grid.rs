//! The Grid resolver (spec 11 §1.1–§1.4): nested sorted axes, exact hits, bracketed blends
//! (linear, or in sqrt space on a table's sequence axis), ragged rescales by the SOL ratio,
//! and the multi-axis utilisation hold when the query leaves the collected range.

use crate::fast_hash::FastHashSet;

use super::hold_index::HoldIndex;
use super::{lerp, sol_ratio, sqrt_lerp, Leaf, Miss, Val};

/// Most axes a grid can have.
const MAX_AXES: usize = 4;

/// Most queries [`Grid::lookup_many_indexed`] resolves in one walk (longer runs are split).
const MAX_MANY: usize = 8;

/// A grid key padded to [`MAX_AXES`] (unused trailing axes are 0).
type Key = [u64; MAX_AXES];

/// Collects rows first-wins, then builds a [`Grid`].
#[derive(Debug, Clone)]
pub struct GridBuilder {
    depth: usize,
    keys: Vec<Key>,
    leaves: Vec<Leaf>,
    seen: FastHashSet<Key>,
}

impl GridBuilder {
    /// A builder for a grid with `depth` axes (outer first, at most 4).
    pub fn new(depth: usize) -> Self {
        assert!((1..=MAX_AXES).contains(&depth), "a grid has 1 to {MAX_AXES} axes, not {depth}");
        GridBuilder { depth, keys: Vec::new(), leaves: Vec::new(), seen: FastHashSet::default() }
    }

    fn pad(&self, key: &[u64]) -> Key {
        debug_assert_eq!(key.len(), self.depth);
        let mut k = [0u64; MAX_AXES];
        k[..self.depth].copy_from_slice(&key[..self.depth]);
        k
    }

    /// Inserts a point unless its key is already present (first wins). Returns true if inserted.
    pub fn insert(&mut self, key: impl AsRef<[u64]>, leaf: Leaf) -> bool {
        let k = self.pad(key.as_ref());
        if !self.seen.insert(k) {
            return false;
        }
        self.keys.push(k);
        self.leaves.push(leaf);
        true
    }

    /// True if the key is present.
    pub fn contains(&self, key: &[u64]) -> bool {
        self.seen.contains(&self.pad(key))
    }

    /// Number of points.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// True when no point was inserted.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// The inserted rows without the first-wins index, in as little memory as they take: for
    /// rows kept until their grid is first used (the attention tables hold thousands of slices
    /// and a query reads a few), the index and the growth slack were most of what they held.
    pub fn into_rows(self) -> GridRows {
        let GridBuilder { depth, mut keys, mut leaves, seen } = self;
        drop(seen);
        keys.shrink_to_fit();
        leaves.shrink_to_fit();
        GridRows { depth, keys, leaves }
    }

    /// Builds the grid; `sqrt_axis` is the axis blended in sqrt space, if any.
    pub fn build(self, sqrt_axis: Option<usize>) -> Grid {
        let GridBuilder { depth, keys, leaves, .. } = self;
        GridRows { depth, keys, leaves }.build(sqrt_axis)
    }
}

/// The rows of a [`GridBuilder`] after the last insert (see [`GridBuilder::into_rows`]).
#[derive(Debug, Clone)]
pub struct GridRows {
    depth: usize,
    keys: Vec<Key>,
    leaves: Vec<Leaf>,
}

impl GridRows {
    /// Builds the grid; `sqrt_axis` is the axis blended in sqrt space, if any.
    pub fn build(self, sqrt_axis: Option<usize>) -> Grid {
        let depth = self.depth;
        // Keys are unique, so the unstable sort is deterministic.
        let mut points: Vec<(Key, Leaf)> = self.keys.into_iter().zip(self.leaves).collect();
        points.sort_unstable_by_key(|p| p.0);
        let root = build_node(&points, 0, depth, 0);
        let coords: Vec<u64> = points.iter().flat_map(|(k, _)| k[..depth].iter().copied()).collect();
        let coords_log2 = coords.iter().map(|&c| log2_clamped(c as f64)).collect();
        let leaves: Vec<Leaf> = points.into_iter().map(|(_, l)| l).collect();
        let usable = leaves.iter().filter(|l| l.latency > 0.0 && l.latency.is_finite()).count();
        Grid { depth, root, coords, coords_log2, leaves, usable, sqrt_axis }
    }
}

fn build_node(points: &[(Key, Leaf)], level: usize, depth: usize, first: usize) -> Node {
    let mut keys = Vec::new();
    let mut spans: Vec<(usize, usize)> = Vec::new();
    let mut start = 0;
    while start < points.len() {
        let key = points[start].0[level];
        let mut end = start + 1;
        while end < points.len() && points[end].0[level] == key {
            end += 1;
        }
        keys.push(key);
        spans.push((start, end));
        start = end;
    }
    let kids = if level + 1 == depth {
        Kids::Leaves(spans.iter().map(|&(s, _)| points[s].1).collect())
    } else {
        Kids::Nodes(spans.iter().map(|&(s, e)| build_node(&points[s..e], level + 1, depth, first + s)).collect())
    };
    let keys: Vec<f64> = keys.iter().map(|&k| k as f64).collect();
    let keys_log2 = keys.iter().map(|&k| log2_clamped(k)).collect();
    Node { keys, keys_log2, first, kids }
}

#[inline]
pub(super) fn log2_clamped(v: f64) -> f64 {
    v.max(1e-12).log2()
}

#[derive(Debug, Clone)]
struct Node {
    /// The axis values under this node, ascending, as `f64` (exact: table keys are far below
    /// 2^53), so a query coordinate compares without conversions.
    keys: Vec<f64>,
    /// `log2(max(key, 1e-12))` of `keys` (hold distances).
    keys_log2: Vec<f64>,
    /// Flat index of this node's first leaf (leaves are stored in ascending key order).
    first: usize,
    kids: Kids,
}

/// The `NEAR` nearest leaves seen so far, ordered by (distance, flat index).
pub(crate) struct Nearest {
    items: [(f64, u32); NEAR],
    len: usize,
}

/// How many nearest leaves the hold collects before checking their SOL.
pub(super) const NEAR: usize = 8;

impl Nearest {
    fn worst(&self) -> f64 {
        if self.len < NEAR {
            f64::INFINITY
        } else {
            self.items[NEAR - 1].0
        }
    }

    pub(crate) fn offer(&mut self, dist: f64, idx: u32) {
        if self.len == NEAR && !((dist, idx) < self.items[NEAR - 1]) {
            return;
        }
        let mut j = self.len.min(NEAR - 1);
        if self.len < NEAR {
            self.len += 1;
        }
        while j > 0 && (dist, idx) < self.items[j - 1] {
            self.items[j] = self.items[j - 1];
            j -= 1;
        }
        self.items[j] = (dist, idx);
    }
}

/// Where a query coordinate falls among a node's keys.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Slot {
    /// On the key at this index.
    Exact(usize),
    /// Strictly between the keys at `hi − 1` and `hi`.
    Between(usize),
    /// Below the first key, above the last, or NaN.
    OutOfRange,
    /// The node has no keys.
    Empty,
}

impl Node {
    /// One binary search: the exact key if `c` is one, else its bracket, else out of range.
    #[inline]
    fn find(&self, c: f64) -> Slot {
        let keys = &self.keys;
        if keys.is_empty() {
            return Slot::Empty;
        }
        let hi = keys.partition_point(|&k| k < c);
        if hi < keys.len() && keys[hi] == c {
            Slot::Exact(hi)
        } else if c >= keys[0] && c <= keys[keys.len() - 1] {
            Slot::Between(hi)
        } else {
            Slot::OutOfRange
        }
    }
}

#[derive(Debug, Clone)]
enum Kids {
    Nodes(Vec<Node>),
    Leaves(Vec<Leaf>),
}

/// A nested table over `depth` integer axes with leaves `(latency, power, energy)`.
#[derive(Debug, Clone)]
pub struct Grid {
    depth: usize,
    root: Node,
    /// Leaf coordinates, row-major, in ascending key order (outer axis first).
    coords: Vec<u64>,
    /// `log2(max(coord, 1e-12))` of `coords`.
    coords_log2: Vec<f64>,
    leaves: Vec<Leaf>,
    /// Leaves with a positive finite latency (hold candidates).
    usable: usize,
    sqrt_axis: Option<usize>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fail {
    OutOfRange,
    Miss,
}

impl Grid {
    /// Number of axes.
    pub fn depth(&self) -> usize {
        self.depth
    }

    /// Number of points.
    pub fn len(&self) -> usize {
        self.leaves.len()
    }

    /// True when the grid has no point.
    pub fn is_empty(&self) -> bool {
        self.leaves.is_empty()
    }

    /// `log2(max(coord, 1e-12))` of every leaf's coordinates, row-major in key order.
    pub(super) fn coords_log2(&self) -> &[f64] {
        &self.coords_log2
    }

    /// The coordinates of leaf `i` (flat index in key order).
    pub(super) fn coords_of(&self, i: usize) -> &[u64] {
        &self.coords[i * self.depth..(i + 1) * self.depth]
    }

    /// The leaves in ascending key order.
    pub(super) fn leaves(&self) -> &[Leaf] {
        &self.leaves
    }

    /// All points in ascending key order: `(coordinates, leaf)`.
    pub fn points(&self) -> impl Iterator<Item = (&[u64], &Leaf)> {
        self.coords.chunks_exact(self.depth.max(1)).zip(self.leaves.iter())
    }

    /// Resolves a query (one coordinate per axis, outer first). `sol` gives the SOL latency at
    /// any coordinate vector; it drives ragged rescales and the utilisation hold.
    pub fn lookup(&self, q: &[f64], sol: &dyn Fn(&[f64]) -> f64) -> Result<Val, Miss> {
        self.lookup_indexed(q, sol, None)
    }

    /// As [`Grid::lookup`], answering a utilisation hold from `index` (built for this grid and
    /// this `sol`) when the query lies in its box: the same result, without the full
    /// nearest-leaf walk or the anchors' SOL evaluations.
    pub fn lookup_indexed(
        &self,
        q: &[f64],
        sol: &dyn Fn(&[f64]) -> f64,
        index: Option<&HoldIndex>,
    ) -> Result<Val, Miss> {
        debug_assert_eq!(q.len(), self.depth);
        if self.leaves.is_empty() {
            return Err(Miss::EmptyTable);
        }
        let mut scratch = [0.0f64; 8];
        match self.resolve(&self.root, 0, q, sol, &mut scratch) {
            Ok(v) => Ok(v),
            Err(Fail::OutOfRange) => self.hold(q, sol, index),
            Err(Fail::Miss) => Err(Miss::NoBranch),
        }
    }

    /// [`Grid::lookup_indexed`] at queries that differ only in their last coordinate (`lasts`;
    /// `q`'s own last entry is ignored), answered into `out[..lasts.len()]` in order: the same
    /// results as one lookup per query, with the outer levels resolved once per run of up to
    /// eight queries. Panics if `out` is shorter than `lasts`.
    pub fn lookup_many_indexed(
        &self,
        q: &[f64],
        lasts: &[f64],
        sol: &dyn Fn(&[f64]) -> f64,
        index: Option<&HoldIndex>,
        out: &mut [Result<Val, Miss>],
    ) {
        debug_assert_eq!(q.len(), self.depth);
        assert!(out.len() >= lasts.len(), "lookup_many_indexed: `out` is shorter than `lasts`");
        if lasts.len() > MAX_MANY {
            for (run, slots) in lasts.chunks(MAX_MANY).zip(out.chunks_mut(MAX_MANY)) {
                self.lookup_many_indexed(q, run, sol, index, slots);
            }
            return;
        }
        let n = lasts.len();
        if self.leaves.is_empty() {
            out[..n].iter_mut().for_each(|slot| *slot = Err(Miss::EmptyTable));
            return;
        }
        let mut qm = [0.0f64; 8];
        let d = self.depth;
        qm[..d].copy_from_slice(q);
        let mut scratch = [0.0f64; 8];
        let mut found = [Err(Fail::Miss); MAX_MANY];
        self.resolve_many(&self.root, 0, &mut qm[..d], lasts, sol, &mut scratch, &mut found[..n]);
        for j in 0..n {
            qm[d - 1] = lasts[j];
            out[j] = match found[j] {
                Ok(v) => Ok(v),
                Err(Fail::OutOfRange) => self.hold(&qm[..d], sol, index),
                Err(Fail::Miss) => Err(Miss::NoBranch),
            };
        }
    }

    fn child(
        &self,
        node: &Node,
        idx: usize,
        level: usize,
        q: &[f64],
        sol: &dyn Fn(&[f64]) -> f64,
        scratch: &mut [f64; 8],
    ) -> Result<Val, Fail> {
        match &node.kids {
            Kids::Leaves(leaves) => Ok(leaves[idx].value()),
            Kids::Nodes(nodes) => self.resolve(&nodes[idx], level + 1, q, sol, scratch),
        }
    }

    fn resolve(
        &self,
        node: &Node,
        level: usize,
        q: &[f64],
        sol: &dyn Fn(&[f64]) -> f64,
        scratch: &mut [f64; 8],
    ) -> Result<Val, Fail> {
        let c = q[level];
        match node.find(c) {
            Slot::Exact(idx) => self.child(node, idx, level, q, sol, scratch),
            Slot::Between(hi) => {
                let a = self.child(node, hi - 1, level, q, sol, scratch);
                let b = self.child(node, hi, level, q, sol, scratch);
                self.combine(level, c, (node.keys[hi - 1], node.keys[hi]), a, b, q, sol, scratch)
            }
            Slot::OutOfRange => Err(Fail::OutOfRange),
            Slot::Empty => Err(Fail::Miss),
        }
    }

    /// Combines the two sides of a bracket `k_lo < c < k_hi` on `level`: a blend when both
    /// resolved, the survivor rescaled when only one did, else the worse failure.
    #[allow(clippy::too_many_arguments)]
    #[inline]
    fn combine(
        &self,
        level: usize,
        c: f64,
        (k_lo, k_hi): (f64, f64),
        a: Result<Val, Fail>,
        b: Result<Val, Fail>,
        q: &[f64],
        sol: &dyn Fn(&[f64]) -> f64,
        scratch: &mut [f64; 8],
    ) -> Result<Val, Fail> {
        match (a, b) {
            (Ok(va), Ok(vb)) => {
                let w = (c - k_lo) / (k_hi - k_lo);
                let latency = if self.sqrt_axis == Some(level) {
                    sqrt_lerp(va.latency, vb.latency, w)
                } else {
                    lerp(va.latency, vb.latency, w)
                };
                let power = lerp(va.power, vb.power, w);
                Ok(Val::derived(latency, power))
            }
            (Ok(v), Err(_)) => Ok(self.ragged(v, level, k_lo, q, sol, scratch)),
            (Err(_), Ok(v)) => Ok(self.ragged(v, level, k_hi, q, sol, scratch)),
            (Err(fa), Err(fb)) => {
                if fa == Fail::OutOfRange || fb == Fail::OutOfRange {
                    Err(Fail::OutOfRange)
                } else {
                    Err(Fail::Miss)
                }
            }
        }
    }

    /// [`Grid::resolve`] for several queries that differ only in their last coordinate
    /// (`lasts`; `q`'s own last entry is ignored): the outer levels' exact-key tests and
    /// brackets are found once, the last level per query, with the same arithmetic per query.
    #[allow(clippy::too_many_arguments)]
    fn resolve_many(
        &self,
        node: &Node,
        level: usize,
        q: &mut [f64],
        lasts: &[f64],
        sol: &dyn Fn(&[f64]) -> f64,
        scratch: &mut [f64; 8],
        out: &mut [Result<Val, Fail>],
    ) {
        let d = q.len();
        if level + 1 == d {
            if let Kids::Leaves(leaves) = &node.kids {
                if lasts.windows(2).all(|w| w[0] <= w[1]) {
                    return self.resolve_leaves_sorted(node, leaves, level, lasts, out);
                }
            }
            for (slot, &last) in out.iter_mut().zip(lasts) {
                q[d - 1] = last;
                *slot = self.resolve(node, level, q, sol, scratch);
            }
            return;
        }
        let Kids::Nodes(nodes) = &node.kids else { unreachable!("inner levels hold nodes") };
        let c = q[level];
        match node.find(c) {
            Slot::Exact(idx) => self.resolve_many(&nodes[idx], level + 1, q, lasts, sol, scratch, out),
            Slot::Between(hi) => {
                let n = lasts.len();
                let mut a = [Err(Fail::Miss); MAX_MANY];
                let mut b = [Err(Fail::Miss); MAX_MANY];
                self.resolve_many(&nodes[hi - 1], level + 1, q, lasts, sol, scratch, &mut a[..n]);
                self.resolve_many(&nodes[hi], level + 1, q, lasts, sol, scratch, &mut b[..n]);
                let bracket = (node.keys[hi - 1], node.keys[hi]);
                for j in 0..n {
                    q[d - 1] = lasts[j];
                    out[j] = self.combine(level, c, bracket, a[j], b[j], q, sol, scratch);
                }
            }
            Slot::OutOfRange => out.iter_mut().for_each(|slot| *slot = Err(Fail::OutOfRange)),
            Slot::Empty => out.iter_mut().for_each(|slot| *slot = Err(Fail::Miss)),
        }
    }

    /// The last level of [`Grid::resolve_many`] for ascending `lasts`: one search for the first
    /// query, then a forward walk, with [`Node::find`]'s outcome and [`Grid::combine`]'s
    /// arithmetic per query (two leaves always resolve, so no ragged case arises here).
    fn resolve_leaves_sorted(
        &self,
        node: &Node,
        leaves: &[Leaf],
        level: usize,
        lasts: &[f64],
        out: &mut [Result<Val, Fail>],
    ) {
        let keys = &node.keys;
        if keys.is_empty() {
            out.iter_mut().for_each(|slot| *slot = Err(Fail::Miss));
            return;
        }
        let (first, last) = (keys[0], keys[keys.len() - 1]);
        let sqrt = self.sqrt_axis == Some(level);
        let mut hi = match lasts.first() {
            Some(&c) => keys.partition_point(|&k| k < c),
            None => return,
        };
        for (slot, &c) in out.iter_mut().zip(lasts) {
            while hi < keys.len() && keys[hi] < c {
                hi += 1;
            }
            *slot = if hi < keys.len() && keys[hi] == c {
                Ok(leaves[hi].value())
            } else if c >= first && c <= last {
                let (va, vb) = (leaves[hi - 1].value(), leaves[hi].value());
                let w = (c - keys[hi - 1]) / (keys[hi] - keys[hi - 1]);
                let latency = if sqrt { sqrt_lerp(va.latency, vb.latency, w) } else { lerp(va.latency, vb.latency, w) };
                Ok(Val::derived(latency, lerp(va.power, vb.power, w)))
            } else {
                Err(Fail::OutOfRange)
            };
        }
    }

    /// The survivor of a ragged bracket, rescaled by `SOL(q)/SOL(q')` where `q'` replaces
    /// only this level's coordinate by the survivor's key.
    fn ragged(
        &self,
        v: Val,
        level: usize,
        key: f64,
        q: &[f64],
        sol: &dyn Fn(&[f64]) -> f64,
        scratch: &mut [f64; 8],
    ) -> Val {
        let n = q.len();
        scratch[..n].copy_from_slice(q);
        scratch[level] = key;
        let shifted = sol(&scratch[..n]);
        match sol_ratio(sol(q), shifted) {
            Some(ratio) => Val::derived(v.latency * ratio, v.power),
            None => v,
        }
    }

    /// The utilisation hold (spec 11 §1.4): inverse-distance weighted utilisation of the four
    /// nearest valid leaves in joint log2 space, the fifth valid leaf setting the support radius.
    /// One-axis grids hold the nearest end point's utilisation instead.
    fn hold(&self, q: &[f64], sol: &dyn Fn(&[f64]) -> f64, index: Option<&HoldIndex>) -> Result<Val, Miss> {
        let sol_q = sol(q);
        if !(sol_q > 0.0) || !sol_q.is_finite() {
            return Err(Miss::NonPositiveSol);
        }
        if self.depth == 1 {
            return self.hold_1d(q[0], sol_q, sol);
        }
        let d = self.depth;
        let mut ql = [0.0f64; 8];
        for (slot, &v) in ql.iter_mut().zip(q) {
            *slot = log2_clamped(v);
        }
        // The nearest leaves by (distance, key order): a branch-and-bound walk of the nested
        // axes (a partial distance already beyond the current 8th-nearest prunes the branch).
        // The full sort is only needed when too few of them have a usable SOL.
        let mut near = Nearest { items: [(f64::INFINITY, u32::MAX); NEAR], len: 0 };
        // The index also caches every leaf's SOL (the same function, so the same values).
        let cached_sol = index.filter(|ix| ix.nearest(self, &ql[..d], &mut near));
        if cached_sol.is_none() {
            self.nearest(&self.root, 0, &ql[..d], 0.0, &mut near);
        }
        let count = near.len;
        let mut anchors = [(0.0f64, 0.0f64, 0.0f64); 4]; // (distance, util, power)
        let mut n_anchor = 0usize;
        let mut radius = f64::INFINITY;
        let mut found_fifth = false;
        let mut pt = [0.0f64; 8];
        let mut consider = |dist: f64, i: usize, n_anchor: &mut usize| -> bool {
            let s = match cached_sol {
                Some(ix) => ix.leaf_sol(i),
                None => {
                    for (a, slot) in pt[..d].iter_mut().enumerate() {
                        *slot = self.coords[i * d + a] as f64;
                    }
                    sol(&pt[..d])
                }
            };
            if !(s > 0.0 && s.is_finite()) {
                return false;
            }
            if *n_anchor == 4 {
                radius = dist;
                return true;
            }
            let leaf = &self.leaves[i];
            anchors[*n_anchor] = (dist, s / leaf.latency, leaf.blend_power());
            *n_anchor += 1;
            false
        };
        for &(dist, i) in near.items.iter().take(count) {
            if consider(dist, i as usize, &mut n_anchor) {
                found_fifth = true;
                break;
            }
        }
        if !found_fifth && self.usable > count {
            // Rare: fewer than five usable leaves among the nearest; walk all of them in order.
            n_anchor = 0;
            let mut order: Vec<(f64, u32)> = Vec::with_capacity(count);
            for (i, leaf) in self.leaves.iter().enumerate() {
                if !(leaf.latency > 0.0 && leaf.latency.is_finite()) {
                    continue;
                }
                let c = &self.coords_log2[i * d..(i + 1) * d];
                let sum: f64 = (0..d).map(|a| (c[a] - ql[a]) * (c[a] - ql[a])).sum();
                order.push((sum.sqrt(), i as u32));
            }
            order.sort_by(|x, y| x.0.total_cmp(&y.0).then(x.1.cmp(&y.1)));
            for &(dist, i) in &order {
                if consider(dist, i as usize, &mut n_anchor) {
                    break;
                }
            }
        }
        let anchors = &anchors[..n_anchor];
        if anchors.is_empty() {
            return Err(Miss::NoAnchor);
        }
        let mut weights = [0.0f64; 4];
        for (w, &(dist, _, _)) in weights.iter_mut().zip(anchors) {
            *w = if radius.is_finite() {
                let num = (radius - dist).max(0.0) / (radius * dist + 1e-12);
                num * num
            } else {
                1.0 / (dist * dist + 1e-12)
            };
        }
        let weights = &mut weights[..anchors.len()];
        if weights.iter().sum::<f64>() <= 0.0 {
            weights.iter_mut().for_each(|w| *w = 1.0);
        }
        let wsum: f64 = weights.iter().sum();
        let util: f64 = anchors.iter().zip(weights.iter()).map(|(a, w)| w * a.1).sum::<f64>() / wsum;
        let power: f64 = anchors.iter().zip(weights.iter()).map(|(a, w)| w * a.2).sum::<f64>() / wsum;
        Ok(Val::derived(sol_q / util, power))
    }

    /// Branch-and-bound search for the nearest leaves with a positive latency.
    fn nearest(&self, node: &Node, level: usize, ql: &[f64], partial: f64, near: &mut Nearest) {
        let q = ql[level];
        let keys = &node.keys_log2;
        let start = keys.partition_point(|&k| k < q);
        // Visit keys outward from the query, nearest first on this axis.
        let (mut lo, mut hi) = (start as isize - 1, start);
        loop {
            let left = (lo >= 0).then(|| (q - keys[lo as usize]) * (q - keys[lo as usize]));
            let right = (hi < keys.len()).then(|| (keys[hi] - q) * (keys[hi] - q));
            let (idx, contrib) = match (left, right) {
                (None, None) => break,
                (Some(l), None) => (lo as usize, l),
                (None, Some(r)) => (hi, r),
                (Some(l), Some(r)) => {
                    if l <= r {
                        (lo as usize, l)
                    } else {
                        (hi, r)
                    }
                }
            };
            if idx == hi {
                hi += 1;
            } else {
                lo -= 1;
            }
            let sum = partial + contrib;
            if sum.sqrt() > near.worst() {
                // Every key further out on this side is further still; the other side may not be.
                if idx + 1 == hi {
                    hi = keys.len();
                } else {
                    lo = -1;
                }
                continue;
            }
            match &node.kids {
                Kids::Leaves(leaves) => {
                    let leaf = &leaves[idx];
                    if leaf.latency > 0.0 && leaf.latency.is_finite() {
                        near.offer(sum.sqrt(), (node.first + idx) as u32);
                    }
                }
                Kids::Nodes(nodes) => self.nearest(&nodes[idx], level + 1, ql, sum, near),
            }
        }
    }

    fn hold_1d(&self, x: f64, sol_q: f64, sol: &dyn Fn(&[f64]) -> f64) -> Result<Val, Miss> {
        let last = self.leaves.len() - 1;
        let idx = if x < self.coords[0] as f64 { 0 } else { last };
        let leaf = &self.leaves[idx];
        let s_end = sol(&[self.coords[idx] as f64]);
        if !(s_end > 0.0 && s_end.is_finite() && leaf.latency > 0.0) {
            return Err(Miss::NoAnchor);
        }
        Ok(Val::derived(leaf.latency * (sol_q / s_end), leaf.blend_power()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grid(rows: &[([u64; 3], f64)], sqrt_axis: Option<usize>) -> Grid {
        let mut b = GridBuilder::new(3);
        for (k, l) in rows {
            b.insert(k.to_vec(), Leaf::new(*l, 0.0));
        }
        b.build(sqrt_axis)
    }

    #[test]
    fn exact_interior_and_first_wins() {
        let mut b = GridBuilder::new(1);
        assert!(b.insert(vec![1], Leaf::new(1.0, 0.0)));
        assert!(!b.insert(vec![1], Leaf::new(5.0, 0.0)));
        b.insert(vec![3], Leaf::new(3.0, 0.0));
        let g = b.build(None);
        let sol = |q: &[f64]| q[0];
        assert_eq!(g.lookup(&[1.0], &sol).unwrap().latency, 1.0);
        assert_eq!(g.lookup(&[2.0], &sol).unwrap().latency, 2.0);
        // linear hold through the origin above the curve
        assert_eq!(g.lookup(&[6.0], &sol).unwrap().latency, 6.0);
    }

    /// Rows kept apart from their builder (`into_rows`) build the same grid as the builder,
    /// first-wins duplicates included, and take no more room than the rows themselves.
    #[test]
    fn rows_kept_for_later_build_the_same_grid() {
        let fill = || {
            let mut b = GridBuilder::new(2);
            for i in 0..1000u64 {
                b.insert([1 + i % 37, 1 + i % 11], Leaf::new(1.0 + i as f64, 0.5));
            }
            b
        };
        let rows = fill().into_rows();
        assert_eq!(rows.keys.len(), rows.keys.capacity());
        assert_eq!(rows.keys.len(), 37 * 11);
        assert_eq!(format!("{:?}", rows.build(Some(1))), format!("{:?}", fill().build(Some(1))));
    }

    /// The hold index gives bit-identical answers to the full walk: a ragged 3-axis grid (rows
    /// of larger batch end at shorter sequences, as in the attention tables, with duplicated
    /// spacings so distance ties occur), queried on a lattice that covers interior points,
    /// ragged edges, holds inside the box and points beyond it.
    #[test]
    fn hold_index_matches_full_walk() {
        let mut b = GridBuilder::new(3);
        let mut seed = 0x2545f4914f6cdd1du64;
        for heads in [8u64, 16, 24, 32, 64] {
            for batch in [1u64, 2, 4, 8, 16, 32, 64, 128, 256] {
                for s in [64u64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384] {
                    if s * batch > 262_144 {
                        continue;
                    }
                    seed ^= seed << 13;
                    seed ^= seed >> 7;
                    seed ^= seed << 17;
                    let jitter = 1.0 + (seed % 1000) as f64 / 2000.0;
                    b.insert(vec![heads, batch, s], Leaf::new(1e-6 * (heads * batch * s) as f64 * jitter + 0.01, 0.0));
                }
            }
        }
        let g = b.build(Some(2));
        let sol = |q: &[f64]| 1e-6 * q[0] * q[1] * q[2];
        for heads in [16.0, 32.0, 40.0] {
            let index = HoldIndex::build(&g, &[heads], &sol).unwrap();
            let mut holds = 0;
            for batch in [1.0, 3.0, 17.0, 64.0, 100.0, 200.0, 256.0, 300.0, 1000.0] {
                for s in [1.0, 70.0, 1000.0, 3000.0, 5000.0, 9000.0, 16384.0, 20000.0, 100_000.0] {
                    let q = [heads, batch, s];
                    let plain = g.lookup(&q, &sol);
                    let indexed = g.lookup_indexed(&q, &sol, Some(&index));
                    match (plain, indexed) {
                        (Ok(a), Ok(b)) => {
                            assert_eq!(a.latency.to_bits(), b.latency.to_bits(), "{q:?}");
                            assert_eq!(a.energy.to_bits(), b.energy.to_bits(), "{q:?}");
                        }
                        (a, b) => assert_eq!(a.is_ok(), b.is_ok(), "{q:?}"),
                    }
                    if g.resolve(&g.root, 0, &q, &sol, &mut [0.0; 8]).is_err() {
                        holds += 1;
                    }
                }
            }
            assert!(holds > 20, "the lattice must exercise the hold ({holds})");
            assert!(index.candidate_entries() > 0, "the index must have answered some holds");
        }
    }

    /// Several last coordinates in one call answer exactly as one lookup each: sorted runs
    /// (the five-sample pattern, including repeats), unsorted ones, exact keys, brackets on
    /// both levels, ragged rows, holds and misses.
    #[test]
    fn lookup_many_matches_single_lookups() {
        let mut b = GridBuilder::new(3);
        for heads in [8u64, 16, 32] {
            for batch in [1u64, 4, 16, 64, 256] {
                for s in [16u64, 64, 256, 1024, 4096, 16384] {
                    if s * batch > 65_536 {
                        continue;
                    }
                    let lat = 1e-6 * (heads * batch * s) as f64 * (1.0 + (s % 7) as f64 / 10.0) + 0.002;
                    b.insert(vec![heads, batch, s], Leaf::new(lat, 200.0 + batch as f64));
                }
            }
        }
        let g = b.build(Some(2));
        let sol = |q: &[f64]| 1e-6 * q[0] * q[1] * q[2];
        let runs: [&[f64]; 7] = [
            &[900.0, 950.0, 1000.0, 1050.0, 1100.0],
            &[16.0, 16.0, 17.0, 17.0, 18.0],
            &[3000.0, 4096.0, 5000.0, 20000.0, 70000.0],
            &[5000.0, 100.0, 64.0, 1e9, 2.0],
            &[f64::NAN, 10.0],
            &[],
            // Longer than one walk's run: split, same answers.
            &[16.0, 40.0, 64.0, 100.0, 256.0, 300.0, 1024.0, 2000.0, 4096.0, 9000.0, 16384.0],
        ];
        for heads in [16.0, 20.0, 32.0, 64.0] {
            let index = HoldIndex::build(&g, &[heads], &sol);
            for batch in [1.0, 3.0, 16.0, 100.0, 256.0, 300.0] {
                for lasts in runs {
                    let q = [heads, batch, 0.0];
                    let mut out = [Err(Miss::EmptyTable); 16];
                    g.lookup_many_indexed(&q, lasts, &sol, index.as_ref(), &mut out);
                    for (j, &last) in lasts.iter().enumerate() {
                        let single = g.lookup_indexed(&[heads, batch, last], &sol, index.as_ref());
                        match (single, out[j]) {
                            (Ok(a), Ok(b)) => {
                                assert_eq!(a.latency.to_bits(), b.latency.to_bits(), "{heads} {batch} {last}");
                                assert_eq!(a.energy.to_bits(), b.energy.to_bits(), "{heads} {batch} {last}");
                            }
                            (a, b) => assert_eq!(a, b, "{heads} {batch} {last}"),
                        }
                    }
                }
            }
        }
    }

    /// Spec 11 §1.4 H2/H3: equidistant anchors and the support radius.
    #[test]
    fn hold_ties_h2_h3() {
        // SOL: synthetic, linear in batch and heads, quadratic in isl (only ratios matter).
        let rows = [
            ([8, 1024, 64], 1.0),
            ([32, 256, 64], 0.5),
            ([32, 1024, 16], 0.6),
            ([32, 4096, 64], 5.0),
            ([128, 1024, 64], 9.0),
        ];
        let sol = |q: &[f64]| q[0] * q[1] * q[1] * q[2] * 1e-9;
        let g = grid(&rows, Some(1));
        let v = g.lookup(&[32.0, 1024.0, 64.0], &sol).unwrap();
        // equal weights over the first four in ascending key order
        let utils: Vec<f64> = rows[..4].iter().map(|(k, l)| sol(&[k[0] as f64, k[1] as f64, k[2] as f64]) / l).collect();
        let ubar = utils.iter().sum::<f64>() / 4.0;
        let expect = sol(&[32.0, 1024.0, 64.0]) / ubar;
        assert!((v.latency - expect).abs() < 1e-12 * expect);
        let mut rows3 = rows.to_vec();
        rows3.push(([32, 1024, 32], 1.5));
        let g3 = grid(&rows3, Some(1));
        let v3 = g3.lookup(&[32.0, 1024.0, 64.0], &sol).unwrap();
        assert!((v3.latency - 3.0).abs() < 1e-12);
    }
}
