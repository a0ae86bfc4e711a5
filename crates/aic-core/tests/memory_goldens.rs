//! Replays the `memory` record of every golden case (goldens README §3) through
//! `estimate_kv_cache`: the spec comes from the case's recorded engine config and op lists,
//! the model facts from the shipped Hugging Face config, the system from `data/systems`.
//! Capacity and per-token bytes must match exactly, the other integers within 8 bytes (the
//! flooring noted in the README; the summary reports how many match exactly), and errors
//! must match errors with the same message.
//!
//! `AIC_GOLDEN_CASE=substring` narrows the run.

use std::path::{Path, PathBuf};

use aic_core::data::system::SystemSpec;
use aic_core::memory::{
    estimate_kv_cache, estimate_kv_cache_unbuilt, KvCacheRequest, MemoryFraction, ModelFacts,
    ModelFamily,
};
use aic_core::{AicError, EngineConfig, EngineSpec};
use serde_json::{json, Value};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn message(e: &AicError) -> String {
    match e {
        AicError::Value(m) => m.clone(),
        other => other.to_string(),
    }
}

fn facts_for(model: &str, family: &str) -> ModelFacts {
    let file = root()
        .join("data/model_configs")
        .join(format!("{}_config.json", model.replace('/', "--")));
    let text = std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    let mut config: Value = serde_json::from_str(&text).unwrap();
    // A multimodal wrapper's text model lives under `text_config` (read flat, as the front end does).
    if let Some(Value::Object(inner)) = config.get("text_config").cloned() {
        for (k, v) in inner {
            config[k] = v;
        }
    }
    ModelFacts::from_hf_config(&config, ModelFamily::parse(family)).unwrap()
}

fn request(args: &Value) -> KvCacheRequest {
    let f = args["memory_fraction_value"].as_f64().unwrap();
    let fraction = match args["memory_fraction_kind"].as_str().unwrap() {
        "of_free" => MemoryFraction::OfFree(f),
        "of_total" => MemoryFraction::OfTotal(f),
        other => panic!("unknown fraction kind {other}"),
    };
    KvCacheRequest::new(
        args["max_num_tokens"].as_u64().unwrap(),
        args["max_batch_size"].as_u64().unwrap(),
        fraction,
    )
}

/// The engine config the compile was asked for (for cases whose compile failed).
fn engine_from_compile(compile: &Value) -> EngineConfig {
    let mut e = json!({"model_name": compile["model"], "system_name": compile["system"],
        "backend": compile["backend"]});
    for key in [
        "tp_size",
        "pp_size",
        "attention_dp_size",
        "moe_tp_size",
        "moe_ep_size",
    ] {
        if !compile[key].is_null() {
            e[key] = compile[key].clone();
        }
    }
    serde_json::from_value(e).unwrap()
}

#[derive(Default)]
struct Tally {
    records: usize,
    values_exact: usize,
    values_within_8: usize,
    errors_matched: usize,
    compile_failures: usize,
    failures: Vec<String>,
}

const INT_KEYS: [&str; 2] = ["total_kv_size_bytes", "total_kv_size_tokens"];
const BREAKDOWN_KEYS: [&str; 4] = [
    "weights_bytes",
    "activations_bytes",
    "runtime_overhead_bytes",
    "comm_overhead_bytes",
];

fn compare_value(got: &Value, want: &Value) -> std::result::Result<bool, String> {
    let mut exact = true;
    for key in [
        "total_gpu_capacity_bytes",
        "kv_size_per_token_bytes",
        "source",
        "tolerance_adjusted",
    ] {
        if got[key] != want[key] {
            return Err(format!("{key}: got {} want {}", got[key], want[key]));
        }
    }
    let mut pairs: Vec<(String, &Value, &Value)> = INT_KEYS
        .iter()
        .map(|k| (k.to_string(), &got[*k], &want[*k]))
        .collect();
    for k in BREAKDOWN_KEYS {
        pairs.push((
            format!("memory_breakdown.{k}"),
            &got["memory_breakdown"][k],
            &want["memory_breakdown"][k],
        ));
    }
    for (key, g, w) in pairs {
        let (g, w) = (g.as_i64(), w.as_i64());
        match (g, w) {
            (Some(g), Some(w)) if g == w => {}
            (Some(g), Some(w)) if (g - w).abs() <= 8 => exact = false,
            _ => return Err(format!("{key}: got {g:?} want {w:?}")),
        }
    }
    let keys = |v: &Value| v.as_object().map(|o| o.keys().cloned().collect::<Vec<_>>());
    if keys(got) != keys(want) {
        return Err(format!("keys: got {:?} want {:?}", keys(got), keys(want)));
    }
    Ok(exact)
}

fn replay(file: &str, tally: &mut Tally) {
    replay_where(file, tally, |_| true)
}

fn replay_where(file: &str, tally: &mut Tally, select: impl Fn(&Value) -> bool) {
    let filter = std::env::var("AIC_GOLDEN_CASE").unwrap_or_default();
    let text = std::fs::read_to_string(root().join("goldens").join(file)).expect("golden file");
    let doc: Value = serde_json::from_str(&text).unwrap();
    let systems = root().join("data/systems");
    for case in doc["cases"].as_array().unwrap() {
        let id = case["id"].as_str().unwrap();
        if !id.contains(&filter) || !select(case) {
            continue;
        }
        tally.records += 1;
        let memory = &case["memory"];
        let req = request(&memory["args"]);
        let want_err = memory["error"]["message"].as_str();

        if !case["compile_error"].is_null() {
            tally.compile_failures += 1;
            let cause = case["compile_error"]["message"].as_str().unwrap();
            let Some(want) = want_err else {
                tally
                    .failures
                    .push(format!("{id}: compile failed but memory has a value"));
                continue;
            };
            if want == cause {
                // Raised before the model build (version resolution): both fail.
                tally.errors_matched += 1;
                continue;
            }
            let engine = engine_from_compile(&case["compile"]);
            match estimate_kv_cache_unbuilt(&engine, None, &req, cause) {
                Err(e) if message(&e) == want => tally.errors_matched += 1,
                other => tally
                    .failures
                    .push(format!("{id}: got {other:?}, want error {want:?}")),
            }
            continue;
        }

        let spec: EngineSpec = serde_json::from_value(json!({
            "schema_version": 15,
            "engine": case["resolved"]["engine"],
            "context_ops": case["spec_ops"]["context"],
            "generation_ops": case["spec_ops"]["generation"],
        }))
        .unwrap_or_else(|e| panic!("{id}: spec: {e}"));
        let facts = facts_for(
            case["compile"]["model"].as_str().unwrap(),
            case["resolved"]["model_family"].as_str().unwrap(),
        );
        let system = SystemSpec::load(&systems, &spec.engine.system_name).unwrap();
        match (estimate_kv_cache(&spec, &facts, &system, &req), want_err) {
            (Ok(got), None) => {
                let got = serde_json::to_value(&got).unwrap();
                match compare_value(&got, &memory["value"]) {
                    Ok(true) => tally.values_exact += 1,
                    Ok(false) => {
                        tally.values_within_8 += 1;
                        eprintln!("{id}: within 8 bytes: got {got} want {}", memory["value"]);
                    }
                    Err(d) => tally.failures.push(format!("{id}: {d}")),
                }
            }
            (Err(e), Some(want)) if message(&e) == want => tally.errors_matched += 1,
            (Err(e), Some(want)) => tally
                .failures
                .push(format!("{id}: error {:?}, want {want:?}", message(&e))),
            (Err(e), None) => tally.failures.push(format!("{id}: unexpected error {e}")),
            (Ok(got), Some(want)) => tally
                .failures
                .push(format!("{id}: got {got:?}, want error {want:?}")),
        }
    }
}

#[test]
fn memory_records_match_reference() {
    let mut tally = Tally::default();
    for file in ["dense.json", "moe.json", "mla.json", "edge.json"] {
        replay(file, &mut tally);
    }
    eprintln!(
        "{} memory records: {} values exact, {} values within 8 bytes, {} errors matched \
         ({} of them compile failures), {} failures",
        tally.records,
        tally.values_exact,
        tally.values_within_8,
        tally.errors_matched,
        tally.compile_failures,
        tally.failures.len()
    );
    for f in &tally.failures {
        eprintln!("FAIL {f}");
    }
    assert!(
        tally.failures.is_empty(),
        "{} memory records differ",
        tally.failures.len()
    );
    if std::env::var("AIC_GOLDEN_CASE").is_err() {
        assert_eq!(tally.records, 248);
    }
}

/// Context parallelism (spec 43 §6): every memory record of cp.json, compile refusals and the
/// DeepSeek-V4 case included. No formula changes: the CP spec has tp 1, the all-gather weighs
/// nothing and the KV per token is not divided by cp.
#[test]
fn cp_memory_records_match_reference() {
    let mut tally = Tally::default();
    replay_where("cp.json", &mut tally, |_| true);
    for f in &tally.failures {
        eprintln!("FAIL {f}");
    }
    assert!(tally.failures.is_empty(), "{} memory records differ", tally.failures.len());
    if std::env::var("AIC_GOLDEN_CASE").is_err() {
        assert_eq!(tally.records, 44);
    }
}

/// MiniMax-M3 (spec 36 §7): standard GQA KV, MSA projections weigh nothing; compile refusals
/// included. (Kimi-K3's KDA/MLA layer plan comes from the Python front end's facts; its records
/// replay through `aic-compile parity`.)
#[test]
fn minimax_m3_memory_records_match_reference() {
    let mut tally = Tally::default();
    let minimax = |case: &Value| case["compile"]["model"].as_str().is_some_and(|m| m.contains("MiniMax-M3"));
    replay_where("sparse_linear.json", &mut tally, minimax);
    for f in &tally.failures {
        eprintln!("FAIL {f}");
    }
    assert!(tally.failures.is_empty(), "{} memory records differ", tally.failures.len());
    if std::env::var("AIC_GOLDEN_CASE").is_err() {
        assert_eq!(tally.records, 20);
    }
}
