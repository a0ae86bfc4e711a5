//! Op-level calls a Rust caller makes on a compiled engine (spec 40 §8.3, §9): index-addressed
//! evaluation of the compiled op lists, the per-op decode and mixed steps, the data-plane
//! views (attention-lane densities, nested table views), the util-level tables and op JSON,
//! against the reference's answers recorded in `goldens/surface.json` for the checked-in
//! example spec (Qwen/Qwen3-32B, h200_sxm, vllm 0.24.0, tp 2).

use std::path::{Path, PathBuf};

use aic_core::data::tables::TABLE_VIEW_ATTRIBUTES;
use aic_core::memory::op_weight_bytes;
use aic_core::ops::util_levels::{GEMM_UTIL_LEVELS, MOE_UTIL_LEVELS};
use aic_core::spec::{op_from_json, op_variant, ops_from_json, ops_to_json};
use aic_core::{Engine, ErrorClass, OpResult};
use serde_json::Value;

const CASE: &str = "Qwen3-32B__h200_sxm__vllm__tp2";

fn example_engine() -> Engine {
    let path: PathBuf = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/specs/qwen3-32b_h200_vllm_tp2.json");
    Engine::from_spec_file(&path, None).unwrap()
}

fn surface() -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../goldens/surface.json");
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

fn case() -> Value {
    surface()["cases"].as_array().unwrap().iter().find(|c| c["id"] == CASE).unwrap().clone()
}

fn records<'a>(case: &'a Value, kind: &str) -> Vec<&'a Value> {
    case["records"].as_array().unwrap().iter().filter(|r| r["kind"] == kind).collect()
}

fn arg_u32(args: &Value, name: &str, default: u32) -> u32 {
    args.get(name).and_then(Value::as_u64).map_or(default, |v| v as u32)
}

fn arg_f64(args: &Value, name: &str) -> f64 {
    args.get(name).and_then(Value::as_f64).unwrap_or(1.0)
}

fn assert_rows(ours: &[OpResult], reference: &Value, what: &str) {
    let reference = reference.as_array().unwrap();
    assert_eq!(ours.len(), reference.len(), "{what}: {ours:?}");
    for (o, r) in ours.iter().zip(reference) {
        assert_eq!(o.name, r[0].as_str().unwrap(), "{what}");
        for (value, want) in [(o.latency_ms, r[1].as_f64().unwrap()), (o.energy_wms, r[2].as_f64().unwrap())] {
            let ok = if want == 0.0 { value == 0.0 } else { ((value - want) / want).abs() <= 1e-9 };
            assert!(ok, "{what}/{}: {value} vs {want}", o.name);
        }
        assert_eq!(o.source.as_str(), r[3].as_str().unwrap(), "{what}/{}", o.name);
    }
}

fn indices(args: &Value) -> Vec<usize> {
    args["indices"].as_array().unwrap().iter().map(|v| v.as_u64().unwrap() as usize).collect()
}

#[test]
fn index_addressed_evaluation_matches_the_reference() {
    let engine = example_engine();
    let case = case();
    for r in records(&case, "evaluate_context_ops") {
        let a = &r["args"];
        let got = engine.evaluate_context_ops(
            &indices(a),
            arg_u32(a, "batch_size", 0),
            arg_u32(a, "s", 0),
            arg_u32(a, "prefix", 0),
            arg_f64(a, "seq_imbalance_correction_scale"),
            None,
        );
        match r.get("error") {
            Some(e) => assert_eq!(got.unwrap_err().to_string(), e["message"].as_str().unwrap()),
            None => assert_rows(&got.unwrap(), &r["result"], "evaluate_context_ops"),
        }
    }
    for r in records(&case, "evaluate_generation_ops") {
        let a = &r["args"];
        let got = engine.evaluate_generation_ops(
            &indices(a),
            arg_u32(a, "batch_size", 0),
            arg_u32(a, "s", 0),
            arg_f64(a, "gen_seq_imbalance_correction_scale"),
            arg_u32(a, "prefix", 0),
            None,
        );
        match r.get("error") {
            Some(e) => assert_eq!(got.unwrap_err().to_string(), e["message"].as_str().unwrap()),
            None => assert_rows(&got.unwrap(), &r["result"], "evaluate_generation_ops"),
        }
    }
}

#[test]
fn a_repeated_index_adds_into_its_first_entry() {
    let engine = example_engine();
    let once = engine.evaluate_context_ops(&[2], 2, 1024, 0, 1.0, None).unwrap();
    let twice = engine.evaluate_context_ops(&[2, 0, 2], 2, 1024, 0, 1.0, None).unwrap();
    assert_eq!(twice.len(), 2);
    assert_eq!(twice[0].name, once[0].name);
    assert_eq!(twice[0].latency_ms, 2.0 * once[0].latency_ms);
}

#[test]
fn per_op_steps_match_the_reference() {
    let engine = example_engine();
    let case = case();
    for r in records(&case, "decode_step_per_op") {
        let a = &r["args"];
        let got = engine
            .decode_step_per_op(
                arg_u32(a, "gen_tokens", 0),
                arg_u32(a, "isl", 0),
                arg_u32(a, "osl", 0),
                arg_f64(a, "gen_seq_imbalance_correction_scale"),
            )
            .unwrap();
        assert_rows(&got, &r["result"], "decode_step_per_op");
    }
    for r in records(&case, "mixed_step_breakdown_per_op") {
        let a = &r["args"];
        let got = engine
            .mixed_step_breakdown_per_op(
                arg_u32(a, "ctx_tokens", 0),
                arg_u32(a, "gen_tokens", 0),
                arg_u32(a, "isl", 0),
                arg_u32(a, "osl", 0),
                arg_u32(a, "prefix", 0),
                arg_f64(a, "seq_imbalance_correction_scale"),
                arg_f64(a, "gen_seq_imbalance_correction_scale"),
            )
            .unwrap();
        for (part, reference) in got.iter().zip(r["result"].as_array().unwrap()) {
            assert_rows(part, reference, "mixed_step_breakdown_per_op");
        }
    }
}

#[test]
fn data_plane_views_match_the_reference() {
    let engine = example_engine();
    let case = case();
    for r in records(&case, "attention_lane_density") {
        let got = engine.attention_lane_density(r["args"]["attribute"].as_str().unwrap());
        match r.get("error") {
            Some(e) => {
                let err = got.unwrap_err();
                assert_eq!(err.class(), ErrorClass::Value);
                assert_eq!(err.to_string(), e["message"].as_str().unwrap());
            }
            None => {
                let rows: Vec<Value> =
                    got.unwrap().into_iter().map(|d| serde_json::json!([d.lane, d.slices, d.rows])).collect();
                assert_eq!(Value::Array(rows), r["result"]);
            }
        }
    }
    for r in records(&case, "table_view_json") {
        let attribute = r["args"]["attribute"].as_str().unwrap();
        let got = engine.table_view_json(attribute);
        match (r.get("error"), &r["result"]) {
            (Some(e), _) => {
                let err = got.unwrap_err();
                assert_eq!(err.class(), ErrorClass::PerfDataNotAvailable);
                assert_eq!(err.to_string(), e["message"].as_str().unwrap());
            }
            (None, Value::Null) => assert_eq!(got.unwrap(), None, "{attribute}"),
            (None, reference) => {
                let text = got.unwrap().unwrap();
                assert_eq!(text.len() as u64, reference["length"].as_u64().unwrap(), "{attribute}");
                // The GEMM view (6.9 MB) is recorded by its SHA-256 only, which the surface
                // parity family checks; here its length and opening bytes.
                match reference["text"].as_str() {
                    Some(reference_text) => assert_eq!(text, reference_text, "{attribute}"),
                    None => assert!(text.starts_with("{\"bfloat16\":{\""), "{attribute}: {}", &text[..80]),
                }
            }
        }
    }
}

#[test]
fn module_tables_and_op_json_match_the_reference() {
    let surface = surface();
    let module = surface["module"].as_array().unwrap();
    let result = |kind: &str| module.iter().find(|r| r["kind"] == kind).unwrap()["result"].clone();
    let triples = |t: &[(f64, f64, f64)]| serde_json::to_value(t).unwrap();
    assert_eq!(triples(&GEMM_UTIL_LEVELS), result("gemm_quant_util_levels"));
    assert_eq!(triples(&MOE_UTIL_LEVELS), result("moe_quant_util_levels"));
    assert_eq!(serde_json::to_value(&TABLE_VIEW_ATTRIBUTES[..]).unwrap(), result("table_view_attributes"));

    let case = case();
    let ops = case["spec"]["context_ops"].to_string();
    let weights: Vec<f64> = ops_from_json(&ops).unwrap().iter().map(op_weight_bytes).collect();
    assert_eq!(serde_json::to_value(weights).unwrap(), records(&case, "weights_ops_json")[0]["result"]);
    let first = op_from_json(&case["spec"]["context_ops"][0].to_string()).unwrap();
    assert_eq!(op_variant(&first), "Embedding");
    let back: Value = serde_json::from_str(&ops_to_json(&[first])).unwrap();
    assert_eq!(back, records(&case, "op_roundtrip")[0]["result"]);
}
