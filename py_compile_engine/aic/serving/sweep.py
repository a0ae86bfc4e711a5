"""The deployment sweep (spec 50 §9, the reference's ``cli_default``).

:func:`sweep` is the keyword form of :func:`aic.serving.planning.plan_sweep`: it enumerates the
parallel layouts a GPU budget allows (§9.2, :mod:`aic.serving.search_space`), compiles one spec
per layout and role, and hands them to the native sweep, which evaluates every batch / context
budget / worker-count point, builds the candidate tables, the Pareto fronts and the picks in
Rust, in parallel over layouts. :func:`check_sweep` compares it with the spec-50 sweep goldens.
"""

from __future__ import annotations

import json
import os

from ..validation import check_sweep_args
from .search_space import CP_SIZES, cp_list, default_lists, enumerate_tuples  # noqa: F401

NUM_GPUS = (1, 2, 4, 8, 16)


def cp_sizes(family: str, backend: str, runs_context: bool) -> tuple[int, ...]:
    """The ``cp`` list of one role (spec 50 §9.2): ``(1, 2, 4, 8)`` for agg and prefill workers
    of families declaring SGLang CP support, ``(1,)`` otherwise (decode workers, other
    backends); :func:`aic.serving.search_space.cp_list`."""
    return tuple(cp_list(family, backend, runs_context))


def parallel_layouts(is_moe: bool, backend: str, total_gpus: int,
                     cps: tuple[int, ...] = (1,)) -> list[dict]:
    """Parallel tuples of one experiment role with the default candidate lists, in the
    reference's order (§9.2): ``tp`` outermost, then pp, dp, moe_tp, moe_ep, cp. ``cp_size`` is
    present only when the role explores more than cp = 1
    (:func:`aic.serving.search_space.enumerate_tuples`)."""
    lists = default_lists(is_moe=is_moe, family="", backend=backend, system="",
                          runs_context=False, total_gpus=total_gpus)
    lists["cp"] = list(cps)
    return enumerate_tuples(lists, is_moe=is_moe, backend=backend)


def sweep(
    model_path,
    total_gpus: int,
    system: str,
    backend: str = "trtllm",
    backend_version: str | None = None,
    *,
    isl: int = 4000,
    osl: int = 1000,
    ttft: float = 2000.0,
    tpot: float = 30.0,
    request_latency: float | None = None,
    prefix: int = 0,
    nextn=0,
    nextn_accepted: float | None = None,
    strict_sla: bool = False,
    free_gpu_memory_fraction: float | None = None,
    max_seq_len: int | None = None,
    top_n: int = 5,
    database_mode: str = "SILICON",
    gemm_quant_mode: str | None = None,
    kvcache_quant_mode: str | None = None,
    fmha_quant_mode: str | None = None,
    moe_quant_mode: str | None = None,
    comm_quant_mode: str | None = None,
    systems_path: str | os.PathLike | None = None,
    decode_system: str | None = None,
    serving_mode: str = "auto",
    transfer_policy=None,
    attention_backend: str | None = None,
    enable_chunked_prefill: bool = False,
    inclusive_tpot: bool = False,
    warnings: list | None = None,
) -> dict:
    """Best deployments of ``model_path`` on ``total_gpus`` GPUs of ``system``.

    Two experiments: ``agg`` (every layout × batch × context budget) and ``disagg`` (prefill
    and decode layouts, rate-matched with worker counts; only with 2+ GPUs). Candidates must
    meet ``ttft`` (ms); the TPOT target picks the best configs (the sweep itself scans a grid
    of TPOT limits so the Pareto front covers every latency). With ``request_latency`` (ms)
    the sweep scans (TTFT, TPOT) pairs that fit it instead.

    The planning knobs of spec 51: ``backend="auto"`` (every backend with data, experiments
    ``agg_<backend>`` / ``disagg_<backend>``, merged per mode), ``serving_mode`` (``auto``,
    ``agg``, ``disagg``), ``decode_system`` (disagg decode workers on another GPU type),
    ``database_mode``, ``transfer_policy``, ``strict_sla``, ``free_gpu_memory_fraction``,
    ``max_seq_len`` (agg only), ``attention_backend``, ``enable_chunked_prefill``,
    ``inclusive_tpot`` and ``nextn="auto"``. This is a thin wrapper of
    :func:`aic.serving.planning.plan_sweep`.

    Returns ``{"chosen_exp", "best_throughputs", "best_latencies", "outcomes",
    "best_configs", "pareto_fronts", "candidates", "tasks"}``; the tables map each experiment
    to a list of row dicts (``tokens/s/gpu``, ``tokens/s/user``, ``ttft``, ``tpot``,
    ``parallel``, batch sizes, ...), ready for ``pandas.DataFrame``. Raises
    :class:`aic.serving.NoFeasibleConfigError` (a ``RuntimeError``) when nothing fits.
    """
    from .deployment import _resolve_nextn

    nextn, accepted = _resolve_nextn(model_path, nextn, nextn_accepted)
    check_sweep_args(dict(locals()))
    from .planning import plan_sweep

    return plan_sweep(
        model_path, total_gpus, system, backend, backend_version, decode_system=decode_system,
        serving_mode=serving_mode, isl=isl, osl=osl, ttft=ttft, tpot=tpot,
        request_latency=request_latency, prefix=prefix, nextn=nextn, nextn_accepted=accepted,
        strict_sla=strict_sla, free_gpu_memory_fraction=free_gpu_memory_fraction,
        max_seq_len=max_seq_len, top_n=top_n, database_mode=database_mode,
        transfer_policy=transfer_policy, attention_backend=attention_backend,
        enable_chunked_prefill=enable_chunked_prefill, inclusive_tpot=inclusive_tpot,
        gemm_quant_mode=gemm_quant_mode, kvcache_quant_mode=kvcache_quant_mode,
        fmha_quant_mode=fmha_quant_mode, moe_quant_mode=moe_quant_mode,
        comm_quant_mode=comm_quant_mode, systems_path=systems_path, warnings=warnings)


# ------------------------------------------------------------------------------------ parity


def _row_key(row: dict) -> str:
    return json.dumps(row, sort_keys=True)


def _multiset(rows: list[dict]) -> dict:
    out: dict = {}
    for r in rows:
        k = _row_key(r)
        out[k] = out.get(k, 0) + 1
    return out


def check_sweep(case: dict, systems_path=None) -> tuple[bool, str]:
    """One sweep golden: candidate tables and Pareto fronts as multisets of rows (the
    reference orders tied rows by numpy's unstable sort, spec 50 §9.4), best configs as the
    ordered list of (group, tokens/s/gpu_cluster) with every recorded pick present among our
    candidates (ties: any tied row is a correct pick), and the chosen experiment, best
    throughputs and latencies exactly."""
    kwargs = dict(case["kwargs"])
    model = kwargs.pop("model_path")
    total = kwargs.pop("total_gpus")
    system = kwargs.pop("system")
    ours = sweep(model, total, system, **kwargs, systems_path=systems_path)
    problems = []
    for key in ("chosen_exp", "best_throughputs", "best_latencies"):
        if ours.get(key) != case.get(key):
            problems.append(f"{key}: {ours.get(key)} vs {case.get(key)}")
    for exp, ref_rows in case["candidates"].items():
        mine = ours["candidates"].get(exp, [])
        a, b = _multiset(mine), _multiset(ref_rows)
        if a != b:
            missing = sum(n - a.get(k, 0) for k, n in b.items() if n > a.get(k, 0))
            extra = sum(n - b.get(k, 0) for k, n in a.items() if n > b.get(k, 0))
            problems.append(f"{exp} candidates: {len(mine)} vs {len(ref_rows)} rows, "
                            f"{missing} missing, {extra} extra")
        front_a = _multiset(ours["pareto_fronts"].get(exp, []))
        front_b = _multiset(case["pareto_fronts"][exp])
        if front_a != front_b:
            problems.append(f"{exp} pareto front differs ({len(ours['pareto_fronts'].get(exp, []))}"
                            f" vs {len(case['pareto_fronts'][exp])} rows)")
        gk = "(d)parallel" if exp == "disagg" else "parallel"
        mine_best = [(r[gk], r["tokens/s/gpu_cluster"]) for r in ours["best_configs"].get(exp, [])]
        ref_best = [(r[gk], r["tokens/s/gpu_cluster"]) for r in case["best_configs"][exp]]
        if mine_best != ref_best:
            problems.append(f"{exp} best configs {mine_best} vs {ref_best}")
        keys = {_row_key({k: v for k, v in r.items() if k != "tokens/s/gpu_cluster"})
                for r in mine}
        for r in case["best_configs"][exp]:
            if _row_key({k: v for k, v in r.items() if k != "tokens/s/gpu_cluster"}) not in keys:
                problems.append(f"{exp} pick {r[gk]} {r['tokens/s/gpu_cluster']} not among ours")
    return not problems, "; ".join(problems)[:600]
