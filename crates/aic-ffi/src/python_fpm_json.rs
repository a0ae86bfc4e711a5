//! The forward-pass perf model under the reference's low-level class name and JSON-text API,
//! `aic._aic.RustForwardPassPerfModel` (every argument and the diagnostics are JSON text),
//! so orchestration code written against aiconfigurator-core runs unchanged. The dict-taking
//! class is `ForwardPassPerfModel` ([`crate::python_fpm`]); both wrap `aic_core::fpm`.
//!
//! Bindings only: every call runs in the core with the GIL released, behind
//! [`guarded_fpm`](crate::errors::guarded_fpm).

use std::sync::Arc;

use aic_core::fpm::{CompileRequest, ForwardPassPerfModel as CoreModel};
use pyo3::prelude::*;

use crate::errors::guarded_fpm;
use crate::python_fpm::{resolve_compiler, run_compiler};

/// Forward-pass time of one serving-engine iteration from FPM telemetry (JSON text), with
/// online correction (spec 42). Thread-safe; every call releases the GIL.
#[pyclass(frozen, module = "aic._aic", name = "RustForwardPassPerfModel")]
pub struct RustForwardPassPerfModel {
    model: Arc<CoreModel>,
}

/// Compiles a native model from EngineConfig JSON through the Python front end.
fn build(py: Python<'_>, config_json: &str, options_json: Option<&str>, fallback: bool) -> PyResult<RustForwardPassPerfModel> {
    let compiler = resolve_compiler(py, None)?;
    let compile = |request: &CompileRequest| Python::attach(|py| run_compiler(compiler.bind(py), request));
    let model = py
        .detach(|| {
            guarded_fpm(|| {
                if fallback {
                    CoreModel::best_available(config_json, options_json, compile)
                } else {
                    CoreModel::from_native(config_json, options_json, compile)
                }
            })
        })
        .map_err(PyErr::from)?;
    Ok(RustForwardPassPerfModel { model: Arc::new(model) })
}

impl RustForwardPassPerfModel {
    fn run<T: Send>(&self, py: Python<'_>, f: impl FnOnce(&CoreModel) -> aic_core::fpm::Result<T> + Send) -> PyResult<T> {
        let model = &self.model;
        py.detach(|| guarded_fpm(|| f(model))).map_err(PyErr::from)
    }
}

#[pymethods]
impl RustForwardPassPerfModel {
    /// A native model compiled from EngineConfig JSON; `ValueError` if it cannot be compiled.
    #[staticmethod]
    #[pyo3(signature = (config_json, options_json=None))]
    fn from_native(py: Python<'_>, config_json: &str, options_json: Option<&str>) -> PyResult<Self> {
        build(py, config_json, options_json, false)
    }

    /// `from_native`, or a regression model (with a warning in the diagnostics) when the
    /// native model cannot be compiled or its data is unavailable.
    #[staticmethod]
    #[pyo3(signature = (config_json, options_json=None))]
    fn best_available(py: Python<'_>, config_json: &str, options_json: Option<&str>) -> PyResult<Self> {
        build(py, config_json, options_json, true)
    }

    /// A regression-only model that learns from `tune_with_fpms` alone.
    #[staticmethod]
    #[pyo3(signature = (options_json=None))]
    fn from_regression(py: Python<'_>, options_json: Option<&str>) -> PyResult<Self> {
        let model = py
            .detach(|| guarded_fpm(|| CoreModel::from_regression(options_json)))
            .map_err(PyErr::from)?;
        Ok(RustForwardPassPerfModel { model: Arc::new(model) })
    }

    /// Predicted forward-pass time (ms) of one iteration given as FPM JSON (one object or a
    /// list, one per attention-DP rank); `None` when a regression model has no fit yet.
    fn estimate_forward_pass_time_ms(&self, py: Python<'_>, fpm_json: &str) -> PyResult<Option<f64>> {
        self.run(py, |m| m.estimate_forward_pass_time_ms(fpm_json))
    }

    /// Learns from measured iterations: JSON text of an array of arrays of FPM objects.
    fn tune_with_fpms(&self, py: Python<'_>, iterations_json: &str) -> PyResult<()> {
        self.run(py, |m| m.tune_with_fpms(iterations_json))
    }

    /// The diagnostics as compact JSON text.
    fn diagnostics(&self, py: Python<'_>) -> PyResult<String> {
        self.run(py, |m| Ok(m.diagnostics()))
    }

    /// Smallest bucket correction factor over the ready workload kinds, or `None`.
    fn min_correction_factor(&self, py: Python<'_>) -> PyResult<Option<f64>> {
        self.run(py, |m| Ok(m.min_correction_factor()))
    }

    /// Largest bucket correction factor over the ready workload kinds, or `None`.
    fn max_correction_factor(&self, py: Python<'_>) -> PyResult<Option<f64>> {
        self.run(py, |m| Ok(m.max_correction_factor()))
    }

    /// Mean bucket correction factor over the ready workload kinds, or `None`.
    fn avg_correction_factor(&self, py: Python<'_>) -> PyResult<Option<f64>> {
        self.run(py, |m| Ok(m.avg_correction_factor()))
    }
}

/// Registers the class on the module (`add_class` also lists it in `__all__`).
pub fn init(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<RustForwardPassPerfModel>()
}
