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
//! "kv": {...}}` (see [`crate::config::SchedulerOverrides`], [`crate::config::KvOverrides`]).
//! The answer is `{"report": REPORT, "stats": RUN_STATS, "table": TEXT}`: the report as JSON, the
//! wall-clock figures of the run, and the report as the text table of
//! [`crate::report::ReplayReport::to_table`] (so every binding prints the same table).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use aic_core::memory::ModelFacts;
use aic_core::Engine;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::config::{KvOverrides, Role, RoleBuilder, RoleSetup, SchedulerOverrides};
use crate::error::{ReplayError, Result};
use crate::run::{Deployment, Replay, ReplayOptions};
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
}

impl EngineRequest {
    fn setup(&self, role: Role, systems_path: Option<&Path>) -> Result<RoleSetup> {
        let engine = match &self.spec {
            SpecSource::Path(path) => Engine::from_spec_file(path, systems_path)?,
            SpecSource::Json(value) => {
                let bytes = serde_json::to_vec(value).map_err(|e| ReplayError::RequestJson(e.to_string()))?;
                Engine::from_spec_bytes(&bytes, systems_path)?
            }
        };
        let mut builder = RoleBuilder::new(role, Arc::new(engine)).scheduler(self.scheduler.clone()).kv(self.kv.clone());
        if let Some(facts) = &self.facts {
            builder = builder.facts(facts.clone());
        }
        builder.build()
    }
}

impl ReplayRequest {
    /// Builds the engines and the [`Replay`]. `systems_path` is where the perf tables live when
    /// a spec does not say (else `AIC_SYSTEMS_PATH`, else the packaged data).
    pub fn into_replay(self, systems_path: Option<&Path>) -> Result<Replay> {
        let deployment = match &self.mode {
            ModeRequest::Agg { engine, workers } => {
                Deployment::Aggregated { role: engine.setup(Role::Aggregated, systems_path)?, workers: *workers }
            }
            ModeRequest::Disagg { prefill, prefill_workers, decode, decode_workers, handoff_latency_ms } => {
                Deployment::Disaggregated {
                    prefill: prefill.setup(Role::Prefill, systems_path)?,
                    prefill_workers: *prefill_workers,
                    decode: decode.setup(Role::Decode, systems_path)?,
                    decode_workers: *decode_workers,
                    handoff_latency_ms: *handoff_latency_ms,
                }
            }
        };
        Ok(Replay { deployment, workload: self.workload, options: self.options })
    }
}

/// Runs the replay a request JSON describes and answers `{"report": ..., "stats": ..., "table":
/// ...}` as JSON.
pub fn run_json(request_json: &str, systems_path: Option<&Path>) -> Result<String> {
    let request: ReplayRequest =
        serde_json::from_str(request_json).map_err(|e| ReplayError::RequestJson(e.to_string()))?;
    let outcome = request.into_replay(systems_path)?.run()?;
    let table = outcome.report.to_table();
    let answer = serde_json::json!({"report": outcome.report, "stats": outcome.stats, "table": table});
    Ok(answer.to_string())
}
