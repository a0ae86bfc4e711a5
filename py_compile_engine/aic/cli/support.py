"""``aic-compile support``: which model answers on which system and backend."""

from __future__ import annotations

import click

from ..json_output import dumps
from .common import (
    CONTEXT_SETTINGS,
    U32_MAX,
    chosen_systems_path,
    number,
    partial_failure,
    refuse_unused,
    report_accepted_skips,
    text_table,
)


@click.command("support", context_settings=CONTEXT_SETTINGS)
@click.argument("model", required=False)
@click.option("--system", "-s", "systems", multiple=True,
              help="Only this system (repeatable; default: every shipped system).")
@click.option("--backend", "-b", "backends", multiple=True,
              type=click.Choice(("trtllm", "sglang", "vllm")),
              help="Only this backend (repeatable; default: all three).")
@click.option("--tp", type=click.IntRange(min=1, max=U32_MAX), default=1, show_default=True,
              help="Tensor-parallel size of the probe (MoE models put their experts on EP).")
@click.option("--only-failures", is_flag=True, help="List only the cells that do not answer.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output (schema "
              "aic-support/1).")
@click.option("--allow-partial", is_flag=True,
              help="Exit 0 when a model config or system description cannot be read (its "
                   "cells say so). Default: the matrix is printed, then such inputs are listed "
                   "and the command fails.")
@click.option("--systems-path", "local_systems_path", default=None)
@click.pass_context
def support_cmd(ctx, model, systems, backends, tp, only_failures, as_json, allow_partial,
                local_systems_path):
    """Which model answers on which system and backend, asked of the engine itself.

    For MODEL (default: every shipped model) on every system x backend at its default version,
    compiles a spec and runs a prefill (1 x 1024 tokens) and a decode (1 x 1024, 2 tokens)
    estimate. Each cell prints the two latencies, or the one-line reason it does not answer:
    unsupported-architecture, no-perf-data, missing-flops, missing-data (a table, slice or
    anchor), invalid-deployment.
    """
    from ..serving.support import (
        DECODE_PROBE,
        PREFILL_PROBE,
        summary_counts,
        support_matrix,
        unreadable_inputs,
    )

    if as_json:
        refuse_unused(ctx, ("only_failures",), "filters the text table; --json lists every "
                                               "cell: drop one of them")
    systems_path = chosen_systems_path(ctx, local_systems_path)
    try:
        cells = support_matrix([model] if model else None, systems or None, backends or None,
                               tp=tp, systems_path=systems_path)
    except ValueError as exc:
        raise click.ClickException(str(exc)) from None
    counts = summary_counts(cells)
    if as_json:
        click.echo(dumps({
            "schema": "aic-support/1", "tp": tp,
            "probe": {"prefill": list(PREFILL_PROBE), "decode": list(DECODE_PROBE)},
            "counts": counts, "cells": [c.as_dict() for c in cells],
        }, indent=2))
        _judge_unread(unreadable_inputs(cells), allow_partial)
        return
    shown = [c for c in cells if not (only_failures and c.status == "ok")]
    rows = [(c.model, c.system, c.backend, c.version or "-", c.status,
             number(c.prefill_ms, 3) if c.status == "ok" else "",
             number(c.decode_ms, 3) if c.status == "ok" else "", c.reason) for c in shown]
    for line in text_table(rows, ("model", "system", "backend", "version", "status", "prefill ms",
                              "decode ms", "reason"), "lllllrrl"):
        click.echo(line)
    click.echo("")
    click.echo(f"{len(cells)} cells: " + ", ".join(f"{n} {k}" for k, n in counts.items()))
    _judge_unread(unreadable_inputs(cells), allow_partial)


def _judge_unread(unread: list, allow_partial: bool) -> None:
    """After the matrix: the inputs it could not read fail the command (listed, then one
    ``Error:`` line) unless ``--allow-partial``, which lists them as a warning."""
    from ..errors import PartialResultError

    if not unread:
        return
    if allow_partial:
        report_accepted_skips(unread, "inputs not read (--allow-partial): their cells have no "
                                      "answer")
        return
    raise partial_failure(PartialResultError(
        f"{len(unread)} input(s) could not be read, so their cells have no answer "
        f"({'; '.join(f'{i}: {r}' for i, r in unread[:2])}{'; ...' if len(unread) > 2 else ''}); "
        f"fix them, or pass --allow-partial to accept the matrix without them", unread))
