"""Family QWEN35: Qwen3.5 / Qwen3.6 hybrids of Gated-DeltaNet and full attention (spec 31).

Architectures: Qwen3_5ForConditionalGeneration (dense FFN) and
Qwen3_5MoeForConditionalGeneration (routed MoE + one shared expert), both multimodal wrappers
whose text model sits under ``text_config``.

Layers of type ``linear_attention`` become a GDN block (projections, the ``Gdn`` conv and
scan/recurrence kernels, out projection) and layers of type ``full_attention`` a gated-output
GQA block; each block ends in the model's FFN (dense, or MoE with a shared expert). Only the two
layer counts matter, each block is emitted once with its count as scale. The GEMM quant modes
are split per category (projection / dense FFN / shared expert, spec 31 §2.2).
"""

from __future__ import annotations

from .. import config_checks, ops
from ..hf_config import ModelConfig, ceil_div
from ..parallel import check_heads
from . import BuildContext
from .deepseek import exclusion_patterns
from .llama import mtp_multiplier

#: Expert-load model of the routed experts.
WORKLOAD_DISTRIBUTION = "power_law_1.2"
#: SMs the MoE dispatch kernels of this family reserve (carried, not read by the engine).
DISPATCH_SMS = 20
#: Smallest expert count that gets a router GEMM.
ROUTER_MIN_EXPERTS = 128
#: State dtypes the GDN kernels know; anything else counts as float32.
SSM_DTYPES = ("float32", "bfloat16", "float16")
#: The Gdn kernels of each phase: (conv, state kernel) with their op-name suffixes.
GDN_KERNELS = {
    "context": (("conv1d", "causal_conv1d_fn"), ("scan", "chunk_gated_delta_rule")),
    "generation": (("conv1d", "causal_conv1d_update"),
                   ("recurrence", "fused_sigmoid_gating_delta_rule_update")),
}

#: Per-layer algorithm -> GEMM mode of the category split (spec 31 §2.2 rule 2).
_CATEGORY_MODE = {"fp8": "fp8_static", "mxfp8": "fp8", "nvfp4": "nvfp4",
                  "w4a16_nvfp4": "w4a16_nvfp4"}


def _as_dict(value) -> dict:
    return value if isinstance(value, dict) else {}


def text_config(model: ModelConfig) -> dict:
    """The flattened text config the family reads (``text_config`` plus the architecture)."""
    return {**_as_dict(model.raw.get("text_config")), "architectures": [model.architecture]}


def _required(cfg: dict, key: str) -> int:
    """A required GDN field. The reference raises ``KeyError('<field>')``; our ``ValueError``
    message starts with the same text."""
    if key not in cfg:
        raise ValueError(
            f"'{key}' (the Qwen3.5 text_config must declare {key} for its Gated-DeltaNet layers)"
        )
    return int(cfg[key])


def ssm_dtype(raw: dict) -> str:
    """The recurrent-state dtype (spec 31 §1.2): ``text_config.mamba_ssm_dtype`` if declared,
    else the top-level key, else ``float32``; an unknown value counts as ``float32``."""
    nested = raw.get("text_config")
    if isinstance(nested, dict) and "mamba_ssm_dtype" in nested:
        value = nested["mamba_ssm_dtype"]
    elif "mamba_ssm_dtype" in raw:
        value = raw["mamba_ssm_dtype"]
    else:
        value = "float32"
    return value if isinstance(value, str) and value in SSM_DTYPES else "float32"


def gdn_geometry(model: ModelConfig) -> dict:
    """Layer counts and GDN dimensions of spec 31 §1.2 (``NL``, ``NF``, ``nk``, ``hk``, ``nv``,
    ``hv``, ``dc``, ``SI``, ``ssm``)."""
    cfg = text_config(model)
    types = cfg.get("layer_types")
    types = list(types) if isinstance(types, list) else []
    if len(types) != model.num_layers:
        raise ValueError(
            f"Qwen3.5 layer_types length {len(types)} != num_hidden_layers {model.num_layers}"
        )
    return {
        "NL": sum(1 for t in types if t == "linear_attention"),
        "NF": sum(1 for t in types if t == "full_attention"),
        "nk": _required(cfg, "linear_num_key_heads"),
        "hk": _required(cfg, "linear_key_head_dim"),
        "nv": _required(cfg, "linear_num_value_heads"),
        "hv": _required(cfg, "linear_value_head_dim"),
        "dc": _required(cfg, "linear_conv_kernel_dim"),
        "SI": int(cfg.get("shared_expert_intermediate_size") or 0),
        "ssm": ssm_dtype(model.raw),
    }


def _layer_algo(metadata) -> str | None:
    """The normalised algorithm of one ``quantized_layers`` entry, or ``None``."""
    if isinstance(metadata, dict):
        algo = next((metadata[k] for k in ("quant_algo", "quantization_algo", "quant_method")
                     if metadata.get(k) not in (None, "")), None)
    else:
        algo = metadata
    if not isinstance(algo, str) or not algo.strip():
        return None
    algo = algo.strip().lower()
    return {"e4m3": "fp8", "e5m2": "fp8", "fp4": "nvfp4"}.get(algo, algo)


def _is_routed_expert(target: str) -> bool:
    low = target.lower()
    if "shared_expert" in low:
        return False
    return ".experts." in low or low.endswith(".experts") or "routing_expert" in low


def category_modes(model: ModelConfig, ctx: BuildContext) -> tuple[str, str, str]:
    """``(qp, qd, qs)``: projection, dense-FFN and shared-expert GEMM modes (spec 31 §2.2)."""
    q = ctx.gemm_quant_mode
    if ctx.gemm_quant_explicit:
        return q, q, q
    modes = {"proj": q, "dense": q, "shared": q}
    explicit: set[str] = set()
    raw = model.raw
    hq = _as_dict(_as_dict(raw.get("hf_quant_config")).get("quantization"))
    qc = _as_dict(raw.get("quantization_config"))
    for layers in (hq.get("quantized_layers"), qc.get("quantized_layers")):
        if not isinstance(layers, dict):
            continue
        for target, metadata in layers.items():
            mode = _CATEGORY_MODE.get(_layer_algo(metadata) or "")
            if mode is None:
                continue
            low = str(target).lower()
            if ".linear_attn." in low or ".self_attn." in low:
                category = "proj"
            elif "shared_expert" in low:
                category = "shared"
            elif ".mlp." in low and not _is_routed_expert(low):
                category = "dense"
            else:
                continue
            modes[category] = mode
            explicit.add(category)
    patterns = [p.lower() for p in exclusion_patterns(raw)]
    if "proj" not in explicit and any("linear_attn" in p or "self_attn" in p for p in patterns):
        modes["proj"] = "bfloat16"
    if "shared" not in explicit and any("shared_expert" in p for p in patterns):
        modes["shared"] = "bfloat16"
    if "dense" not in explicit and any(".mlp" in p and "shared_expert" not in p for p in patterns):
        modes["dense"] = "bfloat16"
    return modes["proj"], modes["dense"], modes["shared"]


def check_gdn_heads(nk: int, nv: int, tp: int) -> None:
    """Both GDN head counts must split evenly over TP (spec 31 §3 item 4)."""
    if nk % tp != 0 or nv % tp != 0:
        fitting = [t for t in range(1, max(nk, nv) + 1) if nk % t == 0 and nv % t == 0]
        raise ValueError(
            f"Qwen3.5 GDN head counts must both be divisible by tensor parallel size: "
            f"num_k_heads={nk}, num_v_heads={nv}, tp_size={tp}. tp_size values that split both: "
            f"{', '.join(map(str, fitting))}."
        )


def check_experts(num_experts: int, moe_ep_size: int) -> None:
    """At least as many experts as EP ranks (spec 31 §3 item 5). The reference asserts with an
    empty message; ours says what fits."""
    if num_experts < moe_ep_size:
        raise ValueError(
            f"moe_ep_size {moe_ep_size} exceeds the model's {num_experts} experts; allowed: "
            f"moe_ep_size <= {num_experts} (make up the rest of the width with moe_tp_size)."
        )


#: GDN geometry key -> the text_config field it comes from (each a GDN op size, at least 1).
GDN_FIELDS = {"nk": "linear_num_key_heads", "hk": "linear_key_head_dim",
              "nv": "linear_num_value_heads", "hv": "linear_value_head_dim",
              "dc": "linear_conv_kernel_dim"}


def check_gdn_config(g: dict) -> None:
    """The Gated-DeltaNet sizes of ``gdn_geometry`` must each be at least 1."""
    if not g["NL"]:
        return
    for key, field in GDN_FIELDS.items():
        config_checks.at_least_one(field, g[key], "a size of the Gated-DeltaNet layers; copy it "
                                                  "from the checkpoint's text_config")


def build(model: ModelConfig, ctx: BuildContext) -> tuple[list[dict], list[dict]]:
    """The context and generation op lists of a Qwen3.5 / Qwen3.6 model (spec 31 §4)."""
    g = gdn_geometry(model)
    tp, pp, adp = ctx.tp_size, ctx.pp_size, ctx.attention_dp_size
    mtp, mep = ctx.moe_tp_size, ctx.moe_ep_size
    L, h, n, d = model.num_layers, model.hidden_size, model.num_heads, model.head_dim
    vocab, E, topk = model.vocab_size, model.num_experts, model.topk
    I, MI, SI = model.intermediate_size, model.moe_intermediate_size, g["SI"]
    nk, hk, nv, hv, dc = g["nk"], g["hk"], g["nv"], g["hv"], g["dc"]
    check_heads(n, tp)
    check_gdn_config(g)
    check_gdn_heads(nk, nv, tp)
    if g["NF"]:
        config_checks.gqa(n, model.num_kv_heads, d)
    moe_model = E > 0
    if moe_model:
        check_experts(E, mep)
    qp, qd, qs = category_modes(model, ctx)
    qm, kv, f = ctx.moe_quant_mode, ctx.kvcache_quant_mode, ctx.fmha_quant_mode
    backend = ctx.backend
    sglang = backend == "sglang"
    fold = sglang and moe_model and adp > 1
    nopre = sglang and adp == 1
    fusedgate = sglang
    overlap = backend in ("vllm", "sglang")

    nq, nkvp = n // tp, ceil_div(model.num_kv_heads, tp)
    gk, gv = nk // tp, nv // tp
    m = mtp_multiplier(L, ctx.nextn)

    def dispatch(p: str, scale: float, pre: bool, is_ctx: bool, snt: int) -> dict:
        name = p + ("moe_pre_dispatch" if pre else "moe_post_dispatch")
        return ops.moe_dispatch(name, scale, h, topk, E, mtp, mep, adp, pre, backend, qm,
                                is_context=is_ctx, attn_ar_modeled=True, sms=DISPATCH_SMS,
                                scale_num_tokens=snt)

    def ffn(p: str, c: float, is_ctx: bool) -> list[dict]:
        out = [ops.elementwise(p + "ffn_norm", c, 2 * h, 2 * h)]
        if not moe_model:
            return out + [
                ops.gemm(p + "gate_ffn1_gemm", c, (2 * I) // tp, h, qd),
                ops.elementwise(p + "act_gate", c, (2 * I) // tp, I // tp),
                ops.gemm(p + "ffn2_gemm", c, h, I // tp, qd, low_precision_input=True),
                ops.custom_all_reduce(p + "ffn_ar", c, h, tp),
            ]
        router = ([ops.gemm(p + "router_gemm", c, E, h, "bfloat16")]
                  if E >= ROUTER_MIN_EXPERTS else [])
        routed = ops.moe(p + "moe", c, h, MI, topk, E, mtp, mep, adp, qm, WORKLOAD_DISTRIBUTION,
                         is_context=is_ctx)
        shared: list[dict] = []
        merge: list[dict] = []
        if SI > 0:
            if not fusedgate:
                shared.append(ops.gemm(p + "shared_expert_gate_gemm", c, 1, h, "bfloat16",
                                       below_grid_sol=True))
            shared += [
                ops.gemm(p + "shared_gate_up_gemm", c, (2 * SI) // tp, h, qs),
                ops.elementwise(p + "shared_act_gate", c, (2 * SI) // tp, SI // tp),
                ops.gemm(p + "shared_down_gemm", c, h, SI // tp, qs, low_precision_input=True),
            ]
            if not fusedgate:
                shared.append(ops.elementwise(p + "shared_expert_gate_mul", c, h, h))
            merge = [ops.elementwise(p + "shared_merge", c, 3 * h if fusedgate else 2 * h, h)]
        if is_ctx:
            pre = [] if nopre else [dispatch(p, c, True, True, tp)]
            return (out + router + pre + [routed, dispatch(p, c, False, True, 1)] + shared
                    + merge)
        if sglang and not nopre:
            out.append(dispatch(p, c, True, False, 1))
        group_a = router + ([] if sglang else [dispatch(p, c, True, False, 1)]) + [routed]
        if shared and overlap:
            out.append(ops.overlap(p + "moe_overlap", group_a, shared))
        else:
            out += group_a + shared
        return out + merge + [dispatch(p, c, False, False, 1)]

    lists = {}
    for phase in ("context", "generation"):
        p = phase + "_"
        is_ctx = phase == "context"
        if is_ctx:
            cl, cf, once, p2p_scale = float(g["NL"]), float(g["NF"]), 1.0, float(pp - 1)
        else:
            cl, cf, once, p2p_scale = g["NL"] * m, g["NF"] * m, 1 * m, (pp - 1) * m
        out = [
            ops.embedding(p + "embedding", once, vocab // tp, h),
            ops.custom_all_reduce(p + "embedding_ar", once, h, tp),
        ]
        if g["NL"] > 0:
            (conv_name, conv_kernel), (state_name, state_kernel) = GDN_KERNELS[phase]
            dims = (h, dc, gk, hk, gv, hv, g["ssm"])
            out += [
                ops.elementwise(p + "gdn_norm", cl, 2 * h, 2 * h),
                ops.gemm(p + "gdn_in_proj_gemm", cl, (nk * hk + nk * hk + nv * hv + nv * hv) // tp,
                         h, qp),
                ops.gemm(p + "gdn_in_proj_ba_gemm", cl, (2 * nv) // tp, h, qp, below_grid_sol=True),
                ops.gdn(p + "gdn_" + conv_name, cl, conv_kernel, phase, *dims),
                ops.gdn(p + "gdn_" + state_name, cl, state_kernel, phase, *dims),
                ops.gemm(p + "gdn_out_proj_gemm", cl, h, (nv * hv) // tp, qp,
                         low_precision_input=True),
            ]
            if not fold:
                out.append(ops.custom_all_reduce(p + "gdn_ar", cl, h, tp))
            out += ffn(p + "gdn_", cl, is_ctx)
        if g["NF"] > 0:
            if is_ctx:
                attention = ops.context_attention(p + "attention", cf, nq, nkvp, d, 0, kv, f, True)
            else:
                ops.check_fmha(f)
                attention = ops.generation_attention(p + "attention", cf, nq, nkvp, d, 0, kv)
            out += [
                ops.elementwise(p + "full_attn_norm", cf, 2 * h, 2 * h),
                ops.gemm(p + "qkv_gemm", cf, 2 * nq * d + nkvp * d * 2, h, qp),
                attention,
                ops.gemm(p + "proj_gemm", cf, h, nq * d, qp, low_precision_input=True),
            ]
            if not fold:
                out.append(ops.custom_all_reduce(p + "full_ar", cf, h, tp))
            out += ffn(p + "full_", cf, is_ctx)
        out += [
            ops.gemm(p + "logits_gemm", once, vocab // tp, h, "bfloat16"),
            ops.p2p(p + "p2p", p2p_scale, pp, h),
        ]
        lists[phase] = out
    return lists["context"], lists["generation"]
