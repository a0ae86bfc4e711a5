"""``aic-compile estimate --mode static|agg|disagg`` and ``aic-compile sweep`` (spec 50).

Registered on the ``aic-compile`` group by :mod:`aic.cli` (one import line there): the
existing step-level ``estimate`` command gains serving options and, with ``--mode``, answers
at the serving level through :func:`aic.serving.estimate`; ``sweep`` runs
:func:`aic.serving_sweep.sweep` and prints the Pareto fronts and the picks.
"""

from __future__ import annotations

import json
import sys
import threading
import time

import click

from .engine import CONTEXT_SETTINGS, main

_SERVING_OPTIONS = [
    click.Option(["--mode"], type=click.Choice(["static", "static_ctx", "static_gen", "agg",
                                                 "disagg"]),
                 default=None, help="Serving-level estimate (spec 50): static, static_ctx, "
                                    "static_gen, agg or disagg. Without it: step latencies."),
    click.Option(["--nextn-accepted"], type=float, default=None,
                 help="MTP: average accepted draft tokens per step (required with --nextn)."),
    click.Option(["--stride"], type=click.IntRange(min=1), default=32, show_default=True,
                 help="Static modes: decode quadrature stride."),
    click.Option(["--free-gpu-memory-fraction"], type=float, default=None,
                 help="KV-cache memory fraction (agg, disagg)."),
    click.Option(["--max-seq-len"], type=click.IntRange(min=1), default=None,
                 help="KV length per request (agg trtllm, disagg)."),
]
_ROLE_KEYS = ("tp", "pp", "dp", "moe-tp", "moe-ep", "batch", "workers")
for _role in ("prefill", "decode"):
    for _key in _ROLE_KEYS:
        _SERVING_OPTIONS.append(click.Option([f"--{_role}-{_key}"], type=click.IntRange(min=0),
                                             default=None,
                                             help=f"disagg: {_role} {_key} (default: shared)."))

_SERVING_OPTIONS.append(click.Option(
    ["--calibrated"], is_flag=True, default=False,
    help="agg / disagg: the calibrated estimate (closer to measured deployments, see "
         "ACCURACY.md) instead of parity with the reference."))
_SERVING_OPTIONS.append(click.Option(
    ["--concurrency"], type=click.IntRange(min=1), default=None,
    help="--calibrated: total requests in flight (default: from the batch sizes)."))
_SERVING_OPTIONS.append(click.Option(
    ["--calibration", "calibration_file"], type=click.Path(dir_okay=False), default=None,
    help="--calibrated: a constants file in the data/calibration/serving.json layout (default: "
         "the shipped constants, fitted on the measured sample of ACCURACY.md)."))

_ROLE_ARG = {"tp": "tp_size", "pp": "pp_size", "dp": "attention_dp_size", "moe-tp": "moe_tp_size",
             "moe-ep": "moe_ep_size", "batch": "batch_size", "workers": "num_workers"}


def _fmt(value) -> str:
    if isinstance(value, float):
        return f"{value:.3f}"
    return "-" if value is None else str(value)


def _table(rows: list[dict], columns: list[str]) -> list[str]:
    cells = [[_fmt(r.get(c)) for c in columns] for r in rows]
    widths = [max([len(c)] + [len(row[i]) for row in cells]) for i, c in enumerate(columns)]
    out = ["  ".join(c.rjust(w) for c, w in zip(columns, widths))]
    out.append("  ".join("-" * w for w in widths))
    out.extend("  ".join(v.rjust(w) for v, w in zip(row, widths)) for row in cells)
    return out


def _serving_estimate(ctx, model, kwargs) -> None:
    from ..serving.deployment import estimate

    if not model or not kwargs.get("system") or not kwargs.get("backend"):
        raise click.UsageError("--mode needs MODEL, --system and --backend")
    args = {
        "mode": kwargs["mode"], "backend_name": kwargs["backend"],
        "backend_version": kwargs.get("backend_version"), "isl": kwargs["isl"],
        "osl": kwargs["osl"], "batch_size": kwargs["batch"], "ctx_tokens": kwargs["ctx_tokens"],
        "prefix": kwargs["prefix"], "nextn": kwargs["nextn"],
        "nextn_accepted": kwargs["nextn_accepted"], "stride": kwargs["stride"],
        "free_gpu_memory_fraction": kwargs["free_gpu_memory_fraction"],
        "max_seq_len": kwargs["max_seq_len"],
        "systems_path": kwargs.get("local_systems_path") or ctx.obj.get("systems_path"),
    }
    for key in ("tp_size", "pp_size", "attention_dp_size", "moe_tp_size", "moe_ep_size",
                "gemm_quant_mode", "moe_quant_mode", "kvcache_quant_mode", "fmha_quant_mode",
                "comm_quant_mode", "attention_backend"):
        args[key] = kwargs.get(key)
    if kwargs.get("database_mode"):
        args["database_mode"] = kwargs["database_mode"]
    if kwargs.get("calibration_file") and not kwargs.get("calibrated"):
        raise click.UsageError("--calibration needs --calibrated")
    if kwargs.get("calibrated"):
        args["calibrated"] = True
        args["concurrency"] = kwargs.get("concurrency")
        if kwargs.get("calibration_file"):
            args["calibration"] = kwargs["calibration_file"]
    for role in ("prefill", "decode"):
        for key in _ROLE_KEYS:
            value = kwargs.get(f"{role}_{key.replace('-', '_')}")
            if value is not None:
                args[f"{role}_{_ROLE_ARG[key]}"] = value
    try:
        out = estimate(model, kwargs["system"], **args)
    except (ValueError, RuntimeError, ZeroDivisionError) as exc:
        raise click.ClickException(f"{type(exc).__name__}: {exc}") from None
    if kwargs.get("as_json"):
        click.echo(json.dumps(out, indent=2))
        return
    raw = out["result"]["raw"]
    click.echo(f"{model} on {raw.get('system', raw.get('(p)system'))} "
               f"({out['result']['mode']}, {args['backend_name']} "
               f"{out['result']['backend_version']})")
    for key in ("ttft", "tpot", "request_latency", "tokens/s", "tokens/s/gpu", "tokens/s/user",
                "seq/s", "concurrency", "num_total_gpus", "memory", "(p)memory", "(d)memory",
                "(p)workers", "(d)workers"):
        if key in raw:
            unit = " ms" if key in ("ttft", "tpot", "request_latency") else (
                " GiB" if "memory" in key else "")
            click.echo(f"  {key:<18}{_fmt(raw[key])}{unit}")
    calibration = out["result"].get("calibration")
    if calibration:
        click.echo(f"  calibrated: parity ttft {_fmt(calibration['parity_ttft'])} ms, "
                   f"tpot {_fmt(calibration['parity_tpot'])} ms; group "
                   f"{calibration['group'] or '(none)'}"
                   + (", HYBRID fallback" if calibration.get("fallback") else "")
                   + (", memory model overruled" if calibration.get("memory_overruled") else ""))
    if out["result"].get("kv_cache_warning"):
        click.echo(f"warning: {out['result']['kv_cache_warning']}", err=True)


def _extend_estimate() -> None:
    """Adds the serving options to the step-level ``estimate`` command."""
    command = main.commands["estimate"]
    if any(p.name == "mode" for p in command.params):
        return
    command.params.extend(_SERVING_OPTIONS)
    step_callback = command.callback
    serving_names = {p.name for p in _SERVING_OPTIONS}

    @click.pass_context
    def callback(ctx, **kwargs):
        if kwargs.get("mode"):
            return _serving_estimate(ctx, kwargs.get("model"), kwargs)
        for name in serving_names:
            kwargs.pop(name, None)
        return ctx.invoke(step_callback, **kwargs)

    command.callback = callback
    command.help = (command.help or "") + (
        "\n\nWith --mode static|static_ctx|static_gen|agg|disagg: the serving-level estimate "
        "(TTFT, TPOT, throughput per GPU and per user, memory) of spec 50.")


_extend_estimate()

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


@main.command("sweep", context_settings=CONTEXT_SETTINGS)
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
        for line in _table(rows, columns):
            click.echo("  " + line)
    click.echo("")
    click.echo(f"chosen: {out['chosen_exp']} "
               f"({out['best_throughputs'][out['chosen_exp']]:.3f} tokens/s/gpu)")
    if not no_terminal_plot:
        click.echo("")
        for line in _ascii_plot(out["pareto_fronts"]):
            click.echo(line)
