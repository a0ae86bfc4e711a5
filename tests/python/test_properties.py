"""Properties of the Python surface on random inputs (issue 8), with hypothesis.

* ``AicEngine`` estimates are finite, non-negative floats for any valid arguments; any
  integer at all gives a number, a ``ValueError`` family exception or, outside ``[0, 2**32)``,
  an ``OverflowError``; nothing else escapes and the process never aborts.
* Monotone where the composition makes it so: more output tokens never make a decode cheaper,
  and a decode step depends on ``isl`` / ``osl`` only through the KV position (see
  ``crates/aic-core/tests/properties.rs`` for why token and batch monotonicity is only checked
  where the measured tables are monotone).
* A Hugging Face config with any JSON value in any size field compiles or raises a
  ``ValueError`` (never ``TypeError``, ``ZeroDivisionError``, ``OverflowError``, ...).

Example counts are small (the suite runs on two cores); the hypothesis database is off so a
run leaves no files behind.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aic import AicEngine, compile_engine

REPO = Path(__file__).resolve().parents[2]
U32_MAX = 2**32 - 1

pytestmark = pytest.mark.engine

SETTINGS = settings(max_examples=40, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture])

_ENGINE = None


def engine() -> AicEngine:
    global _ENGINE
    if _ENGINE is None:
        _ENGINE = AicEngine.from_spec(compile_engine("Qwen/Qwen3-32B", "h200_sxm", "vllm", tp_size=2))
    return _ENGINE


def _is_time(value) -> bool:
    return isinstance(value, float) and math.isfinite(value) and value >= 0.0


@st.composite
def prompts(draw, max_isl=32768):
    isl = draw(st.integers(1, max_isl))
    return isl, draw(st.integers(0, isl - 1))


@SETTINGS
@given(bs=st.integers(1, 256), prompt=prompts(), osl=st.integers(0, 400), ctx=st.integers(1, 8192),
       gen=st.integers(0, 256))
def test_estimates_are_finite_and_non_negative(bs, prompt, osl, ctx, gen):
    isl, prefix = prompt
    e = engine()
    values = [
        e.predict_prefill_latency(bs, isl, prefix),
        e.predict_decode_latency(bs, isl, osl),
        e.decode_step_latency(gen, isl, osl),
        e.mixed_step_latency(ctx, gen, isl, osl, prefix),
        *e.run_static(bs, 1, isl, min(osl, 64), prefix),
    ]
    assert all(_is_time(v) for v in values), values
    context_ops, generation_ops = e.run_static_per_op(bs, 1, isl, min(osl, 64), prefix)
    for name, latency, energy, source in context_ops + generation_ops:
        assert _is_time(latency) and _is_time(energy), (name, latency, energy, source)


ANY_INT = st.one_of(st.integers(0, U32_MAX), st.integers(-2**70, 2**70), st.sampled_from([0, 1, U32_MAX, 2**32, -1]))


@SETTINGS
@given(bs=ANY_INT, isl=ANY_INT, third=ANY_INT)
def test_any_integer_gives_a_number_or_a_typed_exception(bs, isl, third):
    from aic import _aic

    e = engine()
    in_range = all(0 <= v <= U32_MAX for v in (bs, isl, third))
    calls = [
        lambda: e.predict_prefill_latency(bs, isl, third),
        lambda: e.decode_step_latency(bs, isl, third),
        lambda: e.mixed_step_latency(bs, bs, isl, third, 0),
        lambda: e.predict_decode_latency(bs, isl, min(abs(third), 40) if in_range else third),
    ]
    for call in calls:
        try:
            value = call()
        except OverflowError:
            assert not in_range
        except (ValueError, _aic.PerfDataNotAvailableError, _aic.EmpiricalNotImplementedError) as exc:
            assert in_range, exc
        else:
            assert in_range and _is_time(value), value


@SETTINGS
@given(bs=st.integers(1, 128), isl=st.integers(1, 8192), osl=st.integers(0, 300))
def test_more_output_tokens_never_make_a_decode_cheaper(bs, isl, osl):
    e = engine()
    assert e.predict_decode_latency(bs, isl, osl + 1) >= e.predict_decode_latency(bs, isl, osl)


@SETTINGS
@given(gen=st.integers(1, 256), kv=st.integers(3, 65536), split=st.floats(0, 1, exclude_max=True),
       odd=st.booleans())
def test_a_decode_step_depends_on_isl_and_osl_only_through_the_kv_position(gen, kv, split, odd):
    d = int((kv - 2) * split)
    e = engine()
    assert e.decode_step_latency(gen, kv - 1, 0) == e.decode_step_latency(gen, kv - 1 - d, 2 * d + int(odd))


# --------------------------------------------------------------------------- HF config fuzzing

SIZE_FIELDS = [
    "hidden_size", "num_attention_heads", "num_hidden_layers", "num_key_value_heads",
    "intermediate_size", "head_dim", "vocab_size", "max_position_embeddings",
]

JSON_VALUES = st.recursive(
    st.one_of(
        st.none(), st.booleans(), st.integers(-2**66, 2**66), st.integers(-4, 4),
        st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=8),
    ),
    lambda children: st.one_of(st.lists(children, max_size=3), st.dictionaries(st.text(max_size=4), children, max_size=3)),
    max_leaves=4,
)


@settings(max_examples=60, deadline=None, database=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(changes=st.dictionaries(st.sampled_from(SIZE_FIELDS), JSON_VALUES, min_size=1, max_size=3))
def test_any_value_in_a_config_size_field_compiles_or_raises_value_error(changes, tmp_path_factory):
    config = json.loads((REPO / "data" / "model_configs" / "Qwen--Qwen3-8B_config.json").read_text())
    config.update(changes)
    folder = tmp_path_factory.mktemp("config")
    (folder / "config.json").write_text(json.dumps(config), encoding="utf-8")
    try:
        spec = compile_engine(str(folder), "h200_sxm", "vllm")
    except ValueError:
        return
    assert isinstance(spec, bytes) and spec.startswith(b"AICSPEC\0")
