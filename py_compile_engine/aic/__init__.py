"""aic: LLM serving-latency estimates from measured GPU kernel tables.

Python front end: reads a Hugging Face ``config.json``, builds the context / generation op lists
and emits an EngineSpec; the native module ``aic._aic`` (Rust) does every estimate.

    from aic import compile_engine, AicEngine
    engine = AicEngine.from_spec(compile_engine("Qwen/Qwen3-32B", "h200_sxm", "vllm", tp_size=2))
    engine.predict_prefill_latency(1, 1024)

``AicEngine`` and the native exception classes are loaded on first use, so ``import aic`` works
(and the pure-Python parts run) without the native module.
"""

from __future__ import annotations

from .compile import compile_engine, compile_engine_json, compile_report
from .errors import HeadDivisibilityError, UnsupportedArchitectureError
from .memory import estimate_kv_cache


def _distribution_version() -> str:
    try:
        from importlib.metadata import version

        return version("aic")
    except Exception:  # not installed (running from the source tree)
        return "0.1.0"


__version__ = _distribution_version()

_NATIVE_NAMES = (
    "AicEngine",
    "PerfDataNotAvailableError",
    "EmpiricalNotImplementedError",
    "MissingSystemFlopsError",
)

__all__ = [
    "compile_engine",
    "compile_engine_json",
    "compile_report",
    "estimate_kv_cache",
    "UnsupportedArchitectureError",
    "HeadDivisibilityError",
    *_NATIVE_NAMES,
]


def __getattr__(name: str):
    if name in _NATIVE_NAMES:
        from .compile import native

        value = getattr(native(), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'aic' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_NATIVE_NAMES))
