//! The rest of the reference's module-level surface (aiconfigurator-core 0.12.0) under the
//! same names and signatures, so code ported from it runs unchanged: the spec schema version
//! and wire encoding, op objects and op JSON, per-op weights, the quant utilisation tables,
//! the table-view attribute catalogue and the source-resolution report.
//!
//! Bindings only: every answer comes from `aic_core`.

use std::path::PathBuf;

use aic_core::data::source_report::op_sources_report_json;
use aic_core::data::tables::TABLE_VIEW_ATTRIBUTES;
use aic_core::memory::op_weight_bytes;
use aic_core::ops::util_levels::{GEMM_UTIL_LEVELS, MOE_UTIL_LEVELS};
use aic_core::spec::{op_from_json, op_to_json, op_variant, ops_from_json, ops_to_json, SPEC_SCHEMA_VERSION};
use aic_core::{EngineSpec, Op};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBytes, PyDict, PyTuple};

use crate::errors::guarded;

/// One op of an engine spec, as an object. Each op variant is a subclass named after it
/// (`Gemm`, `Embedding`, `Fallback`, ...), built on first use; `op_from_spec_json` returns
/// one, `ops_json_from_ops` turns a list of them back into op-list JSON.
#[pyclass(subclass, frozen, module = "aic._aic", name = "EngineOp")]
pub struct EngineOp {
    op: Op,
}

#[pymethods]
impl EngineOp {
    /// Decodes one op from its spec JSON (`{"<Variant>": {...}}`); `ValueError` if invalid.
    #[new]
    fn new(py: Python<'_>, spec_json: &str) -> PyResult<EngineOp> {
        let op = py.detach(|| guarded(|| op_from_json(spec_json))).map_err(PyErr::from)?;
        Ok(EngineOp { op })
    }

    /// The op variant (its tag in the spec encoding).
    #[getter]
    fn variant(&self) -> String {
        op_variant(&self.op)
    }

    /// The op's JSON in the spec encoding.
    fn to_json(&self) -> String {
        op_to_json(&self.op)
    }

    fn __repr__(&self) -> String {
        format!("{}({})", op_variant(&self.op), op_to_json(&self.op))
    }
}

/// The subclass of `EngineOp` for a variant, created once per process.
fn variant_class<'py>(py: Python<'py>, variant: &str) -> PyResult<Bound<'py, PyAny>> {
    static CLASSES: PyOnceLock<Py<PyDict>> = PyOnceLock::new();
    let classes = CLASSES.get_or_init(py, || PyDict::new(py).unbind()).bind(py);
    if let Some(class) = classes.get_item(variant)? {
        return Ok(class);
    }
    let namespace = PyDict::new(py);
    namespace.set_item("__module__", "aic._aic")?;
    namespace.set_item("__doc__", format!("An engine op of variant `{variant}` (see `EngineOp`)."))?;
    namespace.set_item("__slots__", PyTuple::empty(py))?;
    let bases = PyTuple::new(py, [py.get_type::<EngineOp>()])?;
    let class = py
        .import("builtins")?
        .getattr("type")?
        .call1((variant, bases, namespace))?;
    classes.set_item(variant, &class)?;
    Ok(class)
}

/// The op-list wire schema version this engine reads (`schema_version` of a spec).
#[pyfunction]
fn engine_spec_schema_version() -> u32 {
    SPEC_SCHEMA_VERSION
}

/// Encodes spec JSON into the binary wire form (the reference's bincode layout) that
/// `AicEngine.from_spec` reads.
#[pyfunction]
fn engine_spec_bincode_from_json<'py>(py: Python<'py>, spec_json: &str) -> PyResult<Bound<'py, PyBytes>> {
    let bytes = py
        .detach(|| guarded(|| EngineSpec::from_json(spec_json).map(|s| s.to_bytes())))
        .map_err(PyErr::from)?;
    Ok(PyBytes::new(py, &bytes))
}

/// The weight bytes each op of a JSON op list holds on one GPU (times its `scale_factor`),
/// in op order (spec 41 §2.1). An invalid list raises `ValueError`.
#[pyfunction]
fn weights_ops_json(py: Python<'_>, ops_json: &str) -> PyResult<Vec<f64>> {
    py.detach(|| guarded(|| Ok(ops_from_json(ops_json)?.iter().map(op_weight_bytes).collect())))
        .map_err(PyErr::from)
}

/// JSON op-list text (externally tagged ops) of a sequence of op objects.
#[pyfunction]
fn ops_json_from_ops(ops: Vec<Bound<'_, EngineOp>>) -> String {
    let list: Vec<Op> = ops.iter().map(|o| o.get().op.clone()).collect();
    ops_to_json(&list)
}

/// One op object from its spec JSON (`{"<Variant>": {...}}`), of the class named after its
/// variant. An invalid op raises `ValueError`.
#[pyfunction]
fn op_from_spec_json<'py>(py: Python<'py>, spec_json: &str) -> PyResult<Bound<'py, PyAny>> {
    let op = py.detach(|| guarded(|| op_from_json(spec_json))).map_err(PyErr::from)?;
    let class = variant_class(py, &op_variant(&op))?;
    class.call1((op_to_json(&op),))
}

/// The files that would feed one perf table (`op_file_basename`, e.g.
/// `"gemm_perf.parquet"`) of the system whose data folder is `system_data_root`, as JSON text
/// `{"records": [{"path", "exists", "channel", "kernel_sources"}], "warnings": [...]}`.
/// `primary_path` replaces the requested version's own file.
#[pyfunction]
#[pyo3(signature = (
    systems_root, system_data_root, backend, version, op_file_basename,
    primary_path=None, enable_shared_layer=true, strict=false
))]
#[allow(clippy::too_many_arguments)]
fn resolve_op_sources_report_json(
    py: Python<'_>,
    systems_root: PathBuf,
    system_data_root: PathBuf,
    backend: &str,
    version: &str,
    op_file_basename: &str,
    primary_path: Option<PathBuf>,
    enable_shared_layer: bool,
    strict: bool,
) -> PyResult<String> {
    py.detach(|| {
        guarded(|| {
            op_sources_report_json(
                &systems_root,
                &system_data_root,
                backend,
                version,
                op_file_basename,
                primary_path.as_deref(),
                enable_shared_layer,
                strict,
            )
        })
    })
    .map_err(PyErr::from)
}

/// GEMM utilisation levels `(bytes_per_elem, compute_multiplier, level)` used by cross-quant
/// empirical transfers.
#[pyfunction]
fn gemm_quant_util_levels() -> Vec<(f64, f64, f64)> {
    GEMM_UTIL_LEVELS.to_vec()
}

/// MoE utilisation levels `(bytes_per_elem, compute_multiplier, level)`.
#[pyfunction]
fn moe_quant_util_levels() -> Vec<(f64, f64, f64)> {
    MOE_UTIL_LEVELS.to_vec()
}

/// Every `AicEngine.table_view_json` attribute with the parquet basenames that feed it.
#[pyfunction]
fn table_view_attributes() -> Vec<(&'static str, Vec<&'static str>)> {
    TABLE_VIEW_ATTRIBUTES.iter().map(|(name, files)| (*name, files.to_vec())).collect()
}

/// Registers the surface functions and the op class; returns the names for `__all__`.
pub(super) fn register(m: &Bound<'_, PyModule>) -> PyResult<Vec<&'static str>> {
    m.add_class::<EngineOp>()?;
    m.add_function(wrap_pyfunction!(engine_spec_schema_version, m)?)?;
    m.add_function(wrap_pyfunction!(engine_spec_bincode_from_json, m)?)?;
    m.add_function(wrap_pyfunction!(weights_ops_json, m)?)?;
    m.add_function(wrap_pyfunction!(ops_json_from_ops, m)?)?;
    m.add_function(wrap_pyfunction!(op_from_spec_json, m)?)?;
    m.add_function(wrap_pyfunction!(resolve_op_sources_report_json, m)?)?;
    m.add_function(wrap_pyfunction!(gemm_quant_util_levels, m)?)?;
    m.add_function(wrap_pyfunction!(moe_quant_util_levels, m)?)?;
    m.add_function(wrap_pyfunction!(table_view_attributes, m)?)?;
    Ok(vec![
        "EngineOp",
        "engine_spec_schema_version",
        "engine_spec_bincode_from_json",
        "weights_ops_json",
        "ops_json_from_ops",
        "op_from_spec_json",
        "resolve_op_sources_report_json",
        "gemm_quant_util_levels",
        "moe_quant_util_levels",
        "table_view_attributes",
    ])
}
