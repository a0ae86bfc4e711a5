//! [`ReplayReport`]: the serving figures of one replay (latency distributions, throughput per GPU
//! and per user, prefix-cache reuse, KV usage, power and energy per token), serialisable as JSON
//! and printable as a plain-text table.
//!
//! It exists to turn aisimulate-core's report (whose JSON carries dozens of simulator-internal
//! keys) into the figures a capacity planner reads, with aic's energy evidence attached. Every
//! number in it is a function of the virtual clock, so the same request gives the same report bit
//! for bit; wall-clock figures live in [`crate::run::RunStats`].

use std::fmt::Write as _;

use aisimulate_core::engine::{TimingEvidenceSummary, TimingPhaseEvidence};
use aisimulate_core::replay::{
    ReplayReport as SimReport, ReplayTelemetrySnapshot, TraceDistributionStats, POWER_DATA_COVERAGE_THRESHOLD,
};
use serde::Serialize;

use crate::config::{KvCapacity, RoleSetup};

/// Mean and percentiles of one latency, ms.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct LatencySummary {
    /// Requests (or intervals) measured.
    pub samples: usize,
    /// Mean.
    pub mean: f64,
    /// Median.
    pub p50: f64,
    /// 90th percentile.
    pub p90: f64,
    /// 99th percentile.
    pub p99: f64,
    /// Smallest.
    pub min: f64,
    /// Largest.
    pub max: f64,
}

impl LatencySummary {
    /// From aisimulate-core's streaming summary. Its mean, min and max are exact; its
    /// percentiles come from a quantile sketch with a small relative error, so they are clamped
    /// into `[min, max]` (where the true percentiles lie).
    fn from_sim(samples: usize, d: &TraceDistributionStats) -> Self {
        let clamp = |p: f64| if d.min_ms <= d.max_ms { p.clamp(d.min_ms, d.max_ms) } else { p };
        LatencySummary {
            samples,
            mean: d.mean_ms,
            p50: clamp(d.median_ms),
            p90: clamp(d.p90_ms),
            p99: clamp(d.p99_ms),
            min: d.min_ms,
            max: d.max_ms,
        }
    }

    /// Every figure moved by `ms` (a per-request constant added to each value).
    fn shifted(self, ms: f64) -> Self {
        if ms == 0.0 || self.samples == 0 {
            return self;
        }
        LatencySummary {
            mean: self.mean + ms,
            p50: self.p50 + ms,
            p90: self.p90 + ms,
            p99: self.p99 + ms,
            min: self.min + ms,
            max: self.max + ms,
            ..self
        }
    }

    /// Exact figures of per-request values (`None` when there are none): percentiles
    /// interpolate linearly between the closest ranks (numpy's default), so the same values give
    /// the same bits on every platform.
    fn exact(mut values: Vec<f64>) -> Option<Self> {
        if values.is_empty() {
            return None;
        }
        values.sort_by(f64::total_cmp);
        let n = values.len();
        let at = |q: f64| {
            let pos = q * (n - 1) as f64;
            let lo = pos.floor() as usize;
            let hi = pos.ceil() as usize;
            values[lo] + (values[hi] - values[lo]) * (pos - lo as f64)
        };
        Some(LatencySummary {
            samples: n,
            mean: values.iter().sum::<f64>() / n as f64,
            p50: at(0.50),
            p90: at(0.90),
            p99: at(0.99),
            min: values[0],
            max: values[n - 1],
        })
    }
}

/// Requests and tokens.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct RequestCounts {
    /// Requests that arrived.
    pub requests: usize,
    /// Requests that finished.
    pub completed: usize,
    /// Prompt tokens of all requests.
    pub input_tokens: usize,
    /// Output tokens generated.
    pub output_tokens: usize,
}

/// Throughput over the replay's simulated duration.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Throughput {
    /// GPUs of the deployment (all workers of all roles).
    pub gpus: u64,
    /// Requests per second.
    pub requests_per_s: f64,
    /// Output tokens per second.
    pub output_tokens_per_s: f64,
    /// Prompt plus output tokens per second.
    pub total_tokens_per_s: f64,
    /// Output tokens per second per GPU.
    pub output_tokens_per_s_per_gpu: f64,
    /// Prompt plus output tokens per second per GPU.
    pub total_tokens_per_s_per_gpu: f64,
    /// Mean over requests of one user's decode speed (1000 / inter-token latency), tokens/s.
    pub output_tokens_per_s_per_user: f64,
}

/// Prefix-cache reuse.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct PrefixCache {
    /// Share of prompt tokens served from the KV cache (all admissions).
    pub reused_ratio: f64,
    /// The same at each request's first admission (before any preemption).
    pub first_admission_reused_ratio: f64,
    /// Prompt tokens actually computed by prefill passes (recomputation included).
    pub computed_prefill_tokens: u64,
}

/// KV-cache occupancy sampled on the virtual clock.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct KvUsage {
    /// Samples taken.
    pub samples: usize,
    /// Highest occupancy of any rank, fraction of its blocks.
    pub peak: f64,
    /// Mean over samples of the mean occupancy of the ranks.
    pub mean: f64,
    /// Preemptions (vLLM, TRT-LLM) or retractions (SGLang) when the cache ran full.
    pub preemptions: u64,
}

/// One point of the queue and cache over time.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct TimelinePoint {
    /// Virtual time, ms.
    pub t_ms: f64,
    /// Requests running on the ranks.
    pub running: u64,
    /// Requests waiting: queued on ranks plus admitted but not yet placed.
    pub waiting: u64,
    /// Mean KV occupancy of the ranks.
    pub kv_usage: f64,
}

/// Modelled power and energy of the forward passes (aic's per-op energy evidence).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Power {
    /// Share of modelled pass time whose ops carry measured energy.
    pub coverage: f64,
    /// Mean power per GPU while running passes, W; withheld (null) below 90 % coverage.
    pub power_w_per_gpu: Option<f64>,
    /// Energy of all passes on all GPUs, J (idle time excluded); withheld below 90 % coverage.
    pub energy_j: Option<f64>,
    /// `energy_j` per output token.
    pub energy_per_output_token_j: Option<f64>,
    /// `energy_j` per prompt-plus-output token.
    pub energy_per_token_j: Option<f64>,
}

/// One role of the deployment as replayed.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RoleSummary {
    /// `agg`, `prefill` or `decode`.
    pub role: &'static str,
    /// The aic backend and the scheduler model that ran it.
    pub backend: String,
    /// Workers (engine replicas).
    pub workers: usize,
    /// GPUs of one worker.
    pub gpus_per_worker: u32,
    /// Attention-DP ranks of one worker.
    pub dp_size: u32,
    /// Concurrent sequences per rank.
    pub max_num_seqs: usize,
    /// Token budget of one pass.
    pub max_num_batched_tokens: usize,
    /// Whether long prompts were chunked.
    pub chunked_prefill: bool,
    /// Whether cached prefixes were reused.
    pub prefix_caching: bool,
    /// KV capacity of one rank.
    pub kv: KvCapacity,
}

impl RoleSummary {
    pub(crate) fn new(setup: &RoleSetup, workers: usize) -> Self {
        RoleSummary {
            role: setup.role.as_str(),
            backend: setup.engine.spec().engine.backend.as_str().to_string(),
            workers,
            gpus_per_worker: setup.gpus_per_worker(),
            dp_size: setup.dp_size,
            max_num_seqs: setup.rank.max_num_seqs,
            max_num_batched_tokens: setup.rank.max_num_batched_tokens,
            chunked_prefill: setup.rank.enable_chunked_prefill,
            prefix_caching: setup.rank.enable_prefix_caching,
            kv: setup.kv.clone(),
        }
    }

    fn gpus(&self) -> u64 {
        self.workers as u64 * u64::from(self.gpus_per_worker)
    }
}

/// One request's latencies (only with `per_request` on), for CDFs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RequestLatency {
    /// The request id (its index, or `line-N` of a trace).
    pub id: String,
    /// Arrival, ms of virtual time.
    pub arrival_ms: f64,
    /// Prompt tokens.
    pub input_tokens: usize,
    /// Output tokens generated.
    pub output_tokens: usize,
    /// Prompt tokens served from the prefix cache.
    pub reused_input_tokens: usize,
    /// Time to first token, ms.
    pub ttft_ms: Option<f64>,
    /// Mean inter-token latency, ms.
    pub itl_ms: Option<f64>,
    /// Arrival to last token, ms.
    pub e2e_ms: Option<f64>,
}

/// The figures of one replay.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ReplayReport {
    /// `agg` or `disagg`.
    pub mode: &'static str,
    /// The model of the (first) engine.
    pub model: String,
    /// The system of the (first) engine.
    pub system: String,
    /// The deployment's roles.
    pub roles: Vec<RoleSummary>,
    /// Requests and tokens.
    pub requests: RequestCounts,
    /// Simulated time from the first arrival to the last token, ms.
    pub duration_ms: f64,
    /// Requests left out of the TTFT / TPOT / E2E figures (the first by arrival; 0: none).
    pub warmup_requests: usize,
    /// Time to first token.
    pub ttft_ms: LatencySummary,
    /// Time per output token after the first, per request.
    pub tpot_ms: LatencySummary,
    /// Inter-token latency over all token gaps.
    pub itl_ms: LatencySummary,
    /// Arrival to last token.
    pub e2e_ms: LatencySummary,
    /// Throughput.
    pub throughput: Throughput,
    /// Prefix-cache reuse.
    pub prefix_cache: PrefixCache,
    /// KV occupancy (absent when no sample was taken).
    pub kv_usage: Option<KvUsage>,
    /// Power and energy (absent when no role reported evidence).
    pub power: Option<Power>,
    /// The queue and KV occupancy over time (only with `timeline` on).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub timeline: Vec<TimelinePoint>,
    /// Per-request latencies (only with `per_request` on).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub per_request: Vec<RequestLatency>,
}

/// What [`build_report`] reads besides the simulator's report.
pub(crate) struct ReportInputs<'a> {
    pub mode: &'static str,
    pub roles: Vec<RoleSummary>,
    pub samples: &'a [ReplayTelemetrySnapshot],
    /// Per role (parallel to `roles`): the timing evidence and the GPUs of one rank.
    pub evidence: Vec<(Option<TimingEvidenceSummary>, u32)>,
    pub keep_timeline: bool,
    pub keep_per_request: bool,
    /// Added to every request's TTFT and E2E (`ReplayOptions::request_overhead_ms`).
    pub request_overhead_ms: f64,
    /// The first requests by arrival left out of TTFT / TPOT / E2E
    /// (`ReplayOptions::warmup_requests`).
    pub warmup_requests: usize,
}

pub(crate) fn build_report(sim: &SimReport, first: &RoleSetup, inputs: ReportInputs<'_>) -> ReplayReport {
    let spec = &first.engine.spec().engine;
    let counts = &sim.request_counts;
    let t = &sim.throughput;
    let gpus: u64 = inputs.roles.iter().map(RoleSummary::gpus).sum();
    let per_gpu = |v: f64| if gpus > 0 { v / gpus as f64 } else { 0.0 };
    let l = &sim.latency;
    let requests = RequestCounts {
        requests: counts.num_requests,
        completed: counts.completed_requests,
        input_tokens: counts.total_input_tokens,
        output_tokens: counts.total_output_tokens,
    };
    let (kv_usage, timeline) = kv_and_timeline(inputs.samples, inputs.keep_timeline);
    let per_request = if inputs.keep_per_request {
        sim.per_request
            .iter()
            .map(|r| RequestLatency {
                id: r.request_id.clone().unwrap_or_else(|| r.uuid.clone()),
                arrival_ms: r.arrival_time_ms,
                input_tokens: r.input_length,
                output_tokens: r.output_length,
                reused_input_tokens: r.reused_input_tokens,
                ttft_ms: r.ttft_ms.map(|t| t + inputs.request_overhead_ms),
                itl_ms: r.itl_ms,
                e2e_ms: r.e2e_latency_ms.map(|t| t + inputs.request_overhead_ms),
            })
            .collect()
    } else {
        Vec::new()
    };
    ReplayReport {
        mode: inputs.mode,
        model: spec.model_name.clone(),
        system: spec.system_name.clone(),
        requests,
        duration_ms: t.duration_ms,
        warmup_requests: inputs.warmup_requests,
        ttft_ms: per_request_exact(sim, inputs.warmup_requests, |r| r.ttft_ms)
            .unwrap_or_else(|| LatencySummary::from_sim(l.num_ttft_samples, &l.ttft))
            .shifted(inputs.request_overhead_ms),
        tpot_ms: per_request_exact(sim, inputs.warmup_requests, |r| r.itl_ms)
            .unwrap_or_else(|| LatencySummary::from_sim(l.num_tpot_samples, &l.tpot)),
        itl_ms: LatencySummary::from_sim(l.num_tpot_samples, &l.itl.distribution),
        e2e_ms: per_request_exact(sim, inputs.warmup_requests, |r| r.e2e_latency_ms)
            .unwrap_or_else(|| LatencySummary::from_sim(l.num_e2e_latency_samples, &l.e2e))
            .shifted(inputs.request_overhead_ms),
        throughput: Throughput {
            gpus,
            requests_per_s: t.request_throughput_rps,
            output_tokens_per_s: t.output_throughput_tok_s,
            total_tokens_per_s: t.total_throughput_tok_s,
            output_tokens_per_s_per_gpu: per_gpu(t.output_throughput_tok_s),
            total_tokens_per_s_per_gpu: per_gpu(t.total_throughput_tok_s),
            output_tokens_per_s_per_user: l.output_token_throughput_per_user.mean_ms,
        },
        prefix_cache: PrefixCache {
            reused_ratio: sim.prefix_cache_reused_ratio,
            first_admission_reused_ratio: sim.first_admission_prefix_cache_reused_ratio,
            computed_prefill_tokens: sim.committed_prefill_tokens,
        },
        kv_usage,
        power: power(&inputs.evidence, &requests),
        roles: inputs.roles,
        timeline,
        per_request,
    }
}

/// Exact figures of one per-request latency when the simulator recorded every completed
/// request, else `None` (the caller falls back to the simulator's streaming summary). The
/// first `warmup` requests by arrival (ties in record order) are left out.
fn per_request_exact(
    sim: &SimReport,
    warmup: usize,
    value: impl Fn(&aisimulate_core::replay::PerRequestRecord) -> Option<f64>,
) -> Option<LatencySummary> {
    if sim.per_request.len() < sim.request_counts.completed_requests || sim.request_counts.completed_requests == 0 {
        return None;
    }
    if warmup == 0 {
        return LatencySummary::exact(sim.per_request.iter().filter_map(value).collect());
    }
    let mut order: Vec<&aisimulate_core::replay::PerRequestRecord> = sim.per_request.iter().collect();
    order.sort_by(|a, b| a.arrival_time_ms.partial_cmp(&b.arrival_time_ms).unwrap_or(std::cmp::Ordering::Equal));
    LatencySummary::exact(order.into_iter().skip(warmup).filter_map(value).collect())
}

fn kv_and_timeline(samples: &[ReplayTelemetrySnapshot], keep: bool) -> (Option<KvUsage>, Vec<TimelinePoint>) {
    let mut timeline = Vec::new();
    let (mut peak, mut sum, mut n, mut preemptions) = (0.0f64, 0.0, 0usize, 0u64);
    for s in samples {
        let ranks: Vec<_> = s.prefill_scheduler_metrics.iter().chain(&s.decode_scheduler_metrics).collect();
        preemptions += s.prefill_interval_metrics.preemptions + s.decode_interval_metrics.preemptions;
        if ranks.is_empty() {
            continue;
        }
        let usage: f64 = ranks.iter().map(|r| r.active_cache_usage).sum::<f64>() / ranks.len() as f64;
        peak = ranks.iter().map(|r| r.active_cache_usage).fold(peak, f64::max);
        sum += usage;
        n += 1;
        if keep {
            let pending = (s.router_pending_prefill_requests + s.router_pending_decode_requests) as u64;
            timeline.push(TimelinePoint {
                t_ms: s.sampled_at_ms,
                running: ranks.iter().map(|r| r.running_requests).sum(),
                waiting: ranks.iter().map(|r| r.waiting_requests).sum::<u64>() + pending,
                kv_usage: usage,
            });
        }
    }
    let usage = (n > 0).then(|| KvUsage { samples: n, peak, mean: sum / n as f64, preemptions });
    (usage, timeline)
}

fn power(evidence: &[(Option<TimingEvidenceSummary>, u32)], requests: &RequestCounts) -> Option<Power> {
    let mut latency = 0.0;
    let mut covered = 0.0;
    let mut energy_per_gpu = 0.0;
    let mut energy_all_gpus = 0.0;
    let mut any = false;
    for (summary, gpus_per_rank) in evidence {
        let Some(summary) = summary else { continue };
        any = true;
        for phase in [&summary.prefill, &summary.decode] {
            let e = phase_energy(phase);
            latency += phase.latency_ms;
            covered += phase.covered_latency_ms;
            energy_per_gpu += e;
            energy_all_gpus += e * f64::from(*gpus_per_rank);
        }
    }
    if !any {
        return None;
    }
    let coverage = if latency > 0.0 { (covered / latency).clamp(0.0, 1.0) } else { 0.0 };
    let published = coverage >= POWER_DATA_COVERAGE_THRESHOLD && energy_per_gpu > 0.0;
    let energy_j = published.then_some(energy_all_gpus / 1e3);
    let per = |tokens: usize| energy_j.filter(|_| tokens > 0).map(|e| e / tokens as f64);
    Some(Power {
        coverage,
        power_w_per_gpu: published.then_some(energy_per_gpu / latency),
        energy_j,
        energy_per_output_token_j: per(requests.output_tokens),
        energy_per_token_j: per(requests.input_tokens + requests.output_tokens),
    })
}

fn phase_energy(phase: &TimingPhaseEvidence) -> f64 {
    phase.energy_wms.unwrap_or(0.0)
}

impl ReplayReport {
    /// The report as a plain-text table.
    pub fn to_table(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "Replay of {} on {} ({})", self.model, self.system, self.mode);
        for r in &self.roles {
            let _ = writeln!(
                out,
                "  {:<8} {} × {} GPU(s), {}, KV {} blocks × {} tokens ({}), max {} seqs / {} tokens per pass",
                r.role,
                r.workers,
                r.gpus_per_worker,
                r.backend,
                r.kv.num_gpu_blocks,
                r.kv.block_size,
                r.kv.source,
                r.max_num_seqs,
                r.max_num_batched_tokens
            );
        }
        let q = &self.requests;
        let _ = writeln!(
            out,
            "Requests: {} completed of {}; {} prompt / {} output tokens; {:.3} s simulated",
            q.completed,
            q.requests,
            q.input_tokens,
            q.output_tokens,
            self.duration_ms / 1e3
        );
        if self.warmup_requests > 0 {
            let _ = writeln!(
                out,
                "TTFT / TPOT / E2E leave out the first {} requests by arrival (warm-up)",
                self.warmup_requests
            );
        }
        let _ = writeln!(out, "{:<12} {:>10} {:>10} {:>10} {:>10}", "latency ms", "mean", "p50", "p90", "p99");
        for (name, s) in [("TTFT", &self.ttft_ms), ("TPOT", &self.tpot_ms), ("ITL", &self.itl_ms), ("E2E", &self.e2e_ms)] {
            let _ = writeln!(out, "{:<12} {:>10.3} {:>10.3} {:>10.3} {:>10.3}", name, s.mean, s.p50, s.p90, s.p99);
        }
        let t = &self.throughput;
        let _ = writeln!(
            out,
            "Throughput: {:.2} req/s, {:.1} output tok/s ({:.1} per GPU over {} GPUs), {:.1} tok/s per user",
            t.requests_per_s, t.output_tokens_per_s, t.output_tokens_per_s_per_gpu, t.gpus, t.output_tokens_per_s_per_user
        );
        let _ = writeln!(
            out,
            "Prefix cache: {:.1} % of prompt tokens reused ({:.1} % at first admission)",
            self.prefix_cache.reused_ratio * 100.0,
            self.prefix_cache.first_admission_reused_ratio * 100.0
        );
        if let Some(kv) = &self.kv_usage {
            let _ = writeln!(
                out,
                "KV usage: peak {:.1} %, mean {:.1} %, {} preemption(s)",
                kv.peak * 100.0,
                kv.mean * 100.0,
                kv.preemptions
            );
        }
        match &self.power {
            Some(Power { power_w_per_gpu: Some(w), energy_per_output_token_j: Some(j), coverage, .. }) => {
                let _ = writeln!(
                    out,
                    "Power: {w:.0} W per GPU while busy; {j:.3} J per output token ({:.0} % of pass time measured)",
                    coverage * 100.0
                );
            }
            Some(p) => {
                let _ = writeln!(
                    out,
                    "Power: not published ({:.0} % of pass time has measured energy, 90 % needed)",
                    p.coverage * 100.0
                );
            }
            None => {}
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use aisimulate_core::engine::{TimingEvidenceSource, TimingOperationEvidence};

    use super::*;

    fn phase(ops: &[(&str, f64, Option<f64>)]) -> TimingPhaseEvidence {
        TimingPhaseEvidence::try_from_operations(
            ops.iter()
                .map(|(n, l, e)| TimingOperationEvidence::new(*n, *l, *e, TimingEvidenceSource::Silicon).unwrap())
                .collect(),
        )
        .unwrap()
    }

    fn counts(input_tokens: usize, output_tokens: usize) -> RequestCounts {
        RequestCounts { requests: 1, completed: 1, input_tokens, output_tokens }
    }

    #[test]
    fn covered_evidence_publishes_power_and_energy_per_token() {
        // 95 % of the pass time carries energy: 10 ms at 700 W per GPU, plus 0.5 ms unmeasured.
        let summary = TimingEvidenceSummary {
            prefill: phase(&[("gemm", 6.0, Some(4200.0)), ("norm", 0.5, None)]),
            decode: phase(&[("gemm", 4.0, Some(2800.0))]),
        };
        let p = power(&[(Some(summary), 2)], &counts(100, 50)).unwrap();
        assert_eq!(p.coverage, 10.0 / 10.5);
        assert_eq!(p.power_w_per_gpu, Some(7000.0 / 10.5));
        // 7000 W·ms per GPU on 2 GPUs = 14 J.
        assert_eq!(p.energy_j, Some(14.0));
        assert_eq!(p.energy_per_output_token_j, Some(14.0 / 50.0));
        assert_eq!(p.energy_per_token_j, Some(14.0 / 150.0));
    }

    #[test]
    fn low_coverage_withholds_power_and_no_evidence_means_no_figure() {
        let summary = TimingEvidenceSummary {
            prefill: phase(&[("gemm", 1.0, Some(700.0)), ("attention", 9.0, None)]),
            decode: TimingPhaseEvidence::default(),
        };
        let p = power(&[(Some(summary), 1)], &counts(1, 1)).unwrap();
        assert_eq!((p.coverage, p.power_w_per_gpu, p.energy_j), (0.1, None, None));
        assert_eq!(power(&[(None, 1)], &counts(1, 1)), None);
    }
}
