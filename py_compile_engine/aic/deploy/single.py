"""The deployment files of one chosen row without a sweep: a row of ``--json`` output (or the
whole ``--json`` result with a mode and rank) or of a ``best_config_topn.csv``. The row carries
the model, lengths, layout and estimate; the GPU budget, MTP depth and SLA targets come from the
options or, for a CSV inside a ``--save-dir`` tree, from the ``exp_config.yaml`` beside it."""

from __future__ import annotations

import csv
import json
import os
import re

import yaml

from .errors import DeployError
from .options import GeneratorOptions
from .save import model_facts, pick_folder
from .writer import check_save_dir, write_tree

#: Row columns that are text even when they look like numbers (versions, labels).
_TEXT_COLUMNS = {"model", "parallel", "backend", "version", "system", "gemm", "kvcache", "fmha",
                 "moe", "comm"}


def _typed(column: str, text: str):
    if text == "":
        return None
    if column.split(")")[-1] in _TEXT_COLUMNS:
        return text
    if re.fullmatch(r"-?\d+", text):
        return int(text)
    try:
        return float(text)
    except ValueError:
        return {"True": True, "False": False}.get(text, text)


def read_csv_row(path: str, rank: int) -> dict:
    """Row ``rank`` (1-based) of a ``best_config_topn.csv``, typed."""
    try:
        with open(path, newline="", encoding="utf-8") as fh:
            table = list(csv.reader(fh))
    except OSError as exc:
        raise DeployError(f"--csv {path!r}: {exc.strerror or exc}") from None
    if len(table) < 2:
        raise DeployError(f"--csv {path!r}: no rows below the header")
    if not 1 <= rank <= len(table) - 1:
        raise DeployError(f"--rank {rank}: {path!r} has rows 1 to {len(table) - 1}")
    header, cells = table[0], table[rank]
    if len(cells) != len(header):
        raise DeployError(f"--csv {path!r} line {rank + 1}: {len(cells)} cells under "
                          f"{len(header)} columns")
    return {c: _typed(c, v) for c, v in zip(header, cells)}


def read_json_row(path: str, rank: int, mode: str | None) -> tuple[dict, str | None]:
    """A row object, a list of rows (``rank``) or a ``--json`` sweep result (``mode``,
    ``rank``); returns the row and the mode when the file names it."""
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except OSError as exc:
        raise DeployError(f"--row {path!r}: {exc.strerror or exc}") from None
    except json.JSONDecodeError as exc:
        raise DeployError(f"--row {path!r}: not JSON ({exc})") from None
    if isinstance(data, dict) and "best_configs" in data:
        modes = [m for m, rows in data["best_configs"].items() if rows]
        mode = mode or data.get("chosen_exp")
        if mode not in modes:
            raise DeployError(f"--mode {mode!r}: the result has picks for {', '.join(modes)}")
        data = data["best_configs"][mode]
    if isinstance(data, list):
        if not 1 <= rank <= len(data):
            raise DeployError(f"--rank {rank}: {path!r} has rows 1 to {len(data)}")
        data = data[rank - 1]
    if not isinstance(data, dict) or "model" not in data:
        raise DeployError(f"--row {path!r}: expected a sweep row (an object with 'model', "
                          f"'parallel' or '(d)parallel', ...), a list of rows or a --json "
                          f"sweep result")
    return data, mode


def experiment_record(csv_path: str) -> dict:
    """The ``exp_config.yaml`` beside a ``best_config_topn.csv`` (empty when absent)."""
    path = os.path.join(os.path.dirname(os.path.abspath(csv_path)), "exp_config.yaml")
    if not os.path.isfile(path):
        return {}
    with open(path, encoding="utf-8") as fh:
        data = yaml.safe_load(fh)
    return data if isinstance(data, dict) else {}


def render_row(row: dict, *, save_dir, mode: str | None = None, total_gpus: int | None = None,
               nextn: int = 0, nextn_accepted: float | None = None,
               ttft_target: float | None = None, tpot_target: float | None = None,
               options: GeneratorOptions | None = None, replay: bool = True,
               systems_path=None) -> str:
    """Writes the pick folder of ``row`` at ``save_dir`` (which must not exist); returns its
    path. ``total_gpus`` defaults to the row's ``num_total_gpus``; the replay compares with
    ``ttft_target`` / ``tpot_target`` (default: the row's estimate)."""
    options = options or GeneratorOptions.create()
    check_save_dir(os.path.dirname(os.path.abspath(os.fspath(save_dir))))
    if os.path.exists(save_dir):
        raise DeployError(f"--save-dir {os.fspath(save_dir)!r} exists already; the pick folder "
                          f"is created there, choose a new path")
    mode = mode or ("disagg" if "(d)parallel" in row or "(d)tp" in row else "agg")
    total = total_gpus or row.get("num_total_gpus")
    if not isinstance(total, int) or total < 1:
        raise DeployError("--gpus: the row has no num_total_gpus; give the GPU budget")
    for column in ("isl", "osl"):
        if not isinstance(row.get(column), int):
            raise DeployError(f"the row has no integer {column!r} column")
    _, _, is_moe = model_facts(row["model"])
    files, _ = pick_folder(
        row, mode, total_gpus=total, isl=row["isl"], osl=row["osl"],
        prefix=row.get("prefix") or 0, is_moe=is_moe, nextn=nextn,
        nextn_accepted=nextn_accepted, options=options, replay=replay,
        ttft_target=ttft_target if ttft_target is not None else row.get("ttft"),
        tpot_target=tpot_target if tpot_target is not None else row.get("tpot"),
        systems_path=systems_path)
    parent, name = os.path.split(os.path.abspath(os.fspath(save_dir)))
    return write_tree(parent, name, files)
