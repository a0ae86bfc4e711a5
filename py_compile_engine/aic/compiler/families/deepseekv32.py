"""Family DEEPSEEKV32: DeepSeek Sparse Attention + routed MoE + one shared expert (spec 32).

Architectures: DeepseekV32ForCausalLM (DeepSeek-V3.2) and GlmMoeDsaForCausalLM (GLM-5.x). This is
the DeepSeek-V3 builder of :mod:`.deepseek` without MLA: the whole attention block is ONE op per
phase, ``DsaContext`` / ``DsaGeneration``, named ``context_attention`` / ``generation_attention``,
priced by the engine from the DSA module tables.

Differences from DEEPSEEK kept on purpose (spec 32 §0, §2, §3): the shared expert is sharded by
``moe_tp_size`` (not the attention TP), vLLM emits the same list as trtllm/sglang (no all-reduce),
the per-projection quant modes travel on the op for weight accounting only, a checkpoint that
excludes shared experts keeps them bf16 even under a caller ``gemm_quant_mode``, and on sglang the
GLM-5.2 shared top-k index is amortised through ``full_frac``.
"""

from __future__ import annotations

from .. import ops
from ..hf_config import ModelConfig
from ..parallel import check_experts, check_heads
from . import BuildContext
from .deepseek import excluded_groups, exclusion_patterns
from .llama import mtp_multiplier
from .shared_expert_moe import shared_expert_moe

#: The DSA ops carry this top-k whatever the config says (spec 32 §3.3).
INDEX_TOPK = 2048

#: Config keys the family requires (a missing one raises ``KeyError`` naming it, spec 32 §1).
REQUIRED_KEYS = ("q_lora_rank", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim",
                 "v_head_dim", "index_head_dim", "index_n_heads", "index_topk")


def full_frac(num_layers: int, raw: dict) -> float:
    """Share of the layers that compute their own top-k index (spec 32 §3.4)."""
    freq = int(raw.get("index_topk_freq") or 1)
    pattern = raw.get("index_topk_pattern")
    offset = raw.get("index_skip_topk_offset")
    if freq <= 1 and not pattern:
        return 1.0

    def skips(layer: int) -> bool:
        if pattern is not None:
            return layer < len(pattern) and pattern[layer] == "S"
        if offset is not None:
            return max(layer - int(offset) + 1, 0) % freq != 0
        return max(layer - 1, 0) % freq != 0

    full = sum(1 for layer in range(num_layers) if not skips(layer))
    return full / num_layers


def dsa_quant(model: ModelConfig, ctx: BuildContext) -> tuple[dict, str, str]:
    """``(projection modes, DSA gemm key, shared-expert mode)`` of spec 32 §2.2."""
    q = ctx.gemm_quant_mode
    patterns = exclusion_patterns(model.raw)
    excluded = excluded_groups(patterns)
    proj = {group: ("bfloat16" if group in excluded else q) for group in ("q", "kv", "o", "indexer")}
    modes = set(proj.values())
    gd = proj["q"] if len(modes) == 1 else proj["o"]
    shared = "bfloat16" if any("shared_expert" in p.lower() for p in patterns) else q
    return proj, gd, shared


def dsa_op(variant: str, name: str, scale: float, num_heads: int, kv: str, fmha: str, gemm: str,
           architecture: str, frac: float, proj: dict) -> dict:
    """``DsaContext`` / ``DsaGeneration`` in the field order of spec 32 §3.3."""
    return {variant: {
        "name": name, "scale_factor": float(scale), "num_heads": int(num_heads),
        "kv_cache_dtype": kv, "fmha_quant_mode": fmha, "gemm_quant_mode": gemm,
        "architecture": architecture, "index_topk": INDEX_TOPK, "cp_size": 1,
        "full_frac": float(frac), "attn_projection_quant_modes": dict(proj),
    }}


def build(model: ModelConfig, ctx: BuildContext) -> tuple[list[dict], list[dict]]:
    """The context and generation op lists of a DSA + MoE + shared-expert model."""
    for key in REQUIRED_KEYS:
        if key not in model.raw:
            raise KeyError(
                f"{key}: the model config lacks this key, which DeepSeek Sparse Attention models "
                f"({model.architecture}) require; add it from the checkpoint's config.json"
            )
    tp, pp = ctx.tp_size, ctx.pp_size
    mtp = ctx.moe_tp_size
    L, h, n = model.num_layers, model.hidden_size, model.num_heads
    vocab, E, MI = model.vocab_size, model.num_experts, model.moe_intermediate_size
    check_heads(n, tp)
    check_experts(E, ctx.moe_ep_size)
    kv = ctx.kvcache_quant_mode
    proj, gd, qs = dsa_quant(model, ctx)
    frac = full_frac(L, model.raw) if ctx.backend == "sglang" else 1.0
    arch = model.architecture
    heads = n // tp

    moe = shared_expert_moe(model, ctx, shared_n=(2 * MI) // mtp, shared_k=MI // mtp,
                            shared_quant=qs, generation_dispatch_is_context=False)
    vocab_tp = vocab // tp
    m = mtp_multiplier(L, ctx.nextn)

    # context
    p, s = "context_", float(L)
    context = [
        ops.embedding(p + "embedding", 1.0, vocab, h),
        ops.elementwise(p + "add_norm_1", s, 2 * h, 2 * h),
        dsa_op("DsaContext", p + "attention", s, heads, kv, ctx.fmha_quant_mode, gd, arch, frac, proj),
        ops.elementwise(p + "add_norm_2", s, 2 * h, 2 * h),
        *moe.context_ops(s),
        ops.gemm(p + "logits_gemm", 1.0, vocab_tp, h, "bfloat16"),
        ops.p2p(p + "p2p", float(pp - 1), pp, h),
    ]

    # generation
    p, s, once = "generation_", L * m, 1 * m
    generation = [
        ops.embedding(p + "embedding", once, vocab, h),
        ops.elementwise(p + "add_norm_1", s, 2 * h, 2 * h),
        dsa_op("DsaGeneration", p + "attention", s, heads, kv, "bfloat16", gd, arch, frac, proj),
        ops.elementwise(p + "add_norm_2", s, 2 * h, 2 * h),
        moe.generation_overlap(s),
        ops.gemm(p + "logits_gemm", once, vocab_tp, h, "bfloat16"),
        ops.p2p(p + "p2p", (pp - 1) * m, pp, h),
    ]
    if ctx.cp_size != 1:
        apply_cp(context, generation, ctx.cp_size)
    return context, generation


def apply_cp(context: list[dict], generation: list[dict], cp: int) -> None:
    """The DSA CP delta (spec 43 §7, 32 §5.7): ``DsaContext.cp_size = cp``, both context add-norm
    ops count ``floor(x / cp)`` tokens (``scale_num_tokens``, not ``seq_split``), the dispatches
    of both phases carry ``attn_cp_size = cp``; no op gets ``seq_split`` and there is no KV
    all-gather (the DSA module prices its own CP traffic)."""
    for op in context:
        f = ops.fields(op)
        if ops.variant(op) == "DsaContext":
            f["cp_size"] = cp
        elif f["name"] in ("context_add_norm_1", "context_add_norm_2"):
            f["scale_num_tokens"] = cp
        elif ops.variant(op) == "MoeDispatch":
            f["attn_cp_size"] = cp
    for op in generation:
        if ops.variant(op) == "Overlap":
            for member in ops.fields(op)["group_a"]:
                if ops.variant(member) == "MoeDispatch":
                    ops.fields(member)["attn_cp_size"] = cp
