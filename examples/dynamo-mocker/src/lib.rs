//! Dynamo's mocker (`dynamo-mocker` 1.6.1) with aic's step latencies.
//!
//! `dynamo-mocker` takes an external timing provider as an `AisCallback`
//! (`dynamo_mocker::common::perf_model::{AisCallback, PerfModel::from_ais_callback}`); this
//! crate supplies one over a compiled aic engine and shows it in the mocker's offline replay
//! (`dynamo_mocker::replay::simulate_concurrency_requests`), next to the same workload through
//! [`aic_replay::Replay`] (aic behind aisimulate-core's `TimingModel` directly).
//!
//! * [`callback`]: [`AicAisCallback`], and how the mocker's arguments map onto aic's estimates;
//! * [`config`]: [`mocker_config`], the mocker's engine arguments for an aic deployment.
//!
//! The package stands outside the aic workspace (its dependency tree compiles a vendored
//! libzmq): build and check it with `scripts/run-mocker-example.sh`.

pub mod callback;
pub mod config;

pub use callback::{AicAisCallback, CallbackError, CallbackStats};
pub use config::mocker_config;
