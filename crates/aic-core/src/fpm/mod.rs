//! Forward-pass perf model (spec 42): turns the scheduler telemetry of one serving-engine
//! iteration (FPM v1, one record per attention-DP rank) into a predicted forward-pass time.
//!
//! It exists because a live simulator or scheduler sees aggregates (request counts, token and
//! KV sums), not the `(batch, isl, osl)` shapes the engine API takes: this module maps those
//! aggregates onto the compiled engine's op lists, learns per-bucket correction factors from
//! measured wall times (online, bounded, median-based), and falls back to a small regression
//! on the observed times when the model cannot be compiled at all.
//!
//! Layout: [`metrics`] (input, validation, features), [`options`], [`store`] (bucketed
//! samples), [`native`] (engine mapping), [`regression`] (fallback fits), [`config`] (engine
//! config → compile request), and [`ForwardPassPerfModel`] here tying them together.
//!
//! Errors: every call returns [`Result`] with an [`FpmError`], which wraps the engine's
//! `AicError` (`FpmError::Core`); the core error type knows nothing of this layer.

pub mod config;
mod error;
pub mod metrics;
pub mod native;
pub mod options;
pub mod regression;
pub mod store;
mod strict;

use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};

use serde::Serialize;

pub use config::{CompileRequest, FpmEngineConfig};
pub use error::{FpmError, Result};
pub use metrics::{
    ForwardPassMetrics, QueuedRequestMetrics, ScheduledRequestMetrics, WorkloadFeatures, WorkloadKind,
};
pub use native::{MixedRankBreakdown, NativeEstimator};
pub use options::FpmOptions;
pub use regression::RegressionFit;
pub use store::SampleStore;

use crate::engine::Engine;
use crate::error::AicError;

/// Where the estimates come from (`source` in the diagnostics).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum EstimateSource {
    /// The compiled engine, no correction bucket ready yet.
    Aic,
    /// The compiled engine with at least one ready correction bucket.
    AicWithCorrection,
    /// The regression fallback.
    FallbackRegression,
}

impl EstimateSource {
    /// The diagnostics name (`aic`, `aic_with_correction`, `fallback_regression`).
    pub fn as_str(self) -> &'static str {
        match self {
            EstimateSource::Aic => "aic",
            EstimateSource::AicWithCorrection => "aic_with_correction",
            EstimateSource::FallbackRegression => "fallback_regression",
        }
    }
}

/// Whether the model can answer (`readiness` in the diagnostics).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Readiness {
    /// Estimates are available.
    Ready,
    /// Regression without any fit yet.
    InsufficientData,
    /// Regression after the native estimator failed to build, without any fit yet.
    UnsupportedConfig,
    /// Part of the reference's enum; never produced.
    InvalidInput,
}

impl Readiness {
    /// The diagnostics name (`ready`, `insufficient_data`, `unsupported_config`, `invalid_input`).
    pub fn as_str(self) -> &'static str {
        match self {
            Readiness::Ready => "ready",
            Readiness::InsufficientData => "insufficient_data",
            Readiness::UnsupportedConfig => "unsupported_config",
            Readiness::InvalidInput => "invalid_input",
        }
    }
}

/// The diagnostics record (serialised by [`ForwardPassPerfModel::diagnostics`]).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FpmDiagnostics {
    /// Estimate source.
    pub source: EstimateSource,
    /// Readiness.
    pub readiness: Readiness,
    /// Samples retained over all workload kinds.
    pub retained_observations: usize,
    /// Non-empty buckets of the ready correction kinds (0 for regression).
    pub correction_ready_buckets: usize,
    /// Why the native estimator is unavailable (regression built by `best_available`).
    pub last_warning: Option<String>,
}

enum Mode {
    Native(NativeEstimator),
    Regression { last_warning: Option<String> },
}

struct State {
    stores: [SampleStore; 3],
    fits: [Option<RegressionFit>; 3],
}

/// The forward-pass perf model: native estimate with online correction, or regression
/// fallback. `Send + Sync`; tuning takes `&self` (the sample stores sit behind a mutex).
pub struct ForwardPassPerfModel {
    options: FpmOptions,
    mode: Mode,
    state: Mutex<State>,
}

impl std::fmt::Debug for ForwardPassPerfModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ForwardPassPerfModel")
            .field("options", &self.options)
            .field("diagnostics", &self.diagnostics_report())
            .finish()
    }
}

/// Whether a failure to build the native estimator lets `best_available` fall back to the
/// regression: compile failures, missing or unreadable data, system/version data problems.
pub fn is_fallback_safe(err: &FpmError) -> bool {
    matches!(
        err,
        FpmError::UnsupportedModel(_)
            | FpmError::Core(
                AicError::PerfData(_) | AicError::DataFile { .. } | AicError::System(_) | AicError::Value(_)
            )
    )
}

/// Prefix of the warning a `best_available` fallback carries.
pub const FALLBACK_WARNING_PREFIX: &str = "native forward-pass estimator unavailable; using fallback regression: ";

impl ForwardPassPerfModel {
    fn new(options: FpmOptions, mode: Mode) -> ForwardPassPerfModel {
        let native = matches!(mode, Mode::Native(_));
        let stores = WorkloadKind::ALL.map(|kind| {
            let per_axis = options.buckets_per_axis(kind.dim());
            if native {
                SampleStore::fixed(options.correction_axes(kind), per_axis, options.max_observations)
            } else {
                SampleStore::dynamic(kind.dim(), per_axis, options.max_observations)
            }
        });
        ForwardPassPerfModel { options, mode, state: Mutex::new(State { stores, fits: [None, None, None] }) }
    }

    /// A native model over an already built engine.
    pub fn from_engine(engine: Arc<Engine>, options_json: Option<&str>) -> Result<ForwardPassPerfModel> {
        let options = FpmOptions::from_json(options_json)?;
        Ok(Self::new(options, Mode::Native(NativeEstimator::new(engine))))
    }

    /// A native model compiled from an EngineConfig JSON (§5). `compile` runs the front end on
    /// the request and returns the spec (binary wire form or spec JSON bytes), or the failure
    /// as `"<exception name>: <message>"`, reported as `unsupported model for Rust core
    /// estimator: compile_engine: <that text>`.
    pub fn from_native<F>(config_json: &str, options_json: Option<&str>, compile: F) -> Result<ForwardPassPerfModel>
    where
        F: FnOnce(&CompileRequest) -> std::result::Result<Vec<u8>, String>,
    {
        let options = FpmOptions::from_json(options_json)?;
        let config = FpmEngineConfig::from_json(config_json)?;
        let request = config.compile_request();
        let spec = compile(&request).map_err(|msg| FpmError::UnsupportedModel(format!("compile_engine: {msg}")))?;
        let engine = Engine::from_spec_bytes(&spec, config.systems_path.as_deref().map(Path::new))?;
        Ok(Self::new(options, Mode::Native(NativeEstimator::new(Arc::new(engine)))))
    }

    /// [`Self::from_native`], or — when that fails with a fallback-safe error — a regression
    /// model whose `last_warning` explains why.
    pub fn best_available<F>(config_json: &str, options_json: Option<&str>, compile: F) -> Result<ForwardPassPerfModel>
    where
        F: FnOnce(&CompileRequest) -> std::result::Result<Vec<u8>, String>,
    {
        match Self::from_native(config_json, options_json, compile) {
            Ok(model) => Ok(model),
            Err(e) if is_fallback_safe(&e) => {
                let options = FpmOptions::from_json(options_json)?;
                let warning = format!("{FALLBACK_WARNING_PREFIX}{e}");
                Ok(Self::new(options, Mode::Regression { last_warning: Some(warning) }))
            }
            Err(e) => Err(e),
        }
    }

    /// A regression-only model (no engine).
    pub fn from_regression(options_json: Option<&str>) -> Result<ForwardPassPerfModel> {
        let options = FpmOptions::from_json(options_json)?;
        Ok(Self::new(options, Mode::Regression { last_warning: None }))
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The options in force.
    pub fn options(&self) -> &FpmOptions {
        &self.options
    }

    /// The native estimator (`None` for a regression model).
    pub fn native(&self) -> Option<&NativeEstimator> {
        match &self.mode {
            Mode::Native(n) => Some(n),
            Mode::Regression { .. } => None,
        }
    }

    /// Whether estimates come from a compiled engine.
    pub fn is_native(&self) -> bool {
        self.native().is_some()
    }

    /// The fallback warning (`None` unless built by `best_available` after a failure).
    pub fn last_warning(&self) -> Option<&str> {
        match &self.mode {
            Mode::Native(_) => None,
            Mode::Regression { last_warning } => last_warning.as_deref(),
        }
    }

    /// Predicted forward-pass time (ms) of one iteration given as JSON (one FPM object or an
    /// array of them); `None` when a regression model has no fit for the iteration's kind.
    pub fn estimate_forward_pass_time_ms(&self, fpm_json: &str) -> Result<Option<f64>> {
        let ranks = metrics::parse_iteration_json(fpm_json)?;
        self.estimate(&ranks)
    }

    /// [`Self::estimate_forward_pass_time_ms`] on parsed records.
    pub fn estimate(&self, ranks: &[ForwardPassMetrics]) -> Result<Option<f64>> {
        metrics::validate_iteration(ranks)?;
        let Some(features) = metrics::iteration_features(ranks) else {
            return Ok(Some(0.0));
        };
        match &self.mode {
            Mode::Native(est) => {
                let native = est.iteration_ms(ranks)?;
                Ok(Some(native * self.correction_factor(features.kind, &features.x)))
            }
            Mode::Regression { .. } => {
                let state = self.lock();
                Ok(state.fits[features.kind.index()].as_ref().map(|f| f.predict(&features.x).max(1e-6)))
            }
        }
    }

    /// Uncorrected native time (ms) of one iteration; `None` for a regression model.
    pub fn native_estimate(&self, ranks: &[ForwardPassMetrics]) -> Result<Option<f64>> {
        metrics::validate_iteration(ranks)?;
        match &self.mode {
            Mode::Native(est) => Ok(Some(est.iteration_ms(ranks)?)),
            Mode::Regression { .. } => Ok(None),
        }
    }

    /// The correction factor applied at `(kind, x)`: the bucket median when the kind is ready
    /// and `x` falls in a non-empty bucket, else 1.0 (always 1.0 for a regression model).
    pub fn correction_factor(&self, kind: WorkloadKind, x: &[f64]) -> f64 {
        if !self.is_native() {
            return 1.0;
        }
        let state = self.lock();
        let store = &state.stores[kind.index()];
        if store.total() < self.options.min_observations {
            return 1.0;
        }
        store.median_at(x).unwrap_or(1.0)
    }

    /// Learns from measured iterations given as JSON: an array of iterations, each an array
    /// of FPM objects. Stops at the first error; earlier updates stay.
    pub fn tune_with_fpms(&self, iterations_json: &str) -> Result<()> {
        let iterations = metrics::parse_iterations_json(iterations_json)?;
        self.tune(&iterations)
    }

    /// [`Self::tune_with_fpms`] on parsed iterations.
    pub fn tune(&self, iterations: &[Vec<ForwardPassMetrics>]) -> Result<()> {
        iterations.iter().try_for_each(|it| self.observe(it))
    }

    /// Learns from one measured iteration (skipped when empty or without a positive wall time).
    pub fn observe(&self, ranks: &[ForwardPassMetrics]) -> Result<()> {
        metrics::validate_iteration(ranks)?;
        let Some(features) = metrics::iteration_features(ranks) else { return Ok(()) };
        let Some(observed) = metrics::observed_latency_ms(ranks) else { return Ok(()) };
        let k = features.kind.index();
        match &self.mode {
            Mode::Native(est) => {
                let native = est.iteration_ms(ranks)?;
                if !(native.is_finite() && native > 0.0 && observed.is_finite() && observed > 0.0) {
                    return Ok(());
                }
                let c = self.options.clamp_factor(observed / native);
                self.lock().stores[k].add(&features.x, c);
            }
            Mode::Regression { .. } => {
                let mut state = self.lock();
                if state.stores[k].add(&features.x, observed) {
                    let fit = {
                        let samples = state.stores[k].samples();
                        let pairs: Vec<(&[f64], f64)> = samples.iter().map(|s| (s.x.as_slice(), s.y)).collect();
                        regression::fit_samples(&pairs, features.kind.dim(), self.options.min_observations)
                    };
                    state.fits[k] = fit;
                }
            }
        }
        Ok(())
    }

    fn ready_medians(&self) -> Vec<f64> {
        if !self.is_native() {
            return Vec::new();
        }
        let state = self.lock();
        state
            .stores
            .iter()
            .filter(|s| s.total() >= self.options.min_observations)
            .flat_map(SampleStore::bucket_medians)
            .collect()
    }

    /// Smallest bucket median over the ready correction kinds (`None`: none, or regression).
    pub fn min_correction_factor(&self) -> Option<f64> {
        self.ready_medians().into_iter().reduce(f64::min)
    }

    /// Largest bucket median over the ready correction kinds (`None`: none, or regression).
    pub fn max_correction_factor(&self) -> Option<f64> {
        self.ready_medians().into_iter().reduce(f64::max)
    }

    /// Mean bucket median over the ready correction kinds (`None`: none, or regression).
    pub fn avg_correction_factor(&self) -> Option<f64> {
        let m = self.ready_medians();
        if m.is_empty() {
            None
        } else {
            Some(m.iter().sum::<f64>() / m.len() as f64)
        }
    }

    /// The regression fit of a kind (`None`: no fit, or a native model).
    pub fn regression_fit(&self, kind: WorkloadKind) -> Option<RegressionFit> {
        self.lock().fits[kind.index()].clone()
    }

    /// Samples retained over all workload kinds.
    pub fn retained_observations(&self) -> usize {
        self.lock().stores.iter().map(SampleStore::total).sum()
    }

    /// The diagnostics record (§10).
    pub fn diagnostics_report(&self) -> FpmDiagnostics {
        let state = self.lock();
        let retained_observations = state.stores.iter().map(SampleStore::total).sum();
        match &self.mode {
            Mode::Native(_) => {
                let ready_buckets: usize = state
                    .stores
                    .iter()
                    .filter(|s| s.total() >= self.options.min_observations)
                    .map(SampleStore::bucket_len)
                    .sum();
                FpmDiagnostics {
                    source: if ready_buckets > 0 { EstimateSource::AicWithCorrection } else { EstimateSource::Aic },
                    readiness: Readiness::Ready,
                    retained_observations,
                    correction_ready_buckets: ready_buckets,
                    last_warning: None,
                }
            }
            Mode::Regression { last_warning } => {
                let readiness = if state.fits.iter().any(Option::is_some) {
                    Readiness::Ready
                } else if last_warning.is_some() {
                    Readiness::UnsupportedConfig
                } else {
                    Readiness::InsufficientData
                };
                FpmDiagnostics {
                    source: EstimateSource::FallbackRegression,
                    readiness,
                    retained_observations,
                    correction_ready_buckets: 0,
                    last_warning: last_warning.clone(),
                }
            }
        }
    }

    /// The diagnostics as compact JSON (`source`, `readiness`, `retained_observations`,
    /// `correction_ready_buckets`, `last_warning`).
    pub fn diagnostics(&self) -> String {
        serde_json::to_string(&self.diagnostics_report()).expect("diagnostics serialise to JSON")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn assert_send_sync<T: Send + Sync>() {}

    #[test]
    fn model_is_send_and_sync() {
        assert_send_sync::<ForwardPassPerfModel>();
    }

    #[test]
    fn diagnostic_names_match_their_json() {
        for s in [EstimateSource::Aic, EstimateSource::AicWithCorrection, EstimateSource::FallbackRegression] {
            assert_eq!(serde_json::to_value(s).unwrap(), s.as_str());
        }
        for r in [Readiness::Ready, Readiness::InsufficientData, Readiness::UnsupportedConfig, Readiness::InvalidInput] {
            assert_eq!(serde_json::to_value(r).unwrap(), r.as_str());
        }
    }

    #[test]
    fn bucket_index_and_median() {
        assert_eq!(store::bucket_index(1024.0, 0.0, 8192.0, 16), 2);
        assert_eq!(store::bucket_index(8192.0, 0.0, 8192.0, 16), 15);
        assert_eq!(store::bucket_index(5.0, 3.0, 3.0, 16), 0);
        assert_eq!(store::median([3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(store::median([4.0, 1.0, 2.0, 3.0]), Some(2.5));
        assert_eq!(store::median([0.0, -1.0, f64::NAN]), None);
    }

    #[test]
    fn gauss_jordan_solves_and_flags_singular() {
        let x = regression::gauss_jordan(vec![vec![2.0, 1.0], vec![1.0, 3.0]], vec![3.0, 5.0]).unwrap();
        assert!((x[0] - 0.8).abs() < 1e-15 && (x[1] - 1.4).abs() < 1e-15);
        assert!(regression::gauss_jordan(vec![vec![1.0, 2.0], vec![2.0, 4.0]], vec![1.0, 2.0]).is_none());
        // The ridge retry makes a rank-deficient normal system solvable.
        assert!(regression::solve_normal(vec![vec![1.0, 2.0], vec![2.0, 4.0]], vec![1.0, 2.0]).is_some());
    }
}
