//! Quantisation kernel tables (`computescale_perf`, `scale_matrix_perf`; spec 10 §4.7), read
//! only by the `fp8_static` GEMM mode: 2-D grids over `(m, k)` per quant dtype. `computescale`
//! stores latency deltas, so zero and negative values are legitimate.

use std::collections::HashMap;

use crate::data::sources::SourceResolver;
use crate::error::Result;
use crate::lookup::{Grid, GridBuilder, Leaf};

use super::{no_rows_message, passes_filter, read_sources_of, to_u64, LatencyKind, SourceRows};

/// Which quantisation kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QuantizeKernel {
    /// Per-tensor scale computation.
    ComputeScale,
    /// Scaling of the activation matrix.
    ScaleMatrix,
}

impl QuantizeKernel {
    fn basename(self) -> &'static str {
        match self {
            QuantizeKernel::ComputeScale => "computescale_perf.parquet",
            QuantizeKernel::ScaleMatrix => "scale_matrix_perf.parquet",
        }
    }

    /// Bytes moved per `m·k` element in the kernel's SOL (2 for compute-scale, 3 for scale-matrix).
    pub fn bytes_per_elem(self) -> f64 {
        match self {
            QuantizeKernel::ComputeScale => 2.0,
            QuantizeKernel::ScaleMatrix => 3.0,
        }
    }
}

/// One quantisation kernel's grid per quant dtype, with the collected `(m, k)` extents.
#[derive(Debug)]
pub struct QuantizeTable {
    /// Which kernel.
    pub kernel: QuantizeKernel,
    grids: HashMap<String, (Grid, [u64; 2], [u64; 2])>,
    sources: Vec<SourceRows>,
}

impl QuantizeTable {
    /// Loads and merges every source first-wins.
    pub fn load(resolver: &SourceResolver, kernel: QuantizeKernel) -> Result<Self> {
        let sources = resolver.sources(kernel.basename());
        let tables = read_sources_of(&sources, &["quant_dtype", "m", "k", "latency", "power", "kernel_source"], LatencyKind::Delta)?;
        let mut builders: HashMap<String, GridBuilder> = HashMap::new();
        let mut rows = 0usize;
        let mut used = Vec::new();
        for (table, filter) in &tables {
            let before = rows;
            let dtype = table.str("quant_dtype")?;
            let (m, k) = (table.int("m")?, table.int("k")?);
            let latency = table.float("latency")?;
            let power = table.opt_float("power")?;
            let kernel_col = table.opt_str("kernel_source")?;
            for i in 0..table.num_rows {
                if !passes_filter(filter, kernel_col.map(|c| c[i].as_str())) {
                    continue;
                }
                let leaf = Leaf::new(latency[i], power.as_ref().map_or(0.0, |c| c[i]));
                let key = vec![to_u64(m[i], "m", table)?, to_u64(k[i], "k", table)?];
                if builders.entry(dtype[i].clone()).or_insert_with(|| GridBuilder::new(2)).insert(key, leaf) {
                    rows += 1;
                }
            }
            used.push(SourceRows::new(&table.path, rows - before));
        }
        if rows == 0 {
            return Err(no_rows_message(kernel.basename().trim_end_matches("_perf.parquet"), &sources));
        }
        let grids = builders
            .into_iter()
            .map(|(q, b)| {
                let grid = b.build(None);
                let (mut mr, mut kr) = ([u64::MAX, 0], [u64::MAX, 0]);
                for (c, _) in grid.points() {
                    mr = [mr[0].min(c[0]), mr[1].max(c[0])];
                    kr = [kr[0].min(c[1]), kr[1].max(c[1])];
                }
                (q, (grid, mr, kr))
            })
            .collect();
        Ok(QuantizeTable { kernel, grids, sources: used })
    }

    /// Every quant dtype with its grid over `(m, k)`, sorted by dtype.
    pub fn grids(&self) -> Vec<(&str, &Grid)> {
        let mut out: Vec<(&str, &Grid)> = self.grids.iter().map(|(q, (g, _, _))| (q.as_str(), g)).collect();
        out.sort_by_key(|q| q.0);
        out
    }

    /// The files this table was merged from, with the rows each contributed.
    pub fn sources(&self) -> &[SourceRows] {
        &self.sources
    }

    /// The grid of a quant dtype with its `m` and `k` extents `[min, max]`.
    pub fn grid(&self, quant: &str) -> Option<(&Grid, [u64; 2], [u64; 2])> {
        self.grids.get(quant).map(|(g, m, k)| (g, *m, *k))
    }
}
