"""``aic-compile estimate --mode static|agg|disagg`` (spec 50): the serving options of the
``estimate`` command.

:mod:`aic.cli.engine` adds them to the step-level ``estimate`` command; with ``--mode`` the
command answers at the serving level through :func:`aic.serving.estimate`.
"""

from __future__ import annotations

import click

from ..json_output import dumps
from .common import cell, chosen_systems_path, refuse_unused

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


#: Step-estimate options the serving estimate has no use for: given with ``--mode`` they are
#: refused, never silently dropped.
_STEP_ONLY = {"spec_file": "--spec", "gen_tokens": "--gen-tokens",
              "kv_block_size": "--kv-block-size"}


def _refuse_step_only_options(kwargs) -> None:
    """An option is honoured or refused: ``--cp`` above 1 (the reference's serving estimate has
    no context parallelism, spec 50 §1.3 rule 6: it prices cp 1, so ``--cp 4`` printed the TTFT
    of ``--cp 1``) and the step-only options are usage errors with ``--mode``."""
    cp = kwargs.get("cp_size")
    if cp is not None and cp != 1:
        raise click.UsageError(
            f"--cp {cp} with --mode: the serving estimate prices context parallelism 1 (as the "
            f"reference's cli_estimate does); drop --cp, or estimate the steps of a cp {cp} "
            f"engine without --mode")
    for name, flag in _STEP_ONLY.items():
        if kwargs.get(name) is not None:
            raise click.UsageError(f"{flag} applies to the step estimate, not to --mode; drop it")


_ROLE_NAMES = tuple(f"{role}_{key.replace('-', '_')}" for role in ("prefill", "decode")
                    for key in _ROLE_KEYS)


def _refuse_options_without_effect(ctx, kwargs) -> None:
    """Options the chosen serving mode does not use are usage errors naming the mode (spec 50
    §1.1: the static modes ignore the KV-budget options, only agg TRT-LLM and disagg size a KV
    slot, ``ctx_tokens`` is agg's, the role options are disagg's), as is an MTP acceptance
    without a draft length and ``--concurrency`` without ``--calibrated``."""
    mode = kwargs["mode"]
    if kwargs.get("nextn_accepted") is not None and not kwargs.get("nextn"):
        raise click.UsageError(f"--nextn-accepted {kwargs['nextn_accepted']:g} without --nextn: "
                               f"the acceptance applies to an MTP draft (--nextn N > 0); add "
                               f"--nextn or drop it", ctx=ctx)
    if not mode.startswith("static"):
        refuse_unused(ctx, ("stride",), f"applies to the static modes, not to --mode {mode}; "
                                        f"drop it")
    else:
        refuse_unused(ctx, ("free_gpu_memory_fraction", "max_seq_len"),
                      f"applies to agg and disagg; --mode {mode} sizes no KV budget: drop it")
    if mode == "agg" and kwargs.get("backend") in ("vllm", "sglang"):
        refuse_unused(ctx, ("max_seq_len",), f"applies to agg with trtllm and to disagg; agg "
                                             f"{kwargs['backend']} sizes no KV slot: drop it")
    if mode != "agg":
        refuse_unused(ctx, ("ctx_tokens",), f"is the agg context-token budget, not used by "
                                            f"--mode {mode}; drop it")
    if mode == "disagg":
        refuse_unused(ctx, ("batch",), "is not used by --mode disagg: give --prefill-batch and "
                                       "--decode-batch")
    else:
        refuse_unused(ctx, _ROLE_NAMES, f"applies to --mode disagg, not to --mode {mode}; "
                                        f"drop it")
    if not kwargs.get("calibrated"):
        refuse_unused(ctx, ("concurrency",), "applies to the calibrated estimate: add "
                                             "--calibrated or drop it")


def _serving_estimate(ctx, model, kwargs) -> None:
    from ..serving.deployment import estimate

    if not model or not kwargs.get("system") or not kwargs.get("backend"):
        raise click.UsageError("--mode needs MODEL, --system and --backend")
    _refuse_step_only_options(kwargs)
    _refuse_options_without_effect(ctx, kwargs)
    args = {
        "mode": kwargs["mode"], "backend_name": kwargs["backend"],
        "backend_version": kwargs.get("backend_version"), "isl": kwargs["isl"],
        "osl": kwargs["osl"], "batch_size": kwargs["batch"], "ctx_tokens": kwargs["ctx_tokens"],
        "prefix": kwargs["prefix"], "nextn": kwargs["nextn"],
        "nextn_accepted": kwargs["nextn_accepted"], "stride": kwargs["stride"],
        "free_gpu_memory_fraction": kwargs["free_gpu_memory_fraction"],
        "max_seq_len": kwargs["max_seq_len"],
        "systems_path": chosen_systems_path(ctx, kwargs.get("local_systems_path")),
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
        click.echo(dumps(out, indent=2))
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
            click.echo(f"  {key:<18}{cell(raw[key])}{unit}")
    calibration = out["result"].get("calibration")
    if calibration:
        click.echo(f"  calibrated: parity ttft {cell(calibration['parity_ttft'])} ms, "
                   f"tpot {cell(calibration['parity_tpot'])} ms; group "
                   f"{calibration['group'] or '(none)'}"
                   + (", HYBRID fallback" if calibration.get("fallback") else "")
                   + (", memory model overruled" if calibration.get("memory_overruled") else ""))
    if out["result"].get("kv_cache_warning"):
        click.echo(f"warning: {out['result']['kv_cache_warning']}", err=True)


def add_serving_options(command: click.Command) -> None:
    """Adds the serving options to the step-level ``estimate`` command (``--mode`` and the rest
    answer through :func:`aic.serving.estimate`; without ``--mode`` the step command runs)."""
    if any(p.name == "mode" for p in command.params):
        return
    command.params.extend(_SERVING_OPTIONS)
    step_callback = command.callback
    serving_names = {p.name for p in _SERVING_OPTIONS}

    @click.pass_context
    def callback(ctx, **kwargs):
        if kwargs.get("mode"):
            return _serving_estimate(ctx, kwargs.get("model"), kwargs)
        # Without --mode the serving options would be dropped: refused instead.
        refuse_unused(ctx, serving_names, "applies to the serving estimate: add --mode "
                                          "static|static_ctx|static_gen|agg|disagg, or drop it")
        for name in serving_names:
            kwargs.pop(name, None)
        return ctx.invoke(step_callback, **kwargs)

    command.callback = callback
    command.help = (command.help or "") + (
        "\n\nWith --mode static|static_ctx|static_gen|agg|disagg: the serving-level estimate "
        "(TTFT, TPOT, throughput per GPU and per user, memory) of spec 50.")

