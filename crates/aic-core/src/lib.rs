//! aic-core: predicts LLM serving latency (prefill, decode, mixed steps, static runs,
//! per-op breakdowns) from measured GPU kernel tables, agreeing with aiconfigurator-core
//! 0.12.0 to float rounding. Pure Rust: Python is only needed to compile a spec.
//!
//! Data flows one way: `spec` (wire types) -> `data` (system files, parquet, sources, tables)
//! -> `lookup` (interpolation per table family) -> `ops` (one file per op family) ->
//! `engine` (step composition).
//!
//! Errors follow the same direction: `error` (`AicError`) is the bottom and imports no other
//! module; the layers above the engine define their own errors that wrap it
//! (`fpm::FpmError`, `serving::ServingError`). `tests/module_layering.rs` checks this.
//!
//! # From Rust
//!
//! Compile the engine spec ahead of time with the Python front end (once, outside the program):
//!
//! ```sh
//! aic-compile compile Qwen/Qwen3-32B --system h200_sxm --backend vllm --tp 2 --json \
//!     -o qwen3-32b_h200_vllm_tp2.json
//! ```
//!
//! then load it in Rust; no Python is involved from here on. An [`Engine`] is `Send + Sync`:
//! share one `Arc` between all simulator threads, directly or as a [`LatencyModel`].
//!
//! ```
//! # std::env::set_current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/examples/specs")).unwrap();
//! use std::path::Path;
//! use std::sync::Arc;
//!
//! use aic_core::{Engine, LatencyModel};
//!
//! fn main() -> aic_core::Result<()> {
//!     // Perf tables: the spec's systems_path, else this argument, else AIC_SYSTEMS_PATH.
//!     let engine = Engine::from_spec_file(Path::new("qwen3-32b_h200_vllm_tp2.json"), None)?;
//!     let model: Arc<dyn LatencyModel> = Arc::new(engine);
//!
//!     let ttft = model.prefill_ms(1, 4096, 0)?; // 1 request, 4096-token prompt
//!     let mixed = model.mixed_step_ms(2048, 32, 4096, 512, 0)?; // 2048-token chunk + 32 decodes
//!     let decode = model.decode_step_ms(64, 4096, 512)?; // 64 requests decode one token
//!     println!("prefill {ttft:.2} ms, mixed step {mixed:.2} ms, decode step {decode:.2} ms");
//!     Ok(())
//! }
//! ```
//!
//! With the cargo feature `embed-python`, `builder::AicEngineBuilder` runs the compile step
//! in an embedded interpreter instead (the `aic` Python package must be importable).

#[cfg(feature = "embed-python")]
pub mod builder;
pub mod data;
pub mod engine;
pub mod error;
mod fast_hash;
pub mod fpm;
pub mod lookup;
pub mod memory;
pub mod ops;
pub mod parallel;
pub mod serving;
pub mod spec;

pub use engine::{BatchKind, Engine, LatencyModel, OpResult, RunMode, Source, StaticResult, StaticRun};
pub use error::{AicError, ErrorClass, Result};
pub use spec::{Backend, DatabaseMode, EngineConfig, EngineSpec, Op};
