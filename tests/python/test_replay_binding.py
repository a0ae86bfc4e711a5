"""The replay binding of the native module: ``replay_available()`` in every build, and with the
cargo feature ``replay`` the JSON entry point ``replay_json`` over the Rust crate aic-replay."""

from __future__ import annotations

import json

import pytest

from conftest import REPO, native_available

pytestmark = pytest.mark.skipif(not native_available(), reason="native module not built")

SPEC = REPO / "crates/aic-core/examples/specs/qwen3-32b_h200_vllm_tp2.json"
TRACE = REPO / "crates/aic-replay/tests/data/small_trace.jsonl"


def test_replay_available_reports_the_build():
    from aic import _aic

    available = _aic.replay_available()
    assert isinstance(available, bool)
    assert hasattr(_aic, "replay_json") == available


def _request(workload: dict) -> str:
    engine = {"spec": {"path": str(SPEC)}, "kv": {"num_gpu_blocks": 20000}}
    return json.dumps({"mode": {"kind": "agg", "engine": engine}, "workload": workload})


def test_replay_json_runs_a_trace():
    from aic import _aic

    if not _aic.replay_available():
        pytest.skip("built without the cargo feature `replay`")
    answer = json.loads(_aic.replay_json(_request({"kind": "trace", "path": str(TRACE)})))
    report = answer["report"]
    assert report["requests"]["completed"] == 40
    assert report["prefix_cache"]["reused_ratio"] > 0
    assert report["ttft_ms"]["p50"] <= report["ttft_ms"]["p99"]


def test_replay_json_errors_are_value_errors():
    from aic import _aic

    if not _aic.replay_available():
        pytest.skip("built without the cargo feature `replay`")
    bad = {"kind": "generated", "requests": 0, "arrival": {"closed_loop": {"concurrency": 1}},
           "isl": 10, "osl": 2}
    with pytest.raises(ValueError, match="workload.requests"):
        _aic.replay_json(_request(bad))
    with pytest.raises(ValueError, match="invalid replay request JSON"):
        _aic.replay_json("{}")
