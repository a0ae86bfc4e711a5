"""The planning layer (spec 51): experiments built from a request, run through the native sweep.

An **experiment** is one resolved search: a serving mode, a GPU budget, the workload and SLA,
the sweep knobs (database mode, transfer policy, memory fraction, ...) and, per role (``agg``,
or ``prefill`` and ``decode``), where the role runs (model, system, backend, version, quant
modes) and its candidate lists. Three entry points build experiments:

* :func:`plan_sweep` — the reference's ``cli default``: one backend or ``auto`` (§1), a
  serving-mode restriction (§2), a decode role on another system (§3), every knob of §6;
* :func:`recommend` — the fewest GPUs that carry a load target (§4): the same experiments
  rebuilt up a budget ladder, picked by load match;
* :func:`run_experiments` — ``cli exp`` YAML files (§5, :mod:`aic.serving.experiment_files`).

The experiments themselves, the compile of their layouts (each role for its own system, backend
and version: mixed GPU types are per-role systems, not a special case) and the one native
``serving_plan`` call that evaluates, picks, merges and chooses are in
:mod:`aic.serving.experiment`. Nothing here computes a latency. Plain classes and dicts: no
dataclasses on this path.
"""

from __future__ import annotations

import math
import os

from .. import paths
from ..validation import check_sweep_args
from .deployment import NoFeasibleConfigError, _resolve_nextn
from .experiment import (  # noqa: F401 - re-exported: the planning vocabulary in one place
    ATTENTION_BACKENDS,
    DEFAULT_REPLICA_SIZES,
    DISAGG_DEFAULTS,
    KNOBS,
    QUANT_NAMES,
    ROLES_OF_MODE,
    Experiment,
    RoleSpace,
    _error,
    backend_versions,
    check_attention_backend,
    role_search_space,
    run_plan,
    tasks_of,
)
from .search_space import powers_of_two_upto

#: Backends ``--backend auto`` sweeps, in the reference's order (spec 51 §1.1).
AUTO_BACKEND_ORDER = ("trtllm", "sglang", "vllm")
BACKENDS = ("trtllm", "vllm", "sglang")
#: ``serving_mode`` values and the modes they build (§2).
SERVING_MODES = {"auto": ("agg", "disagg"), "agg": ("agg",), "disagg": ("disagg",)}
DATABASE_MODES = ("SILICON", "HYBRID", "EMPIRICAL", "SOL")
#: The empirical transfer kinds and presets of §6.2.
TRANSFER_KINDS = ("xop", "xprofile", "xquant", "xshape")
TRANSFER_PRESETS = {"aggressive": TRANSFER_KINDS, "balanced": ("xshape", "xquant"),
                    "conservative": ("xshape",), "off": ()}
#: Error classes that make ``recommend`` try a larger budget (§4.2 step 5).
GPU_RETRIABLE = ("InsufficientMemoryError", "KVCacheCapacityError")
#: ``recommend``'s largest budget (§4.2 step 3).
MAX_RECOMMEND_GPUS = 64
NO_FEASIBLE_DEFAULT = "No feasible configurations found for the given parameters."
NO_FEASIBLE_EXP = "No feasible configurations found for the given experiments."
NO_FEASIBLE_LOAD = "No feasible GPU configuration found for the given load target."


class PlanningError(ValueError):
    """A planning request that cannot be built (the reference exits with status 1 here): no
    backend with data, a system or decode system without the backend's data (or the requested
    version), no experiment left to build, ... The message names the argument or field and the
    fix."""

    #: What the reference raises in these places (``sys.exit(1)``).
    reference_class = "SystemExit"


# ------------------------------------------------------------------------------ small checks


def parse_transfer_policy(value) -> list[str] | None:
    """§6.2: ``None`` (every kind), a preset, a kind, a comma-separated list or a list of them,
    case-insensitive, to the sorted list of kinds enabled. ``ValueError`` names the bad token."""
    if value is None:
        return None
    if isinstance(value, str):
        tokens = value.split(",")
    elif isinstance(value, (list, tuple)):
        tokens = list(value)
    else:
        raise ValueError(f"transfer_policy must be a string or a list of strings, got {value!r}")
    kinds: set = set()
    for token in tokens:
        t = str(token).strip().lower()
        if t in TRANSFER_PRESETS:
            kinds.update(TRANSFER_PRESETS[t])
        elif t in TRANSFER_KINDS:
            kinds.add(t)
        else:
            raise ValueError(f"unknown transfer kind/preset '{t}'; valid kinds: "
                             f"{', '.join(TRANSFER_KINDS)}; presets: "
                             f"{', '.join(sorted(TRANSFER_PRESETS))}")
    return sorted(kinds)


def check_load_target(target_request_rate, target_concurrency) -> dict:
    """§4.1 validation steps 1-2: exactly one target, a positive finite number. Returns the
    native request's ``load_target``."""
    if (target_request_rate is None) == (target_concurrency is None):
        raise ValueError("Exactly one of target_request_rate or target_concurrency must be "
                         "provided.")
    name, value = (("request_rate", target_request_rate) if target_request_rate is not None
                   else ("concurrency", target_concurrency))
    if isinstance(value, bool):
        raise ValueError(f"Load target must be a positive finite number, got {value!r}.")
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"Load target must be a positive finite number, got {value!r}.") \
            from None
    if not math.isfinite(v) or v <= 0:
        raise ValueError(f"Load target must be a positive finite number, got {v!r}.")
    return {name: v}


def _check_database_mode(value) -> str:
    mode = str(value).upper() if isinstance(value, str) else value
    if mode not in DATABASE_MODES:
        raise PlanningError(f"database_mode: {value!r} is not one of "
                            f"{', '.join(DATABASE_MODES)}")
    return mode


class LoggedWarnings(list):
    """Where the warnings of a build go when the caller passes no list: each one is logged
    (logger ``aic.serving.planning``), as the reference logs a skipped backend or entry."""

    def append(self, text) -> None:
        import logging

        logging.getLogger("aic.serving.planning").warning("%s", text)
        super().append(text)


# ------------------------------------------------------------------------------ data questions


def gpus_per_node(root, system: str) -> int:
    """``node.num_gpus_per_node`` of the system file (``recommend``'s first budget, §4.2)."""
    import yaml

    path = os.path.join(str(root), f"{system}.yaml")
    try:
        with open(path, encoding="utf-8") as fh:
            doc = yaml.safe_load(fh)
        n = int(doc["node"]["num_gpus_per_node"])
    except (OSError, KeyError, TypeError, ValueError, yaml.YAMLError):
        raise PlanningError(f"system: cannot read node.num_gpus_per_node of {system!r} "
                            f"({path}); check the system name or --systems-path") from None
    if n < 1:
        raise PlanningError(f"system: {system!r} has num_gpus_per_node {n}")
    return n


# ------------------------------------------------------------------------------ cli default


def _available(root, system, backend, version, database_mode) -> bool:
    """§1.1 step 2: in SILICON / HYBRID a backend needs a database (and the given version)."""
    if database_mode not in ("SILICON", "HYBRID"):
        return True
    return backend_versions(root, system, backend, version) is not None


def build_default_experiments(model_path, total_gpus, system, backend="trtllm",
                              backend_version=None, *, decode_system=None, serving_mode="auto",
                              isl=4000, osl=1000, prefix=0, ttft=2000.0, tpot=30.0,
                              request_latency=None, database_mode="SILICON",
                              transfer_policy=None, free_gpu_memory_fraction=None,
                              max_seq_len=None, nextn=0, nextn_accepted=None,
                              attention_backend=None, enable_chunked_prefill=False,
                              quant=None, systems_path=None, warnings=None) -> list[Experiment]:
    """The experiments of ``cli default`` (spec 51 §1.2, §2, §3): per kept backend (``auto``:
    trtllm, sglang, vllm with data), agg then disagg as ``serving_mode`` asks. Names are
    ``agg`` / ``disagg``, or ``agg_<backend>`` / ``disagg_<backend>`` with ``auto``.
    ``PlanningError`` when nothing can be built."""
    warnings = warnings if warnings is not None else LoggedWarnings()
    if serving_mode not in SERVING_MODES:
        raise ValueError(f"Invalid serving_mode: '{serving_mode}'. Use 'auto', 'all', 'agg', "
                         f"'disagg', or 'afd'.")
    database_mode = _check_database_mode(database_mode)
    try:
        policy, policy_error = parse_transfer_policy(transfer_policy), None
    except ValueError as exc:  # every experiment fails on it when it loads its database (§6.2)
        policy, policy_error = None, _error(exc)
    root = paths.systems_dir(systems_path)
    decode_system = decode_system or system
    modes = list(SERVING_MODES[serving_mode])
    if backend == "auto":
        backends = []
        for b in AUTO_BACKEND_ORDER:
            if _available(root, system, b, backend_version, database_mode):
                backends.append(b)
            else:
                warnings.append(f"backend {b}: no {database_mode} database on {system}"
                                + (f" for version {backend_version}" if backend_version
                                   else "") + "; skipped")
        if not backends:
            raise PlanningError(f"backend auto: no backend has perf data on system {system!r} "
                                f"in {database_mode} mode; try --database-mode SOL or EMPIRICAL, "
                                f"or another system")
    elif backend in BACKENDS:
        backends = [backend]
        if not _available(root, system, backend, backend_version, database_mode):
            raise PlanningError(
                f"system: {system!r} has no perf data for backend {backend}"
                + (f" version {backend_version}" if backend_version else "")
                + f" ({database_mode} mode); check the system and backend names, or use "
                  f"--database-mode SOL / EMPIRICAL")
        if "disagg" in modes and decode_system != system \
                and not _available(root, decode_system, backend, backend_version, database_mode):
            raise PlanningError(
                f"decode_system: {decode_system!r} has no perf data for backend {backend}"
                + (f" version {backend_version}" if backend_version else "")
                + f" ({database_mode} mode); pick a decode system with {backend} data, or "
                  f"--database-mode SOL / EMPIRICAL")
    else:
        raise PlanningError(f"backend: {backend!r} is not one of trtllm, vllm, sglang, auto")
    workload = {"isl": isl, "osl": osl, "prefix": prefix, "ttft": ttft, "tpot": tpot,
                "request_latency": request_latency}
    knobs = {"database_mode": database_mode, "transfer_policy": policy,
             "free_gpu_memory_fraction": free_gpu_memory_fraction, "max_seq_len": max_seq_len,
             "nextn": nextn, "nextn_accepted": nextn_accepted,
             "attention_backend": attention_backend,
             "enable_chunked_prefill": bool(enable_chunked_prefill)}
    out = []
    for b in backends:
        for mode in modes:
            name = mode if backend != "auto" else f"{mode}_{b}"
            if mode == "disagg":
                if total_gpus < 2:
                    # Dropped without a warning when agg runs (the usual one-GPU sweep);
                    # disagg alone on one GPU is the error below.
                    if serving_mode == "disagg":
                        warnings.append(f"{name}: disagg needs at least 2 GPUs; skipped")
                    continue
                if backend == "auto" and decode_system != system and not _available(
                        root, decode_system, b, backend_version, database_mode):
                    warnings.append(f"{name}: decode system {decode_system} has no {b} data; "
                                    f"skipped")
                    continue
                roles = {"prefill": RoleSpace(model_path, system, b, backend_version, quant),
                         "decode": RoleSpace(model_path, decode_system, b, backend_version,
                                             quant)}
            else:
                roles = {"agg": RoleSpace(model_path, system, b, backend_version, quant)}
            out.append(Experiment(name, mode, total_gpus, workload, knobs, roles))
            out[-1].error = policy_error
    if not out:
        raise PlanningError(f"No task configs could be built for serving_mode={serving_mode} "
                            f"(disagg needs at least 2 GPUs; --gpus is {total_gpus})")
    return out


def _finish(out: dict, experiments, message: str, *, raise_empty=True) -> dict:
    out["tasks"] = tasks_of(experiments)
    if out["chosen_exp"] == "none" and raise_empty:
        causes = "; ".join(f"{k}: {v['type']}: {v['message']}" for k, v in out["outcomes"].items()
                           if v)
        raise NoFeasibleConfigError(message + (f" ({causes})" if causes else ""))
    return out


def plan_sweep(model_path, total_gpus, system, backend="trtllm", backend_version=None, *,
               decode_system=None, serving_mode="auto", isl=4000, osl=1000, ttft=2000.0,
               tpot=30.0, request_latency=None, prefix=0, nextn=0, nextn_accepted=None,
               strict_sla=False, free_gpu_memory_fraction=None, max_seq_len=None, top_n=5,
               database_mode="SILICON", transfer_policy=None, attention_backend=None,
               enable_chunked_prefill=False, inclusive_tpot=False, gemm_quant_mode=None,
               kvcache_quant_mode=None, fmha_quant_mode=None, moe_quant_mode=None,
               comm_quant_mode=None, systems_path=None, warnings=None) -> dict:
    """``cli default`` (spec 51 §1-§3, §6): the best deployments of ``model_path`` on
    ``total_gpus`` GPUs of ``system`` (decode workers on ``decode_system`` when given), for one
    backend or every backend with data (``backend="auto"``), in the modes ``serving_mode``
    asks. More than two experiments are merged per mode (§1.3). Returns the golden layout plus
    ``tasks``; raises :class:`NoFeasibleConfigError` when no experiment has rows."""
    nextn, nextn_accepted = _resolve_nextn(model_path, nextn, nextn_accepted)
    check_sweep_args(dict(locals()))
    quant = {"gemm": gemm_quant_mode, "kvcache": kvcache_quant_mode, "fmha": fmha_quant_mode,
             "moe": moe_quant_mode, "comm": comm_quant_mode}
    exps = build_default_experiments(
        model_path, total_gpus, system, backend, backend_version, decode_system=decode_system,
        serving_mode=serving_mode, isl=isl, osl=osl, prefix=prefix, ttft=ttft, tpot=tpot,
        request_latency=request_latency, database_mode=database_mode,
        transfer_policy=transfer_policy, free_gpu_memory_fraction=free_gpu_memory_fraction,
        max_seq_len=max_seq_len, nextn=nextn, nextn_accepted=nextn_accepted,
        attention_backend=attention_backend, enable_chunked_prefill=enable_chunked_prefill,
        quant=quant, systems_path=systems_path, warnings=warnings)
    out = run_plan(exps, merge=len(exps) > 2, strict_sla=strict_sla, top_n=top_n,
                   inclusive_tpot=inclusive_tpot, systems_path=systems_path)
    return _finish(out, exps, NO_FEASIBLE_DEFAULT)


# ------------------------------------------------------------------------------ recommend


def _retriable(outcome) -> bool:
    if not outcome:
        return False
    return outcome.get("type") in GPU_RETRIABLE or any(
        name in (outcome.get("message") or "") for name in GPU_RETRIABLE)


def _rebuild_for_budget(base: list[Experiment], budget: int, cap: int) -> list[Experiment]:
    """§4.2 step 4: the base experiments at ``budget`` with the GPU-count lists set to the
    powers of two up to it, every other list kept from the base build, the replica cap kept."""
    out = []
    for b in base:
        e = b.copy()
        e.total_gpus = budget
        for role, space in e.roles.items():
            kept = b.resolved.get(role, {}).get("lists") or {}
            space.lists = {k: list(v) for k, v in kept.items()}
            space.lists["num_gpu"] = powers_of_two_upto(budget)
        if e.disagg is not None:
            e.disagg["max_gpu_per_replica"] = cap
        out.append(e)
    return out


def recommend(model_path, system, *, target_request_rate=None, target_concurrency=None,
              decode_system=None, backend="trtllm", backend_version=None,
              database_mode="HYBRID", transfer_policy=None, isl=4000, osl=1000, ttft=2000.0,
              tpot=30.0, request_latency=None, prefix=0, nextn=None, nextn_accepted=None,
              strict_sla=False, enable_chunked_prefill=False, free_gpu_memory_fraction=None,
              max_seq_len=None, attention_backend=None, top_n=5, systems_path=None,
              warnings=None) -> dict:
    """``cli recommend`` (spec 51 §4): the fewest GPUs of ``system`` that carry
    ``target_request_rate`` requests/s or ``target_concurrency`` requests in flight at the SLA.

    Runs the ``cli default`` experiments at one node's GPUs, then at twice, four times, ... (up
    to 64) while an experiment runs out of memory; each experiment is picked by load match
    (rows gain ``replicas_needed`` and ``total_gpus_needed``; best throughput is
    ``1 / total_gpus_needed``). Returns the golden layout plus ``tasks`` and ``attempts``
    (``[{gpu_budget, outcomes}]``). ``strict_sla`` is accepted and ignored (§4.3)."""
    load_target = check_load_target(target_request_rate, target_concurrency)
    if nextn is None:
        nextn = 0
    nextn, nextn_accepted = _resolve_nextn(model_path, nextn, nextn_accepted)
    root = paths.systems_dir(systems_path)
    g = gpus_per_node(root, system)
    check_sweep_args({**locals(), "total_gpus": g})
    ladder = [n for n in (g * 2 ** i for i in range(8)) if n <= MAX_RECOMMEND_GPUS] or [g]
    base = build_default_experiments(
        model_path, g, system, backend, backend_version, decode_system=decode_system,
        serving_mode="auto", isl=isl, osl=osl, prefix=prefix, ttft=ttft, tpot=tpot,
        request_latency=request_latency, database_mode=database_mode,
        transfer_policy=transfer_policy, free_gpu_memory_fraction=free_gpu_memory_fraction,
        max_seq_len=max_seq_len, nextn=nextn, nextn_accepted=nextn_accepted,
        attention_backend=attention_backend, enable_chunked_prefill=enable_chunked_prefill,
        systems_path=systems_path, warnings=warnings)
    for e in base:
        if e.disagg is not None:
            e.disagg["max_gpu_per_replica"] = min(g, 128)
    attempts, exps, out = [], base, None
    for i, budget in enumerate(ladder):
        exps = base if budget == g else _rebuild_for_budget(base, budget, min(g, 128))
        out = run_plan(exps, merge=len(exps) > 2, load_target=load_target, top_n=top_n,
                       systems_path=systems_path)
        attempts.append({"gpu_budget": budget, "outcomes": dict(out["outcomes"])})
        if i == len(ladder) - 1 or not any(_retriable(o) for o in out["outcomes"].values()):
            break
    out["attempts"] = attempts
    out["tasks"] = tasks_of(exps)
    if out["chosen_exp"] == "none" or not any(out["best_configs"].values()):
        raise NoFeasibleConfigError(NO_FEASIBLE_LOAD)
    return out


def _workload_kwargs(workload) -> dict:
    """The workload keywords of :func:`plan_sweep` / :func:`recommend` from a
    :class:`~aic.serving.plan.Workload` (its unset targets keep the functions' defaults)."""
    from .plan import Workload

    if not isinstance(workload, Workload):
        raise TypeError(f"workload must be an aic.serving.plan.Workload, got "
                        f"{type(workload).__name__}")
    out = {"isl": workload.isl, "osl": workload.osl, "prefix": workload.prefix,
           "request_latency": workload.request_latency}
    for name in ("ttft", "tpot"):
        if getattr(workload, name) is not None:
            out[name] = getattr(workload, name)
    return out


def sweep_workload(model_path, total_gpus, system, workload, **kwargs) -> dict:
    """:func:`plan_sweep` for a :class:`~aic.serving.plan.Workload` (lengths, prefix, latency
    targets; a load it carries is not used at a fixed budget)."""
    return plan_sweep(model_path, total_gpus, system, **_workload_kwargs(workload), **kwargs)


def recommend_workload(model_path, system, workload, **kwargs) -> dict:
    """:func:`recommend` for a :class:`~aic.serving.plan.Workload`: its ``request_rate`` or
    ``concurrency`` is the load target."""
    return recommend(model_path, system, target_request_rate=workload.request_rate,
                     target_concurrency=(None if workload.concurrency is None
                                         else float(workload.concurrency)),
                     **_workload_kwargs(workload), **kwargs)


def result_deployment(result: dict, exp: str, rank: int = 0, **kwargs):
    """The :class:`~aic.serving.plan.Deployment` of row ``rank`` of ``result["best_configs"]
    [exp]`` (:meth:`Deployment.from_row`; ``kwargs`` go to it: ``database_mode``, ``nextn``,
    ...). ``IndexError`` / ``KeyError`` name what is missing."""
    from .plan import Deployment

    rows = result["best_configs"].get(exp)
    if rows is None:
        raise KeyError(f"best_configs has no experiment {exp!r} (it has "
                       f"{', '.join(result['best_configs']) or 'none'})")
    if not 0 <= rank < len(rows):
        raise IndexError(f"best_configs[{exp!r}] has {len(rows)} rows, no rank {rank}")
    row = rows[rank]
    task = (result.get("tasks") or {}).get(row.get("_task_key", exp)) or {}
    model = row.get("model") or task.get("model_path") or task.get("prefill_model_path")
    kwargs.setdefault("database_mode", task.get("database_mode", "SILICON"))
    kwargs.setdefault("nextn", task.get("nextn", 0) or 0)
    kwargs.setdefault("nextn_accepted", task.get("nextn_accepted"))
    kwargs.setdefault("attention_backend", task.get("attention_backend"))
    return Deployment.from_row({**row, "model": model}, **kwargs)

