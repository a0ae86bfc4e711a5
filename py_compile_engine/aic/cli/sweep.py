"""``aic-compile sweep`` (spec 50): the click command of :mod:`aic.cli.sweep_run`."""

from __future__ import annotations

import click

from .common import CONTEXT_SETTINGS, chosen_systems_path
from .fastpath import CommandError, click_params
from .sweep_run import OPTIONS, run


@click.command("sweep", context_settings=CONTEXT_SETTINGS, params=click_params(OPTIONS))
@click.pass_context
def sweep_cmd(ctx: click.Context, **params) -> None:
    """Best deployments of MODEL on a GPU budget: agg and disagg sweeps, Pareto fronts, picks."""
    try:
        run(params, chosen_systems_path(ctx, None))
    except CommandError as exc:
        raise click.ClickException(str(exc)) from None
