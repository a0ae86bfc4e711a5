//! Worked examples of spec 20 (operators), SILICON rows only: §0.3 beam token count, §1.4
//! G1–G13, §2 EW1/EW2/EW4/EW5, §3 EM1–EM3, §4.5 CA1–CA8, §4.2 CA13a–d, §5 GA1–GA3b and
//! GA5a/b, §9.1 AR0–AR4, NC1, NC2, NC4 (SILICON), NC5, NC6, P1, P2, P4, §16.1 Overlap energy,
//! §17.2 CA14a/b and E2. Engine: Qwen3-32B h200 vllm tp 2 unless stated.

use aic_core::{ErrorClass, RunMode};
use serde_json::{json, Value};

use crate::common::*;

fn qkv() -> Value {
    spec_op(H200_VLLM, "context_qkv_gemm")
}

fn sf1(op: &Value) -> Value {
    with(op, &[("scale_factor", json!(1.0))])
}

// ---------------------------------------------------------------------------------------------
// §0.3 runtime shape: generation x = b × beam in engine walks, x = b through the per-op entry

/// 20 §0.3: `run_static(4, beam 2, 1024, 3)` generation = 2 × the generation ops at b 4,
/// s 1025 with x = 8; `run_static(2, beam 3, 2048, 2)` = the ops at b 2, s 2049, x = 6.
#[test]
fn beam_generation_token_count_is_batch_times_beam() {
    let e = engine(H200_VLLM);
    let ops = generation_ops(H200_VLLM);
    let at = |b, s, x| total(&eval(e, &ops, false, b, s, 0, 1.0, x).unwrap());
    check("ops b4 s1025 x8", at(4, 1025, Some(8)), "10.915243420333228");
    check("ops b4 s1025 x=b", at(4, 1025, None), "11.034163968500538");
    let r = e.run_static(&static_run(4, 2, 1024, 3, 0, 1.0, 1.0, RunMode::Static, 32)).unwrap();
    check("run_static(4, beam 2, 1024, 3) generation", r.generation_ms, "21.830486840666456");
    check("ops b2 s2049 x6", at(2, 2049, Some(6)), "11.063587678508037");
    let r = e.run_static(&static_run(2, 3, 2048, 2, 0, 1.0, 1.0, RunMode::Static, 32)).unwrap();
    check("run_static(2, beam 3, 2048, 2) generation", r.generation_ms, "11.063587678508037");
}

// ---------------------------------------------------------------------------------------------
// §1.4 Gemm

/// 20 §1.4 G1: `context_qkv_gemm` (sf 64) exact row at m = 1024.
#[test]
fn gemm_op_g1_exact_row_times_scale_factor() {
    let r = ctx1(engine(H200_VLLM), &qkv(), 1, 1024, 0);
    check("G1", r.latency_ms, "4.322133");
    check_source(&r, "silicon");
}

/// 20 §1.4 G2/G3: `scale_num_tokens` floors, `seq_split` ceils the token count.
#[test]
fn gemm_op_g2_g3_scale_num_tokens_floor_and_seq_split_ceil() {
    let e = engine(H200_VLLM);
    let r = ctx1(e, &with(&qkv(), &[("scale_num_tokens", json!(2))]), 1, 2049, 0);
    check("G2", r.latency_ms, "4.322133");
    check_source(&r, "silicon");
    let r = ctx1(e, &with(&qkv(), &[("seq_split", json!(2))]), 1, 2047, 0);
    check("G3", r.latency_ms, "4.322133");
    check_source(&r, "silicon");
}

/// 20 §1.4 G4: generation pass, m = b = 8.
#[test]
fn gemm_op_g4_generation_m_equals_batch() {
    let r = gen1(engine(H200_VLLM), &qkv(), 8, 2000);
    check("G4", r.latency_ms, "1.022293");
    check_source(&r, "silicon");
}

/// 20 §1.4 G5: a context `logits_gemm` uses x = b (same as a generation pass at b 4).
#[test]
fn gemm_op_g5_context_logits_gemm_uses_batch_as_tokens() {
    let e = engine(H200_VLLM);
    let op = spec_op(H200_VLLM, "context_logits_gemm");
    let r = ctx1(e, &op, 4, 1024, 0);
    check("G5 ctx", r.latency_ms, "0.1917174");
    check_source(&r, "silicon");
    check("G5 gen b4", gen1(e, &op, 4, 1024).latency_ms, "0.1917174");
}

/// 20 §1.4 G8a–G8d: fp8_static = fp8 GEMM − computescale [− scale_matrix], tag `estimated`.
#[test]
fn gemm_op_g8a_to_g8d_fp8_static_subtracts_quantize_kernels() {
    let e = engine(H200_VLLM);
    let op = sf1(&with(&qkv(), &[("quant_mode", json!("fp8_static")), ("low_precision_input", json!(false))]));
    let lpi = with(&op, &[("low_precision_input", json!(true))]);
    for (id, op, s, want) in [
        ("G8a", &op, 1024, "0.05473813"),
        ("G8b", &lpi, 1024, "0.05026880"),
        ("G8c", &op, 1, "0.01336551"),
        ("G8d", &lpi, 1, "0.01111591"),
    ] {
        let r = ctx1(e, op, 1, s, 0);
        check(id, r.latency_ms, want);
        check_source(&r, "estimated");
    }
}

/// 20 §1.4 G9a–G9c: a shape with no site within 2 octaves is a miss; `below_grid_sol`
/// degrades it to the SOL (tag `sol`).
#[test]
fn gemm_op_g9a_to_g9c_site_miss_and_below_grid_sol() {
    let e = engine(H200_VLLM);
    let tiny = sf1(&with(&qkv(), &[("n", json!(4)), ("k", json!(4))]));
    let err = ctx1_err(e, &tiny, 1, 1024, 0);
    check_perf_miss(&err, "no site within max_site_distance");
    let r = ctx1(e, &with(&tiny, &[("below_grid_sol", json!(true))]), 1, 1024, 0);
    check("G9b", r.latency_ms, "3.42e-06");
    check_source(&r, "sol");
    let thin = sf1(&with(&qkv(), &[("n", json!(2)), ("k", json!(5120)), ("below_grid_sol", json!(true))]));
    let r = ctx1(e, &thin, 1, 1024, 0);
    check("G9c", r.latency_ms, "0.002189653");
    check_source(&r, "sol");
}

/// 20 §1.4 G11f / G12: a quant without a GEMM table is a miss in SILICON; nvfp4 on h200
/// fails on the missing `fp4_tc_flops`.
#[test]
fn gemm_op_g11f_g12_missing_quant_table_and_missing_flops() {
    let e = engine(H200_VLLM);
    let err = ctx1_err(e, &sf1(&with(&qkv(), &[("quant_mode", json!("int8_wo"))])), 1, 1024, 0);
    check_perf_miss(&err, "GEMM perf data missing for quant 'int8_wo'");
    let err = ctx1_err(e, &sf1(&with(&qkv(), &[("quant_mode", json!("nvfp4"))])), 1, 1024, 0);
    assert_eq!(err.class(), ErrorClass::MissingSystemFlops, "{err}");
    assert!(err.to_string().contains("fp4_tc_flops"), "{err}");
}

/// 20 §1.4 G13a/G13b: fp8 and fp8_block read their own rows.
#[test]
fn gemm_op_g13a_g13b_fp8_and_fp8_block_rows() {
    let e = engine(H200_VLLM);
    let r = ctx1(e, &sf1(&with(&qkv(), &[("quant_mode", json!("fp8"))])), 1, 1024, 0);
    check("G13a", r.latency_ms, "0.05780266");
    check_source(&r, "silicon");
    let r = ctx1(e, &sf1(&with(&qkv(), &[("quant_mode", json!("fp8_block"))])), 1, 1024, 0);
    check("G13b", r.latency_ms, "0.08561067");
    check_source(&r, "silicon");
}

// ---------------------------------------------------------------------------------------------
// §2 Elementwise, §3 Embedding

/// 20 §2 EW1, EW2, EW4, EW5: memop of bytes_per_token × tokens, tag `empirical` in SILICON.
#[test]
fn elementwise_ew1_ew2_ew4_ew5_memop_of_token_bytes() {
    let e = engine(H200_VLLM);
    let op = spec_op(H200_VLLM, "context_add_norm_1");
    let r = ctx1(e, &op, 1, 1024, 0);
    check("EW1", r.latency_ms, "0.8910507");
    check_source(&r, "empirical");
    assert_eq!(r.energy_wms, 0.0);
    check("EW2", ctx1(e, &op, 4, 3000, 0).latency_ms, "8.384000");
    let split = with(&op, &[("scale_num_tokens", json!(3)), ("seq_split", json!(2))]);
    check("EW4", ctx1(e, &split, 1, 1000, 0).latency_ms, "0.3060053");
    let r = gen1(e, &op, 8, 2000);
    check("EW5", r.latency_ms, "0.1974613");
    check_source(&r, "empirical");
}

/// 20 §3 EM1–EM3: embedding reads only the touched rows (μ of the quant, seq_split ceil).
#[test]
fn embedding_em1_to_em3_memop_of_touched_rows() {
    let e = engine(H200_VLLM);
    let op = spec_op(H200_VLLM, "context_embedding");
    let r = ctx1(e, &op, 1, 1024, 0);
    check("EM1", r.latency_ms, "0.005730667");
    check_source(&r, "empirical");
    check("EM2", ctx1(e, &op, 2, 777, 0).latency_ms, "0.007144000");
    let fp8 = with(&op, &[("quant_mode", json!("fp8")), ("seq_split", json!(4))]);
    let r = ctx1(e, &fp8, 1, 1001, 0);
    check("EM3", r.latency_ms, "0.003334667");
    check_source(&r, "empirical");
}

// ---------------------------------------------------------------------------------------------
// §4 ContextAttention

fn ctx_attention() -> Value {
    spec_op(H200_VLLM, "context_attention")
}

/// 20 §4.5 CA1/CA2: table + 1.1 × extras, × 64, tag `mixed`.
#[test]
fn ctx_attention_ca1_ca2_table_plus_extras_times_layers() {
    let e = engine(H200_VLLM);
    let r = ctx1(e, &ctx_attention(), 1, 1024, 0);
    check("CA1", r.latency_ms, "4.765041");
    check_source(&r, "mixed");
    let r = ctx1(e, &ctx_attention(), 4, 4096, 0);
    check("CA2", r.latency_ms, "67.89806");
    check_source(&r, "mixed");
}

/// 20 §4.5 CA3: prefix 512 → table at full 1024 × (1024² − 512²)/1024².
#[test]
fn ctx_attention_ca3_prefix_correction() {
    let r = ctx1(engine(H200_VLLM), &ctx_attention(), 1, 512, 512);
    check("CA3", r.latency_ms, "4.207643");
    check_source(&r, "mixed");
}

/// 20 §4.5 CA4–CA6: no qk-norm extra; window-128 slice; KV-fp8 slice (extras unchanged).
#[test]
fn ctx_attention_ca4_ca5_ca6_qk_norm_window_and_kv_dtype_slices() {
    let e = engine(H200_VLLM);
    let base = sf1(&ctx_attention());
    let r = ctx1(e, &with(&base, &[("use_qk_norm", json!(false))]), 1, 1024, 0);
    check("CA4", r.latency_ms, "0.04804320");
    check_source(&r, "mixed");
    let r = ctx1(e, &with(&base, &[("window_size", json!(128))]), 1, 1024, 0);
    check("CA5", r.latency_ms, "0.06659243");
    check_source(&r, "mixed");
    let r = ctx1(e, &with(&base, &[("kv_cache_dtype", json!("fp8"))]), 1, 1024, 0);
    check("CA6", r.latency_ms, "0.08308843");
    check_source(&r, "mixed");
}

/// 20 §4.5 CA7: the imbalance scale multiplies the whole op result.
#[test]
fn ctx_attention_ca7_imbalance_scales_result() {
    let r = ctx1_imb(engine(H200_VLLM), &ctx_attention(), 1, 1024, 0, 1.5);
    check("CA7", r.latency_ms, "7.147561");
    check_source(&r, "mixed");
}

/// 20 §4.5 CA8: context parallelism 2 → rank-0 zig-zag chunks (first and last).
#[test]
fn ctx_attention_ca8_context_parallel_zigzag_chunks() {
    let op = sf1(&with(&ctx_attention(), &[("cp_size", json!(2))]));
    let r = ctx1(engine(H200_VLLM), &op, 1, 2048, 0);
    check("CA8", r.latency_ms, "0.09951710");
    check_source(&r, "mixed");
}

/// b200 vllm context attention n 8, n_kv 1 (Qwen3-32B at tp 8), qk-norm, scale 1.
fn b200_ctx_attention_tp8() -> Value {
    sf1(&with(&spec_op(B200_VLLM, "context_attention"), &[("n", json!(8)), ("n_kv", json!(1))]))
}

/// 20 §4.2 CA13a–CA13d: the first lane of `lane_order` holding the slice answers in full;
/// with no listed lane holding it, the table's lanes are tried in first-seen order.
#[test]
fn ctx_attention_ca13a_to_ca13d_lane_walk_on_b200() {
    let e = engine(B200_VLLM);
    let base = b200_ctx_attention_tp8();
    let r = ctx1(e, &base, 1, 1024, 0);
    check("CA13a", r.latency_ms, "0.06462123");
    assert_eq!(r.energy_wms, 0.0, "CA13a energy");
    let r = ctx1(e, &with(&base, &[("lane_order", json!(["vllm_flashinfer_trtllmdecode"]))]), 1, 1024, 0);
    check("CA13b", r.latency_ms, "14.72798");
    let r = ctx1(e, &with(&base, &[("lane_order", json!(["vllm_flashinfer"]))]), 1, 1024, 0);
    check("CA13c latency", r.latency_ms, "0.06009509");
    check("CA13c energy", r.energy_wms, "18.47197");
    check_source(&r, "mixed");
    let r = ctx1(e, &with(&base, &[("lane_order", json!(["default"]))]), 1, 1024, 0);
    check("CA13d", r.latency_ms, "0.06462123");
    assert_eq!(r.energy_wms, 0.0, "CA13d energy");
}

/// 20 §17.2 CA14a, E2, CA14b: energy rides along the prefix correction, imbalance and scale
/// factor (b200 vllm, lane `vllm_flashinfer`, 0.22.0 rows with power).
#[test]
fn ctx_attention_ca14a_e2_ca14b_energy_with_prefix_imbalance_and_scale() {
    let e = engine(B200_VLLM);
    let flashinfer = with(&b200_ctx_attention_tp8(), &[("lane_order", json!(["vllm_flashinfer"]))]);
    let no_qk = with(&flashinfer, &[("use_qk_norm", json!(false))]);
    let r = ctx1(e, &no_qk, 1, 1024, 0);
    check("CA14a latency", r.latency_ms, "0.03369345");
    check("CA14a energy", r.energy_wms, "18.47197");
    let r = ctx1(e, &no_qk, 1, 1024, 1024);
    check("E2 latency", r.latency_ms, "0.03779035");
    check("E2 energy", r.energy_wms, "21.62484");
    check_source(&r, "mixed");
    check("E2 with qk-norm", ctx1(e, &flashinfer, 1, 1024, 1024).latency_ms, "0.06419200");
    let r = ctx1_imb(e, &with(&no_qk, &[("scale_factor", json!(64.0))]), 1, 1024, 1024, 1.3);
    check("CA14b latency", r.latency_ms, "3.144157");
    check("CA14b energy", r.energy_wms, "1799.187");
}

// ---------------------------------------------------------------------------------------------
// §5 GenerationAttention

/// 20 §5 GA1–GA3: five-sample mean × 64.
#[test]
fn gen_attention_ga1_to_ga3_five_sample_mean_times_layers() {
    let e = engine(H200_VLLM);
    let op = spec_op(H200_VLLM, "generation_attention");
    let r = gen1(e, &op, 8, 2000);
    check("GA1", r.latency_ms, "1.155190");
    check_source(&r, "silicon");
    check("GA2", gen1(e, &op, 1, 1000).latency_ms, "0.8591314");
    check("GA3", gen1(e, &op, 64, 5000).latency_ms, "10.40169");
}

/// 20 §5 GA3b: the generation imbalance scale multiplies the result.
#[test]
fn gen_attention_ga3b_imbalance_scales_result() {
    let op = spec_op(H200_VLLM, "generation_attention");
    let r = gen1_imb(engine(H200_VLLM), &op, 8, 2000, 2.0);
    check("GA3b", r.latency_ms, "2.310379");
}

/// 20 §5 GA5a/GA5b (and §17.2 GA5a): b200 vllm lane `vllm_flashinfer`, energy = mean of the
/// samples' (interpolated power × interpolated latency).
#[test]
fn gen_attention_ga5a_ga5b_energy_at_off_grid_points() {
    let e = engine(B200_VLLM);
    let op = sf1(&with(
        &spec_op(B200_VLLM, "generation_attention"),
        &[("n", json!(8)), ("n_kv", json!(1)), ("lane_order", json!(["vllm_flashinfer"]))],
    ));
    let r = gen1(e, &op, 8, 2000);
    check("GA5a latency", r.latency_ms, "0.008196954");
    check("GA5a energy", r.energy_wms, "2.815049");
    check_source(&r, "silicon");
    let r = gen1(e, &op, 8, 5000);
    check("GA5b latency", r.latency_ms, "0.009055508");
    check("GA5b energy", r.energy_wms, "4.532423");
}

// ---------------------------------------------------------------------------------------------
// §9.1 communication

fn ar(tp: u32) -> Value {
    json!({"CustomAllReduce": {"name": "ar", "scale_factor": 1.0, "hidden_size": 4096, "tp_size": tp,
        "quant": "half", "seq_split": 1}})
}

fn nccl(operation: &str, gpus: u32) -> Value {
    json!({"Nccl": {"name": "nccl", "scale_factor": 1.0, "hidden_size": 4096.0, "num_gpus": gpus,
        "dtype": "half", "operation": operation, "seq_split": 1}})
}

fn p2p() -> Value {
    json!({"P2P": {"name": "p2p", "scale_factor": 1.0, "pp_size": 2, "hidden_size": 5120, "seq_split": 1}})
}

/// 20 §9.1 AR0: the spec's `context_ar_1` (h 5120, tp 2, sf 64).
#[test]
fn custom_allreduce_ar0_spec_op() {
    let r = ctx1(engine(H200_VLLM), &spec_op(H200_VLLM, "context_ar_1"), 1, 1024, 0);
    check("AR0", r.latency_ms, "3.288709");
    check_source(&r, "silicon");
}

/// 20 §9.1 AR1, AR2, AR4: exact row, beyond-node factor (tp 16), seq_split ceil.
#[test]
fn custom_allreduce_ar1_ar2_ar4_row_beyond_node_and_seq_split() {
    let e = engine(H200_VLLM);
    let r = ctx1(e, &ar(8), 1, 256, 0);
    check("AR1", r.latency_ms, "0.01810592");
    check_source(&r, "silicon");
    let r = ctx1(e, &ar(16), 1, 256, 0);
    check("AR2", r.latency_ms, "0.1745928");
    check_source(&r, "silicon");
    let r = ctx1(e, &with(&ar(8), &[("seq_split", json!(4))]), 1, 1021, 0);
    check("AR4", r.latency_ms, "0.01810592");
    check_source(&r, "silicon");
}

/// 20 §9.1 AR3 (SILICON part): tp 1 → zero, tag `empirical`.
#[test]
fn custom_allreduce_ar3_tp1_is_zero_empirical() {
    let r = ctx1(engine(H200_VLLM), &ar(1), 1, 256, 0);
    check("AR3", r.latency_ms, "0");
    assert_eq!(r.energy_wms, 0.0);
    check_source(&r, "empirical");
}

/// 20 §9.1 NC1/NC2: the four collectives at 8 GPUs and × 9.642857 at 16 GPUs.
#[test]
fn nccl_nc1_nc2_collectives_at_8_and_16_gpus() {
    let e = engine(H200_VLLM);
    for (operation, at8, at16) in [
        ("all_gather", "0.02446", "0.2358643"),
        ("reduce_scatter", "0.02126", "0.2050071"),
        ("all_reduce", "0.03871", "0.373275"),
        ("alltoall", "0.01877", "0.1809964"),
    ] {
        let r = ctx1(e, &nccl(operation, 8), 1, 256, 0);
        check(&format!("NC1 {operation}"), r.latency_ms, at8);
        check_source(&r, "silicon");
        let r = ctx1(e, &nccl(operation, 16), 1, 256, 0);
        check(&format!("NC2 {operation}"), r.latency_ms, at16);
        check_source(&r, "silicon");
    }
}

/// 20 §9.1 NC4 (SILICON part): one GPU → zero, tag `empirical`.
#[test]
fn nccl_nc4_one_gpu_is_zero_empirical() {
    let r = ctx1(engine(H200_VLLM), &nccl("all_gather", 1), 1, 256, 0);
    check("NC4", r.latency_ms, "0");
    check_source(&r, "empirical");
}

/// 20 §9.1 NC5/NC6: int8 slice; fractional hidden size (1048832 elements).
#[test]
fn nccl_nc5_nc6_int8_slice_and_fractional_hidden_size() {
    let e = engine(H200_VLLM);
    let r = ctx1(e, &with(&nccl("all_gather", 8), &[("dtype", json!("int8"))]), 1, 256, 0);
    check("NC5", r.latency_ms, "0.01703");
    check_source(&r, "silicon");
    let r = ctx1(e, &with(&nccl("all_gather", 8), &[("hidden_size", json!(2048.5))]), 1, 512, 0);
    check("NC6", r.latency_ms, "0.02446277");
    check_source(&r, "silicon");
}

/// 20 §9.1 P1/P2: P2P = bytes / inter_node_bw + p2p latency, tag `empirical`.
#[test]
fn p2p_p1_p2_inter_node_formula() {
    let e = engine(H200_VLLM);
    let r = ctx1(e, &p2p(), 1, 1024, 0);
    check("P1", r.latency_ms, "0.2197152");
    check_source(&r, "empirical");
    let r = ctx1(e, &p2p(), 2, 4096, 0);
    check("P2", r.latency_ms, "1.687722");
    check_source(&r, "empirical");
}

/// 20 §9.1 P4: the spec's `context_p2p` (pp 1, sf 0) → zero with tag `silicon`.
#[test]
fn p2p_p4_pp1_is_zero_silicon() {
    let r = ctx1(engine(H200_VLLM), &spec_op(H200_VLLM, "context_p2p"), 1, 1024, 0);
    check("P4", r.latency_ms, "0");
    check_source(&r, "silicon");
}

// ---------------------------------------------------------------------------------------------
// §16 composites

/// 20 §16.1 energy example (b200 vllm, ctx b 1 s 1024): Overlap latency = max of the groups,
/// energy = sum of both, tag mixed.
#[test]
fn overlap_energy_example_max_latency_summed_energy() {
    let e = engine(B200_VLLM);
    let attn = with(&b200_ctx_attention_tp8(), &[("lane_order", json!(["vllm_flashinfer"]))]);
    let ew = json!({"Elementwise": {"name": "ew", "scale_factor": 1000.0, "bytes_per_token": 40960.0,
        "scale_num_tokens": 1, "seq_split": 1}});
    let r = ctx1(e, &ew, 1, 1024, 0);
    check("group_b Elementwise", r.latency_ms, "9.808935");
    let ov = json!({"Overlap": {"name": "ov", "group_a": [attn], "group_b": [ew]}});
    let r = ctx1(e, &ov, 1, 1024, 0);
    check("Overlap latency", r.latency_ms, "9.808935");
    check("Overlap energy", r.energy_wms, "18.47197");
    check_source(&r, "mixed");
}

/// 20 §16.2 rules composed from the §1.4 / §2 examples (h200 vllm, ctx b 1 s 1024): a
/// Fallback whose primary hits returns it verbatim; one whose primary misses (int8_wo, G11f)
/// returns the chain sum (G1 + EW1, tag mixed); an empty chain and an Overlap of two empty
/// groups give (0, 0, empirical) (40 §13.2 composite checks).
#[test]
fn fallback_primary_hit_verbatim_miss_uses_chain_sum() {
    let e = engine(H200_VLLM);
    let gemm = qkv();
    let ew = spec_op(H200_VLLM, "context_add_norm_1");
    let missing = with(&gemm, &[("quant_mode", json!("int8_wo"))]);
    let fb = json!({"Fallback": {"name": "fb", "primary": gemm, "fallback": [ew]}});
    let r = ctx1(e, &fb, 1, 1024, 0);
    check("Fallback primary hit", r.latency_ms, "4.322133");
    check_source(&r, "silicon");
    let fb = json!({"Fallback": {"name": "fb", "primary": missing, "fallback": [gemm, ew]}});
    let r = ctx1(e, &fb, 1, 1024, 0);
    check_abs("Fallback chain = G1 + EW1", r.latency_ms, 4.322133 + 0.8910507, 5e-7 + 5e-8);
    check_source(&r, "mixed");
    let fb = json!({"Fallback": {"name": "fb", "primary": missing, "fallback": []}});
    let r = ctx1(e, &fb, 1, 1024, 0);
    check("empty chain", r.latency_ms, "0");
    check_source(&r, "empirical");
    let ov = json!({"Overlap": {"name": "ov", "group_a": [], "group_b": []}});
    let r = ctx1(e, &ov, 1, 1024, 0);
    check("empty overlap", r.latency_ms, "0");
    check_source(&r, "empirical");
}

/// 20 §0.3: name folding sums same-named entries; differing tags fold to `mixed` with no
/// zero-neutral exception (a zero silicon P2P folded with an empirical Elementwise).
#[test]
fn folding_by_name_sums_and_mixes_tags_without_zero_exception() {
    let e = engine(H200_VLLM);
    let ew = spec_op(H200_VLLM, "context_add_norm_1");
    let p2p_zero = with(&spec_op(H200_VLLM, "context_p2p"), &[("name", json!("context_add_norm_1"))]);
    let r = eval(e, &[ew.clone(), p2p_zero], true, 1, 1024, 0, 1.0, None).unwrap();
    assert_eq!(r.len(), 1);
    check("folded latency", r[0].latency_ms, "0.8910507");
    check_source(&r[0], "mixed");
}
