"""Several Python threads sharing one ``AicEngine`` (issue 8). Every estimate releases the GIL,
so the threads really run the engine at the same time; each must get exactly what a single
thread gets, including the first calls (which load the perf tables) and the exceptions of bad
inputs mixed into the stream.
"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from aic import AicEngine, compile_engine

REPO = Path(__file__).resolve().parents[2]
THREADS = 6

pytestmark = pytest.mark.engine


def _calls():
    """(method name, args) over every GIL-free estimate, with two bad inputs in the stream."""
    calls = []
    for isl in (1, 100, 2048, 9000):
        for bs in (1, 8, 64):
            calls.append(("predict_prefill_latency", (bs, isl, isl // 4)))
            calls.append(("predict_decode_latency", (bs, isl, 40)))
            calls.append(("decode_step_latency", (bs, isl, 33)))
            calls.append(("mixed_step_latency", (bs * 128, bs, isl, 64)))
            calls.append(("mixed_step_breakdown", (bs * 64, bs, isl, 16)))
        calls.append(("run_static", (4, 1, isl, 20)))
        calls.append(("run_static_per_op", (2, 1, isl, 10)))
        calls.append(("predict_prefill_latency", (1, isl, isl)))  # prefix = isl: ValueError
    return calls


def _answer(engine, name, args):
    try:
        return ("ok", getattr(engine, name)(*args))
    except ValueError as exc:
        return ("error", type(exc).__name__, str(exc))


def _run_threads(engine, calls):
    results = [None] * THREADS
    barrier = threading.Barrier(THREADS)

    def worker(t):
        order = [(i * (2 * t + 1) + 7 * t) % len(calls) for i in range(len(calls))]
        answers = {}
        barrier.wait()
        for i in order:
            if i not in answers:
                answers[i] = _answer(engine, *calls[i])
        for i in range(len(calls)):
            if i not in answers:
                answers[i] = _answer(engine, *calls[i])
        results[t] = [answers[i] for i in range(len(calls))]

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results


def test_threads_sharing_one_engine_match_a_single_thread(tmp_path):
    calls = _calls()
    spec = compile_engine("Qwen/Qwen3-8B", "h200_sxm", "vllm", tp_size=2)
    reference_engine = AicEngine.from_spec(spec)
    reference = [_answer(reference_engine, *call) for call in calls]
    assert sum(1 for r in reference if r[0] == "error") == 4
    # Another spelling of the shipped folder is another database: its tables are still
    # unloaded, so the threads race on the first loads.
    cold_root = REPO / "data" / "systems" / ".." / "systems"
    shared = AicEngine.from_spec(spec, str(cold_root))
    for t, answers in enumerate(_run_threads(shared, calls)):
        for call, got, want in zip(calls, answers, reference):
            assert got == want, f"thread {t}: {call}"


def test_threads_on_separate_engines_agree():
    calls = _calls()[:40]
    engines = [AicEngine.from_spec(compile_engine("Qwen/Qwen3-8B", "h200_sxm", "vllm")) for _ in range(2)]
    results = [_run_threads(engine, calls) for engine in engines]
    first = results[0][0]
    for per_engine in results:
        for answers in per_engine:
            assert answers == first
