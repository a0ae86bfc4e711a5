"""``aic-compile recommend`` (the fewest GPUs that carry a load target, spec 51 §4) and
``aic-compile exp FILE.yaml`` (experiment files, spec 51 §5)."""

from __future__ import annotations

import sys
import time

import click

from ..json_output import dumps
from .common import CONTEXT_SETTINGS, chosen_systems_path
from .fastpath import CommandError


def _warn(warnings: list) -> None:
    for w in warnings:
        click.echo(f"Warning: {w}", err=True)


@click.command("recommend", context_settings=CONTEXT_SETTINGS)
@click.argument("model")
@click.option("--system", "-s", required=True, help="System name, e.g. h200_sxm.")
@click.option("--target-request-rate", type=float, default=None,
              help="Load target: requests per second.")
@click.option("--target-concurrency", type=float, default=None,
              help="Load target: requests in flight.")
@click.option("--decode-system", default=None,
              help="System of the disagg decode workers (default: --system).")
@click.option("--backend", "-b", default="trtllm", show_default=True,
              help="trtllm, vllm, sglang, or auto (every backend with data).")
@click.option("--backend-version", default=None, help="Default: the current slot.")
@click.option("--database-mode", default="HYBRID", show_default=True,
              help="SILICON, HYBRID, EMPIRICAL or SOL.")
@click.option("--transfer-policy", default=None,
              help="Empirical transfer kinds/presets (comma-separated).")
@click.option("--isl", type=click.IntRange(min=1), default=4000, show_default=True)
@click.option("--osl", type=click.IntRange(min=1), default=1000, show_default=True)
@click.option("--prefix", type=click.IntRange(min=0), default=0, show_default=True)
@click.option("--ttft", type=float, default=2000.0, show_default=True, help="TTFT target, ms.")
@click.option("--tpot", type=float, default=30.0, show_default=True, help="TPOT target, ms.")
@click.option("--request-latency", type=float, default=None,
              help="End-to-end latency target, ms (replaces the TPOT target).")
@click.option("--nextn", default=None, help="MTP draft length, or auto.")
@click.option("--nextn-accepted", type=float, default=None)
@click.option("--enable-chunked-prefill", is_flag=True)
@click.option("--free-gpu-memory-fraction", type=float, default=None)
@click.option("--max-seq-len", type=click.IntRange(min=1), default=None)
@click.option("--attention-backend", default=None)
@click.option("--top-n", type=click.IntRange(min=1), default=5, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="The whole result as JSON.")
@click.pass_context
def recommend_cmd(ctx, model, system, target_request_rate, target_concurrency, decode_system,
                  backend, backend_version, database_mode, transfer_policy, isl, osl, prefix,
                  ttft, tpot, request_latency, nextn, nextn_accepted, enable_chunked_prefill,
                  free_gpu_memory_fraction, max_seq_len, attention_backend, top_n, as_json):
    """The fewest GPUs of SYSTEM that serve MODEL at a load target within the SLA.

    Tries one node's GPUs, then twice, four times ... (up to 64) while a mode runs out of
    memory; each configuration is sized by the replicas the target needs."""
    from ..serving.planning import recommend
    from .plan_output import result_lines
    from .sweep_run import check_planning_options, parse_nextn

    params = {"backend": backend, "serving_mode": "auto", "database_mode": database_mode,
              "transfer_policy": transfer_policy, "attention_backend": attention_backend,
              "free_gpu_memory_fraction": free_gpu_memory_fraction,
              "target_request_rate": target_request_rate,
              "target_concurrency": target_concurrency, "total_gpus": None}
    try:
        if target_request_rate is None and target_concurrency is None:
            raise CommandError("recommend needs a load target: --target-request-rate or "
                               "--target-concurrency")
        check_planning_options(params)
        nextn_value = None if nextn is None else parse_nextn(nextn)
    except CommandError as exc:
        raise click.ClickException(str(exc)) from None
    warnings: list = []
    started = time.monotonic()
    try:
        out = recommend(model, system, target_request_rate=target_request_rate,
                        target_concurrency=target_concurrency, decode_system=decode_system,
                        backend=backend, backend_version=backend_version,
                        database_mode=database_mode.upper(), transfer_policy=transfer_policy,
                        isl=isl, osl=osl, ttft=ttft, tpot=tpot, request_latency=request_latency,
                        prefix=prefix, nextn=nextn_value, nextn_accepted=nextn_accepted,
                        enable_chunked_prefill=enable_chunked_prefill,
                        free_gpu_memory_fraction=free_gpu_memory_fraction,
                        max_seq_len=max_seq_len, attention_backend=attention_backend,
                        top_n=top_n, systems_path=chosen_systems_path(ctx, None),
                        warnings=warnings)
    except (ValueError, RuntimeError) as exc:
        _warn(warnings)
        raise click.ClickException(f"{type(exc).__name__}: {exc}") from None
    _warn(warnings)
    if as_json:
        click.echo(dumps(out, indent=2))
        return
    target = (f"{target_request_rate:g} requests/s" if target_request_rate is not None
              else f"{target_concurrency:g} requests in flight")
    click.echo(f"{model} on {system}, {backend}: {target}, isl {isl}, osl {osl}, TTFT <= "
               f"{ttft:g} ms, " + (f"request latency <= {request_latency:g} ms"
                                   if request_latency else f"TPOT <= {tpot:g} ms")
               + f"  ({time.monotonic() - started:.2f} s)")
    for line in result_lines(out, load_match=True):
        click.echo(line)


@click.command("exp", context_settings=CONTEXT_SETTINGS)
@click.argument("yaml_file", metavar="FILE.yaml")
@click.option("--attention-backend", default=None,
              help="For experiments that do not set attention_backend.")
@click.option("--inclusive-tpot", is_flag=True, help="Show TPOT including the first token.")
@click.option("--top-n", type=click.IntRange(min=1), default=5, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="The whole result as JSON.")
@click.pass_context
def exp_cmd(ctx, yaml_file, attention_backend, inclusive_tpot, top_n, as_json):
    """Run the experiments of FILE.yaml side by side: one table each, and the winner.

    Each top-level key (or each name listed under `exps`) is an experiment: a flat mapping of
    serving_mode, total_gpus, model_path / system_name / backend_name (agg) or their prefill_ /
    decode_ forms (disagg), candidate lists, worker caps, corrections, ... (docs: README)."""
    from ..serving.experiment_files import run_experiments
    from .plan_output import result_lines

    warnings: list = []
    started = time.monotonic()
    try:
        out = run_experiments(yaml_file, attention_backend=attention_backend,
                              inclusive_tpot=inclusive_tpot, top_n=top_n,
                              systems_path=chosen_systems_path(ctx, None), warnings=warnings)
    except (ValueError, RuntimeError, TypeError) as exc:
        _warn(warnings)
        raise click.ClickException(f"{type(exc).__name__}: {exc}") from None
    _warn(warnings)
    if as_json:
        click.echo(dumps(out, indent=2))
        return
    click.echo(f"{yaml_file}: {len(out['tasks'])} experiments "
               f"({', '.join(out['tasks'])})  ({time.monotonic() - started:.2f} s)")
    for line in result_lines(out, inclusive=inclusive_tpot):
        click.echo(line)
    sys.stdout.flush()
