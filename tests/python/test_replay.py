"""``aic.replay`` and ``aic-compile replay``: a workload replayed through aisimulate-core's
scheduler models with aic's step latencies (crate aic-replay, cargo feature ``replay``).

These tests skip when the native module was built without the replay, unless
``AIC_REQUIRE_REPLAY=1`` (scripts/test-all.sh builds with it and sets it), so they cannot skip in
CI."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from conftest import REPO, requires_replay

MODEL = "Qwen/Qwen3-32B"
TRACE = REPO / "crates/aic-replay/tests/data/small_trace.jsonl"


pytestmark = requires_replay()


def _small(**kw):
    from aic import replay

    args = dict(backend_name="vllm", tp_size=2, requests=24, concurrency=4, isl=512, osl=16)
    args.update(kw)
    return replay(MODEL, "h200_sxm", **args)


def test_closed_loop_replay_reports_the_figures():
    result = _small()
    assert result.requests["completed"] == 24
    assert result.requests["requests"] == 24
    assert result.requests["output_tokens"] == 24 * 16
    for summary in (result.ttft, result.tpot, result.itl, result.e2e):
        assert 0 < summary.p50 <= summary.p90 <= summary.p99 <= summary.max
    assert result.e2e.p50 > result.ttft.p50
    assert result.throughput["gpus"] == 2
    assert result.throughput["output_tokens_per_s_per_gpu"] > 0
    assert result.roles[0]["kv"]["source"] == "aic_memory_model"
    assert "TTFT" in result.table() and "p99" in result.table()
    json.dumps(result.to_dict(), allow_nan=False)


def test_replay_is_deterministic():
    a = _small(isl="uniform:256:1024", osl="normal:24:6", seed=7).to_dict()["report"]
    b = _small(isl="uniform:256:1024", osl="normal:24:6", seed=7).to_dict()["report"]
    c = _small(isl="uniform:256:1024", osl="normal:24:6", seed=8).to_dict()["report"]
    assert a == b
    assert a != c


def test_concurrency_one_gives_aics_own_ttft():
    """One request at a time with fixed lengths: each TTFT is aic's prefill of that prompt."""
    from aic import AicEngine
    from aic.compiler.compile import compile_report
    from aic.paths import systems_dir
    from aic.serving.deployment import build_worker, resolve_version

    root = systems_dir(None)
    version = resolve_version(root, "h200_sxm", "vllm", None)
    worker = build_worker(MODEL, "h200_sxm", "vllm", version, root,
                          {"tp_size": 2, "pp_size": 1, "attention_dp_size": 1,
                           "moe_tp_size": None, "moe_ep_size": None},
                          {}, 0, True)
    assert compile_report  # the serving path compiles through it
    engine = AicEngine.from_spec(worker["spec"].encode())
    result = _small(requests=3, concurrency=1, isl=1024, osl=8)
    expected = engine.predict_prefill_latency(1, 1024)
    assert result.ttft.p50 == pytest.approx(expected, rel=1e-9)
    assert result.ttft.max == pytest.approx(expected, rel=1e-9)


def test_open_loop_and_disagg_run_end_to_end():
    from aic import replay

    result = replay(MODEL, "h200_sxm", "vllm", mode="disagg", tp_size=2, prefill_workers=1,
                    decode_workers=2, requests=16, rate=4.0, isl=1024, osl=16, seed=3)
    assert result.mode == "disagg"
    assert [r["role"] for r in result.roles] == ["prefill", "decode"]
    assert result.requests["completed"] == 16
    assert result.throughput["gpus"] == 6


def test_trace_replay_reuses_prefixes():
    from aic import replay

    result = replay(MODEL, "h200_sxm", "vllm", tp_size=2, trace=str(TRACE), timeline=True,
                    per_request=True)
    assert result.requests["completed"] == 40
    assert result.prefix_cache["reused_ratio"] > 0
    assert len(result.per_request) == 40
    assert result.timeline


@pytest.mark.parametrize("kwargs, match", [
    ({"requests": 0}, "requests must be an integer >= 1, got 0"),
    ({"osl": 0}, "osl must be an integer >= 1, got 0"),
    ({"isl": -5}, "isl must be an integer >= 1, got -5"),
    ({"isl": "uniform:900:100"}, "uniform maximum 100 is below its minimum 900"),
    ({"isl": "lognormal:1:2"}, "isl must be a positive integer, 'uniform:MIN:MAX'"),
    ({"rate": 2.0}, "give exactly one arrival process"),
    ({"concurrency": None}, "give exactly one arrival process"),
    ({"concurrency": True}, "concurrency must be an integer >= 1, got True"),
    ({"gpu_memory_fraction": 1.5}, "gpu_memory_fraction must be a finite number > 0.0 and <= 1.0"),
    ({"mode": "static"}, "mode must be 'agg' or 'disagg'"),
    ({"trace": "no-such-trace.jsonl", "requests": None}, "trace file 'no-such-trace.jsonl'"),
])
def test_bad_arguments_name_the_argument(kwargs, match):
    with pytest.raises(ValueError, match=match.replace("(", r"\(").replace(")", r"\)")):
        _small(**kwargs)


def test_bad_trace_line_is_named(tmp_path):
    from aic import replay

    trace = tmp_path / "bad.jsonl"
    trace.write_text('{"timestamp": 0, "input_length": 100, "output_length": 4, "hash_ids": [1]}\n'
                     '{"timestamp": 5, "input_length": "many", "output_length": 4}\n')
    with pytest.raises(ValueError, match="line 2: field `input_length`"):
        replay(MODEL, "h200_sxm", "vllm", tp_size=2, trace=str(trace))


def test_prompt_longer_than_the_kv_capacity_is_refused():
    with pytest.raises(ValueError, match="needs .* KV tokens"):
        _small(requests=2, concurrency=1, isl=8192, osl=4, num_gpu_blocks=16)


def _cli(*args):
    from aic.cli import main

    return CliRunner().invoke(main, ["replay", MODEL, "--system", "h200_sxm", "--backend", "vllm",
                                     "--tp", "2", *[str(a) for a in args]])


def test_cli_prints_the_table_and_json(tmp_path):
    out = _cli("--concurrency", 4, "--requests", 16, "--isl", 512, "--osl", 8)
    assert out.exit_code == 0, out.output
    for word in ("TTFT", "TPOT", "ITL", "E2E", "p90", "Throughput", "Prefix cache", "KV usage"):
        assert word in out.output
    out = _cli("--concurrency", 4, "--requests", 16, "--isl", 512, "--osl", 8, "--json")
    assert out.exit_code == 0, out.output
    data = json.loads(out.output)
    assert data["report"]["requests"]["completed"] == 16


def test_cli_trace_and_svg_plot(tmp_path):
    plot = tmp_path / "replay.svg"
    out = _cli("--trace", TRACE, "--plot", plot)
    assert out.exit_code == 0, out.output
    text = plot.read_text()
    assert text.startswith("<svg") and "TTFT" in text and "waiting" in text


@pytest.mark.parametrize("args, message", [
    (("--plot", "x.pdf"), "unknown suffix '.pdf'"),
    (("--plot", "no/such/folder/x.svg"), "does not exist"),
    (("--requests", 0), "0 is not in the range x>=1"),
    (("--osl", "0"), "osl must be an integer >= 1, got 0"),
    (("--trace", "missing.jsonl"), "trace file 'missing.jsonl' does not exist"),
])
def test_cli_errors_are_one_line(args, message):
    out = _cli("--concurrency", 2, "--requests", 4, *args) if "--trace" not in args else \
        _cli(*args)
    assert out.exit_code != 0
    assert "Traceback" not in out.output
    assert message in out.output
