//! Communication tables (spec 10 §4.4): the framework's custom all-reduce (per backend and
//! version, eager copies dropped) and the system-wide NCCL collectives; both are 1-D curves
//! over the message size in elements.

use std::collections::HashMap;

use crate::fast_hash::FastHashMap;

use crate::data::sources::SourceResolver;
use crate::error::{AicError, Result};
use crate::lookup::{Grid, GridBuilder, Leaf};
use crate::spec::CommQuant;

use super::{no_rows_message, passes_filter, read_sources, to_u64, SourceRows};

/// Custom all-reduce curves keyed by GPUs; every row is stored under comm quant `half`.
#[derive(Debug)]
pub struct CustomAllReduceTable {
    curves: FastHashMap<u64, Grid>,
    max_gpus: u64,
    sources: Vec<SourceRows>,
}

fn is_eager(value: Option<&str>) -> bool {
    value.is_some_and(|v| v.ends_with("_eager"))
}

impl CustomAllReduceTable {
    /// Loads and merges every source first-wins, dropping `*_eager` kernel/backend rows.
    pub fn load(resolver: &SourceResolver) -> Result<Self> {
        let sources = resolver.sources("custom_allreduce_perf.parquet");
        let tables = read_sources(
            &sources,
            &["num_gpus", "message_size", "latency", "power", "kernel_source", "backend"],
        )?;
        let mut builders: HashMap<u64, GridBuilder> = HashMap::new();
        let mut rows = 0usize;
        let mut used = Vec::new();
        for (table, filter) in &tables {
            let before = rows;
            let keep_eager = table.path.components().any(|c| c.as_os_str() == "b60");
            let gpus = table.int("num_gpus")?;
            let size = table.int("message_size")?;
            let latency = table.float("latency")?;
            let power = table.opt_float("power")?;
            let kernel = table.opt_str("kernel_source")?;
            let backend = table.opt_str("backend")?;
            for i in 0..table.num_rows {
                let ks = kernel.map(|c| c[i].as_str());
                if !passes_filter(filter, ks) {
                    continue;
                }
                if !keep_eager && (is_eager(ks) || is_eager(backend.map(|c| c[i].as_str()))) {
                    continue;
                }
                let key = to_u64(gpus[i], "num_gpus", table)?;
                let leaf = Leaf::new(latency[i], power.as_ref().map_or(0.0, |c| c[i]));
                let grid = builders.entry(key).or_insert_with(|| GridBuilder::new(1));
                if grid.insert(vec![to_u64(size[i], "message_size", table)?], leaf) {
                    rows += 1;
                }
            }
            used.push(SourceRows::new(&table.path, rows - before));
        }
        if rows == 0 {
            return Err(no_rows_message("custom_allreduce", &sources));
        }
        let max_gpus = builders.keys().copied().max().unwrap_or(0);
        Ok(CustomAllReduceTable {
            curves: builders.into_iter().map(|(k, b)| (k, b.build(None))).collect(),
            max_gpus,
            sources: used,
        })
    }

    /// Every curve by GPU count, ascending (all stored under comm quant `half`).
    pub fn curves(&self) -> Vec<(u64, &Grid)> {
        let mut out: Vec<(u64, &Grid)> = self.curves.iter().map(|(g, c)| (*g, c)).collect();
        out.sort_by_key(|c| c.0);
        out
    }

    /// The files this table was merged from, with the rows each contributed.
    pub fn sources(&self) -> &[SourceRows] {
        &self.sources
    }

    /// The largest GPU count recorded in the merged table: the tp beyond which a query is
    /// scaled from the largest measured curve (spec 12 §6.1; 16 on gb300 sglang/trtllm,
    /// whose 4-GPU nodes have MNNVL rows at 8 and 16).
    pub fn max_gpus(&self) -> u64 {
        self.max_gpus
    }

    /// The curve of `(quant, gpus)` (only `half` has rows).
    pub fn curve(&self, quant: CommQuant, gpus: u64) -> Option<&Grid> {
        if quant == CommQuant::Half {
            self.curves.get(&gpus)
        } else {
            None
        }
    }
}

/// NCCL collective curves keyed by (dtype, operation, GPUs).
#[derive(Debug)]
pub struct NcclTable {
    curves: Vec<(CommQuant, String, u64, Grid)>,
    sources: Vec<SourceRows>,
}

impl NcclTable {
    /// Loads `comm/nccl/<misc.nccl_version>/nccl_perf.parquet` (first row wins).
    pub fn load(resolver: &SourceResolver) -> Result<Self> {
        let path = resolver.nccl_path().ok_or_else(|| {
            AicError::perf("NCCL data not configured for this system (no misc.nccl_version in YAML)")
        })?;
        Self::load_file(path, "NCCL")
    }

    /// Loads `comm/oneccl/<misc.oneccl_version>/oneccl_perf.parquet`, the collectives of
    /// systems without NCCL (b60, spec 12 §7.2); same schema as the NCCL table.
    pub fn load_oneccl(resolver: &SourceResolver) -> Result<Self> {
        let path = resolver.oneccl_path().ok_or_else(|| {
            AicError::perf("OneCCL data not configured for this system (no misc.oneccl_version in YAML)")
        })?;
        Self::load_file(path, "OneCCL")
    }

    fn load_file(path: std::path::PathBuf, library: &str) -> Result<Self> {
        let source = crate::data::sources::Source { path, kernel_filter: None };
        let sources = vec![source];
        let tables = read_sources(
            &sources,
            &["nccl_dtype", "op_name", "num_gpus", "message_size", "latency", "power"],
        )?;
        let mut builders: HashMap<(CommQuant, String, u64), GridBuilder> = HashMap::new();
        let mut rows = 0usize;
        let mut used = Vec::new();
        for (table, _) in &tables {
            let before = rows;
            let dtype = table.str("nccl_dtype")?;
            let op = table.str("op_name")?;
            let gpus = table.int("num_gpus")?;
            let size = table.int("message_size")?;
            let latency = table.float("latency")?;
            let power = table.opt_float("power")?;
            for i in 0..table.num_rows {
                let Some(dt) = CommQuant::parse(&dtype[i]) else { continue };
                let key = (dt, op[i].clone(), to_u64(gpus[i], "num_gpus", table)?);
                let leaf = Leaf::new(latency[i], power.as_ref().map_or(0.0, |c| c[i]));
                let grid = builders.entry(key).or_insert_with(|| GridBuilder::new(1));
                if grid.insert(vec![to_u64(size[i], "message_size", table)?], leaf) {
                    rows += 1;
                }
            }
            used.push(SourceRows::new(&table.path, rows - before));
        }
        if rows == 0 {
            return Err(no_rows_message(library, &sources));
        }
        let mut curves: Vec<(CommQuant, String, u64, Grid)> =
            builders.into_iter().map(|((d, o, n), b)| (d, o, n, b.build(None))).collect();
        curves.sort_by(|a, b| (a.0.as_str(), &a.1, a.2).cmp(&(b.0.as_str(), &b.1, b.2)));
        Ok(NcclTable { curves, sources: used })
    }

    /// Every curve as `(dtype, operation, gpus, curve)`, sorted by dtype, operation, GPUs.
    pub fn curves(&self) -> impl Iterator<Item = (CommQuant, &str, u64, &Grid)> {
        self.curves.iter().map(|(d, o, n, g)| (*d, o.as_str(), *n, g))
    }

    /// The files this table was merged from, with the rows each contributed.
    pub fn sources(&self) -> &[SourceRows] {
        &self.sources
    }

    /// The curve of `(dtype, operation, gpus)`.
    pub fn curve(&self, dtype: CommQuant, operation: &str, gpus: u64) -> Option<&Grid> {
        self.curves.iter().find(|c| c.0 == dtype && c.2 == gpus && c.1 == operation).map(|c| &c.3)
    }

    /// The largest GPU count collected for `(dtype, operation)`.
    pub fn max_gpus(&self, dtype: CommQuant, operation: &str) -> Option<u64> {
        self.curves.iter().filter(|c| c.0 == dtype && c.1 == operation).map(|c| c.2).max()
    }
}
