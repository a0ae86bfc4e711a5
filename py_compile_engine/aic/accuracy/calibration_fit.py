"""Fitting the constants of the calibrated serving estimate (``ACCURACY.md``) on measured
deployments: ``aic-compile calibrate --rows FILE.csv --out constants.json [--cv]``, and the
shipped ``data/calibration/serving.json`` through ``scripts/fit_calibration.py``.

1. Every row of the measured sample is estimated in calibrated mode with *identity* constants,
   which yields, per row, the parity TTFT / TPOT, the one-request prefill ``T1`` and the
   requests arriving together per prefill rank ``n`` (all computed by the native engine).
2. Per group ``system/backend/mode`` (only groups with at least ``MIN_ROWS`` rows) and pooled per
   ``*/backend/mode``, ``*/backend/*`` and ``*/*/*``, the five constants of
   ``crates/aic-core/src/serving/calibrated.rs`` are chosen on a fixed grid to minimise the median
   absolute percentage error (APE) of
       TPOT = tpot_scale * TPOT_parity + tpot_overhead_ms
   and the median plus a tenth of the P90 APE (:func:`ttft_objective`) of
       TTFT = ttft_scale * T1 * (1 + ttft_queue * (n - 1) / 2) + ttft_overhead_ms
   (for each overhead / queue on the grid the scale is the median ratio, so the fit is a
   deterministic, robust closed form; no optimiser, no random start). Rows that are one
   measurement recorded twice count once (:func:`distinct_measurements`).
3. Rows priced in the HYBRID database mode (their perf table is missing) get one factor pair on
   top of their group's constants: ``hybrid.ttft_scale`` multiplies ``T1`` of a HYBRID-priced
   prefill worker, ``hybrid.tpot_scale`` the parity TPOT of a HYBRID-priced decode worker; each
   is the median over those rows of (measured - overhead) / (group-corrected kernel time).
4. Decode attention kernels get one scale per backend (``classes.<group>.tpot.attention``,
   the same for every group of a backend): the parity TPOT becomes ``TPOT_parity - A + k_b * A``
   with ``A`` its attention share (the engine's kernel-class split). ``k_b`` is the weighted
   median that minimises the mean relative error given the group constants; groups, HYBRID
   factors and ``k_b`` are fitted in turn (``CLASS_ROUNDS`` times, then the groups and HYBRID
   factors once more with the final ``k_b``).
5. Leave-one-model-family-out cross-validation (``--cv``): the constants are refitted without
   one family and judged on it only.

Every latency is the native engine's: the rows' features come from native estimates with
identity constants, and the fitted constants are judged by native calibrated estimates
(:func:`native_scores`); the closed form below only drives the search and the experiments of
``scripts/calibration_experiments.py``.
"""

from __future__ import annotations

import hashlib
import math
import os
import statistics

from . import scoring as accuracy

MIN_ROWS = 30  # an exact system/backend/mode group needs this many rows
MIN_POOLED_ROWS = 10  # a pooled */backend/... group needs this many (*/*/* always fitted)
TPOT_OVERHEADS = [i * 0.25 for i in range(0, 41)]  # 0 .. 10 ms per iteration
# 0 .. 1: ttft_queue is the share of the co-arriving prefills a request waits behind; 1 is
# first-in first-out with all n arriving at once, the most queueing there can be (a value above
# 1 has no physical meaning and only trades the scale against the queue on a small group).
TTFT_QUEUES = [i * 0.05 for i in range(0, 21)]
TTFT_OVERHEADS = [float(i) for i in range(0, 401, 20)]  # 0 .. 400 ms per request
#: The weight of the P90 APE beside the median APE in the TTFT fit (:func:`ttft_objective`);
#: TPOT is fitted by the median alone (a tail weight there is worse under leave-one-family-out,
#: ACCURACY.md).
TTFT_TAIL_WEIGHT = 0.1
IDENTITY = {"version": 1, "provenance": "identity (feature extraction)", "groups": {}}
VERSION = 2  # group scalars plus the HYBRID factors and the decode-attention class scales
CLASS_ROUNDS = 2
ATTENTION_SCALE_MIN = 0.05  # a kernel class cannot run in no time
FIELDS = ("tpot_scale", "tpot_overhead_ms", "ttft_scale", "ttft_queue", "ttft_overhead_ms")
#: The columns a rows file needs for a fit: those of an accuracy run plus the two that name a
#: measured series (:func:`features`).
REQUIRED_COLUMNS = accuracy.REQUIRED_COLUMNS + ("backend_version", "precision")


def features(rows: list[dict], progress=None, systems_path=None,
             read_folded: bool = True) -> list[dict]:
    """Per predicted row: group parts, family, parity figures, T1, n and the measurements
    (``read_folded``: :func:`aic.accuracy.scoring.row_request`)."""
    preds = accuracy.predict_rows(rows, calibrated=True, calibration=IDENTITY, progress=progress,
                                  systems_path=systems_path, read_folded=read_folded)
    out = []
    for row, p in zip(rows, preds):
        if not p.predicted:
            out.append(None)
            continue
        c = p.extra
        out.append({"system": row["system"], "backend": row["backend"], "mode": row["mode"],
                    "family": accuracy.family_of(row["model_path"]),
                    "series": (row["model_path"], row["system"], row["backend"], row["mode"],
                               row["backend_version"], row["precision"]),
                    "parity_tpot": c["parity_tpot"], "parity_ttft": c["parity_ttft"],
                    "t1": c["prefill_one_ms"],
                    "n": c["requests_per_rank"], "ttft": float(row["silicon_ttft_ms"]),
                    "tpot": float(row["silicon_tpot_ms"]),
                    "hybrid": tuple(c["hybrid_priced"]),
                    # kernel-class splits and the batched prefill (scripts/calibration_experiments.py)
                    "tpot_classes": c["tpot_classes"], "prefill_classes": c["prefill_classes"],
                    "prefill_all_ms": c["prefill_all_ms"]})
    return out


def _median(values):
    return statistics.median(values) if values else math.nan


NO_HYBRID = {"ttft_scale": 1.0, "tpot_scale": 1.0}


def tpot_kernel(c, f, h=NO_HYBRID):
    """The kernel part of the calibrated TPOT (without the per-iteration overhead)."""
    return c["tpot_scale"] * f["parity_tpot"] * (h["tpot_scale"] if f["hybrid"][1] else 1.0)


def ttft_kernel(c, f, h=NO_HYBRID):
    """The kernel part of the calibrated TTFT (without the per-request overhead)."""
    waiting = (max(f["n"], 1.0) - 1.0) / 2.0
    t1 = f["t1"] * (h["ttft_scale"] if f["hybrid"][0] else 1.0)
    return c["ttft_scale"] * t1 * (1.0 + c["ttft_queue"] * waiting)


def tpot_model(c, f, h=NO_HYBRID):
    return tpot_kernel(c, f, h) + c["tpot_overhead_ms"]


def ttft_model(c, f, h=NO_HYBRID):
    return ttft_kernel(c, f, h) + c["ttft_overhead_ms"]


def _fit_scale_offset(base: list[float], meas: list[float], offsets) -> tuple[float, float]:
    """(scale, offset) minimising the median APE of ``scale * base + offset`` over the grid of
    offsets, the scale being the median of ``(meas - offset) / base`` (kept positive)."""
    best = None
    for off in offsets:
        ratios = [(m - off) / b for b, m in zip(base, meas) if b > 0]
        scale = _median(ratios)
        if not scale > 0:
            continue
        err = _median([abs(scale * b + off - m) / m for b, m in zip(base, meas)])
        if best is None or err < best[0] - 1e-12:
            best = (err, scale, off)
    return (best[1], best[2]) if best else (1.0, 0.0)


def default_group_keys(f: dict) -> tuple:
    """The group keys a row is fitted under and looked up by, most specific first: the
    native lookup order of ``Calibration::lookup``."""
    return (f"{f['system']}/{f['backend']}/{f['mode']}", f"*/{f['backend']}/{f['mode']}",
            f"*/{f['backend']}/*", "*/*/*")


#: The keys in use (``scripts/calibration_experiments.py`` swaps in other groupings).
group_keys = default_group_keys


def ttft_objective(apes: list[float]) -> float:
    """What the TTFT grid search minimises: the median APE plus :data:`TTFT_TAIL_WEIGHT` times
    the P90 APE. The median alone is flat over many (scale, queue, overhead) points of the grid
    (they differ by a fraction of a point) that differ by tens of points in the tail; the small
    tail weight picks among those without trading the median away."""
    return _median(apes) + TTFT_TAIL_WEIGHT * accuracy.percentile(apes, 90.0)


def fit_group(fs: list[dict]) -> dict:
    """The five constants for one group of feature rows: TPOT by the median APE, TTFT by
    :func:`ttft_objective`."""
    tpot_scale, tpot_overhead = _fit_scale_offset([f["parity_tpot"] for f in fs],
                                                  [f["tpot"] for f in fs], TPOT_OVERHEADS)
    best = None
    for q in TTFT_QUEUES:
        base = [f["t1"] * (1.0 + q * (max(f["n"], 1.0) - 1.0) / 2.0) for f in fs]
        for off in TTFT_OVERHEADS:
            scale = _median([(f["ttft"] - off) / b for b, f in zip(base, fs) if b > 0])
            if not scale > 0:
                continue
            err = ttft_objective([abs(scale * b + off - f["ttft"]) / f["ttft"]
                                  for b, f in zip(base, fs)])
            if best is None or err < best[0] - 1e-12:
                best = (err, scale, q, off)
    if best is None:
        best = (math.nan, 1.0, 0.0, 0.0)
    _, ttft_scale, queue, ttft_overhead = best
    return {"tpot_scale": round(tpot_scale, 6), "tpot_overhead_ms": tpot_overhead,
            "ttft_scale": round(ttft_scale, 6), "ttft_queue": round(queue, 2),
            "ttft_overhead_ms": ttft_overhead, "rows": len(fs)}


def fit_groups(fs: list[dict]) -> dict:
    """Constants for every group with enough rows and the pooled fallbacks."""
    fs = [f for f in fs if f is not None]
    buckets: dict = {}
    for f in fs:
        for key in group_keys(f):
            buckets.setdefault(key, []).append(f)
    return {key: fit_group(group) for key, group in sorted(buckets.items())
            if len(group) >= (MIN_POOLED_ROWS if key.startswith("*/") else MIN_ROWS)
            or key == "*/*/*"}


def fit_hybrid(groups: dict, fs: list[dict]) -> dict:
    """The HYBRID factors: over the rows whose prefill (decode) worker is HYBRID-priced, the
    median of (measured - overhead) / kernel time under their group's constants (1 without
    such rows)."""
    out = {}
    for name, side, kernel, meas, off in (
            ("ttft_scale", 0, ttft_kernel, "ttft", "ttft_overhead_ms"),
            ("tpot_scale", 1, tpot_kernel, "tpot", "tpot_overhead_ms")):
        ratios = []
        for f in fs:
            if f is None or not f["hybrid"][side]:
                continue
            c = lookup(groups, f)
            k = kernel(c, f)
            if k > 0:
                ratios.append((f[meas] - c[off]) / k)
        scale = _median(ratios)
        out[name] = round(scale, 6) if scale > 0 else 1.0
    return out


def with_attention(f: dict, k: float) -> dict:
    """The row with its decode attention share scaled by ``k`` in the parity TPOT."""
    a = f["tpot_classes"]["attention"]
    return dict(f, parity_tpot=f["parity_tpot"] - a + k * a)


def _weighted_median(values: list[float], weights: list[float]) -> float:
    pairs = sorted(zip(values, weights))
    half = sum(weights) / 2.0
    acc = 0.0
    for v, w in pairs:
        acc += w
        if acc >= half:
            return v
    return math.nan


def fit_attention(model: dict, fs: list[dict], k: dict) -> dict:
    """Per backend, the decode attention scale minimising the mean of
    ``|c * (R + k * A) + o - m| / m`` (``c`` the group's TPOT scale times the HYBRID factor,
    ``R`` the rest of the parity TPOT): the weighted median of ``(m - o - c R) / (c A)`` with
    weights ``c A / m``."""
    out = {}
    for backend in sorted({f["backend"] for f in fs}):
        values, weights = [], []
        for f in fs:
            if f["backend"] != backend:
                continue
            a = f["tpot_classes"]["attention"]
            c = lookup(model["groups"], f)
            scale = c["tpot_scale"] * (model["hybrid"]["tpot_scale"] if f["hybrid"][1] else 1.0)
            if a <= 0 or scale <= 0:
                continue
            rest = f["parity_tpot"] - a
            values.append((f["tpot"] - c["tpot_overhead_ms"] - scale * rest) / (scale * a))
            weights.append(scale * a / f["tpot"])
        kb = _weighted_median(values, weights) if values else k.get(backend, 1.0)
        out[backend] = round(max(kb, ATTENTION_SCALE_MIN), 6)
    return out


def _attention_of(model: dict, f: dict) -> float:
    """The decode attention scale a row gets: that of the group key it is looked up under."""
    for key in group_keys(f):
        if key in model["groups"]:
            backend = key.split("/")[1]
            return model["attention"].get(backend, 1.0) if backend != "*" else 1.0
    return 1.0


def measurement_key(f: dict) -> tuple:
    """What makes a row one measurement: its measured series, the request it is priced as
    (parity TPOT, ``T1``, ``n``) and its measured TTFT / TPOT. Two rows with the same key are
    one benchmark run recorded twice (a folded record and its twin, or a repeated line)."""
    return (f["series"], f["parity_tpot"], f["t1"], f["n"], f["ttft"], f["tpot"])


def distinct_measurements(fs: list[dict]) -> list[dict]:
    """``fs`` with every measurement once (the first row of each :func:`measurement_key`), so
    that a benchmark run recorded twice does not weigh twice in the group medians."""
    seen: set = set()
    out = []
    for f in fs:
        key = measurement_key(f)
        if key not in seen:
            seen.add(key)
            out.append(f)
    return out


def fit(fs: list[dict]) -> dict:
    """The fitted model: ``{"groups": per-group constants, "hybrid": HYBRID factors,
    "attention": decode attention scale per backend}``, fitted on the distinct measurements
    (:func:`distinct_measurements`)."""
    fs = distinct_measurements([f for f in fs if f is not None])
    k: dict = {}
    model: dict = {}
    for rnd in range(CLASS_ROUNDS + 1):
        adj = [with_attention(f, k.get(f["backend"], 1.0)) for f in fs]
        groups = fit_groups(adj)
        model = {"groups": groups, "hybrid": fit_hybrid(groups, adj), "attention": dict(k)}
        if rnd < CLASS_ROUNDS:
            k = fit_attention(model, fs, k)
    return model


def lookup(groups: dict, f: dict) -> dict:
    """The group a row uses, in the native lookup order."""
    for key in group_keys(f):
        if key in groups:
            return groups[key]
    return {"tpot_scale": 1.0, "tpot_overhead_ms": 0.0, "ttft_scale": 1.0, "ttft_queue": 0.0,
            "ttft_overhead_ms": 0.0}


def predict(model: dict, f: dict) -> tuple[float, float]:
    c = lookup(model["groups"], f)
    g = with_attention(f, _attention_of(model, f))
    return ttft_model(c, g, model["hybrid"]), tpot_model(c, g, model["hybrid"])


def fit_groups_only(fs: list[dict]) -> dict:
    """The format-version-1 model: group constants alone (no HYBRID factors, no class scales)."""
    return {"groups": fit_groups(fs), "hybrid": dict(NO_HYBRID), "attention": {}}


def fit_groups_and_hybrid(fs: list[dict]) -> dict:
    """Group constants and the HYBRID factors, without the decode attention scales."""
    groups = fit_groups(fs)
    return {"groups": groups, "hybrid": fit_hybrid(groups, fs), "attention": {}}


def cross_validate(fs: list[dict], fit_fn=None) -> list:
    """Leave-one-model-family-out: per row, (ttft, tpot) predicted by constants fitted (by
    ``fit_fn``, default :func:`fit`) without the row's family (``None`` for unpredicted rows)."""
    fit_fn = fit_fn or fit
    families = sorted({f["family"] for f in fs if f is not None})
    out: list = [None] * len(fs)
    for fam in families:
        model = fit_fn([f for f in fs if f is not None and f["family"] != fam])
        for i, f in enumerate(fs):
            if f is not None and f["family"] == fam:
                out[i] = predict(model, f)
    return out


def series_oracle(fs: list[dict]) -> list:
    """Per row, (ttft, tpot) of the closed form with constants fitted on the row's own
    measured series (model, system, backend, mode, engine version, precision) and nothing else:
    what the closed form reaches when every series has its own constants, fitted on the very
    rows it is scored on. A bound for any correction by group, not a usable model."""
    by_series: dict = {}
    for f in fs:
        if f is not None:
            by_series.setdefault(f["series"], []).append(f)
    constants = {key: fit_group(group) for key, group in by_series.items()}
    return [None if f is None else (ttft_model(constants[f["series"]], f),
                                    tpot_model(constants[f["series"]], f)) for f in fs]


def scored(rows: list[dict], pairs: list) -> dict:
    preds = [accuracy.Prediction(r.get("id", ""), *(p if p else (None, None)))
             for r, p in zip(rows, pairs)]
    return accuracy.score(rows, preds)


def _sha256(path) -> str:
    with open(path, "rb") as fh:
        return hashlib.sha256(fh.read()).hexdigest()


def constants(model: dict) -> dict:
    """The constants document of a fitted model (``data/calibration/serving.json`` layout,
    without provenance)."""
    groups = model["groups"]
    return {
        "version": VERSION,
        "groups": {k: {f: v[f] for f in FIELDS} for k, v in groups.items()},
        "hybrid": dict(model["hybrid"]),
        "classes": {k: {"tpot": {"attention": model["attention"][k.split("/")[1]]}}
                    for k in groups if k.split("/")[1] in model["attention"]},
        "rows_per_group": {k: v["rows"] for k, v in groups.items()},
    }


def document(model: dict, rows_path, n_rows: int, *, label: str | None = None,
             tool: str = "aic-compile calibrate") -> dict:
    """:func:`constants` with a provenance naming ``tool``, the rows file (``label``, default
    its file name), its row count and its sha256."""
    label = label if label is not None else os.path.basename(os.fspath(rows_path))
    doc = constants(model)
    doc["provenance"] = (
        f"fitted by {tool} on {label} ({n_rows} rows, sha256 {_sha256(rows_path)}); grid search "
        f"minimising the median APE per group (TTFT: median + {TTFT_TAIL_WEIGHT} x P90 APE), "
        f"each measurement once; groups with fewer than {MIN_ROWS} rows (pooled: "
        f"{MIN_POOLED_ROWS}) use the next pooled '*' fit; HYBRID-priced rows: median factor on "
        f"the kernel part; decode attention scaled per backend (classes); see ACCURACY.md")
    return doc


def fit_rows(rows: list[dict], *, systems_path=None, progress=None, source="rows",
             allow_partial: bool = False, read_folded: bool = True) -> tuple[list, dict]:
    """Features of ``rows`` and the model fitted on them; ``ValueError`` when no row can be
    estimated, :class:`aic.errors.PartialResultError` when some rows' measurements cannot be
    fitted (:func:`aic.accuracy.scoring.check_rows_usable`, ``source`` names the rows file)
    unless ``allow_partial``."""
    problems = [(i, accuracy.measurement_problem(r)) for i, r in enumerate(rows, 1)]
    problems = [(i, p) for i, p in problems if p]
    if rows and len(problems) == len(rows):
        first = "; ".join(f"row {i}: {p}" for i, p in problems[:3])
        raise ValueError(f"none of the {len(rows)} rows has usable measurements, so there is "
                         f"nothing to fit ({first}{'; ...' if len(problems) > 3 else ''})")
    accuracy.check_rows_usable(rows, source, allow_partial=allow_partial)
    fs = features(rows, progress=progress, systems_path=systems_path, read_folded=read_folded)
    live = [f for f in fs if f is not None]
    if not live:
        raise ValueError(f"none of the {len(rows)} rows could be estimated, so there is nothing "
                         f"to fit; `aic-compile accuracy --rows FILE --out per_row.csv` gives "
                         f"each row's error")
    return fs, fit(live)


def native_cross_validation(rows: list[dict], fs: list, *, systems_path=None,
                            read_folded: bool = True) -> list:
    """Leave-one-model-family-out judged by the native engine: per family, the constants fitted
    without it, and its rows estimated in calibrated mode with them (a list of
    :class:`aic.accuracy.scoring.Prediction`, unpredicted where the features are missing).
    ``ValueError`` with fewer than two families."""
    families = sorted({f["family"] for f in fs if f is not None})
    if len(families) < 2:
        raise ValueError(f"leave-one-family-out needs rows of two model families or more; these "
                         f"rows have {len(families)} ({', '.join(families) or 'none'})")
    out = [accuracy.Prediction(r.get("id", "")) for r in rows]
    for fam in families:
        doc = constants(fit([f for f in fs if f is not None and f["family"] != fam]))
        idx = [i for i, f in enumerate(fs) if f is not None and f["family"] == fam]
        preds = accuracy.predict_rows([rows[i] for i in idx], calibrated=True, calibration=doc,
                                      systems_path=systems_path, read_folded=read_folded)
        for i, p in zip(idx, preds):
            out[i] = p
    return out
