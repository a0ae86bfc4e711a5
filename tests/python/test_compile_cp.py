"""Context parallelism through ``compile_engine(cp_size=...)`` (spec 43; DSA: spec 43 §7).

The op lists of every compilable case of cp.json must equal the recorded ``spec_ops`` bit for bit,
every compile error must match (class and leading text), ``cp_size=1`` must leave every spec
untouched, and the worked examples of spec 43 §2-§6 hold. The native-backed checks (engine
numbers, memory) are at the end and skip without the native module.
"""

from __future__ import annotations

import json

import pytest
from conftest import GOLDENS, FixedResolver, GoldenResolver, compile_args, native_available

from aic.compiler.compile import compile_report
from aic.parity.runner import diff_json

with open(GOLDENS / "cp.json", encoding="utf-8") as fh:
    ALL = json.load(fh)["cases"]
CASES = [c for c in ALL if c["compile_error"] is None]
ERRORS = [c for c in ALL if c["compile_error"] is not None]

needs_native = pytest.mark.skipif(not native_available(), reason="needs the native module")


def _strict(ours, ref):
    return diff_json(ours, ref, "", rtol=0.0)


def _compile(model, backend="sglang", system="h200_sxm", **kwargs):
    result = compile_report(model, system, backend, resolver=FixedResolver(), **kwargs)
    return json.loads(result.spec_json)


def _ops(op_list, name):
    return [next(iter(op.values())) for op in op_list if next(iter(op.values()))["name"] == name]


def _names(op_list):
    return [next(iter(op.values()))["name"] for op in op_list]


def test_corpus_has_the_expected_cp_cases():
    assert len(ALL) == 44
    assert len(ERRORS) == 8
    assert sum(len(c["queries"]) for c in ALL) == 1184


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_cp_spec_matches_golden(case):
    args, kwargs = compile_args(case)
    result = compile_report(*args, resolver=GoldenResolver(case), **kwargs)
    ours = json.loads(result.spec_json)
    assert _strict(ours["context_ops"], case["spec_ops"]["context"]) == []
    assert _strict(ours["generation_ops"], case["spec_ops"]["generation"]) == []
    assert _strict(ours["engine"], case["resolved"]["engine"]) == []
    assert result.quant == case["resolved"]["quant"]


@pytest.mark.parametrize("case", ERRORS, ids=[c["id"] for c in ERRORS])
def test_cp_compile_errors_match_golden(case):
    args, kwargs = compile_args(case)
    with pytest.raises(Exception) as info:
        compile_report(*args, resolver=FixedResolver(), **kwargs)
    ref = case["compile_error"]
    assert type(info.value).__name__ == ref["class"]
    assert str(info.value).startswith(ref["message"])


@pytest.mark.parametrize("model,backend,kwargs", [
    ("Qwen/Qwen3-32B", "sglang", {}),
    ("Qwen/Qwen3-32B", "trtllm", {"tp_size": 2}),
    ("Qwen/Qwen3-30B-A3B", "sglang", {"moe_ep_size": 1}),
    ("openai/gpt-oss-120b", "vllm", {"tp_size": 2, "moe_ep_size": 2}),
    ("deepseek-ai/DeepSeek-V3", "sglang", {"tp_size": 8, "moe_ep_size": 8, "nextn": 1}),
    ("nvidia/GLM-5-NVFP4", "sglang", {"tp_size": 8, "moe_ep_size": 8}),
])
def test_cp_one_is_todays_spec(model, backend, kwargs):
    plain = compile_report(model, "h200_sxm", backend, resolver=FixedResolver(), **kwargs).spec_json
    cp1 = compile_report(model, "h200_sxm", backend, resolver=FixedResolver(), cp_size=1,
                         **kwargs).spec_json
    assert cp1 == plain
    assert json.loads(cp1)["engine"]["cp_size"] == 1
    assert "context_cp_all_gather" not in cp1


# -- spec 43 §2: validation order and messages ------------------------------------------------

WIDTH = "Parallelism width mismatch: "
GATE = "sglang CP requires tp_size=1 and attention_dp_size=1 when cp_size>1 (CP and attention TP/DP are mutually exclusive on sglang). "


@pytest.mark.parametrize("model,backend,kwargs,cls,message", [
    ("Qwen/Qwen3-30B-A3B", "sglang", {"cp_size": 0}, ValueError, "cp_size must be positive, got 0."),
    ("Qwen/Qwen3-30B-A3B", "sglang", {"cp_size": -2}, ValueError, "cp_size must be positive, got -2."),
    ("Qwen/Qwen3-30B-A3B", "sglang", {"cp_size": 2}, ValueError,
     WIDTH + "tp_size(1) * attention_dp_size(1) * cp_size(2) = 2, but moe_tp_size(1) * "
     "moe_ep_size(1) = 1. These must be equal."),
    # the width rule runs before the backend gate
    ("Qwen/Qwen3-30B-A3B", "trtllm", {"cp_size": 2}, ValueError, WIDTH),
    ("deepseek-ai/DeepSeek-V3", "sglang", {"tp_size": 2, "cp_size": 4, "moe_ep_size": 4}, ValueError,
     WIDTH + "tp_size(2) * attention_dp_size(1) * cp_size(4) = 8, but moe_tp_size(1) * "
     "moe_ep_size(4) = 4. These must be equal."),
    ("Qwen/Qwen3-32B", "trtllm", {"cp_size": 2}, NotImplementedError,
     "Context parallelism (cp_size=2) is not supported for model_family='LLAMA' on "
     "backend='trtllm'. The model class must override ``supports_cp`` and implement CP in its "
     "op pipeline."),
    ("Qwen/Qwen3-30B-A3B", "vllm", {"cp_size": 2, "moe_ep_size": 2}, NotImplementedError,
     "Context parallelism (cp_size=2) is not supported for model_family='MOE' on backend='vllm'."),
    ("deepseek-ai/DeepSeek-V3", "vllm", {"cp_size": 2, "moe_ep_size": 2}, NotImplementedError,
     "Context parallelism (cp_size=2) is not supported for model_family='DEEPSEEK' on backend='vllm'."),
    ("Qwen/Qwen3-32B", "sglang", {"tp_size": 2, "cp_size": 2}, ValueError,
     GATE + "Got tp_size=2, attention_dp_size=1, cp_size=2."),
    ("Qwen/Qwen3-32B", "sglang", {"attention_dp_size": 2, "cp_size": 2}, ValueError,
     GATE + "Got tp_size=1, attention_dp_size=2, cp_size=2."),
    ("meta-llama/Meta-Llama-3.1-70B", "sglang", {"tp_size": 4, "cp_size": 2}, ValueError,
     GATE + "Got tp_size=4, attention_dp_size=1, cp_size=2."),
    ("Qwen/Qwen3-30B-A3B", "sglang", {"attention_dp_size": 2, "cp_size": 2, "moe_ep_size": 4},
     ValueError, GATE + "Got tp_size=1, attention_dp_size=2, cp_size=2."),
    ("openai/gpt-oss-120b", "sglang", {"cp_size": 256, "moe_ep_size": 256}, ValueError,
     "ep size cannot be larger than num_experts 128"),
    ("Qwen/Qwen3-30B-A3B-FP8", "sglang", {"cp_size": 8, "moe_tp_size": 8}, ValueError,
     "Invalid quantized MoE configuration: (moe_intermediate_size=768 / moe_tp_size=8) % "
     "weight_block_size=128 != 0. "),
    ("Qwen/Qwen3-32B", "sglang", {"cp_size": -1}, OverflowError,
     "out of range integral type conversion attempted"),
    ("meta-llama/Llama-4-Scout-17B-16E-Instruct", "sglang", {"cp_size": 2, "moe_ep_size": 2},
     NotImplementedError, "Context parallelism (cp_size=2) for model_family='HYBRIDMOE' is not "
     "implemented by aic yet"),
    ("deepseek-ai/DeepSeek-V4-Flash", "trtllm", {"cp_size": 2, "moe_ep_size": 2},
     NotImplementedError, "Context parallelism (cp_size=2) is not supported for "
     "model_family='DEEPSEEKV4' on backend='trtllm'."),
])
def test_cp_validation(model, backend, kwargs, cls, message):
    with pytest.raises(cls) as info:
        _compile(model, backend, **kwargs)
    assert type(info.value) is cls
    assert str(info.value).startswith(message)


def test_cp_zero_on_a_dense_model_writes_zero_fields():
    spec = _compile("Qwen/Qwen3-32B", cp_size=0)
    assert spec["engine"]["cp_size"] == 0
    assert "context_cp_all_gather" not in _names(spec["context_ops"])
    assert _ops(spec["context_ops"], "context_qkv_gemm")[0]["seq_split"] == 0
    assert _ops(spec["context_ops"], "context_attention")[0]["cp_size"] == 0
    assert spec["generation_ops"] == _compile("Qwen/Qwen3-32B")["generation_ops"]


def test_cp_does_not_need_powers_of_two():
    spec = _compile("Qwen/Qwen3-32B", cp_size=3)
    assert _ops(spec["context_ops"], "context_cp_all_gather")[0]["num_gpus"] == 3


# -- spec 43 §3-§4: the op-list delta ---------------------------------------------------------


def test_llama_cp2_op_list():
    spec = _compile("Qwen/Qwen3-32B", cp_size=2)
    ctx = spec["context_ops"]
    assert _names(ctx) == [
        "context_embedding", "context_add_norm_1", "context_qkv_gemm", "context_attention",
        "context_cp_all_gather", "context_proj_gemm", "context_add_norm_2",
        "context_gate_ffn1_gemm", "context_act_gate", "context_ffn2_gemm", "context_logits_gemm",
        "context_embedding_ar", "context_ar_1", "context_ar_2", "context_p2p",
    ]
    assert ctx[4] == {"Nccl": {"name": "context_cp_all_gather", "scale_factor": 64.0,
                               "hidden_size": 2048.0, "num_gpus": 2, "dtype": "half",
                               "operation": "all_gather", "seq_split": 1}}
    for op in ctx:
        fields = next(iter(op.values()))
        if fields["name"] != "context_cp_all_gather" and "seq_split" in fields:
            assert fields["seq_split"] == 2, fields["name"]
    assert ctx[3]["ContextAttention"]["cp_size"] == 2
    # generation: exactly the tp 1 list
    assert spec["generation_ops"] == _compile("Qwen/Qwen3-32B")["generation_ops"]


@pytest.mark.parametrize("model,kwargs,hidden,dtype,scale", [
    ("Qwen/Qwen3-32B", {"gemm_quant_mode": "fp8", "comm_quant_mode": "int8"}, 4096.0, "int8", 64.0),
    ("Qwen/Qwen3-32B-FP8", {}, 1024.0, "half", 64.0),
    ("meta-llama/Meta-Llama-3.1-70B", {}, 2048.0, "half", 80.0),
    ("Qwen/Qwen3-30B-A3B", {"moe_ep_size": 2}, 1024.0, "half", 48.0),
    ("openai/gpt-oss-120b", {"moe_ep_size": 2}, 1024.0, "half", 36.0),
    ("deepseek-ai/DeepSeek-V3", {"moe_ep_size": 2}, 288.0, "half", 61.0),
    ("moonshotai/Kimi-K2.5", {"moe_ep_size": 2}, 576.0, "half", 61.0),
])
def test_all_gather_width(model, kwargs, hidden, dtype, scale):
    spec = _compile(model, cp_size=2, **kwargs)
    (gather,) = _ops(spec["context_ops"], "context_cp_all_gather")
    assert (gather["hidden_size"], gather["dtype"], gather["scale_factor"]) == (hidden, dtype, scale)


def test_gpt_oss_all_gather_follows_the_global_attention():
    ctx = _compile("openai/gpt-oss-120b", cp_size=2, moe_ep_size=2)["context_ops"]
    names = _names(ctx)
    assert names[0] == "context_attention" and ctx[0]["ContextAttention"]["window_size"] == 128
    second = names.index("context_attention", 1)
    assert names[second + 1] == "context_cp_all_gather"
    assert ctx[0]["ContextAttention"]["cp_size"] == ctx[second]["ContextAttention"]["cp_size"] == 2


def test_moe_dispatch_cp_fields():
    spec = _compile("Qwen/Qwen3-30B-A3B", cp_size=4, moe_ep_size=4)
    for name in ("context_moe_pre_dispatch", "context_moe_post_dispatch"):
        assert _ops(spec["context_ops"], name)[0]["attn_cp_size"] == 4
        assert _ops(spec["generation_ops"], name.replace("context", "generation"))[0]["attn_cp_size"] == 1
    assert "seq_split" not in _ops(spec["context_ops"], "context_moe")[0]
    assert _ops(spec["context_ops"], "context_router_gemm")[0]["seq_split"] == 4


def test_deepseek_module_scale_and_p2p():
    spec = _compile("deepseek-ai/DeepSeek-V3", cp_size=8, moe_ep_size=8, pp_size=2,
                    fmha_quant_mode="bfloat16")
    ctx = spec["context_ops"]
    block = _ops(ctx, "context_mla_block")[0]
    assert block["primary"]["MlaModuleContext"]["scale_factor"] == 7.625
    chain = {next(iter(op.values()))["name"]: next(iter(op.values())) for op in block["fallback"]}
    assert chain["context_attention"]["cp_size"] == 8
    assert chain["context_attention"]["scale_factor"] == 61.0
    assert chain["context_downscale_gemm"]["seq_split"] == 8
    names = _names(ctx)
    assert names[names.index("context_mla_block") + 1] == "context_cp_all_gather"
    assert _ops(ctx, "context_p2p")[0] == {"scale_factor": 1.0, "pp_size": 2, "hidden_size": 7168,
                                           "seq_split": 1, "name": "context_p2p"}
    overlap = _ops(spec["generation_ops"], "generation_moe_overlap")[0]
    for op in overlap["group_a"]:
        if "MoeDispatch" in op:
            assert op["MoeDispatch"]["attn_cp_size"] == 8
            assert op["MoeDispatch"]["is_context"] is False


def test_deepseek_inlined_mla_gets_the_all_gather_after_proj():
    spec = _compile("nvidia/DeepSeek-V3.1-NVFP4", system="b200_sxm", cp_size=4, moe_ep_size=4)
    names = _names(spec["context_ops"])
    assert "context_mla_block" not in names
    assert names[names.index("context_proj_gemm") + 1] == "context_cp_all_gather"
    assert _ops(spec["context_ops"], "context_attention")[0]["cp_size"] == 4
    assert _ops(spec["context_ops"], "context_cp_all_gather")[0]["hidden_size"] == 288.0


def test_deepseek_mtp_scales_generation_only():
    spec = _compile("deepseek-ai/DeepSeek-V3", cp_size=8, moe_ep_size=8, nextn=1)
    assert _ops(spec["generation_ops"], "generation_add_norm_1")[0]["scale_factor"] == 62.0
    assert _ops(spec["generation_ops"], "generation_embedding")[0]["scale_factor"] == 1.0163934426229508
    assert _ops(spec["context_ops"], "context_cp_all_gather")[0]["scale_factor"] == 61.0


def test_dsa_cp_delta():
    spec = _compile("nvidia/GLM-5-NVFP4", system="b200_sxm", cp_size=4, moe_ep_size=4)
    ctx = spec["context_ops"]
    assert "context_cp_all_gather" not in _names(ctx)
    assert _ops(ctx, "context_attention")[0]["cp_size"] == 4
    for name in ("context_add_norm_1", "context_add_norm_2"):
        assert _ops(ctx, name)[0]["scale_num_tokens"] == 4
    for op in ctx:
        fields = next(iter(op.values()))
        assert fields.get("seq_split", 1) == 1
    assert _ops(ctx, "context_moe_pre_dispatch")[0]["attn_cp_size"] == 4


def test_dsv4_cp_delta():
    spec = _compile("deepseek-ai/DeepSeek-V4-Flash", system="b200_sxm", cp_size=4, moe_ep_size=4)
    ctx, gen = spec["context_ops"], spec["generation_ops"]
    assert "context_cp_all_gather" not in _names(ctx)
    split = {"context_embedding", "context_mhc_pre", "context_attn_norm", "context_mhc_post",
             "context_ffn_norm", "context_shared_gate_up_gemm", "context_shared_act_gate",
             "context_shared_ffn2_gemm", "context_router_gemm", "context_logits_gemm"}
    for op in ctx:
        fields = next(iter(op.values()))
        if "seq_split" in fields:
            assert fields["seq_split"] == (4 if fields["name"] in split else 1), fields["name"]
    assert [op["Dsv4Context"]["cp_size"] for op in ctx if "Dsv4Context" in op] == [4, 4]
    for name in ("context_moe_pre_dispatch", "context_moe_post_dispatch"):
        assert _ops(ctx, name)[0]["attn_cp_size"] == 4
    assert "seq_split" not in _ops(ctx, "context_moe")[0]
    overlap = _ops(gen, "generation_moe_overlap")[0]
    assert [op["MoeDispatch"]["attn_cp_size"] for op in overlap["group_a"] if "MoeDispatch" in op] \
        == [4, 4]
    # decode is not context-parallel: no other generation op changes
    for op in gen:
        fields = next(iter(op.values()))
        assert fields.get("seq_split", 1) == 1 and fields.get("cp_size", 1) == 1


# -- spec 43 §5-§6: engine numbers and memory (native) ----------------------------------------


def _engine(model, system="h200_sxm", **kwargs):
    import aic

    return aic.AicEngine.from_spec(aic.compile_engine(model, system, "sglang", **kwargs))


@needs_native
def test_prefill_per_op_table():
    totals = {1: 881.967568943768, 2: 455.3661898898783, 4: 225.10653515823614}
    for cp, total in totals.items():
        engine = _engine("Qwen/Qwen3-32B", cp_size=cp)
        assert engine.predict_prefill_latency(1, 8192, 0) == pytest.approx(total, rel=1e-9)
    engine = _engine("Qwen/Qwen3-32B", cp_size=2)
    assert engine.predict_prefill_latency(1, 16384, 0) == pytest.approx(1017.6168954134945, rel=1e-9)
    assert engine.predict_prefill_latency(3, 5000, 0) == pytest.approx(782.5568228800763, rel=1e-9)
    # decode is not context-parallel
    plain = _engine("Qwen/Qwen3-32B")
    assert engine.predict_decode_latency(8, 2048, 128) == pytest.approx(2470.13502559266, rel=1e-9)
    assert engine.predict_decode_latency(256, 8192, 2) == plain.predict_decode_latency(256, 8192, 2)
    moe = _engine("Qwen/Qwen3-30B-A3B", cp_size=4, moe_ep_size=4)
    assert moe.predict_prefill_latency(1, 16384, 0) == pytest.approx(189.82873679250255, rel=1e-9)
    llama = _engine("meta-llama/Meta-Llama-3.1-70B", cp_size=2, pp_size=2)
    assert llama.predict_prefill_latency(4, 4096, 0) == pytest.approx(1882.5852469731274, rel=1e-9)


@needs_native
def test_cp_zero_prices_like_cp_one():
    engine = _engine("Qwen/Qwen3-32B", cp_size=0)
    assert engine.predict_prefill_latency(1, 1024, 0) == pytest.approx(96.37895444367015, rel=1e-9)
    assert engine.predict_prefill_latency(1, 2048, 0) == pytest.approx(196.5620842643763, rel=1e-9)
    assert engine.predict_decode_latency(1, 1024, 2) == pytest.approx(18.338353486389416, rel=1e-9)


@needs_native
def test_deepseek_prefill_through_the_chain():
    for cp, total in ((8, 44.8661354674342), (4, 85.53014617163556)):
        engine = _engine("deepseek-ai/DeepSeek-V3", cp_size=cp, moe_ep_size=cp,
                         fmha_quant_mode="bfloat16")
        context_ops, _ = engine.run_static_per_op(1, 1, 4096, 2)
        (block,) = [op for op in context_ops if op[0] == "context_mla_block"]
        assert block[1] == pytest.approx(total, rel=1e-9)


@needs_native
@pytest.mark.parametrize("model,kwargs,expected", [
    ("Qwen/Qwen3-32B", {"cp_size": 2}, (64064323584, 262144, 244386)),
    ("Qwen/Qwen3-32B", {"cp_size": 0}, (64064323584, 262144, 244386)),
    ("Qwen/Qwen3-30B-A3B", {"cp_size": 4, "moe_ep_size": 4}, (112632266752, 98304, 1145754)),
    ("deepseek-ai/DeepSeek-V3", {"cp_size": 8, "moe_ep_size": 8, "fmha_quant_mode": "bfloat16"},
     (23429395251, 35136, 666820)),
    ("openai/gpt-oss-120b", {"cp_size": 2, "moe_ep_size": 2}, (None, 73728, 2653570)),
])
def test_memory_worked_examples(model, kwargs, expected):
    from aic.compiler.memory import estimate_kv_cache

    est = estimate_kv_cache(model, "h200_sxm", "sglang", **kwargs)
    got = (est["total_kv_size_bytes"], est["kv_size_per_token_bytes"], est["total_kv_size_tokens"])
    assert got[1:] == expected[1:]
    if expected[0] is not None:
        assert got[0] == expected[0]


@needs_native
def test_memory_reports_cp_refusals_as_unbuildable():
    from aic.compiler.memory import estimate_kv_cache

    with pytest.raises(ValueError) as info:
        estimate_kv_cache("Qwen/Qwen3-32B", "h200_sxm", "trtllm", cp_size=2)
    assert str(info.value).startswith(
        "unsupported model/backend/GPU for KV-cache estimation: model=Qwen/Qwen3-32B, "
        "backend=trtllm, gpu_sku=h200_sxm: Context parallelism (cp_size=2) is not supported for "
        "model_family='LLAMA' on backend='trtllm'."
    )
    with pytest.raises(ValueError, match="no KV budget: non-KV memory \\(199335123353 bytes\\)"):
        estimate_kv_cache("deepseek-ai/DeepSeek-V3", "h200_sxm", "sglang", cp_size=4,
                          moe_ep_size=4, fmha_quant_mode="bfloat16")
