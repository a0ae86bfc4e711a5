//! Errors of the forward-pass model (spec 42 §2, §5, §6). The FPM layer sits above the engine,
//! so its error wraps the engine's [`AicError`] (`FpmError::Core`), never the reverse; every
//! message is shown verbatim at the bindings (its own variants as Python `ValueError`, a
//! wrapped core error as that error's class).

use crate::error::{AicError, ErrorClass};

/// Result alias of the forward-pass model.
pub type Result<T, E = FpmError> = std::result::Result<T, E>;

/// A bad forward-pass-model input, a model the estimator cannot compile, or an error of the
/// engine underneath.
#[derive(Debug, Clone, thiserror::Error)]
pub enum FpmError {
    /// A rank's counters are inconsistent, or an iteration has no rank.
    #[error("invalid forward pass metrics: {0}")]
    InvalidMetrics(String),
    /// An FPM record with a `version` other than 1.
    #[error("unsupported schema version for ForwardPassMetrics: got {got}, expected {expected}")]
    SchemaVersion {
        /// The version the record carries.
        got: u32,
        /// The only version understood (1).
        expected: u32,
    },
    /// The FPM text is not JSON.
    #[error("invalid FPM JSON: {0}")]
    Json(String),
    /// The FPM JSON does not have the FPM shape (wrong types, negative counts, ...).
    #[error("invalid FPM payload: {0}")]
    Payload(String),
    /// The tuning input is not a JSON array of arrays of FPM records.
    #[error("invalid tuning iterations JSON: {0}")]
    TuningJson(String),
    /// The options text is not a JSON options object.
    #[error("invalid options JSON: {0}")]
    OptionsJson(String),
    /// The engine config text is not a valid EngineConfig object.
    #[error("invalid engine config JSON: {0}")]
    ConfigJson(String),
    /// The model could not be compiled into an engine (fallback-safe).
    #[error("unsupported model for Rust core estimator: {0}")]
    UnsupportedModel(String),
    /// The engine, its spec or its data failed underneath the model (shown as is).
    #[error(transparent)]
    Core(#[from] AicError),
}

impl FpmError {
    /// Which exception family this error maps to: a wrapped core error keeps its own,
    /// the FPM layer's own errors are invalid input ([`ErrorClass::Value`]).
    pub fn class(&self) -> ErrorClass {
        match self {
            FpmError::Core(e) => e.class(),
            FpmError::InvalidMetrics(_)
            | FpmError::SchemaVersion { .. }
            | FpmError::Json(_)
            | FpmError::Payload(_)
            | FpmError::TuningJson(_)
            | FpmError::OptionsJson(_)
            | FpmError::ConfigJson(_)
            | FpmError::UnsupportedModel(_) => ErrorClass::Value,
        }
    }
}
