//! The PyO3 module `aic._aic`: `AicEngine`, a few data helpers and the exception classes.
//!
//! Bindings only. Every estimate runs in `aic_core` with the GIL released, behind
//! [`guarded`], so a core error becomes the matching Python exception and a panic becomes a
//! `RuntimeError` instead of unwinding into the interpreter. Integer arguments are `u32` at
//! the boundary: PyO3's extraction raises `OverflowError` for a negative value or one of
//! 2^32 or more before anything runs, and the engine's counts ([`count::Count`]) refuse a
//! `bool` with `TypeError`.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::Arc;

use aic_core::data::lanes::{attention_lane_order as core_lane_order, AttentionPhase};
use aic_core::data::system::SystemSpec;
use aic_core::data::versions::resolve_backend_version as core_resolve_version;
use aic_core::engine::provenance::with_provenance;
use aic_core::engine::ProvenanceTier;
use aic_core::memory::{
    estimate_kv_cache as core_estimate_kv_cache,
    estimate_kv_cache_unbuilt as core_estimate_kv_cache_unbuilt, KvCacheEstimate, KvCacheRequest,
    ModelFacts,
};
use aic_core::{Backend, BatchKind, Engine, EngineConfig, EngineSpec, OpResult, RunMode, StaticRun};
use pyo3::exceptions::{PyOverflowError, PyValueError};
use pyo3::prelude::*;
use pyo3::pybacked::PyBackedBytes;
use pyo3::types::{PyBytes, PyDict, PyList};

use crate::errors::{
    guarded, guarded_serving, serving_error, EmpiricalNotImplementedError, MissingSystemFlopsError,
    PerfDataNotAvailableError,
};

mod count;
mod replay;
mod surface;
mod views;

use count::Count;

/// One per-op row as Python sees it: `(name, latency_ms, energy_wms, source)`.
type OpRow = (String, f64, f64, &'static str);

fn op_rows(ops: Vec<OpResult>) -> Vec<OpRow> {
    ops.into_iter()
        .map(|o| (o.name, o.latency_ms, o.energy_wms, o.source.as_str()))
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Where the shipped data is

static PACKAGED_REGISTERED: AtomicBool = AtomicBool::new(false);

/// `<folder>/data/systems` if it is a directory.
fn systems_under(folder: &Path) -> Option<PathBuf> {
    let dir = folder.join("data").join("systems");
    dir.is_dir().then_some(dir)
}

/// The `aic/data/systems` folder next to this extension module (the wheel layout; in a source
/// checkout `py_compile_engine/aic/data` links to the repo's `data/`). Found through the
/// module's own `__file__` or, while the module is still being imported, the `aic` package's
/// `__path__`.
fn packaged_systems_dir(py: Python<'_>) -> Option<PathBuf> {
    let modules = py.import("sys").ok()?.getattr("modules").ok()?;
    if let Ok(module) = modules.get_item("aic._aic") {
        if let Ok(file) = module
            .getattr("__file__")
            .and_then(|f| f.extract::<PathBuf>())
        {
            if let Some(dir) = file.parent().and_then(systems_under) {
                return Some(dir);
            }
        }
    }
    let package = modules.get_item("aic").ok()?;
    let paths = package.getattr("__path__").ok()?;
    for entry in paths.try_iter().ok()? {
        if let Ok(folder) = entry.and_then(|e| e.extract::<PathBuf>()) {
            if let Some(dir) = systems_under(&folder) {
                return Some(dir);
            }
        }
    }
    None
}

/// Registers the packaged data as the core's default systems folder (once per process).
/// `AIC_SYSTEMS_PATH` still takes precedence: the core checks it first.
fn register_packaged_data(py: Python<'_>) {
    if PACKAGED_REGISTERED.load(Ordering::Acquire) {
        return;
    }
    if let Some(dir) = packaged_systems_dir(py) {
        aic_core::data::set_default_systems_path(dir);
        PACKAGED_REGISTERED.store(true, Ordering::Release);
    }
}

/// The systems folder to use for a helper: the argument, else the default.
fn systems_root(py: Python<'_>, systems_path: Option<PathBuf>) -> PyResult<PathBuf> {
    if let Some(p) = systems_path {
        return Ok(p);
    }
    register_packaged_data(py);
    aic_core::data::default_systems_path().ok_or_else(|| {
        PyValueError::new_err(
            "no systems folder: pass systems_path, set AIC_SYSTEMS_PATH, or install the aic \
             package with its shipped data",
        )
    })
}

fn path_to_string(path: PathBuf) -> String {
    path.into_os_string()
        .into_string()
        .unwrap_or_else(|os| os.to_string_lossy().into_owned())
}

// ---------------------------------------------------------------------------------------------
// AicEngine

/// A compiled engine: one spec bound to its perf tables.
///
/// Build it with `AicEngine.from_spec(spec_bytes, systems_path=None)`. It is immutable and
/// safe to share between threads; every estimate releases the GIL.
#[pyclass(frozen, module = "aic._aic", name = "AicEngine")]
pub struct AicEngine {
    inner: Arc<Engine>,
    /// Provenance tier code of the last compute call made through this object (0 = none).
    last_tier: AtomicU8,
}

impl AicEngine {
    /// The engine, shared (the forward-pass model wraps the same compiled engine).
    pub(crate) fn shared_engine(&self) -> Arc<Engine> {
        Arc::clone(&self.inner)
    }

    /// Runs the compute call `f` on the engine with the GIL released, errors and panics mapped
    /// to Python, and keeps the call's provenance tier for `last_provenance()`.
    fn run<T: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&Engine) -> aic_core::Result<T> + Send,
    ) -> PyResult<T> {
        let engine = &self.inner;
        let (result, tier) = py.detach(|| with_provenance(|| guarded(|| f(engine))));
        self.last_tier
            .store(ProvenanceTier::code(tier), Ordering::Relaxed);
        result.map_err(PyErr::from)
    }
}

#[allow(clippy::too_many_arguments)]
#[pymethods]
impl AicEngine {
    /// Builds an engine from a compiled spec (binary wire form or spec JSON, as bytes).
    ///
    /// The systems folder is the spec's own `systems_path`, else `systems_path`, else the
    /// default (`AIC_SYSTEMS_PATH`, then the data shipped in the package, then the source
    /// checkout's `data/systems`). `quant_transfer=True` turns on
    /// `Engine::allow_quant_transfer` (beyond the reference; the calibrated estimate's rule).
    #[staticmethod]
    #[pyo3(signature = (spec_bytes, systems_path=None, *, quant_transfer=false))]
    fn from_spec(
        py: Python<'_>,
        spec_bytes: PyBackedBytes,
        systems_path: Option<PathBuf>,
        quant_transfer: bool,
    ) -> PyResult<AicEngine> {
        if systems_path.is_none() {
            register_packaged_data(py);
        }
        let bytes: &[u8] = &spec_bytes;
        let root = systems_path.as_deref();
        let inner = py
            .detach(|| {
                guarded(|| {
                    let mut engine = Engine::from_spec_bytes(bytes, root)?;
                    if quant_transfer {
                        engine.allow_quant_transfer();
                    }
                    Ok(engine)
                })
            })
            .map_err(PyErr::from)?;
        Ok(AicEngine {
            inner: Arc::new(inner),
            last_tier: AtomicU8::new(0),
        })
    }

    /// Context-phase (prefill) time of a batch, ms. `isl` includes the cached `prefix`.
    #[pyo3(signature = (bs, isl, prefix=Count(0)), text_signature = "($self, bs, isl, prefix=0)")]
    fn predict_prefill_latency(
        &self,
        py: Python<'_>,
        bs: Count,
        isl: Count,
        prefix: Count,
    ) -> PyResult<f64> {
        let (bs, isl, prefix) = (bs.0, isl.0, prefix.0);
        self.run(py, |e| e.prefill_latency_ms(bs, isl, prefix))
    }

    /// Generation-phase time to produce `osl` tokens after the prefill (`osl − 1` steps), ms.
    #[pyo3(signature = (bs, isl, osl=Count(2)), text_signature = "($self, bs, isl, osl=2)")]
    fn predict_decode_latency(&self, py: Python<'_>, bs: Count, isl: Count, osl: Count) -> PyResult<f64> {
        let (bs, isl, osl) = (bs.0, isl.0, osl.0);
        self.run(py, |e| e.decode_latency_ms(bs, isl, osl))
    }

    /// Time of one iteration mixing `ctx_tokens` prefill tokens and `gen_tokens` decodes, ms.
    #[pyo3(signature = (
        ctx_tokens, gen_tokens, isl, osl, prefix=Count(0),
        seq_imbalance_correction_scale=1.0, gen_seq_imbalance_correction_scale=1.0
    ), text_signature = "($self, ctx_tokens, gen_tokens, isl, osl, prefix=0, seq_imbalance_correction_scale=1.0, gen_seq_imbalance_correction_scale=1.0)")]
    fn mixed_step_latency(
        &self,
        py: Python<'_>,
        ctx_tokens: Count,
        gen_tokens: Count,
        isl: Count,
        osl: Count,
        prefix: Count,
        seq_imbalance_correction_scale: f64,
        gen_seq_imbalance_correction_scale: f64,
    ) -> PyResult<f64> {
        let (ctx_tokens, gen_tokens, isl, osl, prefix) = (ctx_tokens.0, gen_tokens.0, isl.0, osl.0, prefix.0);
        self.run(py, |e| {
            e.mixed_step_latency_ms(
                ctx_tokens,
                gen_tokens,
                isl,
                osl,
                prefix,
                seq_imbalance_correction_scale,
                gen_seq_imbalance_correction_scale,
            )
        })
    }

    /// The four parts of `mixed_step_latency` (same arguments), as a list of floats.
    #[pyo3(signature = (
        ctx_tokens, gen_tokens, isl, osl, prefix=Count(0),
        seq_imbalance_correction_scale=1.0, gen_seq_imbalance_correction_scale=1.0
    ), text_signature = "($self, ctx_tokens, gen_tokens, isl, osl, prefix=0, seq_imbalance_correction_scale=1.0, gen_seq_imbalance_correction_scale=1.0)")]
    fn mixed_step_breakdown(
        &self,
        py: Python<'_>,
        ctx_tokens: Count,
        gen_tokens: Count,
        isl: Count,
        osl: Count,
        prefix: Count,
        seq_imbalance_correction_scale: f64,
        gen_seq_imbalance_correction_scale: f64,
    ) -> PyResult<Vec<f64>> {
        let (ctx_tokens, gen_tokens, isl, osl, prefix) = (ctx_tokens.0, gen_tokens.0, isl.0, osl.0, prefix.0);
        let parts = self.run(py, |e| {
            e.mixed_step_breakdown(
                ctx_tokens,
                gen_tokens,
                isl,
                osl,
                prefix,
                seq_imbalance_correction_scale,
                gen_seq_imbalance_correction_scale,
            )
        })?;
        Ok(parts.to_vec())
    }

    /// Time of one generation-only iteration with `gen_tokens` decoding requests, ms.
    #[pyo3(signature = (gen_tokens, isl, osl, gen_seq_imbalance_correction_scale=1.0))]
    fn decode_step_latency(
        &self,
        py: Python<'_>,
        gen_tokens: Count,
        isl: Count,
        osl: Count,
        gen_seq_imbalance_correction_scale: f64,
    ) -> PyResult<f64> {
        let (gen_tokens, isl, osl) = (gen_tokens.0, isl.0, osl.0);
        self.run(py, |e| {
            e.decode_step_latency_ms(gen_tokens, isl, osl, gen_seq_imbalance_correction_scale)
        })
    }

    /// A static run: `(context_ms, generation_ms, total_ms)`.
    #[pyo3(signature = (
        batch_size, beam_width, isl, osl, prefix=Count(0),
        seq_imbalance_correction_scale=1.0, gen_seq_imbalance_correction_scale=1.0,
        mode="static", stride=Count(32)
    ), text_signature = "($self, batch_size, beam_width, isl, osl, prefix=0, seq_imbalance_correction_scale=1.0, gen_seq_imbalance_correction_scale=1.0, mode=\"static\", stride=32)")]
    fn run_static(
        &self,
        py: Python<'_>,
        batch_size: Count,
        beam_width: Count,
        isl: Count,
        osl: Count,
        prefix: Count,
        seq_imbalance_correction_scale: f64,
        gen_seq_imbalance_correction_scale: f64,
        mode: &str,
        stride: Count,
    ) -> PyResult<(f64, f64, f64)> {
        let (batch_size, beam_width, isl, osl, prefix, stride) = (batch_size.0, beam_width.0, isl.0, osl.0, prefix.0, stride.0);
        let run = static_run(
            batch_size,
            beam_width,
            isl,
            osl,
            prefix,
            seq_imbalance_correction_scale,
            gen_seq_imbalance_correction_scale,
            mode,
            stride,
        )?;
        let r = self.run(py, |e| e.run_static(&run))?;
        Ok((r.context_ms, r.generation_ms, r.total_ms))
    }

    /// A static run per op: `(context_rows, generation_rows)`, each row
    /// `(name, latency_ms, energy_wms, source)`, folded by op name.
    #[pyo3(signature = (
        batch_size, beam_width, isl, osl, prefix=Count(0),
        seq_imbalance_correction_scale=1.0, gen_seq_imbalance_correction_scale=1.0,
        mode="static", stride=Count(32)
    ), text_signature = "($self, batch_size, beam_width, isl, osl, prefix=0, seq_imbalance_correction_scale=1.0, gen_seq_imbalance_correction_scale=1.0, mode=\"static\", stride=32)")]
    fn run_static_per_op(
        &self,
        py: Python<'_>,
        batch_size: Count,
        beam_width: Count,
        isl: Count,
        osl: Count,
        prefix: Count,
        seq_imbalance_correction_scale: f64,
        gen_seq_imbalance_correction_scale: f64,
        mode: &str,
        stride: Count,
    ) -> PyResult<(Vec<OpRow>, Vec<OpRow>)> {
        let (batch_size, beam_width, isl, osl, prefix, stride) = (batch_size.0, beam_width.0, isl.0, osl.0, prefix.0, stride.0);
        let run = static_run(
            batch_size,
            beam_width,
            isl,
            osl,
            prefix,
            seq_imbalance_correction_scale,
            gen_seq_imbalance_correction_scale,
            mode,
            stride,
        )?;
        let (context, generation) = self.run(py, |e| e.run_static_per_op(&run))?;
        Ok((op_rows(context), op_rows(generation)))
    }

    /// Evaluates a JSON list of ops in one pass: rows `(name, latency_ms, energy_wms, source)`.
    #[pyo3(signature = (
        ops_json, is_context, batch_size, s, prefix=Count(0), imbalance_correction_scale=1.0, x=None
    ), text_signature = "($self, ops_json, is_context, batch_size, s, prefix=0, imbalance_correction_scale=1.0, x=None)")]
    fn evaluate_ops_json(
        &self,
        py: Python<'_>,
        ops_json: &str,
        is_context: bool,
        batch_size: Count,
        s: Count,
        prefix: Count,
        imbalance_correction_scale: f64,
        x: Option<u64>,
    ) -> PyResult<Vec<OpRow>> {
        let (batch_size, s, prefix) = (batch_size.0, s.0, prefix.0);
        let rows = self.run(py, |e| {
            e.evaluate_ops_json(
                ops_json,
                is_context,
                batch_size,
                s,
                prefix,
                imbalance_correction_scale,
                x,
            )
        })?;
        Ok(op_rows(rows))
    }

    /// Evaluates a JSON list of ops under the analytic SOL view (whatever the engine's database
    /// mode): rows `(name, sol_time_ms, sol_math_ms, sol_mem_ms)`, folded by op name. An op whose
    /// SOL path publishes no compute/memory split (MoeDispatch, Overlap, a Fallback answered by
    /// its chain) raises `ValueError` unless its SOL result is zero.
    #[pyo3(signature = (
        ops_json, is_context, batch_size, s, prefix=Count(0), imbalance_correction_scale=1.0, x=None
    ), text_signature = "($self, ops_json, is_context, batch_size, s, prefix=0, imbalance_correction_scale=1.0, x=None)")]
    fn evaluate_ops_sol_json(
        &self,
        py: Python<'_>,
        ops_json: &str,
        is_context: bool,
        batch_size: Count,
        s: Count,
        prefix: Count,
        imbalance_correction_scale: f64,
        x: Option<u64>,
    ) -> PyResult<Vec<(String, f64, f64, f64)>> {
        let (batch_size, s, prefix) = (batch_size.0, s.0, prefix.0);
        let rows = self.run(py, |e| {
            e.evaluate_ops_sol_json(
                ops_json,
                is_context,
                batch_size,
                s,
                prefix,
                imbalance_correction_scale,
                x,
            )
        })?;
        Ok(rows
            .into_iter()
            .map(|r| (r.name, r.sol_time_ms, r.sol_math_ms, r.sol_mem_ms))
            .collect())
    }

    /// Many estimates in one call, split across cores (GIL released): `kind` is `"prefill"`
    /// (columns batch, isl, prefix), `"decode"` (batch, isl, osl) or `"decode_step"`
    /// (gen_tokens, isl, osl). The columns are equal-length sequences of non-negative integers
    /// (lists, tuples, `array`s, numpy arrays); the result is an `array.array('d')` of
    /// latencies in ms. `threads=None` uses every core, `1` the calling thread; the values do
    /// not depend on it. A failing point raises the error of its kind, naming the lowest
    /// failing index and its arguments.
    #[pyo3(signature = (kind, a, b, c, threads=None))]
    fn estimate_batch<'py>(
        &self,
        py: Python<'py>,
        kind: &str,
        a: Vec<i64>,
        b: Vec<i64>,
        c: Vec<i64>,
        threads: Option<usize>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let kind = BatchKind::parse(kind).map_err(|e| crate::errors::core_error(&e))?;
        let column = |name: &str, values: Vec<i64>| -> PyResult<Vec<u32>> {
            values
                .into_iter()
                .enumerate()
                .map(|(i, v)| {
                    u32::try_from(v).map_err(|_| {
                        PyOverflowError::new_err(format!(
                            "column {name}[{i}] = {v} is out of range: counts are integers in 0..=4294967295"
                        ))
                    })
                })
                .collect()
        };
        let (a, b, c) = (column("a", a)?, column("b", b)?, column("c", c)?);
        let values = self.run(py, |engine| engine.estimate_batch(kind, &a, &b, &c, threads))?;
        let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_ne_bytes()).collect();
        let out = py.import("array")?.getattr("array")?.call1(("d",))?;
        out.call_method1("frombytes", (PyBytes::new(py, &bytes),))?;
        Ok(out)
    }

    /// The spec this engine was built from, as JSON text (not a compute call: it leaves
    /// `last_provenance()` alone).
    fn spec_json(&self, py: Python<'_>) -> PyResult<String> {
        let engine = &self.inner;
        py.detach(|| guarded(|| Ok(engine.spec().to_json())))
            .map_err(PyErr::from)
    }

    /// The worst provenance tier of the empirical estimates behind the last compute call made
    /// through this object: `"empirical"` (own table slice), `"xshape"`, `"xquant"`,
    /// `"xprofile"` or `"xop"` (transfers, worst last), or `None` when every answer came from a
    /// table or an analytic formula. Per object: when several threads share one object, the
    /// call that finished last wins.
    fn last_provenance(&self) -> Option<&'static str> {
        ProvenanceTier::from_code(self.last_tier.load(Ordering::Relaxed))
            .map(ProvenanceTier::as_str)
    }

    /// What the loader skipped, relaxed or worked around for this engine's perf data, as a
    /// list of dicts `{"kind", "path", "table", "message"}` (`path` and `table` may be `None`),
    /// in first-seen order. Provenance is checked when the data opens; other warnings come
    /// with each table's first load.
    fn load_warnings<'py>(&self, py: Python<'py>) -> PyResult<Vec<Bound<'py, PyDict>>> {
        self.inner
            .load_warnings()
            .into_iter()
            .map(|w| {
                let d = PyDict::new(py);
                d.set_item("kind", w.kind.as_str())?;
                d.set_item("path", w.path.map(path_to_string))?;
                d.set_item("table", w.table)?;
                d.set_item("message", w.message)?;
                Ok(d)
            })
            .collect()
    }

    /// Per-op list of `decode_step_latency` (same arguments): rows
    /// `(name, latency_ms, energy_wms, source)`, folded by op name.
    #[pyo3(signature = (gen_tokens, isl, osl, gen_seq_imbalance_correction_scale=1.0))]
    fn decode_step_per_op(
        &self,
        py: Python<'_>,
        gen_tokens: Count,
        isl: Count,
        osl: Count,
        gen_seq_imbalance_correction_scale: f64,
    ) -> PyResult<Vec<OpRow>> {
        let (gen_tokens, isl, osl) = (gen_tokens.0, isl.0, osl.0);
        let rows = self.run(py, |e| {
            e.decode_step_per_op(gen_tokens, isl, osl, gen_seq_imbalance_correction_scale)
        })?;
        Ok(op_rows(rows))
    }

    /// Per-op lists of `mixed_step_breakdown` (same arguments):
    /// `(shared_non_attention, context_attention, decode_attention)`, each a list of rows
    /// `(name, latency_ms, energy_wms, source)` folded by op name.
    #[pyo3(signature = (
        ctx_tokens, gen_tokens, isl, osl, prefix=Count(0),
        seq_imbalance_correction_scale=1.0, gen_seq_imbalance_correction_scale=1.0
    ), text_signature = "($self, ctx_tokens, gen_tokens, isl, osl, prefix=0, seq_imbalance_correction_scale=1.0, gen_seq_imbalance_correction_scale=1.0)")]
    fn mixed_step_breakdown_per_op(
        &self,
        py: Python<'_>,
        ctx_tokens: Count,
        gen_tokens: Count,
        isl: Count,
        osl: Count,
        prefix: Count,
        seq_imbalance_correction_scale: f64,
        gen_seq_imbalance_correction_scale: f64,
    ) -> PyResult<(Vec<OpRow>, Vec<OpRow>, Vec<OpRow>)> {
        let (ctx_tokens, gen_tokens, isl, osl, prefix) = (ctx_tokens.0, gen_tokens.0, isl.0, osl.0, prefix.0);
        let [shared, context, decode] = self.run(py, |e| {
            e.mixed_step_breakdown_per_op(
                ctx_tokens,
                gen_tokens,
                isl,
                osl,
                prefix,
                seq_imbalance_correction_scale,
                gen_seq_imbalance_correction_scale,
            )
        })?;
        Ok((op_rows(shared), op_rows(context), op_rows(decode)))
    }

    /// Evaluates the compiled context ops at `indices` (positions in `context_ops`, repeats
    /// allowed) at one context shape: rows `(name, latency_ms, energy_wms, source)`, folded by
    /// op name. An index out of range raises `ValueError`.
    #[pyo3(signature = (indices, batch_size, s, prefix=Count(0), seq_imbalance_correction_scale=1.0, x=None), text_signature = "($self, indices, batch_size, s, prefix=0, seq_imbalance_correction_scale=1.0, x=None)")]
    fn evaluate_context_ops(
        &self,
        py: Python<'_>,
        indices: Vec<usize>,
        batch_size: Count,
        s: Count,
        prefix: Count,
        seq_imbalance_correction_scale: f64,
        x: Option<u64>,
    ) -> PyResult<Vec<OpRow>> {
        let (batch_size, s, prefix) = (batch_size.0, s.0, prefix.0);
        let rows = self.run(py, |e| {
            e.evaluate_context_ops(&indices, batch_size, s, prefix, seq_imbalance_correction_scale, x)
        })?;
        Ok(op_rows(rows))
    }

    /// Evaluates the compiled generation ops at `indices` at one decode shape (beam 1, KV
    /// position `s`): rows as `evaluate_context_ops`.
    #[pyo3(signature = (indices, batch_size, s, gen_seq_imbalance_correction_scale=1.0, prefix=Count(0), x=None), text_signature = "($self, indices, batch_size, s, gen_seq_imbalance_correction_scale=1.0, prefix=0, x=None)")]
    fn evaluate_generation_ops(
        &self,
        py: Python<'_>,
        indices: Vec<usize>,
        batch_size: Count,
        s: Count,
        gen_seq_imbalance_correction_scale: f64,
        prefix: Count,
        x: Option<u64>,
    ) -> PyResult<Vec<OpRow>> {
        let (batch_size, s, prefix) = (batch_size.0, s.0, prefix.0);
        let rows = self.run(py, |e| {
            e.evaluate_generation_ops(&indices, batch_size, s, gen_seq_imbalance_correction_scale, prefix, x)
        })?;
        Ok(op_rows(rows))
    }

    /// One perf table of this engine as nested JSON text, addressed by the reference's
    /// attribute name (`table_view_attributes()`); `None` when no source file of it exists.
    /// An unknown attribute raises `PerfDataNotAvailableError`.
    fn table_view_json(&self, py: Python<'_>, attribute: &str) -> PyResult<Option<String>> {
        let engine = &self.inner;
        py.detach(|| guarded(|| engine.table_view_json(attribute)))
            .map_err(PyErr::from)
    }

    /// Per-lane densities `(lane, slice_count, row_count)` of one attention table
    /// (`"_context_attention_data"` or `"_generation_attention_data"`) over every resolved
    /// source, lanes in first-seen order.
    fn attention_lane_density(
        &self,
        py: Python<'_>,
        attribute: &str,
    ) -> PyResult<Vec<(String, usize, usize)>> {
        let engine = &self.inner;
        let lanes = py
            .detach(|| guarded(|| engine.attention_lane_density(attribute)))
            .map_err(PyErr::from)?;
        Ok(lanes.into_iter().map(|d| (d.lane, d.slices, d.rows)).collect())
    }

    fn __repr__(&self) -> String {
        let cfg = &self.inner.spec().engine;
        let version = match cfg.backend_version.as_deref() {
            Some(v) => py_str_repr(v),
            None => "None".to_string(),
        };
        format!(
            "AicEngine(model={}, system={}, backend={}, version={})",
            py_str_repr(&cfg.model_name),
            py_str_repr(&cfg.system_name),
            py_str_repr(cfg.backend.as_str()),
            version,
        )
    }
}

/// A Python-style single-quoted string literal (for `__repr__`).
fn py_str_repr(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('\'');
    for c in text.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\'' => out.push_str("\\'"),
            '\n' => out.push_str("\\n"),
            c if c.is_control() => out.push_str(&format!("\\x{:02x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('\'');
    out
}

#[allow(clippy::too_many_arguments)]
fn static_run(
    batch_size: u32,
    beam_width: u32,
    isl: u32,
    osl: u32,
    prefix: u32,
    seq_scale: f64,
    gen_scale: f64,
    mode: &str,
    stride: u32,
) -> PyResult<StaticRun> {
    let mode = guarded(|| RunMode::parse(mode)).map_err(PyErr::from)?;
    Ok(StaticRun {
        batch_size,
        beam_width,
        isl,
        osl,
        prefix,
        seq_scale,
        gen_scale,
        mode,
        stride,
    })
}

// ---------------------------------------------------------------------------------------------
// Module functions

fn parse_backend(backend: &str) -> PyResult<Backend> {
    guarded(|| Backend::parse(backend)).map_err(PyErr::from)
}

/// Resolves a requested backend version (an alias such as `"current"`/`"next"`, a literal, or
/// `None` for the current slot) on a system: `(version, tolerate_dirless)`.
#[pyfunction]
#[pyo3(signature = (systems_path, system, backend, requested=None))]
fn resolve_backend_version(
    py: Python<'_>,
    systems_path: Option<PathBuf>,
    system: &str,
    backend: &str,
    requested: Option<&str>,
) -> PyResult<(Option<String>, bool)> {
    let root = systems_root(py, systems_path)?;
    let backend = parse_backend(backend)?;
    let resolved = py
        .detach(|| {
            guarded(|| {
                let spec = SystemSpec::load(&root, system)?;
                core_resolve_version(&root, &spec, backend, requested)
            })
        })
        .map_err(PyErr::from)?;
    Ok((resolved.version, resolved.tolerate_dirless))
}

/// The attention kernel-lane order for (system, backend, version) in one phase
/// (`"context"` or `"generation"`).
#[pyfunction]
#[pyo3(signature = (
    systems_path, system, backend, version, phase, enable_shared_layer=true, attention_backend=None
))]
#[allow(clippy::too_many_arguments)]
fn attention_lane_order(
    py: Python<'_>,
    systems_path: Option<PathBuf>,
    system: &str,
    backend: &str,
    version: &str,
    phase: &str,
    enable_shared_layer: bool,
    attention_backend: Option<&str>,
) -> PyResult<Vec<String>> {
    let phase = match phase {
        "context" => AttentionPhase::Context,
        "generation" => AttentionPhase::Generation,
        other => {
            return Err(PyValueError::new_err(format!(
                "unknown attention phase {other:?}; expected \"context\" or \"generation\""
            )))
        }
    };
    let root = systems_root(py, systems_path)?;
    let backend = parse_backend(backend)?;
    py.detach(|| {
        guarded(|| {
            let spec = SystemSpec::load(&root, system)?;
            core_lane_order(
                &root,
                &spec,
                backend,
                version,
                phase,
                enable_shared_layer,
                attention_backend,
            )
        })
    })
    .map_err(PyErr::from)
}

/// Encodes spec JSON into the binary wire form that `AicEngine.from_spec` reads.
#[pyfunction]
fn encode_spec<'py>(py: Python<'py>, spec_json: &str) -> PyResult<Bound<'py, PyBytes>> {
    let bytes = py
        .detach(|| guarded(|| EngineSpec::from_json(spec_json).map(|s| s.to_bytes())))
        .map_err(PyErr::from)?;
    Ok(PyBytes::new(py, &bytes))
}

/// Decodes a spec (binary wire form or JSON bytes) into spec JSON text.
#[pyfunction]
fn decode_spec(py: Python<'_>, spec_bytes: PyBackedBytes) -> PyResult<String> {
    let bytes: &[u8] = &spec_bytes;
    py.detach(|| guarded(|| EngineSpec::from_bytes(bytes).map(|s| s.to_json())))
        .map_err(PyErr::from)
}

/// The systems folder used when none is given, or `None` if there is none: the environment
/// variable `AIC_SYSTEMS_PATH`, else the data shipped in the package, else the source
/// checkout's `data/systems`.
#[pyfunction]
fn default_systems_path(py: Python<'_>) -> Option<String> {
    register_packaged_data(py);
    aic_core::data::default_systems_path().map(path_to_string)
}

/// Parses one JSON argument of the memory functions, naming it in the error.
fn parse_json_arg<T: serde::de::DeserializeOwned>(what: &str, text: &str) -> aic_core::Result<T> {
    serde_json::from_str(text)
        .map_err(|e| aic_core::AicError::value(format!("invalid {what} JSON: {e}")))
}

/// Serialises a KV-cache estimate to JSON text.
fn estimate_to_json(estimate: &KvCacheEstimate) -> aic_core::Result<String> {
    serde_json::to_string(estimate)
        .map_err(|e| aic_core::AicError::value(format!("cannot serialise the estimate: {e}")))
}

/// The KV-cache capacity of a compiled engine on one GPU, as `KvCacheEstimate` JSON text.
///
/// `spec_json` is the compiled spec (JSON), `facts_json` the `ModelFacts` JSON and
/// `request_json` the `KvCacheRequest` JSON. The system comes from the spec's own
/// `systems_path`, else `systems_path`, else the default systems folder.
#[pyfunction]
#[pyo3(signature = (spec_json, facts_json, request_json, systems_path=None))]
fn estimate_kv_cache(
    py: Python<'_>,
    spec_json: &str,
    facts_json: &str,
    request_json: &str,
    systems_path: Option<PathBuf>,
) -> PyResult<String> {
    let fallback = match systems_path {
        Some(p) => Some(p),
        None => {
            register_packaged_data(py);
            aic_core::data::default_systems_path()
        }
    };
    py.detach(|| {
        guarded(|| {
            let spec = EngineSpec::from_json(spec_json)?;
            let facts: ModelFacts = parse_json_arg("model facts", facts_json)?;
            let request: KvCacheRequest = parse_json_arg("KV-cache request", request_json)?;
            let root = spec
                .engine
                .systems_path
                .as_ref()
                .map(PathBuf::from)
                .or(fallback)
                .ok_or_else(|| {
                    aic_core::AicError::value(
                        "no systems folder: pass systems_path, set AIC_SYSTEMS_PATH, or install \
                         the aic package with its shipped data",
                    )
                })?;
            let system = SystemSpec::load(&root, &spec.engine.system_name)?;
            let estimate = core_estimate_kv_cache(&spec, &facts, &system, &request)?;
            estimate_to_json(&estimate)
        })
    })
    .map_err(PyErr::from)
}

/// The KV-cache estimate for an engine whose spec could not be compiled (`build_error` is the
/// compile failure message): the naive estimate when the request allows it, else the
/// "unsupported model" error. `engine_json` is the engine config JSON; `facts_json` may be
/// `None` when no model config is available.
#[pyfunction]
#[pyo3(signature = (engine_json, facts_json, request_json, build_error))]
fn estimate_kv_cache_unbuilt(
    py: Python<'_>,
    engine_json: &str,
    facts_json: Option<&str>,
    request_json: &str,
    build_error: &str,
) -> PyResult<String> {
    py.detach(|| {
        guarded(|| {
            let engine: EngineConfig = parse_json_arg("engine config", engine_json)?;
            let facts: Option<ModelFacts> = facts_json
                .map(|text| parse_json_arg("model facts", text))
                .transpose()?;
            let request: KvCacheRequest = parse_json_arg("KV-cache request", request_json)?;
            let estimate =
                core_estimate_kv_cache_unbuilt(&engine, facts.as_ref(), &request, build_error)?;
            estimate_to_json(&estimate)
        })
    })
    .map_err(PyErr::from)
}

/// One serving-level estimate (spec 50, `cli_estimate`): `request_json` is an
/// `aic_core::serving::EstimateRequest` (compiled worker specs, model facts, labels and the
/// mode's arguments); the answer is JSON text `{"result", "memory", "oom", "per_ops"}`.
/// Serving errors raise the reference's classes: `RuntimeError` for OOM,
/// `ZeroDivisionError` for a zero context-token budget, `ValueError` otherwise.
#[pyfunction]
#[pyo3(signature = (request_json, systems_path=None))]
fn serving_estimate(py: Python<'_>, request_json: &str, systems_path: Option<PathBuf>) -> PyResult<String> {
    let root = systems_root(py, systems_path)?;
    py.detach(|| guarded_serving(|| aic_core::serving::estimate_json(request_json, Some(&root))))
        .map_err(serving_error)
}

/// Checks a calibration constants document (JSON text, `data/calibration/serving.json`
/// layout): `ValueError` naming the first problem (format version, a group's constants, the
/// HYBRID factors, a class scale); `None` when the document is usable.
#[pyfunction]
fn check_calibration(text: &str) -> PyResult<()> {
    guarded_serving(|| aic_core::serving::Calibration::from_json(text).map(|_| ())).map_err(PyErr::from)
}

/// The deployment sweep (spec 50 §9, `cli_default`): `request_json` is an
/// `aic_core::serving::sweep::SweepRequest`; the answer is JSON text with the candidate
/// tables, Pareto fronts and picks per experiment.
#[pyfunction]
#[pyo3(signature = (request_json, systems_path=None))]
fn serving_sweep(py: Python<'_>, request_json: &str, systems_path: Option<PathBuf>) -> PyResult<String> {
    let root = systems_root(py, systems_path)?;
    py.detach(|| guarded_serving(|| aic_core::serving::sweep::sweep_json(request_json, Some(&root))))
        .map_err(serving_error)
}

/// Several sweeps answered together (spec 51: `--backend auto`, experiment files, a
/// `recommend` budget step): `request_json` is an `aic_core::serving::plan::PlanRequest`; the
/// answer has the sweep's layout over every experiment, merged per serving mode when asked.
#[pyfunction]
#[pyo3(signature = (request_json, systems_path=None))]
fn serving_plan(py: Python<'_>, request_json: &str, systems_path: Option<PathBuf>) -> PyResult<String> {
    let root = systems_root(py, systems_path)?;
    py.detach(|| guarded_serving(|| aic_core::serving::plan::plan_json(request_json, Some(&root))))
        .map_err(serving_error)
}

/// The GPU's `sm_version` from a system's YAML (`None` when the file does not give one), read
/// by the engine's own system loader so the front end needs no YAML parser for it.
#[pyfunction]
#[pyo3(signature = (systems_path, system))]
fn system_sm_version(py: Python<'_>, systems_path: Option<PathBuf>, system: &str) -> PyResult<Option<u32>> {
    let root = systems_root(py, systems_path)?;
    py.detach(|| guarded(|| SystemSpec::load(&root, system).map(|s| s.gpu.sm_version)))
        .map_err(PyErr::from)
}

/// Starts loading the GEMM and communication tables of a perf database on a background thread
/// (see `aic_core::data::prefetch`); returns whether a load was started. Never raises for a
/// database that cannot be opened: the engine built later reports that.
#[pyfunction]
#[pyo3(signature = (systems_path, system, backend, version, enable_shared_layer))]
fn prefetch_tables(
    py: Python<'_>,
    systems_path: Option<PathBuf>,
    system: &str,
    backend: &str,
    version: &str,
    enable_shared_layer: bool,
) -> PyResult<bool> {
    let root = systems_root(py, systems_path)?;
    let backend = parse_backend(backend)?;
    Ok(py.detach(|| {
        guarded(|| {
            Ok(aic_core::data::prefetch::prefetch_tables(&root, system, backend, version, enable_shared_layer))
        })
        .unwrap_or(false)
    }))
}

/// Registers everything on the module object.
pub fn init(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_class::<AicEngine>()?;
    m.add_function(wrap_pyfunction!(resolve_backend_version, m)?)?;
    m.add_function(wrap_pyfunction!(attention_lane_order, m)?)?;
    m.add_function(wrap_pyfunction!(encode_spec, m)?)?;
    m.add_function(wrap_pyfunction!(decode_spec, m)?)?;
    m.add_function(wrap_pyfunction!(default_systems_path, m)?)?;
    m.add_function(wrap_pyfunction!(estimate_kv_cache, m)?)?;
    m.add_function(wrap_pyfunction!(estimate_kv_cache_unbuilt, m)?)?;
    m.add_function(wrap_pyfunction!(serving_estimate, m)?)?;
    m.add_function(wrap_pyfunction!(serving_sweep, m)?)?;
    m.add_function(wrap_pyfunction!(serving_plan, m)?)?;
    m.add_function(wrap_pyfunction!(check_calibration, m)?)?;
    m.add_function(wrap_pyfunction!(system_sm_version, m)?)?;
    m.add_function(wrap_pyfunction!(prefetch_tables, m)?)?;
    let view_functions = views::register(m)?;
    let surface_names = surface::register(m)?;
    let replay_names = replay::register(m)?;
    m.add(
        "PerfDataNotAvailableError",
        py.get_type::<PerfDataNotAvailableError>(),
    )?;
    m.add(
        "EmpiricalNotImplementedError",
        py.get_type::<EmpiricalNotImplementedError>(),
    )?;
    m.add(
        "MissingSystemFlopsError",
        py.get_type::<MissingSystemFlopsError>(),
    )?;
    let all = PyList::new(
        py,
        [
            "AicEngine",
            "PerfDataNotAvailableError",
            "EmpiricalNotImplementedError",
            "MissingSystemFlopsError",
            "resolve_backend_version",
            "attention_lane_order",
            "encode_spec",
            "decode_spec",
            "default_systems_path",
            "estimate_kv_cache",
            "estimate_kv_cache_unbuilt",
            "serving_estimate",
            "serving_sweep",
            "serving_plan",
            "check_calibration",
            "__version__",
        ],
    )?;
    for name in view_functions {
        all.append(name)?;
    }
    for name in surface_names {
        all.append(name)?;
    }
    for name in replay_names {
        all.append(name)?;
    }
    m.add("__all__", all)?;
    // Best effort: while the package is being imported, `aic.__path__` already points at the
    // package folder, so the shipped data can be registered right away.
    register_packaged_data(py);
    Ok(())
}
