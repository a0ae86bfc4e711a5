"""Families DEEPSEEK / KIMIK25: MLA attention + routed MoE + one shared expert (spec 30 §8).

Architectures: DeepSeekForCausalLM, DeepseekV3ForCausalLM (DeepSeek-V3/R1, Kimi-K2-Instruct) and
KimiK25ForConditionalGeneration (Kimi-K2.5; its text model is nested under ``text_config``).

Quirks kept on purpose (all verified against the reference, spec 30 §8.1): every layer is a MoE
layer, exactly one shared expert of width MI, MTP only through the generation multiplier, the MLA
dimensions are DeepSeek-V3 constants, the MLA kernels use the 128-head table convention, the
embedding is not vocab-sharded and has no all-reduce, ``proj_gemm`` / ``shared_ffn2_gemm`` have
``low_precision_input`` false, and only vLLM emits attention all-reduce ops.
"""

from __future__ import annotations

from collections import namedtuple

from .. import config_checks, ops
from ..hf_config import ModelConfig
from ..parallel import check_experts, check_heads
from . import BuildContext
from .llama import mtp_multiplier
from .shared_expert_moe import WORKLOAD_DISTRIBUTION, shared_expert_moe  # noqa: F401 (re-export)

# Hard-coded DeepSeek-V3 MLA widths (not read from the config, spec 30 §8.1).
DOWNSCALE_N = 2112  # q_lora_rank + kv_lora_rank + qk_rope_head_dim = 1536 + 512 + 64
Q_LORA_RANK = 1536
KV_LORA_RANK = 512
Q_HEAD_WIDTH = 192  # per-head q_b output
KV_HEAD_WIDTH = 256  # per-head kv_b output
O_HEAD_WIDTH = 128  # per-head o_proj input
#: The MLA kernel tables are indexed as if the model had 128 heads.
MLA_TABLE_HEADS = 128

_Q_MARKERS = ("q_a_proj", "q_b_proj", "q_proj")
_KV_MARKERS = ("kv_a_proj", "kv_b_proj", "kv_proj", "k_proj", "v_proj")
_O_MARKERS = ("o_proj",)
_INDEXER_MARKERS = ("indexer",)


def _as_dict(value) -> dict:
    return value if isinstance(value, dict) else {}


def _as_list(value) -> list:
    if isinstance(value, (list, tuple)):
        return list(value)
    if isinstance(value, str):
        return [value]
    return []


def exclusion_patterns(raw: dict) -> list[str]:
    """The module patterns a checkpoint leaves unquantized (spec 30 §8.2)."""
    qc = _as_dict(raw.get("quantization_config"))
    hq = _as_dict(_as_dict(raw.get("hf_quant_config")).get("quantization"))
    out: list[str] = []
    for source, keys in ((qc, ("modules_to_not_convert", "exclude_modules", "ignore")),
                         (hq, ("exclude_modules", "ignore"))):
        for key in keys:
            out += [str(p) for p in _as_list(source.get(key))]
    return out


def excluded_groups(patterns: list[str]) -> set[str]:
    """Attention projection groups (``q``, ``kv``, ``o``, ``indexer``) the patterns exclude."""
    groups: set[str] = set()
    for pattern in patterns:
        low = pattern.lower()
        hits = set()
        for group, markers in (("q", _Q_MARKERS), ("kv", _KV_MARKERS), ("o", _O_MARKERS),
                               ("indexer", _INDEXER_MARKERS)):
            if any(marker in low for marker in markers):
                hits.add(group)
        if not hits and "self_attn" in low:
            hits = {"q", "kv", "o", "indexer"}
        groups |= hits
    return groups


class MlaQuant(namedtuple("MlaQuant", (
        "q",  # str: q_b projection
        "kv",  # str: kv_b projection
        "o",  # str: output projection
        "down",  # str: fused q_a + kv_a downscale
        "bmm",  # str: MlaBmm pre/post
        "module",  # str: gemm key of the fused MLA module
        "exact",  # bool: q, kv and o share one mode (the block is wrapped in a Fallback)
        "shared",  # str: shared-expert GEMMs
))):
    """Per-projection GEMM modes of the MLA block and the shared expert.
    Immutable (a named tuple: see ``aic.compiler.parallel``)."""

    __slots__ = ()


def mla_quant(model: ModelConfig, ctx: BuildContext) -> MlaQuant:
    """The per-projection quant rules of spec 30 §8.2."""
    q = ctx.gemm_quant_mode
    patterns = exclusion_patterns(model.raw)
    excluded = excluded_groups(patterns)
    aq = "bfloat16" if "q" in excluded else q
    akv = "bfloat16" if "kv" in excluded else q
    ao = "bfloat16" if "o" in excluded else q
    adown = "bfloat16" if {"q", "kv"} <= excluded else q
    exact = aq == akv == ao
    if akv == "bfloat16":
        bmm = "bfloat16"
    elif q != "bfloat16":
        bmm = "fp8"
    else:
        bmm = "bfloat16"
    shared_excluded = any("shared_expert" in p.lower() for p in patterns)
    qs = "bfloat16" if shared_excluded and not ctx.gemm_quant_explicit else q
    return MlaQuant(q=aq, kv=akv, o=ao, down=adown, bmm=bmm, module=aq if exact else ao,
                    exact=exact, shared=qs)


def _mla_block(phase: str, scale: float, model: ModelConfig, ctx: BuildContext,
               mq: MlaQuant) -> list[dict]:
    """The MLA block of one phase: ``[Fallback]`` when the projections share a mode, else the
    granular ops inlined (spec 30 §8.3)."""
    tp = ctx.tp_size
    h, n = model.hidden_size, model.num_heads
    kv, f = ctx.kvcache_quant_mode, ctx.fmha_quant_mode
    p = phase + "_"
    is_ctx = phase == "context"
    heads = n // tp
    table_heads = MLA_TABLE_HEADS // tp

    granular = [
        ops.gemm(p + "downscale_gemm", scale, DOWNSCALE_N, h, mq.down),
        ops.gemm(p + "q_b_proj_gemm", scale, (Q_HEAD_WIDTH * n) // tp, Q_LORA_RANK, mq.q),
    ]
    if is_ctx:
        granular.append(
            ops.gemm(p + "kv_b_proj_gemm", scale, (KV_HEAD_WIDTH * n) // tp, KV_LORA_RANK, mq.kv)
        )
    if ctx.backend == "vllm":
        # vLLM prices MLA with its plain attention tables (n_kv floors, head size v_head_dim)
        nkv = model.num_kv_heads // tp
        if is_ctx:
            granular.append(ops.context_attention(
                p + "attention", scale, heads, nkv, model.v_head_dim, 0, kv, f, False
            ))
        else:
            ops.check_fmha(f)
            granular.append(ops.generation_attention(
                p + "attention", scale, heads, nkv, model.v_head_dim, 0, kv
            ))
    elif is_ctx:
        granular.append(ops.context_mla(p + "attention", scale, table_heads, kv, f))
    else:
        ops.check_fmha(f)
        granular += [
            ops.mla_bmm(p + "bmm_pre", scale, heads, mq.bmm, True),
            ops.generation_mla(p + "attention", scale, table_heads, kv),
            ops.mla_bmm(p + "bmm_post", scale, heads, mq.bmm, False),
        ]
    granular.append(
        ops.gemm(p + "proj_gemm", scale, h, (O_HEAD_WIDTH * n) // tp, mq.o)
    )
    if not mq.exact:
        return granular
    module = ops.mla_module(p + "mla_module", scale, heads, kv, f, mq.module, n,
                            is_context=is_ctx)
    return [ops.fallback(p + "mla_block", module, granular)]


def check_mla_config(model: ModelConfig, ctx: BuildContext) -> None:
    """The config fields the MLA op list needs: the other backends price MLA from fixed
    DeepSeek geometry, vLLM with plain attention ops of ``num_key_value_heads // tp`` KV heads of
    size ``v_head_dim`` (both must be at least 1)."""
    if ctx.backend != "vllm":
        return
    config_checks.at_least_one(
        "num_key_value_heads", model.num_kv_heads,
        "vLLM prices MLA attention per KV head; DeepSeek-V3 configs set it to num_attention_heads")
    config_checks.at_least_one("v_head_dim", model.v_head_dim,
                               "the value head size of MLA attention, 128 for DeepSeek-V3")


def build(model: ModelConfig, ctx: BuildContext) -> tuple[list[dict], list[dict]]:
    """The context and generation op lists of an MLA + MoE + shared-expert model."""
    tp, pp = ctx.tp_size, ctx.pp_size
    L, h, n = model.num_layers, model.hidden_size, model.num_heads
    vocab, E, MI = model.vocab_size, model.num_experts, model.moe_intermediate_size
    check_heads(n, tp)
    check_experts(E, ctx.moe_ep_size)
    check_mla_config(model, ctx)
    mq = mla_quant(model, ctx)
    moe = shared_expert_moe(model, ctx, shared_n=(2 * MI) // tp, shared_k=MI // tp,
                            shared_quant=mq.shared, generation_dispatch_is_context=False)
    vocab_tp = vocab // tp
    m = mtp_multiplier(L, ctx.nextn)

    # context
    p, s = "context_", float(L)
    context = [
        ops.embedding(p + "embedding", 1.0, vocab, h),
        ops.elementwise(p + "add_norm_1", s, 2 * h, 2 * h),
        *_mla_block("context", s, model, ctx, mq),
        ops.elementwise(p + "add_norm_2", s, 2 * h, 2 * h),
        *moe.context_ops(s),
        ops.gemm(p + "logits_gemm", 1.0, vocab_tp, h, "bfloat16"),
    ]
    if ctx.backend == "vllm":
        context.append(ops.custom_all_reduce(p + "tp_allreduce", 2 * L, h, tp))
    context.append(ops.p2p(p + "p2p", float(pp - 1), pp, h))

    # generation
    p, s, once = "generation_", L * m, 1 * m
    generation = [
        ops.embedding(p + "embedding", once, vocab, h),
        ops.elementwise(p + "add_norm_1", s, 2 * h, 2 * h),
        *_mla_block("generation", s, model, ctx, mq),
        ops.elementwise(p + "add_norm_2", s, 2 * h, 2 * h),
        moe.generation_overlap(s),
        ops.gemm(p + "logits_gemm", once, vocab_tp, h, "bfloat16"),
    ]
    if ctx.backend == "vllm":
        generation.append(ops.custom_all_reduce(p + "tp_allreduce", (2 * L) * m, h, tp))
    generation.append(ops.p2p(p + "p2p", (pp - 1) * m, pp, h))
    if ctx.cp_size != 1:
        context, generation = apply_cp(context, generation, model, ctx)
    return context, generation


def _walk(op_list: list[dict]):
    """Every op of a list, composites' members included (depth first)."""
    for op in op_list:
        yield op
        f = ops.fields(op)
        if ops.variant(op) == "Fallback":
            yield from _walk([f["primary"]])
            yield from _walk(f["fallback"])
        elif ops.variant(op) == "Overlap":
            yield from _walk(f["group_a"])
            yield from _walk(f["group_b"])


def mla_kv_elements(model: ModelConfig, ctx: BuildContext) -> float:
    """``hidden_size`` of the CP KV all-gather for MLA: ``(kv_lora_rank + qk_rope_head_dim) * μkv``
    bytes in comm-mode elements (spec 43 §3.3; config values, defaults 512 and 64)."""
    b_kv = ((model.kv_lora_rank or KV_LORA_RANK) + (model.qk_rope_head_dim or 64)) \
        * ops.QUANT_BYTES[ctx.kvcache_quant_mode]
    return b_kv / ops.QUANT_BYTES[ctx.comm_quant_mode]


def apply_cp(context: list[dict], generation: list[dict], model: ModelConfig,
             ctx: BuildContext) -> tuple[list[dict], list[dict]]:
    """The CP delta of spec 43 §3 for DEEPSEEK / KIMIK25 (reached with ``cp >= 2`` only: the MoE
    width rule refuses 0 and negatives): ``seq_split = cp`` on every context op with the field
    except the P2P, ``cp_size = cp`` on ``ContextMla``, the module primary at ``L / cp``,
    ``attn_cp_size = cp`` on the dispatches of both phases, and the KV all-gather right after
    the MLA block (the Fallback, or the inlined ``context_proj_gemm``)."""
    cp, L = ctx.cp_size, model.num_layers
    for op in _walk(context):
        f = ops.fields(op)
        variant = ops.variant(op)
        if "seq_split" in f and variant != "P2P":
            f["seq_split"] = cp
        if variant in ("ContextMla", "ContextAttention"):
            f["cp_size"] = cp
        elif variant == "MlaModuleContext":
            f["scale_factor"] = L / cp
        elif variant == "MoeDispatch":
            f["attn_cp_size"] = cp
    for op in _walk(generation):
        if ops.variant(op) == "MoeDispatch":
            ops.fields(op)["attn_cp_size"] = cp
    names = [ops.fields(op)["name"] for op in context]
    anchor = "context_mla_block" if "context_mla_block" in names else "context_proj_gemm"
    context.insert(names.index(anchor) + 1,
                   ops.cp_all_gather(L, mla_kv_elements(model, ctx), cp, ctx.comm_quant_mode))
    return context, generation
