"""``aic-compile memory``: the per-GPU memory split and KV-cache capacity of a deployment."""

from __future__ import annotations

import click

from ..json_output import dumps
from .common import CONTEXT_SETTINGS, U32_MAX, chosen_systems_path, text_table

def _gib(value: int) -> str:
    return f"{value / 2**30:,.2f}"


@click.command("memory", context_settings=CONTEXT_SETTINGS)
@click.argument("model")
@click.option("--system", "-s", required=True, help="System name, e.g. h200_sxm.")
@click.option("--backend", "-b", required=True, help="trtllm, sglang or vllm.")
@click.option("--backend-version", "--version", "backend_version", default=None,
              help="current (default), next, previous or a literal slot version.")
@click.option("--tp", "tp_size", type=click.IntRange(max=U32_MAX), default=1, show_default=True,
              help="Tensor-parallel size.")
@click.option("--pp", "pp_size", type=click.IntRange(max=U32_MAX), default=1, show_default=True,
              help="Pipeline-parallel size.")
@click.option("--dp", "--attention-dp", "attention_dp_size", type=click.IntRange(max=U32_MAX), default=1,
              show_default=True, help="Attention data-parallel size.")
@click.option("--moe-tp", "moe_tp_size", type=click.IntRange(max=U32_MAX), default=None, help="MoE TP size.")
@click.option("--moe-ep", "moe_ep_size", type=click.IntRange(max=U32_MAX), default=None, help="MoE EP size.")
@click.option("--cp", "cp_size", type=click.IntRange(min=0, max=U32_MAX), default=1, show_default=True,
              help="Context-parallel size (sglang, tp 1).")
@click.option("--gemm-quant", "gemm_quant_mode", default=None)
@click.option("--moe-quant", "moe_quant_mode", default=None)
@click.option("--kvcache-quant", "kvcache_quant_mode", default=None)
@click.option("--fmha-quant", "fmha_quant_mode", default=None)
@click.option("--comm-quant", "comm_quant_mode", default=None)
@click.option("--nextn", type=click.IntRange(max=U32_MAX), default=0, show_default=True, help="MTP draft length.")
@click.option("--max-num-tokens", type=click.IntRange(min=0, max=U32_MAX), default=8192, show_default=True,
              help="Per-iteration token budget (sizes the activations).")
@click.option("--max-batch-size", type=click.IntRange(min=0, max=U32_MAX), default=256, show_default=True,
              help="Maximum batch size (used when --max-num-tokens is 0).")
@click.option("--memory-fraction-kind", type=click.Choice(["of_free", "of_total"]), default=None,
              help="Fraction taken of free or total memory (default: of_free for trtllm, "
                   "of_total for vllm / sglang).")
@click.option("--memory-fraction", "memory_fraction_value", type=float, default=0.9,
              show_default=True, help="KV-cache memory fraction.")
@click.option("--isl", type=click.IntRange(min=1, max=U32_MAX), default=None,
              help="Input length; with --osl, report the max concurrent requests.")
@click.option("--osl", type=click.IntRange(min=1, max=U32_MAX), default=None, help="Output length.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.option("--systems-path", "local_systems_path", default=None,
              help="Systems root (overrides the global option / AIC_SYSTEMS_PATH).")
@click.pass_context
def memory_cmd(ctx, model, isl, osl, as_json, local_systems_path, **kwargs):
    """Per-GPU memory split and KV-cache capacity of MODEL on a deployment."""
    from ..compiler.memory import estimate_kv_cache, max_concurrent_requests

    if (isl is None) != (osl is None):
        raise click.UsageError("give both --isl and --osl, or neither")
    systems_path = chosen_systems_path(ctx, local_systems_path)
    try:
        estimate = estimate_kv_cache(model, kwargs.pop("system"), kwargs.pop("backend"),
                                     kwargs.pop("backend_version"), systems_path=systems_path,
                                     **kwargs)
    except (ValueError, ImportError, RuntimeError) as exc:
        raise click.ClickException(str(exc)) from None
    max_batch = None if isl is None else max_concurrent_requests(estimate, isl, osl)
    if as_json:
        out = dict(estimate)
        if max_batch is not None:
            out["isl"], out["osl"], out["max_concurrent_requests"] = isl, osl, max_batch
        click.echo(dumps(out, indent=2))
        return
    breakdown = estimate.get("memory_breakdown") or {}
    rows = [("GPU memory", f"{estimate['total_gpu_capacity_bytes']:,}",
             _gib(estimate["total_gpu_capacity_bytes"]))]
    for label, key in (("weights", "weights_bytes"), ("activations", "activations_bytes"),
                       ("runtime overhead", "runtime_overhead_bytes"),
                       ("comm overhead", "comm_overhead_bytes")):
        if key in breakdown:
            rows.append((label, f"{breakdown[key]:,}", _gib(breakdown[key])))
    rows.append(("KV cache", f"{estimate['total_kv_size_bytes']:,}",
                 _gib(estimate["total_kv_size_bytes"])))
    click.echo(f"{model}: per GPU ({estimate['source']} estimate)")
    for line in text_table(rows, ("memory", "bytes", "GiB"), "lrr"):
        click.echo(line)
    click.echo("")
    click.echo(f"KV bytes per token:   {estimate['kv_size_per_token_bytes']:,}")
    click.echo(f"KV capacity:          {estimate['total_kv_size_tokens']:,} tokens")
    adjusted = estimate.get("tolerance_adjusted")
    if adjusted:
        click.echo(f"after {adjusted['tolerance_fraction']:g} tolerance: "
                   f"{adjusted['total_kv_size_tokens']:,} tokens")
    if max_batch is not None:
        click.echo(f"max concurrent requests (isl {isl} + osl {osl}): {max_batch:,}")
