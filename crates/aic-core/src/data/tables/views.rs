//! Read-only views of the loaded perf tables: what a database actually holds, after source
//! resolution, first-wins merging and load-time SOL floors, as plain columns.
//!
//! The lookups answer one query at a time; these views let a caller (a test, the
//! `aic-compile data show` command, a notebook) see every slice of a table — its key, its axes
//! and every measured point — and a per-table coverage summary (dtypes, grid extents, row
//! counts, the files and versions that fed it), without reaching into the lookup structures.

use std::fmt;
use std::path::Path;
use std::sync::Arc;

use serde::Serialize;

use crate::data::system::{list_systems, SystemSpec};
use crate::data::versions::{resolve_backend_version, version_slots, versions_with_tables};
use crate::error::{AicError, Result};
use crate::lookup::Grid;
use crate::spec::Backend;

use super::{AttentionTable, MlaKernelTable, MlaModuleTable, MoeCurves, PerfDatabase, QuantizeKernel, SourceRows};

/// Schema tag of the coverage JSON ([`DatabaseCoverage`]); bumped on any incompatible change.
pub const COVERAGE_SCHEMA: &str = "aic-table-coverage/1";

/// One table of a perf database.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TableId {
    /// `gemm_perf.parquet`.
    Gemm,
    /// `context_attention_perf.parquet`.
    ContextAttention,
    /// `generation_attention_perf.parquet`.
    GenerationAttention,
    /// `custom_allreduce_perf.parquet`.
    CustomAllReduce,
    /// `nccl_perf.parquet` (system-wide).
    Nccl,
    /// `moe_perf.parquet`.
    Moe,
    /// `context_mla_perf.parquet`.
    ContextMla,
    /// `generation_mla_perf.parquet`.
    GenerationMla,
    /// `mla_context_module_perf.parquet`.
    ContextMlaModule,
    /// `mla_generation_module_perf.parquet`.
    GenerationMlaModule,
    /// `mla_bmm_perf.parquet`.
    MlaBmm,
    /// `computescale_perf.parquet`.
    ComputeScale,
    /// `scale_matrix_perf.parquet`.
    ScaleMatrix,
}

impl TableId {
    /// Every table, in display order.
    pub const ALL: [TableId; 13] = [
        TableId::Gemm,
        TableId::ContextAttention,
        TableId::GenerationAttention,
        TableId::CustomAllReduce,
        TableId::Nccl,
        TableId::Moe,
        TableId::ContextMla,
        TableId::GenerationMla,
        TableId::ContextMlaModule,
        TableId::GenerationMlaModule,
        TableId::MlaBmm,
        TableId::ComputeScale,
        TableId::ScaleMatrix,
    ];

    /// The table's name (its file's stem without `_perf`).
    pub fn name(self) -> &'static str {
        match self {
            TableId::Gemm => "gemm",
            TableId::ContextAttention => "context_attention",
            TableId::GenerationAttention => "generation_attention",
            TableId::CustomAllReduce => "custom_allreduce",
            TableId::Nccl => "nccl",
            TableId::Moe => "moe",
            TableId::ContextMla => "context_mla",
            TableId::GenerationMla => "generation_mla",
            TableId::ContextMlaModule => "mla_context_module",
            TableId::GenerationMlaModule => "mla_generation_module",
            TableId::MlaBmm => "mla_bmm",
            TableId::ComputeScale => "computescale",
            TableId::ScaleMatrix => "scale_matrix",
        }
    }

    /// The data family directory the table lives in.
    pub fn family(self) -> &'static str {
        match self {
            TableId::Gemm => "gemm",
            TableId::ContextAttention | TableId::GenerationAttention => "attention",
            TableId::CustomAllReduce | TableId::Nccl => "comm",
            TableId::Moe => "moe",
            TableId::ContextMla | TableId::GenerationMla | TableId::ContextMlaModule | TableId::GenerationMlaModule => {
                "mla"
            }
            TableId::MlaBmm => "mla_bmm",
            TableId::ComputeScale | TableId::ScaleMatrix => "quantize",
        }
    }

    /// The parquet file name.
    pub fn file(self) -> &'static str {
        match self {
            TableId::Gemm => "gemm_perf.parquet",
            TableId::ContextAttention => "context_attention_perf.parquet",
            TableId::GenerationAttention => "generation_attention_perf.parquet",
            TableId::CustomAllReduce => "custom_allreduce_perf.parquet",
            TableId::Nccl => "nccl_perf.parquet",
            TableId::Moe => "moe_perf.parquet",
            TableId::ContextMla => "context_mla_perf.parquet",
            TableId::GenerationMla => "generation_mla_perf.parquet",
            TableId::ContextMlaModule => "mla_context_module_perf.parquet",
            TableId::GenerationMlaModule => "mla_generation_module_perf.parquet",
            TableId::MlaBmm => "mla_bmm_perf.parquet",
            TableId::ComputeScale => "computescale_perf.parquet",
            TableId::ScaleMatrix => "scale_matrix_perf.parquet",
        }
    }

    /// Parses a table name (see [`TableId::name`]), with an error listing the valid ones.
    pub fn parse(name: &str) -> Result<TableId> {
        TableId::ALL.into_iter().find(|t| t.name() == name).ok_or_else(|| {
            let names: Vec<&str> = TableId::ALL.iter().map(|t| t.name()).collect();
            AicError::value(format!("unknown table {name:?}; valid tables: [{}]", names.join(", ")))
        })
    }
}

impl fmt::Display for TableId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One component of a slice key: a name (dtype, lane, distribution) or a count (heads, GPUs).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(untagged)]
pub enum KeyValue {
    /// A count.
    Int(u64),
    /// A name.
    Text(String),
}

impl KeyValue {
    fn text(s: &str) -> KeyValue {
        KeyValue::Text(s.to_string())
    }
}

impl fmt::Display for KeyValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KeyValue::Int(v) => write!(f, "{v}"),
            KeyValue::Text(s) => f.write_str(s),
        }
    }
}

/// One slice of a table: the key that selects it, its interpolation axes and every point, as
/// columns of equal length in ascending coordinate order (outer axis first). Latencies are as
/// loaded (the GEMM and generation-attention tables raise rows to their SOL at load).
#[derive(Debug, Clone, PartialEq)]
pub struct SliceView {
    /// `(component name, value)` pairs, outer first.
    pub key: Vec<(&'static str, KeyValue)>,
    /// Axis names, outer first.
    pub axes: Vec<&'static str>,
    /// One coordinate column per axis.
    pub columns: Vec<Vec<u64>>,
    /// Latency per point, ms.
    pub latency_ms: Vec<f64>,
    /// Stored power per point, W (0 without a power column).
    pub power_w: Vec<f64>,
    /// Energy per point, W·ms (raw power × raw latency).
    pub energy_wms: Vec<f64>,
}

impl SliceView {
    fn from_grid(key: Vec<(&'static str, KeyValue)>, axes: &[&'static str], grid: &Grid) -> SliceView {
        let mut view = SliceView::empty(key, axes, grid.len());
        for (coords, leaf) in grid.points() {
            view.push(coords, leaf.latency, leaf.power, leaf.energy);
        }
        view
    }

    fn empty(key: Vec<(&'static str, KeyValue)>, axes: &[&'static str], capacity: usize) -> SliceView {
        SliceView {
            key,
            axes: axes.to_vec(),
            columns: vec![Vec::with_capacity(capacity); axes.len()],
            latency_ms: Vec::with_capacity(capacity),
            power_w: Vec::with_capacity(capacity),
            energy_wms: Vec::with_capacity(capacity),
        }
    }

    fn push(&mut self, coords: &[u64], latency: f64, power: f64, energy: f64) {
        for (column, c) in self.columns.iter_mut().zip(coords) {
            column.push(*c);
        }
        self.latency_ms.push(latency);
        self.power_w.push(power);
        self.energy_wms.push(energy);
    }

    /// Number of points.
    pub fn len(&self) -> usize {
        self.latency_ms.len()
    }

    /// True when the slice has no point.
    pub fn is_empty(&self) -> bool {
        self.latency_ms.is_empty()
    }

    /// The coordinate column of an axis.
    pub fn axis(&self, name: &str) -> Option<&[u64]> {
        self.axes.iter().position(|a| *a == name).map(|i| self.columns[i].as_slice())
    }

    /// The value of a key component.
    pub fn key_value(&self, name: &str) -> Option<&KeyValue> {
        self.key.iter().find(|(k, _)| *k == name).map(|(_, v)| v)
    }

    /// The index of the point at `coords` (one per axis, outer first).
    pub fn find(&self, coords: &[u64]) -> Option<usize> {
        if coords.len() != self.axes.len() {
            return None;
        }
        (0..self.len()).find(|&i| self.columns.iter().zip(coords).all(|(column, c)| column[i] == *c))
    }

    /// The latency at `coords`, ms, if that point was collected.
    pub fn latency_at(&self, coords: &[u64]) -> Option<f64> {
        self.find(coords).map(|i| self.latency_ms[i])
    }
}

/// Every slice of one loaded table and the files it was merged from.
#[derive(Debug, Clone, PartialEq)]
pub struct TableView {
    /// Which table.
    pub table: TableId,
    /// Its slices, in key order (attention: lanes in precedence order first).
    pub slices: Vec<SliceView>,
    /// The files read, in priority order, with the rows each contributed.
    pub sources: Vec<SourceRows>,
}

impl TableView {
    /// Points over all slices (the rows the table kept).
    pub fn rows(&self) -> usize {
        self.slices.iter().map(SliceView::len).sum()
    }

    /// The first slice whose key has every given `(name, value)` component.
    pub fn find_slice(&self, key: &[(&str, KeyValue)]) -> Option<&SliceView> {
        self.slices.iter().find(|s| key.iter().all(|(k, v)| s.key_value(k) == Some(v)))
    }

    /// The coverage summary of this table.
    pub fn coverage(&self) -> TableCoverage {
        let mut keys: Vec<KeyValues> = Vec::new();
        let mut axes: Vec<(&'static str, Vec<u64>)> = Vec::new();
        for slice in &self.slices {
            for (name, value) in &slice.key {
                match keys.iter_mut().find(|k| k.name == *name) {
                    Some(k) => k.values.push(value.clone()),
                    None => keys.push(KeyValues { name, values: vec![value.clone()] }),
                }
            }
            for (name, column) in slice.axes.iter().zip(&slice.columns) {
                match axes.iter_mut().find(|a| a.0 == *name) {
                    Some(a) => a.1.extend_from_slice(column),
                    None => axes.push((name, column.clone())),
                }
            }
        }
        for k in &mut keys {
            k.values.sort();
            k.values.dedup();
        }
        let axes = axes
            .into_iter()
            .filter_map(|(name, mut values)| {
                values.sort_unstable();
                values.dedup();
                Some(AxisExtent { name, min: *values.first()?, max: *values.last()?, count: values.len() })
            })
            .collect();
        TableCoverage {
            table: self.table.name(),
            family: self.table.family(),
            file: self.table.file(),
            error: None,
            rows: self.rows(),
            slices: self.slices.len(),
            keys,
            axes,
            sources: self.sources.clone(),
        }
    }
}

/// The distinct values of one key component over a table's slices, sorted.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct KeyValues {
    /// Component name (`quant`, `kv_quant`, `lane`, `num_gpus`, ...).
    pub name: &'static str,
    /// Distinct values, sorted (counts before names).
    pub values: Vec<KeyValue>,
}

/// The collected range of one interpolation axis over a table's slices.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct AxisExtent {
    /// Axis name.
    pub name: &'static str,
    /// Smallest collected coordinate.
    pub min: u64,
    /// Largest collected coordinate.
    pub max: u64,
    /// Distinct collected coordinates.
    pub count: usize,
}

/// What one table covers: its dtypes and other key components, axis extents, row and slice
/// counts, and the files (with their versions) it was merged from. A table that could not be
/// loaded carries the reason in `error` and no rows.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TableCoverage {
    /// Table name ([`TableId::name`]).
    pub table: &'static str,
    /// Data family directory.
    pub family: &'static str,
    /// Parquet file name.
    pub file: &'static str,
    /// Why the table is unavailable, if it is.
    pub error: Option<String>,
    /// Points kept over all slices.
    pub rows: usize,
    /// Number of slices.
    pub slices: usize,
    /// Distinct values of each key component (dtypes / quant modes among them).
    pub keys: Vec<KeyValues>,
    /// Collected range of each interpolation axis.
    pub axes: Vec<AxisExtent>,
    /// Files read, in priority order, with their framework, version and kept rows.
    pub sources: Vec<SourceRows>,
}

impl TableCoverage {
    fn unavailable(table: TableId, error: &AicError) -> TableCoverage {
        TableCoverage {
            table: table.name(),
            family: table.family(),
            file: table.file(),
            error: Some(error.to_string()),
            rows: 0,
            slices: 0,
            keys: Vec::new(),
            axes: Vec::new(),
            sources: Vec::new(),
        }
    }
}

/// The coverage of every table of one database (system, backend, version, shared layer).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DatabaseCoverage {
    /// [`COVERAGE_SCHEMA`].
    pub schema: &'static str,
    /// System name.
    pub system: String,
    /// Backend name.
    pub backend: String,
    /// The literal version the tables were resolved for.
    pub version: String,
    /// Whether older versions and other backends' shared kernels were merged in.
    pub shared_layer: bool,
    /// `systems/data/<system>/<backend>/<version>`.
    pub data_root: String,
    /// One entry per table, in [`TableId::ALL`] order.
    pub tables: Vec<TableCoverage>,
}

fn text(name: &'static str, value: &str) -> (&'static str, KeyValue) {
    (name, KeyValue::text(value))
}

fn int(name: &'static str, value: u64) -> (&'static str, KeyValue) {
    (name, KeyValue::Int(value))
}

fn attention_slices(table: &AttentionTable, context: bool) -> Vec<SliceView> {
    let axes: &[&'static str] = if context { &["num_heads", "isl", "batch"] } else { &["num_heads", "batch", "seq"] };
    table
        .slices()
        .into_iter()
        .map(|(lane, key, grid)| {
            let mut parts = vec![text("lane", lane)];
            if let Some(fmha) = key.fmha {
                parts.push(text("fmha_quant", fmha.as_str()));
            }
            parts.extend([
                text("kv_quant", key.kv.as_str()),
                int("n_kv", u64::from(key.n_kv_lookup)),
                int("head_size", u64::from(key.head)),
                int("window_size", u64::from(key.window)),
            ]);
            SliceView::from_grid(parts, axes, grid)
        })
        .collect()
}

fn moe_slices(split: &'static str, curves: &MoeCurves) -> Vec<SliceView> {
    let mut keys: Vec<_> = curves.keys().iter().collect();
    keys.sort_by(|a, b| {
        (&a.quant, &a.distribution, a.topk, a.num_experts, a.hidden_size, a.inter_size, a.moe_tp_size, a.moe_ep_size)
            .cmp(&(
                &b.quant,
                &b.distribution,
                b.topk,
                b.num_experts,
                b.hidden_size,
                b.inter_size,
                b.moe_tp_size,
                b.moe_ep_size,
            ))
    });
    keys.into_iter()
        .filter_map(|k| {
            let grid = curves.curve(k)?;
            let key = vec![
                text("kernel_split", split),
                text("quant", &k.quant),
                text("distribution", &k.distribution),
                int("topk", k.topk),
                int("num_experts", k.num_experts),
                int("hidden_size", k.hidden_size),
                int("inter_size", k.inter_size),
                int("moe_tp_size", k.moe_tp_size),
                int("moe_ep_size", k.moe_ep_size),
            ];
            Some(SliceView::from_grid(key, &["num_tokens"], grid))
        })
        .collect()
}

fn mla_kernel_slices(table: &MlaKernelTable, context: bool) -> Vec<SliceView> {
    let (names, axes): (&[&'static str], &[&'static str]) = if context {
        (&["fmha_quant", "kv_quant"], &["num_heads", "isl", "batch"])
    } else {
        (&["kv_quant"], &["num_heads", "batch", "seq"])
    };
    table
        .slices()
        .into_iter()
        .map(|(key, grid)| SliceView::from_grid(names.iter().zip(key).map(|(n, v)| text(n, v)).collect(), axes, grid))
        .collect()
}

fn mla_module_slices(table: &MlaModuleTable, context: bool) -> Vec<SliceView> {
    let (names, axes): (&[&'static str], &[&'static str]) = if context {
        (&["fmha_quant", "kv_quant", "gemm_quant"], &["num_heads", "isl", "batch"])
    } else {
        (&["kv_quant", "gemm_quant"], &["num_heads", "batch", "seq"])
    };
    table
        .slices()
        .into_iter()
        .map(|(key, native, grid)| {
            let mut parts: Vec<_> = names.iter().zip(key).map(|(n, v)| text(n, v)).collect();
            parts.push(int("native_heads", native));
            SliceView::from_grid(parts, axes, grid)
        })
        .collect()
}

impl PerfDatabase {
    /// A read-only view of one table (loading it if needed); the table's load error if it
    /// cannot be loaded.
    pub fn table_view(&self, table: TableId) -> Result<TableView> {
        let (slices, sources) = match table {
            TableId::Gemm => {
                let t = self.gemm()?;
                let mut slices = Vec::new();
                for (quant, sites) in t.quants() {
                    let mut points: Vec<([u64; 3], crate::lookup::Leaf)> = sites
                        .sites()
                        .iter()
                        .flat_map(|s| s.ms.iter().zip(&s.leaves).map(move |(&m, leaf)| ([m, s.n, s.k], *leaf)))
                        .collect();
                    points.sort_unstable_by_key(|p| p.0);
                    let mut view = SliceView::empty(vec![text("quant", quant)], &["m", "n", "k"], points.len());
                    for (c, leaf) in &points {
                        view.push(c, leaf.latency, leaf.power, leaf.energy);
                    }
                    slices.push(view);
                }
                slices.sort_by(|a, b| a.key.cmp(&b.key));
                (slices, t.sources().to_vec())
            }
            TableId::ContextAttention => {
                let t = self.context_attention()?;
                (attention_slices(t, true), t.sources().to_vec())
            }
            TableId::GenerationAttention => {
                let t = self.generation_attention()?;
                (attention_slices(t, false), t.sources().to_vec())
            }
            TableId::CustomAllReduce => {
                let t = self.custom_allreduce()?;
                let slices = t
                    .curves()
                    .into_iter()
                    .map(|(gpus, grid)| {
                        SliceView::from_grid(
                            vec![text("quant", "half"), int("num_gpus", gpus)],
                            &["message_size"],
                            grid,
                        )
                    })
                    .collect();
                (slices, t.sources().to_vec())
            }
            TableId::Nccl => {
                let t = self.nccl()?;
                let slices = t
                    .curves()
                    .map(|(dtype, op, gpus, grid)| {
                        let key = vec![text("dtype", dtype.as_str()), text("operation", op), int("num_gpus", gpus)];
                        SliceView::from_grid(key, &["message_size"], grid)
                    })
                    .collect();
                (slices, t.sources().to_vec())
            }
            TableId::Moe => {
                let t = self.moe()?;
                let mut slices = moe_slices("standard", &t.standard);
                slices.extend(moe_slices("low_latency", &t.low_latency));
                (slices, t.sources().to_vec())
            }
            TableId::ContextMla | TableId::GenerationMla => {
                let context = table == TableId::ContextMla;
                let t = self.mla_kernel(context)?;
                (mla_kernel_slices(t, context), t.sources().to_vec())
            }
            TableId::ContextMlaModule | TableId::GenerationMlaModule => {
                let context = table == TableId::ContextMlaModule;
                let t = self.mla_module(context)?;
                (mla_module_slices(t, context), t.sources().to_vec())
            }
            TableId::MlaBmm => {
                let t = self.mla_bmm()?;
                let slices = t
                    .curves()
                    .into_iter()
                    .map(|(quant, op, heads, grid)| {
                        let key = vec![text("quant", quant), text("op", op), int("num_heads", heads)];
                        SliceView::from_grid(key, &["num_tokens"], grid)
                    })
                    .collect();
                (slices, t.sources().to_vec())
            }
            TableId::ComputeScale | TableId::ScaleMatrix => {
                let kernel = if table == TableId::ComputeScale {
                    QuantizeKernel::ComputeScale
                } else {
                    QuantizeKernel::ScaleMatrix
                };
                let t = self.quantize(kernel)?;
                let slices = t
                    .grids()
                    .into_iter()
                    .map(|(quant, grid)| SliceView::from_grid(vec![text("quant", quant)], &["m", "k"], grid))
                    .collect();
                (slices, t.sources().to_vec())
            }
        };
        Ok(TableView { table, slices, sources })
    }

    /// The coverage of every table (loading each); a table that cannot be loaded is listed
    /// with its error.
    pub fn coverage(&self) -> DatabaseCoverage {
        let tables = TableId::ALL
            .into_iter()
            .map(|t| match self.table_view(t) {
                Ok(view) => view.coverage(),
                Err(e) => TableCoverage::unavailable(t, &e),
            })
            .collect();
        DatabaseCoverage {
            schema: COVERAGE_SCHEMA,
            system: self.system.name.clone(),
            backend: self.resolver.backend().as_str().to_string(),
            version: self.resolver.version().to_string(),
            shared_layer: self.resolver.shared_layer(),
            data_root: self.label(),
            tables,
        }
    }
}

/// Backends with at least one version holding a table in a system's data tree.
fn backends_with_data(system: &SystemSpec) -> Vec<&'static str> {
    [Backend::Trtllm, Backend::Sglang, Backend::Vllm]
        .into_iter()
        .map(Backend::as_str)
        .filter(|b| !versions_with_tables(&system.data_dir, b).is_empty())
        .collect()
}

/// Versions of a backend holding a table in a system's data tree, sorted by name.
fn versions_with_data(system: &SystemSpec, backend: Backend) -> Vec<String> {
    versions_with_tables(&system.data_dir, backend.as_str())
}

/// Opens the database of (system, backend, version) for viewing, checking each name first:
/// an unknown system, a backend without data on it, or a version that is neither a slot alias
/// nor a data directory is a `ValueError`-class error listing the valid choices. `version`
/// `None` is the backend's `current` slot.
pub fn open_for_viewing(
    systems_root: &Path,
    system: &str,
    backend: &str,
    version: Option<&str>,
    shared_layer: bool,
) -> Result<Arc<PerfDatabase>> {
    let systems = list_systems(systems_root);
    if !systems.iter().any(|s| s == system) {
        return Err(AicError::value(format!(
            "unknown system {system:?} in {}; valid systems: [{}]",
            systems_root.display(),
            systems.join(", ")
        )));
    }
    let spec = SystemSpec::load(systems_root, system)?;
    let with_data = backends_with_data(&spec);
    let backend_id = Backend::parse(backend).ok().filter(|b| with_data.contains(&b.as_str())).ok_or_else(|| {
        AicError::value(format!(
            "unknown backend {backend:?} for system {system}; backends with data: [{}]",
            with_data.join(", ")
        ))
    })?;
    let versions = versions_with_data(&spec, backend_id);
    let slots = version_slots(systems_root, &spec, backend_id)?;
    let valid = || {
        let slots = slots.as_ref().map_or_else(|| "none".to_string(), |s| s.py_repr());
        format!("slots {slots}; version directories: [{}]", versions.join(", "))
    };
    let resolved = resolve_backend_version(systems_root, &spec, backend_id, version)
        .map_err(|e| AicError::value(format!("{e}; valid versions of {backend} on {system}: {}", valid())))?;
    let literal = resolved.version.ok_or_else(|| {
        AicError::value(format!("{backend} on {system} has no current version; give one of: {}", valid()))
    })?;
    if !resolved.tolerate_dirless && !versions.contains(&literal) {
        return Err(AicError::value(format!(
            "unknown version {literal:?} of {backend} on {system}; valid versions: {}",
            valid()
        )));
    }
    PerfDatabase::open(systems_root, system, backend_id, &literal, shared_layer)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_names_round_trip_and_unknown_names_list_the_valid_ones() {
        for t in TableId::ALL {
            assert_eq!(TableId::parse(t.name()).unwrap(), t);
            assert!(t.file().starts_with(t.name()), "{t}");
        }
        let err = TableId::parse("gemms").unwrap_err();
        assert!(err.to_string().contains("\"gemms\"") && err.to_string().contains("mla_bmm"), "{err}");
    }

    #[test]
    fn coverage_summarises_keys_and_axes_over_slices() {
        let mut a = SliceView::empty(vec![text("quant", "fp8"), int("num_gpus", 8)], &["x", "y"], 2);
        a.push(&[1, 10], 1.0, 0.0, 0.0);
        a.push(&[4, 10], 2.0, 0.0, 0.0);
        let mut b = SliceView::empty(vec![text("quant", "bfloat16"), int("num_gpus", 2)], &["x", "y"], 1);
        b.push(&[2, 30], 3.0, 0.0, 0.0);
        let view = TableView { table: TableId::Gemm, slices: vec![a, b], sources: Vec::new() };
        let c = view.coverage();
        assert_eq!((c.rows, c.slices), (3, 2));
        assert_eq!(c.keys[0].values, vec![KeyValue::text("bfloat16"), KeyValue::text("fp8")]);
        assert_eq!(c.keys[1].values, vec![KeyValue::Int(2), KeyValue::Int(8)]);
        assert_eq!(c.axes[0], AxisExtent { name: "x", min: 1, max: 4, count: 3 });
        assert_eq!(c.axes[1], AxisExtent { name: "y", min: 10, max: 30, count: 2 });
        assert_eq!(view.slices[0].latency_at(&[4, 10]), Some(2.0));
        assert_eq!(view.slices[0].latency_at(&[4, 11]), None);
        assert!(view.find_slice(&[("num_gpus", KeyValue::Int(2))]).is_some());
    }
}
