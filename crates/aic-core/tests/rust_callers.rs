//! What a Rust caller (an inference-cluster simulator) relies on: the [`LatencyModel`] trait
//! behind `Arc<dyn ...>`, one engine shared by many threads giving bit-identical answers, the
//! checked-in example spec, and the mocker example's scheduler loop.
//!
//! The mocker is compiled into this test as a module (`#[path]`), so its loop is tested by a
//! plain `cargo test -p aic-core` without spawning `cargo run` or enabling example tests.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use aic_core::{AicError, Engine, EngineSpec, ErrorClass, LatencyModel, Result};
use serde_json::Value;

#[path = "../examples/mocker.rs"]
#[allow(dead_code)] // the example's `main` and argument parsing
mod mocker;

use mocker::{percentile, simulate, synthetic_trace, Request, SimConfig};

const CASE: &str = "dense/Qwen3-32B/h200_sxm/vllm/tp2-pp1-dp1";

fn example_spec_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/specs/qwen3-32b_h200_vllm_tp2.json")
}

fn golden_case() -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../goldens/dense.json");
    let all: Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    all["cases"].as_array().unwrap().iter().find(|c| c["id"] == CASE).unwrap().clone()
}

fn example_engine() -> Engine {
    Engine::from_spec_file(&example_spec_path(), None).unwrap()
}

fn close(ours: f64, reference: f64) -> bool {
    ((ours - reference) / reference).abs() <= 1e-9
}

#[test]
fn checked_in_spec_is_the_golden_case() {
    let case = golden_case();
    let from_golden = serde_json::json!({
        "schema_version": 15,
        "engine": case["resolved"]["engine"],
        "context_ops": case["spec_ops"]["context"],
        "generation_ops": case["spec_ops"]["generation"],
    });
    let golden = EngineSpec::from_json(&from_golden.to_string()).unwrap();
    let file = EngineSpec::from_bytes(&std::fs::read(example_spec_path()).unwrap()).unwrap();
    assert_eq!(file, golden, "examples/specs/qwen3-32b_h200_vllm_tp2.json drifted from {CASE}");
}

#[test]
fn engine_from_checked_in_spec_replays_golden_queries() {
    let model: Arc<dyn LatencyModel> = Arc::new(example_engine());
    let mut replayed = 0;
    for q in golden_case()["queries"].as_array().unwrap() {
        let a = &q["args"];
        let u = |k: &str| a[k].as_u64().unwrap() as u32;
        let ours = match q["kind"].as_str().unwrap() {
            "prefill" => model.prefill_ms(u("bs"), u("isl"), u("prefix")),
            "decode" => model.decode_ms(u("bs"), u("isl"), u("osl")),
            "decode_step" => model.decode_step_ms(u("gen_tokens"), u("isl"), u("osl")),
            "mixed_step" => model.mixed_step_ms(u("ctx_tokens"), u("gen_tokens"), u("isl"), u("osl"), u("prefix")),
            _ => continue,
        };
        match (ours, q["value"].as_f64()) {
            (Ok(v), Some(r)) => assert!(close(v, r), "{q}: got {v}"),
            (Err(e), None) => {
                assert_eq!(e.class(), ErrorClass::Value, "{q}: {e}");
                assert_eq!(e.to_string(), q["error"]["message"].as_str().unwrap());
            }
            (ours, _) => panic!("{q}: got {ours:?}"),
        }
        replayed += 1;
    }
    assert!(replayed >= 15, "only {replayed} golden queries replayed");
}

#[test]
fn trait_forwards_to_engine_methods() {
    let engine = Arc::new(example_engine());
    let as_dyn: Arc<dyn LatencyModel> = engine.clone();
    let boxed: Box<dyn LatencyModel> = Box::new(Arc::clone(&engine));
    fn generic<M: LatencyModel>(m: M) -> f64 {
        m.decode_step_ms(64, 4096, 512).unwrap()
    }
    let step = engine.decode_step_latency_ms(64, 4096, 512, 1.0).unwrap();
    assert_eq!(generic(&*engine).to_bits(), step.to_bits());
    assert_eq!(generic(engine.clone()).to_bits(), step.to_bits());
    assert_eq!(generic(&as_dyn).to_bits(), step.to_bits());
    assert_eq!(boxed.decode_step_ms(64, 4096, 512).unwrap().to_bits(), step.to_bits());

    let pairs = [
        (as_dyn.prefill_ms(4, 3000, 1000).unwrap(), engine.prefill_latency_ms(4, 3000, 1000).unwrap()),
        (as_dyn.decode_ms(8, 2048, 128).unwrap(), engine.decode_latency_ms(8, 2048, 128).unwrap()),
        (
            as_dyn.mixed_step_ms(2048, 32, 4096, 512, 0).unwrap(),
            engine.mixed_step_latency_ms(2048, 32, 4096, 512, 0, 1.0, 1.0).unwrap(),
        ),
    ];
    for (via_trait, direct) in pairs {
        assert_eq!(via_trait.to_bits(), direct.to_bits());
    }
    // Documented corner cases.
    assert_eq!(as_dyn.decode_step_ms(0, 1024, 128).unwrap(), 0.0);
    assert_eq!(as_dyn.decode_ms(8, 1024, 1).unwrap(), 0.0);
    assert_eq!(as_dyn.mixed_step_ms(0, 0, 1024, 128, 0).unwrap(), 0.0);
    let err: AicError = as_dyn.prefill_ms(1, 1024, 1024).unwrap_err();
    assert_eq!(err.class(), ErrorClass::Value);
    // `isl = L - 1, osl = 0` prices decode attention at exactly L; so does the mid-trajectory
    // position of (isl, osl) = (L - 1 - osl/2, osl).
    let at = |isl, osl| as_dyn.decode_step_ms(16, isl, osl).unwrap();
    assert_eq!(at(2047, 0).to_bits(), at(1983, 128).to_bits());
}

/// A few hundred varied queries of all four kinds (some invalid), from a fixed seed.
fn queries() -> Vec<(u8, [u32; 5])> {
    let mut state = 0x5EED_u64;
    let mut next = |hi: u32| {
        state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        ((state >> 33) % u64::from(hi)) as u32
    };
    (0..400)
        .map(|i| {
            let isl = 1 + next(8192);
            (i as u8 % 4, [1 + next(256), isl, 1 + next(2048), next(isl + 64), next(4096)])
        })
        .collect()
}

fn answer(m: &dyn LatencyModel, kind: u8, a: [u32; 5]) -> std::result::Result<u64, String> {
    let r: Result<f64> = match kind {
        0 => m.prefill_ms(a[0], a[1], a[3]),
        1 => m.decode_ms(a[0], a[1], a[2] % 160), // up to 5 sampled steps (debug builds are slow)
        2 => m.decode_step_ms(a[0], a[1], a[2]),
        _ => m.mixed_step_ms(a[4], a[0], a[1], a[2], a[3]),
    };
    r.map(f64::to_bits).map_err(|e| e.to_string())
}

#[test]
fn one_engine_shared_by_four_threads_is_bit_identical_to_one_thread() {
    let qs = queries();
    let serial_engine = example_engine();
    let expected: Vec<_> = qs.iter().map(|&(k, a)| answer(&serial_engine, k, a)).collect();
    assert!(expected.iter().filter(|r| r.is_ok()).count() > 300, "too few valid queries");
    assert!(expected.iter().any(|r| r.is_err()), "no invalid query exercised");

    // A fresh engine, so its lazily loaded tables are first touched concurrently; each thread
    // walks the queries from a different starting point.
    let shared: Arc<dyn LatencyModel> = Arc::new(example_engine());
    let threads: Vec<_> = (0..4)
        .map(|t| {
            let (model, qs) = (Arc::clone(&shared), qs.clone());
            std::thread::spawn(move || {
                let n = qs.len();
                let mut out = vec![None; n];
                for j in 0..n {
                    let i = (j + t * n / 4) % n;
                    out[i] = Some(answer(model.as_ref(), qs[i].0, qs[i].1));
                }
                out.into_iter().map(Option::unwrap).collect::<Vec<_>>()
            })
        })
        .collect();
    for (t, handle) in threads.into_iter().enumerate() {
        let got = handle.join().unwrap();
        for (i, (g, e)) in got.iter().zip(&expected).enumerate() {
            assert_eq!(g, e, "thread {t}, query {i} {:?}", qs[i]);
        }
    }
}

/// Every iteration costs `ms`; records the calls.
struct Fixed {
    ms: f64,
    calls: Mutex<Vec<(&'static str, u32, u32)>>,
}

impl LatencyModel for Fixed {
    fn prefill_ms(&self, _: u32, _: u32, _: u32) -> Result<f64> {
        unreachable!("the mocker prices prefill chunks as mixed steps")
    }
    fn decode_ms(&self, _: u32, _: u32, _: u32) -> Result<f64> {
        unreachable!("the mocker prices one iteration at a time")
    }
    fn decode_step_ms(&self, requests: u32, _: u32, _: u32) -> Result<f64> {
        self.calls.lock().unwrap().push(("decode", 0, requests));
        Ok(self.ms)
    }
    fn mixed_step_ms(&self, ctx_tokens: u32, gen_requests: u32, _: u32, _: u32, _: u32) -> Result<f64> {
        self.calls.lock().unwrap().push(("mixed", ctx_tokens, gen_requests));
        Ok(self.ms)
    }
}

#[test]
fn mocker_loop_schedules_chunks_and_decodes() {
    let model = Fixed { ms: 10.0, calls: Mutex::new(Vec::new()) };
    let cfg = SimConfig { token_budget: 2048, max_running: 8, ..SimConfig::default() };
    let trace =
        [Request { arrival_ms: 0.0, prompt: 5000, output: 3 }, Request { arrival_ms: 5.0, prompt: 100, output: 2 }];
    let r = simulate(&model, &trace, &cfg).unwrap();
    let calls = model.calls.into_inner().unwrap();
    // t=0: chunk 2048 of A. t=10: B arrived; chunk 2048 of A (B gets none). t=20: last 904 of A
    // plus all 100 of B (both get their first token at 30). t=30, 40: both decode; B is done at
    // 40 (2 tokens), A at 50 (3 tokens).
    assert_eq!(calls, [("mixed", 2048, 0), ("mixed", 2048, 0), ("mixed", 1004, 0), ("decode", 0, 2), ("decode", 0, 1)]);
    assert_eq!(r.ttft_ms, [30.0, 25.0]);
    assert_eq!(r.tpot_ms, [10.0, 10.0]);
    assert_eq!((r.iterations, r.output_tokens, r.makespan_ms), (5, 5, 50.0));
    assert_eq!(percentile(&[3.0, 1.0, 2.0, 4.0], 50.0), 2.0);
    assert_eq!(percentile(&[3.0, 1.0, 2.0, 4.0], 99.0), 4.0);
}

#[test]
fn mocker_on_the_real_engine_is_deterministic_across_threads() {
    let cfg = SimConfig { requests: 60, rate: 6.0, ..SimConfig::default() };
    let trace = Arc::new(synthetic_trace(&cfg));
    assert_eq!(*trace, synthetic_trace(&cfg), "trace generator is not deterministic");
    let engine = Arc::new(example_engine());
    let runs: Vec<_> = (0..4)
        .map(|_| {
            let (engine, trace) = (Arc::clone(&engine), Arc::clone(&trace));
            std::thread::spawn(move || simulate(engine.as_ref(), &trace, &cfg).unwrap())
        })
        .collect();
    let reports: Vec<_> = runs.into_iter().map(|h| h.join().unwrap()).collect();
    let r = &reports[0];
    assert!(reports.iter().all(|x| x == r), "threads disagree");
    assert_eq!(r.ttft_ms.len(), 60);
    assert_eq!(r.tpot_ms.len(), 60);
    assert_eq!(r.output_tokens, trace.iter().map(|q| u64::from(q.output)).sum::<u64>());
    let (t50, t99) = (percentile(&r.ttft_ms, 50.0), percentile(&r.ttft_ms, 99.0));
    assert!(t50 > 10.0 && t50 <= t99, "TTFT p50 {t50}, p99 {t99}");
    let tpot = percentile(&r.tpot_ms, 50.0);
    assert!(tpot > 5.0 && tpot < 200.0, "TPOT p50 {tpot}");
    assert!(r.makespan_ms >= trace.last().unwrap().arrival_ms);
}

/// The README's Rust snippet is the crate-level doctest (which `cargo test` runs), so the
/// README cannot drift from code that compiles and runs.
#[test]
fn readme_rust_snippet_is_the_executed_doctest() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let readme = std::fs::read_to_string(root.join("../../README.md")).unwrap();
    let start = readme.find("```rust\n").expect("README has a Rust snippet") + "```rust\n".len();
    let snippet = &readme[start..start + readme[start..].find("```").unwrap()];
    let lib = std::fs::read_to_string(root.join("src/lib.rs")).unwrap();
    let doc: String = lib
        .lines()
        .filter_map(|l| l.strip_prefix("//!"))
        .map(|l| l.strip_prefix(' ').unwrap_or(l))
        .collect::<Vec<_>>()
        .join("\n");
    let start = doc.find("```\n#").expect("lib.rs has the doctest") + 4;
    let body = &doc[start..start + doc[start..].find("```").unwrap()];
    let visible: Vec<&str> = body.lines().filter(|l| !l.starts_with("# ")).collect();
    assert_eq!(snippet.trim_end(), visible.join("\n").trim_end());
}
