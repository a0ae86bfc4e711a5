"""The forward-pass perf model (spec 42) through the Python surface ``aic.ForwardPassPerfModel``.

Every worked example of spec 42 §12 (the same inputs and expected values as the Rust tests in
crates/aic-core/tests/fpm_*.rs), the Python argument forms (dicts, lists, JSON text, the
tuning-input normalisation of §11), the error mapping onto Python exceptions, ``close()`` and
concurrent tuning + estimating from several Python threads.

Engines come from the golden corpus (``resolved.engine`` + ``spec_ops``) or from the real
compile front end (``from_native``), so both construction paths are exercised.
"""

from __future__ import annotations

import functools
import json
import math
import threading
from pathlib import Path

import pytest

import aic
from aic import _aic
from aic.fpm import compile_request

ForwardPassPerfModel = _aic.ForwardPassPerfModel

REPO = Path(__file__).resolve().parents[2]
GOLDENS = REPO / "goldens"

QWEN_CASE = "dense/Qwen3-32B/h200_sxm/vllm/tp2-pp1-dp1"
QWEN_CONFIG = {
    "schema_version": 1,
    "model_name": "Qwen/Qwen3-32B",
    "system_name": "h200_sxm",
    "backend": "vllm",
    "backend_version": None,
    "tp_size": 2,
    "pp_size": 1,
}
DSV3_CONFIG = {
    "schema_version": 1,
    "model_name": "deepseek-ai/DeepSeek-V3",
    "system_name": "h200_sxm",
    "backend": "trtllm",
    "tp_size": 8,
    "pp_size": 1,
    "moe_tp_size": 1,
    "moe_ep_size": 8,
    "activation_dtype": "bfloat16",
}
FALLBACK_PREFIX = "native forward-pass estimator unavailable; using fallback regression: "

pytestmark = pytest.mark.engine


# ----------------------------------------------------------------------------------- helpers


def close(ours: float, reference: float, rtol: float = 1e-9) -> None:
    assert ours is not None, f"None vs {reference}"
    if reference == 0.0:
        assert abs(ours) <= rtol, f"{ours} vs 0"
    else:
        assert abs(ours - reference) <= rtol * abs(reference), f"{ours} vs {reference}"


def F(np_=0, sp=0, spk=0, nd=0, sdk=0, wall_ms: float | None = None) -> dict:
    """``F(np, sp, spk, nd, sdk)`` of the spec: one FPM record; ``wall_ms`` sets wall_time (s)."""
    record = {
        "version": 1,
        "scheduled_requests": {
            "num_prefill_requests": np_,
            "sum_prefill_tokens": sp,
            "sum_prefill_kv_tokens": spk,
            "num_decode_requests": nd,
            "sum_decode_kv_tokens": sdk,
        },
    }
    if wall_ms is not None:
        record["wall_time"] = wall_ms / 1000.0
    return record


@functools.lru_cache(maxsize=None)
def golden_spec_bytes(file: str, case_id: str) -> bytes:
    with open(GOLDENS / file, encoding="utf-8") as fh:
        cases = json.load(fh)["cases"]
    case = next(c for c in cases if c["id"] == case_id)
    spec = {
        "schema_version": case["resolved"]["spec_schema_version"],
        "engine": case["resolved"]["engine"],
        "context_ops": case["spec_ops"]["context"],
        "generation_ops": case["spec_ops"]["generation"],
    }
    return json.dumps(spec).encode()


@pytest.fixture(scope="module")
def qwen_engine():
    return _aic.AicEngine.from_spec(golden_spec_bytes("dense.json", QWEN_CASE))


@pytest.fixture(scope="module")
def reference(qwen_engine):
    """An untuned native model: its estimates are the uncorrected native values."""
    return ForwardPassPerfModel.from_engine(qwen_engine)


def tune_ratio(model, reference, rank: dict, ratio: float) -> None:
    """Tunes with one single-rank iteration whose observed / native ratio is ``ratio``."""
    native = reference.estimate_forward_pass_time_ms(rank)
    rank = dict(rank, wall_time=ratio * native / 1000.0)
    model.tune_with_fpms([[rank]])


def factor(model, reference, rank: dict) -> float:
    return model.estimate_forward_pass_time_ms(rank) / reference.estimate_forward_pass_time_ms(rank)


# ------------------------------------------------------------------------- the native table


def test_initial_diagnostics(qwen_engine):
    m = ForwardPassPerfModel.from_engine(qwen_engine)
    assert m.diagnostics_json() == (
        '{"source":"aic","readiness":"ready","retained_observations":0,'
        '"correction_ready_buckets":0,"last_warning":null}'
    )
    assert m.diagnostics() == {
        "source": "aic",
        "readiness": "ready",
        "retained_observations": 0,
        "correction_ready_buckets": 0,
        "last_warning": None,
    }
    assert m.is_native and m.last_warning is None
    assert m.min_correction_factor() is None
    assert m.get_avg_correction_factor() is None


def test_prefill_and_decode_ranks(qwen_engine, reference):
    est = reference.estimate_forward_pass_time_ms
    close(est(F(2, 2048)), 101.23303457978317)
    close(qwen_engine.predict_prefill_latency(2, 1024, 0), 101.23303457978317)
    close(est(F(3, 3000, 600)), 153.28438717635282)
    close(est(F(3, 3001, 601)), 153.28438717635282)
    close(est(F(nd=16, sdk=32768)), 12.37392844568119)
    close(qwen_engine.predict_decode_latency(16, 2048, 2), 12.374634979054836)
    close(est(F(nd=3)), 10.35653902330777)
    close(est(F(nd=3, sdk=3)), 10.35653902330777)


def test_mixed_ranks(qwen_engine, reference):
    est = reference.estimate_forward_pass_time_ms
    close(est(F(1, 2048, 0, 16, 48000)), 107.87929828781822)
    close(est(F(2, 1000, 4000, 8, 12000)), 57.12070608747001)
    close(est(F(1, 512, 3584, 32, 160000)), 40.58018612903763)
    # The engine's own mixed step differs (its pass 3 is at s 2050).
    close(qwen_engine.mixed_step_breakdown(2048, 16, 2048, 2)[0], 107.3961440459223)


def test_multi_rank_iteration_in_every_input_form(reference):
    ranks = [F(1, 2048), F(nd=64, sdk=128000), F(1, 1024, 0, 8, 8000)]
    est = reference.estimate_forward_pass_time_ms
    for form in (ranks, tuple(ranks), json.dumps(ranks), json.dumps(ranks).encode()):
        close(est(form), 103.04499679505287)
    close(est(ranks[1]), 15.995248800785513)
    close(est(json.dumps(ranks[2])), 64.11097484551756)


def test_empty_iterations_estimate_zero(reference):
    est = reference.estimate_forward_pass_time_ms
    assert est(F()) == 0.0
    assert est({}) == 0.0
    assert est("{}") == 0.0
    assert est([{}, {}]) == 0.0
    # A fully prefix-cached request schedules no prefill compute.
    assert est({"scheduled_requests": {"num_prefill_requests": 3}}) == 0.0
    # An unknown key (counters one level too high) is an error, not an empty iteration.
    with pytest.raises(ValueError, match='^invalid FPM payload: unknown field "num_decode_requests" in the FPM record; valid fields: version, '):
        est({"num_decode_requests": 3, "sum_decode_kv_tokens": 300})


# -------------------------------------------------------------------------- construction


def test_from_native_compiles_through_the_front_end(reference):
    m = ForwardPassPerfModel.from_native(QWEN_CONFIG)
    assert m.is_native
    close(m.estimate_forward_pass_time_ms(F(2, 2048)), 101.23303457978317)
    close(m.estimate_forward_pass_time_ms(F(1, 2048, 0, 16, 48000)), 107.87929828781822)
    # The config as JSON text, through best_available: still native.
    b = ForwardPassPerfModel.best_available(json.dumps(QWEN_CONFIG))
    assert b.is_native and b.diagnostics()["source"] == "aic" and b.last_warning is None
    close(b.estimate_forward_pass_time_ms(F(nd=3)), 10.35653902330777)


def test_dtype_mapping_of_the_compile_request():
    config = dict(
        QWEN_CONFIG, weight_dtype="fp8", kv_cache_dtype="fp8", activation_dtype="float16"
    )
    seen = []

    def recording(request):
        seen.append(dict(request))
        return compile_request(request)

    m = ForwardPassPerfModel.from_native(config, compiler=recording)
    (request,) = seen
    assert (request["model_path"], request["system"], request["backend"]) == (
        "Qwen/Qwen3-32B", "h200_sxm", "vllm",
    )
    assert (request["gemm_quant_mode"], request["kvcache_quant_mode"]) == ("fp8", "fp8")
    assert request["fmha_quant_mode"] is None and request["moe_quant_mode"] is None
    assert request["comm_quant_mode"] is None and request["backend_version"] is None
    assert (request["tp_size"], request["pp_size"], request["nextn"]) == (2, 1, 0)
    assert "forward_model" not in request
    close(m.estimate_forward_pass_time_ms(F(1, 1024)), 41.944919897588086)
    close(m.estimate_forward_pass_time_ms(F(nd=8, sdk=8000)), 8.582352311177765)


def test_deepseek_v3_mixed_is_all_pass_one():
    m = ForwardPassPerfModel.from_native(DSV3_CONFIG)
    close(m.estimate_forward_pass_time_ms(F(1, 2048, 0, 16, 48000)), 98.06797292955166)
    close(m.estimate_forward_pass_time_ms(F(2, 1000, 4000, 8, 12000)), 70.86415524584318)
    close(m.estimate_forward_pass_time_ms(F(nd=16, sdk=48000)), 17.071462933424115)


def test_unknown_model_falls_back_to_regression():
    config = dict(QWEN_CONFIG, model_name="nobody/NoSuchModel")
    m = ForwardPassPerfModel.best_available(config)
    assert not m.is_native
    d = m.diagnostics()
    assert (d["source"], d["readiness"]) == ("fallback_regression", "unsupported_config")
    assert d["correction_ready_buckets"] == 0
    warning = d["last_warning"]
    assert warning == m.last_warning
    assert warning.startswith(
        FALLBACK_PREFIX + "unsupported model for Rust core estimator: compile_engine: ValueError: "
    ), warning
    assert "nobody/NoSuchModel" in warning
    assert m.min_correction_factor() is None
    with pytest.raises(ValueError) as info:
        ForwardPassPerfModel.from_native(config)
    assert str(info.value) == warning[len(FALLBACK_PREFIX):]


def test_compiler_failures_are_reported_by_exception_name():
    class Boom(Exception):
        pass

    def failing(request):
        raise Boom(f"cannot build {request['model_path']}")

    m = ForwardPassPerfModel.best_available(QWEN_CONFIG, compiler=failing)
    assert m.last_warning == (
        FALLBACK_PREFIX
        + "unsupported model for Rust core estimator: compile_engine: Boom: cannot build Qwen/Qwen3-32B"
    )
    with pytest.raises(ValueError, match="compile_engine: TypeError: the compiler returned int"):
        ForwardPassPerfModel.from_native(QWEN_CONFIG, compiler=lambda request: 42)
    # A compiler may return spec JSON text instead of bytes.
    text = golden_spec_bytes("dense.json", QWEN_CASE).decode()
    m = ForwardPassPerfModel.from_native(QWEN_CONFIG, compiler=lambda request: text)
    close(m.estimate_forward_pass_time_ms(F(2, 2048)), 101.23303457978317)
    with pytest.raises(TypeError, match="compiler must be a callable"):
        ForwardPassPerfModel.from_native(QWEN_CONFIG, compiler="compile_engine")


def test_forward_model_variant_is_not_compiled_but_falls_back():
    m = ForwardPassPerfModel.best_available(dict(QWEN_CONFIG, forward_model="fpm"))
    assert not m.is_native
    assert "forward_model 'fpm' cannot be compiled" in m.last_warning


def test_construction_errors_that_do_not_fall_back():
    with pytest.raises(ValueError) as info:
        ForwardPassPerfModel.best_available(QWEN_CONFIG, options={"bucket_count": 15})
    assert str(info.value) == (
        "invalid engine config: invalid forward pass perf options: bucket_count must be a perfect square"
    )
    config = {k: v for k, v in QWEN_CONFIG.items() if k != "model_name"}
    with pytest.raises(ValueError, match="^invalid engine config JSON: missing field `model_name`"):
        ForwardPassPerfModel.best_available(config)
    with pytest.raises(ValueError, match="^invalid engine config JSON: "):
        ForwardPassPerfModel.from_native("{not json")


# --------------------------------------------------------------------------- correction


def test_correction_with_default_options(qwen_engine, reference):
    m = ForwardPassPerfModel.from_engine(qwen_engine)
    x1024 = F(1, 1024)
    close(m.estimate_forward_pass_time_ms(x1024), 53.67781995651973)
    for ratio in (1.2, 1.5, 3.0, 0.3):
        tune_ratio(m, reference, x1024, ratio)
    # 4 samples < min_observations 5: no correction yet.
    close(m.estimate_forward_pass_time_ms(x1024), 53.67781995651973)
    assert m.diagnostics()["source"] == "aic"
    assert m.diagnostics()["retained_observations"] == 4
    assert m.min_correction_factor() is None
    tune_ratio(m, reference, F(1, 1100), 1.1)
    # Stored [1.2, 1.5, 2.0, 0.5, 1.1] -> median 1.2.
    close(m.estimate_forward_pass_time_ms(x1024), 64.41338394782368)
    assert m.diagnostics_json() == (
        '{"source":"aic_with_correction","readiness":"ready","retained_observations":5,'
        '"correction_ready_buckets":1,"last_warning":null}'
    )
    for getter in (
        m.min_correction_factor, m.max_correction_factor, m.avg_correction_factor,
        m.get_min_correction_factor, m.get_max_correction_factor, m.get_avg_correction_factor,
    ):
        close(getter(), 1.2)


def test_correction_with_small_store_and_eviction(qwen_engine, reference):
    m = ForwardPassPerfModel.from_engine(
        qwen_engine, {"min_observations": 2, "max_observations": 4, "bucket_count": 4}
    )
    tune_ratio(m, reference, F(1, 9000), 1.3)  # outside the prefill axis [0, 8192]: dropped
    assert m.diagnostics()["retained_observations"] == 0
    tune_ratio(m, reference, F(1, 1000), 1.3)
    tune_ratio(m, reference, F(1, 1500), 1.7)
    close(m.estimate_forward_pass_time_ms(F(1, 1200)), 99.38302807720706)
    close(factor(m, reference, F(1, 1200)), 1.5)
    assert factor(m, reference, F(1, 3000)) == 1.0
    tune_ratio(m, reference, F(1, 3000), 0.8)
    close(m.min_correction_factor(), 0.8)
    close(m.max_correction_factor(), 1.5)
    close(m.avg_correction_factor(), 1.15)
    assert m.diagnostics()["correction_ready_buckets"] == 2
    tune_ratio(m, reference, F(1, 1000), 1.1)
    tune_ratio(m, reference, F(1, 1000), 1.2)
    # 5 > 4 retained: the oldest of bucket 0 (1.3) is evicted -> [1.7, 1.1, 1.2].
    close(m.min_correction_factor(), 0.8)
    close(m.max_correction_factor(), 1.2)
    close(factor(m, reference, F(1, 1200)), 1.2)
    assert m.diagnostics()["retained_observations"] == 4
    # A zero wall time is ignored.
    m.tune_with_fpms([[F(1, 1000, wall_ms=0.0)]])
    assert m.diagnostics()["retained_observations"] == 4


def test_decode_correction_grid(qwen_engine, reference):
    m = ForwardPassPerfModel.from_engine(qwen_engine, '{"min_observations":2}')
    tune_ratio(m, reference, F(nd=64, sdk=128000), 1.3)
    tune_ratio(m, reference, F(nd=100, sdk=100000), 1.5)
    tune_ratio(m, reference, F(nd=200, sdk=128000), 0.9)
    close(factor(m, reference, F(nd=80, sdk=110000)), 1.4)
    close(factor(m, reference, F(nd=250, sdk=400000)), 0.9)
    assert factor(m, reference, F(nd=600, sdk=100000)) == 1.0  # outside the batch axis
    assert factor(m, reference, F(nd=128, sdk=500000)) == 1.0  # bucket (1, 1) is empty
    close(factor(m, reference, F(nd=127, sdk=499999)), 1.4)
    d = m.diagnostics()
    assert (d["retained_observations"], d["correction_ready_buckets"]) == (3, 2)
    close(m.min_correction_factor(), 0.9)
    close(m.max_correction_factor(), 1.4)
    close(m.avg_correction_factor(), 1.15)


def test_multi_rank_tuning_uses_the_loaded_rank_kind(qwen_engine):
    m = ForwardPassPerfModel.from_engine(qwen_engine, {"min_observations": 1})
    n = 103.04499679505287
    iteration = [F(1, 2048, wall_ms=1.4 * n), F(nd=64, sdk=128000, wall_ms=1.1 * n)]
    m.tune_with_fpms(iteration)  # a list of dicts is one iteration
    close(m.estimate_forward_pass_time_ms(iteration), 1.4 * n)
    close(m.estimate_forward_pass_time_ms(F(nd=64, sdk=128000)), 22.393348321099715)
    close(m.estimate_forward_pass_time_ms(F(1, 2048)), 103.04499679505287)
    d = m.diagnostics()
    assert (d["retained_observations"], d["source"]) == (1, "aic_with_correction")


def test_tuning_input_normalisation(qwen_engine):
    def retained(iterations) -> int:
        m = ForwardPassPerfModel.from_engine(qwen_engine, {"min_observations": 1})
        m.tune_with_fpms(iterations)
        return m.diagnostics()["retained_observations"]

    a, b = F(1, 1024, wall_ms=60.0), F(nd=8, sdk=8000, wall_ms=9.0)
    assert retained(a) == 1  # one single-rank iteration
    assert retained([a, b]) == 1  # one two-rank iteration
    assert retained([]) == 0
    assert retained([[a], [b]]) == 2  # two iterations
    assert retained(([a], (b,))) == 2
    assert retained(json.dumps([[a], [b]])) == 2
    assert retained(json.dumps([[a], [b]]).encode()) == 2
    m = ForwardPassPerfModel.from_engine(qwen_engine)
    with pytest.raises(TypeError, match="mixes FPM dicts and lists"):
        m.tune_with_fpms([a, [b]])
    with pytest.raises(TypeError, match="iterations must be"):
        m.tune_with_fpms(3.5)
    # JSON text must already be an array of arrays.
    with pytest.raises(ValueError, match="^invalid tuning iterations JSON: invalid type: map, expected a sequence"):
        m.tune_with_fpms(json.dumps(a))


def test_tuning_stops_at_the_first_error_and_keeps_earlier_updates(qwen_engine):
    m = ForwardPassPerfModel.from_engine(qwen_engine, {"min_observations": 1})
    good = F(1, 1024, wall_ms=60.0)
    with pytest.raises(ValueError) as info:
        m.tune_with_fpms([[good], [{"version": 2}], [good]])
    assert str(info.value) == "unsupported schema version for ForwardPassMetrics: got 2, expected 1"
    assert m.diagnostics()["retained_observations"] == 1
    # Empty iterations and iterations without a wall time are skipped.
    m.tune_with_fpms([[{}], [F(1, 5)]])
    assert m.diagnostics()["retained_observations"] == 1


# --------------------------------------------------------------------------- regression


def test_regression_prefill_then_decode():
    m = ForwardPassPerfModel.from_regression()
    assert m.diagnostics() == {
        "source": "fallback_regression",
        "readiness": "insufficient_data",
        "retained_observations": 0,
        "correction_ready_buckets": 0,
        "last_warning": None,
    }
    assert not m.is_native
    query = F(1, 1500)
    samples = [(512, 20.0), (1024, 31.0), (2048, 55.0), (4096, 101.0), (8192, 205.0), (256, 15.0), (3000, 80.0)]
    expected = [None, None, None, None, 42.05735467069892, 42.11921699944062, 42.2896087311764]
    for (tokens, ms), want in zip(samples, expected):
        m.tune_with_fpms(F(1, tokens, wall_ms=ms))
        got = m.estimate_forward_pass_time_ms(query)
        if want is None:
            assert got is None
        else:
            close(got, want)
    assert m.diagnostics()["readiness"] == "ready"

    query = F(nd=24, sdk=36000)
    samples = [(8, 8000, 10.0), (16, 32000, 12.5), (32, 32000, 13.0), (64, 192000, 20.0), (128, 64000, 18.0), (4, 32000, 11.0)]
    expected = [None, None, None, None, 12.46737375570798, 12.3650074244855]
    for (batch, kv, ms), want in zip(samples, expected):
        m.tune_with_fpms([[F(nd=batch, sdk=kv, wall_ms=ms)]])
        got = m.estimate_forward_pass_time_ms(query)
        if want is None:
            assert got is None
        else:
            close(got, want)
    assert m.diagnostics_json() == (
        '{"source":"fallback_regression","readiness":"ready","retained_observations":13,'
        '"correction_ready_buckets":0,"last_warning":null}'
    )
    assert m.min_correction_factor() is None
    assert m.max_correction_factor() is None
    assert m.avg_correction_factor() is None
    # A kind without a fit answers None; an empty iteration 0.0.
    assert m.estimate_forward_pass_time_ms(F(1, 10, 0, 1, 0)) is None
    assert m.estimate_forward_pass_time_ms({}) == 0.0


def test_regression_eviction():
    m = ForwardPassPerfModel.from_regression({"bucket_count": 1, "max_observations": 3, "min_observations": 3})
    m.tune_with_fpms([[F(1, t, wall_ms=ms)] for t, ms in [(100, 10.0), (200, 20.0), (400, 35.0), (800, 70.0)]])
    close(m.estimate_forward_pass_time_ms(F(1, 300)), 27.678571428571434)
    d = m.diagnostics()
    assert (d["retained_observations"], d["readiness"]) == (3, "ready")


def test_regression_without_a_decode_fit_is_none():
    m = ForwardPassPerfModel.from_regression()
    assert m.estimate_forward_pass_time_ms({"scheduled_requests": {"num_decode_requests": 3}}) is None


def test_options_forms_and_defaults():
    defaults = {
        "max_observations": 64,
        "min_observations": 5,
        "min_faster_correction_factor": 0.5,
        "max_slower_correction_factor": 2.0,
        "bucket_count": 16,
        "max_num_tokens": 8192,
        "max_batch_size": 512,
        "max_kv_tokens": 2000000,
    }
    for options in (None, "", "   \n", "null", {}, b"{}"):
        assert ForwardPassPerfModel.from_regression(options).options == defaults, options
    unbounded = ForwardPassPerfModel.from_regression(
        {"min_faster_correction_factor": None, "max_slower_correction_factor": None}
    ).options
    assert (unbounded["min_faster_correction_factor"], unbounded["max_slower_correction_factor"]) == (None, None)


# ------------------------------------------------------------------------------- errors


@pytest.mark.parametrize(
    "options, message",
    [
        ({"bucket_count": 15}, "bucket_count must be a perfect square"),
        ({"min_observations": 100}, "min_observations must be <= max_observations"),
        ({"max_observations": 0}, "max_observations must be >= 1"),
        ({"min_faster_correction_factor": 1.5}, "min_faster_correction_factor must be finite and in (0.0, 1.0]"),
        ({"max_slower_correction_factor": 0.5}, "max_slower_correction_factor must be finite and >= 1.0"),
    ],
)
def test_invalid_options(qwen_engine, options, message):
    full = "invalid engine config: invalid forward pass perf options: " + message
    for build in (
        lambda: ForwardPassPerfModel.from_regression(options),
        lambda: ForwardPassPerfModel.from_engine(qwen_engine, options),
    ):
        with pytest.raises(ValueError) as info:
            build()
        assert str(info.value) == full


def test_unparsable_options():
    with pytest.raises(ValueError, match="^invalid options JSON: "):
        ForwardPassPerfModel.from_regression("{max_observations")


@pytest.mark.parametrize(
    "metrics, message",
    [
        ({"version": 2}, "unsupported schema version for ForwardPassMetrics: got 2, expected 1"),
        (
            {"scheduled_requests": {"sum_prefill_tokens": 10}},
            "invalid forward pass metrics: prefill token sums require num_prefill_requests > 0",
        ),
        (
            {"scheduled_requests": {"sum_prefill_kv_tokens": 10}},
            "invalid forward pass metrics: prefill token sums require num_prefill_requests > 0",
        ),
        (
            {"scheduled_requests": {"sum_decode_kv_tokens": 10}},
            "invalid forward pass metrics: decode KV token sum requires num_decode_requests > 0",
        ),
        ([], "invalid forward pass metrics: at least one attention-DP rank metric is required"),
        (
            [F(1, 10), {"version": 3}],
            "unsupported schema version for ForwardPassMetrics: got 3, expected 1",
        ),
        (
            {"scheduled_requests": {"num_decode_requests": -3}},
            "invalid FPM payload: scheduled_requests.num_decode_requests: invalid value: integer `-3`, expected u32",
        ),
    ],
)
def test_invalid_metrics_raise_value_error(reference, metrics, message):
    with pytest.raises(ValueError) as info:
        reference.estimate_forward_pass_time_ms(metrics)
    assert str(info.value) == message


def test_malformed_and_mistyped_metrics(reference):
    with pytest.raises(ValueError, match="^invalid FPM JSON: "):
        reference.estimate_forward_pass_time_ms("{not json")
    with pytest.raises(ValueError, match="^invalid FPM payload: "):
        reference.estimate_forward_pass_time_ms([1, 2])
    with pytest.raises(TypeError, match="metrics must be an FPM dict"):
        reference.estimate_forward_pass_time_ms(42)
    with pytest.raises(TypeError, match="^metrics cannot be converted to JSON: "):
        reference.estimate_forward_pass_time_ms({"scheduled_requests": object()})
    with pytest.raises(ValueError, match=r"^metrics\.wall_time must be a finite number, got NaN "):
        reference.estimate_forward_pass_time_ms(dict(F(1, 10), wall_time=math.nan))
    with pytest.raises(ValueError, match=r"^metrics\[1\]\.wall_time must be a finite number, got inf "):
        reference.estimate_forward_pass_time_ms([F(1, 10), dict(F(1, 10), wall_time=math.inf)])
    with pytest.raises(ValueError, match=r"^options\.max_slower_correction_factor must be a finite number, got NaN "):
        ForwardPassPerfModel.from_regression({"max_slower_correction_factor": math.nan})
    with pytest.raises(ValueError, match='^invalid options JSON: unknown field "bucket_cont" in options; valid fields: '):
        ForwardPassPerfModel.from_regression({"bucket_cont": 4})
    with pytest.raises(ValueError, match="^invalid options JSON: options must be a JSON object, got a list"):
        ForwardPassPerfModel.from_regression("[64, 5]")
    with pytest.raises(ValueError, match="not valid UTF-8"):
        reference.estimate_forward_pass_time_ms(b"\xff\xfe")
    with pytest.raises(TypeError, match="options must be a dict or JSON text, got list"):
        ForwardPassPerfModel.from_regression([("bucket_count", 4)])
    with pytest.raises(TypeError, match="config must be a dict or JSON text, got int"):
        ForwardPassPerfModel.from_native(7)
    with pytest.raises(TypeError):
        ForwardPassPerfModel.from_engine("not an engine")


# ------------------------------------------------------------------ lifecycle and threads


def test_close_and_context_manager(qwen_engine):
    with ForwardPassPerfModel.from_engine(qwen_engine) as m:
        assert not m.closed
        assert repr(m) == "ForwardPassPerfModel(source='aic', readiness='ready', retained_observations=0)"
        close(m.estimate_forward_pass_time_ms(F(2, 2048)), 101.23303457978317)
    assert m.closed
    assert repr(m) == "ForwardPassPerfModel(closed)"
    for call in (
        lambda: m.estimate_forward_pass_time_ms(F(2, 2048)),
        lambda: m.tune_with_fpms([]),
        m.diagnostics,
        m.min_correction_factor,
        lambda: m.last_warning,
    ):
        with pytest.raises(ValueError, match="is closed"):
            call()
    m.close()  # idempotent


def test_exports():
    assert aic.ForwardPassPerfModel is _aic.ForwardPassPerfModel
    assert "ForwardPassPerfModel" in aic.__all__
    assert "ForwardPassPerfModel" in _aic.__all__


def test_tune_and_estimate_from_several_threads(qwen_engine, reference):
    """Threads tune (ratio 1.25 everywhere in one prefill bucket) while others estimate and read
    the diagnostics: no crash, every estimate is either the native value or 1.25 x it, and the
    final state holds every sample."""
    m = ForwardPassPerfModel.from_engine(qwen_engine, {"min_observations": 1})
    query = F(1, 1024)
    native_query = reference.estimate_forward_pass_time_ms(query)
    tuners, per_tuner = 4, 10
    plans = []
    for t in range(tuners):
        plan = []
        for i in range(per_tuner):
            rank = F(1, 1024 + 12 * (t * per_tuner + i))  # all in bucket 2 ([1024, 1536))
            native = reference.estimate_forward_pass_time_ms(rank)
            plan.append([dict(rank, wall_time=1.25 * native / 1000.0)])
        plans.append(plan)
    errors: list[BaseException] = []
    seen: list[float] = []
    start = threading.Barrier(tuners + 2)

    def tuner(plan):
        try:
            start.wait()
            for iteration in plan:
                m.tune_with_fpms([iteration])
                seen.append(m.estimate_forward_pass_time_ms(query))
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    def reader():
        try:
            start.wait()
            for _ in range(3 * per_tuner):
                seen.append(m.estimate_forward_pass_time_ms(query))
                m.diagnostics()
                m.avg_correction_factor()
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=tuner, args=(p,)) for p in plans]
    threads += [threading.Thread(target=reader) for _ in range(2)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors, errors
    assert len(seen) == tuners * per_tuner + 2 * 3 * per_tuner
    for value in seen:
        assert (
            abs(value - native_query) <= 1e-9 * native_query
            or abs(value - 1.25 * native_query) <= 1e-9 * native_query
        ), value
    d = m.diagnostics()
    assert (d["retained_observations"], d["correction_ready_buckets"]) == (tuners * per_tuner, 1)
    close(m.avg_correction_factor(), 1.25)
    close(m.estimate_forward_pass_time_ms(query), 1.25 * native_query)
