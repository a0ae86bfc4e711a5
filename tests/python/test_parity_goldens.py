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

from aic.parity import runner as parity  # noqa: E402

GOLDENS = Path(__file__).resolve().parents[2] / "goldens"


def _run(family: str) -> parity.Report:
    cases = parity.select_cases(parity.load_cases(GOLDENS), family=family)
    assert cases, family
    return parity.run_parity(cases)


@pytest.mark.parametrize(
    "family",
    ["dense", "moe", "mla", "edge", "systems", "dsa", "qwen35", "hybrid", "nemotron", "serving",
     "cp", "sparse_linear"],
)
def test_family_agrees_with_reference(family):
    report = _run(family)
    failures = [(c.case_id, c.kind, c.detail) for c in report.checks if not c.passed]
    assert not failures, failures[:5]
    assert report.summary_line() == f"{report.passed} passed, 0 failed"
