//! Typed errors of a replay. Every failure says what is wrong and how to fix it; the bindings map
//! them onto exception classes with [`ReplayError::class`] (the core's own errors keep theirs).

use std::path::PathBuf;

use aic_core::{AicError, ErrorClass};

/// Result alias of this crate.
pub type Result<T, E = ReplayError> = std::result::Result<T, E>;

/// Everything that can go wrong while building or running a replay.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    /// aic itself failed: loading a spec or its perf tables, an estimate, the memory model.
    #[error(transparent)]
    Aic(#[from] AicError),
    /// The workload asks for something no replay can run (zero requests, `osl` 0, a bad rate).
    #[error("invalid workload: {field}: {message}")]
    InvalidWorkload {
        /// The request field at fault (`workload.requests`, `workload.osl`, ...).
        field: String,
        /// What is wrong and what to use instead.
        message: String,
    },
    /// A line of a Mooncake trace does not parse or holds an impossible request.
    #[error("trace {path} line {line}: field `{field}`: {message}")]
    TraceLine {
        /// The trace file.
        path: PathBuf,
        /// 1-based line number in the file.
        line: usize,
        /// The JSON key at fault (`-` when the line is not a JSON object at all).
        field: String,
        /// What is wrong.
        message: String,
    },
    /// The trace file cannot be read, or holds no request.
    #[error("trace {path}: {message}")]
    Trace {
        /// The trace file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// A request does not fit in one worker's KV cache, so no scheduler can ever finish it.
    #[error(
        "request {request} needs {tokens} KV tokens ({what}) but a {role} worker rank holds \
         {capacity_tokens} ({blocks} blocks of {block_size}); shorten the request, raise \
         `gpu_memory_fraction`, or use more GPUs per worker"
    )]
    SequenceExceedsKvCapacity {
        /// Request id (its index, or `line-N` of a trace).
        request: String,
        /// Tokens the request must hold at once.
        tokens: usize,
        /// `prompt` (prefill) or `prompt + output` (a worker that decodes).
        what: &'static str,
        /// Which worker role (`agg`, `prefill`, `decode`).
        role: &'static str,
        /// KV tokens one worker rank holds.
        capacity_tokens: usize,
        /// KV blocks of one worker rank.
        blocks: usize,
        /// Tokens per block.
        block_size: usize,
    },
    /// The deployment cannot be replayed as given (worker counts, parallelism, engine overrides).
    #[error("invalid deployment: {field}: {message}")]
    InvalidDeployment {
        /// The request field at fault (`mode.prefill.workers`, `engine.attention_dp_size`, ...).
        field: String,
        /// What is wrong and what to use instead.
        message: String,
    },
    /// The request JSON of [`crate::run_json`] does not decode.
    #[error("invalid replay request JSON: {0}")]
    RequestJson(String),
    /// aisimulate-core refused the replay or failed while running it.
    #[error("replay engine (aisimulate-core) failed: {0}")]
    Simulator(String),
}

impl ReplayError {
    /// The exception family of this error at a language boundary: aic's own errors keep their
    /// class (missing perf data stays `PerfDataNotAvailable`), everything else is a bad input
    /// (`Value`). A simulator failure whose cause is a missing perf table (aic timing called
    /// from inside the replay) is reported as `PerfDataNotAvailable` too.
    pub fn class(&self) -> ErrorClass {
        match self {
            ReplayError::Aic(e) => e.class(),
            ReplayError::Simulator(message) if message.contains("perf database error") => {
                ErrorClass::PerfDataNotAvailable
            }
            _ => ErrorClass::Value,
        }
    }

    pub(crate) fn workload(field: impl Into<String>, message: impl Into<String>) -> Self {
        ReplayError::InvalidWorkload { field: field.into(), message: message.into() }
    }

    pub(crate) fn deployment(field: impl Into<String>, message: impl Into<String>) -> Self {
        ReplayError::InvalidDeployment { field: field.into(), message: message.into() }
    }
}

impl From<aisimulate_core::replay::ReplayError> for ReplayError {
    fn from(e: aisimulate_core::replay::ReplayError) -> Self {
        ReplayError::Simulator(format!("{e:#}"))
    }
}
