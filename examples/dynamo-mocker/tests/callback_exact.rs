//! The aic-backed `AisCallback` inside dynamo-mocker's real offline replay: every call the
//! mocker makes is recorded with the answer, and each answer must be, bit for bit, the direct
//! `aic_core::Engine` estimate for the trait-level step (prefix added back to the new tokens,
//! decode priced one token earlier than the mocker's `(isl, osl = 2)` reads).

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use aic_core::memory::{ModelFacts, ModelFamily};
use aic_core::{Engine, RunMode, StaticRun};
use aic_dynamo_mocker::{mocker_config, AicAisCallback};
use aic_replay::{Role, RoleBuilder, RoleSetup, SchedulerOverrides};
use dynamo_mocker::common::perf_model::AisCallback;
use dynamo_mocker::common::protocols::DirectRequest;
use dynamo_mocker::replay::simulate_concurrency_requests;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn engine() -> Arc<Engine> {
    let spec = repo().join("crates/aic-core/examples/specs/qwen3-32b_h200_vllm_tp2.json");
    Arc::new(Engine::from_spec_file(&spec, Some(&repo().join("data/systems"))).unwrap())
}

fn setup(engine: &Arc<Engine>, scheduler: SchedulerOverrides) -> RoleSetup {
    let path = repo().join("data/model_configs/Qwen--Qwen3-32B_config.json");
    let config: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let facts = ModelFacts::from_hf_config(&config, ModelFamily::Llama).unwrap();
    RoleBuilder::new(Role::Aggregated, Arc::clone(engine))
        .facts(facts)
        .scheduler(scheduler)
        .build()
        .unwrap()
}

/// One call the mocker made, with the callback's answer.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Call {
    Prefill {
        batch: usize,
        effective_isl: usize,
        prefix: usize,
        ms: f64,
    },
    Decode {
        batch: usize,
        isl: usize,
        osl: usize,
        ms: f64,
    },
}

/// Forwards to the real callback and keeps every call.
struct Recording {
    inner: AicAisCallback,
    calls: Mutex<Vec<Call>>,
}

impl AisCallback for Recording {
    fn predict_prefill(
        &self,
        batch: usize,
        effective_isl: usize,
        prefix: usize,
    ) -> anyhow::Result<f64> {
        let ms = self.inner.predict_prefill(batch, effective_isl, prefix)?;
        self.calls.lock().unwrap().push(Call::Prefill {
            batch,
            effective_isl,
            prefix,
            ms,
        });
        Ok(ms)
    }

    fn predict_decode(&self, batch: usize, isl: usize, osl: usize) -> anyhow::Result<f64> {
        let ms = self.inner.predict_decode(batch, isl, osl)?;
        self.calls.lock().unwrap().push(Call::Decode {
            batch,
            isl,
            osl,
            ms,
        });
        Ok(ms)
    }
}

/// Runs `requests` through the mocker's offline concurrency replay and returns its calls.
fn replay_calls(
    engine: &Arc<Engine>,
    setup: &RoleSetup,
    requests: Vec<DirectRequest>,
    in_flight: usize,
) -> Vec<Call> {
    let recording = Arc::new(Recording {
        inner: AicAisCallback::new(Arc::clone(engine)),
        calls: Mutex::new(Vec::new()),
    });
    let args = mocker_config(setup, recording.clone()).unwrap();
    let report = simulate_concurrency_requests(args, requests.clone(), in_flight, 1).unwrap();
    assert_eq!(report.request_counts.completed_requests, requests.len());
    let calls = recording.calls.lock().unwrap().clone();
    calls
}

fn request(index: usize, tokens: Vec<u32>, osl: usize) -> DirectRequest {
    DirectRequest {
        tokens,
        max_output_tokens: osl,
        uuid: Some(uuid::Uuid::from_u128(index as u128 + 1)),
        ..Default::default()
    }
}

/// Every recorded answer equals the direct engine call for the same step.
#[test]
fn answers_are_direct_engine_estimates_for_the_recorded_arguments() {
    let engine = engine();
    // Small pass budget (chunked prompts: later chunks have earlier ones as prefix) and a shared
    // 512-token system prompt (prefix-cache hits).
    let setup = setup(
        &engine,
        SchedulerOverrides {
            max_num_batched_tokens: Some(384),
            ..Default::default()
        },
    );
    let shared: Vec<u32> = (0..512).map(|t| 1_000_000 + t).collect();
    let requests = (0..8)
        .map(|i| {
            let own = (0..(300 + 40 * i as u32)).map(|t| (i as u32) * 10_000 + t);
            request(i, shared.iter().copied().chain(own).collect(), 12)
        })
        .collect();
    let calls = replay_calls(&engine, &setup, requests, 3);

    let (mut prefills, mut with_prefix, mut decodes, mut batched_decodes) = (0, 0, 0, 0);
    for call in &calls {
        match *call {
            Call::Prefill {
                batch,
                effective_isl,
                prefix,
                ms,
            } => {
                let direct = engine
                    .prefill_latency_ms(
                        batch as u32,
                        (effective_isl + prefix) as u32,
                        prefix as u32,
                    )
                    .unwrap();
                assert_eq!(
                    ms.to_bits(),
                    direct.to_bits(),
                    "{call:?}: direct prefill gives {direct}"
                );
                prefills += 1;
                with_prefix += usize::from(prefix > 0);
            }
            Call::Decode {
                batch,
                isl,
                osl,
                ms,
            } => {
                assert_eq!(osl, 2, "dynamo-mocker 1.6.1 passes osl = 2: {call:?}");
                let direct = engine
                    .decode_step_latency_ms(batch as u32, isl as u32 - 1, 0, 1.0)
                    .unwrap();
                assert_eq!(
                    ms.to_bits(),
                    direct.to_bits(),
                    "{call:?}: direct decode step gives {direct}"
                );
                decodes += 1;
                batched_decodes += usize::from(batch > 1);
            }
        }
    }
    assert!(
        prefills > 8 && with_prefix > 0,
        "chunked and cached prefills expected: {prefills} prefills, {with_prefix} with a prefix"
    );
    assert!(
        decodes > 0 && batched_decodes > 0,
        "batched decode steps expected: {decodes} decodes"
    );
}

/// One request alone: the mocker's calls are the prompt's prefill and one decode step per output
/// token after the first, at sequence lengths isl + 1 … isl + osl − 1. Their answers are aic's
/// TTFT for the prompt and the decode steps of aic's own static generation phase (stride 1),
/// which checks the one-token offset against an independent engine entry point.
#[test]
fn a_lone_request_is_priced_like_aics_static_run() {
    let engine = engine();
    let setup = setup(&engine, SchedulerOverrides::default());
    let (isl, osl) = (2048usize, 40usize);
    let calls = replay_calls(
        &engine,
        &setup,
        vec![request(0, (0..isl as u32).collect(), osl)],
        1,
    );

    let prefill: Vec<&Call> = calls
        .iter()
        .filter(|c| matches!(c, Call::Prefill { .. }))
        .collect();
    let direct_ttft = engine.prefill_latency_ms(1, isl as u32, 0).unwrap();
    assert_eq!(
        prefill,
        [&Call::Prefill {
            batch: 1,
            effective_isl: isl,
            prefix: 0,
            ms: direct_ttft
        }]
    );

    let decode: Vec<(usize, f64)> = calls
        .iter()
        .filter_map(|c| match *c {
            Call::Decode {
                batch: 1,
                isl,
                osl: 2,
                ms,
            } => Some((isl, ms)),
            Call::Decode { .. } => panic!("unexpected decode call {c:?}"),
            Call::Prefill { .. } => None,
        })
        .collect();
    let lengths: Vec<usize> = decode.iter().map(|(l, _)| *l).collect();
    assert_eq!(lengths, (isl + 1..isl + osl).collect::<Vec<_>>());
    let run = StaticRun {
        mode: RunMode::StaticGen,
        stride: 1,
        ..StaticRun::new(1, isl as u32, osl as u32)
    };
    let generation_ms = engine.run_static(&run).unwrap().generation_ms;
    let summed = decode.iter().fold(0.0, |total, (_, ms)| total + ms);
    assert_eq!(
        summed.to_bits(),
        generation_ms.to_bits(),
        "decode steps sum to {summed}, aic's generation phase is {generation_ms}"
    );
}
