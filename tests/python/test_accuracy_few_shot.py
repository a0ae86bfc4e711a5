"""Few-shot calibration (``aic-compile calibrate --few-shot N``, ACCURACY.md): what a deployment
series is, which points are fitted, and that the figures are the user's own path (``calibrate``
on the fitted points, then ``accuracy --calibrated --calibration`` on the others)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

from click.testing import CliRunner

from aic.accuracy import few_shot, scoring as accuracy
from aic.cli import main

REPO = Path(__file__).resolve().parents[2]
ROWS = accuracy.load_rows(REPO / "data" / "silicon" / "calibration.csv")


def _write_rows(path: Path, rows: list[dict]) -> Path:
    with open(path, "w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    return path


def _row(concurrency: int, **cells) -> dict:
    base = {"id": f"c{concurrency}", "model_path": "m", "system": "h100_sxm", "backend": "vllm",
            "backend_version": "0.1", "mode": "agg", "precision": "fp8", "isl": "1024",
            "osl": "128", "tp_size": "8", "batch_size": str(concurrency),
            "silicon_data_source": f"silicon_concurrency={concurrency}"}
    return {**base, **cells}


def test_a_series_is_one_deployment_across_load():
    a = _row(4)
    assert few_shot.series_key(a) == few_shot.series_key(_row(64))  # load differs only
    assert few_shot.series_key(a) == few_shot.series_key(_row(4, tp_size="8.0", isl="8192"))
    for other in (_row(4, tp_size="4"), _row(4, backend_version="0.2"),
                  _row(4, precision="bf16"), _row(4, system="h200_sxm")):
        assert few_shot.series_key(other) != few_shot.series_key(a)
    label = few_shot.series_label(few_shot.series_key(a))
    assert label == "m h100_sxm vllm 0.1 agg fp8 tp8"


def test_points_are_spread_over_concurrency():
    rows = [_row(c) for c in (64, 1, 8, 2, 4, 16, 32)]
    idx = list(range(len(rows)))
    conc = lambda picks: [accuracy.concurrency(rows[i]) for i in picks]  # noqa: E731
    assert conc(few_shot.choose_points(idx, rows, 3)) == [1, 8, 64]
    assert conc(few_shot.choose_points(idx, rows, 2)) == [1, 64]
    assert conc(few_shot.choose_points(idx, rows, 1)) == [8]
    assert conc(few_shot.choose_points(idx, rows, 4)) == [1, 4, 16, 64]
    six = [_row(c) for c in (1, 2, 4, 8, 16, 32)]
    assert [accuracy.concurrency(six[i]) for i in
            few_shot.choose_points(list(range(6)), six, 3)] == [1, 8, 32]


def test_few_shot_figures_are_the_users_calibrate_then_estimate_path(tmp_path):
    """Two deployments of two families on h100 vLLM: per series, constants fitted on 3 of
    its rows score the others exactly as `calibrate` on those 3 rows followed by `accuracy
    --calibrated --calibration` on the rest does."""
    series = {}
    for r in ROWS:
        if r["system"] == "h100_sxm" and r["backend"] == "vllm" and r["mode"] == "agg" and \
                r["model_path"] in ("Qwen/Qwen3-32B", "meta-llama/Llama-3.1-70B"):
            series.setdefault(few_shot.series_key(r), []).append(r)
    picked = [next(rows for rows in series.values() if rows[0]["model_path"] == model
                   and 6 <= len(rows) <= 12)
              for model in ("Qwen/Qwen3-32B", "meta-llama/Llama-3.1-70B")]
    mine = _write_rows(tmp_path / "mine.csv", [r for rows in picked for r in rows])
    res = CliRunner().invoke(main, ["calibrate", "--rows", str(mine), "--few-shot", "3",
                                    "--json"])
    assert res.exit_code == 0, res.output
    figures = json.loads(res.output)
    assert figures["shots"] == 3 and figures["series"] == 2 and figures["fitted_rows"] == 6
    assert figures["scored_rows"] == sum(len(rows) for rows in picked) - 6
    assert figures["few_shot"]["predicted"] == figures["scored_rows"]
    assert figures["pooled_cv"]["predicted"] == figures["scored_rows"]
    for entry in figures["per_series"]:
        rows = next(rows for rows in picked
                    if few_shot.series_label(few_shot.series_key(rows[0])) == entry["series"])
        by_id = {r["id"]: r for r in rows}
        levels = sorted(accuracy.concurrency(r) for r in rows)
        assert entry["fitted_concurrency"][0] == levels[0]
        assert entry["fitted_concurrency"][-1] == levels[-1]
        fitted = [by_id[i] for i in entry["fitted"]]
        rest = [r for r in rows if r["id"] not in entry["fitted"]]
        three = _write_rows(tmp_path / "three.csv", fitted)
        others = _write_rows(tmp_path / "others.csv", rest)
        out = tmp_path / "mine.json"
        fit = CliRunner().invoke(main, ["calibrate", "--rows", str(three), "--out", str(out)])
        assert fit.exit_code == 0, fit.output
        assert json.loads(out.read_text())["groups"]["*/*/*"] == entry["constants"]
        judged = CliRunner().invoke(main, ["accuracy", "--rows", str(others), "--calibrated",
                                           "--calibration", str(out), "--json"])
        got = json.loads(judged.output)
        for key in ("ttft_mdape", "ttft_p90_ape", "tpot_mdape", "tpot_p90_ape", "tpot_bias"):
            assert got[key] == entry[key], key
    text = CliRunner().invoke(main, ["calibrate", "--rows", str(mine), "--few-shot", "3"])
    assert text.exit_code == 0 and "fitted on 3 points of the series" in text.output


def test_few_shot_refusals(tmp_path):
    rows = [r for r in ROWS if r["model_path"] == "Qwen/Qwen3-32B"][:4]
    small = _write_rows(tmp_path / "small.csv", rows)
    res = CliRunner().invoke(main, ["calibrate", "--rows", str(small), "--few-shot", "3"])
    assert res.exit_code == 1 and "no deployment series has 5 rows" in res.output, res.output
    res = CliRunner().invoke(main, ["calibrate", "--rows", str(small), "--few-shot", "3",
                                    "--out", str(tmp_path / "c.json")])
    assert res.exit_code == 2 and "drop --out" in res.output
    res = CliRunner().invoke(main, ["calibrate", "--rows", str(small), "--few-shot", "0"])
    assert res.exit_code == 2
    res = CliRunner().invoke(main, ["calibrate", "--rows", str(small)])
    assert res.exit_code == 2 and "Missing option '--out'" in res.output
