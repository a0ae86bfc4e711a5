#!/usr/bin/env python3
"""Fits the constants of the calibrated serving estimate and writes data/calibration/serving.json.

Usage (from the repo root, with the aic extension built):

    python scripts/fit_calibration.py [--rows data/silicon/calibration.csv] [--out FILE] [--cv]

The fit lives in :mod:`aic.accuracy.calibration_fit` (also behind ``aic-compile calibrate``, which
fits constants on any measured sample); this script makes the shipped file: its provenance names
the sample by its repo path, and writing ``data/calibration/serving.json`` refreshes
``data/SHA256SUMS.accuracy``. What the fit does: see the module documentation of
:mod:`aic.accuracy.calibration_fit`.
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "py_compile_engine"))

from aic.accuracy import scoring as accuracy  # noqa: E402
from aic.accuracy import calibration_fit  # noqa: E402
from aic.accuracy.calibration_fit import (  # noqa: E402,F401  (names the tests use)
    CLASS_ROUNDS, FIELDS, IDENTITY, MIN_POOLED_ROWS, MIN_ROWS, NO_HYBRID, cross_validate,
    features, fit, fit_group, fit_groups, fit_groups_and_hybrid, fit_groups_only, fit_hybrid,
    lookup, predict, scored, series_oracle, tpot_model, ttft_model,
)


def _sha256(path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def document(model: dict, rows_path, n_rows: int) -> dict:
    """The shipped document: provenance names the sample by its path in the repo."""
    rel = os.path.relpath(os.path.abspath(rows_path), REPO)
    return calibration_fit.document(model, rows_path, n_rows, label=rel,
                                    tool="scripts/fit_calibration.py")


SUMS = REPO / "data" / "SHA256SUMS.accuracy"
SUMMED = ("silicon/README.md", "silicon/calibration.csv",
          "silicon/reference_predictions_calibration.csv", "calibration/serving.json")


def write_sums() -> None:
    """``data/SHA256SUMS.accuracy``: the checksums of the accuracy data (the sample and the
    fitted constants), kept apart from ``data/SHA256SUMS``, which ``aic-compile data import``
    regenerates from the imported trees only."""
    lines = [f"{_sha256(REPO / 'data' / rel)}  {rel}\n" for rel in SUMMED]
    SUMS.write_text("".join(lines), encoding="utf-8")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", default=str(REPO / "data" / "silicon" / "calibration.csv"))
    ap.add_argument("--out", default=str(REPO / "data" / "calibration" / "serving.json"))
    ap.add_argument("--cv", action="store_true", help="also report leave-one-family-out CV")
    args = ap.parse_args(argv)
    rows = accuracy.load_rows(args.rows)
    fs = features(rows)
    model = fit(fs)
    doc = document(model, args.rows, len(rows))
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    with open(args.out, "w", encoding="utf-8") as fh:
        json.dump(doc, fh, indent=2, sort_keys=True)
        fh.write("\n")
    if os.path.abspath(args.out) == str(REPO / "data" / "calibration" / "serving.json"):
        write_sums()
    insample = scored(rows, [predict(model, f) if f else None for f in fs])
    print(f"in-sample: coverage {insample['coverage']:.1f} %, TTFT MdAPE "
          f"{insample['ttft_mdape']:.1f} %, TPOT MdAPE {insample['tpot_mdape']:.1f} %")
    if args.cv:
        cv = scored(rows, cross_validate(fs))
        print(f"leave-one-family-out: TTFT MdAPE {cv['ttft_mdape']:.1f} %, TPOT MdAPE "
              f"{cv['tpot_mdape']:.1f} %")
    print(f"wrote {args.out} ({len(model['groups'])} groups, HYBRID factors {model['hybrid']}, "
          f"decode attention scales {model['attention']}) at "
          f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
