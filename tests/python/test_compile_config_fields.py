"""Config fields a family's op list needs fail at compile, naming the field (issue 22): a head
count or head size of 0, or KV heads that do not split the query heads, would otherwise reach
the engine as an op field of 0 and fail only at estimate time. One bad shipped config per
family builder; the shipped configs themselves compile (``test_shipped_configs_still_build``).
No native module needed: the data-dependent steps are answered by a stub resolver."""

from __future__ import annotations

import importlib
import json
from pathlib import Path

import pytest
from conftest import FixedResolver

from aic.compiler.compile import compile_report
from aic.compiler.families import _BUILDERS, BuildContext
from aic.compiler.hf_config import load_model_config

MODEL_CONFIGS = Path(__file__).resolve().parents[2] / "data" / "model_configs"


def _config(tmp_path: Path, model: str, change) -> str:
    """The shipped config of ``model`` with ``change`` applied to its text section."""
    config = json.loads((MODEL_CONFIGS / f"{model.replace('/', '--')}_config.json").read_text())
    change(config.get("text_config", config))
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(config), encoding="utf-8")
    return str(folder)


def _set(key, value):
    return lambda c: c.__setitem__(key, value)


def _set_in(section, key, value):
    return lambda c: c[section].__setitem__(key, value)


def _nas_group(value):
    def change(c):
        for block in c["block_configs"]:
            if not block["attention"].get("no_op") and block["attention"].get("n_heads_in_group"):
                block["attention"]["n_heads_in_group"] = value
    return change


#: (id, model, backend, extra compile kwargs, config change, the message's start after
#: "model config: ").
CASES = [
    ("qwen35-linear-k-heads", "Qwen/Qwen3.5-27B", "vllm", {}, _set("linear_num_key_heads", 0),
     "linear_num_key_heads must be at least 1, got 0"),
    ("qwen35-conv-kernel", "Qwen/Qwen3.5-27B", "vllm", {}, _set("linear_conv_kernel_dim", 0),
     "linear_conv_kernel_dim must be at least 1, got 0"),
    ("qwen35-value-head-dim", "Qwen/Qwen3.5-27B", "vllm", {}, _set("linear_value_head_dim", 0),
     "linear_value_head_dim must be at least 1, got 0"),
    ("qwen35-kv-heads", "Qwen/Qwen3.5-27B", "vllm", {}, _set("num_key_value_heads", 5),
     "num_attention_heads 24 must be divisible by num_key_value_heads 5"),
    ("gemma4-kv-heads-zero", "google/gemma-4-26B-A4B", "vllm", {}, _set("num_key_value_heads", 0),
     "num_key_value_heads must be at least 1, got 0"),
    ("gemma4-global-kv-heads", "google/gemma-4-26B-A4B", "vllm", {},
     _set("num_global_key_value_heads", 3),
     "num_attention_heads 16 must be divisible by num_global_key_value_heads 3"),
    ("gemma4-global-head-dim", "google/gemma-4-26B-A4B", "vllm", {}, _set("global_head_dim", 0),
     "global_head_dim must be at least 1, got 0"),
    ("llama4-kv-heads-zero", "meta-llama/Llama-4-Scout-17B-16E-Instruct", "trtllm", {},
     _set("num_key_value_heads", 0), "num_key_value_heads must be at least 1, got 0"),
    ("llama4-head-dim-zero", "meta-llama/Llama-4-Scout-17B-16E-Instruct", "trtllm", {},
     _set("head_dim", 0), "head_dim must be at least 1, got 0"),
    ("mimo-swa-kv-heads", "XiaomiMiMo/MiMo-V2-Flash", "sglang", {},
     _set("swa_num_key_value_heads", 3),
     "num_attention_heads 64 must be divisible by swa_num_key_value_heads 3"),
    ("step-swa-heads", "stepfun-ai/Step-3.7-Flash", "sglang", {},
     _set("attention_other_setting", {"num_attention_heads": 7}),
     "attention_other_setting.num_attention_heads 7 must be divisible by num_key_value_heads 8"),
    ("step-kv-heads", "stepfun-ai/Step-3.7-Flash", "sglang", {}, _set("num_key_value_heads", 6),
     "num_attention_heads 64 must be divisible by num_key_value_heads 6"),
    ("nemotronh-mamba-head-dim", "nvidia/Nemotron-H-56B-Base-8K", "trtllm", {},
     _set("mamba_head_dim", 0), "mamba_head_dim must be at least 1, got 0"),
    ("nemotronh-chunk-size", "nvidia/Nemotron-H-56B-Base-8K", "trtllm", {},
     _set("chunk_size", 0), "chunk_size must be at least 1, got 0"),
    ("nemotronh-kv-heads", "nvidia/Nemotron-H-56B-Base-8K", "trtllm", {},
     _set("num_key_value_heads", 0), "num_key_value_heads must be at least 1, got 0"),
    ("nas-heads-in-group-zero", "nvidia/Llama-3_3-Nemotron-Super-49B-v1", "trtllm", {},
     _nas_group(0), "block_configs[].attention.n_heads_in_group must be at least 1, got 0"),
    ("nas-heads-in-group-split", "nvidia/Llama-3_3-Nemotron-Super-49B-v1", "trtllm", {},
     _nas_group(7), "num_attention_heads 64 must be divisible by "
                    "block_configs[].attention.n_heads_in_group 7"),
    ("mla-vllm-v-head-dim", "deepseek-ai/DeepSeek-V3", "vllm", {"tp_size": 8, "moe_ep_size": 8},
     _set("v_head_dim", 0), "v_head_dim must be at least 1, got 0"),
    ("mla-vllm-kv-heads", "deepseek-ai/DeepSeek-V3", "vllm", {"tp_size": 8, "moe_ep_size": 8},
     _set("num_key_value_heads", 0), "num_key_value_heads must be at least 1, got 0"),
    ("dsv4-o-lora-rank", "sgl-project/DeepSeek-V4-Flash-FP8", "sglang", {}, _set("o_lora_rank", 0),
     "o_lora_rank must be at least 1, got 0"),
    ("dsv4-index-topk", "sgl-project/DeepSeek-V4-Flash-FP8", "sglang", {}, _set("index_topk", 0),
     "index_topk must be at least 1, got 0"),
    ("minimaxm3-head-dim", "MiniMaxAI/MiniMax-M3", "sglang", {}, _set("head_dim", 0),
     "head_dim must be at least 1, got 0"),
    ("kimik3-kda-heads", "moonshotai/Kimi-K3", "sglang", {},
     _set_in("linear_attn_config", "num_heads", 0),
     "linear_attn_config.num_heads must be at least 1, got 0"),
    ("kimik3-kda-head-dim", "moonshotai/Kimi-K3", "sglang", {},
     _set_in("linear_attn_config", "head_dim", 0),
     "linear_attn_config.head_dim must be at least 1, got 0"),
    ("kimik3-q-lora-rank", "moonshotai/Kimi-K3", "sglang", {}, _set("q_lora_rank", 0),
     "q_lora_rank must be at least 1, got 0"),
    ("kimik3-vllm-kv-heads", "moonshotai/Kimi-K3", "vllm", {}, _set("num_key_value_heads", 0),
     "num_key_value_heads must be at least 1, got 0"),
]


@pytest.mark.parametrize("model,backend,kwargs,change,message",
                         [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_field_fails_at_compile_naming_it(tmp_path, model, backend, kwargs, change, message):
    path = _config(tmp_path, model, change)
    with pytest.raises(ValueError) as info:
        compile_report(path, "h200_sxm", backend, resolver=FixedResolver(), **kwargs)
    text = str(info.value)
    assert text.startswith("model config: " + message), text
    assert "(" in text and text.endswith(")"), "the message says what would fix the field"


def test_every_family_module_is_covered():
    """A bad-config case for every family builder but the DSA one (its attention ops use fixed
    sizes) and the dense / MoE ones (covered in the error catalogue)."""
    covered = {load_model_config(str(MODEL_CONFIGS / f"{c[1].replace('/', '--')}_config.json"))
               .family for c in CASES}
    modules = {_BUILDERS[f] for f in covered}
    assert set(_BUILDERS.values()) - modules == {"llama", "moe", "deepseekv32"}


@pytest.mark.parametrize("path", sorted(p for p in MODEL_CONFIGS.glob("*_config.json")
                                        if not p.name.endswith("hf_quant_config.json")),
                         ids=lambda p: p.name)
def test_shipped_configs_still_build(path):
    """No shipped config trips a field check, on any backend, at tp 1 or 8."""
    model = load_model_config(str(path))
    module = importlib.import_module(f"aic.compiler.families.{_BUILDERS[model.family]}")
    for backend in ("trtllm", "vllm", "sglang"):
        for tp in (1, 8):
            ctx = BuildContext(backend, tp, 1, 1, 1, tp, 0, "bfloat16", "bfloat16", "bfloat16",
                               "bfloat16", "half")
            try:
                module.build(model, ctx)
            except ValueError as exc:
                assert "model config:" not in str(exc), f"{backend} tp {tp}: {exc}"
