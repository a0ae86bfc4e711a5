//! Name-folded per-op result lists (spec 40 §8.3): a name seen again adds to its first entry;
//! differing tags fold to `mixed` (no zero-neutral rule here).

use crate::ops::{OpValue, Source};

/// One per-op entry: `(name, latency_ms, energy_wms, source)`.
#[derive(Debug, Clone, PartialEq)]
pub struct OpResult {
    /// Top-level op name.
    pub name: String,
    /// Latency, ms.
    pub latency_ms: f64,
    /// Energy, W·ms.
    pub energy_wms: f64,
    /// Provenance tag.
    pub source: Source,
}

/// Accumulates folded per-op entries in first-appearance order.
#[derive(Debug, Default)]
pub(crate) struct Folder {
    entries: Vec<OpResult>,
}

impl Folder {
    pub(crate) fn add(&mut self, name: &str, v: OpValue) {
        self.add_parts(name, v.latency, v.energy, v.source);
    }

    fn add_parts(&mut self, name: &str, latency: f64, energy: f64, source: Source) {
        match self.entries.iter_mut().find(|e| e.name == name) {
            Some(e) => {
                e.latency_ms += latency;
                e.energy_wms += energy;
                e.source = e.source.combine(source);
            }
            None => self.entries.push(OpResult {
                name: name.to_string(),
                latency_ms: latency,
                energy_wms: energy,
                source,
            }),
        }
    }

    /// Folds another list in, each entry multiplied by `k` (a stride sample's weight).
    pub(crate) fn merge_scaled(&mut self, other: Folder, k: f64) {
        for e in other.entries {
            self.add_parts(&e.name, e.latency_ms * k, e.energy_wms * k, e.source);
        }
    }

    /// Folds another list in, each entry divided by `k`.
    pub(crate) fn merge_divided(&mut self, other: Folder, k: f64) {
        for e in other.entries {
            self.add_parts(&e.name, e.latency_ms / k, e.energy_wms / k, e.source);
        }
    }

    pub(crate) fn into_results(self) -> Vec<OpResult> {
        self.entries
    }
}
