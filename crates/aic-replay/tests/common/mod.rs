//! Shared fixtures: the repository's Qwen/Qwen3-32B spec (h200_sxm, vLLM 0.24.0, TP 2), its
//! perf tables, its model facts and the small Mooncake trace.
#![allow(dead_code)]

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use aic_core::memory::{ModelFacts, ModelFamily};
use aic_core::Engine;
use aic_replay::{Arrival, Lengths, Role, RoleBuilder, RoleSetup, SchedulerOverrides, Workload};

pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

pub fn systems() -> PathBuf {
    repo().join("data/systems")
}

pub fn spec_path() -> PathBuf {
    repo().join("crates/aic-core/examples/specs/qwen3-32b_h200_vllm_tp2.json")
}

pub fn trace_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/small_trace.jsonl")
}

/// One engine per test process (building it loads the tables).
pub fn engine() -> Arc<Engine> {
    static ENGINE: OnceLock<Arc<Engine>> = OnceLock::new();
    ENGINE.get_or_init(|| Arc::new(Engine::from_spec_file(&spec_path(), Some(&systems())).unwrap())).clone()
}

pub fn facts() -> ModelFacts {
    let path = repo().join("data/model_configs/Qwen--Qwen3-32B_config.json");
    let config: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    ModelFacts::from_hf_config(&config, ModelFamily::Llama).unwrap()
}

pub fn role(role: Role) -> RoleSetup {
    RoleBuilder::new(role, engine()).facts(facts()).build().unwrap()
}

pub fn role_with(role: Role, scheduler: SchedulerOverrides) -> RoleSetup {
    RoleBuilder::new(role, engine()).facts(facts()).scheduler(scheduler).build().unwrap()
}

pub fn closed_loop(requests: usize, concurrency: usize, isl: Lengths, osl: Lengths, seed: u64) -> Workload {
    Workload::Generated { requests, arrival: Arrival::ClosedLoop { concurrency }, isl, osl, seed }
}

pub fn trace() -> Workload {
    Workload::Trace { path: trace_path(), block_size: 512, concurrency: None, speedup: None }
}
