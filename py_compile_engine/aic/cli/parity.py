"""``aic-compile parity``: compile output and engine answers against the golden corpus."""

from __future__ import annotations

import functools
import sys

import click

from ..json_output import dumps
from .common import CONTEXT_SETTINGS, chosen_systems_path

@click.command("parity", context_settings=CONTEXT_SETTINGS)
@click.option("--goldens", "goldens_dir", type=click.Path(exists=True), required=True,
              help="Folder of golden *.json files (or one file).")
@click.option("--family", default=None,
              help="Only cases whose family is this (dense, moe, mla, edge).")
@click.option("--model-family", default=None,
              help="Only cases of this reference family label (LLAMA, MOE, DEEPSEEK).")
@click.option("--case", "case_substr", default=None, help="Only case ids containing this.")
@click.option("--rtol", type=float, default=1e-9, show_default=True,
              help="Relative tolerance of the query answers.")
@click.option("--json", "as_json", is_flag=True,
              help="Print the report as one JSON line (the summary line still comes last).")
@click.option("--systems-path", "local_systems_path", default=None)
@click.pass_context
def parity_cmd(ctx, goldens_dir, family, model_family, case_substr, rtol, as_json,
               local_systems_path):
    """Compare compile output and engine answers with the golden corpus.

    The last line is exactly `N passed, M failed`; the exit status is 1 on any failure.
    """
    from ..parity import runner as parity

    from ..validation import check_rtol

    try:
        check_rtol(rtol)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--rtol") from None
    systems_path = chosen_systems_path(ctx, local_systems_path)
    try:
        cases = parity.select_cases(parity.load_cases(goldens_dir), family, case_substr,
                                    model_family)
    except ValueError as exc:
        raise click.ClickException(str(exc)) from None
    progress = None
    if sys.stdout.isatty() and not as_json:
        progress = functools.partial(click.progressbar, label="parity", file=sys.stderr,
                                     item_show_func=lambda c: c["id"] if c else "")
    report = parity.run_parity(cases, rtol=rtol, systems_path=systems_path, progress=progress)
    if as_json:
        click.echo(dumps(report.to_json()))
        click.echo(report.summary_line())
    else:
        for line in parity.format_report(report):
            click.echo(line)
    if report.failed or not report.checks:
        ctx.exit(1)
