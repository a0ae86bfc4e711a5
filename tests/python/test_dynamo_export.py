"""``aic-compile export dynamo`` proven through NVIDIA Dynamo 1.6.1's own replay: Dynamo's mocker,
reading only the exported ``engine_args.json`` and timing NPZ files, agrees with
``aic-compile replay`` of the same deployment and workload within 2 % on TTFT mean / p50 / p90 /
p99, TPOT mean / p50 and output throughput.

Dynamo is installed from PyPI (pinned below) into a throwaway virtual environment: under pytest's
temporary folder, or the folder ``AIC_DYNAMO_VENV`` names (reused when it already has the pinned
Dynamo; ``scripts/test-all.sh`` points it into its scratch folder). Dynamo runs in a subprocess
of that venv (``dynamo_runner.py``), never in this process. When the install fails the
tests skip, unless ``AIC_REQUIRE_DYNAMO=1`` (``scripts/test-all.sh`` sets it): then they fail.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import requires_replay

pytestmark = requires_replay()

HERE = Path(__file__).resolve().parent
RUNNER = HERE / "dynamo_runner.py"
#: Dynamo itself, without its dependency list (one of its dependencies does not install
#: everywhere); the replay needs only the packages of DYNAMO_DEPS.
DYNAMO_PINS = ("ai-dynamo==1.6.1", "ai-dynamo-runtime==1.6.1")
DYNAMO_DEPS = ("numpy==2.4.6", "scipy==1.17.1", "msgspec==0.23.0", "pydantic==2.13.5",
               "pyyaml==6.0.4", "scikit-learn==1.9.1", "prometheus-client==0.26.0")
TOLERANCE = 0.02
#: Requests and requests in flight of every compared replay.
REQUESTS, CONCURRENCY = 256, 32


def _has_dynamo(python: Path) -> bool:
    if not python.exists():
        return False
    probe = ("import importlib.metadata as m, dynamo.replay.api; "
             "assert m.version('ai-dynamo') == '1.6.1'")
    return subprocess.run([str(python), "-c", probe], capture_output=True).returncode == 0


def _install(venv: Path) -> str:
    """Creates ``venv`` and installs the pinned Dynamo; returns "" or what went wrong."""
    steps = [
        [sys.executable, "-m", "venv", str(venv)],
        [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", "--no-deps",
         *DYNAMO_PINS],
        [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", *DYNAMO_DEPS],
    ]
    for step in steps:
        done = subprocess.run(step, capture_output=True, text=True)
        if done.returncode != 0:
            return f"{' '.join(step[:6])} ...: {(done.stderr or done.stdout)[-2000:]}"
    return ""


@pytest.fixture(scope="module")
def dynamo_python(tmp_path_factory) -> Path:
    """The Python of a venv with Dynamo 1.6.1."""
    venv = Path(os.environ.get("AIC_DYNAMO_VENV") or tmp_path_factory.mktemp("dynamo") / "venv")
    python = venv / "bin" / "python"
    if not _has_dynamo(python):
        problem = _install(venv) or ("" if _has_dynamo(python) else
                                     "Dynamo installed but dynamo.replay.api does not import")
        if problem:
            message = f"cannot install Dynamo 1.6.1 from PyPI into {venv}: {problem}"
            if os.environ.get("AIC_REQUIRE_DYNAMO") == "1":
                pytest.fail(message)
            pytest.skip(message)
    return python


def _run_dynamo(python: Path, *args) -> dict:
    """``dynamo_runner.py ARGS`` in the Dynamo venv (without this process's PYTHONPATH)."""
    done = subprocess.run([str(python), str(RUNNER), *[str(a) for a in args]],
                          capture_output=True, text=True,
                          env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


def _dynamo_replay(python: Path, folder: Path) -> dict:
    return _run_dynamo(python, "replay", folder, REQUESTS, CONCURRENCY)


def _figures_of_dynamo(summary: dict) -> dict:
    return {"TTFT mean": summary["mean_ttft_ms"], "TTFT p50": summary["median_ttft_ms"],
            "TTFT p90": summary["p90_ttft_ms"], "TTFT p99": summary["p99_ttft_ms"],
            "TPOT mean": summary["mean_tpot_ms"], "TPOT p50": summary["median_tpot_ms"],
            "output tok/s": summary["output_throughput_tok_s"]}


def _figures_of_aic(report: dict) -> dict:
    return {"TTFT mean": report["ttft_ms"]["mean"], "TTFT p50": report["ttft_ms"]["p50"],
            "TTFT p90": report["ttft_ms"]["p90"], "TTFT p99": report["ttft_ms"]["p99"],
            "TPOT mean": report["tpot_ms"]["mean"], "TPOT p50": report["tpot_ms"]["p50"],
            "output tok/s": report["throughput"]["output_tokens_per_s"]}


def _assert_agree(aic: dict, dynamo: dict) -> None:
    lines = [f"{k:<13} aic {aic[k]:10.3f}  dynamo {dynamo[k]:10.3f}  "
             f"{(dynamo[k] - aic[k]) / aic[k] * 100:+6.2f} %" for k in aic]
    print("\n".join(lines))
    off = [line for k, line in zip(aic, lines)
           if abs(dynamo[k] - aic[k]) > TOLERANCE * abs(aic[k])]
    assert not off, "Dynamo's replay and aic's differ by more than 2 %:\n" + "\n".join(lines)


def test_dense_agg_through_the_cli(dynamo_python, tmp_path):
    """The issue's case: Qwen3-32B on h200_sxm, vLLM, tp 2, isl 2048 / osl 256, 256 requests
    at 32 in flight, exported and replayed with the CLI only."""
    from aic.cli import main

    layout = ["Qwen/Qwen3-32B", "-s", "h200_sxm", "-b", "vllm", "--tp", "2"]
    out = tmp_path / "qwen3-32b"
    done = CliRunner().invoke(main, ["export", "dynamo", *layout, "--isl", "2048", "--osl",
                                     "256", "--out", str(out)])
    assert done.exit_code == 0, done.output
    replayed = CliRunner().invoke(main, ["replay", *layout, "--isl", "2048", "--osl", "256",
                                         "--requests", str(REQUESTS), "--concurrency",
                                         str(CONCURRENCY), "--json"])
    assert replayed.exit_code == 0, replayed.output
    aic = _figures_of_aic(json.loads(replayed.output)["report"])
    _assert_agree(aic, _figures_of_dynamo(_dynamo_replay(dynamo_python, out)))


@pytest.mark.parametrize("model, layout", [
    # disagg: two 1-GPU prefill workers feeding one tp-2 decode worker
    ("Qwen/Qwen3-32B", dict(mode="disagg", prefill_tp_size=1, decode_tp_size=2,
                            prefill_workers=2, decode_workers=1)),
    # MoE with expert parallelism and attention data parallelism (two scheduler ranks)
    ("Qwen/Qwen3-30B-A3B", dict(tp_size=1, attention_dp_size=2, moe_tp_size=1,
                                moe_ep_size=2)),
], ids=["dense-disagg", "moe-ep-dp"])
def test_python_export_agrees(dynamo_python, tmp_path, model, layout):
    from aic.export.dynamo import export_dynamo
    from aic.serving.plan import Workload
    from aic.serving.replay import layout_deployment, replay_deployment

    deployment = layout_deployment(model, "h200_sxm", "vllm", **layout)
    workload = Workload(isl=2048, osl=256, concurrency=CONCURRENCY)
    export_dynamo(deployment, workload, tmp_path / "export")
    aic = _figures_of_aic(replay_deployment(deployment, workload, requests=REQUESTS).report)
    _assert_agree(aic, _figures_of_dynamo(_dynamo_replay(dynamo_python, tmp_path / "export")))


def test_planner_profile_loads_in_dynamo(dynamo_python, tmp_path):
    """Dynamo's planner loaders read the exported profile folder, in its NPZ form and in its
    ConfigMap JSON form, into the same forward-pass metrics: one prefill request of each
    length at aic's TTFT, and decode batches whose KV tokens are the context × the batch."""
    from aic.export.dynamo import export_dynamo
    from aic.serving.plan import Workload
    from aic.serving.replay import layout_deployment

    deployment = layout_deployment("Qwen/Qwen3-32B", "h200_sxm", "vllm", tp_size=2)
    result = export_dynamo(deployment, Workload(isl=2048, osl=256), tmp_path / "export")
    loaded = _run_dynamo(dynamo_python, "planner", tmp_path / "export" / "profile")
    assert loaded["npz"] == loaded["json"]
    prefill, decode = loaded["npz"]["prefill"], loaded["npz"]["decode"]
    assert len(prefill) >= 3 and len(decode) >= 3
    assert 2048 in [p["sum_prefill_tokens"] for p in prefill]
    assert all(p["num_prefill_requests"] == 1 and p["wall_time"] > 0 for p in prefill)
    capacity = result.setups["agg"].capacity_tokens
    for d in decode:
        assert 1 <= d["num_decode_requests"] <= 256
        assert 0 < d["sum_decode_kv_tokens"] <= capacity
        assert d["wall_time"] > 0
