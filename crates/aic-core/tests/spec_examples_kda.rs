//! The worked examples of spec 36 §6 (Kimi-K3 `Kda` kernels) as tests: the table values with
//! their holds (§6.7), the nearest-shard fallback and its tie rule (§6.5), kernel routing onto
//! `kda_fused_decode` (§6.4 rule 2), the verify coordinates (§6.2), the SOL fallback on a miss
//! or an empty source list (§6.5, §6.6) and the engine-level values of §8.
//!
//! Engines come from the Kimi-K3 cases of `sparse_linear.json`; ops are the cases' own KDA ops
//! with fields edited in memory.

#[path = "spec_examples/common.rs"]
mod common;

use aic_core::{Engine, EngineSpec};
use serde_json::{json, Value};

use common::*;

const H200_VLLM: &str = "sparse_linear/Kimi-K3/h200_sxm/vllm/tp8-pp1-dp1-mtp1-ep8";
const H200_VLLM_SOL: &str = "sparse_linear/Kimi-K3/h200_sxm/vllm/tp8-pp1-dp1-mtp1-ep8/db=SOL";
const H200_VLLM_MTP: &str = "sparse_linear/Kimi-K3/h200_sxm/vllm/tp8-pp1-dp1-mtp1-ep8/nextn7";
const H200_SGLANG: &str = "sparse_linear/Kimi-K3/h200_sxm/sglang/tp8-pp1-dp1-mtp1-ep8";
const B200_SGLANG: &str = "sparse_linear/Kimi-K3/b200_sxm/sglang/tp8-pp1-dp1-mtp1-ep8";
const B200_SGLANG_MTP: &str = "sparse_linear/Kimi-K3/b200_sxm/sglang/tp8-pp1-dp1-mtp1-ep8/nextn7";

/// A KDA op of a case with `scale_factor` 1 and the given fields replaced.
fn kda(id: &str, name: &str, changes: &[(&str, Value)]) -> Value {
    let mut all = vec![("scale_factor", json!(1.0))];
    all.extend(changes.iter().cloned());
    with(&spec_op(id, name), &all)
}

/// The engine of a case with engine-config fields replaced (database mode, backend version).
fn engine_with(id: &str, changes: &[(&str, Value)]) -> &'static Engine {
    use std::collections::HashMap;
    use std::sync::{Mutex, OnceLock};
    static ENGINES: OnceLock<Mutex<HashMap<String, &'static Engine>>> = OnceLock::new();
    let key = format!("{id}@{changes:?}");
    let mut map = ENGINES.get_or_init(Default::default).lock().unwrap_or_else(|p| p.into_inner());
    if let Some(e) = map.get(&key) {
        return e;
    }
    let mut spec = case_spec(id);
    for (field, value) in changes {
        spec["engine"][*field] = value.clone();
    }
    let spec = EngineSpec::from_json(&spec.to_string()).unwrap();
    let e: &'static Engine = Box::leak(Box::new(Engine::from_spec(spec, None).unwrap()));
    map.insert(key, e);
    e
}

const HEADS_18: [(&str, i64); 2] = [("num_k_heads", 18), ("num_v_heads", 18)];

fn heads(n: i64) -> Vec<(&'static str, Value)> {
    vec![("num_k_heads", json!(n)), ("num_v_heads", json!(n))]
}

#[test]
fn h200_vllm_table_values_and_holds() {
    let e = engine(H200_VLLM);
    let conv = kda(H200_VLLM, "context_kda_conv1d", &[]);
    let c = ctx1(e, &conv, 1, 1024, 0);
    check("conv b1 s1024", c.latency_ms, "0.8000191688537598");
    check_source(&c, "silicon");
    check("conv b3 s3000", ctx1(e, &conv, 3, 3000, 0).latency_ms, "0.9770731262862682");
    let scan = kda(H200_VLLM, "context_kda_scan", &[]);
    check("flashkda b2 s5000", ctx1(e, &scan, 2, 5000, 0).latency_ms, "0.40018349173478784");
    check("flashkda hold", ctx1(e, &scan, 1, 300000, 0).latency_ms, "13.773486764613413");
    check("flashkda 20 heads → 24", ctx1(e, &kda(H200_VLLM, "context_kda_scan", &heads(20)), 1, 2048, 0).latency_ms, "0.18025920391082764");
    let fused = kda(H200_VLLM, "generation_kda_fused_decode", &[]);
    check("fused decode b8", gen1(e, &fused, 8, 2049).latency_ms, "0.007433599978685379");
    check("fused decode b300", gen1(e, &fused, 300, 2049).latency_ms, "0.13465785291045904");
    check("fused decode hold", gen1(e, &fused, 5000, 2049).latency_ms, "2.1736405324190855");
    // The compiled op carries 69 layers.
    let conv69 = kda(H200_VLLM, "context_kda_conv1d", &[("scale_factor", json!(69.0))]);
    check("conv ×69", ctx1(e, &conv69, 2, 3000, 0).latency_ms, "61.93653079904616");
}

#[test]
fn nearest_shard_tie_reads_the_smaller_shard() {
    let e = engine(H200_VLLM);
    let changes: Vec<(&str, Value)> = HEADS_18.iter().map(|(k, v)| (*k, json!(v))).collect();
    let conv = kda(H200_VLLM, "context_kda_conv1d", &changes);
    check("conv 18 heads", ctx1(e, &conv, 1, 1024, 0).latency_ms, "0.8000191688537598");
    let scan = kda(H200_VLLM, "context_kda_scan", &changes);
    check("flashkda 18 heads", ctx1(e, &scan, 2, 5000, 0).latency_ms, "0.40018349173478784");
}

#[test]
fn misses_answer_with_the_sol() {
    let e = engine(H200_VLLM);
    let conv = kda(H200_VLLM, "context_kda_conv1d", &[]);
    let c = eval(e, std::slice::from_ref(&conv), true, 2, 0, 0, 1.0, None).unwrap();
    check("context s 0", c[0].latency_ms, "2.304e-05");
    check_source(&c[0], "sol");
    let verify = kda(H200_VLLM_MTP, "generation_kda_verify", &[("draft_tokens", json!(0))]);
    let v = gen1(e, &verify, 8, 2049);
    check("verify draft 0", v.latency_ms, "0.00264704");
    check_source(&v, "sol");
    let wide = kda(H200_VLLM, "context_kda_scan", &[("d_model", json!(4096))]);
    check("no key, no shard", ctx1(e, &wide, 1, 2048, 0).latency_ms, "0.01736704");
    // A SOL engine (shared layer off): the vLLM KDA data is only reachable through the shared layer.
    let sol = engine(H200_VLLM_SOL);
    let conv69 = kda(H200_VLLM, "context_kda_conv1d", &[("scale_factor", json!(69.0))]);
    check("SOL-mode conv", ctx1(sol, &conv69, 2, 3000, 0).latency_ms, "4.76928");
}

#[test]
fn verify_divides_the_token_count_back() {
    let e = engine(H200_VLLM);
    let verify = kda(H200_VLLM_MTP, "generation_kda_verify", &[("scale_factor", json!(69.0))]);
    check("verify b8 → 1", gen1(e, &verify, 8, 2049).latency_ms, "0.529257620126009");
    let b = engine(B200_SGLANG);
    let rec = kda(B200_SGLANG_MTP, "generation_kda_verify", &[]);
    check("b20 → 2", gen1(b, &rec, 20, 2049).latency_ms, "0.0018703293506493505");
    check("b28 → 4", gen1(b, &rec, 28, 2049).latency_ms, "0.003740658701298701");
}

#[test]
fn b200_sglang_reads_the_shared_conv_only() {
    let e = engine(B200_SGLANG);
    check("conv", ctx1(e, &kda(B200_SGLANG, "context_kda_conv1d", &[]), 1, 1024, 0).latency_ms, "0.4343423843383789");
    let chunk = ctx1(e, &kda(B200_SGLANG, "context_kda_scan", &[]), 2, 5000, 0);
    check("chunk SOL", chunk.latency_ms, "0.05222240415584416");
    check_source(&chunk, "sol");
    check("gen conv SOL", gen1(e, &kda(B200_SGLANG, "generation_kda_conv1d", &[]), 8, 2049).latency_ms, "5.745038961038961e-05");
    check("gen recurrence SOL", gen1(e, &kda(B200_SGLANG, "generation_kda_recurrent", &[]), 100, 2049).latency_ms, "0.020626285714285715");
}

/// Rule 2 on the sglang 0.5.16 table, in every mode (SOL included).
#[test]
fn sglang_0516_routes_decode_onto_kda_fused_decode() {
    for mode in ["SILICON", "SOL"] {
        let e = engine_with(H200_SGLANG, &[("backend_version", json!("0.5.16")), ("database_mode", json!(mode))]);
        let conv = kda(H200_SGLANG, "generation_kda_conv1d", &[]);
        let c = gen1(e, &conv, 8, 2049);
        assert_eq!(c.latency_ms, 0.0, "{mode}");
        check_source(&c, "silicon");
        let rec = kda(H200_SGLANG, "generation_kda_recurrent", &[]);
        check("b8", gen1(e, &rec, 8, 2049).latency_ms, "0.007507199794054032");
        check("b100", gen1(e, &rec, 100, 2049).latency_ms, "0.056077198497951036");
        check("b2000", gen1(e, &rec, 2000, 2049).latency_ms, "1.0405437089502811");
        // The 24-head shard has its own rows and is not routed.
        let rec24 = kda(H200_SGLANG, "generation_kda_recurrent", &heads(24));
        check("24-head recurrence", gen1(e, &rec24, 8, 2049).latency_ms, "0.011171200126409531");
        let conv24 = kda(H200_SGLANG, "generation_kda_conv1d", &heads(24));
        check("24-head conv", gen1(e, &conv24, 8, 2049).latency_ms, "0.004755200073122978");
    }
}

#[test]
fn engine_level_values() {
    let e = engine(H200_VLLM);
    check("prefill 1 1024", e.prefill_latency_ms(1, 1024, 0).unwrap(), "310.45549818375804");
    check("prefill 2 3000", e.prefill_latency_ms(2, 3000, 0).unwrap(), "962.646347279788");
    check("decode", e.decode_latency_ms(8, 2048, 128).unwrap(), "4235.706522738427");
    let mtp = engine(H200_VLLM_MTP);
    check("decode nextn 7", mtp.decode_latency_ms(8, 2048, 128).unwrap(), "9605.20775593148");
    let b = engine(B200_SGLANG);
    check("b200 sglang prefill", b.prefill_latency_ms(1, 1024, 0).unwrap(), "118.82163595582041");
    check("b200 sglang decode", b.decode_latency_ms(8, 2048, 128).unwrap(), "2663.80668800479");
}
