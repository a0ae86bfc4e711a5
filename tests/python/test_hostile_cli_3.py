"""Every ``aic-compile`` command against hostile input (issue 36, class 4): a bad path, a full
output device (``/dev/full``) and garbage input. None may show a traceback: each ends with one
``Error:`` line and a non-zero exit status (1 for a failure, click's 2 for a usage error), and
an output file is checked before the work starts.

The commands run in a child process (``python -m aic.cli``) so that ``/dev/full`` is a real
file descriptor and the interpreter's own exit-time flush is part of what is checked.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("aic._aic", reason="needs the native module (pip install .)")

import aic  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
# The commands run in subprocesses on the same `aic` this process imported (the installed wheel
# in CI, the source tree in a development checkout with a built extension).
SRC = Path(aic.__file__).resolve().parents[1]
FULL = Path("/dev/full")
pytestmark = pytest.mark.skipif(not FULL.exists(), reason="needs /dev/full (Linux)")

ROW_HEADER = ("id,model_path,system,backend,backend_version,precision,mode,isl,osl,batch_size,"
              "tp_size,silicon_ttft_ms,silicon_tpot_ms")


def _rows(tmp: Path, n: int = 2) -> Path:
    lines = [ROW_HEADER] + [f"r{i},Qwen/Qwen3-8B,h200_sxm,vllm,0.24.0,bf16,agg,1024,128,{8 * (i + 1)},1,"
                            f"{80 + i},{9.5 + i}" for i in range(n)]
    path = tmp / "rows.csv"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _garbage(tmp: Path) -> dict:
    """Binary garbage as a spec, a model folder, a rows file, a goldens file, a data source."""
    blob = bytes(range(256)) * 4
    spec = tmp / "garbage.aicspec"
    spec.write_bytes(blob)
    model = tmp / "model"
    model.mkdir()
    (model / "config.json").write_bytes(blob)
    rows = tmp / "garbage.csv"
    rows.write_bytes(blob)
    goldens = tmp / "garbage.json"
    goldens.write_bytes(blob)
    return {"spec": spec, "model": model, "rows": rows, "goldens": goldens}


def _run(args: list[str], stdout=None, cwd=None) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(SRC) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env.pop("AIC_TRACEBACK", None)
    return subprocess.run([sys.executable, "-m", "aic.cli", *args], stdout=stdout or subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, env=env, cwd=cwd, timeout=600)


def _assert_one_line_error(res: subprocess.CompletedProcess, *fragments: str) -> None:
    err = res.stderr
    assert res.returncode in (1, 2), f"exit {res.returncode}: {err}"
    assert "Traceback" not in err and "Exception ignored" not in err, err
    lines = [line for line in err.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("Error")]
    assert len(errors) == 1 and lines[-1] == errors[0], err
    for fragment in fragments:
        assert fragment in errors[0], err


MODEL = ["Qwen/Qwen3-8B", "-s", "h200_sxm", "-b", "vllm"]


def _bad_path_cases(tmp: Path) -> list[tuple[str, list[str], str]]:
    missing = str(tmp / "missing" / "out")
    rows = str(_rows(tmp))
    return [
        ("compile", ["compile", *MODEL, "-o", missing + ".aicspec"], "does not exist"),
        ("estimate", ["estimate", "--spec", missing + ".aicspec"], "does not exist"),
        ("estimate-mode", ["estimate", *MODEL, "--mode", "static", "--calibrated",
                           "--calibration", missing + ".json"], "calibrat"),
        ("breakdown", ["breakdown", "--spec", missing + ".aicspec"], "does not exist"),
        ("memory", ["memory", *MODEL, "--systems-path", missing], "is not a folder"),
        ("parity", ["parity", "--goldens", missing], "does not exist"),
        ("support", ["support", "Qwen/Qwen3-8B", "--systems-path", missing], "is not a folder"),
        ("sweep", ["sweep", "Qwen/Qwen3-8B", "-s", "h100_sxm", "-b", "vllm", "--gpus", "1",
                   "--plot", missing + ".png"], "does not exist"),
        ("accuracy", ["accuracy", "--rows", rows, "--out", missing + ".csv"], "does not exist"),
        ("calibrate", ["calibrate", "--rows", rows, "--out", missing + ".json"], "does not exist"),
        ("calibrate-onto-rows", ["calibrate", "--rows", rows, "--out", rows],
         "would overwrite the input"),
        ("data-import", ["data", "import", missing], "does not exist"),
        ("data-show", ["data", "show", "--systems-path", missing], "is not a folder"),
    ]


def test_every_command_with_a_bad_path_fails_in_one_line(tmp_path):
    for name, args, fragment in _bad_path_cases(tmp_path):
        res = _run(args)
        _assert_one_line_error(res, fragment)
        assert not (tmp_path / "missing").exists(), name


def _full_device_cases(tmp: Path) -> list[tuple[str, list[str]]]:
    rows = str(_rows(tmp))
    return [
        ("compile", ["compile", *MODEL, "--json", "-o", "/dev/full"]),
        ("estimate", ["estimate", *MODEL, "--json"]),
        ("estimate-mode", ["estimate", *MODEL, "--mode", "agg", "--json"]),
        ("breakdown", ["breakdown", *MODEL, "--json"]),
        ("memory", ["memory", *MODEL, "--json"]),
        ("parity", ["parity", "--goldens", str(REPO / "goldens" / "edge.json"), "--case",
                    "edge/Qwen3-30B-A3B-FP8/h200_sxm/vllm/tp4-pp1-dp1-mtp4-ep1", "--json"]),
        ("support", ["support", "Qwen/Qwen3-8B", "-s", "h200_sxm", "-b", "vllm", "--json"]),
        ("sweep", ["sweep", "Qwen/Qwen3-8B", "-s", "h100_sxm", "-b", "vllm", "--gpus", "1",
                   "--isl", "1000", "--osl", "100", "--json"]),
        ("accuracy", ["accuracy", "--rows", rows, "--json"]),
        ("accuracy-out", ["accuracy", "--rows", rows, "--out", "/dev/full"]),
        ("calibrate", ["calibrate", "--rows", rows, "--out", str(tmp / "c.json"), "--json"]),
        ("calibrate-out", ["calibrate", "--rows", rows, "--out", "/dev/full"]),
        ("data-show", ["data", "show", "--json"]),
    ]


def test_every_command_writing_to_a_full_device_fails_in_one_line(tmp_path):
    for name, args in _full_device_cases(tmp_path):
        with open(FULL, "w") as full:
            res = _run(args, stdout=full)
        _assert_one_line_error(res)
        assert "No space left on device" in res.stderr or "not a regular file" in res.stderr, \
            f"{name}: {res.stderr}"
    assert FULL.is_char_device()  # an output path never replaces a device


def test_every_command_with_garbage_input_fails_in_one_line(tmp_path):
    g = _garbage(tmp_path)
    src = tmp_path / "src"
    src.write_bytes(b"\x00garbage")
    for name, args in [
        ("compile", ["compile", str(g["model"]), "-s", "h200_sxm", "-b", "vllm"]),
        ("estimate", ["estimate", "--spec", str(g["spec"])]),
        ("breakdown", ["breakdown", "--spec", str(g["spec"])]),
        ("memory", ["memory", str(g["model"]), "-s", "h200_sxm", "-b", "vllm"]),
        ("parity", ["parity", "--goldens", str(g["goldens"])]),
        ("support", ["support", str(g["model"]), "-s", "h200_sxm", "-b", "vllm"]),
        ("sweep", ["sweep", str(g["model"]), "-s", "h100_sxm", "-b", "vllm", "--gpus", "1"]),
        ("accuracy", ["accuracy", "--rows", str(g["rows"])]),
        ("calibrate", ["calibrate", "--rows", str(g["rows"]), "--out", str(tmp_path / "c.json")]),
        ("data-import", ["data", "import", str(src)]),
        ("estimate-nan", ["estimate", *MODEL, "--mode", "agg", "--free-gpu-memory-fraction",
                          "nan"]),
        ("parity-rtol", ["parity", "--goldens", str(REPO / "goldens" / "edge.json"), "--rtol",
                         "nan"]),
    ]:
        res = _run(args, cwd=tmp_path)
        _assert_one_line_error(res)
        assert not (tmp_path / "c.json").exists(), name


def test_a_utf16_rows_file_and_a_missing_column_name_the_file(tmp_path):
    rows = _rows(tmp_path)
    utf16 = tmp_path / "utf16.csv"
    utf16.write_bytes(rows.read_text(encoding="utf-8").encode("utf-16"))
    _assert_one_line_error(_run(["accuracy", "--rows", str(utf16)]), str(utf16), "not UTF-8")
    short = tmp_path / "short.csv"
    short.write_text(rows.read_text(encoding="utf-8").replace(",silicon_tpot_ms", ""),
                     encoding="utf-8")
    _assert_one_line_error(_run(["accuracy", "--rows", str(short)]), "silicon_tpot_ms")
    empty = tmp_path / "empty.csv"
    empty.write_text("", encoding="utf-8")
    _assert_one_line_error(_run(["accuracy", "--rows", str(empty)]), "is empty")


def test_goldens_whose_cases_are_not_a_list_name_the_file(tmp_path):
    bad = tmp_path / "g.json"
    bad.write_text(json.dumps({"format": "aic-goldens/1", "cases": {"id": 1}}), encoding="utf-8")
    _assert_one_line_error(_run(["parity", "--goldens", str(bad)]), "'cases' must be a list")
    bad.write_text(json.dumps({"format": "aic-goldens/1", "cases": [{"id": "x"}]}),
                   encoding="utf-8")
    _assert_one_line_error(_run(["parity", "--goldens", str(bad)]), "lacks 'compile'")


def test_the_serving_estimate_refuses_cp_instead_of_dropping_it():
    res = _run(["estimate", "Qwen/Qwen3-8B", "-s", "h200_sxm", "-b", "sglang", "--mode", "agg",
                "--cp", "4", "--isl", "32768", "--batch", "2"])
    _assert_one_line_error(res, "--cp 4 with --mode")
    res = _run(["estimate", "Qwen/Qwen3-8B", "-s", "h200_sxm", "-b", "vllm", "--mode", "agg",
                "--cp", "4"])
    _assert_one_line_error(res, "--cp 4 with --mode")


def test_support_with_an_unknown_model_is_an_error_not_a_matrix():
    res = _run(["support", "acme/NoSuchModel-1B", "-s", "h200_sxm", "-b", "vllm"])
    _assert_one_line_error(res, "acme/NoSuchModel-1B")
    assert res.stdout == ""


def test_accuracy_json_with_an_empty_group_is_valid_json(tmp_path):
    rows = tmp_path / "rows.csv"
    rows.write_text(ROW_HEADER + "\n"
                    "a,Qwen/Qwen3-8B,h200_sxm,vllm,0.24.0,bf16,agg,1024,128,8,1,80,9.5\n"
                    "b,Qwen/Qwen3-8B,h200_sxm,vllm,0.24.0,bf16,agg,1024,128,8,1,inf,9.5\n",
                    encoding="utf-8")
    res = _run(["accuracy", "--rows", str(rows), "--json", "--allow-partial"])  # issue 45
    assert res.returncode == 0, res.stderr
    assert "NaN" not in res.stdout
    doc = json.loads(res.stdout)
    assert doc["predicted"] == 1 and doc["rows"] == 2
