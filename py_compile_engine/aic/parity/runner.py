"""Parity against the golden corpus (``goldens/*.json``, format ``aic-goldens/1``).

Every case is compiled through the public compile path, its op lists and engine config are compared
with the recorded spec, and every recorded query is run through the public ``AicEngine`` surface
(goldens README §2, §7). Nothing is skipped: a query kind we cannot run counts as a failure, and so
does every query of a case we could not compile or load. The memory record (README §3) is
replayed through ``aic.estimate_kv_cache`` and compared exactly: one ``memory`` check per case.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any, Callable, Iterable

from ..errors import UnsupportedArchitectureError
from ..validation import check_rtol
from .report import Check, Report
from .serving import FAMILY as SERVING_FAMILY
from .serving import SERVING_FORMAT
from .deploy import DEPLOY_FORMAT, deploy_cases
from .surface import SURFACE_FORMAT, surface_cases

GOLDEN_FORMAT = "aic-goldens/1"
DEFAULT_RTOL = 1e-9
#: Tolerance for floats inside ops (goldens README §7: "exactly or to 1e-12 relative").
SPEC_FLOAT_RTOL = 1e-12
#: A zero reference answer needs ``|ours| <= ZERO_ATOL``.
ZERO_ATOL = 1e-9

QUERY_METHODS = {
    "prefill": "predict_prefill_latency",
    "decode": "predict_decode_latency",
    "mixed_step": "mixed_step_latency",
    "decode_step": "decode_step_latency",
    "static": "run_static",
    "static_per_op": "run_static_per_op",
    "evaluate_ops": "evaluate_ops_json",
}

COMPILE_KEYS = (
    "backend_version", "tp_size", "pp_size", "attention_dp_size", "moe_tp_size", "moe_ep_size",
    "cp_size", "nextn", "gemm_quant_mode", "moe_quant_mode", "kvcache_quant_mode", "fmha_quant_mode",
    "comm_quant_mode", "database_mode",
)

#: Compile keys that ``aic.estimate_kv_cache`` takes (the memory record ignores the rest).
MEMORY_COMPILE_KEYS = (
    "tp_size", "pp_size", "attention_dp_size", "moe_tp_size", "moe_ep_size", "cp_size", "nextn",
    "gemm_quant_mode", "moe_quant_mode", "kvcache_quant_mode", "fmha_quant_mode",
    "comm_quant_mode",
)
#: ``memory.args`` keys passed through to ``aic.estimate_kv_cache``.
MEMORY_ARG_KEYS = ("max_num_tokens", "max_batch_size", "memory_fraction_kind",
                   "memory_fraction_value")


# --------------------------------------------------------------------------------------------
# Loading and selecting cases
# --------------------------------------------------------------------------------------------


def golden_files(location: str | os.PathLike) -> list[Path]:
    """The golden JSON files of a folder (or the file itself)."""
    location = Path(location)
    if location.is_file():
        return [location]
    if not location.is_dir():
        raise ValueError(f"goldens location {str(location)!r} is neither a folder nor a file")
    files = sorted(p for p in location.glob("*.json") if p.is_file())
    if not files:
        raise ValueError(f"no golden *.json files in {str(location)!r}")
    return files


def load_cases(location: str | os.PathLike) -> list[dict]:
    """All cases of the golden files at ``location``; each gets a ``_file`` key (file stem)."""
    cases = []
    for path in golden_files(location):
        doc = _read_golden(path)
        if isinstance(doc, dict) and doc.get("format") == SERVING_FORMAT:
            # Serving-level goldens (spec 50 §11): one check per estimate / sweep case.
            for case in doc["cases"]:
                cases.append({**case, "_file": path.stem, "family": SERVING_FAMILY,
                              "_serving": doc.get("kind", "estimate")})
            continue
        if isinstance(doc, dict) and doc.get("format") == SURFACE_FORMAT:
            # The reference's less-used methods and module functions (family ``surface``).
            cases.extend(surface_cases(doc, path.stem))
            continue
        if isinstance(doc, dict) and doc.get("format") == DEPLOY_FORMAT:
            # The ``--save-dir`` result trees (spec 60 §15): family ``deploy``.
            cases.extend(deploy_cases(doc, path.stem))
            continue
        if not isinstance(doc, dict) or doc.get("format") != GOLDEN_FORMAT:
            raise ValueError(f"{path.name}: not a golden file of format {GOLDEN_FORMAT!r}")
        for case in doc["cases"]:
            cases.append({**case, "_file": path.stem})
    return cases


#: The keys a case of each golden format needs before it can run.
_CASE_KEYS = {GOLDEN_FORMAT: ("id", "compile"), SERVING_FORMAT: ("id", "kwargs"), SURFACE_FORMAT: ("id",),
              DEPLOY_FORMAT: ("id", "args", "modes")}


def _read_golden(path: Path):
    """One golden file's JSON, its ``cases`` checked to be a list of objects holding the keys
    their format needs: ``ValueError`` naming the file (and case) otherwise."""
    try:
        with open(path, encoding="utf-8") as fh:
            doc = json.load(fh)
    except UnicodeDecodeError as exc:
        raise ValueError(f"golden file {path}: not UTF-8 text (byte {exc.start})") from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"golden file {path}: not JSON ({exc})") from None
    except OSError as exc:
        raise ValueError(f"cannot read golden file {path}: {exc.strerror or exc}") from None
    if not isinstance(doc, dict):
        return doc  # refused below as "not a golden file of format ..."
    if "cases" in doc or doc.get("format") in _CASE_KEYS:
        cases = doc.get("cases")
        if not isinstance(cases, list):
            raise ValueError(f"golden file {path}: 'cases' must be a list of case objects, got "
                             f"{type(cases).__name__}")
        for i, case in enumerate(cases):
            if not isinstance(case, dict):
                raise ValueError(f"golden file {path}: case {i} must be an object, got "
                                 f"{type(case).__name__}")
            for key in _CASE_KEYS.get(doc.get("format"), ()):
                if key not in case:
                    raise ValueError(f"golden file {path}: case {i} "
                                     f"({case.get('id', 'without id')}) lacks '{key}'")
    return doc


def case_model_family(case: dict) -> str | None:
    """The reference's family label of a case (``resolved.model_family``), or — for compile
    errors — the label of the model's architecture as our parser sees it."""
    if case.get("_serving") or case.get("_surface") or case.get("_deploy"):
        return None
    resolved = case.get("resolved")
    if resolved:
        return resolved.get("model_family")
    try:
        from ..compiler.families import FAMILY_BY_ARCH
        from ..compiler.hf_config import load_raw_config, preprocess

        raw = load_raw_config(case["compile"]["model"])
        archs = preprocess(raw).get("architectures") or [None]
        return FAMILY_BY_ARCH.get(archs[0])
    except Exception:
        return None


def select_cases(
    cases: Iterable[dict],
    family: str | None = None,
    case_substr: str | None = None,
    model_family: str | None = None,
) -> list[dict]:
    """Filters: ``family`` on the case's ``family`` field (``dense``, ``moe``, ``mla``, ``edge``;
    also the file stem); ``model_family`` on the reference's family label (``LLAMA``, ``MOE``,
    ``DEEPSEEK``); ``case_substr`` on the case id."""
    out = []
    for case in cases:
        if family is not None and family not in (case.get("family"), case.get("_file")):
            continue
        if case_substr is not None and case_substr not in case["id"]:
            continue
        if model_family is not None:
            label = case_model_family(case)
            if label is None or label.upper() != model_family.upper():
                continue
        out.append(case)
    return out


# --------------------------------------------------------------------------------------------
# Comparisons
# --------------------------------------------------------------------------------------------


def _json_float(value):
    if isinstance(value, str) and value in ("NaN", "Infinity", "-Infinity"):
        return float(value.replace("Infinity", "inf"))
    return value


def rel_error(ours: float, ref: float) -> float:
    """``|ours - ref| / |ref|`` (``|ours|`` when ``ref == 0``; 0 when both are the same
    non-finite value)."""
    if math.isnan(ref) or math.isnan(ours):
        return 0.0 if math.isnan(ref) and math.isnan(ours) else math.inf
    if math.isinf(ref) or math.isinf(ours):
        return 0.0 if ours == ref else math.inf
    if ref == 0:
        return abs(ours)
    return abs(ours - ref) / abs(ref)


def scalar_ok(ours: float, ref: float, rtol: float) -> bool:
    ref = _json_float(ref)
    if ref == 0:
        return abs(ours) <= ZERO_ATOL
    return rel_error(ours, ref) <= rtol


def diff_json(ours: Any, ref: Any, path: str = "", rtol: float = SPEC_FLOAT_RTOL) -> list[str]:
    """Structural differences between two JSON values: key sets and order, types (int vs float
    vs bool), strings and ints exactly, floats within ``rtol`` relative."""
    diffs: list[str] = []
    if isinstance(ref, dict):
        if not isinstance(ours, dict):
            return [f"{path or '/'}: expected an object, got {type(ours).__name__}"]
        if list(ours) != list(ref):
            missing = [k for k in ref if k not in ours]
            extra = [k for k in ours if k not in ref]
            if missing or extra:
                diffs.append(f"{path or '/'}: keys differ (missing {missing}, extra {extra})")
            else:
                diffs.append(f"{path or '/'}: key order differs: {list(ours)} vs {list(ref)}")
        for key in ref:
            if key in ours:
                diffs.extend(diff_json(ours[key], ref[key], f"{path}/{key}", rtol))
        return diffs
    if isinstance(ref, list):
        if not isinstance(ours, list):
            return [f"{path}: expected a list, got {type(ours).__name__}"]
        if len(ours) != len(ref):
            diffs.append(f"{path}: length {len(ours)} vs {len(ref)}")
        for i, (a, b) in enumerate(zip(ours, ref)):
            diffs.extend(diff_json(a, b, f"{path}/{i}", rtol))
        return diffs
    if type(ours) is not type(ref):
        return [f"{path}: {ours!r} ({type(ours).__name__}) vs {ref!r} ({type(ref).__name__})"]
    if isinstance(ref, float):
        if ours != ref and rel_error(ours, ref) > rtol:
            return [f"{path}: {ours!r} vs {ref!r}"]
        return []
    if ours != ref:
        return [f"{path}: {ours!r} vs {ref!r}"]
    return []


def diff_op_lists(ours_spec: dict, spec_ops: dict) -> list[str]:
    """Differences between our spec's op lists and a case's ``spec_ops``."""
    return diff_json(
        {"context": ours_spec["context_ops"], "generation": ours_spec["generation_ops"]},
        {"context": spec_ops["context"], "generation": spec_ops["generation"]},
        "",
        SPEC_FLOAT_RTOL,
    )


def error_class_matches(ref_class: str, exc: BaseException) -> bool:
    """Advisory class check: same class name somewhere in our MRO; the reference's
    ``AssertionError`` corresponds to our ``ValueError``."""
    names = {cls.__name__ for cls in type(exc).__mro__}
    if ref_class in names:
        return True
    return ref_class == "AssertionError" and "ValueError" in names


# --------------------------------------------------------------------------------------------
# Running one case
# --------------------------------------------------------------------------------------------


def _call_query(engine, kind: str, args: dict):
    method = QUERY_METHODS.get(kind)
    if method is None:
        raise NotImplementedError(f"query kind {kind!r} is not supported by aic parity")
    if not callable(getattr(engine, method, None)):
        raise NotImplementedError(f"the engine has no {method}() for query kind {kind!r}")
    values = list(args.values())
    if kind == "evaluate_ops":
        values[0] = json.dumps(values[0])
    return getattr(engine, method)(*values)


class _Tracker:
    def __init__(self, report: Report, case: dict, index: int, rtol: float):
        self.report, self.case, self.index, self.rtol = report, case, index, rtol
        self.problems: list[str] = []
        self.max_rel = 0.0

    def scalar(self, ours, ref, label: str):
        ref = _json_float(ref)
        try:
            ours = float(ours)
        except (TypeError, ValueError):
            self.problems.append(f"{label}: not a number: {ours!r}")
            return
        if ref != 0:
            rel = rel_error(ours, ref)
            self.max_rel = max(self.max_rel, rel)
        if not scalar_ok(ours, ref, self.rtol):
            self.problems.append(f"{label}: ours {ours!r} vs ref {ref!r}")

    def per_op(self, ours, ref, label: str):
        ours = list(ours)
        if len(ours) != len(ref):
            self.problems.append(f"{label}: {len(ours)} entries vs {len(ref)}")
        ours_names = [entry[0] for entry in ours]
        ref_names = [entry[0] for entry in ref]
        if ours_names != ref_names:
            self.problems.append(f"{label}: op names {ours_names} vs {ref_names}")
            return
        for mine, theirs in zip(ours, ref):
            name = theirs[0]
            self.scalar(mine[1], theirs[1], f"{label}/{name}/latency")
            self.scalar(mine[2], theirs[2], f"{label}/{name}/energy")
            if len(mine) > 3 and len(theirs) > 3 and mine[3] != theirs[3]:
                self.report.source_mismatches.append(
                    f"{self.case['id']} #{self.index} {label}/{name}: {mine[3]!r} vs {theirs[3]!r}"
                )


def _compare_value(tracker: _Tracker, kind: str, ours, ref) -> None:
    if kind in ("prefill", "decode", "mixed_step", "decode_step"):
        tracker.scalar(ours, ref, kind)
    elif kind == "static":
        ours = list(ours)
        if len(ours) != len(ref):
            tracker.problems.append(f"static: {len(ours)} values vs {len(ref)}")
        for i, (a, b) in enumerate(zip(ours, ref)):
            tracker.scalar(a, b, f"static[{i}]")
    elif kind == "static_per_op":
        ctx, gen = ours
        tracker.per_op(ctx, ref["context"], "context")
        tracker.per_op(gen, ref["generation"], "generation")
    elif kind == "evaluate_ops":
        tracker.per_op(ours, ref, "ops")
    else:
        tracker.problems.append(f"no comparison rule for query kind {kind!r}")


def compile_kwargs(case: dict) -> dict:
    """Keyword arguments of ``compile_engine`` for a case (``database_mode`` only when present)."""
    spec = case["compile"]
    kwargs = {key: spec[key] for key in COMPILE_KEYS if key in spec}
    return kwargs


def memory_kwargs(case: dict) -> dict:
    """Keyword arguments of ``aic.estimate_kv_cache`` for a case's memory record: the compile's
    deployment, the record's ``args`` and, as ``backend_version``, the literal version the
    record names (else the compile's requested version)."""
    spec = case["compile"]
    args = case["memory"].get("args") or {}
    kwargs = {key: spec[key] for key in MEMORY_COMPILE_KEYS if key in spec}
    kwargs.update({key: args[key] for key in MEMORY_ARG_KEYS if key in args})
    kwargs["backend_version"] = args.get("backend_version", spec.get("backend_version"))
    return kwargs


def diff_memory_value(ours, ref: dict) -> list[str]:
    """Differences between our estimate and a recorded ``memory.value``: the same keys, every
    integer (breakdown included) exactly, ``source`` and ``tolerance_adjusted`` equal."""
    if not isinstance(ours, dict):
        return [f"expected a dict, got {type(ours).__name__}"]
    problems = []
    if set(ours) != set(ref):
        problems.append(f"keys {sorted(ours)} vs {sorted(ref)}")
    for key, want in ref.items():
        got = ours.get(key)
        if isinstance(want, dict) and isinstance(got, dict):
            for sub, sub_want in want.items():
                if got.get(sub) != sub_want or type(got.get(sub)) is not type(sub_want):
                    problems.append(f"{key}.{sub}: ours {got.get(sub)!r} vs ref {sub_want!r}")
            if set(got) != set(want):
                problems.append(f"{key}: keys {sorted(got)} vs {sorted(want)}")
        elif got != want or type(got) is not type(want):
            problems.append(f"{key}: ours {got!r} vs ref {want!r}")
    return problems


def _default_memory_fn(*args, **kwargs):
    from ..compiler.memory import estimate_kv_cache

    return estimate_kv_cache(*args, **kwargs)


def _memory_check(case: dict, report: Report, memory_fn: Callable, systems_path) -> None:
    """Replays ``case["memory"]`` through ``memory_fn`` and appends one ``memory`` check."""
    cid = case["id"]
    family = case.get("family") or case.get("_file", "?")
    record = case.get("memory")
    if not record:
        report.checks.append(Check(cid, family, "memory", -1, False, "case has no memory record"))
        return
    spec = case["compile"]
    kwargs = memory_kwargs(case)
    args = record.get("args")
    try:
        ours = memory_fn(spec["model"], spec["system"], spec["backend"],
                         kwargs.pop("backend_version"), systems_path=systems_path, **kwargs)
        ours_exc = None
    except Exception as exc:  # noqa: BLE001 - every error is a recorded outcome
        ours, ours_exc = None, exc
    ref_err = record.get("error")
    if ref_err is not None:
        if ours_exc is None:
            report.checks.append(Check(cid, family, "memory", -1, False,
                                       f"reference raised {ref_err['class']}: "
                                       f"{ref_err['message']}; ours returned {ours!r}"[:600],
                                       args=args))
            return
        if not error_class_matches(ref_err["class"], ours_exc):
            report.class_mismatches.append(
                f"{cid} memory: ref {ref_err['class']} vs ours {type(ours_exc).__name__}"
            )
        # Our compile messages may add a hint after the reference's text; the text must lead.
        if not str(ours_exc).startswith(ref_err["message"]):
            report.checks.append(Check(cid, family, "memory", -1, False,
                                       f"both raised, messages differ: ours {str(ours_exc)!r} "
                                       f"vs ref {ref_err['message']!r}"[:600], args=args))
            return
        report.checks.append(Check(cid, family, "memory", -1, True, "both raised", args=args))
        return
    if ours_exc is not None:
        report.checks.append(Check(cid, family, "memory", -1, False,
                                   f"ours raised {type(ours_exc).__name__}: {ours_exc}"[:600],
                                   args=args))
        return
    problems = diff_memory_value(ours, record.get("value") or {})
    report.checks.append(Check(cid, family, "memory", -1, not problems,
                               "; ".join(problems[:6])[:600], args=args))


#: ``run_case(memory_fn=DEFAULT_MEMORY)``: compare the memory record through
#: ``aic.estimate_kv_cache`` (``memory_fn=None`` leaves the memory record out).
DEFAULT_MEMORY = _default_memory_fn


#: Prefix of a recorded compile error raised while building the engine from a compiled spec.
FROM_SPEC = "from_spec: "


def _native_engine_loader(systems_path: str | None) -> Callable[[str], Any]:
    """Encodes the spec JSON exactly as ``compile_engine`` does and loads it into ``AicEngine``."""

    def load(spec_json: str):
        from ..compiler.compile import native
        from ..paths import systems_path as find_systems

        blob = bytes(native().encode_spec(spec_json))
        return native().AicEngine.from_spec(blob, systems_path=str(find_systems(systems_path)))

    return load


def run_case(case: dict, report: Report, *, systems_path: str | None = None,
             compile_fn: Callable | None = None, engine_loader: Callable | None = None,
             memory_fn: Callable | None = DEFAULT_MEMORY) -> None:
    """Compiles, compares and queries one case, appending its checks to ``report``.

    ``compile_fn`` defaults to :func:`aic.compiler.compile.compile_report` (the
    ``compile_engine`` path);
    ``engine_loader(spec_json)`` defaults to the native encoder + ``AicEngine.from_spec``;
    ``memory_fn`` (default :func:`aic.estimate_kv_cache`) replays the memory record, one
    ``memory`` check; ``None`` leaves the memory record out.
    """
    if case.get("_serving"):
        from .serving import run_serving_case

        run_serving_case(case, report, systems_path=systems_path)
        return
    if case.get("_surface"):
        from .surface import run_surface_case

        run_surface_case(case, report, systems_path=systems_path)
        return
    if case.get("_deploy"):
        from .deploy import run_deploy_case

        run_deploy_case(case, report, systems_path=systems_path)
        return
    _run_compile_and_queries(case, report, systems_path=systems_path, compile_fn=compile_fn,
                             engine_loader=engine_loader)
    if memory_fn is not None:
        _memory_check(case, report, memory_fn, systems_path)


def _run_compile_and_queries(case: dict, report: Report, *, systems_path: str | None,
                             compile_fn: Callable | None, engine_loader: Callable | None) -> None:
    from ..compiler.compile import compile_report

    family = case.get("family") or case.get("_file", "?")
    cid = case["id"]
    queries = case.get("queries") or []
    compile_fn = compile_fn or compile_report

    def fail_queries(reason: str):
        for i, q in enumerate(queries):
            report.checks.append(Check(cid, family, q["kind"], i, False, reason, args=q["args"]))

    spec = case["compile"]
    ref_error = case.get("compile_error")
    try:
        result = compile_fn(
            spec["model"], spec["system"], spec["backend"], systems_path=systems_path,
            **compile_kwargs(case),
        )
        ours_error = None
    except Exception as exc:  # noqa: BLE001 - every error is a recorded outcome
        result, ours_error = None, exc

    if ref_error is not None and ours_error is None and ref_error["message"].startswith(FROM_SPEC):
        # The reference compiled a spec but could not build an engine from it (spec 12 §3.3:
        # a system or backend without perf data): our engine load must fail the same way.
        try:
            (engine_loader or _native_engine_loader(systems_path))(result.spec_json)
            load_error = None
        except Exception as exc:  # noqa: BLE001 - the failure is the expected outcome
            load_error = exc
        if load_error is None:
            report.checks.append(Check(cid, family, "compile", -1, False,
                                       f"reference could not load its engine ({ref_error['class']}: "
                                       f"{ref_error['message']}) but ours loaded"))
        else:
            if not error_class_matches(ref_error["class"], load_error):
                report.class_mismatches.append(
                    f"{cid} engine load: ref {ref_error['class']} vs ours {type(load_error).__name__}"
                )
            report.checks.append(Check(cid, family, "compile", -1, True,
                                       f"both failed to load: {type(load_error).__name__}: {load_error}"))
        fail_queries("reference has no engine")
        return

    if ref_error is not None:
        if ours_error is None:
            report.checks.append(Check(cid, family, "compile", -1, False,
                                       f"reference failed to compile ({ref_error['class']}: "
                                       f"{ref_error['message']}) but ours compiled"))
        elif isinstance(ours_error, UnsupportedArchitectureError) and ours_error.known_to_reference:
            report.checks.append(Check(cid, family, "compile", -1, False,
                                       f"not implemented: {ours_error}"))
        else:
            if not error_class_matches(ref_error["class"], ours_error):
                report.class_mismatches.append(
                    f"{cid} compile: ref {ref_error['class']} vs ours {type(ours_error).__name__}"
                )
            report.checks.append(Check(cid, family, "compile", -1, True,
                                       f"both failed: {type(ours_error).__name__}: {ours_error}"))
        fail_queries("reference has no engine")
        return

    if ours_error is not None:
        report.checks.append(Check(cid, family, "compile", -1, False,
                                   f"ours failed to compile: {type(ours_error).__name__}: {ours_error}"))
        fail_queries("not run: compile failed")
        return

    ours_spec = json.loads(result.spec_json)
    problems = diff_op_lists(ours_spec, case["spec_ops"])
    resolved = case.get("resolved") or {}
    ref_engine = dict(resolved.get("engine") or {})
    ours_engine = dict(ours_spec["engine"])
    if systems_path is not None:
        ours_engine["systems_path"] = ref_engine.get("systems_path")
    problems += [f"engine{d}" for d in diff_json(ours_engine, ref_engine, "", SPEC_FLOAT_RTOL)]
    if ours_spec.get("schema_version") != resolved.get("spec_schema_version"):
        problems.append(f"spec schema {ours_spec.get('schema_version')} vs "
                        f"{resolved.get('spec_schema_version')}")
    if result.model_family != resolved.get("model_family"):
        problems.append(f"model_family {result.model_family} vs {resolved.get('model_family')}")
    if result.quant != resolved.get("quant"):
        problems.append(f"quant {result.quant} vs {resolved.get('quant')}")
    report.checks.append(Check(cid, family, "compile", -1, not problems, "; ".join(problems[:8])))

    try:
        engine = (engine_loader or _native_engine_loader(systems_path))(result.spec_json)
    except Exception as exc:  # noqa: BLE001
        fail_queries(f"not run: engine did not load: {type(exc).__name__}: {exc}")
        return

    rtol = report.rtol
    for i, query in enumerate(queries):
        kind, args = query["kind"], query["args"]
        tracker = _Tracker(report, case, i, rtol)
        try:
            ours = _call_query(engine, kind, args)
            ours_exc = None
        except NotImplementedError as exc:
            report.checks.append(Check(cid, family, kind, i, False, str(exc), args=args))
            continue
        except Exception as exc:  # noqa: BLE001
            ours, ours_exc = None, exc
        ref_err = query.get("error")
        if ref_err is not None:
            if ours_exc is None:
                report.checks.append(Check(cid, family, kind, i, False,
                                           f"reference raised {ref_err['class']}: "
                                           f"{ref_err['message']}; ours returned {ours!r}"[:600],
                                           args=args))
            else:
                if not error_class_matches(ref_err["class"], ours_exc):
                    report.class_mismatches.append(
                        f"{cid} #{i} {kind}: ref {ref_err['class']} vs ours {type(ours_exc).__name__}"
                    )
                report.checks.append(Check(cid, family, kind, i, True, "both raised", args=args))
            continue
        if ours_exc is not None:
            report.checks.append(Check(cid, family, kind, i, False,
                                       f"ours raised {type(ours_exc).__name__}: {ours_exc}"[:600],
                                       args=args))
            continue
        try:
            _compare_value(tracker, kind, ours, query["value"])
        except Exception as exc:  # noqa: BLE001 - a malformed answer is a failure
            tracker.problems.append(f"cannot compare answer {ours!r}: {exc}"[:600])
        if tracker.max_rel > 0:
            report.worst.append((tracker.max_rel, cid, kind, i))
        report.checks.append(Check(cid, family, kind, i, not tracker.problems,
                                   "; ".join(tracker.problems[:6]), tracker.max_rel, args=args))


def run_parity(
    cases: list[dict],
    *,
    rtol: float = DEFAULT_RTOL,
    systems_path: str | None = None,
    progress: Callable[[Iterable[dict]], Any] | None = None,
) -> Report:
    """Runs :func:`run_case` over ``cases``; ``progress`` may wrap the iteration (progress bar).
    ``rtol`` must be a finite number >= 0 (a NaN tolerance failed every comparison)."""
    rtol = check_rtol(rtol)
    report = Report(rtol=rtol)
    iterator: Iterable[dict] = cases
    if progress is not None:
        with progress(cases) as bar:
            for case in bar:
                run_case(case, report, systems_path=systems_path)
        return report
    for case in iterator:
        run_case(case, report, systems_path=systems_path)
    return report


def _failure_lines(failures: list[Check], limit: int) -> list[str]:
    """One block per case; query failures sharing a reason are folded into one line."""
    by_case: dict[str, list[Check]] = {}
    for check in failures:
        by_case.setdefault(check.case_id, []).append(check)
    lines: list[str] = []
    for case_id, checks in by_case.items():
        lines.append(f"  {case_id}")
        reasons: dict[str, list[Check]] = {}
        for check in checks:
            if check.index < 0:
                lines.append(f"    {check.kind}: {check.detail}")
            else:
                reasons.setdefault(check.detail, []).append(check)
        for detail, group in reasons.items():
            if len(group) >= 3:
                kinds = sorted({c.kind for c in group})
                lines.append(f"    {len(group)} queries ({', '.join(kinds)}): {detail}")
                continue
            for check in group:
                args = json.dumps(check.args)
                if len(args) > 160:
                    args = args[:157] + "..."
                lines.append(f"    #{check.index} {check.kind} {args}: {detail}")
        if len(lines) >= limit:
            lines = lines[:limit]
            lines.append(f"  ... ({len(failures)} failures in {len(by_case)} cases in all)")
            break
    return lines


def format_report(report: Report, *, max_failures: int = 60) -> list[str]:
    """Human-readable lines; the last one is exactly ``N passed, M failed``."""
    lines = [f"parity: rtol {report.rtol:g} (zero references need |ours| <= {ZERO_ATOL:g})", ""]
    lines.append(f"{'family':<12}{'passed':>10}{'failed':>10}")
    for fam, counts in sorted(report.family_counts().items()):
        lines.append(f"{fam:<12}{counts['passed']:>10}{counts['failed']:>10}")
    lines.append("")
    lines.append(f"{'check kind':<16}{'passed':>10}{'failed':>10}")
    for kind, counts in sorted(report.kind_counts().items()):
        lines.append(f"{kind:<16}{counts['passed']:>10}{counts['failed']:>10}")
    failures = [c for c in report.checks if not c.passed]
    if failures:
        lines.append("")
        lines.append(f"failures ({len(failures)}, grouped by case; first {max_failures} lines):")
        lines.extend(_failure_lines(failures, max_failures))
    worst = report.worst_errors(10)
    if worst:
        lines.append("")
        lines.append("worst relative errors:")
        for rel, cid, kind, index in worst:
            lines.append(f"  {rel:.3e}  {cid} #{index} {kind}")
    if report.source_mismatches:
        lines.append("")
        lines.append(f"source-tag differences (advisory): {len(report.source_mismatches)}")
        for text in report.source_mismatches[:5]:
            lines.append(f"  {text}")
    if report.class_mismatches:
        lines.append("")
        lines.append(f"error-class differences (advisory): {len(report.class_mismatches)}")
        for text in report.class_mismatches[:5]:
            lines.append(f"  {text}")
    lines.append("")
    lines.append(report.summary_line())
    return lines
