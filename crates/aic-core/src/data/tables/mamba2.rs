//! Mamba2 table (`linear_attention/.../mamba2_perf.parquet`, spec 33 §7.2): the Nemotron-H
//! state-space kernels, one grid per exact kernel shape. Context rows form `batch → seq_len`
//! grids, generation rows `batch` curves (loaded, never read: spec 33 §7.3 step 1). Keys are
//! kept in ascending key order because the d_model fallback takes the first matching key in
//! that order, not in file order (spec 33 §7.3 step 3).

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::data::sources::SourceResolver;
use crate::error::Result;
use crate::lookup::Grid;

use super::kernel_grids::{load_kernel_grids, KernelGrids};
use super::{no_rows_message, SourceRows};

/// The table's basename.
pub const MAMBA2_TABLE: &str = "mamba2_perf.parquet";

/// The exact shape one Mamba2 grid belongs to. Field order is the reference's key-tuple
/// order, so the derived `Ord` is the fallback order (strings by byte order, then integers).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Mamba2Key {
    /// Kernel name as the table spells it.
    pub kernel_source: String,
    /// `context` or `generation`.
    pub phase: String,
    /// Model hidden size.
    pub d_model: u64,
    /// SSM state size.
    pub d_state: u64,
    /// Convolution width.
    pub d_conv: u64,
    /// Mamba heads (whole layer).
    pub nheads: u64,
    /// Mamba head size.
    pub head_dim: u64,
    /// B/C groups (whole layer).
    pub n_groups: u64,
    /// Scan chunk length.
    pub chunk_size: u64,
}

impl Mamba2Key {
    /// Whether leaves of this key are 1-D batch curves (generation) or `[batch][seq]` grids.
    pub fn is_generation(&self) -> bool {
        self.phase == "generation"
    }
}

/// The Mamba2 grids of one database.
#[derive(Debug)]
pub struct Mamba2Table {
    grids: BTreeMap<Mamba2Key, Arc<Grid>>,
    sources: Vec<SourceRows>,
}

impl Mamba2Table {
    /// Loads and merges every source first-wins (10 §4.0).
    pub fn load(resolver: &SourceResolver) -> Result<Self> {
        // Raw-linear on both axes: no sqrt axis.
        let KernelGrids { grids, sources } = load_kernel_grids(
            &resolver.sources(MAMBA2_TABLE),
            ["d_model", "d_state", "d_conv", "nheads", "head_dim", "n_groups", "chunk_size"],
            |kernel, phase, [d_model, d_state, d_conv, nheads, head_dim, n_groups, chunk_size]| Mamba2Key {
                kernel_source: kernel.to_string(),
                phase: phase.to_string(),
                d_model, d_state, d_conv, nheads, head_dim, n_groups, chunk_size,
            },
            Mamba2Key::is_generation,
            |sources| no_rows_message("Mamba2", sources),
        )?;
        Ok(Mamba2Table { grids, sources })
    }

    /// The grid of an exact key, else of the first key (ascending key order) with the same
    /// kernel, phase and d_model (spec 33 §7.3 step 3).
    pub fn grid_or_fallback(&self, key: &Mamba2Key) -> Option<Arc<Grid>> {
        if let Some(g) = self.grids.get(key) {
            return Some(g.clone());
        }
        self.grids
            .iter()
            .find(|(k, _)| k.kernel_source == key.kernel_source && k.phase == key.phase && k.d_model == key.d_model)
            .map(|(_, g)| g.clone())
    }

    /// The grid of an exact key, shared.
    pub fn grid(&self, key: &Mamba2Key) -> Option<Arc<Grid>> {
        self.grids.get(key).cloned()
    }

    /// The files this table was merged from, with the rows each contributed.
    pub fn sources(&self) -> &[SourceRows] {
        &self.sources
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::system::SystemSpec;
    use crate::spec::Backend;
    use std::path::{Path, PathBuf};

    fn root() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data/systems")
    }

    fn resolver(system: &str, backend: Backend, version: &str, shared: bool) -> SourceResolver {
        let s = SystemSpec::load(&root(), system).unwrap();
        SourceResolver::new(&s, backend, version, shared).unwrap()
    }

    fn nano(kernel: &str, phase: &str) -> Mamba2Key {
        Mamba2Key {
            kernel_source: kernel.into(),
            phase: phase.into(),
            d_model: 2688,
            d_state: 128,
            d_conv: 4,
            nheads: 64,
            head_dim: 64,
            n_groups: 8,
            chunk_size: 128,
        }
    }

    #[test]
    fn shipped_table_holds_the_conv_kernels_only() {
        // Spec 33 §7.2: h200_sxm has 685 rows, conv kernels only, six shapes per phase.
        let table = Mamba2Table::load(&resolver("h200_sxm", Backend::Trtllm, "1.3.0rc20", true)).unwrap();
        assert_eq!(table.sources()[0].rows, 685);
        assert_eq!(table.grid(&nano("causal_conv1d_fn", "context")).unwrap().depth(), 2);
        assert_eq!(table.grid(&nano("causal_conv1d_update", "generation")).unwrap().depth(), 1);
        assert!(table.grid(&nano("mamba_chunk_scan_combined", "context")).is_none());
        assert!(table.grid_or_fallback(&nano("mamba_chunk_scan_combined", "context")).is_none());
        // d_model fallback: any other Nano-width shape reads the Nano key.
        let mut other = nano("causal_conv1d_fn", "context");
        other.nheads = 128;
        assert!(table.grid_or_fallback(&other).is_some());
        other.d_model = 5000;
        assert!(table.grid_or_fallback(&other).is_none());
    }

    #[test]
    fn vllm_and_sglang_have_no_rows() {
        assert!(Mamba2Table::load(&resolver("h200_sxm", Backend::Vllm, "0.24.0", true)).is_err());
        assert!(Mamba2Table::load(&resolver("h200_sxm", Backend::Sglang, "0.5.14", true)).is_err());
    }
}
