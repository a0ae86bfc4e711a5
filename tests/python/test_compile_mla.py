"""Front-end op lists for the DEEPSEEK / KIMIK25 families (spec 30 §8) against the goldens: every
case of mla.json and every DEEPSEEK case of edge.json, plus the spec's Kimi and NVFP4 vectors. The
version comes from each golden case, so these tests run without the native module (the MLA specs
have no top-level attention op, so no lane order is asked for)."""

from __future__ import annotations

import json

import pytest
from conftest import FixedResolver, GoldenResolver, compile_args, golden_cases

from aic.compiler.compile import compile_report
from aic.compiler.families.deepseek import excluded_groups, exclusion_patterns
from aic.parity.runner import diff_json

CASES = [c for name in ("mla", "edge") for c in golden_cases(name)
         if c["resolved"] and c["resolved"]["model_family"] == "DEEPSEEK"]


def _strict(ours, ref):
    """Field-by-field: same keys in the same order, same JSON types, floats bit-exact."""
    return diff_json(ours, ref, "", rtol=0.0)


def _compile(model, system="h200_sxm", backend="trtllm", resolver=None, **kwargs):
    result = compile_report(model, system, backend, resolver=resolver or FixedResolver(), **kwargs)
    return result, json.loads(result.spec_json)


def _walk(op_list):
    """Every op, composites first and then their members, depth first."""
    for op in op_list:
        (variant, fields), = op.items()
        yield variant, fields
        if variant == "Fallback":
            yield from _walk([fields["primary"]])
            yield from _walk(fields["fallback"])
        elif variant == "Overlap":
            yield from _walk(fields["group_a"])
            yield from _walk(fields["group_b"])


def _op(op_list, name, variant=None):
    for v, fields in _walk(op_list):
        if fields["name"] == name and (variant is None or v == variant):
            return v, fields
    raise KeyError(name)


def _top(op_list):
    return [(v, f["name"]) for op in op_list for v, f in op.items()]


def test_corpus_has_the_expected_mla_cases():
    assert len([c for c in CASES if c["family"] == "mla"]) == 50
    assert len([c for c in CASES if c["family"] == "edge"]) == 4


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_mla_spec_matches_golden(case):
    args, kwargs = compile_args(case)
    resolver = GoldenResolver(case)
    result = compile_report(*args, resolver=resolver, **kwargs)
    ours = json.loads(result.spec_json)
    ref = case["resolved"]
    assert _strict(ours["context_ops"], case["spec_ops"]["context"]) == []
    assert _strict(ours["generation_ops"], case["spec_ops"]["generation"]) == []
    assert _strict(ours["engine"], ref["engine"]) == []
    assert ours["schema_version"] == ref["spec_schema_version"]
    assert result.model_family == ref["model_family"] == "DEEPSEEK"
    assert result.quant == ref["quant"]
    assert result.config_source == ref["config_source"]
    assert len(ours["context_ops"]) == ref["num_context_ops"]
    assert len(ours["generation_ops"]) == ref["num_generation_ops"]
    # attention lives inside the Fallback: no lane order is asked for, nested ops keep default
    assert [c for c in resolver.calls if c[0] == "lanes"] == []
    for key in ("context_ops", "generation_ops"):
        for variant, fields in _walk(ours[key]):
            if "lane_order" in fields:
                assert fields["lane_order"] == ["default"]


def test_worked_example_2_structure():
    """Spec 30 §8.6: DeepSeek-V3, h200_sxm, trtllm, tp 8, ep 8."""
    result, spec = _compile("deepseek-ai/DeepSeek-V3", tp_size=8, moe_ep_size=8)
    assert result.quant == {"gemm_quant_mode": "fp8_block", "moe_quant_mode": "fp8_block",
                            "kvcache_quant_mode": "fp8", "fmha_quant_mode": "fp8",
                            "comm_quant_mode": "half"}
    assert _top(spec["context_ops"]) == [
        ("Embedding", "context_embedding"), ("Elementwise", "context_add_norm_1"),
        ("Fallback", "context_mla_block"), ("Elementwise", "context_add_norm_2"),
        ("Gemm", "context_shared_gate_up_gemm"), ("Elementwise", "context_shared_act_gate"),
        ("Gemm", "context_shared_ffn2_gemm"), ("Gemm", "context_router_gemm"),
        ("MoeDispatch", "context_moe_pre_dispatch"), ("Moe", "context_moe"),
        ("MoeDispatch", "context_moe_post_dispatch"), ("Gemm", "context_logits_gemm"),
        ("P2P", "context_p2p"),
    ]
    assert _top(spec["generation_ops"]) == [
        ("Embedding", "generation_embedding"), ("Elementwise", "generation_add_norm_1"),
        ("Fallback", "generation_mla_block"), ("Elementwise", "generation_add_norm_2"),
        ("Overlap", "generation_moe_overlap"), ("Gemm", "generation_logits_gemm"),
        ("P2P", "generation_p2p"),
    ]
    block = _op(spec["generation_ops"], "generation_mla_block")[1]
    assert [next(iter(op)) for op in block["fallback"]] == [
        "Gemm", "Gemm", "MlaBmm", "GenerationMla", "MlaBmm", "Gemm"
    ]
    assert _op(spec["context_ops"], "context_attention")[0] == "ContextMla"


@pytest.mark.parametrize("model,kwargs,expected", [
    # router n, module heads / native, MLA kernel heads, q_b n, kv_b n, proj k, bmm heads,
    # vocab, logits n
    ("moonshotai/Kimi-K2-Instruct", dict(tp_size=8, moe_ep_size=8),
     (384, (8, 64), 16, 1536, 2048, 1024, 8, 163840, 20480)),
    ("deepseek-ai/DeepSeek-V3", dict(attention_dp_size=8, moe_ep_size=8),
     (256, (128, 128), 128, 24576, 32768, 16384, 128, 129280, 129280)),
    ("nvidia/Kimi-K2.5-NVFP4", dict(system="b200_sxm", attention_dp_size=8, moe_ep_size=8),
     (384, (64, 64), 128, 12288, 16384, 8192, 64, 163840, 163840)),
])
def test_spec_mla_vectors(model, kwargs, expected):
    router_n, module_heads, kernel_heads, qb_n, kvb_n, proj_k, bmm_heads, vocab, logits_n = expected
    _, spec = _compile(model, **kwargs)
    ctx, gen = spec["context_ops"], spec["generation_ops"]
    assert _op(ctx, "context_router_gemm")[1]["n"] == router_n
    module = _op(ctx, "context_mla_module")[1]
    assert (module["num_heads"], module["native_num_heads"]) == module_heads
    assert _op(ctx, "context_attention")[1]["num_heads"] == kernel_heads
    assert _op(gen, "generation_attention")[1]["num_heads"] == kernel_heads
    assert _op(ctx, "context_q_b_proj_gemm")[1]["n"] == qb_n
    assert _op(ctx, "context_kv_b_proj_gemm")[1]["n"] == kvb_n
    proj = _op(ctx, "context_proj_gemm")[1]
    assert (proj["k"], proj["low_precision_input"]) == (proj_k, False)
    assert _op(gen, "generation_bmm_pre")[1]["num_heads"] == bmm_heads
    assert _op(ctx, "context_embedding")[1]["vocab_size"] == vocab
    assert _op(ctx, "context_logits_gemm")[1]["n"] == logits_n


def test_kimi_k25_int4_experts():
    result, spec = _compile("moonshotai/Kimi-K2.5", tp_size=8, moe_ep_size=8)
    assert result.model_family == "KIMIK25"
    assert (result.engine["weight_dtype"], result.engine["moe_dtype"]) == ("bfloat16", "int4")
    assert _op(spec["context_ops"], "context_moe")[1]["quant_mode"] == "int4_wo"
    gemm_modes = {f["quant_mode"] for v, f in _walk(spec["context_ops"]) if v == "Gemm"}
    assert gemm_modes == {"bfloat16"}
    assert _op(spec["generation_ops"], "generation_bmm_pre")[1]["quant_mode"] == "bfloat16"


def test_nvfp4_with_excluded_q_and_kv_inlines_the_granular_ops():
    """DeepSeek-V3.1-NVFP4: q and kv excluded -> not exact -> no Fallback."""
    _, spec = _compile("nvidia/DeepSeek-V3.1-NVFP4", system="b200_sxm", tp_size=8, moe_ep_size=8)
    ctx, gen = spec["context_ops"], spec["generation_ops"]
    assert "Fallback" not in {v for v, _ in _top(ctx) + _top(gen)}
    assert [n for _, n in _top(ctx)[2:8]] == [
        "context_downscale_gemm", "context_q_b_proj_gemm", "context_kv_b_proj_gemm",
        "context_attention", "context_proj_gemm", "context_add_norm_2",
    ]
    modes = {name: _op(ctx, name)[1]["quant_mode"] for name in (
        "context_downscale_gemm", "context_q_b_proj_gemm", "context_kv_b_proj_gemm",
        "context_proj_gemm", "context_shared_gate_up_gemm", "context_shared_ffn2_gemm")}
    assert modes == {
        "context_downscale_gemm": "bfloat16", "context_q_b_proj_gemm": "bfloat16",
        "context_kv_b_proj_gemm": "bfloat16", "context_proj_gemm": "nvfp4",
        "context_shared_gate_up_gemm": "nvfp4", "context_shared_ffn2_gemm": "nvfp4",
    }
    assert _op(gen, "generation_bmm_post")[1]["quant_mode"] == "bfloat16"


def test_vllm_inlined_attention_gets_lane_orders():
    """Without the Fallback, vLLM's plain attention ops are top level and get the lanes."""
    resolver = FixedResolver(lanes=("a", "default"))
    _, spec = _compile("nvidia/DeepSeek-V3.1-NVFP4", system="b200_sxm", backend="vllm",
                       tp_size=8, moe_ep_size=8, resolver=resolver)
    attention = _op(spec["context_ops"], "context_attention")[1]
    assert (attention["n"], attention["n_kv"], attention["head_size"]) == (16, 16, 128)
    assert attention["lane_order"] == ["a", "default"]
    assert [c[1] for c in resolver.calls if c[0] == "lanes"] == ["context", "generation"]


def test_r1_pp2_nextn2_scales():
    """Spec 30 §8.7: DeepSeek-R1 tp4 pp2 ep4 nextn 2."""
    result, spec = _compile("deepseek-ai/DeepSeek-R1", tp_size=4, pp_size=2, moe_ep_size=4,
                            nextn=2)
    assert result.engine["nextn"] == 2
    ctx, gen = spec["context_ops"], spec["generation_ops"]
    assert _op(ctx, "context_p2p")[1]["scale_factor"] == 1.0
    assert _op(ctx, "context_moe")[1]["scale_factor"] == 61.0
    assert _op(gen, "generation_mla_module")[1]["scale_factor"] == 63.0
    assert _op(gen, "generation_shared_ffn2_gemm")[1]["scale_factor"] == 63.0
    for name in ("generation_p2p", "generation_embedding", "generation_logits_gemm"):
        assert _op(gen, name)[1]["scale_factor"] == 1.0327868852459017


def test_vllm_allreduce_scales_with_nextn():
    _, spec = _compile("deepseek-ai/DeepSeek-V3", backend="vllm", tp_size=8, moe_ep_size=8,
                       nextn=1)
    assert _op(spec["context_ops"], "context_tp_allreduce")[1]["scale_factor"] == 122.0
    assert _op(spec["generation_ops"], "generation_tp_allreduce")[1]["scale_factor"] == 124.0
    _, trt = _compile("deepseek-ai/DeepSeek-V3", tp_size=8, moe_ep_size=8)
    assert not any("allreduce" in f["name"] or f["name"].endswith("_ar")
                   for _, f in _walk(trt["context_ops"] + trt["generation_ops"]))


def test_shared_expert_exclusion_yields_to_an_explicit_gemm_mode(tmp_path):
    config = json.loads(_shipped("deepseek-ai--DeepSeek-V3_config.json"))
    config["quantization_config"]["modules_to_not_convert"] = ["model.layers.3.mlp.shared_experts"]
    (tmp_path / "config.json").write_text(json.dumps(config))
    _, spec = _compile(str(tmp_path), tp_size=8, moe_ep_size=8)
    ctx = spec["context_ops"]
    assert _op(ctx, "context_shared_gate_up_gemm")[1]["quant_mode"] == "bfloat16"
    assert _op(ctx, "context_q_b_proj_gemm")[1]["quant_mode"] == "fp8_block"
    _, spec = _compile(str(tmp_path), tp_size=8, moe_ep_size=8, gemm_quant_mode="fp8_block")
    assert _op(spec["context_ops"], "context_shared_gate_up_gemm")[1]["quant_mode"] == "fp8_block"


def _shipped(name):
    from aic.paths import model_configs_path

    return (model_configs_path() / name).read_text()


def test_only_o_excluded_is_not_exact():
    patterns = ["model.layers.0.self_attn.o_proj"]
    assert excluded_groups(patterns) == {"o"}
    assert excluded_groups(["model.layers.*.self_attn"]) == {"q", "kv", "o", "indexer"}
    assert excluded_groups(["model.layers.1.self_attn.kv_a_proj_with_mqa",
                            "model.layers.1.self_attn.q_a_proj"]) == {"q", "kv"}
    assert excluded_groups(["lm_head", "model.layers.0.mlp.shared_experts"]) == set()
    raw = {"quantization_config": {"ignore": ["a"], "modules_to_not_convert": ["b"]},
           "hf_quant_config": {"quantization": {"exclude_modules": ["c"]}}}
    assert sorted(exclusion_patterns(raw)) == ["a", "b", "c"]


def test_mla_errors():
    with pytest.raises(ValueError, match="^num_heads 128 should be divisible by tp_size 3 $"):
        _compile("deepseek-ai/DeepSeek-V3", tp_size=3, moe_ep_size=3)
    with pytest.raises(ValueError, match="^ep size cannot be larger than num_experts 256"):
        _compile("deepseek-ai/DeepSeek-V3", attention_dp_size=512, moe_ep_size=512)
    with pytest.raises(ValueError, match='unknown FMHA quant mode: "float16"'):
        _compile("deepseek-ai/DeepSeek-V3", tp_size=8, moe_ep_size=8, fmha_quant_mode="float16")
    with pytest.raises(ValueError, match="^Parallelism width mismatch"):
        _compile("deepseek-ai/DeepSeek-V3", tp_size=8)


# ------------------------------------------------------------------------------------------
# With the native module
# ------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def native():
    return pytest.importorskip("aic._aic", reason="native module aic._aic is not built yet")


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_mla_spec_with_native(native, case):
    from aic import compile_engine_json

    args, kwargs = compile_args(case)
    ours = json.loads(compile_engine_json(*args, **kwargs))
    assert _strict(ours["context_ops"], case["spec_ops"]["context"]) == []
    assert _strict(ours["generation_ops"], case["spec_ops"]["generation"]) == []
    assert _strict(ours["engine"], case["resolved"]["engine"]) == []
