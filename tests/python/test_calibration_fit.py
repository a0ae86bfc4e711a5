"""The fit of the calibrated estimate's constants (``aic.accuracy.calibration_fit``) on feature
rows made by hand: a measurement recorded twice counts once, and the TTFT objective weighs the
tail beside the median (ACCURACY.md, "Deployments that span nodes")."""

from __future__ import annotations

import pytest

from aic.accuracy import calibration_fit as fit


def _row(i: int, t1: float, ttft: float, tpot: float, series: str = "a") -> dict:
    """One feature row of the group ``h100_sxm/trtllm/agg`` (the fields :func:`fit.fit` reads)."""
    return {"system": "h100_sxm", "backend": "trtllm", "mode": "agg", "family": "llama",
            "series": (series,), "parity_tpot": 10.0 + i, "parity_ttft": t1, "t1": t1,
            "n": 1.0 + i % 3, "ttft": ttft, "tpot": tpot, "hybrid": (False, False),
            "tpot_classes": {"attention": 1.0}, "prefill_classes": {}, "prefill_all_ms": t1}


ROWS = [_row(i, 100.0 + 10 * i, 150.0 + 13 * i + (i % 4) * 9, 9.0 + 1.1 * i) for i in range(40)]


def test_a_measurement_recorded_twice_counts_once():
    twice = ROWS + [dict(ROWS[3]), dict(ROWS[7])]
    assert fit.distinct_measurements(twice) == ROWS
    assert fit.fit(twice) == fit.fit(ROWS)
    # the same request measured in another series, or measured differently, is another row
    other = [dict(ROWS[3], series=("b",)), dict(ROWS[3], ttft=ROWS[3]["ttft"] + 1.0)]
    assert len(fit.distinct_measurements(ROWS + other)) == len(ROWS) + 2
    assert fit.fit(ROWS + other) != fit.fit(ROWS)


def test_ttft_objective_is_the_median_plus_a_tenth_of_the_p90():
    apes = [0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0]
    # median 0.5, P90 at rank 0.9 * 10 = 9: 0.9
    assert fit.TTFT_TAIL_WEIGHT == 0.1
    assert fit.ttft_objective(apes) == pytest.approx(0.5 + 0.1 * 0.9)


def test_ttft_fit_prefers_the_smaller_tail_at_the_same_median():
    # 21 requests alone on their rank measure exactly 2 x T1, 19 that arrive 5 at a time measure
    # 3 x T1: every queue share up to 0.5 gives a median APE of 0 at scale 2 (the lone requests
    # are the median); only the tail tells that the co-arriving requests wait a quarter of the
    # (5 - 1) / 2 prefills ahead of them. The median alone keeps the first point, no queueing.
    rows = [dict(_row(i, 100.0, 200.0, 10.0), n=1.0) for i in range(21)]
    rows += [dict(_row(21 + i, 100.0, 300.0, 10.0), n=5.0) for i in range(19)]
    c = fit.fit_group(rows)
    assert (c["ttft_scale"], c["ttft_queue"], c["ttft_overhead_ms"]) == (2.0, 0.25, 0.0)
