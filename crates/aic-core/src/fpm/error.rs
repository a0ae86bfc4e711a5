//! Error messages of the forward-pass model (spec 42 §2, §5, §6); wrapped by
//! [`crate::AicError::Fpm`] and shown verbatim (Python `ValueError`).

/// A bad forward-pass-model input, or a model the estimator cannot compile.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
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
}
