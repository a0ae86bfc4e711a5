//! Sparse-attention module tables (spec 32 §4, §5.7): the DSA context / generation module
//! tables and the sub-kernel tables the context-parallel composition reads.
//!
//! These tables exist because the sparse-attention families answer a whole attention block from
//! one measured module row, and their files follow load rules no other table has: rows are split
//! by `op_name` into a full and a skip (shared-index) table, each row lands in one or two
//! kernel "buckets", and **within one file the last row wins** (across files the first source
//! still wins). [`ModuleRows`] holds those rules so later sparse families (MSA) can share them.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, OnceLock};

use crate::data::sources::SourceResolver;
use crate::error::{AicError, Result};
use crate::lookup::{Grid, GridBuilder, Leaf};

use super::{display_path, passes_filter, read_sources, to_u64, SourceRows, SourceTables};

/// A kernel bucket of a DSA module table (spec 32 §4.3 rule 4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DsaBucket {
    /// TRT-LLM sparse MLA kernels (every plain query asks for this one).
    Trtllm = 0,
    /// FlashMLA sparse kernels with an fp8 KV cache (the context-parallel base asks for it).
    FlashmlaKv = 1,
}

impl DsaBucket {
    /// The bucket name as the reference spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            DsaBucket::Trtllm => "trtllm",
            DsaBucket::FlashmlaKv => "flashmla_kv",
        }
    }
}

/// The bucket(s) one row backs, from its `kernel_source` and KV dtype (spec 32 §4.3 rule 4).
pub fn dsa_buckets(kernel_source: &str, kv_cache_dtype: &str) -> &'static [DsaBucket] {
    const BOTH: &[DsaBucket] = &[DsaBucket::Trtllm, DsaBucket::FlashmlaKv];
    const TRT: &[DsaBucket] = &[DsaBucket::Trtllm];
    const FLASH: &[DsaBucket] = &[DsaBucket::FlashmlaKv];
    if kv_cache_dtype == "bfloat16" {
        return BOTH;
    }
    match kernel_source {
        "sglang_dsa_indexer_trtllm" | "sglang_dsa_skip_indexer_trtllm" => TRT,
        "sglang_dsa_indexer_flashmla_sparse" | "sglang_dsa_skip_indexer_flashmla_sparse" => FLASH,
        "sglang_dsa_dense_mha_trtllm_ragged" => BOTH,
        ks if ks.contains("trtllm") => TRT,
        _ => FLASH,
    }
}

/// Which half of a module file a table holds: rows whose `op_name` contains `skip_indexer`
/// (layers that reuse a sibling's top-k index), or every other row.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DsaPart {
    /// Layers that compute their own index.
    Full,
    /// Layers that reuse a shared index (`*_skip_indexer` rows).
    Skip,
}

/// Rows of a module table under the sparse-family load rules: within one source the last row
/// of a (key, bucket, coordinate) wins, across sources the first source wins.
#[derive(Debug)]
pub struct ModuleRows<K> {
    depth: usize,
    builders: HashMap<(K, DsaBucket), GridBuilder>,
    rows: usize,
}

impl<K: std::hash::Hash + Eq + Clone> ModuleRows<K> {
    /// Empty rows for grids of `depth` axes.
    pub fn new(depth: usize) -> Self {
        ModuleRows { depth, builders: HashMap::new(), rows: 0 }
    }

    /// Merges one source's rows `(key, bucket, coordinates, leaf)` in file order: the last
    /// duplicate inside the source wins, and a coordinate an earlier source holds is kept.
    /// Returns how many rows of this source the table kept.
    pub fn merge_source(&mut self, rows: impl IntoIterator<Item = (K, DsaBucket, Vec<u64>, Leaf)>) -> usize {
        let mut own: HashMap<(K, DsaBucket, Vec<u64>), Leaf> = HashMap::new();
        for (key, bucket, coords, leaf) in rows {
            own.insert((key, bucket, coords), leaf);
        }
        let mut kept = 0;
        for ((key, bucket, coords), leaf) in own {
            let depth = self.depth;
            let builder = self.builders.entry((key, bucket)).or_insert_with(|| GridBuilder::new(depth));
            if builder.insert(coords, leaf) {
                kept += 1;
            }
        }
        self.rows += kept;
        kept
    }

    /// Rows kept over every source.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// The grids by key, each with its buckets (every axis blends raw-linearly).
    pub fn build(self) -> HashMap<K, BTreeMap<DsaBucket, Grid>> {
        let mut out: HashMap<K, BTreeMap<DsaBucket, Grid>> = HashMap::new();
        for ((key, bucket), builder) in self.builders {
            out.entry(key).or_default().insert(bucket, builder.build(None));
        }
        out
    }
}

/// `(architecture, mla_dtype, kv_cache_dtype, gemm_type)` of a DSA module row.
pub type DsaKey = [String; 4];

/// One key of a DSA module table: a grid per bucket.
#[derive(Debug)]
pub struct DsaSlice {
    buckets: BTreeMap<DsaBucket, Grid>,
}

impl DsaSlice {
    /// The grid answering a request for `bucket`: that bucket, else `flashmla_kv`, else
    /// `trtllm` (spec 32 §5.4 step 4).
    pub fn grid(&self, bucket: DsaBucket) -> Option<&Grid> {
        self.buckets
            .get(&bucket)
            .or_else(|| self.buckets.get(&DsaBucket::FlashmlaKv))
            .or_else(|| self.buckets.get(&DsaBucket::Trtllm))
            .or_else(|| self.buckets.values().next())
    }

    /// Every bucket with its grid, in bucket order.
    pub fn buckets(&self) -> impl Iterator<Item = (DsaBucket, &Grid)> {
        self.buckets.iter().map(|(b, g)| (*b, g))
    }
}

/// A DSA module table (context or generation, full or skip part).
#[derive(Debug)]
pub struct DsaModuleTable {
    slices: HashMap<DsaKey, DsaSlice>,
    sources: Vec<SourceRows>,
}

impl DsaModuleTable {
    /// Loads `dsa_context_module_perf` (`context`, coordinates `(heads, prefix, isl, batch)`)
    /// or `dsa_generation_module_perf` (coordinates `(heads, batch, isl + step)`), keeping the
    /// rows of `part`.
    pub fn load(resolver: &SourceResolver, context: bool, part: DsaPart) -> Result<Self> {
        let basename =
            if context { "dsa_context_module_perf.parquet" } else { "dsa_generation_module_perf.parquet" };
        Self::load_file(resolver, basename, context, part)
    }

    /// Loads any module table of the sparse-family schema (`basename`, e.g. the MSA module
    /// tables of spec 36 §5.3) under the same rules as [`DsaModuleTable::load`].
    pub fn load_file(resolver: &SourceResolver, basename: &str, context: bool, part: DsaPart) -> Result<Self> {
        let sources = resolver.sources(basename);
        let tables: SourceTables = read_sources(
            &sources,
            &[
                "op_name", "kernel_source", "architecture", "mla_dtype", "kv_cache_dtype", "gemm_type", "num_heads",
                "batch_size", "isl", "step", "latency", "power",
            ],
        )?;
        let mut rows: ModuleRows<DsaKey> = ModuleRows::new(if context { 4 } else { 3 });
        let mut used = Vec::new();
        for (table, filter) in &tables {
            let op_name = table.opt_str("op_name")?;
            let kernel = table.opt_str("kernel_source")?;
            let arch = table.str("architecture")?;
            let mla = table.str("mla_dtype")?;
            let kv = table.str("kv_cache_dtype")?;
            let gemm = table.str("gemm_type")?;
            let heads = table.int("num_heads")?;
            let batch = table.int("batch_size")?;
            let isl = table.int("isl")?;
            let step = table.int("step")?;
            let latency = table.float("latency")?;
            let power = table.opt_float("power")?;
            let mut own = Vec::new();
            for i in 0..table.num_rows {
                let ks = kernel.map(|c| c[i].as_str());
                if !passes_filter(filter, ks) {
                    continue;
                }
                let is_skip = op_name.is_some_and(|c| c[i].contains("skip_indexer"));
                if is_skip != (part == DsaPart::Skip) {
                    continue;
                }
                let n = to_u64(heads[i], "num_heads", table)?;
                let b = to_u64(batch[i], "batch_size", table)?;
                let s = to_u64(isl[i], "isl", table)?;
                let st = to_u64(step[i], "step", table)?;
                let coords = if context { vec![n, st, s, b] } else { vec![n, b, s + st] };
                let key: DsaKey = [arch[i].clone(), mla[i].clone(), kv[i].clone(), gemm[i].clone()];
                let leaf = Leaf::new(latency[i], power.as_ref().map_or(0.0, |c| c[i]));
                for &bucket in dsa_buckets(ks.unwrap_or(""), &kv[i]) {
                    own.push((key.clone(), bucket, coords.clone(), leaf));
                }
            }
            let kept = rows.merge_source(own);
            used.push(SourceRows::new(&table.path, kept));
        }
        if rows.rows() == 0 {
            return Err(no_dsa_rows(&sources));
        }
        let slices = rows.build().into_iter().map(|(k, buckets)| (k, DsaSlice { buckets })).collect();
        Ok(DsaModuleTable { slices, sources: used })
    }

    /// The slice of a key `(architecture, fmha/mla dtype, kv dtype, gemm dtype)`.
    pub fn slice(&self, key: &DsaKey) -> Option<&DsaSlice> {
        self.slices.get(key)
    }

    /// Every slice by key, in key order.
    pub fn slices(&self) -> Vec<(&DsaKey, &DsaSlice)> {
        let mut out: Vec<(&DsaKey, &DsaSlice)> = self.slices.iter().collect();
        out.sort_by(|a, b| a.0.cmp(b.0));
        out
    }

    /// The files this table was merged from, with the rows each contributed.
    pub fn sources(&self) -> &[SourceRows] {
        &self.sources
    }

    /// The table with every key mapped through `f`, merging the slices that map to one key:
    /// buckets and coordinates are united and, where two merged keys hold one coordinate, the
    /// key later in sorted key order wins (spec 36 §5.3 step 2, the MSA generation blanking).
    pub fn merge_keys(self, f: impl Fn(&DsaKey) -> DsaKey) -> Self {
        let mut keys: Vec<DsaKey> = self.slices.keys().cloned().collect();
        keys.sort();
        let depth = self.slices.values().flat_map(|s| s.buckets.values()).map(Grid::depth).next().unwrap_or(0);
        let mut builders: HashMap<(DsaKey, DsaBucket), GridBuilder> = HashMap::new();
        for key in keys.iter().rev() {
            let slice = &self.slices[key];
            for (bucket, grid) in &slice.buckets {
                let builder = builders.entry((f(key), *bucket)).or_insert_with(|| GridBuilder::new(depth));
                for (coords, leaf) in grid.points() {
                    builder.insert(coords, *leaf);
                }
            }
        }
        let mut slices: HashMap<DsaKey, DsaSlice> = HashMap::new();
        for ((key, bucket), builder) in builders {
            slices.entry(key).or_insert_with(|| DsaSlice { buckets: BTreeMap::new() }).buckets.insert(bucket, builder.build(None));
        }
        DsaModuleTable { slices, sources: self.sources }
    }
}

/// Prefix of the message when no source holds a row of a DSA table (the skip-table probe
/// recognises it).
pub const NO_DSA_ROWS: &str = "no DSA module rows loaded from ";

fn no_dsa_rows(sources: &[crate::data::sources::Source]) -> AicError {
    let first = sources.first().map(|s| display_path(&s.path)).unwrap_or_else(|| "<none>".to_string());
    AicError::perf(format!("{NO_DSA_ROWS}{} source(s) (first: {first})", sources.len()))
}

/// True for the error of a DSA table load that found no row in any source.
pub fn is_no_dsa_rows(err: &AicError) -> bool {
    matches!(err, AicError::PerfData(m) if m.starts_with(NO_DSA_ROWS))
}

/// One sparse sub-kernel table of the context-parallel composition:
/// `batch → isl → step → latency` (spec 32 §5.7).
#[derive(Debug, Default, Clone)]
pub struct SparseKernelTable {
    batches: BTreeMap<u64, BTreeMap<u64, BTreeMap<u64, f64>>>,
}

impl SparseKernelTable {
    /// True when no row was kept.
    pub fn is_empty(&self) -> bool {
        self.batches.is_empty()
    }

    /// Inserts one latency unless its `(batch, isl, step)` is already present (first wins).
    pub fn insert_first(&mut self, batch: u64, isl: u64, step: u64, latency: f64) {
        self.batches.entry(batch).or_default().entry(isl).or_default().entry(step).or_insert(latency);
    }

    /// The batch slice of `b`: exact, else the nearest collected batch (ties to the smaller).
    pub fn batch_slice(&self, b: u64) -> Option<&BTreeMap<u64, BTreeMap<u64, f64>>> {
        if let Some(s) = self.batches.get(&b) {
            return Some(s);
        }
        nearest_entry(&self.batches, b)
    }
}

/// The entry with the key nearest `x` (ties to the smaller key).
pub fn nearest_entry<V>(map: &BTreeMap<u64, V>, x: u64) -> Option<&V> {
    let below = map.range(..=x).next_back();
    let above = map.range(x..).next();
    match (below, above) {
        (Some((kb, vb)), Some((ka, va))) => Some(if x - kb <= ka - x { vb } else { va }),
        (Some((_, v)), None) | (None, Some((_, v))) => Some(v),
        (None, None) => None,
    }
}

/// The three sparse sub-kernel tables of one architecture prefix, per head count.
#[derive(Debug, Default)]
pub struct SparseKernelTables {
    /// `<pfx>_mqa_logits_module_perf` by head count (`None` = file without `num_heads`).
    mqa: HashMap<Option<u64>, SparseKernelTable>,
    /// `<pfx>_topk_module_perf` rows with `score_mode == "flat"`.
    topk_flat: HashMap<Option<u64>, SparseKernelTable>,
    /// The other `<pfx>_topk_module_perf` rows (shipped: `top_last`).
    topk_last: HashMap<Option<u64>, SparseKernelTable>,
}

/// Which sparse sub-kernel table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SparseKernel {
    /// FP8 MQA logits of the indexer.
    Mqa,
    /// Top-k over the last chunk.
    TopkLast,
    /// Flat top-k.
    TopkFlat,
}

impl SparseKernel {
    /// The name used in messages.
    pub fn as_str(self) -> &'static str {
        match self {
            SparseKernel::Mqa => "mqa",
            SparseKernel::TopkLast => "topk_last",
            SparseKernel::TopkFlat => "topk_flat",
        }
    }
}

static EMPTY_SPARSE: OnceLock<SparseKernelTable> = OnceLock::new();

impl SparseKernelTables {
    /// Loads `<prefix>_mqa_logits_module_perf` and `<prefix>_topk_module_perf` (a missing file
    /// leaves its tables empty). Within a file the last row wins, across files the first.
    pub fn load(resolver: &SourceResolver, prefix: &str) -> Result<Self> {
        let mut out = SparseKernelTables::default();
        let mqa = resolver.sources(&format!("{prefix}_mqa_logits_module_perf.parquet"));
        for (table, filter) in &read_sources(&mqa, &SPARSE_COLUMNS)? {
            let rows = sparse_rows(table, filter)?;
            merge_sparse(&mut out.mqa, rows.iter().map(|r| (r.0, r.1, r.2, r.3, r.4)));
        }
        let topk = resolver.sources(&format!("{prefix}_topk_module_perf.parquet"));
        for (table, filter) in &read_sources(&topk, &SPARSE_COLUMNS)? {
            let rows = sparse_rows(table, filter)?;
            let flat = |r: &&SparseRow| r.5.as_deref() == Some("flat");
            merge_sparse(&mut out.topk_flat, rows.iter().filter(flat).map(|r| (r.0, r.1, r.2, r.3, r.4)));
            merge_sparse(&mut out.topk_last, rows.iter().filter(|r| !flat(r)).map(|r| (r.0, r.1, r.2, r.3, r.4)));
        }
        Ok(out)
    }

    /// The table of `kernel` for `heads` (rows of files without a `num_heads` column count for
    /// every head count); empty when nothing was collected.
    pub fn table(&self, kernel: SparseKernel, heads: u64) -> &SparseKernelTable {
        let map = match kernel {
            SparseKernel::Mqa => &self.mqa,
            SparseKernel::TopkLast => &self.topk_last,
            SparseKernel::TopkFlat => &self.topk_flat,
        };
        map.get(&Some(heads))
            .or_else(|| map.get(&None))
            .unwrap_or_else(|| EMPTY_SPARSE.get_or_init(SparseKernelTable::default))
    }
}

/// Merges one source's rows `(heads, batch, isl, step, latency)`: the last duplicate inside the
/// source wins, a coordinate an earlier source holds is kept.
fn merge_sparse(
    map: &mut HashMap<Option<u64>, SparseKernelTable>,
    rows: impl Iterator<Item = (Option<u64>, u64, u64, u64, f64)>,
) {
    let mut own: HashMap<(Option<u64>, u64, u64, u64), f64> = HashMap::new();
    for (h, b, s, st, lat) in rows {
        own.insert((h, b, s, st), lat);
    }
    for ((h, b, s, st), lat) in own {
        map.entry(h).or_default().batches.entry(b).or_default().entry(s).or_default().entry(st).or_insert(lat);
    }
}

const SPARSE_COLUMNS: [&str; 7] = ["num_heads", "batch_size", "isl", "step", "latency", "score_mode", "kernel_source"];

type SparseRow = (Option<u64>, u64, u64, u64, f64, Option<String>);

fn sparse_rows(
    table: &crate::data::parquet::RawTable,
    filter: &Option<Arc<std::collections::BTreeSet<String>>>,
) -> Result<Vec<SparseRow>> {
    let heads = table.opt_int("num_heads")?;
    let batch = table.int("batch_size")?;
    let isl = table.int("isl")?;
    let step = table.int("step")?;
    let latency = table.float("latency")?;
    let mode = table.opt_str("score_mode")?;
    let kernel = table.opt_str("kernel_source")?;
    let mut out = Vec::with_capacity(table.num_rows);
    for i in 0..table.num_rows {
        if !passes_filter(filter, kernel.map(|c| c[i].as_str())) {
            continue;
        }
        let h = match heads {
            Some(c) => Some(to_u64(c[i], "num_heads", table)?),
            None => None,
        };
        out.push((
            h,
            to_u64(batch[i], "batch_size", table)?,
            to_u64(isl[i], "isl", table)?,
            to_u64(step[i], "step", table)?,
            latency[i],
            mode.map(|c| c[i].clone()),
        ));
    }
    Ok(out)
}

/// The sparse-attention tables of one database, each loaded on first use and kept (a failed
/// load is kept too).
#[derive(Debug, Default)]
pub struct DsaTables {
    context_full: OnceLock<Result<Arc<DsaModuleTable>>>,
    context_skip: OnceLock<Result<Arc<DsaModuleTable>>>,
    generation_full: OnceLock<Result<Arc<DsaModuleTable>>>,
    generation_skip: OnceLock<Result<Arc<DsaModuleTable>>>,
    sparse_dsv32: OnceLock<Result<Arc<SparseKernelTables>>>,
    sparse_glm5: OnceLock<Result<Arc<SparseKernelTables>>>,
}

impl DsaTables {
    /// A DSA module table (context or generation, full or skip part).
    pub fn module(&self, resolver: &SourceResolver, context: bool, part: DsaPart) -> Result<&Arc<DsaModuleTable>> {
        let cell = match (context, part) {
            (true, DsaPart::Full) => &self.context_full,
            (true, DsaPart::Skip) => &self.context_skip,
            (false, DsaPart::Full) => &self.generation_full,
            (false, DsaPart::Skip) => &self.generation_skip,
        };
        cell.get_or_init(|| DsaModuleTable::load(resolver, context, part).map(Arc::new))
            .as_ref()
            .map_err(Clone::clone)
    }

    /// The sparse sub-kernel tables of a file prefix (`dsv32` or `glm5`).
    pub fn sparse(&self, resolver: &SourceResolver, prefix: &'static str) -> Result<&Arc<SparseKernelTables>> {
        let cell = if prefix == "dsv32" { &self.sparse_dsv32 } else { &self.sparse_glm5 };
        cell.get_or_init(|| SparseKernelTables::load(resolver, prefix).map(Arc::new))
            .as_ref()
            .map_err(Clone::clone)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bucket_rule() {
        use DsaBucket::*;
        assert_eq!(dsa_buckets("sglang_dsa_indexer_trtllm", "bfloat16"), &[Trtllm, FlashmlaKv]);
        assert_eq!(dsa_buckets("sglang_dsa_indexer_trtllm", "fp8"), &[Trtllm]);
        assert_eq!(dsa_buckets("sglang_dsa_skip_indexer_trtllm", "fp8"), &[Trtllm]);
        assert_eq!(dsa_buckets("sglang_dsa_indexer_flashmla_sparse", "fp8"), &[FlashmlaKv]);
        assert_eq!(dsa_buckets("sglang_dsa_skip_indexer_flashmla_sparse", "fp8"), &[FlashmlaKv]);
        assert_eq!(dsa_buckets("sglang_dsa_dense_mha_trtllm_ragged", "fp8"), &[Trtllm, FlashmlaKv]);
        assert_eq!(dsa_buckets("default_trtllm_kernel", "fp8"), &[Trtllm]);
        assert_eq!(dsa_buckets("FLASHMLA_SPARSE", "fp8"), &[FlashmlaKv]);
        assert_eq!(dsa_buckets("TRTLLM", "fp8"), &[FlashmlaKv], "the trtllm test is case-sensitive");
        assert_eq!(dsa_buckets("", "fp8"), &[FlashmlaKv]);
    }

    fn leaf(v: f64) -> Leaf {
        Leaf::new(v, 0.0)
    }

    #[test]
    fn last_row_wins_inside_a_source_first_source_across() {
        let mut rows: ModuleRows<u8> = ModuleRows::new(1);
        let kept = rows.merge_source(vec![
            (0, DsaBucket::Trtllm, vec![4], leaf(0.8151)),
            (0, DsaBucket::Trtllm, vec![4], leaf(0.8173)),
            (0, DsaBucket::Trtllm, vec![8], leaf(1.0)),
        ]);
        assert_eq!(kept, 2);
        let kept = rows.merge_source(vec![(0, DsaBucket::Trtllm, vec![4], leaf(9.0)), (0, DsaBucket::Trtllm, vec![16], leaf(2.0))]);
        assert_eq!(kept, 1);
        let grids = rows.build();
        let grid = &grids[&0][&DsaBucket::Trtllm];
        let points: Vec<(u64, f64)> = grid.points().map(|(c, l)| (c[0], l.latency)).collect();
        assert_eq!(points, vec![(4, 0.8173), (8, 1.0), (16, 2.0)]);
    }

    #[test]
    fn sparse_nearest_ties_to_smaller() {
        let map: BTreeMap<u64, &str> = [(2, "a"), (6, "b")].into_iter().collect();
        assert_eq!(nearest_entry(&map, 4), Some(&"a"));
        assert_eq!(nearest_entry(&map, 5), Some(&"b"));
        assert_eq!(nearest_entry(&map, 100), Some(&"b"));
        assert_eq!(nearest_entry(&map, 0), Some(&"a"));
    }

    #[test]
    fn sparse_merge_keeps_first_source() {
        let mut map = HashMap::new();
        merge_sparse(&mut map, vec![(Some(64), 1, 1024, 0, 1.0), (Some(64), 1, 1024, 0, 2.0)].into_iter());
        merge_sparse(&mut map, vec![(Some(64), 1, 1024, 0, 3.0), (Some(64), 1, 1024, 128, 4.0)].into_iter());
        let t = &map[&Some(64)];
        let steps = &t.batch_slice(1).unwrap()[&1024];
        assert_eq!(steps.get(&0), Some(&2.0));
        assert_eq!(steps.get(&128), Some(&4.0));
    }
}
