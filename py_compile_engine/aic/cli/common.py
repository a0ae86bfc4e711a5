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
    chosen = local or (ctx.find_root().obj or {}).get("systems_path")
    check_systems_folder(chosen)
    return chosen


def check_systems_folder(path: str | None) -> None:
    """An explicit systems root must be a folder: a missing one gave empty answers ("0 cells",
    every row unpredicted) instead of an error."""
    import os

    if path and not os.path.isdir(path):
        import click

        raise click.BadParameter(f"{path!r} is not a folder; pass the folder that holds the "
                                 f"<system>.yaml files (the shipped one is data/systems)",
                                 param_hint="--systems-path")


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
