"""``aic-compile replay``: a workload replayed through aisimulate-core's scheduler models with
aic's step latencies (:func:`aic.serving.replay.replay`), printed as TTFT / TPOT / ITL / E2E
percentiles, throughput, prefix-cache reuse, KV usage and energy."""

from __future__ import annotations

import json
import sys

import click

from .common import CONTEXT_SETTINGS, U32_MAX, chosen_systems_path, refuse_unused

_ROLE_KEYS = (("tp", "tp_size"), ("pp", "pp_size"), ("dp", "attention_dp_size"),
              ("moe-tp", "moe_tp_size"), ("moe-ep", "moe_ep_size"))


def _role_option_list() -> list:
    options = []
    for role in ("prefill", "decode"):
        for flag, name in _ROLE_KEYS:
            options.append(click.option(
                f"--{role}-{flag}", f"{role}_{name}", type=click.IntRange(min=1, max=U32_MAX),
                default=None, help=f"disagg: {role} {flag} size (default: the shared one)."))
    return options


_LAYOUT_OPTIONS = [
    click.option("--backend-version", default=None,
                 help="current (default), next, previous or a literal slot version."),
    click.option("--mode", type=click.Choice(["agg", "disagg"]), default="agg", show_default=True),
    click.option("--tp", "tp_size", type=click.IntRange(min=1, max=U32_MAX), default=1,
                 show_default=True, help="Tensor-parallel size."),
    click.option("--pp", "pp_size", type=click.IntRange(min=1, max=U32_MAX), default=1,
                 show_default=True, help="Pipeline-parallel size."),
    click.option("--dp", "--attention-dp", "attention_dp_size",
                 type=click.IntRange(min=1, max=U32_MAX), default=1, show_default=True,
                 help="Attention data-parallel size."),
    click.option("--moe-tp", "moe_tp_size", type=click.IntRange(min=1, max=U32_MAX), default=None),
    click.option("--moe-ep", "moe_ep_size", type=click.IntRange(min=1, max=U32_MAX), default=None),
    click.option("--gemm-quant", "gemm_quant_mode", default=None),
    click.option("--moe-quant", "moe_quant_mode", default=None),
    click.option("--kvcache-quant", "kvcache_quant_mode", default=None),
    click.option("--fmha-quant", "fmha_quant_mode", default=None),
    click.option("--comm-quant", "comm_quant_mode", default=None),
    click.option("--workers", type=click.IntRange(min=1), default=1, show_default=True,
                 help="agg: engine replicas."),
    *_role_option_list(),
    click.option("--prefill-workers", type=click.IntRange(min=1), default=1, show_default=True,
                 help="disagg: prefill replicas."),
    click.option("--decode-workers", type=click.IntRange(min=1), default=1, show_default=True,
                 help="disagg: decode replicas."),
]


#: The KV-capacity and scheduler flags of ``replay`` (and ``export dynamo``).
_ENGINE_OPTIONS = (
    click.option("--block-size", type=click.IntRange(min=1), default=None,
                 help="KV block size, tokens (default: the backend's)."),
    click.option("--gpu-memory-fraction", type=float, default=None,
                 help="KV-cache memory fraction (default: the backend's)."),
    click.option("--num-gpu-blocks", type=click.IntRange(min=1), default=None,
                 help="KV blocks per rank, instead of aic's memory model."),
    click.option("--max-num-seqs", type=click.IntRange(min=1), default=None,
                 help="Scheduler: concurrent sequences per rank."),
    click.option("--max-num-batched-tokens", type=click.IntRange(min=1), default=None,
                 help="Scheduler: token budget of one pass."),
)


def engine_options(fn):
    """The KV-capacity and scheduler flags (``--block-size`` … ``--max-num-batched-tokens``);
    their values are :func:`aic.serving.replay.replay`'s keyword arguments of the same names."""
    for option in reversed(_ENGINE_OPTIONS):
        fn = option(fn)
    return fn


def layout_options(fn):
    """The deployment layout flags of ``replay`` (and ``export dynamo``): backend version, mode,
    parallel sizes, quant modes, worker counts and the per-role disagg sizes; their values are
    :func:`aic.serving.replay.layout_deployment`'s keyword arguments."""
    for option in reversed(_LAYOUT_OPTIONS):
        fn = option(fn)
    return fn


_DISAGG_ONLY = tuple(f"{role}_{name}" for role in ("prefill", "decode") for _, name in _ROLE_KEYS) \
    + ("prefill_workers", "decode_workers", "handoff_latency_ms")


def _refuse_options_without_effect(ctx, mode: str, trace) -> None:
    """The role options of a disaggregated deployment with ``--mode agg``, the agg replica
    count with ``--mode disagg`` and the trace's block size without a trace are usage errors
    naming them, not dropped."""
    if mode == "agg":
        refuse_unused(ctx, _DISAGG_ONLY, "applies to --mode disagg, not to --mode agg; drop it "
                                         "(--workers sets the agg replicas)")
    else:
        refuse_unused(ctx, ("workers",), "is the agg replica count; --mode disagg takes "
                                         "--prefill-workers and --decode-workers")
    if trace is None:
        refuse_unused(ctx, ("trace_block_size",), "applies to --trace; a generated workload "
                                                  "has no hash blocks: drop it")


@click.command("replay", context_settings=CONTEXT_SETTINGS)
@click.argument("model")
@click.option("--system", "-s", required=True, help="System name, e.g. h200_sxm.")
@click.option("--backend", "-b", required=True, help="vllm, sglang or trtllm.")
@layout_options
@click.option("--handoff-ms", "handoff_latency_ms", type=float, default=0.0, show_default=True,
              help="disagg: KV transfer time per request, ms.")
@click.option("--requests", type=click.IntRange(min=1), default=None,
              help="Generated workload: how many requests.")
@click.option("--concurrency", type=click.IntRange(min=1), default=None,
              help="Closed loop: requests in flight (with --trace: a cap on them).")
@click.option("--rate", type=float, default=None, help="Open loop: Poisson arrivals, requests/s.")
@click.option("--isl", default="1024", show_default=True,
              help="Prompt length: N, uniform:MIN:MAX or normal:MEAN:STD.")
@click.option("--osl", default="128", show_default=True,
              help="Output length: N, uniform:MIN:MAX or normal:MEAN:STD.")
@click.option("--seed", type=click.IntRange(min=0), default=0, show_default=True,
              help="Seed of the generated lengths and arrivals.")
@click.option("--trace", "trace", type=str, default=None,
              help="A Mooncake JSONL trace (timestamp, input_length, output_length, hash_ids) "
                   "instead of a generated workload.")
@click.option("--trace-block-size", type=click.IntRange(min=1), default=512, show_default=True,
              help="Tokens per hash_ids entry of the trace.")
@click.option("--speedup", type=float, default=None,
              help="--trace: divide the inter-arrival times by this factor.")
@engine_options
@click.option("--calibrated", is_flag=True,
              help="Calibrated step times: each role takes the step part of its calibration "
                   "group and every request the group's TTFT overhead (ACCURACY.md).")
@click.option("--calibration", "calibration", default=None,
              type=click.Path(exists=True, dir_okay=False),
              help="--calibrated: a constants file in the data/calibration/serving.json layout "
                   "(default: the shipped constants).")
@click.option("--request-overhead-ms", "request_overhead_ms", type=float, default=None,
              help="Time outside the GPU passes added to every request's TTFT and E2E, ms "
                   "(default 0, or the calibration group's with --calibrated).")
@click.option("--warmup-requests", "warmup_requests", type=click.IntRange(min=0), default=0,
              show_default=True,
              help="Leave the first N requests by arrival out of the latency figures, as a "
                   "benchmark's warm-up requests are (the counts and throughput keep them).")
@click.option("--json", "as_json", is_flag=True, help="The report as JSON.")
@click.option("--plot", "plot_file", default=None,
              help="Save the latency CDFs and the queue over time to FILE.svg (or .png with "
                   "matplotlib).")
@click.option("--systems-path", "local_systems_path", default=None,
              help="Systems root (overrides the global option / AIC_SYSTEMS_PATH).")
@click.pass_context
def replay_cmd(ctx, model, system, backend, as_json, plot_file, local_systems_path, trace,
               **kwargs):
    """Replay a workload on a deployment of MODEL: TTFT, TPOT, ITL and end-to-end latency
    (mean, p50, p90, p99), throughput per GPU and per user, prefix-cache reuse, KV usage and
    energy per token, through aisimulate-core's vLLM / SGLang scheduler models with aic's step
    latencies.

    Workload: --concurrency N --requests M (closed loop), --rate R --requests M (open loop), or
    --trace FILE (Mooncake JSONL)."""
    from ..serving.replay import ReplayUnavailableError, replay
    from ..serving.replay_plot import check_plot_path, save_plot

    try:
        if plot_file is not None:
            check_plot_path(plot_file)
    except ValueError as exc:
        raise click.BadParameter(str(exc).split(": ", 1)[-1], param_hint="'--plot'") from None
    if kwargs.get("calibration") is not None and not kwargs.get("calibrated"):
        raise click.UsageError("--calibration needs --calibrated")
    _refuse_options_without_effect(ctx, kwargs["mode"], trace)
    systems_path = chosen_systems_path(ctx, local_systems_path)
    try:
        result = replay(model, system, backend, trace=trace, systems_path=systems_path,
                        timeline=plot_file is not None, per_request=plot_file is not None,
                        **kwargs)
    except ReplayUnavailableError as exc:
        raise click.ClickException(str(exc)) from None
    except (ValueError, RuntimeError, NotImplementedError) as exc:
        raise click.ClickException(f"{type(exc).__name__}: {exc}") from None
    if plot_file is not None:
        try:
            save_plot(result.report, plot_file)
        except OSError as exc:
            raise click.ClickException(f"cannot write --plot {plot_file!r}: {exc}") from None
    if as_json:
        text = json.dumps(result.to_dict(), indent=2, allow_nan=False)
    else:
        text = result.table().rstrip("\n")
        text += f"\n({result.stats.get('wall_ms', 0.0) / 1e3:.2f} s)"
        if plot_file is not None:
            text += f"\nwrote {plot_file}"
    try:
        click.echo(text)
        sys.stdout.flush()
    except OSError as exc:
        raise click.ClickException(f"cannot write the output: {exc}") from None
