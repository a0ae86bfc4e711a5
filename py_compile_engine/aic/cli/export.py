"""``aic-compile export``: aic's estimates written in other tools' own formats. ``export dynamo``
writes NVIDIA Dynamo's mocker timing profile and engine config and its SLA planner's profile
folder (:func:`aic.export.dynamo.export_dynamo`) for a deployment given by the same layout flags
as ``aic-compile replay``, or as a Deployment JSON file."""

from __future__ import annotations

import json
import sys

import click

from .common import CONTEXT_SETTINGS, chosen_systems_path
from .replay import engine_options, layout_options

#: The layout parameters that ``--deployment FILE`` replaces.
_LAYOUT_PARAMS = ("model", "system", "backend", "backend_version", "mode", "tp_size", "pp_size",
                  "attention_dp_size", "moe_tp_size", "moe_ep_size", "gemm_quant_mode",
                  "moe_quant_mode", "kvcache_quant_mode", "fmha_quant_mode", "comm_quant_mode",
                  "workers", "prefill_workers", "decode_workers", "prefill_tp_size",
                  "prefill_pp_size", "prefill_attention_dp_size", "prefill_moe_tp_size",
                  "prefill_moe_ep_size", "decode_tp_size", "decode_pp_size",
                  "decode_attention_dp_size", "decode_moe_tp_size", "decode_moe_ep_size")


@click.group("export", context_settings=CONTEXT_SETTINGS)
def export_group():
    """Write aic's estimates in another tool's own file format."""


def _deployment(ctx: click.Context, deployment_file, model, system, backend, layout: dict):
    from ..serving.plan import Deployment, PlanValueError
    from ..serving.replay import layout_deployment

    if deployment_file is not None:
        given = [name for name in _LAYOUT_PARAMS
                 if ctx.get_parameter_source(name) == click.core.ParameterSource.COMMANDLINE]
        if given:
            flags = ", ".join(sorted({"MODEL" if n == "model" else n for n in given}))
            raise click.UsageError(f"--deployment gives the whole layout; drop {flags}")
        try:
            with open(deployment_file, encoding="utf-8") as fh:
                text = fh.read()
        except OSError as exc:
            raise click.BadParameter(f"cannot read {deployment_file!r}: {exc.strerror}",
                                     param_hint="'--deployment'") from None
        try:
            return Deployment.from_json(text)
        except PlanValueError as exc:
            raise click.BadParameter(f"{deployment_file}: {exc}",
                                     param_hint="'--deployment'") from None
    missing = [hint for hint, value in (("MODEL", model), ("--system", system),
                                        ("--backend", backend)) if value is None]
    if missing:
        raise click.UsageError(f"give {', '.join(missing)} (or the layout as --deployment "
                               f"FILE.json)")
    try:
        return layout_deployment(model, system, backend, **layout)
    except ValueError as exc:
        raise click.ClickException(f"{type(exc).__name__}: {exc}") from None


@export_group.command("dynamo", context_settings=CONTEXT_SETTINGS,
                      short_help="Dynamo 1.6.1: mocker timing profile, engine config, planner profile.")
@click.argument("model", required=False)
@click.option("--system", "-s", default=None, help="System name, e.g. h200_sxm.")
@click.option("--backend", "-b", default=None, help="vllm, sglang or trtllm.")
@layout_options
@click.option("--deployment", "deployment_file", default=None,
              help="A Deployment's JSON form (aic.serving.plan.Deployment.to_json) instead of "
                   "MODEL, --system, --backend and the layout flags.")
@click.option("--isl", type=click.IntRange(min=1), required=True, help="Prompt tokens.")
@click.option("--osl", type=click.IntRange(min=1), required=True, help="Output tokens.")
@click.option("--prefix", type=click.IntRange(min=0), default=0, show_default=True,
              help="Cached prompt tokens per request.")
@click.option("--out", "out_dir", required=True,
              help="The folder to write (created; must be new or empty unless --force).")
@click.option("--force", is_flag=True, help="Replace a non-empty --out folder.")
@engine_options
@click.option("--json", "as_json", is_flag=True, help="Print what was written as JSON.")
@click.option("--systems-path", "local_systems_path", default=None,
              help="Systems root (overrides the global option / AIC_SYSTEMS_PATH).")
@click.pass_context
def dynamo_cmd(ctx, model, system, backend, deployment_file, isl, osl, prefix, out_dir, force,
               block_size, gpu_memory_fraction, num_gpu_blocks, max_num_seqs,
               max_num_batched_tokens, as_json, local_systems_path, **layout):
    """Write NVIDIA Dynamo's files for a deployment of MODEL serving --isl / --osl into --out:
    the mocker's timing profile and engine config (timing.npz + engine_args.json, or
    prefill_/decode_ ones for --mode disagg) and the SLA planner's profile folder (profile/).

    Run Dynamo's mocker on it with `python -m dynamo.mocker --extra-engine-args
    OUT/engine_args.json` or `dynamo.replay.api.run_synthetic_trace_replay(...,
    extra_engine_args=...)`; point the planner at OUT/profile."""
    from ..export.dynamo import DYNAMO_VERSION, export_dynamo
    from ..serving.plan import PlanValueError, Workload
    from ..serving.replay import ReplayUnavailableError

    systems_path = chosen_systems_path(ctx, local_systems_path)
    deployment = _deployment(ctx, deployment_file, model, system, backend, layout)
    try:
        workload = Workload(isl=isl, osl=osl, prefix=prefix)
    except PlanValueError as exc:
        raise click.UsageError(str(exc)) from None
    try:
        result = export_dynamo(deployment, workload, out_dir, force=force,
                               block_size=block_size, gpu_memory_fraction=gpu_memory_fraction,
                               num_gpu_blocks=num_gpu_blocks, max_num_seqs=max_num_seqs,
                               max_num_batched_tokens=max_num_batched_tokens,
                               systems_path=systems_path)
    except ReplayUnavailableError as exc:
        raise click.ClickException(str(exc)) from None
    except (ValueError, RuntimeError, NotImplementedError) as exc:
        raise click.ClickException(f"{type(exc).__name__}: {exc}") from None
    if as_json:
        text = json.dumps(result.to_dict(), indent=2, allow_nan=False)
    else:
        lines = [f"Dynamo {DYNAMO_VERSION} files for {deployment.model} "
                 f"({deployment.mode}, isl {isl}, osl {osl}) in {result.out_dir}"]
        for name, setup in result.setups.items():
            grid = result.grid_sizes[name]
            lines.append(
                f"  {name:<8} {setup.workers} × {setup.gpus_per_worker} GPU(s), "
                f"{setup.backend}, KV {setup.num_gpu_blocks} blocks × {setup.block_size} tokens, "
                f"prefill {grid['prefill_points']} points, decode "
                f"{grid['decode_grid'][0]} × {grid['decode_grid'][1]} grid")
        for rel in result.files:
            lines.append(f"  wrote {rel}")
        lines.append(f"({result.wall_ms / 1e3:.2f} s)")
        text = "\n".join(lines)
    try:
        click.echo(text)
        sys.stdout.flush()
    except OSError as exc:
        raise click.ClickException(f"cannot write the output: {exc}") from None

