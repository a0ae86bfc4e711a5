//! Worked examples of spec 11 (table lookup): §0 runtime shape, §1.2 R1/R2, §1.4 H1, §1.6
//! energy (attention rows), §2.6 G1–G7, §4.3 K1, §4.5 C1–C6, §5.4 A1–A3, §6.5 M1–M3 / N1–N3,
//! §9 analytic ops. All SILICON mode.

use serde_json::{json, Value};

use crate::common::*;

/// The §2.6 GEMM op `g` (bf16 unless changed), scale 1.
fn gemm(n: u32, k: u32, quant: &str) -> Value {
    json!({"Gemm": {"name": "g", "scale_factor": 1.0, "n": n, "k": k, "quant_mode": quant,
        "scale_num_tokens": 1, "low_precision_input": false, "seq_split": 1, "below_grid_sol": false}})
}

/// The §4.5 context-attention op (bf16/bf16, head 128, window 0, no qk-norm, scale 1) with the
/// lane order of the case's compiled spec.
fn ctx_attn(case_id: &str, n: u32, n_kv: u32) -> Value {
    with(
        &spec_op(case_id, "context_attention"),
        &[("n", json!(n)), ("n_kv", json!(n_kv)), ("use_qk_norm", json!(false)), ("scale_factor", json!(1.0))],
    )
}

/// The §5.4 generation-attention op (kv bf16, head 128, window 0, scale 1) with the case's lane order.
fn gen_attn(case_id: &str, n: u32, n_kv: u32) -> Value {
    with(
        &spec_op(case_id, "generation_attention"),
        &[("n", json!(n)), ("n_kv", json!(n_kv)), ("scale_factor", json!(1.0))],
    )
}

/// 11 §0: the prefill walk evaluates the context ops at `s = isl − prefix` (attention at
/// `full_s = isl`): `predict_prefill_latency(2, 3000, 1000)` and `(4, 2048, 512)`.
#[test]
fn prefill_context_pass_uses_new_tokens_s_equals_isl_minus_prefix() {
    let e = engine(H200_VLLM);
    let ops = context_ops(H200_VLLM);
    check("prefill(2,3000,1000)", e.prefill_latency_ms(2, 3000, 1000).unwrap(), "216.08039609");
    let at_2000 = total(&eval(e, &ops, true, 2, 2000, 1000, 1.0, None).unwrap());
    check("ops at b 2, s 2000, prefix 1000", at_2000, "216.08039609");
    let at_3000 = total(&eval(e, &ops, true, 2, 3000, 1000, 1.0, None).unwrap());
    check("ops at b 2, s 3000, prefix 1000 (the wrong reading)", at_3000, "331.91389");
    check("prefill(4,2048,512)", e.prefill_latency_ms(4, 2048, 512).unwrap(), "329.01270387");
    let at_1536 = total(&eval(e, &ops, true, 4, 1536, 512, 1.0, None).unwrap());
    check("ops at b 4, s 1536, prefix 512", at_1536, "329.01270387");
}

/// 11 §1.2 R1: a ragged child under an outer (heads) bracket is rescaled with the SOL ratio
/// taken at the query's own coordinates on every other axis.
#[test]
fn ctx_attention_r1_ragged_rescale_under_outer_bracket_uses_query_coordinates() {
    let e = engine(H200_VLLM);
    let op = ctx_attn(H200_VLLM, 20, 8);
    let r = ctx1(e, &op, 200, 590, 0);
    check("R1 n20 b200 s590", r.latency_ms, "1.777231401323");
    check_source(&r, "mixed");
    check("R1 n20 b160 s700", ctx1(e, &op, 160, 700, 0).latency_ms, "2.007049599979");
}

/// 11 §1.2 R2: an exact key never falls back to its neighbours; a failing exact key goes to
/// the whole-query hold (jump between s = 1000 and s = 1024 is reference behaviour).
#[test]
fn ctx_attention_r2_exact_key_failure_goes_to_hold_not_neighbours() {
    let e = engine(H200_VLLM);
    let op = ctx_attn(H200_VLLM, 32, 4);
    check("R2 s1000 (ragged survivor)", ctx1(e, &op, 200, 1000, 0).latency_ms, "7.359719142904");
    check("R2 s1024 (exact key fails → hold)", ctx1(e, &op, 200, 1024, 0).latency_ms, "5.169263074383");
    check("R2 s1030 (both children out of range → hold)", ctx1(e, &op, 200, 1030, 0).latency_ms, "5.229867552614");
}

/// 11 §1.4 H1: a 4th/5th anchor tie gives the tied 4th anchor weight 0 (generation attention,
/// five-sample mean).
#[test]
fn gen_attention_h1_hold_with_fourth_fifth_tie_weighs_zero() {
    let e = engine(H200_VLLM);
    let op = gen_attn(H200_VLLM, 32, 4);
    let r = gen1(e, &op, 64, 8000);
    check("H1 b64 s8000", r.latency_ms, "0.249904438143");
    check_source(&r, "silicon");
    check("H1 b64 s9000", gen1(e, &op, 64, 9000).latency_ms, "0.280266990895");
}

/// 11 §1.6: context attention on b200 vllm with `lane_order = ["vllm_flashinfer"]` (0.22.0
/// rows with power): sqrt blend of latency, linear power, energy = power × latency; the prefix
/// correction multiplies latency and energy. Op latency = table + the b200 extras 0.0132036571.
#[test]
fn ctx_attention_energy_b200_flashinfer_rows_blend_power_and_prefix_scales_energy() {
    let e = engine(B200_VLLM);
    let op = with(&ctx_attn(B200_VLLM, 32, 4), &[("lane_order", json!(["vllm_flashinfer"]))]);
    const EXTRAS: f64 = 0.0132036571;
    let r = ctx1(e, &op, 1, 1000, 0);
    check_abs("table latency s1000", r.latency_ms - EXTRAS, 0.0222257489, 1e-10);
    check("table energy s1000", r.energy_wms, "21.83225870");
    check_source(&r, "mixed");
    let r = ctx1(e, &op, 1, 800, 200);
    check_abs("table latency s800 prefix200", r.latency_ms - EXTRAS, 0.0213367190, 1e-10);
    check("table energy s800 prefix200", r.energy_wms, "20.95896835");
}

/// 11 §1.6: generation attention averages the five samples' energies (b200 vllm_flashinfer rows).
#[test]
fn gen_attention_energy_b200_flashinfer_rows_average_sample_energies() {
    let e = engine(B200_VLLM);
    let op = with(&gen_attn(B200_VLLM, 32, 4), &[("lane_order", json!(["vllm_flashinfer"]))]);
    let r = gen1(e, &op, 16, 1000);
    check("b16 s1000 latency", r.latency_ms, "0.009631884092");
    check("b16 s1000 energy", r.energy_wms, "4.771420460");
    check_source(&r, "silicon");
    let r = gen1(e, &op, 8, 3000);
    check("b8 s3000 latency", r.latency_ms, "0.01118865858");
    check("b8 s3000 energy", r.energy_wms, "5.575874518");
}

/// 11 §2.6 G1: exact GEMM row.
#[test]
fn gemm_g1_exact_row() {
    let r = ctx1(engine(H200_VLLM), &gemm(5120, 5120, "bfloat16"), 1, 1, 0);
    check("G1", r.latency_ms, "0.015615999699");
    check_source(&r, "silicon");
}

/// 11 §2.6 G2: raw linear interpolation along the site's m curve.
#[test]
fn gemm_g2_interior_m_lerp() {
    let r = ctx1(engine(H200_VLLM), &gemm(5120, 5120, "bfloat16"), 1000, 1, 0);
    check("G2", r.latency_ms, "0.066403001897");
}

/// 11 §2.6 G3: beyond the curve → median util of the last three points.
#[test]
fn gemm_g3_beyond_curve_holds_median_tail_util() {
    let r = ctx1(engine(H200_VLLM), &gemm(5120, 5120, "bfloat16"), 65536, 1, 0);
    check("G3", r.latency_ms, "5.0801243252");
}

/// 11 §2.6 G4: an uncollected (n, k) site blends the four nearest sites' utils (1/d² weights).
#[test]
fn gemm_g4_unknown_site_blends_four_nearest() {
    let r = ctx1(engine(H200_VLLM), &gemm(2304, 4096, "bfloat16"), 1000, 1, 0);
    check("G4", r.latency_ms, "0.026671247597");
    check_source(&r, "silicon");
}

/// 11 §2.6 G5: frontier waiver when no site is within distance 2 and only n overflows;
/// k below every site's k is a miss.
#[test]
fn gemm_g5_frontier_waiver_and_k_underflow_miss() {
    let e = engine(H200_VLLM);
    check("G5", ctx1(e, &gemm(300000, 7168, "bfloat16"), 4, 1, 0).latency_ms, "1.0535757180");
    let err = ctx1_err(e, &gemm(300000, 10, "bfloat16"), 4, 1, 0);
    check_perf_miss(&err, "no data to anchor query");
}

/// 11 §2.6 G6: load-time clamp of a GEMM row to its SOL (h100, mem_bw 3.35e12).
#[test]
fn gemm_g6_h100_row_clamped_to_sol_at_load() {
    let r = ctx1(engine(H100_VLLM), &gemm(64, 512, "bfloat16"), 32768, 1, 0);
    check("G6", r.latency_ms, "0.011287842388");
}

/// 11 §2.6 G7: fp8_block unknown site (fp8 FLOPS, 1 byte/element).
#[test]
fn gemm_g7_fp8_block_unknown_site() {
    let r = ctx1(engine(H200_VLLM), &gemm(2112, 7168, "fp8_block"), 777, 1, 0);
    check("G7", r.latency_ms, "0.097594864410");
}

/// 11 §4.3 K1: on an MHA slice the hold's SOL uses each anchor's own head count as n_kv.
#[test]
fn ctx_attention_k1_mha_hold_sol_uses_anchor_head_count_as_n_kv() {
    let e = engine(H200_VLLM);
    check("K1 n=n_kv=32 b512 s300", ctx1(e, &ctx_attn(H200_VLLM, 32, 32), 512, 300, 0).latency_ms, "3.557865115364");
    check("K1 n=n_kv=20 b512 s200", ctx1(e, &ctx_attn(H200_VLLM, 20, 20), 512, 200, 0).latency_ms, "1.615790742008");
}

/// 11 §4.5 C1: sqrt blend on the sequence axis.
#[test]
fn ctx_attention_c1_sqrt_blend_on_seq() {
    let r = ctx1(engine(H200_VLLM), &ctx_attn(H200_VLLM, 32, 4), 1, 1000, 0);
    check("C1", r.latency_ms, "0.047357385204");
    check_source(&r, "mixed");
}

/// 11 §4.5 C2: batch lerp, sqrt seq blend at full_s = s + prefix, prefix correction.
#[test]
fn ctx_attention_c2_prefix_full_seq_blend_and_correction() {
    let r = ctx1(engine(H200_VLLM), &ctx_attn(H200_VLLM, 32, 4), 3, 1000, 200);
    check("C2", r.latency_ms, "0.118098358703");
}

/// 11 §4.5 C3: raw lerp between head counts 24 and 32.
#[test]
fn ctx_attention_c3_heads_between_grid_values() {
    let r = ctx1(engine(H200_VLLM), &ctx_attn(H200_VLLM, 28, 4), 4, 2048, 0);
    check("C3", r.latency_ms, "0.301714609160");
}

/// 11 §4.5 C4: beyond the batch/isl staircase → multi-axis utilisation hold.
#[test]
fn ctx_attention_c4_beyond_staircase_multi_axis_hold() {
    let r = ctx1(engine(H200_VLLM), &ctx_attn(H200_VLLM, 32, 4), 64, 8192, 0);
    check("C4", r.latency_ms, "69.723697586");
}

/// 11 §4.5 C5: b200 vllm prefill lane has isl ≥ 16 only; s = 1 is a below-range hold inside
/// that lane (the decode lane's isl-1 row is not used).
#[test]
fn ctx_attention_c5_b200_below_range_hold_stays_in_chosen_lane() {
    let r = ctx1(engine(B200_VLLM), &ctx_attn(B200_VLLM, 32, 4), 1, 1, 0);
    check("C5", r.latency_ms, "0.013872319320");
}

/// 11 §4.5 C6 (and §4.2): b200 sglang pins `triton`, which has the head-256 slice only for
/// 16/24 heads → hold; with `["default"]` the first-seen lane `trtllm_mha` answers exactly.
#[test]
fn ctx_attention_c6_b200_sglang_pinned_lane_by_slice_presence() {
    let e = engine(B200_SGLANG);
    let op = with(&ctx_attn(B200_SGLANG, 32, 4), &[("head_size", json!(256))]);
    let pinned = ctx1(e, &op, 1, 1024, 0).latency_ms;
    check("C6 spec order", pinned, "0.150672223969");
    // §4.2: the triton hold's table value, op minus the b200 head-256 extras 0.0132073143.
    check_abs("C6 triton table value", pinned - 0.0132073143, 0.1374649097, 1e-10);
    let op = with(&op, &[("lane_order", json!(["default"]))]);
    check("C6 [default]", ctx1(e, &op, 1, 1024, 0).latency_ms, "0.049436114106");
}

/// 11 §5.4 A1: five-sample mean with linear seq interpolation.
#[test]
fn gen_attention_a1_five_sample_mean() {
    let r = gen1(engine(H200_VLLM), &gen_attn(H200_VLLM, 32, 4), 16, 1000);
    check("A1", r.latency_ms, "0.017789605811");
    check_source(&r, "silicon");
}

/// 11 §5.4 A2: ragged batch bracket → survivor rescaled by the SOL ratio (1.5625).
#[test]
fn gen_attention_a2_ragged_batch_branch_rescaled() {
    let r = gen1(engine(H200_VLLM), &gen_attn(H200_VLLM, 32, 4), 100, 5000);
    check("A2", r.latency_ms, "0.253947555908");
}

/// 11 §5.4 A3: every sample beyond the batch-1024 row → per-sample multi-axis hold.
#[test]
fn gen_attention_a3_all_samples_held() {
    let r = gen1(engine(H200_VLLM), &gen_attn(H200_VLLM, 32, 4), 1024, 4000);
    check("A3", r.latency_ms, "2.079542843712");
}

fn all_reduce(hidden: u32, tp: u32) -> Value {
    json!({"CustomAllReduce": {"name": "ar", "scale_factor": 1.0, "hidden_size": hidden, "tp_size": tp,
        "quant": "half", "seq_split": 1}})
}

fn nccl(hidden: f64, gpus: u32, operation: &str) -> Value {
    json!({"Nccl": {"name": "nccl", "scale_factor": 1.0, "hidden_size": hidden, "num_gpus": gpus,
        "dtype": "half", "operation": operation, "seq_split": 1}})
}

/// 11 §6.5 M1: custom all-reduce message-size lerp.
#[test]
fn custom_allreduce_m1_message_size_lerp() {
    let r = ctx1(engine(H200_VLLM), &all_reduce(5120, 2), 64, 1, 0);
    check("M1", r.latency_ms, "0.006863040030");
    check_source(&r, "silicon");
}

/// 11 §6.5 M2: beyond the largest message → linear extrapolation through the origin.
#[test]
fn custom_allreduce_m2_beyond_curve_linear_hold() {
    let r = ctx1(engine(H200_VLLM), &all_reduce(7168, 8), 200000, 1, 0);
    check("M2", r.latency_ms, "10.677440441");
}

/// 11 §6.5 M3: tp 16 > 8 GPUs/node → tp-8 curve × beyond-node factor 9.6428571.
#[test]
fn custom_allreduce_m3_beyond_node_scaling() {
    let r = ctx1(engine(H200_VLLM), &all_reduce(5120, 16), 64, 1, 0);
    check("M3", r.latency_ms, "0.114527059346");
}

/// 11 §6.5 N1: NCCL all_gather message-size lerp.
#[test]
fn nccl_n1_all_gather_lerp() {
    let r = ctx1(engine(H200_VLLM), &nccl(7168.0, 8, "all_gather"), 64, 1, 0);
    check("N1", r.latency_ms, "0.0173375");
    check_source(&r, "silicon");
}

/// 11 §6.5 N2: 16 GPUs → 8-GPU curve × 9.6428571.
#[test]
fn nccl_n2_beyond_max_recorded_gpus_scaling() {
    let r = ctx1(engine(H200_VLLM), &nccl(7168.0, 16, "all_gather"), 64, 1, 0);
    check("N2", r.latency_ms, "0.167183035714");
}

/// 11 §6.5 N3: reduce_scatter lerp; and the duplicated h200 NCCL rows resolve to the first
/// row in file order (all_gather / 8 / 256 elements → 0.01034, not 0.01044).
#[test]
fn nccl_n3_reduce_scatter_lerp_and_first_duplicate_row_wins() {
    let e = engine(H200_VLLM);
    check("N3", ctx1(e, &nccl(7168.0, 8, "reduce_scatter"), 1000, 1, 0).latency_ms, "0.061878105469");
    check("all_gather 8 GPUs 256 elements", ctx1(e, &nccl(256.0, 8, "all_gather"), 1, 1, 0).latency_ms, "0.01034");
}

/// 11 §9: analytic ops — Elementwise, Embedding (memop) and P2P on h200 at 1000 tokens.
#[test]
fn analytic_ops_elementwise_embedding_p2p_at_1000_tokens() {
    let e = engine(H200_VLLM);
    let ew = json!({"Elementwise": {"name": "ew", "scale_factor": 1.0, "bytes_per_token": 40960.0,
        "scale_num_tokens": 1, "seq_split": 1}});
    let r = ctx1(e, &ew, 1, 1000, 0);
    check("Elementwise", r.latency_ms, "0.0136666667");
    check_source(&r, "empirical");
    let emb = json!({"Embedding": {"name": "emb", "scale_factor": 1.0, "vocab_size": 151936, "hidden_size": 5120,
        "quant_mode": "bfloat16", "seq_split": 1}});
    let r = ctx1(e, &emb, 1, 1000, 0);
    check("Embedding", r.latency_ms, "0.0056666667");
    check_source(&r, "empirical");
    let p2p = json!({"P2P": {"name": "p2p", "scale_factor": 1.0, "pp_size": 2, "hidden_size": 5120, "seq_split": 1}});
    let r = ctx1(e, &p2p, 1, 1000, 0);
    check("P2P", r.latency_ms, "0.2148");
    check_source(&r, "empirical");
}
