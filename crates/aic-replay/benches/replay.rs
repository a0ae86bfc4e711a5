//! Replay wall time with aic timing against the same replay with aisimulate-core's built-in
//! polynomial timing model (issue 37), and simulated requests per second.
//!
//! * `replay_256`: Qwen/Qwen3-32B on h200_sxm / vLLM / TP 2, 256 requests closed loop at 32 in
//!   flight, isl 2048, osl 256, one aggregated worker: aic timing (memoised, as shipped), aic
//!   without the memo, and the polynomial model. Everything but the timing model is the same
//!   (workload lowering, telemetry, report).
//! * `replay_10k`: the same deployment and lengths, 10,000 requests at 32 in flight; the
//!   throughput line is simulated requests per second of wall time.
//!
//! Run: `cargo bench -p aic-replay --bench replay`. After the timings it prints each variant's
//! timing-call count and the time spent inside the timing model (aic's share of the replay).

use std::hint::black_box;
use std::path::PathBuf;
use std::sync::Arc;

use aic_core::memory::{ModelFacts, ModelFamily};
use aic_core::Engine;
use aic_replay::{Arrival, Lengths, Replay, ReplayOptions, Role, RoleBuilder, TimingSource, Workload};
use criterion::{criterion_group, criterion_main, Criterion, Throughput};

fn replay(requests: usize, timing: TimingSource) -> Replay {
    let repo = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let spec = repo.join("crates/aic-core/examples/specs/qwen3-32b_h200_vllm_tp2.json");
    let engine = Engine::from_spec_file(&spec, Some(&repo.join("data/systems"))).unwrap();
    let config = repo.join("data/model_configs/Qwen--Qwen3-32B_config.json");
    let config: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(config).unwrap()).unwrap();
    let facts = ModelFacts::from_hf_config(&config, ModelFamily::Llama).unwrap();
    let role = RoleBuilder::new(Role::Aggregated, Arc::new(engine)).facts(facts).build().unwrap();
    let workload = Workload::Generated {
        requests,
        arrival: Arrival::ClosedLoop { concurrency: 32 },
        isl: Lengths::Fixed(2048),
        osl: Lengths::Fixed(256),
        seed: 0,
    };
    Replay::aggregated(role, 1, workload).with_options(ReplayOptions { timing, ..ReplayOptions::default() })
}

const VARIANTS: [(&str, TimingSource); 3] =
    [("aic", TimingSource::Aic), ("aic_no_memo", TimingSource::AicNoMemo), ("polynomial", TimingSource::Polynomial)];

fn report_shares(requests: usize) {
    for (name, timing) in VARIANTS {
        let r = replay(requests, timing);
        r.run().unwrap(); // warm the tables
        let outcome = r.run().unwrap();
        let (calls, engine_calls, in_model) = outcome
            .stats
            .timing
            .iter()
            .fold((0, 0, 0.0), |(c, e, t), r| (c + r.stats.calls, e + r.stats.engine_calls, t + r.stats.time_in_model_ms));
        eprintln!(
            "{requests} requests, {name}: wall {:.1} ms (simulation {:.1} ms), {calls} timing calls, {engine_calls} engine calls, \
             {in_model:.2} ms in the timing model; {:.0} simulated requests/s",
            outcome.stats.wall_ms,
            outcome.stats.simulate_ms,
            requests as f64 / (outcome.stats.wall_ms / 1e3)
        );
    }
}

fn bench(c: &mut Criterion) {
    for (requests, group) in [(256usize, "replay_256"), (10_000, "replay_10k")] {
        let mut g = c.benchmark_group(group);
        g.sample_size(10);
        g.throughput(Throughput::Elements(requests as u64));
        for (name, timing) in VARIANTS {
            let r = replay(requests, timing);
            r.run().unwrap();
            g.bench_function(name, |b| b.iter(|| black_box(r.run().unwrap())));
        }
        g.finish();
        report_shares(requests);
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
