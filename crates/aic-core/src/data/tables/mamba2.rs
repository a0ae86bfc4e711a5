//! Mamba2 table (`linear_attention/.../mamba2_perf.parquet`, spec 33 §7.2): the Nemotron-H
//! state-space kernels, one grid per exact kernel shape. Context rows form `batch → seq_len`
//! grids, generation rows `batch` curves (loaded, never read: spec 33 §7.3 step 1). Keys are
//! kept in ascending key order because the d_model fallback takes the first matching key in
//! that order, not in file order (spec 33 §7.3 step 3).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use crate::data::sources::SourceResolver;
use crate::error::Result;
use crate::lookup::{Grid, GridBuilder, Leaf};

use super::{no_rows_message, passes_filter, read_sources, to_u64, SourceRows};

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
        let sources = resolver.sources(MAMBA2_TABLE);
        let int_cols = [
            "batch_size",
            "seq_len",
            "d_model",
            "d_state",
            "d_conv",
            "nheads",
            "head_dim",
            "n_groups",
            "chunk_size",
        ];
        let mut columns = vec!["kernel_source", "phase"];
        columns.extend_from_slice(&int_cols);
        columns.extend_from_slice(&["latency", "power"]);
        let tables = read_sources(&sources, &columns)?;
        let mut builders: HashMap<Mamba2Key, GridBuilder> = HashMap::new();
        let mut rows = 0usize;
        let mut used = Vec::new();
        for (table, filter) in &tables {
            let before = rows;
            let kernel = table.str("kernel_source")?;
            let phase = table.str("phase")?;
            let ints: Vec<&[i64]> = int_cols.iter().map(|c| table.int(c)).collect::<Result<_>>()?;
            let latency = table.float("latency")?;
            let power = table.opt_float("power")?;
            for i in 0..table.num_rows {
                if !passes_filter(filter, Some(kernel[i].as_str())) {
                    continue;
                }
                let u = |c: usize| to_u64(ints[c][i], int_cols[c], table);
                let key = Mamba2Key {
                    kernel_source: kernel[i].clone(),
                    phase: phase[i].clone(),
                    d_model: u(2)?,
                    d_state: u(3)?,
                    d_conv: u(4)?,
                    nheads: u(5)?,
                    head_dim: u(6)?,
                    n_groups: u(7)?,
                    chunk_size: u(8)?,
                };
                let batch = u(0)?;
                let generation = key.is_generation();
                let coords = if generation { vec![batch] } else { vec![batch, u(1)?] };
                let leaf = Leaf::new(latency[i], power.as_ref().map_or(0.0, |c| c[i]));
                let builder = builders.entry(key).or_insert_with(|| GridBuilder::new(if generation { 1 } else { 2 }));
                if builder.insert(coords, leaf) {
                    rows += 1;
                }
            }
            used.push(SourceRows::new(&table.path, rows - before));
        }
        if rows == 0 {
            return Err(no_rows_message("Mamba2", &sources));
        }
        // Raw-linear on both axes: no sqrt axis.
        let grids = builders.into_iter().map(|(k, b)| (k, Arc::new(b.build(None)))).collect();
        Ok(Mamba2Table { grids, sources: used })
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
