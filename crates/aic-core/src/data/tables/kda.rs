//! Kimi delta attention table (`kda/.../kda_perf.parquet`, spec 36 §6.3): Kimi-K3's linear
//! attention kernels (short conv, chunked scan, recurrent decode, speculative verify), one grid
//! per exact kernel shape. It exists apart from the GDN table because its keys keep the kernel
//! names as collected (no aliasing at load), its phases include `verify`, and a query may fall
//! back to the nearest head shard of the same kernel.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::data::sources::SourceResolver;
use crate::error::Result;
use crate::lookup::Grid;

use super::kernel_grids::{load_kernel_grids, KernelGrids};
use super::{display_path, SourceRows};

/// The table's basename.
pub const KDA_TABLE: &str = "kda_perf.parquet";

/// The exact shape one KDA grid belongs to. Field order is the key order the nearest-shard tie
/// rule sorts by (spec 36 §6.5).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct KdaKey {
    /// Kernel name as collected.
    pub kernel_source: String,
    /// `context`, `generation` or `verify`.
    pub phase: String,
    /// Model hidden size.
    pub d_model: u64,
    /// Convolution width.
    pub d_conv: u64,
    /// Key heads of the shard.
    pub num_k_heads: u64,
    /// Key head size.
    pub head_k_dim: u64,
    /// Value heads of the shard.
    pub num_v_heads: u64,
    /// Value head size.
    pub head_v_dim: u64,
}

impl KdaKey {
    /// Whether leaves of this key are 1-D batch curves (generation) or `[batch][seq]` grids.
    pub fn is_generation(&self) -> bool {
        self.phase == "generation"
    }
}

/// The KDA grids of one database.
#[derive(Debug)]
pub struct KdaTable {
    /// Grids by key, in key order (the nearest-shard tie rule needs it).
    grids: BTreeMap<KdaKey, Arc<Grid>>,
    sources: Vec<SourceRows>,
}

impl KdaTable {
    /// Loads every source; the first row of a coordinate wins, within a file and across files.
    pub fn load(resolver: &SourceResolver) -> Result<Self> {
        let KernelGrids { grids, sources } = load_kernel_grids(
            &resolver.sources(KDA_TABLE),
            ["d_model", "d_conv", "num_k_heads", "head_k_dim", "num_v_heads", "head_v_dim"],
            |kernel, phase, [d_model, d_conv, num_k_heads, head_k_dim, num_v_heads, head_v_dim]| KdaKey {
                kernel_source: kernel.to_string(),
                phase: phase.to_string(),
                d_model, d_conv, num_k_heads, head_k_dim, num_v_heads, head_v_dim,
            },
            KdaKey::is_generation,
            |sources| {
                let first = sources.first().map(|s| display_path(&s.path)).unwrap_or_else(|| "<none>".to_string());
                crate::error::AicError::perf(format!(
                    "no KDA rows loaded from {} source(s) (first: {first})",
                    sources.len()
                ))
            },
        )?;
        Ok(KdaTable { grids, sources })
    }

    /// The grid of an exact key, shared.
    pub fn grid(&self, key: &KdaKey) -> Option<Arc<Grid>> {
        self.grids.get(key).cloned()
    }

    /// The grid of `key`, else of the nearest head shard: among keys with the same kernel, phase
    /// and `d_model`, the smallest `|num_v_heads − key.num_v_heads|`, ties to the first key in
    /// key order (spec 36 §6.5).
    pub fn grid_or_nearest(&self, key: &KdaKey) -> Option<Arc<Grid>> {
        if let Some(g) = self.grids.get(key) {
            return Some(g.clone());
        }
        let mut best: Option<(u64, &Arc<Grid>)> = None;
        for (k, g) in &self.grids {
            if k.kernel_source != key.kernel_source || k.phase != key.phase || k.d_model != key.d_model {
                continue;
            }
            let d = k.num_v_heads.abs_diff(key.num_v_heads);
            if best.is_none_or(|(bd, _)| d < bd) {
                best = Some((d, g));
            }
        }
        best.map(|(_, g)| g.clone())
    }

    /// Whether any key has this kernel and phase.
    pub fn has_kernel(&self, kernel: &str, phase: &str) -> bool {
        self.grids.keys().any(|k| k.kernel_source == kernel && k.phase == phase)
    }

    /// Whether the table holds the exact key.
    pub fn contains(&self, key: &KdaKey) -> bool {
        self.grids.contains_key(key)
    }

    /// The files this table was merged from, with the rows each contributed.
    pub fn sources(&self) -> &[SourceRows] {
        &self.sources
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lookup::{GridBuilder, Leaf};

    fn key(heads: u64) -> KdaKey {
        KdaKey {
            kernel_source: "flashkda_fwd".into(),
            phase: "context".into(),
            d_model: 7168,
            d_conv: 4,
            num_k_heads: heads,
            head_k_dim: 128,
            num_v_heads: heads,
            head_v_dim: 128,
        }
    }

    fn table(heads: &[u64]) -> KdaTable {
        let grids = heads
            .iter()
            .map(|&h| {
                let mut b = GridBuilder::new(2);
                b.insert([1u64, 1024], Leaf::new(h as f64, 0.0));
                (key(h), Arc::new(b.build(None)))
            })
            .collect();
        KdaTable { grids, sources: Vec::new() }
    }

    fn value(g: Option<Arc<Grid>>) -> f64 {
        g.unwrap().points().next().unwrap().1.latency
    }

    /// Spec 36 §6.5: an 18-head query is as far from 12 as from 24 and reads the 12-head shard.
    #[test]
    fn nearest_shard_ties_to_the_first_key() {
        let t = table(&[96, 48, 24, 12]);
        assert_eq!(value(t.grid_or_nearest(&key(18))), 12.0);
        assert_eq!(value(t.grid_or_nearest(&key(20))), 24.0);
        assert_eq!(value(t.grid_or_nearest(&key(48))), 48.0);
        let mut other = key(12);
        other.d_model = 4096;
        assert!(t.grid_or_nearest(&other).is_none());
    }
}
