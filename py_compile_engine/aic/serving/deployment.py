"""Serving-level estimates (spec 50): what a deployment delivers, not one engine step.

:func:`estimate` answers one deployment in the reference's ``cli_estimate`` modes —
``static`` / ``static_ctx`` / ``static_gen`` (one batch through prefill and decode), ``agg``
(continuous batching with chunked prefill) and ``disagg`` (separate prefill and decode workers,
rate-matched) — with TTFT, TPOT, throughput per GPU and per user, the memory record and the
per-op breakdown. :func:`sweep` (module :mod:`aic.serving_sweep`) searches parallelism, batch
and worker counts for a GPU budget.

This module only validates arguments (in the reference's order, spec 50 §1.2), resolves MoE
widths and quant modes (§1.3) and compiles one spec per worker; every number comes from the
native engine (``aic._aic.serving_estimate``).
"""

from __future__ import annotations

import json
import math
import os

from .. import paths
from .._native import native
from ..validation import check_estimate_args, optional, positive_int

MODES = ("static", "static_ctx", "static_gen", "agg", "disagg")
BACKENDS = ("trtllm", "vllm", "sglang")
ROLE_SIZES = ("tp_size", "pp_size", "attention_dp_size", "moe_tp_size", "moe_ep_size")
QUANT_KEYS = ("gemm_quant_mode", "kvcache_quant_mode", "fmha_quant_mode", "moe_quant_mode",
              "comm_quant_mode")

_COVERAGE_CACHE: dict = {}
_SM_CACHE: dict = {}


class NoFeasibleConfigError(RuntimeError):
    """The sweep found no configuration meeting the latency targets."""


def _resolve_nextn(model_path, nextn, nextn_accepted):
    """Rule 2 of §1.2: ``nextn`` (``"auto"`` = the checkpoint's MTP depth) and its acceptance."""
    if nextn == "auto":
        from ..compiler.hf_config import load_model_config

        raw = load_model_config(model_path).raw or {}
        nextn = int(raw.get("num_nextn_predict_layers") or 0)
    if isinstance(nextn, bool) or not isinstance(nextn, int):
        if isinstance(nextn, float) and nextn.is_integer():
            nextn = int(nextn)
        else:
            raise ValueError(f"nextn ({nextn}) must be an integer draft length.")
    if nextn < 0:
        raise ValueError(f"nextn ({nextn}) must be >= 0.")
    if nextn > 0:
        if nextn_accepted is None:
            raise ValueError(
                f"nextn={nextn} requires 'nextn_accepted' (average accepted draft tokens per "
                f"step, 0 <= nextn_accepted <= nextn); there is no built-in acceptance assumption."
            )
        a = float(nextn_accepted)
        if not math.isfinite(a) or a < 0 or a > nextn:
            raise ValueError(f"nextn_accepted ({nextn_accepted}) must be within [0, nextn={nextn}].")
        return nextn, a
    return 0, None


def resolve_version(root, system: str, backend: str, backend_version, database_mode="SILICON"):
    """Rule 4: the backend version (``None`` → the current slot); no data → the reference's error."""
    literal = None
    reason = None
    if backend in BACKENDS:
        try:
            literal, _ = native().resolve_backend_version(str(root), system, backend,
                                                          backend_version)
        except ValueError as exc:
            literal, reason = None, str(exc)
    if literal is None and (database_mode or "SILICON") == "SILICON":
        if backend_version is not None and reason:
            # A version the backend lacks: name it and say which versions exist (the native
            # resolver's message lists them), not only the system and backend.
            raise ValueError(f"No database found for system={system}, backend={backend}, "
                             f"backend_version={backend_version!r}: {reason}")
        raise ValueError(f"No database found for system={system}, backend={backend}. "
                         f"Check --systems-paths or available databases.")
    return literal


def resolve_moe_widths(is_moe: bool, tp, dp, moe_tp, moe_ep):
    """§1.3 rule 1: infer the missing MoE width from ``tp · attention_dp``."""
    if not is_moe:
        return moe_tp, moe_ep
    for name, value in (("tp_size", tp), ("attention_dp_size", dp)):
        if value is not None and value <= 0:
            raise ValueError(f"{name} must be positive, got {value}.")
    width = tp * dp
    if moe_tp is None and moe_ep is None:
        raise ValueError("At least one of moe_tp_size or moe_ep_size must be set for MoE models.")
    for name, value in (("moe_tp_size", moe_tp), ("moe_ep_size", moe_ep)):
        if value is not None and value <= 0:
            raise ValueError(f"{name} must be positive, got {value}.")
    if moe_tp is None or moe_ep is None:
        other_name, other = ("moe_ep_size", moe_ep) if moe_tp is None else ("moe_tp_size", moe_tp)
        missing = "moe_tp_size" if moe_tp is None else "moe_ep_size"
        if width % other != 0:
            raise ValueError(
                f"Cannot infer {missing}: tp_size({tp}) * attention_dp_size({dp}) * cp_size(1) = "
                f"{width} is not divisible by {other_name}({other}).")
        if moe_tp is None:
            moe_tp = width // other
        else:
            moe_ep = width // other
    if moe_tp * moe_ep != width:
        raise ValueError(
            f"Parallelism width mismatch: tp_size({tp}) * attention_dp_size({dp}) * cp_size(1) = "
            f"{width}, but moe_tp_size({moe_tp}) * moe_ep_size({moe_ep}) = {moe_tp * moe_ep}. "
            f"These must be equal.")
    return moe_tp, moe_ep


def _sm_version(root, system: str) -> int | None:
    """``gpu.sm_version`` of the system's YAML (read by the native system loader, so no YAML
    parser is imported; cached per process); ``None`` when the file is unreadable or has none."""
    key = (str(root), system)
    if key not in _SM_CACHE:
        try:
            sm = native().system_sm_version(str(root) if root is not None else None, system)
        except (ValueError, RuntimeError, OSError):  # an unreadable system file: no generation
            sm = None
        _SM_CACHE[key] = sm
    return _SM_CACHE[key]


def _is_blackwell(root, system: str) -> bool:
    """``gpu.sm_version >= 100`` (b200, b300, gb200, gb300, rtx_pro_6000_server)."""
    sm = _sm_version(root, system)
    return sm is not None and sm >= 100


def _is_hopper(root, system: str) -> bool:
    """``gpu.sm_version`` 90 (h100, h200)."""
    sm = _sm_version(root, system)
    return sm is not None and 90 <= sm < 100


def _fp4_expert_moe_mode(model_path, model, backend, root, system) -> str | None:
    """The serving level's MoE kernel lane of an FP4-expert checkpoint on SGLang (the
    reference's ``cli_estimate`` and sweep, not its compile function), or ``None``.

    DeepSeek-V4 checkpoints whose routed experts are MXFP4 (``expert_dtype: fp4``, not NVFP4)
    run ``w4a8_mxfp4_mxfp8_trtllm`` on Blackwell and ``w4a16_mxfp4_cutlass`` on Hopper;
    ``moonshotai/Kimi-K3`` runs ``w4a8_mxfp4_mxfp8`` on Blackwell (on Hopper its checkpoint's
    ``w4a16_mxfp4`` stands). The reference skips the rule for its MegaMoE MoE backend, which
    aic never selects."""
    from ..compiler.quant import _DSV4_ARCHS, infer_checkpoint_quant

    if backend != "sglang":
        return None
    if model.architecture in _DSV4_ARCHS:
        if infer_checkpoint_quant(model).get("moe_quant_mode") != "w4a8_mxfp4_mxfp8":
            return None
        if _is_blackwell(root, system):
            return "w4a8_mxfp4_mxfp8_trtllm"
        if _is_hopper(root, system):
            return "w4a16_mxfp4_cutlass"
        return None
    if os.fspath(model_path) == "moonshotai/Kimi-K3" and _is_blackwell(root, system):
        return "w4a8_mxfp4_mxfp8"
    return None


class _CachingResolver:
    """The compile step's data questions, answered once per process (a sweep compiles the same
    system / backend / version for every layout)."""

    def __init__(self):
        from ..compiler.compile import NativeResolver

        self._inner = NativeResolver()
        self._versions: dict = {}
        self._lanes: dict = {}

    def backend_version(self, systems_path, system, backend, requested):
        key = (systems_path, system, backend, requested)
        if key not in self._versions:
            self._versions[key] = self._inner.backend_version(systems_path, system, backend,
                                                              requested)
        return self._versions[key]

    def lane_order(self, *args):
        if args not in self._lanes:
            self._lanes[args] = self._inner.lane_order(*args)
        return list(self._lanes[args])


_RESOLVER: _CachingResolver | None = None


def _resolver() -> _CachingResolver:
    global _RESOLVER
    if _RESOLVER is None:
        _RESOLVER = _CachingResolver()
    return _RESOLVER


def _context_attention_dtypes(root, system, backend, version, table):
    """The FMHA dtypes the context attention table of the database holds (None: no rows)."""
    key = (str(root), system, backend, version, table)
    if key not in _COVERAGE_CACHE:
        dtypes = None
        try:
            view = native().table_view(str(root), system, backend, table, version)
            if view.get("slices"):
                dtypes = set()
                for sl in view["slices"]:
                    for name, value in (sl.get("key") or {}).items():
                        if "fmha" in name:
                            dtypes.add(str(value))
        except Exception:  # noqa: BLE001 - no such table: no downgrade
            dtypes = None
        _COVERAGE_CACHE[key] = dtypes
    return _COVERAGE_CACHE[key]


def _context_table(model) -> str:
    return "context_mla" if model.family in ("DEEPSEEK", "KIMIK25") else "context_attention"


def resolve_quant_overrides(model_path, model, backend, system, version, root, overrides: dict,
                            runs_context: bool, *, sweep: bool = False) -> dict:
    """§1.3 rules 3-4 (and the sweep's GPT-OSS rule, §9.1, and the SGLang FP4-expert MoE
    rule, :func:`_fp4_expert_moe_mode`): explicit overrides for compile."""
    from ..compiler.quant import infer_checkpoint_quant, resolve_quant

    out = dict(overrides)
    blackwell = _is_blackwell(root, system)
    if out.get("moe_quant_mode") is None:
        out["moe_quant_mode"] = _fp4_expert_moe_mode(model_path, model, backend, root, system)
    if (sweep and out.get("moe_quant_mode") is None and backend == "trtllm" and blackwell
            and os.fspath(model_path) in ("openai/gpt-oss-120b", "openai/gpt-oss-20b")):
        out["moe_quant_mode"] = "w4a8_mxfp4_mxfp8"
    if not blackwell:
        inferred = infer_checkpoint_quant(model)
        for key in ("gemm_quant_mode", "moe_quant_mode"):
            mode = out.get(key) or inferred.get(key)
            if mode == "nvfp4":
                out[key] = "nvfp4_wo"
    if runs_context:
        resolved = resolve_quant(model, backend, out)
        explicit = overrides.get("fmha_quant_mode") is not None
        table = _context_table(model)
        if resolved.fmha_quant_mode == "fp8":
            dtypes = _context_attention_dtypes(root, system, backend, version, table)
            if dtypes is not None and "fp8" not in dtypes:
                if explicit:
                    raise ValueError(
                        f"fmha_quant_mode=fp8 has no '{table}' perf data for this "
                        f"system/backend/version. Use --fmha-quant-mode bfloat16, or omit "
                        f"--fmha-quant-mode to auto-select it.")
                if "bfloat16" in dtypes:
                    out["fmha_quant_mode"] = "bfloat16"
    return out


def build_worker(model_path, system, backend, version, root, sizes: dict, overrides: dict,
                 nextn: int, runs_context: bool, *, sweep=False, database_mode=None,
                 attention_backend=None, moe_label_default=None, memo: dict | None = None) -> dict:
    """Compiles one worker and returns the native request's worker object.

    ``memo`` (one dict per sweep) shares the worker between calls whose sizes and resolved
    quant modes are equal (a decode layout usually compiles to the same spec as the agg layout
    of the same sizes); everything else a call depends on is fixed within one sweep."""
    from ..compiler.compile import compile_report
    from ..compiler.hf_config import load_model_config
    from ..compiler.memory import model_facts

    model = load_model_config(model_path)
    quant = resolve_quant_overrides(model_path, model, backend, system, version, root, overrides,
                                    runs_context, sweep=sweep)
    key = (tuple(sorted(sizes.items())), tuple(sorted(quant.items())))
    if memo is not None and key in memo:
        return memo[key]
    result = compile_report(
        model_path, system, backend, version, **sizes, **quant, nextn=nextn,
        systems_path=os.fspath(root) if root is not None else None,
        database_mode=database_mode, attention_backend=attention_backend,
        resolver=_resolver(),
    )
    q = result.quant
    labels = {
        "gemm": q["gemm_quant_mode"], "kvcache": q["kvcache_quant_mode"],
        "fmha": q["fmha_quant_mode"], "moe": q["moe_quant_mode"], "comm": q["comm_quant_mode"],
        "moe_tp": sizes.get("moe_tp_size", moe_label_default),
        "moe_ep": sizes.get("moe_ep_size", moe_label_default),
    }
    if labels["moe_tp"] is None:
        labels["moe_tp"] = moe_label_default
    if labels["moe_ep"] is None:
        labels["moe_ep"] = moe_label_default
    worker = {"spec": result.spec_json, "facts": model_facts(result.model), "labels": labels}
    if memo is not None:
        memo[key] = worker
    return worker


def estimate(
    model_path,
    system_name: str,
    mode: str = "agg",
    backend_name: str = "trtllm",
    backend_version: str | None = None,
    *,
    database_mode: str = "SILICON",
    isl: int = 1024,
    osl: int = 1024,
    batch_size: int = 128,
    ctx_tokens: int | None = None,
    tp_size: int = 1,
    pp_size: int = 1,
    attention_dp_size: int = 1,
    moe_tp_size: int | None = None,
    moe_ep_size: int | None = None,
    gemm_quant_mode: str | None = None,
    kvcache_quant_mode: str | None = None,
    fmha_quant_mode: str | None = None,
    moe_quant_mode: str | None = None,
    comm_quant_mode: str | None = None,
    prefix: int = 0,
    nextn=0,
    nextn_accepted: float | None = None,
    stride: int = 32,
    free_gpu_memory_fraction: float | None = None,
    max_seq_len: int | None = None,
    prefill_tp_size: int | None = None,
    prefill_pp_size: int | None = None,
    prefill_attention_dp_size: int | None = None,
    prefill_moe_tp_size: int | None = None,
    prefill_moe_ep_size: int | None = None,
    decode_tp_size: int | None = None,
    decode_pp_size: int | None = None,
    decode_attention_dp_size: int | None = None,
    decode_moe_tp_size: int | None = None,
    decode_moe_ep_size: int | None = None,
    prefill_batch_size: int | None = None,
    prefill_num_workers: int | None = None,
    decode_batch_size: int | None = None,
    decode_num_workers: int | None = None,
    prefill_free_gpu_memory_fraction: float | None = None,
    decode_free_gpu_memory_fraction: float | None = None,
    prefill_max_seq_len: int | None = None,
    decode_max_seq_len: int | None = None,
    attention_backend: str | None = None,
    systems_path: str | os.PathLike | None = None,
    engine_step_backend: str | None = None,
    calibrated: bool = False,
    concurrency: int | None = None,
    calibration: dict | str | os.PathLike | None = None,
    _request_extra: dict | None = None,
) -> dict:
    """One deployment's serving estimate, as the reference's ``cli_estimate`` computes it.

    ``mode``: ``"static"`` (one batch of ``batch_size`` requests through prefill and all
    decode steps), ``"static_ctx"`` / ``"static_gen"`` (one phase), ``"agg"`` (continuous
    batching: ``batch_size`` resident requests per rank, ``ctx_tokens`` prompt tokens per
    iteration) or ``"disagg"`` (``prefill_*`` / ``decode_*`` workers; the four batch / worker
    counts are required). MoE models need ``moe_tp_size`` or ``moe_ep_size``. With MTP
    (``nextn > 0``) give ``nextn_accepted``, the average accepted draft tokens per step.

    ``calibrated=True`` (agg, disagg): the calibrated estimate of ``ACCURACY.md`` — the parity
    figures corrected for prefill queueing at ``concurrency`` (the measured total; default: from
    the batch sizes) and the per-backend step overheads, with the constants of ``calibration``
    (a dict, or a JSON file; default the shipped ``data/calibration/serving.json``); a memory
    verdict is reported instead of raised, and a missing perf table falls back to the HYBRID
    estimate (``result["calibration"]["fallback"] = "HYBRID"``), in which a DSA module whose GEMM
    quant mode has no measured slice is read from a sibling quant's slice (``ACCURACY.md``).

    Returns ``{"result", "memory", "oom", "per_ops"}``: ``result`` holds ``ttft``, ``tpot``
    (ms), ``power_w``, ``kv_cache_warning`` and ``raw`` (the full result row: throughputs,
    ``tokens/s/gpu``, ``tokens/s/user``, ``request_latency``, parallelism, quant modes, memory
    GiB); ``memory`` the GiB breakdown (static / agg). Errors: ``ValueError`` for bad
    arguments, ``RuntimeError`` when the deployment does not fit in GPU memory (agg, disagg).
    """
    if engine_step_backend not in (None, "rust"):
        raise ValueError(f"engine_step_backend must be None or 'rust', got {engine_step_backend!r}")
    if calibrated:
        args = {k: v for k, v in locals().items()
                if k not in ("calibrated", "concurrency", "calibration", "model_path",
                             "system_name", "_request_extra")}
        return _calibrated_estimate(model_path, system_name, args, concurrency, calibration)
    nextn, accepted = _resolve_nextn(model_path, nextn, nextn_accepted)
    if mode not in MODES:
        raise ValueError(f"Unsupported estimate mode: {mode!r}. Use 'agg', 'disagg', 'afd', "
                         f"'static', 'static_ctx', or 'static_gen'.")
    check_estimate_args(mode, dict(locals()))
    root = paths.systems_dir(systems_path)
    version = resolve_version(root, system_name, backend_name, backend_version, database_mode)
    if mode == "disagg":
        for name, value in (("prefill_batch_size", prefill_batch_size),
                            ("prefill_num_workers", prefill_num_workers),
                            ("decode_batch_size", decode_batch_size),
                            ("decode_num_workers", decode_num_workers)):
            if value is None:
                raise ValueError(f"{name} is required for disagg mode.")
    from ..compiler import families
    from ..compiler.hf_config import load_model_config

    is_moe = load_model_config(model_path).family in families.MOE_FAMILIES
    overrides = {"gemm_quant_mode": gemm_quant_mode, "kvcache_quant_mode": kvcache_quant_mode,
                 "fmha_quant_mode": fmha_quant_mode, "moe_quant_mode": moe_quant_mode,
                 "comm_quant_mode": comm_quant_mode}
    common = dict(isl=isl, osl=osl, prefix=prefix, stride=stride, nextn_accepted=accepted)

    def sizes_for(tp, pp, dp, mtp, mep):
        mtp, mep = resolve_moe_widths(is_moe, tp, dp, mtp, mep)
        return {"tp_size": tp, "pp_size": pp, "attention_dp_size": dp,
                "moe_tp_size": mtp, "moe_ep_size": mep}

    def worker(sizes, runs_context):
        return build_worker(model_path, system_name, backend_name, version, root, sizes,
                            overrides, nextn, runs_context, database_mode=database_mode,
                            attention_backend=attention_backend)

    if mode == "disagg":
        pick = lambda role, shared: shared if role is None else role  # noqa: E731
        psizes = sizes_for(pick(prefill_tp_size, tp_size), pick(prefill_pp_size, pp_size),
                           pick(prefill_attention_dp_size, attention_dp_size),
                           pick(prefill_moe_tp_size, moe_tp_size),
                           pick(prefill_moe_ep_size, moe_ep_size))
        dsizes = sizes_for(pick(decode_tp_size, tp_size), pick(decode_pp_size, pp_size),
                           pick(decode_attention_dp_size, attention_dp_size),
                           pick(decode_moe_tp_size, moe_tp_size),
                           pick(decode_moe_ep_size, moe_ep_size))
        request = {
            "mode": mode, **common,
            "prefill_worker": worker(psizes, True),
            "decode_worker": worker(dsizes, False),
            "prefill": {"batch_size": prefill_batch_size, "num_workers": prefill_num_workers,
                        "free_gpu_memory_fraction": pick(prefill_free_gpu_memory_fraction,
                                                         free_gpu_memory_fraction),
                        "max_seq_len": pick(prefill_max_seq_len, max_seq_len)},
            "decode": {"batch_size": decode_batch_size, "num_workers": decode_num_workers,
                       "free_gpu_memory_fraction": pick(decode_free_gpu_memory_fraction,
                                                        free_gpu_memory_fraction),
                       "max_seq_len": pick(decode_max_seq_len, max_seq_len)},
        }
    else:
        sizes = sizes_for(tp_size, pp_size, attention_dp_size, moe_tp_size, moe_ep_size)
        request = {
            "mode": mode, **common, "batch_size": batch_size, "ctx_tokens": ctx_tokens,
            "free_gpu_memory_fraction": free_gpu_memory_fraction, "max_seq_len": max_seq_len,
            "worker": worker(sizes, mode != "static_gen"),
        }
    if _request_extra:
        request.update(_request_extra)
    return json.loads(native().serving_estimate(json.dumps(request, allow_nan=False), str(root)))


# The plan values (aic.serving.plan) are imported where they are used: the sweep's import path
# stays off ``dataclasses`` / ``typing`` (tests/python/test_lean_imports.py).


def _workload_fields(workload: Workload, stride: int, nextn_accepted) -> dict:
    return {"isl": workload.isl, "osl": workload.osl, "prefix": workload.prefix,
            "stride": stride, "nextn_accepted": nextn_accepted}


def _agg_role_fields(role: Role) -> dict:
    return {"batch_size": role.batch_size, "ctx_tokens": role.ctx_tokens,
            "free_gpu_memory_fraction": role.free_gpu_memory_fraction,
            "max_seq_len": role.max_seq_len}


def _compile_role(*, plan_model, role: Role, runs_context: bool, database_mode, nextn,
                  attention_backend, root, version) -> dict:
    """The native request's worker object of one role: MoE widths resolved (§1.3 rule 1),
    quant modes resolved for the role's own system and backend, compiled."""
    from ..compiler import families
    from ..compiler.hf_config import load_model_config

    is_moe = load_model_config(plan_model).family in families.MOE_FAMILIES
    p = role.parallel
    mtp, mep = resolve_moe_widths(is_moe, p.tp, p.dp, p.moe_tp, p.moe_ep)
    sizes = {"tp_size": p.tp, "pp_size": p.pp, "attention_dp_size": p.dp,
             "moe_tp_size": mtp, "moe_ep_size": mep}
    if p.cp != 1:
        sizes["cp_size"] = p.cp
    return build_worker(plan_model, role.system, role.backend,
                        version, root, sizes,
                        role.quant.overrides(), nextn, runs_context,
                        database_mode=database_mode, attention_backend=attention_backend)


def _run_native(request: dict, root, extra: dict | None) -> dict:
    if extra:
        request.update(extra)
    return json.loads(native().serving_estimate(json.dumps(request, allow_nan=False), str(root)))


def estimate_deployment(deployment: Deployment, workload: Workload, *, stride: int = 32,
                        systems_path: str | os.PathLike | None = None,
                        _request_extra: dict | None = None) -> dict:
    """The serving estimate of a :class:`~aic.serving.plan.Deployment` on a
    :class:`~aic.serving.plan.Workload` (its lengths and prefix; the load is not used).

    Each role is compiled for its own system, backend and version (a decode role on another
    GPU type is priced with that system's tables and memory), then the native engine answers
    the agg or disagg estimate. An agg role needs ``batch_size`` (``ctx_tokens`` defaults to
    the engine's); disagg roles need ``batch_size`` and ``workers``. Returns what
    :func:`estimate` returns."""
    from .plan import Deployment, Workload

    if not isinstance(deployment, Deployment):
        raise TypeError(f"deployment must be an aic.serving.plan.Deployment, got "
                        f"{type(deployment).__name__}")
    if not isinstance(workload, Workload):
        raise TypeError(f"workload must be an aic.serving.plan.Workload, got "
                        f"{type(workload).__name__}")
    root = paths.systems_dir(systems_path)
    dep = deployment
    for name, role in dep.roles.items():
        if role.batch_size is None:
            raise ValueError(f"roles.{name}.batch_size is required for a {dep.mode} estimate.")
    common = dict(plan_model=dep.model, database_mode=dep.database_mode, nextn=dep.nextn,
                  attention_backend=dep.attention_backend, root=root)

    def compiled(role: Role, runs_context: bool) -> dict:
        version = resolve_version(root, role.system, role.backend, role.version,
                                  dep.database_mode)
        return _compile_role(role=role, runs_context=runs_context, version=version, **common)

    fields = _workload_fields(workload, stride, dep.nextn_accepted)
    if dep.mode == "agg":
        agg = dep.role("agg")
        request = {"mode": "agg", **fields, **_agg_role_fields(agg),
                   "worker": compiled(agg, True)}
    else:
        pre, dec = dep.role("prefill"), dep.role("decode")

        def knobs(role: Role) -> dict:
            return {"batch_size": role.batch_size, "num_workers": role.workers,
                    "free_gpu_memory_fraction": role.free_gpu_memory_fraction,
                    "max_seq_len": role.max_seq_len}

        request = {"mode": "disagg", **fields,
                   "prefill_worker": compiled(pre, True), "decode_worker": compiled(dec, False),
                   "prefill": knobs(pre), "decode": knobs(dec)}
    return _run_native(request, root, _request_extra)


_CONSTANTS_CACHE: dict = {}
CALIBRATION_FILE = ("calibration", "serving.json")


def calibration_path() -> str:
    """The shipped constants file of the calibrated estimate."""
    packaged = paths.package_dir() / "data" / CALIBRATION_FILE[0] / CALIBRATION_FILE[1]
    if packaged.is_file():
        return os.fspath(packaged)
    data = paths.repo_data_dir()
    if data is not None and (data / CALIBRATION_FILE[0] / CALIBRATION_FILE[1]).is_file():
        return os.fspath(data / CALIBRATION_FILE[0] / CALIBRATION_FILE[1])
    raise ValueError("cannot find the calibration constants (aic/data/calibration/serving.json)")


def load_calibration(calibration=None) -> dict:
    """The constants document: a dict as given, or read from a JSON file (default: shipped).

    A file is read once per process while it is unchanged (size and modification time) and
    checked by the native engine: ``ValueError`` naming the file and what is wrong (unreadable,
    not JSON, an unsupported format version, a negative or non-finite constant, ...). A dict is
    checked with each estimate instead."""
    if isinstance(calibration, dict):
        return calibration
    path = os.fspath(calibration) if calibration is not None else calibration_path()
    try:
        st = os.stat(path)
        stamp = (path, st.st_size, st.st_mtime_ns)
        if stamp in _CONSTANTS_CACHE:
            return _CONSTANTS_CACHE[stamp]
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
    except OSError as exc:
        raise ValueError(f"cannot read the calibration constants {path}: {exc.strerror or exc}") \
            from None
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"calibration constants {path}: not JSON ({exc})") from None
    try:
        native().check_calibration(text)
    except ValueError as exc:
        raise ValueError(f"calibration constants {path}: {exc}") from None
    _CONSTANTS_CACHE[stamp] = doc
    return doc


def _is_missing_data(exc: BaseException) -> bool:
    return "PerfDataNotAvailable" in type(exc).__name__ or "perf database error" in str(exc)


def _calibrated_estimate(model_path, system_name, args: dict, concurrency, calibration) -> dict:
    """The calibrated estimate: the native request gains ``calibrated``, ``concurrency`` and the
    constants; a missing perf table (SILICON) is retried as a HYBRID estimate."""
    if args["mode"] not in ("agg", "disagg"):
        raise ValueError(f"the calibrated estimate covers 'agg' and 'disagg', not {args['mode']!r}")
    optional(positive_int, "concurrency", concurrency, "requests in flight")
    fields = {"calibrated": True, "concurrency": concurrency,
              "calibration": load_calibration(calibration)}
    try:
        out = estimate(model_path, system_name, **args, _request_extra=fields)
        fallback = ""
    except Exception as exc:  # noqa: BLE001 - only missing-data errors are retried
        if not _is_missing_data(exc) or (args.get("database_mode") or "SILICON") != "SILICON":
            raise
        out = estimate(model_path, system_name, **{**args, "database_mode": "HYBRID"},
                       _request_extra=fields)
        fallback = "HYBRID"
    out["result"].setdefault("calibration", {})["fallback"] = fallback
    return out
