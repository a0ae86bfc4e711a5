"""Family MINIMAXM3: MiniMax sparse attention (MSA) + one shared expert + routed MoE (spec 36 §4.1-4.2).

Architectures: MiniMaxM3ForCausalLM and MiniMaxM3SparseForConditionalGeneration (MiniMax-M3 and its
NVFP4 checkpoint). Every layer is modelled the same way: the whole attention block is ONE op per
phase, ``MsaContext`` / ``MsaGeneration``, priced by the engine from the MSA module tables (or, on a
miss in HYBRID and always in EMPIRICAL, by transferring the GLM-5 DSA utilisation).

What makes the family its own module rather than a DSA variant (spec 36 §1.2, §4): the MSA geometry
is fixed by family constants (the config's ``sparse_attention_config`` is not read), the per-rank
head counts use ``max(1, n // tp)`` (a floor with a floor of one), the shared expert has the routed
expert's width and is sharded by the attention TP, the embedding keeps the full vocabulary, and the
generation MoE members carry ``is_context: true`` as the reference's builder emits them.
"""

from __future__ import annotations

from .. import config_checks, ops
from ..hf_config import ModelConfig
from ..parallel import check_experts, check_heads
from . import BuildContext
from .llama import mtp_multiplier
from .shared_expert_moe import shared_expert_moe

#: Indexer heads of an MSA block (spec 36 §1.2).
INDEX_N_HEADS = 4
#: Indexer head dimension.
INDEX_HEAD_DIM = 128
#: KV block size of the block-sparse attention.
BLOCK_SIZE = 128
#: Top-k blocks × block size.
INDEX_TOPK = 16 * BLOCK_SIZE
#: Value head dimension.
V_HEAD_DIM = 128
#: The DSA architecture whose utilisation the cross-op transfer borrows.
DSA_ARCHITECTURE = "GlmMoeDsaForCausalLM"
#: Divisor of the transferred DSA utilisation (never set by the parser).
DSA_SCALE_K = 1.0


def msa_op(variant: str, name: str, scale: float, model: ModelConfig, ctx: BuildContext) -> dict:
    """``MsaContext`` / ``MsaGeneration`` in the wire field order of spec 36 §5.1."""
    tp = ctx.tp_size
    return {variant: {
        "name": name, "scale_factor": float(scale),
        "num_heads": max(1, model.num_heads // tp), "num_kv_heads": max(1, model.num_kv_heads // tp),
        "hidden_size": model.hidden_size, "head_dim": model.head_dim, "v_head_dim": V_HEAD_DIM,
        "index_n_heads": INDEX_N_HEADS, "index_head_dim": INDEX_HEAD_DIM, "index_topk": INDEX_TOPK,
        "block_size": BLOCK_SIZE, "kv_cache_dtype": ctx.kvcache_quant_mode,
        "fmha_quant_mode": ctx.fmha_quant_mode, "gemm_quant_mode": ctx.gemm_quant_mode,
        "dsa_architecture": DSA_ARCHITECTURE, "dsa_scale_k": DSA_SCALE_K,
    }}


def build(model: ModelConfig, ctx: BuildContext) -> tuple[list[dict], list[dict]]:
    """The context and generation op lists of a MiniMax-M3 model (spec 36 §4.1, §4.2)."""
    tp, pp = ctx.tp_size, ctx.pp_size
    L, h = model.num_layers, model.hidden_size
    vocab, E, MI = model.vocab_size, model.num_experts, model.moe_intermediate_size
    check_heads(model.num_heads, tp)
    check_experts(E, ctx.moe_ep_size)
    config_checks.at_least_one("head_dim", model.head_dim, "the size of one MSA attention head; "
                               "hidden_size / num_attention_heads when the config has none")
    moe = shared_expert_moe(model, ctx, shared_n=(2 * MI) // tp, shared_k=MI // tp,
                            shared_quant=ctx.gemm_quant_mode, generation_dispatch_is_context=True)
    m = mtp_multiplier(L, ctx.nextn)

    p, s = "context_", float(L)
    context = [
        ops.embedding(p + "embedding", 1.0, vocab, h),
        ops.elementwise(p + "add_norm_1", s, 2 * h, 2 * h),
        msa_op("MsaContext", p + "attention", s, model, ctx),
        ops.elementwise(p + "add_norm_2", s, 2 * h, 2 * h),
        *moe.context_ops(s),
        ops.gemm(p + "logits_gemm", 1.0, vocab // tp, h, "bfloat16"),
        ops.p2p(p + "p2p", float(pp - 1), pp, h),
    ]

    p, s, once = "generation_", L * m, 1 * m
    generation = [
        ops.embedding(p + "embedding", once, vocab, h),
        ops.elementwise(p + "add_norm_1", s, 2 * h, 2 * h),
        msa_op("MsaGeneration", p + "attention", s, model, ctx),
        ops.elementwise(p + "add_norm_2", s, 2 * h, 2 * h),
        moe.generation_overlap(s),
        ops.gemm(p + "logits_gemm", once, vocab // tp, h, "bfloat16"),
        ops.p2p(p + "p2p", (pp - 1) * m, pp, h),
    ]
    return context, generation
