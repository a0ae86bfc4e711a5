#!/usr/bin/env python3
"""Where the estimate of the measured rows that span nodes goes wrong: the per-op breakdown of
the folded records (ACCURACY.md, "Deployments that span nodes").

Usage (from the repo root, with the aic extension built):

    python scripts/layout_breakdown.py [--rows data/silicon/calibration.csv]

For every agg row whose record folds a k-GPU "tp k, ep k" launch into k x k GPUs
(:func:`aic.accuracy.scoring.folded_launch`) it prices the parity estimate twice, once with the
record's layout (what the reference and parity mode price) and once with the launch's, and
prints:

* the measured twins: folded records that the sample also holds with the launch's layout and
  the same measured TTFT and TPOT (to 4 digits);
* which ops carry the difference between the two estimates, in the mixed (prefill) step and the
  decode-only step (share of the summed difference, per op);
* the median ratio of the MoE dispatch + combine time of the two readings.

Every latency is the native engine's (``aic.serving.estimate`` per-op breakdowns); this script
only sums and compares them.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "py_compile_engine"))

from aic.accuracy import scoring  # noqa: E402
from aic.serving.deployment import estimate  # noqa: E402

STEPS = (("mix_step", "mixed (prefill) step"), ("genonly_step", "decode-only step"))
DISPATCH = ("context_moe_pre_dispatch", "context_moe_post_dispatch")


def measured_key(row: dict) -> tuple:
    """What makes two records the same benchmark run: model, system, backend, lengths and the
    measured TTFT / TPOT to 4 digits."""
    return (row["model_path"], row["system"], row["backend"], row["isl"], row["osl"],
            f"{float(row['silicon_ttft_ms']):.4g}", f"{float(row['silicon_tpot_ms']):.4g}")


def twins(rows: list[dict]) -> list[tuple[dict, dict]]:
    """(folded record, record of the same run that is not folded) pairs."""
    by_key = defaultdict(list)
    for r in rows:
        if r["mode"] == "agg":
            by_key[measured_key(r)].append(r)
    return [(r, t) for r in rows if r["mode"] == "agg" and scoring.folded_launch(r)
            for t in by_key[measured_key(r)] if t is not r and not scoring.folded_launch(t)]


def parity_estimate(row: dict, as_launch: bool):
    """The parity estimate of the row read as recorded or as its launch (HYBRID where a table
    is missing, as the calibrated mode falls back); ``None`` when neither prices it."""
    args = scoring.row_request(row, calibrated=as_launch)
    model, system = args.pop("model_path"), args.pop("system_name")
    for mode in ("SILICON", "HYBRID"):
        try:
            return estimate(model, system, database_mode=mode, **args)
        except Exception:  # noqa: BLE001 - a row neither mode prices is left out
            continue
    return None


def _numbers(ops: dict) -> dict:
    return {k: v for k, v in ops.items() if isinstance(v, (int, float))}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", default=str(REPO / "data" / "silicon" / "calibration.csv"))
    args = ap.parse_args(argv)
    rows = scoring.load_rows(args.rows)
    folded = [r for r in rows if r["mode"] == "agg" and scoring.folded_launch(r)]
    pairs = twins(rows)
    print(f"{len(folded)} folded agg records; {len({r['id'] for r, _ in pairs})} of them have a "
          f"measured twin with the launch's layout ({len(pairs)} pairs)")
    diff = {step: defaultdict(float) for step, _ in STEPS}
    total = {step: 0.0 for step, _ in STEPS}
    dispatch_ratio, priced = [], 0
    for row in folded:
        as_recorded, as_launch = parity_estimate(row, False), parity_estimate(row, True)
        if as_recorded is None or as_launch is None:
            continue
        priced += 1
        for step, _ in STEPS:
            rec = _numbers(as_recorded["per_ops"][step])
            run = _numbers(as_launch["per_ops"][step])
            for op in set(rec) | set(run):
                diff[step][op] += rec.get(op, 0.0) - run.get(op, 0.0)
            total[step] += sum(rec.values()) - sum(run.values())
        rec = _numbers(as_recorded["per_ops"]["mix_step"])
        run = _numbers(as_launch["per_ops"]["mix_step"])
        if sum(run.get(op, 0.0) for op in DISPATCH) > 0:
            dispatch_ratio.append(sum(rec.get(op, 0.0) for op in DISPATCH)
                                  / sum(run.get(op, 0.0) for op in DISPATCH))
    print(f"{priced} folded records priced both ways")
    for step, label in STEPS:
        print(f"{label}: recorded - launch summed over the rows {total[step]:.1f} ms; ops "
              f"carrying more than 1 % of it:")
        for op, value in sorted(diff[step].items(), key=lambda kv: -abs(kv[1])):
            if abs(value) > 0.01 * abs(total[step]):
                print(f"  {op:36s} {100.0 * value / total[step]:6.1f} %")
    if dispatch_ratio:
        q = statistics.quantiles(dispatch_ratio, n=10)
        print(f"MoE dispatch + combine of the mixed step, recorded / launch: median "
              f"{statistics.median(dispatch_ratio):.1f} (P10 {q[0]:.1f}, P90 {q[-1]:.1f})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
