"""Family DEEPSEEKV4: mHC + CSA/HCA compressed attention + routed MoE + one shared expert (spec 34).

Architecture: DeepseekV4ForCausalLM (DeepSeek-V4-Flash / -Pro). The MoE half is the DeepSeek-V3
builder's (:mod:`.deepseek`); the attention half is one ``Dsv4Context`` / ``Dsv4Generation`` op per
compressed-attention kind, with the layers grouped by their compress ratio (CSA = 4, HCA = 128,
sliding-window-only layers priced as HCA), wrapped in ``Mhc`` pre/post hyper-connection ops.

Differences from DEEPSEEK kept on purpose (spec 34 §4): no MLA block, no Fallback, no all-reduce
on any backend, the shared expert always uses the gemm mode and is sharded by the attention TP,
and the generation dispatch / MoE ops carry ``is_context: true``.
"""

from __future__ import annotations

from collections import Counter

from .. import config_checks, ops
from ..hf_config import ModelConfig
from ..parallel import check_experts, check_heads
from . import BuildContext
from .llama import mtp_multiplier
from .shared_expert_moe import shared_expert_moe

ARCHITECTURE = "DeepseekV4ForCausalLM"

#: Config keys the family requires (a missing one raises ``KeyError`` naming it, spec 34 §1).
REQUIRED_KEYS = ("q_lora_rank", "o_lora_rank", "o_groups", "head_dim", "qk_rope_head_dim",
                 "index_head_dim", "index_n_heads", "index_topk", "sliding_window",
                 "compress_ratios", "compress_rope_theta", "num_hash_layers", "hc_mult",
                 "hc_sinkhorn_iters", "hc_eps", "n_shared_experts")

#: Config keys the Dsv4 attention op uses as sizes, each at least 1 (its ``o_groups`` is
#: clamped to 1, its ``qk_rope_head_dim`` may be 0).
DSV4_AT_LEAST_ONE = ("q_lora_rank", "o_lora_rank", "head_dim", "index_n_heads", "index_head_dim",
                     "index_topk")

#: Compress ratio -> attention kind.
KIND_BY_RATIO = {4: "Csa", 128: "Hca"}


def compress_ratios(model: ModelConfig) -> list[int]:
    """``compress_ratios`` cut to the decoder layers, checked (spec 34 §1)."""
    ratios = list(model.raw["compress_ratios"])
    L = model.num_layers
    if len(ratios) < L:
        raise ValueError(
            f"DeepSeek-V4 compress_ratios length {len(ratios)} is smaller than num_hidden_layers {L}"
        )
    ratios = ratios[:L]
    unknown = sorted({r for r in ratios if r not in (0, 4, 128)})
    if unknown:
        raise ValueError(f"Unsupported DeepSeek-V4 compress_ratios: {unknown}")
    return ratios


def attention_groups(ratios: list[int]) -> list[tuple[str, int]]:
    """``(kind, layer count)`` per attention op: ratios counted in first-occurrence order, the
    sliding-window (0) layers folded into HCA (appended when absent), empty groups dropped."""
    counts = Counter(ratios)  # insertion order = first occurrence
    window = counts.pop(0, 0)
    if window:
        counts[128] = counts.get(128, 0) + window
    return [(KIND_BY_RATIO[r], c) for r, c in counts.items() if c > 0]


def mhc_op(name: str, scale: float, which: str, hc: int, hidden: int, sinkhorn: int) -> dict:
    """``Mhc`` in the field order of spec 34 §4.1."""
    return {"Mhc": {
        "name": name, "scale_factor": float(scale), "op": which, "hc_mult": int(hc),
        "hidden_size": int(hidden), "architecture": ARCHITECTURE, "sinkhorn_iters": int(sinkhorn),
        "quant_mode": "bfloat16", "seq_split": 1,
    }}


def dsv4_attention_op(variant: str, name: str, scale: float, kind: str, model: ModelConfig,
                      ctx: BuildContext, fmha: str) -> dict:
    """``Dsv4Context`` / ``Dsv4Generation`` in the field order of spec 34 §4.1."""
    raw, tp, n = model.raw, ctx.tp_size, model.num_heads
    return {variant: {
        "name": name, "scale_factor": float(scale), "attn_kind": kind, "num_heads": n // tp,
        "native_heads": n, "tp_size": tp, "kv_cache_dtype": ctx.kvcache_quant_mode,
        "fmha_quant_mode": fmha, "gemm_quant_mode": ctx.gemm_quant_mode,
        "architecture": ARCHITECTURE, "cp_size": 1, "window_size": int(raw["sliding_window"]),
        "hidden_size": model.hidden_size, "q_lora_rank": int(raw["q_lora_rank"]),
        "o_lora_rank": int(raw["o_lora_rank"]), "head_dim": int(raw["head_dim"]),
        "rope_head_dim": int(raw["qk_rope_head_dim"]), "index_n_heads": int(raw["index_n_heads"]),
        "index_head_dim": int(raw["index_head_dim"]), "index_topk": int(raw["index_topk"]),
        "o_groups": max(1, int(raw["o_groups"]) // tp),
    }}


def build(model: ModelConfig, ctx: BuildContext) -> tuple[list[dict], list[dict]]:
    """The context and generation op lists of a DeepSeek-V4 model."""
    for key in REQUIRED_KEYS:
        if key not in model.raw:
            raise KeyError(
                f"{key}: the model config lacks this key, which DeepSeek-V4 models "
                f"({model.architecture}) require; add it from the checkpoint's config.json"
            )
    tp, pp = ctx.tp_size, ctx.pp_size
    L, h, n = model.num_layers, model.hidden_size, model.num_heads
    vocab, E, MI = model.vocab_size, model.num_experts, model.moe_intermediate_size
    groups = attention_groups(compress_ratios(model))  # config parsing precedes the TP checks
    check_heads(n, tp)
    check_experts(E, ctx.moe_ep_size)
    for key in DSV4_AT_LEAST_ONE:
        config_checks.at_least_one(key, int(model.raw[key]),
                                   "a size of the DeepSeek-V4 attention module; copy it from the "
                                   "checkpoint's config.json")
    hc = int(model.raw["hc_mult"])
    sinkhorn = int(model.raw["hc_sinkhorn_iters"])
    MIl = MI // tp
    moe = shared_expert_moe(model, ctx, shared_n=2 * MIl, shared_k=MIl,
                            shared_quant=ctx.gemm_quant_mode, generation_dispatch_is_context=True)
    m = mtp_multiplier(L, ctx.nextn)

    lists = {}
    for phase in ("context", "generation"):
        p = phase + "_"
        is_ctx = phase == "context"
        s, once = (float(L), 1.0) if is_ctx else (L * m, 1 * m)
        variant = "Dsv4Context" if is_ctx else "Dsv4Generation"
        fmha = ctx.fmha_quant_mode
        attention = [
            dsv4_attention_op(variant, p + "attention", float(c) if is_ctx else c * m, kind,
                              model, ctx, fmha)
            for kind, c in groups
        ]
        out = [
            ops.embedding(p + "embedding", once, vocab, h),
            mhc_op(p + "mhc_pre", s, "pre", hc, h, sinkhorn),
            ops.elementwise(p + "attn_norm", s, h, h),
            *attention,
            mhc_op(p + "mhc_post", s, "post", hc, h, sinkhorn),
            ops.elementwise(p + "ffn_norm", s, h, h),
        ]
        out += moe.context_ops(s) if is_ctx else [moe.generation_overlap(s)]
        out += [
            ops.gemm(p + "logits_gemm", once, vocab // tp, h, "bfloat16"),
            ops.p2p(p + "p2p", float(pp - 1) if is_ctx else (pp - 1) * m, pp, h),
        ]
        lists[phase] = out
    if ctx.cp_size != 1:
        apply_cp(lists["context"], lists["generation"], ctx.cp_size)
    return lists["context"], lists["generation"]


#: Context ops of a DeepSeek-V4 model that are priced at ``ceil(x / cp)`` tokens under CP.
CP_SPLIT_VARIANTS = ("Embedding", "Mhc", "Elementwise", "Gemm")


def apply_cp(context: list[dict], generation: list[dict], cp: int) -> None:
    """The DeepSeek-V4 CP delta (spec 43 §7, 34 §5.6): ``seq_split = cp`` on the context
    embedding, ``Mhc`` ops, norms, shared-expert GEMMs / activation, router and logits GEMM; both
    ``Dsv4Context`` ops carry ``cp_size = cp``; the dispatches of both phases carry
    ``attn_cp_size = cp``. The P2P op keeps ``seq_split 1``, the ``Moe`` op has no CP field and
    there is no separate KV all-gather (the compressed-attention op prices its own CP traffic)."""
    for op in context:
        f = ops.fields(op)
        variant = ops.variant(op)
        if variant in CP_SPLIT_VARIANTS:
            f["seq_split"] = cp
        elif variant == "Dsv4Context":
            f["cp_size"] = cp
        elif variant == "MoeDispatch":
            f["attn_cp_size"] = cp
    for op in generation:
        if ops.variant(op) == "Overlap":
            for member in ops.fields(op)["group_a"]:
                if ops.variant(member) == "MoeDispatch":
                    ops.fields(member)["attn_cp_size"] = cp
