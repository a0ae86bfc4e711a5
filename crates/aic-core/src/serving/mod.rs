//! Serving-level estimates (spec 50): what a deployment delivers — TTFT, TPOT, throughput per
//! GPU and per user — in the reference's three `cli_estimate` modes (static, agg, disagg) and
//! its deployment sweep (`cli_default`: parallelism × batch × worker counts, Pareto front,
//! picks).
//!
//! Every number here is a closed form over two or three step-engine calls per worker (spec 50
//! §12), so this module holds no latency model of its own: it schedules engine calls, folds
//! their per-op lists, applies the reference's formulas in the reference's float order, and
//! keeps the reference's result rows (column order, int/float kinds, `round(3)`).
//!
//! * [`checks`] — the domain checks of the serving and sweep requests;
//! * [`numeric`] — Python float floor division and the two roundings the reference applies;
//! * [`row`] — ordered result rows;
//! * [`worker`] — a worker (engine + facts + system + labels) and the memory/OOM rules (§5);
//! * [`static_mode`], [`agg`], [`disagg`] — the three estimate modes (§2–§4, §6);
//! * [`request`] — the JSON request/response surface the bindings use;
//! * [`sweep`], [`pareto`] — the deployment sweep (§9);
//! * [`picks`], [`plan`] — picking an experiment (throughput or load-match) and planning over
//!   several experiments (`--backend auto`, experiment files, `recommend`; spec 51);
//! * [`calibrated`] — the calibrated estimate (parity plus fitted corrections, `ACCURACY.md`).
//!
//! Errors: every call returns [`Result`] with a [`ServingError`], which wraps the engine's
//! `AicError` (`ServingError::Core`); the core error type knows nothing of this layer.

pub mod agg;
pub mod checks;
pub mod disagg;
pub mod error;
pub mod numeric;
pub mod pareto;
pub mod picks;
pub mod plan;
pub mod request;
pub mod row;
pub mod static_mode;
pub mod sweep;
pub mod worker;
pub mod calibrated;
pub mod op_classes;

pub use error::{Result, ServingError};
pub use request::{estimate_json, EstimateRequest};
pub use row::{Row, Val};
pub use worker::{Worker, WorkerLabels};
pub use calibrated::{Calibration, CalibratedLatencyModel, StepCorrection};
