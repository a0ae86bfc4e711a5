"""``aic-compile``: compile specs, estimate latencies, per-op breakdowns, KV-cache memory, parity,
data import."""

from __future__ import annotations

import functools
import json
import sys
from pathlib import Path

import click

from .. import paths
from ..compiler.spec_builder import DATABASE_MODES

CONTEXT_SETTINGS = {"help_option_names": ["-h", "--help"], "max_content_width": 100}

#: Integer flags are unsigned 32-bit in the engine: larger values are refused by name.
U32_MAX = 2**32 - 1

#: The largest spec file ``--spec`` reads (the engine's own limit, spec::MAX_SPEC_FILE_BYTES).
MAX_SPEC_FILE_BYTES = 64 << 20


def _read_spec_file(path: str) -> bytes:
    """The bytes of ``--spec PATH``: a regular file of at most 64 MiB, else a one-line error."""
    import stat

    try:
        info = Path(path).stat()
    except OSError as exc:
        raise click.BadParameter(f"cannot read {path}: {exc.strerror}", param_hint="--spec") from None
    if not stat.S_ISREG(info.st_mode):
        raise click.BadParameter(
            f"{path} is not a regular file (a device, FIFO or socket); give the .aicspec or "
            f".json file written by `aic-compile compile`", param_hint="--spec")
    if info.st_size > MAX_SPEC_FILE_BYTES:
        raise click.BadParameter(
            f"{path} has {info.st_size} bytes, more than the {MAX_SPEC_FILE_BYTES}-byte limit for "
            f"a spec; this is not a compiled spec", param_hint="--spec")
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise click.BadParameter(f"cannot read {path}: {exc.strerror}", param_hint="--spec") from None


def _write_output(output: str, data: bytes | str, model) -> None:
    """Writes the compiled spec; every failure is one line naming the path and the fix."""
    target = Path(output)
    try:
        model_path = Path(str(model))
        if model_path.exists() and target.exists() and target.resolve() in (
                model_path.resolve(), (model_path / "config.json").resolve()):
            raise click.BadParameter(f"{output} is the model config being compiled; choose "
                                     f"another output path", param_hint="--output")
    except OSError:
        pass
    if not target.parent.is_dir():
        raise click.BadParameter(f"cannot write {output}: the folder {target.parent} does not "
                                 f"exist (or a part of it is a file); create it or choose another "
                                 f"path", param_hint="--output")
    if target.is_dir():
        raise click.BadParameter(f"cannot write {output}: it is a folder; give a file name",
                                 param_hint="--output")
    try:
        if isinstance(data, str):
            target.write_text(data, encoding="utf-8")
        else:
            target.write_bytes(data)
    except OSError as exc:
        raise click.BadParameter(f"cannot write {output}: {exc.strerror}; choose a writable path",
                                 param_hint="--output") from None


def _version() -> str:
    from .. import __version__

    return __version__


def _print_version(ctx: click.Context, _param, value: bool) -> None:
    """``--version``: the distribution version is looked up only when asked for (reading it
    imports ``importlib.metadata``, a large share of the CLI's start-up otherwise)."""
    if not value or ctx.resilient_parsing:
        return
    click.echo(f"aic-compile {_version()}")
    ctx.exit()


def _systems_path(ctx: click.Context, local: str | None) -> str | None:
    """The subcommand's ``--systems-path``, else the group's; ``None`` lets the library apply its
    default search (``AIC_SYSTEMS_PATH``, packaged data, source checkout)."""
    if local:
        return local
    obj = ctx.find_root().obj or {}
    return obj.get("systems_path")


def _engine_systems_path(explicit: str | None) -> str:
    try:
        return str(paths.systems_path(explicit))
    except ValueError as exc:
        raise click.ClickException(str(exc)) from None


def model_options(require_model: bool = True):
    """MODEL plus the deployment options of ``compile_engine``."""

    def decorate(fn):
        options = [
            click.argument("model", required=require_model),
            click.option("--system", "-s", help="System name, e.g. h200_sxm."),
            click.option("--backend", "-b", help="trtllm, sglang or vllm."),
            click.option("--backend-version", default=None,
                         help="current (default), next, previous or a literal slot version."),
            click.option("--tp", "tp_size", type=click.IntRange(max=U32_MAX), default=1, show_default=True,
                         help="Tensor-parallel size."),
            click.option("--pp", "pp_size", type=click.IntRange(max=U32_MAX), default=1, show_default=True,
                         help="Pipeline-parallel size."),
            click.option("--dp", "--attention-dp", "attention_dp_size", type=click.IntRange(max=U32_MAX), default=1,
                         show_default=True, help="Attention data-parallel size."),
            click.option("--moe-tp", "moe_tp_size", type=click.IntRange(max=U32_MAX), default=None, help="MoE TP size."),
            click.option("--moe-ep", "moe_ep_size", type=click.IntRange(max=U32_MAX), default=None, help="MoE EP size."),
            click.option("--cp", "cp_size", type=click.IntRange(min=0, max=U32_MAX), default=1, show_default=True,
                         help="Context-parallel size (sglang, tp 1, long prompts)."),
            click.option("--gemm-quant", "gemm_quant_mode", default=None),
            click.option("--moe-quant", "moe_quant_mode", default=None),
            click.option("--kvcache-quant", "kvcache_quant_mode", default=None),
            click.option("--fmha-quant", "fmha_quant_mode", default=None),
            click.option("--comm-quant", "comm_quant_mode", default=None),
            click.option("--nextn", type=click.IntRange(max=U32_MAX), default=0, show_default=True,
                         help="MTP draft length."),
            click.option("--kv-block-size", type=click.IntRange(max=U32_MAX), default=None),
            click.option("--database-mode", type=click.Choice(DATABASE_MODES), default=None,
                         help="Perf-database mode (default SILICON)."),
            click.option("--attention-backend", default=None,
                         help="Attention kernel override (sglang / vllm)."),
            click.option("--systems-path", "local_systems_path", default=None,
                         help="Systems root (overrides the global option / AIC_SYSTEMS_PATH)."),
        ]
        for option in reversed(options):
            fn = option(fn)
        return fn

    return decorate


_COMPILE_KEYS = (
    "backend_version", "tp_size", "pp_size", "attention_dp_size", "moe_tp_size", "moe_ep_size",
    "cp_size", "gemm_quant_mode", "moe_quant_mode", "kvcache_quant_mode", "fmha_quant_mode",
    "comm_quant_mode", "nextn", "kv_block_size", "database_mode", "attention_backend",
)


def _compile_json(model, system, backend, systems_path, kwargs) -> str:
    from ..compiler.compile import compile_engine_json

    if not system or not backend:
        raise click.UsageError("--system and --backend are required to compile a model")
    try:
        return compile_engine_json(model, system, backend, systems_path=systems_path,
                                   **{k: kwargs[k] for k in _COMPILE_KEYS})
    except (ValueError, ImportError, NotImplementedError) as exc:
        raise click.ClickException(str(exc)) from None


def _load_engine(ctx, model, spec_file, kwargs):
    """An AicEngine from ``--spec FILE`` or by compiling MODEL; returns (engine, spec_json|None)."""
    from ..compiler.compile import native

    systems_path = _systems_path(ctx, kwargs.get("local_systems_path"))
    try:
        mod = native()
    except ImportError as exc:
        raise click.ClickException(str(exc)) from None
    if spec_file:
        if model:
            raise click.UsageError("give either MODEL or --spec, not both")
        blob = _read_spec_file(spec_file)
        spec_json = None
    else:
        if not model:
            raise click.UsageError("MODEL (or --spec FILE) is required")
        spec_json = _compile_json(model, kwargs.get("system"), kwargs.get("backend"),
                                  systems_path, kwargs)
        blob = bytes(mod.encode_spec(spec_json))
    try:
        engine = mod.AicEngine.from_spec(blob, systems_path=_engine_systems_path(systems_path))
    except Exception as exc:  # noqa: BLE001
        raise click.ClickException(f"cannot load the engine: {exc}") from None
    return engine, spec_json


@click.group(context_settings=CONTEXT_SETTINGS)
@click.option("--systems-path", default=None,
              help=f"Systems root (default: ${paths.SYSTEMS_ENV}, else the packaged data, else "
                   f"the source checkout's data/systems). Given explicitly, it is also recorded "
                   f"in compiled specs.")
@click.option("--version", is_flag=True, expose_value=False, is_eager=True, callback=_print_version,
              help="Show the version and exit.")
@click.pass_context
def main(ctx: click.Context, systems_path: str | None) -> None:
    """aic front end: compile EngineSpecs and query the native engine."""
    ctx.ensure_object(dict)
    ctx.obj["systems_path"] = systems_path


# ----------------------------------------------------------------------------------- compile


@main.command("compile", context_settings=CONTEXT_SETTINGS)
@model_options()
@click.option("--output", "-o", type=click.Path(dir_okay=False, writable=True), default=None,
              help="Output file (default: <model-name>.aicspec, or .json with --json).")
@click.option("--json", "as_json", is_flag=True, help="Write the spec JSON instead of binary.")
@click.pass_context
def compile_cmd(ctx, model, output, as_json, **kwargs):
    """Compile MODEL (HF id of a shipped config, or a folder / config.json) into a spec file."""
    systems_path = _systems_path(ctx, kwargs.get("local_systems_path"))
    spec_json = _compile_json(model, kwargs["system"], kwargs["backend"], systems_path, kwargs)
    if output is None:
        stem = Path(str(model).rstrip("/")).name or "engine"
        if stem == "config.json":
            stem = Path(str(model)).parent.name or "engine"
        output = f"{stem}.json" if as_json else f"{stem}.aicspec"
    if as_json:
        _write_output(output, spec_json + "\n", model)
    else:
        from ..compiler.compile import native

        try:
            blob = bytes(native().encode_spec(spec_json))
        except Exception as exc:  # noqa: BLE001
            raise click.ClickException(str(exc)) from None
        _write_output(output, blob, model)
    spec = json.loads(spec_json)
    click.echo(
        f"wrote {output}: {spec['engine']['model_name']} on {spec['engine']['system_name']} / "
        f"{spec['engine']['backend']} {spec['engine']['backend_version']}, "
        f"{len(spec['context_ops'])} context + {len(spec['generation_ops'])} generation ops"
    )


# ---------------------------------------------------------------------------------- estimate


def _table(rows: list[tuple], headers: tuple, aligns: str) -> list[str]:
    cells = [tuple(str(c) for c in headers)] + [tuple(str(c) for c in row) for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]

    def fmt(row):
        parts = []
        for i, text in enumerate(row):
            parts.append(text.ljust(widths[i]) if aligns[i] == "l" else text.rjust(widths[i]))
        return "  ".join(parts).rstrip()

    out = [fmt(cells[0]), "  ".join("-" * w for w in widths)]
    out += [fmt(r) for r in cells[1:]]
    return out


def _num(value, digits: int = 4) -> str:
    if value is None:
        return "error"
    return f"{value:,.{digits}f}"


@main.command("estimate", context_settings=CONTEXT_SETTINGS)
@model_options(require_model=False)
@click.option("--spec", "spec_file", type=click.Path(exists=True, dir_okay=False), default=None,
              help="Use a compiled spec file instead of compiling MODEL.")
@click.option("--batch", type=click.IntRange(min=0, max=U32_MAX), default=1, show_default=True,
              help="Concurrent requests.")
@click.option("--isl", type=click.IntRange(min=1, max=U32_MAX), default=1024, show_default=True,
              help="Input length (incl. prefix).")
@click.option("--osl", type=click.IntRange(min=1, max=U32_MAX), default=128, show_default=True,
              help="Output length.")
@click.option("--prefix", type=click.IntRange(min=0, max=U32_MAX), default=0, show_default=True,
              help="Cached prefix tokens per request.")
@click.option("--ctx-tokens", type=click.IntRange(min=0, max=U32_MAX), default=None,
              help="Prefill tokens in the mixed step (default: isl).")
@click.option("--gen-tokens", type=click.IntRange(min=0, max=U32_MAX), default=None,
              help="Decoding requests in the mixed / decode step (default: batch).")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.option("--verbose", "-v", is_flag=True,
              help="Also list the perf-data load warnings (skipped versions, legacy markers, "
                   "fallbacks, ...) on stderr.")
@click.pass_context
def estimate_cmd(ctx, model, spec_file, batch, isl, osl, prefix, ctx_tokens, gen_tokens, as_json,
                 verbose, **kwargs):
    """Latencies and throughput for one batch shape."""
    engine, _ = _load_engine(ctx, model, spec_file, kwargs)
    ctx_tokens = isl if ctx_tokens is None else ctx_tokens
    gen_tokens = batch if gen_tokens is None else gen_tokens
    errors: dict[str, str] = {}

    def attempt(key, fn, *args):
        try:
            return float(fn(*args))
        except Exception as exc:  # noqa: BLE001 - reported per metric
            errors[key] = f"{type(exc).__name__}: {exc}"
            return None

    ttft = attempt("ttft_ms", engine.predict_prefill_latency, batch, isl, prefix)
    decode_total = attempt("decode_ms", engine.predict_decode_latency, batch, isl, osl)
    first_step = attempt("first_decode_step_ms", engine.predict_decode_latency, batch, isl, 2)
    if osl > 1:
        tpot = None if decode_total is None else decode_total / (osl - 1)
    else:
        tpot = first_step
    decode_step = attempt("decode_step_ms", engine.decode_step_latency, gen_tokens, isl, osl)
    mixed = attempt("mixed_step_ms", engine.mixed_step_latency, ctx_tokens, gen_tokens, isl, osl,
                    prefix)

    def rate(tokens, ms):
        return None if ms is None or ms <= 0 else tokens * 1000.0 / ms

    e2e = None if ttft is None or decode_total is None else ttft + decode_total
    result = {
        "batch": batch, "isl": isl, "osl": osl, "prefix": prefix,
        "ctx_tokens": ctx_tokens, "gen_tokens": gen_tokens,
        "ttft_ms": ttft, "tpot_ms": tpot, "first_decode_step_ms": first_step,
        "decode_ms": decode_total, "e2e_ms": e2e,
        "decode_step_ms": decode_step, "mixed_step_ms": mixed,
        "prefill_tokens_per_s": rate(batch * (isl - prefix), ttft),
        "decode_tokens_per_s": rate(batch, tpot),
        "tokens_per_s_per_user": rate(1, tpot),
        "output_tokens_per_s": rate(batch * osl, e2e),
        "decode_step_tokens_per_s": rate(gen_tokens, decode_step),
        "mixed_step_tokens_per_s": rate(ctx_tokens + gen_tokens, mixed),
        "errors": errors,
    }
    if as_json:
        click.echo(json.dumps(result, indent=2))
    else:
        rows = [
            ("TTFT (prefill)", _num(ttft), "ms"),
            ("TPOT (mean decode step)", _num(tpot), "ms"),
            ("first decode step", _num(first_step), "ms"),
            (f"decode total ({osl} tokens)", _num(decode_total), "ms"),
            ("end to end", _num(e2e), "ms"),
            (f"decode step ({gen_tokens} requests)", _num(decode_step), "ms"),
            (f"mixed step ({ctx_tokens} ctx + {gen_tokens} gen)", _num(mixed), "ms"),
            ("prefill throughput", _num(result["prefill_tokens_per_s"], 1), "tokens/s"),
            ("decode throughput", _num(result["decode_tokens_per_s"], 1), "tokens/s"),
            ("per-user decode speed", _num(result["tokens_per_s_per_user"], 1), "tokens/s"),
            ("output throughput (end to end)", _num(result["output_tokens_per_s"], 1), "tokens/s"),
            ("mixed-step throughput", _num(result["mixed_step_tokens_per_s"], 1), "tokens/s"),
        ]
        click.echo(f"batch {batch}, isl {isl}, osl {osl}, prefix {prefix}")
        for line in _table(rows, ("metric", "value", "unit"), "lrl"):
            click.echo(line)
        for key, message in errors.items():
            click.echo(f"error in {key}: {message}", err=True)
    if verbose:
        # After the estimates: tables load on first use, and each load may add warnings.
        for warning in engine.load_warnings():
            click.echo(f"load warning [{warning['kind']}]: {warning['message']}", err=True)
    if errors:
        ctx.exit(1)


# --------------------------------------------------------------------------------- breakdown


@main.command("breakdown", context_settings=CONTEXT_SETTINGS)
@model_options(require_model=False)
@click.option("--spec", "spec_file", type=click.Path(exists=True, dir_okay=False), default=None,
              help="Use a compiled spec file instead of compiling MODEL.")
@click.option("--batch", type=click.IntRange(min=0, max=U32_MAX), default=1, show_default=True)
@click.option("--isl", type=click.IntRange(min=1, max=U32_MAX), default=1024, show_default=True)
@click.option("--osl", type=click.IntRange(min=1, max=U32_MAX), default=128, show_default=True)
@click.option("--prefix", type=click.IntRange(min=0, max=U32_MAX), default=0, show_default=True)
@click.option("--beam", "beam_width", type=click.IntRange(min=1, max=U32_MAX), default=1, show_default=True)
@click.option("--mode", type=click.Choice(["static", "static_ctx", "static_gen"]),
              default="static", show_default=True)
@click.option("--stride", type=click.IntRange(min=1, max=U32_MAX), default=32, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.pass_context
def breakdown_cmd(ctx, model, spec_file, batch, isl, osl, prefix, beam_width, mode, stride,
                  as_json, **kwargs):
    """Per-op latencies of a static run (context pass + whole decode), sorted by latency."""
    engine, _ = _load_engine(ctx, model, spec_file, kwargs)
    try:
        ctx_ops, gen_ops = engine.run_static_per_op(batch, beam_width, isl, osl, prefix, 1.0, 1.0,
                                                    mode, stride)
    except Exception as exc:  # noqa: BLE001
        raise click.ClickException(f"{type(exc).__name__}: {exc}") from None
    sections = {}
    for phase, entries in (("context", ctx_ops), ("generation", gen_ops)):
        entries = [
            {"name": e[0], "latency_ms": float(e[1]), "energy_wms": float(e[2]), "source": e[3]}
            for e in entries
        ]
        total = sum(e["latency_ms"] for e in entries)
        for e in entries:
            e["share"] = e["latency_ms"] / total if total > 0 else 0.0
        entries.sort(key=lambda e: -e["latency_ms"])
        sections[phase] = {"total_ms": total, "ops": entries}
    grand = sections["context"]["total_ms"] + sections["generation"]["total_ms"]
    if as_json:
        click.echo(json.dumps({"batch": batch, "isl": isl, "osl": osl, "prefix": prefix,
                               "beam_width": beam_width, "mode": mode, "stride": stride,
                               **sections, "total_ms": grand}, indent=2))
        return
    click.echo(f"batch {batch}, beam {beam_width}, isl {isl}, osl {osl}, prefix {prefix}, "
               f"mode {mode}, stride {stride}")
    for phase in ("context", "generation"):
        sec = sections[phase]
        click.echo("")
        click.echo(f"{phase}: {sec['total_ms']:,.4f} ms")
        rows = [(e["name"], f"{e['latency_ms']:,.4f}", f"{100 * e['share']:.1f}%",
                 f"{e['energy_wms']:,.3f}", e["source"]) for e in sec["ops"]]
        for line in _table(rows, ("op", "latency_ms", "share", "energy_wms", "source"), "lrrrl"):
            click.echo("  " + line)
    click.echo("")
    click.echo(f"total: {grand:,.4f} ms")


# ------------------------------------------------------------------------------------ memory


def _gib(value: int) -> str:
    return f"{value / 2**30:,.2f}"


@main.command("memory", context_settings=CONTEXT_SETTINGS)
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
    systems_path = _systems_path(ctx, local_systems_path)
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
        click.echo(json.dumps(out, indent=2))
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
    for line in _table(rows, ("memory", "bytes", "GiB"), "lrr"):
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


# ------------------------------------------------------------------------------------ parity


@main.command("parity", context_settings=CONTEXT_SETTINGS)
@click.option("--goldens", "goldens_dir", type=click.Path(exists=True), required=True,
              help="Folder of golden *.json files (or one file).")
@click.option("--family", default=None,
              help="Only cases whose family is this (dense, moe, mla, edge).")
@click.option("--model-family", default=None,
              help="Only cases of this reference family label (LLAMA, MOE, DEEPSEEK).")
@click.option("--case", "case_substr", default=None, help="Only case ids containing this.")
@click.option("--rtol", type=float, default=1e-9, show_default=True,
              help="Relative tolerance of the query answers.")
@click.option("--json", "as_json", is_flag=True,
              help="Print the report as one JSON line (the summary line still comes last).")
@click.option("--systems-path", "local_systems_path", default=None)
@click.pass_context
def parity_cmd(ctx, goldens_dir, family, model_family, case_substr, rtol, as_json,
               local_systems_path):
    """Compare compile output and engine answers with the golden corpus.

    The last line is exactly `N passed, M failed`; the exit status is 1 on any failure.
    """
    from ..parity import runner as parity

    systems_path = _systems_path(ctx, local_systems_path)
    try:
        cases = parity.select_cases(parity.load_cases(goldens_dir), family, case_substr,
                                    model_family)
    except ValueError as exc:
        raise click.ClickException(str(exc)) from None
    progress = None
    if sys.stdout.isatty() and not as_json:
        progress = functools.partial(click.progressbar, label="parity", file=sys.stderr,
                                     item_show_func=lambda c: c["id"] if c else "")
    report = parity.run_parity(cases, rtol=rtol, systems_path=systems_path, progress=progress)
    if as_json:
        click.echo(json.dumps(report.to_json()))
        click.echo(report.summary_line())
    else:
        for line in parity.format_report(report):
            click.echo(line)
    if report.failed or not report.checks:
        ctx.exit(1)


# -------------------------------------------------------------------------------------- data


@main.command("support", context_settings=CONTEXT_SETTINGS)
@click.argument("model", required=False)
@click.option("--system", "-s", "systems", multiple=True,
              help="Only this system (repeatable; default: every shipped system).")
@click.option("--backend", "-b", "backends", multiple=True,
              type=click.Choice(("trtllm", "sglang", "vllm")),
              help="Only this backend (repeatable; default: all three).")
@click.option("--tp", type=click.IntRange(min=1, max=U32_MAX), default=1, show_default=True,
              help="Tensor-parallel size of the probe (MoE models put their experts on EP).")
@click.option("--only-failures", is_flag=True, help="List only the cells that do not answer.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output (schema "
              "aic-support/1).")
@click.option("--systems-path", "local_systems_path", default=None)
@click.pass_context
def support_cmd(ctx, model, systems, backends, tp, only_failures, as_json, local_systems_path):
    """Which model answers on which system and backend, asked of the engine itself.

    For MODEL (default: every shipped model) on every system x backend at its default version,
    compiles a spec and runs a prefill (1 x 1024 tokens) and a decode (1 x 1024, 2 tokens)
    estimate. Each cell prints the two latencies, or the one-line reason it does not answer:
    unsupported-architecture, no-perf-data, missing-flops, missing-data (a table, slice or
    anchor), invalid-deployment.
    """
    from ..serving.support import PREFILL_PROBE, DECODE_PROBE, summary_counts, support_matrix

    systems_path = _systems_path(ctx, local_systems_path)
    try:
        cells = support_matrix([model] if model else None, systems or None, backends or None,
                               tp=tp, systems_path=systems_path)
    except ValueError as exc:
        raise click.ClickException(str(exc)) from None
    counts = summary_counts(cells)
    if as_json:
        click.echo(json.dumps({
            "schema": "aic-support/1", "tp": tp,
            "probe": {"prefill": list(PREFILL_PROBE), "decode": list(DECODE_PROBE)},
            "counts": counts, "cells": [c.as_dict() for c in cells],
        }, indent=2))
        return
    shown = [c for c in cells if not (only_failures and c.status == "ok")]
    rows = [(c.model, c.system, c.backend, c.version or "-", c.status,
             _num(c.prefill_ms, 3) if c.status == "ok" else "",
             _num(c.decode_ms, 3) if c.status == "ok" else "", c.reason) for c in shown]
    for line in _table(rows, ("model", "system", "backend", "version", "status", "prefill ms",
                              "decode ms", "reason"), "lllllrrl"):
        click.echo(line)
    click.echo("")
    click.echo(f"{len(cells)} cells: " + ", ".join(f"{n} {k}" for k, n in counts.items()))


@main.group("data", context_settings=CONTEXT_SETTINGS)
def data_group():
    """Manage the vendored perf data."""


@data_group.command("import", context_settings=CONTEXT_SETTINGS)
@click.argument("src", type=click.Path(exists=True, file_okay=False))
@click.option("--dest", type=click.Path(file_okay=False), default=None,
              help="Destination data folder (default: <repo>/data).")
def data_import_cmd(src, dest):
    """Re-create data/systems and data/model_configs from SRC and write data/SHA256SUMS.

    SRC is an aic-data folder (systems/ + model_configs/) or an installed reference's systems/
    folder (model_configs/ beside it is used when present).
    """
    from ..data_import import import_data

    try:
        summary = import_data(src, dest)
    except (ValueError, OSError) as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(f"imported {summary.files} files ({', '.join(summary.trees)}) into {summary.dest}"
               f"{'; NOTICE copied' if summary.notice else ''}; wrote {summary.checksums.name}")


def _coverage_rows(coverage: dict) -> list[tuple]:
    """One row per table: name, family, rows, slices, dtypes, other keys, axes, versions."""
    rows = []
    for t in coverage["tables"]:
        if t["error"] is not None:
            rows.append((t["table"], t["family"], "-", "-", "not available", "", "", ""))
            continue
        dtype_keys = [k for k in t["keys"] if k["name"].endswith("quant") or k["name"] == "dtype"]
        dtypes = "; ".join(f"{k['name']}: {', '.join(map(str, k['values']))}" for k in dtype_keys)
        others = ", ".join(f"{k['name']} x{len(k['values'])}" for k in t["keys"] if k not in dtype_keys)
        axes = "; ".join(f"{a['name']} {a['min']}..{a['max']} x{a['count']}" for a in t["axes"])
        versions = ", ".join(dict.fromkeys(f"{s['framework']} {s['version']}" for s in t["sources"]
                                           if s["rows"] > 0))
        rows.append((t["table"], t["family"], t["rows"], t["slices"], dtypes, others, axes,
                     versions))
    return rows


def _slots_text(entry: dict) -> str:
    if entry["current"] is None:
        return "no perf data"
    slots = [f"current {entry['current']}"]
    if entry["previous"]:
        slots.append(f"previous {entry['previous']}")
    if entry["next"]:
        slots.append(f"next {entry['next']}")
    return ", ".join(slots)


def _show_systems(systems_path, as_json: bool) -> None:
    """``data show`` without a system: every system with its backends and version slots."""
    from ..compiler.compile import native

    try:
        listing = json.loads(native().systems_catalogue_json(systems_path))
    except (ImportError, ValueError) as exc:
        raise click.ClickException(str(exc)) from None
    if as_json:
        click.echo(json.dumps({"schema": "aic-systems/1", "systems": listing}, indent=2))
        return
    rows = []
    for s in listing:
        if s["error"] is not None:
            rows.append((s["name"], "-", "-", "-", f"unreadable: {s['error']}", "", ""))
            continue
        by = {b["backend"]: _slots_text(b) for b in s["backends"]}
        node = str(s["gpus_per_node"]) + (f" (rack {s['gpus_per_rack']})" if s["gpus_per_rack"] else "")
        rows.append((s["name"], "-" if s["sm_version"] is None else s["sm_version"], node,
                     f"{s['mem_capacity'] / 2**30:.0f}", by["trtllm"], by["sglang"], by["vllm"]))
    for line in _table(rows, ("system", "sm", "GPUs/node", "GiB", "trtllm", "sglang", "vllm"),
                       "lrrrlll"):
        click.echo(line)
    without = [s["name"] for s in listing
               if s["error"] is None and all(b["current"] is None for b in s["backends"])]
    if without:
        click.echo("")
        click.echo(f"no perf data (hardware description only; estimates raise): {', '.join(without)}")


@data_group.command("show", context_settings=CONTEXT_SETTINGS)
@click.argument("system", required=False)
@click.argument("backend", required=False)
@click.argument("version", required=False)
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output (schema "
              "aic-table-coverage/1).")
@click.option("--no-shared-layer", is_flag=True,
              help="Only the version's own files (no older versions or shared kernels).")
@click.option("--systems-path", "local_systems_path", default=None)
@click.pass_context
def data_show_cmd(ctx, system, backend, version, as_json, no_shared_layer, local_systems_path):
    """List the shipped systems, or what each perf table of SYSTEM / BACKEND [VERSION] covers.

    With no SYSTEM: every system with its GPU facts and, per backend, the version slots a spec
    can be compiled for ("no perf data" where the system ships no tables for the backend).
    VERSION is a slot alias (current, previous, next) or a literal version; the default is the
    current slot. Per table: family, rows, slices, dtypes / quant modes, the other key
    components (distinct counts), each axis as min..max x distinct values, and the framework
    versions of the files that contributed rows (listed under "sources").
    """
    from ..compiler.compile import native

    if system is None:
        _show_systems(_systems_path(ctx, local_systems_path), as_json)
        return
    if backend is None:
        raise click.UsageError("give BACKEND with SYSTEM (or neither, to list every system)")
    try:
        mod = native()
    except ImportError as exc:
        raise click.ClickException(str(exc)) from None
    try:
        text = mod.table_coverage_json(_systems_path(ctx, local_systems_path), system, backend,
                                       version, enable_shared_layer=not no_shared_layer)
    except ValueError as exc:
        raise click.ClickException(str(exc)) from None
    coverage = json.loads(text)
    if as_json:
        click.echo(json.dumps(coverage, indent=2))
        return
    layer = "off" if no_shared_layer else "on"
    click.echo(f"{coverage['system']} / {coverage['backend']} {coverage['version']} "
               f"(shared layer {layer}; {coverage['data_root']})")
    headers = ("table", "family", "rows", "slices", "dtypes", "other keys", "axes (min..max x n)",
               "versions")
    for line in _table(_coverage_rows(coverage), headers, "llrrllll"):
        click.echo(line)
    click.echo("")
    click.echo("sources (rows kept):")
    for t in coverage["tables"]:
        if t["error"] is not None:
            click.echo(f"  {t['table']}: not available: {t['error']}")
        for src in t["sources"]:
            click.echo(f"  {t['table']}: {src['path']} ({src['rows']})")


# Serving-level commands (estimate --mode, sweep) live in their own module.
from . import serving  # noqa: E402,F401
# The accuracy command (measured deployments vs estimates) lives in its own module.
from . import accuracy  # noqa: E402,F401

if __name__ == "__main__":  # pragma: no cover
    main()
