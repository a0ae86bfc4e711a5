"""Families HYBRIDMOE and STEP3P7: per-layer sliding / global attention with dense or MoE FFNs
(spec 35 §2.2-§2.4, §5, §6).

Architectures: Llama4ForConditionalGeneration and MiMoV2FlashForCausalLM (HYBRIDMOE),
Step3p7ForConditionalGeneration, Step3p7FlashForCausalLM, Step3p5ForCausalLM and
Step3p5FlashForCausalLM (STEP3P7, the HYBRIDMOE list plus qk-norm, an optional per-head attention
gate and a shared expert appended after the P2P op).

The layers come in up to four *layer types* (global / sliding attention x MoE / dense FFN). Each
type present contributes one block of ops scaled by its layer count, in the fixed order
global+MoE, sliding+MoE, sliding+dense, global+dense. All attention ops of a phase share the name
``context_attention`` / ``generation_attention``. Quirks kept on purpose (all verified against
the reference): the embedding is not vocab-sharded, there is no all-reduce op at any tp, the
context list has the logits GEMM, the dispatch ops carry ``moe_quant "bfloat16"`` whatever the
MoE mode, MiMo's pattern value 1 means *global* attention and its ``swa_num_attention_heads`` is
not read, and Step's shared-expert width comes from the top level of the raw config.
"""

from __future__ import annotations

from collections import namedtuple

from .. import config_checks, ops
from ..hf_config import ModelConfig, ceil_div
from ..parallel import check_experts, check_heads
from . import BuildContext
from .llama import mtp_multiplier
from .moe import check_block_quantized_moe

#: Expert-load model of the routed experts of these families.
WORKLOAD_DISTRIBUTION = "power_law_1.01"
#: What the dispatch ops of these families carry as ``moe_quant`` (spec 35 §3.3).
DISPATCH_MOE_QUANT = "bfloat16"
#: Layer types in emission order: (key, global attention?, MoE FFN?, block name stem).
LAYER_TYPES = (
    ("gm", True, True, "global"),
    ("sm", False, True, "swa"),
    ("sd", False, False, "swa_dense"),
    ("gd", True, False, "global_dense"),
)

LLAMA4 = "Llama4ForConditionalGeneration"
MIMO_V2 = "MiMoV2FlashForCausalLM"


class HybridLayout(namedtuple("HybridLayout", (
        "attention_global",  # tuple[bool, ...]: per layer: True = global, False = sliding
        "moe",  # tuple[bool, ...]: per layer: True = routed MoE FFN, False = dense FFN
        "window",  # int
        "swa_heads",  # int
        "swa_kv_heads",  # int
        "swa_head_dim",  # int
        "swa_v_head_dim",  # int
        "global_v_head_dim",  # int
        "dense_intermediate",  # int
        "use_qk_norm",  # bool
        "head_gate",  # bool
        "shared_expert",  # int
), defaults=(0, 0, 0, 0, 0, 0, False, False, 0))):
    """The per-layer patterns and sliding-layer geometry of spec 35 §2.2-§2.4 (0 = same as the
    global layers).
    Immutable (a named tuple: see ``aic.compiler.parallel``)."""

    __slots__ = ()

    def layers_of(self, is_global: bool, is_moe: bool) -> int:
        """Layers of one type."""
        return sum(1 for a, m in zip(self.attention_global, self.moe) if a == is_global and m == is_moe)

    @property
    def moe_layers(self) -> int:
        return sum(1 for m in self.moe if m)

    @property
    def sliding_layers(self) -> int:
        return sum(1 for a in self.attention_global if not a)

    @property
    def global_layers(self) -> int:
        return sum(1 for a in self.attention_global if a)


def _int_or_zero(value) -> int:
    """``int(value or 0)``: a missing, null or zero value is 0."""
    return int(value or 0)


def _parse_llama4(fields: dict, layers: int, intermediate: int) -> HybridLayout:
    step = fields.get("interleave_moe_layer_step", 1)
    # A JSON boolean is an integer to the reference (true = step 1); 2.0 is not.
    if not isinstance(step, int) or step <= 0:
        raise ValueError(f"interleave_moe_layer_step must be a positive integer, got {step}")
    return HybridLayout(
        attention_global=tuple(i % 2 == 1 for i in range(layers)),
        moe=tuple((i + 1) % step == 0 for i in range(layers)),
        window=_int_or_zero(fields.get("attention_chunk_size")),
        dense_intermediate=_int_or_zero(fields.get("intermediate_size_mlp")) or intermediate,
    )


def _parse_mimo(fields: dict, layers: int) -> HybridLayout:
    attn = fields.get("hybrid_layer_pattern", [])
    moe = fields.get("moe_layer_freq", [])
    attn = list(attn) if isinstance(attn, list) else []
    moe = list(moe) if isinstance(moe, list) else [moe] * layers
    if len(attn) != layers or len(moe) != layers:
        raise ValueError(
            f"Hybrid pattern length mismatch for {MIMO_V2}: expected {layers} entries, got "
            f"attn={len(attn)} moe={len(moe)}"
        )
    if any(v not in (0, 1) for v in attn + moe):
        raise ValueError(f"Hybrid patterns for {MIMO_V2} must contain only 0/1 values")
    return HybridLayout(
        # a pattern value 1 is a global layer (the reference's polarity)
        attention_global=tuple(v == 1 for v in attn),
        moe=tuple(v == 1 for v in moe),
        window=_int_or_zero(fields.get("sliding_window_size")),
        swa_kv_heads=_int_or_zero(fields.get("swa_num_key_value_heads")),
        swa_head_dim=_int_or_zero(fields.get("swa_head_dim")),
        swa_v_head_dim=_int_or_zero(fields.get("swa_v_head_dim")),
        global_v_head_dim=_int_or_zero(fields.get("v_head_dim")),
    )


def _moe_indices(value) -> list[int] | None:
    """``moe_layers_enum`` as layer indices: a comma-separated string or a list; ``None`` when
    absent or empty."""
    if isinstance(value, str) and value:
        return [int(part) for part in value.split(",")]
    if isinstance(value, list) and value:
        return [int(part) for part in value]
    return None


def _parse_step(fields: dict, raw: dict, layers: int) -> HybridLayout:
    other = fields.get("attention_other_setting") or {}
    other = other if isinstance(other, dict) else {}
    mtp = fields.get("num_nextn_predict_layers", 0) or 0
    types = fields.get("layer_types", [])
    types = list(types) if isinstance(types, list) else []
    if mtp > 0 and len(types) == layers + mtp:
        types = types[:layers]
    if len(types) != layers:
        raise ValueError(
            f"Step3p7 layer_types length {len(types)} != num_hidden_layers {layers} "
            f"(num_nextn_predict_layers={mtp})"
        )
    if any(t not in ("sliding_attention", "full_attention") for t in types):
        raise ValueError(
            "Step3p7 layer_types must contain only 'sliding_attention' or 'full_attention'"
        )
    indices = _moe_indices(fields.get("moe_layers_enum"))
    if indices is not None:
        chosen = set(indices)
        moe = tuple(i in chosen for i in range(layers))
    else:
        first_dense = _int_or_zero(fields.get("first_k_dense_replace"))
        moe = tuple(i >= first_dense for i in range(layers))
    return HybridLayout(
        attention_global=tuple(t == "full_attention" for t in types),
        moe=moe,
        window=_int_or_zero(fields.get("sliding_window") or fields.get("sliding_window_size")),
        swa_heads=_int_or_zero(other.get("num_attention_heads")),
        swa_head_dim=_int_or_zero(other.get("head_dim")),
        use_qk_norm=True,
        head_gate=bool(fields.get("use_head_wise_attn_gate", False)),
        # read from the top level of the raw config, not the flattened text config (§2.4)
        shared_expert=_int_or_zero(raw.get("share_expert_dim")),
    )


def parse(model: ModelConfig) -> HybridLayout:
    """The layer layout of a HYBRIDMOE / STEP3P7 model; raises the reference's ``ValueError``
    for a malformed pattern (these checks come before every parallelism check, spec 35 §4)."""
    fields = model.text or model.raw
    if model.architecture == LLAMA4:
        return _parse_llama4(fields, model.num_layers, model.intermediate_size)
    if model.architecture == MIMO_V2:
        return _parse_mimo(fields, model.num_layers)
    return _parse_step(fields, model.raw, model.num_layers)


def _attention(phase: str, scale: float, n: int, nkv: int, d: int, window: int, ctx: BuildContext,
               use_qk_norm: bool) -> dict:
    name = phase + "_attention"
    if phase == "context":
        return ops.context_attention(name, scale, n, nkv, d, window, ctx.kvcache_quant_mode,
                                     ctx.fmha_quant_mode, use_qk_norm)
    ops.check_fmha(ctx.fmha_quant_mode)
    return ops.generation_attention(name, scale, n, nkv, d, window, ctx.kvcache_quant_mode)


def check_attention_config(model: ModelConfig, layout: HybridLayout, sq: int, skv: int,
                           shd: int) -> None:
    """The GQA fields of each attention kind present. Sliding layers read their own fields when
    the config sets them (MiMo's ``swa_num_key_value_heads`` / ``swa_head_dim``, Step's
    ``attention_other_setting``), else the global ones."""
    if layout.global_layers:
        config_checks.gqa(model.num_heads, model.num_kv_heads, model.head_dim)
    if layout.sliding_layers:
        config_checks.gqa(
            sq, skv, shd,
            heads_field="attention_other_setting.num_attention_heads" if layout.swa_heads
            else "num_attention_heads",
            kv_field="swa_num_key_value_heads" if layout.swa_kv_heads else "num_key_value_heads",
            dim_field=("attention_other_setting.head_dim" if model.family == "STEP3P7"
                       else "swa_head_dim") if layout.swa_head_dim else "head_dim")


def build(model: ModelConfig, ctx: BuildContext) -> tuple[list[dict], list[dict]]:
    """The context and generation op lists of a hybrid-attention MoE model (spec 35 §5, §6)."""
    layout = parse(model)
    tp, pp = ctx.tp_size, ctx.pp_size
    mtp, mep, adp = ctx.moe_tp_size, ctx.moe_ep_size, ctx.attention_dp_size
    L, h, n, d = model.num_layers, model.hidden_size, model.num_heads, model.head_dim
    vocab, E, topk, MI = model.vocab_size, model.num_experts, model.topk, model.moe_intermediate_size
    check_heads(n, tp)
    check_experts(E, mep)
    check_block_quantized_moe(model, ctx.moe_quant_mode, mtp)
    q, qm = ctx.gemm_quant_mode, ctx.moe_quant_mode

    sq = layout.swa_heads or n
    skv = layout.swa_kv_heads or model.num_kv_heads
    shd = layout.swa_head_dim or d
    check_attention_config(model, layout, sq, skv, shd)
    svd = layout.swa_v_head_dim or d
    gvd = layout.global_v_head_dim or d
    skv_r, gkv_r = ceil_div(skv, tp), ceil_div(model.num_kv_heads, tp)
    geometry = {
        # global / sliding: (query heads per rank, kv heads per rank, head, window, qkv n, proj k)
        True: (n // tp, gkv_r, d, 0, (n * d) // tp + gkv_r * (d + gvd), (n * gvd) // tp),
        False: (sq // tp, skv_r, shd, layout.window, (sq * shd) // tp + skv_r * (shd + svd),
                (sq * svd) // tp),
    }
    dense_i = (layout.dense_intermediate or model.intermediate_size) // tp
    shared_i = layout.shared_expert // tp

    m = mtp_multiplier(L, ctx.nextn)
    lists = {}
    for phase in ("context", "generation"):
        p = phase + "_"
        is_ctx = phase == "context"
        once = 1.0 if is_ctx else 1 * m
        out = [ops.embedding(p + "embedding", once, vocab, h)]
        for key, is_global, is_moe, stem in LAYER_TYPES:
            count = layout.layers_of(is_global, is_moe)
            if count == 0:
                continue
            s = float(count) if is_ctx else count * m
            b = p + stem
            heads_r, kv_r, head, window, qkv_n, pin = geometry[is_global]
            out += [
                ops.elementwise(b + "_attn_norm", s, 2 * h, 2 * h),
                ops.gemm(b + "_qkv_gemm", s, qkv_n, h, q),
                _attention(phase, s, heads_r, kv_r, head, window, ctx, layout.use_qk_norm),
            ]
            if layout.head_gate:
                out += [
                    ops.gemm(b + "_attn_gate_gemm", s, heads_r, h, q),
                    ops.elementwise(b + "_attn_gate", s, pin + heads_r, pin),
                ]
            out.append(ops.gemm(b + "_proj_gemm", s, h, pin, q, low_precision_input=True))
            if is_moe:
                out += [
                    ops.elementwise(b + "_moe_norm", s, 2 * h, 2 * h),
                    ops.gemm(b + "_router_gemm", s, E, h, "bfloat16"),
                    ops.moe_dispatch(b + "_moe_pre_dispatch", s, h, topk, E, mtp, mep, adp, True,
                                     ctx.backend, DISPATCH_MOE_QUANT, is_context=True),
                    ops.moe(b + "_moe", s, h, MI, topk, E, mtp, mep, adp, qm,
                            WORKLOAD_DISTRIBUTION, is_context=True),
                    ops.moe_dispatch(b + "_moe_post_dispatch", s, h, topk, E, mtp, mep, adp, False,
                                     ctx.backend, DISPATCH_MOE_QUANT, is_context=True),
                ]
            else:
                f = p + ("global" if is_global else "swa")
                out += [
                    ops.elementwise(b + "_ffn_norm", s, 2 * h, 2 * h),
                    ops.gemm(f + "_dense_gate_up_gemm", s, 2 * dense_i, h, q),
                    ops.elementwise(f + "_dense_act", s, 2 * dense_i, dense_i),
                    ops.gemm(f + "_dense_down_gemm", s, h, dense_i, q, low_precision_input=True),
                ]
        out += [
            ops.gemm(p + "logits_gemm", once, vocab // tp, h, "bfloat16"),
            ops.p2p(p + "p2p", float(pp - 1) if is_ctx else (pp - 1) * m, pp, h),
        ]
        moe_layers = layout.moe_layers
        if layout.shared_expert > 0 and moe_layers > 0:
            s = float(moe_layers) if is_ctx else moe_layers * m
            sp = p + "shared_expert_dense"
            out += [
                ops.gemm(sp + "_gate_up_gemm", s, 2 * shared_i, h, q),
                ops.elementwise(sp + "_act", s, 2 * shared_i, shared_i),
                ops.gemm(sp + "_down_gemm", s, h, shared_i, q, low_precision_input=True),
            ]
        lists[phase] = out
    return lists["context"], lists["generation"]
