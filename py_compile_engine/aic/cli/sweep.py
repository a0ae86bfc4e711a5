"""``aic-compile sweep`` (spec 50): the best deployments of a model on a GPU budget.

Runs :func:`aic.serving.sweep.sweep` and prints the Pareto fronts and the picks. Imports only
what the sweep needs: a fresh ``aic-compile sweep`` should cost little more than the same sweep
through the Python API (BENCHMARKS.md, "CLI overhead").
"""

from __future__ import annotations

import json
import sys
import threading
import time

import click

from .common import CONTEXT_SETTINGS, column_table

AGG_COLUMNS = ["parallel", "bs", "ctx_tokens", "ttft", "tpot", "tokens/s/user", "tokens/s/gpu",
               "tokens/s/gpu_cluster", "num_total_gpus", "memory"]
DISAGG_COLUMNS = ["(p)parallel", "(p)workers", "(d)parallel", "(d)bs", "(d)workers", "ttft",
                  "tpot", "tokens/s/user", "tokens/s/gpu", "tokens/s/gpu_cluster",
                  "num_total_gpus"]


def _ascii_plot(fronts: dict, width: int = 64, height: int = 16) -> list[str]:
    """The Pareto fronts as a character plot: tokens/s/gpu_cluster against tokens/s/user."""
    points = [(exp, r.get("tokens/s/user", 0.0), r.get("tokens/s/gpu_cluster", 0.0))
              for exp, rows in fronts.items() for r in rows]
    if not points:
        return []
    xmax = max(p[1] for p in points) or 1.0
    ymax = max(p[2] for p in points) or 1.0
    grid = [[" "] * width for _ in range(height)]
    marks = {"agg": "a", "disagg": "d"}
    for exp, x, y in points:
        col = min(width - 1, int(x / xmax * (width - 1)))
        row = height - 1 - min(height - 1, int(y / ymax * (height - 1)))
        grid[row][col] = marks.get(exp, "*") if grid[row][col] in (" ", marks.get(exp)) else "#"
    lines = [f"tokens/s/gpu_cluster (max {ymax:.1f})  a = agg, d = disagg, # = both"]
    lines.extend("|" + "".join(r) for r in grid)
    lines.append("+" + "-" * width)
    lines.append(f" tokens/s/user -> (max {xmax:.1f})")
    return lines


def _save_plot(fronts: dict, path: str) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise click.ClickException("--plot needs matplotlib (pip install matplotlib)") from None
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for exp, rows in fronts.items():
        xs = [r["tokens/s/user"] for r in rows]
        ys = [r["tokens/s/gpu_cluster"] for r in rows]
        ax.plot(xs, ys, marker="o", label=exp)
    ax.set_xlabel("tokens/s/user")
    ax.set_ylabel("tokens/s/gpu (cluster)")
    ax.legend()
    ax.grid(True, alpha=0.3)
    fig.tight_layout()
    fig.savefig(path)


@click.command("sweep", context_settings=CONTEXT_SETTINGS)
@click.argument("model")
@click.option("--system", "-s", required=True, help="System name, e.g. h200_sxm.")
@click.option("--backend", "-b", default="trtllm", show_default=True, help="trtllm, vllm or sglang.")
@click.option("--backend-version", default=None, help="Default: the current slot.")
@click.option("--gpus", "total_gpus", type=click.IntRange(min=1), required=True,
              help="GPU budget.")
@click.option("--isl", type=click.IntRange(min=1), default=4000, show_default=True)
@click.option("--osl", type=click.IntRange(min=1), default=1000, show_default=True)
@click.option("--prefix", type=click.IntRange(min=0), default=0, show_default=True)
@click.option("--ttft", type=float, default=2000.0, show_default=True, help="TTFT target, ms.")
@click.option("--tpot", type=float, default=30.0, show_default=True, help="TPOT target, ms.")
@click.option("--request-latency", type=float, default=None,
              help="End-to-end latency target, ms (replaces the TPOT target).")
@click.option("--nextn", type=int, default=0, show_default=True, help="MTP draft length.")
@click.option("--nextn-accepted", type=float, default=None)
@click.option("--top-n", type=click.IntRange(min=1), default=5, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="The whole result as JSON.")
@click.option("--plot", "plot_file", default=None,
              help="Save the Pareto fronts to FILE.png|svg (needs matplotlib).")
@click.option("--no-terminal-plot", is_flag=True, help="Do not draw the fronts in the terminal.")
@click.pass_context
def sweep_cmd(ctx, model, system, backend, backend_version, total_gpus, isl, osl, prefix, ttft,
              tpot, request_latency, nextn, nextn_accepted, top_n, as_json, plot_file,
              no_terminal_plot):
    """Best deployments of MODEL on a GPU budget: agg and disagg sweeps, Pareto fronts, picks."""
    from ..serving.sweep import sweep

    done = threading.Event()

    def spinner():
        start = time.monotonic()
        while not done.wait(0.5):
            if sys.stderr.isatty():
                sys.stderr.write(f"\rsweeping... {time.monotonic() - start:.1f} s")
                sys.stderr.flush()
        if sys.stderr.isatty() and time.monotonic() - start > 0.5:
            sys.stderr.write("\r" + " " * 30 + "\r")

    thread = threading.Thread(target=spinner, daemon=True)
    thread.start()
    started = time.monotonic()
    try:
        out = sweep(model, total_gpus, system, backend, backend_version, isl=isl, osl=osl,
                    prefix=prefix, ttft=ttft, tpot=tpot, request_latency=request_latency,
                    nextn=nextn, nextn_accepted=nextn_accepted, top_n=top_n,
                    systems_path=ctx.obj.get("systems_path"))
    except (ValueError, RuntimeError) as exc:
        raise click.ClickException(f"{type(exc).__name__}: {exc}") from None
    finally:
        done.set()
        thread.join()
    elapsed = time.monotonic() - started
    if plot_file:
        _save_plot(out["pareto_fronts"], plot_file)
    if as_json:
        click.echo(json.dumps(out, indent=2))
        return
    click.echo(f"{model}, {total_gpus} x {system}, {backend}: isl {isl}, osl {osl}, "
               f"TTFT <= {ttft:g} ms, " + (f"request latency <= {request_latency:g} ms"
                                            if request_latency else f"TPOT <= {tpot:g} ms")
               + f"  ({elapsed:.2f} s)")
    for exp, rows in out["best_configs"].items():
        columns = DISAGG_COLUMNS if exp == "disagg" else AGG_COLUMNS
        n = len(out["candidates"].get(exp, []))
        click.echo("")
        click.echo(f"{exp}: best configs ({n} candidates, Pareto front "
                   f"{len(out['pareto_fronts'].get(exp, []))})")
        if out["outcomes"].get(exp):
            click.echo(f"  {out['outcomes'][exp]}")
        for line in column_table(rows, columns):
            click.echo("  " + line)
    click.echo("")
    click.echo(f"chosen: {out['chosen_exp']} "
               f"({out['best_throughputs'][out['chosen_exp']]:.3f} tokens/s/gpu)")
    if not no_terminal_plot:
        click.echo("")
        for line in _ascii_plot(out["pareto_fronts"]):
            click.echo(line)
