//! One engine shared by many threads (issue 8): simulators call the same `Arc<Engine>` from
//! every worker, including the very first calls, which load the perf tables lazily. Every
//! thread must get the bits a single thread gets, whatever the interleaving, and a thread that
//! hits a bad input must not disturb the others.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Barrier};
use std::thread;

use aic_core::{Engine, EngineSpec, StaticRun};

const THREADS: usize = 8;

fn systems() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data/systems")
}

fn spec() -> EngineSpec {
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/specs/qwen3-32b_h200_vllm_tp2.json");
    EngineSpec::from_bytes(&std::fs::read(path).unwrap()).unwrap()
}

/// One call of the engine surface, with its arguments.
#[derive(Debug, Clone, Copy)]
enum Query {
    Prefill(u32, u32, u32),
    Decode(u32, u32, u32),
    DecodeStep(u32, u32, u32),
    Mixed(u32, u32, u32, u32, u32),
    Static(u32, u32, u32),
    PerOp(u32, u32, u32),
    /// A bad input in the middle of the stream (prefix = isl).
    Invalid(u32),
}

/// What a query returned, as bits (so equality is exact) or the error text.
type Answer = Result<Vec<u64>, String>;

fn ask(e: &Engine, q: Query) -> Answer {
    let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    let r = match q {
        Query::Prefill(b, isl, p) => e.prefill_latency_ms(b, isl, p).map(|v| bits(&[v])),
        Query::Decode(b, isl, osl) => e.decode_latency_ms(b, isl, osl).map(|v| bits(&[v])),
        Query::DecodeStep(g, isl, osl) => e
            .decode_step_latency_ms(g, isl, osl, 1.0)
            .map(|v| bits(&[v])),
        Query::Mixed(c, g, isl, osl, p) => e
            .mixed_step_breakdown(c, g, isl, osl, p, 1.0, 1.0)
            .map(|v| bits(&v)),
        Query::Static(b, isl, osl) => e
            .run_static(&StaticRun::new(b, isl, osl))
            .map(|r| bits(&[r.context_ms, r.generation_ms, r.total_ms])),
        Query::PerOp(b, isl, osl) => {
            e.run_static_per_op(&StaticRun::new(b, isl, osl))
                .map(|(c, g)| {
                    c.iter()
                        .chain(&g)
                        .flat_map(|o| [o.latency_ms.to_bits(), o.energy_wms.to_bits()])
                        .collect()
                })
        }
        Query::Invalid(isl) => e.prefill_latency_ms(1, isl, isl).map(|v| bits(&[v])),
    };
    r.map_err(|e| e.to_string())
}

/// A spread of shapes over every estimate, with a few bad inputs mixed in.
fn queries() -> Vec<Query> {
    let mut out = Vec::new();
    for (i, isl) in [1u32, 7, 128, 1000, 4096, 16_384, 40_000]
        .into_iter()
        .enumerate()
    {
        for batch in [1u32, 3, 16, 64, 256] {
            out.push(Query::Prefill(batch, isl, isl / 3));
            out.push(Query::Decode(batch, isl, 1 + (i as u32) * 17));
            out.push(Query::DecodeStep(batch, isl, 33));
            out.push(Query::Mixed(batch * 64, batch, isl, 64, 0));
        }
        out.push(Query::Static(4, isl, 40));
        out.push(Query::PerOp(2, isl, 20));
        out.push(Query::Invalid(isl));
    }
    out
}

/// Runs all queries on `threads` threads sharing `engine`, each in its own rotated order, all
/// starting together; returns each thread's answers in query order.
fn run_shared(engine: Arc<Engine>, queries: &[Query], threads: usize) -> Vec<Vec<Answer>> {
    let barrier = Arc::new(Barrier::new(threads));
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let engine = Arc::clone(&engine);
            let barrier = Arc::clone(&barrier);
            let queries = queries.to_vec();
            thread::spawn(move || {
                let n = queries.len();
                let mut answers: Vec<Option<Answer>> = vec![None; n];
                barrier.wait();
                for step in 0..n {
                    let i = (step * (2 * t + 1) + t * 7) % n; // a different order per thread
                    if answers[i].is_none() {
                        answers[i] = Some(ask(&engine, queries[i]));
                    }
                }
                for (i, slot) in answers.iter_mut().enumerate() {
                    if slot.is_none() {
                        *slot = Some(ask(&engine, queries[i]));
                    }
                }
                answers.into_iter().map(Option::unwrap).collect::<Vec<_>>()
            })
        })
        .collect();
    handles
        .into_iter()
        .map(|h| h.join().expect("a worker thread panicked"))
        .collect()
}

#[test]
fn threads_sharing_a_cold_engine_get_the_single_thread_bits() {
    let queries = queries();
    let reference_engine = Engine::from_spec(spec(), Some(&systems())).unwrap();
    let reference: Vec<Answer> = queries.iter().map(|&q| ask(&reference_engine, q)).collect();
    assert!(
        reference.iter().filter(|a| a.is_err()).count() >= 7,
        "the bad inputs must fail"
    );
    assert!(reference.iter().filter(|a| a.is_ok()).count() > 100);

    // The same data through another spelling of the folder: a separate database whose tables
    // are all still unloaded, so the threads race on the first loads.
    let cold_root = systems().join("../systems");
    let cold = Arc::new(Engine::from_spec(spec(), Some(&cold_root)).unwrap());
    assert!(
        !Arc::ptr_eq(cold.database(), reference_engine.database()),
        "the engine must not reuse the warm tables"
    );
    for (t, answers) in run_shared(cold, &queries, THREADS).into_iter().enumerate() {
        for (i, (got, want)) in answers.iter().zip(&reference).enumerate() {
            assert_eq!(got, want, "thread {t}, query {:?}", queries[i]);
        }
    }
}

#[test]
fn repeated_concurrent_rounds_agree_with_each_other() {
    let queries = queries();
    let engine = Arc::new(Engine::from_spec(spec(), Some(&systems())).unwrap());
    let first = run_shared(Arc::clone(&engine), &queries, 4);
    let second = run_shared(engine, &queries, 4);
    for answers in first.iter().chain(&second) {
        assert_eq!(answers, &first[0]);
    }
}
