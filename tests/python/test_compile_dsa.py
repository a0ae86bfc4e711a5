"""Front-end op lists for the DEEPSEEKV32 family (spec 32: DeepSeek-V3.2, GLM-5.x) against the
goldens (every compiled case of dsa.json, field by field), plus the spec's quant table (§2.2),
``full_frac`` vectors (§3.4) and verified variants (§3.7). Runs without the native module."""

from __future__ import annotations

import json

import pytest
from conftest import FixedResolver, GoldenResolver, compile_args, golden_cases

from aic.compiler.compile import compile_report
from aic.compiler.families.deepseekv32 import full_frac
from aic.parity.runner import diff_json

CASES = [c for c in golden_cases("dsa") if c["resolved"]]


def _compile(model, system="b200_sxm", backend="trtllm", **kwargs):
    result = compile_report(model, system, backend, resolver=FixedResolver(), **kwargs)
    return json.loads(result.spec_json)


def _op(op_list, name):
    for op in op_list:
        (variant, fields), = op.items()
        if fields["name"] == name:
            return variant, fields
    raise KeyError(name)


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_op_lists_match_goldens(case):
    args, kwargs = compile_args(case)
    kwargs.pop("database_mode", None)
    mode = case["compile"].get("database_mode")
    result = compile_report(*args, **kwargs, database_mode=mode, resolver=GoldenResolver(case))
    spec = json.loads(result.spec_json)
    assert diff_json(spec["context_ops"], case["spec_ops"]["context"], "", rtol=0.0) == []
    assert diff_json(spec["generation_ops"], case["spec_ops"]["generation"], "", rtol=0.0) == []
    assert result.model_family == "DEEPSEEKV32"
    assert result.quant == case["resolved"]["quant"]


@pytest.mark.parametrize("model, proj, gd, shared, moe", [
    ("deepseek-ai/DeepSeek-V3.2", ("fp8_block",) * 4, "fp8_block", "fp8_block", "fp8_block"),
    ("nvidia/DeepSeek-V3.2-NVFP4", ("bfloat16", "bfloat16", "nvfp4", "bfloat16"), "nvfp4", "nvfp4", "nvfp4"),
    ("zai-org/GLM-5", ("bfloat16",) * 4, "bfloat16", "bfloat16", "bfloat16"),
    ("zai-org/GLM-5-FP8", ("bfloat16",) * 4, "bfloat16", "fp8_block", "fp8_block"),
    ("nvidia/GLM-5-NVFP4", ("bfloat16",) * 4, "bfloat16", "nvfp4", "nvfp4"),
    ("nvidia/GLM-5.2-NVFP4", ("bfloat16",) * 4, "bfloat16", "bfloat16", "nvfp4"),
])
def test_per_projection_quant(model, proj, gd, shared, moe):
    spec = _compile(model, tp_size=8, moe_ep_size=8)
    _, dsa = _op(spec["context_ops"], "context_attention")
    assert tuple(dsa["attn_projection_quant_modes"][g] for g in ("q", "kv", "o", "indexer")) == proj
    assert dsa["gemm_quant_mode"] == gd
    assert dsa["fmha_quant_mode"] == "bfloat16"
    assert _op(spec["context_ops"], "context_shared_gate_up_gemm")[1]["quant_mode"] == shared
    assert _op(spec["context_ops"], "context_moe")[1]["quant_mode"] == moe


def test_shared_exclusion_beats_caller_gemm_mode():
    spec = _compile("nvidia/GLM-5.2-NVFP4", gemm_quant_mode="fp8_block", tp_size=8, moe_ep_size=8)
    assert _op(spec["context_ops"], "context_shared_ffn2_gemm")[1]["quant_mode"] == "bfloat16"
    assert _op(spec["context_ops"], "context_attention")[1]["gemm_quant_mode"] == "bfloat16"
    assert spec["engine"]["weight_dtype"] == "fp8_block"


def test_caller_fmha_fp8_reaches_only_the_context_op():
    spec = _compile("zai-org/GLM-5-FP8", "h200_sxm", fmha_quant_mode="fp8", tp_size=8, moe_ep_size=8)
    assert _op(spec["context_ops"], "context_attention")[1]["fmha_quant_mode"] == "fp8"
    assert _op(spec["generation_ops"], "generation_attention")[1]["fmha_quant_mode"] == "bfloat16"
    assert spec["engine"]["activation_dtype"] == "fp8"


def test_shared_expert_follows_moe_tp_and_glm52_frac_only_on_sglang():
    spec = _compile("zai-org/GLM-5", "h200_sxm", tp_size=4, pp_size=2, moe_tp_size=2, moe_ep_size=2, nextn=2)
    assert _op(spec["context_ops"], "context_attention")[1]["num_heads"] == 16
    gate = _op(spec["context_ops"], "context_shared_gate_up_gemm")[1]
    assert (gate["n"], gate["k"]) == (2048, 6144)
    assert _op(spec["context_ops"], "context_logits_gemm")[1]["n"] == 38720
    assert _op(spec["generation_ops"], "generation_attention")[1]["scale_factor"] == 80.0
    sglang = _compile("nvidia/GLM-5.2-NVFP4", backend="sglang", tp_size=8, moe_ep_size=8)
    trtllm = _compile("zai-org/GLM-5.2", tp_size=8, moe_ep_size=8)
    assert _op(sglang["generation_ops"], "generation_attention")[1]["full_frac"] == 0.2692307692307692
    assert _op(trtllm["context_ops"], "context_attention")[1]["full_frac"] == 1.0


@pytest.mark.parametrize("layers, raw, expected", [
    (78, {}, 1.0),
    (78, {"index_topk_freq": 4, "index_skip_topk_offset": 3}, 0.2692307692307692),
    (78, {"index_topk_freq": 4}, 0.2692307692307692),
    (10, {"index_topk_freq": 3, "index_skip_topk_offset": 1}, 0.4),
    (6, {"index_topk_freq": 1, "index_topk_pattern": "FFSSFS"}, 0.5),
    (6, {"index_topk_pattern": "FS"}, 0.8333333333333334),
    (78, {"index_topk_freq": 0}, 1.0),
    (7, {"index_topk_freq": 2, "index_skip_topk_offset": 0}, 0.42857142857142855),
])
def test_full_frac(layers, raw, expected):
    assert full_frac(layers, raw) == expected


def test_dsa_goldens_agree_with_reference():
    """Every dsa.json case end to end (compile, queries, errors, memory) at 1e-9 relative."""
    pytest.importorskip("aic._aic", reason="needs the native module (pip install .)")
    from pathlib import Path

    from aic.parity import runner as parity

    goldens = Path(__file__).resolve().parents[2] / "goldens"
    report = parity.run_parity(parity.select_cases(parity.load_cases(goldens), family="dsa"))
    failures = [(c.case_id, c.kind, c.detail) for c in report.checks if not c.passed]
    assert not failures, failures[:5]
    assert report.passed == 1791
