"""Parity of the serving layer against ``aic-serving-goldens/1`` files (spec 50 §11).

One check per estimate case (family ``serving``, kind ``estimate``): the case's keyword
arguments go through :func:`aic.serving.estimate`; a recorded error must be raised too (its
message must lead ours), a recorded result must match on every field of ``result`` (``raw``
included), ``memory``, ``oom`` and ``per_ops``: strings, ``None`` and booleans exactly, numbers
to the relative tolerance (an integer and a float of the same value count as equal numbers —
the reference's int/float kinds are reproduced, but a ``0`` vs ``0.0`` is not a wrong answer).

One check per sweep case (kind ``sweep``): see :func:`check_sweep`. One check per planning
case (file kind ``planning``, spec 51): see :mod:`aic.parity.planning`.
"""

from __future__ import annotations

import math
from typing import Any

SERVING_FORMAT = "aic-serving-goldens/1"
FAMILY = "serving"


def _num(value):
    if isinstance(value, str) and value in ("nan", "inf", "-inf"):
        return float(value)
    return value


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def diff_values(ours: Any, ref: Any, path: str, rtol: float) -> list[str]:
    """Differences between our JSON value and the recorded one (see the module docstring)."""
    ref = _num(ref)
    ours = _num(ours)
    if isinstance(ref, dict):
        if not isinstance(ours, dict):
            return [f"{path}: expected an object, got {ours!r}"[:300]]
        diffs = []
        missing = [k for k in ref if k not in ours]
        extra = [k for k in ours if k not in ref]
        if missing or extra:
            diffs.append(f"{path}: keys differ (missing {missing}, extra {extra})")
        for key in ref:
            if key in ours:
                diffs.extend(diff_values(ours[key], ref[key], f"{path}/{key}", rtol))
        return diffs
    if isinstance(ref, list):
        if not isinstance(ours, list) or len(ours) != len(ref):
            return [f"{path}: {ours!r} vs {ref!r}"[:300]]
        out = []
        for i, (a, b) in enumerate(zip(ours, ref)):
            out.extend(diff_values(a, b, f"{path}/{i}", rtol))
        return out
    if _is_number(ref) and _is_number(ours):
        if ours == ref:
            return []
        if math.isnan(ref) and math.isnan(ours):
            return []
        if ref == 0 or not math.isfinite(ref):
            return [f"{path}: {ours!r} vs {ref!r}"]
        if abs(ours - ref) / abs(ref) > rtol:
            return [f"{path}: {ours!r} vs {ref!r}"]
        return []
    if type(ours) is not type(ref) or ours != ref:
        return [f"{path}: {ours!r} vs {ref!r}"[:300]]
    return []


def check_estimate(case: dict, rtol: float, systems_path=None) -> tuple[bool, str]:
    """Runs one estimate case; ``(passed, detail)``."""
    from ..serving.deployment import estimate

    kwargs = dict(case["kwargs"])
    try:
        ours = estimate(**kwargs, systems_path=systems_path)
        exc = None
    except Exception as e:  # noqa: BLE001 - every error is a recorded outcome
        ours, exc = None, e
    if not case["ok"]:
        ref = case["error"]
        if exc is None:
            return False, f"reference raised {ref['type']}: {ref['message']}; ours returned"
        if not str(exc).startswith(ref["message"]):
            return False, (f"both raised, messages differ: ours {type(exc).__name__}: {exc} vs "
                           f"ref {ref['type']}: {ref['message']}")[:600]
        return True, "both raised"
    if exc is not None:
        return False, f"ours raised {type(exc).__name__}: {exc}"[:600]
    problems = []
    for key in ("result", "memory", "oom", "per_ops"):
        problems.extend(diff_values(ours.get(key), case.get(key), key, rtol))
    return not problems, "; ".join(problems[:6])[:600]


def run_serving_case(case: dict, report, *, systems_path=None) -> None:
    """Appends the case's one check to a :class:`aic.parity.report.Report`."""
    from .report import Check

    kind = case["_serving"]
    try:
        if kind == "estimate":
            passed, detail = check_estimate(case, report.rtol, systems_path)
        elif kind == "planning":
            from .planning import check_planning

            passed, detail = check_planning(case, report.rtol, systems_path)
        else:
            from ..serving.sweep import check_sweep

            passed, detail = check_sweep(case, systems_path)
    except Exception as exc:  # noqa: BLE001 - a harness failure is a failed check
        passed, detail = False, f"harness error {type(exc).__name__}: {exc}"[:600]
    report.checks.append(Check(case["id"], FAMILY, kind, -1, passed, detail,
                               args=case.get("kwargs")))
