//! Replays 256 requests (closed loop at 32 in flight, 2048-token prompts, 256-token outputs) on
//! one aggregated worker and prints the table.
//!
//! ```sh
//! cargo run --release -p aic-replay --example replay -- [SPEC.json] [HF_CONFIG.json]
//! ```
//!
//! Without arguments it uses the repository's Qwen/Qwen3-32B spec (h200_sxm, vLLM, TP 2) and the
//! model's Hugging Face config; the perf tables come from `AIC_SYSTEMS_PATH`, else the
//! repository's `data/systems`.

use std::path::PathBuf;
use std::sync::Arc;

use aic_core::memory::{ModelFacts, ModelFamily};
use aic_core::Engine;
use aic_replay::{Arrival, Lengths, Replay, Role, RoleBuilder, Workload};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let repo = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut args = std::env::args().skip(1);
    let spec = args.next().map_or_else(|| repo.join("crates/aic-core/examples/specs/qwen3-32b_h200_vllm_tp2.json"), PathBuf::from);
    let config = args.next().map_or_else(|| repo.join("data/model_configs/Qwen--Qwen3-32B_config.json"), PathBuf::from);
    let systems = std::env::var_os("AIC_SYSTEMS_PATH").map_or_else(|| repo.join("data/systems"), PathBuf::from);

    // The compiled engine (aic's step latencies) and the model facts (aic's KV memory model).
    let engine = Engine::from_spec_file(&spec, Some(&systems))?;
    let hf_config: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&config)?)?;
    let facts = ModelFacts::from_hf_config(&hf_config, ModelFamily::Llama)?;

    // One aggregated worker with the backend's scheduler defaults and the memory model's KV size.
    let role = RoleBuilder::new(Role::Aggregated, Arc::new(engine)).facts(facts).build()?;
    let workload = Workload::Generated {
        requests: 256,
        arrival: Arrival::ClosedLoop { concurrency: 32 },
        isl: Lengths::Fixed(2048),
        osl: Lengths::Fixed(256),
        seed: 0,
    };
    let outcome = Replay::aggregated(role, 1, workload).run()?;
    print!("{}", outcome.report.to_table());
    println!("(replayed in {:.1} ms wall, {:.1} ms of it in aic)", outcome.stats.wall_ms,
        outcome.stats.timing.iter().map(|t| t.stats.time_in_model_ms).sum::<f64>());
    Ok(())
}
