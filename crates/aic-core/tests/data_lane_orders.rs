//! Checks the data layer against the golden corpus: every compiled case's resolved backend
//! version (and version errors), and the `lane_order` of every top-level attention op.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use aic_core::data::lanes::{attention_lane_order, AttentionPhase};
use aic_core::data::system::SystemSpec;
use aic_core::data::versions::resolve_with;
use aic_core::{AicError, Backend};
use serde_json::Value;

fn systems_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data/systems")
}

fn golden(name: &str) -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../goldens")
        .join(format!("{name}.json"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
    serde_json::from_str(&text).unwrap()
}

type OrderKey = (String, String, String, bool, bool);

#[test]
fn golden_versions_and_lane_orders() {
    let root = systems_root();
    let mut systems: HashMap<String, SystemSpec> = HashMap::new();
    let mut orders: HashMap<OrderKey, Vec<String>> = HashMap::new();
    let (mut checked_ops, mut checked_versions, mut checked_errors) = (0, 0, 0);
    for file in ["dense", "moe", "mla", "edge"] {
        let doc = golden(file);
        for case in doc["cases"].as_array().unwrap() {
            let id = case["id"].as_str().unwrap();
            let compile = &case["compile"];
            let system_name = compile["system"].as_str().unwrap().to_string();
            let backend = Backend::parse(compile["backend"].as_str().unwrap()).unwrap();
            let system = systems
                .entry(system_name.clone())
                .or_insert_with(|| SystemSpec::load(&root, &system_name).unwrap())
                .clone();
            let requested = compile["backend_version"].as_str();
            let resolved = resolve_with(&root, &system, backend, requested, false);

            if case["resolved"].is_null() {
                let message = case["compile_error"]["message"].as_str().unwrap_or("");
                let is_version_error = message.contains("version");
                if is_version_error {
                    match resolved {
                        Err(AicError::Value(m)) => assert_eq!(m, message, "{id}"),
                        other => panic!("{id}: expected version error, got {other:?}"),
                    }
                    checked_errors += 1;
                }
                continue;
            }
            let engine = &case["resolved"]["engine"];
            let version = engine["backend_version"].as_str().unwrap().to_string();
            let resolved = resolved.unwrap_or_else(|e| panic!("{id}: {e}"));
            assert_eq!(resolved.version.as_deref(), Some(version.as_str()), "{id}");
            assert_eq!(
                resolved.tolerate_dirless,
                engine["tolerate_dirless_version"].as_bool().unwrap(),
                "{id}"
            );
            checked_versions += 1;
            let shared = engine["enable_shared_layer"].as_bool().unwrap_or(true);

            for (phase_key, op_name, phase) in [
                ("context", "ContextAttention", AttentionPhase::Context),
                ("generation", "GenerationAttention", AttentionPhase::Generation),
            ] {
                for op in case["spec_ops"][phase_key].as_array().unwrap() {
                    let Some(fields) = op.get(op_name) else {
                        continue;
                    };
                    let expected: Vec<String> = fields["lane_order"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|l| l.as_str().unwrap().to_string())
                        .collect();
                    let key = (
                        system_name.clone(),
                        backend.as_str().to_string(),
                        version.clone(),
                        shared,
                        phase == AttentionPhase::Context,
                    );
                    let got = orders.entry(key).or_insert_with(|| {
                        attention_lane_order(
                            &root, &system, backend, &version, phase, shared, None,
                        )
                        .unwrap_or_else(|e| panic!("{id}: {e}"))
                    });
                    assert_eq!(*got, expected, "{id} {phase_key}");
                    checked_ops += 1;
                }
            }
        }
    }
    assert_eq!(checked_ops, 378, "top-level attention ops checked");
    assert!(checked_versions >= 240, "only {checked_versions} versions checked");
    assert_eq!(checked_errors, 2, "version compile errors");
}
