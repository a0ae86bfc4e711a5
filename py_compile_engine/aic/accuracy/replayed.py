"""The replayed estimate of a measured row: the row's benchmark replayed through aic-replay.

A measured row records a closed-loop benchmark: ``concurrency`` clients, each sending a prompt of
``isl`` tokens, waiting for ``osl`` output tokens, then sending the next. The closed form of
:mod:`aic.accuracy.scoring` prices one steady batch; the replay instead runs the requests
through aisimulate-core's scheduler (vLLM, SGLang or TRT-LLM model) with aic's step times, so
queueing behind prefills, KV capacity and preemption come out of the simulation.

The rows do not record everything a replay needs. The missing workload facts are global
constants (:class:`ReplayWorkload`), the same for every row and chosen on the calibration half
(``ACCURACY.md``, "Replayed estimate"), never per row:

* how many requests the benchmark sends per concurrency level (``requests_per_concurrency`` x
  concurrency, at least ``min_requests``; at most ``output_token_budget`` output tokens, which
  bounds the cost of long-output rows, but never fewer requests than clients);
* how spread the prompt and output lengths are (each uniform in ``[(1 - length_spread) L, L]``;
  0: every request identical, which keeps closed-loop clients in lock-step waves);
* the seed of the generated lengths.

The step times are calibrated (``calibrated=True``, the default): each role takes the step-level
part of its ``system/backend/mode`` calibration group (prefill x ``ttft_scale``, decode x
``tpot_scale`` + ``tpot_overhead_ms``, the HYBRID factors for a HYBRID-priced role) and each
request the group's ``ttft_overhead_ms``; the closed form's ``ttft_queue`` is not used, since
the replay queues the requests itself. Every number comes from the native replay: this module
only maps a row onto :func:`aic.replay` and reads its report (mean TTFT and mean TPOT, what the
benchmarks report).

:func:`combined_choice` is the rule of the combined mode: it picks the replay or the closed form
for a row from the row's inputs and the replay's own report (never the measured values).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

from .scoring import (Prediction, _reference_class, concurrency, measurement_problem, model_for,
                      row_request)


@dataclass(frozen=True)
class ReplayWorkload:
    """The workload facts a measured row does not record (module docs)."""

    #: Requests sent per concurrency level, as a multiple of the concurrency.
    requests_per_concurrency: float = 3.0
    #: At least this many requests.
    min_requests: int = 16
    #: At most this many output tokens over the replay beyond one request per client (bounds
    #: the cost of long-output rows: a replay's time grows with its output tokens).
    output_token_budget: int = 1 << 20
    #: Prompt and output lengths uniform in ``[(1 - spread) L, L]``; 0 = all equal.
    length_spread: float = 0.3
    #: Seed of the generated lengths.
    seed: int = 0

    def requests(self, conc: int, osl: int = 1) -> int:
        """How many requests to replay for a benchmark at concurrency ``conc`` with outputs of
        ``osl`` tokens: ``requests_per_concurrency`` x ``conc``, at most
        ``output_token_budget / osl``, at least ``conc`` and ``min_requests``."""
        wanted = int(math.ceil(self.requests_per_concurrency * conc))
        budget = max(1, self.output_token_budget // max(osl, 1))
        return max(int(self.min_requests), conc, min(wanted, budget))

    def lengths(self, length: int):
        """A fixed length, or the ``uniform:MIN:MAX`` distribution of :func:`aic.replay`."""
        if self.length_spread <= 0.0:
            return length
        low = max(1, int(round(length * (1.0 - self.length_spread))))
        return length if low >= length else f"uniform:{low}:{length}"


#: The constants the replayed estimate uses (chosen on the calibration half, ACCURACY.md).
WORKLOAD = ReplayWorkload()

_SIZES = ("tp_size", "pp_size", "attention_dp_size", "moe_tp_size", "moe_ep_size")


def replay_arguments(row: dict, workload: ReplayWorkload = WORKLOAD) -> dict:
    """The keyword arguments of :func:`aic.replay` for a row (``model_path``, ``system_name``
    and ``backend_name`` included). ``ValueError`` for a row without a concurrency or a disagg
    row without worker counts (as in the closed form, such a row is not predicted)."""
    args = row_request(row, calibrated=True)
    conc = concurrency(row)
    if not conc:
        raise ValueError("the row records no concurrency (silicon_concurrency=N in "
                         "silicon_data_source, or the batch sizes)")
    out = {"model_path": args["model_path"], "system_name": args["system_name"],
           "backend_name": args["backend_name"], "mode": args["mode"],
           "concurrency": conc, "requests": workload.requests(conc, args["osl"]),
           "isl": workload.lengths(args["isl"]), "osl": workload.lengths(args["osl"]),
           "seed": workload.seed}
    for key in ("gemm_quant_mode", "moe_quant_mode"):
        if key in args:
            out[key] = args[key]
    if args["mode"] == "agg":
        out.update({k: args[k] for k in _SIZES if k in args})
    else:
        for role in ("prefill", "decode"):
            out.update({f"{role}_{k}": args[f"{role}_{k}"] for k in _SIZES
                        if f"{role}_{k}" in args})
            out[f"{role}_workers"] = args[f"{role}_num_workers"]
    return out


def _perf_data_missing(exc: BaseException) -> bool:
    return _reference_class(exc) == "PerfDataNotAvailableError" or "perf data" in str(exc).lower()


def predict_row_replayed(row: dict, *, calibrated: bool = True, calibration=None,
                         workload: ReplayWorkload = WORKLOAD, systems_path=None) -> Prediction:
    """The replayed estimate of one row: mean TTFT and mean TPOT of the replay. A role whose
    perf table is missing is priced in the HYBRID database mode (the calibrated closed form's
    fallback, ``fallback = "HYBRID"``). ``extra`` keeps what :func:`combined_choice` reads:
    the peak KV usage, the preemptions and the requests replayed."""
    from ..serving.replay import replay

    _, alias = model_for(row["model_path"])
    pred = Prediction(id=row.get("id", ""), model_alias=alias)
    problem = measurement_problem(row)
    if problem:
        pred.error_class, pred.error_msg = "InvalidMeasurement", problem
        return pred
    try:
        args = replay_arguments(row, workload)
    except ValueError as exc:
        pred.error_class, pred.error_msg = "ValueError", str(exc)
        return pred
    model, system = args.pop("model_path"), args.pop("system_name")
    backend = args.pop("backend_name")
    extra: dict = {"calibrated": calibrated}
    if calibrated:
        args["calibrated"] = True
        if calibration is not None:
            args["calibration"] = calibration
    report = None
    for database_mode in ("SILICON", "HYBRID"):
        try:
            report = replay(model, system, backend, database_mode=database_mode,
                            systems_path=systems_path, **args).report
            pred.fallback = "" if database_mode == "SILICON" else "HYBRID"
            break
        except Exception as exc:  # noqa: BLE001 - every failure is a "not predicted" row
            if database_mode == "SILICON" and calibrated and _perf_data_missing(exc):
                continue
            pred.error_class = _reference_class(exc)
            pred.error_msg = str(exc).splitlines()[0][:300]
            return pred
    assert report is not None
    pred.ttft = float(report["ttft_ms"]["mean"])
    pred.tpot = float(report["tpot_ms"]["mean"])
    kv = report.get("kv_usage") or {}
    extra.update({"replay_requests": report["requests"]["requests"],
                  "kv_peak": kv.get("peak"), "preemptions": kv.get("preemptions", 0),
                  "fallback": pred.fallback})
    pred.extra = extra
    return pred


#: The combined mode takes the replay where the KV cache binds: the replay preempted a request
#: or filled this share of the KV cache.
KV_BINDS_AT = 0.99


def combined_choice(closed: Prediction, replayed: Prediction) -> str:
    """``"replay"`` or ``"closed"``: the closed form, unless it has no answer and the replay
    has, or the KV cache binds in the replay (a preemption, or the peak KV usage reaching
    :data:`KV_BINDS_AT`), which a closed form of one steady batch cannot see. Reads the
    row's inputs only (through the replay's report), never its measured values."""
    if not replayed.predicted:
        return "closed"
    if not closed.predicted:
        return "replay"
    peak = replayed.extra.get("kv_peak") or 0.0
    if replayed.extra.get("preemptions", 0) > 0 or peak >= KV_BINDS_AT:
        return "replay"
    return "closed"


def combine(closed: list[Prediction], replayed: list[Prediction]) -> list[Prediction]:
    """The combined estimate, row by row (:func:`combined_choice`); ``extra["estimate"]`` says
    which one answered."""
    out = []
    for c, r in zip(closed, replayed):
        pick = r if combined_choice(c, r) == "replay" else c
        chosen = Prediction(id=pick.id, ttft=pick.ttft, tpot=pick.tpot,
                            error_class=pick.error_class, error_msg=pick.error_msg,
                            model_alias=pick.model_alias, fallback=pick.fallback,
                            extra=dict(pick.extra, estimate="replay" if pick is r else "closed"))
        out.append(chosen)
    return out


def _replay_task(task) -> Prediction:
    row, calibrated, calibration, workload, systems_path = task
    return predict_row_replayed(row, calibrated=calibrated, calibration=calibration,
                                workload=workload, systems_path=systems_path)


def replay_rows_parallel(rows: list[dict], calibrations: list, *, calibrated: bool = True,
                         workload: ReplayWorkload = WORKLOAD, systems_path=None, jobs: int = 1,
                         progress: Callable[[int], None] | None = None) -> list[Prediction]:
    """:func:`predict_row_replayed` for every row with its own constants
    (``calibrations[i]``: a constants dict, or ``None`` for the shipped ones), in ``jobs``
    processes (each replay is single-threaded and independent; the order of the answer is the
    rows' order whatever ``jobs`` is)."""
    tasks = [(row, calibrated, cal, workload, systems_path) for row, cal in zip(rows, calibrations)]
    if jobs <= 1:
        out = []
        for i, task in enumerate(tasks, 1):
            out.append(_replay_task(task))
            if progress is not None:
                progress(i)
        return out
    import multiprocessing
    import os
    import sys

    import aic

    # Spawned workers start from this process's sys.path: put the folder of the aic package
    # this process runs first, so they import the same aic (and its native module) even when a
    # source tree without the extension sits earlier on the path.
    package_root = os.path.dirname(os.path.dirname(os.path.abspath(aic.__file__)))
    saved = list(sys.path)
    sys.path.insert(0, package_root)
    try:
        pool = multiprocessing.get_context("spawn").Pool(jobs)
    finally:
        sys.path[:] = saved
    with pool:
        out = []
        for i, pred in enumerate(pool.imap(_replay_task, tasks, chunksize=1), 1):
            out.append(pred)
            if progress is not None:
                progress(i)
    return out


def cross_validated_replays(rows: list[dict], fs: list, *, workload: ReplayWorkload = WORKLOAD,
                            systems_path=None, jobs: int = 1) -> list[Prediction]:
    """Leave-one-model-family-out for the replayed estimate: each row replayed with the
    calibration constants fitted (:func:`aic.accuracy.calibration_fit.fit`) without its
    family (``fs``: the closed-form features of ``rows``)."""
    from . import calibration_fit as fitmod
    from .scoring import family_of

    families = sorted({family_of(r["model_path"]) for r in rows})
    docs = {}
    for fam in families:
        rest = [f for f in fs if f is not None and f["family"] != fam]
        docs[fam] = fitmod.constants(fitmod.fit(rest)) if rest else None
    calibrations = [docs[family_of(r["model_path"])] for r in rows]
    return replay_rows_parallel(rows, calibrations, workload=workload,
                                systems_path=systems_path, jobs=jobs)
