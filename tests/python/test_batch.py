"""``AicEngine.estimate_batch``: the batch API from Python equals single calls bit for bit for
any thread count, accepts any integer sequence, returns ``array('d')`` and reports bad input
with the usual exception classes."""

from __future__ import annotations

from array import array

import pytest

import aic
from aic import _aic


@pytest.fixture(scope="module")
def engine():
    return _aic.AicEngine.from_spec(aic.compile_engine("Qwen/Qwen3-32B", "h200_sxm", "vllm", tp_size=2))


def _columns(n, seed, ranges):
    state = seed
    cols = [[], [], []]
    for _ in range(n):
        for col, (lo, hi) in zip(cols, ranges):
            state ^= (state << 13) & 0xFFFFFFFFFFFFFFFF
            state ^= state >> 7
            state ^= (state << 17) & 0xFFFFFFFFFFFFFFFF
            col.append(lo + state % (hi - lo))
    return cols


@pytest.mark.parametrize(
    "kind, ranges, single",
    [
        ("decode", [(1, 256), (64, 8192), (2, 40)], lambda e, a, b, c: e.predict_decode_latency(a, b, c)),
        ("decode_step", [(1, 256), (64, 8192), (2, 1024)], lambda e, a, b, c: e.decode_step_latency(a, b, c)),
        ("prefill", [(1, 8), (128, 4096), (0, 64)], lambda e, a, b, c: e.predict_prefill_latency(a, b, c)),
    ],
)
def test_batch_equals_single_calls(engine, kind, ranges, single):
    a, b, c = _columns(600, 0x9E3779B97F4A7C15, ranges)
    expected = [single(engine, *p) for p in zip(a, b, c)]
    for threads in (1, 2, None):
        out = engine.estimate_batch(kind, a, b, c, threads=threads)
        assert isinstance(out, array) and out.typecode == "d"
        assert list(out) == expected
    # Any integer sequence works as a column.
    out = engine.estimate_batch(kind, array("q", a), tuple(b), array("I", c))
    assert list(out) == expected


def test_batch_errors(engine):
    with pytest.raises(ValueError, match=r"batch point 1 \[1, 128, 128\].*isl must be greater than 0"):
        engine.estimate_batch("prefill", [1, 1, 1], [128, 128, 128], [0, 128, 200])
    with pytest.raises(OverflowError, match=r"column b\[1\] = -5 is out of range"):
        engine.estimate_batch("decode", [1, 1], [128, -5], [2, 2])
    with pytest.raises(ValueError, match="equal lengths"):
        engine.estimate_batch("decode", [1, 1], [128], [2, 2])
    with pytest.raises(ValueError, match="unknown batch estimate kind"):
        engine.estimate_batch("mixed", [1], [128], [2])
    with pytest.raises(ValueError, match="threads must be at least 1"):
        engine.estimate_batch("decode", [1], [128], [2], threads=0)
    assert list(engine.estimate_batch("decode", [], [], [])) == []
