"""The ``aic-compile`` click group: every command by name, its module imported on dispatch.

Each command lives in its own module of :mod:`aic.cli` (``engine``: compile, estimate,
breakdown; ``sweep``, ``memory``, ``parity``, ``replay``, ``export``, ``support``, ``data``, ``accuracy``:
accuracy, calibrate). The group knows every command's name and one-line help from :data:`COMMANDS` and
imports a command's module only when that command runs (or shows its own help): a command pays
for ``click`` and its own imports, not for every other command's.
"""

from __future__ import annotations

import click

from .. import paths
from .common import CONTEXT_SETTINGS

#: ``name -> (module of aic.cli, attribute, one-line help)``. The one-line help is what
#: ``aic-compile --help`` lists; it is also set on the command when its module is loaded.
COMMANDS = {
    "accuracy": ("accuracy", "accuracy_cmd",
                 "How close the serving estimates are to measured deployments."),
    "breakdown": ("engine", "breakdown_cmd",
                  "Per-op latencies of a static run, sorted by latency."),
    "calibrate": ("accuracy", "calibrate_cmd",
                  "Fit the calibrated estimate's constants on measured rows."),
    "compile": ("engine", "compile_cmd", "Compile MODEL into a spec file (.aicspec or JSON)."),
    "data": ("data", "data_group", "Manage the vendored perf data."),
    "deploy": ("deploy", "deploy_cmd",
               "Deployment files of one chosen sweep row, without a sweep."),
    "exp": ("planning", "exp_cmd", "Run the experiments of FILE.yaml side by side."),
    "estimate": ("engine", "estimate_cmd",
                 "Step latencies of one batch shape; with --mode, serving level."),
    "export": ("export", "export_group",
               "Write aic's timing as Dynamo's mocker and planner files."),
    "memory": ("memory", "memory_cmd", "Per-GPU memory split and KV-cache capacity of MODEL."),
    "parity": ("parity", "parity_cmd",
               "Compare compile output and engine answers with the goldens."),
    "recommend": ("planning", "recommend_cmd",
                  "The fewest GPUs that serve MODEL at a load target."),
    "replay": ("replay", "replay_cmd",
               "Replay a workload: latency percentiles, queue, KV usage, energy."),
    "support": ("support", "support_cmd",
                "Which model answers on which system and backend."),
    "sweep": ("sweep", "sweep_cmd", "Best deployments of MODEL on a GPU budget."),
}


class LazyGroup(click.Group):
    """A click group whose commands are imported on dispatch (see the module docstring)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        entry = COMMANDS.get(cmd_name)
        if entry is None:
            return None
        module_name, attribute, short_help = entry
        from importlib import import_module

        command = getattr(import_module(f".{module_name}", __package__), attribute)
        command.short_help = short_help
        return command

    def invoke(self, ctx: click.Context):
        """Runs the command; a failure it did not report itself becomes one ``Error:`` line and
        exit status 1 (:mod:`aic.cli.failure`), whatever the command and the input."""
        from .failure import failure_line, show_tracebacks

        try:
            return super().invoke(ctx)
        except (click.exceptions.ClickException, click.exceptions.Exit, click.exceptions.Abort):
            raise
        except Exception as exc:  # noqa: BLE001 - the point: no traceback for any input
            if show_tracebacks():
                raise
            raise click.ClickException(failure_line(exc)) from None

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The command list of ``--help``, from :data:`COMMANDS` (no command module imported)."""
        with formatter.section("Commands"):
            formatter.write_dl([(name, entry[2]) for name, entry in sorted(COMMANDS.items())])


def _print_version(ctx: click.Context, _param, value: bool) -> None:
    """``--version``: the distribution version is looked up only when asked for (reading it
    imports ``importlib.metadata``, a large share of the CLI's start-up otherwise)."""
    if not value or ctx.resilient_parsing:
        return
    from .. import __version__

    click.echo(f"aic-compile {__version__}")
    ctx.exit()


@click.group(cls=LazyGroup, context_settings=CONTEXT_SETTINGS)
@click.option("--systems-path", default=None,
              help=f"Systems root (default: ${paths.SYSTEMS_ENV}, else the packaged data, else "
                   f"the source checkout's data/systems). Given explicitly, it is also recorded "
                   f"in compiled specs.")
@click.option("--version", is_flag=True, expose_value=False, is_eager=True, callback=_print_version,
              help="Show the version and exit.")
@click.pass_context
def main(ctx: click.Context, systems_path: str | None) -> None:
    """aic front end: compile EngineSpecs and query the native engine."""
    ctx.ensure_object(dict)
    ctx.obj["systems_path"] = systems_path


__all__ = ["COMMANDS", "LazyGroup", "main"]
