"""``aic-compile sweep`` (spec 50), without click: its options as data and the run itself.

:mod:`aic.cli.sweep` builds the click command from :data:`OPTIONS` and calls :func:`run`; the
console script runs the same :func:`run` straight from a plain command line
(:mod:`aic.cli.fastpath`), so that a fresh ``aic-compile sweep`` costs little more than the same
sweep through the Python API (BENCHMARKS.md, "CLI overhead"). Prints the Pareto fronts and the
picks of :func:`aic.serving.sweep.sweep`.
"""

from __future__ import annotations

import sys
import time

from ..json_output import dumps
from .common import column_table
from .fastpath import CommandError, Option

#: The parameters of ``aic-compile sweep``, in the order ``--help`` lists them.
OPTIONS = (
    Option("model", (), "str", required=True),
    Option("system", ("--system", "-s"), "str", required=True, help="System name, e.g. h200_sxm."),
    Option("backend", ("--backend", "-b"), "str", "trtllm", help="trtllm, vllm or sglang."),
    Option("backend_version", ("--backend-version",), "str", help="Default: the current slot."),
    Option("total_gpus", ("--gpus",), "int", required=True, minimum=1, help="GPU budget."),
    Option("isl", ("--isl",), "int", 4000, minimum=1),
    Option("osl", ("--osl",), "int", 1000, minimum=1),
    Option("prefix", ("--prefix",), "int", 0, minimum=0),
    Option("ttft", ("--ttft",), "float", 2000.0, help="TTFT target, ms."),
    Option("tpot", ("--tpot",), "float", 30.0, help="TPOT target, ms."),
    Option("request_latency", ("--request-latency",), "float",
           help="End-to-end latency target, ms (replaces the TPOT target)."),
    Option("nextn", ("--nextn",), "int", 0, help="MTP draft length."),
    Option("nextn_accepted", ("--nextn-accepted",), "float"),
    Option("top_n", ("--top-n",), "int", 5, minimum=1),
    Option("as_json", ("--json",), "flag", False, help="The whole result as JSON."),
    Option("plot_file", ("--plot",), "str",
           help="Save the Pareto fronts to FILE.png|svg (needs matplotlib)."),
    Option("no_terminal_plot", ("--no-terminal-plot",), "flag", False,
           help="Do not draw the fronts in the terminal."),
    # Deployment files of the picks (issue 42, spec 60): one block, kept together.
    Option("save_dir", ("--save-dir",), "str",
           help="Write the result tree (CSVs, experiment record, per-pick deployment files "
                "and replay.json) under DIR."),
    Option("deployment_target", ("--deployment-target",), "str", "dynamo",
           help="dynamo, llm-d-helm or llm-d-kustomize."),
    Option("dynamo_version", ("--dynamo-version",), "str",
           help="Dynamo release of the images and engine templates (default 1.3.0)."),
    Option("namespace", ("--namespace",), "str", help="Kubernetes namespace of the manifests."),
    Option("model_cache", ("--model-cache",), "str",
           help="Model-cache PVC: NAME[:MOUNT[:SUBPATH]]."),
    Option("transport", ("--transport",), "str", "nvlink", help="nvlink, ib or efa."),
    Option("image_pull_secret", ("--image-pull-secret",), "str",
           help="Image pull secret of every pod."),
    Option("generator_set", ("--set",), "multi",
           help="Generator override KEY=VALUE (repeatable; see README)."),
    Option("no_replay", ("--no-replay",), "flag", False,
           help="With --save-dir: skip the per-pick replays (replay.json)."),
)

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
        raise CommandError("--plot needs matplotlib (pip install matplotlib)") from None
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


#: The file kinds ``--plot`` writes (matplotlib picks the format from the suffix).
PLOT_SUFFIXES = (".png", ".svg", ".pdf")


def check_plot_file(path: str) -> None:
    """``--plot FILE``, checked before the sweep runs: a known suffix, an existing folder and
    matplotlib installed (a bad plot path used to fail only after the whole sweep)."""
    import os
    from importlib.util import find_spec

    from ..validation import check_output_path

    suffix = os.path.splitext(path)[1].lower()
    if suffix not in PLOT_SUFFIXES:
        raise CommandError(f"--plot {path!r}: unknown file kind {suffix or '(no suffix)'!r}; "
                           f"use one of {', '.join(PLOT_SUFFIXES)}")
    try:
        check_output_path("--plot", path)
    except ValueError as exc:
        raise CommandError(str(exc)) from None
    if find_spec("matplotlib") is None:
        raise CommandError("--plot needs matplotlib (pip install matplotlib)")


def check_combination(p: dict) -> None:
    """Options that have no effect together are refused before the sweep (the same check for
    the click command and the click-free path): an MTP acceptance without a draft length was
    silently dropped."""
    if p["nextn_accepted"] is not None and not p["nextn"]:
        raise CommandError(f"--nextn-accepted {p['nextn_accepted']:g} without --nextn: the "
                           f"acceptance applies to an MTP draft (--nextn N > 0); add --nextn or "
                           f"drop it")


def _echo(text: str = "") -> None:
    sys.stdout.write(text + "\n")


def _spinner(done) -> None:
    start = time.monotonic()
    while not done.wait(0.5):
        sys.stderr.write(f"\rsweeping... {time.monotonic() - start:.1f} s")
        sys.stderr.flush()
    if time.monotonic() - start > 0.5:
        sys.stderr.write("\r" + " " * 30 + "\r")


def generator_options(p: dict):
    """The checked generator options of ``--save-dir`` (a bad value is a
    :class:`CommandError` before the sweep runs)."""
    from ..deploy import DeployError, GeneratorOptions
    from ..deploy.options import check_target_backend
    from ..deploy.writer import check_save_dir

    try:
        check_save_dir(p["save_dir"])
        check_target_backend(p["deployment_target"] or "dynamo", p["backend"])
        return GeneratorOptions.create(
            target=p["deployment_target"], dynamo_version=p["dynamo_version"],
            namespace=p["namespace"], model_cache=p["model_cache"], transport=p["transport"],
            image_pull_secret=p["image_pull_secret"], sets=list(p["generator_set"]))
    except DeployError as exc:
        raise CommandError(str(exc)) from None


def _save(out: dict, p: dict, options, systems_path):
    from ..deploy import DeployError, save_sweep

    try:
        return save_sweep(out, save_dir=p["save_dir"], model=p["model"], system=p["system"],
                          backend=p["backend"], total_gpus=p["total_gpus"], isl=p["isl"],
                          osl=p["osl"], prefix=p["prefix"], ttft=p["ttft"], tpot=p["tpot"],
                          request_latency=p["request_latency"], nextn=p["nextn"],
                          nextn_accepted=p["nextn_accepted"], options=options,
                          replay=not p["no_replay"], systems_path=systems_path)
    except DeployError as exc:
        raise CommandError(str(exc)) from None


def replay_mark(record: dict | None) -> str:
    """The terminal table's verdict on a pick's replayed p90s against the targets."""
    if record is None:
        return ""
    if not record.get("replayed"):
        return "n/a"
    misses = [k.upper() for k, ok in record["meets_p90"].items() if not ok]
    return "MISS " + "+".join(misses) if misses else "ok"


def run(params: dict, systems_path: str | None) -> None:
    """Runs the sweep of ``params`` (the values of :data:`OPTIONS`) and prints it; a failure
    of the sweep is a :class:`CommandError`. With ``--save-dir`` the result tree is written
    too (bad generator options fail before the sweep runs)."""
    from ..serving.sweep import sweep

    p = params
    check_combination(p)
    if p["plot_file"]:
        check_plot_file(p["plot_file"])
    options = generator_options(p) if p.get("save_dir") else None
    progress = None
    if sys.stderr.isatty():  # a progress line for a person watching
        import threading

        done = threading.Event()
        progress = (done, threading.Thread(target=_spinner, args=(done,), daemon=True))
        progress[1].start()
    started = time.monotonic()
    try:
        out = sweep(p["model"], p["total_gpus"], p["system"], p["backend"], p["backend_version"],
                    isl=p["isl"], osl=p["osl"], prefix=p["prefix"], ttft=p["ttft"],
                    tpot=p["tpot"], request_latency=p["request_latency"], nextn=p["nextn"],
                    nextn_accepted=p["nextn_accepted"], top_n=p["top_n"],
                    systems_path=systems_path)
    except (ValueError, RuntimeError) as exc:
        raise CommandError(f"{type(exc).__name__}: {exc}") from None
    finally:
        if progress is not None:
            progress[0].set()
            progress[1].join()
    elapsed = time.monotonic() - started
    if p["plot_file"]:
        _save_plot(out["pareto_fronts"], p["plot_file"])
    saved = _save(out, p, options, systems_path) if options is not None else None
    if p["as_json"]:
        if saved is not None:
            out["saved"] = {"path": saved.path, "replays": {
                f"{mode}/top{rank}": {k: rec.get(k) for k in ("replayed", "ttft_ms", "tpot_ms",
                                                              "targets", "meets_p90")}
                for (mode, rank), rec in saved.replays.items()}}
        _echo(dumps(out, indent=2))
        return
    request_latency = p["request_latency"]
    _echo(f"{p['model']}, {p['total_gpus']} x {p['system']}, {p['backend']}: isl {p['isl']}, "
          f"osl {p['osl']}, TTFT <= {p['ttft']:g} ms, "
          + (f"request latency <= {request_latency:g} ms" if request_latency
             else f"TPOT <= {p['tpot']:g} ms")
          + f"  ({elapsed:.2f} s)")
    for exp, rows in out["best_configs"].items():
        columns = DISAGG_COLUMNS if exp == "disagg" else AGG_COLUMNS
        n = len(out["candidates"].get(exp, []))
        _echo()
        _echo(f"{exp}: best configs ({n} candidates, Pareto front "
              f"{len(out['pareto_fronts'].get(exp, []))})")
        if saved is not None and saved.replays:
            rows = [{**r, "replay p90": replay_mark(saved.replays.get((exp, i)))}
                    for i, r in enumerate(rows, start=1)]
            columns = columns + ["replay p90"]
        for line in column_table(rows, columns):
            _echo("  " + line)
    for exp, outcome in out["outcomes"].items():
        if exp not in out["best_configs"]:
            _echo()
            _echo(f"{exp}: " + (f"{outcome['type']}: {outcome['message']}" if outcome
                                else "no configuration met the targets"))
    _echo()
    _echo(f"chosen: {out['chosen_exp']} "
          f"({out['best_throughputs'][out['chosen_exp']]:.3f} tokens/s/gpu)")
    if saved is not None:
        _echo()
        _echo(f"saved: {saved.path}")
        for (mode, rank), rec in saved.replays.items():
            if rec.get("replayed"):
                _echo(f"  {mode}/top{rank} replay (concurrency {rec['concurrency']}, "
                      f"{rec['requests']} requests): TTFT p90 {rec['ttft_ms']['p90']:.1f} ms "
                      f"(target {p['ttft']:g}), TPOT p90 {rec['tpot_ms']['p90']:.2f} ms "
                      f"(target {p['tpot']:g})  {replay_mark(rec)}")
            else:
                _echo(f"  {mode}/top{rank}: not replayed ({rec['reason']})")
    if not p["no_terminal_plot"]:
        _echo()
        for line in _ascii_plot(out["pareto_fronts"]):
            _echo(line)
    sys.stdout.flush()
