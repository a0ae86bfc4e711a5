"""The replayed estimate of measured rows (``aic.accuracy.replayed``), the calibrated replay
(``aic.replay(calibrated=True)``) and ``aic-compile accuracy --replay / --combined``.

Skipped when the native module was built without the replay, unless ``AIC_REQUIRE_REPLAY=1``
(scripts/test-all.sh), so they cannot skip in CI."""

from __future__ import annotations

import csv
import json

import pytest
from click.testing import CliRunner
from conftest import REPO, requires_replay

ROWS = REPO / "data/silicon/calibration.csv"


pytestmark = requires_replay()


def _rows():
    from aic.accuracy import scoring

    return {r["id"]: r for r in scoring.load_rows(ROWS)}


LIGHT = "qwen_qwen3_32b_qwen_qwen3_32b_h100_sxm_vllm_agg_1024x128_c16_tp4_epnone_5"


def _light_agg_row():
    """A light vLLM row of a dense model (concurrency 16, 1024 / 128 tokens): quick to replay."""
    return _rows()[LIGHT]


def test_workload_constants_map_a_row_onto_a_replay():
    from aic.accuracy import replayed, scoring

    w = replayed.ReplayWorkload(requests_per_concurrency=3.0, min_requests=16, length_spread=0.3)
    assert w.requests(4) == 16 and w.requests(64) == 192 and w.requests(7) == 21
    # The output-token budget caps long-output rows, never below one request per client.
    assert w.requests(512, 8192) == 512 and w.requests(64, 8192) == 128
    assert w.requests(64, 1 << 20) == 64
    assert w.lengths(1000) == "uniform:700:1000"
    assert replayed.ReplayWorkload(length_spread=0.0).lengths(1000) == 1000
    row = _light_agg_row()
    args = replayed.replay_arguments(row, w)
    conc = scoring.concurrency(row)
    assert args["concurrency"] == conc == 16 and args["requests"] == 48
    assert args["mode"] == "agg" and args["tp_size"] == int(row["tp_size"])
    assert args["isl"] == w.lengths(int(row["isl"])) and args["osl"] == w.lengths(int(row["osl"]))
    disagg = next(r for r in _rows().values() if r["mode"] == "disagg" and r["decode_num_workers"])
    dargs = replayed.replay_arguments(disagg, w)
    assert dargs["decode_workers"] == int(disagg["decode_num_workers"])
    assert dargs["prefill_workers"] == int(disagg["prefill_num_workers"])
    assert dargs["decode_tp_size"] == int(disagg["decode_tp_size"])
    unknown = next(r for r in _rows().values() if r["mode"] == "disagg"
                   and not r["decode_num_workers"])
    with pytest.raises(ValueError, match="is required for disagg"):
        replayed.replay_arguments(unknown, w)


def test_replayed_row_is_the_replays_mean_and_deterministic():
    from aic import replay
    from aic.accuracy import replayed

    row = _light_agg_row()
    a = replayed.predict_row_replayed(row, calibrated=False)
    b = replayed.predict_row_replayed(row, calibrated=False)
    assert a.predicted and (a.ttft, a.tpot) == (b.ttft, b.tpot)
    args = replayed.replay_arguments(row)
    model, system, backend = args.pop("model_path"), args.pop("system_name"), args.pop("backend_name")
    report = replay(model, system, backend, **args).report
    assert a.ttft == report["ttft_ms"]["mean"] and a.tpot == report["tpot_ms"]["mean"]
    cal = replayed.predict_row_replayed(row)  # calibrated step times and request overhead
    assert cal.predicted and cal.extra["calibrated"] and cal.ttft != a.ttft


def test_calibrated_replay_applies_the_group_constants():
    from aic import replay

    constants = {"version": 1, "groups": {
        "h200_sxm/vllm/agg": {"tpot_scale": 0.8, "tpot_overhead_ms": 2.0, "ttft_scale": 1.5,
                              "ttft_queue": 0.5, "ttft_overhead_ms": 40.0}}}
    args = dict(backend_name="vllm", tp_size=2, requests=3, concurrency=1, isl=512, osl=16)
    plain = replay("Qwen/Qwen3-32B", "h200_sxm", **args).report
    cal = replay("Qwen/Qwen3-32B", "h200_sxm", calibrated=True, calibration=constants,
                 **args).report
    assert cal["ttft_ms"]["mean"] == pytest.approx(1.5 * plain["ttft_ms"]["mean"] + 40.0,
                                                   abs=1e-5)
    assert cal["tpot_ms"]["mean"] == pytest.approx(0.8 * plain["tpot_ms"]["mean"] + 2.0,
                                                   abs=1e-5)
    no_overhead = replay("Qwen/Qwen3-32B", "h200_sxm", calibrated=True, calibration=constants,
                         request_overhead_ms=0.0, **args).report
    assert no_overhead["ttft_ms"]["mean"] == pytest.approx(1.5 * plain["ttft_ms"]["mean"],
                                                           abs=1e-5)
    with pytest.raises(ValueError, match="calibrated=True"):
        replay("Qwen/Qwen3-32B", "h200_sxm", calibration=constants, **args)
    bad = {"version": 1, "groups": {"*/*/*": dict(constants["groups"]["h200_sxm/vllm/agg"],
                                                  tpot_scale=float("inf"))}}
    with pytest.raises(ValueError, match="tpot_scale"):
        replay("Qwen/Qwen3-32B", "h200_sxm", calibrated=True, calibration=bad, **args)
    with pytest.raises(ValueError, match="request_overhead_ms"):
        replay("Qwen/Qwen3-32B", "h200_sxm", request_overhead_ms=-1.0, **args)


def test_combined_rule_reads_inputs_only():
    from aic.accuracy.replayed import KV_BINDS_AT, combine, combined_choice
    from aic.accuracy.scoring import Prediction

    closed = Prediction(id="r", ttft=100.0, tpot=10.0)
    light = Prediction(id="r", ttft=300.0, tpot=12.0, extra={"kv_peak": 0.2, "preemptions": 0})
    full = Prediction(id="r", ttft=900.0, tpot=14.0,
                      extra={"kv_peak": KV_BINDS_AT, "preemptions": 0})
    preempted = Prediction(id="r", ttft=900.0, tpot=14.0, extra={"kv_peak": 0.5, "preemptions": 3})
    failed = Prediction(id="r", error_class="ValueError", error_msg="no KV budget")
    assert combined_choice(closed, light) == "closed"
    assert combined_choice(closed, full) == "replay"
    assert combined_choice(closed, preempted) == "replay"
    assert combined_choice(closed, failed) == "closed"
    assert combined_choice(Prediction(id="r", error_class="X"), light) == "replay"
    out = combine([closed, closed], [light, full])
    assert [(p.ttft, p.extra["estimate"]) for p in out] == [(100.0, "closed"), (900.0, "replay")]


def _small_rows_file(tmp_path, n=3):
    row = _light_agg_row()
    rows = [dict(row, id=f"{row['id']}_{i}") for i in range(n)]
    path = tmp_path / "rows.csv"
    with open(path, "w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, fieldnames=list(row))
        w.writeheader()
        w.writerows(rows)
    return path


def test_cli_replay_and_combined(tmp_path):
    from aic.cli import main

    path = _small_rows_file(tmp_path)
    res = CliRunner().invoke(main, ["accuracy", "--rows", str(path), "--calibrated", "--replay",
                                    "--json", "--jobs", "2"])
    assert res.exit_code == 0, res.output
    figures = json.loads(res.output)
    assert figures["estimate"] == "replay" and figures["predicted"] == 3
    res = CliRunner().invoke(main, ["accuracy", "--rows", str(path), "--calibrated", "--combined",
                                    "--json"])
    assert res.exit_code == 0, res.output
    combined = json.loads(res.output)
    assert combined["estimate"] == "combined" and combined["replayed_rows"] == 0
    closed = json.loads(CliRunner().invoke(main, ["accuracy", "--rows", str(path), "--calibrated",
                                                  "--json"]).output)
    assert closed["estimate"] == "closed_form"
    assert combined["ttft_mdape"] == closed["ttft_mdape"]  # light rows: the closed form answers
    text = CliRunner().invoke(main, ["accuracy", "--rows", str(path), "--replay"])
    assert text.exit_code == 0 and "replayed (table-priced steps)" in text.output
    for args, message in ((["--replay", "--combined", "--calibrated"], "give one"),
                          (["--combined"], "--combined needs --calibrated")):
        res = CliRunner().invoke(main, ["accuracy", "--rows", str(path)] + args)
        assert res.exit_code == 2 and message in res.output, res.output


def test_cli_calibrated_replay(tmp_path):
    from aic.cli import main

    base = ["replay", "Qwen/Qwen3-32B", "--system", "h200_sxm", "--backend", "vllm", "--tp", "2",
            "--concurrency", "1", "--requests", "2", "--isl", "256", "--osl", "8", "--json"]
    plain = json.loads(CliRunner().invoke(main, base).output)["report"]
    res = CliRunner().invoke(main, base + ["--calibrated"])
    assert res.exit_code == 0, res.output
    cal = json.loads(res.output)["report"]
    assert cal["ttft_ms"]["mean"] != plain["ttft_ms"]["mean"]
    res = CliRunner().invoke(main, base + ["--request-overhead-ms", "5"])
    assert json.loads(res.output)["report"]["ttft_ms"]["mean"] == pytest.approx(
        plain["ttft_ms"]["mean"] + 5.0, abs=1e-6)
    res = CliRunner().invoke(main, base + ["--calibration", str(ROWS)])
    assert res.exit_code == 2 and "--calibration needs --calibrated" in res.output


def test_parallel_replays_equal_sequential_ones(monkeypatch, tmp_path):
    from aic.accuracy import replayed

    # A stray package tree without the native module first on the path (as a script that
    # inserts the source tree leaves it) must not reach the worker processes.
    stray = tmp_path / "aic"
    stray.mkdir()
    (stray / "__init__.py").write_text("raise ImportError('stray aic imported')\n")
    monkeypatch.syspath_prepend(str(tmp_path))

    row = _light_agg_row()
    rows = [row, dict(row, id="second", osl="64")]
    one = replayed.replay_rows_parallel(rows, [None, None], jobs=1)
    two = replayed.replay_rows_parallel(rows, [None, None], jobs=2)
    assert [(p.id, p.ttft, p.tpot) for p in one] == [(p.id, p.ttft, p.tpot) for p in two]
    assert one[0].predicted and one[1].tpot != one[0].tpot
