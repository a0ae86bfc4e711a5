//! Forward-pass perf model over compiled engines: the native examples, the online correction
//! examples and the construction paths of spec 42 §5, §12. Engines come from the goldens'
//! recorded specs (`resolved.engine` + `spec_ops`), so no Python compile step is needed.

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use aic_core::fpm::{CompileRequest, ForwardPassMetrics, ForwardPassPerfModel, WorkloadKind};
use aic_core::{Engine, EngineSpec};
use serde_json::{json, Value};

const QWEN_CASE: &str = "dense/Qwen3-32B/h200_sxm/vllm/tp2-pp1-dp1";
const DSV3_CASE: &str = "mla/DeepSeek-V3/h200_sxm/trtllm/tp8-pp1-dp1-mtp1-ep8/fmha=bfloat16";
const QWEN_CONFIG: &str = r#"{"schema_version":1,"model_name":"Qwen/Qwen3-32B","system_name":"h200_sxm","backend":"vllm","backend_version":null,"tp_size":2,"pp_size":1}"#;

fn goldens_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../goldens")
}

/// The spec JSON of a golden case, optionally with its ops rewritten.
fn golden_spec_json(file: &str, case_id: &str, patch: impl Fn(&mut Value)) -> String {
    let text = std::fs::read_to_string(goldens_dir().join(file)).expect("golden file");
    let doc: Value = serde_json::from_str(&text).unwrap();
    let case = doc["cases"].as_array().unwrap().iter().find(|c| c["id"] == case_id).expect("golden case");
    let mut spec = json!({
        "schema_version": 15,
        "engine": case["resolved"]["engine"],
        "context_ops": case["spec_ops"]["context"],
        "generation_ops": case["spec_ops"]["generation"],
    });
    patch(&mut spec);
    spec.to_string()
}

fn build(spec_json: &str) -> Arc<Engine> {
    Arc::new(Engine::from_spec(EngineSpec::from_json(spec_json).unwrap(), None).unwrap())
}

fn qwen_spec() -> &'static str {
    static S: OnceLock<String> = OnceLock::new();
    S.get_or_init(|| golden_spec_json("dense.json", QWEN_CASE, |_| {}))
}

fn qwen() -> Arc<Engine> {
    static E: OnceLock<Arc<Engine>> = OnceLock::new();
    E.get_or_init(|| build(qwen_spec())).clone()
}

fn dsv3() -> Arc<Engine> {
    static E: OnceLock<Arc<Engine>> = OnceLock::new();
    E.get_or_init(|| build(&golden_spec_json("mla.json", DSV3_CASE, |_| {}))).clone()
}

fn model(options: Option<&str>) -> ForwardPassPerfModel {
    ForwardPassPerfModel::from_engine(qwen(), options).unwrap()
}

/// `F(np, sp, spk, nd, sdk)` of the spec, with a wall time in seconds.
fn fw(np: u32, sp: u32, spk: u32, nd: u32, sdk: u32, wall_s: f64) -> ForwardPassMetrics {
    let mut m = ForwardPassMetrics { wall_time: wall_s, ..Default::default() };
    let s = &mut m.scheduled_requests;
    s.num_prefill_requests = np;
    s.sum_prefill_tokens = sp;
    s.sum_prefill_kv_tokens = spk;
    s.num_decode_requests = nd;
    s.sum_decode_kv_tokens = sdk;
    m
}

fn f(np: u32, sp: u32, spk: u32, nd: u32, sdk: u32) -> ForwardPassMetrics {
    fw(np, sp, spk, nd, sdk, 0.0)
}

fn json_of(ranks: &[ForwardPassMetrics]) -> String {
    serde_json::to_string(ranks).unwrap()
}

#[track_caller]
fn close(ours: f64, reference: f64) {
    let rel = if reference == 0.0 { ours.abs() } else { ((ours - reference) / reference).abs() };
    assert!(rel <= 1e-9, "{ours} vs {reference} (rel {rel:.3e})");
}

#[track_caller]
fn near(ours: f64, reference: f64, tol: f64) {
    assert!((ours - reference).abs() <= tol, "{ours} vs {reference}");
}

fn est(m: &ForwardPassPerfModel, ranks: &[ForwardPassMetrics]) -> f64 {
    m.estimate_forward_pass_time_ms(&json_of(ranks)).unwrap().unwrap()
}

fn native(m: &ForwardPassPerfModel, ranks: &[ForwardPassMetrics]) -> f64 {
    m.native_estimate(ranks).unwrap().unwrap()
}

/// Tunes with one single-rank iteration whose wall time makes `observed / native = ratio`.
fn tune_ratio(m: &ForwardPassPerfModel, rank: ForwardPassMetrics, ratio: f64) {
    let n = native(m, std::slice::from_ref(&rank));
    let mut rank = rank;
    rank.wall_time = ratio * n / 1000.0;
    m.tune_with_fpms(&serde_json::to_string(&[[rank]]).unwrap()).unwrap();
}

fn diag(m: &ForwardPassPerfModel) -> Value {
    serde_json::from_str(&m.diagnostics()).unwrap()
}

// ------------------------------------------------------------------------------------------
// §12 native table

#[test]
fn initial_diagnostics() {
    assert_eq!(
        model(None).diagnostics(),
        r#"{"source":"aic","readiness":"ready","retained_observations":0,"correction_ready_buckets":0,"last_warning":null}"#
    );
}

#[test]
fn prefill_only_ranks() {
    let m = model(None);
    close(est(&m, &[f(2, 2048, 0, 0, 0)]), 101.23303457978317);
    close(qwen().prefill_latency_ms(2, 1024, 0).unwrap(), 101.23303457978317);
    close(est(&m, &[f(3, 3000, 600, 0, 0)]), 153.28438717635282);
    close(est(&m, &[f(3, 3001, 601, 0, 0)]), 153.28438717635282);
}

#[test]
fn decode_only_ranks() {
    let m = model(None);
    close(est(&m, &[f(0, 0, 0, 16, 32768)]), 12.37392844568119);
    close(qwen().decode_latency_ms(16, 2048, 2).unwrap(), 12.374634979054836);
    close(est(&m, &[f(0, 0, 0, 3, 0)]), 10.35653902330777);
    close(est(&m, &[f(0, 0, 0, 3, 3)]), 10.35653902330777);
}

#[test]
fn mixed_ranks_and_their_passes() {
    let m = model(None);
    let nat = m.native().unwrap();
    let cases = [
        (f(1, 2048, 0, 16, 48000), 107.87929828781822, [97.28352281269794, 8.12580876923177, 2.4699667058885098]),
        (f(2, 1000, 4000, 8, 12000), 57.12070608747001, [48.319616729038785, 7.700741381610067, 1.1003479768211641]),
        (f(1, 512, 3584, 32, 160000), 40.58018612903763, [27.994186178255433, 6.934411181773479, 5.6515887690087165]),
    ];
    for (rank, total, [p1, p2, p3]) in cases {
        close(est(&m, std::slice::from_ref(&rank)), total);
        let b = nat.mixed_rank_breakdown(&rank.scheduled_requests).unwrap();
        close(b.shared_ms, p1);
        close(b.context_attention_ms, p2);
        close(b.decode_attention_ms, p3);
    }
    // The engine's own mixed step differs (pass 3 at s 2050).
    close(qwen().mixed_step_breakdown(2048, 16, 2048, 2, 0, 1.0, 1.0).unwrap()[0], 107.3961440459223);
}

#[test]
fn multi_rank_iteration_is_the_slowest_rank() {
    let m = model(None);
    let ranks = [f(1, 2048, 0, 0, 0), f(0, 0, 0, 64, 128000), f(1, 1024, 0, 8, 8000)];
    close(est(&m, &ranks), 103.04499679505287);
    close(est(&m, &ranks[1..2]), 15.995248800785513);
    close(est(&m, &ranks[2..3]), 64.11097484551756);
}

#[test]
fn empty_iterations_estimate_zero() {
    let m = model(None);
    assert_eq!(est(&m, &[f(0, 0, 0, 0, 0)]), 0.0);
    assert_eq!(m.estimate_forward_pass_time_ms("{}").unwrap(), Some(0.0));
    assert_eq!(m.estimate_forward_pass_time_ms("[{}, {}]").unwrap(), Some(0.0));
    // A fully prefix-cached request schedules no prefill compute.
    assert_eq!(m.estimate_forward_pass_time_ms(r#"{"scheduled_requests":{"num_prefill_requests":3}}"#).unwrap(), Some(0.0));
}

#[test]
fn deepseek_v3_mixed_is_all_pass_one() {
    let m = ForwardPassPerfModel::from_engine(dsv3(), None).unwrap();
    close(est(&m, &[f(1, 2048, 0, 16, 48000)]), 98.06797292955166);
    close(est(&m, &[f(2, 1000, 4000, 8, 12000)]), 70.86415524584318);
    close(est(&m, &[f(0, 0, 0, 16, 48000)]), 17.071462933424115);
    let b = m.native().unwrap().mixed_rank_breakdown(&f(2, 1000, 4000, 8, 12000).scheduled_requests).unwrap();
    assert_eq!((b.context_attention_ms, b.decode_attention_ms), (0.0, 0.0));
}

// ------------------------------------------------------------------------------------------
// §5 construction

fn fp8_patch(spec: &mut Value) {
    for phase in ["context_ops", "generation_ops"] {
        for op in spec[phase].as_array_mut().unwrap() {
            if let Some(g) = op.get_mut("Gemm") {
                if !g["name"].as_str().unwrap().contains("logits") {
                    g["quant_mode"] = json!("fp8");
                }
            }
            for tag in ["ContextAttention", "GenerationAttention"] {
                if let Some(a) = op.get_mut(tag) {
                    a["kv_cache_dtype"] = json!("fp8");
                }
            }
        }
    }
}

#[test]
fn dtype_mapping_of_the_compile_request() {
    let config = r#"{"schema_version":1,"model_name":"Qwen/Qwen3-32B","system_name":"h200_sxm","backend":"vllm","tp_size":2,"pp_size":1,"weight_dtype":"fp8","kv_cache_dtype":"fp8","activation_dtype":"float16"}"#;
    let mut seen: Option<CompileRequest> = None;
    let m = ForwardPassPerfModel::from_native(config, None, |req| {
        seen = Some(req.clone());
        Ok(golden_spec_json("dense.json", QWEN_CASE, fp8_patch).into_bytes())
    })
    .unwrap();
    let req = seen.unwrap();
    assert_eq!(req.gemm_quant_mode.as_deref(), Some("fp8"));
    assert_eq!(req.kvcache_quant_mode.as_deref(), Some("fp8"));
    assert_eq!(req.fmha_quant_mode, None);
    assert_eq!(req.moe_quant_mode, None);
    assert_eq!(req.comm_quant_mode, None);
    assert_eq!((req.model_path.as_str(), req.system.as_str(), req.backend.as_str()), ("Qwen/Qwen3-32B", "h200_sxm", "vllm"));
    assert_eq!((req.tp_size, req.pp_size, req.attention_dp_size, req.nextn), (2, 1, 1, 0));
    assert_eq!(req.backend_version, None);
    close(est(&m, &[f(1, 1024, 0, 0, 0)]), 41.944919897588086);
    close(est(&m, &[f(0, 0, 0, 8, 8000)]), 8.582352311177765);
    let kwargs: Value = serde_json::from_str(&req.to_json()).unwrap();
    assert_eq!(kwargs["gemm_quant_mode"], "fp8");
    assert_eq!(kwargs["cp_size"], 1);
    assert!(kwargs.get("forward_model").is_none());
}

/// An engine config's `cp_size` (spec 43) reaches the compile request (default 1).
#[test]
fn cp_size_of_the_compile_request() {
    use aic_core::fpm::config::FpmEngineConfig;
    let config = r#"{"schema_version":1,"model_name":"Qwen/Qwen3-32B","system_name":"h200_sxm","backend":"sglang","tp_size":1,"pp_size":1,"cp_size":4}"#;
    let req = FpmEngineConfig::from_json(config).unwrap().compile_request();
    assert_eq!(req.cp_size, 4);
    let kwargs: Value = serde_json::from_str(&req.to_json()).unwrap();
    assert_eq!(kwargs["cp_size"], 4);
}

#[test]
fn dtype_mapping_rules() {
    use aic_core::fpm::config::{fmha_quant_mode, gemm_quant_mode, kv_quant_mode, moe_quant_mode};
    assert_eq!(gemm_quant_mode("int8"), Some("int8_wo"));
    assert_eq!(gemm_quant_mode("int4"), Some("int4_wo"));
    assert_eq!(gemm_quant_mode("fp8_static"), Some("fp8_static"));
    assert_eq!(gemm_quant_mode("float16"), None);
    assert_eq!(moe_quant_mode("int4"), Some("int4_wo"));
    assert_eq!(moe_quant_mode("w4a8_mxfp4_mxfp8"), Some("w4a8_mxfp4_mxfp8"));
    assert_eq!(moe_quant_mode("int8"), None);
    assert_eq!(fmha_quant_mode("float16"), None);
    assert_eq!(fmha_quant_mode("fp8_block"), Some("fp8_block"));
    assert_eq!(kv_quant_mode("int8"), Some("int8"));
    assert_eq!(kv_quant_mode("nvfp4"), None);
}

#[test]
fn from_native_with_the_reference_config() {
    let m = ForwardPassPerfModel::from_native(QWEN_CONFIG, None, |_| Ok(qwen_spec().as_bytes().to_vec())).unwrap();
    assert!(m.is_native());
    close(est(&m, &[f(2, 2048, 0, 0, 0)]), 101.23303457978317);
    let b = ForwardPassPerfModel::best_available(QWEN_CONFIG, None, |_| Ok(qwen_spec().as_bytes().to_vec())).unwrap();
    assert!(b.is_native());
    assert_eq!(diag(&b)["source"], "aic");
}

#[test]
fn unknown_model_falls_back_to_regression() {
    let config = QWEN_CONFIG.replace("Qwen/Qwen3-32B", "nobody/NoSuchModel");
    let failing = |req: &CompileRequest| -> Result<Vec<u8>, String> {
        Err(format!("ValueError: unknown model {:?}", req.model_path))
    };
    let m = ForwardPassPerfModel::best_available(&config, None, failing).unwrap();
    assert!(!m.is_native());
    let d = diag(&m);
    assert_eq!(d["source"], "fallback_regression");
    assert_eq!(d["readiness"], "unsupported_config");
    assert_eq!(
        d["last_warning"],
        "native forward-pass estimator unavailable; using fallback regression: unsupported model for Rust core \
         estimator: compile_engine: ValueError: unknown model \"nobody/NoSuchModel\""
    );
    assert_eq!(m.min_correction_factor(), None);

    let err = ForwardPassPerfModel::from_native(&config, None, failing).unwrap_err();
    assert_eq!(err.class(), aic_core::ErrorClass::Value);
    assert_eq!(
        err.to_string(),
        "unsupported model for Rust core estimator: compile_engine: ValueError: unknown model \"nobody/NoSuchModel\""
    );
}

#[test]
fn construction_errors_that_do_not_fall_back() {
    let ok = |_: &CompileRequest| -> Result<Vec<u8>, String> { Ok(qwen_spec().as_bytes().to_vec()) };
    // Bad options are an invalid engine config: no fallback.
    let err = ForwardPassPerfModel::best_available(QWEN_CONFIG, Some(r#"{"bucket_count":15}"#), ok).unwrap_err();
    assert_eq!(err.to_string(), "invalid engine config: invalid forward pass perf options: bucket_count must be a perfect square");
    // Missing required key.
    let err = ForwardPassPerfModel::best_available(r#"{"schema_version":1,"system_name":"h200_sxm","backend":"vllm","tp_size":2,"pp_size":1}"#, None, ok)
        .unwrap_err();
    assert!(err.to_string().starts_with("invalid engine config JSON: missing field `model_name`"), "{err}");
    let err = ForwardPassPerfModel::from_native(r#"{"schema_version":1,"model_name":"m","system_name":"s","backend":"vllm","tp_size":2}"#, None, ok)
        .unwrap_err();
    assert!(err.to_string().starts_with("invalid engine config JSON: missing field `pp_size`"), "{err}");
    // A spec of another schema version is not fallback-safe.
    let bad_schema = qwen_spec().replacen("\"schema_version\":15", "\"schema_version\":14", 1);
    let err = ForwardPassPerfModel::best_available(QWEN_CONFIG, None, |_| Ok(bad_schema.into_bytes())).unwrap_err();
    assert_eq!(err.to_string(), "unsupported schema version for EngineSpec: got 14, expected 15");
}

// ------------------------------------------------------------------------------------------
// §12 correction examples

#[test]
fn correction_with_default_options() {
    let m = model(None);
    let x1024 = f(1, 1024, 0, 0, 0);
    close(est(&m, std::slice::from_ref(&x1024)), 53.67781995651973);
    for r in [1.2, 1.5, 3.0, 0.3] {
        tune_ratio(&m, x1024.clone(), r);
    }
    // 4 samples < min_observations 5: no correction yet.
    close(est(&m, std::slice::from_ref(&x1024)), 53.67781995651973);
    assert_eq!(diag(&m)["source"], "aic");
    assert_eq!(diag(&m)["retained_observations"], 4);
    assert_eq!(m.min_correction_factor(), None);
    tune_ratio(&m, f(1, 1100, 0, 0, 0), 1.1);
    // Stored [1.2, 1.5, 2.0, 0.5, 1.1] -> median 1.2.
    close(est(&m, std::slice::from_ref(&x1024)), 64.41338394782368);
    assert_eq!(
        m.diagnostics(),
        r#"{"source":"aic_with_correction","readiness":"ready","retained_observations":5,"correction_ready_buckets":1,"last_warning":null}"#
    );
    for v in [m.min_correction_factor(), m.max_correction_factor(), m.avg_correction_factor()] {
        close(v.unwrap(), 1.2);
    }
}

#[test]
fn correction_with_small_store_and_eviction() {
    let m = model(Some(r#"{"min_observations":2,"max_observations":4,"bucket_count":4}"#));
    // Outside the prefill axis [0, 8192]: dropped.
    tune_ratio(&m, f(1, 9000, 0, 0, 0), 1.3);
    assert_eq!(diag(&m)["retained_observations"], 0);
    tune_ratio(&m, f(1, 1000, 0, 0, 0), 1.3);
    tune_ratio(&m, f(1, 1500, 0, 0, 0), 1.7);
    let x1200 = [f(1, 1200, 0, 0, 0)];
    close(est(&m, &x1200), 99.38302807720706);
    close(est(&m, &x1200) / native(&m, &x1200), 1.5);
    let x3000 = [f(1, 3000, 0, 0, 0)];
    assert_eq!(est(&m, &x3000), native(&m, &x3000));
    tune_ratio(&m, f(1, 3000, 0, 0, 0), 0.8);
    close(m.min_correction_factor().unwrap(), 0.8);
    close(m.max_correction_factor().unwrap(), 1.5);
    close(m.avg_correction_factor().unwrap(), 1.15);
    assert_eq!(diag(&m)["correction_ready_buckets"], 2);
    tune_ratio(&m, f(1, 1000, 0, 0, 0), 1.1);
    tune_ratio(&m, f(1, 1000, 0, 0, 0), 1.2);
    // 5 > 4: the oldest of bucket 0 (1.3) is evicted -> [1.7, 1.1, 1.2].
    close(m.min_correction_factor().unwrap(), 0.8);
    close(m.max_correction_factor().unwrap(), 1.2);
    close(est(&m, &x1200) / native(&m, &x1200), 1.2);
    assert_eq!(diag(&m)["retained_observations"], 4);
    // A zero wall time is ignored.
    m.tune(&[vec![fw(1, 1000, 0, 0, 0, 0.0)]]).unwrap();
    assert_eq!(diag(&m)["retained_observations"], 4);
}

#[test]
fn decode_correction_grid() {
    let m = model(Some(r#"{"min_observations":2}"#));
    tune_ratio(&m, f(0, 0, 0, 64, 128000), 1.3);
    tune_ratio(&m, f(0, 0, 0, 100, 100000), 1.5);
    tune_ratio(&m, f(0, 0, 0, 200, 128000), 0.9);
    let d = WorkloadKind::Decode;
    close(m.correction_factor(d, &[80.0, 110000.0]), 1.4);
    close(m.correction_factor(d, &[250.0, 400000.0]), 0.9);
    assert_eq!(m.correction_factor(d, &[600.0, 100000.0]), 1.0);
    assert_eq!(m.correction_factor(d, &[128.0, 500000.0]), 1.0);
    close(m.correction_factor(d, &[127.0, 499999.0]), 1.4);
    // Same through the estimate.
    let q = [f(0, 0, 0, 80, 110000)];
    close(est(&m, &q) / native(&m, &q), 1.4);
    let q = [f(0, 0, 0, 600, 100000)];
    assert_eq!(est(&m, &q), native(&m, &q));
    let dg = diag(&m);
    assert_eq!((dg["retained_observations"].clone(), dg["correction_ready_buckets"].clone()), (json!(3), json!(2)));
    close(m.min_correction_factor().unwrap(), 0.9);
    close(m.max_correction_factor().unwrap(), 1.4);
    close(m.avg_correction_factor().unwrap(), 1.15);
}

#[test]
fn multi_rank_tuning_uses_the_loaded_rank_kind() {
    let m = model(Some(r#"{"min_observations":1}"#));
    let n = 103.04499679505287;
    let iteration = vec![fw(1, 2048, 0, 0, 0, 1.4 * n / 1000.0), fw(0, 0, 0, 64, 128000, 1.1 * n / 1000.0)];
    m.tune_with_fpms(&serde_json::to_string(&[&iteration]).unwrap()).unwrap();
    close(est(&m, &iteration), 1.4 * n);
    close(est(&m, &[f(0, 0, 0, 64, 128000)]), 22.393348321099715);
    close(est(&m, &[f(1, 2048, 0, 0, 0)]), 103.04499679505287);
    let dg = diag(&m);
    assert_eq!(dg["retained_observations"], 1);
    assert_eq!(dg["source"], "aic_with_correction");
}

#[test]
fn tuning_stops_at_the_first_error_and_keeps_earlier_updates() {
    let m = model(Some(r#"{"min_observations":1}"#));
    let good = fw(1, 1024, 0, 0, 0, 0.06);
    let bad = r#"{"version":2}"#;
    let text = format!("[[{}],[{bad}],[{}]]", serde_json::to_string(&good).unwrap(), serde_json::to_string(&good).unwrap());
    let err = m.tune_with_fpms(&text).unwrap_err();
    assert_eq!(err.to_string(), "unsupported schema version for ForwardPassMetrics: got 2, expected 1");
    assert_eq!(diag(&m)["retained_observations"], 1);
    // Empty iterations and iterations without a wall time are skipped.
    m.tune_with_fpms("[[{}], [{\"scheduled_requests\":{\"num_prefill_requests\":1,\"sum_prefill_tokens\":5}}], []]")
        .unwrap_err();
    assert_eq!(diag(&m)["retained_observations"], 1);
    m.tune_with_fpms("[[{}], [{\"scheduled_requests\":{\"num_prefill_requests\":1,\"sum_prefill_tokens\":5}}]]").unwrap();
    assert_eq!(diag(&m)["retained_observations"], 1);
}

#[test]
fn model_is_shared_across_threads() {
    let m = Arc::new(model(Some(r#"{"min_observations":1}"#)));
    let handles: Vec<_> = (0..2)
        .map(|i| {
            let m = Arc::clone(&m);
            std::thread::spawn(move || {
                tune_ratio(&m, f(1, 1024 + i, 0, 0, 0), 1.25);
                est(&m, &[f(1, 1024, 0, 0, 0)])
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    close(est(&m, &[f(1, 1024, 0, 0, 0)]), 1.25 * 53.67781995651973);
    near(m.avg_correction_factor().unwrap(), 1.25, 1e-12);
}

// ------------------------------------------------------------------------------------------
// Consistency with the engine's own entry points where the shapes coincide (all database
// modes, MoE, MLA and MTP engines): prefill `F(n, n·s, n·p)` = `prefill(n, s + p, p)`, decode
// `F(nd, nd·(isl+1))` = one decode step, mixed `F(1, isl, 0, nd, nd·(isl+2))` =
// `mixed_step(isl, g, isl, 2)` with `nd = g·(nextn+1)`.

fn same(ours: aic_core::fpm::Result<f64>, engine: aic_core::Result<f64>, what: &str) {
    match (ours, engine) {
        (Ok(a), Ok(b)) => {
            let rel = if b == 0.0 { a.abs() } else { ((a - b) / b).abs() };
            assert!(rel <= 1e-12, "{what}: {a} vs engine {b}");
        }
        (Err(a), Err(b)) => assert_eq!(a.to_string(), b.to_string(), "{what}"),
        (a, b) => panic!("{what}: {a:?} vs engine {b:?}"),
    }
}

#[test]
fn native_mapping_agrees_with_the_engine() {
    let cases = [
        ("dense.json", QWEN_CASE),
        ("edge.json", "edge/Qwen3-32B/h200_sxm/vllm/tp2-pp1-dp1/db=SOL"),
        ("edge.json", "edge/Qwen3-32B/h200_sxm/vllm/tp2-pp1-dp1/db=EMPIRICAL"),
        ("edge.json", "edge/Qwen3-32B/h200_sxm/vllm/tp2-pp1-dp1/db=HYBRID"),
        ("moe.json", "moe/Qwen3-30B-A3B/h200_sxm/vllm/tp4-pp1-dp1-mtp1-ep4"),
        ("mla.json", DSV3_CASE),
        ("mla.json", "mla/DeepSeek-V3/h200_sxm/trtllm/tp8-pp1-dp1-mtp1-ep8/nextn1/fmha=bfloat16"),
    ];
    for (file, id) in cases {
        let engine = build(&golden_spec_json(file, id, |_| {}));
        let nextn = engine.spec().engine.nextn();
        let m = ForwardPassPerfModel::from_engine(engine.clone(), None).unwrap();
        let ours = |r: ForwardPassMetrics| m.native_estimate(&[r]).map(|v| v.unwrap());
        for (n, s, p) in [(1u32, 1024u32, 0u32), (4, 2000, 0), (2, 3072, 1024), (8, 500, 100)] {
            same(ours(f(n, n * s, n * p, 0, 0)), engine.prefill_latency_ms(n, s + p, p), &format!("{id} prefill {n} {s} {p}"));
        }
        for (g, isl) in [(1u32, 1024u32), (16, 2048), (64, 4000)] {
            let nd = g * (nextn + 1);
            same(ours(f(0, 0, 0, nd, nd * (isl + 1))), engine.decode_latency_ms(g, isl, 2), &format!("{id} decode {g} {isl}"));
            same(
                ours(f(1, isl, 0, nd, nd * (isl + 2))),
                engine.mixed_step_latency_ms(isl, g, isl, 2, 0, 1.0, 1.0),
                &format!("{id} mixed {g} {isl}"),
            );
        }
    }
}
