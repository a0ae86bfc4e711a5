//! [`AicEngineBuilder`] (cargo feature `embed-python`): compiles an engine from a model name and
//! a deployment in one call, by running the Python compile front end (`aic.compile_engine`) once
//! in an embedded interpreter. Only the build touches Python; the [`Engine`] it returns is the
//! pure-Rust engine, identical to [`Engine::from_spec_bytes`] on the same spec.
//!
//! The `aic` Python package (with its native module `aic._aic`) must be importable by the
//! embedded interpreter: installed into the interpreter's site-packages (`pip install aic`), or
//! found through `PYTHONPATH`, or in the virtual environment named by `VIRTUAL_ENV` (an embedded
//! interpreter does not see an activated venv by itself; the builder adds its site-packages for
//! the embedded Python's version). The embedded Python is the `libpython` the dynamic loader finds
//! at run time, which need not be the interpreter `pip` installed into. Programs
//! that must not load Python at all compile ahead of time with `aic-compile compile` and load
//! the spec with [`Engine::from_spec_file`].
//!
//! ```no_run
//! use aic_core::builder::{AicEngineBuilder, BackendKind};
//!
//! let engine = AicEngineBuilder::new("Qwen/Qwen3-32B", "h200_sxm", BackendKind::Vllm)
//!     .tp_size(2)
//!     .build()?;
//! let ttft_ms = engine.prefill_latency_ms(1, 4096, 0)?;
//! # Ok::<(), aic_core::AicError>(())
//! ```

use std::path::{Path, PathBuf};

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};

use crate::engine::Engine;
use crate::error::{AicError, Result};
use crate::spec::{Backend, DatabaseMode};

/// Serving framework of the engine to compile (the spec's [`Backend`]).
pub type BackendKind = Backend;

/// Compiles an [`Engine`] through the embedded Python front end. Every setter mirrors the
/// keyword of the same name of `aic.compile_engine`; unset values take its defaults.
#[derive(Debug, Clone, PartialEq)]
pub struct AicEngineBuilder {
    model: String,
    system: String,
    backend: BackendKind,
    backend_version: Option<String>,
    tp_size: u32,
    pp_size: u32,
    attention_dp_size: u32,
    moe_tp_size: Option<u32>,
    moe_ep_size: Option<u32>,
    cp_size: u32,
    nextn: u32,
    kv_block_size: Option<u32>,
    quant: [Option<String>; 5],
    attention_backend: Option<String>,
    systems_path: Option<PathBuf>,
    database_mode: Option<DatabaseMode>,
}

const QUANT_KEYWORDS: [&str; 5] =
    ["gemm_quant_mode", "moe_quant_mode", "kvcache_quant_mode", "fmha_quant_mode", "comm_quant_mode"];

impl AicEngineBuilder {
    /// A model (a Hugging Face id whose config ships with aic, e.g. `"Qwen/Qwen3-32B"`, or a
    /// local folder or `config.json` path) on a system (e.g. `"h200_sxm"`) and backend, with
    /// no parallelism.
    pub fn new(model: impl Into<String>, system: impl Into<String>, backend: BackendKind) -> Self {
        AicEngineBuilder {
            model: model.into(),
            system: system.into(),
            backend,
            backend_version: None,
            tp_size: 1,
            pp_size: 1,
            attention_dp_size: 1,
            moe_tp_size: None,
            moe_ep_size: None,
            cp_size: 1,
            nextn: 0,
            kv_block_size: None,
            quant: Default::default(),
            attention_backend: None,
            systems_path: None,
            database_mode: None,
        }
    }

    /// `"current"` (the default), `"previous"`, `"next"` or a literal version folder name.
    pub fn backend_version(mut self, version: impl Into<String>) -> Self {
        self.backend_version = Some(version.into());
        self
    }

    /// Tensor-parallel size (default 1).
    pub fn tp_size(mut self, size: u32) -> Self {
        self.tp_size = size;
        self
    }

    /// Pipeline-parallel size (default 1).
    pub fn pp_size(mut self, size: u32) -> Self {
        self.pp_size = size;
        self
    }

    /// Attention data-parallel size (default 1).
    pub fn attention_dp_size(mut self, size: u32) -> Self {
        self.attention_dp_size = size;
        self
    }

    /// MoE tensor- and expert-parallel sizes (MoE models; default: derived from the others).
    pub fn moe_parallelism(mut self, moe_tp_size: u32, moe_ep_size: u32) -> Self {
        self.moe_tp_size = Some(moe_tp_size);
        self.moe_ep_size = Some(moe_ep_size);
        self
    }

    /// Context-parallel size (default 1): splits each prompt's tokens over `size` GPUs
    /// (spec 43; SGLang only, with tensor and attention-data parallelism 1; a MoE model also
    /// needs `moe_tp_size * moe_ep_size == size`).
    pub fn cp_size(mut self, size: u32) -> Self {
        self.cp_size = size;
        self
    }

    /// MTP draft depth (default 0).
    pub fn nextn(mut self, nextn: u32) -> Self {
        self.nextn = nextn;
        self
    }

    /// KV-cache block size in tokens (default: the backend's).
    pub fn kv_block_size(mut self, tokens: u32) -> Self {
        self.kv_block_size = Some(tokens);
        self
    }

    /// GEMM quant mode, e.g. `"fp8"` (default: from the model's config).
    pub fn gemm_quant_mode(mut self, mode: impl Into<String>) -> Self {
        self.quant[0] = Some(mode.into());
        self
    }

    /// MoE quant mode (default: from the model's config).
    pub fn moe_quant_mode(mut self, mode: impl Into<String>) -> Self {
        self.quant[1] = Some(mode.into());
        self
    }

    /// KV-cache quant mode (default: from the model's config).
    pub fn kvcache_quant_mode(mut self, mode: impl Into<String>) -> Self {
        self.quant[2] = Some(mode.into());
        self
    }

    /// Attention (FMHA) quant mode (default: from the model's config).
    pub fn fmha_quant_mode(mut self, mode: impl Into<String>) -> Self {
        self.quant[3] = Some(mode.into());
        self
    }

    /// Communication quant mode (default: from the model's config).
    pub fn comm_quant_mode(mut self, mode: impl Into<String>) -> Self {
        self.quant[4] = Some(mode.into());
        self
    }

    /// Attention kernel override (sglang / vllm).
    pub fn attention_backend(mut self, name: impl Into<String>) -> Self {
        self.attention_backend = Some(name.into());
        self
    }

    /// The systems folder (system YAMLs and perf data) to compile against and load from
    /// (default: `AIC_SYSTEMS_PATH`, else the data shipped with the Python package).
    pub fn systems_path(mut self, path: impl AsRef<Path>) -> Self {
        self.systems_path = Some(path.as_ref().to_path_buf());
        self
    }

    /// Perf-database mode (default [`DatabaseMode::Silicon`]).
    pub fn database_mode(mut self, mode: DatabaseMode) -> Self {
        self.database_mode = Some(mode);
        self
    }

    /// Compiles the spec with `aic.compile_engine` (binary wire form) in the embedded
    /// interpreter, starting it on first use, and loads it with [`Engine::from_spec_bytes`].
    /// The perf data is read from the systems folder the compile used.
    ///
    /// Errors: a Python exception becomes an [`AicError`] whose text names the exception class
    /// and carries its message: `ValueError` (every invalid compile input) and anything else
    /// the front end raises map to [`crate::ErrorClass::Value`], the native module's
    /// `PerfDataNotAvailableError` / `EmpiricalNotImplementedError` / `MissingSystemFlopsError`
    /// to their own classes. A missing `aic` package is a `Value`-class error that says how to
    /// make it importable.
    pub fn build(&self) -> Result<Engine> {
        let (spec, systems_root) = Python::attach(|py| self.compile(py))?;
        Engine::from_spec_bytes(&spec, Some(&systems_root))
    }

    /// Runs the front end: the spec bytes and the systems folder it resolved.
    fn compile(&self, py: Python<'_>) -> Result<(Vec<u8>, PathBuf)> {
        let aic = import_aic(py)?;
        let call = || -> PyResult<(Vec<u8>, PathBuf)> {
            let kwargs = PyDict::new(py);
            kwargs.set_item("tp_size", self.tp_size)?;
            kwargs.set_item("pp_size", self.pp_size)?;
            kwargs.set_item("attention_dp_size", self.attention_dp_size)?;
            kwargs.set_item("moe_tp_size", self.moe_tp_size)?;
            kwargs.set_item("moe_ep_size", self.moe_ep_size)?;
            kwargs.set_item("cp_size", self.cp_size)?;
            for (key, value) in QUANT_KEYWORDS.iter().zip(&self.quant) {
                kwargs.set_item(key, value.as_deref())?;
            }
            kwargs.set_item("nextn", self.nextn)?;
            kwargs.set_item("kv_block_size", self.kv_block_size)?;
            kwargs.set_item("systems_path", self.systems_path.as_deref())?;
            kwargs.set_item("database_mode", self.database_mode.map(database_mode_name))?;
            kwargs.set_item("attention_backend", self.attention_backend.as_deref())?;
            let args = PyTuple::new(
                py,
                [
                    Some(self.model.as_str()),
                    Some(self.system.as_str()),
                    Some(self.backend.as_str()),
                    self.backend_version.as_deref(),
                ],
            )?;
            let spec: Vec<u8> = aic.getattr("compile_engine")?.call(args, Some(&kwargs))?.extract()?;
            // The folder `compile_engine` resolved (explicit, AIC_SYSTEMS_PATH, packaged data,
            // source checkout), so the engine reads the very tables the compile checked.
            let root: PathBuf =
                py.import("aic.paths")?.getattr("systems_path")?.call1((self.systems_path.as_deref(),))?.extract()?;
            Ok((spec, root))
        };
        call().map_err(|e| python_error(py, "aic.compile_engine", &e))
    }
}

/// The version of the `aic` Python package the embedded interpreter imports, after checking
/// that its native module `aic._aic` (which the compile step needs) loads too. Starts the
/// interpreter on first use.
pub fn python_front_end_version() -> Result<String> {
    Python::attach(|py| {
        let aic = import_aic(py)?;
        py.import("aic._aic").map_err(|e| python_error(py, "import aic._aic", &e))?;
        aic.getattr("__version__")
            .and_then(|v| v.extract::<String>())
            .map_err(|e| python_error(py, "aic.__version__", &e))
    })
}

fn import_aic<'py>(py: Python<'py>) -> Result<Bound<'py, PyModule>> {
    activate_virtual_env(py).map_err(|e| python_error(py, "adding the VIRTUAL_ENV site-packages", &e))?;
    py.import("aic").map_err(|e| {
        let err = python_error(py, "import aic", &e);
        AicError::value(format!(
            "{err}; the embedded Python ({}) cannot import the aic package: install it into that \
             interpreter (`pip install aic`, or `pip install .` at the aic repository root) or put \
             the site-packages folder that holds it on PYTHONPATH, or set VIRTUAL_ENV to a venv \
             of the same Python version that has it",
            py.version().split_whitespace().next().unwrap_or("unknown version"),
        ))
    })
}

/// An embedded interpreter ignores an activated virtual environment; when `VIRTUAL_ENV` is set
/// and has a site-packages folder for the embedded Python's version, put it first on `sys.path`
/// (and process its `.pth` files, which editable installs rely on). Idempotent.
fn activate_virtual_env(py: Python<'_>) -> PyResult<()> {
    let Some(venv) = std::env::var_os("VIRTUAL_ENV").filter(|v| !v.is_empty()) else {
        return Ok(());
    };
    let version = py.version_info();
    let venv = Path::new(&venv);
    let candidates = [
        venv.join("lib").join(format!("python{}.{}", version.major, version.minor)).join("site-packages"),
        venv.join("Lib").join("site-packages"),
    ];
    let Some(site_dir) = candidates.into_iter().find(|d| d.is_dir()) else {
        return Ok(());
    };
    // As `str`: the import system skips `sys.path` entries of other types (`pathlib.Path`).
    let site_dir = site_dir.to_string_lossy().into_owned();
    let sys_path = py.import("sys")?.getattr("path")?;
    if sys_path.contains(&site_dir)? {
        return Ok(());
    }
    sys_path.call_method1("insert", (0, &site_dir))?;
    py.import("site")?.call_method1("addsitedir", (&site_dir,))?;
    Ok(())
}

fn database_mode_name(mode: DatabaseMode) -> &'static str {
    match mode {
        DatabaseMode::Silicon => "SILICON",
        DatabaseMode::Hybrid => "HYBRID",
        DatabaseMode::Empirical => "EMPIRICAL",
        DatabaseMode::Sol => "SOL",
    }
}

/// A Python exception as an [`AicError`]: `"<what> raised <Class>: <message>"`, in the class
/// family of the exception (the native module's three classes keep theirs; everything else,
/// `ValueError` first of all, is a `Value`-class error).
fn python_error(py: Python<'_>, what: &str, err: &PyErr) -> AicError {
    let ty = err.get_type(py);
    let class = ty.fully_qualified_name().map(|n| n.to_string()).unwrap_or_else(|_| "<unknown exception>".to_string());
    let short = ty.name().map(|n| n.to_string()).unwrap_or_default();
    let message = err.value(py).str().map(|s| s.to_string()).unwrap_or_default();
    let text = format!("{what} raised {class}: {message}");
    match short.as_str() {
        "PerfDataNotAvailableError" => AicError::perf(text),
        "EmpiricalNotImplementedError" => AicError::EmpiricalNotImplemented(text),
        "MissingSystemFlopsError" => AicError::MissingSystemFlops(text),
        _ => AicError::value(text),
    }
}
