"""Hostile inputs, round four (issue 45): answers that mislead without crashing.

Four classes, each checked on the command line (a child process, ``python -m aic.cli``, so the
exit status and stderr are the real ones) and through the Python surface:

1. **Partial work.** A command over many inputs (``data import``, ``accuracy``, ``calibrate``,
   ``support``, ``data show``) that cannot process some of them lists each one (``skipped
   <input>: <reason>``) and fails with one ``Error:`` line, unless ``--allow-partial``
   (``allow_partial=True``) accepts the rest; ``data import``, ``accuracy`` and ``calibrate``
   fail before any work (the destination of an import is left as it was).
2. **Errors name their input.** A calibration file that is binary, not UTF-8 or not a regular
   file names the file; a NaN in the native sweep or estimate request names the JSON field.
3. **Options without effect are refused.** ``--nextn-accepted`` without ``--nextn`` (sweep and
   ``estimate --mode``), the serving options without ``--mode``, compile options next to
   ``--spec``, options a serving mode does not use, ``support --only-failures --json``,
   ``accuracy --jobs`` without a replay, ``data show --no-shared-layer`` without a system; and
   inputs that make every sweep candidate infeasible (``prefix >= isl``) are refused up front.
4. **Empty or foreign systems folders** are errors that say what a systems folder holds.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("aic._aic", reason="needs the native module (pip install .)")

import aic  # noqa: E402
from aic import _aic, paths  # noqa: E402
from aic.errors import PartialResultError  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
SRC = Path(aic.__file__).resolve().parents[1]
SHIPPED_SYSTEMS = Path(paths.systems_dir())

ROW_HEADER = ("id,model_path,system,backend,backend_version,precision,mode,isl,osl,batch_size,"
              "tp_size,silicon_ttft_ms,silicon_tpot_ms")
SWEEP = ["sweep", "Qwen/Qwen3-8B", "-s", "h100_sxm", "-b", "vllm", "--gpus", "1", "--isl", "1000",
         "--osl", "100"]
MODEL = ["Qwen/Qwen3-8B", "-s", "h200_sxm", "-b", "vllm"]


def _run(args: list[str], cwd=None, env_extra: dict | None = None) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(SRC) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env.pop("AIC_TRACEBACK", None)
    env.pop("AIC_SYSTEMS_PATH", None)
    env.update(env_extra or {})
    return subprocess.run([sys.executable, "-m", "aic.cli", *args], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, env=env, cwd=cwd, timeout=600)


def _error_line(res: subprocess.CompletedProcess, *fragments: str, status=(1, 2)) -> str:
    """The one ``Error:`` line of a failed command (the last line of stderr), checked to hold
    every fragment; no traceback."""
    err = res.stderr
    assert res.returncode in status, f"exit {res.returncode}: {err}"
    assert "Traceback" not in err, err
    lines = [line for line in err.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("Error")]
    assert len(errors) == 1 and lines[-1] == errors[0], err
    for fragment in fragments:
        assert fragment in errors[0], f"{fragment!r} not in: {errors[0]}"
    return errors[0]


def _rows(tmp: Path, measurements: list[tuple[str, str]], name: str = "rows.csv") -> Path:
    lines = [ROW_HEADER] + [f"r{i},Qwen/Qwen3-8B,h200_sxm,vllm,0.24.0,bf16,agg,1024,128,"
                            f"{8 * (i + 1)},1,{ttft},{tpot}"
                            for i, (ttft, tpot) in enumerate(measurements)]
    path = tmp / name
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _systems_copy(tmp: Path, *extra: tuple[str, str]) -> Path:
    """A systems folder with the shipped h200_sxm description (its data linked, not copied)
    plus ``extra`` ``(file name, text)`` files."""
    root = tmp / "systems"
    root.mkdir()
    for name in ("h200_sxm.yaml", "query_versions.yaml"):
        if (SHIPPED_SYSTEMS / name).exists():
            shutil.copy(SHIPPED_SYSTEMS / name, root / name)
    (root / "data").mkdir()
    (root / "data" / "h200_sxm").symlink_to(SHIPPED_SYSTEMS / "data" / "h200_sxm")
    for name, text in extra:
        (root / name).write_text(text, encoding="utf-8")
    return root


# ------------------------------------------------------------------ 1. partial work: import


def _import_source(tmp: Path, hostile: str) -> Path:
    """An aic-data folder: one system description, its data file and a model config, plus one
    hostile entry among the system files (a symbolic link or a FIFO)."""
    src = tmp / "src"
    (src / "systems" / "data" / "x1").mkdir(parents=True)
    (src / "model_configs").mkdir()
    (src / "systems" / "x1.yaml").write_text("gpu: {}\n", encoding="utf-8")
    (src / "systems" / "data" / "x1" / "table.csv").write_text("a,b\n1,2\n", encoding="utf-8")
    (src / "model_configs" / "org--m_config.json").write_text("{}", encoding="utf-8")
    (src / "systems" / "__init__.py").write_text("", encoding="utf-8")  # not data: passed over
    if hostile == "symlink":
        (src / "systems" / "x2.yaml").symlink_to(src / "systems" / "x1.yaml")
    elif hostile == "fifo":
        os.mkfifo(src / "systems" / "x2.yaml")
    return src


def _dest(tmp: Path) -> Path:
    dest = tmp / "dest"
    (dest / "systems").mkdir(parents=True)
    (dest / "systems" / "old.yaml").write_text("old\n", encoding="utf-8")
    return dest


@pytest.mark.parametrize("hostile", ["symlink", "fifo"])
def test_a_partial_import_fails_and_leaves_the_destination(tmp_path, hostile):
    src, dest = _import_source(tmp_path, hostile), _dest(tmp_path)
    res = _run(["data", "import", str(src), "--dest", str(dest)])
    _error_line(res, "1 entry cannot be imported", "systems/x2.yaml", "nothing was imported",
                "--allow-partial", status=(1,))
    assert "skipped systems/x2.yaml: " in res.stderr
    assert sorted(p.name for p in dest.iterdir()) == ["systems"]
    assert sorted(p.name for p in (dest / "systems").iterdir()) == ["old.yaml"]


def test_an_accepted_partial_import_lists_what_it_left_out(tmp_path):
    src, dest = _import_source(tmp_path, "fifo"), _dest(tmp_path)
    res = _run(["data", "import", str(src), "--dest", str(dest), "--allow-partial"])
    assert res.returncode == 0, res.stderr
    assert "skipped systems/x2.yaml: not a regular file" in res.stderr
    assert "warning: 1 entries not imported (--allow-partial)" in res.stderr
    assert (dest / "systems" / "x1.yaml").is_file() and not (dest / "systems" / "x2.yaml").exists()
    assert not (dest / "systems" / "old.yaml").exists()
    assert "systems/data/x1/table.csv" in (dest / "SHA256SUMS").read_text(encoding="utf-8")


def test_a_clean_import_needs_no_flag(tmp_path):
    src, dest = _import_source(tmp_path, "none"), _dest(tmp_path)
    res = _run(["data", "import", str(src), "--dest", str(dest)])
    assert res.returncode == 0 and res.stderr == "", res.stderr
    assert "imported 3 files" in res.stdout


def test_import_data_raises_the_partial_import_from_python(tmp_path):
    from aic.data_import import PartialImportError, import_data

    src, dest = _import_source(tmp_path, "symlink"), _dest(tmp_path)
    with pytest.raises(PartialImportError) as info:
        import_data(src, dest)
    assert isinstance(info.value, PartialResultError) and isinstance(info.value, ValueError)
    assert info.value.skipped == [("systems/x2.yaml", "a symbolic link (links are not followed)")]
    assert (dest / "systems" / "old.yaml").is_file()
    summary = import_data(src, dest, allow_partial=True)
    assert summary.files == 3 and [p for p, _ in summary.skipped] == ["systems/x2.yaml"]


# ------------------------------------------------- 1. partial work: rows, matrix, listing


def test_accuracy_with_unusable_measurements_fails_before_estimating(tmp_path):
    rows = _rows(tmp_path, [("80", "9.5"), ("inf", "9.5")])
    out = tmp_path / "per_row.csv"
    res = _run(["accuracy", "--rows", str(rows), "--out", str(out)])
    _error_line(res, str(rows), "1 of 2 rows", "row 2 (id r1)", "silicon_ttft_ms",
                "--allow-partial", status=(1,))
    assert "skipped row 2 (id r1): silicon_ttft_ms must be a finite number of ms > 0" in res.stderr
    assert res.stdout == "" and not out.exists()
    res = _run(["accuracy", "--rows", str(rows), "--json", "--allow-partial"])
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["predicted"] == 1
    assert "warning: 1 rows not scored (--allow-partial)" in res.stderr


def test_calibrate_with_unusable_measurements_fails_before_fitting(tmp_path):
    rows = _rows(tmp_path, [("80", "9.5"), ("-5", "9.5"), ("81", "nan")])
    out = tmp_path / "c.json"
    res = _run(["calibrate", "--rows", str(rows), "--out", str(out)])
    _error_line(res, "2 of 3 rows", "row 2 (id r1)", "row 3 (id r2)", status=(1,))
    assert not out.exists()
    res = _run(["calibrate", "--rows", str(rows), "--few-shot", "1"])
    _error_line(res, "2 of 3 rows", status=(1,))


def test_the_rows_check_and_the_fit_refuse_partial_rows_from_python(tmp_path):
    from aic.accuracy import calibration_fit, scoring

    rows = scoring.load_rows(_rows(tmp_path, [("80", "9.5"), ("0", "9.5")]))
    assert scoring.unusable_rows(rows) == [
        ("row 2 (id r1)", "silicon_ttft_ms must be a finite number of ms > 0, got 0")]
    with pytest.raises(PartialResultError, match=r"rows\.csv: 1 of 2 rows"):
        scoring.check_rows_usable(rows, tmp_path / "rows.csv")
    assert len(scoring.check_rows_usable(rows, "rows", allow_partial=True)) == 1
    with pytest.raises(PartialResultError, match="1 of 2 rows"):
        calibration_fit.fit_rows(rows, source="rows.csv")


def test_support_with_an_unreadable_system_prints_the_matrix_then_fails(tmp_path):
    root = _systems_copy(tmp_path, ("broken.yaml", "gpu: [unclosed\n"))
    args = ["support", "Qwen/Qwen3-8B", "-s", "broken", "-b", "vllm", "--systems-path", str(root)]
    res = _run(args)
    _error_line(res, "1 input(s) could not be read", "system broken", "--allow-partial",
                status=(1,))
    assert "unreadable-system" in res.stdout and "skipped system broken: " in res.stderr
    res = _run(args + ["--allow-partial", "--json"])
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    assert doc["counts"] == {"unreadable-system": 1}


def test_support_matrix_marks_the_unreadable_system_from_python(tmp_path):
    from aic.serving.support import support_matrix, unreadable_inputs

    root = _systems_copy(tmp_path, ("broken.yaml", "gpu: [unclosed\n"))
    cells = support_matrix(["Qwen/Qwen3-8B"], ["broken"], ["vllm"], systems_path=str(root))
    assert [c.status for c in cells] == ["unreadable-system"]
    assert [i for i, _ in unreadable_inputs(cells)] == ["system broken"]


def test_data_show_with_an_unreadable_system_lists_it_then_fails(tmp_path):
    root = _systems_copy(tmp_path, ("broken.yaml", "gpu: [unclosed\n"))
    res = _run(["data", "show", "--systems-path", str(root)])
    _error_line(res, "1 of 2 system descriptions cannot be read", "broken.yaml", status=(1,))
    assert "h200_sxm" in res.stdout and "unreadable" in res.stdout
    res = _run(["data", "show", "--systems-path", str(root), "--allow-partial"])
    assert res.returncode == 0 and "warning: 1 system descriptions unreadable" in res.stderr


# ------------------------------------------------------------- 2. errors name their input


@pytest.mark.parametrize("content", [bytes(range(256)) * 4, "{}".encode("utf-16")])
def test_a_binary_calibration_file_names_the_file(tmp_path, content):
    from aic.serving import load_calibration

    bad = tmp_path / "constants.json"
    bad.write_bytes(content)
    with pytest.raises(ValueError, match=r"calibration constants .*constants\.json: not UTF-8"):
        load_calibration(bad)
    rows = _rows(tmp_path, [("80", "9.5")])
    res = _run(["accuracy", "--rows", str(rows), "--calibrated", "--calibration", str(bad)])
    _error_line(res, str(bad), "not UTF-8 text", status=(1,))
    res = _run(["estimate", *MODEL, "--mode", "agg", "--calibrated", "--calibration", str(bad)])
    _error_line(res, str(bad), "not UTF-8 text", status=(1,))


def test_a_calibration_fifo_is_refused_not_waited_on(tmp_path):
    from aic.serving import load_calibration

    fifo = tmp_path / "constants.json"
    os.mkfifo(fifo)
    with pytest.raises(ValueError, match="not a regular file"):
        load_calibration(fifo)


def _sweep_request(**changes) -> str:
    request = {"total_gpus": 8, "isl": 1024, "osl": 128, "ttft": 2000.0, "tpot": 30.0,
               "agg": [], **changes}
    return json.dumps(request)  # NaN and inf written as Python writes them: NaN, Infinity


@pytest.mark.parametrize("field", ["ttft", "tpot", "request_latency", "nextn_accepted",
                                   "free_gpu_memory_fraction"])
@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_a_non_finite_number_in_the_native_sweep_request_names_its_field(field, value):
    with pytest.raises(ValueError) as info:
        _aic.serving_sweep(_sweep_request(**{field: value}), str(SHIPPED_SYSTEMS))
    message = str(info.value)
    assert message.startswith(f"invalid sweep request JSON: field {field}: "), message
    assert "NaN and Infinity are not JSON numbers" in message


def test_a_mistyped_field_of_the_native_requests_is_named():
    with pytest.raises(ValueError, match="field isl: invalid value: integer `-1`, expected u32"):
        _aic.serving_sweep(_sweep_request(isl=-1), str(SHIPPED_SYSTEMS))
    with pytest.raises(ValueError, match="invalid serving request JSON: field osl: expected value"):
        _aic.serving_estimate('{"mode": "agg", "isl": 128, "osl": NaN}', str(SHIPPED_SYSTEMS))


def test_a_nan_in_the_native_replay_request_names_its_field():
    if not _aic.replay_available():
        pytest.skip("aic._aic built without the cargo feature `replay`")
    with pytest.raises(ValueError, match=r"invalid replay request JSON: field "
                                         r"options\.request_overhead_ms: expected value"):
        _aic.replay_json('{"options": {"request_overhead_ms": NaN}}', None)


# --------------------------------------------------- 3. options without effect, infeasible


def test_nextn_accepted_without_nextn_is_refused_by_every_parser():
    res = _run([*SWEEP, "--nextn-accepted", "1.5"])  # the click-free path
    _error_line(res, "--nextn-accepted 1.5 without --nextn", status=(1,))
    res = _run(["--systems-path", str(SHIPPED_SYSTEMS), *SWEEP, "--nextn-accepted", "1.5"])
    _error_line(res, "--nextn-accepted 1.5 without --nextn", status=(1,))  # through click
    res = _run(["estimate", *MODEL, "--mode", "agg", "--nextn-accepted", "1.5"])
    _error_line(res, "--nextn-accepted 1.5 without --nextn", status=(2,))


def test_a_prefix_covering_the_prompt_is_refused_up_front():
    res = _run([*SWEEP, "--prefix", "1000"])
    _error_line(res, "prefix must be less than isl", "got prefix 1000 with isl 1000", status=(1,))
    assert "feasible" not in res.stderr
    from aic.serving.sweep import sweep

    with pytest.raises(ValueError, match="got prefix 1200 with isl 1000"):
        sweep("Qwen/Qwen3-8B", 1, "h100_sxm", "vllm", isl=1000, osl=100, prefix=1200)
    with pytest.raises(ValueError, match="prefix must be less than isl"):
        _aic.serving_sweep(_sweep_request(prefix=1024), str(SHIPPED_SYSTEMS))


@pytest.mark.parametrize("args, fragment", [
    (["estimate", *MODEL, "--stride", "8"], "--stride applies to the serving estimate"),
    (["estimate", *MODEL, "--calibrated"], "--calibrated applies to the serving estimate"),
    (["estimate", *MODEL, "--mode", "agg", "--stride", "8"], "--stride applies to the static"),
    (["estimate", *MODEL, "--mode", "static", "--free-gpu-memory-fraction", "0.5"],
     "--free-gpu-memory-fraction applies to agg and disagg"),
    (["estimate", *MODEL, "--mode", "agg", "--max-seq-len", "4096"],
     "--max-seq-len applies to agg with trtllm"),
    (["estimate", *MODEL, "--mode", "static", "--ctx-tokens", "512"],
     "--ctx-tokens is the agg context-token budget"),
    (["estimate", *MODEL, "--mode", "agg", "--prefill-workers", "2"],
     "--prefill-workers applies to --mode disagg"),
    (["estimate", *MODEL, "--mode", "agg", "--concurrency", "8"],
     "--concurrency applies to the calibrated estimate"),
    (["support", "Qwen/Qwen3-8B", "-s", "h200_sxm", "-b", "vllm", "--json", "--only-failures"],
     "--only-failures filters the text table"),
    (["data", "show", "--no-shared-layer"], "--no-shared-layer applies to the tables"),
    (["replay", *MODEL, "--concurrency", "2", "--requests", "4", "--prefill-workers", "2"],
     "--prefill-workers applies to --mode disagg"),
    (["replay", *MODEL, "--mode", "disagg", "--concurrency", "2", "--requests", "4",
      "--workers", "2"], "--workers is the agg replica count"),
    (["replay", *MODEL, "--concurrency", "2", "--requests", "4", "--trace-block-size", "64"],
     "--trace-block-size applies to --trace"),
])
def test_an_option_without_effect_is_a_usage_error(args, fragment):
    res = _run(args)
    _error_line(res, fragment, status=(2,))
    assert res.stdout == ""


def test_compile_options_next_to_a_spec_file_are_refused(tmp_path):
    spec = tmp_path / "q.aicspec"
    spec.write_bytes(aic.compile_engine("Qwen/Qwen3-8B", "h200_sxm", "vllm"))
    res = _run(["estimate", "--spec", str(spec), "--tp", "2"])
    _error_line(res, "--tp applies when compiling MODEL", status=(2,))
    res = _run(["estimate", "--spec", str(spec), "--isl", "512"])
    assert res.returncode == 0, res.stderr


def test_accuracy_jobs_without_a_replay_is_refused(tmp_path):
    rows = _rows(tmp_path, [("80", "9.5")])
    res = _run(["accuracy", "--rows", str(rows), "--jobs", "2"])
    _error_line(res, "--jobs 2 applies to --replay / --combined", status=(2,))


# ------------------------------------------------------ 4. empty or foreign systems folders


@pytest.mark.parametrize("command", [
    ["data", "show"], ["support", "Qwen/Qwen3-8B"], ["memory", *MODEL],
])
@pytest.mark.parametrize("content", ["empty", "model_configs"])
def test_an_empty_or_foreign_systems_folder_says_what_one_holds(tmp_path, command, content):
    folder = tmp_path / "folder"
    folder.mkdir()
    if content == "model_configs":
        (folder / "org--m_config.json").write_text("{}", encoding="utf-8")
    res = _run([*command, "--systems-path", str(folder)])
    _error_line(res, "holds no system description", "<system>.yaml", "data/systems",
                status=(2,))
    assert res.stdout == ""


def test_a_folder_of_yaml_that_are_not_systems_is_an_error(tmp_path):
    folder = tmp_path / "folder"
    folder.mkdir()
    (folder / "notes.yaml").write_text("title: not a system\n", encoding="utf-8")
    res = _run(["data", "show", "--systems-path", str(folder)])
    _error_line(res, "holds no system description", "notes.yaml", "data/systems", status=(1,))
    assert res.stdout == ""


def test_an_empty_systems_folder_in_the_environment_is_named(tmp_path):
    res = _run(["data", "show"], env_extra={"AIC_SYSTEMS_PATH": str(tmp_path)})
    _error_line(res, "AIC_SYSTEMS_PATH", "holds no system description", status=(2,))
