"""Argument checks of the serving, sweep, accuracy and calibrate requests.

The native serving requests are JSON: a negative ``isl`` came back as serde's ``expected u32 at
line 1 column 25``, a NaN as ``expected value``, and values serde accepts (``osl=0``, a memory
fraction of 1.5, zero workers, a negative latency target) were priced into numbers that mean
nothing. Every public entry point checks its arguments here first, so a bad value is one
``ValueError`` (``TypeError`` for a wrong type) that names the argument, shows the value and
gives the accepted range; the native engine applies the same rules with the same messages
(``crates/aic-core/src/serving/checks.rs``) for Rust and C callers.
"""

from __future__ import annotations

import math
import numbers
import os

#: The largest count the native engine takes (its integers are unsigned 32-bit).
U32_MAX = 2**32 - 1


def show(value) -> str:
    """A value as messages show it: numbers as the native engine writes them (``NaN``,
    ``inf``, ``1e+308`` → ``1e308``), everything else as its ``repr``."""
    if isinstance(value, float):
        if math.isnan(value):
            return "NaN"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        if value.is_integer() and abs(value) < 1e16:
            return str(int(value))
        text = repr(value)
        return text.replace("e+", "e")
    return repr(value) if isinstance(value, str) else str(value)


def _integer(name: str, value, meaning: str) -> int:
    """``value`` as an int: a bool or a non-integral value is a ``TypeError``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        if isinstance(value, float) and value.is_integer():
            return int(value)
        raise TypeError(f"{name} must be an integer ({meaning}), got {show(value)}")
    return int(value)


def positive_int(name: str, value, meaning: str) -> int:
    """An integer in ``[1, 2**32 - 1]``: ``isl must be a positive integer (...), got -1``."""
    v = _integer(name, value, meaning)
    if v < 1:
        raise ValueError(f"{name} must be a positive integer ({meaning}), got {v}")
    if v > U32_MAX:
        raise ValueError(f"{name} must be at most {U32_MAX} ({meaning}), got {v}")
    return v


def non_negative_int(name: str, value, meaning: str) -> int:
    """An integer in ``[0, 2**32 - 1]``."""
    v = _integer(name, value, meaning)
    if v < 0:
        raise ValueError(f"{name} must be an integer >= 0 ({meaning}), got {v}")
    if v > U32_MAX:
        raise ValueError(f"{name} must be at most {U32_MAX} ({meaning}), got {v}")
    return v


def number(name: str, value, meaning: str) -> float:
    """``value`` as a float: a bool or a non-number is a ``TypeError``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a number ({meaning}), got {show(value)}")
    return float(value)


def positive_number(name: str, value, meaning: str) -> float:
    """A finite number ``> 0`` (a latency target in ms)."""
    v = number(name, value, meaning)
    if not (math.isfinite(v) and v > 0):
        raise ValueError(f"{name} must be a finite number > 0 ({meaning}), got {show(v)}")
    return v


def non_negative_number(name: str, value, meaning: str) -> float:
    """A finite number ``>= 0``."""
    v = number(name, value, meaning)
    if not (math.isfinite(v) and v >= 0):
        raise ValueError(f"{name} must be a finite number >= 0 ({meaning}), got {show(v)}")
    return v


def fraction(name: str, value, meaning: str, *, low_inclusive: bool = False) -> float:
    """A finite number in ``(0, 1]`` (``[0, 1]`` with ``low_inclusive``)."""
    v = number(name, value, meaning)
    above = v >= 0 if low_inclusive else v > 0
    if not (math.isfinite(v) and above and v <= 1):
        interval = "[0, 1]" if low_inclusive else "(0, 1]"
        raise ValueError(f"{name} must be a finite number in {interval} ({meaning}), "
                         f"got {show(v)}")
    return v


def memory_fraction(name: str, value) -> float | None:
    """A KV-budget fraction override: ``None`` or a finite number in ``(0, 1]``."""
    if value is None:
        return None
    v = number(name, value, "the share of free GPU memory the KV cache may use")
    if not (math.isfinite(v) and 0 < v <= 1):
        raise ValueError(f"{name} must be a finite number in (0, 1] (the share of free GPU "
                         f"memory the KV cache may use), got {show(v)}")
    return v


def max_seq_len(name: str, value, isl: int, osl: int) -> int | None:
    """A per-request KV slot length: ``None`` or at least ``isl + osl``."""
    if value is None:
        return None
    v = positive_int(name, value, "KV tokens per request slot")
    if v < isl + osl:
        raise ValueError(f"{name} must be at least isl + osl = {isl + osl} (each request's KV "
                         f"cache must fit its slot), got {v}")
    return v


def prefix_below_isl(prefix: int, isl: int) -> None:
    """A cached prefix shorter than the prompt (the sweep): the prefix is part of ``isl``, so
    ``prefix >= isl`` leaves nothing to prefill and makes every candidate infeasible, which
    the sweep answered as "no feasible configuration". (The serving estimate keeps the
    reference's own error for it: a parity golden.)"""
    if prefix >= isl:
        raise ValueError(f"prefix must be less than isl (the cached prefix is part of the prompt "
                         f"and at least one token must be prefilled), got prefix {prefix} with "
                         f"isl {isl}")


def optional(check, name: str, value, *args):
    """``check(name, value, *args)`` unless ``value`` is ``None``."""
    return None if value is None else check(name, value, *args)


# ------------------------------------------------------------------------------ the requests

_PARALLEL = {
    "tp_size": "tensor-parallel GPUs", "pp_size": "pipeline stages",
    "attention_dp_size": "attention data-parallel ranks",
}


def check_estimate_args(mode: str, args: dict) -> None:
    """The numbers of one :func:`aic.serving.estimate` call (after the reference's own checks
    of ``nextn`` and ``mode``). ``prefix >= isl``, ``ctx_tokens = 0`` and an agg batch of 0
    keep the reference's errors (they are parity goldens); the MoE widths are checked by
    :func:`aic.serving.deployment.resolve_moe_widths` for MoE models and ignored for dense
    ones, as in the reference (a measured dense row records them as 0)."""
    isl = positive_int("isl", args["isl"], "input tokens per request")
    osl = positive_int("osl", args["osl"], "output tokens per request, the first one included")
    non_negative_int("prefix", args["prefix"], "cached prefix tokens per request")
    if mode.startswith("static"):
        positive_int("stride", args["stride"], "decode steps each priced step stands for")
        positive_int("batch_size", args["batch_size"], "requests per rank in the static batch")
    elif mode == "agg":
        non_negative_int("batch_size", args["batch_size"], "requests resident per rank")
    optional(non_negative_int, "ctx_tokens", args.get("ctx_tokens"),
             "context tokens per iteration")
    for name, meaning in _PARALLEL.items():
        positive_int(name, args[name], meaning)
    memory_fraction("free_gpu_memory_fraction", args.get("free_gpu_memory_fraction"))
    max_seq_len("max_seq_len", args.get("max_seq_len"), isl, osl)
    optional(positive_int, "concurrency", args.get("concurrency"), "requests in flight")
    if mode == "disagg":
        for role in ("prefill", "decode"):
            for key in ("batch_size", "num_workers"):
                name = f"{role}_{key}"
                optional(positive_int, name, args.get(name),
                         "requests per worker" if key == "batch_size" else "workers of that role")
            for name, meaning in _PARALLEL.items():
                optional(positive_int, f"{role}_{name}", args.get(f"{role}_{name}"), meaning)
            memory_fraction(f"{role}_free_gpu_memory_fraction",
                            args.get(f"{role}_free_gpu_memory_fraction"))
            max_seq_len(f"{role}_max_seq_len", args.get(f"{role}_max_seq_len"), isl, osl)


def check_sweep_args(args: dict) -> None:
    """The numbers of one :func:`aic.serving.sweep.sweep` call."""
    positive_int("total_gpus", args["total_gpus"], "the GPU budget")
    isl = positive_int("isl", args["isl"], "input tokens per request")
    osl = positive_int("osl", args["osl"], "output tokens per request, the first one included")
    prefix = non_negative_int("prefix", args["prefix"], "cached prefix tokens per request")
    prefix_below_isl(prefix, isl)
    positive_number("ttft", args["ttft"], "the TTFT target in ms")
    positive_number("tpot", args["tpot"], "the TPOT target in ms")
    optional(positive_number, "request_latency", args.get("request_latency"),
             "the end-to-end latency target in ms")
    positive_int("top_n", args["top_n"], "best configurations kept per experiment")
    memory_fraction("free_gpu_memory_fraction", args.get("free_gpu_memory_fraction"))
    max_seq_len("max_seq_len", args.get("max_seq_len"), isl, osl)


def check_rtol(rtol) -> float:
    """The parity tolerance: a finite number ``>= 0`` (NaN failed every comparison)."""
    return non_negative_number("rtol", rtol, "the relative tolerance of a parity check")


# ------------------------------------------------------------------------------ output paths


def same_file(a, b) -> bool:
    """Whether two paths name the same file (an existing one compared by inode, otherwise by
    resolved path)."""
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.realpath(a) == os.path.realpath(b)


def check_output_path(name: str, path, inputs: dict | None = None) -> str:
    """An output file that can be written, checked before any work: its folder exists and is a
    folder, it is neither a folder nor a device, FIFO or socket itself, and it is none of
    ``inputs`` (``{argument: path}``), which it would overwrite. Returns the path as a
    string."""
    text = os.fspath(path)
    for arg, other in (inputs or {}).items():
        if other is not None and same_file(text, other):
            raise ValueError(f"{name} {text!r} is the {arg} file: writing it would overwrite the "
                             f"input; choose another output path")
    if os.path.isdir(text):
        raise ValueError(f"{name} {text!r} is a folder; give a file path")
    if os.path.exists(text) and not os.path.isfile(text):
        raise ValueError(f"{name} {text!r} is not a regular file (a device, FIFO or socket); "
                         f"give a file path")
    folder = os.path.dirname(os.path.abspath(text))
    if not os.path.isdir(folder):
        raise ValueError(f"{name} {text!r}: the folder {folder!r} does not exist; create it "
                         f"first")
    return text
