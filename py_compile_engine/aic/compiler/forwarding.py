"""Public entry points that pass their deployment keywords on to one pipeline function.

Why this module exists: ``compile_engine_json``, ``compile_engine`` and ``estimate_kv_cache`` all
take the deployment keywords of :func:`aic.compiler.compile.compile_report` (parallel sizes, quant
modes, ``nextn``, ...) and hand them on unchanged. Spelling that list in every signature and again
in every forwarding call kept five copies of it in step by hand; :func:`forwards_keywords_of` keeps
one, the target's own signature, while each entry point still checks and shows every keyword it
accepts.

The decorator reads the parameter lists from the functions' code objects, not through
``inspect``: the modules that use it are imported by every compile and sweep, and ``inspect``
(with ``ast``, ``dis`` and ``tokenize``) costs a short sweep about a tenth of its process. The
combined signature that ``inspect.signature`` (and ``help``) shows is built on its first request.
"""

from __future__ import annotations

import functools

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing
if TYPE_CHECKING:
    from typing import Callable, Iterable

#: ``code.co_flags`` bits of a function taking ``*args`` / ``**kwargs``.
_VARARGS, _VARKEYWORDS = 0x04, 0x08


def _keyword_only(fn: Callable) -> dict:
    """``fn``'s keyword-only parameter names with their defaults (every one must have one)."""
    code = fn.__code__
    names = code.co_varnames[code.co_argcount:code.co_argcount + code.co_kwonlyargcount]
    defaults = fn.__kwdefaults__ or {}
    missing = [n for n in names if n not in defaults]
    if missing:
        raise TypeError(f"{fn.__name__}: forwarded keywords need defaults, {missing} have none")
    return {name: defaults[name] for name in names}


def _own_names(fn: Callable) -> set[str]:
    """Every parameter name of ``fn`` except its ``**kwargs``."""
    code = fn.__code__
    count = code.co_argcount + code.co_kwonlyargcount + (1 if code.co_flags & _VARARGS else 0)
    return set(code.co_varnames[:count])


class _CombinedSignature:
    """Stands at the entry point's ``__wrapped__``: calls the decorated function, and answers
    ``inspect.signature`` (which follows ``__wrapped__`` to the first object with a
    ``__signature__``) with its own parameters, ``**kwargs`` left out, followed by the forwarded
    keyword-only parameters of the target, as the target declares them."""

    def __init__(self, fn: Callable, target: Callable, forwarded: Iterable[str]):
        self._fn, self._target, self._forwarded = fn, target, tuple(forwarded)
        self._signature = None

    def __call__(self, *args, **kwargs):
        return self._fn(*args, **kwargs)

    @property
    def __signature__(self):
        if self._signature is None:
            import inspect

            own = inspect.signature(self._fn)
            target = inspect.signature(self._target).parameters
            params = [p for p in own.parameters.values() if p.kind is not p.VAR_KEYWORD]
            self._signature = own.replace(parameters=params + [target[n] for n in self._forwarded])
        return self._signature


def forwards_keywords_of(target: Callable, *, omit: Iterable[str] = ()) -> Callable:
    """Decorator for ``fn(..., **forwarded)``: ``forwarded`` takes exactly ``target``'s
    keyword-only parameters except ``omit``, each defaulting as it does in ``target``.

    ``fn`` receives every forwarded keyword (the defaults filled in); a keyword neither ``fn`` nor
    the forwarded set knows raises the ``TypeError`` Python raises for any function, and
    ``inspect.signature`` of the result lists the forwarded keywords after ``fn``'s own.
    """
    omitted = set(omit)
    forwarded = {name: default for name, default in _keyword_only(target).items()
                 if name not in omitted}

    def decorate(fn: Callable) -> Callable:
        own_names = _own_names(fn)
        if own_names & forwarded.keys():
            raise TypeError(f"{fn.__name__} repeats forwarded keywords {sorted(own_names & forwarded.keys())}")

        @functools.wraps(fn)
        def entry(*args, **kwargs):
            for name in kwargs:
                if name not in forwarded and name not in own_names:
                    raise TypeError(f"{fn.__name__}() got an unexpected keyword argument {name!r}")
            for name, default in forwarded.items():
                kwargs.setdefault(name, default)
            return fn(*args, **kwargs)

        entry.__wrapped__ = _CombinedSignature(fn, target, forwarded)  # type: ignore[attr-defined]
        return entry

    return decorate
