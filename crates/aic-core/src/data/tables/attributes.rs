//! The reference's perf-database attribute names and its nested JSON table views (spec 40 §9,
//! `table_view_json`). Code ported from the reference addresses a table by the attribute its
//! Python perf database keeps it under (`_gemm_data`, `_nccl_data`, ...); this module maps
//! those names onto our tables and writes a table as the nested object such code expects:
//! one level per key component and per grid axis (first-seen order), leaves
//! `{"latency", "power", "energy"}`.

use std::path::Path;

use crate::data::parquet::RawTable;
use crate::error::{AicError, Result};

use super::{PerfDatabase, TableId, TableView};

/// Every table-view attribute of the reference's perf database with the parquet basenames
/// that feed it, in the reference's order (`table_view_attributes()`).
pub const TABLE_VIEW_ATTRIBUTES: [(&str, &[&str]); 39] = [
    ("_gemm_data", &["gemm_perf.parquet"]),
    ("_compute_scale_data", &["computescale_perf.parquet"]),
    ("_scale_matrix_data", &["scale_matrix_perf.parquet"]),
    ("_context_attention_data", &["context_attention_perf.parquet"]),
    ("_generation_attention_data", &["generation_attention_perf.parquet"]),
    ("_encoder_attention_data", &["encoder_attention_perf.parquet"]),
    ("_context_mla_data", &["context_mla_perf.parquet"]),
    ("_generation_mla_data", &["generation_mla_perf.parquet"]),
    ("_mla_bmm_data", &["mla_bmm_perf.parquet"]),
    ("_context_mla_module_data", &["mla_context_module_perf.parquet"]),
    ("_generation_mla_module_data", &["mla_generation_module_perf.parquet"]),
    ("_wideep_context_mla_data", &["wideep_context_mla_perf.parquet"]),
    ("_wideep_generation_mla_data", &["wideep_generation_mla_perf.parquet"]),
    ("_moe_data", &["moe_perf.parquet"]),
    ("_moe_low_latency_data", &["moe_perf.parquet"]),
    ("_wideep_context_moe_data", &["wideep_context_moe_perf.parquet"]),
    ("_wideep_generation_moe_data", &["wideep_generation_moe_perf.parquet"]),
    ("_wideep_deepep_normal_data", &["wideep_deepep_normal_perf.parquet"]),
    ("_wideep_deepep_ll_data", &["wideep_deepep_ll_perf.parquet"]),
    ("_wideep_moe_compute_data", &["wideep_moe_perf.parquet"]),
    ("_trtllm_alltoall_data", &["trtllm_alltoall_perf.parquet"]),
    (
        "_moe_a2a_data",
        &[
            "moe_a2a_perf.parquet",
            "wideep_deepep_normal_perf.parquet",
            "wideep_deepep_ll_perf.parquet",
            "trtllm_alltoall_perf.parquet",
        ],
    ),
    (
        "_moe_ep_data",
        &[
            "moe_expert_compute_perf.parquet",
            "wideep_context_moe_perf.parquet",
            "wideep_generation_moe_perf.parquet",
            "wideep_moe_perf.parquet",
        ],
    ),
    ("_custom_allreduce_data", &["custom_allreduce_perf.parquet"]),
    ("_nccl_data", &["nccl_perf.parquet"]),
    ("_oneccl_data", &["oneccl_perf.parquet"]),
    ("_context_dsa_module_data", &["dsa_context_module_perf.parquet"]),
    ("_context_dsa_module_skip_data", &["dsa_context_module_perf.parquet"]),
    ("_generation_dsa_module_data", &["dsa_generation_module_perf.parquet"]),
    ("_generation_dsa_module_skip_data", &["dsa_generation_module_perf.parquet"]),
    ("_mhc_module_data", &["mhc_module_perf.parquet"]),
    (
        "_context_deepseek_v4_attention_module_data",
        &["dsv4_csa_context_module_perf.parquet", "dsv4_hca_context_module_perf.parquet"],
    ),
    (
        "_generation_deepseek_v4_attention_module_data",
        &["dsv4_csa_generation_module_perf.parquet", "dsv4_hca_generation_module_perf.parquet"],
    ),
    ("_dsv4_sparse_kernel_data.paged_mqa_logits", &["dsv4_paged_mqa_logits_module_perf.parquet"]),
    ("_dsv4_csa_topk_calib_data", &["dsv4_csa_topk_calib_perf.parquet"]),
    ("_dsv4_megamoe_module_data", &["dsv4_megamoe_module_perf.parquet"]),
    ("_mamba2_data", &["mamba2_perf.parquet"]),
    ("_gdn_data", &["gdn_perf.parquet"]),
    ("_kda_data", &["kda_perf.parquet"]),
];

/// The tables whose nested layout aic writes: (attribute, table, levels inserted after the
/// slice key, e.g. the all-reduce strategy `AUTO` the reference keys its curves by).
const WRITTEN: [(&str, TableId, &[&str]); 3] = [
    ("_gemm_data", TableId::Gemm, &[]),
    ("_custom_allreduce_data", TableId::CustomAllReduce, &["AUTO"]),
    ("_nccl_data", TableId::Nccl, &[]),
];

/// A JSON object under construction, keys in first-insertion order.
#[derive(Default)]
struct Node {
    entries: Vec<(String, Child)>,
}

enum Child {
    Node(Node),
    Leaf([f64; 3]),
}

impl Node {
    /// Sets the leaf at `path`; an existing leaf there is kept (first wins).
    fn insert(&mut self, path: &[String], leaf: [f64; 3]) {
        let Some((head, rest)) = path.split_first() else { return };
        let position = match self.entries.iter().rposition(|(k, _)| k == head) {
            Some(p) => p,
            None => {
                let child = if rest.is_empty() { Child::Leaf(leaf) } else { Child::Node(Node::default()) };
                self.entries.push((head.clone(), child));
                self.entries.len() - 1
            }
        };
        if let Child::Node(node) = &mut self.entries[position].1 {
            node.insert(rest, leaf);
        }
    }

    fn write(&self, out: &mut String) {
        out.push('{');
        for (i, (key, child)) in self.entries.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            push_json(out, key);
            out.push(':');
            match child {
                Child::Node(node) => node.write(out),
                Child::Leaf([latency, power, energy]) => {
                    out.push_str("{\"latency\":");
                    push_json(out, latency);
                    out.push_str(",\"power\":");
                    push_json(out, power);
                    out.push_str(",\"energy\":");
                    push_json(out, energy);
                    out.push('}');
                }
            }
        }
        out.push('}');
    }
}

/// Appends one value as compact JSON (strings escaped, floats in shortest round-trip form).
fn push_json<T: serde::Serialize + ?Sized>(out: &mut String, value: &T) {
    out.push_str(&serde_json::to_string(value).unwrap_or_else(|_| "null".to_string()));
}

/// A table view as nested JSON text: key components, then `extra` levels, then axes.
pub fn nested_json(view: &TableView, extra: &[&str]) -> String {
    let mut root = Node::default();
    for slice in &view.slices {
        let mut path: Vec<String> = slice.key.iter().map(|(_, v)| v.to_string()).collect();
        path.extend(extra.iter().map(|s| s.to_string()));
        let depth = path.len();
        for i in 0..slice.len() {
            path.truncate(depth);
            path.extend(slice.columns.iter().map(|c| c[i].to_string()));
            root.insert(&path, [slice.latency_ms[i], slice.power_w[i], slice.energy_wms[i]]);
        }
    }
    let mut out = String::new();
    root.write(&mut out);
    out
}

/// The GEMM table as nested JSON `quant → m → n → k` with the latencies as measured: the
/// reference's view shows the rows before the load-time SOL clamp (its text has exactly the
/// length of the raw rows on every recorded engine, not of the clamped ones). Rows merge
/// first-wins over the resolved sources (kernel filters applied, `awq`/`gptq` skipped);
/// quants in first-seen order, `m`, `n`, `k` ascending.
fn gemm_nested_json(db: &PerfDatabase) -> Result<String> {
    use crate::lookup::Leaf;
    let sources = db.resolver.sources("gemm_perf.parquet");
    let tables = super::read_sources(&sources, &["gemm_dtype", "m", "n", "k", "latency", "power", "kernel_source"])?;
    let mut seen = std::collections::HashSet::new();
    let mut quants: Vec<String> = Vec::new();
    let mut rows: Vec<(usize, u64, u64, u64, Leaf)> = Vec::new();
    for (table, filter) in &tables {
        let dtype = table.str("gemm_dtype")?;
        let (m, n, k) = (table.int("m")?, table.int("n")?, table.int("k")?);
        let latency = table.float("latency")?;
        let power = table.opt_float("power")?;
        let kernel = table.opt_str("kernel_source")?;
        for i in 0..table.num_rows {
            let q = dtype[i].as_str();
            if q == "awq" || q == "gptq" || !super::passes_filter(filter, kernel.map(|c| c[i].as_str())) {
                continue;
            }
            let (mi, ni, ki) = (super::to_u64(m[i], "m", table)?, super::to_u64(n[i], "n", table)?, super::to_u64(k[i], "k", table)?);
            let qi = match quants.iter().position(|x| x == q) {
                Some(p) => p,
                None => {
                    quants.push(q.to_string());
                    quants.len() - 1
                }
            };
            if seen.insert((qi, mi, ni, ki)) {
                rows.push((qi, mi, ni, ki, Leaf::new(latency[i], power.as_ref().map_or(0.0, |c| c[i]))));
            }
        }
    }
    rows.sort_by_key(|r| (r.0, r.1, r.2, r.3));
    let mut root = Node::default();
    for (qi, mi, ni, ki, leaf) in rows {
        let path = [quants[qi].clone(), mi.to_string(), ni.to_string(), ki.to_string()];
        root.insert(&path, [leaf.latency, leaf.power, leaf.energy]);
    }
    let mut out = String::new();
    root.write(&mut out);
    Ok(out)
}

/// Puts the NCCL curves of each dtype in the order their operation first appears in the file
/// (the reference's nested view keeps file order: `all_gather`, `alltoall`, `reduce_scatter`,
/// `all_reduce` in the shipped tables); the GPU counts stay ascending.
fn order_operations_as_in_file(view: &mut TableView, path: &Path) -> Result<()> {
    let raw = RawTable::read_columns(path, &["op_name"])?;
    let mut order: Vec<String> = Vec::new();
    for op in raw.str("op_name")? {
        if !order.contains(op) {
            order.push(op.clone());
        }
    }
    let rank = |slice: &super::SliceView| {
        let op = slice.key_value("operation").map(|v| v.to_string()).unwrap_or_default();
        order.iter().position(|o| *o == op).unwrap_or(order.len())
    };
    view.slices.sort_by_cached_key(|s| (s.key_value("dtype").cloned(), rank(s)));
    Ok(())
}

/// The parquet basenames of a table-view attribute; a perf-data error for an unknown one.
pub fn table_view_sources(attribute: &str) -> Result<&'static [&'static str]> {
    TABLE_VIEW_ATTRIBUTES
        .iter()
        .find(|(name, _)| *name == attribute)
        .map(|(_, files)| *files)
        .ok_or_else(|| AicError::perf(format!("unknown table-view attribute \"{attribute}\"")))
}

fn exists(path: Option<impl AsRef<Path>>) -> bool {
    path.is_some_and(|p| p.as_ref().is_file())
}

/// One table of `db` as nested JSON text under the reference's attribute name: `None` when no
/// source file of it exists; a perf-data error for an unknown attribute; a value error for a
/// known attribute whose nested layout aic does not write (see the README's compatibility
/// table).
pub fn table_view_json(db: &PerfDatabase, attribute: &str) -> Result<Option<String>> {
    let files = table_view_sources(attribute)?;
    let present = match attribute {
        "_nccl_data" => exists(db.resolver.nccl_path()),
        "_oneccl_data" => exists(db.resolver.oneccl_path()),
        _ => files.iter().any(|f| db.resolver.sources(f).iter().any(|s| s.path.is_file())),
    };
    if !present {
        return Ok(None);
    }
    let Some((_, table, extra)) = WRITTEN.iter().find(|(name, _, _)| *name == attribute) else {
        return Err(AicError::value(format!(
            "table_view_json: aic does not write the nested view of \"{attribute}\"; use \
             aic.table_view() for its slices"
        )));
    };
    if *table == TableId::Gemm {
        return gemm_nested_json(db).map(Some);
    }
    let mut view = db.table_view(*table)?;
    if let (TableId::Nccl, Some(path)) = (table, db.resolver.nccl_path()) {
        order_operations_as_in_file(&mut view, &path)?;
    }
    Ok(Some(nested_json(&view, extra)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nested_json_keeps_first_seen_order_and_first_leaf() {
        let mut root = Node::default();
        let p = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        root.insert(&p(&["half", "2", "256"]), [0.005, 0.0, 0.0]);
        root.insert(&p(&["half", "2", "128"]), [0.0050999999999999995, 1.5, 2.0]);
        root.insert(&p(&["half", "2", "256"]), [9.0, 9.0, 9.0]);
        let mut out = String::new();
        root.write(&mut out);
        assert_eq!(
            out,
            "{\"half\":{\"2\":{\"256\":{\"latency\":0.005,\"power\":0.0,\"energy\":0.0},\
             \"128\":{\"latency\":0.0050999999999999995,\"power\":1.5,\"energy\":2.0}}}}"
        );
    }

    #[test]
    fn attributes_are_the_reference_catalogue() {
        assert_eq!(TABLE_VIEW_ATTRIBUTES.len(), 39);
        assert_eq!(table_view_sources("_moe_a2a_data").unwrap().len(), 4);
        let e = table_view_sources("_no_such_attribute").unwrap_err();
        assert_eq!(e.to_string(), "perf database error: unknown table-view attribute \"_no_such_attribute\"");
    }
}
