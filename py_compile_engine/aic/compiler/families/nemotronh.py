"""Family NEMOTRONH: Nemotron-H and Nemotron 3 hybrids (spec 33 §1-§5).

A per-layer type string (``hybrid_override_pattern``, or ``layers_block_type`` mapped to its
characters) interleaves Mamba2 layers (``M``), attention layers (``*``), MoE layers with one
shared expert (``E``, optionally through a latent projection) and plain non-gated MLP layers
(``-``). Only the four counts matter: each block is emitted once, in the fixed order Mamba,
attention, MoE, MLP, with its count as scale. The Mamba2 kernels carry the unsharded head and
group counts (the reference prices the whole layer on every GPU).
"""

from __future__ import annotations

from .. import config_checks, ops
from ..hf_config import ModelConfig, ceil_div
from ..parallel import check_heads
from . import BuildContext
from .llama import mtp_multiplier

#: Expert-load model of the routed experts.
WORKLOAD_DISTRIBUTION = "power_law_1.01"

#: ``layers_block_type`` element -> pattern character (spec 33 §2.2).
BLOCK_TYPE_CHAR = {
    "mamba": "M", "moe": "E", "attention": "*", "mlp": "-", "dense": "-", "ffn": "-",
    "M": "M", "E": "E", "*": "*", "-": "-",
}

#: The Mamba2 kernels of each phase: (conv, ssm).
MAMBA_KERNELS = {
    "context": ("causal_conv1d_fn", "mamba_chunk_scan_combined"),
    "generation": ("causal_conv1d_update", "selective_state_update"),
}


def _block_str(value) -> str:
    """``str()`` of a JSON element as the reference's Python sees it."""
    if isinstance(value, bool):
        return "True" if value else "False"
    return str(value)


def layer_pattern(cfg: dict) -> str:
    """The layer-type string ``P`` (spec 33 §2.2): a string pattern wins, else the mapped
    ``layers_block_type`` list."""
    pattern = cfg.get("hybrid_override_pattern")
    if isinstance(pattern, str):
        return pattern
    types = cfg.get("layers_block_type")
    if types is None:
        raise TypeError(
            "NemotronH config must define 'hybrid_override_pattern' or 'layers_block_type'."
        )
    out = []
    for element in types:
        key = _block_str(element)
        if key not in BLOCK_TYPE_CHAR:
            supported = ", ".join(sorted(BLOCK_TYPE_CHAR))
            raise ValueError(
                f"Unsupported NemotronH layer block type '{key}'. Supported values: {supported}"
            )
        out.append(BLOCK_TYPE_CHAR[key])
    return "".join(out)


def _required(cfg: dict, key: str) -> int:
    if key not in cfg:
        raise KeyError(key)
    return cfg[key]


def mamba_geometry(model: ModelConfig) -> dict:
    """Pattern counts and the Mamba / shared-expert / latent sizes (spec 33 §2.2)."""
    cfg = model.raw
    pattern = layer_pattern(cfg)
    geo = {
        "cM": pattern.count("M"), "cE": pattern.count("E"),
        "cA": pattern.count("*"), "cF": pattern.count("-"),
        "Hm": _required(cfg, "mamba_num_heads"), "Pd": _required(cfg, "mamba_head_dim"),
        "N": _required(cfg, "ssm_state_size"), "K": _required(cfg, "conv_kernel"),
        "G": _required(cfg, "n_groups"), "C": _required(cfg, "chunk_size"),
    }
    geo["SI"] = cfg["moe_shared_expert_intermediate_size"] if (
        "moe_shared_expert_intermediate_size" in cfg) else 0
    geo["Lt"] = cfg.get("moe_latent_size") or 0
    return geo


def is_moe(model: ModelConfig) -> bool:
    """The MoE variant: the pattern holds an ``E`` layer."""
    return "E" in layer_pattern(model.raw)


#: Geometry key -> config field of the Mamba2 op sizes that must be at least 1 (``n_groups``
#: is clamped to 1 per rank).
MAMBA_FIELDS = {"Hm": "mamba_num_heads", "Pd": "mamba_head_dim", "N": "ssm_state_size",
                "K": "conv_kernel", "C": "chunk_size"}


def check_layer_config(model: ModelConfig, g: dict) -> None:
    """The Mamba2 sizes when the pattern has Mamba layers, the GQA fields when it has
    attention layers."""
    if g["cM"]:
        for key, field in MAMBA_FIELDS.items():
            config_checks.at_least_one(field, int(g[key]), "a size of the Mamba2 layers; copy it "
                                                           "from the checkpoint's config.json")
    if g["cA"]:
        config_checks.gqa(model.num_heads, model.num_kv_heads, model.head_dim)


def build(model: ModelConfig, ctx: BuildContext) -> tuple[list[dict], list[dict]]:
    """The context and generation op lists of a Nemotron-H model (spec 33 §3)."""
    g = mamba_geometry(model)
    tp, pp, adp = ctx.tp_size, ctx.pp_size, ctx.attention_dp_size
    mtp, mep = ctx.moe_tp_size, ctx.moe_ep_size
    L, h, n, d = model.num_layers, model.hidden_size, model.num_heads, model.head_dim
    vocab, E, topk, I, MI = (model.vocab_size, model.num_experts, model.topk,
                             model.intermediate_size, model.moe_intermediate_size)
    check_heads(n, tp)
    check_layer_config(model, g)
    q, qm, kv, f = ctx.gemm_quant_mode, ctx.moe_quant_mode, ctx.kvcache_quant_mode, ctx.fmha_quant_mode
    backend = ctx.backend
    Hm, Pd, N, K, G, C = g["Hm"], g["Pd"], g["N"], g["K"], g["G"], g["C"]
    SI, Lt = g["SI"], g["Lt"]

    nkv = ceil_div(model.num_kv_heads, tp)
    Hg = Hm // tp
    Di = Hg * Pd
    Gg = max(G // tp, 1)
    in_n = 2 * Di + 2 * Gg * N + Hg
    SIg, Ig, Ltg = SI // tp, I // tp, Lt // tp
    hm = Lt if Lt > 0 else h
    m = mtp_multiplier(L, ctx.nextn)

    lists = {}
    for phase in ("context", "generation"):
        p = phase + "_"
        is_ctx = phase == "context"

        def sc(count: int) -> float:
            return float(count) if is_ctx else count * m

        out = [ops.embedding(p + "embedding", sc(1), vocab, h)]
        if g["cM"] > 0:
            c = sc(g["cM"])
            conv, ssm = MAMBA_KERNELS[phase]
            dims = (h, N, K, Hm, Pd, G, C)
            out += [
                ops.elementwise(p + "mamba_norm", c, 2 * h, 2 * h),
                ops.gemm(p + "mamba_in_proj_gemm", c, in_n, h, q),
                ops.mamba2(p + "mamba_conv1d", c, conv, phase, *dims),
                ops.mamba2(p + "mamba_ssm", c, ssm, phase, *dims),
                ops.gemm(p + "mamba_out_proj_gemm", c, h, Di, q),
                ops.custom_all_reduce(p + "mamba_ar", c, h, tp),
            ]
        if g["cA"] > 0:
            c = sc(g["cA"])
            if is_ctx:
                attention = ops.context_attention(p + "attention", c, n // tp, nkv, d, 0, kv, f,
                                                  False)
            else:
                attention = ops.generation_attention(p + "attention", c, n // tp, nkv, d, 0, kv)
            out += [
                ops.elementwise(p + "attn_norm", c, 2 * h, 2 * h),
                ops.gemm(p + "qkv_gemm", c, n * d // tp + 2 * d * nkv, h, q),
                attention,
                ops.gemm(p + "proj_gemm", c, h, n * d // tp, q, low_precision_input=True),
                ops.custom_all_reduce(p + "attn_ar", c, h, tp),
            ]
        if g["cE"] > 0:
            c = sc(g["cE"])

            def dispatch(pre: bool) -> dict:
                name = p + ("moe_pre_dispatch" if pre else "moe_post_dispatch")
                return ops.moe_dispatch(name, c, hm, topk, E, mtp, mep, adp, pre, backend, qm,
                                        is_context=True)

            out += [
                ops.elementwise(p + "moe_norm", c, 2 * h, 2 * h),
                ops.gemm(p + "shared_up_gemm", c, SIg, h, q),
                ops.elementwise(p + "shared_relu2", c, SIg, SIg),
                ops.gemm(p + "shared_down_gemm", c, h, SIg, q, low_precision_input=True),
                ops.gemm(p + "router_gemm", c, E, h, "bfloat16"),
            ]
            if Lt > 0:
                out.append(ops.gemm(p + "fc1_latent_proj_gemm", c, Ltg, h, q))
            out += [
                dispatch(True),
                ops.moe(p + "moe", c, hm, MI, topk, E, mtp, mep, adp, qm, WORKLOAD_DISTRIBUTION,
                        is_context=True, is_gated=False),
                dispatch(False),
            ]
            if Lt > 0:
                out.append(ops.gemm(p + "fc2_latent_proj_gemm", c, h, Ltg, q,
                                    low_precision_input=True))
            out.append(ops.custom_all_reduce(p + "moe_ar", c, h, tp))
        if g["cF"] > 0:
            c = sc(g["cF"])
            out += [
                ops.elementwise(p + "mlp_norm", c, 2 * h, 2 * h),
                ops.gemm(p + "mlp_up_gemm", c, Ig, h, q),
                ops.elementwise(p + "mlp_relu2", c, Ig, Ig),
                ops.gemm(p + "mlp_down_gemm", c, h, Ig, q),
                ops.custom_all_reduce(p + "mlp_ar", c, h, tp),
            ]
        out += [
            ops.p2p(p + "p2p", sc(pp - 1), pp, h),
            ops.gemm(p + "logits_gemm", sc(1), vocab // tp, h, "bfloat16"),
        ]
        lists[phase] = out
    return lists["context"], lists["generation"]
