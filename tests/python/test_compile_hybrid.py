"""Front end of the hybrid-attention families (spec 35): HYBRIDMOE (Llama 4, MiMo-V2-Flash),
STEP3P7, GEMMA4MIX, the Qwen3-VL text decoders and gpt-oss.

Every compiled case of ``goldens/hybrid.json`` is compared op by op with its recorded spec (the
version and lane orders come from the golden case, so this runs without the native module);
the spec's worked examples, config-validation errors, quant splits and memory facts are checked
with modified configs where no golden covers them.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from conftest import FixedResolver, GoldenResolver, compile_args, golden_cases

from aic.compiler.compile import compile_report
from aic.compiler.families import hybridmoe
from aic.compiler.hf_config import load_model_config
from aic.compiler.memory import model_facts
from aic.parity.runner import diff_json

MODEL_CONFIGS = Path(__file__).resolve().parents[2] / "data" / "model_configs"

CASES = [c for c in golden_cases("hybrid") if c["compile_error"] is None]
ERRORS = [c for c in golden_cases("hybrid") if c["compile_error"] is not None]


def _config(model: str) -> dict:
    return json.loads((MODEL_CONFIGS / f"{model.replace('/', '--')}_config.json").read_text())


def _write(tmp_path: Path, config: dict, quant: dict | None = None) -> str:
    folder = tmp_path / "model"
    folder.mkdir(exist_ok=True)
    (folder / "config.json").write_text(json.dumps(config))
    if quant is not None:
        (folder / "hf_quant_config.json").write_text(json.dumps(quant))
    return str(folder)


def _compile(model, system="h200_sxm", backend="trtllm", **kwargs):
    result = compile_report(model, system, backend, resolver=FixedResolver(), **kwargs)
    return result, json.loads(result.spec_json)


def _ops(spec: dict, phase: str = "context") -> list[tuple[str, dict]]:
    return [next(iter(op.items())) for op in spec[f"{phase}_ops"]]


def _named(spec: dict, name: str, phase: str = "context") -> list[dict]:
    return [fields for _, fields in _ops(spec, phase) if fields["name"] == name]


def test_corpus_counts():
    assert len(CASES) == 47 and len(ERRORS) == 6


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_hybrid_spec_matches_golden(case):
    args, kwargs = compile_args(case)
    result = compile_report(*args, resolver=GoldenResolver(case), **kwargs)
    ours = json.loads(result.spec_json)
    ref = case["resolved"]
    assert diff_json(ours["context_ops"], case["spec_ops"]["context"], "", rtol=0.0) == []
    assert diff_json(ours["generation_ops"], case["spec_ops"]["generation"], "", rtol=0.0) == []
    assert diff_json(ours["engine"], ref["engine"], "", rtol=0.0) == []
    assert result.model_family == ref["model_family"]
    assert result.quant == ref["quant"]


@pytest.mark.parametrize("case", ERRORS, ids=[c["id"] for c in ERRORS])
def test_hybrid_compile_errors_match_golden(case):
    args, kwargs = compile_args(case)
    with pytest.raises(ValueError) as info:
        compile_report(*args, resolver=FixedResolver(), **kwargs)
    assert str(info.value).startswith(case["compile_error"]["message"])


def test_worked_example_a_scout():
    """35 §5.5: Scout h200 vllm tp 4 moe_tp 4 — 21 ops per phase, two MoE blocks of 24."""
    _, spec = _compile("meta-llama/Llama-4-Scout-17B-16E-Instruct", backend="vllm", tp_size=4,
                       moe_tp_size=4)
    names = [f["name"] for _, f in _ops(spec)]
    assert len(names) == 21
    assert names[:4] == ["context_embedding", "context_global_attn_norm",
                         "context_global_qkv_gemm", "context_attention"]
    assert names[-2:] == ["context_logits_gemm", "context_p2p"]
    attn = _named(spec, "context_attention")
    assert [(a["n"], a["n_kv"], a["head_size"], a["window_size"]) for a in attn] == [
        (10, 2, 128, 0), (10, 2, 128, 8192)]
    assert _named(spec, "context_embedding")[0]["vocab_size"] == 202048  # not sharded
    assert _named(spec, "context_global_qkv_gemm")[0]["n"] == 1792
    assert _named(spec, "context_logits_gemm")[0]["n"] == 50512
    assert not any(v == "CustomAllReduce" for v, _ in _ops(spec))


def test_worked_example_b_step_with_nextn():
    """35 §6: Step-3.7-Flash h200 trtllm tp 4 ep 4 nextn 1 — 40 ops, shared expert after P2P."""
    _, spec = _compile("stepfun-ai/Step-3.7-Flash", tp_size=4, moe_ep_size=4, nextn=1)
    ctx = _ops(spec)
    assert len(ctx) == 40
    assert [f["name"] for _, f in ctx[-4:]] == [
        "context_p2p", "context_shared_expert_dense_gate_up_gemm",
        "context_shared_expert_dense_act", "context_shared_expert_dense_down_gemm"]
    assert ctx[-3][1]["n"] == 640 and ctx[-2][1]["bytes_per_token"] == 1920.0
    assert ctx[-3][1]["scale_factor"] == 42.0
    assert all(a["use_qk_norm"] for a in _named(spec, "context_attention"))
    gen_scales = {f["name"]: f["scale_factor"] for _, f in _ops(spec, "generation")}
    assert gen_scales["generation_global_attn_norm"] == 11.244444444444444
    assert gen_scales["generation_swa_attn_norm"] == 31.688888888888886
    assert gen_scales["generation_swa_dense_attn_norm"] == 2.0444444444444443
    assert gen_scales["generation_global_dense_attn_norm"] == 1.0222222222222221
    assert gen_scales["generation_shared_expert_dense_act"] == 42.93333333333333
    assert _named(spec, "context_swa_dense_gate_up_gemm")[0]["n"] == 5632


def test_nested_step_config_reads_shared_expert_from_top_level(tmp_path):
    """35 §2.4: a nested Step3p7ForConditionalGeneration config has no shared-expert ops."""
    inner = _config("stepfun-ai/Step-3.7-Flash-FP8")
    cfg = {"architectures": ["Step3p7ForConditionalGeneration"], "text_config": inner}
    _, spec = _compile(_write(tmp_path, cfg), tp_size=4, moe_tp_size=2, moe_ep_size=2)
    assert len(spec["context_ops"]) == 37
    assert _named(spec, "context_global_moe")[0]["quant_mode"] == "fp8_block"
    assert not _named(spec, "context_shared_expert_dense_act")


def test_step_head_gate_and_sliding_heads(tmp_path):
    """35 §6 modified config: 96 sliding heads, head gate on, 48-entry layer_types truncated."""
    cfg = _config("stepfun-ai/Step-3.7-Flash")
    cfg["attention_other_setting"] = {"num_attention_heads": 96, "head_dim": 128}
    cfg["use_head_wise_attn_gate"] = True
    cfg["layer_types"] = cfg["layer_types"][:45] + ["full_attention"] * 3
    _, spec = _compile(_write(tmp_path, cfg), tp_size=4, moe_ep_size=4)
    assert _named(spec, "context_swa_qkv_gemm")[0]["n"] == 3584
    assert _named(spec, "context_swa_attn_gate_gemm")[0]["n"] == 24
    assert _named(spec, "context_global_attn_gate_gemm")[0]["n"] == 16
    assert _named(spec, "context_swa_attn_gate_gemm")[0]["low_precision_input"] is False
    assert _named(spec, "context_swa_attn_gate")[0]["bytes_per_token"] == 12336.0
    assert _named(spec, "context_global_attn_gate")[0]["bytes_per_token"] == 8224.0
    assert _named(spec, "context_swa_proj_gemm")[0]["k"] == 3072


def test_step_moe_layers_enum(tmp_path):
    """35 §15: ``moe_layers_enum`` as a string (spaces tolerated) picks the MoE layers."""
    cfg = _config("stepfun-ai/Step-3.7-Flash")
    cfg["moe_layers_enum"] = " 3, 5 ,7, 9"
    _, spec = _compile(_write(tmp_path, cfg), tp_size=4, moe_ep_size=4)
    scales = {f["name"]: f["scale_factor"] for _, f in _ops(spec)}
    assert len(spec["context_ops"]) == 31
    assert scales["context_swa_moe"] == 4.0
    assert scales["context_swa_dense_attn_norm"] == 29.0
    assert scales["context_global_dense_attn_norm"] == 12.0
    assert scales["context_shared_expert_dense_act"] == 4.0


def test_mimo_layout_polarity():
    """35 §2.3/§2.6: MiMo pattern 1 = global — 39 global+MoE, 8 sliding+MoE, 1 sliding+dense."""
    layout = hybridmoe.parse(load_model_config("XiaomiMiMo/MiMo-V2-Flash"))
    assert (layout.layers_of(True, True), layout.layers_of(False, True), layout.layers_of(False, False),
            layout.layers_of(True, False)) == (39, 8, 1, 0)
    _, spec = _compile("XiaomiMiMo/MiMo-V2-Flash", tp_size=4, moe_ep_size=4)
    assert [f["n"] for f in _named(spec, "context_global_qkv_gemm")] == [3392]
    assert [f["n"] for f in _named(spec, "context_swa_qkv_gemm")] == [3712]
    assert all(f["moe_quant"] == "bfloat16" for _, f in _ops(spec) if "dispatch" in f["name"])


@pytest.mark.parametrize("step, message", [
    (0, "interleave_moe_layer_step must be a positive integer, got 0"),
    (2.0, "interleave_moe_layer_step must be a positive integer, got 2.0"),
])
def test_llama4_interleave_step_errors_beat_width_errors(tmp_path, step, message):
    cfg = _config("meta-llama/Llama-4-Scout-17B-16E-Instruct")
    cfg["text_config"]["interleave_moe_layer_step"] = step
    with pytest.raises(ValueError, match=message):
        _compile(_write(tmp_path, cfg), tp_size=4)  # no MoE sizes: a width mismatch too


def test_llama4_interleave_step_true_is_step_one(tmp_path):
    cfg = _config("meta-llama/Llama-4-Scout-17B-16E-Instruct")
    cfg["text_config"]["interleave_moe_layer_step"] = True
    _, ours = _compile(_write(tmp_path, cfg), tp_size=4, moe_tp_size=4)
    _, ref = _compile("meta-llama/Llama-4-Scout-17B-16E-Instruct", tp_size=4, moe_tp_size=4)
    assert ours["context_ops"] == ref["context_ops"]


def _modified(tmp_path, model, change):
    cfg = copy.deepcopy(_config(model))
    change(cfg.get("text_config", cfg))
    return _write(tmp_path, cfg)


@pytest.mark.parametrize("model, change, sizes, message", [
    ("stepfun-ai/Step-3.7-Flash", lambda c: c.__setitem__("layer_types", c["layer_types"][:44]),
     {"tp_size": 4}, "Step3p7 layer_types length 44 != num_hidden_layers 45 "
                     "(num_nextn_predict_layers=3)"),
    ("stepfun-ai/Step-3.7-Flash", lambda c: c["layer_types"].__setitem__(1, "linear_attention"),
     {"tp_size": 3, "moe_tp_size": 3},
     "Step3p7 layer_types must contain only 'sliding_attention' or 'full_attention'"),
    ("google/gemma-4-26B-A4B", lambda c: c["layer_types"].__setitem__(0, "chunked"),
     {"tp_size": 3, "moe_tp_size": 3},
     "Gemma 4 layer_types must contain only 'sliding_attention' or 'full_attention'"),
    ("XiaomiMiMo/MiMo-V2-Flash", lambda c: c["hybrid_layer_pattern"].pop(),
     {"tp_size": 4}, "Hybrid pattern length mismatch for MiMoV2FlashForCausalLM: expected 48 "
                     "entries, got attn=47 moe=48"),
    ("XiaomiMiMo/MiMo-V2-Flash", lambda c: c["hybrid_layer_pattern"].__setitem__(0, 2),
     {"tp_size": 32, "moe_tp_size": 32},
     "Hybrid patterns for MiMoV2FlashForCausalLM must contain only 0/1 values"),
])
def test_config_checks_come_before_parallelism_checks(tmp_path, model, change, sizes, message):
    """35 §4 step 5 (correction): a broken config wins over every parallelism error."""
    with pytest.raises(ValueError) as info:
        _compile(_modified(tmp_path, model, change), **sizes)
    assert str(info.value) == message


def test_gemma_missing_kv_heads_is_a_key_error(tmp_path):
    path = _modified(tmp_path, "google/gemma-4-26B-A4B", lambda c: c.pop("num_key_value_heads"))
    with pytest.raises(KeyError) as info:
        _compile(path, tp_size=3)
    assert info.value.args == ("num_key_value_heads",)
    assert isinstance(info.value, ValueError)


def test_gemma_router_needs_128_experts(tmp_path):
    """35 §7.2: 64 experts → no router GEMMs (25 ops instead of 27)."""
    path = _modified(tmp_path, "google/gemma-4-26B-A4B", lambda c: c.__setitem__("num_experts", 64))
    _, spec = _compile(path, tp_size=2, moe_ep_size=2)
    assert len(spec["context_ops"]) == 25
    assert _named(spec, "context_swa_moe")[0]["num_experts"] == 64


def test_gemma_dense_variants(tmp_path):
    """35 §7.2: ``top_k_experts 0`` makes a dense list; dense Gemma rejects moe_ep > 1; no
    window gives window 0 on the sliding block."""
    path = _modified(tmp_path, "google/gemma-4-26B-A4B",
                     lambda c: c.__setitem__("top_k_experts", 0))
    _, spec = _compile(path, backend="vllm", tp_size=2, moe_tp_size=2)
    assert len(spec["context_ops"]) == 19
    with pytest.raises(ValueError, match="dense Gemma 4 variants require moe_ep_size=1, got 2"):
        _compile(path, backend="vllm", tp_size=2, moe_ep_size=2)
    path = _modified(tmp_path, "google/gemma-4-26B-A4B", lambda c: c.pop("sliding_window"))
    _, spec = _compile(path, backend="vllm")
    assert [(a["n"], a["n_kv"], a["head_size"], a["window_size"])
            for a in _named(spec, "context_attention")] == [(16, 8, 256, 0), (16, 2, 512, 0)]


@pytest.mark.parametrize("overrides, gemm, shared, moe", [
    ({}, "bfloat16", "bfloat16", "bfloat16"),
    ({"gemm_quant_mode": "nvfp4"}, "nvfp4", "nvfp4", "nvfp4"),
    ({"moe_quant_mode": "fp8"}, "bfloat16", "bfloat16", "bfloat16"),
])
def test_gemma_checkpoint_quant_split(overrides, gemm, shared, moe):
    """35 §3.2 on Gemma-4-26B-A4B-NVFP4 (``self_attn`` and ``.mlp`` excluded)."""
    _, spec = _compile("nvidia/Gemma-4-26B-A4B-NVFP4", system="b200_sxm", **overrides)
    assert _named(spec, "context_swa_qkv_gemm")[0]["quant_mode"] == gemm
    assert _named(spec, "context_swa_shared_mlp_gate_up_gemm")[0]["quant_mode"] == shared
    assert _named(spec, "context_swa_moe")[0]["quant_mode"] == moe
    assert _named(spec, "context_swa_moe_pre_dispatch")[0]["moe_quant"] == moe


def test_gemma_31b_split_keeps_the_mlp_quantized():
    _, spec = _compile("nvidia/Gemma-4-31B-IT-NVFP4", system="b200_sxm", backend="vllm",
                       tp_size=2, moe_tp_size=2)
    assert len(spec["context_ops"]) == 19
    assert _named(spec, "context_global_qkv_gemm")[0]["quant_mode"] == "bfloat16"
    assert _named(spec, "context_global_shared_mlp_down_gemm")[0]["quant_mode"] == "nvfp4"


def test_qwen3_vl_decoders_have_no_qk_norm():
    """35 §8: the Qwen3-VL decoders use the LLAMA / MOE lists with ``use_qk_norm`` false."""
    result, spec = _compile("Qwen/Qwen3-VL-8B-Instruct", tp_size=2)
    assert result.model_family == "QWEN3VL" and len(spec["context_ops"]) == 14
    assert not _named(spec, "context_attention")[0]["use_qk_norm"]
    result, spec = _compile("Qwen/Qwen3-VL-30B-A3B-Instruct", backend="vllm", tp_size=2,
                            moe_ep_size=2)
    assert result.model_family == "QWEN3VL_MOE" and len(spec["context_ops"]) == 12
    assert _named(spec, "context_moe")[0]["workload_distribution"] == "power_law_1.2"


def test_memory_facts_layer_split():
    """35 §11.3: the window-capped families carry their sliding / global KV geometry."""
    step = model_facts(load_model_config("stepfun-ai/Step-3.7-Flash"))["layer_kv"]
    assert step == {"window": 512, "sliding_layers": 33, "sliding_kv_heads": 8,
                    "sliding_head_dim": 128, "global_layers": 12, "global_kv_heads": 8,
                    "global_head_dim": 128}
    gemma = model_facts(load_model_config("google/gemma-4-26B-A4B"))["layer_kv"]
    assert gemma == {"window": 1024, "sliding_layers": 25, "sliding_kv_heads": 8,
                     "sliding_head_dim": 256, "global_layers": 5, "global_kv_heads": 2,
                     "global_head_dim": 512}
    scout = model_facts(load_model_config("meta-llama/Llama-4-Scout-17B-16E-Instruct"))
    assert scout["layer_kv"] is None and scout["head_dim"] == 128
