"""What the ``aic-compile`` command modules share: click settings, the systems root a command
uses, and plain-text tables. Light on purpose (``aic.paths`` only, ``click`` where a function
raises a click error): every command imports it, the click-free sweep path too."""

from __future__ import annotations

from .. import paths

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing
if TYPE_CHECKING:
    import click

CONTEXT_SETTINGS = {"help_option_names": ["-h", "--help"], "max_content_width": 100}

#: Integer flags are unsigned 32-bit in the engine: larger values are refused by name.
U32_MAX = 2**32 - 1


def chosen_systems_path(ctx: click.Context, local: str | None) -> str | None:
    """The subcommand's ``--systems-path``, else the group's; ``None`` lets the library apply its
    default search (``AIC_SYSTEMS_PATH``, packaged data, source checkout)."""
    import os

    chosen = local or (ctx.find_root().obj or {}).get("systems_path")
    if chosen:
        check_systems_folder(chosen)
    elif os.environ.get(paths.SYSTEMS_ENV):
        check_systems_folder(os.environ[paths.SYSTEMS_ENV], paths.SYSTEMS_ENV)
    return chosen


#: What a systems folder holds, for the messages about a folder that is not one.
SYSTEMS_FOLDER_HOLDS = ("a systems folder holds one <system>.yaml per system (its gpu: and "
                        "node: sections) and the perf tables under data/; pass that folder "
                        "(the shipped one is data/systems)")


def check_systems_folder(path: str | None, hint: str = "--systems-path") -> None:
    """An explicit systems root must be a folder holding system descriptions: a missing one
    gave empty answers ("0 cells", every row unpredicted), an empty or foreign one (the data
    folder above it, a model-config folder) an empty table and exit status 0."""
    import os

    if not path:
        return
    if not os.path.isdir(path):
        import click

        raise click.BadParameter(f"{path!r} is not a folder; pass the folder that holds the "
                                 f"<system>.yaml files (the shipped one is data/systems)",
                                 param_hint=hint)
    if not paths.holds_system_files(path):
        import click

        raise click.BadParameter(f"{path!r} holds no system description (no <system>.yaml); "
                                 f"{SYSTEMS_FOLDER_HOLDS}", param_hint=hint)


def given_options(ctx: click.Context, names) -> list[str]:
    """The flags (``--stride``) of the parameters among ``names`` that the user gave on the
    command line or through the environment, not left at their defaults."""
    from click.core import ParameterSource

    flags = []
    for param in ctx.command.params:
        if param.name not in names:
            continue
        source = ctx.get_parameter_source(param.name)
        if source in (ParameterSource.COMMANDLINE, ParameterSource.ENVIRONMENT,
                      ParameterSource.PROMPT):
            flags.append(max(param.opts, key=len) if param.opts else param.name)
    return flags


def refuse_unused(ctx: click.Context, names, reason: str) -> None:
    """An option given where it has no effect is a usage error naming it and ``reason``
    (``"{flag} applies to ..."``), never silently dropped."""
    import click

    flags = given_options(ctx, names)
    if flags:
        raise click.UsageError(f"{', '.join(flags)} {reason}", ctx=ctx)


def report_skips(skipped: list) -> None:
    """One ``skipped <input>: <reason>`` line on stderr per input a command left out."""
    import sys

    for item, reason in skipped:
        sys.stderr.write(f"skipped {item}: {reason}\n")


def partial_failure(exc) -> click.ClickException:
    """The failure of a command over many inputs that could not process some of them
    (:class:`aic.errors.PartialResultError`): each input left out on its own line, then the one
    ``Error:`` line (exit status 1). ``--allow-partial`` accepts such a result instead."""
    import click

    report_skips(exc.skipped)
    return click.ClickException(str(exc))


def report_accepted_skips(skipped: list, what: str) -> None:
    """The inputs a command left out with ``--allow-partial``: listed, then counted, on stderr
    (the exit status stays 0: the user accepted a partial result)."""
    import sys

    if not skipped:
        return
    report_skips(skipped)
    sys.stderr.write(f"warning: {len(skipped)} {what}\n")


def engine_systems_path(explicit: str | None) -> str:
    """The systems root an engine loads from (``explicit`` or the default search); a missing
    root is a one-line CLI error."""
    import click

    try:
        return str(paths.systems_path(explicit))
    except ValueError as exc:
        raise click.ClickException(str(exc)) from None


def text_table(rows: list[tuple], headers: tuple, aligns: str) -> list[str]:
    """``rows`` under ``headers`` as aligned text lines; ``aligns`` has one ``l`` (left) or ``r``
    (right) per column."""
    cells = [tuple(str(c) for c in headers)] + [tuple(str(c) for c in row) for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]

    def fmt(row):
        parts = []
        for i, text in enumerate(row):
            parts.append(text.ljust(widths[i]) if aligns[i] == "l" else text.rjust(widths[i]))
        return "  ".join(parts).rstrip()

    out = [fmt(cells[0]), "  ".join("-" * w for w in widths)]
    out += [fmt(r) for r in cells[1:]]
    return out


def number(value, digits: int = 4) -> str:
    """``value`` with thousands separators and ``digits`` decimals; ``None`` reads "error"."""
    if value is None:
        return "error"
    return f"{value:,.{digits}f}"


def cell(value) -> str:
    """A serving figure as table text: floats to three decimals, ``None`` as ``-``."""
    if isinstance(value, float):
        return f"{value:.3f}"
    return "-" if value is None else str(value)


def column_table(rows: list[dict], columns: list[str]) -> list[str]:
    """The ``columns`` of ``rows`` (dicts) as right-aligned text lines under a header."""
    cells = [[cell(r.get(c)) for c in columns] for r in rows]
    widths = [max([len(c)] + [len(row[i]) for row in cells]) for i, c in enumerate(columns)]
    out = ["  ".join(c.rjust(w) for c, w in zip(columns, widths))]
    out.append("  ".join("-" * w for w in widths))
    out.extend("  ".join(v.rjust(w) for v, w in zip(row, widths)) for row in cells)
    return out
