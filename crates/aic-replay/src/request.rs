//! The stable JSON entry point for bindings: a [`ReplayRequest`] (serde) in, the report JSON out.
//!
//! It exists so that Python (and any other binding) drives a replay through one string-in,
//! string-out function with no Rust types crossing, while Rust callers get the same request as a
//! typed value. Request JSON:
//!
//! ```json
//! {"mode": {"kind": "agg", "engine": {"spec": {"path": "qwen3.json"}, "facts": {...}}, "workers": 1},
//!  "workload": {"kind": "generated", "requests": 256, "arrival": {"closed_loop": {"concurrency": 32}},
//!               "isl": 2048, "osl": 256, "seed": 0},
//!  "options": {"timeline": false, "per_request": false}}
//! ```
//!
//! `mode` is `{"kind": "disagg", "prefill": ENGINE, "prefill_workers": N, "decode": ENGINE,
//! "decode_workers": M, "handoff_latency_ms": 0.0}` for a disaggregated deployment. An ENGINE is
//! `{"spec": {"path": FILE} | {"json": SPEC_OBJECT}, "facts": MODEL_FACTS, "scheduler": {...},
//! "kv": {...}, "calibration": {...}}` (see [`crate::config::SchedulerOverrides`],
//! [`crate::config::KvOverrides`], [`crate::timing::StepCalibration`]).
//! The answer is `{"report": REPORT, "stats": RUN_STATS, "table": TEXT}`: the report as JSON, the
//! wall-clock figures of the run, and the report as the text table of
//! [`crate::report::ReplayReport::to_table`] (so every binding prints the same table).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use aic_core::memory::ModelFacts;
use aic_core::serving::calibrated::{self, Calibration};
use aic_core::serving::ServingError;
use aic_core::spec::DatabaseMode;
use aic_core::Engine;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::config::{KvOverrides, Role, RoleBuilder, RoleSetup, SchedulerOverrides};
use crate::error::{ReplayError, Result};
use crate::run::{Deployment, Replay, ReplayOptions};
use crate::timing::StepCalibration;
use crate::workload::Workload;

/// Where a role's compiled spec comes from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum SpecSource {
    /// A spec file written by `aic-compile compile` (JSON or binary).
    Path(PathBuf),
    /// A spec as a JSON object.
    Json(Value),
}

/// One role's engine and its overrides.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EngineRequest {
    /// The compiled spec.
    pub spec: SpecSource,
    /// Model facts for aic's KV memory model (needed unless `kv.num_gpu_blocks` is given).
    #[serde(default)]
    pub facts: Option<ModelFacts>,
    /// Scheduler limits replacing the backend defaults.
    #[serde(default)]
    pub scheduler: SchedulerOverrides,
    /// KV settings replacing the memory-model defaults.
    #[serde(default)]
    pub kv: KvOverrides,
    /// Calibrated step times (default: the engine's own).
    #[serde(default)]
    pub calibration: Option<StepCalibration>,
}

fn one() -> usize {
    1
}

/// The deployment of a request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
// Built once per replay; the size difference of the variants costs nothing.
#[allow(clippy::large_enum_variant)]
pub enum ModeRequest {
    /// Aggregated workers.
    Agg {
        /// The workers' engine.
        engine: EngineRequest,
        /// How many workers.
        #[serde(default = "one")]
        workers: usize,
    },
    /// Disaggregated prefill and decode workers.
    Disagg {
        /// Prefill engine.
        prefill: EngineRequest,
        /// Prefill workers.
        #[serde(default = "one")]
        prefill_workers: usize,
        /// Decode engine.
        decode: EngineRequest,
        /// Decode workers.
        #[serde(default = "one")]
        decode_workers: usize,
        /// KV transfer time per handoff, ms.
        #[serde(default)]
        handoff_latency_ms: f64,
    },
}

/// A replay request, as JSON or as a typed value.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReplayRequest {
    /// The deployment.
    pub mode: ModeRequest,
    /// The requests.
    pub workload: Workload,
    /// Other knobs.
    #[serde(default)]
    pub options: ReplayOptions,
    /// Constants of aic's calibrated serving estimate (the `data/calibration/serving.json`
    /// layout): each role without its own `calibration` takes the step-level part of its
    /// `system/backend/mode` group (see [`group_calibration`]) and the replay adds the group's
    /// `ttft_overhead_ms` to every request (unless `options.request_overhead_ms` is set).
    #[serde(default)]
    pub calibration: Option<Value>,
}

/// The step-level part of a calibration group for a role's engine: prefill passes ×
/// `ttft_scale`, decode steps × `tpot_scale` + `tpot_overhead_ms`, each also × the HYBRID
/// factor when the engine prices in the HYBRID database mode; and the group's
/// `ttft_overhead_ms`. The closed form's `ttft_queue` is not used (the replay queues the
/// requests itself), nor are per-kernel-class scales (a timing call has no class split).
pub fn group_calibration(cal: &Calibration, engine: &Engine, mode: &str) -> (StepCalibration, f64) {
    let cfg = &engine.spec().engine;
    let (c, _) = cal.lookup(&cfg.system_name, cfg.backend.as_str(), mode);
    let (h_ttft, h_tpot) = match (&cal.hybrid, engine.database_mode()) {
        (Some(h), DatabaseMode::Hybrid) => (h.ttft_scale, h.tpot_scale),
        _ => (1.0, 1.0),
    };
    let step = StepCalibration {
        prefill_scale: c.ttft_scale * h_ttft,
        decode_scale: c.tpot_scale * h_tpot,
        decode_overhead_ms: c.tpot_overhead_ms,
    };
    (step, c.ttft_overhead_ms)
}

impl EngineRequest {
    fn setup(&self, role: Role, systems_path: Option<&Path>, group: Option<(&Calibration, &str)>) -> Result<(RoleSetup, f64)> {
        let engine = match &self.spec {
            SpecSource::Path(path) => Engine::from_spec_file(path, systems_path)?,
            SpecSource::Json(value) => {
                let bytes = serde_json::to_vec(value).map_err(|e| ReplayError::RequestJson(e.to_string()))?;
                Engine::from_spec_bytes(&bytes, systems_path)?
            }
        };
        let (from_group, overhead) = match group {
            Some((cal, mode)) => group_calibration(cal, &engine, mode),
            None => (StepCalibration::IDENTITY, 0.0),
        };
        let mut builder = RoleBuilder::new(role, Arc::new(engine))
            .scheduler(self.scheduler.clone())
            .kv(self.kv.clone())
            .calibration(self.calibration.unwrap_or(from_group));
        if let Some(facts) = &self.facts {
            builder = builder.facts(facts.clone());
        }
        Ok((builder.build()?, overhead))
    }
}

impl ReplayRequest {
    /// Builds the engines and the [`Replay`]. `systems_path` is where the perf tables live when
    /// a spec does not say (else `AIC_SYSTEMS_PATH`, else the packaged data).
    pub fn into_replay(self, systems_path: Option<&Path>) -> Result<Replay> {
        let cal = match &self.calibration {
            Some(value) => Some(calibrated::from_request(Some(value)).map_err(|e| match e {
                ServingError::Core(e) => ReplayError::Aic(e),
                other => ReplayError::deployment("calibration", other.to_string()),
            })?),
            None => None,
        };
        let mut options = self.options;
        let (deployment, overhead) = match &self.mode {
            ModeRequest::Agg { engine, workers } => {
                let (role, overhead) = engine.setup(Role::Aggregated, systems_path, cal.as_ref().map(|c| (c, "agg")))?;
                (Deployment::Aggregated { role, workers: *workers }, overhead)
            }
            ModeRequest::Disagg { prefill, prefill_workers, decode, decode_workers, handoff_latency_ms } => {
                let group = cal.as_ref().map(|c| (c, "disagg"));
                // The per-request overhead is the prefill role's group's (both roles share the
                // group: the system, backend and mode are the deployment's).
                let (prefill, overhead) = prefill.setup(Role::Prefill, systems_path, group)?;
                let (decode, _) = decode.setup(Role::Decode, systems_path, group)?;
                let deployment = Deployment::Disaggregated {
                    prefill,
                    prefill_workers: *prefill_workers,
                    decode,
                    decode_workers: *decode_workers,
                    handoff_latency_ms: *handoff_latency_ms,
                };
                (deployment, overhead)
            }
        };
        if cal.is_some() && options.request_overhead_ms.is_none() {
            options.request_overhead_ms = Some(overhead);
        }
        Ok(Replay { deployment, workload: self.workload, options })
    }
}

/// Runs the replay a request JSON describes and answers `{"report": ..., "stats": ..., "table":
/// ...}` as JSON.
pub fn run_json(request_json: &str, systems_path: Option<&Path>) -> Result<String> {
    let request: ReplayRequest =
        serde_json::from_str(request_json).map_err(|e| {
            ReplayError::RequestJson(aic_core::serving::request_json::describe::<ReplayRequest>(request_json, &e))
        })?;
    let outcome = request.into_replay(systems_path)?.run()?;
    let table = outcome.report.to_table();
    let answer = serde_json::json!({"report": outcome.report, "stats": outcome.stats, "table": table});
    Ok(answer.to_string())
}
