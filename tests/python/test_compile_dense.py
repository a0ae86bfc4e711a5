"""Front-end op lists for the LLAMA family against the goldens (dense.json + LLAMA cases of
edge.json). The version and the lane orders are taken from each golden case, so these tests run
without the native module; the native-backed lane orders are checked separately at the end."""

from __future__ import annotations

import json

import pytest
from conftest import GoldenResolver, compile_args, first_lanes, golden_cases, llama_cases

from aic.compiler.compile import compile_report
from aic.parity.runner import diff_json

CASES = llama_cases()


def _strict(ours, ref):
    """Field-by-field: same keys in the same order, same JSON types, floats bit-exact."""
    return diff_json(ours, ref, "", rtol=0.0)


def test_corpus_has_the_expected_llama_cases():
    dense = [c for c in CASES if c["family"] == "dense"]
    edge = [c for c in CASES if c["family"] == "edge"]
    assert len(dense) == 64  # 65 cases, one of them a compile error
    assert len(edge) == 28


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_llama_spec_matches_golden(case):
    args, kwargs = compile_args(case)
    resolver = GoldenResolver(case)
    result = compile_report(*args, resolver=resolver, **kwargs)
    ours = json.loads(result.spec_json)  # through JSON, so types are the wire types
    ref = case["resolved"]
    assert _strict(ours["context_ops"], case["spec_ops"]["context"]) == []
    assert _strict(ours["generation_ops"], case["spec_ops"]["generation"]) == []
    assert _strict(ours["engine"], ref["engine"]) == []
    assert ours["schema_version"] == ref["spec_schema_version"]
    assert result.model_family == ref["model_family"] == "LLAMA"
    assert result.quant == ref["quant"]
    assert result.config_source == ref["config_source"]
    assert len(ours["context_ops"]) == ref["num_context_ops"]
    assert len(ours["generation_ops"]) == ref["num_generation_ops"]
    # the data-dependent steps were asked the right questions
    mode = case["compile"].get("database_mode") or "SILICON"
    shared = mode in ("SILICON", "HYBRID")
    version_calls = [c for c in resolver.calls if c[0] == "version"]
    assert version_calls == [("version", args[1], args[2], case["compile"]["backend_version"])]
    lane_calls = [c for c in resolver.calls if c[0] == "lanes"]
    assert lane_calls == [
        ("lanes", "context", ref["engine"]["backend_version"], shared, None),
        ("lanes", "generation", ref["engine"]["backend_version"], shared, None),
    ]


def test_op_lists_without_lane_orders_are_independent_of_the_lanes():
    """Everything but ``lane_order`` is decided by the pure front end."""
    case = next(c for c in CASES if c["id"] == "dense/Qwen3-32B/h200_sxm/vllm/tp2-pp1-dp1")

    class NoLanes(GoldenResolver):
        def lane_order(self, *a):
            return ["x"]

    args, kwargs = compile_args(case)
    ours = json.loads(compile_report(*args, resolver=NoLanes(case), **kwargs).spec_json)
    for phase, key in (("context", "context_ops"), ("generation", "generation_ops")):
        for mine, theirs in zip(ours[key], case["spec_ops"][phase]):
            (variant, fields), = mine.items()
            ref_fields = dict(theirs[variant])
            if "lane_order" in fields:
                assert fields["lane_order"] == ["x"]
                ref_fields["lane_order"] = ["x"]
            assert _strict(fields, ref_fields) == []


def test_shared_layer_off_for_sol_and_empirical():
    by_id = {c["id"]: c for c in CASES}
    for suffix, shared in (("", True), ("/db=HYBRID", True), ("/db=SOL", False),
                           ("/db=EMPIRICAL", False)):
        case = by_id["edge/Qwen3-32B/h200_sxm/vllm/tp2-pp1-dp1" + suffix]
        args, kwargs = compile_args(case)
        result = compile_report(*args, resolver=GoldenResolver(case), **kwargs)
        assert result.engine["enable_shared_layer"] is shared
        assert result.engine["database_mode"] == (suffix[4:] or "SILICON")


def test_b200_vllm_sol_lanes_lack_the_shared_only_lane():
    """goldens README §1.2: the lane only the shared layer supplies is absent in SOL."""
    by_id = {c["id"]: c for c in CASES}
    silicon = by_id["edge/Qwen3-32B/b200_sxm/vllm/tp8-pp1-dp1"]
    sol = by_id["edge/Qwen3-32B/b200_sxm/vllm/tp8-pp1-dp1/db=SOL"]
    for phase in ("context", "generation"):
        assert first_lanes(silicon, phase)[-1] == "vllm_flashinfer"
        assert first_lanes(sol, phase) == first_lanes(silicon, phase)[:-1]


# ------------------------------------------------------------------------------------------
# With the native module: versions and lane orders come from our own data reader
# ------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def native():
    return pytest.importorskip("aic._aic", reason="native module aic._aic is not built yet")


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_llama_spec_with_native_lanes(native, case):
    from aic import compile_engine_json

    args, kwargs = compile_args(case)
    ours = json.loads(compile_engine_json(*args, **kwargs))
    assert _strict(ours["context_ops"], case["spec_ops"]["context"]) == []
    assert _strict(ours["generation_ops"], case["spec_ops"]["generation"]) == []
    assert _strict(ours["engine"], case["resolved"]["engine"]) == []


VERSION_ERRORS = [c for c in golden_cases("edge") if c["compile_error"]
                  and c["compile"]["backend_version"] is not None]


@pytest.mark.parametrize("case", VERSION_ERRORS, ids=[c["id"] for c in VERSION_ERRORS])
def test_bad_versions_raise_value_error(native, case):
    from aic import compile_engine_json

    args, kwargs = compile_args(case)
    with pytest.raises(ValueError):
        compile_engine_json(*args, **kwargs)


def test_compile_engine_bytes_load(native):
    from aic import AicEngine, compile_engine
    from aic.paths import systems_path

    blob = compile_engine("Qwen/Qwen3-8B", "h200_sxm", "trtllm")
    assert isinstance(blob, bytes) and len(blob) > 0
    engine = AicEngine.from_spec(blob, systems_path=str(systems_path()))
    assert engine.predict_prefill_latency(1, 128) > 0


def test_dense_model_accepts_zero_moe_widths(native):
    """Spec 30 §4: a dense model's MoE sizes reach no op and are copied into the engine config,
    0 included (measured dense deployments record them so); the engine loads such a spec and
    prices it like the same model with the defaults."""
    from aic import AicEngine, compile_engine, compile_engine_json
    from aic.paths import systems_path

    spec = json.loads(compile_engine_json("Qwen/Qwen3-8B", "h200_sxm", "trtllm", moe_tp_size=0,
                                          moe_ep_size=0))
    assert spec["engine"]["moe_tp_size"] == 0 and spec["engine"]["moe_ep_size"] == 0
    default = json.loads(compile_engine_json("Qwen/Qwen3-8B", "h200_sxm", "trtllm"))
    assert spec["context_ops"] == default["context_ops"]
    root = str(systems_path())
    zero = AicEngine.from_spec(compile_engine("Qwen/Qwen3-8B", "h200_sxm", "trtllm",
                                              moe_tp_size=0, moe_ep_size=0), systems_path=root)
    ones = AicEngine.from_spec(compile_engine("Qwen/Qwen3-8B", "h200_sxm", "trtllm"),
                               systems_path=root)
    assert zero.predict_prefill_latency(2, 512) == ones.predict_prefill_latency(2, 512)
    with pytest.raises(ValueError, match="^moe_tp_size must be positive, got -1."):
        compile_engine_json("Qwen/Qwen3-8B", "h200_sxm", "trtllm", moe_tp_size=-1)


def test_native_names_reexported(native):
    import aic

    assert aic.AicEngine is native.AicEngine
    assert issubclass(aic.PerfDataNotAvailableError, RuntimeError)
    assert issubclass(aic.EmpiricalNotImplementedError, RuntimeError)
    assert issubclass(aic.MissingSystemFlopsError, ValueError)


def test_package_imports_without_touching_native():
    import aic

    assert callable(aic.compile_engine) and callable(aic.compile_engine_json)
    with pytest.raises(AttributeError):
        aic.no_such_name  # noqa: B018
