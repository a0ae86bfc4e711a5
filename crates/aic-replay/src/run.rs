//! [`Replay`]: one deployment (aggregated, or disaggregated prefill and decode roles with their
//! own engines and worker counts) serving one workload through aisimulate-core's replay engine
//! with aic's step latencies.
//!
//! It exists to own the composition: lower the workload, check that every request fits the KV
//! capacity of the roles it visits, build aisimulate's spec and engine factory with one
//! [`AicTimingModel`] per role, attach a telemetry observer (KV usage and the queue on the
//! virtual clock), run, and assemble the [`ReplayReport`].
//!
//! Replays are deterministic: request ids are ordinal (aisimulate's canonical determinism), the
//! workload is seeded, aisimulate's scheduler loop is single-threaded and aic's estimates are pure
//! functions of their arguments, so the same [`Replay`] gives the same report bit for bit,
//! whatever the thread count of the process.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use aisimulate_core::engine::{TimingModel, WorkerType};
use aisimulate_core::replay::{
    ReplayCaptureOptions, ReplayDeterminism, ReplayEngineConfig, ReplayEngineFactory, ReplayRoleConfig,
    ReplaySpec, ReplayTelemetryObserver, ReplayTelemetrySnapshot, ReplayTopology, Replayer, WorkerPoolSpec,
    CURRENT_REPLAY_SPEC_VERSION,
};
use serde::{Deserialize, Serialize};

use crate::config::{Role, RoleSetup};
use crate::error::{ReplayError, Result};
use crate::report::{build_report, ReplayReport, ReportInputs, RoleSummary};
use crate::timing::{AicTimingModel, TimingCall, TimingStats};
use crate::workload::{LoweredWorkload, Workload};

/// Default telemetry cadence on the virtual clock, ms.
pub const DEFAULT_SAMPLE_INTERVAL_MS: f64 = 100.0;

/// Which latencies the schedulers get.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TimingSource {
    /// aic's estimates from the role's engine.
    #[default]
    Aic,
    /// The same estimates without the memo: every call asks the engine (for measuring the memo).
    AicNoMemo,
    /// aisimulate-core's built-in polynomial model (for comparison; no power figures).
    Polynomial,
}

/// Knobs of a replay that are not the deployment or the workload.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ReplayOptions {
    /// Telemetry cadence on the virtual clock (KV usage, timeline), ms.
    pub sample_interval_ms: f64,
    /// Keep the queue and KV occupancy over time in the report.
    pub timeline: bool,
    /// Keep every request's latencies in the report.
    pub per_request: bool,
    /// Keep every timing call of the replay in the outcome (not in the JSON).
    pub record_timing_calls: bool,
    /// Stop the simulation at this virtual time, ms (unfinished requests stay unfinished).
    pub max_sim_time_ms: Option<f64>,
    /// Which latencies the schedulers get.
    pub timing: TimingSource,
    /// Per-request time outside the GPU passes (HTTP, tokenisation, and in a calibrated replay
    /// whatever else the measured deployments spend before the first token), ms: added to
    /// every request's TTFT and end-to-end latency in the report. It does not delay the
    /// simulated schedule. `None`: 0, or the calibration group's `ttft_overhead_ms` in a
    /// calibrated request ([`crate::request::ReplayRequest::calibration`]).
    pub request_overhead_ms: Option<f64>,
    /// Requests left out of the latency figures (TTFT, TPOT, E2E): the first this many by
    /// arrival, as a benchmark's warm-up requests are (a closed loop's first wave arrives at
    /// once and queues for prefill). Needs the per-request records, which the simulator keeps
    /// for every completed request. 0: every request counts.
    pub warmup_requests: usize,
}

impl Default for ReplayOptions {
    fn default() -> Self {
        ReplayOptions {
            sample_interval_ms: DEFAULT_SAMPLE_INTERVAL_MS,
            timeline: false,
            per_request: false,
            record_timing_calls: false,
            max_sim_time_ms: None,
            timing: TimingSource::Aic,
            request_overhead_ms: None,
            warmup_requests: 0,
        }
    }
}

/// The workers of a replay.
#[derive(Debug, Clone)]
// Built once per replay; the size difference of the variants costs nothing.
#[allow(clippy::large_enum_variant)]
pub enum Deployment {
    /// Every worker prefills and decodes.
    Aggregated {
        /// The workers' configuration.
        role: RoleSetup,
        /// How many workers.
        workers: usize,
    },
    /// Prefill workers hand the KV cache over to decode workers.
    Disaggregated {
        /// Prefill workers' configuration.
        prefill: RoleSetup,
        /// How many prefill workers.
        prefill_workers: usize,
        /// Decode workers' configuration.
        decode: RoleSetup,
        /// How many decode workers.
        decode_workers: usize,
        /// KV transfer time per handoff, ms.
        handoff_latency_ms: f64,
    },
}

/// Wall-clock figures of one run (not deterministic, so not in the report).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunStats {
    /// Wall time of the whole run (lowering, simulation, report), ms.
    pub wall_ms: f64,
    /// Wall time inside aisimulate's replay, ms.
    pub simulate_ms: f64,
    /// Timing-model counters per role (none with the polynomial model).
    pub timing: Vec<RoleTimingStats>,
}

/// One role's timing-model counters.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct RoleTimingStats {
    /// `agg`, `prefill` or `decode`.
    pub role: &'static str,
    /// The counters.
    #[serde(flatten)]
    pub stats: TimingStats,
}

/// What a run returns.
#[derive(Debug, Clone)]
pub struct ReplayOutcome {
    /// The figures.
    pub report: ReplayReport,
    /// Wall-clock figures.
    pub stats: RunStats,
    /// Every timing call per role, in call order (with `record_timing_calls`).
    pub timing_calls: Vec<(Role, Vec<TimingCall>)>,
}

/// One deployment serving one workload.
#[derive(Debug, Clone)]
pub struct Replay {
    /// The workers.
    pub deployment: Deployment,
    /// The requests.
    pub workload: Workload,
    /// Other knobs.
    pub options: ReplayOptions,
}

/// Collects telemetry samples for the report.
struct Samples(Arc<Mutex<Vec<ReplayTelemetrySnapshot>>>);

impl ReplayTelemetryObserver for Samples {
    fn on_sample(&mut self, snapshot: ReplayTelemetrySnapshot) -> anyhow::Result<()> {
        self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push(snapshot);
        Ok(())
    }
}

fn role_config(setup: &RoleSetup) -> ReplayRoleConfig {
    ReplayRoleConfig {
        dp_size: setup.dp_size,
        tensor_parallel_size: setup.gpus_per_rank,
        prefill_context_parallel_size: 1,
        num_gpu_blocks_is_explicit: Some(setup.kv.source == "explicit"),
        rank: setup.rank.clone(),
    }
}

impl Replay {
    /// An aggregated deployment of `workers` workers.
    pub fn aggregated(role: RoleSetup, workers: usize, workload: Workload) -> Self {
        Replay { deployment: Deployment::Aggregated { role, workers }, workload, options: ReplayOptions::default() }
    }

    /// A disaggregated deployment.
    pub fn disaggregated(
        prefill: RoleSetup,
        prefill_workers: usize,
        decode: RoleSetup,
        decode_workers: usize,
        workload: Workload,
    ) -> Self {
        Replay {
            deployment: Deployment::Disaggregated {
                prefill,
                prefill_workers,
                decode,
                decode_workers,
                handoff_latency_ms: 0.0,
            },
            workload,
            options: ReplayOptions::default(),
        }
    }

    /// Replaces the options.
    pub fn with_options(mut self, options: ReplayOptions) -> Self {
        self.options = options;
        self
    }

    /// The roles with their worker counts, in report order.
    fn roles(&self) -> Vec<(&RoleSetup, usize)> {
        match &self.deployment {
            Deployment::Aggregated { role, workers } => vec![(role, *workers)],
            Deployment::Disaggregated { prefill, prefill_workers, decode, decode_workers, .. } => {
                vec![(prefill, *prefill_workers), (decode, *decode_workers)]
            }
        }
    }

    fn check_deployment(&self) -> Result<()> {
        for (setup, workers) in self.roles() {
            if workers == 0 {
                return Err(ReplayError::deployment(
                    format!("{}.workers", setup.role.as_str()),
                    "must be at least 1, got 0",
                ));
            }
        }
        if let Deployment::Disaggregated { prefill, decode, handoff_latency_ms, .. } = &self.deployment {
            if prefill.role != Role::Prefill || decode.role != Role::Decode {
                return Err(ReplayError::deployment(
                    "mode",
                    "a disaggregated replay needs a RoleSetup built for Role::Prefill and one for Role::Decode",
                ));
            }
            if prefill.rank.backend != decode.rank.backend || prefill.rank.block_size != decode.rank.block_size {
                return Err(ReplayError::deployment(
                    "mode",
                    "prefill and decode workers must share the backend and the KV block size to hand KV over",
                ));
            }
            if !(handoff_latency_ms.is_finite() && *handoff_latency_ms >= 0.0) {
                return Err(ReplayError::deployment(
                    "handoff_latency_ms",
                    format!("must be finite and ≥ 0, got {handoff_latency_ms}"),
                ));
            }
        } else if let Deployment::Aggregated { role, .. } = &self.deployment {
            if role.role != Role::Aggregated {
                return Err(ReplayError::deployment("mode", "an aggregated replay needs a RoleSetup built for Role::Aggregated"));
            }
        }
        let o = &self.options;
        if !(o.sample_interval_ms.is_finite() && o.sample_interval_ms > 0.0) {
            return Err(ReplayError::deployment(
                "options.sample_interval_ms",
                format!("must be finite and > 0, got {}", o.sample_interval_ms),
            ));
        }
        if let Some(ms) = o.request_overhead_ms.filter(|ms| !(ms.is_finite() && (0.0..=60_000.0).contains(ms))) {
            return Err(ReplayError::deployment(
                "options.request_overhead_ms",
                format!("must be a finite number of ms in [0, 60000], got {ms}"),
            ));
        }
        Ok(())
    }

    /// Every request must fit the KV cache (and, without chunking, the pass budget) of each
    /// role it visits.
    fn check_fits(&self, lowered: &LoweredWorkload) -> Result<()> {
        let n = lowered.requests.len();
        if self.options.warmup_requests > 0 && self.options.warmup_requests >= n {
            return Err(ReplayError::deployment(
                "options.warmup_requests",
                format!("{} warm-up requests leave none of the {n} requests to measure", self.options.warmup_requests),
            ));
        }
        for (setup, _) in self.roles() {
            let decodes = setup.role != Role::Prefill;
            let kv = &setup.kv;
            for r in &lowered.requests {
                let (tokens, what) = if decodes {
                    (r.input_tokens.saturating_add(r.output_tokens), "prompt + output")
                } else {
                    (r.input_tokens, "prompt")
                };
                if tokens > kv.capacity_tokens {
                    return Err(ReplayError::SequenceExceedsKvCapacity {
                        request: r.id.clone(),
                        tokens,
                        what,
                        role: setup.role.as_str(),
                        capacity_tokens: kv.capacity_tokens,
                        blocks: kv.num_gpu_blocks,
                        block_size: kv.block_size,
                    });
                }
                if setup.role != Role::Decode
                    && !setup.rank.enable_chunked_prefill
                    && r.input_tokens > setup.rank.max_num_batched_tokens
                {
                    return Err(ReplayError::workload(
                        format!("request {}", r.id),
                        format!(
                            "a {}-token prompt exceeds the {}-token pass budget and chunked prefill is off; \
                             turn chunked prefill on or raise max_num_batched_tokens",
                            r.input_tokens, setup.rank.max_num_batched_tokens
                        ),
                    ));
                }
            }
        }
        Ok(())
    }

    /// aisimulate-core's replay spec for this replay (requests, topology, engine configuration).
    pub fn simulator_spec(&self) -> Result<ReplaySpec> {
        self.check_deployment()?;
        let lowered = self.workload.lower()?;
        self.check_fits(&lowered)?;
        Ok(self.spec_for(lowered))
    }

    fn spec_for(&self, lowered: LoweredWorkload) -> ReplaySpec {
        let (topology, engine) = match &self.deployment {
            Deployment::Aggregated { role, workers } => {
                let r = role_config(role);
                let engine = ReplayEngineConfig {
                    dp_size: r.dp_size,
                    tensor_parallel_size: r.tensor_parallel_size,
                    prefill_context_parallel_size: 1,
                    num_gpu_blocks_is_explicit: r.num_gpu_blocks_is_explicit,
                    rank: r.rank,
                    ..ReplayEngineConfig::default()
                };
                (ReplayTopology::aggregated(*workers), engine)
            }
            Deployment::Disaggregated { prefill, prefill_workers, decode, decode_workers, handoff_latency_ms } => {
                let mut p = role_config(prefill);
                p.rank.worker_type = WorkerType::Prefill;
                let mut d = role_config(decode);
                d.rank.worker_type = WorkerType::Decode;
                let engine = ReplayEngineConfig {
                    dp_size: p.dp_size,
                    tensor_parallel_size: p.tensor_parallel_size,
                    prefill_context_parallel_size: 1,
                    num_gpu_blocks_is_explicit: p.num_gpu_blocks_is_explicit,
                    rank: p.rank.clone(),
                    prefill: Some(p),
                    decode: Some(d),
                    ..ReplayEngineConfig::default()
                };
                let pool = |n: usize| WorkerPoolSpec { initial_workers: n, startup_delay_ms: 0.0 };
                let topology = ReplayTopology::Disaggregated {
                    prefill: pool(*prefill_workers),
                    decode: pool(*decode_workers),
                    handoff_latency_ms: *handoff_latency_ms,
                };
                (topology, engine)
            }
        };
        ReplaySpec {
            version: CURRENT_REPLAY_SPEC_VERSION,
            topology,
            engine: serde_json::to_value(engine).expect("the engine configuration serialises"),
            adapters: Default::default(),
            max_sim_time_ms: self.options.max_sim_time_ms,
            max_in_flight: lowered.max_in_flight,
            // The warm-up needs every request's record to leave the first arrivals out.
            record_per_request: self.options.per_request || self.options.warmup_requests > 0,
            sla: Default::default(),
            requests: lowered.requests,
        }
    }

    /// Runs the replay.
    pub fn run(&self) -> Result<ReplayOutcome> {
        let started = Instant::now();
        let spec = self.simulator_spec()?;
        let roles = self.roles();
        let timing: Vec<Option<Arc<AicTimingModel>>> = roles
            .iter()
            .map(|(setup, _)| match self.options.timing {
                TimingSource::Polynomial => None,
                TimingSource::Aic | TimingSource::AicNoMemo => {
                    let engine = Arc::clone(&setup.engine);
                    let model = if self.options.record_timing_calls {
                        AicTimingModel::recording(engine)
                    } else {
                        AicTimingModel::new(engine)
                    }
                    .with_calibration(setup.calibration);
                    Some(Arc::new(if self.options.timing == TimingSource::AicNoMemo { model.without_memo() } else { model }))
                }
            })
            .collect();
        let as_dyn = |t: &Option<Arc<AicTimingModel>>| t.clone().map(|t| t as Arc<dyn TimingModel>);
        let factory = match (&self.deployment, timing.as_slice()) {
            (Deployment::Aggregated { .. }, [Some(t)]) => ReplayEngineFactory::with_timing_model(t.clone()),
            (Deployment::Disaggregated { .. }, [p, d]) => {
                ReplayEngineFactory::with_optional_role_timing_models(as_dyn(p), as_dyn(d))
            }
            _ => ReplayEngineFactory::new(),
        };
        let samples = Arc::new(Mutex::new(Vec::new()));
        let capture = ReplayCaptureOptions { determinism: ReplayDeterminism::CanonicalV1, ..Default::default() };
        let replayer = Replayer::new(spec, factory)?
            .with_capture_options(capture)
            .with_telemetry_observer(self.options.sample_interval_ms, Box::new(Samples(Arc::clone(&samples))))?;
        let simulate_start = Instant::now();
        let sim = replayer.run()?;
        let simulate_ms = simulate_start.elapsed().as_secs_f64() * 1e3;

        let samples = std::mem::take(&mut *samples.lock().unwrap_or_else(std::sync::PoisonError::into_inner));
        let summaries: Vec<RoleSummary> = roles.iter().map(|(s, n)| RoleSummary::new(s, *n)).collect();
        let evidence = roles
            .iter()
            .zip(&timing)
            .map(|((setup, _), t)| (t.as_ref().and_then(|t| t.evidence_summary()), setup.gpus_per_rank))
            .collect();
        let mode = match self.deployment {
            Deployment::Aggregated { .. } => "agg",
            Deployment::Disaggregated { .. } => "disagg",
        };
        let report = build_report(
            &sim,
            roles[0].0,
            ReportInputs {
                mode,
                roles: summaries,
                samples: &samples,
                evidence,
                keep_timeline: self.options.timeline,
                keep_per_request: self.options.per_request,
                request_overhead_ms: self.options.request_overhead_ms.unwrap_or(0.0),
                warmup_requests: self.options.warmup_requests,
            },
        );
        let timing_calls = roles
            .iter()
            .zip(&timing)
            .filter(|_| self.options.record_timing_calls)
            .filter_map(|((setup, _), t)| t.as_ref().map(|t| (setup.role, t.calls())))
            .collect();
        let stats = RunStats {
            wall_ms: started.elapsed().as_secs_f64() * 1e3,
            simulate_ms,
            timing: roles
                .iter()
                .zip(&timing)
                .filter_map(|((setup, _), t)| {
                    t.as_ref().map(|t| RoleTimingStats { role: setup.role.as_str(), stats: t.stats() })
                })
                .collect(),
        };
        Ok(ReplayOutcome { report, stats, timing_calls })
    }
}
