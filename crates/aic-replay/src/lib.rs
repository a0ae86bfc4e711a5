//! aic inside a cluster simulator: aic's step latencies as the timing model of
//! [aisimulate-core](https://crates.io/crates/aisimulate-core)'s deterministic replay engine, and
//! replayed serving estimates (TTFT, TPOT, ITL and end-to-end percentiles, throughput per GPU
//! and per user, prefix-cache reuse, KV usage, energy per token) for a workload or a request
//! trace.
//!
//! This crate exists apart from `aic-core` so that the estimator stays free of the simulator's
//! dependency tree: only users of the replay build aisimulate-core (pinned to `=0.13.0`, whose
//! `TimingModel` trait and replay API it implements and drives).
//!
//! * [`timing`]: [`AicTimingModel`], the `TimingModel` over a compiled [`aic_core::Engine`]
//!   (how each argument maps to aic's estimates is stated there);
//! * `evidence` (private): aic's per-op latency and energy as the replay's phase evidence;
//! * [`config`]: from a compiled spec to a role's scheduler model, limits and KV capacity (aic's
//!   memory model);
//! * [`workload`]: generated workloads and Mooncake traces;
//! * [`run`]: [`Replay`], aggregated or disaggregated, end to end;
//! * [`report`]: [`ReplayReport`], JSON and a text table;
//! * [`request`]: the JSON entry point [`run_json`] for bindings;
//! * [`error`]: typed errors ([`ReplayError`]).
//!
//! While a replay runs, aisimulate-core 0.13.0 draws its own progress bar (requests completed)
//! on standard error when that is a terminal; its public API has no switch for it.
//!
//! ```no_run
//! use std::sync::Arc;
//! use aic_replay::{Arrival, Lengths, Replay, Role, RoleBuilder, Workload};
//!
//! let engine = aic_core::Engine::from_spec_file("qwen3-32b_h200_vllm_tp2.json".as_ref(), None)?;
//! let config: serde_json::Value = serde_json::from_str(&std::fs::read_to_string("config.json")?)?;
//! let facts = aic_core::memory::ModelFacts::from_hf_config(&config, aic_core::memory::ModelFamily::Llama)?;
//! let role = RoleBuilder::new(Role::Aggregated, Arc::new(engine)).facts(facts).build()?;
//! let workload = Workload::Generated {
//!     requests: 256,
//!     arrival: Arrival::ClosedLoop { concurrency: 32 },
//!     isl: Lengths::Fixed(2048),
//!     osl: Lengths::Fixed(256),
//!     seed: 0,
//! };
//! let outcome = Replay::aggregated(role, 1, workload).run()?;
//! print!("{}", outcome.report.to_table());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub mod config;
pub mod error;
mod evidence;
pub mod report;
pub mod request;
pub mod run;
pub mod timing;
pub mod workload;

pub use config::{KvOverrides, Role, RoleBuilder, RoleSetup, SchedulerOverrides};
pub use error::{ReplayError, Result};
pub use report::ReplayReport;
pub use request::{run_json, EngineRequest, ModeRequest, ReplayRequest, SpecSource};
pub use run::{Deployment, Replay, ReplayOptions, ReplayOutcome, RoleTimingStats, RunStats, TimingSource};
pub use timing::{AicTimingModel, StepCalibration, TimingCall, TimingStats};
pub use workload::{Arrival, Distribution, Lengths, Workload};
