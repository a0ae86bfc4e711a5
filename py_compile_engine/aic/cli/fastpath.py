"""The click-free path of a hot command: its options declared once as data, the click command
built from them, and a strict parser of the same options that runs the command without importing
``click`` when every argument is plain (``aic-compile sweep``: BENCHMARKS.md, "CLI overhead";
importing click costs a fresh process about as much as starting the interpreter does).

The parser accepts a subset of what click accepts and agrees with click on it (tests check the
two on generated command lines): ``--name value``, ``--name=value``, ``-x value``, flags,
positionals, the last of a repeated option. Anything else — help, an unknown or malformed
option, a value out of range, a missing required option, a value that starts with ``-`` —
returns ``None`` and the command line goes through click, which gives its usual messages.
"""

from __future__ import annotations

from collections import namedtuple

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing
if TYPE_CHECKING:
    import click

#: One parameter of a command. ``flags`` empty: a positional argument. ``kind``: ``"str"``,
#: ``"int"``, ``"float"``, ``"flag"`` or ``"multi"`` (a repeatable string option, collected in
#: order into a tuple); ``minimum``: the smallest accepted int (``None``: any).
Option = namedtuple("Option", "name flags kind default required minimum help",
                    defaults=(None, False, None, None))


class CommandError(Exception):
    """A failure a command reports as one line, ``Error: <message>``, with exit status 1
    (a ``click.ClickException`` on the click path)."""


def _convert(option: Option, text: str):
    """``text`` as the option's value, or ``None`` where click would refuse it."""
    if option.kind in ("str", "multi"):
        return text
    try:
        value = int(text) if option.kind == "int" else float(text)
    except ValueError:
        return None
    if option.minimum is not None and value < option.minimum:
        return None
    return value


def parse(args: list[str], options: tuple[Option, ...]) -> dict | None:
    """``{name: value}`` for a plain command line, else ``None`` (see the module docstring)."""
    values = {o.name: (() if o.kind == "multi" else o.default) for o in options}
    given = set()
    by_flag = {flag: o for o in options for flag in o.flags}
    positionals = [o for o in options if not o.flags]
    position = 0
    i = 0
    while i < len(args):
        arg = args[i]
        i += 1
        if arg.startswith("-"):
            flag, eq, text = arg.partition("=")
            option = by_flag.get(flag)
            if option is None or (eq and not flag.startswith("--")):
                return None
            if option.kind == "flag":
                if eq:
                    return None
                values[option.name] = True
                continue
            if not eq:
                if i == len(args):
                    return None
                text = args[i]
                i += 1
            if text.startswith("-"):
                return None
        else:
            if position == len(positionals):
                return None
            option, text = positionals[position], arg
            position += 1
        value = _convert(option, text)
        if value is None:
            return None
        if option.kind == "multi":
            value = values[option.name] + (value,)
        values[option.name] = value
        given.add(option.name)
    if any(o.required and o.name not in given for o in options):
        return None
    return values


def click_params(options: tuple[Option, ...]) -> list[click.Parameter]:
    """The click parameters of ``options`` (the click path of the same command)."""
    import click

    params: list[click.Parameter] = []
    for o in options:
        if o.kind == "flag":
            params.append(click.Option([*o.flags, o.name], is_flag=True, help=o.help))
            continue
        if o.kind == "multi":
            params.append(click.Option([*o.flags, o.name], type=click.STRING, multiple=True,
                                       help=o.help))
            continue
        kind = {"str": click.STRING, "float": click.FLOAT}.get(o.kind) or (
            click.INT if o.minimum is None else click.IntRange(min=o.minimum))
        if not o.flags:
            params.append(click.Argument([o.name], type=kind, required=o.required))
        else:
            params.append(click.Option([*o.flags, o.name], type=kind, default=o.default,
                                       required=o.required, help=o.help,
                                       show_default=o.default is not None))
    return params
