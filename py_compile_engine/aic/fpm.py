"""Python glue of the forward-pass perf model (spec 42): the compile step behind
``ForwardPassPerfModel.from_native`` / ``best_available``.

The model itself is native (``aic._aic.ForwardPassPerfModel``). Building it from an engine
config needs the Python front end, because compiling a Hugging Face config into an EngineSpec
happens here: the native constructor derives the compile request from the config (dtype ->
quant mode mapping of spec 42 §5) and calls :func:`compile_request` with it.

    from aic import ForwardPassPerfModel
    model = ForwardPassPerfModel.best_available(
        {"schema_version": 1, "model_name": "Qwen/Qwen3-32B", "system_name": "h200_sxm",
         "backend": "vllm", "tp_size": 2, "pp_size": 1})
    model.estimate_forward_pass_time_ms(
        {"scheduled_requests": {"num_prefill_requests": 1, "sum_prefill_tokens": 1024}})
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .compiler.compile import compile_engine

#: Keys of a compile request that are passed to :func:`aic.compile_engine` positionally.
_POSITIONAL = ("model_path", "system", "backend")


def compile_request(request: Mapping[str, Any]) -> bytes:
    """Compiles a forward-pass-model compile request into the binary EngineSpec.

    ``request`` holds the keyword arguments of :func:`aic.compile_engine` (``model_path``,
    ``system``, ``backend``, ``backend_version``, ``tp_size``, ...), as derived by the native
    model from its engine config. A whole-model forward variant (``forward_model``) is not
    something the front end can compile: it raises ``ValueError``, which ``best_available``
    turns into the regression fallback.
    """
    kwargs = dict(request)
    missing = [key for key in _POSITIONAL if kwargs.get(key) is None]
    if missing:
        raise ValueError(
            f"compile request lacks {', '.join(missing)}; it needs model_path, system and backend"
        )
    forward_model = kwargs.pop("forward_model", None)
    if forward_model is not None:
        raise ValueError(
            f"forward_model {forward_model!r} cannot be compiled by the aic front end; "
            "leave forward_model unset to compile the op-level engine"
        )
    positional = [kwargs.pop(key) for key in _POSITIONAL]
    return compile_engine(*positional, **kwargs)


__all__ = ["compile_request"]
