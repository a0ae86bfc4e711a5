//! Typed errors of the serving layer (spec 50 §1.2, §3.1, §4.3, §5.4, §9.3). The serving layer
//! sits above the engine, so its error wraps the engine's [`AicError`] (`ServingError::Core`),
//! never the reverse.

use crate::error::{AicError, ErrorClass};

/// Result alias of the serving layer.
pub type Result<T, E = ServingError> = std::result::Result<T, E>;

/// What the serving layer rejects, or an error of the engine underneath (kept as is).
#[derive(Debug, Clone, thiserror::Error)]
pub enum ServingError {
    /// Agg: the model does not fit (weights + activations + KV of the batch ≥ GPU memory).
    #[error(
        "OOM: the model '{model}' does not fit in GPU memory on system '{system}' with the given \
         parallelism (tp={tp}, pp={pp}, dp={dp}). Try increasing tp_size/pp_size, using a \
         quantized model, or using a system with more VRAM per GPU."
    )]
    AggOutOfMemory {
        /// Model path.
        model: String,
        /// System name.
        system: String,
        /// Tensor parallel size.
        tp: u32,
        /// Pipeline parallel size.
        pp: u32,
        /// Attention data-parallel size.
        dp: u32,
    },
    /// Disagg: a worker does not fit, or its batch exceeds its KV-cache budget.
    #[error(
        "OOM: the model '{model}' does not fit in GPU memory on system '{system}' with the given \
         parallelism. Try increasing tp_size/pp_size, using a quantized model, or using a system \
         with more VRAM per GPU."
    )]
    DisaggOutOfMemory {
        /// Model path.
        model: String,
        /// System name.
        system: String,
    },
    /// Agg with `ctx_tokens = 0`: the schedule divides by the context-token budget.
    #[error("division by zero")]
    ZeroCtxTokens,
    /// A serving argument outside its domain (batch size 0, negative acceptance, ...).
    #[error("{0}")]
    BadArgument(String),
    /// Sweep: no configuration met the latency targets.
    #[error("No feasible configurations found for the given parameters.")]
    NoFeasibleConfig,
    /// The engine, its spec, its data or a bad argument failed underneath (shown as is).
    #[error(transparent)]
    Core(#[from] AicError),
}

impl ServingError {
    /// Which exception family this error maps to: a wrapped core error keeps its own, the
    /// serving layer's own errors are [`ErrorClass::Value`] (the bindings refine them with
    /// [`Self::python_class`]).
    pub fn class(&self) -> ErrorClass {
        match self {
            ServingError::Core(e) => e.class(),
            ServingError::AggOutOfMemory { .. }
            | ServingError::DisaggOutOfMemory { .. }
            | ServingError::ZeroCtxTokens
            | ServingError::BadArgument(_)
            | ServingError::NoFeasibleConfig => ErrorClass::Value,
        }
    }

    /// True for a wrapped perf-data miss (see [`AicError::is_perf_data_missing`]).
    pub fn is_perf_data_missing(&self) -> bool {
        matches!(self, ServingError::Core(e) if e.is_perf_data_missing())
    }

    /// The Python exception class the reference raises for this error (a wrapped core error:
    /// the class of its [`ErrorClass`]).
    pub fn python_class(&self) -> &'static str {
        match self {
            ServingError::Core(e) => match e.class() {
                ErrorClass::PerfDataNotAvailable => "PerfDataNotAvailableError",
                ErrorClass::EmpiricalNotImplemented => "EmpiricalNotImplementedError",
                ErrorClass::MissingSystemFlops => "MissingSystemFlopsError",
                ErrorClass::Value => "ValueError",
            },
            ServingError::AggOutOfMemory { .. } | ServingError::DisaggOutOfMemory { .. } => "RuntimeError",
            ServingError::ZeroCtxTokens => "ZeroDivisionError",
            ServingError::BadArgument(_) => "ValueError",
            ServingError::NoFeasibleConfig => "NoFeasibleConfigError",
        }
    }
}
