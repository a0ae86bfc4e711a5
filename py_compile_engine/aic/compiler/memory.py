"""KV-cache capacity of a deployment (issue 7, goldens README §3).

:func:`estimate_kv_cache` compiles the model for the deployment, gathers the model facts the
memory model needs from the Hugging Face config and asks the native engine
(``aic._aic.estimate_kv_cache``) how the GPU memory splits into weights, activations, runtime
and communication reserves, and how many KV-cache tokens fit in the rest.

The backend version is resolved first; an error there is raised unchanged. When the model
cannot be built for the deployment (a compile error), the native engine turns the compile
message into the reference's "unsupported model/backend/GPU for KV-cache estimation" error.
"""

from __future__ import annotations

import json
import math
import os

from .. import paths
from ..validation import fraction, number as checked_number, show
from .compile import INTERNAL_KEYWORDS, compile_report
from .forwarding import forwards_keywords_of
from .hf_config import ModelConfig, load_model_config

#: The memory-fraction kind each backend applies by default (the reference rejects any other
#: pairing).
DEFAULT_FRACTION_KIND = {"trtllm": "of_free", "vllm": "of_total", "sglang": "of_total"}


def _pos_int(value) -> int | None:
    """``value`` as a positive integer, else ``None`` (floats with no fraction count)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if value > 0 else None
    if isinstance(value, float) and value.is_integer() and value >= 1:
        return int(value)
    return None


def _first_pos(cfg: dict, keys: tuple[str, ...]) -> int | None:
    for key in keys:
        value = _pos_int(cfg.get(key))
        if value is not None:
            return value
    return None


def _text_fields(model: ModelConfig) -> dict:
    """The config section the text model's fields live in (nested for multimodal wrappers)."""
    from .families import NESTED_TEXT_KEY

    raw = model.raw or {}
    key = NESTED_TEXT_KEY.get(model.architecture)
    nested = raw.get(key) if key else None
    return {**raw, **nested} if isinstance(nested, dict) else raw


def _sliding_window(cfg: dict, layers: int) -> dict | None:
    """The sliding-window layer split (used by the naive fallback only)."""
    window = _first_pos(cfg, ("sliding_window", "sliding_window_size"))
    if window is None:
        return None
    types = cfg.get("layer_types")
    if isinstance(types, list):
        sliding = sum(1 for t in types if isinstance(t, str) and "sliding" in t)
        return {"window": window, "window_layers": sliding, "global_layers": len(types) - sliding}
    pattern = _first_pos(cfg, ("sliding_window_pattern",))
    if pattern is None:
        return None
    global_layers = layers // pattern
    return {"window": window, "window_layers": layers - global_layers,
            "global_layers": global_layers}


def _layer_kv(model: ModelConfig) -> dict | None:
    """The sliding / global KV geometry of the window-capped hybrid families (spec 35 §11.3):
    STEP3P7 stores ``n_kv`` heads of ``d`` on every layer, GEMMA4MIX its own sliding and global
    geometry (K and V both stored on global layers, ``k_eq_v`` or not)."""
    if model.family == "STEP3P7":
        from .families import hybridmoe

        layout = hybridmoe.parse(model)
        return {"window": layout.window,
                "sliding_layers": layout.sliding_layers,
                "sliding_kv_heads": model.num_kv_heads, "sliding_head_dim": model.head_dim,
                "global_layers": layout.global_layers,
                "global_kv_heads": model.num_kv_heads, "global_head_dim": model.head_dim}
    if model.family == "GEMMA4MIX":
        from .families import gemma4

        g = gemma4.parse(model)
        return {"window": g.window,
                "sliding_layers": g.sliding_layers,
                "sliding_kv_heads": g.swa_kv_heads, "sliding_head_dim": g.swa_head_dim,
                "global_layers": g.global_layers,
                "global_kv_heads": g.global_kv_heads, "global_head_dim": g.global_head_dim}
    return None


def model_facts(model: ModelConfig) -> dict:
    """The ``ModelFacts`` the native memory model reads, from a parsed HF config.

    ``num_layers`` counts the decoder layers without MTP layers; ``head_dim`` is the config's
    ``head_dim``, else ``attention_head_dim``, else ``hidden_size // num_attention_heads``.
    """
    cfg = _text_fields(model)
    kv_heads = model.num_kv_heads
    # The Nemotron families keep ``num_key_value_heads or 0`` (spec 33 §9.2): a NAS config
    # without it has no per-token KV, and the estimate says so.
    if not kv_heads and model.family not in ("NEMOTRONH", "NEMOTRONNAS"):
        multi_query = (cfg.get("multi_query") is True
                       and cfg.get("new_decoder_architecture") is not True)
        kv_heads = 1 if multi_query else model.num_heads
    dtype = next((cfg[k] for k in ("torch_dtype", "dtype") if isinstance(cfg.get(k), str)), None)
    return {
        "architecture": model.architecture,
        "family": model.family,
        "num_layers": model.num_layers,
        "hidden_size": model.hidden_size,
        "num_attention_heads": model.num_heads,
        "num_key_value_heads": kv_heads,
        "head_dim": model.head_dim,
        "num_experts": model.num_experts,
        "topk": model.topk,
        "kv_lora_rank": model.kv_lora_rank or None,
        "qk_rope_head_dim": model.qk_rope_head_dim or None,
        "index_head_dim": _first_pos(cfg, ("index_head_dim",)),
        "max_position_embeddings": model.max_position_embeddings or None,
        "vocab_size": model.vocab_size or None,
        "intermediate_size": model.intermediate_size or None,
        "moe_intermediate_size": _first_pos(cfg, ("moe_intermediate_size",)),
        "torch_dtype": dtype,
        "sliding_window": _sliding_window(cfg, model.num_layers),
        "gdn": _gdn_facts(model),
        "layer_kv": _layer_kv(model),
        "dsv4": _dsv4_facts(model),
        "kimik3": _kimik3_facts(model),
    }


def _kimik3_facts(model: ModelConfig) -> dict | None:
    """The KDA / MLA layer plan of a KIMIK3 model (its per-token KV and KDA state, spec 36 §7.2)."""
    if model.family != "KIMIK3":
        return None
    from .families.kimik3 import parse

    k = parse(model)
    return {"kda_layers": k.n_kda, "mla_layers": k.n_mla, "kda_heads": k.kda_heads,
            "kda_head_dim": k.kda_hd, "conv_kernel": k.conv, "kv_lora_rank": k.kv_lora,
            "qk_rope_head_dim": k.qk_rope}


def _dsv4_facts(model: ModelConfig) -> dict | None:
    """The compressed-attention layout of a DEEPSEEKV4 model (its KV bytes, spec 34 §7)."""
    if model.family != "DEEPSEEKV4":
        return None
    from .families.deepseekv4 import compress_ratios

    return {"compress_ratios": compress_ratios(model), "sliding_window": int(model.raw["sliding_window"])}


def _gdn_facts(model: ModelConfig) -> dict | None:
    """The Gated-DeltaNet geometry of a QWEN35 model (its recurrent state, spec 31 §9.2)."""
    if model.family != "QWEN35":
        return None
    from .families.qwen35 import gdn_geometry

    g = gdn_geometry(model)
    return {"linear_layers": g["NL"], "full_layers": g["NF"], "num_k_heads": g["nk"],
            "head_k_dim": g["hk"], "num_v_heads": g["nv"], "head_v_dim": g["hv"],
            "conv_kernel": g["dc"], "ssm_dtype": g["ssm"]}


def _request(backend: str, max_num_tokens, max_batch_size, kind, value,
             capacity_override, tolerance) -> dict:
    if kind is None:
        kind = DEFAULT_FRACTION_KIND.get(backend, "of_total")
    for name, number in (("max_num_tokens", max_num_tokens), ("max_batch_size", max_batch_size)):
        if isinstance(number, bool) or not isinstance(number, int) or number < 0:
            raise ValueError(f"{name} must be a non-negative integer, got {number!r}")
    if kind not in ("of_free", "of_total"):
        raise ValueError(f"memory_fraction_kind must be 'of_free' or 'of_total', got {kind!r}")
    # Checked here: a NaN or infinity would reach the native request as a bare `NaN` token,
    # which JSON has not (the answer was serde's "expected value at line 1 column 98").
    value = fraction("memory_fraction_value", value, "the share of GPU memory the KV cache may use",
                     low_inclusive=True)
    if tolerance is not None:
        tolerance = checked_number("tolerance_fraction", tolerance, "the safety margin of the KV capacity")
        if not (math.isfinite(tolerance) and 0 <= tolerance < 1):
            raise ValueError(f"tolerance_fraction must be a finite number in [0, 1) (the safety "
                             f"margin of the KV capacity), got {show(tolerance)}")
    if capacity_override is not None and (isinstance(capacity_override, bool)
                                          or not isinstance(capacity_override, int)
                                          or not 0 <= capacity_override < 2**64):
        raise ValueError(f"gpu_memory_capacity_bytes_override must be an integer number of bytes "
                         f"in [0, 2**64), got {show(capacity_override)}")
    request = {
        "max_num_tokens": max_num_tokens,
        "max_batch_size": max_batch_size,
        "memory_fraction": {"kind": kind, "value": float(value)},
    }
    if capacity_override is not None:
        request["gpu_memory_capacity_bytes_override"] = capacity_override
    if tolerance is not None:
        request["tolerance_fraction"] = float(tolerance)
    return request


def _unbuilt_engine(model, system: str, backend: str, sizes: dict) -> dict:
    engine = {"model_name": os.fspath(model), "system_name": system, "backend": backend}
    engine.update({k: v for k, v in sizes.items() if v is not None})
    return engine


@forwards_keywords_of(
    compile_report, omit=INTERNAL_KEYWORDS + ("kv_block_size", "database_mode", "attention_backend")
)
def estimate_kv_cache(
    model,
    system: str,
    backend: str,
    backend_version: str | None = None,
    *,
    max_num_tokens: int = 8192,
    max_batch_size: int = 256,
    memory_fraction_kind: str | None = None,
    memory_fraction_value: float = 0.9,
    gpu_memory_capacity_bytes_override: int | None = None,
    tolerance_fraction: float | None = None,
    **deployment,
) -> dict:
    """Per-GPU KV-cache capacity of ``model`` deployed on ``system`` with ``backend``.

    Returns the estimate as a dict with the reference's keys: ``total_gpu_capacity_bytes``,
    ``memory_breakdown`` (``weights_bytes``, ``activations_bytes``, ``runtime_overhead_bytes``,
    ``comm_overhead_bytes``), ``kv_size_per_token_bytes``, ``total_kv_size_bytes``,
    ``total_kv_size_tokens``, ``source`` and ``tolerance_adjusted``.

    ``memory_fraction_kind`` defaults to ``"of_free"`` for trtllm and ``"of_total"`` for vllm
    and sglang. Raises ``ValueError`` when there is no KV budget left or the model cannot be
    built for the deployment.

    ``cp_size`` (context parallelism, spec 43 §6) builds the CP model: every rank holds the full
    KV cache, so the KV per token is not divided by ``cp_size``; a CP configuration the compile
    step refuses is reported like any other model that cannot be built.
    """
    from .compile import _check_backend, native

    mod = native()
    request = _request(backend, max_num_tokens, max_batch_size, memory_fraction_kind,
                       memory_fraction_value, gpu_memory_capacity_bytes_override,
                       tolerance_fraction)
    request_json = json.dumps(request, allow_nan=False)
    # Version resolution comes first; its errors are raised unchanged.
    _check_backend(backend)
    root = paths.systems_dir(deployment["systems_path"])
    mod.resolve_backend_version(str(root), system, backend, backend_version)

    sizes = {name: deployment[name]
             for name in ("tp_size", "pp_size", "attention_dp_size", "moe_tp_size", "moe_ep_size")}
    try:
        result = compile_report(model, system, backend, backend_version, **deployment)
    except (ValueError, AssertionError, NotImplementedError, OverflowError) as exc:
        # Every compile failure becomes the reference's "unsupported model" ValueError: the
        # AssertionError of NEMOTRONNAS with nextn (spec 33 §6.5), a CP refusal
        # (NotImplementedError) or a negative dense cp_size (OverflowError, spec 43 §6).
        try:
            facts_json = json.dumps(model_facts(load_model_config(model)))
        except Exception:  # noqa: BLE001 - no usable config: the facts are optional here
            facts_json = None
        engine_json = json.dumps(_unbuilt_engine(model, system, backend, sizes))
        return json.loads(
            mod.estimate_kv_cache_unbuilt(engine_json, facts_json, request_json, str(exc))
        )
    facts_json = json.dumps(model_facts(result.model))
    return json.loads(
        mod.estimate_kv_cache(result.spec_json, facts_json, request_json, str(root))
    )


def max_concurrent_requests(estimate: dict, isl: int, osl: int) -> int:
    """Requests of ``isl + osl`` tokens whose KV fits at once: ``tokens // (isl + osl)``."""
    if isl + osl <= 0:
        raise ValueError("isl + osl must be positive")
    return estimate["total_kv_size_tokens"] // (isl + osl)
