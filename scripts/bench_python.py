#!/usr/bin/env python3
"""Benchmarks of the Python surface (issue 6), printed as a table or JSON.

Measures, against the installed ``aic`` package:

* per-call time of ``AicEngine`` estimates with distinct arguments on every call (median and
  p90 over repeated rounds), for the dense example engine (Qwen/Qwen3-32B, h200_sxm, vllm, tp 2);
* ``AicEngine.estimate_batch`` throughput (estimates per second) on one thread and on all cores,
  when the installed module has it;
* a fresh process that loads a precompiled spec and answers one estimate (wall time, and its
  peak resident memory);
* ``compile_engine`` for the dense model in a fresh process, interpreter start included.

Usage: ``python scripts/bench_python.py [--quick] [--json]``. ``--quick`` runs every measurement
a few times only (the test suite uses it as a smoke run; its numbers mean nothing).
Timing here is reported, never asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time


def _xorshift(seed: int):
    state = seed
    while True:
        state ^= (state << 13) & 0xFFFFFFFFFFFFFFFF
        state ^= state >> 7
        state ^= (state << 17) & 0xFFFFFFFFFFFFFFFF
        yield state


def _args(n: int, seed: int, ranges):
    stream = _xorshift(seed)
    return [tuple(lo + next(stream) % (hi - lo) for lo, hi in ranges) for _ in range(n)]


def _per_call(fn, points, rounds: int) -> dict:
    """Median and p90 per-call time (ns) over ``rounds`` passes of ``points``."""
    per_round = []
    for _ in range(rounds):
        start = time.perf_counter_ns()
        for p in points:
            fn(*p)
        per_round.append((time.perf_counter_ns() - start) / len(points))
    # Per-call tail: time single calls of the last pass individually.
    singles = []
    for p in points:
        start = time.perf_counter_ns()
        fn(*p)
        singles.append(time.perf_counter_ns() - start)
    singles.sort()
    return {
        "median_ns": statistics.median(per_round),
        "single_call_median_ns": singles[len(singles) // 2],
        "single_call_p90_ns": singles[int(len(singles) * 0.9)],
    }


def _engine(aic):
    blob = aic.compile_engine("Qwen/Qwen3-32B", "h200_sxm", "vllm", tp_size=2)
    return aic.AicEngine.from_spec(blob), blob


def _fresh_process(code: str) -> dict:
    """Runs ``code`` in a new interpreter; wall time and the child's own peak RSS (MiB). The
    child reads its ``VmHWM`` (reset by ``exec``); ``ru_maxrss`` survives ``exec`` on Linux and
    would count this (larger) process's pages from before it."""
    report = (
        "; import sys; sys.stdout.write([l.split()[1] for l in open('/proc/self/status') "
        "if l.startswith('VmHWM:')][0])"
    )
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", code + report], check=True, cwd=tempfile.gettempdir(), capture_output=True, text=True
    )
    wall = time.perf_counter() - start
    return {"wall_s": wall, "peak_rss_mib": int(done.stdout.strip().splitlines()[-1]) / 1024.0}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smoke run: few repetitions")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    opts = parser.parse_args()

    import aic

    n, rounds, fresh_runs = (200, 2, 1) if opts.quick else (20000, 7, 5)
    engine, blob = _engine(aic)
    results: dict[str, dict] = {}
    results["decode_osl2"] = _per_call(
        engine.predict_decode_latency, [(b, i, 2) for b, i, _ in _args(n, 1, [(1, 256), (128, 8192), (0, 1)])], rounds
    )
    results["decode_step"] = _per_call(
        engine.decode_step_latency, _args(n, 2, [(1, 256), (128, 8192), (2, 1024)]), rounds
    )
    results["prefill"] = _per_call(
        engine.predict_prefill_latency, [(b, i, 0) for b, i, _ in _args(n, 3, [(1, 8), (128, 8192), (0, 1)])], rounds
    )
    if hasattr(engine, "estimate_batch"):
        points = _args(n if opts.quick else 200_000, 4, [(1, 256), (128, 8192), (2, 3)])
        cols = [list(c) for c in zip(*points)]
        for label, threads in (("batch_decode_1thread", 1), ("batch_decode_all_cores", None)):
            times = []
            for _ in range(rounds):
                start = time.perf_counter()
                engine.estimate_batch("decode", *cols, threads=threads)
                times.append(time.perf_counter() - start)
            best = statistics.median(times)
            results[label] = {"estimates_per_s": len(points) / best, "median_s": best}

    with tempfile.TemporaryDirectory() as tmp:
        spec_path = os.path.join(tmp, "qwen3-32b.aicspec")
        with open(spec_path, "wb") as fh:
            fh.write(blob)
        load_code = (
            "import aic; e = aic.AicEngine.from_spec(open(%r, 'rb').read()); "
            "e.predict_decode_latency(8, 1024, 2)" % spec_path
        )
        runs = [_fresh_process(load_code) for _ in range(fresh_runs)]
        results["fresh_load_and_estimate"] = {
            "median_wall_s": statistics.median(r["wall_s"] for r in runs),
            "peak_rss_mib": max(r["peak_rss_mib"] for r in runs),
        }
        compile_code = "import aic; aic.compile_engine('Qwen/Qwen3-32B', 'h200_sxm', 'vllm', tp_size=2)"
        runs = [_fresh_process(compile_code) for _ in range(fresh_runs)]
        results["fresh_compile_engine"] = {"median_wall_s": statistics.median(r["wall_s"] for r in runs)}
        interp = [_fresh_process("pass") for _ in range(fresh_runs)]
        results["bare_interpreter"] = {"median_wall_s": statistics.median(r["wall_s"] for r in interp)}

    if opts.json:
        print(json.dumps(results, indent=2))
    else:
        for name, values in results.items():
            text = ", ".join(f"{k} {v:,.3f}" if isinstance(v, float) else f"{k} {v}" for k, v in values.items())
            print(f"{name:28s} {text}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
