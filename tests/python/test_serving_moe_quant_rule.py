"""The serving level's MoE kernel lane of FP4-expert checkpoints on SGLang (issue 33).

When ``moe_quant_mode`` is not given, the reference's serving path (``cli_estimate`` and the
sweep) runs DeepSeek-V4's MXFP4 experts as ``w4a8_mxfp4_mxfp8_trtllm`` on Blackwell and
``w4a16_mxfp4_cutlass`` on Hopper, and ``moonshotai/Kimi-K3`` as ``w4a8_mxfp4_mxfp8`` on
Blackwell. The figures below are the reference's answers; its compile function keeps the
checkpoint's mode.
"""

from __future__ import annotations

import pytest

pytest.importorskip("aic._aic", reason="needs the native module (pip install .)")

from aic import PerfDataNotAvailableError  # noqa: E402
from aic.compiler.compile import compile_report  # noqa: E402
from aic.compiler.hf_config import load_model_config  # noqa: E402
from aic.paths import systems_dir  # noqa: E402
from aic.serving.deployment import estimate, resolve_quant_overrides  # noqa: E402

KIMI = dict(model_path="moonshotai/Kimi-K3", system_name="b300_sxm", backend_name="sglang",
            isl=1024, osl=2, tp_size=8, moe_ep_size=8)
REL = 1e-9


def _rule(model: str, system: str, backend: str = "sglang", **overrides) -> str | None:
    """The MoE mode the serving level hands to compile (``None``: the checkpoint's)."""
    modes = {"gemm_quant_mode": None, "kvcache_quant_mode": None, "fmha_quant_mode": None,
             "moe_quant_mode": None, "comm_quant_mode": None, **overrides}
    out = resolve_quant_overrides(model, load_model_config(model), backend, system, None,
                                  systems_dir(None), modes, runs_context=False)
    return out["moe_quant_mode"]


def test_kimi_k3_static_on_blackwell_current_slot():
    out = estimate(**KIMI, mode="static", batch_size=1, stride=1)["result"]
    assert out["raw"]["moe"] == "w4a8_mxfp4_mxfp8"
    assert out["raw"]["context_latency"] == pytest.approx(113.00203833433557, rel=REL)


def test_kimi_k3_static_on_sglang_0_5_16():
    out = estimate(**KIMI, mode="static", batch_size=1, stride=1, backend_version="0.5.16")["result"]
    assert out["raw"]["context_latency"] == pytest.approx(89.84378660361378, rel=REL)
    assert out["raw"]["generation_latency"] == pytest.approx(13.954955960160056, rel=REL)


def test_kimi_k3_agg_on_sglang_0_5_16():
    out = estimate(**KIMI, mode="agg", batch_size=2, ctx_tokens=1024, backend_version="0.5.16")["result"]
    assert out["ttft"] == pytest.approx(171.8756748860341, rel=REL)
    assert out["tpot"] == pytest.approx(88.14137173642774, rel=REL)


def test_kimi_k3_disagg_on_sglang_0_5_16():
    # The reference's figures as the issue quotes them (rounded): assert to the digits given.
    out = estimate(**KIMI, mode="disagg", backend_version="0.5.16", prefill_batch_size=1,
                   prefill_num_workers=1, decode_batch_size=4, decode_num_workers=1)["result"]
    assert round(out["ttft"], 2) == 177.89
    assert round(out["tpot"], 3) == 17.185


def test_deepseek_v4_flash_static_on_blackwell():
    out = estimate("deepseek-ai/DeepSeek-V4-Flash", "b200_sxm", mode="static", backend_name="sglang",
                   isl=1024, osl=2, batch_size=1, tp_size=8, moe_ep_size=8, stride=1)["result"]
    assert out["raw"]["moe"] == "w4a8_mxfp4_mxfp8_trtllm"
    assert out["raw"]["context_latency"] == pytest.approx(23.065616421746828, rel=REL)


def test_explicit_moe_quant_mode_wins():
    assert _rule("moonshotai/Kimi-K3", "b300_sxm", moe_quant_mode="w4a16_mxfp4") == "w4a16_mxfp4"
    assert _rule("deepseek-ai/DeepSeek-V4-Flash", "b200_sxm",
                 moe_quant_mode="w4a8_mxfp4_mxfp8") == "w4a8_mxfp4_mxfp8"
    # b300 sglang has no w4a16_mxfp4 rows for Kimi-K3: the explicit mode is the one looked up.
    with pytest.raises(PerfDataNotAvailableError, match='quant: "w4a16_mxfp4"'):
        estimate(**KIMI, mode="static", batch_size=1, stride=1, moe_quant_mode="w4a16_mxfp4")


def test_rule_by_generation_backend_and_checkpoint():
    flash = "deepseek-ai/DeepSeek-V4-Flash"
    assert _rule(flash, "h200_sxm") == "w4a16_mxfp4_cutlass"
    assert _rule(flash, "gb300") == "w4a8_mxfp4_mxfp8_trtllm"
    assert _rule(flash, "a100_sxm") is None          # neither Hopper nor Blackwell
    assert _rule(flash, "b200_sxm", backend="vllm") is None
    assert _rule("deepseek-ai/DeepSeek-V4-Pro", "b200_sxm") == "w4a8_mxfp4_mxfp8_trtllm"
    assert _rule("nvidia/DeepSeek-V4-Flash-NVFP4", "b200_sxm") is None   # NVFP4 experts
    assert _rule("sgl-project/DeepSeek-V4-Flash-FP8", "b200_sxm") is None  # FP8 experts
    assert _rule("moonshotai/Kimi-K3", "h200_sxm") is None   # the checkpoint's w4a16_mxfp4 stands
    assert _rule("moonshotai/Kimi-K3", "b200_sxm", backend="vllm") is None


def test_sweep_applies_the_rule():
    model = load_model_config("moonshotai/Kimi-K3")
    modes = {"moe_quant_mode": None}
    out = resolve_quant_overrides("moonshotai/Kimi-K3", model, "sglang", "b300_sxm", None,
                                  systems_dir(None), modes, runs_context=False, sweep=True)
    assert out["moe_quant_mode"] == "w4a8_mxfp4_mxfp8"


def test_compile_path_keeps_the_checkpoint_mode():
    # The reference's compile function has no such rule (parity of the compile goldens).
    result = compile_report("deepseek-ai/DeepSeek-V4-Flash", "b200_sxm", "sglang", tp_size=8,
                            moe_ep_size=8)
    assert result.quant["moe_quant_mode"] == "w4a8_mxfp4_mxfp8"
