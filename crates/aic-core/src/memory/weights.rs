//! Structural weight bytes (spec 41 §2): per op from its shape and quant width, never from
//! perf tables; per model as the context op list's sum divided by the pipeline stages.

use crate::spec::{DsaOp, Dsv4Kind, Dsv4Op, EngineSpec, MhcOp, MoeOp, Op};

/// Weight bytes of a routed-expert op: `floor(floor(H·I·E·m·g / ep) / tp) · sf`.
fn moe_weight_bytes(o: &MoeOp) -> f64 {
    let gates = if o.is_gated { 3.0 } else { 2.0 };
    let elems = o.hidden_size as f64
        * o.inter_size as f64
        * o.num_experts as f64
        * o.quant_mode.bytes_per_elem()
        * gates;
    ((elems / o.moe_ep_size as f64).floor() / o.moe_tp_size as f64).floor() * o.scale_factor
}

/// Weight bytes of a DSA attention block (spec 32 §7.1): each projection group at its own
/// quant width (`attn_projection_quant_modes`, else the op's gemm mode), times `scale_factor`.
fn dsa_weight_bytes(o: &DsaOp) -> f64 {
    let d = crate::ops::DsaDims::of(&o.architecture);
    let nh = u128::from(o.num_heads);
    let qk = d.qk_nope + d.qk_rope;
    let q = d.h * d.q_lora + d.q_lora * nh * qk;
    let kv = d.h * (d.kv_lora + d.qk_rope) + d.kv_lora * nh * (d.qk_nope + d.v);
    let out = nh * d.v * d.h;
    let idx = d.q_lora * (d.ihd * d.inh) + d.h * d.inh;
    let g = o.gemm_quant_mode;
    let (aq, akv, ao, aidx) = match &o.attn_projection_quant_modes {
        Some(m) => (m.q, m.kv, m.o, m.indexer),
        None => (g, g, g, g),
    };
    (q as f64 * aq.bytes_per_elem()
        + kv as f64 * akv.bytes_per_elem()
        + out as f64 * ao.bytes_per_elem()
        + idx as f64 * aidx.bytes_per_elem())
        * o.scale_factor
}

/// Weight bytes of an mHC op (spec 34 §7): `2·(M·Dm + M + 3)·μ·sf` with `Dm = hc·hidden`,
/// `M = (2+hc)·hc`.
fn mhc_weight_bytes(o: &MhcOp) -> f64 {
    let hc = u128::from(o.hc_mult);
    let dm = hc * u128::from(o.hidden_size);
    let m = (2 + hc) * hc;
    (2 * (m * dm + m + 3)) as f64 * o.quant_mode.bytes_per_elem() * o.scale_factor
}

/// Weight bytes of a DeepSeek-V4 attention block (spec 34 §7): gemm-mode projections and
/// compressor, bf16 absorbed output (and CSA indexer weights), fp32 sinks and compressor state.
fn dsv4_weight_bytes(o: &Dsv4Op) -> f64 {
    let (h, q, d, od) = (
        u128::from(o.hidden_size),
        u128::from(o.q_lora_rank),
        u128::from(o.head_dim),
        u128::from(o.o_lora_rank),
    );
    let (nh, g) = (u128::from(o.num_heads), u128::from(o.groups()));
    let cr = u128::from(o.attn_kind.ratio());
    let cm: u128 = if o.attn_kind == Dsv4Kind::Csa { 2 } else { 1 };
    let (ih, id) = (u128::from(o.index_n_heads), u128::from(o.index_head_dim));
    let mut gm = h * q + q * nh * d + h * d + g * od * h + 2 * h * cm * d;
    let mut bf = nh * d * od;
    let mut f32 = nh + cr * cm * d;
    if o.attn_kind == Dsv4Kind::Csa {
        gm += q * ih * id + 4 * h * id;
        bf += h * ih;
        f32 += 8 * id;
    }
    (gm as f64 * o.gemm_quant_mode.bytes_per_elem() + (2 * bf) as f64 + (4 * f32) as f64) * o.scale_factor
}

/// Weight bytes one op holds on one GPU, times its `scale_factor` (spec 41 §2.1).
pub fn op_weight_bytes(op: &Op) -> f64 {
    match op {
        Op::Gemm(o) => o.n as f64 * o.k as f64 * o.quant_mode.bytes_per_elem() * o.scale_factor,
        Op::Embedding(o) => {
            o.vocab_size as f64
                * o.hidden_size as f64
                * o.quant_mode.bytes_per_elem()
                * o.scale_factor
        }
        Op::Moe(o) => moe_weight_bytes(o),
        Op::DsaContext(o) | Op::DsaGeneration(o) => dsa_weight_bytes(o),
        Op::Mhc(o) => mhc_weight_bytes(o),
        Op::Dsv4Context(o) | Op::Dsv4Generation(o) => dsv4_weight_bytes(o),
        Op::Fallback(o) => {
            let primary = op_weight_bytes(&o.primary);
            if primary > 0.0 {
                primary
            } else {
                o.fallback.iter().map(op_weight_bytes).sum()
            }
        }
        Op::Overlap(o) => {
            let a: f64 = o.group_a.iter().map(op_weight_bytes).sum();
            let b: f64 = o.group_b.iter().map(op_weight_bytes).sum();
            a + b
        }
        Op::Elementwise(_)
        | Op::CustomAllReduce(_)
        | Op::Nccl(_)
        | Op::P2P(_)
        | Op::ContextAttention(_)
        | Op::GenerationAttention(_)
        | Op::MoeDispatch(_)
        | Op::ContextMla(_)
        | Op::GenerationMla(_)
        | Op::MlaBmm(_)
        | Op::MlaModuleContext(_)
        | Op::MlaModuleGeneration(_)
        | Op::Gdn(_)
        | Op::Mamba2(_)
        | Op::MsaContext(_)
        | Op::MsaGeneration(_)
        | Op::Kda(_) => 0.0,
    }
}

/// Weight bytes per GPU: Σ over the context ops / `pp_size` (spec 41 §2.2).
pub fn model_weight_bytes(spec: &EngineSpec) -> f64 {
    let total: f64 = spec.context_ops.iter().map(op_weight_bytes).sum();
    total / spec.engine.pp_size.max(1) as f64
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::spec::*;

    pub(crate) fn gemm(name: &str, n: u32, k: u32, q: GemmQuant, sf: f64) -> Op {
        Op::Gemm(GemmOp {
            name: name.into(),
            scale_factor: sf,
            n,
            k,
            quant_mode: q,
            scale_num_tokens: 1,
            low_precision_input: false,
            seq_split: 1,
            below_grid_sol: false,
        })
    }

    pub(crate) fn embedding(vocab: u32, hidden: u32) -> Op {
        Op::Embedding(EmbeddingOp {
            name: "context_embedding".into(),
            scale_factor: 1.0,
            vocab_size: vocab,
            hidden_size: hidden,
            quant_mode: GemmQuant::Bfloat16,
            seq_split: 1,
        })
    }

    #[allow(clippy::too_many_arguments)]
    pub(crate) fn moe(
        h: u32,
        i: u32,
        e: u32,
        ep: u32,
        tp: u32,
        q: MoeQuant,
        gated: bool,
        sf: f64,
    ) -> Op {
        Op::Moe(MoeOp {
            name: "context_moe".into(),
            scale_factor: sf,
            hidden_size: h,
            inter_size: i,
            topk: 8,
            num_experts: e,
            moe_tp_size: tp,
            moe_ep_size: ep,
            attention_dp_size: 1,
            quant_mode: q,
            workload_distribution: "power_law_1.01".into(),
            is_gated: gated,
            moe_backend: None,
            enable_eplb: false,
            is_context: true,
        })
    }

    fn elementwise() -> Op {
        Op::Elementwise(ElementwiseOp {
            name: "context_add_norm_1".into(),
            scale_factor: 64.0,
            bytes_per_token: 20480.0,
            scale_num_tokens: 1,
            seq_split: 1,
        })
    }

    fn mla_module() -> Op {
        Op::MlaModuleContext(MlaModuleOp {
            name: "context_mla_module".into(),
            scale_factor: 61.0,
            num_heads: 16,
            kv_cache_dtype: KvQuant::Fp8,
            fmha_quant_mode: FmhaQuant::Bfloat16,
            gemm_quant_mode: GemmQuant::Fp8Block,
            native_num_heads: Some(128),
        })
    }

    /// The Qwen3-32B tp 2 bf16 context ops of the §2.2 check.
    pub(crate) fn qwen3_32b_tp2_ops() -> Vec<Op> {
        let b = GemmQuant::Bfloat16;
        vec![
            embedding(75968, 5120),
            elementwise(),
            gemm("context_qkv_gemm", 5120, 5120, b, 64.0),
            gemm("context_proj_gemm", 5120, 4096, b, 64.0),
            gemm("context_gate_ffn1_gemm", 25600, 5120, b, 64.0),
            gemm("context_ffn2_gemm", 5120, 12800, b, 64.0),
            gemm("context_logits_gemm", 75968, 5120, b, 1.0),
        ]
    }

    /// The DeepSeek-V3 tp 8 ep 8 fp8_block context ops of the §2.2 check.
    pub(crate) fn deepseek_v3_tp8_ep8_ops() -> Vec<Op> {
        let f = GemmQuant::Fp8Block;
        let chain = vec![
            gemm("context_downscale_gemm", 2112, 7168, f, 61.0),
            gemm("context_q_b_proj_gemm", 3072, 1536, f, 61.0),
            gemm("context_kv_b_proj_gemm", 4096, 512, f, 61.0),
            Op::ContextMla(ContextMlaOp {
                name: "context_attention".into(),
                scale_factor: 61.0,
                num_heads: 16,
                kv_cache_dtype: KvQuant::Fp8,
                fmha_quant_mode: FmhaQuant::Bfloat16,
                cp_size: 1,
            }),
            gemm("context_proj_gemm", 7168, 2048, f, 61.0),
        ];
        vec![
            embedding(129280, 7168),
            Op::Fallback(FallbackOp {
                name: "context_mla_block".into(),
                primary: Box::new(mla_module()),
                fallback: chain,
            }),
            gemm("context_shared_gate_up_gemm", 512, 7168, f, 61.0),
            gemm("context_shared_ffn2_gemm", 7168, 256, f, 61.0),
            gemm("context_router_gemm", 256, 7168, GemmQuant::Bfloat16, 61.0),
            moe(7168, 2048, 256, 8, 1, MoeQuant::Fp8Block, true, 61.0),
            gemm("context_logits_gemm", 16160, 7168, GemmQuant::Bfloat16, 1.0),
        ]
    }

    pub(crate) fn spec_with(ops: Vec<Op>, pp: u32) -> EngineSpec {
        let engine: EngineConfig = serde_json::from_value(serde_json::json!({
            "model_name": "m", "system_name": "h200_sxm", "backend": "vllm", "pp_size": pp}))
        .unwrap();
        EngineSpec {
            schema_version: SPEC_SCHEMA_VERSION,
            engine,
            context_ops: ops,
            generation_ops: vec![],
        }
    }

    #[test]
    fn moe_checks() {
        let w = |q, gated| op_weight_bytes(&moe(7168, 2048, 256, 3, 2, q, gated, 1.0));
        assert_eq!(w(MoeQuant::Fp8Block, true), 1879048192.0);
        assert_eq!(w(MoeQuant::Nvfp4, true), 1056964608.0);
        assert_eq!(w(MoeQuant::Bfloat16, false), 2505397589.0);
        assert_eq!(w(MoeQuant::W4a16Mxfp4, true), 939524096.0);
        assert_eq!(w(MoeQuant::Int4Wo, true), 939524096.0);
    }

    #[test]
    fn gemm_checks() {
        let w = |q| op_weight_bytes(&gemm("g", 1000, 777, q, 3.0));
        assert_eq!(w(GemmQuant::Nvfp4), 1311187.5);
        assert_eq!(w(GemmQuant::Int4Wo), 1165500.0);
        assert_eq!(w(GemmQuant::Fp8), 2331000.0);
        assert_eq!(w(GemmQuant::Int8Wo), 2331000.0);
        assert_eq!(w(GemmQuant::Sq), 2331000.0);
        assert_eq!(w(GemmQuant::W4a16Nvfp4), 1311187.5);
        assert_eq!(w(GemmQuant::Bfloat16), 4662000.0);
    }

    #[test]
    fn qwen3_32b_model_weights() {
        let ops = qwen3_32b_tp2_ops();
        assert_eq!(op_weight_bytes(&ops[0]), 777912320.0);
        assert_eq!(op_weight_bytes(&ops[1]), 0.0);
        assert_eq!(op_weight_bytes(&ops[2]), 3355443200.0);
        assert_eq!(op_weight_bytes(&ops[3]), 2684354560.0);
        assert_eq!(op_weight_bytes(&ops[4]), 16777216000.0);
        assert_eq!(op_weight_bytes(&ops[5]), 8388608000.0);
        assert_eq!(op_weight_bytes(&ops[6]), 777912320.0);
        assert_eq!(
            model_weight_bytes(&spec_with(ops.clone(), 1)),
            32761446400.0
        );
        assert_eq!(model_weight_bytes(&spec_with(ops, 2)), 16380723200.0);
    }

    #[test]
    fn deepseek_v3_model_weights() {
        let ops = deepseek_v3_tp8_ep8_ops();
        assert_eq!(op_weight_bytes(&ops[0]), 1853358080.0);
        assert_eq!(op_weight_bytes(&ops[1]), 2234712064.0);
        assert_eq!(op_weight_bytes(&ops[2]), 223870976.0);
        assert_eq!(op_weight_bytes(&ops[3]), 111935488.0);
        assert_eq!(op_weight_bytes(&ops[4]), 223870976.0);
        assert_eq!(op_weight_bytes(&ops[5]), 85966454784.0);
        assert_eq!(op_weight_bytes(&ops[6]), 231669760.0);
        let mut spec = spec_with(ops, 1);
        assert_eq!(model_weight_bytes(&spec), 90845872128.0);
        // Generation ops are never used.
        spec.generation_ops = vec![gemm("x", 1000, 1000, GemmQuant::Bfloat16, 1.0)];
        assert_eq!(model_weight_bytes(&spec), 90845872128.0);
    }

    #[test]
    fn fallback_and_overlap_rules() {
        let g = |n| gemm("g", n, 10, GemmQuant::Bfloat16, 1.0);
        // Primary with weight: the chain is ignored.
        let fb = Op::Fallback(FallbackOp {
            name: "f".into(),
            primary: Box::new(g(5)),
            fallback: vec![g(7), g(9)],
        });
        assert_eq!(op_weight_bytes(&fb), 100.0);
        // Primary without weight: the chain is summed.
        let fb = Op::Fallback(FallbackOp {
            name: "f".into(),
            primary: Box::new(mla_module()),
            fallback: vec![g(7), g(9)],
        });
        assert_eq!(op_weight_bytes(&fb), 320.0);
        let ov = Op::Overlap(OverlapOp {
            name: "o".into(),
            group_a: vec![g(1), g(2)],
            group_b: vec![g(3)],
        });
        assert_eq!(op_weight_bytes(&ov), 120.0);
        assert_eq!(op_weight_bytes(&elementwise()), 0.0);
        assert_eq!(op_weight_bytes(&mla_module()), 0.0);
    }
}
