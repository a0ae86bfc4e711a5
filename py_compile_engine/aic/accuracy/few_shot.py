"""Few-shot calibration, the user's own path: how accurate the rest of a deployment series is
after ``aic-compile calibrate`` on a few of its own measured points.

A user who has measured a deployment at a few load points fits the calibrated estimate's
constants on them (``aic-compile calibrate --rows MINE.csv --out mine.json``) and then asks the
estimate about the load points not measured. :func:`few_shot` replays that on a measured sample:

* a *series* is one deployment (:func:`series_key`): same model, system, backend, engine
  version, mode, precision, quant modes and parallel layout (tp / pp / attention-dp / MoE
  tp / ep, and per disagg role the same plus the worker count); its rows differ in concurrency
  (and batch size) and in isl / osl;
* only rows the calibrated estimate can price count (a row it refuses can neither be fitted nor
  scored); a series takes part with at least ``max(MIN_SERIES_ROWS, shots + 2)`` such rows;
* the ``shots`` fitted points are chosen deterministically, spread over the series
  (:func:`choose_points`): the rows sorted by (concurrency, isl, osl, id), then the first, the
  last and evenly spaced ones between (3 shots: lowest, middle and highest concurrency);
* the constants are fitted on those points alone, exactly as ``aic-compile calibrate`` fits
  them (:func:`aic.accuracy.calibration_fit.fit`; with a few rows only the pooled ``*/*/*``
  group is fitted), and the series' other rows are estimated by the native engine with them;
* the same other rows are scored beside them as estimated with constants fitted on the whole
  sample (``"pooled"``: in-sample for the shipped file, which was fitted on the calibration
  half) and with constants fitted on the sample without the row's model family
  (``"pooled_cv"``: leave-one-family-out, what a user with a model no measured sample holds
  gets without measuring), so the figures say what the few measured points buy.

Every latency is the native engine's (the fit's features are native estimates with identity
constants, the judged rows native calibrated estimates).
"""

from __future__ import annotations

from . import calibration_fit
from . import scoring as accuracy

#: A series takes part with at least this many rows the calibrated estimate prices.
MIN_SERIES_ROWS = 5
#: The default number of fitted points per series.
DEFAULT_SHOTS = 3

_LAYOUT = ("tp_size", "pp_size", "attention_dp_size", "moe_tp_size", "moe_ep_size")
#: The row columns that name a series (a deployment); a column a file lacks counts as blank.
SERIES_COLUMNS = (("model_path", "system", "backend", "backend_version", "mode", "precision",
                   "gemm_quant_mode", "moe_quant_mode") + _LAYOUT
                  + tuple(f"{role}_{key}" for role in ("prefill", "decode")
                          for key in _LAYOUT + ("num_workers",)))


def series_key(row: dict) -> tuple:
    """The deployment a row measures: its values of :data:`SERIES_COLUMNS` (blanks as ``""``,
    counts normalised so ``8`` and ``8.0`` are one series)."""
    out = []
    for col in SERIES_COLUMNS:
        text = (row.get(col) or "").strip()
        if col.endswith(("_size", "_workers")) and text:
            try:
                text = str(int(float(text)))
            except ValueError:
                pass
        out.append(text)
    return tuple(out)


def series_label(key: tuple) -> str:
    """A short readable name of a series: model, system, backend and version, mode, precision
    and the filled parallel sizes."""
    named = dict(zip(SERIES_COLUMNS, key))
    sizes = " ".join(f"{col.replace('_size', '').replace('attention_', '')}{named[col]}"
                     for col in SERIES_COLUMNS[8:] if named[col])
    return (f"{named['model_path']} {named['system']} {named['backend']} "
            f"{named['backend_version']} {named['mode']} {named['precision']} {sizes}").strip()


def _order(row: dict) -> tuple:
    return (accuracy.concurrency(row) or 0, int(row["isl"]), int(row["osl"]), row.get("id", ""))


def choose_points(indices: list[int], rows: list[dict], shots: int) -> list[int]:
    """The ``shots`` fitted rows of a series (indices into ``rows``): the series sorted by
    (concurrency, isl, osl, id), then positions ``round(i * (n - 1) / (shots - 1))`` for
    ``i = 0 .. shots - 1``, rounded half up (the first, the last and evenly spaced between;
    one shot: the middle one)."""
    ordered = sorted(indices, key=lambda i: _order(rows[i]))
    n = len(ordered)
    if shots >= n:
        return ordered
    if shots == 1:
        return [ordered[(n - 1) // 2]]
    picks = sorted({int((i * (n - 1) + (shots - 1) // 2) // (shots - 1)) for i in range(shots)})
    return [ordered[p] for p in picks]


def few_shot(rows: list[dict], *, shots: int = DEFAULT_SHOTS, systems_path=None,
             progress=None, features: list | None = None, series_progress=None,
             source="rows", allow_partial: bool = False) -> dict:
    """Fits the constants on ``shots`` points of every series and scores the series' other
    rows (see the module documentation). Returns ``{"shots", "min_series_rows", "series",
    "fitted_rows", "scored_rows", "few_shot", "pooled", "pooled_cv", "per_series"}``: the three
    estimates' :func:`aic.accuracy.scoring.metrics` over the scored rows, one entry per series
    (its fitted rows, their concurrency, its constants and figures) and, under
    ``"predictions"``, the scored rows with the three estimates' predictions (not JSON: dropped
    by the CLI). ``features``: :func:`aic.accuracy.calibration_fit.features` of ``rows`` when
    the caller has them already. ``progress(i)`` is called per row of the feature pass,
    ``series_progress(done, total)`` per series fitted and scored. ``ValueError`` for
    ``shots < 1`` or when no series has enough rows; :class:`aic.errors.PartialResultError`
    when some rows' measurements cannot be used (``source`` names the rows file), unless
    ``allow_partial``."""
    if shots < 1:
        raise ValueError(f"--few-shot needs at least 1 fitted point per series, got {shots}")
    accuracy.check_rows_usable(rows, source, allow_partial=allow_partial)
    min_rows = max(MIN_SERIES_ROWS, shots + 2)
    fs = features if features is not None else calibration_fit.features(
        rows, progress=progress, systems_path=systems_path)
    by_series: dict = {}
    for i, (row, f) in enumerate(zip(rows, fs)):
        if f is not None:
            by_series.setdefault(series_key(row), []).append(i)
    taking_part = {k: v for k, v in by_series.items() if len(v) >= min_rows}
    if not taking_part:
        largest = max((len(v) for v in by_series.values()), default=0)
        raise ValueError(f"no deployment series has {min_rows} rows the calibrated estimate "
                         f"can price (the largest has {largest}); few-shot calibration fits "
                         f"{shots} points of a series and scores the others, so give at least "
                         f"{min_rows} measured points of one deployment")
    scored_rows: list[dict] = []
    fitted_rows = 0
    fewshot_preds: list = []
    per_series = []
    for done, key in enumerate(sorted(taking_part), 1):
        idx = taking_part[key]
        fitted = choose_points(idx, rows, shots)
        rest = [i for i in sorted(idx, key=lambda i: _order(rows[i])) if i not in fitted]
        model = calibration_fit.fit([fs[i] for i in fitted])
        doc = calibration_fit.constants(model)
        preds = accuracy.predict_rows([rows[i] for i in rest], calibrated=True, calibration=doc,
                                      systems_path=systems_path)
        figures = accuracy.metrics([rows[i] for i in rest], preds)
        per_series.append({"series": series_label(key), "rows": len(idx),
                           "fitted": [rows[i].get("id", "") for i in fitted],
                           "fitted_concurrency": [accuracy.concurrency(rows[i]) for i in fitted],
                           "scored": len(rest), "constants": doc["groups"]["*/*/*"],
                           **{k: figures[k] for k in ("predicted", "ttft_mdape", "ttft_p90_ape",
                                                      "ttft_bias", "tpot_mdape", "tpot_p90_ape",
                                                      "tpot_bias")}})
        fitted_rows += len(fitted)
        if series_progress is not None:
            series_progress(done, len(taking_part))
        scored_rows += [rows[i] for i in rest]
        fewshot_preds += preds
    pooled_model = calibration_fit.fit([f for f in fs if f is not None])
    pooled = accuracy.predict_rows(scored_rows, calibrated=True,
                                   calibration=calibration_fit.constants(pooled_model),
                                   systems_path=systems_path)
    pooled_cv = _leave_family_out(fs, scored_rows, systems_path)
    return {"shots": shots, "min_series_rows": min_rows, "series": len(taking_part),
            "fitted_rows": fitted_rows,
            "scored_rows": len(scored_rows),
            "few_shot": accuracy.metrics(scored_rows, fewshot_preds),
            "pooled": accuracy.metrics(scored_rows, pooled),
            "pooled_cv": accuracy.metrics(scored_rows, pooled_cv),
            "per_series": per_series,
            "predictions": (scored_rows, fewshot_preds, pooled, pooled_cv)}


def _leave_family_out(fs: list, scored: list[dict], systems_path) -> list:
    """``scored`` estimated natively with constants fitted on the features ``fs`` of every row
    outside the scored row's model family."""
    out: list = [None] * len(scored)
    families = sorted({accuracy.family_of(r["model_path"]) for r in scored})
    for fam in families:
        live = [f for f in fs if f is not None and f["family"] != fam]
        idx = [i for i, r in enumerate(scored) if accuracy.family_of(r["model_path"]) == fam]
        if not live:  # one family only: nothing to fit without it
            for i in idx:
                out[i] = accuracy.Prediction(scored[i].get("id", ""), error_class="ValueError",
                                             error_msg="no other model family to fit on")
            continue
        doc = calibration_fit.constants(calibration_fit.fit(live))
        preds = accuracy.predict_rows([scored[i] for i in idx], calibrated=True,
                                      calibration=doc, systems_path=systems_path)
        for i, p in zip(idx, preds):
            out[i] = p
    return out
