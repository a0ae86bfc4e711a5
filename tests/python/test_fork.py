"""A process forked after aic's parallel work ran keeps working (``aic_core::parallel``).

rayon's pools are threads and a forked child inherits none: before, a sweep or a batch estimate
in a ``multiprocessing`` worker (fork, Linux's default start method) forked from a process that
had already run one waited forever. The timeouts turn such a hang into a failure.
"""

from __future__ import annotations

import multiprocessing as mp
import sys

import pytest

import aic
from aic.serving_sweep import sweep

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="fork start method: Linux")

SWEEP = dict(backend="sglang", isl=2000, osl=500, ttft=1000.0, tpot=20.0, request_latency=12000.0)
POINTS = ([1, 8, 64, 256], [128, 1024, 4096, 2048], [2, 2, 2, 2])


def _engine():
    return aic.AicEngine.from_spec(aic.compile_engine("Qwen/Qwen3-32B", "h200_sxm", "vllm", tp_size=2))


def _batch(threads):
    return list(_engine().estimate_batch("decode", *POINTS, threads=threads))


def _sweep(_):
    out = sweep("Qwen/Qwen3-8B", 4, "h100_sxm", **SWEEP)
    return out["chosen_exp"], len(out["candidates"]["agg"])


def test_parallel_calls_work_in_forked_children():
    # the parent's pools exist (global and a kept 2-thread one) before it forks
    expected_batch = _batch(None)
    assert _batch(2) == expected_batch
    expected_sweep = _sweep(0)
    with mp.get_context("fork").Pool(2) as pool:
        assert pool.map_async(_batch, [None, 2, 1]).get(timeout=120) == [expected_batch] * 3
        assert pool.map_async(_sweep, range(2)).get(timeout=120) == [expected_sweep] * 2
