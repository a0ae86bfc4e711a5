"""Assembling the EngineSpec: engine config (spec 30 §11.2), lane orders (§9) and the JSON form
(§11.1)."""

from __future__ import annotations

import json

from . import ops
from .parallel import Parallel
from .quant import QuantModes, dtype_name, moe_dtype_name

#: The op-list schema number of the reference (0.12.0).
SPEC_SCHEMA_VERSION = 15
#: The engine-config schema number.
ENGINE_SCHEMA_VERSION = 1

DATABASE_MODES = ("SILICON", "HYBRID", "EMPIRICAL", "SOL")


def normalize_database_mode(mode) -> str:
    """``None`` -> ``"SILICON"``; anything outside :data:`DATABASE_MODES` is a ``ValueError``."""
    if mode is None:
        return "SILICON"
    if not isinstance(mode, str) or mode not in DATABASE_MODES:
        raise ValueError(
            f"unknown database_mode {mode!r}; expected one of: {', '.join(DATABASE_MODES)}"
        )
    return mode


def shared_layer_enabled(database_mode: str) -> bool:
    """The shared layer (older versions, cross-backend fill) is on for SILICON and HYBRID."""
    return database_mode in ("SILICON", "HYBRID")


def apply_lane_orders(op_list: list[dict], variant: str, lanes: list[str]) -> list[dict]:
    """Writes ``lanes`` into every top-level op of ``variant`` (nested ops keep ``["default"]``)."""
    for op in op_list:
        if ops.variant(op) == variant:
            ops.fields(op)["lane_order"] = list(lanes)
    return op_list


def has_top_level(op_list: list[dict], variant: str) -> bool:
    return any(ops.variant(op) == variant for op in op_list)


def engine_config(
    *,
    model_name: str,
    system: str,
    systems_path: str | None,
    backend: str,
    backend_version: str | None,
    kv_block_size: int | None,
    parallel: Parallel,
    quant: QuantModes,
    enable_shared_layer: bool | None,
    database_mode: str,
    tolerate_dirless_version: bool,
    nextn: int,
) -> dict:
    """The flat engine-config object, keys in the reference's emission order."""
    engine = {
        "schema_version": ENGINE_SCHEMA_VERSION,
        "model_name": model_name,
        "system_name": system,
        "systems_path": systems_path,
        "backend": backend,
        "backend_version": backend_version,
        "kv_block_size": kv_block_size,
        "tp_size": parallel.tp_size,
        "pp_size": parallel.pp_size,
        "attention_dp_size": parallel.attention_dp_size,
        "moe_tp_size": parallel.moe_tp_size,
        "moe_ep_size": parallel.moe_ep_size,
        "cp_size": parallel.cp_size,
        "weight_dtype": dtype_name(quant.gemm_quant_mode),
        "moe_dtype": moe_dtype_name(quant.moe_quant_mode),
        "activation_dtype": dtype_name(quant.fmha_quant_mode),
        "kv_cache_dtype": dtype_name(quant.kvcache_quant_mode),
        "enable_shared_layer": enable_shared_layer,
        "strict_provenance": False,
        "database_mode": database_mode,
        "transfer_policy": None,
        "tolerate_dirless_version": bool(tolerate_dirless_version),
        "extra": {},
    }
    if nextn > 0:
        engine["nextn"] = nextn
    return engine


def assemble_spec(engine: dict, context_ops: list[dict], generation_ops: list[dict]) -> dict:
    return {
        "schema_version": SPEC_SCHEMA_VERSION,
        "engine": engine,
        "context_ops": context_ops,
        "generation_ops": generation_ops,
    }


def spec_to_json(spec: dict) -> str:
    """Compact JSON; floats stay floats (``36.0``), non-finite numbers are refused."""
    return json.dumps(spec, separators=(",", ":"), allow_nan=False)
