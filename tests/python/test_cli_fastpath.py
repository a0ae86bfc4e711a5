"""The click-free path of ``aic-compile sweep`` (aic.cli.fastpath): it parses what click parses,
to the same values, runs the same command with the same output, and leaves everything else to
click."""

from __future__ import annotations

import json
import subprocess
import sys

import click
import pytest
from click.testing import CliRunner
from conftest import native_available
from hypothesis import given, settings
from hypothesis import strategies as st

from aic.cli import main, run
from aic.cli.fastpath import parse
from aic.cli.sweep import sweep_cmd
from aic.cli.sweep_run import OPTIONS

SWEEP = ["Qwen/Qwen3-8B", "--system", "h100_sxm", "--backend", "vllm", "--gpus", "2",
         "--top-n", "2"]

_FLAGS = [flag for o in OPTIONS for flag in o.flags]
_VALUES = st.sampled_from(["8", "1", "0", "-1", "+3", "2.5", "1e3", "inf", "nan", "abc", "",
                           "h200_sxm", "vllm", "-s", "--gpus", "=4", "4=", " 7"])
_ITEM = st.one_of(  # one or two command-line tokens
    st.tuples(st.sampled_from(_FLAGS + ["--help", "-h", "--", "-", "--bogus", "-sh200_sxm",
                                        "--gpu"])),
    st.tuples(_VALUES),
    st.tuples(st.sampled_from(_FLAGS), _VALUES),
    st.builds(lambda f, v: (f"{f}={v}",), st.sampled_from(_FLAGS), _VALUES),
)


def _click_params(args: list[str]) -> dict | None:
    """What click makes of ``sweep ARGS`` (``None`` where click refuses them)."""
    try:
        with sweep_cmd.make_context("sweep", list(args)) as ctx:
            return dict(ctx.params)
    except (click.exceptions.Exit, click.ClickException):
        return None


def _typed(params: dict | None) -> dict | None:
    """Comparable values: type and repr (a NaN is not equal to itself)."""
    return None if params is None else {k: (type(v), repr(v)) for k, v in params.items()}


@settings(max_examples=500, deadline=None)
@given(st.lists(_ITEM, max_size=6), st.permutations(SWEEP[:7]))
def test_the_fast_parser_agrees_with_click(items, plain):
    tokens = [token for item in items for token in item]
    for args in (tokens, list(plain) + tokens, tokens + list(plain)):
        fast = parse(args, OPTIONS)
        if fast is not None:
            assert _typed(_click_params(args)) == _typed(fast), args


@pytest.mark.parametrize("args", [
    SWEEP,
    ["--gpus=8", "Qwen/Qwen3-32B", "-s", "h200_sxm", "--json", "--ttft", "500",
     "--request-latency", "9000.5", "--no-terminal-plot", "--plot", "out.png"],
    ["m", "-s", "x", "--gpus", "1", "--gpus", "4", "--prefix", "0", "--nextn", "1",
     "--nextn-accepted", "0.7", "--backend-version", "0.11.0"],
    ["m", "-s", "x", "--gpus", "8", "--save-dir", "out", "--set", "rule=benchmark",
     "--deployment-target", "llm-d-helm", "--set=WorkerConfig.agg_workers=2", "--no-replay"],
])
def test_plain_command_lines_take_the_fast_path(args):
    fast = parse(args, OPTIONS)
    assert fast is not None and _typed(fast) == _typed(_click_params(args))


@pytest.mark.parametrize("args", [
    ["--help"], ["m"], ["m", "-s", "x", "--gpus", "0"], ["m", "n", "-s", "x", "--gpus", "1"],
    ["m", "-s", "x", "--gpus", "1", "--ttft", "-5"], ["m", "-sx", "--gpus", "1"],
    ["m", "-s", "x", "--gpus", "1", "--json=1"], ["m", "-s", "x", "--gpus"],
])
def test_anything_else_is_left_to_click(args):
    assert parse(args, OPTIONS) is None


@pytest.mark.engine
@pytest.mark.skipif(not native_available(), reason="needs the native module")
def test_the_fast_path_prints_what_the_click_command_prints(capsys):
    assert run(["sweep", *SWEEP]) == 0
    fast = capsys.readouterr().out
    result = CliRunner().invoke(main, ["sweep", *SWEEP], catch_exceptions=False)
    assert result.exit_code == 0
    drop_elapsed = lambda text: [line.rsplit("  (", 1)[0] for line in text.splitlines()]  # noqa: E731
    assert drop_elapsed(fast) == drop_elapsed(result.output)
    assert "chosen: " in fast


@pytest.mark.engine
@pytest.mark.skipif(not native_available(), reason="needs the native module")
def test_a_failed_sweep_is_one_error_line_on_both_paths(capsys):
    args = ["sweep", "no/such-model", "-s", "h100_sxm", "--gpus", "2"]
    assert run(args) == 1
    fast = capsys.readouterr()
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 1
    assert fast.out == "" and fast.err.startswith("Error: ValueError: model 'no/such-model'")
    assert fast.err == result.output


@pytest.mark.engine
@pytest.mark.skipif(not native_available(), reason="needs the native module")
def test_the_console_script_runs_a_sweep_without_click():
    code = ("import json, sys\nfrom aic.cli import run\nstatus = run(sys.argv[1:])\n"
            "print(json.dumps([status, 'click' in sys.modules]))")
    out = subprocess.run([sys.executable, "-c", code, "sweep", *SWEEP, "--json"],
                         capture_output=True, text=True, check=True)
    *sweep_json, last = out.stdout.strip().splitlines()
    assert json.loads(last) == [0, False]
    assert json.loads("\n".join(sweep_json))["chosen_exp"] in ("agg", "disagg")
