"""The worked examples of spec 30 §5.2, §6.4, §6.5 and §11, checked field by field."""

from __future__ import annotations

import json

import pytest
from conftest import FixedResolver

from aic.compiler.compile import compile_report
from aic.compiler.families.llama import mtp_multiplier
from aic.paths import model_configs_path


def _spec(model, backend="trtllm", version="1.3.0rc20", lanes=("default",), **kwargs):
    result = compile_report(model, "h200_sxm", backend,
                            resolver=FixedResolver(version=version, lanes=lanes), **kwargs)
    return json.loads(result.spec_json)


def _by_name(ops):
    return {next(iter(op.values()))["name"]: next(iter(op.values())) for op in ops}


def test_worked_example_1_qwen3_32b_tp2_pp2():
    spec = _spec("Qwen/Qwen3-32B", tp_size=2, pp_size=2)
    ctx = spec["context_ops"]
    expected = [
        ("Embedding", "context_embedding", 1.0, {"vocab_size": 75968, "hidden_size": 5120}),
        ("Elementwise", "context_add_norm_1", 64.0, {"bytes_per_token": 40960.0}),
        ("Gemm", "context_qkv_gemm", 64.0, {"n": 5120, "k": 5120, "low_precision_input": False}),
        ("ContextAttention", "context_attention", 64.0,
         {"n": 32, "n_kv": 4, "head_size": 128, "window_size": 0, "use_qk_norm": True,
          "kv_cache_dtype": "bfloat16", "fmha_quant_mode": "bfloat16", "lane_order": ["default"]}),
        ("Gemm", "context_proj_gemm", 64.0, {"n": 5120, "k": 4096, "low_precision_input": True}),
        ("Elementwise", "context_add_norm_2", 64.0, {"bytes_per_token": 40960.0}),
        ("Gemm", "context_gate_ffn1_gemm", 64.0, {"n": 25600, "k": 5120}),
        ("Elementwise", "context_act_gate", 64.0, {"bytes_per_token": 76800.0}),
        ("Gemm", "context_ffn2_gemm", 64.0, {"n": 5120, "k": 12800, "low_precision_input": True}),
        ("Gemm", "context_logits_gemm", 1.0, {"n": 75968, "k": 5120, "quant_mode": "bfloat16"}),
        ("CustomAllReduce", "context_embedding_ar", 1.0, {"hidden_size": 5120, "tp_size": 2}),
        ("CustomAllReduce", "context_ar_1", 64.0, {"hidden_size": 5120, "tp_size": 2}),
        ("CustomAllReduce", "context_ar_2", 64.0, {"hidden_size": 5120, "tp_size": 2}),
        ("P2P", "context_p2p", 1.0, {"pp_size": 2, "hidden_size": 5120}),
    ]
    assert len(ctx) == len(expected)
    for op, (variant, name, scale, fields) in zip(ctx, expected):
        assert list(op) == [variant]
        body = op[variant]
        assert body["name"] == name
        assert body["scale_factor"] == scale and isinstance(body["scale_factor"], float)
        for key, value in fields.items():
            assert body[key] == value, (name, key)
    gen = spec["generation_ops"]
    assert [next(iter(o.values()))["name"] for o in gen] == \
        [name.replace("context_", "generation_") for _, name, _, _ in expected]
    assert list(gen[3]) == ["GenerationAttention"]
    assert list(gen[3]["GenerationAttention"]) == [
        "name", "scale_factor", "n", "n_kv", "head_size", "window_size", "kv_cache_dtype",
        "lane_order"]
    assert gen[-1]["P2P"]["scale_factor"] == 1.0
    engine = spec["engine"]
    assert (engine["backend_version"], engine["moe_tp_size"], engine["moe_ep_size"]) == \
        ("1.3.0rc20", 1, 1)
    assert "nextn" not in engine


WIRE_ORDER = {
    "Gemm": ["name", "scale_factor", "n", "k", "quant_mode", "scale_num_tokens",
             "low_precision_input", "seq_split", "below_grid_sol"],
    "Embedding": ["name", "scale_factor", "vocab_size", "hidden_size", "quant_mode", "seq_split"],
    "Elementwise": ["name", "scale_factor", "bytes_per_token", "scale_num_tokens", "seq_split"],
    "CustomAllReduce": ["name", "scale_factor", "hidden_size", "tp_size", "quant", "seq_split"],
    "P2P": ["name", "scale_factor", "pp_size", "hidden_size", "seq_split"],
    "ContextAttention": ["name", "scale_factor", "n", "n_kv", "head_size", "window_size",
                         "kv_cache_dtype", "fmha_quant_mode", "use_qk_norm", "cp_size",
                         "lane_order"],
    "GenerationAttention": ["name", "scale_factor", "n", "n_kv", "head_size", "window_size",
                            "kv_cache_dtype", "lane_order"],
}


def test_wire_field_order():
    spec = _spec("Qwen/Qwen3-8B")
    for op in spec["context_ops"] + spec["generation_ops"]:
        (variant, body), = op.items()
        assert list(body) == WIRE_ORDER[variant]


@pytest.mark.parametrize("model,tp,expected", [
    # qkv n/k, attn n/n_kv, proj n/k, gate n, act bytes, ffn2 k, logits n, (gemm, kv, fmha)
    ("Qwen/Qwen3-8B", 1, (6144, 4096, 32, 8, 4096, 4096, 24576, 73728.0, 12288, 151936,
                          ("bfloat16", "bfloat16", "bfloat16"))),
    ("Qwen/Qwen3-8B", 16, (512, 4096, 2, 1, 4096, 256, 1536, 4608.0, 768, 9496,
                           ("bfloat16", "bfloat16", "bfloat16"))),
    ("Qwen/Qwen3-32B-FP8", 4, (2560, 5120, 16, 2, 5120, 2048, 12800, 38400.0, 6400, 37984,
                               ("fp8_block", "fp8", "fp8"))),
    ("nvidia/Llama-3.1-70B-Instruct-FP8", 4, (2560, 8192, 16, 2, 8192, 2048, 14336, 43008.0, 7168,
                                              32064, ("fp8_static", "fp8", "fp8"))),
])
def test_llama_vectors(model, tp, expected):
    ops = _by_name(_spec(model, tp_size=tp)["context_ops"])
    got = (
        ops["context_qkv_gemm"]["n"], ops["context_qkv_gemm"]["k"],
        ops["context_attention"]["n"], ops["context_attention"]["n_kv"],
        ops["context_proj_gemm"]["n"], ops["context_proj_gemm"]["k"],
        ops["context_gate_ffn1_gemm"]["n"], ops["context_act_gate"]["bytes_per_token"],
        ops["context_ffn2_gemm"]["k"], ops["context_logits_gemm"]["n"],
        (ops["context_qkv_gemm"]["quant_mode"], ops["context_attention"]["kv_cache_dtype"],
         ops["context_attention"]["fmha_quant_mode"]),
    )
    assert got == expected


def test_vllm_lowers_checkpoint_fp8_fmha():
    ops = _by_name(_spec("Qwen/Qwen3-32B-FP8", backend="vllm", version="0.24.0", tp_size=4)
                   ["context_ops"])
    assert ops["context_attention"]["fmha_quant_mode"] == "bfloat16"
    assert ops["context_attention"]["kv_cache_dtype"] == "fp8"


def test_mtp_scale_factors():
    assert mtp_multiplier(26, 1) * 26 == 27.000000000000004
    assert mtp_multiplier(26, 1) == 1.0384615384615385
    assert mtp_multiplier(36, 2) * 36 == 38.0
    assert mtp_multiplier(36, 2) == 1.0555555555555556
    assert mtp_multiplier(61, 1) == 1.0163934426229508

    spec = _spec("Qwen/Qwen3-8B", nextn=2)
    gen = _by_name(spec["generation_ops"])
    ctx = _by_name(spec["context_ops"])
    assert gen["generation_qkv_gemm"]["scale_factor"] == 38.0
    assert gen["generation_embedding"]["scale_factor"] == 1.0555555555555556
    assert gen["generation_logits_gemm"]["scale_factor"] == 1.0555555555555556
    assert ctx["context_qkv_gemm"]["scale_factor"] == 36.0
    assert spec["engine"]["nextn"] == 2
    assert list(spec["engine"])[-1] == "nextn"

    spec = _spec("Qwen/Qwen3-8B", nextn=3, pp_size=2)
    gen = _by_name(spec["generation_ops"])
    assert gen["generation_ar_1"]["scale_factor"] == 39.0
    assert gen["generation_p2p"]["scale_factor"] == 1.0833333333333333
    assert _by_name(spec["context_ops"])["context_p2p"]["scale_factor"] == 1.0


def test_mtp_26_layers(tmp_path):
    cfg = json.loads((model_configs_path() / "Qwen--Qwen3-8B_config.json").read_text())
    cfg["num_hidden_layers"] = 26
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    spec = _spec(str(tmp_path), nextn=1)
    gen = _by_name(spec["generation_ops"])
    assert gen["generation_add_norm_1"]["scale_factor"] == 27.000000000000004
    assert gen["generation_embedding_ar"]["scale_factor"] == 1.0384615384615385
    assert spec["engine"]["model_name"] == str(tmp_path)


def test_dense_ignores_moe_sizes_and_adp():
    base = _spec("Qwen/Qwen3-8B")
    other = _spec("Qwen/Qwen3-8B", attention_dp_size=2, moe_tp_size=2, moe_ep_size=4)
    assert other["context_ops"] == base["context_ops"]
    assert other["generation_ops"] == base["generation_ops"]
    assert (other["engine"]["attention_dp_size"], other["engine"]["moe_tp_size"],
            other["engine"]["moe_ep_size"]) == (2, 2, 4)


def test_engine_object_keys_and_systems_path(tmp_path):
    spec = _spec("Qwen/Qwen3-8B", systems_path=None)
    assert list(spec["engine"]) == [
        "schema_version", "model_name", "system_name", "systems_path", "backend",
        "backend_version", "kv_block_size", "tp_size", "pp_size", "attention_dp_size",
        "moe_tp_size", "moe_ep_size", "cp_size", "weight_dtype", "moe_dtype", "activation_dtype",
        "kv_cache_dtype", "enable_shared_layer", "strict_provenance", "database_mode",
        "transfer_policy", "tolerate_dirless_version", "extra"]
    assert spec["engine"]["systems_path"] is None
    assert spec["schema_version"] == 15


def test_json_floats_are_floats():
    result = compile_report("Qwen/Qwen3-8B", "h200_sxm", "trtllm", resolver=FixedResolver())
    assert '"scale_factor":36.0' in result.spec_json
    assert '"bytes_per_token":32768.0' in result.spec_json
    assert '"scale_factor":0.0' in result.spec_json  # P2P at pp 1
