//! The forward-pass perf model (spec 42) as the Python class `aic._aic.ForwardPassPerfModel`.
//!
//! Bindings only: the model lives in `aic_core::fpm`. This module turns Python arguments
//! (dicts, lists or JSON text) into the JSON the core reads, runs every core call with the GIL
//! released behind [`guarded_fpm`](crate::errors::guarded_fpm) (`FpmError`s become the usual
//! Python exceptions, a panic a `RuntimeError`), and lets the core's `from_native` / `best_available` compile the model
//! through the Python front end (`aic.fpm.compile_request`, or a caller-supplied compiler),
//! re-taking the GIL only for that call.

use std::sync::{Arc, Mutex, MutexGuard};

use aic_core::fpm::{CompileRequest, ForwardPassPerfModel as CoreModel};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyBytes, PyDict, PyList, PyString, PyTuple};

use crate::errors::guarded_fpm;
use crate::python::AicEngine;

/// Name of the Python class (also appended to the module's `__all__`).
const CLASS_NAME: &str = "ForwardPassPerfModel";

/// Python module and function that compile a model for `from_native` when no compiler is given.
const DEFAULT_COMPILER: (&str, &str) = ("aic.fpm", "compile_request");

// ---------------------------------------------------------------------------------------------
// Python arguments -> JSON text

/// The type name of a Python object, for error messages.
fn type_name(obj: &Bound<'_, PyAny>) -> String {
    obj.get_type()
        .name()
        .map(|n| n.to_string())
        .unwrap_or_else(|_| "<unknown type>".to_string())
}

/// `json.dumps(value)` with sorted keys, compact separators and no NaN/Infinity literals; a
/// value that cannot be serialised raises `TypeError` / `ValueError` naming the argument.
fn dumps(py: Python<'_>, value: &Bound<'_, PyAny>, what: &str) -> PyResult<String> {
    let kwargs = PyDict::new(py);
    kwargs.set_item("sort_keys", true)?;
    kwargs.set_item("separators", (",", ":"))?;
    kwargs.set_item("allow_nan", false)?;
    let json = py.import("json")?;
    match json.call_method("dumps", (value,), Some(&kwargs)) {
        Ok(text) => text.extract(),
        Err(e) => {
            if let Some((path, number)) = non_finite(value, what) {
                return Err(PyValueError::new_err(format!(
                    "{path} must be a finite number, got {number} (JSON has no NaN or infinity)"
                )));
            }
            let message = format!("{what} cannot be converted to JSON: {}", e.value(py));
            Err(if e.is_instance_of::<PyTypeError>(py) {
                PyTypeError::new_err(message)
            } else {
                PyValueError::new_err(message)
            })
        }
    }
}

/// The first NaN or infinite float inside a dict / list / tuple argument, as `(path, value)`
/// with the path spelt like `options.bucket_count` or `metrics[1].wall_time`, so that the error
/// names the field instead of only saying the argument is not JSON.
fn non_finite(value: &Bound<'_, PyAny>, path: &str) -> Option<(String, f64)> {
    if let Ok(dict) = value.cast::<PyDict>() {
        for (key, item) in dict.iter() {
            let key = key.str().map(|k| k.to_string()).unwrap_or_default();
            if let Some(found) = non_finite(&item, &format!("{path}.{key}")) {
                return Some(found);
            }
        }
        return None;
    }
    if is_sequence(value) {
        let items: Vec<Bound<'_, PyAny>> = value.try_iter().ok()?.flatten().collect();
        return items.iter().enumerate().find_map(|(i, item)| non_finite(item, &format!("{path}[{i}]")));
    }
    match value.extract::<f64>() {
        Ok(number) if value.is_instance_of::<pyo3::types::PyFloat>() && !number.is_finite() => {
            Some((path.to_string(), number))
        }
        _ => None,
    }
}

/// JSON text given as `str` / `bytes` / `bytearray`; `None` for any other type.
fn json_text(value: &Bound<'_, PyAny>, what: &str) -> PyResult<Option<String>> {
    if let Ok(s) = value.cast::<PyString>() {
        return Ok(Some(s.to_cow()?.into_owned()));
    }
    let bytes: Option<Vec<u8>> = if let Ok(b) = value.cast::<PyBytes>() {
        Some(b.as_bytes().to_vec())
    } else if let Ok(b) = value.cast::<PyByteArray>() {
        Some(b.to_vec())
    } else {
        None
    };
    match bytes {
        None => Ok(None),
        Some(bytes) => String::from_utf8(bytes).map(Some).map_err(|e| {
            PyValueError::new_err(format!("{what} JSON bytes are not valid UTF-8: {e}"))
        }),
    }
}

/// A mapping argument (`config`, `options`): a dict, or its JSON text.
fn mapping_json(py: Python<'_>, value: &Bound<'_, PyAny>, what: &str) -> PyResult<String> {
    if let Some(text) = json_text(value, what)? {
        return Ok(text);
    }
    if value.is_instance_of::<PyDict>() {
        return dumps(py, value, what);
    }
    Err(PyTypeError::new_err(format!(
        "{what} must be a dict or JSON text, got {}",
        type_name(value)
    )))
}

/// The options argument: `None` (all defaults), a dict, or JSON text.
fn options_json(py: Python<'_>, options: Option<&Bound<'_, PyAny>>) -> PyResult<Option<String>> {
    match options {
        Some(value) if !value.is_none() => mapping_json(py, value, "options").map(Some),
        _ => Ok(None),
    }
}

/// Whether a value is a list or a tuple (both serialise as a JSON array).
fn is_sequence(value: &Bound<'_, PyAny>) -> bool {
    value.is_instance_of::<PyList>() || value.is_instance_of::<PyTuple>()
}

/// One iteration for the estimate: an FPM dict, a list/tuple of them (one per attention-DP
/// rank), or JSON text of either.
fn iteration_json(py: Python<'_>, metrics: &Bound<'_, PyAny>) -> PyResult<String> {
    if let Some(text) = json_text(metrics, "metrics")? {
        return Ok(text);
    }
    if metrics.is_instance_of::<PyDict>() || is_sequence(metrics) {
        return dumps(py, metrics, "metrics");
    }
    Err(PyTypeError::new_err(format!(
        "metrics must be an FPM dict, a list of FPM dicts (one per attention-DP rank) or JSON \
         text, got {}",
        type_name(metrics)
    )))
}

/// Tuning input, normalised as the reference facade does (spec 42 §11): a dict is one
/// single-rank iteration, a list of dicts one multi-rank iteration, an empty list nothing, a
/// list of lists a sequence of iterations; JSON text is passed through unchanged (it must be
/// an array of arrays).
fn iterations_json(py: Python<'_>, iterations: &Bound<'_, PyAny>) -> PyResult<String> {
    const WHAT: &str = "iterations";
    if let Some(text) = json_text(iterations, WHAT)? {
        return Ok(text);
    }
    if iterations.is_instance_of::<PyDict>() {
        let nested = PyList::new(py, [PyList::new(py, [iterations])?])?;
        return dumps(py, nested.as_any(), WHAT);
    }
    if !is_sequence(iterations) {
        return Err(PyTypeError::new_err(format!(
            "iterations must be an FPM dict, a list of FPM dicts (one iteration), a list of such \
             lists, or JSON text, got {}",
            type_name(iterations)
        )));
    }
    let items: Vec<Bound<'_, PyAny>> = iterations.try_iter()?.collect::<PyResult<_>>()?;
    if items.iter().all(is_sequence) {
        // Already a sequence of iterations (or empty).
        return dumps(py, iterations, WHAT);
    }
    if items.iter().all(|i| i.is_instance_of::<PyDict>()) {
        let nested = PyList::new(py, [iterations])?;
        return dumps(py, nested.as_any(), WHAT);
    }
    Err(PyTypeError::new_err(
        "iterations mixes FPM dicts and lists: pass a list of FPM dicts (one iteration) or a \
         list of lists of FPM dicts (one list per iteration)",
    ))
}

/// `json.loads(text)`.
fn loads<'py>(py: Python<'py>, text: &str) -> PyResult<Bound<'py, PyAny>> {
    py.import("json")?.call_method1("loads", (text,))
}

// ---------------------------------------------------------------------------------------------
// Compiling through the Python front end

/// Runs the compiler on a compile request (passed as a dict of `compile_engine` keyword
/// arguments). Returns the spec bytes, or the failure as `"<exception name>: <message>"`.
pub(crate) fn run_compiler(compiler: &Bound<'_, PyAny>, request: &CompileRequest) -> Result<Vec<u8>, String> {
    let py = compiler.py();
    let describe = |e: PyErr| -> String {
        let name = e
            .get_type(py)
            .name()
            .map(|n| n.to_string())
            .unwrap_or_else(|_| "Exception".to_string());
        format!("{name}: {}", e.value(py))
    };
    let kwargs = loads(py, &request.to_json()).map_err(describe)?;
    let spec = compiler.call1((kwargs,)).map_err(describe)?;
    if let Ok(b) = spec.cast::<PyBytes>() {
        return Ok(b.as_bytes().to_vec());
    }
    if let Ok(b) = spec.cast::<PyByteArray>() {
        return Ok(b.to_vec());
    }
    if let Ok(s) = spec.cast::<PyString>() {
        return Ok(s.to_cow().map_err(describe)?.into_owned().into_bytes());
    }
    Err(format!(
        "TypeError: the compiler returned {}; expected the compiled spec as bytes (or spec JSON \
         text)",
        type_name(&spec)
    ))
}

/// The compiler to use: the caller's callable, else the front end's default.
pub(crate) fn resolve_compiler(py: Python<'_>, compiler: Option<Bound<'_, PyAny>>) -> PyResult<Py<PyAny>> {
    match compiler {
        Some(c) if !c.is_none() => {
            if !c.is_callable() {
                return Err(PyTypeError::new_err(format!(
                    "compiler must be a callable taking the compile request dict and returning \
                     the spec bytes, got {}",
                    type_name(&c)
                )));
            }
            Ok(c.unbind())
        }
        _ => {
            let (module, function) = DEFAULT_COMPILER;
            Ok(py.import(module)?.getattr(function)?.unbind())
        }
    }
}

/// Which constructor compiles the model.
#[derive(Clone, Copy)]
enum NativeBuild {
    /// `from_native`: a compile failure raises.
    Strict,
    /// `best_available`: a fallback-safe failure gives a regression model with a warning.
    WithFallback,
}

fn build_native(
    py: Python<'_>,
    config: &Bound<'_, PyAny>,
    options: Option<&Bound<'_, PyAny>>,
    compiler: Option<Bound<'_, PyAny>>,
    build: NativeBuild,
) -> PyResult<ForwardPassPerfModel> {
    let config = mapping_json(py, config, "config")?;
    let options = options_json(py, options)?;
    let compiler = resolve_compiler(py, compiler)?;
    let compile =
        |request: &CompileRequest| Python::attach(|py| run_compiler(compiler.bind(py), request));
    let model = py
        .detach(|| {
            guarded_fpm(|| match build {
                NativeBuild::Strict => CoreModel::from_native(&config, options.as_deref(), compile),
                NativeBuild::WithFallback => {
                    CoreModel::best_available(&config, options.as_deref(), compile)
                }
            })
        })
        .map_err(PyErr::from)?;
    Ok(ForwardPassPerfModel::wrap(model))
}

// ---------------------------------------------------------------------------------------------
// The class

/// Forward-pass time of one serving-engine iteration from its scheduler telemetry (FPM v1),
/// with online correction from measured wall times, or a regression fallback (spec 42).
///
/// Thread-safe: estimates and tuning may run from several threads at once; every call
/// releases the GIL. `close()` drops the model; later calls raise `ValueError`.
#[pyclass(frozen, module = "aic._aic", name = "ForwardPassPerfModel")]
pub struct ForwardPassPerfModel {
    handle: Mutex<Option<Arc<CoreModel>>>,
}

impl ForwardPassPerfModel {
    fn wrap(model: CoreModel) -> ForwardPassPerfModel {
        ForwardPassPerfModel {
            handle: Mutex::new(Some(Arc::new(model))),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Option<Arc<CoreModel>>> {
        self.handle
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The model, or `ValueError` after `close()`.
    fn model(&self) -> PyResult<Arc<CoreModel>> {
        self.lock().clone().ok_or_else(|| {
            PyValueError::new_err(format!(
                "this {CLASS_NAME} is closed; build a new one to keep estimating"
            ))
        })
    }

    /// Runs `f` on the model with the GIL released, errors and panics mapped to Python.
    fn run<T: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&CoreModel) -> aic_core::fpm::Result<T> + Send,
    ) -> PyResult<T> {
        let model = self.model()?;
        py.detach(|| guarded_fpm(|| f(&model))).map_err(PyErr::from)
    }
}

#[pymethods]
impl ForwardPassPerfModel {
    /// A native model over an already compiled engine.
    #[staticmethod]
    #[pyo3(signature = (engine, options=None))]
    fn from_engine(
        py: Python<'_>,
        engine: &Bound<'_, AicEngine>,
        options: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<ForwardPassPerfModel> {
        let options = options_json(py, options)?;
        let engine = engine.get().shared_engine();
        let model = py
            .detach(|| guarded_fpm(|| CoreModel::from_engine(engine, options.as_deref())))
            .map_err(PyErr::from)?;
        Ok(ForwardPassPerfModel::wrap(model))
    }

    /// A native model compiled from an EngineConfig (dict or JSON text). Raises `ValueError`
    /// when the model cannot be compiled.
    ///
    /// `compiler(request: dict) -> bytes` compiles the request (the keyword arguments of
    /// `aic.compile_engine`, `model_path` / `system` / `backend` included); default
    /// `aic.fpm.compile_request`.
    #[staticmethod]
    #[pyo3(signature = (config, options=None, compiler=None))]
    fn from_native(
        py: Python<'_>,
        config: &Bound<'_, PyAny>,
        options: Option<&Bound<'_, PyAny>>,
        compiler: Option<Bound<'_, PyAny>>,
    ) -> PyResult<ForwardPassPerfModel> {
        build_native(py, config, options, compiler, NativeBuild::Strict)
    }

    /// `from_native`, or, when the model cannot be compiled or its data is unavailable, a
    /// regression model whose `last_warning` says why. Bad options or config still raise.
    #[staticmethod]
    #[pyo3(signature = (config, options=None, compiler=None))]
    fn best_available(
        py: Python<'_>,
        config: &Bound<'_, PyAny>,
        options: Option<&Bound<'_, PyAny>>,
        compiler: Option<Bound<'_, PyAny>>,
    ) -> PyResult<ForwardPassPerfModel> {
        build_native(py, config, options, compiler, NativeBuild::WithFallback)
    }

    /// A regression-only model (no engine): learns from `tune_with_fpms` alone.
    #[staticmethod]
    #[pyo3(signature = (options=None))]
    fn from_regression(
        py: Python<'_>,
        options: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<ForwardPassPerfModel> {
        let options = options_json(py, options)?;
        let model = py
            .detach(|| guarded_fpm(|| CoreModel::from_regression(options.as_deref())))
            .map_err(PyErr::from)?;
        Ok(ForwardPassPerfModel::wrap(model))
    }

    /// Predicted forward-pass time (ms) of one iteration: an FPM dict, a list of them (one
    /// per attention-DP rank) or JSON text. `None` when a regression model has no fit yet for
    /// the iteration's kind; 0.0 for an empty iteration.
    fn estimate_forward_pass_time_ms(
        &self,
        py: Python<'_>,
        metrics: &Bound<'_, PyAny>,
    ) -> PyResult<Option<f64>> {
        let text = iteration_json(py, metrics)?;
        self.run(py, |m| m.estimate_forward_pass_time_ms(&text))
    }

    /// Learns from measured iterations (`wall_time` in seconds): an FPM dict (one single-rank
    /// iteration), a list of FPM dicts (one iteration), a list of such lists, or JSON text of
    /// an array of arrays. Stops at the first error; earlier updates stay.
    fn tune_with_fpms(&self, py: Python<'_>, iterations: &Bound<'_, PyAny>) -> PyResult<()> {
        let text = iterations_json(py, iterations)?;
        self.run(py, |m| m.tune_with_fpms(&text))
    }

    /// The diagnostics as a dict: `source`, `readiness`, `retained_observations`,
    /// `correction_ready_buckets`, `last_warning`.
    fn diagnostics<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let text = self.run(py, |m| Ok(m.diagnostics()))?;
        loads(py, &text)
    }

    /// The diagnostics as compact JSON text.
    fn diagnostics_json(&self, py: Python<'_>) -> PyResult<String> {
        self.run(py, |m| Ok(m.diagnostics()))
    }

    /// Smallest bucket correction factor over the ready workload kinds (`None`: none yet, or a
    /// regression model).
    fn min_correction_factor(&self, py: Python<'_>) -> PyResult<Option<f64>> {
        self.run(py, |m| Ok(m.min_correction_factor()))
    }

    /// Largest bucket correction factor over the ready workload kinds.
    fn max_correction_factor(&self, py: Python<'_>) -> PyResult<Option<f64>> {
        self.run(py, |m| Ok(m.max_correction_factor()))
    }

    /// Mean bucket correction factor over the ready workload kinds.
    fn avg_correction_factor(&self, py: Python<'_>) -> PyResult<Option<f64>> {
        self.run(py, |m| Ok(m.avg_correction_factor()))
    }

    /// `min_correction_factor()` under the reference facade's name.
    fn get_min_correction_factor(&self, py: Python<'_>) -> PyResult<Option<f64>> {
        self.min_correction_factor(py)
    }

    /// `max_correction_factor()` under the reference facade's name.
    fn get_max_correction_factor(&self, py: Python<'_>) -> PyResult<Option<f64>> {
        self.max_correction_factor(py)
    }

    /// `avg_correction_factor()` under the reference facade's name.
    fn get_avg_correction_factor(&self, py: Python<'_>) -> PyResult<Option<f64>> {
        self.avg_correction_factor(py)
    }

    /// Why the native estimator is unavailable (set by `best_available` after a fallback).
    #[getter]
    fn last_warning(&self) -> PyResult<Option<String>> {
        Ok(self.model()?.last_warning().map(str::to_string))
    }

    /// Whether estimates come from a compiled engine (else the regression fallback).
    #[getter]
    fn is_native(&self) -> PyResult<bool> {
        Ok(self.model()?.is_native())
    }

    /// The options in force, as a dict.
    #[getter]
    fn options<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let model = self.model()?;
        let text = serde_json::to_string(model.options())
            .map_err(|e| PyValueError::new_err(format!("cannot serialise the options: {e}")))?;
        loads(py, &text)
    }

    /// Whether `close()` has been called.
    #[getter]
    fn closed(&self) -> bool {
        self.lock().is_none()
    }

    /// Drops the model (idempotent). Calls already running finish on their own reference.
    fn close(&self) {
        self.lock().take();
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    #[pyo3(signature = (*_exc))]
    fn __exit__(&self, _exc: &Bound<'_, PyTuple>) -> bool {
        self.close();
        false
    }

    fn __repr__(&self) -> String {
        match self.lock().as_ref() {
            None => format!("{CLASS_NAME}(closed)"),
            Some(model) => {
                let d = model.diagnostics_report();
                format!(
                    "{CLASS_NAME}(source='{}', readiness='{}', retained_observations={})",
                    d.source.as_str(),
                    d.readiness.as_str(),
                    d.retained_observations
                )
            }
        }
    }
}

/// Registers the class on the module and lists it in `__all__` (when the module has one).
pub fn init(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<ForwardPassPerfModel>()?;
    if let Ok(all) = m.getattr("__all__") {
        if let Ok(all) = all.cast::<PyList>() {
            all.append(CLASS_NAME)?;
        }
    }
    Ok(())
}
