"""The native module ``aic._aic``: names, exception classes, argument handling, the data
helpers on the shipped data, and a spec round trip through the engine.

Nothing here skips: the native module is built by ``pip install .`` (scripts/test-all.sh), and
a missing or broken module must fail the suite. Tests that need a working estimator carry the
``engine`` marker so they can be selected (``-m engine``) or deselected (``-m "not engine"``)
on purpose, never silently.
"""

from __future__ import annotations

import importlib.metadata
import json
import threading
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
GOLDENS = REPO / "goldens"
SHIPPED_SYSTEMS = REPO / "data" / "systems"

from aic import _aic  # noqa: E402  (a failure here is a real failure: the module must exist)

engine = pytest.mark.engine


# ----------------------------------------------------------------------------------- helpers


def _cases(name: str) -> list[dict]:
    with open(GOLDENS / f"{name}.json", encoding="utf-8") as fh:
        return json.load(fh)["cases"]


def _case(name: str, case_id: str) -> dict:
    for case in _cases(name):
        if case["id"] == case_id:
            return case
    raise AssertionError(f"golden case {case_id} not found in {name}.json")


def _spec_json(case: dict) -> str:
    """A spec built by hand from a golden case: its resolved engine config and op lists."""
    return json.dumps(
        {
            "schema_version": case["resolved"]["spec_schema_version"],
            "engine": case["resolved"]["engine"],
            "context_ops": case["spec_ops"]["context"],
            "generation_ops": case["spec_ops"]["generation"],
        }
    )


def _queries(case: dict, kind: str) -> list[dict]:
    return [q for q in case["queries"] if q["kind"] == kind]


def _close(ours: float, ref: float, rtol: float = 1e-9) -> bool:
    return abs(ours - ref) <= rtol * abs(ref) if ref != 0 else abs(ours) <= 1e-9


DENSE_CASE = "dense/Qwen3-8B/h200_sxm/vllm/tp1-pp1-dp1"


@pytest.fixture(scope="module")
def dense_case() -> dict:
    return _case("dense", DENSE_CASE)


@pytest.fixture(scope="module")
def dense_engine(dense_case):
    return _aic.AicEngine.from_spec(_aic.encode_spec(_spec_json(dense_case)))


# ------------------------------------------------------------------------------ module names


def test_public_names():
    for name in (
        "AicEngine",
        "PerfDataNotAvailableError",
        "EmpiricalNotImplementedError",
        "MissingSystemFlopsError",
        "resolve_backend_version",
        "attention_lane_order",
        "encode_spec",
        "decode_spec",
        "default_systems_path",
        "__version__",
    ):
        assert hasattr(_aic, name), name
        assert name in _aic.__all__
    for method in (
        "from_spec",
        "predict_prefill_latency",
        "predict_decode_latency",
        "mixed_step_latency",
        "mixed_step_breakdown",
        "decode_step_latency",
        "run_static",
        "run_static_per_op",
        "evaluate_ops_json",
        "spec_json",
    ):
        assert callable(getattr(_aic.AicEngine, method)), method


def test_version_matches_distribution():
    assert isinstance(_aic.__version__, str) and _aic.__version__
    assert _aic.__version__ == importlib.metadata.version("aic")


def test_reexported_by_package():
    import aic

    assert aic.AicEngine is _aic.AicEngine
    assert aic.PerfDataNotAvailableError is _aic.PerfDataNotAvailableError


@pytest.mark.parametrize(
    ("method", "expected"),
    [
        ("predict_prefill_latency", "(bs, isl, prefix=0)"),
        ("predict_decode_latency", "(bs, isl, osl=2)"),
        (
            "mixed_step_latency",
            "(ctx_tokens, gen_tokens, isl, osl, prefix=0, seq_imbalance_correction_scale=1.0, "
            "gen_seq_imbalance_correction_scale=1.0)",
        ),
        (
            "mixed_step_breakdown",
            "(ctx_tokens, gen_tokens, isl, osl, prefix=0, seq_imbalance_correction_scale=1.0, "
            "gen_seq_imbalance_correction_scale=1.0)",
        ),
        ("decode_step_latency", "(gen_tokens, isl, osl, gen_seq_imbalance_correction_scale=1.0)"),
        (
            "run_static",
            "(batch_size, beam_width, isl, osl, prefix=0, seq_imbalance_correction_scale=1.0, "
            'gen_seq_imbalance_correction_scale=1.0, mode="static", stride=32)',
        ),
        (
            "run_static_per_op",
            "(batch_size, beam_width, isl, osl, prefix=0, seq_imbalance_correction_scale=1.0, "
            'gen_seq_imbalance_correction_scale=1.0, mode="static", stride=32)',
        ),
        (
            "evaluate_ops_json",
            "(ops_json, is_context, batch_size, s, prefix=0, imbalance_correction_scale=1.0, "
            "x=None)",
        ),
    ],
)
def test_signatures(method, expected):
    signature = getattr(_aic.AicEngine, method).__text_signature__
    assert signature == "($self, " + expected[1:]


def test_function_signatures():
    assert _aic.resolve_backend_version.__text_signature__ == (
        "(systems_path, system, backend, requested=None)"
    )
    assert _aic.attention_lane_order.__text_signature__ == (
        "(systems_path, system, backend, version, phase, enable_shared_layer=True, "
        "attention_backend=None)"
    )
    assert _aic.AicEngine.from_spec.__text_signature__ == (
        "(spec_bytes, systems_path=None, *, quant_transfer=False)")


# -------------------------------------------------------------------------------- exceptions


def test_exception_hierarchy():
    assert issubclass(_aic.PerfDataNotAvailableError, RuntimeError)
    assert issubclass(_aic.EmpiricalNotImplementedError, RuntimeError)
    assert issubclass(_aic.MissingSystemFlopsError, ValueError)
    assert not issubclass(_aic.PerfDataNotAvailableError, ValueError)
    assert not issubclass(_aic.EmpiricalNotImplementedError, ValueError)
    assert not issubclass(_aic.MissingSystemFlopsError, RuntimeError)
    assert not issubclass(_aic.PerfDataNotAvailableError, _aic.EmpiricalNotImplementedError)
    for cls in (
        _aic.PerfDataNotAvailableError,
        _aic.EmpiricalNotImplementedError,
        _aic.MissingSystemFlopsError,
    ):
        assert cls.__module__ == "aic._aic"
        assert cls.__doc__
        with pytest.raises(cls, match="boom"):
            raise cls("boom")


# ----------------------------------------------------------------------- spec encode/decode


def test_garbage_spec_bytes():
    for garbage in (b"", b"garbage", b"\x00\x01\x02\x03" * 8, b"{not json", b"[1, 2, 3]"):
        with pytest.raises(ValueError):
            _aic.AicEngine.from_spec(garbage)
        with pytest.raises(ValueError):
            _aic.decode_spec(garbage)


def test_spec_must_be_bytes():
    with pytest.raises(TypeError):
        _aic.AicEngine.from_spec("{}")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        _aic.AicEngine.from_spec(None)  # type: ignore[arg-type]


def test_encode_spec_rejects_bad_json():
    for text in ("", "not json", "{}", "[]", '{"schema_version": 15}'):
        with pytest.raises(ValueError):
            _aic.encode_spec(text)


def test_wrong_schema_version(dense_case):
    spec = json.loads(_spec_json(dense_case))
    spec["schema_version"] = 14
    text = json.dumps(spec)
    with pytest.raises(ValueError, match="schema version"):
        _aic.encode_spec(text)
    with pytest.raises(ValueError, match="schema version"):
        _aic.AicEngine.from_spec(text.encode())


def test_encode_decode_round_trip(dense_case):
    text = _spec_json(dense_case)
    blob = _aic.encode_spec(text)
    assert isinstance(blob, bytes) and blob
    decoded = json.loads(_aic.decode_spec(blob))
    assert decoded["schema_version"] == 15
    assert decoded["engine"]["model_name"] == "Qwen/Qwen3-8B"
    assert len(decoded["context_ops"]) == len(dense_case["spec_ops"]["context"])
    assert len(decoded["generation_ops"]) == len(dense_case["spec_ops"]["generation"])
    # Decoding is stable: encode(decode(x)) gives the same bytes back.
    assert _aic.encode_spec(_aic.decode_spec(blob)) == blob
    # JSON bytes are accepted as a spec too, and bytearray like bytes.
    assert json.loads(_aic.decode_spec(text.encode())) == decoded
    assert _aic.decode_spec(bytearray(blob)) == _aic.decode_spec(blob)


# ------------------------------------------------------------------------- data on the disk


def test_default_systems_path(monkeypatch):
    monkeypatch.delenv("AIC_SYSTEMS_PATH", raising=False)
    default = _aic.default_systems_path()
    assert default is not None, "the shipped data was not found"
    assert (Path(default) / "h200_sxm.yaml").is_file()
    # The installed package's own copy wins over the source checkout (wheel: site-packages;
    # editable or source tree: the aic/data link to the repo's data/).
    packaged = Path(_aic.__file__).parent / "data" / "systems"
    assert packaged.is_dir()
    assert Path(default).resolve() == packaged.resolve()


def test_default_systems_path_env_override(monkeypatch, tmp_path):
    monkeypatch.setenv("AIC_SYSTEMS_PATH", str(tmp_path))
    assert _aic.default_systems_path() == str(tmp_path)


GOLDEN_VERSIONS = [
    # (system, backend, requested, version, tolerate_dirless): goldens/README.md section 6
    ("h200_sxm", "vllm", None, "0.24.0", False),
    ("h200_sxm", "vllm", "current", "0.24.0", False),
    ("h200_sxm", "vllm", "next", "0.27.0", True),
    ("b200_sxm", "vllm", "next", "0.27.0", True),
    ("h100_sxm", "sglang", None, "0.5.14", False),
    ("h200_sxm", "sglang", "next", "0.5.16", False),
    ("h200_sxm", "trtllm", None, "1.3.0rc20", False),
    ("b200_sxm", "trtllm", "next", "1.3.0rc23", False),
    ("h100_sxm", "trtllm", "1.3.0rc20", "1.3.0rc20", False),
]


@pytest.mark.parametrize(("system", "backend", "requested", "version", "dirless"), GOLDEN_VERSIONS)
def test_resolve_backend_version(system, backend, requested, version, dirless):
    assert _aic.resolve_backend_version(str(SHIPPED_SYSTEMS), system, backend, requested) == (
        version,
        dirless,
    )


def test_resolve_backend_version_default_path():
    assert _aic.resolve_backend_version(None, "h200_sxm", "vllm") == ("0.24.0", False)


@pytest.mark.parametrize(
    ("system", "backend", "requested"),
    [
        ("h200_sxm", "vllm", "previous"),  # no such slot
        ("h200_sxm", "vllm", "0.22.0"),  # a literal that is not a slot
        ("h200_sxm", "tensorflow", None),  # unknown backend
        ("no_such_system", "vllm", None),  # unknown system
    ],
)
def test_resolve_backend_version_errors(system, backend, requested, monkeypatch):
    monkeypatch.delenv("AIC_ALLOW_UNLISTED_VERSIONS", raising=False)
    with pytest.raises(ValueError):
        _aic.resolve_backend_version(str(SHIPPED_SYSTEMS), system, backend, requested)


def _golden_lane_expectations() -> list[tuple]:
    """(system, backend, version, phase, enable_shared_layer, lanes) from the goldens' spec ops."""
    seen: dict[tuple, list[str]] = {}
    for name in ("dense", "moe", "edge"):
        for case in _cases(name):
            if not case["spec_ops"]:
                continue
            cfg = case["resolved"]["engine"]
            for phase, variant in (("context", "ContextAttention"), ("generation", "GenerationAttention")):
                for op in case["spec_ops"][phase]:
                    if variant in op:
                        key = (
                            cfg["system_name"],
                            cfg["backend"],
                            cfg["backend_version"],
                            phase,
                            cfg["enable_shared_layer"],
                        )
                        seen.setdefault(key, op[variant]["lane_order"])
                        break
    return [key + (lanes,) for key, lanes in sorted(seen.items())]


LANE_CASES = _golden_lane_expectations()


@pytest.mark.parametrize(("system", "backend", "version", "phase", "shared", "lanes"), LANE_CASES)
def test_attention_lane_order_matches_goldens(system, backend, version, phase, shared, lanes):
    got = _aic.attention_lane_order(str(SHIPPED_SYSTEMS), system, backend, version, phase, shared)
    assert got == lanes


def test_attention_lane_order_shared_layer_switch():
    # goldens/README.md 1.2: on b200_sxm vllm the lane vllm_flashinfer comes only from the
    # shared layer (the 0.22.0 fallback).
    root = str(SHIPPED_SYSTEMS)
    with_shared = _aic.attention_lane_order(root, "b200_sxm", "vllm", "0.24.0", "context")
    without = _aic.attention_lane_order(root, "b200_sxm", "vllm", "0.24.0", "context", False)
    assert with_shared[-1] == "vllm_flashinfer"
    assert without == with_shared[:-1]


@pytest.mark.parametrize("phase", ["", "ctx", "Context", "decode", "prefill"])
def test_attention_lane_order_unknown_phase(phase):
    with pytest.raises(ValueError, match="phase"):
        _aic.attention_lane_order(str(SHIPPED_SYSTEMS), "h200_sxm", "vllm", "0.24.0", phase)


def test_attention_lane_order_unknown_system_or_backend():
    with pytest.raises(ValueError):
        _aic.attention_lane_order(str(SHIPPED_SYSTEMS), "nope", "vllm", "0.24.0", "context")
    with pytest.raises(ValueError):
        _aic.attention_lane_order(str(SHIPPED_SYSTEMS), "h200_sxm", "nope", "0.24.0", "context")


# ---------------------------------------------------------------------------- the engine


@engine
def test_round_trip_prefill_matches_golden(dense_case):
    eng = _aic.AicEngine.from_spec(_aic.encode_spec(_spec_json(dense_case)))
    checked = 0
    for query in _queries(dense_case, "prefill"):
        args = query["args"]
        if query["error"] is not None:
            continue
        got = eng.predict_prefill_latency(args["bs"], args["isl"], args["prefix"])
        assert _close(got, query["value"]), (args, got, query["value"])
        checked += 1
    assert checked >= 5


@engine
def test_spec_json_bytes_and_explicit_systems_path(dense_case):
    text = _spec_json(dense_case)
    from_json = _aic.AicEngine.from_spec(text.encode(), str(SHIPPED_SYSTEMS))
    from_blob = _aic.AicEngine.from_spec(_aic.encode_spec(text), systems_path=SHIPPED_SYSTEMS)
    assert from_json.predict_prefill_latency(1, 1024) == from_blob.predict_prefill_latency(1, 1024)


@engine
def test_engine_repr_and_spec_json(dense_engine):
    text = repr(dense_engine)
    for part in ("AicEngine", "Qwen/Qwen3-8B", "h200_sxm", "vllm", "0.24.0"):
        assert part in text
    spec = json.loads(dense_engine.spec_json())
    assert spec["engine"]["model_name"] == "Qwen/Qwen3-8B"
    assert spec["schema_version"] == 15


@engine
def test_defaults_match_explicit_arguments(dense_engine):
    e = dense_engine
    assert e.predict_prefill_latency(2, 512) == e.predict_prefill_latency(2, 512, 0)
    assert e.predict_decode_latency(2, 512) == e.predict_decode_latency(2, 512, 2)
    assert e.mixed_step_latency(512, 8, 1024, 64) == e.mixed_step_latency(
        512, 8, 1024, 64, 0, 1.0, 1.0
    )
    assert e.decode_step_latency(8, 1024, 64) == e.decode_step_latency(8, 1024, 64, 1.0)
    assert e.run_static(2, 1, 512, 64) == e.run_static(2, 1, 512, 64, 0, 1.0, 1.0, "static", 32)
    assert e.run_static(
        batch_size=2, beam_width=1, isl=512, osl=64, mode="static", stride=32
    ) == e.run_static(2, 1, 512, 64)


@engine
def test_result_shapes(dense_engine):
    e = dense_engine
    static = e.run_static(1, 1, 1024, 128)
    assert isinstance(static, tuple) and len(static) == 3
    assert static[2] == static[0] + static[1]
    breakdown = e.mixed_step_breakdown(1024, 16, 1024, 128)
    assert isinstance(breakdown, list) and len(breakdown) == 4
    assert all(isinstance(v, float) for v in breakdown)
    context, generation = e.run_static_per_op(4, 1, 2048, 128)
    assert isinstance(context, list) and isinstance(generation, list)
    for row in context + generation:
        assert isinstance(row, tuple) and len(row) == 4
        name, latency, energy, source = row
        assert isinstance(name, str) and isinstance(latency, float) and isinstance(energy, float)
        assert source in {"silicon", "empirical", "sol", "estimated", "mixed"}
    assert sum(r[1] for r in context) == pytest.approx(e.run_static(4, 1, 2048, 128)[0], rel=1e-12)


@engine
def test_evaluate_ops_json(dense_case, dense_engine):
    op = dense_case["spec_ops"]["context"][2]  # a Gemm
    rows = dense_engine.evaluate_ops_json(json.dumps([op]), True, 1, 1024)
    assert len(rows) == 1 and rows[0][0] == op["Gemm"]["name"]
    assert rows == dense_engine.evaluate_ops_json(json.dumps([op]), True, 1, 1024, 0, 1.0, None)
    with pytest.raises(ValueError):
        dense_engine.evaluate_ops_json("not json", True, 1, 1024)


@engine
@pytest.mark.parametrize(
    "call",
    [
        lambda e: e.predict_prefill_latency(-1, 1024),
        lambda e: e.predict_prefill_latency(1, -1024),
        lambda e: e.predict_prefill_latency(1, 1024, -1),
        lambda e: e.predict_prefill_latency(2**32, 1024),
        lambda e: e.predict_decode_latency(1, 1024, -2),
        lambda e: e.mixed_step_latency(-1, 0, 1024, 128),
        lambda e: e.decode_step_latency(1, 2**40, 128),
        lambda e: e.run_static(1, -1, 1024, 128),
        lambda e: e.run_static(1, 1, 1024, 128, stride=-32),
        lambda e: e.run_static_per_op(1, 1, 1024, 128, prefix=-5),
        lambda e: e.evaluate_ops_json("[]", True, -1, 1024),
        lambda e: e.evaluate_ops_json("[]", True, 1, 1024, x=-1),
    ],
)
def test_negative_or_huge_ints_raise_overflow(dense_engine, call):
    with pytest.raises(OverflowError):
        call(dense_engine)


@engine
def test_wrong_argument_types(dense_engine):
    with pytest.raises(TypeError):
        dense_engine.predict_prefill_latency(1.5, 1024)
    with pytest.raises(TypeError):
        dense_engine.predict_prefill_latency("1", 1024)
    with pytest.raises(TypeError):
        dense_engine.predict_prefill_latency(1)


@engine
def test_value_errors_from_the_core(dense_engine):
    # goldens/README.md 5.1 and 5.6
    with pytest.raises(ValueError, match="isl must be greater than 0 after removing prefix"):
        dense_engine.predict_prefill_latency(1, 1024, 1024)
    with pytest.raises(ValueError, match="invalid mode"):
        dense_engine.run_static(1, 1, 1024, 128, mode="static_bogus")
    with pytest.raises(ValueError, match="invalid mode"):
        dense_engine.run_static_per_op(1, 1, 1024, 128, mode="static_bogus")


@engine
def test_perf_data_error_class():
    # goldens/README.md 5.3: this MoE layout has no perf rows, every query raises.
    case = _case("moe", "moe/Qwen3-235B-A22B/h200_sxm/vllm/tp8-pp1-dp1-mtp2-ep4")
    expected = _queries(case, "prefill")[0]
    assert expected["error"]["class"] == "PerfDataNotAvailableError"
    eng = _aic.AicEngine.from_spec(_aic.encode_spec(_spec_json(case)))
    args = expected["args"]
    with pytest.raises(_aic.PerfDataNotAvailableError, match="MoE data missing"):
        eng.predict_prefill_latency(args["bs"], args["isl"], args["prefix"])


@engine
def test_bad_systems_path_raises(dense_case, tmp_path):
    spec = _aic.encode_spec(_spec_json(dense_case))
    with pytest.raises((ValueError, RuntimeError)):
        _aic.AicEngine.from_spec(spec, str(tmp_path / "nowhere"))


@engine
def test_threads_share_one_engine(dense_engine):
    expected = [dense_engine.predict_prefill_latency(b, 1024) for b in (1, 2, 4, 8)]
    results: list = [None] * 4
    errors: list = []

    def work(slot: int) -> None:
        try:
            results[slot] = [dense_engine.predict_prefill_latency(b, 1024) for b in (1, 2, 4, 8)]
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors
    assert results == [expected] * 4

