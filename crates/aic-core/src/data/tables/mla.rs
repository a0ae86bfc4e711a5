//! MLA tables (spec 10 §4.6, 11 §8): op-level context / generation MLA kernels, the fused MLA
//! modules (bucketed by the model's native head count) and the decode BMMs. None is raised to
//! its SOL at load; duplicate keys resolve to the first row in file order.

use std::collections::{BTreeMap, HashMap, HashSet};

use crate::data::sources::SourceResolver;
use crate::error::{AicError, Result};
use crate::lookup::{Grid, GridBuilder, Leaf};

use super::{display_path, no_rows_message, passes_filter, read_sources, to_u64, SourceRows};

/// Op-level MLA kernel table: slices keyed by dtype strings, grids over
/// (heads, isl, batch) for context or (heads, batch, isl + step) for generation.
#[derive(Debug)]
pub struct MlaKernelTable {
    slices: HashMap<Vec<String>, Grid>,
    sources: Vec<SourceRows>,
}

impl MlaKernelTable {
    /// Loads `context_mla_perf` (`context = true`, key (mla_dtype, kv)) or
    /// `generation_mla_perf` (key (kv)).
    pub fn load(resolver: &SourceResolver, context: bool) -> Result<Self> {
        let basename = if context { "context_mla_perf.parquet" } else { "generation_mla_perf.parquet" };
        let sources = resolver.sources(basename);
        let tables = read_sources(
            &sources,
            &["mla_dtype", "kv_cache_dtype", "num_heads", "isl", "step", "batch_size", "latency", "power", "kernel_source"],
        )?;
        let mut builders: HashMap<Vec<String>, GridBuilder> = HashMap::new();
        let mut rows = 0;
        let mut used = Vec::new();
        for (table, filter) in &tables {
            let before = rows;
            let mla = if context { Some(table.str("mla_dtype")?) } else { None };
            let kv = table.str("kv_cache_dtype")?;
            let heads = table.int("num_heads")?;
            let isl = table.int("isl")?;
            let step = if context { None } else { Some(table.int("step")?) };
            let batch = table.int("batch_size")?;
            let latency = table.float("latency")?;
            let power = table.opt_float("power")?;
            let kernel = table.opt_str("kernel_source")?;
            for i in 0..table.num_rows {
                if !passes_filter(filter, kernel.map(|c| c[i].as_str())) {
                    continue;
                }
                let key = match mla {
                    Some(m) => vec![m[i].clone(), kv[i].clone()],
                    None => vec![kv[i].clone()],
                };
                let n = to_u64(heads[i], "num_heads", table)?;
                let b = to_u64(batch[i], "batch_size", table)?;
                let mut s = to_u64(isl[i], "isl", table)?;
                let coords = match step {
                    None => vec![n, s, b],
                    Some(st) => {
                        s += to_u64(st[i], "step", table)?;
                        vec![n, b, s]
                    }
                };
                let leaf = Leaf::new(latency[i], power.as_ref().map_or(0.0, |c| c[i]));
                if builders.entry(key).or_insert_with(|| GridBuilder::new(3)).insert(coords, leaf) {
                    rows += 1;
                }
            }
            used.push(SourceRows::new(&table.path, rows - before));
        }
        if rows == 0 {
            let what = if context { "MLA op" } else { "generation MLA" };
            return Err(no_rows_message(what, &sources));
        }
        let sqrt_axis = if context { Some(1) } else { None };
        Ok(MlaKernelTable {
            slices: builders.into_iter().map(|(k, b)| (k, b.build(sqrt_axis))).collect(),
            sources: used,
        })
    }

    /// Every slice by dtype key, in key order.
    pub fn slices(&self) -> Vec<(&[String], &Grid)> {
        let mut out: Vec<(&[String], &Grid)> = self.slices.iter().map(|(k, g)| (k.as_slice(), g)).collect();
        out.sort_by(|a, b| a.0.cmp(b.0));
        out
    }

    /// The files this table was merged from, with the rows each contributed.
    pub fn sources(&self) -> &[SourceRows] {
        &self.sources
    }

    /// The dtype keys present, sorted (for messages that say which precisions exist).
    pub fn keys(&self) -> Vec<String> {
        let mut keys: Vec<String> = self.slices.keys().map(|k| format!("({})", k.join(", "))).collect();
        keys.sort();
        keys
    }

    /// The grid of a dtype key.
    pub fn slice(&self, key: &[&str]) -> Option<&Grid> {
        let key: Vec<String> = key.iter().map(|s| s.to_string()).collect();
        self.slices.get(&key)
    }
}

/// Native head count of the models whose MLA module rows the tables hold.
fn native_heads(model: &str) -> Option<u64> {
    match model {
        "deepseek-ai/DeepSeek-V3" | "deepseek-ai/DeepSeek-R1" | "nvidia/DeepSeek-V3.1-NVFP4" => Some(128),
        _ => None,
    }
}

/// Fused MLA module table: per dtype key, buckets by native head count.
#[derive(Debug)]
pub struct MlaModuleTable {
    slices: HashMap<Vec<String>, BTreeMap<u64, Grid>>,
    sources: Vec<SourceRows>,
}

impl MlaModuleTable {
    /// Loads `mla_context_module_perf` (key (mla_dtype, kv, gemm_type)) or
    /// `mla_generation_module_perf` (key (kv, gemm_type)). A row naming an unpinned model, an
    /// empty model, or heads × tp different from the native count fails the whole load.
    pub fn load(resolver: &SourceResolver, context: bool) -> Result<Self> {
        let basename =
            if context { "mla_context_module_perf.parquet" } else { "mla_generation_module_perf.parquet" };
        let sources = resolver.sources(basename);
        let tables = read_sources(
            &sources,
            &[
                "mla_dtype", "kv_cache_dtype", "gemm_type", "model", "tp_size", "num_heads", "isl", "step",
                "batch_size", "latency", "power", "kernel_source",
            ],
        )?;
        let mut builders: HashMap<Vec<String>, BTreeMap<u64, GridBuilder>> = HashMap::new();
        let mut rows = 0;
        let mut used = Vec::new();
        for (table, filter) in &tables {
            let before = rows;
            let mla = if context { Some(table.str("mla_dtype")?) } else { None };
            let kv = table.str("kv_cache_dtype")?;
            let gemm = table.str("gemm_type")?;
            let model = table.str("model")?;
            let tp = table.opt_int("tp_size")?;
            let heads = table.int("num_heads")?;
            let isl = table.int("isl")?;
            let step = if context { None } else { Some(table.int("step")?) };
            let batch = table.int("batch_size")?;
            let latency = table.float("latency")?;
            let power = table.opt_float("power")?;
            let kernel = table.opt_str("kernel_source")?;
            for i in 0..table.num_rows {
                if !passes_filter(filter, kernel.map(|c| c[i].as_str())) {
                    continue;
                }
                let n = to_u64(heads[i], "num_heads", table)?;
                let native = native_heads(&model[i]).ok_or_else(|| {
                    AicError::perf(format!(
                        "MLA module row in {} names unpinned model {:?}; only DeepSeek-V3/R1-shaped \
                         module rows (deepseek-ai/DeepSeek-V3, deepseek-ai/DeepSeek-R1, \
                         nvidia/DeepSeek-V3.1-NVFP4) can be bucketed by native head count",
                        display_path(&table.path),
                        model[i]
                    ))
                })?;
                let tp_i = match tp {
                    Some(c) => to_u64(c[i], "tp_size", table)?,
                    None => 1,
                };
                if tp_i > 1 && n * tp_i != native {
                    return Err(AicError::perf(format!(
                        "MLA module row in {} has num_heads {n} × tp_size {tp_i} != native heads {native} of {}",
                        display_path(&table.path),
                        model[i]
                    )));
                }
                let key = match mla {
                    Some(m) => vec![m[i].clone(), kv[i].clone(), gemm[i].clone()],
                    None => vec![kv[i].clone(), gemm[i].clone()],
                };
                let b = to_u64(batch[i], "batch_size", table)?;
                let mut s = to_u64(isl[i], "isl", table)?;
                let coords = match step {
                    None => vec![n, s, b],
                    Some(st) => {
                        s += to_u64(st[i], "step", table)?;
                        vec![n, b, s]
                    }
                };
                let leaf = Leaf::new(latency[i], power.as_ref().map_or(0.0, |c| c[i]));
                let bucket = builders.entry(key).or_default().entry(native).or_insert_with(|| GridBuilder::new(3));
                if bucket.insert(coords, leaf) {
                    rows += 1;
                }
            }
            used.push(SourceRows::new(&table.path, rows - before));
        }
        if rows == 0 {
            return Err(no_rows_message("MLA module", &sources));
        }
        let sqrt_axis = if context { Some(1) } else { None };
        let slices = builders
            .into_iter()
            .map(|(k, buckets)| (k, buckets.into_iter().map(|(n, b)| (n, b.build(sqrt_axis))).collect()))
            .collect();
        Ok(MlaModuleTable { slices, sources: used })
    }

    /// Every slice as `(dtype key, native head count, grid)`, in key order.
    pub fn slices(&self) -> Vec<(&[String], u64, &Grid)> {
        let mut keys: Vec<&Vec<String>> = self.slices.keys().collect();
        keys.sort();
        keys.into_iter()
            .flat_map(|k| self.slices[k].iter().map(move |(native, g)| (k.as_slice(), *native, g)))
            .collect()
    }

    /// The files this table was merged from, with the rows each contributed.
    pub fn sources(&self) -> &[SourceRows] {
        &self.sources
    }

    /// The dtype keys present, sorted (for messages that say which precisions exist).
    pub fn keys(&self) -> Vec<String> {
        let mut keys: Vec<String> = self.slices.keys().map(|k| format!("({})", k.join(", "))).collect();
        keys.sort();
        keys
    }

    /// The grid of a dtype key and native head count: exact bucket, else the only bucket,
    /// else the largest bucket ≤ native, else the smallest; no native resolves only a sole bucket.
    pub fn slice(&self, key: &[&str], native: Option<u32>) -> Option<&Grid> {
        let key: Vec<String> = key.iter().map(|s| s.to_string()).collect();
        let buckets = self.slices.get(&key)?;
        if buckets.len() == 1 {
            return buckets.values().next();
        }
        let native = u64::from(native?);
        buckets
            .get(&native)
            .or_else(|| buckets.range(..=native).next_back().map(|(_, g)| g))
            .or_else(|| buckets.values().next())
    }
}

/// MLA decode BMM table: per (quant, `mla_gen_pre`|`mla_gen_post`) and head count, a curve
/// over tokens.
#[derive(Debug)]
pub struct MlaBmmTable {
    curves: HashMap<(String, String), BTreeMap<u64, Grid>>,
    quants: HashSet<String>,
    sources: Vec<SourceRows>,
}

impl MlaBmmTable {
    /// Loads `mla_bmm_perf.parquet`.
    pub fn load(resolver: &SourceResolver) -> Result<Self> {
        let sources = resolver.sources("mla_bmm_perf.parquet");
        let tables = read_sources(
            &sources,
            &["bmm_dtype", "op_name", "num_heads", "num_tokens", "latency", "power", "kernel_source"],
        )?;
        let mut builders: HashMap<(String, String), BTreeMap<u64, GridBuilder>> = HashMap::new();
        let mut rows = 0;
        let mut used = Vec::new();
        for (table, filter) in &tables {
            let before = rows;
            let dtype = table.str("bmm_dtype")?;
            let op = table.str("op_name")?;
            let heads = table.int("num_heads")?;
            let tokens = table.int("num_tokens")?;
            let latency = table.float("latency")?;
            let power = table.opt_float("power")?;
            let kernel = table.opt_str("kernel_source")?;
            for i in 0..table.num_rows {
                if !passes_filter(filter, kernel.map(|c| c[i].as_str())) {
                    continue;
                }
                let leaf = Leaf::new(latency[i], power.as_ref().map_or(0.0, |c| c[i]));
                let grid = builders
                    .entry((dtype[i].clone(), op[i].clone()))
                    .or_default()
                    .entry(to_u64(heads[i], "num_heads", table)?)
                    .or_insert_with(|| GridBuilder::new(1));
                if grid.insert(vec![to_u64(tokens[i], "num_tokens", table)?], leaf) {
                    rows += 1;
                }
            }
            used.push(SourceRows::new(&table.path, rows - before));
        }
        if rows == 0 {
            return Err(no_rows_message("MLA BMM", &sources));
        }
        let quants = builders.keys().map(|k| k.0.clone()).collect();
        let curves = builders
            .into_iter()
            .map(|(k, heads)| (k, heads.into_iter().map(|(n, b)| (n, b.build(None))).collect()))
            .collect();
        Ok(MlaBmmTable { curves, quants, sources: used })
    }

    /// Every curve as `(quant, op, heads, curve)`, sorted by quant, op, heads.
    pub fn curves(&self) -> Vec<(&str, &str, u64, &Grid)> {
        let mut keys: Vec<&(String, String)> = self.curves.keys().collect();
        keys.sort();
        keys.into_iter()
            .flat_map(|k| self.curves[k].iter().map(move |(n, g)| (k.0.as_str(), k.1.as_str(), *n, g)))
            .collect()
    }

    /// The files this table was merged from, with the rows each contributed.
    pub fn sources(&self) -> &[SourceRows] {
        &self.sources
    }

    /// Whether the quant has any row.
    pub fn has_quant(&self, quant: &str) -> bool {
        self.quants.contains(quant)
    }

    /// The head-count curves of a (quant, op) slice.
    pub fn slice(&self, quant: &str, op: &str) -> Option<&BTreeMap<u64, Grid>> {
        self.curves.get(&(quant.to_string(), op.to_string()))
    }
}
