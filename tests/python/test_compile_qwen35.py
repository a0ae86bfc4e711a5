"""Front-end op lists for the QWEN35 family (spec 31) against the goldens: every case of
qwen35.json, compile errors included, plus the spec's parse, quant-split and validation rules.
Versions and lane orders come from each golden case (no native module needed)."""

from __future__ import annotations

import json

import pytest
from conftest import FixedResolver, GoldenResolver, compile_args, golden_cases

from aic.compiler.compile import compile_report
from aic.compiler.families import qwen35
from aic.compiler.hf_config import load_model_config
from aic.compiler.memory import model_facts
from aic.parity.runner import diff_json

CASES = [c for c in golden_cases("qwen35") if c["compile_error"] is None]
ERRORS = [c for c in golden_cases("qwen35") if c["compile_error"] is not None]


def _compile(model, system="h200_sxm", backend="vllm", **kwargs):
    result = compile_report(model, system, backend, resolver=FixedResolver(version="0.24.0"), **kwargs)
    return json.loads(result.spec_json)


def _op(op_list, name):
    for op in op_list:
        (variant, fields), = op.items()
        if fields["name"] == name:
            return variant, fields
    raise KeyError(name)


def test_corpus_has_the_expected_cases():
    assert len(CASES) == 41 and len(ERRORS) == 4


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_qwen35_spec_matches_golden(case):
    args, kwargs = compile_args(case)
    result = compile_report(*args, resolver=GoldenResolver(case), **kwargs)
    ours = json.loads(result.spec_json)
    ref = case["resolved"]
    for phase in ("context", "generation"):
        assert diff_json(ours[f"{phase}_ops"], case["spec_ops"][phase], "", rtol=0.0) == []
    assert diff_json(ours["engine"], ref["engine"], "", rtol=0.0) == []
    assert result.model_family == ref["model_family"] == "QWEN35"
    assert result.quant == ref["quant"]
    assert result.config_source == ref["config_source"]


@pytest.mark.parametrize("case", ERRORS, ids=[c["id"] for c in ERRORS])
def test_qwen35_compile_errors_match_golden(case):
    args, kwargs = compile_args(case)
    with pytest.raises(ValueError) as info:
        compile_report(*args, resolver=FixedResolver(), **kwargs)
    assert str(info.value).startswith(case["compile_error"]["message"])


@pytest.mark.parametrize("model, expected", [
    ("Qwen/Qwen3.5-27B", (48, 16, 16, 128, 48, 128, 4, 0)),
    ("Qwen/Qwen3.5-35B-A3B", (30, 10, 16, 128, 32, 128, 4, 512)),
    ("Qwen/Qwen3.5-122B-A10B", (36, 12, 16, 128, 64, 128, 4, 1024)),
    ("Qwen/Qwen3.5-397B-A17B", (45, 15, 16, 128, 64, 128, 4, 1024)),
])
def test_parse_results_of_the_bundled_configs(model, expected):
    # Spec 31 §1.3.
    g = qwen35.gdn_geometry(load_model_config(model))
    assert tuple(g[k] for k in ("NL", "NF", "nk", "hk", "nv", "hv", "dc", "SI")) == expected
    assert g["ssm"] == "float32"


def test_ssm_dtype_resolution():
    # Spec 31 §1.2: text_config decides when it declares the key, even an invalid value.
    assert qwen35.ssm_dtype({"text_config": {"mamba_ssm_dtype": "bfloat16"}}) == "bfloat16"
    assert qwen35.ssm_dtype({"text_config": {"mamba_ssm_dtype": "int8"},
                             "mamba_ssm_dtype": "float16"}) == "float32"
    assert qwen35.ssm_dtype({"text_config": {}, "mamba_ssm_dtype": "float16"}) == "float16"
    assert qwen35.ssm_dtype({}) == "float32"


@pytest.mark.parametrize("model, kwargs, expected", [
    ("Qwen/Qwen3.5-27B", {}, ("bfloat16", "bfloat16", "bfloat16")),
    ("nvidia/Qwen3.5-397B-A17B-NVFP4", {"moe_ep_size": 8, "tp_size": 8}, ("bfloat16", "nvfp4", "bfloat16")),
    ("nvidia/Qwen3.5-397B-A17B-NVFP4", {"moe_ep_size": 8, "tp_size": 8, "gemm_quant_mode": "nvfp4"},
     ("nvfp4", "nvfp4", "nvfp4")),
    ("nvidia/Qwen3.6-27B-NVFP4", {}, ("fp8_static", "w4a16_nvfp4", "fp8_static")),
    ("nvidia/Qwen3.6-35B-A3B-NVFP4", {}, ("fp8_static", "fp8_static", "w4a16_nvfp4")),
    ("nvidia/Qwen3.6-27B-NVFP4", {"gemm_quant_mode": "fp8"}, ("fp8", "fp8", "fp8")),
])
def test_per_category_gemm_modes(model, kwargs, expected):
    # Spec 31 §2.2 results table, read back from the compiled GEMMs.
    spec = _compile(model, system="b200_sxm", backend="trtllm", **kwargs)
    ctx = spec["context_ops"]
    qp = _op(ctx, "context_gdn_in_proj_gemm")[1]["quant_mode"]
    assert qp == _op(ctx, "context_qkv_gemm")[1]["quant_mode"]
    names = {"dense": "context_gdn_gate_ffn1_gemm", "shared": "context_gdn_shared_gate_up_gemm"}
    found = {k: _op(ctx, v)[1]["quant_mode"] for k, v in names.items()
             if any(next(iter(o.values()))["name"] == v for o in ctx)}
    assert qp == expected[0]
    if "dense" in found:
        assert found["dense"] == expected[1]
    if "shared" in found:
        assert found["shared"] == expected[2]
    for always_bf16 in ("context_gdn_router_gemm", "context_gdn_shared_expert_gate_gemm", "context_logits_gemm"):
        if any(next(iter(o.values()))["name"] == always_bf16 for o in ctx):
            assert _op(ctx, always_bf16)[1]["quant_mode"] == "bfloat16"


def test_moe_width_rule_depends_on_experts_not_the_family():
    # Spec 31 §3 note: the dense 27B compiles with MoE sizes unset; the 35B-A3B does not.
    spec = _compile("Qwen/Qwen3.5-27B", tp_size=2)
    assert len(spec["context_ops"]) == 26
    _compile("Qwen/Qwen3.5-27B", system="h100_sxm", tp_size=4)
    _compile("Qwen/Qwen3.5-27B", tp_size=2, attention_dp_size=2, moe_ep_size=4)
    with pytest.raises(ValueError) as info:
        _compile("Qwen/Qwen3.5-35B-A3B", tp_size=2)
    assert str(info.value).startswith(
        "Parallelism width mismatch: tp_size(2) * attention_dp_size(1) * cp_size(1) = 2, but "
        "moe_tp_size(1) * moe_ep_size(1) = 1. These must be equal.")


def test_moe_dispatch_carries_the_family_flags():
    spec = _compile("Qwen/Qwen3.5-397B-A17B", tp_size=8, moe_ep_size=8)
    variant, pre = _op(spec["context_ops"], "context_gdn_moe_pre_dispatch")
    assert variant == "MoeDispatch"
    assert (pre["attn_ar_modeled"], pre["sms"], pre["scale_num_tokens"]) == (True, 20, 8)
    _, post = _op(spec["context_ops"], "context_gdn_moe_post_dispatch")
    assert (post["attn_ar_modeled"], post["sms"], post["scale_num_tokens"]) == (True, 20, 1)


def test_generation_scales_with_nextn():
    # Spec 31 §4.1: count × m in binary64.
    spec = _compile("Qwen/Qwen3.5-397B-A17B", tp_size=8, moe_ep_size=8, nextn=1)
    gen = spec["generation_ops"]
    assert _op(gen, "generation_gdn_recurrence")[1]["scale_factor"] == 45.75
    assert _op(gen, "generation_attention")[1]["scale_factor"] == 15.25
    assert _op(gen, "generation_embedding")[1]["scale_factor"] == 1.0166666666666666
    spec = _compile("Qwen/Qwen3.5-27B", tp_size=2, pp_size=2, nextn=2)
    gen = spec["generation_ops"]
    assert _op(gen, "generation_gdn_conv1d")[1]["scale_factor"] == 49.5
    assert _op(gen, "generation_full_attn_norm")[1]["scale_factor"] == 16.5
    assert _op(gen, "generation_p2p")[1]["scale_factor"] == 1.03125


def test_model_facts_carry_the_gdn_geometry():
    facts = model_facts(load_model_config("Qwen/Qwen3.5-27B"))
    assert facts["gdn"] == {"linear_layers": 48, "full_layers": 16, "num_k_heads": 16,
                            "head_k_dim": 128, "num_v_heads": 48, "head_v_dim": 128,
                            "conv_kernel": 4, "ssm_dtype": "float32"}
    assert model_facts(load_model_config("Qwen/Qwen3-8B"))["gdn"] is None
