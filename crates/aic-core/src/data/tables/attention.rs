//! Context and generation attention tables (spec 10 §4.2–§4.3, 11 §4.2): one first-wins
//! sub-table per kernel lane (`kernel_source`), each holding slices keyed by dtypes, KV heads,
//! head size and window, with grids over (heads, isl, batch) or (heads, batch, KV position).
//! Generation rows are raised to their SOL at load. A slice's grid is built on its first
//! lookup: a sweep reads a few of a table's slices, and building every grid dominated a fresh
//! process's first call.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use crate::data::sources::SourceResolver;
use crate::data::system::SystemSpec;
use crate::error::Result;
use crate::fast_hash::FastHashMap;
use crate::lookup::sol::{generation_attention_sol_ms, AttentionSolParams};
use crate::lookup::{Grid, GridBuilder, GridRows, Leaf};
use crate::spec::{FmhaQuant, KvQuant};

use super::{no_rows_message, passes_filter, read_sources, to_u64, SourceRows};

/// Which attention table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AttentionKind {
    /// Prefill: axes (num_heads, isl, batch), sqrt blend on isl.
    Context,
    /// Decode: axes (num_heads, batch, isl + step).
    Generation,
}

/// The slice a query needs inside a lane.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SliceKey {
    /// FMHA dtype (context only; `None` for generation).
    pub fmha: Option<FmhaQuant>,
    /// KV-cache dtype.
    pub kv: KvQuant,
    /// KV heads, 0 when equal to the query heads (MHA).
    pub n_kv_lookup: u32,
    /// Head size.
    pub head: u32,
    /// Sliding window (0 = full).
    pub window: u32,
}

impl std::fmt::Display for SliceKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.fmha {
            Some(q) => write!(f, "ContextKey {{ fmha_quant: {:?}, ", q.as_str())?,
            None => write!(f, "GenerationKey {{ ")?,
        }
        write!(
            f,
            "kv_quant: {:?}, n_kv_lookup: {}, head_size: {}, window_size: {} }}",
            self.kv.as_str(),
            self.n_kv_lookup,
            self.head,
            self.window
        )
    }
}

/// One kernel lane: its slices.
#[derive(Debug)]
pub struct Lane {
    /// The `kernel_source` value (`default` for rows without one).
    pub name: String,
    slices: HashMap<SliceKey, LazyGrid>,
}

/// One slice's rows, built into a grid on first use (the same rows, so the same grid).
#[derive(Debug)]
struct LazyGrid {
    rows: Mutex<Option<GridRows>>,
    sqrt_axis: Option<usize>,
    grid: OnceLock<Arc<Grid>>,
}

impl LazyGrid {
    fn get(&self) -> &Arc<Grid> {
        // `OnceLock` runs one initialiser at a time, so the builder is taken exactly once.
        self.grid.get_or_init(|| {
            let mut rows = self.rows.lock().unwrap_or_else(|e| e.into_inner());
            let rows = rows.take().unwrap_or_else(|| GridBuilder::new(3).into_rows());
            Arc::new(rows.build(self.sqrt_axis))
        })
    }
}

/// An attention table: lanes in first-seen order.
#[derive(Debug)]
pub struct AttentionTable {
    kind: AttentionKind,
    lanes: Vec<Lane>,
    sources: Vec<SourceRows>,
}

impl AttentionTable {
    /// Loads and merges every source first-wins per lane.
    pub fn load(resolver: &SourceResolver, system: &SystemSpec, kind: AttentionKind) -> Result<Self> {
        let basename = match kind {
            AttentionKind::Context => "context_attention_perf.parquet",
            AttentionKind::Generation => "generation_attention_perf.parquet",
        };
        let sources = resolver.sources(basename);
        let tables = read_sources(&sources, crate::data::handover::ATTENTION_COLUMNS)?;
        let mut lanes: Vec<(String, FastHashMap<SliceKey, GridBuilder>)> = Vec::new();
        let mut rows = 0usize;
        let mut used = Vec::new();
        for (table, filter) in &tables {
            let before = rows;
            // Strings stay dictionary-coded: the filter, the lane and the dtypes are decided
            // once per distinct value, not once per row.
            let kernel = table.opt_str_codes("kernel_source")?;
            let kernel_ok: Vec<bool> = kernel
                .as_ref()
                .map(|c| c.values.iter().map(|v| passes_filter(filter, Some(v.as_str()))).collect())
                .unwrap_or_default();
            let no_kernel_ok = passes_filter(filter, None);
            let mut lane_of: Vec<Option<usize>> = vec![None; kernel.as_ref().map_or(1, |c| c.values.len())];
            let attn = match kind {
                AttentionKind::Context => Some(table.str_codes("attn_dtype")?),
                AttentionKind::Generation => None,
            };
            let fmha_of: Vec<Option<FmhaQuant>> =
                attn.as_ref().map(|a| a.values.iter().map(|v| FmhaQuant::parse(v)).collect()).unwrap_or_default();
            let kv = table.str_codes("kv_cache_dtype")?;
            let kv_of: Vec<Option<KvQuant>> = kv.values.iter().map(|v| KvQuant::parse(v)).collect();
            let heads = table.int("num_heads")?;
            let kv_heads = table.int("num_key_value_heads")?;
            let head_dim = table.int("head_dim")?;
            let window = table.opt_int("window_size")?;
            let isl = table.int("isl")?;
            let step = match kind {
                AttentionKind::Generation => Some(table.int("step")?),
                AttentionKind::Context => None,
            };
            let batch = table.int("batch_size")?;
            let latency = table.float("latency")?;
            let power = table.opt_float("power")?;
            for i in 0..table.num_rows {
                let (ok, lane_code) = match &kernel {
                    Some(c) => (kernel_ok[c.codes[i] as usize], c.codes[i] as usize),
                    None => (no_kernel_ok, 0),
                };
                if !ok {
                    continue;
                }
                let fmha = match &attn {
                    Some(a) => match fmha_of[a.codes[i] as usize] {
                        Some(q) => Some(q),
                        None => continue,
                    },
                    None => None,
                };
                let Some(kvq) = kv_of[kv.codes[i] as usize] else { continue };
                let n = to_u64(heads[i], "num_heads", table)?;
                let nkv = to_u64(kv_heads[i], "num_key_value_heads", table)?;
                let key = SliceKey {
                    fmha,
                    kv: kvq,
                    n_kv_lookup: if nkv == n { 0 } else { nkv as u32 },
                    head: to_u64(head_dim[i], "head_dim", table)? as u32,
                    window: match window {
                        Some(w) => to_u64(w[i], "window_size", table)? as u32,
                        None => 0,
                    },
                };
                let b = to_u64(batch[i], "batch_size", table)?;
                let s = to_u64(isl[i], "isl", table)?;
                let p = power.as_ref().map_or(0.0, |c| c[i]);
                let mut leaf = Leaf::new(latency[i], p);
                let coords: [u64; 3] = match kind {
                    AttentionKind::Context => [n, s, b],
                    AttentionKind::Generation => {
                        let s = s + to_u64(step.expect("generation step column")[i], "step", table)?;
                        let params = AttentionSolParams {
                            head: key.head as f64,
                            window: key.window as f64,
                            n_kv_lookup: key.n_kv_lookup as f64,
                            kv_bytes: kvq.bytes_per_elem(),
                            flops: system
                                .flops(kvq.as_str(), kvq.decode_flops_key(system.gpu.sm_version))?,
                            mem_bw: system.gpu.mem_bw,
                        };
                        let sol = generation_attention_sol_ms(&params, n as f64, b as f64, s as f64);
                        if sol > leaf.latency {
                            leaf.latency = sol;
                        }
                        [n, b, s]
                    }
                };
                let lane = match lane_of[lane_code] {
                    Some(p) => p,
                    None => {
                        let lane_name = kernel.as_ref().map_or("default", |c| c.values[lane_code].as_str());
                        let p = match lanes.iter().position(|l| l.0 == lane_name) {
                            Some(p) => p,
                            None => {
                                lanes.push((lane_name.to_string(), FastHashMap::default()));
                                lanes.len() - 1
                            }
                        };
                        lane_of[lane_code] = Some(p);
                        p
                    }
                };
                let grid = lanes[lane].1.entry(key).or_insert_with(|| GridBuilder::new(3));
                if grid.insert(coords, leaf) {
                    rows += 1;
                }
            }
            used.push(SourceRows::new(&table.path, rows - before));
        }
        if rows == 0 {
            let what = match kind {
                AttentionKind::Context => "context attention",
                AttentionKind::Generation => "generation attention",
            };
            return Err(no_rows_message(what, &sources));
        }
        let sqrt_axis = match kind {
            AttentionKind::Context => Some(1),
            AttentionKind::Generation => None,
        };
        let lanes = lanes
            .into_iter()
            .map(|(name, slices)| Lane {
                name,
                slices: slices
                    .into_iter()
                    .map(|(k, b)| (k, LazyGrid { rows: Mutex::new(Some(b.into_rows())), sqrt_axis, grid: OnceLock::new() }))
                    .collect(),
            })
            .collect();
        Ok(AttentionTable { kind, lanes, sources: used })
    }

    /// Which table this is.
    pub fn kind(&self) -> AttentionKind {
        self.kind
    }

    /// Lane names in first-seen order.
    pub fn lane_names(&self) -> Vec<&str> {
        self.lanes.iter().map(|l| l.name.as_str()).collect()
    }

    /// Every slice with its lane, lanes in first-seen order, slices of a lane in key order
    /// (dtypes, KV heads, head size, window).
    pub fn slices(&self) -> Vec<(&str, &SliceKey, &Grid)> {
        let mut out = Vec::new();
        for lane in &self.lanes {
            let mut slices: Vec<(&SliceKey, &Grid)> = lane.slices.iter().map(|(k, g)| (k, &**g.get())).collect();
            slices.sort_by_key(|(k, _)| (k.fmha.map(|q| q.as_str()), k.kv.as_str(), k.n_kv_lookup, k.head, k.window));
            out.extend(slices.into_iter().map(|(k, g)| (lane.name.as_str(), k, g)));
        }
        out
    }

    /// The files this table was merged from, with the rows each contributed.
    pub fn sources(&self) -> &[SourceRows] {
        &self.sources
    }

    /// Head sizes collected (in any lane, at any window) for a slice key with its head size and
    /// window ignored: the candidates of the cross-head-size transfer (spec 35 §10.2).
    pub fn head_sizes(&self, key: &SliceKey) -> Vec<u32> {
        let mut heads: Vec<u32> = self
            .lanes
            .iter()
            .flat_map(|l| l.slices.keys())
            .filter(|k| k.fmha == key.fmha && k.kv == key.kv && k.n_kv_lookup == key.n_kv_lookup)
            .map(|k| k.head)
            .collect();
        heads.sort_unstable();
        heads.dedup();
        heads
    }

    /// The slice answering a query: the first lane of `lane_order` holding the key, else the
    /// first table lane (first-seen order) holding it. Returns the lane name and the grid.
    pub fn select(&self, lane_order: &[String], key: &SliceKey) -> Option<(&str, &Arc<Grid>)> {
        for wanted in lane_order {
            if let Some(lane) = self.lanes.iter().find(|l| &l.name == wanted) {
                if let Some(g) = lane.slices.get(key) {
                    return Some((&lane.name, g.get()));
                }
            }
        }
        self.lanes.iter().find_map(|l| l.slices.get(key).map(|g| (l.name.as_str(), g.get())))
    }
}
