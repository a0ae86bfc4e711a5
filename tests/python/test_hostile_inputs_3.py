"""Hostile inputs, round three (issue 36): the serving, sweep, accuracy, calibrate, parity, support
and data-import surfaces.

The one-line errors are rows of the catalogue (``test_error_catalogue.py``, ``docs/errors.md``);
this file holds what is not an error: bad rows left out with their reason, JSON output that is
always JSON, a data import that copies regular files only, the native checks reached without
the front end, and the values at the edge of each range that must still answer.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import pytest

pytest.importorskip("aic._aic", reason="needs the native module (pip install .)")

from aic import _aic  # noqa: E402
from aic.accuracy import scoring  # noqa: E402
from aic.json_output import dumps, nulls_for_nan  # noqa: E402
from aic.validation import check_output_path, positive_int, show  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
HEADER = ["id", "model_path", "system", "backend", "mode", "isl", "osl", "batch_size", "tp_size",
          "silicon_ttft_ms", "silicon_tpot_ms"]


def _rows_file(tmp_path: Path, rows: list[dict], name="rows.csv") -> Path:
    lines = [",".join(HEADER)] + [",".join(str(r.get(c, "")) for c in HEADER) for r in rows]
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _row(**changes) -> dict:
    row = {"id": "r", "model_path": "Qwen/Qwen3-8B", "system": "h200_sxm", "backend": "vllm",
           "mode": "agg", "isl": 1024, "osl": 128, "batch_size": 8, "tp_size": 1,
           "silicon_ttft_ms": 80.0, "silicon_tpot_ms": 9.5}
    row.update(changes)
    return row


# ------------------------------------------------------------------ accuracy: measured values


def test_a_measured_inf_is_left_out_with_its_reason_and_the_medians_stay_finite(tmp_path):
    path = _rows_file(tmp_path, [_row(id="good"), _row(id="inf", silicon_ttft_ms="inf"),
                                 _row(id="neg", silicon_tpot_ms=-3)])
    rows = scoring.load_rows(path)
    preds = scoring.predict_rows(rows)
    by_id = {p.id: p for p in preds}
    assert by_id["good"].predicted
    assert not by_id["inf"].predicted and by_id["inf"].error_class == "InvalidMeasurement"
    assert by_id["inf"].error_msg == "silicon_ttft_ms must be a finite number of ms > 0, got inf"
    assert by_id["neg"].error_msg == "silicon_tpot_ms must be a finite number of ms > 0, got -3"
    figures = scoring.score(rows, preds)
    assert figures["predicted"] == 1
    assert math.isfinite(figures["ttft_mdape"]) and math.isfinite(figures["tpot_mdape"])


def test_metrics_skip_a_non_finite_measurement_even_without_load_rows():
    rows = [_row(silicon_ttft_ms="80"), _row(silicon_ttft_ms="inf")]
    preds = [scoring.Prediction("a", ttft=88.0, tpot=9.5), scoring.Prediction("b", ttft=1.0, tpot=9.5)]
    m = scoring.metrics(rows, preds)
    assert m["ttft_mdape"] == pytest.approx(10.0)


def test_count_cells_that_are_not_integers_name_row_and_column(tmp_path):
    path = _rows_file(tmp_path, [_row(), _row(tp_size="inf")])
    with pytest.raises(ValueError, match=r"row 2, column tp_size: 'inf' is not an integer >= 0"):
        scoring.load_rows(path)
    path = _rows_file(tmp_path, [_row(silicon_ttft_ms="abc")])
    with pytest.raises(ValueError, match=r"row 1, column silicon_ttft_ms: 'abc' is not a number"):
        scoring.load_rows(path)


def test_a_binary_rows_file_is_refused_by_name(tmp_path):
    path = tmp_path / "rows.csv"
    path.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\xff\xfe")
    with pytest.raises(ValueError, match="is not UTF-8 text"):
        scoring.load_rows(path)
    path.write_bytes(b"id,model_path\x00,x\n1,2,3\n")
    with pytest.raises(ValueError) as err:
        scoring.load_rows(path)
    assert str(path) in str(err.value)


# -------------------------------------------------------------------- JSON output is JSON


def test_accuracy_figures_with_empty_groups_dump_as_null_not_nan():
    rows = [_row(id="a"), _row(id="b", system="b200_sxm")]
    preds = [scoring.Prediction("a", ttft=88.0, tpot=9.5), scoring.Prediction("b")]
    figures = scoring.score(rows, preds)
    text = dumps(figures, indent=2)
    assert "NaN" not in text and "Infinity" not in text
    doc = json.loads(text)
    assert doc["by_group"]["b200_sxm vllm agg"]["ttft_mdape"] is None
    assert doc["ttft_mdape"] == pytest.approx(10.0)


def test_nulls_for_nan_walks_nested_values():
    assert nulls_for_nan({"a": [1.0, float("nan"), (float("-inf"), "x")], "b": 2}) == \
        {"a": [1.0, None, [None, "x"]], "b": 2}


# --------------------------------------------------------------------------- output paths


def test_an_output_path_is_checked_before_the_work(tmp_path):
    rows = tmp_path / "rows.csv"
    rows.write_text("x\n", encoding="utf-8")
    with pytest.raises(ValueError, match="is the --rows file: writing it would overwrite the input"):
        check_output_path("--out", str(tmp_path / "." / "rows.csv"), {"--rows": str(rows)})
    with pytest.raises(ValueError, match="does not exist; create it first"):
        check_output_path("--out", tmp_path / "missing" / "out.json")
    with pytest.raises(ValueError, match="is a folder"):
        check_output_path("--out", tmp_path)
    assert check_output_path("--out", tmp_path / "out.json", {"--rows": rows}) == \
        str(tmp_path / "out.json")


def test_a_symlinked_output_onto_the_input_is_refused(tmp_path):
    rows = tmp_path / "rows.csv"
    rows.write_text("x\n", encoding="utf-8")
    link = tmp_path / "link.json"
    link.symlink_to(rows)
    with pytest.raises(ValueError, match="would overwrite the input"):
        check_output_path("--out", link, {"--rows": rows})


# --------------------------------------------------------------------------- data import


def _source_tree(tmp_path: Path) -> Path:
    src = tmp_path / "src"
    (src / "systems" / "data").mkdir(parents=True)
    (src / "model_configs").mkdir()
    (src / "systems" / "h200_sxm.yaml").write_text("gpu: {}\n", encoding="utf-8")
    (src / "model_configs" / "a--b_config.json").write_text("{}", encoding="utf-8")
    return src


def test_data_import_copies_regular_files_only_and_says_what_it_skipped(tmp_path):
    from aic.data_import import import_data

    src = _source_tree(tmp_path)
    (src / "systems" / "zero.yaml").symlink_to("/dev/zero")
    (src / "systems" / "linked.yaml").symlink_to(src / "systems" / "h200_sxm.yaml")
    (src / "systems" / "data" / "loop").symlink_to(src / "systems")
    os.mkfifo(src / "systems" / "pipe.yaml")
    with pytest.raises(ValueError, match="4 entries cannot be imported"):  # issue 45
        import_data(src, tmp_path / "dest")
    summary = import_data(src, tmp_path / "dest", allow_partial=True)
    assert summary.files == 2
    skipped = dict(summary.skipped)
    assert skipped["systems/zero.yaml"] == "a symbolic link (links are not followed)"
    assert skipped["systems/linked.yaml"] == "a symbolic link (links are not followed)"
    assert skipped["systems/data/loop"] == "a symbolic link to a folder (links are not followed)"
    assert skipped["systems/pipe.yaml"] == "not a regular file (a device, FIFO or socket)"
    assert not (tmp_path / "dest" / "systems" / "zero.yaml").exists()
    assert (tmp_path / "dest" / "systems" / "h200_sxm.yaml").read_text() == "gpu: {}\n"


def test_data_import_bounds_the_size_of_a_file(tmp_path, monkeypatch):
    from aic import data_import

    src = _source_tree(tmp_path)
    (src / "systems" / "data" / "big.parquet").write_bytes(b"x" * 5000)
    monkeypatch.setattr(data_import, "MAX_FILE_BYTES", 4096)
    summary = data_import.import_data(src, tmp_path / "dest", allow_partial=True)
    assert dict(summary.skipped)["systems/data/big.parquet"] == \
        "larger than the 4096-byte bound of a data file"
    assert not (tmp_path / "dest" / "systems" / "data" / "big.parquet").exists()


# ----------------------------------------------------- native checks, reached without the front end


def _native_estimate(request: dict):
    return _aic.serving_estimate(json.dumps(request))


@pytest.mark.parametrize("request_json, message", [
    ({"mode": "static", "isl": 0, "osl": 64, "batch_size": 1},
     "isl must be a positive integer (input tokens per request), got 0"),
    ({"mode": "static", "isl": 128, "osl": 64, "batch_size": 1, "stride": 0},
     "stride must be a positive integer"),
    ({"mode": "agg", "isl": 128, "osl": 64, "batch_size": 4, "free_gpu_memory_fraction": -0.1},
     "free_gpu_memory_fraction must be a finite number in (0, 1]"),
    ({"mode": "disagg", "isl": 128, "osl": 64, "prefill": {"batch_size": 1, "num_workers": 1},
      "decode": {"batch_size": 0, "num_workers": 1}},
     "decode_batch_size must be a positive integer (requests per worker), got 0"),
    ({"mode": "agg", "isl": 128, "osl": 64, "batch_size": 4, "calibrated": True, "concurrency": 0},
     "concurrency must be a positive integer (requests in flight), got 0"),
])
def test_the_native_request_refuses_what_the_front_end_refuses(request_json, message):
    with pytest.raises(ValueError) as err:
        _native_estimate(request_json)
    assert message in str(err.value)


def test_nan_in_a_native_request_says_json_has_no_nan():
    with pytest.raises(ValueError, match="field nextn_accepted: .*NaN and Infinity are not JSON "
                                         "numbers"):
        _aic.serving_estimate('{"mode": "agg", "isl": 128, "osl": 64, "nextn_accepted": NaN}')


def test_calibration_constants_out_of_their_physical_range_are_refused():
    doc = {"version": 1, "groups": {"*/*/*": {"tpot_scale": 1.0, "tpot_overhead_ms": 0.0,
                                              "ttft_scale": 1.0, "ttft_queue": 1.5,
                                              "ttft_overhead_ms": 0.0}}}
    with pytest.raises(ValueError, match=r"ttft_queue must be a finite number in \[0, 1\], got 1.5"):
        _aic.check_calibration(json.dumps(doc))
    doc["groups"]["*/*/*"]["ttft_queue"] = 1.0
    _aic.check_calibration(json.dumps(doc))


# ------------------------------------------------------------------ the edges still answer


def test_values_at_the_edge_of_their_range_still_answer():
    from aic.serving import estimate

    out = estimate("Qwen/Qwen3-8B", "h200_sxm", mode="agg", backend_name="trtllm", isl=1024,
                   osl=64, batch_size=8, max_seq_len=1024 + 64, free_gpu_memory_fraction=1.0)
    assert out["result"]["ttft"] > 0
    out = estimate("Qwen/Qwen3-8B", "h200_sxm", mode="static", backend_name="vllm", isl=128,
                   osl=1, batch_size=1, stride=1)
    assert out["result"]["tpot"] == 0.0


def test_a_pipeline_as_deep_as_the_model_compiles():
    from aic import compile_engine

    assert compile_engine("Qwen/Qwen3-8B", "h200_sxm", "vllm", pp_size=36)


def test_engine_counts_take_ints_and_refuse_bools_everywhere():
    from aic import AicEngine, compile_engine

    engine = AicEngine.from_spec(compile_engine("Qwen/Qwen3-8B", "h200_sxm", "vllm"))
    assert engine.predict_prefill_latency(1, 128) > 0
    assert engine.run_static(1, 1, 128, 8, stride=4)[2] > 0
    for call in (lambda: engine.predict_decode_latency(1, 128, True),
                 lambda: engine.run_static(1, False, 128, 8),
                 lambda: engine.mixed_step_latency(128, True, 128, 8)):
        with pytest.raises(TypeError, match="a bool is not a count"):
            call()
    # the text signatures keep their plain defaults
    assert "prefix=0" in AicEngine.predict_prefill_latency.__text_signature__


def test_reference_accepted_zeros_of_run_static_keep_the_reference_answer():
    """``stride 0`` and ``beam_width 0`` behave as 1 and ``osl <= 1`` has no decode, as in the
    reference (spec 40 §5.1, E3): accepted on purpose (docs/errors.md)."""
    from aic import AicEngine, compile_engine

    engine = AicEngine.from_spec(compile_engine("Qwen/Qwen3-8B", "h200_sxm", "vllm"))
    assert engine.run_static(1, 1, 128, 100, stride=0) == engine.run_static(1, 1, 128, 100, stride=1)
    assert engine.run_static(1, 0, 128, 100) == engine.run_static(1, 1, 128, 100)
    assert engine.run_static(1, 1, 128, 0)[1] == 0.0


def test_validation_helpers_show_numbers_as_the_engine_does():
    assert show(float("nan")) == "NaN" and show(1e308) == "1e308" and show(-1.0) == "-1"
    with pytest.raises(ValueError, match=r"^isl must be a positive integer \(x\), got -1$"):
        positive_int("isl", -1, "x")
    with pytest.raises(ValueError, match="must be at most 4294967295"):
        positive_int("isl", 2**32, "x")
    with pytest.raises(TypeError, match="got 1.5"):
        positive_int("isl", 1.5, "x")
