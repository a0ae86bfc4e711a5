//! The reference's perf-database attribute names and its nested JSON table views (spec 40 §9,
//! `table_view_json`). Code ported from the reference addresses a table by the attribute its
//! Python perf database keeps it under (`_gemm_data`, `_nccl_data`, ...); this module maps
//! those names onto our tables and writes a table as the nested object such code expects:
//! one level per key component and per grid axis (first-seen order), leaves
//! `{"latency", "power", "energy"}`, numbers written as Rust's `{:?}` writes an `f64` (the
//! reference's text: shortest round-trip digits, a tie broken upward, exponent form below
//! 1e-4 and from 1e16 on; `NaN`, `Infinity`, `-Infinity` for non-finite values).

use std::collections::HashMap;
use std::path::Path;

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
    /// Position of each key in `entries` (the GEMM view inserts ~300k leaves).
    index: HashMap<String, usize>,
}

enum Child {
    Node(Node),
    Leaf([f64; 3]),
}

impl Node {
    /// Sets the leaf at `path`; an existing leaf there is kept (first wins).
    fn insert(&mut self, path: &[String], leaf: [f64; 3]) {
        let Some((head, rest)) = path.split_first() else { return };
        let position = match self.index.get(head) {
            Some(&p) => p,
            None => {
                let child = if rest.is_empty() { Child::Leaf(leaf) } else { Child::Node(Node::default()) };
                self.entries.push((head.clone(), child));
                self.index.insert(head.clone(), self.entries.len() - 1);
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
            push_json_string(out, key);
            out.push(':');
            match child {
                Child::Node(node) => node.write(out),
                Child::Leaf([latency, power, energy]) => {
                    out.push_str("{\"latency\":");
                    push_number(out, *latency);
                    out.push_str(",\"power\":");
                    push_number(out, *power);
                    out.push_str(",\"energy\":");
                    push_number(out, *energy);
                    out.push('}');
                }
            }
        }
        out.push('}');
    }
}

/// Appends a key as a JSON string (escaped).
fn push_json_string(out: &mut String, key: &str) {
    out.push_str(&serde_json::to_string(key).unwrap_or_else(|_| "\"\"".to_string()));
}

/// Appends a number the way the reference's text writes it: Rust's `{:?}` of the `f64`
/// (`0.5556106567382813` for the exact 0.55561065673828125, where `ryu`/`serde_json` and
/// Python's `repr` break the tie to even: `...2812`), non-finite values as `NaN`,
/// `Infinity`, `-Infinity`.
fn push_number(out: &mut String, value: f64) {
    use std::fmt::Write as _;
    if value.is_nan() {
        out.push_str("NaN");
    } else if value.is_infinite() {
        out.push_str(if value > 0.0 { "Infinity" } else { "-Infinity" });
    } else {
        // Writing into a String cannot fail.
        let _ = write!(out, "{value:?}");
    }
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
/// length of the raw rows on every recorded engine, not of the clamped ones). The view folds
/// the resolved sources in source order and each file's rows in file order (kernel filters
/// applied, `awq`/`gptq` skipped): every level lists its keys in the order they first occur,
/// and the first row of a `(quant, m, n, k)` wins.
fn gemm_nested_json(db: &PerfDatabase) -> Result<String> {
    use crate::lookup::Leaf;
    let sources = db.resolver.sources("gemm_perf.parquet");
    let tables = super::read_sources(&sources, &["gemm_dtype", "m", "n", "k", "latency", "power", "kernel_source"])?;
    let mut root = Node::default();
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
            let leaf = Leaf::new(latency[i], power.as_ref().map_or(0.0, |c| c[i]));
            let path = [q.to_string(), mi.to_string(), ni.to_string(), ki.to_string()];
            root.insert(&path, [leaf.latency, leaf.power, leaf.energy]);
        }
    }
    let mut out = String::new();
    root.write(&mut out);
    Ok(out)
}

/// The NCCL table as nested JSON `dtype → operation → GPUs → message size`, folded from the
/// system's NCCL file row by row like the GEMM view (keys first-seen, the first row of a key
/// wins: the shipped files list `all_gather`, `alltoall`, `reduce_scatter`, `all_reduce`);
/// rows of a dtype aic does not model are skipped, as the table's loader skips them.
fn nccl_nested_json(path: &Path) -> Result<String> {
    use crate::lookup::Leaf;
    use crate::spec::CommQuant;
    let sources = [crate::data::sources::Source { path: path.to_path_buf(), kernel_filter: None }];
    let tables =
        super::read_sources(&sources, &["nccl_dtype", "op_name", "num_gpus", "message_size", "latency", "power"])?;
    let mut root = Node::default();
    for (table, _) in &tables {
        let dtype = table.str("nccl_dtype")?;
        let op = table.str("op_name")?;
        let (gpus, size) = (table.int("num_gpus")?, table.int("message_size")?);
        let latency = table.float("latency")?;
        let power = table.opt_float("power")?;
        for i in 0..table.num_rows {
            let Some(dt) = CommQuant::parse(&dtype[i]) else { continue };
            let (n, bytes) = (super::to_u64(gpus[i], "num_gpus", table)?, super::to_u64(size[i], "message_size", table)?);
            let leaf = Leaf::new(latency[i], power.as_ref().map_or(0.0, |c| c[i]));
            let path = [dt.as_str().to_string(), op[i].clone(), n.to_string(), bytes.to_string()];
            root.insert(&path, [leaf.latency, leaf.power, leaf.energy]);
        }
    }
    let mut out = String::new();
    root.write(&mut out);
    Ok(out)
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
    match (table, db.resolver.nccl_path()) {
        (TableId::Gemm, _) => gemm_nested_json(db).map(Some),
        (TableId::Nccl, Some(path)) => nccl_nested_json(&path).map(Some),
        _ => Ok(Some(nested_json(&db.table_view(*table)?, extra))),
    }
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
    fn numbers_are_written_as_rust_debug_writes_them() {
        let text = |v: f64| {
            let mut out = String::new();
            push_number(&mut out, v);
            out
        };
        // The exact value 0.55561065673828125 lies halfway between two 16-digit candidates:
        // the reference's text takes the upper one (ryu and Python take the even one).
        assert_eq!(text(0.55561065673828125), "0.5556106567382813");
        assert_eq!(serde_json::to_string(&0.55561065673828125).unwrap(), "0.5556106567382812");
        assert_eq!(text(0.0), "0.0");
        assert_eq!(text(1e-7), "1e-7");
        assert_eq!(text(0.0001), "0.0001");
        assert_eq!(text(1e16), "1e16");
        assert_eq!(text(1e15), "1000000000000000.0");
        assert_eq!(text(f64::NAN), "NaN");
        assert_eq!(text(f64::INFINITY), "Infinity");
        assert_eq!(text(f64::NEG_INFINITY), "-Infinity");
    }

    #[test]
    fn attributes_are_the_reference_catalogue() {
        assert_eq!(TABLE_VIEW_ATTRIBUTES.len(), 39);
        assert_eq!(table_view_sources("_moe_a2a_data").unwrap().len(), 4);
        let e = table_view_sources("_no_such_attribute").unwrap_err();
        assert_eq!(e.to_string(), "perf database error: unknown table-view attribute \"_no_such_attribute\"");
    }
}
