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
from aic.serving.sweep import sweep

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


def test_a_fork_during_a_table_prefetch_waits_for_it():
    """``fork`` right after a prefetch started (a sweep whose compile then raised, say) waits
    for the load instead of handing the child a table slot that stays taken."""
    from aic import paths
    from aic._native import native
    from aic.serving.deployment import resolve_version

    root = paths.systems_dir()
    version = resolve_version(root, "b200_sxm", "trtllm", None)
    assert native().prefetch_tables(root, "b200_sxm", "trtllm", version, True)
    with mp.get_context("fork").Pool(1) as pool:
        out = pool.map_async(_oss_sweep, [0]).get(timeout=120)
    assert out[0][1] == 543, out


def _oss_sweep(_):
    out = sweep("openai/gpt-oss-120b", 8, "b200_sxm", backend="trtllm", isl=4000, osl=1000,
                ttft=2000.0, tpot=30.0)
    return out["chosen_exp"], len(out["candidates"]["agg"])
