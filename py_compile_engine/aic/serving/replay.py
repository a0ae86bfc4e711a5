"""Replayed serving estimates: a workload (generated or a Mooncake trace) run through
aisimulate-core's scheduler models with aic's step latencies (the Rust crate ``aic-replay``).

Where :func:`aic.serving.estimate` answers a deployment with one steady batch in closed form,
:func:`replay` runs every request through a vLLM / SGLang scheduler model with KV-cache
accounting, prefix caching and preemption on a virtual clock, so the answer has percentiles, the
queue that builds when the KV cache fills and the effect of shared prefixes. This module only
checks the arguments, compiles the role specs (with the same quant resolution as the serving
estimate) and builds the request JSON; the replay and every number run in Rust
(``aic._aic.replay_json``).

The native module has the replay when it was built with the cargo feature ``replay``, which
``pip install .`` builds (pyproject.toml); :func:`replay_available` tells, and
:data:`REPLAY_MISSING` is the message of a build without it.
"""

from __future__ import annotations

import json
import math
import os

from .. import paths
from .._native import native
from .plan import Deployment, Parallelism, QuantModes, Role, Workload

#: What a build without the replay says (a plain ``cargo build`` of the extension, or a wheel
#: built with maturin's features overridden).
REPLAY_MISSING = ("this build of aic has no replay (the cargo feature `replay`, which "
                  "`pip install .` builds): reinstall with `pip install .`")

#: Arrival processes of a generated workload.
ARRIVALS = ("closed_loop", "open_loop")


class ReplayUnavailableError(ImportError):
    """The native module was built without the cargo feature ``replay``."""


def replay_available() -> bool:
    """Whether the native module carries the replay (cargo feature ``replay``)."""
    mod = native()
    return bool(getattr(mod, "replay_available", lambda: False)())


def _positive_int(name: str, value, *, allow_none: bool = False, minimum: int = 1):
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        else:
            raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    if value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value}")
    return value


def _finite(name: str, value, *, low: float, high: float | None = None,
            low_open: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{name} must be a number, got {value!r}")
    value = float(value)
    bad_low = value <= low if low_open else value < low
    if not math.isfinite(value) or bad_low or (high is not None and value > high):
        bound = f"> {low}" if low_open else f">= {low}"
        upper = f" and <= {high}" if high is not None else ""
        raise ValueError(f"{name} must be a finite number {bound}{upper}, got {value!r}")
    return value


def parse_lengths(name: str, value):
    """A length argument as the request JSON takes it.

    Accepted: an integer (every request has that length); ``"uniform:MIN:MAX"`` or
    ``("uniform", MIN, MAX)`` (uniform integers in ``[MIN, MAX]``); ``"normal:MEAN:STD"`` or
    ``("normal", MEAN, STD)`` (normal, rounded, at least 1); a decimal string is an integer."""
    if isinstance(value, str):
        parts = value.strip().split(":")
        if len(parts) == 1:
            try:
                number = int(parts[0])
            except ValueError:
                raise ValueError(
                    f"{name} must be a positive integer, 'uniform:MIN:MAX' or "
                    f"'normal:MEAN:STD', got {value!r}") from None
            return _positive_int(name, number)
        value = tuple(parts)
    if isinstance(value, (tuple, list)):
        if len(value) != 3 or value[0] not in ("uniform", "normal"):
            raise ValueError(f"{name} must be a positive integer, 'uniform:MIN:MAX' or "
                             f"'normal:MEAN:STD', got {value!r}")
        kind, a, b = value
        try:
            a = float(a)
            b = float(b)
        except (TypeError, ValueError):
            raise ValueError(f"{name}: the bounds of {kind!r} must be numbers, got {value!r}") \
                from None
        if kind == "uniform":
            lo = _positive_int(f"{name} minimum", a)
            hi = _positive_int(f"{name} maximum", b)
            if hi < lo:
                raise ValueError(f"{name}: uniform maximum {hi} is below its minimum {lo}")
            return {"uniform": {"min": lo, "max": hi}}
        mean = _finite(f"{name} mean", a, low=1.0)
        std = _finite(f"{name} standard deviation", b, low=0.0)
        return {"normal": {"mean": mean, "std": std}}
    return _positive_int(name, value)


def _engine(spec_json: str, facts: dict | None, kv: dict, scheduler: dict) -> dict:
    engine: dict = {"spec": {"json": json.loads(spec_json)}}
    if facts is not None:
        engine["facts"] = facts
    if kv:
        engine["kv"] = kv
    if scheduler:
        engine["scheduler"] = scheduler
    return engine


class LatencySummary:
    """Mean and percentiles of one latency, ms (``samples`` requests or token gaps)."""

    __slots__ = ("samples", "mean", "p50", "p90", "p99", "min", "max")

    def __init__(self, data: dict):
        for key in self.__slots__:
            setattr(self, key, data[key])

    def __repr__(self) -> str:
        return (f"LatencySummary(mean={self.mean:.3f}, p50={self.p50:.3f}, p90={self.p90:.3f}, "
                f"p99={self.p99:.3f}, samples={self.samples})")


class ReplayResult:
    """What :func:`replay` returns: plain attributes over the report of the Rust replay.

    ``ttft``, ``tpot``, ``itl``, ``e2e``: :class:`LatencySummary` (ms). ``throughput``,
    ``prefix_cache``, ``kv_usage`` (``None`` when never sampled), ``power`` (``None`` without
    energy evidence), ``requests``, ``roles``: dicts as in the JSON report. ``timeline`` and
    ``per_request``: lists (filled when asked for). ``stats``: wall-clock figures of the run.
    ``report``: the whole JSON report; :meth:`table` the text table of ``aic-compile replay``.
    """

    def __init__(self, answer: dict):
        report = answer["report"]
        self.report = report
        self.stats = answer.get("stats", {})
        self._table = answer.get("table", "")
        self.mode = report["mode"]
        self.model = report["model"]
        self.system = report["system"]
        self.roles = report["roles"]
        self.requests = report["requests"]
        self.duration_ms = report["duration_ms"]
        self.ttft = LatencySummary(report["ttft_ms"])
        self.tpot = LatencySummary(report["tpot_ms"])
        self.itl = LatencySummary(report["itl_ms"])
        self.e2e = LatencySummary(report["e2e_ms"])
        self.throughput = report["throughput"]
        self.prefix_cache = report["prefix_cache"]
        self.kv_usage = report.get("kv_usage")
        self.power = report.get("power")
        self.timeline = report.get("timeline", [])
        self.per_request = report.get("per_request", [])

    def to_dict(self) -> dict:
        """The report and the run statistics as plain JSON data."""
        return {"report": self.report, "stats": self.stats}

    def table(self) -> str:
        """The report as the text table ``aic-compile replay`` prints."""
        return self._table

    def __repr__(self) -> str:
        return (f"ReplayResult({self.model} on {self.system}, {self.mode}: "
                f"{self.requests['completed']} of {self.requests['requests']} requests, "
                f"TTFT p50 {self.ttft.p50:.3f} ms, TPOT p50 {self.tpot.p50:.3f} ms)")


def _non_finite(value, path: str = "") -> str:
    """The key path of the first non-finite number in a constants document (``""``: none);
    JSON has no NaN or infinity, so the native check would only see a parse error."""
    if isinstance(value, float) and not math.isfinite(value):
        return path or "a constant"
    if isinstance(value, dict):
        for k, v in value.items():
            found = _non_finite(v, f"{path}.{k}" if path else str(k))
            if found:
                return found
    if isinstance(value, list):
        for i, v in enumerate(value):
            found = _non_finite(v, f"{path}[{i}]")
            if found:
                return found
    return ""


def _workload(requests, concurrency, rate, isl, osl, seed, trace, trace_block_size,
              speedup) -> dict:
    if trace is not None:
        if rate is not None:
            raise ValueError("rate cannot be combined with trace (the trace's timestamps are the "
                             "arrivals; use speedup to scale them)")
        if requests is not None:
            raise ValueError("requests cannot be combined with trace (every trace line is one "
                             "request)")
        path = os.fspath(trace)
        if not os.path.isfile(path):
            raise ValueError(f"trace file {path!r} does not exist or is not a file")
        out: dict = {"kind": "trace", "path": os.path.abspath(path),
                     "block_size": _positive_int("trace_block_size", trace_block_size)}
        if concurrency is not None:
            out["concurrency"] = _positive_int("concurrency", concurrency)
        if speedup is not None:
            out["speedup"] = _finite("speedup", speedup, low=0.0, low_open=True)
        return out
    if speedup is not None:
        raise ValueError("speedup applies to a trace only")
    if (concurrency is None) == (rate is None):
        raise ValueError("give exactly one arrival process: concurrency (closed loop: N requests "
                         "in flight) or rate (open loop: Poisson arrivals, requests per second)")
    if requests is None:
        raise ValueError("requests (how many requests to replay) is required for a generated "
                         "workload")
    if concurrency is not None:
        arrival = {"closed_loop": {"concurrency": _positive_int("concurrency", concurrency)}}
    else:
        arrival = {"open_loop": {"rate_rps": _finite("rate", rate, low=0.0, low_open=True)}}
    return {"kind": "generated", "requests": _positive_int("requests", requests),
            "arrival": arrival, "isl": parse_lengths("isl", isl),
            "osl": parse_lengths("osl", osl),
            "seed": _positive_int("seed", seed, minimum=0)}


def replay(
    model_path,
    system_name: str,
    backend_name: str = "vllm",
    backend_version: str | None = None,
    *,
    mode: str = "agg",
    requests: int | None = None,
    concurrency: int | None = None,
    rate: float | None = None,
    isl=1024,
    osl=128,
    seed: int = 0,
    trace=None,
    trace_block_size: int = 512,
    speedup: float | None = None,
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
    workers: int = 1,
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
    prefill_workers: int = 1,
    decode_workers: int = 1,
    handoff_latency_ms: float = 0.0,
    block_size: int | None = None,
    gpu_memory_fraction: float | None = None,
    num_gpu_blocks: int | None = None,
    max_num_seqs: int | None = None,
    max_num_batched_tokens: int | None = None,
    enable_chunked_prefill: bool | None = None,
    enable_prefix_caching: bool | None = None,
    timeline: bool = False,
    per_request: bool = False,
    calibrated: bool = False,
    calibration=None,
    request_overhead_ms: float | None = None,
    warmup_requests: int = 0,
    database_mode: str = "SILICON",
    systems_path: str | os.PathLike | None = None,
) -> ReplayResult:
    """Replays a workload on a deployment of ``model_path`` and returns a :class:`ReplayResult`.

    The workload is either generated — ``requests`` requests, closed loop at ``concurrency`` in
    flight or open loop at ``rate`` requests/s (Poisson), lengths ``isl`` / ``osl`` fixed
    (an integer) or distributed (``"uniform:MIN:MAX"``, ``"normal:MEAN:STD"``), seeded by
    ``seed`` — or a Mooncake JSONL ``trace`` (``timestamp`` ms, ``input_length``,
    ``output_length``, ``hash_ids`` of ``trace_block_size`` tokens each; ``concurrency`` caps
    the requests in flight, ``speedup`` divides the gaps).

    ``mode="agg"``: ``workers`` replicas of one engine (``tp_size`` ... ``moe_ep_size``).
    ``mode="disagg"``: ``prefill_workers`` prefill and ``decode_workers`` decode replicas, each
    role with its own sizes (``prefill_*`` / ``decode_*``, default the shared ones), the KV
    handed over in ``handoff_latency_ms``.

    The KV capacity per rank comes from aic's memory model with the backend's default block
    size and GPU memory fraction (``block_size``, ``gpu_memory_fraction`` override them;
    ``num_gpu_blocks`` bypasses the model); the scheduler limits are the backend's defaults
    unless ``max_num_seqs``, ``max_num_batched_tokens``, ``enable_chunked_prefill`` or
    ``enable_prefix_caching`` are given. The same seed gives the same result bit for bit.

    ``calibrated=True`` replays with calibrated step times: each role takes the step-level part
    of the calibration group of its system / backend / mode (constants of ``calibration``, a
    dict or JSON file, default the shipped ``data/calibration/serving.json``): prefill passes ×
    ``ttft_scale``, decode steps × ``tpot_scale`` + ``tpot_overhead_ms`` (× the HYBRID factors
    for a HYBRID-priced role), and the group's ``ttft_overhead_ms`` added to every request's
    TTFT and E2E; ``request_overhead_ms`` replaces that overhead (also without calibration).

    ``warmup_requests`` leaves the first requests by arrival out of the TTFT / TPOT / E2E
    figures (a benchmark's warm-up: a closed loop's first wave arrives at once and queues for
    prefill); the schedule, the counts and the throughput still include them.

    Errors: ``ValueError`` naming the argument (or the trace line and field) for a bad input,
    a prompt longer than the KV capacity, or a parallelism the model does not allow;
    :class:`ReplayUnavailableError` when the native module has no replay.
    """
    if mode not in ("agg", "disagg"):
        raise ValueError(f"mode must be 'agg' or 'disagg', got {mode!r}")
    workload = _workload(requests, concurrency, rate, isl, osl, seed, trace, trace_block_size,
                         speedup)
    kv, scheduler = _engine_options(
        block_size=block_size, gpu_memory_fraction=gpu_memory_fraction,
        num_gpu_blocks=num_gpu_blocks, max_num_seqs=max_num_seqs,
        max_num_batched_tokens=max_num_batched_tokens,
        enable_chunked_prefill=enable_chunked_prefill,
        enable_prefix_caching=enable_prefix_caching)
    handoff = _handoff(handoff_latency_ms)
    for name, value in (("workers", workers), ("prefill_workers", prefill_workers),
                        ("decode_workers", decode_workers)):
        _positive_int(name, value)

    plan = layout_deployment(
        model_path, system_name, backend_name, backend_version, mode=mode, tp_size=tp_size,
        pp_size=pp_size, attention_dp_size=attention_dp_size, moe_tp_size=moe_tp_size,
        moe_ep_size=moe_ep_size, gemm_quant_mode=gemm_quant_mode,
        kvcache_quant_mode=kvcache_quant_mode, fmha_quant_mode=fmha_quant_mode,
        moe_quant_mode=moe_quant_mode, comm_quant_mode=comm_quant_mode, workers=workers,
        prefill_tp_size=prefill_tp_size, prefill_pp_size=prefill_pp_size,
        prefill_attention_dp_size=prefill_attention_dp_size,
        prefill_moe_tp_size=prefill_moe_tp_size, prefill_moe_ep_size=prefill_moe_ep_size,
        decode_tp_size=decode_tp_size, decode_pp_size=decode_pp_size,
        decode_attention_dp_size=decode_attention_dp_size,
        decode_moe_tp_size=decode_moe_tp_size, decode_moe_ep_size=decode_moe_ep_size,
        prefill_workers=prefill_workers, decode_workers=decode_workers,
        database_mode=database_mode)
    return _replay_plan(plan, workload, kv=kv, scheduler=scheduler, handoff=handoff,
                        timeline=timeline, per_request=per_request, calibrated=calibrated,
                        calibration=calibration, request_overhead_ms=request_overhead_ms,
                        warmup_requests=warmup_requests, systems_path=systems_path)


def layout_deployment(
    model_path,
    system_name: str,
    backend_name: str = "vllm",
    backend_version: str | None = None,
    *,
    mode: str = "agg",
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
    workers: int = 1,
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
    prefill_workers: int = 1,
    decode_workers: int = 1,
    database_mode: str = "SILICON",
) -> Deployment:
    """The :class:`Deployment` that :func:`replay`'s layout arguments describe (the same
    arguments, the same defaults: a disagg role's size defaults to the shared one). The
    ``aic-compile replay`` and ``export dynamo`` options go through it."""
    if mode not in ("agg", "disagg"):
        raise ValueError(f"mode must be 'agg' or 'disagg', got {mode!r}")
    for name, value in (("workers", workers), ("prefill_workers", prefill_workers),
                        ("decode_workers", decode_workers)):
        _positive_int(name, value)
    pick = lambda role, shared: shared if role is None else role  # noqa: E731

    def role(tp, pp, dp, mtp, mep, count) -> Role:
        for name, value in (("tp_size", tp), ("pp_size", pp), ("attention_dp_size", dp)):
            _positive_int(name, value)
        return Role(system=system_name, backend=backend_name, version=backend_version,
                    parallel=Parallelism(tp=tp, pp=pp, dp=dp, moe_tp=mtp, moe_ep=mep),
                    quant=QuantModes(gemm=gemm_quant_mode, kvcache=kvcache_quant_mode,
                                     fmha=fmha_quant_mode, moe=moe_quant_mode,
                                     comm=comm_quant_mode),
                    workers=count)

    if mode == "agg":
        roles = {"agg": role(tp_size, pp_size, attention_dp_size, moe_tp_size, moe_ep_size,
                             workers)}
    else:
        roles = {
            "prefill": role(pick(prefill_tp_size, tp_size), pick(prefill_pp_size, pp_size),
                            pick(prefill_attention_dp_size, attention_dp_size),
                            pick(prefill_moe_tp_size, moe_tp_size),
                            pick(prefill_moe_ep_size, moe_ep_size), prefill_workers),
            "decode": role(pick(decode_tp_size, tp_size), pick(decode_pp_size, pp_size),
                           pick(decode_attention_dp_size, attention_dp_size),
                           pick(decode_moe_tp_size, moe_tp_size),
                           pick(decode_moe_ep_size, moe_ep_size), decode_workers),
        }
    return Deployment(model=os.fspath(model_path), mode=mode, roles=roles,
                      database_mode=database_mode)


def _replay_plan(plan: Deployment, workload: dict, *, kv: dict, scheduler: dict, handoff: float,
                 timeline: bool, per_request: bool, calibrated: bool, calibration,
                 request_overhead_ms, systems_path, warmup_requests: int = 0) -> ReplayResult:
    """Compiles each role of ``plan`` for its own system / backend / version and runs the
    replay request (``workload`` in the request's JSON form)."""
    mod = native()
    if not getattr(mod, "replay_available", lambda: False)():
        raise ReplayUnavailableError(REPLAY_MISSING)

    from ..compiler import families
    from ..compiler.hf_config import load_model_config
    from .deployment import build_worker, resolve_moe_widths, resolve_version

    root = paths.systems_dir(systems_path)
    is_moe = load_model_config(plan.model).family in families.MOE_FAMILIES

    def role_engine(role: Role, runs_context: bool) -> dict:
        version = resolve_version(root, role.system, role.backend, role.version,
                                  plan.database_mode)
        p = role.parallel
        mtp, mep = resolve_moe_widths(is_moe, p.tp, p.dp, p.moe_tp, p.moe_ep)
        sizes = {"tp_size": p.tp, "pp_size": p.pp, "attention_dp_size": p.dp,
                 "moe_tp_size": mtp, "moe_ep_size": mep}
        worker = build_worker(plan.model, role.system, role.backend, version, root, sizes,
                              role.quant.overrides(), plan.nextn, runs_context,
                              database_mode=plan.database_mode,
                              attention_backend=plan.attention_backend)
        return _engine(worker["spec"], worker["facts"], kv, scheduler)

    if plan.mode == "agg":
        agg = plan.role("agg")
        deployment = {"kind": "agg", "workers": agg.workers, "engine": role_engine(agg, True)}
    else:
        pre, dec = plan.role("prefill"), plan.role("decode")
        deployment = {
            "kind": "disagg",
            "prefill": role_engine(pre, True), "prefill_workers": pre.workers,
            "decode": role_engine(dec, False), "decode_workers": dec.workers,
            "handoff_latency_ms": handoff,
        }
    options: dict = {"timeline": bool(timeline), "per_request": bool(per_request)}
    if warmup_requests:
        options["warmup_requests"] = _positive_int("warmup_requests", warmup_requests, minimum=0)
    if request_overhead_ms is not None:
        options["request_overhead_ms"] = _finite("request_overhead_ms", request_overhead_ms,
                                                 low=0.0, high=60_000.0)
    request = {"mode": deployment, "workload": workload, "options": options}
    if calibrated:
        from .deployment import load_calibration
        constants = load_calibration(calibration)
        where = _non_finite(constants)
        if where:
            raise ValueError(f"calibration constants: {where} must be a finite number")
        request["calibration"] = constants
    elif calibration is not None:
        raise ValueError("calibration applies to a calibrated replay: pass calibrated=True too")
    answer = mod.replay_json(json.dumps(request), os.fspath(root))
    return ReplayResult(json.loads(answer))


def _engine_options(*, block_size, gpu_memory_fraction, num_gpu_blocks, max_num_seqs,
                    max_num_batched_tokens, enable_chunked_prefill,
                    enable_prefix_caching) -> tuple[dict, dict]:
    """The KV-capacity and scheduler overrides of every role, checked (``None`` = default)."""
    kv: dict = {}
    if block_size is not None:
        kv["block_size"] = _positive_int("block_size", block_size)
    if gpu_memory_fraction is not None:
        kv["gpu_memory_fraction"] = _finite("gpu_memory_fraction", gpu_memory_fraction,
                                            low=0.0, high=1.0, low_open=True)
    if num_gpu_blocks is not None:
        kv["num_gpu_blocks"] = _positive_int("num_gpu_blocks", num_gpu_blocks)
    scheduler: dict = {}
    if max_num_seqs is not None:
        scheduler["max_num_seqs"] = _positive_int("max_num_seqs", max_num_seqs)
    if max_num_batched_tokens is not None:
        scheduler["max_num_batched_tokens"] = _positive_int("max_num_batched_tokens",
                                                            max_num_batched_tokens)
    for name, flag in (("enable_chunked_prefill", enable_chunked_prefill),
                       ("enable_prefix_caching", enable_prefix_caching)):
        if flag is not None:
            if not isinstance(flag, bool):
                raise ValueError(f"{name} must be True, False or None, got {flag!r}")
            scheduler[name] = flag
    return kv, scheduler


def _handoff(handoff_latency_ms) -> float:
    if not isinstance(handoff_latency_ms, (int, float)) or isinstance(handoff_latency_ms, bool):
        raise ValueError(f"handoff_latency_ms must be a number, got {handoff_latency_ms!r}")
    return _finite("handoff_latency_ms", handoff_latency_ms, low=0.0)


def replay_deployment(
    deployment: Deployment,
    workload: Workload,
    *,
    requests: int | None = None,
    isl=None,
    osl=None,
    seed: int = 0,
    trace=None,
    trace_block_size: int = 512,
    speedup: float | None = None,
    handoff_latency_ms: float = 0.0,
    block_size: int | None = None,
    gpu_memory_fraction: float | None = None,
    num_gpu_blocks: int | None = None,
    max_num_seqs: int | None = None,
    max_num_batched_tokens: int | None = None,
    enable_chunked_prefill: bool | None = None,
    enable_prefix_caching: bool | None = None,
    timeline: bool = False,
    per_request: bool = False,
    calibrated: bool = False,
    calibration=None,
    request_overhead_ms: float | None = None,
    warmup_requests: int = 0,
    systems_path: str | os.PathLike | None = None,
) -> ReplayResult:
    """Replays ``requests`` requests of ``workload`` on ``deployment`` (each role compiled for
    its own system, backend and version, with its worker count) and returns a
    :class:`ReplayResult`.

    The load is the workload's: ``concurrency`` requests in flight (closed loop) or
    ``request_rate`` requests/s (open loop); the lengths are its ``isl`` / ``osl`` unless
    ``isl`` / ``osl`` give a distribution (as :func:`replay` takes them). A ``trace`` replaces
    the generated requests. The other options are :func:`replay`'s."""
    if not isinstance(deployment, Deployment):
        raise TypeError(f"deployment must be an aic.serving.plan.Deployment, got "
                        f"{type(deployment).__name__}")
    if not isinstance(workload, Workload):
        raise TypeError(f"workload must be an aic.serving.plan.Workload, got "
                        f"{type(workload).__name__}")
    if workload.prefix and trace is None:
        raise ValueError(f"workload.prefix ({workload.prefix}): a generated replay workload has no "
                         f"shared prefix; replay a trace whose hash_ids share blocks instead")
    generated = _workload(requests, workload.concurrency, workload.request_rate,
                          workload.isl if isl is None else isl,
                          workload.osl if osl is None else osl, seed, trace, trace_block_size,
                          speedup)
    kv, scheduler = _engine_options(
        block_size=block_size, gpu_memory_fraction=gpu_memory_fraction,
        num_gpu_blocks=num_gpu_blocks, max_num_seqs=max_num_seqs,
        max_num_batched_tokens=max_num_batched_tokens,
        enable_chunked_prefill=enable_chunked_prefill,
        enable_prefix_caching=enable_prefix_caching)
    return _replay_plan(deployment, generated, kv=kv, scheduler=scheduler,
                        handoff=_handoff(handoff_latency_ms), timeline=timeline,
                        per_request=per_request, calibrated=calibrated, calibration=calibration,
                        request_overhead_ms=request_overhead_ms,
                        warmup_requests=warmup_requests, systems_path=systems_path)
