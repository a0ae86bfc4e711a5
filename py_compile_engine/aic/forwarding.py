"""Public entry points that pass their deployment keywords on to one pipeline function.

Why this module exists: ``compile_engine_json``, ``compile_engine`` and ``estimate_kv_cache`` all
take the deployment keywords of :func:`aic.compile.compile_report` (parallel sizes, quant modes,
``nextn``, ...) and hand them on unchanged. Spelling that list in every signature and again in every
forwarding call kept five copies of it in step by hand; :func:`forwards_keywords_of` keeps one, the
target's own signature, while each entry point still checks and shows every keyword it accepts.
"""

from __future__ import annotations

import functools
import inspect
from typing import Callable, Iterable


def forwards_keywords_of(target: Callable, *, omit: Iterable[str] = ()) -> Callable:
    """Decorator for ``fn(..., **forwarded)``: ``forwarded`` takes exactly ``target``'s
    keyword-only parameters except ``omit``, each defaulting as it does in ``target``.

    ``fn`` receives every forwarded keyword (the defaults filled in); a keyword neither ``fn`` nor
    the forwarded set knows raises the ``TypeError`` Python raises for any function, and
    ``inspect.signature`` of the result lists the forwarded keywords after ``fn``'s own.
    """
    omitted = set(omit)
    forwarded = {
        name: param
        for name, param in inspect.signature(target).parameters.items()
        if param.kind is inspect.Parameter.KEYWORD_ONLY and name not in omitted
    }

    def decorate(fn: Callable) -> Callable:
        own = inspect.signature(fn)
        own_params = [p for p in own.parameters.values() if p.kind is not inspect.Parameter.VAR_KEYWORD]
        own_names = {p.name for p in own_params}
        if own_names & forwarded.keys():
            raise TypeError(f"{fn.__name__} repeats forwarded keywords {sorted(own_names & forwarded.keys())}")

        @functools.wraps(fn)
        def entry(*args, **kwargs):
            for name in kwargs:
                if name not in forwarded and name not in own_names:
                    raise TypeError(f"{fn.__name__}() got an unexpected keyword argument {name!r}")
            for name, param in forwarded.items():
                kwargs.setdefault(name, param.default)
            return fn(*args, **kwargs)

        entry.__signature__ = own.replace(parameters=own_params + list(forwarded.values()))
        return entry

    return decorate
