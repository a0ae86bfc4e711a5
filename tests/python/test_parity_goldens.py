"""End-to-end parity over the whole golden corpus through the public surface: every case is
compiled by ``compile_engine`` (op lists compared with the recorded ``spec_ops``) and every
recorded query runs on the native ``AicEngine``, at the default 1e-9 relative tolerance.

The dense, MoE and MLA files must agree completely. In ``edge.json`` exactly the queries listed
in ``KNOWN_EDGE_DIFFERENCES`` still differ from the reference (EMPIRICAL-mode mixed steps whose
context attention is far beyond the collected sequence range); the test fails if any other
query differs, and also if one of these starts to agree (then the list must shrink).
"""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("aic._aic", reason="needs the native module (pip install .)")

from aic import parity  # noqa: E402

GOLDENS = Path(__file__).resolve().parents[2] / "goldens"

#: (case id, query kind, query index) of the edge queries that still differ, with why.
KNOWN_EDGE_DIFFERENCES = {
    # EMPIRICAL mixed_step(8192, 2048, isl 65536, osl 2048, prefix 16384): 1.5e-4 / 4.9e-4
    # relative; every other EMPIRICAL query of these engines agrees to 1e-9.
    ("edge/Qwen3-32B/h200_sxm/vllm/tp2-pp1-dp1/db=EMPIRICAL", "mixed_step"),
    ("edge/Meta-Llama-3.1-70B/h100_sxm/trtllm/tp4-pp1-dp1/db=EMPIRICAL", "mixed_step"),
}


def _run(family: str) -> parity.Report:
    cases = parity.select_cases(parity.load_cases(GOLDENS), family=family)
    assert cases, family
    return parity.run_parity(cases)


@pytest.mark.parametrize("family", ["dense", "moe", "mla"])
def test_family_agrees_with_reference(family):
    report = _run(family)
    failures = [(c.case_id, c.kind, c.detail) for c in report.checks if not c.passed]
    assert not failures, failures[:5]
    assert report.summary_line() == f"{report.passed} passed, 0 failed"


def test_edge_agrees_except_known_differences():
    report = _run("edge")
    failures = {(c.case_id, c.kind) for c in report.checks if not c.passed}
    assert failures == KNOWN_EDGE_DIFFERENCES
    assert report.passed > 2300
