"""Shared fixtures for the Python front-end tests.

The tests locate everything relative to this file: the repo root is two levels up, the package
source is ``<repo>/py_compile_engine`` (added to ``sys.path`` when ``aic`` is not installed), the
golden corpus is ``<repo>/goldens``.
"""

from __future__ import annotations

import contextlib
import functools
import json
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
GOLDENS = REPO / "goldens"

try:  # prefer an installed / editable aic; fall back to the source tree
    import aic  # noqa: F401
except ImportError:
    sys.path.insert(0, str(REPO / "py_compile_engine"))


def native_available() -> bool:
    try:
        import aic._aic  # noqa: F401
    except ImportError:
        return False
    return True


def replay_built() -> bool:
    """Whether the native module was built with the cargo feature `replay`."""
    if not native_available():
        return False
    from aic import _aic

    return bool(getattr(_aic, "replay_available", lambda: False)())


def requires_replay():
    """The module mark of the replay tests: skip without the replay build, unless
    ``AIC_REQUIRE_REPLAY=1`` (scripts/test-all.sh sets it), which makes a missing replay fail."""
    import os

    if os.environ.get("AIC_REQUIRE_REPLAY") == "1":
        assert replay_built(), "AIC_REQUIRE_REPLAY=1 but aic._aic was built without the replay"
    return pytest.mark.skipif(not replay_built(),
                              reason="aic._aic built without the cargo feature `replay`")


@functools.lru_cache(maxsize=None)
def golden_cases(name: str) -> tuple:
    with open(GOLDENS / f"{name}.json", encoding="utf-8") as fh:
        return tuple(json.load(fh)["cases"])


def llama_cases() -> list[dict]:
    """Every compiled LLAMA case of dense.json and edge.json."""
    out = []
    for name in ("dense", "edge"):
        for case in golden_cases(name):
            resolved = case["resolved"]
            if resolved and resolved["model_family"] == "LLAMA":
                out.append(case)
    return out


def first_lanes(case: dict, phase: str) -> list[str]:
    variant = "ContextAttention" if phase == "context" else "GenerationAttention"
    for op in case["spec_ops"][phase]:
        if variant in op:
            return op[variant]["lane_order"]
    raise AssertionError(f"{case['id']}: no {variant} in spec_ops[{phase}]")


class GoldenResolver:
    """Answers the data-dependent compile steps from a golden case (no native module needed)."""

    def __init__(self, case: dict):
        self.case = case
        self.calls = []

    def backend_version(self, systems_path, system, backend, requested):
        self.calls.append(("version", system, backend, requested))
        engine = self.case["resolved"]["engine"]
        return engine["backend_version"], engine["tolerate_dirless_version"]

    def lane_order(self, systems_path, system, backend, version, phase, shared, attention_backend):
        self.calls.append(("lanes", phase, version, shared, attention_backend))
        return list(first_lanes(self.case, phase))


class FixedResolver:
    """Returns fixed answers (for tests of the pure pipeline)."""

    def __init__(self, version="1.3.0rc20", tolerate=False, lanes=("default",)):
        self.version, self.tolerate, self.lanes = version, tolerate, list(lanes)
        self.calls = []

    def backend_version(self, systems_path, system, backend, requested):
        self.calls.append(("version", system, backend, requested))
        return self.version, self.tolerate

    def lane_order(self, systems_path, system, backend, version, phase, shared, attention_backend):
        self.calls.append(("lanes", phase, version, shared, attention_backend))
        return list(self.lanes)


def compile_args(case: dict) -> tuple[tuple, dict]:
    spec = dict(case["compile"])
    args = (spec.pop("model"), spec.pop("system"), spec.pop("backend"))
    return args, spec


@pytest.fixture
def repo() -> Path:
    return REPO


@contextlib.contextmanager
def family_not_built(label: str = "KIMIK3"):
    """Every family the reference knows is built now; this takes one out of the builder table
    for the duration, so the "known to the reference, not built by aic" path stays tested."""
    from aic.compiler import families

    saved = families._BUILDERS.pop(label)
    try:
        yield
    finally:
        families._BUILDERS[label] = saved
