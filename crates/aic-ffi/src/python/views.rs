//! Python functions over the read-only table views (`aic_core::data::tables` views): the
//! coverage summary as JSON and one table's slices as plain Python objects, numeric columns
//! as `array.array` (no numpy needed).

use std::path::PathBuf;

use aic_core::data::catalogue::system_catalogue;
use aic_core::data::tables::{open_for_viewing, KeyValue, SliceView, TableId, TableView};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList};

use super::systems_root;
use crate::errors::guarded;

/// An `array.array` of `typecode` over the native-endian bytes of `values`.
fn array<'py>(
    py: Python<'py>,
    array_type: &Bound<'py, PyAny>,
    typecode: &str,
    bytes: Vec<u8>,
) -> PyResult<Bound<'py, PyAny>> {
    array_type.call1((typecode, PyBytes::new(py, &bytes)))
}

fn f64_bytes(values: &[f64]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_ne_bytes()).collect()
}

fn u64_bytes(values: &[u64]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_ne_bytes()).collect()
}

fn key_value<'py>(py: Python<'py>, value: &KeyValue) -> PyResult<Bound<'py, PyAny>> {
    Ok(match value {
        KeyValue::Int(v) => v.into_pyobject(py)?.into_any(),
        KeyValue::Text(s) => s.into_pyobject(py)?.into_any(),
    })
}

fn slice_dict<'py>(py: Python<'py>, array_type: &Bound<'py, PyAny>, slice: &SliceView) -> PyResult<Bound<'py, PyDict>> {
    let out = PyDict::new(py);
    let key = PyDict::new(py);
    for (name, value) in &slice.key {
        key.set_item(*name, key_value(py, value)?)?;
    }
    out.set_item("key", key)?;
    out.set_item("axes", PyList::new(py, &slice.axes)?)?;
    let coords = PyDict::new(py);
    for (name, column) in slice.axes.iter().zip(&slice.columns) {
        coords.set_item(*name, array(py, array_type, "Q", u64_bytes(column))?)?;
    }
    out.set_item("coords", coords)?;
    out.set_item("latency_ms", array(py, array_type, "d", f64_bytes(&slice.latency_ms))?)?;
    out.set_item("power_w", array(py, array_type, "d", f64_bytes(&slice.power_w))?)?;
    out.set_item("energy_wms", array(py, array_type, "d", f64_bytes(&slice.energy_wms))?)?;
    Ok(out)
}

fn view_dict<'py>(py: Python<'py>, view: &TableView, db_label: (&str, &str, &str)) -> PyResult<Bound<'py, PyDict>> {
    let array_type = py.import("array")?.getattr("array")?;
    let out = PyDict::new(py);
    out.set_item("table", view.table.name())?;
    out.set_item("family", view.table.family())?;
    out.set_item("file", view.table.file())?;
    out.set_item("system", db_label.0)?;
    out.set_item("backend", db_label.1)?;
    out.set_item("version", db_label.2)?;
    let sources = PyList::empty(py);
    for s in &view.sources {
        let d = PyDict::new(py);
        d.set_item("path", &s.path)?;
        d.set_item("framework", &s.framework)?;
        d.set_item("version", &s.version)?;
        d.set_item("rows", s.rows)?;
        sources.append(d)?;
    }
    out.set_item("sources", sources)?;
    let slices = PyList::empty(py);
    for slice in &view.slices {
        slices.append(slice_dict(py, &array_type, slice)?)?;
    }
    out.set_item("slices", slices)?;
    Ok(out)
}

/// The names of the perf tables a database holds, in display order.
#[pyfunction]
fn table_names() -> Vec<&'static str> {
    TableId::ALL.iter().map(|t| t.name()).collect()
}

/// What every perf table of (system, backend, version) covers, as JSON text (schema
/// `aic-table-coverage/1`): per table its family, file, dtypes and other key values, axis
/// extents (min, max, distinct count), row and slice counts, and the files and versions it was
/// merged from; a table that cannot be loaded carries its error. `version` `None` is the
/// backend's current slot. Unknown names raise `ValueError` listing the valid ones.
#[pyfunction]
#[pyo3(signature = (systems_path, system, backend, version=None, enable_shared_layer=true))]
fn table_coverage_json(
    py: Python<'_>,
    systems_path: Option<PathBuf>,
    system: &str,
    backend: &str,
    version: Option<&str>,
    enable_shared_layer: bool,
) -> PyResult<String> {
    let root = systems_root(py, systems_path)?;
    py.detach(|| {
        guarded(|| {
            let db = open_for_viewing(&root, system, backend, version, enable_shared_layer)?;
            serde_json::to_string(&db.coverage())
                .map_err(|e| aic_core::AicError::value(format!("cannot serialise the coverage: {e}")))
        })
    })
    .map_err(PyErr::from)
}

/// One perf table as loaded: a dict with `table`, `family`, `file`, `system`, `backend`,
/// `version`, `sources` (dicts: path, framework, version, rows) and `slices`, each slice a dict
/// with `key` (component → value), `axes` (names, outer first), `coords` (axis →
/// `array('Q')`) and `latency_ms`, `power_w`, `energy_wms` (`array('d')`), one entry per point.
#[pyfunction]
#[pyo3(signature = (systems_path, system, backend, table, version=None, enable_shared_layer=true))]
fn table_view<'py>(
    py: Python<'py>,
    systems_path: Option<PathBuf>,
    system: &str,
    backend: &str,
    table: &str,
    version: Option<&str>,
    enable_shared_layer: bool,
) -> PyResult<Bound<'py, PyDict>> {
    let root = systems_root(py, systems_path)?;
    let (view, literal) = py
        .detach(|| {
            guarded(|| {
                let id = TableId::parse(table)?;
                let db = open_for_viewing(&root, system, backend, version, enable_shared_layer)?;
                Ok((db.table_view(id)?, db.resolver.version().to_string()))
            })
        })
        .map_err(PyErr::from)?;
    view_dict(py, &view, (system, backend, &literal))
}

/// Every system of the systems folder as JSON text (a list): name, `sm_version`,
/// `gpus_per_node`, `gpus_per_rack`, `mem_capacity`, `error`, and per backend its `current` /
/// `previous` / `next` slots (`current` null: no perf data) and `versions_with_data`.
#[pyfunction]
#[pyo3(signature = (systems_path=None))]
fn systems_catalogue_json(py: Python<'_>, systems_path: Option<PathBuf>) -> PyResult<String> {
    let root = systems_root(py, systems_path)?;
    py.detach(|| {
        guarded(|| {
            serde_json::to_string(&system_catalogue(&root))
                .map_err(|e| aic_core::AicError::value(format!("cannot serialise the catalogue: {e}")))
        })
    })
    .map_err(PyErr::from)
}

/// Registers the view functions on the module; returns their names for `__all__`.
pub(super) fn register(m: &Bound<'_, PyModule>) -> PyResult<[&'static str; 4]> {
    m.add_function(wrap_pyfunction!(table_names, m)?)?;
    m.add_function(wrap_pyfunction!(table_coverage_json, m)?)?;
    m.add_function(wrap_pyfunction!(table_view, m)?)?;
    m.add_function(wrap_pyfunction!(systems_catalogue_json, m)?)?;
    Ok(["table_names", "table_coverage_json", "table_view", "systems_catalogue_json"])
}
