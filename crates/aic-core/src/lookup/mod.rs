//! How one query is answered from a loaded table (spec 11): exact hits, interpolation,
//! ragged rescales, utilisation holds outside the collected range, and the GEMM
//! scattered-sites resolver. Tables are built by `data::tables`; SOL functions come from the
//! op layer, so this module knows nothing about hardware or ops.

mod grid;
mod hold_index;
mod scattered;
pub mod sol;

pub use grid::{Grid, GridBuilder, GridRows};
pub use hold_index::HoldIndex;
pub use scattered::{GemmSite, NeighbourOrder, ScatteredSites, ScatteredSitesBuilder};

/// One measured grid point: latency (ms), power (W) and energy (W·ms) as loaded.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Leaf {
    /// Latency in ms (possibly raised to the SOL at load).
    pub latency: f64,
    /// Stored power in W (0 when the table has no power column).
    pub power: f64,
    /// Energy in W·ms = raw power × raw latency, computed at load.
    pub energy: f64,
}

impl Leaf {
    /// A leaf from a raw row; `energy = power × latency`.
    pub fn new(latency: f64, power: f64) -> Self {
        Leaf { latency, power, energy: power * latency }
    }

    /// The power used when blending: energy/latency when both are positive, else the stored power.
    pub fn blend_power(&self) -> f64 {
        if self.energy > 0.0 && self.latency > 0.0 {
            self.energy / self.latency
        } else {
            self.power
        }
    }

    /// The leaf as a lookup result (verbatim).
    pub fn value(&self) -> Val {
        Val { latency: self.latency, power: self.blend_power(), energy: self.energy }
    }
}

/// A lookup result: latency (ms), the blended power (W) and energy (W·ms).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Val {
    /// Latency in ms.
    pub latency: f64,
    /// Blended power in W.
    pub power: f64,
    /// Energy in W·ms.
    pub energy: f64,
}

impl Val {
    /// A derived value whose energy is `power × latency`.
    pub fn derived(latency: f64, power: f64) -> Self {
        Val { latency, power, energy: power * latency }
    }
}

/// Why a lookup found nothing; the caller turns it into a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Miss {
    /// No usable branch (structural miss).
    NoBranch,
    /// The hold found no anchor with positive latency and SOL.
    NoAnchor,
    /// The query's own SOL is not positive.
    NonPositiveSol,
    /// No GEMM site within the distance gate.
    NoSiteWithinDistance,
    /// Every chosen neighbour site failed to evaluate.
    NoUsableNeighbour,
    /// A one-point curve cannot be extended below its point.
    SingletonBelow,
    /// The table (slice) has no points.
    EmptyTable,
}

impl Miss {
    /// The reference's reason text.
    pub fn reason(self) -> &'static str {
        match self {
            Miss::NoBranch => "no usable branch",
            Miss::NoAnchor => "no positive-util boundary anchor",
            Miss::NonPositiveSol => "non-positive SOL at query",
            Miss::NoSiteWithinDistance => "no site within max_site_distance",
            Miss::NoUsableNeighbour => "no usable neighbour site",
            Miss::SingletonBelow => "singleton curve, query below its only point",
            Miss::EmptyTable => "empty table",
        }
    }
}

/// Formats `perf_interp: no data to anchor query {a=1, b=2} (reason)`.
pub fn anchor_message(axes: &[&str], q: &[f64], miss: Miss) -> String {
    let coords: Vec<String> = axes
        .iter()
        .zip(q)
        .map(|(a, v)| {
            if v.fract() == 0.0 && v.abs() < 1e15 {
                format!("{a}={}", *v as i64)
            } else {
                format!("{a}={v}")
            }
        })
        .collect();
    format!("perf_interp: no data to anchor query {{{}}} ({})", coords.join(", "), miss.reason())
}

/// Linear blend `lo + (hi − lo)·w`.
#[inline]
pub(crate) fn lerp(lo: f64, hi: f64, w: f64) -> f64 {
    lo + (hi - lo) * w
}

/// Blend in square-root space: `(√lo + (√hi − √lo)·w)²`, non-positive values mapping to 0.
#[inline]
pub(crate) fn sqrt_lerp(lo: f64, hi: f64, w: f64) -> f64 {
    let a = if lo > 0.0 { lo.sqrt() } else { 0.0 };
    let b = if hi > 0.0 { hi.sqrt() } else { 0.0 };
    let r = a + (b - a) * w;
    r * r
}

/// `SOL(q) / SOL(q')` when both are positive and finite.
#[inline]
pub fn sol_ratio(num: f64, den: f64) -> Option<f64> {
    if num.is_finite() && den.is_finite() && num > 0.0 && den > 0.0 {
        Some(num / den)
    } else {
        None
    }
}
