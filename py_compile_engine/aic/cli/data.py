"""``aic-compile data import`` and ``data show``: the vendored perf data."""

from __future__ import annotations

import json

import click

from ..json_output import dumps
from .common import (
    CONTEXT_SETTINGS,
    chosen_systems_path,
    partial_failure,
    refuse_unused,
    report_accepted_skips,
    text_table,
)


@click.group("data", context_settings=CONTEXT_SETTINGS)
def data_group():
    """Manage the vendored perf data."""


@data_group.command("import", context_settings=CONTEXT_SETTINGS)
@click.argument("src", type=click.Path(exists=True, file_okay=False))
@click.option("--dest", type=click.Path(file_okay=False), default=None,
              help="Destination data folder (default: <repo>/data).")
@click.option("--allow-partial", is_flag=True,
              help="Import the rest when some entries cannot be copied (symbolic links, "
                   "devices, FIFOs, unreadable or oversized files); they are listed and their "
                   "systems will not answer. Default: such an import fails and imports nothing.")
def data_import_cmd(src, dest, allow_partial):
    """Re-create data/systems and data/model_configs from SRC and write data/SHA256SUMS.

    SRC is an aic-data folder (systems/ + model_configs/) or an installed reference's systems/
    folder (model_configs/ beside it is used when present). Only regular files are copied
    (dot-files and Python files are passed over); an entry that cannot be copied fails the
    import, with the destination unchanged, unless --allow-partial.
    """
    from ..data_import import PartialImportError, import_data

    try:
        summary = import_data(src, dest, allow_partial=allow_partial)
    except PartialImportError as exc:
        raise partial_failure(exc) from None
    except (ValueError, OSError) as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(f"imported {summary.files} files ({', '.join(summary.trees)}) into {summary.dest}"
               f"{'; NOTICE copied' if summary.notice else ''}; wrote {summary.checksums.name}")
    report_accepted_skips(summary.skipped, "entries not imported (--allow-partial): their "
                                           "systems will not answer")


def _coverage_rows(coverage: dict) -> list[tuple]:
    """One row per table: name, family, rows, slices, dtypes, other keys, axes, versions."""
    rows = []
    for t in coverage["tables"]:
        if t["error"] is not None:
            rows.append((t["table"], t["family"], "-", "-", "not available", "", "", ""))
            continue
        dtype_keys = [k for k in t["keys"] if k["name"].endswith("quant") or k["name"] == "dtype"]
        dtypes = "; ".join(f"{k['name']}: {', '.join(map(str, k['values']))}" for k in dtype_keys)
        others = ", ".join(f"{k['name']} x{len(k['values'])}" for k in t["keys"] if k not in dtype_keys)
        axes = "; ".join(f"{a['name']} {a['min']}..{a['max']} x{a['count']}" for a in t["axes"])
        versions = ", ".join(dict.fromkeys(f"{s['framework']} {s['version']}" for s in t["sources"]
                                           if s["rows"] > 0))
        rows.append((t["table"], t["family"], t["rows"], t["slices"], dtypes, others, axes,
                     versions))
    return rows


def _slots_text(entry: dict) -> str:
    if entry["current"] is None:
        return "no perf data"
    slots = [f"current {entry['current']}"]
    if entry["previous"]:
        slots.append(f"previous {entry['previous']}")
    if entry["next"]:
        slots.append(f"next {entry['next']}")
    return ", ".join(slots)


def _show_systems(systems_path, as_json: bool, allow_partial: bool) -> None:
    """``data show`` without a system: every system with its backends and version slots. A
    folder without a readable system description is an error saying what a systems folder
    holds; one with some unreadable descriptions prints the listing (they read "unreadable"),
    then fails unless ``--allow-partial``."""
    from .. import paths
    from .._native import native
    from .common import SYSTEMS_FOLDER_HOLDS

    try:
        listing = json.loads(native().systems_catalogue_json(systems_path))
    except (ImportError, ValueError) as exc:
        raise click.ClickException(str(exc)) from None
    unreadable = [(f"{s['name']}.yaml", s["error"]) for s in listing if s["error"] is not None]
    if len(unreadable) == len(listing):
        folder = paths.systems_dir(systems_path)
        found = (f" ({len(unreadable)} YAML file(s), none a system description: "
                 f"{unreadable[0][0]}: {unreadable[0][1]})" if unreadable else "")
        raise click.ClickException(f"systems folder {folder!r} holds no system "
                                   f"description{found}; {SYSTEMS_FOLDER_HOLDS}")
    if as_json:
        click.echo(dumps({"schema": "aic-systems/1", "systems": listing}, indent=2))
        _judge_unreadable(unreadable, len(listing), allow_partial)
        return
    rows = []
    for s in listing:
        if s["error"] is not None:
            rows.append((s["name"], "-", "-", "-", f"unreadable: {s['error']}", "", ""))
            continue
        by = {b["backend"]: _slots_text(b) for b in s["backends"]}
        node = str(s["gpus_per_node"]) + (f" (rack {s['gpus_per_rack']})" if s["gpus_per_rack"] else "")
        rows.append((s["name"], "-" if s["sm_version"] is None else s["sm_version"], node,
                     f"{s['mem_capacity'] / 2**30:.0f}", by["trtllm"], by["sglang"], by["vllm"]))
    for line in text_table(rows, ("system", "sm", "GPUs/node", "GiB", "trtllm", "sglang", "vllm"),
                       "lrrrlll"):
        click.echo(line)
    without = [s["name"] for s in listing
               if s["error"] is None and all(b["current"] is None for b in s["backends"])]
    if without:
        click.echo("")
        click.echo(f"no perf data (hardware description only; estimates raise): {', '.join(without)}")
    _judge_unreadable(unreadable, len(listing), allow_partial)


def _judge_unreadable(unreadable: list, total: int, allow_partial: bool) -> None:
    """After the listing: unreadable system descriptions fail the command unless
    ``--allow-partial`` (then they are listed as a warning)."""
    from ..errors import PartialResultError

    if not unreadable:
        return
    if allow_partial:
        report_accepted_skips(unreadable, "system descriptions unreadable (--allow-partial)")
        return
    raise partial_failure(PartialResultError(
        f"{len(unreadable)} of {total} system descriptions cannot be read, so those systems "
        f"will not answer ({unreadable[0][0]}: {unreadable[0][1]}"
        f"{'; ...' if len(unreadable) > 1 else ''}); fix them, or pass --allow-partial to "
        f"accept the listing without them", unreadable))


@data_group.command("show", context_settings=CONTEXT_SETTINGS)
@click.argument("system", required=False)
@click.argument("backend", required=False)
@click.argument("version", required=False)
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output (schema "
              "aic-table-coverage/1).")
@click.option("--no-shared-layer", is_flag=True,
              help="Only the version's own files (no older versions or shared kernels).")
@click.option("--allow-partial", is_flag=True,
              help="Without SYSTEM: exit 0 when some system descriptions cannot be read (they "
                   "are listed as unreadable). Default: the listing is printed, then the "
                   "command fails.")
@click.option("--systems-path", "local_systems_path", default=None)
@click.pass_context
def data_show_cmd(ctx, system, backend, version, as_json, no_shared_layer, allow_partial,
                  local_systems_path):
    """List the shipped systems, or what each perf table of SYSTEM / BACKEND [VERSION] covers.

    With no SYSTEM: every system with its GPU facts and, per backend, the version slots a spec
    can be compiled for ("no perf data" where the system ships no tables for the backend).
    VERSION is a slot alias (current, previous, next) or a literal version; the default is the
    current slot. Per table: family, rows, slices, dtypes / quant modes, the other key
    components (distinct counts), each axis as min..max x distinct values, and the framework
    versions of the files that contributed rows (listed under "sources").
    """
    from .._native import native

    if system is None:
        refuse_unused(ctx, ("no_shared_layer",), "applies to the tables of SYSTEM BACKEND; the "
                                                 "list of systems has no tables: add SYSTEM "
                                                 "BACKEND or drop it")
        _show_systems(chosen_systems_path(ctx, local_systems_path), as_json, allow_partial)
        return
    refuse_unused(ctx, ("allow_partial",), "applies to the list of systems (no SYSTEM); one "
                                           "system's tables are read or fail: drop it")
    if backend is None:
        raise click.UsageError("give BACKEND with SYSTEM (or neither, to list every system)")
    try:
        mod = native()
    except ImportError as exc:
        raise click.ClickException(str(exc)) from None
    try:
        text = mod.table_coverage_json(chosen_systems_path(ctx, local_systems_path), system, backend,
                                       version, enable_shared_layer=not no_shared_layer)
    except ValueError as exc:
        raise click.ClickException(str(exc)) from None
    coverage = json.loads(text)
    if as_json:
        click.echo(dumps(coverage, indent=2))
        return
    layer = "off" if no_shared_layer else "on"
    click.echo(f"{coverage['system']} / {coverage['backend']} {coverage['version']} "
               f"(shared layer {layer}; {coverage['data_root']})")
    headers = ("table", "family", "rows", "slices", "dtypes", "other keys", "axes (min..max x n)",
               "versions")
    for line in text_table(_coverage_rows(coverage), headers, "llrrllll"):
        click.echo(line)
    click.echo("")
    click.echo("sources (rows kept):")
    for t in coverage["tables"]:
        if t["error"] is not None:
            click.echo(f"  {t['table']}: not available: {t['error']}")
        for src in t["sources"]:
            click.echo(f"  {t['table']}: {src['path']} ({src['rows']})")
