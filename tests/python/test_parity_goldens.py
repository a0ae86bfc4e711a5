"""End-to-end parity over the whole golden corpus through the public surface: every case is
compiled by ``compile_engine`` (op lists compared with the recorded ``spec_ops``) and every
recorded query runs on the native ``AicEngine``, at the default 1e-9 relative tolerance.

Every file, ``edge.json`` included (database modes, energy, pipeline, beams, holds, version
aliases, single-op evaluations), must agree completely: compiled op lists, query values and
errors, and each case's ``memory`` record.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import pytest

pytest.importorskip("aic._aic", reason="needs the native module (pip install .)")

from aic.parity import runner as parity  # noqa: E402

GOLDENS = Path(__file__).resolve().parents[2] / "goldens"


@lru_cache(maxsize=None)
def _run(family: str) -> parity.Report:
    cases = parity.select_cases(parity.load_cases(GOLDENS), family=family)
    assert cases, family
    return parity.run_parity(cases)


@pytest.mark.parametrize(
    "family",
    ["dense", "moe", "mla", "edge", "systems", "dsa", "qwen35", "hybrid", "nemotron", "serving",
     "cp", "sparse_linear", "surface", "deploy"],
)
def test_family_agrees_with_reference(family):
    report = _run(family)
    failures = [(c.case_id, c.kind, c.detail) for c in report.checks if not c.passed]
    assert not failures, failures[:5]
    assert report.summary_line() == f"{report.passed} passed, 0 failed"


def test_surface_family_covers_every_record_and_the_gemm_views():
    """The surface file (family ``surface``) runs in full: 24 signatures, 6 module records, 9
    compiles and 207 case records, among them the 9 byte-for-byte GEMM table views (SHA-256 and
    length of a ~7 MB text each)."""
    report = _run("surface")
    assert report.passed + report.failed == 24 + 6 + 9 + 207
    gemm = [c for c in report.checks
            if c.kind == "table_view_json" and c.args == {"attribute": "_gemm_data"}]
    assert len(gemm) == 9 and all(c.passed for c in gemm)
