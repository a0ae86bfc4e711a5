"""Front-end op lists for the DEEPSEEKV4 family (spec 34: DeepSeek-V4-Flash / -Pro) against the
goldens (every compiled case of dsv4.json, field by field), plus the spec's compress-ratio
grouping (§4), quant resolutions (§2), verified variants (§4.4) and memory facts (§7). Runs
without the native module."""

from __future__ import annotations

import json

import pytest
from conftest import FixedResolver, GoldenResolver, compile_args, golden_cases

from aic.compiler.compile import compile_report
from aic.compiler.families.deepseekv4 import attention_groups
from aic.compiler.hf_config import load_model_config
from aic.compiler.memory import model_facts
from aic.parity.runner import diff_json

CASES = [c for c in golden_cases("dsv4") if c["resolved"]]


def _compile(model, system="h200_sxm", backend="sglang", **kwargs):
    result = compile_report(model, system, backend, resolver=FixedResolver(), **kwargs)
    return result, json.loads(result.spec_json)


def _ops(op_list, name):
    return [fields for op in op_list for (variant, fields) in op.items() if fields["name"] == name]


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_op_lists_match_goldens(case):
    args, kwargs = compile_args(case)
    kwargs.pop("database_mode", None)
    mode = case["compile"].get("database_mode")
    result = compile_report(*args, **kwargs, database_mode=mode, resolver=GoldenResolver(case))
    spec = json.loads(result.spec_json)
    assert diff_json(spec["context_ops"], case["spec_ops"]["context"], "", rtol=0.0) == []
    assert diff_json(spec["generation_ops"], case["spec_ops"]["generation"], "", rtol=0.0) == []
    assert result.model_family == "DEEPSEEKV4"
    assert result.quant == case["resolved"]["quant"]


def test_ratio_grouping_first_occurrence_order():
    # Flash: 0, 0, then 4/128 alternating -> Csa first, window layers folded into Hca.
    assert attention_groups([0, 0] + [4, 128] * 20 + [4]) == [("Csa", 21), ("Hca", 22)]
    # Pro: 128 first -> Hca then Csa.
    assert attention_groups([128, 128] + [4, 128] * 29 + [4]) == [("Hca", 31), ("Csa", 30)]
    # Only window layers: an Hca op appended.
    assert attention_groups([0, 4, 0]) == [("Csa", 1), ("Hca", 2)]
    assert attention_groups([0, 0]) == [("Hca", 2)]


@pytest.mark.parametrize("model, moe", [
    ("deepseek-ai/DeepSeek-V4-Flash", "w4a8_mxfp4_mxfp8"),
    ("sgl-project/DeepSeek-V4-Flash-FP8", "fp8_block"),
    ("nvidia/DeepSeek-V4-Flash-NVFP4", "nvfp4"),
    ("deepseek-ai/DeepSeek-V4-Pro", "w4a8_mxfp4_mxfp8"),
])
@pytest.mark.parametrize("backend", ["sglang", "vllm", "trtllm"])
def test_quant_resolution(model, moe, backend):
    result, _ = _compile(model, backend=backend, tp_size=8, moe_ep_size=8)
    assert result.quant == {"gemm_quant_mode": "fp8_block", "moe_quant_mode": moe,
                            "kvcache_quant_mode": "fp8", "fmha_quant_mode": "bfloat16",
                            "comm_quant_mode": "half"}


def test_verified_variants():
    _, pro = _compile("sgl-project/DeepSeek-V4-Pro-FP8", tp_size=4, moe_ep_size=4)
    attn = _ops(pro["context_ops"], "context_attention")
    assert [(a["attn_kind"], a["scale_factor"]) for a in attn] == [("Hca", 31.0), ("Csa", 30.0)]
    assert {(a["num_heads"], a["native_heads"], a["o_groups"]) for a in attn} == {(32, 128, 4)}
    _, adp = _compile("sgl-project/DeepSeek-V4-Flash-FP8", tp_size=1, attention_dp_size=8,
                      moe_ep_size=8)
    ctx = adp["context_ops"]
    assert _ops(ctx, "context_shared_gate_up_gemm")[0]["n"] == 4096
    assert _ops(ctx, "context_shared_act_gate")[0]["bytes_per_token"] == 12288.0
    assert _ops(ctx, "context_shared_ffn2_gemm")[0]["k"] == 2048
    assert _ops(ctx, "context_logits_gemm")[0]["n"] == 129280
    _, mtp = _compile("sgl-project/DeepSeek-V4-Flash-FP8", tp_size=8, moe_ep_size=8, nextn=1)
    gen = mtp["generation_ops"]
    assert _ops(gen, "generation_mhc_pre")[0]["scale_factor"] == 44.0
    assert _ops(gen, "generation_embedding")[0]["scale_factor"] == 1.0232558139534884
    assert [a["scale_factor"] for a in _ops(gen, "generation_attention")] == [
        21.48837209302326, 22.511627906976745]
    assert not any("allreduce" in fields["name"] for op in gen for fields in op.values())


def test_memory_facts_carry_the_compressed_layout():
    facts = model_facts(load_model_config("sgl-project/DeepSeek-V4-Flash-FP8"))
    ratios = facts["dsv4"]["compress_ratios"]
    assert len(ratios) == 43 and ratios.count(0) == 2 and ratios.count(4) == 21
    assert facts["dsv4"]["sliding_window"] == 128
    assert facts["head_dim"] == 512
