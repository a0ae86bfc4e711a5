"""Family MOE: GQA attention + routed experts (spec 30 §7).

Architectures: MixtralForCausalLM, Qwen2MoeForCausalLM, Qwen3MoeForCausalLM, MiniMaxM2ForCausalLM,
GptOssForCausalLM (with the windowed-attention variant of §7.3).

The attention half is LLAMA's (ops 1-6, vocab-sharded embedding); the FFN half is a router GEMM
and a routed MoE between two dispatch ops. Quirks kept on purpose (all verified against the
reference): no context logits GEMM, no per-layer all-reduce, ``is_context`` true on the MoE and
dispatch ops of the generation list too.
"""

from __future__ import annotations

from .. import ops
from ..hf_config import ModelConfig, ceil_div
from ..parallel import check_experts, check_gqa_heads, check_heads
from . import BuildContext
from .llama import apply_cp, gqa_kv_elements, mtp_multiplier

#: Expert-load model of the routed experts of this family.
WORKLOAD_DISTRIBUTION = "power_law_1.2"
#: Architectures with the extra windowed-attention op of spec 30 §7.3, and its window.
WINDOWED_ARCHS = frozenset({"GptOssForCausalLM"})
GPT_OSS_WINDOW = 128
#: Block size of a block-quantized checkpoint when the config does not name one.
DEFAULT_WEIGHT_BLOCK = 128


def weight_block_size(model: ModelConfig) -> int:
    """``quantization_config.weight_block_size[0]`` (default 128)."""
    qc = model.raw.get("quantization_config")
    block = qc.get("weight_block_size") if isinstance(qc, dict) else None
    if isinstance(block, (list, tuple)) and block:
        first = block[0]
        if isinstance(first, int) and not isinstance(first, bool) and first > 0:
            return first
    return DEFAULT_WEIGHT_BLOCK


def check_block_quantized_moe(model: ModelConfig, moe_quant_mode: str, moe_tp_size: int) -> None:
    """fp8_block experts need ``(MI // moe_tp) % block == 0`` (spec 30 §4 rule 9). The first
    sentence is the reference's message (trailing space included); the rest says what fits."""
    if moe_quant_mode != "fp8_block":
        return
    inter = model.moe_intermediate_size
    block = weight_block_size(model)
    if (inter // moe_tp_size) % block == 0:
        return
    fitting = [t for t in range(1, max(inter // block, 0) + 1) if (inter // t) % block == 0]
    hint = (
        f"Each MoE tensor-parallel shard of the expert FFN must be a whole number of "
        f"{block}-wide quantization blocks; moe_tp_size values that work for this model: "
        f"{', '.join(map(str, fitting)) if fitting else 'none'} (keep tp_size * "
        f"attention_dp_size equal to moe_tp_size * moe_ep_size by moving the rest into "
        f"moe_ep_size)."
    )
    raise ValueError(
        f"Invalid quantized MoE configuration: (moe_intermediate_size={inter} / moe_tp_size="
        f"{moe_tp_size}) % weight_block_size={block} != 0. {hint}"
    )


def _attention(phase: str, scale: float, n: int, nkv: int, d: int, window: int, kv: str, f: str,
               use_qk_norm: bool) -> dict:
    name = phase + "_attention"
    if phase == "context":
        return ops.context_attention(name, scale, n, nkv, d, window, kv, f, use_qk_norm)
    ops.check_fmha(f)
    return ops.generation_attention(name, scale, n, nkv, d, window, kv)


def build(model: ModelConfig, ctx: BuildContext) -> tuple[list[dict], list[dict]]:
    """The context and generation op lists of a GQA + routed-MoE model."""
    tp, pp = ctx.tp_size, ctx.pp_size
    mtp, mep, adp = ctx.moe_tp_size, ctx.moe_ep_size, ctx.attention_dp_size
    L, h, n, d = model.num_layers, model.hidden_size, model.num_heads, model.head_dim
    vocab, E, topk = model.vocab_size, model.num_experts, model.topk
    MI = model.moe_intermediate_size
    check_heads(n, tp)
    check_gqa_heads(n, model.num_kv_heads, d)
    check_experts(E, mep)
    check_block_quantized_moe(model, ctx.moe_quant_mode, mtp)
    nkv = ceil_div(model.num_kv_heads, tp)
    q, qm = ctx.gemm_quant_mode, ctx.moe_quant_mode
    kv, f = ctx.kvcache_quant_mode, ctx.fmha_quant_mode
    windowed = model.architecture in WINDOWED_ARCHS

    qkv_n = (n * d) // tp + 2 * d * nkv
    attn_k = (n * d) // tp
    vocab_tp = vocab // tp

    m = mtp_multiplier(L, ctx.nextn)
    lists = {}
    for phase in ("context", "generation"):
        p = phase + "_"
        is_ctx = phase == "context"
        if is_ctx:
            per_layer, once, p2p_scale = float(L), 1.0, float(pp - 1)
        else:
            per_layer, once, p2p_scale = L * m, 1 * m, (pp - 1) * m
        out: list[dict] = []
        if windowed:
            # gpt-oss: half the layers use a 128-token sliding window (spec 30 §7.3)
            window_scale = L / 2 if is_ctx else (L * m) / 2
            out.append(_attention(phase, window_scale, n // tp, nkv, d, GPT_OSS_WINDOW, kv, f,
                                  model.use_qk_norm))
            attn_scale = L / 2 if is_ctx else (L / 2) * m
        else:
            attn_scale = per_layer
        out += [
            ops.embedding(p + "embedding", once, vocab_tp, h),
            ops.elementwise(p + "add_norm_1", per_layer, 2 * h, 2 * h),
            ops.gemm(p + "qkv_gemm", per_layer, qkv_n, h, q),
            _attention(phase, attn_scale, n // tp, nkv, d, 0, kv, f, model.use_qk_norm),
            ops.gemm(p + "proj_gemm", per_layer, h, attn_k, q, low_precision_input=True),
            ops.elementwise(p + "add_norm_2", per_layer, 2 * h, 2 * h),
            ops.gemm(p + "router_gemm", per_layer, E, h, "bfloat16"),
            ops.moe_dispatch(p + "moe_pre_dispatch", per_layer, h, topk, E, mtp, mep, adp, True,
                             ctx.backend, qm, is_context=True),
            ops.moe(p + "moe", per_layer, h, MI, topk, E, mtp, mep, adp, qm,
                    WORKLOAD_DISTRIBUTION, is_context=True),
            ops.moe_dispatch(p + "moe_post_dispatch", per_layer, h, topk, E, mtp, mep, adp, False,
                             ctx.backend, qm, is_context=True),
        ]
        if not is_ctx:
            out.append(ops.gemm(p + "logits_gemm", once, vocab_tp, h, "bfloat16"))
        out += [
            ops.custom_all_reduce(p + "embedding_ar", once, h, tp),
            ops.p2p(p + "p2p", p2p_scale, pp, h),
        ]
        lists[phase] = out
    context = apply_cp(lists["context"], ctx, L, gqa_kv_elements(model, ctx))
    return context, lists["generation"]
