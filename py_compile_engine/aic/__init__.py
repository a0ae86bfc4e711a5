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

#: Front-end names, imported on first use so that ``import aic`` stays cheap for programs that
#: only load a precompiled spec (``AicEngine.from_spec``): ``name -> (submodule, attribute)``.
_FRONT_END = {
    "compile_engine": ("compiler.compile", "compile_engine"),
    "compile_engine_json": ("compiler.compile", "compile_engine_json"),
    "compile_report": ("compiler.compile", "compile_report"),
    "estimate_kv_cache": ("compiler.memory", "estimate_kv_cache"),
    "replay": ("serving.replay", "replay"),
    "replay_deployment": ("serving.replay", "replay_deployment"),
    "Deployment": ("serving.plan", "Deployment"),
    "Workload": ("serving.plan", "Workload"),
    "Role": ("serving.plan", "Role"),
    "Parallelism": ("serving.plan", "Parallelism"),
    "QuantModes": ("serving.plan", "QuantModes"),
    "estimate_deployment": ("serving.deployment", "estimate_deployment"),
    "UnsupportedArchitectureError": ("errors", "UnsupportedArchitectureError"),
    "HeadDivisibilityError": ("errors", "HeadDivisibilityError"),
}

_NATIVE_NAMES = (
    "AicEngine",
    "PerfDataNotAvailableError",
    "EmpiricalNotImplementedError",
    "MissingSystemFlopsError",
    "ForwardPassPerfModel",
    "RustForwardPassPerfModel",
)

__all__ = [*_FRONT_END, *_NATIVE_NAMES]


def _distribution_version() -> str:
    try:
        from importlib.metadata import version

        return version("aic")
    except Exception:  # not installed (running from the source tree)
        return "0.1.0"


def __getattr__(name: str):
    if name in _FRONT_END:
        import importlib

        module, attribute = _FRONT_END[name]
        value = getattr(importlib.import_module(f"{__name__}.{module}"), attribute)
    elif name in _NATIVE_NAMES:
        from ._native import native

        value = getattr(native(), name)
    elif name == "__version__":
        value = _distribution_version()
    else:
        raise AttributeError(f"module 'aic' has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(__all__) | {"__version__"})
