"""Parity of the reference's less-used engine methods and module functions against
``aic-surface-goldens/1`` files (family ``surface``; format in the goldens' README,
"Surface goldens").

Checks, one per record:

* ``signature`` (one per recorded entry point): our ``inspect.signature`` text equals the
  reference's, and a static method is static here too.
* module records (``engine_spec_schema_version``, the util-level tables, the table-view
  attribute catalogue, ``weights_ops_json``).
* per compiled case: ``compile`` (our spec's op lists equal the recorded ones), then every
  record of the case: per-op lists (names and sources exactly, numbers to the tolerance),
  ``evaluate_*_ops``, ``attention_lane_density`` (exact), ``table_view_json`` (``None`` as
  recorded, else the UTF-8 length and SHA-256 of our JSON text, and the parsed text where
  recorded), ``weights_ops_json`` and the op round trip.

A recorded error must be raised too, with the recorded class somewhere in our exception's
MRO; its message must lead ours (ours may add a hint), except for the unknown-op-variant
decode error, whose list of accepted variants is ours.
"""

from __future__ import annotations

import hashlib
import inspect
import json
from typing import Any

SURFACE_FORMAT = "aic-surface-goldens/1"
FAMILY = "surface"

#: Errors whose text names our own alternatives after this prefix (the accepted op variants).
_OWN_ALTERNATIVES = ("ops JSON decode: unknown variant",)


def surface_cases(doc: dict, stem: str) -> list[dict]:
    """The parity cases of one surface file: the signatures, the module records, each case."""
    common = {"_file": stem, "family": FAMILY}
    out = [{**common, "id": "surface/signatures", "_surface": "signatures",
            "signatures": doc["signatures"]},
           {**common, "id": "surface/module", "_surface": "module", "records": doc["module"]}]
    for case in doc["cases"]:
        out.append({**case, **common, "id": f"surface/{case['id']}", "_surface": "case"})
    return out


# --------------------------------------------------------------------------------------------
# Comparison


def diff(ours: Any, ref: Any, rtol: float, path: str = "") -> list[str]:
    """Differences: structure and strings exactly, numbers to ``rtol`` (relative)."""
    if isinstance(ref, dict):
        if not isinstance(ours, dict) or set(ours) != set(ref):
            return [f"{path}: keys {sorted(ours) if isinstance(ours, dict) else ours!r:.200} vs {sorted(ref)}"]
        return [d for key in ref for d in diff(ours[key], ref[key], rtol, f"{path}/{key}")]
    if isinstance(ref, list):
        if not isinstance(ours, (list, tuple)) or len(ours) != len(ref):
            return [f"{path}: {ours!r:.200} vs {ref!r:.200}"]
        return [d for i, (a, b) in enumerate(zip(ours, ref)) for d in diff(a, b, rtol, f"{path}[{i}]")]
    if isinstance(ref, float) or (isinstance(ours, float) and isinstance(ref, int) and not isinstance(ref, bool)):
        if not isinstance(ours, (int, float)) or isinstance(ours, bool):
            return [f"{path}: {ours!r} vs {ref!r}"]
        if ours == ref or (ref != 0 and abs(ours - ref) <= rtol * abs(ref)):
            return []
        return [f"{path}: {ours!r} vs {ref!r}"]
    if type(ours) is not type(ref) or ours != ref:
        return [f"{path}: {ours!r:.200} vs {ref!r:.200}"]
    return []


def _class_matches(ref_class: str, exc: BaseException) -> bool:
    return ref_class in {cls.__name__ for cls in type(exc).__mro__}


def _error_problems(ref_err: dict, exc: BaseException | None, ours: Any) -> list[str]:
    if exc is None:
        return [f"reference raised {ref_err['class']}: {ref_err['message']}; ours returned {ours!r:.200}"]
    problems = []
    if not _class_matches(ref_err["class"], exc):
        problems.append(f"class: ours {type(exc).__name__} vs ref {ref_err['class']}")
    message = ref_err["message"]
    own = next((p for p in _OWN_ALTERNATIVES if message.startswith(p)), None)
    if own is not None:
        message = message.split(", expected", 1)[0]
    if not str(exc).startswith(message):
        problems.append(f"message: ours {str(exc)!r:.300} vs ref {ref_err['message']!r:.300}")
    return problems


def _table_view_summary(text: str | None, ref: dict | None) -> Any:
    if text is None or ref is None:
        return text
    data = text.encode("utf-8")
    out = {"length": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    if "text" in ref:
        out["text"] = text
    return out


# --------------------------------------------------------------------------------------------
# Running


def _native():
    from .._native import native

    return native()


def _signature_checks(case: dict, report) -> None:
    from .report import Check

    module = _native()
    for name, entry in case["signatures"].items():
        owner, _, attr = name.rpartition(".")
        target = getattr(module, owner) if owner else module
        problems = []
        obj = getattr(target, attr, None)
        if obj is None:
            problems.append(f"{name} is missing")
        else:
            try:
                ours = str(inspect.signature(obj))
            except (TypeError, ValueError) as exc:
                ours = f"<no signature: {exc}>"
            if ours != entry["signature"]:
                problems.append(f"signature {ours} vs {entry['signature']}")
            if entry.get("static") and not isinstance(inspect.getattr_static(target, attr), staticmethod):
                problems.append("not a static method")
        report.checks.append(Check(case["id"], FAMILY, "signature", -1, not problems,
                                   "; ".join(problems), args={"name": name}))


def _module_call(record: dict):
    return getattr(_native(), record["kind"])(*record["args"].values())


def _case_call(engine, case: dict, record: dict):
    module = _native()
    kind, args = record["kind"], record["args"]
    if kind == "weights_ops_json":
        ops = case["spec"]["context_ops" if args["ops"] == "spec.context_ops" else "generation_ops"]
        return module.weights_ops_json(json.dumps(ops))
    if kind == "op_roundtrip":
        op = module.op_from_spec_json(json.dumps(case["spec"]["context_ops"][0]))
        variant = next(iter(case["spec"]["context_ops"][0]))
        if type(op).__name__ != variant or not isinstance(op, module.EngineOp):
            raise AssertionError(f"op class {type(op).__name__} is not the variant {variant}")
        return json.loads(module.ops_json_from_ops([op]))
    if kind == "table_view_json":
        return _table_view_summary(engine.table_view_json(**args), record.get("result"))
    return getattr(engine, kind)(**args)


def _record_check(report, case: dict, index: int, record: dict, call) -> None:
    from .report import Check

    try:
        ours, exc = call(), None
    except Exception as e:  # noqa: BLE001 - every error is a recorded outcome
        ours, exc = None, e
    if "error" in record:
        problems = _error_problems(record["error"], exc, ours)
    elif exc is not None:
        problems = [f"ours raised {type(exc).__name__}: {exc}"[:600]]
    else:
        problems = diff(json.loads(json.dumps(ours)), record["result"], report.rtol)
    report.checks.append(Check(case["id"], FAMILY, record["kind"], index, not problems,
                               "; ".join(problems[:6])[:600], args=record["args"]))


def _compile(case: dict, systems_path):
    from ..compiler.compile import compile_engine_json

    spec = dict(case["compile"])
    model, system, backend = spec.pop("model"), spec.pop("system"), spec.pop("backend")
    return compile_engine_json(model, system, backend, systems_path=systems_path, **spec)


def run_surface_case(case: dict, report, *, systems_path=None) -> None:
    """Appends the case's checks to a :class:`aic.parity.report.Report`."""
    from .report import Check

    kind = case["_surface"]
    if kind == "signatures":
        _signature_checks(case, report)
        return
    if kind == "module":
        for i, record in enumerate(case["records"]):
            _record_check(report, case, i, record, lambda r=record: _module_call(r))
        return
    try:
        spec_json = _compile(case, systems_path)
        spec = json.loads(spec_json)
        problems = diff({"context": spec["context_ops"], "generation": spec["generation_ops"]},
                        {"context": case["spec"]["context_ops"], "generation": case["spec"]["generation_ops"]},
                        report.rtol)
        from ..paths import systems_path as find_systems

        blob = bytes(_native().engine_spec_bincode_from_json(spec_json))
        engine = _native().AicEngine.from_spec(blob, systems_path=str(find_systems(systems_path)))
    except Exception as exc:  # noqa: BLE001 - a compile failure fails every record
        report.checks.append(Check(case["id"], FAMILY, "compile", -1, False,
                                   f"{type(exc).__name__}: {exc}"[:600]))
        return
    report.checks.append(Check(case["id"], FAMILY, "compile", -1, not problems,
                               "; ".join(problems[:6])[:600]))
    for i, record in enumerate(case["records"]):
        _record_check(report, case, i, record, lambda r=record: _case_call(engine, case, r))
