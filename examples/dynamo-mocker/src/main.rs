//! One closed-loop workload replayed twice with aic's step latencies, and the two results side
//! by side:
//!
//! 1. through Dynamo's mocker: `dynamo_mocker::replay::simulate_concurrency_requests` with an
//!    [`AicAisCallback`] installed by `PerfModel::from_ais_callback`;
//! 2. through [`aic_replay::Replay`]: aisimulate-core's replay engine with
//!    [`aic_replay::AicTimingModel`] behind its `TimingModel` trait.
//!
//! Both use the scheduler configuration [`aic_replay::RoleBuilder`] derives from the spec (KV
//! capacity from aic's memory model). Every compared figure is printed as a `compare` line
//! (`compare NAME MOCKER AIC_REPLAY`, full precision) that `scripts/run-mocker-example.sh` checks.
//!
//! ```text
//! aic-dynamo-mocker [--spec FILE] [--systems DIR] [--model-config FILE] [--family LLAMA]
//!                   [--requests 256] [--concurrency 32] [--isl 2048] [--osl 256]
//! ```
//!
//! Defaults: the repository's Qwen/Qwen3-32B spec (h200_sxm, vLLM, TP 2), `data/systems`, and
//! that model's Hugging Face config (for aic's KV memory model).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use aic_core::memory::{ModelFacts, ModelFamily};
use aic_core::Engine;
use aic_dynamo_mocker::{mocker_config, AicAisCallback};
use aic_replay::{Arrival, Lengths, Replay, Role, RoleBuilder, Workload};
use anyhow::{bail, Context, Result};
use dynamo_mocker::common::protocols::DirectRequest;
use dynamo_mocker::replay::simulate_concurrency_requests;

/// The command line.
struct Args {
    spec: PathBuf,
    systems: PathBuf,
    model_config: PathBuf,
    family: String,
    requests: usize,
    concurrency: usize,
    isl: usize,
    osl: usize,
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

impl Args {
    fn parse() -> Result<Args> {
        let repo = repo();
        let mut args = Args {
            spec: repo.join("crates/aic-core/examples/specs/qwen3-32b_h200_vllm_tp2.json"),
            systems: repo.join("data/systems"),
            model_config: repo.join("data/model_configs/Qwen--Qwen3-32B_config.json"),
            family: "LLAMA".to_string(),
            requests: 256,
            concurrency: 32,
            isl: 2048,
            osl: 256,
        };
        let mut it = std::env::args().skip(1);
        while let Some(flag) = it.next() {
            let mut value = || it.next().with_context(|| format!("{flag} needs a value"));
            let count = |text: String, flag: &str| -> Result<usize> {
                match text.parse::<usize>() {
                    Ok(0) | Err(_) => bail!("{flag} takes a positive integer, got {text:?}"),
                    Ok(n) => Ok(n),
                }
            };
            match flag.as_str() {
                "--spec" => args.spec = value()?.into(),
                "--systems" => args.systems = value()?.into(),
                "--model-config" => args.model_config = value()?.into(),
                "--family" => args.family = value()?,
                "--requests" => args.requests = count(value()?, &flag)?,
                "--concurrency" => args.concurrency = count(value()?, &flag)?,
                "--isl" => args.isl = count(value()?, &flag)?,
                "--osl" => args.osl = count(value()?, &flag)?,
                "-h" | "--help" => {
                    println!(
                        "aic-dynamo-mocker [--spec FILE] [--systems DIR] [--model-config FILE] [--family LLAMA] \
                         [--requests N] [--concurrency N] [--isl N] [--osl N]"
                    );
                    std::process::exit(0);
                }
                other => bail!("unknown argument {other:?} (try --help)"),
            }
        }
        Ok(args)
    }
}

/// `count` prompts of `isl` tokens with no token shared between requests (so prefix caching
/// finds nothing, as with aic-replay's length-only generated workload), ordinal request ids.
fn mocker_requests(count: usize, isl: usize, osl: usize) -> Result<Vec<DirectRequest>> {
    let last = count.checked_mul(isl).and_then(|n| u32::try_from(n).ok());
    if last.is_none() {
        bail!("{count} requests × {isl} tokens exceed the distinct 32-bit token ids this workload uses");
    }
    Ok((0..count)
        .map(|i| DirectRequest {
            tokens: (0..isl).map(|t| (i * isl + t) as u32).collect(),
            max_output_tokens: osl,
            uuid: Some(uuid::Uuid::from_u128(i as u128 + 1)),
            ..Default::default()
        })
        .collect())
}

/// One figure of both replays.
struct Figure {
    name: &'static str,
    mocker: f64,
    aic_replay: f64,
}

fn main() -> Result<()> {
    let args = Args::parse()?;
    let engine = Arc::new(
        Engine::from_spec_file(&args.spec, Some(&args.systems))
            .with_context(|| format!("loading the spec {}", args.spec.display()))?,
    );
    let config: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(&args.model_config)
            .with_context(|| format!("reading the model config {}", args.model_config.display()))?,
    )?;
    let facts = ModelFacts::from_hf_config(&config, ModelFamily::parse(&args.family))?;
    let setup = RoleBuilder::new(Role::Aggregated, Arc::clone(&engine))
        .facts(facts)
        .build()?;
    let spec = &engine.spec().engine;
    println!(
        "{} on {}, {} TP {}: {} requests, {} in flight, isl {}, osl {}, 1 worker",
        spec.model_name,
        spec.system_name,
        spec.backend.as_str(),
        spec.tp_size,
        args.requests,
        args.concurrency,
        args.isl,
        args.osl
    );
    println!(
        "scheduler: max_num_seqs {}, max_num_batched_tokens {}, chunked prefill {}, KV {} blocks × {} tokens ({})",
        setup.rank.max_num_seqs,
        setup.rank.max_num_batched_tokens,
        setup.rank.enable_chunked_prefill,
        setup.kv.num_gpu_blocks,
        setup.kv.block_size,
        setup.kv.source
    );

    // 1. Dynamo's mocker with the aic-backed callback.
    let callback = Arc::new(AicAisCallback::new(Arc::clone(&engine)));
    let mocker_args = mocker_config(&setup, callback.clone())?;
    let requests = mocker_requests(args.requests, args.isl, args.osl)?;
    let started = Instant::now();
    let mocker = simulate_concurrency_requests(mocker_args, requests, args.concurrency, 1)
        .context("dynamo-mocker's offline replay")?;
    let mocker_wall_ms = started.elapsed().as_secs_f64() * 1e3;
    let calls = callback.stats();

    // 2. The same workload through aic-replay.
    let workload = Workload::Generated {
        requests: args.requests,
        arrival: Arrival::ClosedLoop {
            concurrency: args.concurrency,
        },
        isl: Lengths::Fixed(args.isl),
        osl: Lengths::Fixed(args.osl),
        seed: 0,
    };
    let outcome = Replay::aggregated(setup, 1, workload).run()?;
    let r = &outcome.report;

    let (l, t, c) = (&mocker.latency, &mocker.throughput, &mocker.request_counts);
    let figures = [
        Figure {
            name: "completed_requests",
            mocker: c.completed_requests as f64,
            aic_replay: r.requests.completed as f64,
        },
        Figure {
            name: "output_tokens",
            mocker: c.total_output_tokens as f64,
            aic_replay: r.requests.output_tokens as f64,
        },
        Figure {
            name: "duration_ms",
            mocker: t.duration_ms,
            aic_replay: r.duration_ms,
        },
        Figure {
            name: "ttft_mean_ms",
            mocker: l.ttft.mean_ms,
            aic_replay: r.ttft_ms.mean,
        },
        Figure {
            name: "ttft_p50_ms",
            mocker: l.ttft.median_ms,
            aic_replay: r.ttft_ms.p50,
        },
        Figure {
            name: "ttft_p90_ms",
            mocker: l.ttft.p90_ms,
            aic_replay: r.ttft_ms.p90,
        },
        Figure {
            name: "ttft_p99_ms",
            mocker: l.ttft.p99_ms,
            aic_replay: r.ttft_ms.p99,
        },
        Figure {
            name: "tpot_mean_ms",
            mocker: l.tpot.mean_ms,
            aic_replay: r.tpot_ms.mean,
        },
        Figure {
            name: "tpot_p50_ms",
            mocker: l.tpot.median_ms,
            aic_replay: r.tpot_ms.p50,
        },
        Figure {
            name: "tpot_p90_ms",
            mocker: l.tpot.p90_ms,
            aic_replay: r.tpot_ms.p90,
        },
        Figure {
            name: "tpot_p99_ms",
            mocker: l.tpot.p99_ms,
            aic_replay: r.tpot_ms.p99,
        },
        Figure {
            name: "e2e_mean_ms",
            mocker: l.e2e.mean_ms,
            aic_replay: r.e2e_ms.mean,
        },
        Figure {
            name: "requests_per_s",
            mocker: t.request_throughput_rps,
            aic_replay: r.throughput.requests_per_s,
        },
        Figure {
            name: "output_tokens_per_s",
            mocker: t.output_throughput_tok_s,
            aic_replay: r.throughput.output_tokens_per_s,
        },
    ];

    println!();
    println!(
        "{:<22} {:>16} {:>16} {:>10}",
        "", "dynamo-mocker", "aic-replay", "rel diff"
    );
    for f in &figures {
        let scale = f.mocker.abs().max(f.aic_replay.abs());
        let rel = if scale > 0.0 {
            (f.mocker - f.aic_replay).abs() / scale
        } else {
            0.0
        };
        println!(
            "{:<22} {:>16.3} {:>16.3} {:>10.1e}",
            f.name, f.mocker, f.aic_replay, rel
        );
    }
    let replay_calls: u64 = outcome.stats.timing.iter().map(|s| s.stats.calls).sum();
    let replay_in_aic: f64 = outcome
        .stats
        .timing
        .iter()
        .map(|s| s.stats.time_in_model_ms)
        .sum();
    println!();
    println!(
        "wall: dynamo-mocker {mocker_wall_ms:.1} ms ({} prefill + {} decode callback calls, {:.1} ms in aic); \
         aic-replay {:.1} ms ({replay_calls} timing calls, {replay_in_aic:.1} ms in aic)",
        calls.prefill_calls, calls.decode_calls, calls.time_in_aic_ms, outcome.stats.wall_ms
    );
    println!();
    for f in &figures {
        println!("compare {} {} {}", f.name, f.mocker, f.aic_replay);
    }
    Ok(())
}
