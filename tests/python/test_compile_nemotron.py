"""Front-end op lists for the NEMOTRONH and NEMOTRONNAS families (spec 33) against the goldens:
every case of nemotron.json, compile errors included, plus the spec's worked examples and its
pattern, quant and validation rules. Versions and lane orders come from each golden case (no
native module needed)."""

from __future__ import annotations

import json

import pytest
from conftest import FixedResolver, GoldenResolver, compile_args, golden_cases

from aic.compiler.compile import compile_report
from aic.compiler.families import nemotronh, nemotronnas
from aic.parity.runner import diff_json

CASES = [c for c in golden_cases("nemotron") if c["compile_error"] is None]
ERRORS = [c for c in golden_cases("nemotron") if c["compile_error"] is not None]

NANO = "nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16"
SUPER_FP8 = "nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-FP8"
H56B = "nvidia/Nemotron-H-56B-Base-8K"
NAS = "nvidia/Llama-3_3-Nemotron-Super-49B-v1"


def _compile(model, system="h200_sxm", backend="trtllm", **kwargs):
    version = {"trtllm": "1.3.0rc20", "vllm": "0.24.0", "sglang": "0.5.14"}[backend]
    result = compile_report(model, system, backend, resolver=FixedResolver(version=version), **kwargs)
    return result, json.loads(result.spec_json)


def _ops(op_list):
    return [(next(iter(op)), next(iter(op.values()))) for op in op_list]


def _op(op_list, name):
    for variant, fields in _ops(op_list):
        if fields["name"] == name:
            return variant, fields
    raise KeyError(name)


def _config_dir(tmp_path, model, **changes):
    """A shipped config with fields changed (``None`` deletes a field), as a local folder."""
    from aic import paths

    src = paths.model_configs_path() / (model.replace("/", "--") + "_config.json")
    config = json.loads(src.read_text())
    for key, value in changes.items():
        if value is None:
            config.pop(key, None)
        else:
            config[key] = value
    folder = tmp_path / "model"
    folder.mkdir(exist_ok=True)
    (folder / "config.json").write_text(json.dumps(config))
    return str(folder)


def test_corpus_has_the_expected_cases():
    assert len(CASES) == 43 and len(ERRORS) == 2


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_nemotron_spec_matches_golden(case):
    args, kwargs = compile_args(case)
    result = compile_report(*args, resolver=GoldenResolver(case), **kwargs)
    ours = json.loads(result.spec_json)
    ref = case["resolved"]
    for phase in ("context", "generation"):
        assert diff_json(ours[f"{phase}_ops"], case["spec_ops"][phase], "", rtol=0.0) == []
    assert diff_json(ours["engine"], ref["engine"], "", rtol=0.0) == []
    assert result.model_family == ref["model_family"]
    assert result.quant == ref["quant"]


@pytest.mark.parametrize("case", ERRORS, ids=[c["id"] for c in ERRORS])
def test_nemotron_compile_errors_match_golden(case):
    args, kwargs = compile_args(case)
    with pytest.raises((ValueError, AssertionError)) as info:
        compile_report(*args, resolver=FixedResolver(), **kwargs)
    assert str(info.value).startswith(case["compile_error"]["message"])


def test_worked_example_a_nano_tp2_ep2():
    # Spec 33 §4.4.
    _, spec = _compile(NANO, tp_size=2, moe_ep_size=2)
    ctx = _ops(spec["context_ops"])
    assert len(ctx) == 23 and len(spec["generation_ops"]) == 23
    assert [f["name"] for _, f in ctx][:7] == [
        "context_embedding", "context_mamba_norm", "context_mamba_in_proj_gemm",
        "context_mamba_conv1d", "context_mamba_ssm", "context_mamba_out_proj_gemm",
        "context_mamba_ar"]
    assert _op(spec["context_ops"], "context_mamba_in_proj_gemm")[1]["n"] == 5152
    conv = _op(spec["context_ops"], "context_mamba_conv1d")
    assert conv == ("Mamba2", {
        "name": "context_mamba_conv1d", "scale_factor": 23.0, "kernel_source": "causal_conv1d_fn",
        "phase": "context", "d_model": 2688, "d_state": 128, "d_conv": 4, "nheads": 64,
        "head_dim": 64, "n_groups": 8, "chunk_size": 128})
    assert _op(spec["context_ops"], "context_qkv_gemm")[1]["n"] == 2304
    assert _op(spec["context_ops"], "context_shared_relu2")[1]["bytes_per_token"] == 7424.0
    moe = _op(spec["context_ops"], "context_moe")[1]
    assert (moe["is_gated"], moe["workload_distribution"], moe["moe_ep_size"]) == (
        False, "power_law_1.01", 2)
    assert [f["name"] for _, f in ctx][-2:] == ["context_p2p", "context_logits_gemm"]
    gen = spec["generation_ops"]
    assert _op(gen, "generation_mamba_ssm")[1]["kernel_source"] == "selective_state_update"
    assert _op(gen, "generation_mamba_conv1d")[1]["phase"] == "generation"


def test_worked_example_b_super_fp8_latent_moe():
    # Spec 33 §4.5: vllm, tp 4, ep 4, nextn 1.
    result, spec = _compile(SUPER_FP8, backend="vllm", tp_size=4, moe_ep_size=4, nextn=1)
    assert (result.quant["gemm_quant_mode"], result.quant["moe_quant_mode"],
            result.quant["fmha_quant_mode"]) == ("fp8_static", "fp8", "bfloat16")
    ctx, gen = spec["context_ops"], spec["generation_ops"]
    assert len(ctx) == len(gen) == 25
    assert _op(ctx, "context_mamba_in_proj_gemm")[1]["n"] == 4640
    assert _op(ctx, "context_fc1_latent_proj_gemm")[1]["n"] == 256
    assert _op(ctx, "context_fc2_latent_proj_gemm")[1]["low_precision_input"] is True
    assert _op(ctx, "context_moe")[1]["hidden_size"] == 1024
    assert _op(ctx, "context_moe_pre_dispatch")[1]["flavor"] == "CustomAllReduce"
    assert _op(gen, "generation_mamba_conv1d")[1]["scale_factor"] == 40.45454545454546
    assert _op(gen, "generation_attention")[1]["scale_factor"] == 8.090909090909092
    assert _op(gen, "generation_embedding")[1]["scale_factor"] == 1.0113636363636365


def test_56b_dense_variant_and_pattern_counts():
    # Spec 33 §4.6: 56B tp 4 pp 2 (no MoE width rule), 19 ops per list.
    _, spec = _compile(H56B, tp_size=4, pp_size=2)
    ctx = spec["context_ops"]
    assert len(ctx) == 19
    assert _op(ctx, "context_mamba_in_proj_gemm")[1]["n"] == 9280
    assert _op(ctx, "context_mlp_relu2")[1]["bytes_per_token"] == 32768.0
    assert _op(ctx, "context_p2p")[1]["scale_factor"] == 1.0
    # Any adp / moe sizes are accepted by the non-MoE variant.
    _compile(H56B, tp_size=2, moe_ep_size=4)


def test_pattern_rules():
    assert nemotronh.layer_pattern({"hybrid_override_pattern": "MEMX*EM-",
                                    "layers_block_type": ["mamba"]}) == "MEMX*EM-"
    assert nemotronh.layer_pattern({"hybrid_override_pattern": ["M"],
                                    "layers_block_type": ["mamba", "attention", "mlp"]}) == "M*-"
    assert nemotronh.layer_pattern({"hybrid_override_pattern": ""}) == ""
    with pytest.raises(TypeError, match="must define 'hybrid_override_pattern'"):
        nemotronh.layer_pattern({})
    with pytest.raises(ValueError) as info:
        nemotronh.layer_pattern({"layers_block_type": ["Mamba"]})
    assert str(info.value) == ("Unsupported NemotronH layer block type 'Mamba'. Supported values: "
                               "*, -, E, M, attention, dense, ffn, mamba, mlp, moe")


def test_nemotronh_validation(tmp_path):
    with pytest.raises(ValueError, match=r"Parallelism width mismatch"):
        _compile(NANO, tp_size=2)
    with pytest.raises(ValueError, match="num_heads 32 should be divisible by tp_size 3 "):
        _compile(NANO, tp_size=3, moe_ep_size=3)
    with pytest.raises(KeyError, match="mamba_num_heads"):
        _compile(_config_dir(tmp_path, NANO, mamba_num_heads=None))
    # Empty pattern string: embedding, P2P and logits only.
    _, spec = _compile(_config_dir(tmp_path, NANO, hybrid_override_pattern=""))
    assert len(spec["context_ops"]) == 3


@pytest.mark.parametrize("mult, width", [
    (5.25, 28672), (2.625, 14336), (3.28125, 17920), (1.3125, 7168), (1.0, 5632), (0.5, 2816),
    (3.5, 19200), (1.3, 7168), (0.7, 3840), (2, 11008), (0, 0)])
def test_nas_ffn_width(mult, width):
    # Spec 33 §6.2 at h = 8192.
    assert nemotronnas.ffn_width(mult, 8192) == width


def test_worked_example_c_nas_49b():
    # Spec 33 §6.4: 25 groups, 158 ops per list.
    _, spec = _compile(NAS, tp_size=2, pp_size=2)
    ctx = spec["context_ops"]
    assert len(ctx) == len(spec["generation_ops"]) == 158
    qkv = _op(ctx, "context_qkv_gemm")[1]
    assert (qkv["n"], qkv["scale_factor"]) == (5120, 1.0)
    attn = _op(ctx, "context_attention")[1]
    assert (attn["n"], attn["n_kv"], attn["head_size"]) == (32, 4, 128)
    assert _op(ctx, "context_proj_gemm")[1]["low_precision_input"] is False
    assert _op(ctx, "context_gate_ffn1_gemm")[1]["n"] == 14336
    assert _op(ctx, "context_p2p")[1]["scale_factor"] == 1.0
    assert _op(ctx, "context_logits_gemm")[1]["n"] == 64128


def test_nas_second_example_and_degenerate_configs(tmp_path):
    blocks = [{"attention": {"n_heads_in_group": 4}, "ffn": {"no_op": True}}] * 2 + [
        {"attention": {"no_op": True}, "ffn": {"no_op": True}},
        {"attention": {"n_heads_in_group": 16}, "ffn": {"ffn_mult": 0.5}},
        {"attention": {"n_heads_in_group": 16}, "ffn": {}},
        {"attention": {"n_heads_in_group": 8}, "ffn": {"ffn_mult": 1.3}},
        {"attention": {"n_heads_in_group": 64}, "ffn": {"ffn_mult": 0.7}},
    ]
    _, spec = _compile(_config_dir(tmp_path, NAS, block_configs=blocks), backend="vllm",
                       tp_size=4, pp_size=2)
    ctx = spec["context_ops"]
    assert len(ctx) == 48
    assert [f["n"] for v, f in _ops(ctx) if f["name"] == "context_qkv_gemm"] == [
        3072, 2304, 2304, 2560, 2304]
    assert _op(ctx, "context_logits_gemm")[1]["n"] == 32064
    with pytest.warns(UserWarning, match="without block_configs: empty op lists"):
        _, empty = _compile(_config_dir(tmp_path, NAS, block_configs=[]))
    assert empty["context_ops"] == [] and empty["generation_ops"] == []
    with pytest.raises(AssertionError, match="NemotronNas does not support MTP"):
        _compile(NAS, nextn=1)
