"""Family LLAMA: dense GQA decoders (spec 30 §6).

Architectures: LlamaForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM, MiMoForCausalLM.
Attention ops carry ``lane_order ["default"]`` here; the spec builder writes the real lane orders
into the top-level attention ops afterwards (spec 30 §9).
"""

from __future__ import annotations

from .. import ops
from ..hf_config import ModelConfig, ceil_div
from ..parallel import check_cp_seq_split, check_gqa_heads, check_heads
from . import BuildContext


def mtp_multiplier(num_layers: int, nextn: int) -> float:
    """``m = (nextn + L) / L`` in IEEE double, exactly in this order (spec 30 §5.2)."""
    return (nextn + num_layers) / num_layers


def gqa_kv_elements(model: ModelConfig, ctx: BuildContext) -> float:
    """``hidden_size`` of the CP KV all-gather (spec 43 §3.3): KV bytes per token per layer at
    tp 1 (``n_kv * head_dim * 2 * μkv``) in comm-mode elements."""
    b_kv = model.num_kv_heads * model.head_dim * 2 * ops.QUANT_BYTES[ctx.kvcache_quant_mode]
    return b_kv / ops.QUANT_BYTES[ctx.comm_quant_mode]


def apply_cp(context: list[dict], ctx: BuildContext, num_layers: int, kv_elements: float,
             *, seq_split_ops=None) -> list[dict]:
    """The CP delta of a GQA context list (spec 43 §3.1-§3.3): ``seq_split = cp`` on every op
    with the field (or those named in ``seq_split_ops``), ``cp_size = cp`` on the attention ops,
    ``attn_cp_size = cp`` on the dispatches, and the KV all-gather after the last
    ``context_attention`` when ``cp > 1``. A no-op at cp 1."""
    cp = ctx.cp_size
    if cp == 1:
        return context
    split = check_cp_seq_split(cp)
    out = []
    for op in context:
        f = ops.fields(op)
        if "seq_split" in f and (seq_split_ops is None or f["name"] in seq_split_ops):
            f["seq_split"] = split
        if ops.variant(op) in ("ContextAttention", "ContextMla"):
            f["cp_size"] = cp
        if ops.variant(op) == "MoeDispatch":
            f["attn_cp_size"] = cp
        out.append(op)
    if cp > 1:
        last = max(i for i, op in enumerate(out) if ops.fields(op)["name"] == "context_attention")
        out.insert(last + 1, ops.cp_all_gather(num_layers, kv_elements, cp, ctx.comm_quant_mode))
    return out


def build(model: ModelConfig, ctx: BuildContext) -> tuple[list[dict], list[dict]]:
    """The context and generation op lists of a dense model."""
    tp, pp = ctx.tp_size, ctx.pp_size
    L, h, n, d = model.num_layers, model.hidden_size, model.num_heads, model.head_dim
    inter, vocab = model.intermediate_size, model.vocab_size
    check_heads(n, tp)
    check_gqa_heads(n, model.num_kv_heads, d)
    nkv = ceil_div(model.num_kv_heads, tp)
    q, kv, f = ctx.gemm_quant_mode, ctx.kvcache_quant_mode, ctx.fmha_quant_mode

    qkv_n = (n * d) // tp + 2 * d * nkv
    attn_k = (n * d) // tp
    gate_n = (2 * inter) // tp
    ffn_k = inter // tp
    vocab_tp = vocab // tp

    m = mtp_multiplier(L, ctx.nextn)
    phases = {
        # phase: (per-layer scale, once-per-pass scale, p2p scale)
        "context": (float(L), 1.0, float(pp - 1)),
        "generation": (L * m, 1 * m, (pp - 1) * m),
    }
    lists = {}
    for phase, (per_layer, once, p2p_scale) in phases.items():
        p = phase + "_"
        if phase == "context":
            attention = ops.context_attention(
                p + "attention", per_layer, n // tp, nkv, d, 0, kv, f, model.use_qk_norm
            )
        else:
            ops.check_fmha(f)
            attention = ops.generation_attention(p + "attention", per_layer, n // tp, nkv, d, 0, kv)
        lists[phase] = [
            ops.embedding(p + "embedding", once, vocab_tp, h),
            ops.elementwise(p + "add_norm_1", per_layer, 2 * h, 2 * h),
            ops.gemm(p + "qkv_gemm", per_layer, qkv_n, h, q),
            attention,
            ops.gemm(p + "proj_gemm", per_layer, h, attn_k, q, low_precision_input=True),
            ops.elementwise(p + "add_norm_2", per_layer, 2 * h, 2 * h),
            ops.gemm(p + "gate_ffn1_gemm", per_layer, gate_n, h, q),
            ops.elementwise(p + "act_gate", per_layer, gate_n, ffn_k),
            ops.gemm(p + "ffn2_gemm", per_layer, h, ffn_k, q, low_precision_input=True),
            ops.gemm(p + "logits_gemm", once, vocab_tp, h, "bfloat16"),
            ops.custom_all_reduce(p + "embedding_ar", once, h, tp),
            ops.custom_all_reduce(p + "ar_1", per_layer, h, tp),
            ops.custom_all_reduce(p + "ar_2", per_layer, h, tp),
            ops.p2p(p + "p2p", p2p_scale, pp, h),
        ]
    context = apply_cp(lists["context"], ctx, L, gqa_kv_elements(model, ctx))
    return context, lists["generation"]
