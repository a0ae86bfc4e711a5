"""Family GEMMA4MIX: Gemma 4 decoders (spec 35 §2.5, §3.2, §7).

Architecture: Gemma4ForConditionalGeneration (text model nested under ``text_config``).

Every layer has a dense "shared" MLP; the MoE variants add a routed MoE on every layer too.
Sliding and global layers differ in KV heads and head size (global layers may share K and V,
``attention_k_eq_v``). The list is one block per attention type (sliding first), each scaled by
its layer count; no all-reduce op at any tp; the embedding is not vocab-sharded. The op quant
modes follow the checkpoint's exclusion patterns (§3.2): an excluded ``self_attn`` keeps the
attention projections in bfloat16, an excluded ``.mlp`` keeps the shared MLP and the routed MoE
in bfloat16 — unless the caller named a ``gemm_quant_mode``.
"""

from __future__ import annotations

from collections import namedtuple

from .. import config_checks, ops
from ...errors import ConfigKeyError
from ..hf_config import ModelConfig, ceil_div
from ..parallel import check_experts, check_heads
from . import BuildContext
from .llama import mtp_multiplier

#: Expert-load model of the routed experts.
WORKLOAD_DISTRIBUTION = "power_law_1.01"
#: The router GEMM exists only from this many experts on (spec 35 §7.2).
ROUTER_MIN_EXPERTS = 128


class GemmaLayout(namedtuple("GemmaLayout", (
        "sliding",  # tuple[bool, ...]: per layer: True = sliding attention
        "window",  # int
        "swa_kv_heads",  # int
        "swa_head_dim",  # int
        "global_kv_heads",  # int
        "global_head_dim",  # int
        "k_eq_v",  # bool
))):
    """Layer types and attention geometry of a Gemma 4 text model (spec 35 §2.5).
    Immutable (a named tuple: see ``aic.compiler.parallel``)."""

    __slots__ = ()

    @property
    def sliding_layers(self) -> int:
        return sum(1 for s in self.sliding if s)

    @property
    def global_layers(self) -> int:
        return len(self.sliding) - self.sliding_layers


def parse(model: ModelConfig) -> GemmaLayout:
    """The layer layout; raises the reference's errors for malformed ``layer_types`` and a
    ``KeyError`` for a missing ``num_key_value_heads`` / ``head_dim`` (spec 35 §2.5, §4)."""
    fields = model.text or model.raw
    layers = model.num_layers
    types = fields.get("layer_types", [])
    types = list(types) if isinstance(types, list) else []
    if len(types) != layers:
        raise ValueError(f"Gemma 4 layer_types length {len(types)} != num_hidden_layers {layers}")
    if any(t not in ("sliding_attention", "full_attention") for t in types):
        raise ValueError(
            "Gemma 4 layer_types must contain only 'sliding_attention' or 'full_attention'"
        )
    for key in ("num_key_value_heads", "head_dim"):
        if key not in fields:
            raise ConfigKeyError(key)
    swa_kv = int(fields["num_key_value_heads"])
    swa_hd = int(fields["head_dim"])
    g_kv = fields.get("num_global_key_value_heads")
    g_hd = fields.get("global_head_dim")
    return GemmaLayout(
        sliding=tuple(t == "sliding_attention" for t in types),
        window=int(fields.get("sliding_window") or 0),
        swa_kv_heads=swa_kv,
        swa_head_dim=swa_hd,
        global_kv_heads=swa_kv if g_kv is None else int(g_kv),
        global_head_dim=swa_hd if g_hd is None else int(g_hd),
        k_eq_v=bool(fields.get("attention_k_eq_v", False)),
    )


def is_dense(model: ModelConfig) -> bool:
    """No routed experts: ``topk`` 0 or no expert count (``enable_moe_block`` is not read)."""
    return model.topk == 0 or not model.num_experts


def exclusion_patterns(model: ModelConfig) -> list[str]:
    """The checkpoint's lower-cased exclusion patterns (spec 35 §3.2)."""
    raw = model.raw
    qc = raw.get("quantization_config")
    qc = qc if isinstance(qc, dict) else {}
    hq = raw.get("hf_quant_config")
    hq = hq.get("quantization") if isinstance(hq, dict) else None
    hq = hq if isinstance(hq, dict) else {}
    patterns: list[str] = []
    for source, keys in ((qc, ("modules_to_not_convert", "exclude_modules", "ignore")),
                         (hq, ("exclude_modules", "ignore"))):
        for key in keys:
            values = source.get(key)
            if isinstance(values, list):
                patterns += [str(v).lower() for v in values]
    return patterns


def op_quant_modes(model: ModelConfig, ctx: BuildContext) -> tuple[str, str, str]:
    """``(qp, qs, qr)``: the modes of the attention projections, the shared MLP and the routed
    MoE (spec 35 §3.2). A caller-given gemm mode switches the checkpoint split off."""
    qp = qs = ctx.gemm_quant_mode
    qr = ctx.moe_quant_mode
    if not ctx.gemm_quant_explicit:
        patterns = exclusion_patterns(model)
        if any("self_attn" in p for p in patterns):
            qp = "bfloat16"
        if any(".mlp" in p for p in patterns):
            qs = qr = "bfloat16"
    return qp, qs, qr


def check_attention_config(model: ModelConfig, layout: GemmaLayout) -> None:
    """The GQA fields of each attention kind present: sliding layers use ``num_key_value_heads``
    and ``head_dim``, global layers ``num_global_key_value_heads`` and ``global_head_dim`` when
    the config has them (else the sliding fields)."""
    fields = model.text or model.raw
    n = model.num_heads
    if layout.sliding_layers:
        config_checks.gqa(n, layout.swa_kv_heads, layout.swa_head_dim)
    if layout.global_layers:
        config_checks.gqa(
            n, layout.global_kv_heads, layout.global_head_dim,
            kv_field="num_global_key_value_heads" if fields.get("num_global_key_value_heads")
            is not None else "num_key_value_heads",
            dim_field="global_head_dim" if fields.get("global_head_dim") is not None else "head_dim")


def build(model: ModelConfig, ctx: BuildContext) -> tuple[list[dict], list[dict]]:
    """The context and generation op lists of a Gemma 4 model (spec 35 §7)."""
    layout = parse(model)
    tp, pp = ctx.tp_size, ctx.pp_size
    mtp, mep, adp = ctx.moe_tp_size, ctx.moe_ep_size, ctx.attention_dp_size
    L, h, n = model.num_layers, model.hidden_size, model.num_heads
    vocab, E, topk, MI = model.vocab_size, model.num_experts, model.topk, model.moe_intermediate_size
    dense = is_dense(model)
    check_heads(n, tp)
    check_attention_config(model, layout)
    if dense:
        if mep != 1:
            raise ValueError(f"dense Gemma 4 variants require moe_ep_size=1, got {mep}")
    else:
        check_experts(E, mep)
    qp, qs, qr = op_quant_modes(model, ctx)

    swa_hd, g_hd = layout.swa_head_dim, layout.global_head_dim
    skv_r, gkv_r = ceil_div(layout.swa_kv_heads, tp), ceil_div(layout.global_kv_heads, tp)
    geometry = {
        # sliding / global: (kv heads per rank, head, window, qkv n, proj k, stem, layers)
        True: (skv_r, swa_hd, layout.window, (n * swa_hd) // tp + skv_r * swa_hd * 2,
               (n * swa_hd) // tp, "swa", layout.sliding_layers),
        False: (gkv_r, g_hd, 0, (n * g_hd) // tp + gkv_r * g_hd * (1 if layout.k_eq_v else 2),
                (n * g_hd) // tp, "global", layout.global_layers),
    }
    dI = model.intermediate_size // tp

    m = mtp_multiplier(L, ctx.nextn)
    lists = {}
    for phase in ("context", "generation"):
        p = phase + "_"
        is_ctx = phase == "context"
        once = 1.0 if is_ctx else 1 * m
        out = [ops.embedding(p + "embedding", once, vocab, h)]
        for sliding in (True, False):
            kv_r, head, window, qkv_n, pin, stem, count = geometry[sliding]
            if count == 0:
                continue
            s = float(count) if is_ctx else count * m
            b = p + stem
            if is_ctx:
                attention = ops.context_attention(
                    p + "attention", s, n // tp, kv_r, head, window, ctx.kvcache_quant_mode,
                    ctx.fmha_quant_mode, False)
            else:
                ops.check_fmha(ctx.fmha_quant_mode)
                attention = ops.generation_attention(
                    p + "attention", s, n // tp, kv_r, head, window, ctx.kvcache_quant_mode)
            out += [
                ops.elementwise(b + "_attn_norm", s, 2 * h, 2 * h),
                ops.gemm(b + "_qkv_gemm", s, qkv_n, h, qp),
                attention,
                ops.gemm(b + "_proj_gemm", s, h, pin, qp, low_precision_input=True),
                ops.elementwise(b + "_ffn_norm", s, 2 * h, 2 * h),
                ops.gemm(b + "_shared_mlp_gate_up_gemm", s, 2 * dI, h, qs),
                ops.elementwise(b + "_shared_mlp_act", s, 2 * dI, dI),
                ops.gemm(b + "_shared_mlp_down_gemm", s, h, dI, qs, low_precision_input=True),
            ]
            if not dense:
                if E >= ROUTER_MIN_EXPERTS:
                    out.append(ops.gemm(b + "_router_gemm", s, E, h, "bfloat16"))
                out += [
                    ops.moe_dispatch(b + "_moe_pre_dispatch", s, h, topk, E, mtp, mep, adp, True,
                                     ctx.backend, qr, is_context=True),
                    ops.moe(b + "_moe", s, h, MI, topk, E, mtp, mep, adp, qr,
                            WORKLOAD_DISTRIBUTION, is_context=True),
                    ops.moe_dispatch(b + "_moe_post_dispatch", s, h, topk, E, mtp, mep, adp, False,
                                     ctx.backend, qr, is_context=True),
                ]
        out += [
            ops.gemm(p + "logits_gemm", once, vocab // tp, h, "bfloat16"),
            ops.p2p(p + "p2p", float(pp - 1) if is_ctx else (pp - 1) * m, pp, h),
        ]
        lists[phase] = out
    return lists["context"], lists["generation"]
