"""The KV-cache memory surface: ``aic.estimate_kv_cache``, the native functions behind it and
``aic-compile memory`` (goldens README §3, issue 7)."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

import aic
from aic.cli import main

pytest.importorskip("aic._aic", reason="native module aic._aic is not built yet")

H200_CAPACITY = 151397597184


def _breakdown_sum(estimate: dict) -> int:
    return sum(estimate["memory_breakdown"].values())


def test_qwen3_8b_h200_vllm_tp1_of_total():
    est = aic.estimate_kv_cache("Qwen/Qwen3-8B", "h200_sxm", "vllm")
    assert est["total_gpu_capacity_bytes"] == H200_CAPACITY
    assert est["memory_breakdown"] == {
        "weights_bytes": 16380854272,
        "activations_bytes": 738197504,
        "runtime_overhead_bytes": 3758096384,
        "comm_overhead_bytes": 0,
    }
    assert _breakdown_sum(est) == 20877148160
    assert est["kv_size_per_token_bytes"] == 147456
    assert est["total_kv_size_bytes"] == 115380689305
    assert est["total_kv_size_tokens"] == 782475
    assert est["source"] == "native" and est["tolerance_adjusted"] is None


def test_qwen3_32b_h200_trtllm_tp2_of_free():
    est = aic.estimate_kv_cache("Qwen/Qwen3-32B", "h200_sxm", "trtllm", tp_size=2)
    assert est["memory_breakdown"] == {
        "weights_bytes": 32761446400,
        "activations_bytes": 872415232,
        "runtime_overhead_bytes": 3758096384,
        "comm_overhead_bytes": 358612992,
    }
    assert est["kv_size_per_token_bytes"] == 131072
    assert est["total_kv_size_bytes"] == 102282323558
    assert est["total_kv_size_tokens"] == 780352
    # trtllm takes the fraction of the free memory; the other kind is rejected
    with pytest.raises(ValueError, match="incompatible memory fraction"):
        aic.estimate_kv_cache("Qwen/Qwen3-32B", "h200_sxm", "trtllm", tp_size=2,
                              memory_fraction_kind="of_total")


def test_deepseek_v3_h200_vllm_tp8_ep8_mtp1():
    est = aic.estimate_kv_cache("deepseek-ai/DeepSeek-V3", "h200_sxm", "vllm", tp_size=8,
                                moe_ep_size=8, nextn=1)
    assert _breakdown_sum(est) == 96659177472
    assert est["kv_size_per_token_bytes"] == 35136
    assert est["total_kv_size_bytes"] == 39598659993
    assert est["total_kv_size_tokens"] == 1127011


def test_tolerance_and_capacity_override():
    est = aic.estimate_kv_cache("Qwen/Qwen3-8B", "h200_sxm", "vllm", tolerance_fraction=0.1,
                                gpu_memory_capacity_bytes_override=80 * 2**30)
    assert est["total_gpu_capacity_bytes"] == 80 * 2**30
    adjusted = est["tolerance_adjusted"]
    assert adjusted["tolerance_fraction"] == 0.1
    assert adjusted["total_kv_size_bytes"] == int(est["total_kv_size_bytes"] * 0.9)


def test_no_kv_budget_is_a_value_error():
    # DeepSeek-V3 at tp8 / ep8 does not leave any KV budget on an H100 (goldens README §3)
    with pytest.raises(ValueError, match="no KV budget"):
        aic.estimate_kv_cache("deepseek-ai/DeepSeek-V3", "h100_sxm", "vllm", tp_size=8,
                              moe_ep_size=8)


def test_unbuildable_model_is_unsupported():
    with pytest.raises(ValueError) as info:
        aic.estimate_kv_cache("Qwen/Qwen3-8B", "h200_sxm", "vllm", tp_size=3)
    assert str(info.value) == (
        "unsupported model/backend/GPU for KV-cache estimation: model=Qwen/Qwen3-8B, "
        "backend=vllm, gpu_sku=h200_sxm: num_heads 32 should be divisible by tp_size 3 "
    )  # the trailing space is the reference's (the compile message ends with one)


def test_version_resolution_error_is_raised_unchanged():
    with pytest.raises(ValueError) as info:
        aic.estimate_kv_cache("Qwen/Qwen3-32B", "h200_sxm", "vllm", "previous", tp_size=2)
    assert "no 'previous' version" in str(info.value)
    assert "KV-cache estimation" not in str(info.value)


def test_bad_fraction_kind():
    with pytest.raises(ValueError, match="memory_fraction_kind"):
        aic.estimate_kv_cache("Qwen/Qwen3-8B", "h200_sxm", "vllm", memory_fraction_kind="half")


def test_native_functions_take_json():
    from aic import _aic
    from aic.compiler.compile import compile_report
    from aic.compiler.memory import model_facts

    result = compile_report("Qwen/Qwen3-8B", "h200_sxm", "vllm")
    request = {"max_num_tokens": 8192, "max_batch_size": 256,
               "memory_fraction": {"kind": "of_total", "value": 0.9}}
    facts = model_facts(result.model)
    assert (facts["family"], facts["num_layers"], facts["head_dim"]) == ("LLAMA", 36, 128)
    est = json.loads(_aic.estimate_kv_cache(result.spec_json, json.dumps(facts),
                                            json.dumps(request)))
    assert est["total_kv_size_tokens"] == 782475
    engine = {"model_name": "Qwen/Qwen3-8B", "system_name": "h200_sxm", "backend": "vllm"}
    with pytest.raises(ValueError, match="unsupported model/backend/GPU.*: boom$"):
        _aic.estimate_kv_cache_unbuilt(json.dumps(engine), None, json.dumps(request), "boom")
    with pytest.raises(ValueError, match="invalid model facts JSON"):
        _aic.estimate_kv_cache(result.spec_json, "{}", json.dumps(request))


def _cli(*args):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def test_cli_memory_json():
    result = _cli("memory", "Qwen/Qwen3-8B", "-s", "h200_sxm", "-b", "vllm", "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["total_kv_size_tokens"] == 782475
    assert data["kv_size_per_token_bytes"] == 147456
    assert "max_concurrent_requests" not in data

    result = _cli("memory", "Qwen/Qwen3-8B", "-s", "h200_sxm", "-b", "vllm", "--isl", 1000,
                  "--osl", 24, "--json")
    data = json.loads(result.output)
    assert data["max_concurrent_requests"] == 782475 // 1024


def test_cli_memory_table():
    result = _cli("memory", "Qwen/Qwen3-32B", "-s", "h200_sxm", "-b", "trtllm", "--tp", 2,
                  "--isl", 4096, "--osl", 1024)
    assert result.exit_code == 0, result.output
    for text in ("weights", "activations", "runtime overhead", "comm overhead", "KV cache",
                 "32,761,446,400", "131,072", "780,352 tokens",
                 f"max concurrent requests (isl 4096 + osl 1024): {780352 // 5120:,}"):
        assert text in result.output


def test_cli_memory_errors():
    result = _cli("memory", "deepseek-ai/DeepSeek-V3", "-s", "h100_sxm", "-b", "vllm", "--tp", 8,
                  "--moe-ep", 8)
    assert result.exit_code == 1 and "no KV budget" in result.output
    result = _cli("memory", "Qwen/Qwen3-8B", "-s", "h200_sxm", "-b", "vllm", "--isl", 10)
    assert result.exit_code == 2
