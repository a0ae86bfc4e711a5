//! The bucketed sample store shared by the online correction (fixed axes) and the regression
//! fallback (axes that widen with the data) — spec 42 §7.

use std::collections::{BTreeMap, VecDeque};

/// One retained observation.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// Arrival number (smaller = older).
    pub seq: u64,
    /// Feature vector.
    pub x: Vec<f64>,
    /// Target (a correction factor, or a latency in ms).
    pub y: f64,
}

/// Per-axis bucketed samples with a global cap and oldest-of-fullest-bucket eviction.
#[derive(Debug, Clone)]
pub struct SampleStore {
    dim: usize,
    per_axis: usize,
    max_observations: usize,
    /// Fixed bounds (`Some` from the start) or dynamic bounds (`None` until the first sample).
    bounds: Option<Vec<(f64, f64)>>,
    fixed: bool,
    buckets: BTreeMap<Vec<usize>, VecDeque<Sample>>,
    total: usize,
    next_seq: u64,
}

/// Index of `v` along an axis `[lo, hi]` split into `k` buckets.
pub fn bucket_index(v: f64, lo: f64, hi: f64, k: usize) -> usize {
    if hi <= lo {
        return 0;
    }
    let raw = ((v - lo) / (hi - lo) * k as f64).trunc();
    if raw <= 0.0 {
        0
    } else {
        (raw as usize).min(k.saturating_sub(1))
    }
}

/// Median over the finite positive values; `None` when there are none.
pub fn median(values: impl IntoIterator<Item = f64>) -> Option<f64> {
    let mut v: Vec<f64> = values.into_iter().filter(|y| y.is_finite() && *y > 0.0).collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    Some(if n % 2 == 1 { v[n / 2] } else { (v[n / 2 - 1] + v[n / 2]) / 2.0 })
}

impl SampleStore {
    /// A store with fixed, inclusive axes (corrections).
    pub fn fixed(axes: Vec<(f64, f64)>, per_axis: usize, max_observations: usize) -> SampleStore {
        SampleStore {
            dim: axes.len(),
            per_axis,
            max_observations,
            bounds: Some(axes),
            fixed: true,
            buckets: BTreeMap::new(),
            total: 0,
            next_seq: 0,
        }
    }

    /// A store whose bounds widen to cover every sample (regression).
    pub fn dynamic(dim: usize, per_axis: usize, max_observations: usize) -> SampleStore {
        SampleStore {
            dim,
            per_axis,
            max_observations,
            bounds: None,
            fixed: false,
            buckets: BTreeMap::new(),
            total: 0,
            next_seq: 0,
        }
    }

    /// Retained samples.
    pub fn total(&self) -> usize {
        self.total
    }

    /// Number of non-empty buckets.
    pub fn bucket_len(&self) -> usize {
        self.buckets.len()
    }

    /// Current axis bounds (`None` for a dynamic store before its first sample).
    pub fn bounds(&self) -> Option<&[(f64, f64)]> {
        self.bounds.as_deref()
    }

    /// The bucket key of `x` under the current bounds; `None` if `x` has the wrong length, a
    /// non-finite value, or (fixed store) lies outside the axes.
    pub fn key_of(&self, x: &[f64]) -> Option<Vec<usize>> {
        if x.len() != self.dim || x.iter().any(|v| !v.is_finite()) {
            return None;
        }
        let bounds = self.bounds.as_ref()?;
        if self.fixed && x.iter().zip(bounds).any(|(v, (lo, hi))| *v < *lo || *v > *hi) {
            return None;
        }
        Some(x.iter().zip(bounds).map(|(v, (lo, hi))| bucket_index(*v, *lo, *hi, self.per_axis)).collect())
    }

    /// Median of the bucket holding `x` (`None`: outside, empty bucket or no usable value).
    pub fn median_at(&self, x: &[f64]) -> Option<f64> {
        let key = self.key_of(x)?;
        self.buckets.get(&key).and_then(|b| median(b.iter().map(|s| s.y)))
    }

    /// Medians of all non-empty buckets, in key order.
    pub fn bucket_medians(&self) -> Vec<f64> {
        self.buckets.values().filter_map(|b| median(b.iter().map(|s| s.y))).collect()
    }

    /// Every retained sample, oldest first.
    pub fn samples(&self) -> Vec<&Sample> {
        let mut all: Vec<&Sample> = self.buckets.values().flatten().collect();
        all.sort_by_key(|s| s.seq);
        all
    }

    /// Adds a sample; returns whether it was accepted (§7).
    pub fn add(&mut self, x: &[f64], y: f64) -> bool {
        if x.len() != self.dim || x.iter().any(|v| !v.is_finite()) || !y.is_finite() {
            return false;
        }
        if self.fixed {
            if self.key_of(x).is_none() {
                return false;
            }
        } else {
            self.widen(x);
        }
        let key = self.key_of(x).expect("bounds cover an accepted sample");
        let sample = Sample { seq: self.next_seq, x: x.to_vec(), y };
        self.next_seq += 1;
        self.buckets.entry(key).or_default().push_back(sample);
        self.total += 1;
        if self.total > self.max_observations {
            self.evict();
        }
        true
    }

    fn widen(&mut self, x: &[f64]) {
        let new: Vec<(f64, f64)> = match &self.bounds {
            None => x.iter().map(|v| (*v, *v)).collect(),
            Some(b) => b.iter().zip(x).map(|((lo, hi), v)| (lo.min(*v), hi.max(*v))).collect(),
        };
        let changed = self.bounds.as_ref() != Some(&new);
        self.bounds = Some(new);
        if changed && self.total > 0 {
            let mut all: Vec<Sample> = std::mem::take(&mut self.buckets).into_values().flatten().collect();
            all.sort_by_key(|s| s.seq);
            for s in all {
                let key = self.key_of(&s.x).expect("bounds cover retained samples");
                self.buckets.entry(key).or_default().push_back(s);
            }
        }
    }

    /// Removes the oldest sample of the fullest bucket (ties: the lowest bucket key).
    fn evict(&mut self) {
        let mut fullest: Option<(&Vec<usize>, usize)> = None;
        for (k, b) in &self.buckets {
            if fullest.is_none_or(|(_, n)| b.len() > n) {
                fullest = Some((k, b.len()));
            }
        }
        let Some((key, _)) = fullest else { return };
        let key = key.clone();
        let bucket = self.buckets.get_mut(&key).expect("bucket exists");
        bucket.pop_front();
        self.total -= 1;
        if bucket.is_empty() {
            self.buckets.remove(&key);
        }
    }
}
