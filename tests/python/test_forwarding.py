"""The public entry points that forward compile_report's deployment keywords (aic.forwarding)."""

from __future__ import annotations

import inspect

import pytest

from aic.compiler.compile import compile_engine, compile_engine_json, compile_report
from aic.compiler.forwarding import forwards_keywords_of
from aic.compiler.memory import estimate_kv_cache


def _target(a, *, x: int = 1, y: str | None = None, hidden: bool = False):
    return a, x, y, hidden


@forwards_keywords_of(_target, omit=("hidden",))
def _entry(a, *, own: int = 0, **forwarded):
    return a, own, forwarded


def test_defaults_are_filled_and_given_keywords_pass_through():
    assert _entry(5) == (5, 0, {"x": 1, "y": None})
    assert _entry(5, y="z", own=2) == (5, 2, {"x": 1, "y": "z"})


def test_unknown_and_omitted_keywords_raise_type_error():
    with pytest.raises(TypeError, match=r"_entry\(\) got an unexpected keyword argument 'hidden'"):
        _entry(5, hidden=True)
    with pytest.raises(TypeError, match="unexpected keyword argument 'nope'"):
        _entry(5, nope=1)


def test_signature_lists_own_then_forwarded_keywords():
    assert str(inspect.signature(_entry)) == "(a, *, own: 'int' = 0, x: 'int' = 1, y: 'str | None' = None)"


def test_public_entry_points_take_compile_reports_public_keywords():
    report = inspect.signature(compile_report).parameters
    public = [n for n, p in report.items()
              if p.kind is p.KEYWORD_ONLY and n not in ("model_configs_path", "resolver")]
    for entry in (compile_engine_json, compile_engine):
        params = inspect.signature(entry).parameters
        assert [n for n, p in params.items() if p.kind is p.KEYWORD_ONLY] == public
        assert all(params[n].default == report[n].default for n in public)
    memory = inspect.signature(estimate_kv_cache).parameters
    for name in ("tp_size", "cp_size", "gemm_quant_mode", "nextn", "systems_path"):
        assert memory[name].default == report[name].default
    for name in ("kv_block_size", "database_mode", "attention_backend", "resolver"):
        assert name not in memory
