"""Front-end op lists for the MOE family (spec 30 §7) against the goldens: every case of moe.json
and every MOE case of edge.json, compile errors included. The version and the lane orders come
from each golden case, so these tests run without the native module; the native-backed lane
orders are checked at the end."""

from __future__ import annotations

import json

import pytest
from conftest import FixedResolver, GoldenResolver, compile_args, golden_cases

from aic.compiler.compile import compile_report
from aic.parity.runner import diff_json


def _family_cases(files, family):
    out = []
    for name in files:
        for case in golden_cases(name):
            resolved = case["resolved"]
            if resolved and resolved["model_family"] == family:
                out.append(case)
    return out


CASES = _family_cases(("moe", "edge"), "MOE")
ERRORS = [c for name in ("moe", "edge") for c in golden_cases(name)
          if c["compile_error"] and "Qwen3-30B-A3B" in c["id"]]


def _strict(ours, ref):
    """Field-by-field: same keys in the same order, same JSON types, floats bit-exact."""
    return diff_json(ours, ref, "", rtol=0.0)


def _compile(model, system="h200_sxm", backend="trtllm", resolver=None, **kwargs):
    result = compile_report(model, system, backend, resolver=resolver or FixedResolver(), **kwargs)
    return result, json.loads(result.spec_json)


def _op(op_list, name):
    for op in op_list:
        (variant, fields), = op.items()
        if fields["name"] == name:
            return variant, fields
    raise KeyError(name)


def test_corpus_has_the_expected_moe_cases():
    assert len([c for c in CASES if c["family"] == "moe"]) == 67  # 68 cases, one compile error
    assert len([c for c in CASES if c["family"] == "edge"]) == 30
    assert [c["id"] for c in ERRORS] == [
        "moe/Qwen3-30B-A3B/h200_sxm/vllm/tp4-pp1-dp1",
        "edge/Qwen3-30B-A3B-FP8/h200_sxm/vllm/tp4-pp1-dp1-mtp4-ep1",
    ]


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_moe_spec_matches_golden(case):
    args, kwargs = compile_args(case)
    resolver = GoldenResolver(case)
    result = compile_report(*args, resolver=resolver, **kwargs)
    ours = json.loads(result.spec_json)
    ref = case["resolved"]
    assert _strict(ours["context_ops"], case["spec_ops"]["context"]) == []
    assert _strict(ours["generation_ops"], case["spec_ops"]["generation"]) == []
    assert _strict(ours["engine"], ref["engine"]) == []
    assert ours["schema_version"] == ref["spec_schema_version"]
    assert result.model_family == ref["model_family"] == "MOE"
    assert result.quant == ref["quant"]
    assert result.config_source == ref["config_source"]
    assert len(ours["context_ops"]) == ref["num_context_ops"] == 12
    assert len(ours["generation_ops"]) == ref["num_generation_ops"] == 13
    lane_calls = [c for c in resolver.calls if c[0] == "lanes"]
    assert [c[1] for c in lane_calls] == ["context", "generation"]


@pytest.mark.parametrize("case", ERRORS, ids=[c["id"] for c in ERRORS])
def test_moe_compile_errors_match_golden(case):
    args, kwargs = compile_args(case)
    with pytest.raises(ValueError) as info:
        compile_report(*args, resolver=FixedResolver(), **kwargs)
    ref = case["compile_error"]
    assert ref["class"] == "ValueError"
    # the reference's text comes first; anything after it is our hint on what would fit
    assert str(info.value).startswith(ref["message"])


def test_width_mismatch_names_the_sizes_and_the_allowed_layouts():
    with pytest.raises(ValueError) as info:
        _compile("Qwen/Qwen3-30B-A3B", tp_size=4, moe_tp_size=2, moe_ep_size=4)
    message = str(info.value)
    assert message.startswith(
        "Parallelism width mismatch: tp_size(4) * attention_dp_size(1) * cp_size(1) = 4, but "
        "moe_tp_size(2) * moe_ep_size(4) = 8. These must be equal."
    )
    for pair in ("moe_tp_size=1 with moe_ep_size=4", "moe_tp_size=2 with moe_ep_size=2",
                 "moe_tp_size=4 with moe_ep_size=1"):
        assert pair in message


def test_more_ep_ranks_than_experts():
    with pytest.raises(ValueError) as info:
        _compile("mistralai/Mixtral-8x7B-v0.1", tp_size=16, moe_ep_size=16)
    message = str(info.value)
    assert message.startswith("ep size cannot be larger than num_experts 8")
    assert "moe_ep_size 16" in message and "moe_ep_size <= 8" in message


def test_block_quantized_moe_alignment_lists_the_working_moe_tp_sizes():
    with pytest.raises(ValueError) as info:
        _compile("Qwen/Qwen3-30B-A3B-FP8", backend="vllm", tp_size=4, moe_tp_size=4)
    message = str(info.value)
    assert message.startswith(
        "Invalid quantized MoE configuration: (moe_intermediate_size=768 / moe_tp_size=4) % "
        "weight_block_size=128 != 0. "
    )
    assert "1, 2, 3, 6" in message
    # the same layout through EP compiles, and an explicit bfloat16 MoE skips the check
    _compile("Qwen/Qwen3-30B-A3B-FP8", backend="vllm", tp_size=4, moe_ep_size=4)
    _compile("Qwen/Qwen3-30B-A3B-FP8", backend="vllm", tp_size=4, moe_tp_size=4,
             moe_quant_mode="bfloat16")


@pytest.mark.parametrize("name", ["tp_size", "moe_tp_size", "moe_ep_size"])
def test_non_positive_moe_sizes(name):
    with pytest.raises(ValueError, match=f"^{name} must be positive, got 0."):
        _compile("Qwen/Qwen3-30B-A3B", **{name: 0})


def test_heads_checked_before_experts():
    with pytest.raises(ValueError, match="^num_heads 32 should be divisible by tp_size 3 $"):
        _compile("Qwen/Qwen3-30B-A3B", tp_size=3, moe_ep_size=3)


# ------------------------------------------------------------------------------------------
# Spec 30 §7.5 vectors outside the golden corpus
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("model,kwargs,expected", [
    # embedding vocab, qkv n/k, attn n/n_kv, proj n/k, router n, Moe fields, emb_ar tp, L
    ("mistralai/Mixtral-8x7B-v0.1", dict(tp_size=4, moe_tp_size=4),
     (8000, (1536, 4096), (8, 2), (4096, 1024), 8, (4096, 14336, 2, 8, 4, 1, 1), 4, 32.0)),
    ("MiniMaxAI/MiniMax-M2.5", dict(tp_size=4, moe_ep_size=4),
     (50016, (2048, 3072), (12, 2), (3072, 1536), 256, (3072, 1536, 8, 256, 1, 4, 1), 4, 62.0)),
    ("Qwen/Qwen3-30B-A3B", dict(attention_dp_size=4, moe_ep_size=4),
     (151936, (5120, 2048), (32, 4), (2048, 4096), 128, (2048, 768, 8, 128, 1, 4, 4), 1, 48.0)),
    ("Qwen/Qwen3-235B-A22B", dict(tp_size=8, moe_ep_size=8),
     (18992, (1280, 4096), (8, 1), (4096, 1024), 128, (4096, 1536, 8, 128, 1, 8, 1), 8, 94.0)),
])
def test_spec_moe_vectors(model, kwargs, expected):
    vocab, qkv, attn, proj, router_n, moe_fields, ar_tp, layers = expected
    _, spec = _compile(model, **kwargs)
    ctx = spec["context_ops"]
    assert _op(ctx, "context_embedding")[1]["vocab_size"] == vocab
    q = _op(ctx, "context_qkv_gemm")[1]
    assert (q["n"], q["k"], q["scale_factor"]) == (*qkv, layers)
    a = _op(ctx, "context_attention")[1]
    assert (a["n"], a["n_kv"]) == attn
    p = _op(ctx, "context_proj_gemm")[1]
    assert (p["n"], p["k"], p["low_precision_input"]) == (*proj, True)
    r = _op(ctx, "context_router_gemm")[1]
    assert (r["n"], r["quant_mode"]) == (router_n, "bfloat16")
    m = _op(ctx, "context_moe")[1]
    assert (m["hidden_size"], m["inter_size"], m["topk"], m["num_experts"], m["moe_tp_size"],
            m["moe_ep_size"], m["attention_dp_size"]) == moe_fields
    assert m["workload_distribution"] == "power_law_1.2"
    assert _op(ctx, "context_embedding_ar")[1]["tp_size"] == ar_tp
    names = [next(iter(op.values()))["name"] for op in ctx]
    assert "context_logits_gemm" not in names and "context_ar_1" not in names


def test_minimax_fp8_block_and_qk_norm():
    result, spec = _compile("MiniMaxAI/MiniMax-M2.5", tp_size=4, moe_ep_size=4)
    assert (result.quant["gemm_quant_mode"], result.quant["moe_quant_mode"]) == ("fp8_block",) * 2
    assert _op(spec["context_ops"], "context_attention")[1]["use_qk_norm"] is True
    assert _op(spec["context_ops"], "context_qkv_gemm")[1]["quant_mode"] == "fp8_block"
    assert _op(spec["context_ops"], "context_moe")[1]["quant_mode"] == "fp8_block"


def test_generation_list_keeps_is_context_true_and_gains_logits():
    _, spec = _compile("Qwen/Qwen3-30B-A3B", tp_size=2, moe_ep_size=2, nextn=1)
    gen = spec["generation_ops"]
    for name in ("generation_moe_pre_dispatch", "generation_moe", "generation_moe_post_dispatch"):
        assert _op(gen, name)[1]["is_context"] is True
    logits = _op(gen, "generation_logits_gemm")[1]
    assert (logits["n"], logits["scale_factor"]) == (75968, 1.0208333333333333)
    assert _op(gen, "generation_moe")[1]["scale_factor"] == 49.0
    assert _op(spec["context_ops"], "context_moe")[1]["scale_factor"] == 48.0


@pytest.mark.parametrize("backend,flavor", [("trtllm", "TrtllmAlltoall"),
                                            ("sglang", "CustomAllReduce"),
                                            ("vllm", "CustomAllReduce")])
def test_dispatch_flavor_follows_the_backend(backend, flavor):
    _, spec = _compile("Qwen/Qwen3-30B-A3B", backend=backend, attention_dp_size=4, moe_ep_size=4)
    for name in ("context_moe_pre_dispatch", "context_moe_post_dispatch"):
        variant, fields = _op(spec["context_ops"], name)
        assert variant == "MoeDispatch"
        assert (fields["backend"], fields["flavor"]) == (backend, flavor)


def test_gpt_oss_windowed_attention():
    """Spec 30 §7.3: gpt-oss-120b tp4 ep4 nextn 1."""
    result, spec = _compile("openai/gpt-oss-120b", tp_size=4, moe_ep_size=4, nextn=1)
    assert result.quant["moe_quant_mode"] == "w4a16_mxfp4"
    assert result.engine["moe_dtype"] == "w4a16_mxfp4"
    for key, variant, window_scale, full_scale in (
        ("context_ops", "ContextAttention", 18.0, 18.0),
        ("generation_ops", "GenerationAttention", 18.5, 18.5),
    ):
        attention = [fields for op in spec[key] for v, fields in op.items() if v == variant]
        assert [(a["window_size"], a["scale_factor"]) for a in attention] == [
            (128, window_scale), (0, full_scale)
        ]
        assert len({a["name"] for a in attention}) == 1
        assert next(iter(spec[key][0])) == variant  # emitted before everything else
    assert _op(spec["generation_ops"], "generation_qkv_gemm")[1]["scale_factor"] == 37.0
    m = _op(spec["generation_ops"], "generation_embedding")[1]["scale_factor"]
    assert m == 1.0277777777777777


def test_mixtral_resolves_to_the_shipped_config():
    result, _ = _compile("mistralai/Mixtral-8x22B-v0.1", backend="vllm", tp_size=8,
                         moe_tp_size=8)
    assert result.model_family == "MOE"
    assert result.config_source == "shipped-config-as-local-dir"


# ------------------------------------------------------------------------------------------
# With the native module: versions and lane orders come from our own data reader
# ------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def native():
    return pytest.importorskip("aic._aic", reason="native module aic._aic is not built yet")


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_moe_spec_with_native_lanes(native, case):
    from aic import compile_engine_json

    args, kwargs = compile_args(case)
    ours = json.loads(compile_engine_json(*args, **kwargs))
    assert _strict(ours["context_ops"], case["spec_ops"]["context"]) == []
    assert _strict(ours["generation_ops"], case["spec_ops"]["generation"]) == []
    assert _strict(ours["engine"], case["resolved"]["engine"]) == []
