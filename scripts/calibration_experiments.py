#!/usr/bin/env python3
"""Reproduces the calibration forms that were tried and rejected (ACCURACY.md, "forms tried").

Usage (from the repo root, with the aic extension built and numpy installed):

    python scripts/calibration_experiments.py [--rows data/silicon/calibration.csv]

Every form is fitted on the rows the way ``scripts/fit_calibration.py`` fits the shipped one
(per ``system/backend/mode`` group with the pooled fallbacks, median-ratio scales on a grid of
overheads / queue shares) and judged in-sample and by leave-one-model-family-out CV:

* ``shipped``: the shipped form (group scalars, HYBRID factors, decode attention per backend);
* ``base``: the shipped form without the decode attention scales (group scalars plus the
  HYBRID factors): every variant below is fitted on top of it;
* ``classes-<level>``: per-kernel-class scales (GEMM, attention, MoE, communication, other;
  ``serving/op_classes.rs``) shared at ``level`` (all rows / per backend / per system and
  backend) on top of the group scalars: TPOT base ``sum_c k_c TPOT_c`` and T1 base
  ``sum_c k_c T1_c``; fitted by alternating the group scalars and a least-relative-absolute-
  error fit of the class scales (IRLS, scales kept >= 0.05, ridge towards 1);
* ``classes-<level>-<class>``: one class free, the others at 1;
* ``classes-backend-<class>-tpot-only``: the same on the TPOT split only;
* ``batched-prefill``: the queue term priced through the engine's batched prefill of the
  co-arriving requests, ``T1 + q (T_n - T1) / 2`` instead of ``T1 (1 + q (n - 1) / 2)``;
* ``version-groups``: the shipped form with one more, most specific group level per measured
  engine version (``system/backend/mode/backend_version``, 30 rows or more);
* ``kind-groups``: the same with a level per model kind (dense / MoE) instead of the version.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "py_compile_engine"))

from aic.accuracy import calibration_fit as fc  # noqa: E402

CLASSES = ("gemm", "attention", "moe", "comm", "other")


def _np():
    try:
        import numpy
    except ImportError as exc:  # pragma: no cover - a tool dependency
        raise SystemExit("calibration_experiments.py needs numpy (pip install numpy)") from exc
    return numpy


def _split(f, key, k):
    return sum(k[i] * f[key][c] for i, c in enumerate(CLASSES))


def _class_key(f, level):
    return {"global": "*", "backend": f["backend"], "system": f"{f['system']}/{f['backend']}"}[level]


def _irls(np, X, y, m, free, ridge=0.05, iters=40):
    """Scales k (1 outside ``free``) minimising sum |X k - y| / m (IRLS), ridge towards 1."""
    k = np.ones(X.shape[1])
    fixed = [i for i in range(X.shape[1]) if i not in free]
    y2 = y - X[:, fixed].sum(1) if fixed else y
    Xf = X[:, free] / m[:, None]
    yr = y2 / m
    w = np.ones(len(y))
    b = np.ones(len(free))
    for _ in range(iters):
        A = Xf * np.sqrt(w)[:, None]
        M = A.T @ A + ridge * len(y) * np.eye(len(free))
        v = A.T @ (yr * np.sqrt(w)) + ridge * len(y) * np.ones(len(free))
        b = np.maximum(np.linalg.solve(M, v), 0.05)
        w = 1.0 / np.maximum(np.abs(Xf @ b - yr), 1e-3)
    k[free] = b
    return k


def fit_classes(np, fs, level, free, rounds=2, ttft=True):
    """Alternating fit of the group scalars and the class scales shared at ``level``."""
    kt, kf = {}, {}
    model = None
    for it in range(rounds + 1):
        adj = [dict(f, parity_tpot=_split(f, "tpot_classes", kt.get(_class_key(f, level), [1] * 5)),
                    t1=_split(f, "prefill_classes", kf.get(_class_key(f, level), [1] * 5)))
               for f in fs]
        model = fc.fit(adj)
        if it == rounds:
            break
        by: dict = {}
        for f in fs:
            by.setdefault(_class_key(f, level), []).append(f)
        for key, rows in by.items():
            cs = [fc.lookup(model["groups"], f) for f in rows]
            X = np.array([[c["tpot_scale"] * f["tpot_classes"][n] for n in CLASSES]
                          for f, c in zip(rows, cs)])
            m = np.array([f["tpot"] for f in rows])
            y = np.array([f["tpot"] - c["tpot_overhead_ms"] for f, c in zip(rows, cs)])
            kt[key] = list(_irls(np, X, y, m, free))
            if not ttft:
                continue
            q = [c["ttft_scale"] * (1 + c["ttft_queue"] * (max(f["n"], 1) - 1) / 2)
                 for f, c in zip(rows, cs)]
            X = np.array([[qq * f["prefill_classes"][n] for n in CLASSES] for f, qq in zip(rows, q)])
            m = np.array([f["ttft"] for f in rows])
            y = np.array([f["ttft"] - c["ttft_overhead_ms"] for f, c in zip(rows, cs)])
            kf[key] = list(_irls(np, X, y, m, free))
    return model, kt, kf


def predict_classes(model, f, level):
    _, kt, kf = model
    key = _class_key(f, level)
    adj = dict(f, parity_tpot=_split(f, "tpot_classes", kt.get(key, [1] * 5)),
               t1=_split(f, "prefill_classes", kf.get(key, [1] * 5)))
    return fc.predict(model[0], adj)


def batched(fs):
    """Rows whose queue term is priced by the batched prefill: with n' = 1 + (T_n - T1) / T1
    the shipped ``T1 (1 + q (n' - 1) / 2)`` equals ``T1 + q (T_n - T1) / 2``."""
    out = []
    for f in fs:
        ta = f["prefill_all_ms"] or max(f["n"], 1.0) * f["t1"]
        out.append(dict(f, n=1.0 + max(ta - f["t1"], 0.0) / f["t1"]))
    return out


DENSE_FAMILIES = ("llama", "qwen3")


def version_keys(f):
    """The shipped group keys below a per-engine-version key."""
    version = f["series"][4] or "?"
    return (f"{f['system']}/{f['backend']}/{f['mode']}/{version}",) + fc.default_group_keys(f)


def kind_keys(f):
    """The shipped group keys below a per-model-kind (dense / MoE) key."""
    kind = "dense" if f["family"] in DENSE_FAMILIES else "moe"
    return (f"{f['system']}/{f['backend']}/{f['mode']}/{kind}",) + fc.default_group_keys(f)


def judge_grouped(name, fs, keys):
    """``judge`` of the shipped form fitted and looked up under ``keys``."""
    fc.group_keys = keys
    try:
        judge(name, fs, fc.fit, fc.predict)
    finally:
        fc.group_keys = fc.default_group_keys


def judge(name, fs, fit_fn, predict_fn):
    """In-sample and leave-one-family-out TTFT / TPOT MdAPE of one form."""
    model = fit_fn(fs)
    ins = _mdape([predict_fn(model, f) for f in fs], fs)
    cv: list = [None] * len(fs)
    for fam in sorted({f["family"] for f in fs}):
        m = fit_fn([f for f in fs if f["family"] != fam])
        for i, f in enumerate(fs):
            if f["family"] == fam:
                cv[i] = predict_fn(m, f)
    out = _mdape(cv, fs)
    print(f"{name:34s} fitted TTFT {ins[0]:5.1f} % TPOT {ins[1]:5.1f} %   "
          f"leave-one-family-out TTFT {out[0]:5.1f} % TPOT {out[1]:5.1f} %", flush=True)


def _mdape(pairs, fs):
    ttft = [abs(p[0] - f["ttft"]) / f["ttft"] * 100 for p, f in zip(pairs, fs)]
    tpot = [abs(p[1] - f["tpot"]) / f["tpot"] * 100 for p, f in zip(pairs, fs)]
    return fc._median(ttft), fc._median(tpot)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", default=str(REPO / "data" / "silicon" / "calibration.csv"))
    args = ap.parse_args(argv)
    np = _np()
    fs = [f for f in fc.features(fc.accuracy.load_rows(args.rows)) if f is not None]
    judge("shipped", fs, fc.fit, fc.predict)
    judge_grouped("version-groups", fs, version_keys)
    judge_grouped("kind-groups", fs, kind_keys)
    fc.CLASS_ROUNDS = 0  # the base form: no decode attention scales
    judge("base", fs, fc.fit, fc.predict)
    judge("batched-prefill", fs, lambda rows: fc.fit(batched(rows)),
          lambda m, f: fc.predict(m, batched([f])[0]))
    for level in ("global", "backend", "system"):
        judge(f"classes-{level}", fs, lambda rows, lv=level: fit_classes(np, rows, lv, list(range(5))),
              lambda m, f, lv=level: predict_classes(m, f, lv))
    for i, c in enumerate(CLASSES):
        judge(f"classes-backend-{c}", fs, lambda rows, j=i: fit_classes(np, rows, "backend", [j]),
              lambda m, f: predict_classes(m, f, "backend"))
    for i, c in enumerate(CLASSES):
        judge(f"classes-backend-{c}-tpot-only", fs,
              lambda rows, j=i: fit_classes(np, rows, "backend", [j], ttft=False),
              lambda m, f: predict_classes(m, f, "backend"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
