"""The ``aic-compile`` CLI (click's CliRunner)."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import GOLDENS, REPO, family_not_built, native_available

from aic.cli import main

SUMMARY = re.compile(r"^(\d+) passed, (\d+) failed$")


def _run(*args, env=None):
    return CliRunner().invoke(main, [str(a) for a in args], env=env, catch_exceptions=False)


def test_help_lists_commands():
    result = _run("--help")
    assert result.exit_code == 0
    for command in ("compile", "estimate", "breakdown", "memory", "parity", "data"):
        assert command in result.output


# ------------------------------------------------------------------------------ no native


#: The summary of the tp3 compile-error case: the compile check, plus the memory check, which
#: needs the native module (it fails without it).
TP3_SUMMARY = "2 passed, 0 failed" if native_available() else "1 passed, 1 failed"


def test_parity_compile_error_case_without_native():
    result = _run("parity", "--goldens", GOLDENS, "--family", "dense", "--case", "tp3-pp1-dp1")
    lines = result.output.strip().splitlines()
    assert lines[-1] == TP3_SUMMARY
    assert result.exit_code == (0 if native_available() else 1)


def test_parity_counts_unimplemented_family_as_failures(tmp_path):
    """A golden case re-pointed at a family the reference has and aic does not build yet."""
    with open(GOLDENS / "moe.json", encoding="utf-8") as fh:
        doc = json.load(fh)
    case = next(c for c in doc["cases"]
                if c["id"] == "moe/Qwen3-30B-A3B/h200_sxm/vllm/tp1-pp1-dp1-mtp1-ep1")
    case["compile"]["model"] = "moonshotai/Kimi-K3"
    (tmp_path / "moe.json").write_text(json.dumps({**doc, "cases": [case]}))
    with family_not_built("KIMIK3"):
        result = _run("parity", "--goldens", tmp_path / "moe.json", "--family", "moe",
                      "--case", "moe/Qwen3-30B-A3B/h200_sxm/vllm/tp1-pp1-dp1-mtp1-ep1")
    match = SUMMARY.match(result.output.strip().splitlines()[-1])
    assert match and int(match.group(1)) == 0 and int(match.group(2)) > 1
    assert result.exit_code == 1
    assert "not supported by aic yet" in result.output


def test_parity_json_mode():
    result = _run("parity", "--goldens", GOLDENS / "dense.json", "--case", "tp3-pp1-dp1", "--json")
    lines = result.output.strip().splitlines()
    assert lines[-1] == TP3_SUMMARY
    report = json.loads(lines[0])
    passed, failed = (2, 0) if native_available() else (1, 1)
    assert report["passed"] == passed
    assert report["families"] == {"dense": {"passed": passed, "failed": failed}}


def test_parity_no_cases_is_a_failure():
    result = _run("parity", "--goldens", GOLDENS, "--case", "no-such-case")
    assert result.output.strip().splitlines()[-1] == "0 passed, 0 failed"
    assert result.exit_code == 1


def test_unknown_system_through_global_systems_path(tmp_path):
    (tmp_path / "other.yaml").write_text("gpu: {}\n", encoding="utf-8")  # a systems folder
    result = _run("--systems-path", tmp_path, "compile", "Qwen/Qwen3-8B", "-s", "h200_sxm",
                  "-b", "trtllm", "-o", tmp_path / "x.aicspec")
    assert result.exit_code != 0
    assert "unknown system 'h200_sxm'" in result.output


def test_systems_path_env(tmp_path):
    (tmp_path / "other.yaml").write_text("gpu: {}\n", encoding="utf-8")
    result = _run("compile", "Qwen/Qwen3-8B", "-s", "h200_sxm", "-b", "trtllm",
                  "-o", tmp_path / "x.aicspec", env={"AIC_SYSTEMS_PATH": str(tmp_path)})
    assert result.exit_code != 0 and "unknown system" in result.output


def test_an_empty_systems_folder_is_named_with_what_it_should_hold(tmp_path):
    result = _run("--systems-path", tmp_path, "compile", "Qwen/Qwen3-8B", "-s", "h200_sxm",
                  "-b", "trtllm", "-o", tmp_path / "x.aicspec")
    assert result.exit_code == 2 and "holds no system description" in result.output


def test_compile_bad_input_is_a_clean_error(tmp_path):
    result = _run("compile", "Qwen/Qwen3-8B", "-s", "h200_sxm", "-b", "vllm", "--tp", "3",
                  "-o", tmp_path / "x")
    assert result.exit_code == 1
    assert "num_heads 32 should be divisible by tp_size 3" in result.output


@pytest.mark.skipif(native_available(), reason="checks the message shown without aic._aic")
def test_compile_without_native_explains(tmp_path):
    result = _run("compile", "Qwen/Qwen3-8B", "-s", "h200_sxm", "-b", "trtllm",
                  "-o", tmp_path / "x.aicspec")
    assert result.exit_code == 1 and "aic._aic" in result.output


# --------------------------------------------------------------------------- data import


def test_data_import_reproduces_checksums(tmp_path):
    """Import the repo's own data into a temp folder: SHA256SUMS comes out byte for byte."""
    result = _run("data", "import", REPO / "data", "--dest", tmp_path / "data")
    assert result.exit_code == 0, result.output
    ours = (tmp_path / "data" / "SHA256SUMS").read_bytes()
    assert ours == (REPO / "data" / "SHA256SUMS").read_bytes()
    assert (tmp_path / "data" / "NOTICE").read_bytes() == (REPO / "data" / "NOTICE").read_bytes()
    # importing again over an existing destination gives the same result
    result = _run("data", "import", REPO / "data", "--dest", tmp_path / "data")
    assert result.exit_code == 0
    assert (tmp_path / "data" / "SHA256SUMS").read_bytes() == ours


def test_data_import_from_a_systems_folder(tmp_path):
    result = _run("data", "import", REPO / "data" / "systems", "--dest", tmp_path)
    assert result.exit_code == 0, result.output
    assert (tmp_path / "SHA256SUMS").read_bytes() == (REPO / "data" / "SHA256SUMS").read_bytes()


def _aic_data_source() -> Path | None:
    candidates = [os.environ.get("AIC_DATA_SRC"), REPO.parent / "shared" / "aic-data"]
    for candidate in candidates:
        if candidate and (Path(candidate) / "systems").is_dir():
            return Path(candidate)
    return None


@pytest.mark.skipif(_aic_data_source() is None,
                    reason="no aic-data folder (set AIC_DATA_SRC to one)")
def test_data_import_from_aic_data(tmp_path):
    result = _run("data", "import", _aic_data_source(), "--dest", tmp_path)
    assert result.exit_code == 0, result.output
    assert (tmp_path / "SHA256SUMS").read_bytes() == (REPO / "data" / "SHA256SUMS").read_bytes()


def test_data_import_rejects_other_folders(tmp_path):
    result = _run("data", "import", tmp_path, "--dest", tmp_path / "out")
    assert result.exit_code != 0 and "neither an aic-data folder" in result.output


# ---------------------------------------------------------------------------- with native


@pytest.fixture(scope="module")
def native():
    return pytest.importorskip("aic._aic", reason="native module aic._aic is not built yet")


def test_compile_writes_a_spec_that_decodes(native, tmp_path):
    out = tmp_path / "qwen.aicspec"
    result = _run("compile", "Qwen/Qwen3-8B", "-s", "h200_sxm", "-b", "trtllm", "--tp", "2",
                  "-o", out)
    assert result.exit_code == 0, result.output
    from aic import AicEngine
    from aic.paths import systems_path

    engine = AicEngine.from_spec(out.read_bytes(), systems_path=str(systems_path()))
    assert engine.predict_prefill_latency(1, 1024, 0) > 0


def test_compile_json(native, tmp_path):
    out = tmp_path / "qwen.json"
    result = _run("compile", "Qwen/Qwen3-8B", "-s", "h200_sxm", "-b", "vllm", "--json", "-o", out)
    assert result.exit_code == 0, result.output
    spec = json.loads(out.read_text())
    assert spec["schema_version"] == 15
    assert spec["engine"]["backend_version"] == "0.24.0"
    assert len(spec["context_ops"]) == 14


def _one_line_error(result, *needles):
    assert result.exit_code != 0
    assert "Traceback" not in result.output
    for needle in needles:
        assert needle in result.output, result.output


def test_compile_output_errors_are_one_line(native, tmp_path):
    base = ("compile", "Qwen/Qwen3-8B", "-s", "h200_sxm", "-b", "vllm", "--json", "-o")
    _one_line_error(_run(*base, tmp_path / "missing" / "x.json"), "does not exist", "--output")
    blocker = tmp_path / "file"
    blocker.write_text("x")
    _one_line_error(_run(*base, blocker / "x.json"), "does not exist (or a part of it is a file)")
    _one_line_error(_run(*base, tmp_path), "is a directory")
    config = tmp_path / "model"
    config.mkdir()
    (config / "config.json").write_text((REPO / "data/model_configs/Qwen--Qwen3-8B_config.json")
                                        .read_text())
    result = _run("compile", config, "-s", "h200_sxm", "-b", "vllm", "--json", "-o",
                  config / "config.json")
    _one_line_error(result, "is the model config being compiled")
    if os.geteuid() != 0:  # root writes through file permissions
        locked = tmp_path / "locked.json"
        locked.write_text("")
        locked.chmod(0o444)
        _one_line_error(_run(*base, locked), "choose a writable path")


def test_spec_flag_refuses_devices_and_huge_files(native, tmp_path):
    _one_line_error(_run("estimate", "--spec", "/dev/zero"), "not a regular file", "--spec")
    huge = tmp_path / "huge.json"
    with open(huge, "wb") as fh:
        fh.truncate((64 << 20) + 1)
    _one_line_error(_run("estimate", "--spec", huge), "more than the 67108864-byte limit")


def test_integer_flags_beyond_u32_name_the_flag(native):
    _one_line_error(_run("estimate", "Qwen/Qwen3-8B", "-s", "h200_sxm", "-b", "vllm",
                         "--batch", str(2**32)), "--batch")
    _one_line_error(_run("estimate", "Qwen/Qwen3-8B", "-s", "h200_sxm", "-b", "vllm",
                         "--tp", str(2**32)), "--tp")


ESTIMATE_KEYS = {
    "batch", "isl", "osl", "prefix", "ctx_tokens", "gen_tokens", "ttft_ms", "tpot_ms",
    "first_decode_step_ms", "decode_ms", "e2e_ms", "decode_step_ms", "mixed_step_ms",
    "prefill_tokens_per_s", "decode_tokens_per_s", "tokens_per_s_per_user",
    "output_tokens_per_s", "decode_step_tokens_per_s", "mixed_step_tokens_per_s", "errors",
}


def test_estimate_json(native):
    result = _run("estimate", "Qwen/Qwen3-32B", "-s", "h200_sxm", "-b", "vllm", "--tp", "2",
                  "--batch", "8", "--isl", "2048", "--osl", "128", "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert set(data) == ESTIMATE_KEYS
    assert data["errors"] == {}
    assert data["ttft_ms"] > 0 and data["tpot_ms"] > 0
    assert data["tpot_ms"] == pytest.approx(data["decode_ms"] / 127)
    assert data["e2e_ms"] == pytest.approx(data["ttft_ms"] + data["decode_ms"])


def test_estimate_table(native):
    result = _run("estimate", "Qwen/Qwen3-8B", "-s", "h200_sxm", "-b", "trtllm")
    assert result.exit_code == 0, result.output
    assert "TTFT" in result.output and "tokens/s" in result.output


def test_breakdown(native):
    result = _run("breakdown", "Qwen/Qwen3-8B", "-s", "h200_sxm", "-b", "trtllm",
                  "--batch", "4", "--isl", "2048", "--osl", "128", "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    for phase in ("context", "generation"):
        ops = data[phase]["ops"]
        assert [o["latency_ms"] for o in ops] == sorted((o["latency_ms"] for o in ops), reverse=True)
        assert sum(o["share"] for o in ops) == pytest.approx(1.0)
    text = _run("breakdown", "Qwen/Qwen3-8B", "-s", "h200_sxm", "-b", "trtllm")
    assert text.exit_code == 0 and "context:" in text.output and "generation:" in text.output


def test_parity_small_set(native):
    result = _run("parity", "--goldens", GOLDENS, "--family", "dense",
                  "--case", "dense/Qwen3-8B/h200_sxm/trtllm/tp1-pp1-dp1", "--json")
    lines = result.output.strip().splitlines()
    match = SUMMARY.match(lines[-1])
    assert match
    report = json.loads(lines[0])
    passed, failed = int(match.group(1)), int(match.group(2))
    assert passed + failed == 2 + 20  # the compile and memory checks + 20 queries
    assert report["kinds"]["memory"] == {"passed": 1, "failed": 0}
    assert result.exit_code == (1 if failed else 0)
    assert not [f for f in report["failures"] if f["kind"] == "compile"]


@pytest.mark.skipif(not native_available(), reason="needs the native module")
def test_cp_flag_reaches_compile_and_memory(tmp_path):
    out = tmp_path / "cp.json"
    result = _run("compile", "Qwen/Qwen3-32B", "--system", "h200_sxm", "--backend", "sglang",
                  "--cp", "2", "--json", "-o", out)
    assert result.exit_code == 0, result.output
    spec = json.loads(out.read_text())
    assert spec["engine"]["cp_size"] == 2
    assert "context_cp_all_gather" in out.read_text()
    result = _run("estimate", "Qwen/Qwen3-32B", "--system", "h200_sxm", "--backend", "sglang",
                  "--cp", "4", "--isl", "131072", "--osl", "256")
    assert result.exit_code == 0, result.output
    result = _run("estimate", "Qwen/Qwen3-32B", "--system", "h200_sxm", "--backend", "trtllm",
                  "--cp", "2")
    assert result.exit_code != 0 and "Context parallelism (cp_size=2) is not supported" in result.output
    result = _run("memory", "Qwen/Qwen3-32B", "--system", "h200_sxm", "--backend", "sglang",
                  "--cp", "2", "--json")
    assert json.loads(result.output)["total_kv_size_tokens"] == 244386


def test_version_option_is_looked_up_on_demand():
    import subprocess
    import sys

    result = CliRunner().invoke(main, ["--version"])
    assert result.exit_code == 0
    assert re.fullmatch(r"aic-compile \S+\n", result.output)
    # importing the CLI does not read the distribution metadata (a large share of start-up)
    code = "import sys, aic.cli; print('importlib.metadata' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


# ------------------------------------------------------------------------ lazy command group


def test_help_lists_every_command_with_its_one_line_help():
    """``--help`` lists each command of the lazy group with the one-line help the command
    carries once loaded: the list cannot drift from the commands."""
    import click

    from aic.cli import COMMANDS

    result = _run("--help")
    listing = result.output.split("Commands:\n", 1)[1].splitlines()
    assert [line.split()[0] for line in listing if line.strip()] == sorted(COMMANDS)
    for name in COMMANDS:
        command = main.get_command(click.Context(main), name)
        assert isinstance(command, click.Command) and command.name == name
        short = command.get_short_help_str(limit=200)
        assert short == COMMANDS[name][2] and len(short) <= 65, name
        assert any(line.split(None, 1) == [name, short] for line in listing), (name, listing)


_IMPORTED = r"""
import json, sys
from aic.cli import main
try:
    main(sys.argv[1:], prog_name="aic-compile")
except SystemExit:
    pass
print(json.dumps(sorted(m for m in sys.modules if m.startswith("aic."))))
"""


def _imported_by(*args) -> set:
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", _IMPORTED, *args], capture_output=True,
                         text=True, check=True)
    return set(json.loads(out.stdout.strip().splitlines()[-1]))


def test_a_command_imports_only_its_own_module():
    command_modules = {"aic.cli.accuracy", "aic.cli.data", "aic.cli.engine", "aic.cli.memory",
                       "aic.cli.parity", "aic.cli.serving", "aic.cli.support", "aic.cli.sweep"}
    assert _imported_by("--help") & command_modules == set()
    sweep = _imported_by("sweep", "--help")
    assert sweep & command_modules == {"aic.cli.sweep"}
    # the sweep's help needs neither the compiler nor the serving level
    assert not any(m.startswith(("aic.compiler", "aic.serving")) for m in sweep), sorted(sweep)
    assert _imported_by("data", "--help") & command_modules == {"aic.cli.data"}
    assert _imported_by("estimate", "--help") & command_modules == {"aic.cli.engine",
                                                                    "aic.cli.serving"}


def test_python_dash_m_runs_the_command_line():
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-m", "aic.cli", "--help"], capture_output=True,
                         text=True, check=True)
    assert "sweep" in out.stdout and "Usage:" in out.stdout
