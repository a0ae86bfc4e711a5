//! aic-core: predicts LLM serving latency (prefill, decode, mixed steps, static runs,
//! per-op breakdowns) from measured GPU kernel tables, agreeing with aiconfigurator-core
//! 0.12.0 to float rounding. Pure Rust: Python is only needed to compile a spec.
//!
//! Data flows one way: `spec` (wire types) -> `data` (system files, parquet, sources, tables)
//! -> `lookup` (interpolation per table family) -> `ops` (one file per op family) ->
//! `engine` (step composition).

pub mod data;
pub mod engine;
pub mod error;
pub mod fpm;
pub mod lookup;
pub mod memory;
pub mod ops;
pub mod spec;

pub use engine::{Engine, OpResult, RunMode, Source, StaticResult, StaticRun};
pub use error::{AicError, ErrorClass, Result};
pub use spec::{Backend, DatabaseMode, EngineConfig, EngineSpec, Op};
