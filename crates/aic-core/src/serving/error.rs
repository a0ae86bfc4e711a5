//! Typed errors of the serving layer (spec 50 §1.2, §3.1, §4.3, §5.4, §9.3).

/// What the serving layer itself rejects (engine and compile errors keep their own types).
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
}

impl ServingError {
    /// The Python exception class the reference raises for this error.
    pub fn python_class(&self) -> &'static str {
        match self {
            ServingError::AggOutOfMemory { .. } | ServingError::DisaggOutOfMemory { .. } => "RuntimeError",
            ServingError::ZeroCtxTokens => "ZeroDivisionError",
            ServingError::BadArgument(_) => "ValueError",
            ServingError::NoFeasibleConfig => "NoFeasibleConfigError",
        }
    }
}
