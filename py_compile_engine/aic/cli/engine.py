"""``aic-compile compile``, ``estimate`` and ``breakdown``: one engine step of MODEL (compiled
here) or of a compiled spec file. ``estimate --mode`` answers at the serving level through
:mod:`aic.cli.serving`."""

from __future__ import annotations

import json
from pathlib import Path

import click

from ..compiler.spec_builder import DATABASE_MODES
from ..json_output import dumps
from . import serving
from .common import (
    CONTEXT_SETTINGS,
    U32_MAX,
    chosen_systems_path,
    engine_systems_path,
    number,
    refuse_unused,
    text_table,
)

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
    target = _check_output(output, model)
    try:
        if isinstance(data, str):
            target.write_text(data, encoding="utf-8")
        else:
            target.write_bytes(data)
    except OSError as exc:
        raise click.BadParameter(f"cannot write {output}: {exc.strerror}; choose a writable path",
                                 param_hint="--output") from None


def _check_output(output: str, model) -> Path:
    """``--output``, checked before the compile and again before the write: not the model's
    own config, in an existing folder, not a folder itself."""
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
    return target


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
    from .._native import native

    systems_path = chosen_systems_path(ctx, kwargs.get("local_systems_path"))
    try:
        mod = native()
    except ImportError as exc:
        raise click.ClickException(str(exc)) from None
    if spec_file:
        if model:
            raise click.UsageError("give either MODEL or --spec, not both")
        # The spec fixes the deployment: a compile option next to it would be dropped.
        refuse_unused(ctx, ("system", "backend") + _COMPILE_KEYS,
                      "applies when compiling MODEL; the --spec file already fixes the "
                      "deployment: drop it, or compile a new spec with `aic-compile compile`")
        blob = _read_spec_file(spec_file)
        spec_json = None
    else:
        if not model:
            raise click.UsageError("MODEL (or --spec FILE) is required")
        spec_json = _compile_json(model, kwargs.get("system"), kwargs.get("backend"),
                                  systems_path, kwargs)
        blob = bytes(mod.encode_spec(spec_json))
    try:
        engine = mod.AicEngine.from_spec(blob, systems_path=engine_systems_path(systems_path))
    except Exception as exc:  # noqa: BLE001
        raise click.ClickException(f"cannot load the engine: {exc}") from None
    return engine, spec_json


# ----------------------------------------------------------------------------------- compile


@click.command("compile", context_settings=CONTEXT_SETTINGS)
@model_options()
@click.option("--output", "-o", type=click.Path(dir_okay=False, writable=True), default=None,
              help="Output file (default: <model-name>.aicspec, or .json with --json).")
@click.option("--json", "as_json", is_flag=True, help="Write the spec JSON instead of binary.")
@click.pass_context
def compile_cmd(ctx, model, output, as_json, **kwargs):
    """Compile MODEL (HF id of a shipped config, or a folder / config.json) into a spec file."""
    systems_path = chosen_systems_path(ctx, kwargs.get("local_systems_path"))
    if output is not None:
        _check_output(output, model)
    spec_json = _compile_json(model, kwargs["system"], kwargs["backend"], systems_path, kwargs)
    if output is None:
        stem = Path(str(model).rstrip("/")).name or "engine"
        if stem == "config.json":
            stem = Path(str(model)).parent.name or "engine"
        output = f"{stem}.json" if as_json else f"{stem}.aicspec"
    if as_json:
        _write_output(output, spec_json + "\n", model)
    else:
        from .._native import native

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


@click.command("estimate", context_settings=CONTEXT_SETTINGS)
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
        click.echo(dumps(result, indent=2))
    else:
        rows = [
            ("TTFT (prefill)", number(ttft), "ms"),
            ("TPOT (mean decode step)", number(tpot), "ms"),
            ("first decode step", number(first_step), "ms"),
            (f"decode total ({osl} tokens)", number(decode_total), "ms"),
            ("end to end", number(e2e), "ms"),
            (f"decode step ({gen_tokens} requests)", number(decode_step), "ms"),
            (f"mixed step ({ctx_tokens} ctx + {gen_tokens} gen)", number(mixed), "ms"),
            ("prefill throughput", number(result["prefill_tokens_per_s"], 1), "tokens/s"),
            ("decode throughput", number(result["decode_tokens_per_s"], 1), "tokens/s"),
            ("per-user decode speed", number(result["tokens_per_s_per_user"], 1), "tokens/s"),
            ("output throughput (end to end)", number(result["output_tokens_per_s"], 1), "tokens/s"),
            ("mixed-step throughput", number(result["mixed_step_tokens_per_s"], 1), "tokens/s"),
        ]
        click.echo(f"batch {batch}, isl {isl}, osl {osl}, prefix {prefix}")
        for line in text_table(rows, ("metric", "value", "unit"), "lrl"):
            click.echo(line)
        for key, message in errors.items():
            click.echo(f"error in {key}: {message}", err=True)
    if verbose:
        # After the estimates: tables load on first use, and each load may add warnings.
        for warning in engine.load_warnings():
            click.echo(f"load warning [{warning['kind']}]: {warning['message']}", err=True)
    if errors:
        ctx.exit(1)


serving.add_serving_options(estimate_cmd)


# --------------------------------------------------------------------------------- breakdown


@click.command("breakdown", context_settings=CONTEXT_SETTINGS)
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
        click.echo(dumps({"batch": batch, "isl": isl, "osl": osl, "prefix": prefix,
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
        for line in text_table(rows, ("op", "latency_ms", "share", "energy_wms", "source"), "lrrrl"):
            click.echo("  " + line)
    click.echo("")
    click.echo(f"total: {grand:,.4f} ms")
