"""aic's timing as the files NVIDIA Dynamo reads without a code change: the mocker's timing
profile with its engine config, and the SLA planner's profile folder.

:func:`export_dynamo` takes a :class:`~aic.serving.plan.Deployment` and a
:class:`~aic.serving.plan.Workload` and writes, into one folder:

* ``timing.npz`` + ``engine_args.json`` (agg), or ``prefill_timing.npz`` /
  ``decode_timing.npz`` + ``prefill_engine_args.json`` / ``decode_engine_args.json`` (disagg):
  Dynamo 1.6.1's mocker engine config (``timing_model: {type: external, provider:
  dynamo_profile, config: {path: ...}}``), with the scheduler limits and the KV blocks of aic's
  own replay of the same deployment (aic's memory model);
* ``profile/``: the SLA planner's profile folder as Dynamo's pre-deployment profiler writes it
  (``selected_prefill_interpolation/raw_data.npz``, ``selected_decode_interpolation/raw_data.npz``
  and their ConfigMap form ``prefill_raw_data.json`` / ``decode_raw_data.json``);
* ``export.json``: what was exported (deployment, workload, worker counts, files).

Every number comes from the Rust engine (prefill and decode-step estimates, KV capacity); this
module compiles the roles, picks the points (:mod:`aic.export.grids`) and writes the files into
a temporary folder that is renamed into place, so nothing is left half-written.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from dataclasses import dataclass, field

from .. import paths
from .._native import native
from ..serving.plan import Deployment, Workload
from . import grids
from .npz import write_npz

#: The Dynamo version whose file formats this export writes.
DYNAMO_VERSION = "1.6.1"
#: Dynamo's name of a role's worker type.
_WORKER_TYPES = {"agg": "aggregated", "prefill": "prefill", "decode": "decode"}


class ExportError(ValueError):
    """An export that cannot be written: the message names the input (the output folder, a
    length, the deployment) and what would fix it."""


@dataclass(frozen=True)
class RoleSetup:
    """One role's scheduler and KV capacity, as aic's replay sets it up (per attention-DP
    rank)."""

    role: str
    backend: str
    block_size: int
    num_gpu_blocks: int
    max_num_seqs: int
    max_num_batched_tokens: int
    enable_chunked_prefill: bool
    enable_prefix_caching: bool
    dp_size: int
    gpus_per_worker: int
    workers: int

    @property
    def capacity_tokens(self) -> int:
        """KV tokens one rank holds."""
        return self.num_gpu_blocks * self.block_size


@dataclass
class DynamoExport:
    """What :func:`export_dynamo` wrote: the folder, its files (relative paths), each role's
    setup, the grid sizes and the wall time."""

    out_dir: str
    files: list[str]
    setups: dict[str, RoleSetup]
    grid_sizes: dict[str, dict] = field(default_factory=dict)
    wall_ms: float = 0.0

    def to_dict(self) -> dict:
        """Plain JSON data."""
        return {"out_dir": self.out_dir, "files": list(self.files),
                "roles": {k: vars(v) | {"capacity_tokens": v.capacity_tokens}
                          for k, v in self.setups.items()},
                "grid_sizes": self.grid_sizes, "wall_ms": self.wall_ms}


# ------------------------------------------------------------------------------ inputs


def _check_out_dir(out_dir, force: bool) -> str:
    """The absolute output folder, refused when it is a file or a non-empty folder (unless
    ``force``)."""
    final = os.path.abspath(os.fspath(out_dir))
    if os.path.exists(final) or os.path.islink(final):
        if not os.path.isdir(final):
            raise ExportError(f"output folder {out_dir}: is a file, not a folder; give a folder "
                              f"path (it is created)")
        if os.listdir(final) and not force:
            raise ExportError(f"output folder {out_dir}: exists and is not empty; give a new "
                              f"or empty folder, or replace it with --force (force=True)")
    parent = os.path.dirname(final)
    if not os.path.isdir(parent):
        raise ExportError(f"output folder {out_dir}: its parent folder {parent} does not exist")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise ExportError(f"output folder {out_dir}: its parent folder {parent} is not writable")
    return final


def _max_length(deployment: Deployment) -> int:
    """The longest sequence the deployment serves: the model's ``max_position_embeddings``,
    lowered by any role's ``max_seq_len``."""
    from ..compiler.hf_config import load_model_config

    length = load_model_config(deployment.model).max_position_embeddings
    for role in deployment.roles.values():
        if role.max_seq_len is not None:
            length = min(length, role.max_seq_len)
    return length


def _check_lengths(deployment: Deployment, workload: Workload, max_length: int) -> None:
    total = workload.isl + workload.osl
    if total > max_length:
        raise ExportError(
            f"isl + osl = {workload.isl} + {workload.osl} = {total} is above the deployment's "
            f"maximum length {max_length} ({deployment.model}'s max_position_embeddings or a "
            f"role's max_seq_len); lower --isl / --osl")


# ------------------------------------------------------------------------------ engines


def _compile_roles(deployment: Deployment, root) -> dict[str, dict]:
    """Each role compiled as aic's replay compiles it: ``{"spec": spec_json, "facts": ...}``."""
    from ..compiler import families
    from ..compiler.hf_config import load_model_config
    from ..serving.deployment import build_worker, resolve_moe_widths, resolve_version

    is_moe = load_model_config(deployment.model).family in families.MOE_FAMILIES
    out = {}
    for name, role in deployment.roles.items():
        version = resolve_version(root, role.system, role.backend, role.version,
                                  deployment.database_mode)
        p = role.parallel
        mtp, mep = resolve_moe_widths(is_moe, p.tp, p.dp, p.moe_tp, p.moe_ep)
        sizes = {"tp_size": p.tp, "pp_size": p.pp, "attention_dp_size": p.dp,
                 "moe_tp_size": mtp, "moe_ep_size": mep}
        if p.cp != 1:
            sizes["cp_size"] = p.cp
        out[name] = build_worker(deployment.model, role.system, role.backend, version, root,
                                 sizes, role.quant.overrides(), deployment.nextn,
                                 name != "decode", database_mode=deployment.database_mode,
                                 attention_backend=deployment.attention_backend)
    return out


def _role_setups(deployment: Deployment, workers: dict[str, dict], root, kv: dict,
                 scheduler: dict) -> dict[str, RoleSetup]:
    """The scheduler limits and KV capacity of each role, read from aic's replay of one
    one-token request on the same compiled roles: the export's engine args are then exactly the
    configuration ``aic-compile replay`` runs."""
    from ..serving.replay import REPLAY_MISSING, ReplayUnavailableError, _engine

    mod = native()
    if not getattr(mod, "replay_available", lambda: False)():
        raise ReplayUnavailableError(REPLAY_MISSING)

    def engine(name):
        return _engine(workers[name]["spec"], workers[name]["facts"], kv, scheduler)

    if deployment.mode == "agg":
        mode = {"kind": "agg", "workers": deployment.role("agg").workers,
                "engine": engine("agg")}
    else:
        mode = {"kind": "disagg", "prefill": engine("prefill"),
                "prefill_workers": deployment.role("prefill").workers,
                "decode": engine("decode"), "decode_workers": deployment.role("decode").workers,
                "handoff_latency_ms": 0.0}
    request = {"mode": mode,
               "workload": {"kind": "generated", "requests": 1,
                            "arrival": {"closed_loop": {"concurrency": 1}},
                            "isl": 1, "osl": 1, "seed": 0},
               "options": {"timeline": False, "per_request": False}}
    try:
        answer = json.loads(mod.replay_json(json.dumps(request), os.fspath(root)))
    except ValueError as exc:
        raise ExportError(f"the {deployment.mode} deployment's scheduler and KV cache (aic's "
                          f"memory model): {exc}; use more GPUs per worker or a larger "
                          f"--gpu-memory-fraction") from None
    setups = {}
    for summary in answer["report"]["roles"]:
        name = summary["role"]
        setups[name] = RoleSetup(
            role=name, backend=summary["backend"], block_size=summary["kv"]["block_size"],
            num_gpu_blocks=summary["kv"]["num_gpu_blocks"],
            max_num_seqs=summary["max_num_seqs"],
            max_num_batched_tokens=summary["max_num_batched_tokens"],
            enable_chunked_prefill=summary["chunked_prefill"],
            enable_prefix_caching=summary["prefix_caching"], dp_size=summary["dp_size"],
            gpus_per_worker=summary["gpus_per_worker"], workers=summary["workers"])
    return setups


class _Pricer:
    """aic's estimates of one compiled role, memoised, with the call named in any error."""

    def __init__(self, role: str, spec_json: str, root):
        mod = native()
        self.role = role
        self.engine = mod.AicEngine.from_spec(bytes(mod.encode_spec(spec_json)),
                                              os.fspath(root))
        self._decode: dict = {}

    def prefill(self, batch: int, isl: int, prefix: int) -> float:
        """A pass prefilling ``batch`` requests of ``isl`` tokens with ``prefix`` cached, ms."""
        try:
            return float(self.engine.predict_prefill_latency(batch, isl, prefix))
        except (ValueError, RuntimeError) as exc:
            raise ExportError(f"{self.role} role: aic cannot price the prefill of {batch} "
                              f"request(s) of {isl} tokens ({prefix} cached): {exc}") from None

    def decode_step(self, batch: int, isl: int, osl: int) -> float:
        """aic's decode step of ``batch`` requests at ``isl + osl / 2 + 1`` (integer
        division), ms."""
        key = (batch, isl, osl)
        if key not in self._decode:
            try:
                self._decode[key] = float(self.engine.decode_step_latency(batch, isl, osl, 1.0))
            except (ValueError, RuntimeError) as exc:
                raise ExportError(
                    f"{self.role} role: aic cannot price a decode step of {batch} request(s) at "
                    f"sequence length {isl + osl // 2 + 1}: {exc}") from None
        return self._decode[key]

    def decode_at_length(self, batch: int, length: int) -> float:
        """A decode step of ``batch`` requests whose sequence length (the fed token included)
        is ``length``: aic's step at ``isl = length − 1``, ``osl = 0``, as aic's replay prices
        it."""
        return self.decode_step(batch, max(length, 2) - 1, 0)


# ------------------------------------------------------------------------------ tables


def timing_profile(pricer: _Pricer, setup: RoleSetup, workload: Workload,
                   max_length: int) -> dict:
    """The mocker's timing profile of one role (the five arrays; see :mod:`aic.export.grids`
    for the points and what each is priced as)."""
    new_tokens = workload.isl - workload.prefix
    batches = grids.prefill_batches(new_tokens, setup.max_num_batched_tokens)
    prefill_isl = grids.prefill_axis(new_tokens, batches)
    ttft = [0.0] + [pricer.prefill(b, workload.isl, workload.prefix) for b in batches]

    decode_batches = grids.batch_list(setup.max_num_seqs)
    active = grids.active_axis(decode_batches, grids.workload_lengths(workload.isl, workload.osl))
    contexts = grids.context_axis(workload.isl, workload.osl, max_length)
    itl = [[pricer.decode_at_length(grids.decode_batch(a, c, setup.max_num_seqs), c)
            for c in contexts] for a in active]
    return {
        "prefill_isl": [float(t) for t in prefill_isl],
        "prefill_ttft_ms": ttft,
        "decode_active_kv_tokens": [float(a) for a in active],
        "decode_context_length": [float(c) for c in contexts],
        "decode_itl": itl,
    }


def planner_prefill(pricer: _Pricer, setup: RoleSetup, workload: Workload,
                    max_length: int) -> dict:
    """The planner's prefill profile: TTFT of one request per length, and prefill throughput
    per GPU (``isl / ttft / gpus × 1000 × attention DP``)."""
    lengths = grids.planner_prefill_lengths(max_length, workload.isl)
    ttft = [pricer.prefill(1, n, 0) for n in lengths]
    thpt = [n / t / setup.gpus_per_worker * 1000.0 * setup.dp_size for n, t in zip(lengths, ttft)]
    return {"prefill_isl": [float(n) for n in lengths], "prefill_ttft": ttft,
            "prefill_thpt_per_gpu": thpt}


def planner_decode(pricer: _Pricer, setup: RoleSetup, workload: Workload,
                   max_length: int) -> dict:
    """The planner's decode profile: for each prompt length and requests in flight (all ranks),
    the KV usage, the mean context ``isl + osl / 2``, aic's decode step (ITL, ms) and the
    output throughput per GPU; ``max_kv_tokens`` is the worker's KV capacity (all ranks)."""
    osl = workload.osl
    max_kv = setup.capacity_tokens * setup.dp_size
    x, y, z, thpt = [], [], [], []
    for isl in grids.planner_decode_lengths(max_length, workload.isl, osl):
        most = min(max_kv // (isl + osl), setup.max_num_seqs * setup.dp_size)
        for n in grids.planner_concurrencies(most, setup.dp_size):
            step = pricer.decode_step(max(1, n // setup.dp_size), isl, osl)
            context = isl + osl / 2
            x.append(context * n / max_kv)
            y.append(context)
            z.append(step)
            thpt.append(n * 1000.0 / step / setup.gpus_per_worker)
    if not z:
        raise ExportError(f"decode role: not one request of isl + osl = "
                          f"{workload.isl} + {osl} fits its KV cache ({max_kv} tokens)")
    return {"x_kv_usage": x, "y_context_length": y, "z_itl": z, "z_thpt_per_gpu": thpt,
            "max_kv_tokens": [int(max_kv)]}


def engine_args(setup: RoleSetup, deployment: Deployment, npz_path: str) -> dict:
    """Dynamo 1.6.1's mocker engine config of one role (only keys Dynamo accepts)."""
    role = deployment.role(setup.role)
    engine = {
        "backend": setup.backend,
        "num_gpu_blocks": setup.num_gpu_blocks,
        "block_size": setup.block_size,
        "max_num_seqs": setup.max_num_seqs,
        "max_num_batched_tokens": setup.max_num_batched_tokens,
        "enable_prefix_caching": setup.enable_prefix_caching,
        "enable_chunked_prefill": setup.enable_chunked_prefill,
    }
    if deployment.mode == "disagg":
        engine["worker_type"] = _WORKER_TYPES[setup.role]
    engine["timing_model"] = {"type": "external", "provider": "dynamo_profile",
                              "config": {"path": npz_path}}
    p = role.parallel
    return {"engine": engine, "dp_size": setup.dp_size,
            "tensor_parallel_size": p.tp * p.pp * p.cp}


# ------------------------------------------------------------------------------ writing


def _write_json(path: str, data) -> None:
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(data, fh, indent=2, allow_nan=False)
        fh.write("\n")


def _move_into_place(tmp: str, final: str) -> None:
    """Renames the finished ``tmp`` folder to ``final``, replacing an existing (empty, or
    ``--force``d) folder."""
    if not os.path.isdir(final):
        os.rename(tmp, final)
        return
    old = tempfile.mkdtemp(prefix=f".{os.path.basename(final)}.old-",
                           dir=os.path.dirname(final))
    os.rmdir(old)
    os.rename(final, old)
    try:
        os.rename(tmp, final)
    except OSError:
        os.rename(old, final)
        raise
    shutil.rmtree(old, ignore_errors=True)


def export_dynamo(
    deployment: Deployment,
    workload: Workload,
    out_dir,
    *,
    force: bool = False,
    block_size: int | None = None,
    gpu_memory_fraction: float | None = None,
    num_gpu_blocks: int | None = None,
    max_num_seqs: int | None = None,
    max_num_batched_tokens: int | None = None,
    enable_chunked_prefill: bool | None = None,
    enable_prefix_caching: bool | None = None,
    systems_path=None,
) -> DynamoExport:
    """Writes the Dynamo files of ``deployment`` serving ``workload`` into the folder
    ``out_dir`` (module docs) and returns a :class:`DynamoExport`.

    The workload's ``isl``, ``osl`` and ``prefix`` shape the grids (its load and targets are
    not used). The KV-capacity and scheduler overrides are :func:`aic.serving.replay.replay`'s
    and apply to every role. ``out_dir`` must be new or empty unless ``force``; it is written
    as a temporary sibling folder and renamed into place. The NPZ paths inside the engine
    configs are absolute, so a config works from any current folder.

    Errors: :class:`ExportError` (a ``ValueError``) for an output folder that is a file, not
    empty or not writable, lengths above the deployment's maximum, or a role aic cannot price;
    ``ValueError`` from the compile or the memory model (a layout the model does not allow, a
    deployment with no KV blocks)."""
    from ..serving.replay import _engine_options

    if not isinstance(deployment, Deployment):
        raise TypeError(f"deployment must be an aic.serving.plan.Deployment, got "
                        f"{type(deployment).__name__}")
    if not isinstance(workload, Workload):
        raise TypeError(f"workload must be an aic.serving.plan.Workload, got "
                        f"{type(workload).__name__}")
    started = time.perf_counter()
    final = _check_out_dir(out_dir, force)
    max_length = _max_length(deployment)
    _check_lengths(deployment, workload, max_length)
    kv, scheduler = _engine_options(
        block_size=block_size, gpu_memory_fraction=gpu_memory_fraction,
        num_gpu_blocks=num_gpu_blocks, max_num_seqs=max_num_seqs,
        max_num_batched_tokens=max_num_batched_tokens,
        enable_chunked_prefill=enable_chunked_prefill,
        enable_prefix_caching=enable_prefix_caching)
    root = paths.systems_dir(systems_path)
    workers = _compile_roles(deployment, root)
    setups = _role_setups(deployment, workers, root, kv, scheduler)
    for name, setup in setups.items():
        if workload.isl + workload.osl > setup.capacity_tokens:
            raise ExportError(f"{name} role: one request of isl + osl = "
                              f"{workload.isl + workload.osl} tokens does not fit its KV cache "
                              f"({setup.capacity_tokens} tokens per rank); use more GPUs per "
                              f"worker or shorter lengths")
    pricers = {name: _Pricer(name, w["spec"], root) for name, w in workers.items()}

    # Everything is priced before a file is written.
    files: dict[str, object] = {}
    sizes: dict[str, dict] = {}
    for name, pricer in pricers.items():
        npz_name = "timing.npz" if name == "agg" else f"{name}_timing.npz"
        table = timing_profile(pricer, setups[name], workload, max_length)
        files[npz_name] = table
        args_name = "engine_args.json" if name == "agg" else f"{name}_engine_args.json"
        files[args_name] = engine_args(setups[name], deployment, os.path.join(final, npz_name))
        sizes[name] = {"prefill_points": len(table["prefill_isl"]),
                       "decode_grid": [len(table["decode_active_kv_tokens"]),
                                       len(table["decode_context_length"])]}
    prefill_role = "agg" if deployment.mode == "agg" else "prefill"
    decode_role = "agg" if deployment.mode == "agg" else "decode"
    prefill = planner_prefill(pricers[prefill_role], setups[prefill_role], workload, max_length)
    decode = planner_decode(pricers[decode_role], setups[decode_role], workload, max_length)
    files["profile/selected_prefill_interpolation/raw_data.npz"] = prefill
    files["profile/selected_decode_interpolation/raw_data.npz"] = decode
    files["profile/prefill_raw_data.json"] = prefill
    files["profile/decode_raw_data.json"] = dict(decode, max_kv_tokens=decode["max_kv_tokens"][0])
    sizes["planner"] = {"prefill_points": len(prefill["prefill_isl"]),
                        "decode_points": len(decode["z_itl"])}
    from .. import __version__

    files["export.json"] = {
        "dynamo_version": DYNAMO_VERSION, "aic_version": __version__,
        "deployment": deployment.to_dict(), "workload": workload.to_dict(),
        "max_length": max_length,
        "workers": {name: s.workers for name, s in setups.items()},
        "engine_args": {name: ("engine_args.json" if name == "agg"
                               else f"{name}_engine_args.json") for name in setups},
        "files": sorted(files),
    }

    try:
        tmp = tempfile.mkdtemp(prefix=f".{os.path.basename(final)}.", suffix=".tmp",
                               dir=os.path.dirname(final))
    except OSError as exc:
        raise ExportError(f"output folder {out_dir}: cannot create a folder next to it: "
                          f"{exc}") from None
    try:
        for rel, data in files.items():
            path = os.path.join(tmp, *rel.split("/"))
            os.makedirs(os.path.dirname(path), exist_ok=True)
            if rel.endswith(".npz"):
                write_npz(path, data)
            else:
                _write_json(path, data)
        _move_into_place(tmp, final)
    except OSError as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        raise ExportError(f"output folder {out_dir}: cannot write the export: {exc}") from None
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return DynamoExport(out_dir=final, files=sorted(files), setups=setups, grid_sizes=sizes,
                        wall_ms=(time.perf_counter() - started) * 1e3)
