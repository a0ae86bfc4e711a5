//! MoE table (`moe_perf.parquet`, spec 10 §4.5, 11 §7): per (quant, distribution, shape) a
//! curve over the number of tokens. TRT-LLM's min-latency kernel rows form a separate
//! low-latency table; two sglang kernels are remapped to their own quant names at load.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use crate::data::sources::SourceResolver;
use crate::error::Result;
use crate::fast_hash::FastHashMap;
use crate::lookup::{Grid, GridBuilder, Leaf};

use super::{no_rows_message, passes_filter, read_sources, to_u64, SourceRows};

/// The slice of one MoE curve.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct MoeKey {
    /// MoE quant (after the load-time remaps).
    pub quant: String,
    /// Token-to-expert distribution, e.g. `power_law_1.2`.
    pub distribution: String,
    /// Experts per token.
    pub topk: u64,
    /// Experts.
    pub num_experts: u64,
    /// Hidden size.
    pub hidden_size: u64,
    /// Full per-expert intermediate size.
    pub inter_size: u64,
    /// Expert tensor parallelism.
    pub moe_tp_size: u64,
    /// Expert parallelism.
    pub moe_ep_size: u64,
}

impl std::fmt::Display for MoeKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "MoeKey {{ quant: {:?}, distribution: {:?}, topk: {}, num_experts: {}, hidden_size: {}, \
             inter_size: {}, moe_tp_size: {}, moe_ep_size: {} }}",
            self.quant,
            self.distribution,
            self.topk,
            self.num_experts,
            self.hidden_size,
            self.inter_size,
            self.moe_tp_size,
            self.moe_ep_size
        )
    }
}

/// Curves of one MoE table (standard or low-latency).
#[derive(Debug, Default)]
pub struct MoeCurves {
    curves: HashMap<MoeKey, Arc<Grid>>,
    /// Keys in first-seen (table) order.
    order: Vec<MoeKey>,
    distributions: HashSet<(String, String)>,
}

impl MoeCurves {
    /// The curve of a key.
    pub fn curve(&self, key: &MoeKey) -> Option<&Grid> {
        self.curves.get(key).map(|g| &**g)
    }

    /// The curve of a key, shared (an op holds it to skip the key lookup per query).
    pub fn curve_shared(&self, key: &MoeKey) -> Option<Arc<Grid>> {
        self.curves.get(key).cloned()
    }

    /// Whether any shape of `quant` has rows under `distribution`.
    pub fn has_distribution(&self, quant: &str, distribution: &str) -> bool {
        self.distributions.contains(&(quant.to_string(), distribution.to_string()))
    }

    /// Keys in first-seen order.
    pub fn keys(&self) -> &[MoeKey] {
        &self.order
    }

    /// Quant names in first-seen order.
    pub fn quants(&self) -> Vec<&str> {
        let mut out: Vec<&str> = Vec::new();
        for k in &self.order {
            if !out.contains(&k.quant.as_str()) {
                out.push(&k.quant);
            }
        }
        out
    }

    /// True when the table holds no curve.
    pub fn is_empty(&self) -> bool {
        self.curves.is_empty()
    }
}

/// The MoE table of one database.
#[derive(Debug)]
pub struct MoeTable {
    /// Every row except TRT-LLM's min-latency kernel.
    pub standard: MoeCurves,
    /// TRT-LLM `moe_torch_flow_min_latency` rows.
    pub low_latency: MoeCurves,
    sources: Vec<SourceRows>,
}

/// A curve's key while loading: interned remapped quant and distribution, then topk,
/// num_experts, hidden_size, inter_size, moe_tp_size, moe_ep_size.
type CompactKey = (u32, u32, [u64; 6]);

const LOW_LATENCY_KERNEL: &str = "moe_torch_flow_min_latency";

fn remap_quant<'a>(quant: &'a str, kernel: Option<&str>) -> &'a str {
    match (quant, kernel) {
        ("w4a8_mxfp4_mxfp8", Some("sglang_mxfp4_flashinfer_trtllm_moe")) => "w4a8_mxfp4_mxfp8_trtllm",
        ("w4a16_mxfp4", Some("sglang_flashinfer_cutlass_moe")) => "w4a16_mxfp4_cutlass",
        _ => quant,
    }
}

impl MoeTable {
    /// Loads and merges every source first-wins.
    pub fn load(resolver: &SourceResolver) -> Result<Self> {
        let sources = resolver.sources("moe_perf.parquet");
        let tables = read_sources(
            &sources,
            &[
                "moe_dtype",
                "distribution",
                "topk",
                "num_experts",
                "hidden_size",
                "inter_size",
                "moe_tp_size",
                "moe_ep_size",
                "num_tokens",
                "latency",
                "power",
                "kernel_source",
            ],
        )?;
        // Curves in first-seen order per table (standard, low-latency), found through a compact
        // key: the strings stay dictionary-coded, and the remapped quant and the distribution
        // are interned once per distinct value of a file instead of cloned per row.
        let mut curves: [Vec<(MoeKey, GridBuilder)>; 2] = [Vec::new(), Vec::new()];
        let mut index: [FastHashMap<CompactKey, usize>; 2] = [FastHashMap::default(), FastHashMap::default()];
        let mut names: Vec<String> = Vec::new();
        let intern = |names: &mut Vec<String>, s: &str| -> u32 {
            match names.iter().position(|n| n == s) {
                Some(p) => p as u32,
                None => {
                    names.push(s.to_string());
                    (names.len() - 1) as u32
                }
            }
        };
        let mut rows = 0usize;
        let mut used = Vec::new();
        for (table, filter) in &tables {
            let before = rows;
            let quant = table.str_codes("moe_dtype")?;
            let dist = table.str_codes("distribution")?;
            let ints: Vec<&[i64]> = ["topk", "num_experts", "hidden_size", "inter_size", "moe_tp_size", "moe_ep_size", "num_tokens"]
                .iter()
                .map(|c| table.int(c))
                .collect::<Result<_>>()?;
            let latency = table.float("latency")?;
            let power = table.opt_float("power")?;
            let kernel = table.opt_str_codes("kernel_source")?;
            // Per distinct kernel value (one slot when the column is absent): passes the
            // filter, which table, and the remapped quant id of each distinct quant value.
            let kernel_values: Vec<Option<&str>> = match &kernel {
                Some(k) => k.values.iter().map(|v| Some(v.as_str())).collect(),
                None => vec![None],
            };
            let kernel_ok: Vec<bool> = kernel_values.iter().map(|ks| passes_filter(filter, *ks)).collect();
            let kernel_which: Vec<usize> =
                kernel_values.iter().map(|ks| usize::from(*ks == Some(LOW_LATENCY_KERNEL))).collect();
            let quant_ids: Vec<Vec<u32>> = kernel_values
                .iter()
                .map(|ks| quant.values.iter().map(|q| intern(&mut names, remap_quant(q, *ks))).collect())
                .collect();
            let dist_ids: Vec<u32> = dist.values.iter().map(|d| intern(&mut names, d)).collect();
            for i in 0..table.num_rows {
                let kc = kernel.as_ref().map_or(0, |k| k.codes[i] as usize);
                if !kernel_ok[kc] {
                    continue;
                }
                let which = kernel_which[kc];
                let u = |c: usize, name: &str| to_u64(ints[c][i], name, table);
                let dims = [
                    u(0, "topk")?,
                    u(1, "num_experts")?,
                    u(2, "hidden_size")?,
                    u(3, "inter_size")?,
                    u(4, "moe_tp_size")?,
                    u(5, "moe_ep_size")?,
                ];
                let compact: CompactKey =
                    (quant_ids[kc][quant.codes[i] as usize], dist_ids[dist.codes[i] as usize], dims);
                let tokens = u(6, "num_tokens")?;
                let leaf = Leaf::new(latency[i], power.as_ref().map_or(0.0, |c| c[i]));
                let at = match index[which].get(&compact) {
                    Some(&at) => at,
                    None => {
                        let key = MoeKey {
                            quant: names[compact.0 as usize].clone(),
                            distribution: names[compact.1 as usize].clone(),
                            topk: dims[0],
                            num_experts: dims[1],
                            hidden_size: dims[2],
                            inter_size: dims[3],
                            moe_tp_size: dims[4],
                            moe_ep_size: dims[5],
                        };
                        curves[which].push((key, GridBuilder::new(1)));
                        index[which].insert(compact, curves[which].len() - 1);
                        curves[which].len() - 1
                    }
                };
                if curves[which][at].1.insert([tokens], leaf) {
                    rows += 1;
                }
            }
            used.push(SourceRows::new(&table.path, rows - before));
        }
        if rows == 0 {
            return Err(no_rows_message("MoE", &sources));
        }
        let [std, ll] = curves;
        let build = |b: Vec<(MoeKey, GridBuilder)>| {
            let order: Vec<MoeKey> = b.iter().map(|(k, _)| k.clone()).collect();
            let distributions = b.iter().map(|(k, _)| (k.quant.clone(), k.distribution.clone())).collect();
            MoeCurves { curves: b.into_iter().map(|(k, g)| (k, Arc::new(g.build(None)))).collect(), order, distributions }
        };
        Ok(MoeTable { standard: build(std), low_latency: build(ll), sources: used })
    }

    /// The files this table was merged from, with the rows each contributed.
    pub fn sources(&self) -> &[SourceRows] {
        &self.sources
    }
}
