"""The installed wheel works on its own: the package and its native module import from
site-packages, the shipped data is found inside the package, the ``aic-compile`` console script
runs (``replay`` and ``export dynamo`` included: the default wheel has the replay), and a
handful of golden cases agree with the reference through the installed module."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

import aic
from aic import AicEngine, compile_engine
from aic.parity import runner as parity
from aic import _aic

#: One case per golden family, plus a second dense backend: compile + every recorded query.
GOLDEN_CASES = (
    "dense/Qwen3-32B/h200_sxm/vllm/tp2-pp1-dp1",
    "dense/Qwen3-8B/h200_sxm/trtllm/tp1-pp1-dp1",
    "moe/Qwen3-30B-A3B/h200_sxm/vllm/tp1-pp1-dp1-mtp1-ep1",
    "mla/DeepSeek-V3/h200_sxm/vllm/tp8-pp1-dp1-mtp1-ep8",
    "edge/Qwen3-32B/h200_sxm/vllm/tp2-pp1-dp1/db=SOL",
)

PACKAGE_DIR = Path(aic.__file__).resolve().parent


def _site_dirs() -> set[Path]:
    paths = sysconfig.get_paths()
    return {Path(paths["purelib"]).resolve(), Path(paths["platlib"]).resolve()}


def test_runs_in_a_virtual_environment_outside_the_source_tree(source_tree):
    assert sys.prefix != sys.base_prefix, "the smoke suite must run in its own virtual environment"
    cwd = Path.cwd().resolve()
    if source_tree is not None:
        assert source_tree not in (cwd, *cwd.parents), f"running inside the source tree: {cwd}"


def test_package_and_native_module_import_from_site_packages(source_tree):
    native = Path(_aic.__file__).resolve()
    assert PACKAGE_DIR.parent in _site_dirs(), f"aic imported from {PACKAGE_DIR}, not site-packages"
    assert native.parent == PACKAGE_DIR, f"aic._aic imported from {native}"
    if source_tree is not None:
        for path in (PACKAGE_DIR, native):
            assert source_tree not in path.parents, f"{path} is inside the source tree {source_tree}"


def test_shipped_data_is_found_inside_the_package():
    assert "AIC_SYSTEMS_PATH" not in os.environ, "unset AIC_SYSTEMS_PATH: it would hide the shipped data"
    packaged = PACKAGE_DIR / "data" / "systems"
    assert (packaged / "h200_sxm.yaml").is_file()
    assert (PACKAGE_DIR / "data" / "model_configs").is_dir()
    assert Path(_aic.default_systems_path()).resolve() == packaged.resolve()


def test_aic_compile_estimate_console_script(tmp_path):
    script = Path(sysconfig.get_path("scripts")) / "aic-compile"
    assert script.is_file(), f"console script missing: {script}"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "AIC_SYSTEMS_PATH")}
    done = subprocess.run(
        [str(script), "estimate", "Qwen/Qwen3-32B", "--system", "h200_sxm", "--backend", "vllm",
         "--tp", "2", "--batch", "8", "--isl", "2048", "--osl", "256", "--json"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    result = json.loads(done.stdout)
    assert result["errors"] == {}
    engine = AicEngine.from_spec(compile_engine("Qwen/Qwen3-32B", "h200_sxm", "vllm", tp_size=2))
    assert result["ttft_ms"] == engine.predict_prefill_latency(8, 2048)
    assert result["decode_ms"] == engine.predict_decode_latency(8, 2048, 256)


def test_default_wheel_has_the_replay_and_the_dynamo_export(tmp_path):
    """``pip install .`` builds the replay (pyproject.toml's maturin features): ``aic-compile
    replay`` and ``aic-compile export dynamo`` work from the console script."""
    assert _aic.replay_available(), "the wheel was built without the cargo feature `replay`"
    script = Path(sysconfig.get_path("scripts")) / "aic-compile"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "AIC_SYSTEMS_PATH")}
    layout = ["Qwen/Qwen3-32B", "--system", "h200_sxm", "--backend", "vllm", "--tp", "2"]
    done = subprocess.run(
        [str(script), "replay", *layout, "--concurrency", "4", "--requests", "8", "--isl", "512",
         "--osl", "16", "--json"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert json.loads(done.stdout)["report"]["requests"]["completed"] == 8
    done = subprocess.run(
        [str(script), "export", "dynamo", *layout, "--isl", "512", "--osl", "16", "--out",
         "dyn"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    args = json.loads((tmp_path / "dyn" / "engine_args.json").read_text())
    assert args["engine"]["timing_model"]["config"]["path"] == str(tmp_path / "dyn" / "timing.npz")


@pytest.fixture(scope="module")
def golden_cases(goldens_dir) -> dict[str, dict]:
    wanted = set(GOLDEN_CASES)
    return {c["id"]: c for c in parity.load_cases(goldens_dir) if c["id"] in wanted}


@pytest.mark.parametrize("case_id", GOLDEN_CASES)
def test_golden_case_agrees_with_the_reference(golden_cases, case_id):
    assert case_id in golden_cases, f"golden case {case_id} not found"
    report = parity.run_parity([golden_cases[case_id]])
    failures = [(c.kind, c.detail) for c in report.checks if not c.passed]
    assert not failures, failures[:5]
    assert report.passed >= 10, report.summary_line()
