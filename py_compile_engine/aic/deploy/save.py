"""From a sweep result to the result tree on disk (spec 60 §1, §2): per mode the CSVs and the
experiment record, per pick the target's deployment files and ``replay.json``; the Pareto plot
at the top. Only formats the sweep's rows — every number comes from the sweep (or, for
``replay.json``, the Rust replay); nothing is re-estimated."""

from __future__ import annotations

import os
import random
from dataclasses import dataclass, field

from ..serving.plan import Deployment, Workload
from .errors import DeployError
from .options import GeneratorOptions
from .params import pick_params
from .pick_files import FileContent, pick_files
from .plot import pareto_svg
from .replay_pick import replay_record
from .results import csv_columns, exp_config
from .rules import apply_rules
from .writer import check_save_dir, dump_csv, write_tree


@dataclass
class SaveResult:
    """Where the tree went and, per ``(mode, rank)``, the replay record of each pick."""

    path: str
    replays: dict = field(default_factory=dict)


def result_folder_name(model: str, system: str, backend: str, isl: int, osl: int,
                       ttft: float, tpot: float, suffix: int) -> str:
    """``<model>_<system>_<backend>_isl<I>_osl<O>_ttft<T>_tpot<P>_<N>`` (spec 60 §2); a local
    model folder contributes its base name, an HF id its text (the ``/`` makes an
    organisation sub-folder)."""
    if os.path.isdir(model):
        name = os.path.basename(os.path.abspath(model)) or "root"
    else:
        name = model
    return (f"{name}_{system}_{backend}_isl{isl}_osl{osl}_ttft{int(ttft)}_tpot{int(tpot)}_"
            f"{suffix}")


def model_facts(model: str) -> tuple[str, bool, bool]:
    """``(family, sweeps MoE layouts, has routed experts)`` of a model, read from its config:
    the family and the sweep's MoE search space (spec 50 §9.2) for the experiment record, the
    routed experts for the generator (spec 60 §4.2: ``is_moe`` is a property of the model)."""
    from ..compiler import families
    from ..compiler.hf_config import load_model_config

    config = load_model_config(model)
    return (config.family, families.is_moe_for_parallelism(config),
            config.family in families.MOE_FAMILIES and config.num_experts > 0)


def pick_folder(row: dict, mode: str, *, total_gpus: int, isl: int, osl: int, prefix: int,
                is_moe: bool, nextn: int, nextn_accepted, options: GeneratorOptions,
                replay: bool, ttft_target: float | None, tpot_target: float | None,
                systems_path=None) -> tuple[dict[str, FileContent], dict | None]:
    """The files of one pick folder and its replay record (``None`` without replay)."""
    files, job = pick_files_and_replay(
        row, mode, total_gpus=total_gpus, isl=isl, osl=osl, prefix=prefix, is_moe=is_moe,
        nextn=nextn, nextn_accepted=nextn_accepted, options=options, ttft_target=ttft_target,
        tpot_target=tpot_target, systems_path=systems_path)
    record = None
    if replay:
        record = job()
        files["replay.json"] = FileContent("json", record)
    return files, record


def pick_files_and_replay(row: dict, mode: str, *, total_gpus: int, isl: int, osl: int,
                          prefix: int, is_moe: bool, nextn: int, nextn_accepted,
                          options: GeneratorOptions, ttft_target: float | None,
                          tpot_target: float | None, systems_path=None):
    """The files of one pick folder, and a function that replays the pick (its
    ``replay.json`` record) — separate, so the replays of a tree can run side by side."""
    deployment = Deployment.from_row(row, mode=mode, nextn=nextn,
                                     nextn_accepted=nextn_accepted if nextn else None)
    workload = Workload(isl=isl, osl=osl, prefix=prefix, ttft=row.get("ttft"),
                        tpot=row.get("tpot"))
    pick = apply_rules(pick_params(deployment, workload, total_gpus=total_gpus, is_moe=is_moe,
                                   options=options, systems_path=systems_path))
    files = pick_files(pick)

    def job() -> dict:
        return replay_record(deployment, pick.workers, isl=isl, osl=osl, prefix=prefix,
                             concurrency=pick.estimated_concurrency, ttft_target=ttft_target,
                             tpot_target=tpot_target,
                             estimate={"ttft_ms": row.get("ttft"), "tpot_ms": row.get("tpot")},
                             systems_path=systems_path)

    return files, job


def _run_replays(jobs: dict) -> dict:
    """Runs the replay jobs ``{key: job}`` one after the other; returns ``{key: record}``.
    (Running them on threads side by side — the native replay releases the GIL — was no faster
    on the 2-core development machine: BENCHMARKS.md, "Deployment files".)"""
    return {key: job() for key, job in jobs.items()}


def _budget(total_gpus: int | None, row: dict, mode: str, rank: int) -> int:
    """The GPU budget a pick's worker counts fill: the sweep's, or the GPUs a load-target row
    needs."""
    if total_gpus is not None:
        return total_gpus
    needed = row.get("total_gpus_needed")
    if not isinstance(needed, int) or needed < 1:
        raise DeployError(f"{mode} pick {rank}: no GPU budget: give the sweep's total_gpus, or a "
                          f"load-target row with total_gpus_needed")
    return needed


def save_sweep(out: dict, *, save_dir, model: str, system: str, backend: str,
               total_gpus: int | None, isl: int, osl: int, prefix: int = 0, ttft: float = 2000.0,
               tpot: float = 30.0, request_latency: float | None = None, nextn: int = 0,
               nextn_accepted: float | None = None, options: GeneratorOptions | None = None,
               replay: bool = True, suffix: int | None = None,
               systems_path=None) -> SaveResult:
    """Writes the result tree of a sweep result ``out`` (what :func:`aic.serving.sweep.sweep`
    returned for these inputs) under ``save_dir``; returns the folder and the picks' replay
    records. Everything is built first and renamed into place at the end; a bad input is a
    :class:`DeployError` and writes nothing.

    ``total_gpus`` is the budget the worker counts fill (spec 60 §4.1); ``None`` for a
    load-target result (``recommend``), where each pick fills the ``total_gpus_needed`` its row
    sized. Merged results (``--backend auto``) deploy each row on its own backend."""
    options = options or GeneratorOptions.create()
    check_save_dir(save_dir)
    family, moe_layouts, is_moe = model_facts(model)
    files: dict[str, FileContent] = {}
    jobs: dict = {}
    fronts = {}
    for mode, rows in out["best_configs"].items():
        if not rows:
            continue
        front = out["pareto_fronts"].get(mode, [])
        fronts[mode] = front
        columns = csv_columns(rows)
        files[f"{mode}/best_config_topn.csv"] = FileContent("text", dump_csv(columns, rows))
        files[f"{mode}/pareto.csv"] = FileContent("text", dump_csv(columns, front))
        version = rows[0].get("version" if mode == "agg" else "(p)version")
        files[f"{mode}/exp_config.yaml"] = FileContent("yaml", exp_config(
            mode, model=model, system=system, backend=backend, version=version, family=family,
            moe_layouts=moe_layouts,
            isl=isl, osl=osl, prefix=prefix, ttft=ttft, tpot=tpot,
            request_latency=request_latency, total_gpus=_budget(total_gpus, rows[0], mode, 1),
            nextn=nextn, nextn_accepted=nextn_accepted if nextn else None, row=rows[0]))
        for rank, row in enumerate(rows, start=1):
            try:
                pick, job = pick_files_and_replay(
                    row, mode, total_gpus=_budget(total_gpus, row, mode, rank), isl=isl, osl=osl,
                    prefix=row.get("prefix", prefix) or 0, is_moe=is_moe, nextn=nextn,
                    nextn_accepted=nextn_accepted, options=options, ttft_target=ttft,
                    tpot_target=tpot, systems_path=systems_path)
            except DeployError as exc:
                raise DeployError(f"{mode} pick {rank}: {exc}") from None
            for name, content in pick.items():
                files[f"{mode}/top{rank}/{name}"] = content
            if replay:
                jobs[(mode, rank)] = job
    if not fronts:
        raise DeployError("the sweep has no picks to write")
    records = _run_replays(jobs)
    for (mode, rank), record in records.items():
        files[f"{mode}/top{rank}/replay.json"] = FileContent("json", record)
    size = f"{total_gpus} x {system}" if total_gpus is not None else f"{system} (sized for a load)"
    title = f"{model} on {size} ({backend}): isl {isl}, osl {osl}"
    files["pareto_frontier.svg"] = FileContent("text", pareto_svg(fronts, title))
    if suffix is None:
        suffix = random.randint(0, 1_000_000)
    name = result_folder_name(model, system, backend, isl, osl, ttft, tpot, suffix)
    path = write_tree(os.fspath(save_dir), name, files)
    return SaveResult(path, records)
