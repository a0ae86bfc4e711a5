"""End-to-end parity over the whole golden corpus through the public surface: every case is
compiled by ``compile_engine`` (op lists compared with the recorded ``spec_ops``) and every
recorded query runs on the native ``AicEngine``, at the default 1e-9 relative tolerance.

Every file, ``edge.json`` included (database modes, energy, pipeline, beams, holds, version
aliases, single-op evaluations), must agree completely: compiled op lists, query values and
errors, and each case's ``memory`` record.
"""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("aic._aic", reason="needs the native module (pip install .)")

from aic import parity  # noqa: E402

GOLDENS = Path(__file__).resolve().parents[2] / "goldens"


def _run(family: str) -> parity.Report:
    cases = parity.select_cases(parity.load_cases(GOLDENS), family=family)
    assert cases, family
    return parity.run_parity(cases)


@pytest.mark.parametrize(
    "family",
    ["dense", "moe", "mla", "edge", "systems", "dsa", "qwen35", "hybrid", "nemotron", "serving",
     "sparse_linear"],
)
def test_family_agrees_with_reference(family):
    report = _run(family)
    failures = [(c.case_id, c.kind, c.detail) for c in report.checks if not c.passed]
    assert not failures, failures[:5]
    assert report.summary_line() == f"{report.passed} passed, 0 failed"


#: Context parallelism (spec 43) waits in goldens/pending/: its DeepSeek-V4 case needs that family.
PENDING_CP = GOLDENS / "pending" / "cp.json"
CP_WAITING_FOR = {"DEEPSEEKV4"}


def test_cp_agrees_with_reference():
    cases = parity.load_cases(PENDING_CP)
    ready = [c for c in cases if parity.case_model_family(c) not in CP_WAITING_FOR]
    waiting = [c for c in cases if parity.case_model_family(c) in CP_WAITING_FOR]
    assert len(ready) == 43 and len(waiting) == 1
    report = parity.run_parity(ready)
    failures = [(c.case_id, c.kind, c.detail) for c in report.checks if not c.passed]
    assert not failures, failures[:5]
    assert report.passed == 1178 + 43 + 43  # queries, compiles, memory records
    # the waiting case fails only because DeepSeek-V4's cp deltas (spec 43 §7) are not built
    # yet: once it compiles, this test fails so that cp.json moves up to goldens/
    waiting_report = parity.run_parity(waiting)
    compile_checks = [c for c in waiting_report.checks if c.kind == "compile"]
    assert len(compile_checks) == 1 and not compile_checks[0].passed
    assert "Context parallelism (cp_size=4) for model_family='DEEPSEEKV4' is not implemented" \
        in compile_checks[0].detail

