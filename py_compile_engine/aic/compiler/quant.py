"""Quantization-mode vocabularies, checkpoint inference and resolution (spec 30 §2.2, §3, §11.2)."""

from __future__ import annotations

from collections import namedtuple

from .hf_config import ModelConfig

# --------------------------------------------------------------------------------------------
# Vocabularies (spec 30 §3.5)
# --------------------------------------------------------------------------------------------

GEMM_MODES = (
    "bfloat16", "int8_wo", "int4_wo", "fp8", "fp8_static", "sq", "fp8_block", "fp8_ootb", "nvfp4",
    "nvfp4_wo", "w4a16_nvfp4",
)
MOE_MODES = (
    "bfloat16", "fp8", "int4_wo", "fp8_block", "w4afp8", "nvfp4", "nvfp4_wo", "w4a16_mxfp4",
    "w4a8_mxfp4_mxfp8", "w4a8_mxfp4_mxfp8_trtllm", "w4a16_mxfp4_cutlass", "w4a16_nvfp4",
)
KVCACHE_MODES = ("bfloat16", "int8", "fp8")
FMHA_MODES = ("bfloat16", "float16", "fp8", "fp8_block")
COMM_MODES = ("half", "int8", "fp8")

VOCABULARIES = {
    "gemm_quant_mode": GEMM_MODES,
    "moe_quant_mode": MOE_MODES,
    "kvcache_quant_mode": KVCACHE_MODES,
    "fmha_quant_mode": FMHA_MODES,
    "comm_quant_mode": COMM_MODES,
}

#: fmha modes an attention op accepts on the wire (``float16`` is in the enum but rejected).
FMHA_WIRE_MODES = ("bfloat16", "fp8", "fp8_block")

DEFAULTS = {
    "gemm_quant_mode": "bfloat16",
    "moe_quant_mode": "bfloat16",
    "kvcache_quant_mode": "bfloat16",
    "fmha_quant_mode": "bfloat16",
    "comm_quant_mode": "half",
}

_DSA_ARCHS = frozenset({"DeepseekV32ForCausalLM", "GlmMoeDsaForCausalLM"})
_DSV4_ARCHS = frozenset({"DeepseekV4ForCausalLM"})


def validate_mode_names(overrides: dict[str, str | None]) -> None:
    """Checks caller-given mode names against the vocabularies (pipeline step 2)."""
    for key, value in overrides.items():
        if value is None:
            continue
        allowed = VOCABULARIES[key]
        if not isinstance(value, str) or value not in allowed:
            raise ValueError(
                f"unknown {key} {value!r}; expected one of: {', '.join(allowed)}"
            )


# --------------------------------------------------------------------------------------------
# Checkpoint inference (spec 30 §3.1 - §3.3)
# --------------------------------------------------------------------------------------------


def _d(value) -> dict:
    return value if isinstance(value, dict) else {}


def _norm_layer_algo(algo) -> str | None:
    if not isinstance(algo, str) or not algo:
        return None
    algo = algo.lower()
    return {"e4m3": "fp8", "e5m2": "fp8", "fp4": "nvfp4"}.get(algo, algo)


def _algo_from_weights(weights: dict, group_size=None) -> str | None:
    algo = _first(weights.get("quant_algo"), weights.get("quantization_algo"), weights.get("quant_method"))
    if algo:
        return _norm_layer_algo(algo)
    bits = weights.get("num_bits")
    kind = str(weights.get("type", "")).lower()
    gs = weights.get("group_size", group_size)
    if kind == "float" and bits == 8:
        return "mxfp8" if gs == 32 else "fp8"
    if kind == "float" and bits == 4:
        return "nvfp4"
    return None


def _first(*values):
    for value in values:
        if value not in (None, "", [], {}):
            return value
    return None


def _is_routed_expert(name: str) -> bool:
    low = name.lower()
    if "shared_expert" in low:
        return False
    return ".experts." in low or low.endswith(".experts") or "routing_expert" in low


def _mixed_precision(cfg: dict, dynamic: bool | None) -> tuple[str | None, str | None]:
    """gemm / moe modes of a ModelOpt mixed-precision checkpoint (spec 30 §3.2)."""
    hq = _d(_d(cfg.get("hf_quant_config")).get("quantization"))
    qc = _d(cfg.get("quantization_config"))
    layers: list[tuple[str, str]] = []
    for source in (hq.get("quantized_layers"), qc.get("quantized_layers")):
        for name, info in _d(source).items():
            info = _d(info)
            algo = _first(info.get("quant_algo"), info.get("quantization_algo"), info.get("quant_method"))
            algo = _norm_layer_algo(algo) if algo else _algo_from_weights(info)
            if algo:
                layers.append((str(name), algo))
    for group in _d(qc.get("config_groups")).values():
        group = _d(group)
        algo = _algo_from_weights(_d(group.get("weights")))
        if not algo:
            continue
        targets = group.get("targets") or []
        for target in targets if isinstance(targets, list) else [targets]:
            layers.append((str(target), algo))
    expert_algos = {a for n, a in layers if _is_routed_expert(n)}
    other_algos = {a for n, a in layers if not _is_routed_expert(n)}

    gemm = None
    method = str(qc.get("quant_method") or "").lower()
    if method == "fp8" and qc.get("weight_block_size"):
        gemm = "fp8_block"
    elif method == "fp8":
        gemm = "fp8" if dynamic is True else "fp8_static"
    elif "mxfp8" in other_algos:
        gemm = "fp8_block"
    elif "fp8" in other_algos:
        gemm = "fp8" if dynamic is True else "fp8_static"
    elif "w4a16_nvfp4" in other_algos:
        gemm = "w4a16_nvfp4"
    elif "nvfp4" in other_algos:
        gemm = "nvfp4"

    moe = None
    if "w4a16_nvfp4" in expert_algos:
        moe = "w4a16_nvfp4"
    elif "nvfp4" in expert_algos:
        moe = "nvfp4"
    elif "mxfp8" in expert_algos:
        moe = "fp8_block"
    elif "fp8" in expert_algos:
        moe = "fp8"
    return gemm, moe


def _compressed_tensors(cfg: dict) -> tuple[str | None, str | None]:
    """gemm / moe modes of a compressed-tensors checkpoint (spec 30 §3.3)."""
    qc = _d(cfg.get("quantization_config"))
    base = None
    for group in _d(qc.get("config_groups")).values():
        weights = _d(_d(group).get("weights"))
        bits = weights.get("num_bits")
        if not isinstance(bits, int) or isinstance(bits, bool):
            continue
        kind = str(weights.get("type", "")).lower()
        if kind == "int" and bits == 4:
            base = "int4_wo"
        elif kind == "int" and bits == 8:
            base = "int8_wo"
        elif kind == "float" and bits == 8:
            blocky = weights.get("strategy") == "block" or bool(weights.get("block_structure"))
            base = "fp8_block" if blocky else "fp8"
        elif kind == "float" and bits == 4:
            base = "w4a16_mxfp4"
        break
    ignored = set()
    for pattern in qc.get("ignore") or []:
        low = str(pattern).lower()
        if any(m in low for m in ("self_attn", "q_proj", "k_proj", "v_proj", "o_proj")):
            ignored.add("attention")
        elif "shared_expert" in low:
            ignored.add("shared experts")
        elif "expert" in low:
            ignored.add("routing experts")
    gemm = None if "attention" in ignored else base
    moe = None if "routing experts" in ignored else base
    return gemm, moe


def infer_checkpoint_quant(model: ModelConfig) -> dict[str, str]:
    """The modes the checkpoint implies (only the ones it implies), spec 30 §3.1."""
    algo = model.quant_algo
    kv_algo = model.kv_cache_quant_algo
    out: dict[str, str] = {}
    if algo is not None:
        if algo == "fp8":
            out["gemm_quant_mode"] = "fp8" if model.quant_dynamic is True else "fp8_static"
            out["moe_quant_mode"] = "fp8"
        elif algo in ("fp8_block", "nvfp4"):
            out["gemm_quant_mode"] = algo
            out["moe_quant_mode"] = algo
        elif algo == "mxfp4":
            out["gemm_quant_mode"] = "bfloat16"
            out["moe_quant_mode"] = "w4a16_mxfp4"
        elif algo == "mixed_precision":
            gemm, moe = _mixed_precision(model.raw, model.quant_dynamic)
            if gemm:
                out["gemm_quant_mode"] = gemm
            if moe:
                out["moe_quant_mode"] = moe
        elif algo == "compressed-tensors":
            gemm, moe = _compressed_tensors(model.raw)
            if gemm:
                out["gemm_quant_mode"] = gemm
            if moe:
                out["moe_quant_mode"] = moe
        else:
            raise ValueError(f"Unsupported quant algorithm: {algo}")
    if model.architecture in _DSV4_ARCHS:
        # DeepSeek-V4 (spec 34 §2): fp4 experts run as w4a8_mxfp4_mxfp8 unless the checkpoint
        # says nvfp4, and the KV cache is fp8 whatever the checkpoint says.
        expert = model.raw.get("expert_dtype")
        if isinstance(expert, str) and expert.lower() == "fp4" and out.get("moe_quant_mode") != "nvfp4":
            out["moe_quant_mode"] = "w4a8_mxfp4_mxfp8"
        kv_algo = "fp8"
    if kv_algo is not None:
        if kv_algo == "fp8":
            out["kvcache_quant_mode"] = "fp8"
        elif kv_algo == "bfloat16":
            out["kvcache_quant_mode"] = "bfloat16"
        else:
            raise ValueError(f"Unsupported kv cache algorithm: {kv_algo}")
    if algo is not None and (algo in ("fp8", "fp8_block", "nvfp4") or kv_algo == "fp8"):
        out["fmha_quant_mode"] = "fp8"
        if kv_algo != "fp8":
            out["kvcache_quant_mode"] = "fp8"
    return out


class QuantModes(namedtuple("QuantModes", ("gemm_quant_mode", "moe_quant_mode", "kvcache_quant_mode",
                                           "fmha_quant_mode", "comm_quant_mode", "gemm_explicit"),
                            defaults=(False,))):
    """The resolved quant modes (names as in the wire format) and whether the GEMM mode was
    given explicitly. Immutable."""

    __slots__ = ()

    def as_dict(self) -> dict[str, str]:
        return {
            "gemm_quant_mode": self.gemm_quant_mode,
            "moe_quant_mode": self.moe_quant_mode,
            "kvcache_quant_mode": self.kvcache_quant_mode,
            "fmha_quant_mode": self.fmha_quant_mode,
            "comm_quant_mode": self.comm_quant_mode,
        }


def resolve_quant(model: ModelConfig, backend: str, overrides: dict[str, str | None]) -> QuantModes:
    """Explicit modes, then checkpoint inference, then defaults, then backend guards (spec 30 §3)."""
    inferred = infer_checkpoint_quant(model)
    modes: dict[str, str] = {}
    for key in DEFAULTS:
        explicit = overrides.get(key)
        if explicit is not None:
            modes[key] = explicit
        elif key in inferred:
            modes[key] = inferred[key]
        else:
            modes[key] = DEFAULTS[key]
    if overrides.get("fmha_quant_mode") is None and modes["fmha_quant_mode"] == "fp8":
        arch = model.architecture
        if backend == "vllm":
            modes["fmha_quant_mode"] = "bfloat16"
        elif arch in _DSA_ARCHS and backend in ("trtllm", "sglang"):
            modes["fmha_quant_mode"] = "bfloat16"
        elif arch in _DSV4_ARCHS:
            modes["fmha_quant_mode"] = "bfloat16"
    if (
        overrides.get("moe_quant_mode") is None
        and backend == "vllm"
        and model.architecture == "NemotronHForCausalLM"
        and modes["moe_quant_mode"] == "w4a16_nvfp4"
    ):
        modes["moe_quant_mode"] = "nvfp4"
    return QuantModes(**modes, gemm_explicit=overrides.get("gemm_quant_mode") is not None)


# --------------------------------------------------------------------------------------------
# Engine-config dtype names (spec 30 §11.2)
# --------------------------------------------------------------------------------------------

_GENERAL_DTYPE = {
    "bfloat16": "bfloat16",
    "half": "float16",
    "float16": "float16",
    "fp8": "fp8",
    "fp8_ootb": "fp8",
    "fp8_static": "fp8_static",
    "fp8_block": "fp8_block",
    "nvfp4": "nvfp4",
    "w4a16_nvfp4": "w4a16_nvfp4",
    "int8": "int8",
    "int8_wo": "int8",
    "sq": "int8",
    "int4": "int4",
    "int4_wo": "int4",
    "w4afp8": "int4",
    "w4a16_mxfp4": "int4",
    "w4a8_mxfp4_mxfp8": "int4",
}
_MOE_PASS_THROUGH = frozenset(
    {"w4afp8", "w4a16_mxfp4", "w4a8_mxfp4_mxfp8", "w4a8_mxfp4_mxfp8_trtllm", "w4a16_mxfp4_cutlass"}
)


def dtype_name(mode: str) -> str | None:
    """General mode -> engine dtype map (``None`` for modes without a dtype, e.g. ``nvfp4_wo``)."""
    return _GENERAL_DTYPE.get(mode)


def moe_dtype_name(mode: str) -> str | None:
    """MoE mode -> engine dtype map."""
    return mode if mode in _MOE_PASS_THROUGH else _GENERAL_DTYPE.get(mode)
