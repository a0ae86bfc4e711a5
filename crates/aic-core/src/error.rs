//! Typed errors of the core. Every failure the data, lookup, op and engine layers can report is
//! one of these variants; the bindings map them onto Python exception classes (see `ErrorClass`).
//!
//! This module is the bottom of the crate and imports no other crate module: the layers above
//! the engine define their own errors that wrap this one (`fpm::FpmError`,
//! `serving::ServingError`), never the reverse, so the module graph has no cycle through here.

use std::path::PathBuf;

/// Result alias used throughout the core.
pub type Result<T, E = AicError> = std::result::Result<T, E>;

/// Everything that can go wrong while loading data, decoding a spec or estimating.
#[derive(Debug, Clone, thiserror::Error)]
pub enum AicError {
    /// A perf table, slice, key or anchor is missing (the reference's `PerfDataNotAvailableError`).
    #[error("perf database error: {0}")]
    PerfData(String),
    /// The empirical (utilisation transfer) estimate has no samples to work from.
    #[error("empirical estimation not implemented: {0}")]
    EmpiricalNotImplemented(String),
    /// A quant mode needs a `*_tc_flops` entry the system YAML does not define.
    #[error("missing system flops: {0}")]
    MissingSystemFlops(String),
    /// A bad argument or an inconsistent engine configuration.
    #[error("invalid engine config: {0}")]
    InvalidConfig(String),
    /// A serialized spec carries another schema version.
    #[error("unsupported schema version for EngineSpec: got {got}, expected {expected}")]
    SchemaVersion { got: u32, expected: u32 },
    /// A serialized spec could not be decoded.
    #[error("engine spec wire-format error: {0}")]
    WireFormat(String),
    /// A data file could not be read (missing, unreadable, corrupt, Git LFS pointer, bad schema).
    #[error("perf database error: {message} ({path})")]
    DataFile { path: PathBuf, message: String },
    /// A system description (YAML) or a versions file is missing or malformed.
    #[error("invalid system description: {0}")]
    System(String),
    /// An invalid argument whose message is shown as is (a `ValueError`): an unknown backend
    /// version slot, a KV-cache request the memory model rejects, ...
    #[error("{0}")]
    Value(String),
    /// An op whose SOL path publishes no (math, mem) split was given to the SOL decomposition
    /// entry point (spec 20 §0.7: WideEP MLA, MoeDispatch, Overlap, a Fallback that used its
    /// chain) and its SOL time is not zero.
    #[error(
        "no SOL decomposition for op \"{op}\" ({kind}, SOL time {sol_ms} ms): its SOL path \
         publishes no (math, mem) split; read its SOL time with evaluate_ops_json in SOL mode, \
         or leave it out of the op list"
    )]
    NoSolDecomposition {
        /// The op's name.
        op: String,
        /// What it is (`MoeDispatch`, `Overlap`, a `Fallback` answered by its chain).
        kind: &'static str,
        /// Its SOL-mode latency, ms.
        sol_ms: f64,
    },
    /// Strict provenance (spec 10 §8.6) rejected the perf data: a data dir whose
    /// `collection_meta.yaml` is missing, malformed or does not list a table, or a malformed
    /// `reuse.yaml`. Not a missing-data error, so no `Fallback` or HYBRID estimate hides it.
    #[error("perf data provenance error: {message} ({path})")]
    Provenance { path: PathBuf, message: String },
    /// One point of a batch call failed: its index and arguments, and why. Maps to the
    /// exception family of the underlying error.
    #[error("batch point {index} {point:?}: {source}")]
    BatchPoint { index: usize, point: [u32; 3], source: Box<AicError> },
}

/// The exception family an error belongs to at a language boundary.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorClass {
    /// Missing perf data or an unreadable data file.
    PerfDataNotAvailable,
    /// No empirical estimate possible.
    EmpiricalNotImplemented,
    /// A missing FLOPS entry (a `ValueError` subclass in Python).
    MissingSystemFlops,
    /// Invalid input or configuration (`ValueError`).
    Value,
}

impl AicError {
    /// Which exception family this error maps to.
    pub fn class(&self) -> ErrorClass {
        match self {
            AicError::PerfData(_) | AicError::DataFile { .. } => ErrorClass::PerfDataNotAvailable,
            AicError::EmpiricalNotImplemented(_) => ErrorClass::EmpiricalNotImplemented,
            AicError::MissingSystemFlops(_) => ErrorClass::MissingSystemFlops,
            AicError::InvalidConfig(_)
            | AicError::SchemaVersion { .. }
            | AicError::WireFormat(_)
            | AicError::System(_)
            | AicError::Value(_) => ErrorClass::Value,
            AicError::NoSolDecomposition { .. } => ErrorClass::Value,
            AicError::Provenance { .. } => ErrorClass::Value,
            AicError::BatchPoint { source, .. } => source.class(),
        }
    }

    /// True for the errors a `Fallback` op catches from its primary (missing data or file problems).
    pub fn is_perf_data_missing(&self) -> bool {
        matches!(self, AicError::PerfData(_) | AicError::DataFile { .. })
    }

    /// Shorthand for a perf-database miss.
    pub fn perf(msg: impl Into<String>) -> Self {
        AicError::PerfData(msg.into())
    }

    /// Shorthand for an invalid argument shown without a prefix.
    pub fn value(msg: impl Into<String>) -> Self {
        AicError::Value(msg.into())
    }

    /// Shorthand for an invalid argument or configuration.
    pub fn config(msg: impl Into<String>) -> Self {
        AicError::InvalidConfig(msg.into())
    }
}
