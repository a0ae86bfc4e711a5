"""The transfer policy reaches the engine (spec 20 §0.4, spec 51 §6.2): a HYBRID engine prices a
GEMM quant without table rows (Qwen3-8B in int8_wo on h200_sxm vLLM) by the `xprofile` transfer;
with the kind disabled it raises EmpiricalNotImplementedError, and a sweep with
``transfer_policy="off"`` finds nothing where the default policy finds deployments."""

from __future__ import annotations

import json

import pytest
from conftest import native_available

pytestmark = pytest.mark.skipif(not native_available(), reason="native module not built")

MODEL, SYSTEM, BACKEND = "Qwen/Qwen3-8B", "h200_sxm", "vllm"


@pytest.fixture(scope="module")
def hybrid_int8_wo_spec() -> dict:
    from aic import compile_engine_json

    return json.loads(compile_engine_json(MODEL, SYSTEM, BACKEND, gemm_quant_mode="int8_wo",
                                          database_mode="HYBRID"))


def _engine(spec: dict, policy):
    from aic import AicEngine

    spec = json.loads(json.dumps(spec))
    spec["engine"]["transfer_policy"] = policy
    return AicEngine.from_spec(json.dumps(spec).encode())


def test_the_compiled_default_carries_no_policy(hybrid_int8_wo_spec):
    """The compiler writes no policy (null: every kind), so the default path is unchanged."""
    assert hybrid_int8_wo_spec["engine"]["transfer_policy"] is None
    engine = _engine(hybrid_int8_wo_spec, None)
    assert engine.predict_prefill_latency(1, 1024) > 0
    assert engine.last_provenance() == "xprofile"


def test_a_policy_with_the_kind_is_the_default_bit_for_bit(hybrid_int8_wo_spec):
    default = _engine(hybrid_int8_wo_spec, None).predict_prefill_latency(2, 1024)
    for policy in (["xprofile"], ["xop", "xprofile", "xquant", "xshape"]):
        assert _engine(hybrid_int8_wo_spec, policy).predict_prefill_latency(2, 1024) == default


@pytest.mark.parametrize("policy", [[], ["xshape", "xquant"], ["xop"]])
def test_without_the_kind_the_estimate_is_not_implemented(hybrid_int8_wo_spec, policy):
    from aic import EmpiricalNotImplementedError

    engine = _engine(hybrid_int8_wo_spec, policy)
    with pytest.raises(EmpiricalNotImplementedError, match="No empirical utilisation data"):
        engine.predict_prefill_latency(1, 1024)


def test_an_unknown_kind_in_a_spec_names_it_and_the_valid_ones(hybrid_int8_wo_spec):
    with pytest.raises(ValueError, match="unknown transfer kind/preset 'bogus'; valid kinds: xop, "
                                         "xprofile, xquant, xshape; presets: aggressive, "
                                         "balanced, conservative, off"):
        _engine(hybrid_int8_wo_spec, ["xprofile", "bogus"])


def test_a_hybrid_sweep_with_the_policy_off_finds_nothing_the_default_finds():
    from aic.serving import NoFeasibleConfigError
    from aic.serving.sweep import sweep

    args = dict(database_mode="HYBRID", gemm_quant_mode="int8_wo", serving_mode="agg", isl=1024,
                osl=128, ttft=5000.0, tpot=200.0)
    default = sweep(MODEL, 1, SYSTEM, BACKEND, **args)
    assert default["best_throughputs"]["agg"] > 0
    assert default["best_configs"]["agg"][0]["gemm"] == "int8_wo"
    enabled = sweep(MODEL, 1, SYSTEM, BACKEND, transfer_policy="xprofile", **args)
    assert enabled["best_throughputs"] == default["best_throughputs"]
    with pytest.raises(NoFeasibleConfigError, match="empirical estimation not implemented"):
        sweep(MODEL, 1, SYSTEM, BACKEND, transfer_policy="off", **args)
