"""The live support matrix: which shipped model answers on which system and backend.

``aic-compile support`` asks the engine itself, instead of a precomputed table: for every
(model, system, backend) it compiles a spec at the backend's default version, builds the engine
and runs one small prefill and one decode estimate. A cell either answers (with the two
latencies) or carries the one-line reason it does not: an architecture aic cannot compile yet,
a system or backend without perf data, a quant mode the system has no FLOPS for, a missing
perf table or slice, or a deployment the model does not allow.

Work that does not depend on a cell is done once: the architecture check once per model, the
perf-data inventory once per systems folder (``_aic.systems_catalogue_json``), and tables once
per (system, backend) through the engine's shared database registry.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Callable, Iterable

from .. import paths
from ..compiler import families
from .._native import native
from ..errors import UnsupportedArchitectureError
from ..compiler.hf_config import load_model_config

BACKENDS = ("trtllm", "sglang", "vllm")

#: The probe: one prefill of (batch, isl, prefix) and one decode of (batch, isl, osl).
PREFILL_PROBE = (1, 1024, 0)
DECODE_PROBE = (1, 1024, 2)

#: Status words of a cell, in the order the summary lists them.
STATUSES = ("ok", "unsupported-architecture", "invalid-config", "unreadable-system",
            "no-perf-data", "missing-flops", "missing-data", "invalid-deployment", "error")
#: Status words of a cell whose input could not be read (a model config, a system
#: description): the cell was not probed, so a matrix holding one is partial
#: (:func:`unreadable_inputs`).
UNREAD_STATUSES = ("invalid-config", "unreadable-system")


@dataclass
class SupportCell:
    """One (model, system, backend) probe."""

    model: str
    system: str
    backend: str
    version: str | None
    status: str
    prefill_ms: float | None = None
    decode_ms: float | None = None
    reason: str = ""

    def as_dict(self) -> dict:
        return asdict(self)


def one_line(text: str, limit: int = 160) -> str:
    """The first line of ``text``, cut at ``limit`` characters with an ellipsis."""
    line = str(text).strip().splitlines()[0] if str(text).strip() else ""
    return line if len(line) <= limit else line[: limit - 1] + "…"


def classify(exc: BaseException) -> str:
    """The status word of an exception raised while compiling or estimating."""
    mod = native()
    if isinstance(exc, UnsupportedArchitectureError):
        return "unsupported-architecture"
    if isinstance(exc, mod.MissingSystemFlopsError):
        return "missing-flops"
    if isinstance(exc, (mod.PerfDataNotAvailableError, mod.EmpiricalNotImplementedError)):
        return "missing-data"
    if isinstance(exc, ValueError):
        return "invalid-deployment"
    return "error"


def _moe_sizes(model_id: str, tp: int, model_configs_path) -> dict:
    """MoE families need ``moe_tp * moe_ep == tp``: the probe puts the experts on EP."""
    model = load_model_config(model_id, model_configs_path)
    if families.is_moe_for_parallelism(model):
        return {"moe_tp_size": 1, "moe_ep_size": tp}
    return {}


def probe(model: str, system: str, backend: str, *, tp: int = 1, systems_path=None,
          model_configs_path=None, version: str | None = None,
          catalogue: dict | None = None) -> SupportCell:
    """Compiles ``model`` for (system, backend) and runs the two probe estimates."""
    from ..compiler.compile import compile_report

    mod = native()
    root = str(paths.systems_path(systems_path))
    if catalogue is not None:
        entry = catalogue.get(system, {}).get(backend)
        if entry is not None and entry["current"] is None and version is None:
            return SupportCell(model, system, backend, None, "no-perf-data",
                               reason=f"{system} ships no {backend} perf data")
    try:
        sizes = _moe_sizes(model, tp, model_configs_path)
        result = compile_report(model, system, backend, version, tp_size=tp,
                                systems_path=systems_path,
                                model_configs_path=model_configs_path, **sizes)
    except Exception as exc:  # noqa: BLE001 - every failure is a cell of the matrix
        return SupportCell(model, system, backend, version, classify(exc), reason=one_line(exc))
    literal = result.engine["backend_version"]
    try:
        engine = mod.AicEngine.from_spec(bytes(mod.encode_spec(result.spec_json)),
                                         systems_path=root)
    except Exception as exc:  # noqa: BLE001
        status = classify(exc)
        if literal is None:
            status = "no-perf-data"
        return SupportCell(model, system, backend, literal, status, reason=one_line(exc))
    cell = SupportCell(model, system, backend, literal, "ok")
    try:
        cell.prefill_ms = engine.predict_prefill_latency(*PREFILL_PROBE)
        cell.decode_ms = engine.predict_decode_latency(*DECODE_PROBE)
    except Exception as exc:  # noqa: BLE001
        cell.status, cell.reason = classify(exc), one_line(exc)
    return cell


def _catalogue(systems_path) -> tuple[dict, dict]:
    """``{system: {backend: entry}}`` from the native catalogue, and ``{system: error}`` of
    the system descriptions it could not read."""
    listing = json.loads(native().systems_catalogue_json(str(paths.systems_path(systems_path))))
    unreadable = {s["name"]: s["error"] for s in listing if s.get("error") is not None}
    return ({s["name"]: {b["backend"]: b for b in s["backends"]} for s in listing
             if s["name"] not in unreadable}, unreadable)


def unreadable_inputs(cells: list[SupportCell]) -> list[tuple[str, str]]:
    """``(input, reason)`` of every model config and system description the matrix could not
    read (cells of :data:`UNREAD_STATUSES`), one entry per input: the matrix has no answer for
    them, so it is partial."""
    out: dict = {}
    for c in cells:
        if c.status == "invalid-config":
            out.setdefault(f"model {c.model}", c.reason)
        elif c.status == "unreadable-system":
            out.setdefault(f"system {c.system}", c.reason)
    return list(out.items())


def support_matrix(models: Iterable[str] | None = None, systems: Iterable[str] | None = None,
                   backends: Iterable[str] | None = None, *, tp: int = 1, systems_path=None,
                   model_configs_path=None,
                   on_cell: Callable[[SupportCell], None] | None = None) -> list[SupportCell]:
    """Probes every (model, system, backend); defaults: every shipped model and system, all
    three backends. Unknown systems or backends raise ``ValueError`` listing the valid ones, as
    do a named model whose config cannot be found or read and a systems folder without
    readable systems; a shipped model whose config cannot be parsed gets ``invalid-config``
    cells, a system whose description cannot be read ``unreadable-system`` cells
    (:func:`unreadable_inputs` lists both)."""
    catalogue, unreadable = _catalogue(systems_path)
    if not catalogue and not unreadable:
        # An empty matrix is not an answer: the folder is wrong, not every cell unsupported.
        raise ValueError(f"systems folder {paths.systems_dir(systems_path)!r} holds no system "
                         f"description (<system>.yaml with its data/ folder); pass the folder "
                         f"that holds them (the shipped one is data/systems)")
    if not catalogue:
        # Only unreadable descriptions: not a systems folder (or every file broken).
        first = "; ".join(f"{name}.yaml: {err}" for name, err in sorted(unreadable.items())[:2])
        raise ValueError(f"systems folder {paths.systems_dir(systems_path)!r} holds no readable "
                         f"system description ({first}); pass the folder that holds them (the "
                         f"shipped one is data/systems)")
    all_systems = sorted(set(catalogue) | set(unreadable))
    systems = list(systems) if systems is not None else all_systems
    for s in systems:
        if s not in catalogue and s not in unreadable:
            raise ValueError(f"unknown system {s!r}; expected one of: {', '.join(all_systems)}")
    backends = list(backends) if backends is not None else list(BACKENDS)
    for b in backends:
        if b not in BACKENDS:
            raise ValueError(f"unknown backend {b!r}; expected one of: {', '.join(BACKENDS)}")
    explicit = models is not None
    if models is None:
        models = paths.shipped_model_ids(paths.model_configs_path(model_configs_path))
    models = list(models)
    if explicit:
        # A model the caller named must exist: an unknown id or path is the caller's error,
        # not a matrix of cells that all say so.
        for model in models:
            try:
                load_model_config(model, model_configs_path)
            except UnsupportedArchitectureError:
                pass
            except (ValueError, OSError) as exc:
                raise ValueError(one_line(exc, 400)) from None
    cells: list[SupportCell] = []
    for model in models:
        try:
            config = load_model_config(model, model_configs_path)
            families.check_architecture(config.architecture)
            arch_error = None
        except UnsupportedArchitectureError as exc:
            arch_error = ("unsupported-architecture", exc)
        except (ValueError, OSError) as exc:
            arch_error = ("invalid-config", exc)
        for system in systems:
            for backend in backends:
                if arch_error is not None:
                    cell = SupportCell(model, system, backend, None, arch_error[0],
                                       reason=one_line(arch_error[1]))
                elif system in unreadable:
                    cell = SupportCell(model, system, backend, None, "unreadable-system",
                                       reason=one_line(unreadable[system]))
                else:
                    cell = probe(model, system, backend, tp=tp, systems_path=systems_path,
                                 model_configs_path=model_configs_path, catalogue=catalogue)
                cells.append(cell)
                if on_cell is not None:
                    on_cell(cell)
    return cells


def summary_counts(cells: list[SupportCell]) -> dict[str, int]:
    """Cells per status word, in :data:`STATUSES` order (zero counts left out)."""
    counts = {s: 0 for s in STATUSES}
    for c in cells:
        counts[c.status] = counts.get(c.status, 0) + 1
    return {k: v for k, v in counts.items() if v}

