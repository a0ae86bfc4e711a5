//! The batch API (`Engine::estimate_batch`): each value equals the single-call estimate bit for
//! bit, whatever the thread count, and a failing point is reported by its lowest index with
//! its arguments and the underlying error's class.

use std::path::Path;

use aic_core::{AicError, BatchKind, Engine, ErrorClass};

fn example_engine() -> Engine {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/specs/qwen3-32b_h200_vllm_tp2.json");
    Engine::from_spec_file(&path, None).unwrap()
}

/// Deterministic argument columns (xorshift), `n` points in `[lo, hi)` per column.
fn columns(n: usize, seed: u64, ranges: [(u32, u32); 3]) -> [Vec<u32>; 3] {
    let mut state = seed;
    let mut next = |lo: u32, hi: u32| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        lo + (state % u64::from(hi - lo)) as u32
    };
    let mut cols = [Vec::new(), Vec::new(), Vec::new()];
    for _ in 0..n {
        for (col, &(lo, hi)) in cols.iter_mut().zip(&ranges) {
            col.push(next(lo, hi));
        }
    }
    cols
}

#[test]
fn batch_equals_single_calls_for_every_thread_count() {
    let engine = example_engine();
    let cases = [
        (BatchKind::Decode, [(1, 512), (16, 16384), (2, 3)]),
        (BatchKind::DecodeStep, [(1, 512), (16, 16384), (2, 2048)]),
        (BatchKind::Prefill, [(1, 16), (128, 8192), (0, 1)]),
    ];
    for (kind, ranges) in cases {
        let [a, b, c] = columns(700, 0x9e37_79b9_7f4a_7c15, ranges);
        let single: Vec<u64> = (0..a.len())
            .map(|i| {
                let v = match kind {
                    BatchKind::Prefill => engine.prefill_latency_ms(a[i], b[i], c[i]),
                    BatchKind::Decode => engine.decode_latency_ms(a[i], b[i], c[i]),
                    BatchKind::DecodeStep => engine.decode_step_latency_ms(a[i], b[i], c[i], 1.0),
                };
                v.unwrap().to_bits()
            })
            .collect();
        for threads in [Some(1), Some(2), Some(3), None] {
            let batch = engine.estimate_batch(kind, &a, &b, &c, threads).unwrap();
            let bits: Vec<u64> = batch.iter().map(|v| v.to_bits()).collect();
            assert_eq!(bits, single, "{kind:?} with threads {threads:?}");
        }
    }
}

#[test]
fn the_lowest_failing_point_is_reported() {
    let engine = example_engine();
    // Prefill with prefix >= isl fails; put failures in several chunks.
    let n = 2000;
    let a = vec![1u32; n];
    let b = vec![1024u32; n];
    let mut c = vec![0u32; n];
    for i in [1500, 700, 1999] {
        c[i] = 1024;
    }
    for threads in [Some(1), Some(2), None] {
        let err = engine.estimate_batch(BatchKind::Prefill, &a, &b, &c, threads).unwrap_err();
        match &err {
            AicError::BatchPoint { index, point, source } => {
                assert_eq!(*index, 700);
                assert_eq!(*point, [1, 1024, 1024]);
                assert!(source.to_string().contains("isl must be greater than 0 after removing prefix"), "{source}");
            }
            other => panic!("expected a BatchPoint error, got {other:?}"),
        }
        assert_eq!(err.class(), ErrorClass::Value);
        assert!(err.to_string().starts_with("batch point 700 [1, 1024, 1024]: invalid engine config"), "{err}");
    }
}

#[test]
fn bad_batch_arguments_are_typed_errors() {
    let engine = example_engine();
    let err = engine.estimate_batch(BatchKind::Decode, &[1, 2], &[128], &[2, 2], None).unwrap_err();
    assert!(err.to_string().contains("equal lengths, got 2, 1, 2"), "{err}");
    let err = engine.estimate_batch(BatchKind::Decode, &[1], &[128], &[2], Some(0)).unwrap_err();
    assert!(err.to_string().contains("threads must be at least 1"), "{err}");
    // An absurd thread count is refused before any thread starts.
    let too_many = aic_core::engine::max_batch_threads() + 1;
    let err = engine.estimate_batch(BatchKind::Decode, &[1], &[128], &[2], Some(too_many)).unwrap_err();
    assert!(err.to_string().contains(&format!("threads must be at most {}", too_many - 1)), "{err}");
    assert_eq!(err.class(), ErrorClass::Value);
    let err = BatchKind::parse("mixed").unwrap_err();
    assert!(err.to_string().contains("expected \"prefill\", \"decode\" or \"decode_step\""), "{err}");
    assert_eq!(engine.estimate_batch(BatchKind::Decode, &[], &[], &[], None).unwrap(), Vec::<f64>::new());
}
