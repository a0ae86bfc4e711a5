"""The serving level (spec 50) through the public Python surface and the CLI: worked examples
of the spec, the argument checks in the reference's order, the sweep's tables and picks."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("aic._aic", reason="needs the native module (pip install .)")

from click.testing import CliRunner  # noqa: E402

from aic.cli import main  # noqa: E402
from aic.serving import estimate  # noqa: E402
from aic.serving.sweep import cp_sizes, parallel_layouts, sweep  # noqa: E402

GOLDENS = Path(__file__).resolve().parents[2] / "goldens"


def _golden(case_id: str) -> dict:
    doc = json.loads((GOLDENS / "serving.json").read_text())
    return next(c for c in doc["cases"] if c["id"] == case_id)


def test_a4_context_heavy_trtllm_uses_python_floor_division():
    # spec 50 A4: g = int(64 // 1.28) = 49, all 64 iterations mixed, qf capped at 4.
    out = estimate("Qwen/Qwen3-32B", "h200_sxm", mode="agg", backend_name="trtllm", isl=8000,
                   osl=50, batch_size=64, tp_size=4)
    sched = out["per_ops"]["scheduling"]
    assert sched["mix_decode_requests"] == 49.0
    assert sched["num_genonly_steps"] == 0.0
    assert out["result"]["ttft"] == sched["mix_step_latency_ms"] * 4
    assert out["result"]["raw"]["balance_score"] == 1.28


def test_d4_mtp_disagg_projects_decode():
    golden = _golden("dis_dsv3_b200_sgl_mtp")
    out = estimate(**golden["kwargs"])
    assert out["result"]["tpot"] == 20.517
    assert out["result"]["raw"]["concurrency"] == 256


def test_static_oom_is_a_warning():
    golden = _golden("st_q8_h100_vllm_tp1_b128_kvover")
    out = estimate(**golden["kwargs"])
    assert out["result"]["kv_cache_warning"].startswith("OOM: the model 'Qwen/Qwen3-8B'")
    assert out["memory"]["total"] == 286.755859375


def test_validation_order_mode_before_backend():
    with pytest.raises(ValueError, match="Unsupported estimate mode"):
        estimate("Qwen/Qwen3-32B", "h200_sxm", mode="offline", backend_name="tgi")


def test_moe_layouts_of_eight_gpus():
    # spec 50 §9.2: gpt-oss-120b / Qwen3-30B-A3B on 8 GPUs: 19 layouts per backend rule.
    assert len(parallel_layouts(True, "trtllm", 8)) == 19
    assert len(parallel_layouts(True, "vllm", 8)) == 19
    assert [l["tp_size"] for l in parallel_layouts(False, "vllm", 4)] == [1, 2, 4]


def test_context_parallel_layouts_on_sglang():
    # spec 43 §8 / 50 §9.2: agg and prefill roles of CP families try cp 1, 2, 4, 8 on sglang
    # (tp outermost, cp innermost, tp·cp a GPU count within the budget); decode and other
    # backends keep cp 1. Tuples with tp > 1 and cp > 1 are listed: their compile refuses them.
    assert cp_sizes("LLAMA", "sglang", True) == (1, 2, 4, 8)
    assert cp_sizes("LLAMA", "sglang", False) == (1,)
    assert cp_sizes("LLAMA", "vllm", True) == (1,)
    assert cp_sizes("QWEN35", "sglang", True) == (1,)
    dense = parallel_layouts(False, "sglang", 4, cp_sizes("LLAMA", "sglang", True))
    assert [(l["tp_size"], l.get("cp_size", 1)) for l in dense] == \
        [(1, 1), (1, 2), (1, 4), (2, 1), (2, 2), (4, 1)]
    moe = parallel_layouts(True, "sglang", 4, (1, 2, 4, 8))
    for l in moe:
        cp = l.get("cp_size", 1)
        assert l["attention_dp_size"] * l["tp_size"] * cp == l["moe_tp_size"] * l["moe_ep_size"]
    assert {"tp_size": 1, "pp_size": 1, "attention_dp_size": 1, "moe_tp_size": 1,
            "moe_ep_size": 4, "cp_size": 4} in moe
    assert parallel_layouts(True, "sglang", 4) == [l for l in moe if "cp_size" not in l]


def test_sglang_sweep_rows_of_cp_layouts():
    out = sweep("Qwen/Qwen3-8B", 4, "h100_sxm", "sglang", isl=2000, osl=500, ttft=1000.0,
                tpot=20.0, request_latency=12000.0)
    cp_rows = [r for r in out["candidates"]["agg"] if r["cp"] > 1]
    assert cp_rows
    for r in cp_rows:
        assert r["parallel"].endswith(f"cp{r['cp']}") and r["tp"] == 1
        assert r["num_total_gpus"] == r["cp"]
        assert r["tokens/s/gpu"] == pytest.approx(r["tokens/s"] / r["cp"], abs=1e-3)


def test_cli_estimate_mode_json():
    golden = _golden("agg_q32_h200_vllm_tp2_b32")
    result = CliRunner().invoke(main, ["estimate", "Qwen/Qwen3-32B", "-s", "h200_sxm", "-b", "vllm",
                                       "--tp", "2", "--isl", "2048", "--osl", "256", "--batch",
                                       "32", "--mode", "agg", "--json"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.output)
    assert out["result"]["raw"] == golden["result"]["raw"]


def test_cli_estimate_without_mode_is_the_step_estimate():
    result = CliRunner().invoke(main, ["estimate", "Qwen/Qwen3-32B", "-s", "h200_sxm", "-b", "vllm",
                                       "--tp", "2", "--json"])
    assert result.exit_code == 0, result.output
    assert "ttft_ms" in result.output


def test_cli_sweep_tables_and_plot():
    result = CliRunner().invoke(main, ["sweep", "Qwen/Qwen3-8B", "-s", "h100_sxm", "-b", "vllm",
                                       "--gpus", "2", "--isl", "1000", "--osl", "200"])
    assert result.exit_code == 0, result.output
    assert "agg: best configs" in result.output and "disagg: best configs" in result.output
    assert "chosen:" in result.output and "tokens/s/user ->" in result.output


def test_sweep_is_deterministic():
    a = sweep("Qwen/Qwen3-8B", 2, "h100_sxm", "vllm", isl=1000, osl=200)
    b = sweep("Qwen/Qwen3-8B", 2, "h100_sxm", "vllm", isl=1000, osl=200)
    assert a == b


def test_prefetch_tables_warms_a_database_and_never_raises_for_missing_data():
    from aic import paths
    from aic._native import native

    root = str(paths.systems_path(None))
    assert native().prefetch_tables(root, "h100_sxm", "sglang", "0.5.14", True) is True
    assert native().prefetch_tables(root, "no_such_system", "sglang", "0.5.14", True) is False
    with pytest.raises(ValueError):
        native().prefetch_tables(root, "h100_sxm", "no_such_backend", "0.5.14", True)
    # a sweep on the warmed database gives what it gives without the prefetch
    a = sweep("Qwen/Qwen3-8B", 2, "h100_sxm", "sglang", isl=1000, osl=200)
    b = sweep("Qwen/Qwen3-8B", 2, "h100_sxm", "sglang", isl=1000, osl=200)
    assert a == b
