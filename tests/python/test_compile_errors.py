"""Bad input to the compile step: every one is a ValueError naming the value and what is allowed,
and an error from an earlier pipeline step wins (spec 30 §1, §13). No native module needed: the
data-dependent steps are answered by a stub resolver."""

from __future__ import annotations

import json

import pytest
from conftest import FixedResolver, family_not_built

from aic.compiler.compile import compile_report
from aic.errors import HeadDivisibilityError, UnsupportedArchitectureError


def _compile(model="Qwen/Qwen3-8B", system="h200_sxm", backend="trtllm", resolver=None, **kwargs):
    return compile_report(model, system, backend, resolver=resolver or FixedResolver(), **kwargs)


def test_heads_not_divisible_by_tp():
    with pytest.raises(ValueError) as info:
        _compile(backend="vllm", tp_size=3)
    assert str(info.value) == "num_heads 32 should be divisible by tp_size 3 "
    assert isinstance(info.value, HeadDivisibilityError)


NON_POSITIVE = [(name, value)
                for name in ("tp_size", "pp_size", "attention_dp_size", "moe_tp_size", "moe_ep_size")
                for value in (0, -2)
                # a dense model's MoE widths may be 0 (spec 30 §4): see the test below
                if not (value == 0 and name.startswith("moe_"))]


@pytest.mark.parametrize("name, value", NON_POSITIVE)
def test_non_positive_sizes(name, value):
    with pytest.raises(ValueError, match=f"{name} must be positive, got {value}"):
        _compile(**{name: value})


def test_dense_model_copies_zero_moe_widths():
    """Spec 30 §4: for a dense family the MoE widths reach no op and are only copied into the
    engine config, 0 included; MoE families still require them positive (test_compile_moe)."""
    engine = json.loads(_compile(moe_tp_size=0, moe_ep_size=0).spec_json)["engine"]
    assert (engine["moe_tp_size"], engine["moe_ep_size"]) == (0, 0)


def test_non_integer_size():
    with pytest.raises(ValueError, match="tp_size must be an integer, got 'two'"):
        _compile(tp_size="two")


def test_nextn():
    with pytest.raises(ValueError, match=r"^nextn \(-1\) must be >= 0\.$"):
        _compile(nextn=-1)
    with pytest.raises(ValueError, match=r"nextn \(1.5\) must be an integer draft length"):
        _compile(nextn=1.5)


@pytest.mark.parametrize("key,value", [
    ("gemm_quant_mode", "fp9"), ("moe_quant_mode", "int2"), ("kvcache_quant_mode", "fp4"),
    ("fmha_quant_mode", "int8"), ("comm_quant_mode", "bfloat16"),
])
def test_unknown_quant_names(key, value):
    with pytest.raises(ValueError) as info:
        _compile(**{key: value})
    message = str(info.value)
    assert key in message and repr(value) in message and "bfloat16" in message + "half"


def test_fmha_float16_rejected_at_attention_build():
    with pytest.raises(ValueError, match='unknown FMHA quant mode: "float16"'):
        _compile(fmha_quant_mode="float16")


def test_unknown_system_lists_the_valid_ones():
    with pytest.raises(ValueError) as info:
        _compile(system="h300_sxm")
    message = str(info.value)
    assert "'h300_sxm'" in message
    for name in ("b200_sxm", "h100_sxm", "h200_sxm"):
        assert name in message
    assert "query_versions" not in message


def test_unknown_backend_lists_the_valid_ones():
    with pytest.raises(ValueError) as info:
        _compile(backend="foo")
    assert str(info.value) == "unknown backend 'foo'; expected one of: trtllm, sglang, vllm"


def test_database_mode():
    with pytest.raises(ValueError) as info:
        _compile(database_mode="silicon")
    assert "'silicon'" in str(info.value) and "SILICON, HYBRID, EMPIRICAL, SOL" in str(info.value)
    for mode, shared in (("SILICON", True), ("HYBRID", True), ("EMPIRICAL", False), ("SOL", False)):
        resolver = FixedResolver()
        engine = _compile(database_mode=mode, resolver=resolver).engine
        assert (engine["database_mode"], engine["enable_shared_layer"]) == (mode, shared)
        assert {c[3] for c in resolver.calls if c[0] == "lanes"} == {shared}


def test_kv_block_size():
    assert _compile(kv_block_size=64).engine["kv_block_size"] == 64
    with pytest.raises(ValueError, match="kv_block_size"):
        _compile(kv_block_size=0)


def test_unknown_model_id():
    with pytest.raises(ValueError) as info:
        _compile(model="acme/NoSuchModel-1B")
    assert "'acme/NoSuchModel-1B'" in str(info.value) and "Qwen/Qwen3-8B" in str(info.value)


def test_model_id_is_case_sensitive():
    with pytest.raises(ValueError):
        _compile(model="qwen/qwen3-8b")


def test_missing_config_json(tmp_path):
    with pytest.raises(ValueError, match="has no config.json"):
        _compile(model=str(tmp_path))
    with pytest.raises(ValueError, match="missing config.json"):
        _compile(model=str(tmp_path / "nowhere" / "config.json"))


def test_malformed_json(tmp_path):
    (tmp_path / "config.json").write_text("{not json")
    with pytest.raises(ValueError, match="malformed JSON"):
        _compile(model=str(tmp_path))


def test_missing_required_field(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({
        "architectures": ["Qwen3ForCausalLM"], "num_hidden_layers": 2, "num_attention_heads": 4,
        "vocab_size": 100, "max_position_embeddings": 128,
    }))
    with pytest.raises(ValueError, match="hidden_size"):
        _compile(model=str(tmp_path))


def test_architecture_known_to_reference_but_not_implemented():
    with family_not_built("KIMIK3"), pytest.raises(UnsupportedArchitectureError) as info:
        _compile(model="moonshotai/Kimi-K3", tp_size=4, moe_tp_size=4)
    message = str(info.value)
    assert "KimiK3ForConditionalGeneration" in message
    for arch in ("LlamaForCausalLM", "Qwen2ForCausalLM", "Qwen3ForCausalLM", "MiMoForCausalLM",
                 "MixtralForCausalLM", "Qwen3MoeForCausalLM", "GptOssForCausalLM",
                 "DeepseekV3ForCausalLM", "KimiK25ForConditionalGeneration",
                 "Llama4ForConditionalGeneration", "MiMoV2FlashForCausalLM",
                 "Step3p7FlashForCausalLM", "Gemma4ForConditionalGeneration",
                 "Qwen3VLForConditionalGeneration", "Qwen3VLMoeForConditionalGeneration"):
        assert arch in message
    assert info.value.known_to_reference is True
    assert isinstance(info.value, ValueError)


def test_error_order_heads_before_version():
    """A bad head split is reported before a bad version (the resolver is never asked)."""

    class Exploding(FixedResolver):
        def backend_version(self, *a):
            raise AssertionError("version resolution must not run")

    with pytest.raises(HeadDivisibilityError):
        _compile(tp_size=3, backend_version="1.0.0", resolver=Exploding())


def test_error_order_quant_name_before_nextn_before_config():
    with pytest.raises(ValueError, match="gemm_quant_mode"):
        _compile(model="acme/NoSuch", gemm_quant_mode="fp9", nextn=-1)
    with pytest.raises(ValueError, match="nextn"):
        _compile(model="acme/NoSuch", nextn=-1)


def test_version_errors_propagate():
    class Refusing(FixedResolver):
        def backend_version(self, systems_path, system, backend, requested):
            raise ValueError(f"{backend} on {system} has no {requested!r} version")

    with pytest.raises(ValueError, match="has no 'previous' version"):
        _compile(backend_version="previous", resolver=Refusing())


def test_backend_version_type():
    with pytest.raises(ValueError, match="backend_version must be a string"):
        _compile(backend_version=1.3)
