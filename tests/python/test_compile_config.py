"""HF config loading and parsing (spec 30 §2) and quant resolution (spec 30 §3, §11.2)."""

from __future__ import annotations

import json
import os
import time

import pytest

from aic.errors import UnsupportedArchitectureError
from aic.compiler.hf_config import RawConfig, load_model_config, load_raw_config, parse_model_config, preprocess
from aic.compiler.quant import dtype_name, infer_checkpoint_quant, moe_dtype_name, resolve_quant

# spec 30 §2.3 worked parse results: L, h, n, n_kv, d, I, vocab, E, topk, MI
PARSE_TABLE = {
    "Qwen/Qwen3-8B": (36, 4096, 32, 8, 128, 12288, 151936, 0, 0, 12288),
    "Qwen/Qwen3-32B": (64, 5120, 64, 8, 128, 25600, 151936, 0, 0, 25600),
    "Qwen/Qwen3-32B-FP8": (64, 5120, 64, 8, 128, 25600, 151936, 0, 0, 25600),
    "nvidia/Llama-3.1-70B-Instruct-FP8": (80, 8192, 64, 8, 128, 28672, 128256, 0, 0, 28672),
    "Qwen/Qwen3-30B-A3B": (48, 2048, 32, 4, 128, 6144, 151936, 128, 8, 768),
    "mistralai/Mixtral-8x7B-v0.1": (32, 4096, 32, 8, 128, 14336, 32000, 8, 2, 14336),
    "MiniMaxAI/MiniMax-M2.5": (62, 3072, 48, 8, 128, 1536, 200064, 256, 8, 1536),
    "deepseek-ai/DeepSeek-V3": (61, 7168, 128, 128, 56, 18432, 129280, 256, 8, 2048),
    "deepseek-ai/DeepSeek-R1": (61, 7168, 128, 128, 56, 18432, 129280, 256, 8, 2048),
    "moonshotai/Kimi-K2-Instruct": (61, 7168, 64, 64, 112, 18432, 163840, 384, 8, 2048),
    "moonshotai/Kimi-K2.5": (61, 7168, 64, 64, 112, 18432, 163840, 384, 8, 2048),
}


@pytest.mark.parametrize("model", sorted(PARSE_TABLE))
def test_parse_table(model):
    c = load_model_config(model)
    got = (c.num_layers, c.hidden_size, c.num_heads, c.num_kv_heads, c.head_dim,
           c.intermediate_size, c.vocab_size, c.num_experts, c.topk, c.moe_intermediate_size)
    assert got == PARSE_TABLE[model]


def test_families_and_qk_norm():
    assert load_model_config("Qwen/Qwen3-8B").family == "LLAMA"
    assert load_model_config("Qwen/Qwen3-8B").use_qk_norm is True
    assert load_model_config("meta-llama/Meta-Llama-3.1-70B").use_qk_norm is False
    assert load_model_config("XiaomiMiMo/MiMo-7B-Base").family == "LLAMA"
    assert load_model_config("XiaomiMiMo/MiMo-7B-Base").use_qk_norm is False
    assert load_model_config("Qwen/Qwen3-30B-A3B").family == "MOE"
    assert load_model_config("deepseek-ai/DeepSeek-V3").family == "DEEPSEEK"
    assert load_model_config("moonshotai/Kimi-K2.5").family == "KIMIK25"


def test_config_sources():
    assert load_raw_config("Qwen/Qwen3-32B").source == "builtin"
    # shipped but not a built-in id of the reference: resolved to the shipped config anyway
    assert load_raw_config("mistralai/Mixtral-8x7B-v0.1").source == "shipped-config-as-local-dir"
    assert load_raw_config("Qwen/Qwen3-32B-FP8-Static-PerTensor").hf_quant_config is not None


def _write(tmp_path, config, quant=None, name="model"):
    folder = tmp_path / name
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(config))
    if quant is not None:
        (folder / "hf_quant_config.json").write_text(json.dumps(quant))
    return folder


LLAMA_CFG = {
    "architectures": ["LlamaForCausalLM"], "num_hidden_layers": 26, "hidden_size": 2048,
    "num_attention_heads": 16, "num_key_value_heads": 4, "vocab_size": 32000,
    "intermediate_size": 8192, "max_position_embeddings": 4096,
}


def test_local_folder_and_config_file(tmp_path):
    folder = _write(tmp_path, LLAMA_CFG)
    by_dir = load_model_config(str(folder))
    by_file = load_model_config(str(folder / "config.json"))
    assert by_dir.num_layers == by_file.num_layers == 26
    assert by_dir.head_dim == 128  # h // n
    assert by_dir.config_source == "local"


def test_missing_kv_heads_is_zero(tmp_path):
    cfg = dict(LLAMA_CFG)
    del cfg["num_key_value_heads"]
    assert load_model_config(str(_write(tmp_path, cfg))).num_kv_heads == 0


def test_layer_count_fallbacks(tmp_path):
    cfg = dict(LLAMA_CFG)
    del cfg["num_hidden_layers"]
    cfg["hybrid_override_pattern"] = "M*M*-"
    assert load_model_config(str(_write(tmp_path, cfg, name="a"))).num_layers == 5
    del cfg["hybrid_override_pattern"]
    with pytest.raises(ValueError, match="layer count"):
        load_model_config(str(_write(tmp_path, cfg, name="b")))


@pytest.mark.parametrize("field", ["hidden_size", "num_attention_heads", "vocab_size",
                                   "max_position_embeddings"])
def test_missing_required_field(tmp_path, field):
    cfg = dict(LLAMA_CFG)
    del cfg[field]
    with pytest.raises(ValueError, match=field):
        load_model_config(str(_write(tmp_path, cfg)))


def test_unknown_architecture(tmp_path):
    cfg = dict(LLAMA_CFG, architectures=["FooForCausalLM"])
    with pytest.raises(UnsupportedArchitectureError) as info:
        load_model_config(str(_write(tmp_path, cfg)))
    assert "FooForCausalLM" in str(info.value)
    assert "LlamaForCausalLM" in str(info.value)
    assert info.value.known_to_reference is False


def test_nested_text_config(tmp_path):
    cfg = {"architectures": ["Qwen3VLForConditionalGeneration"], "text_config": dict(LLAMA_CFG),
           "vision_config": {}}
    c = load_model_config(str(_write(tmp_path, cfg)))
    assert (c.family, c.num_layers, c.hidden_size) == ("QWEN3VL", 26, 2048)


# ------------------------------------------------------------------------------------------
# Quantization (spec 30 §3.4 verified resolutions, trtllm unless stated)
# ------------------------------------------------------------------------------------------

QUANT_TABLE = [
    # model, backend, overrides, (gemm, moe, kv, fmha)
    ("Qwen/Qwen3-32B-FP8", "trtllm", {}, ("fp8_block", "fp8_block", "fp8", "fp8")),
    ("Qwen/Qwen3-32B-FP8", "vllm", {}, ("fp8_block", "fp8_block", "fp8", "bfloat16")),
    ("nvidia/Llama-3.1-70B-Instruct-FP8", "trtllm", {}, ("fp8_static", "fp8", "fp8", "fp8")),
    ("Qwen/Qwen3-32B-FP8-Static-PerTensor", "trtllm", {}, ("fp8_static", "fp8", "fp8", "fp8")),
    ("MiniMaxAI/MiniMax-M2.5", "trtllm", {}, ("fp8_block", "fp8_block", "fp8", "fp8")),
    ("Qwen/Qwen3-30B-A3B-FP8", "vllm", {}, ("fp8_block", "fp8_block", "fp8", "bfloat16")),
    ("deepseek-ai/DeepSeek-V3", "trtllm", {}, ("fp8_block", "fp8_block", "fp8", "fp8")),
    ("moonshotai/Kimi-K2-Instruct", "trtllm", {}, ("fp8_block", "fp8_block", "fp8", "fp8")),
    ("moonshotai/Kimi-K2.5", "trtllm", {}, ("bfloat16", "int4_wo", "bfloat16", "bfloat16")),
    ("nvidia/DeepSeek-V3.1-NVFP4", "trtllm", {}, ("nvfp4", "nvfp4", "fp8", "fp8")),
    ("openai/gpt-oss-120b", "trtllm", {}, ("bfloat16", "w4a16_mxfp4", "bfloat16", "bfloat16")),
    ("Qwen/Qwen3-8B", "trtllm", {"gemm_quant_mode": "fp8"},
     ("fp8", "bfloat16", "bfloat16", "bfloat16")),
    ("Qwen/Qwen3-32B-FP8", "trtllm", {"kvcache_quant_mode": "bfloat16"},
     ("fp8_block", "fp8_block", "bfloat16", "fp8")),
    ("Qwen/Qwen3-32B-FP8", "vllm", {"fmha_quant_mode": "fp8"},
     ("fp8_block", "fp8_block", "fp8", "fp8")),
]


@pytest.mark.parametrize("model,backend,overrides,expected", QUANT_TABLE,
                         ids=[f"{m}-{b}-{o}" for m, b, o, _ in QUANT_TABLE])
def test_quant_resolution(model, backend, overrides, expected):
    q = resolve_quant(load_model_config(model), backend, overrides)
    assert (q.gemm_quant_mode, q.moe_quant_mode, q.kvcache_quant_mode, q.fmha_quant_mode) == expected
    assert q.comm_quant_mode == "half"


def _quant_of(config, quant=None):
    raw = RawConfig(dict(LLAMA_CFG, **config), quant, "local", "<test>")
    return infer_checkpoint_quant(parse_model_config(raw))


def test_hf_quant_config_synthesises_quantization_config():
    cfg = preprocess(RawConfig(dict(LLAMA_CFG), {"quantization": {"quant_algo": "FP8",
                                                                  "kv_cache_quant_algo": "FP8"}},
                               "local", "<test>"))
    assert cfg["quantization_config"] == {"quant_method": "fp8", "kv_cache_quant_method": "fp8"}
    assert (cfg["quant_algo"], cfg["kv_cache_quant_algo"], cfg["quant_dynamic"]) == ("fp8", "fp8", None)


def test_fp8_dynamic_and_block():
    dyn = {"quantization_config": {"quant_method": "fp8", "activation_scheme": "dynamic"}}
    assert _quant_of(dyn) == {"gemm_quant_mode": "fp8", "moe_quant_mode": "fp8",
                              "fmha_quant_mode": "fp8", "kvcache_quant_mode": "fp8"}
    block = {"quantization_config": {"quant_method": "fp8", "weight_block_size": [128, 128]}}
    assert _quant_of(block)["gemm_quant_mode"] == "fp8_block"


def test_compressed_tensors_int8_and_ignores():
    cfg = {"quantization_config": {
        "quant_method": "compressed-tensors",
        "config_groups": {"g": {"weights": {"num_bits": 8, "type": "int"}}},
        "ignore": ["lm_head", "re:.*experts.*"],
    }}
    assert _quant_of(cfg) == {"gemm_quant_mode": "int8_wo"}


def test_kv_cache_scheme_and_errors():
    cfg = {"quantization_config": {"kv_cache_scheme": {"type": "float", "num_bits": 8}}}
    assert _quant_of(cfg) == {"kvcache_quant_mode": "fp8"}
    with pytest.raises(ValueError, match="Unsupported quant algorithm: awq"):
        _quant_of({"quantization_config": {"quant_method": "awq"}})
    with pytest.raises(ValueError, match="Unsupported kv cache algorithm: int4"):
        _quant_of({"quantization_config": {"kv_cache_quant_algo": "int4"}})


def test_mixed_precision_layers():
    quant = {"quantization": {
        "quant_algo": "MIXED_PRECISION",
        "quantized_layers": {
            "model.layers.0.self_attn.q_proj": {"quant_algo": "FP8"},
            "model.layers.0.mlp.experts.0.up_proj": {"quant_algo": "NVFP4"},
        },
    }}
    assert _quant_of({}, quant) == {"gemm_quant_mode": "fp8_static", "moe_quant_mode": "nvfp4"}


def test_dtype_maps():
    assert [dtype_name(m) for m in ("bfloat16", "half", "fp8_ootb", "fp8_block", "sq", "int4_wo",
                                    "nvfp4_wo")] == \
        ["bfloat16", "float16", "fp8", "fp8_block", "int8", "int4", None]
    assert moe_dtype_name("w4a16_mxfp4") == "w4a16_mxfp4"
    assert moe_dtype_name("int4_wo") == "int4"
    assert moe_dtype_name("fp8_block") == "fp8_block"


def test_a_settled_config_is_parsed_once_and_a_rewrite_is_seen(tmp_path):
    """load_model_config remembers a config whose files are older than the racy window, keyed by
    their size and modification time; a fresh or rewritten file is read anew."""
    folder = _write(tmp_path, LLAMA_CFG)
    config = folder / "config.json"
    fresh = load_model_config(str(folder))
    assert load_model_config(str(folder)) is not fresh, "a file written just now is not remembered"
    old = time.time() - 60
    os.utime(config, (old, old))
    settled = load_model_config(str(folder))
    assert load_model_config(str(folder)) is settled
    assert load_model_config(str(config)) is settled, "the folder and its config.json are one file"
    config.write_text(json.dumps(dict(LLAMA_CFG, num_hidden_layers=30)))  # same size
    os.utime(config, (old + 10, old + 10))
    assert load_model_config(str(folder)).num_layers == 30
    # a quant file appearing next to the config is a change too
    (folder / "hf_quant_config.json").write_text(json.dumps({"quantization": {"quant_algo": "FP8"}}))
    os.utime(folder / "hf_quant_config.json", (old, old))
    assert load_model_config(str(folder)).quant_algo == "fp8"
