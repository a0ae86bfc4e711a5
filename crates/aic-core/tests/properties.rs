//! Properties every estimate must have, checked on random arguments (issue 8) against the
//! checked-in example engine (Qwen3-32B, h200_sxm, vLLM 0.24.0, TP 2) on the shipped tables.
//!
//! * Every estimate is a finite, non-negative number, or a typed error; even `u32::MAX`
//!   arguments never panic or wrap.
//! * Monotone where the composition makes it so, exactly: more output tokens never make a
//!   decode cheaper; a decode step depends on `isl` / `osl` only through its KV position.
//! * Monotone where the measured tables are: the shipped tables are NOT monotone everywhere,
//!   and neither is the reference (its golden `edge/Qwen3-32B/h200_sxm/vllm/tp2-pp1-dp1` prices
//!   a 2-token prefill above a 7-token one). Kernel-selection steps in the GEMM table make
//!   prefill cheaper at some larger shapes (`prefill(1, 2)` = 13.708 ms > `prefill(1, 3)` =
//!   13.131 ms; `prefill(1, 4352)` > `prefill(1, 4353)`), and decode steps are not monotone in
//!   batch or KV length (e.g. batch 3 is cheaper than batch 2). An exhaustive scan of the example
//!   engine found two regions where they are monotone, and those are the properties checked:
//!   prefill never gets cheaper with a larger batch when prompts are at least 512 tokens
//!   (batch ≤ 64, isl ≤ 16 384), nor with a longer prompt once the batch holds 8 192 to
//!   32 768 tokens (the GEMM table's upper `m`).
//! * Exact grid points return the table value: a GEMM at a measured `(m, n, k)` gives the
//!   measured latency (raised to the roofline, as the loader does).
//! * A batch call gives the same bits on 1, 2 or 4 threads, on rayon's pool, and when repeated.
//!
//! Case counts are small (the suite runs in a debug build on two cores); raise them with
//! `PROPTEST_CASES=N`.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use aic_core::data::parquet::RawTable;
use aic_core::data::system::SystemSpec;
use aic_core::lookup::sol::gemm_sol_ms;
use aic_core::{BatchKind, Engine, EngineSpec, RunMode, StaticRun};
use proptest::prelude::*;

fn systems() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data/systems")
}

fn engine() -> &'static Engine {
    static ENGINE: OnceLock<Engine> = OnceLock::new();
    ENGINE.get_or_init(|| {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("examples/specs/qwen3-32b_h200_vllm_tp2.json");
        let spec = EngineSpec::from_bytes(&std::fs::read(path).unwrap()).unwrap();
        Engine::from_spec(spec, Some(&systems())).unwrap()
    })
}

fn config(cases: u32) -> ProptestConfig {
    ProptestConfig {
        cases: std::env::var("PROPTEST_CASES")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(cases),
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

/// A value that may come back from any estimate: a number of milliseconds.
fn is_time(v: f64) -> bool {
    v.is_finite() && v >= 0.0
}

/// A random prompt `(isl, prefix)` with `prefix < isl`.
fn prompt(max_isl: u32) -> impl Strategy<Value = (u32, u32)> {
    (1..=max_isl).prop_flat_map(|isl| (Just(isl), 0..isl))
}

proptest! {
    #![proptest_config(config(48))]

    #[test]
    fn estimates_are_finite_and_non_negative(
        batch in 1u32..=256,
        (isl, prefix) in prompt(32_768),
        osl in 0u32..=512,
        ctx in 1u32..=8192,
        gen in 0u32..=256,
    ) {
        let e = engine();
        let prefill = e.prefill_latency_ms(batch, isl, prefix).unwrap();
        let decode = e.decode_latency_ms(batch, isl, osl).unwrap();
        let step = e.decode_step_latency_ms(gen, isl, osl, 1.0).unwrap();
        let mixed = e.mixed_step_breakdown(ctx, gen, isl, osl, prefix, 1.0, 1.0).unwrap();
        for v in [prefill, decode, step].into_iter().chain(mixed) {
            prop_assert!(is_time(v), "{v} for batch {batch} isl {isl} prefix {prefix} osl {osl} ctx {ctx} gen {gen}");
        }
        let run = StaticRun { prefix, ..StaticRun::new(batch, isl, osl.min(64)) };
        let (context, generation) = e.run_static_per_op(&run).unwrap();
        for op in context.iter().chain(&generation) {
            prop_assert!(is_time(op.latency_ms) && is_time(op.energy_wms), "{op:?}");
        }
    }

    #[test]
    fn extreme_arguments_never_panic_or_wrap(
        batch in any::<u32>(),
        isl in any::<u32>(),
        prefix in any::<u32>(),
        osl in any::<u32>(),
        short_osl in 0u32..=64,
    ) {
        let e = engine();
        let results = [
            e.prefill_latency_ms(batch, isl, prefix),
            e.decode_latency_ms(batch, isl, short_osl),
            e.decode_step_latency_ms(batch, isl, osl, 1.0),
            e.mixed_step_latency_ms(batch, batch, isl, osl, prefix, 1.0, 1.0),
        ];
        for v in results.into_iter().flatten() {
            prop_assert!(is_time(v), "{v} for batch {batch} isl {isl} prefix {prefix} osl {osl}");
        }
    }

    #[test]
    fn more_output_tokens_never_make_a_decode_cheaper(batch in 1u32..=128, isl in 1u32..=8192, osl in 0u32..=300) {
        let e = engine();
        let shorter = e.decode_latency_ms(batch, isl, osl).unwrap();
        let longer = e.decode_latency_ms(batch, isl, osl + 1).unwrap();
        prop_assert!(longer >= shorter, "osl {osl}: {shorter} -> {longer}");
    }

    #[test]
    fn a_decode_step_depends_on_isl_and_osl_only_through_the_kv_position(
        batch in 1u32..=256,
        kv in 3u32..=65_536,
        split in 0.0f64..1.0,
        odd in any::<bool>(),
    ) {
        // KV position s = max(isl, 1) + osl / 2 + 1: (kv - 1, 0) and (kv - 1 - d, 2d [+ 1]) meet.
        let d = ((f64::from(kv - 2)) * split) as u32;
        let e = engine();
        let direct = e.decode_step_latency_ms(batch, kv - 1, 0, 1.0).unwrap();
        let split_up = e.decode_step_latency_ms(batch, kv - 1 - d, 2 * d + u32::from(odd), 1.0).unwrap();
        prop_assert_eq!(direct.to_bits(), split_up.to_bits());
    }

    #[test]
    fn long_prompts_never_get_cheaper_with_a_larger_batch(batch in 1u32..=63, isl in 512u32..=16_384) {
        let e = engine();
        let smaller = e.prefill_latency_ms(batch, isl, 0).unwrap();
        let larger = e.prefill_latency_ms(batch + 1, isl, 0).unwrap();
        prop_assert!(larger >= smaller, "isl {isl}: batch {batch} {smaller} > batch {} {larger}", batch + 1);
    }

    #[test]
    fn full_batches_never_get_cheaper_with_a_longer_prompt(
        (batch, isl) in (1u32..=64).prop_flat_map(|b| (Just(b), 8192u32.div_ceil(b)..32_768 / b)),
    ) {
        let e = engine();
        let shorter = e.prefill_latency_ms(batch, isl, 0).unwrap();
        let longer = e.prefill_latency_ms(batch, isl + 1, 0).unwrap();
        prop_assert!(longer >= shorter, "batch {batch}: isl {isl} {shorter} > isl {} {longer}", isl + 1);
    }
}

/// The first row of each bf16 `(m, n, k)` in the example's own GEMM file (first wins, as the
/// loader merges): `(m, n, k, latency)`.
fn measured_gemm_points() -> &'static [(u32, u32, u32, f64)] {
    static POINTS: OnceLock<Vec<(u32, u32, u32, f64)>> = OnceLock::new();
    POINTS.get_or_init(|| {
        let path = systems().join("data/h200_sxm/gemm/vllm/0.24.0/gemm_perf.parquet");
        let t = RawTable::read_columns(&path, &["gemm_dtype", "m", "n", "k", "latency"]).unwrap();
        let dtype = t.str_codes("gemm_dtype").unwrap();
        let bf16 = dtype.code_of("bfloat16").expect("the table has bf16 rows");
        let (m, n, k, latency) = (
            t.int("m").unwrap(),
            t.int("n").unwrap(),
            t.int("k").unwrap(),
            t.float("latency").unwrap(),
        );
        let mut seen = std::collections::HashSet::new();
        (0..t.num_rows)
            .filter(|&i| dtype.codes[i] == bf16 && seen.insert((m[i], n[i], k[i])))
            .map(|i| (m[i] as u32, n[i] as u32, k[i] as u32, latency[i]))
            .collect()
    })
}

proptest! {
    #![proptest_config(config(64))]

    #[test]
    fn gemm_grid_points_return_the_table_value(index in any::<prop::sample::Index>()) {
        let points = measured_gemm_points();
        let (m, n, k, measured) = points[index.index(points.len())];
        let gpu = SystemSpec::load(&systems(), "h200_sxm").unwrap().gpu;
        let roofline = gemm_sol_ms(f64::from(m), f64::from(n), f64::from(k), gpu.bfloat16_tc_flops.unwrap(), 2.0, gpu.mem_bw);
        let ops = format!(
            r#"[{{"Gemm":{{"name":"probe","scale_factor":1.0,"n":{n},"k":{k},"quant_mode":"bfloat16","scale_num_tokens":1}}}}]"#
        );
        let got = engine().evaluate_ops_json(&ops, true, 1, m, 0, 1.0, None).unwrap();
        prop_assert_eq!(got.len(), 1);
        prop_assert_eq!(got[0].latency_ms.to_bits(), measured.max(roofline).to_bits(), "m {} n {} k {}", m, n, k);
    }
}

/// Valid arguments `(a, b, c)` for a batch estimate of `kind`.
fn batch_point(kind: BatchKind) -> BoxedStrategy<(u32, u32, u32)> {
    match kind {
        BatchKind::Prefill => (1u32..=64, prompt(8192))
            .prop_map(|(b, (isl, p))| (b, isl, p))
            .boxed(),
        BatchKind::Decode => (1u32..=64, 1u32..=8192, 0u32..=40).boxed(),
        BatchKind::DecodeStep => (0u32..=256, 0u32..=16_384, 0u32..=1024).boxed(),
    }
}

fn batch_case() -> impl Strategy<Value = (BatchKind, Vec<(u32, u32, u32)>)> {
    prop_oneof![
        Just(BatchKind::Prefill),
        Just(BatchKind::Decode),
        Just(BatchKind::DecodeStep)
    ]
    .prop_flat_map(|kind| {
        (
            Just(kind),
            prop::collection::vec(batch_point(kind), 1..=600),
        )
    })
}

proptest! {
    #![proptest_config(config(12))]

    #[test]
    fn batch_results_do_not_depend_on_threads_or_repetition((kind, points) in batch_case()) {
        let e = engine();
        let a: Vec<u32> = points.iter().map(|p| p.0).collect();
        let b: Vec<u32> = points.iter().map(|p| p.1).collect();
        let c: Vec<u32> = points.iter().map(|p| p.2).collect();
        let bits = |v: Vec<f64>| v.into_iter().map(f64::to_bits).collect::<Vec<_>>();
        let single = bits(e.estimate_batch(kind, &a, &b, &c, Some(1)).unwrap());
        for threads in [Some(2), Some(4), None, Some(1)] {
            prop_assert_eq!(&bits(e.estimate_batch(kind, &a, &b, &c, threads).unwrap()), &single, "threads {:?}", threads);
        }
        let one_by_one: Vec<f64> = points
            .iter()
            .map(|&(x, y, z)| match kind {
                BatchKind::Prefill => e.prefill_latency_ms(x, y, z),
                BatchKind::Decode => e.decode_latency_ms(x, y, z),
                BatchKind::DecodeStep => e.decode_step_latency_ms(x, y, z, 1.0),
            }.unwrap())
            .collect();
        prop_assert_eq!(&bits(one_by_one), &single);
    }
}

#[test]
fn static_run_parts_add_up_and_ignore_the_mode_they_skip() {
    let e = engine();
    let full = e.run_static(&StaticRun::new(8, 2048, 200)).unwrap();
    let ctx = e
        .run_static(&StaticRun {
            mode: RunMode::StaticCtx,
            ..StaticRun::new(8, 2048, 200)
        })
        .unwrap();
    let gen = e
        .run_static(&StaticRun {
            mode: RunMode::StaticGen,
            ..StaticRun::new(8, 2048, 200)
        })
        .unwrap();
    assert_eq!(full.context_ms.to_bits(), ctx.context_ms.to_bits());
    assert_eq!(full.generation_ms.to_bits(), gen.generation_ms.to_bits());
    assert_eq!(
        full.total_ms.to_bits(),
        (full.context_ms + full.generation_ms).to_bits()
    );
    assert!(is_time(full.total_ms) && full.generation_ms > 0.0);
}
