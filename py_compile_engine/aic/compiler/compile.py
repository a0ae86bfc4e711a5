"""Public compile API: Hugging Face config + deployment -> EngineSpec (JSON or binary).

The pipeline follows spec 30 §1; an error from an earlier step wins over a later one:

1. parallel defaults   2. quant-mode names   3. ``nextn``   (+ ``database_mode``, ``kv_block_size``)
5. load + parse the HF config (unknown / unsupported architecture)
6. quant resolution    7. parallel validation   8. family op lists (head divisibility, fmha)
9. backend / system / version resolution (native)   11. attention lane orders (native)
12. engine config      13. spec JSON (-> binary through the native encoder)

Everything that depends on the perf data (versions, lane orders, encoding) is answered by the
native module ``aic._aic``; it is imported lazily so that this module imports without it.
"""

from __future__ import annotations

import os
from collections import namedtuple

from .. import paths
from . import families
from .families import BuildContext
from .._native import native
from .forwarding import forwards_keywords_of
from .hf_config import ModelConfig, load_model_config
from .parallel import apply_defaults, check_cp, check_pipeline, resolve_parallel, validate_nextn
from .quant import VOCABULARIES, QuantModes, resolve_quant, validate_mode_names
from .spec_builder import (
    apply_lane_orders,
    assemble_spec,
    engine_config,
    has_top_level,
    normalize_database_mode,
    shared_layer_enabled,
    spec_to_json,
)

BACKENDS = ("trtllm", "sglang", "vllm")

#: ``compile_report`` keywords for aic's own callers and tests (config roots, stand-in resolvers),
#: not taken by the public entry points.
INTERNAL_KEYWORDS = ("model_configs_path", "resolver")


TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (see aic.compiler.parallel)
if TYPE_CHECKING:
    from typing import Protocol

    class Resolver(Protocol):
        """Answers the data-dependent questions of the compile step."""

        def backend_version(
            self, systems_path: str, system: str, backend: str, requested: str | None
        ) -> tuple[str | None, bool]: ...

        def lane_order(
            self, systems_path: str, system: str, backend: str, version: str, phase: str,
            enable_shared_layer: bool, attention_backend: str | None,
        ) -> list[str]: ...


class NativeResolver:
    """:class:`Resolver` backed by ``aic._aic`` (the engine's own data reader)."""

    def backend_version(self, systems_path, system, backend, requested):
        literal, tolerate = native().resolve_backend_version(systems_path, system, backend, requested)
        return literal, bool(tolerate)

    def lane_order(self, systems_path, system, backend, version, phase, enable_shared_layer,
                   attention_backend):
        return list(native().attention_lane_order(
            systems_path, system, backend, version, phase, enable_shared_layer, attention_backend
        ))


class CompileResult(namedtuple("CompileResult", ("spec", "spec_json", "model_family", "quant",
                                                 "config_source", "model"))):
    """Everything the compile step decided, plus the spec itself: ``spec`` (dict) and
    ``spec_json``, ``model_family``, the resolved ``quant`` modes (dict), ``config_source`` and
    the parsed ``model`` (:class:`aic.compiler.hf_config.ModelConfig`, left out of ``repr``).
    Immutable."""

    __slots__ = ()

    def __repr__(self) -> str:
        return (f"CompileResult(spec={self.spec!r}, spec_json={self.spec_json!r}, "
                f"model_family={self.model_family!r}, quant={self.quant!r}, "
                f"config_source={self.config_source!r})")

    @property
    def engine(self) -> dict:
        return self.spec["engine"]

    @property
    def context_ops(self) -> list[dict]:
        return self.spec["context_ops"]

    @property
    def generation_ops(self) -> list[dict]:
        return self.spec["generation_ops"]


def _check_kv_block_size(value) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(f"kv_block_size must be a positive integer or None, got {value!r}")
    return value


def _check_backend(backend) -> str:
    if not isinstance(backend, str) or backend not in BACKENDS:
        raise ValueError(f"unknown backend {backend!r}; expected one of: {', '.join(BACKENDS)}")
    return backend


def _check_system(system, root: str) -> str:
    if (isinstance(system, str) and system not in paths.NON_SYSTEM_YAMLS and "/" not in system
            and os.path.isfile(os.path.join(root, f"{system}.yaml"))):
        # The native loader reads and checks the file; listing every system parses each YAML.
        return system
    valid = paths.list_systems(root)
    if not isinstance(system, str) or system not in valid:
        listing = ", ".join(valid) if valid else f"(none found under {root})"
        raise ValueError(f"unknown system {system!r}; expected one of: {listing}")
    return system


def compile_report(
    model_path,
    system: str,
    backend: str,
    backend_version: str | None = None,
    *,
    tp_size: int = 1,
    pp_size: int = 1,
    attention_dp_size: int = 1,
    moe_tp_size: int | None = None,
    moe_ep_size: int | None = None,
    cp_size: int = 1,
    gemm_quant_mode: str | None = None,
    moe_quant_mode: str | None = None,
    kvcache_quant_mode: str | None = None,
    fmha_quant_mode: str | None = None,
    comm_quant_mode: str | None = None,
    nextn: int = 0,
    kv_block_size: int | None = None,
    systems_path: str | os.PathLike | None = None,
    database_mode: str | None = None,
    attention_backend: str | None = None,
    model_configs_path: str | os.PathLike | None = None,
    resolver: Resolver | None = None,
) -> CompileResult:
    """Runs the compile pipeline and returns the spec with the decisions behind it.

    ``resolver`` answers the data-dependent steps (default: the native module).
    """
    # 1. parallel defaults
    sizes = apply_defaults(tp_size, pp_size, attention_dp_size, moe_tp_size, moe_ep_size, cp_size)
    # 2. quant-mode names
    overrides = {
        "gemm_quant_mode": gemm_quant_mode,
        "moe_quant_mode": moe_quant_mode,
        "kvcache_quant_mode": kvcache_quant_mode,
        "fmha_quant_mode": fmha_quant_mode,
        "comm_quant_mode": comm_quant_mode,
    }
    assert set(overrides) == set(VOCABULARIES)
    validate_mode_names(overrides)
    # 3. nextn (+ our own keyword checks)
    nextn = validate_nextn(nextn)
    mode = normalize_database_mode(database_mode)
    kv_block_size = _check_kv_block_size(kv_block_size)
    # 5. HF config
    model = load_model_config(model_path, None if model_configs_path is None else str(model_configs_path))
    families.check_architecture(model.architecture)
    families.check_config(model)
    # 6. quant resolution
    quant: QuantModes = resolve_quant(model, backend, overrides)
    # 7. parallel validation
    # The MoE width rule applies to models with experts only (QWEN35 has dense members).
    par = resolve_parallel(sizes, moe=families.is_moe_for_parallelism(model))
    # 7b. context-parallel gate (spec 43 §2 step 4), then the families aic builds CP for
    check_cp(par, model.family, backend)
    families.check_cp_support(model.family, par.cp_size)
    check_pipeline(model.num_layers, par.pp_size)
    # 8. family op lists
    ctx = BuildContext(
        backend=backend,
        tp_size=par.tp_size,
        pp_size=par.pp_size,
        attention_dp_size=par.attention_dp_size,
        moe_tp_size=par.moe_tp_size,
        moe_ep_size=par.moe_ep_size,
        cp_size=par.cp_size,
        nextn=nextn,
        gemm_quant_mode=quant.gemm_quant_mode,
        moe_quant_mode=quant.moe_quant_mode,
        kvcache_quant_mode=quant.kvcache_quant_mode,
        fmha_quant_mode=quant.fmha_quant_mode,
        comm_quant_mode=quant.comm_quant_mode,
        gemm_quant_explicit=quant.gemm_explicit,
    )
    context_ops, generation_ops = families.builder(model.family)(model, ctx)
    # 9. backend, system and version
    _check_backend(backend)
    root = paths.systems_dir(systems_path)
    _check_system(system, root)
    if backend_version is not None and not isinstance(backend_version, str):
        raise ValueError(
            f"backend_version must be a string (an alias 'current' / 'previous' / 'next' or a "
            f"version directory name) or None, got {backend_version!r}"
        )
    resolver = resolver or NativeResolver()
    literal, tolerate = resolver.backend_version(str(root), system, backend, backend_version)
    # 11. attention lane orders
    shared: bool | None = shared_layer_enabled(mode) if literal is not None else None
    for phase, op_list, variant in (
        ("context", context_ops, "ContextAttention"),
        ("generation", generation_ops, "GenerationAttention"),
    ):
        if not has_top_level(op_list, variant):
            continue
        if literal is None:
            lanes = ["default"]
        else:
            lanes = resolver.lane_order(
                str(root), system, backend, literal, phase, bool(shared), attention_backend
            )
        apply_lane_orders(op_list, variant, lanes)
    # 12. engine config
    engine = engine_config(
        model_name=os.fspath(model_path),
        system=system,
        systems_path=None if systems_path is None else os.fspath(systems_path),
        backend=backend,
        backend_version=literal,
        kv_block_size=kv_block_size,
        parallel=par,
        quant=quant,
        enable_shared_layer=shared,
        database_mode=mode,
        tolerate_dirless_version=tolerate,
        nextn=nextn,
    )
    # 13. spec
    spec = assemble_spec(engine, context_ops, generation_ops)
    return CompileResult(
        spec=spec,
        spec_json=spec_to_json(spec),
        model_family=model.family,
        quant=quant.as_dict(),
        config_source=model.config_source,
        model=model,
    )


@forwards_keywords_of(compile_report, omit=INTERNAL_KEYWORDS)
def compile_engine_json(model_path, system: str, backend: str, backend_version: str | None = None,
                        **deployment) -> str:
    """Compiles ``model_path`` for the deployment and returns the EngineSpec as JSON text.

    ``model_path``: an HF id whose config ships with aic (e.g. ``"Qwen/Qwen3-32B"``), or a local
    folder holding ``config.json`` (+ optional ``hf_quant_config.json``), or a ``config.json`` path.
    ``backend_version``: ``None`` / ``"current"`` / ``"next"`` / ``"previous"`` or a literal slot
    version. ``database_mode``: ``None`` (SILICON), ``"SILICON"``, ``"HYBRID"``, ``"EMPIRICAL"``
    or ``"SOL"``. ``cp_size``: context parallelism (spec 43; SGLang only, with ``tp_size`` 1 and
    ``attention_dp_size`` 1; MoE models need ``moe_tp_size * moe_ep_size == cp_size``). Invalid
    input raises ``ValueError`` (an unsupported CP backend or family: ``NotImplementedError``).
    """
    return compile_report(model_path, system, backend, backend_version, **deployment).spec_json


@forwards_keywords_of(compile_report, omit=INTERNAL_KEYWORDS)
def compile_engine(model_path, system: str, backend: str, backend_version: str | None = None,
                   **deployment) -> bytes:
    """Like :func:`compile_engine_json`, encoded to the binary EngineSpec wire format
    (load it with ``AicEngine.from_spec``)."""
    spec_json = compile_engine_json(model_path, system, backend, backend_version, **deployment)
    return bytes(native().encode_spec(spec_json))
