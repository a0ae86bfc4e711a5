//! A mock continuous-batching server: replays a synthetic request trace through a chunked-prefill
//! scheduler whose iteration times come from one aic engine, and reports TTFT / TPOT percentiles,
//! throughput, and how fast the simulation itself runs.
//!
//! ```sh
//! cargo run --release -p aic-core --example mocker -- --requests 500 --rate 4 --threads 2
//! cargo run --release -p aic-core --example mocker -- --requests 200 --fpm
//! ```
//!
//! Options: `--spec FILE` (default: `examples/specs/qwen3-32b_h200_vllm_tp2.json`), `--requests N`,
//! `--rate R` (arrivals per second), `--threads T` (T identical simulations sharing one
//! `Arc<Engine>`; they must agree to the bit), `--seed S`, `--budget TOKENS` (tokens per
//! iteration), `--max-running N` (concurrent requests), `--fpm` (price iterations through the
//! forward-pass perf model instead, and print its diagnostics at the end).
//!
//! The scheduler, per iteration: every running request past its prefill decodes one token; the
//! rest of the token budget goes to prompt chunks, first-come first-served, admitting waiting
//! requests while fewer than `max_running` run. An iteration with prompt tokens is priced as a
//! mixed step (prefill-only when nothing decodes), one without as a decode step, with the
//! iteration's requests described by their mean prompt and output lengths (the engine's
//! workload convention); simulated time advances by the estimate.
//!
//! With `--fpm` the same iteration is described the way a serving engine reports it (FPM v1
//! telemetry: request counts, new prefill tokens, KV tokens already cached for the chunked
//! prompts, total KV length of the decoding requests) and priced by
//! `ForwardPassPerfModel::from_engine` over the same engine (spec 42).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use aic_core::fpm::{ForwardPassMetrics, ForwardPassPerfModel, FpmError};
use aic_core::{AicError, Engine, LatencyModel};

/// Why a simulation stopped. The engine and the forward-pass model each report their own
/// error type (the FPM layer sits above the engine), so the simulator, the top of this
/// program, names both.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    /// The engine could not price a step.
    #[error(transparent)]
    Engine(#[from] AicError),
    /// The forward-pass model rejected the iteration's telemetry or could not price it.
    #[error(transparent)]
    Fpm(#[from] FpmError),
    /// A regression forward-pass model without a fit has no estimate to give.
    #[error("the forward-pass model has no estimate yet (a regression model without a fit)")]
    NoFpmEstimate,
    /// A sum of token counts does not fit an FPM counter (u32).
    #[error("{what} = {total} does not fit an FPM counter (u32)")]
    CounterOverflow {
        /// The counter.
        what: String,
        /// The sum that overflowed it.
        total: u64,
    },
}

/// Result of the simulator.
pub type Result<T, E = SimError> = std::result::Result<T, E>;

/// One synthetic request.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Request {
    pub arrival_ms: f64,
    pub prompt: u32,
    pub output: u32,
}

/// Trace and scheduler settings.
#[derive(Debug, Clone, Copy)]
pub struct SimConfig {
    pub requests: usize,
    /// Mean arrivals per second (exponential inter-arrival times).
    pub rate: f64,
    pub seed: u64,
    /// Tokens per iteration (decode tokens plus prompt chunks).
    pub token_budget: u32,
    pub max_running: usize,
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig { requests: 500, rate: 4.0, seed: 42, token_budget: 2048, max_running: 128 }
    }
}

/// What one simulation measured (simulated milliseconds).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Report {
    /// Time to first token of each request, in completion order of the prefills.
    pub ttft_ms: Vec<f64>,
    /// Mean time per output token after the first, of each request with more than one.
    pub tpot_ms: Vec<f64>,
    pub iterations: u64,
    pub output_tokens: u64,
    /// Simulated time when the last request finished.
    pub makespan_ms: f64,
}

/// xorshift64*: a tiny deterministic generator, plenty for a synthetic trace.
struct Rng(u64);

impl Rng {
    fn next_f64(&mut self) -> f64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 11) as f64 / (1u64 << 53) as f64
    }

    fn range(&mut self, lo: u32, hi: u32) -> u32 {
        lo + (self.next_f64() * f64::from(hi - lo + 1)) as u32
    }
}

/// Poisson arrivals at `rate` per second; prompts of 256..=4096 tokens, outputs of 16..=512.
pub fn synthetic_trace(cfg: &SimConfig) -> Vec<Request> {
    let mut rng = Rng(cfg.seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let mut t = 0.0;
    (0..cfg.requests)
        .map(|_| {
            t += -(1.0 - rng.next_f64()).ln() / cfg.rate * 1000.0;
            Request { arrival_ms: t, prompt: rng.range(256, 4096), output: rng.range(16, 512) }
        })
        .collect()
}

/// What one planned iteration computes, in the scheduler's own terms.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Iteration {
    /// Prompt tokens computed this iteration (all chunks).
    pub ctx_tokens: u32,
    /// Requests with a prompt chunk this iteration.
    pub prefill_requests: u32,
    /// Prompt tokens those requests already have in the KV cache (earlier chunks).
    pub prefill_kv_tokens: u32,
    /// Requests decoding one token.
    pub decode_requests: u32,
    /// Total KV length of the decoding requests (prompt plus tokens generated so far).
    pub decode_kv_tokens: u32,
    /// Mean prompt length of the iteration's requests.
    pub isl: u32,
    /// Mean output length of the iteration's requests.
    pub osl: u32,
}

/// Prices one iteration (ms).
pub trait StepPricer: Sync {
    /// Duration of the iteration, ms.
    fn step_ms(&self, it: &Iteration) -> Result<f64>;
}

/// Prices iterations with a [`LatencyModel`]: a mixed step when prompt tokens are computed,
/// else a decode step, at the iteration's mean prompt and output lengths.
pub struct EngineSteps<'a>(pub &'a dyn LatencyModel);

impl StepPricer for EngineSteps<'_> {
    fn step_ms(&self, it: &Iteration) -> Result<f64> {
        let ms = if it.ctx_tokens > 0 {
            self.0.mixed_step_ms(it.ctx_tokens, it.decode_requests, it.isl, it.osl, 0)?
        } else {
            self.0.decode_step_ms(it.decode_requests, it.isl, it.osl)?
        };
        Ok(ms)
    }
}

/// Prices iterations with the forward-pass perf model, from their FPM v1 telemetry.
pub struct FpmSteps<'a>(pub &'a ForwardPassPerfModel);

impl FpmSteps<'_> {
    /// The iteration as one attention-DP rank's FPM record.
    pub fn metrics(it: &Iteration) -> ForwardPassMetrics {
        let mut m = ForwardPassMetrics::default();
        let s = &mut m.scheduled_requests;
        s.num_prefill_requests = it.prefill_requests;
        s.sum_prefill_tokens = it.ctx_tokens;
        s.sum_prefill_kv_tokens = it.prefill_kv_tokens;
        s.num_decode_requests = it.decode_requests;
        s.sum_decode_kv_tokens = it.decode_kv_tokens;
        m
    }
}

impl StepPricer for FpmSteps<'_> {
    fn step_ms(&self, it: &Iteration) -> Result<f64> {
        self.0.estimate(&[Self::metrics(it)])?.ok_or(SimError::NoFpmEstimate)
    }
}

/// A sum of token counts as an FPM counter (u32), or an error naming the counter.
fn counter(what: &str, total: u64) -> Result<u32> {
    u32::try_from(total).map_err(|_| SimError::CounterOverflow { what: what.to_string(), total })
}

/// Progress of an admitted request.
struct Running {
    req: Request,
    prefilled: u32,
    generated: u32,
    first_token_ms: f64,
}

/// Runs the trace to completion; one `model` call per iteration.
pub fn simulate(model: &dyn LatencyModel, trace: &[Request], cfg: &SimConfig) -> Result<Report> {
    simulate_with(&EngineSteps(model), trace, cfg)
}

/// Runs the trace to completion; one `pricer` call per iteration.
pub fn simulate_with(pricer: &dyn StepPricer, trace: &[Request], cfg: &SimConfig) -> Result<Report> {
    let mut report = Report::default();
    let (mut now, mut next) = (0.0_f64, 0_usize); // simulated clock; next trace entry to admit
    let mut running: Vec<Running> = Vec::new();
    while next < trace.len() || !running.is_empty() {
        // Admit arrived requests, FCFS, while there is room; jump ahead when idle.
        if running.is_empty() && trace[next].arrival_ms > now {
            now = trace[next].arrival_ms;
        }
        while next < trace.len() && trace[next].arrival_ms <= now && running.len() < cfg.max_running {
            running.push(Running { req: trace[next], prefilled: 0, generated: 0, first_token_ms: 0.0 });
            next += 1;
        }
        // Plan the iteration: decodes first, then prompt chunks from the budget.
        let decoding = running.iter().filter(|r| r.generated > 0).count() as u32;
        let mut budget = cfg.token_budget.saturating_sub(decoding);
        let mut chunks = vec![0_u32; running.len()];
        for (r, chunk) in running.iter().zip(chunks.iter_mut()) {
            if r.generated == 0 && budget > 0 {
                *chunk = (r.req.prompt - r.prefilled).min(budget);
                budget -= *chunk;
            }
        }
        let ctx_tokens: u32 = chunks.iter().sum();
        let members: Vec<&Running> =
            running.iter().zip(&chunks).filter(|(r, c)| r.generated > 0 || **c > 0).map(|(r, _)| r).collect();
        let n = members.len() as u64;
        let isl = (members.iter().map(|r| u64::from(r.req.prompt)).sum::<u64>() / n) as u32;
        let osl = (members.iter().map(|r| u64::from(r.req.output)).sum::<u64>() / n) as u32;
        let chunked = || running.iter().zip(&chunks).filter(|(_, c)| **c > 0).map(|(r, _)| r);
        let iteration = Iteration {
            ctx_tokens,
            prefill_requests: chunked().count() as u32,
            prefill_kv_tokens: counter("prefill KV tokens", chunked().map(|r| u64::from(r.prefilled)).sum())?,
            decode_requests: decoding,
            decode_kv_tokens: counter(
                "decode KV tokens",
                running.iter().filter(|r| r.generated > 0).map(|r| u64::from(r.req.prompt + r.generated)).sum(),
            )?,
            isl,
            osl,
        };
        let step_ms = pricer.step_ms(&iteration)?;
        now += step_ms;
        report.iterations += 1;
        // Apply it: chunks advance prefills (the last chunk yields the first token), decodes
        // add a token; finished requests leave.
        for (r, chunk) in running.iter_mut().zip(&chunks) {
            if r.generated > 0 {
                r.generated += 1;
            } else if *chunk > 0 {
                r.prefilled += chunk;
                if r.prefilled == r.req.prompt {
                    r.generated = 1;
                    r.first_token_ms = now;
                    report.ttft_ms.push(now - r.req.arrival_ms);
                }
            }
        }
        running.retain(|r| {
            let done = r.generated == r.req.output;
            if done {
                report.output_tokens += u64::from(r.req.output);
                if r.req.output > 1 {
                    report.tpot_ms.push((now - r.first_token_ms) / f64::from(r.req.output - 1));
                }
            }
            !done
        });
    }
    report.makespan_ms = now;
    Ok(report)
}

/// Nearest-rank percentile (`p` in 0..=100) of unsorted values; NaN when empty.
pub fn percentile(values: &[f64], p: f64) -> f64 {
    if values.is_empty() {
        return f64::NAN;
    }
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let rank = ((p / 100.0) * sorted.len() as f64).ceil().max(1.0) as usize;
    sorted[rank.min(sorted.len()) - 1]
}

/// Command-line settings.
struct Args {
    spec: PathBuf,
    cfg: SimConfig,
    threads: usize,
    /// Price iterations through the forward-pass perf model.
    fpm: bool,
}

fn parse_args() -> std::result::Result<Args, String> {
    let mut spec = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/examples/specs/qwen3-32b_h200_vllm_tp2.json"));
    let (mut cfg, mut threads, mut fpm) = (SimConfig::default(), 2_usize, false);
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        if flag == "--fpm" {
            fpm = true;
            continue;
        }
        let value = args.next().ok_or(format!("{flag} needs a value"))?;
        let bad = |e: &dyn std::fmt::Display| format!("{flag} {value}: {e}");
        match flag.as_str() {
            "--spec" => spec = PathBuf::from(&value),
            "--requests" => cfg.requests = value.parse().map_err(|e| bad(&e))?,
            "--rate" => cfg.rate = value.parse().map_err(|e| bad(&e))?,
            "--threads" => threads = value.parse().map_err(|e| bad(&e))?,
            "--seed" => cfg.seed = value.parse().map_err(|e| bad(&e))?,
            "--budget" => cfg.token_budget = value.parse().map_err(|e| bad(&e))?,
            "--max-running" => cfg.max_running = value.parse().map_err(|e| bad(&e))?,
            _ => return Err(format!("unknown option {flag}")),
        }
    }
    if cfg.requests == 0
        || cfg.rate.is_nan()
        || cfg.rate <= 0.0
        || threads == 0
        || cfg.max_running == 0
        || cfg.token_budget == 0
    {
        return Err("--requests, --rate, --threads, --budget and --max-running must be positive".into());
    }
    Ok(Args { spec, cfg, threads, fpm })
}

fn main() {
    let Args { spec, cfg, threads, fpm } = parse_args().unwrap_or_else(|e| {
        eprintln!("mocker: {e}");
        std::process::exit(2);
    });
    let engine = Arc::new(Engine::from_spec_file(&spec, None).unwrap_or_else(|e| {
        eprintln!("mocker: {e}");
        std::process::exit(1);
    }));
    // One forward-pass model shared by every simulation thread, over the same engine.
    let fpm_model = fpm.then(|| {
        Arc::new(ForwardPassPerfModel::from_engine(Arc::clone(&engine), None).unwrap_or_else(|e| {
            eprintln!("mocker: {e}");
            std::process::exit(1);
        }))
    });
    let trace = Arc::new(synthetic_trace(&cfg));
    let ec = &engine.spec().engine;
    println!(
        "engine:   {} on {} / {} {} (tp{} pp{} dp{})",
        ec.model_name,
        ec.system_name,
        ec.backend.as_str(),
        ec.backend_version.as_deref().unwrap_or("?"),
        ec.tp_size,
        ec.pp_size,
        ec.attention_dp_size
    );
    println!(
        "workload: {} requests at {} req/s, seed {}, budget {} tokens/iteration, max {} running, {} thread(s)",
        cfg.requests, cfg.rate, cfg.seed, cfg.token_budget, cfg.max_running, threads
    );
    println!(
        "pricing:  {}",
        if fpm_model.is_some() { "forward-pass perf model over FPM telemetry (--fpm)" } else { "engine mixed / decode steps" }
    );

    let start = Instant::now();
    let handles: Vec<_> = (0..threads)
        .map(|_| {
            let (engine, trace, fpm_model) = (Arc::clone(&engine), Arc::clone(&trace), fpm_model.clone());
            std::thread::spawn(move || {
                let t0 = Instant::now();
                let report = match &fpm_model {
                    Some(model) => simulate_with(&FpmSteps(model), &trace, &cfg),
                    None => simulate(engine.as_ref(), &trace, &cfg),
                };
                (report, t0.elapsed().as_secs_f64())
            })
        })
        .collect();
    let results: Vec<_> = handles.into_iter().map(|h| h.join().expect("simulation thread panicked")).collect();
    let wall = start.elapsed().as_secs_f64();
    let mut reports = Vec::new();
    for (report, _) in &results {
        match report {
            Ok(r) => reports.push(r),
            Err(e) => {
                eprintln!("mocker: estimate failed: {e}");
                std::process::exit(1);
            }
        }
    }
    let r = reports[0];
    let row = |name: &str, v: &[f64]| {
        println!(
            "{name}  p50 {:9.2}  p90 {:9.2}  p99 {:9.2}",
            percentile(v, 50.0),
            percentile(v, 90.0),
            percentile(v, 99.0)
        );
    };
    row("TTFT ms", &r.ttft_ms);
    row("TPOT ms", &r.tpot_ms);
    let secs = r.makespan_ms / 1000.0;
    println!(
        "throughput: {:.1} output tokens/s, {:.2} requests/s over {:.1} s simulated, {} iterations",
        r.output_tokens as f64 / secs,
        cfg.requests as f64 / secs,
        secs,
        r.iterations
    );
    let per_thread: Vec<String> = results.iter().map(|(_, s)| format!("{:.0}", r.iterations as f64 / s)).collect();
    println!(
        "simulator speed: {:.0} iterations/s wall clock over {threads} thread(s) ({} per thread)",
        (r.iterations * threads as u64) as f64 / wall,
        per_thread.join(", ")
    );
    let identical = reports.iter().all(|x| *x == r);
    println!(
        "determinism: {threads} thread(s) sharing one Arc<Engine>: {}",
        if identical { "all reports identical" } else { "REPORTS DIFFER" }
    );
    if let Some(model) = &fpm_model {
        println!("fpm diagnostics: {}", model.diagnostics());
    }
    if !identical {
        std::process::exit(1);
    }
}

// Compiled and run as part of `cargo test -p aic-core --test rust_callers`, which includes this
// file as a module.
#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    /// Every iteration costs 10 ms; records what the scheduler asked for.
    struct Recorder(Mutex<Vec<Iteration>>);

    impl StepPricer for Recorder {
        fn step_ms(&self, it: &Iteration) -> Result<f64> {
            self.0.lock().unwrap().push(*it);
            Ok(10.0)
        }
    }

    fn example_engine() -> Arc<Engine> {
        let spec = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/specs/qwen3-32b_h200_vllm_tp2.json");
        Arc::new(Engine::from_spec_file(std::path::Path::new(spec), None).unwrap())
    }

    #[test]
    fn iterations_carry_the_fpm_telemetry_of_the_schedule() {
        let recorder = Recorder(Mutex::new(Vec::new()));
        let cfg = SimConfig { token_budget: 2048, max_running: 8, ..SimConfig::default() };
        let trace =
            [Request { arrival_ms: 0.0, prompt: 5000, output: 3 }, Request { arrival_ms: 5.0, prompt: 100, output: 2 }];
        simulate_with(&recorder, &trace, &cfg).unwrap();
        let it = |ctx, np, pkv, nd, dkv, isl, osl| Iteration {
            ctx_tokens: ctx,
            prefill_requests: np,
            prefill_kv_tokens: pkv,
            decode_requests: nd,
            decode_kv_tokens: dkv,
            isl,
            osl,
        };
        // Two chunks of A (the second on top of 2048 cached tokens), then A's last 904 tokens
        // (4096 cached) with all of B, then both decode (KV 5001 + 101), then A alone (5002).
        assert_eq!(
            recorder.0.into_inner().unwrap(),
            [
                it(2048, 1, 0, 0, 0, 5000, 3),
                it(2048, 1, 2048, 0, 0, 5000, 3),
                it(1004, 2, 4096, 0, 0, 2550, 2),
                it(0, 0, 0, 2, 5102, 2550, 2),
                it(0, 0, 0, 1, 5002, 5000, 3),
            ]
        );
    }

    #[test]
    fn fpm_steps_price_the_iteration_telemetry() {
        let engine = example_engine();
        let model = ForwardPassPerfModel::from_engine(Arc::clone(&engine), None).unwrap();
        let pricer = FpmSteps(&model);
        let chunk = Iteration { ctx_tokens: 2048, prefill_requests: 1, isl: 5000, osl: 3, ..Iteration::default() };
        let m = FpmSteps::metrics(&chunk);
        assert_eq!((m.scheduled_requests.num_prefill_requests, m.scheduled_requests.sum_prefill_tokens), (1, 2048));
        // A first chunk with nothing cached is a plain prefill of its tokens.
        let ms = pricer.step_ms(&chunk).unwrap();
        assert!((ms - engine.prefill_latency_ms(1, 2048, 0).unwrap()).abs() <= 1e-12 * ms, "{ms}");
        // Decode-only: one step of 16 requests at KV 2049 each = the engine's decode of osl 2.
        let decode = Iteration { decode_requests: 16, decode_kv_tokens: 16 * 2049, ..Iteration::default() };
        let ms = pricer.step_ms(&decode).unwrap();
        assert!((ms - engine.decode_latency_ms(16, 2048, 2).unwrap()).abs() <= 1e-12 * ms, "{ms}");
        // A regression model without a fit cannot price a step.
        let untrained = ForwardPassPerfModel::from_regression(None).unwrap();
        let err = FpmSteps(&untrained).step_ms(&decode).unwrap_err();
        assert!(err.to_string().contains("no estimate yet"), "{err}");
    }

    #[test]
    fn fpm_simulation_is_deterministic_across_threads() {
        let cfg = SimConfig { requests: 30, rate: 6.0, ..SimConfig::default() };
        let trace = Arc::new(synthetic_trace(&cfg));
        let model = Arc::new(ForwardPassPerfModel::from_engine(example_engine(), None).unwrap());
        let runs: Vec<_> = (0..2)
            .map(|_| {
                let (model, trace) = (Arc::clone(&model), Arc::clone(&trace));
                std::thread::spawn(move || simulate_with(&FpmSteps(&model), &trace, &cfg).unwrap())
            })
            .collect();
        let reports: Vec<_> = runs.into_iter().map(|h| h.join().unwrap()).collect();
        assert_eq!(reports[0], reports[1]);
        let r = &reports[0];
        assert_eq!((r.ttft_ms.len(), r.tpot_ms.len()), (30, 30));
        assert_eq!(r.output_tokens, trace.iter().map(|q| u64::from(q.output)).sum::<u64>());
        let tpot = percentile(&r.tpot_ms, 50.0);
        assert!(tpot > 5.0 && tpot < 200.0, "TPOT p50 {tpot}");
        // Pricing only: the model learns nothing during a simulation.
        assert_eq!(model.retained_observations(), 0);
    }
}
