"""JSON that every JSON reader accepts.

Python's ``json.dumps`` writes ``NaN`` and ``Infinity`` for non-finite floats; JSON has neither,
so ``jq``, browsers and serde reject such output. Figures that have no value (a median over no
rows, a share of nothing) are ``null`` in aic's JSON output instead, and a non-finite number
anywhere else is a bug that :func:`dumps` reports rather than writes.
"""

from __future__ import annotations

import json
import math


def nulls_for_nan(obj):
    """``obj`` with every non-finite float replaced by ``None`` (dicts, lists and tuples are
    walked; other values are returned as they are)."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: nulls_for_nan(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [nulls_for_nan(v) for v in obj]
    return obj


def dumps(obj, **kwargs) -> str:
    """``json.dumps`` of ``obj`` with NaN and infinities written as ``null``; the output is
    always valid JSON (``allow_nan=False``)."""
    return json.dumps(nulls_for_nan(obj), allow_nan=False, **kwargs)
