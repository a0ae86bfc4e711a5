//! DeepSeek-V4 tables (spec 34 §5.1, §5.4, §5.6, §6): the CSA / HCA attention module tables,
//! the CSA top-k calibration, the paged-MQA indexer-logits table of the context-parallel
//! composition, and the mHC token curves.
//!
//! These differ from the DSA module tables (first row wins everywhere, no kernel buckets, the
//! kind is the file, heads are stored per rank and resolved by a nearest-head slice rule), so
//! they have their own loader; the context-parallel top-k lookup reuses DSA's
//! [`SparseKernelTable`].

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, OnceLock};

use crate::data::sources::SourceResolver;
use crate::error::{AicError, Result};
use crate::lookup::{Grid, GridBuilder, Leaf};
use crate::spec::Dsv4Kind;

use super::{display_path, passes_filter, read_sources, to_u64, SourceRows, SparseKernelTable};

/// `(fmha dtype, kv dtype, gemm type)` of a DSV4 module row; the fmha part is empty for the
/// generation tables.
pub type Dsv4Key = [String; 3];

/// The head rule of spec 34 §5.3: exact key; else the only key; else the largest key ≤
/// `want`; else the smallest key.
pub fn nearest_head<V>(map: &BTreeMap<u64, V>, want: u64) -> Option<&V> {
    if let Some(v) = map.get(&want) {
        return Some(v);
    }
    if map.len() == 1 {
        return map.values().next();
    }
    map.range(..=want).next_back().map(|(_, v)| v).or_else(|| map.values().next())
}

fn dtype(s: &str) -> String {
    if s == "fp8_e4m3" {
        "fp8".to_string()
    } else {
        s.to_string()
    }
}

/// One DSV4 module table: key → native heads → local heads → grid (context axes
/// `(step, isl, batch)`, generation axes `(batch, isl + step)`).
#[derive(Debug)]
pub struct Dsv4ModuleTable {
    slices: HashMap<Dsv4Key, BTreeMap<u64, BTreeMap<u64, Arc<Grid>>>>,
    sources: Vec<SourceRows>,
}

impl Dsv4ModuleTable {
    /// The file of a kind and phase.
    pub fn basename(kind: Dsv4Kind, context: bool) -> &'static str {
        match (kind, context) {
            (Dsv4Kind::Csa, true) => "dsv4_csa_context_module_perf.parquet",
            (Dsv4Kind::Csa, false) => "dsv4_csa_generation_module_perf.parquet",
            (Dsv4Kind::Hca, true) => "dsv4_hca_context_module_perf.parquet",
            (Dsv4Kind::Hca, false) => "dsv4_hca_generation_module_perf.parquet",
        }
    }

    /// Loads a module table; first row wins in source order.
    pub fn load(resolver: &SourceResolver, kind: Dsv4Kind, context: bool) -> Result<Self> {
        let sources = resolver.sources(Self::basename(kind, context));
        let tables = read_sources(
            &sources,
            &[
                "kernel_source", "mla_dtype", "kv_cache_dtype", "gemm_type", "num_heads", "tp_size", "batch_size",
                "isl", "step", "latency", "power",
            ],
        )?;
        let mut builders: HashMap<Dsv4Key, BTreeMap<u64, BTreeMap<u64, GridBuilder>>> = HashMap::new();
        let mut used = Vec::new();
        let mut total = 0usize;
        for (table, filter) in &tables {
            let kernel = table.opt_str("kernel_source")?;
            let mla = if context { Some(table.str("mla_dtype")?) } else { None };
            let kv = table.str("kv_cache_dtype")?;
            let gemm = table.str("gemm_type")?;
            let heads = table.int("num_heads")?;
            let tp = table.opt_int("tp_size")?;
            let batch = table.int("batch_size")?;
            let isl = table.int("isl")?;
            let step = table.int("step")?;
            let latency = table.float("latency")?;
            let power = table.opt_float("power")?;
            let mut kept = 0;
            for i in 0..table.num_rows {
                if !passes_filter(filter, kernel.map(|c| c[i].as_str())) {
                    continue;
                }
                let local = to_u64(heads[i], "num_heads", table)?;
                let t = match tp {
                    Some(c) => to_u64(c[i], "tp_size", table)?.max(1),
                    None => 1,
                };
                let b = to_u64(batch[i], "batch_size", table)?;
                let s = to_u64(isl[i], "isl", table)?;
                let st = to_u64(step[i], "step", table)?;
                let key: Dsv4Key = [mla.map(|c| dtype(&c[i])).unwrap_or_default(), dtype(&kv[i]), gemm[i].clone()];
                let coords = if context { vec![st, s, b] } else { vec![b, s + st] };
                let leaf = Leaf::new(latency[i], power.as_ref().map_or(0.0, |c| c[i]));
                let builder = builders
                    .entry(key)
                    .or_default()
                    .entry(local * t)
                    .or_default()
                    .entry(local)
                    .or_insert_with(|| GridBuilder::new(if context { 3 } else { 2 }));
                if builder.insert(coords, leaf) {
                    kept += 1;
                }
            }
            total += kept;
            used.push(SourceRows::new(&table.path, kept));
        }
        if total == 0 {
            let first = sources.first().map(|s| display_path(&s.path)).unwrap_or_else(|| "<none>".to_string());
            return Err(AicError::perf(format!(
                "perf database error: no DSV4 module rows loaded from {} source(s) (first: {first})",
                sources.len()
            )));
        }
        let slices = builders
            .into_iter()
            .map(|(k, natives)| {
                let natives = natives
                    .into_iter()
                    .map(|(n, locals)| (n, locals.into_iter().map(|(l, b)| (l, Arc::new(b.build(None)))).collect()))
                    .collect();
                (k, natives)
            })
            .collect();
        Ok(Dsv4ModuleTable { slices, sources: used })
    }

    /// The grid of a key at `(native, local)` heads under the head rule; `None` on a key miss
    /// or when no head slice resolves.
    pub fn grid(&self, key: &Dsv4Key, native: u64, local: u64) -> Option<&Arc<Grid>> {
        let natives = self.slices.get(key)?;
        nearest_head(natives, native).and_then(|locals| nearest_head(locals, local))
    }

    /// The files this table was merged from.
    pub fn sources(&self) -> &[SourceRows] {
        &self.sources
    }
}

/// The top-k correction Δ of one native head count: exact `(step, isl, batch)` values and the
/// same points nested `batch → isl → [(step, Δ)]` (steps ascending) for the chained
/// interpolation.
#[derive(Debug, Default, Clone)]
pub struct Dsv4Delta {
    exact: HashMap<(u64, u64, u64), f64>,
    nested: BTreeMap<u64, BTreeMap<u64, Vec<(u64, f64)>>>,
}

impl Dsv4Delta {
    /// Adds one point (first wins).
    pub fn insert(&mut self, step: u64, isl: u64, batch: u64, delta: f64) {
        if self.exact.contains_key(&(step, isl, batch)) {
            return;
        }
        self.exact.insert((step, isl, batch), delta);
        let steps = self.nested.entry(batch).or_default().entry(isl).or_default();
        let at = steps.partition_point(|(s, _)| *s < step);
        steps.insert(at, (step, delta));
    }

    /// The value at an exact key.
    pub fn exact(&self, step: u64, isl: u64, batch: u64) -> Option<f64> {
        self.exact.get(&(step, isl, batch)).copied()
    }

    /// The points nested `batch → isl → [(step, Δ)]`.
    #[allow(clippy::type_complexity)]
    pub fn nested(&self) -> &BTreeMap<u64, BTreeMap<u64, Vec<(u64, f64)>>> {
        &self.nested
    }
}

/// The CSA top-k calibration (spec 34 §5.4, §5.6) per native head count.
#[derive(Debug, Default)]
pub struct Dsv4Calibration {
    /// `v1_flat − v1_top_last` (context), clamped at 0.
    pub dv1: HashMap<u64, Dsv4Delta>,
    /// `v2_flat − v2_top_last` (generation), clamped at 0.
    pub dv2: HashMap<u64, Dsv4Delta>,
    /// `v1_top_last` rows as a `batch → isl → step` table (context parallelism).
    pub top_last: HashMap<u64, SparseKernelTable>,
}

impl Dsv4Calibration {
    /// Loads `dsv4_csa_topk_calib_perf` (none → empty); first row wins per
    /// `(num_heads, step, isl, batch, score_mode)`.
    pub fn load(resolver: &SourceResolver) -> Result<Self> {
        let sources = resolver.sources("dsv4_csa_topk_calib_perf.parquet");
        let tables =
            read_sources(&sources, &["kernel_source", "num_heads", "step", "isl", "batch_size", "score_mode", "latency"])?;
        let mut rows: HashMap<(u64, u64, u64, u64, String), f64> = HashMap::new();
        let mut order: Vec<(u64, u64, u64, u64, String)> = Vec::new();
        for (table, filter) in &tables {
            let Some(heads) = table.opt_int("num_heads")? else {
                continue;
            };
            let kernel = table.opt_str("kernel_source")?;
            let step = table.int("step")?;
            let isl = table.int("isl")?;
            let batch = table.int("batch_size")?;
            let mode = table.str("score_mode")?;
            let latency = table.float("latency")?;
            for i in 0..table.num_rows {
                if !passes_filter(filter, kernel.map(|c| c[i].as_str())) {
                    continue;
                }
                let k = (
                    to_u64(heads[i], "num_heads", table)?,
                    to_u64(step[i], "step", table)?,
                    to_u64(isl[i], "isl", table)?,
                    to_u64(batch[i], "batch_size", table)?,
                    mode[i].clone(),
                );
                if let std::collections::hash_map::Entry::Vacant(slot) = rows.entry(k.clone()) {
                    slot.insert(latency[i]);
                    order.push(k);
                }
            }
        }
        let mut out = Dsv4Calibration::default();
        for k in &order {
            let (n, st, i, b, mode) = k;
            let v = rows[k];
            let pair = |flat: &str, last: &str| -> Option<f64> {
                let f = rows.get(&(*n, *st, *i, *b, flat.to_string()))?;
                let l = rows.get(&(*n, *st, *i, *b, last.to_string()))?;
                Some((f - l).max(0.0))
            };
            match mode.as_str() {
                "v1_flat" => {
                    if let Some(d) = pair("v1_flat", "v1_top_last") {
                        out.dv1.entry(*n).or_default().insert(*st, *i, *b, d);
                    }
                }
                "v2_flat" => {
                    if let Some(d) = pair("v2_flat", "v2_top_last") {
                        out.dv2.entry(*n).or_default().insert(*st, *i, *b, d);
                    }
                }
                "v1_top_last" => {
                    out.top_last.entry(*n).or_default().insert_first(*b, *i, *st, v);
                }
                _ => {}
            }
        }
        Ok(out)
    }
}

/// `dsv4_paged_mqa_logits_module_perf` grids by `(num_heads, tp_size)`, axes
/// `(step, isl, batch)` (spec 34 §5.6).
#[derive(Debug, Default)]
pub struct Dsv4PagedMqa {
    grids: HashMap<(u64, u64), Grid>,
}

impl Dsv4PagedMqa {
    /// Loads the table (none → empty); first row wins.
    pub fn load(resolver: &SourceResolver) -> Result<Self> {
        let sources = resolver.sources("dsv4_paged_mqa_logits_module_perf.parquet");
        let tables = read_sources(
            &sources,
            &["kernel_source", "num_heads", "tp_size", "step", "isl", "batch_size", "latency", "power"],
        )?;
        let mut builders: HashMap<(u64, u64), GridBuilder> = HashMap::new();
        for (table, filter) in &tables {
            let kernel = table.opt_str("kernel_source")?;
            let heads = table.int("num_heads")?;
            let tp = table.opt_int("tp_size")?;
            let step = table.int("step")?;
            let isl = table.int("isl")?;
            let batch = table.int("batch_size")?;
            let latency = table.float("latency")?;
            let power = table.opt_float("power")?;
            for i in 0..table.num_rows {
                if !passes_filter(filter, kernel.map(|c| c[i].as_str())) {
                    continue;
                }
                let n = to_u64(heads[i], "num_heads", table)?;
                let t = match tp {
                    Some(c) => to_u64(c[i], "tp_size", table)?,
                    None => 1,
                };
                let coords =
                    [to_u64(step[i], "step", table)?, to_u64(isl[i], "isl", table)?, to_u64(batch[i], "batch_size", table)?];
                let leaf = Leaf::new(latency[i], power.as_ref().map_or(0.0, |c| c[i]));
                builders.entry((n, t)).or_insert_with(|| GridBuilder::new(3)).insert(coords, leaf);
            }
        }
        Ok(Dsv4PagedMqa { grids: builders.into_iter().map(|(k, b)| (k, b.build(None))).collect() })
    }

    /// The grid of `heads` at `tp`, else at tp 1.
    pub fn grid(&self, heads: u64, tp: u64) -> Option<&Grid> {
        self.grids.get(&(heads, tp)).or_else(|| self.grids.get(&(heads, 1)))
    }
}

/// `(op_name, hc_mult, hidden_size)` of an mHC curve.
pub type MhcKey = (String, u64, u64);

/// `mhc_module_perf`: one token curve per key, first row wins (spec 34 §6).
#[derive(Debug)]
pub struct MhcTable {
    curves: HashMap<MhcKey, Arc<Grid>>,
}

impl MhcTable {
    /// Loads the table.
    pub fn load(resolver: &SourceResolver) -> Result<Self> {
        let sources = resolver.sources("mhc_module_perf.parquet");
        let tables =
            read_sources(&sources, &["kernel_source", "op_name", "num_tokens", "hc_mult", "hidden_size", "latency", "power"])?;
        let mut builders: HashMap<MhcKey, GridBuilder> = HashMap::new();
        for (table, filter) in &tables {
            let kernel = table.opt_str("kernel_source")?;
            let op = table.str("op_name")?;
            let tokens = table.int("num_tokens")?;
            let hc = table.int("hc_mult")?;
            let hidden = table.int("hidden_size")?;
            let latency = table.float("latency")?;
            let power = table.opt_float("power")?;
            for i in 0..table.num_rows {
                if !passes_filter(filter, kernel.map(|c| c[i].as_str())) {
                    continue;
                }
                let key = (op[i].clone(), to_u64(hc[i], "hc_mult", table)?, to_u64(hidden[i], "hidden_size", table)?);
                let leaf = Leaf::new(latency[i], power.as_ref().map_or(0.0, |c| c[i]));
                builders
                    .entry(key)
                    .or_insert_with(|| GridBuilder::new(1))
                    .insert([to_u64(tokens[i], "num_tokens", table)?], leaf);
            }
        }
        if builders.is_empty() && tables.is_empty() {
            let first = sources.first().map(|s| display_path(&s.path)).unwrap_or_else(|| "<none>".to_string());
            return Err(AicError::perf(format!("no MHC module rows loaded from {} source(s) (first: {first})", sources.len())));
        }
        Ok(MhcTable { curves: builders.into_iter().map(|(k, b)| (k, Arc::new(b.build(None)))).collect() })
    }

    /// The curve of a key.
    pub fn curve(&self, key: &MhcKey) -> Option<&Arc<Grid>> {
        self.curves.get(key)
    }
}

/// The DeepSeek-V4 tables of one database, each loaded on first use and kept.
#[derive(Debug, Default)]
pub struct Dsv4Tables {
    modules: [OnceLock<Result<Arc<Dsv4ModuleTable>>>; 4],
    calibration: OnceLock<Result<Arc<Dsv4Calibration>>>,
    paged_mqa: OnceLock<Result<Arc<Dsv4PagedMqa>>>,
    mhc: OnceLock<Result<Arc<MhcTable>>>,
}

impl Dsv4Tables {
    /// A module table of a kind and phase.
    pub fn module(&self, resolver: &SourceResolver, kind: Dsv4Kind, context: bool) -> Result<&Arc<Dsv4ModuleTable>> {
        let i = usize::from(kind == Dsv4Kind::Hca) * 2 + usize::from(context);
        self.modules[i]
            .get_or_init(|| Dsv4ModuleTable::load(resolver, kind, context).map(Arc::new))
            .as_ref()
            .map_err(Clone::clone)
    }

    /// The CSA top-k calibration.
    pub fn calibration(&self, resolver: &SourceResolver) -> Result<&Arc<Dsv4Calibration>> {
        self.calibration.get_or_init(|| Dsv4Calibration::load(resolver).map(Arc::new)).as_ref().map_err(Clone::clone)
    }

    /// The paged-MQA logits table.
    pub fn paged_mqa(&self, resolver: &SourceResolver) -> Result<&Arc<Dsv4PagedMqa>> {
        self.paged_mqa.get_or_init(|| Dsv4PagedMqa::load(resolver).map(Arc::new)).as_ref().map_err(Clone::clone)
    }

    /// The mHC table.
    pub fn mhc(&self, resolver: &SourceResolver) -> Result<&Arc<MhcTable>> {
        self.mhc.get_or_init(|| MhcTable::load(resolver).map(Arc::new)).as_ref().map_err(Clone::clone)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn head_rule() {
        let m: BTreeMap<u64, u64> = [(8, 8), (16, 16), (32, 32)].into_iter().collect();
        assert_eq!(nearest_head(&m, 16), Some(&16));
        assert_eq!(nearest_head(&m, 4), Some(&8), "below every key: the smallest");
        assert_eq!(nearest_head(&m, 20), Some(&16), "the largest key at or below");
        assert_eq!(nearest_head(&m, 64), Some(&32));
        let one: BTreeMap<u64, u64> = [(64, 1)].into_iter().collect();
        assert_eq!(nearest_head(&one, 128), Some(&1));
    }
}
