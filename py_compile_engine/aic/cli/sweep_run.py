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
from .fastpath import CommandError, Option

#: The parameters of ``aic-compile sweep``, in the order ``--help`` lists them.
OPTIONS = (
    Option("model", (), "str", required=True),
    Option("system", ("--system", "-s"), "str", required=True, help="System name, e.g. h200_sxm."),
    Option("backend", ("--backend", "-b"), "str", "trtllm",
           help="trtllm, vllm, sglang, or auto (every backend with data)."),
    Option("backend_version", ("--backend-version",), "str", help="Default: the current slot."),
    Option("total_gpus", ("--gpus",), "int", minimum=1,
           help="GPU budget (or size from a load target: --target-request-rate / "
                "--target-concurrency)."),
    Option("isl", ("--isl",), "int", 4000, minimum=1),
    Option("osl", ("--osl",), "int", 1000, minimum=1),
    Option("prefix", ("--prefix",), "int", 0, minimum=0),
    Option("ttft", ("--ttft",), "float", 2000.0, help="TTFT target, ms."),
    Option("tpot", ("--tpot",), "float", 30.0, help="TPOT target, ms."),
    Option("request_latency", ("--request-latency",), "float",
           help="End-to-end latency target, ms (replaces the TPOT target)."),
    Option("nextn", ("--nextn",), "str", "0",
           help="MTP draft length, or auto (the checkpoint's)."),
    Option("nextn_accepted", ("--nextn-accepted",), "float"),
    Option("top_n", ("--top-n",), "int", 5, minimum=1),
    Option("as_json", ("--json",), "flag", False, help="The whole result as JSON."),
    Option("plot_file", ("--plot",), "str",
           help="Save the Pareto fronts to FILE.png|svg (needs matplotlib)."),
    Option("no_terminal_plot", ("--no-terminal-plot",), "flag", False,
           help="Do not draw the fronts in the terminal."),
    # Planning options (issue 41, spec 51), one block.
    Option("serving_mode", ("--serving-mode",), "str", "auto", help="auto, agg or disagg."),
    Option("decode_system", ("--decode-system",), "str",
           help="System of the disagg decode workers (default: --system)."),
    Option("database_mode", ("--database-mode",), "str", "SILICON",
           help="SILICON, HYBRID, EMPIRICAL or SOL."),
    Option("transfer_policy", ("--transfer-policy",), "str",
           help="Empirical transfer kinds/presets (off, conservative, balanced, aggressive, "
                "xshape, xquant, xprofile, xop; comma-separated)."),
    Option("strict_sla", ("--strict-sla",), "flag", False,
           help="Only rows within the TPOT / request-latency target."),
    Option("free_gpu_memory_fraction", ("--free-gpu-memory-fraction",), "float",
           help="KV-cache memory fraction, in (0, 1]."),
    Option("max_seq_len", ("--max-seq-len",), "int", minimum=1,
           help="Per-sequence KV reservation of agg workers (default isl + osl)."),
    Option("attention_backend", ("--attention-backend",), "str",
           help="fa3, triton, trtllm_mha, flashinfer, fla or default."),
    Option("enable_chunked_prefill", ("--enable-chunked-prefill",), "flag", False,
           help="Agg: the chunked-prefill context-token grid."),
    Option("inclusive_tpot", ("--inclusive-tpot",), "flag", False,
           help="Show TPOT including the first token (display only)."),
    Option("target_request_rate", ("--target-request-rate",), "float",
           help="Load target, requests/s (without --gpus: the fewest GPUs that carry it)."),
    Option("target_concurrency", ("--target-concurrency",), "float",
           help="Load target, requests in flight (without --gpus)."),
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


def parse_nextn(text) -> int | str:
    """``--nextn``: a non-negative integer or ``auto``."""
    if isinstance(text, int) and not isinstance(text, bool):
        value = text
    elif str(text).strip().lower() == "auto":
        return "auto"
    else:
        try:
            value = int(str(text))
        except ValueError:
            raise CommandError(f"--nextn: expected a non-negative integer or auto, got "
                               f"{text!r}") from None
    if value < 0:
        raise CommandError(f"--nextn: expected a non-negative integer or auto, got {value}")
    return value


def check_planning_options(p: dict) -> None:
    """The planning options, checked before any work (one ``Error:`` line naming the option)."""
    import math

    from ..serving.planning import (
        ATTENTION_BACKENDS,
        DATABASE_MODES,
        SERVING_MODES,
        parse_transfer_policy,
    )

    if p["backend"] not in ("trtllm", "vllm", "sglang", "auto"):
        raise CommandError(f"--backend: {p['backend']!r} is not one of trtllm, vllm, sglang, auto")
    if p["serving_mode"] not in SERVING_MODES:
        raise CommandError(f"--serving-mode: {p['serving_mode']!r} is not one of "
                           f"{', '.join(SERVING_MODES)}")
    if str(p["database_mode"]).upper() not in DATABASE_MODES:
        raise CommandError(f"--database-mode: {p['database_mode']!r} is not one of "
                           f"{', '.join(DATABASE_MODES)}")
    try:
        parse_transfer_policy(p["transfer_policy"])
    except ValueError as exc:
        raise CommandError(f"--transfer-policy: {exc}") from None
    if p["attention_backend"] is not None and p["attention_backend"] not in ATTENTION_BACKENDS:
        raise CommandError(f"--attention-backend: {p['attention_backend']!r} is not one of "
                           f"{', '.join(ATTENTION_BACKENDS)}")
    f = p["free_gpu_memory_fraction"]
    if f is not None and not (math.isfinite(f) and 0 < f <= 1):
        raise CommandError(f"--free-gpu-memory-fraction: expected a number in (0, 1], got {f}")
    for name in ("target_request_rate", "target_concurrency"):
        v = p[name]
        if v is not None and not (math.isfinite(v) and v > 0):
            raise CommandError(f"--{name.replace('_', '-')}: the load target must be a positive "
                               f"finite number, got {v}")
    if p["target_request_rate"] is not None and p["target_concurrency"] is not None:
        raise CommandError("--target-request-rate, --target-concurrency: give one load target, "
                           "not both")
    has_target = p["target_request_rate"] is not None or p["target_concurrency"] is not None
    if p["total_gpus"] is not None and has_target:
        raise CommandError("--gpus and a load target (--target-request-rate / "
                           "--target-concurrency) exclude each other: give --gpus to sweep a "
                           "fixed budget, or a load target alone to size the deployment")
    if p["total_gpus"] is None and not has_target:
        raise CommandError("sweep needs either --gpus (a GPU budget) or a load target "
                           "(--target-request-rate / --target-concurrency)")


def _echo_warnings(warnings: list) -> None:
    for w in warnings:
        sys.stderr.write(f"Warning: {w}\n")


def run(params: dict, systems_path: str | None) -> None:
    """Runs the sweep of ``params`` (the values of :data:`OPTIONS`) and prints it; a failure
    of the sweep is a :class:`CommandError`. With a load target instead of ``--gpus`` it runs
    ``recommend`` (spec 51 §4.1, the ``cli default`` route). With ``--save-dir`` the result tree
    is written too (bad generator options fail before the sweep runs)."""
    p = dict(params)
    p["nextn"] = parse_nextn(p["nextn"])
    check_planning_options(p)
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
    warnings: list = []
    load_match = p["total_gpus"] is None
    try:
        if load_match:
            from ..serving.planning import recommend

            out = recommend(p["model"], p["system"],
                            target_request_rate=p["target_request_rate"],
                            target_concurrency=p["target_concurrency"],
                            decode_system=p["decode_system"], backend=p["backend"],
                            backend_version=p["backend_version"],
                            database_mode=p["database_mode"].upper(),
                            transfer_policy=p["transfer_policy"], isl=p["isl"], osl=p["osl"],
                            ttft=p["ttft"], tpot=p["tpot"],
                            request_latency=p["request_latency"], prefix=p["prefix"],
                            nextn=p["nextn"], nextn_accepted=p["nextn_accepted"],
                            enable_chunked_prefill=p["enable_chunked_prefill"],
                            free_gpu_memory_fraction=p["free_gpu_memory_fraction"],
                            max_seq_len=p["max_seq_len"],
                            attention_backend=p["attention_backend"], top_n=p["top_n"],
                            systems_path=systems_path, warnings=warnings)
        else:
            from ..serving.sweep import sweep

            out = sweep(p["model"], p["total_gpus"], p["system"], p["backend"],
                        p["backend_version"], isl=p["isl"], osl=p["osl"], prefix=p["prefix"],
                        ttft=p["ttft"], tpot=p["tpot"], request_latency=p["request_latency"],
                        nextn=p["nextn"], nextn_accepted=p["nextn_accepted"], top_n=p["top_n"],
                        strict_sla=p["strict_sla"],
                        free_gpu_memory_fraction=p["free_gpu_memory_fraction"],
                        max_seq_len=p["max_seq_len"],
                        database_mode=p["database_mode"].upper(),
                        decode_system=p["decode_system"], serving_mode=p["serving_mode"],
                        transfer_policy=p["transfer_policy"],
                        attention_backend=p["attention_backend"],
                        enable_chunked_prefill=p["enable_chunked_prefill"],
                        inclusive_tpot=p["inclusive_tpot"], systems_path=systems_path,
                        warnings=warnings)
    except (ValueError, RuntimeError) as exc:
        _echo_warnings(warnings)
        raise CommandError(f"{type(exc).__name__}: {exc}") from None
    finally:
        if progress is not None:
            progress[0].set()
            progress[1].join()
    elapsed = time.monotonic() - started
    _echo_warnings(warnings)
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
    from .plan_output import result_lines

    request_latency = p["request_latency"]
    if load_match:
        target = (f"{p['target_request_rate']:g} requests/s" if p["target_request_rate"]
                  is not None else f"{p['target_concurrency']:g} requests in flight")
        size = f"sized for {target} on {p['system']}"
    else:
        size = f"{p['total_gpus']} x {p['system']}"
    if p["decode_system"] and p["decode_system"] != p["system"]:
        size += f" (decode on {p['decode_system']})"
    _echo(f"{p['model']}, {size}, {p['backend']}: isl {p['isl']}, "
          f"osl {p['osl']}, TTFT <= {p['ttft']:g} ms, "
          + (f"request latency <= {request_latency:g} ms" if request_latency
             else f"TPOT <= {p['tpot']:g} ms")
          + f"  ({elapsed:.2f} s)")
    marks = None
    if saved is not None and saved.replays:
        marks = {(mode, rank): replay_mark(rec) for (mode, rank), rec in saved.replays.items()}
    for line in result_lines(out, load_match=load_match, inclusive=p["inclusive_tpot"],
                             marks=marks):
        _echo(line)
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
        for line in _ascii_plot({k: v or [] for k, v in out["pareto_fronts"].items()}):
            _echo(line)
    sys.stdout.flush()
