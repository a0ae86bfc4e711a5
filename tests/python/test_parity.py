"""The parity harness: comparison rules (goldens README §7), case selection, and a full run of
real golden cases against a stand-in engine that answers from the goldens."""

from __future__ import annotations

import json
import math

import pytest
from conftest import GOLDENS, GoldenResolver, family_not_built, golden_cases, native_available

from aic.parity import runner as parity
from aic.compiler.compile import compile_report


# ------------------------------------------------------------------------------ comparisons


def test_diff_json_types_order_and_floats():
    assert parity.diff_json({"a": 1.0, "b": [1, "x"]}, {"a": 1.0, "b": [1, "x"]}) == []
    assert parity.diff_json({"a": 36}, {"a": 36.0})  # int vs float
    assert parity.diff_json({"a": True}, {"a": 1})  # bool vs int
    assert parity.diff_json({"b": 1, "a": 2}, {"a": 2, "b": 1})  # key order
    assert parity.diff_json({"a": 1}, {"a": 1, "b": 2})
    assert parity.diff_json([1, 2], [1, 2, 3])
    assert parity.diff_json({"a": 1.0 + 1e-15}, {"a": 1.0}) == []  # within 1e-12
    assert parity.diff_json({"a": 1.0 + 1e-15}, {"a": 1.0}, rtol=0.0)
    assert parity.diff_json({"a": 1.0 + 1e-9}, {"a": 1.0})


def test_scalar_rule():
    assert parity.scalar_ok(1.0 + 1e-10, 1.0, 1e-9)
    assert not parity.scalar_ok(1.0 + 1e-8, 1.0, 1e-9)
    assert parity.scalar_ok(1e-10, 0.0, 1e-9)  # zero reference: absolute 1e-9
    assert not parity.scalar_ok(1e-8, 0.0, 0.5)
    assert parity.scalar_ok(float("nan"), "NaN", 1e-9)
    assert parity.rel_error(2.0, 1.0) == 1.0
    assert parity.rel_error(math.inf, 1.0) == math.inf


def test_error_class_matching():
    class PerfDataNotAvailableError(RuntimeError):
        pass

    assert parity.error_class_matches("PerfDataNotAvailableError", PerfDataNotAvailableError("x"))
    assert parity.error_class_matches("RuntimeError", PerfDataNotAvailableError("x"))
    assert parity.error_class_matches("AssertionError", ValueError("x"))
    assert not parity.error_class_matches("ValueError", PerfDataNotAvailableError("x"))


# -------------------------------------------------------------------------------- selection


def test_load_and_select_cases():
    cases = parity.load_cases(GOLDENS)
    per_file = {f.stem: len(json.loads(f.read_text())["cases"]) for f in GOLDENS.glob("*.json")}
    # surface.json adds a signatures case and a module case to its 9 engines
    assert len(cases) == sum(per_file.values()) + 2
    assert len(parity.select_cases(cases, family="surface")) == 9 + 2
    assert {"dense", "moe", "mla", "edge", "systems"} <= set(per_file)
    assert len(parity.select_cases(cases, family="systems")) == 103
    assert len(parity.select_cases(cases, family="qwen35")) == 45
    assert len(parity.select_cases(cases, family="hybrid")) == 53
    assert len(parity.select_cases(cases, family="nemotron")) == 45
    assert len(parity.select_cases(cases, family="dsv4")) == 34
    assert len(parity.select_cases(cases, family="dense")) == 65
    assert len(parity.select_cases(cases, family="edge")) == 65
    assert len(parity.select_cases(cases, family="moe")) == 68
    assert len(parity.select_cases(cases, case_substr="Qwen3-8B/h200_sxm/trtllm")) >= 3
    llama_edge = parity.select_cases(cases, family="edge", model_family="llama")
    # 28 compiled LLAMA cases + the two version-error cases of a LLAMA model
    assert len(llama_edge) == 30
    one_file = parity.load_cases(GOLDENS / "mla.json")
    assert {c["family"] for c in one_file} == {"mla"}


def test_load_rejects_other_files(tmp_path):
    (tmp_path / "x.json").write_text(json.dumps({"format": "other", "cases": []}))
    with pytest.raises(ValueError, match="aic-goldens/1"):
        parity.load_cases(tmp_path)
    with pytest.raises(ValueError):
        parity.load_cases(tmp_path / "missing")


# ------------------------------------------------------------------ full runs, fake engine


def _key(kind, args):
    values = list(args.values())
    if kind == "evaluate_ops":
        values[0] = json.loads(values[0]) if isinstance(values[0], str) else values[0]
    return kind, json.dumps(values, sort_keys=True)


class GoldenEngine:
    """Answers every recorded query of a case with the recorded value (or error)."""

    def __init__(self, case, scale=1.0, missing=()):
        self.answers = {_key(q["kind"], q["args"]): q for q in case["queries"]}
        self.scale = scale
        for kind in missing:
            setattr(self, parity.QUERY_METHODS[kind], None)

    def _answer(self, kind, *values):
        query = self.answers[_key(kind, dict(enumerate(values)))]
        if query["error"] is not None:
            raise type(query["error"]["class"], (RuntimeError,), {})(query["error"]["message"])
        value = query["value"]
        s = self.scale
        if kind == "static":
            return tuple(v * s for v in value)
        if kind == "static_per_op":
            return ([tuple([e[0], e[1] * s, e[2], e[3]]) for e in value["context"]],
                    [tuple([e[0], e[1] * s, e[2], e[3]]) for e in value["generation"]])
        if kind == "evaluate_ops":
            return [tuple([e[0], e[1] * s, e[2], e[3]]) for e in value]
        return value * s

    def predict_prefill_latency(self, *a):
        return self._answer("prefill", *a)

    def predict_decode_latency(self, *a):
        return self._answer("decode", *a)

    def mixed_step_latency(self, *a):
        return self._answer("mixed_step", *a)

    def decode_step_latency(self, *a):
        return self._answer("decode_step", *a)

    def run_static(self, *a):
        return self._answer("static", *a)

    def run_static_per_op(self, *a):
        return self._answer("static_per_op", *a)

    def evaluate_ops_json(self, *a):
        return self._answer("evaluate_ops", *a)


def _golden_compile(case):
    def compile_fn(model, system, backend, *, systems_path=None, **kwargs):
        return compile_report(model, system, backend, systems_path=systems_path,
                              resolver=GoldenResolver(case), **kwargs)

    return compile_fn


#: The memory record is replayed through the native engine; without it, it is left out.
MEMORY_CHECKS = 1 if native_available() else 0


def _run(case, **engine_kwargs):
    report = parity.Report(rtol=1e-9)
    parity.run_case(case, report, compile_fn=_golden_compile(case),
                    engine_loader=lambda spec_json: GoldenEngine(case, **engine_kwargs),
                    memory_fn=parity.DEFAULT_MEMORY if MEMORY_CHECKS else None)
    return report


EDGE_GQA = "edge/Qwen3-32B/h200_sxm/vllm/tp2-pp1-dp1"


def _case(case_id):
    for name in ("dense", "moe", "mla", "edge"):
        for case in golden_cases(name):
            if case["id"] == case_id:
                return case
    raise KeyError(case_id)


@pytest.mark.parametrize("case_id", ["dense/Qwen3-8B/h200_sxm/vllm/tp1-pp1-dp1", EDGE_GQA])
def test_golden_engine_passes_everything(case_id):
    case = _case(case_id)
    report = _run(case)
    assert report.failed == 0, [c.detail for c in report.checks if not c.passed][:3]
    assert report.passed == 1 + MEMORY_CHECKS + len(case["queries"])
    assert report.summary_line() == f"{report.passed} passed, 0 failed"
    kinds = {c.kind for c in report.checks}
    if case["family"] == "edge":
        assert "evaluate_ops" in kinds


def test_perturbed_answers_fail():
    case = _case(EDGE_GQA)
    report = _run(case, scale=1.0 + 1e-6)
    failed = [c for c in report.checks if not c.passed]
    # every query with a non-zero value differs by 1e-6 relative; error records still pass
    assert failed and all(c.kind != "compile" for c in failed)
    assert report.worst_errors(1)[0][0] == pytest.approx(1e-6, rel=1e-3)
    assert report.worst_errors(1)[0][1] == EDGE_GQA


def test_missing_query_kind_counts_as_failed():
    case = _case(EDGE_GQA)
    report = _run(case, missing=("evaluate_ops",))
    evals = [c for c in report.checks if c.kind == "evaluate_ops"]
    assert evals and not any(c.passed for c in evals)


def test_compile_difference_fails():
    case = json.loads(json.dumps(_case("dense/Qwen3-8B/h200_sxm/vllm/tp1-pp1-dp1")))
    case["spec_ops"]["context"][1]["Elementwise"]["bytes_per_token"] = 1.0
    report = _run(case)
    compile_checks = [c for c in report.checks if c.kind == "compile"]
    assert len(compile_checks) == 1 and not compile_checks[0].passed
    assert "bytes_per_token" in compile_checks[0].detail


def test_compile_error_symmetry():
    case = _case("dense/Qwen3-8B/h200_sxm/vllm/tp3-pp1-dp1")
    report = parity.Report(rtol=1e-9)
    parity.run_case(case, report, memory_fn=None)  # fails before any native call
    assert [(c.kind, c.passed) for c in report.checks] == [("compile", True)]
    assert report.class_mismatches == []  # AssertionError <-> ValueError is a match


#: A model whose family the tests take out of the builder table (KIMIK3, see family_not_built).
UNIMPLEMENTED_MODEL = "moonshotai/Kimi-K3"


def _unimplemented(case_id):
    """A golden case re-pointed at :data:`UNIMPLEMENTED_MODEL` (same deployment and queries)."""
    case = json.loads(json.dumps(_case(case_id)))
    case["compile"]["model"] = UNIMPLEMENTED_MODEL
    return case


def test_unimplemented_family_is_a_failure_not_a_pass():
    case = _unimplemented("moe/Qwen3-30B-A3B/h200_sxm/vllm/tp4-pp1-dp1")  # ref: width mismatch
    report = parity.Report(rtol=1e-9)
    with family_not_built("KIMIK3"):
        parity.run_case(case, report, memory_fn=None)
    assert [(c.kind, c.passed) for c in report.checks] == [("compile", False)]
    assert "not implemented" in report.checks[0].detail


def test_compile_failure_fails_every_query():
    case = _unimplemented("moe/Qwen3-30B-A3B/h200_sxm/vllm/tp1-pp1-dp1-mtp1-ep1")
    report = parity.Report(rtol=1e-9)
    with family_not_built("KIMIK3"):
        parity.run_case(case, report, memory_fn=None)
    assert report.passed == 0
    assert report.failed == 1 + len(case["queries"])


def test_format_report_last_line():
    report = _run(_case("dense/Qwen3-8B/h200_sxm/vllm/tp1-pp1-dp1"))
    lines = parity.format_report(report)
    assert lines[-1] == f"{report.passed} passed, 0 failed"
    assert json.loads(json.dumps(report.to_json()))["failed"] == 0


# ------------------------------------------------------------------------------------ memory


def _fake_memory(answer=None, raises=None):
    calls = []

    def memory_fn(model, system, backend, backend_version, **kwargs):
        calls.append((model, system, backend, backend_version, kwargs))
        if raises is not None:
            raise raises
        return answer

    return memory_fn, calls


def _memory_checks(report):
    return [c for c in report.checks if c.kind == "memory"]


def test_memory_record_is_one_check_with_the_record_args():
    case = _case("dense/Qwen3-8B/h200_sxm/vllm/tp1-pp1-dp1")
    memory_fn, calls = _fake_memory(answer=json.loads(json.dumps(case["memory"]["value"])))
    report = parity.Report(rtol=1e-9)
    parity.run_case(case, report, compile_fn=_golden_compile(case),
                    engine_loader=lambda spec_json: GoldenEngine(case), memory_fn=memory_fn)
    checks = _memory_checks(report)
    assert [(c.passed, c.index) for c in checks] == [(True, -1)]
    assert report.passed == 2 + len(case["queries"]) and report.failed == 0
    (model, system, backend, version, kwargs), = calls
    assert (model, system, backend, version) == ("Qwen/Qwen3-8B", "h200_sxm", "vllm", "0.24.0")
    assert kwargs["max_num_tokens"] == 8192 and kwargs["max_batch_size"] == 256
    assert kwargs["memory_fraction_kind"] == "of_total"
    assert kwargs["memory_fraction_value"] == 0.9
    assert kwargs["tp_size"] == 1


def test_memory_value_must_match_exactly():
    case = _case("dense/Qwen3-8B/h200_sxm/vllm/tp1-pp1-dp1")
    value = json.loads(json.dumps(case["memory"]["value"]))
    value["memory_breakdown"]["activations_bytes"] += 1
    memory_fn, _ = _fake_memory(answer=value)
    report = parity.Report(rtol=1e-9)
    parity.run_case(case, report, compile_fn=_golden_compile(case),
                    engine_loader=lambda spec_json: GoldenEngine(case), memory_fn=memory_fn)
    (check,) = _memory_checks(report)
    assert not check.passed and "activations_bytes" in check.detail


def test_memory_error_symmetry():
    case = _case("dense/Qwen3-8B/h200_sxm/vllm/tp3-pp1-dp1")
    message = case["memory"]["error"]["message"]
    memory_fn, _ = _fake_memory(raises=ValueError(message))
    report = parity.Report(rtol=1e-9)
    parity.run_case(case, report, memory_fn=memory_fn)
    assert [(c.kind, c.passed) for c in report.checks] == [("compile", True), ("memory", True)]
    # a value where the reference raised fails, and so does a different message
    for fn in (_fake_memory(answer={})[0], _fake_memory(raises=ValueError("other"))[0]):
        report = parity.Report(rtol=1e-9)
        parity.run_case(case, report, memory_fn=fn)
        assert [(c.kind, c.passed) for c in report.checks] == [("compile", True), ("memory", False)]
