//! Communication tables (spec 10 §4.4): the framework's custom all-reduce (per backend and
//! version, eager copies dropped) and the system-wide NCCL collectives; both are 1-D curves
//! over the message size in elements.

use std::collections::HashMap;

use crate::data::sources::SourceResolver;
use crate::error::{AicError, Result};
use crate::lookup::{Grid, GridBuilder, Leaf};

use super::{no_rows_message, passes_filter, read_sources, to_u64};

/// Custom all-reduce curves keyed by (comm quant, GPUs); every row is stored as `half`.
#[derive(Debug)]
pub struct CustomAllReduceTable {
    curves: HashMap<(String, u64), Grid>,
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
        let mut builders: HashMap<(String, u64), GridBuilder> = HashMap::new();
        let mut rows = 0usize;
        for (table, filter) in &tables {
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
                let key = ("half".to_string(), to_u64(gpus[i], "num_gpus", table)?);
                let leaf = Leaf::new(latency[i], power.as_ref().map_or(0.0, |c| c[i]));
                let grid = builders.entry(key).or_insert_with(|| GridBuilder::new(1));
                if grid.insert(vec![to_u64(size[i], "message_size", table)?], leaf) {
                    rows += 1;
                }
            }
        }
        if rows == 0 {
            return Err(no_rows_message("custom_allreduce", &sources));
        }
        Ok(CustomAllReduceTable {
            curves: builders.into_iter().map(|(k, b)| (k, b.build(None))).collect(),
        })
    }

    /// The curve of `(quant, gpus)`.
    pub fn curve(&self, quant: &str, gpus: u64) -> Option<&Grid> {
        self.curves.get(&(quant.to_string(), gpus))
    }
}

/// NCCL collective curves keyed by (dtype, operation, GPUs).
#[derive(Debug)]
pub struct NcclTable {
    curves: HashMap<(String, String, u64), Grid>,
    max_gpus: HashMap<(String, String), u64>,
}

impl NcclTable {
    /// Loads `comm/nccl/<misc.nccl_version>/nccl_perf.parquet` (first row wins).
    pub fn load(resolver: &SourceResolver) -> Result<Self> {
        let path = resolver.nccl_path().ok_or_else(|| {
            AicError::perf("NCCL data not configured for this system (no misc.nccl_version in YAML)")
        })?;
        let source = crate::data::sources::Source { path, kernel_filter: None };
        let sources = vec![source];
        let tables = read_sources(
            &sources,
            &["nccl_dtype", "op_name", "num_gpus", "message_size", "latency", "power"],
        )?;
        let mut builders: HashMap<(String, String, u64), GridBuilder> = HashMap::new();
        let mut rows = 0usize;
        for (table, _) in &tables {
            let dtype = table.str("nccl_dtype")?;
            let op = table.str("op_name")?;
            let gpus = table.int("num_gpus")?;
            let size = table.int("message_size")?;
            let latency = table.float("latency")?;
            let power = table.opt_float("power")?;
            for i in 0..table.num_rows {
                let key = (dtype[i].clone(), op[i].clone(), to_u64(gpus[i], "num_gpus", table)?);
                let leaf = Leaf::new(latency[i], power.as_ref().map_or(0.0, |c| c[i]));
                let grid = builders.entry(key).or_insert_with(|| GridBuilder::new(1));
                if grid.insert(vec![to_u64(size[i], "message_size", table)?], leaf) {
                    rows += 1;
                }
            }
        }
        if rows == 0 {
            return Err(no_rows_message("NCCL", &sources));
        }
        let mut max_gpus: HashMap<(String, String), u64> = HashMap::new();
        for (d, o, n) in builders.keys() {
            let e = max_gpus.entry((d.clone(), o.clone())).or_insert(0);
            *e = (*e).max(*n);
        }
        Ok(NcclTable {
            curves: builders.into_iter().map(|(k, b)| (k, b.build(None))).collect(),
            max_gpus,
        })
    }

    /// The curve of `(dtype, operation, gpus)`.
    pub fn curve(&self, dtype: &str, operation: &str, gpus: u64) -> Option<&Grid> {
        self.curves.get(&(dtype.to_string(), operation.to_string(), gpus))
    }

    /// The largest GPU count collected for `(dtype, operation)`.
    pub fn max_gpus(&self, dtype: &str, operation: &str) -> Option<u64> {
        self.max_gpus.get(&(dtype.to_string(), operation.to_string())).copied()
    }
}
