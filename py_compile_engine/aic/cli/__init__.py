"""``aic-compile``: the command line.

:func:`run` is the console script. A plain ``aic-compile sweep ...`` runs without importing
``click`` (:mod:`aic.cli.fastpath`: the sweep's options are declared once, as data, and parsed
strictly); every other command line goes through the click group :data:`main`
(:mod:`aic.cli.group`), which imports a command's module only when that command runs.
``from aic.cli import main`` gives the click group (for ``click.testing.CliRunner`` and
embedding); it is loaded on first use so that this package stays click-free.
"""

from __future__ import annotations

import sys

__all__ = ["COMMANDS", "LazyGroup", "main", "run"]


def run(args: list[str] | None = None) -> int:
    """The ``aic-compile`` console script: runs the command line ``args`` (default:
    ``sys.argv[1:]``) and returns the exit status."""
    args = sys.argv[1:] if args is None else list(args)
    if args[:1] == ["sweep"]:
        from .fastpath import CommandError, parse
        from .sweep_run import OPTIONS
        from .sweep_run import run as run_sweep

        params = parse(args[1:], OPTIONS)
        if params is not None:
            from .failure import failure_line, show_tracebacks

            try:
                run_sweep(params, None)
            except CommandError as exc:
                return _fail(str(exc))
            except KeyboardInterrupt:  # as click reports an interrupted command
                sys.stderr.write("\nAborted!\n")
                return 1
            except Exception as exc:  # noqa: BLE001 - no traceback for any input
                if show_tracebacks():
                    raise
                return _fail(failure_line(exc))
            return 0
    from .group import main as group

    return group.main(args)


def _fail(message: str) -> int:
    """click's own one-line ``Error: ...`` on stderr; exit status 1."""
    import click

    click.ClickException(message).show()
    return 1


def __getattr__(name: str):
    if name in ("COMMANDS", "LazyGroup", "main"):
        from . import group

        return getattr(group, name)
    raise AttributeError(f"module 'aic.cli' has no attribute {name!r}")
