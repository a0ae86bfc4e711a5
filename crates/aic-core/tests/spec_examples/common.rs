//! Shared helpers of the spec-example tests: golden-case engines (built once per case id),
//! op JSON taken from a case's compiled op lists, single-shape evaluation and the tolerance
//! rule (≥ 10 printed significant digits → 1e-9 relative; fewer → half a unit of the last
//! printed digit, absolute).

#![allow(dead_code)]

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

use aic_core::{AicError, Engine, EngineSpec, ErrorClass, OpResult, StaticRun};
use serde_json::Value;

/// Qwen/Qwen3-32B, h200_sxm, vllm 0.24.0, tp 2 — the engine of most examples.
pub const H200_VLLM: &str = "dense/Qwen3-32B/h200_sxm/vllm/tp2-pp1-dp1";
/// Same model and system with `pp_size = 2` (40 §13.1 E7).
pub const H200_VLLM_PP2: &str = "dense/Qwen3-32B/h200_sxm/vllm/tp2-pp2-dp1";
/// Qwen/Qwen3-32B, b200_sxm, vllm 0.24.0, tp 2.
pub const B200_VLLM: &str = "dense/Qwen3-32B/b200_sxm/vllm/tp2-pp1-dp1";
/// Qwen/Qwen3-32B, h100_sxm, vllm 0.24.0, tp 2.
pub const H100_VLLM: &str = "dense/Qwen3-32B/h100_sxm/vllm/tp2-pp1-dp1";
/// Qwen/Qwen3-32B, b200_sxm, sglang 0.5.14, tp 2.
pub const B200_SGLANG: &str = "edge/Qwen3-32B/b200_sxm/sglang/tp2-pp1-dp1";

const RTOL: f64 = 1e-9;

fn goldens_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../goldens")
}

/// The once-cell stored under `key` (created and leaked on first use).
fn leaked_cell<T>(map: &mut HashMap<String, &'static OnceLock<T>>, key: &str) -> &'static OnceLock<T> {
    if let Some(cell) = map.get(key) {
        return cell;
    }
    let cell: &'static OnceLock<T> = Box::leak(Box::new(OnceLock::new()));
    map.insert(key.to_string(), cell);
    cell
}

/// A golden file (`dense.json`, `edge.json`, ...), parsed once.
fn golden_file(name: &str) -> &'static Value {
    static FILES: OnceLock<Mutex<HashMap<String, &'static OnceLock<Value>>>> = OnceLock::new();
    let cell: &'static OnceLock<Value> = {
        let mut map = FILES.get_or_init(Default::default).lock().unwrap();
        leaked_cell(&mut map, name)
    };
    cell.get_or_init(|| {
        let path = goldens_dir().join(name);
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("parse {}: {e}", path.display()))
    })
}

/// The golden case with this id (the file is the id's first path component).
pub fn case(id: &str) -> &'static Value {
    let file = format!("{}.json", id.split('/').next().unwrap());
    golden_file(&file)["cases"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == id)
        .unwrap_or_else(|| panic!("golden case {id} not found in {file}"))
}

/// The engine spec JSON of a golden case: `{"schema_version", "engine", "context_ops", "generation_ops"}`.
pub fn case_spec(id: &str) -> Value {
    let c = case(id);
    serde_json::json!({
        "schema_version": c["resolved"]["spec_schema_version"],
        "engine": c["resolved"]["engine"],
        "context_ops": c["spec_ops"]["context"],
        "generation_ops": c["spec_ops"]["generation"],
    })
}

/// The engine of a golden case, built once per id and shared by every test of the binary.
pub fn engine(id: &str) -> &'static Engine {
    static ENGINES: OnceLock<Mutex<HashMap<String, &'static OnceLock<Engine>>>> = OnceLock::new();
    let cell: &'static OnceLock<Engine> = {
        let mut map = ENGINES.get_or_init(Default::default).lock().unwrap();
        leaked_cell(&mut map, id)
    };
    cell.get_or_init(|| {
        let spec = EngineSpec::from_json(&case_spec(id).to_string()).unwrap_or_else(|e| panic!("spec of {id}: {e}"));
        Engine::from_spec(spec, None).unwrap_or_else(|e| panic!("engine of {id}: {e}"))
    })
}

/// The compiled context op list of a case.
pub fn context_ops(id: &str) -> Vec<Value> {
    case(id)["spec_ops"]["context"].as_array().unwrap().clone()
}

/// The compiled generation op list of a case.
pub fn generation_ops(id: &str) -> Vec<Value> {
    case(id)["spec_ops"]["generation"].as_array().unwrap().clone()
}

/// The op named `name` from a case's context or generation list (`{"Kind": {...}}`).
pub fn spec_op(id: &str, name: &str) -> Value {
    context_ops(id)
        .into_iter()
        .chain(generation_ops(id))
        .find(|op| op.as_object().unwrap().values().next().unwrap()["name"] == name)
        .unwrap_or_else(|| panic!("op {name} not in {id}"))
}

/// A copy of `op` with some fields of its inner object replaced (or added).
pub fn with(op: &Value, changes: &[(&str, Value)]) -> Value {
    let mut op = op.clone();
    let inner = op.as_object_mut().unwrap().values_mut().next().unwrap().as_object_mut().unwrap();
    for (k, v) in changes {
        inner.insert((*k).to_string(), v.clone());
    }
    op
}

/// `evaluate_ops_json` on an op list.
#[allow(clippy::too_many_arguments)]
pub fn eval(
    engine: &Engine,
    ops: &[Value],
    is_context: bool,
    b: u32,
    s: u32,
    prefix: u32,
    imbalance: f64,
    x: Option<u64>,
) -> Result<Vec<OpResult>, AicError> {
    let json = Value::Array(ops.to_vec()).to_string();
    engine.evaluate_ops_json(&json, is_context, b, s, prefix, imbalance, x)
}

fn single(r: Result<Vec<OpResult>, AicError>) -> OpResult {
    let mut v = r.unwrap_or_else(|e| panic!("evaluation failed: {e}"));
    assert_eq!(v.len(), 1, "expected one folded entry, got {v:?}");
    v.pop().unwrap()
}

/// One op in a context pass (`batch_size = b`, `s` new tokens, `prefix`), imbalance 1.
pub fn ctx1(engine: &Engine, op: &Value, b: u32, s: u32, prefix: u32) -> OpResult {
    single(eval(engine, std::slice::from_ref(op), true, b, s, prefix, 1.0, None))
}

/// One op in a context pass with an imbalance (seq correction) scale.
pub fn ctx1_imb(engine: &Engine, op: &Value, b: u32, s: u32, prefix: u32, imbalance: f64) -> OpResult {
    single(eval(engine, std::slice::from_ref(op), true, b, s, prefix, imbalance, None))
}

/// One op in a generation pass (`batch_size = b`, KV length `s`), imbalance 1.
pub fn gen1(engine: &Engine, op: &Value, b: u32, s: u32) -> OpResult {
    single(eval(engine, std::slice::from_ref(op), false, b, s, 0, 1.0, None))
}

/// One op in a generation pass with an imbalance (gen correction) scale.
pub fn gen1_imb(engine: &Engine, op: &Value, b: u32, s: u32, imbalance: f64) -> OpResult {
    single(eval(engine, std::slice::from_ref(op), false, b, s, 0, imbalance, None))
}

/// The error of a single-op evaluation that must fail.
pub fn ctx1_err(engine: &Engine, op: &Value, b: u32, s: u32, prefix: u32) -> AicError {
    match eval(engine, std::slice::from_ref(op), true, b, s, prefix, 1.0, None) {
        Ok(v) => panic!("expected an error, got {v:?}"),
        Err(e) => e,
    }
}

/// Sum of the latencies of a result list.
pub fn total(r: &[OpResult]) -> f64 {
    r.iter().map(|o| o.latency_ms).sum()
}

/// The entry named `name` of a folded list.
pub fn entry<'a>(r: &'a [OpResult], name: &str) -> &'a OpResult {
    r.iter().find(|o| o.name == name).unwrap_or_else(|| panic!("{name} not in {r:?}"))
}

/// Significant digits and decimal exponent of the last printed digit of a number as printed.
fn printed_precision(text: &str) -> (usize, i32) {
    let t = text.trim().trim_start_matches(['-', '+']);
    let (mantissa, exp) = match t.find(['e', 'E']) {
        Some(i) => (&t[..i], t[i + 1..].parse::<i32>().unwrap()),
        None => (t, 0),
    };
    let decimals = mantissa.find('.').map_or(0, |i| mantissa.len() - i - 1) as i32;
    let digits: String = mantissa.chars().filter(|c| c.is_ascii_digit()).collect();
    let significant = digits.trim_start_matches('0').len();
    (significant, exp - decimals)
}

/// Asserts `ours` against a reference value as printed in the spec: ≥ 10 significant digits
/// → 1e-9 relative; fewer → within half a unit of the last printed digit (absolute).
/// A printed zero must be matched to 1e-12.
#[track_caller]
pub fn check(label: &str, ours: f64, printed: &str) {
    let reference: f64 = printed.parse().unwrap_or_else(|_| panic!("bad reference literal {printed}"));
    let (significant, last_exp) = printed_precision(printed);
    if reference == 0.0 {
        assert!(ours.abs() <= 1e-12, "{label}: ours {ours} vs spec 0");
    } else if significant >= 10 {
        let rel = ((ours - reference) / reference).abs();
        assert!(rel <= RTOL, "{label}: ours {ours:.15} vs spec {printed} (rel {rel:.3e})");
    } else {
        let tol = 0.5 * 10f64.powi(last_exp) * (1.0 + 1e-9);
        let diff = (ours - reference).abs();
        assert!(diff <= tol, "{label}: ours {ours:.15} vs spec {printed} (|diff| {diff:.3e} > {tol:.1e})");
    }
}

/// Asserts agreement to 1e-9 relative with a full-precision reference value.
#[track_caller]
pub fn check_rel(label: &str, ours: f64, reference: f64) {
    let rel = if reference == 0.0 { ours.abs() } else { ((ours - reference) / reference).abs() };
    assert!(rel <= RTOL, "{label}: ours {ours:.17} vs {reference:.17} (rel {rel:.3e})");
}

/// Asserts agreement within an explicit absolute tolerance (used where the reference value is
/// a sum of printed values).
#[track_caller]
pub fn check_abs(label: &str, ours: f64, reference: f64, tol: f64) {
    let diff = (ours - reference).abs();
    assert!(diff <= tol, "{label}: ours {ours:.15} vs {reference:.15} (|diff| {diff:.3e} > {tol:.1e})");
}

/// Asserts the provenance tag of a result.
#[track_caller]
pub fn check_source(r: &OpResult, tag: &str) {
    assert_eq!(r.source.as_str(), tag, "{}: source", r.name);
}

/// Asserts a perf-database miss whose message contains `needle`.
#[track_caller]
pub fn check_perf_miss(e: &AicError, needle: &str) {
    assert_eq!(e.class(), ErrorClass::PerfDataNotAvailable, "error class of {e}");
    assert!(e.to_string().contains(needle), "error text {e:?} lacks {needle:?}");
}

/// A static run with every field spelled out.
#[allow(clippy::too_many_arguments)]
pub fn static_run(
    batch_size: u32,
    beam_width: u32,
    isl: u32,
    osl: u32,
    prefix: u32,
    seq_scale: f64,
    gen_scale: f64,
    mode: aic_core::RunMode,
    stride: u32,
) -> StaticRun {
    StaticRun { batch_size, beam_width, isl, osl, prefix, seq_scale, gen_scale, mode, stride }
}

#[test]
fn tolerance_rule_reads_printed_precision() {
    assert_eq!(printed_precision("4.322133"), (7, -6));
    assert_eq!(printed_precision("0.01810592"), (7, -8));
    assert_eq!(printed_precision("0.015615999699"), (11, -12));
    assert_eq!(printed_precision("3.42e-06"), (3, -8));
    assert_eq!(printed_precision("8.384000"), (7, -6));
    assert_eq!(printed_precision("53.67781995651973"), (16, -14));
    check("self", 4.3221334, "4.322133");
    check("self", 0.0, "0");
}

#[test]
#[should_panic(expected = "vs spec 4.322133")]
fn tolerance_rule_rejects_beyond_half_unit() {
    check("self", 4.3221336, "4.322133");
}

#[test]
#[should_panic(expected = "rel")]
fn tolerance_rule_rejects_beyond_1e9_relative() {
    check("self", 0.015615999699 * (1.0 + 2e-9), "0.015615999699");
}
