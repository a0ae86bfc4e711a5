"""Accuracy against measured deployments: estimate every row of a silicon sample and score it.

A *silicon sample* is a CSV of real serving runs in the ``calibration.csv`` layout (one
deployment per row: model, system, backend, mode, isl / osl, parallelism, batch sizes, the
measured TTFT and TPOT). :func:`row_request` maps a row to the arguments of
:func:`aic.serving.estimate` exactly as the reference's own accuracy comparison does (see
``data/silicon/README.md``); :func:`predict_rows` runs the estimates; :func:`score` computes the
figures users ask for first — coverage, MdAPE, MAPE, P90 APE (the tail), share within 10 % / 20 %,
bias — overall and by group.

This module computes no latency: every number is the native serving estimate (parity mode) or
the native calibrated serving estimate (``calibrated=True``, spec in ``ACCURACY.md``).
"""

from __future__ import annotations

import csv
import math
import os
import re
from dataclasses import dataclass, field
from typing import Callable, Iterable

#: Model ids of the measured sample without a shipped config, mapped to a shipped one
#: (``exact``: same architecture and dtype; ``approx``: nearest shipped checkpoint, the row's
#: quant modes still passed).
MODEL_ALIASES = {
    "meta-llama/Llama-3.1-70B": ("exact", "meta-llama/Meta-Llama-3.1-70B"),
    "meta-llama/Llama-3.1-8B-Instruct": ("exact", "meta-llama/Meta-Llama-3.1-8B"),
    "zhipuai/GLM-5": ("exact", "zai-org/GLM-5"),
    "nvidia/Llama-3.1-8B-Instruct-FP8": ("approx", "meta-llama/Meta-Llama-3.1-8B"),
    "nvidia/DeepSeek-R1-NVFP4": ("approx", "nvidia/DeepSeek-V3.1-NVFP4"),
    "nvidia/Qwen3-32B-NVFP4": ("approx", "Qwen/Qwen3-32B"),
}

#: GPUs in one node of every system of the measured sample (h100 / h200 / b200 SXM boards).
GPUS_PER_NODE = 8
WITHIN_NODE = "within one node"
ACROSS_NODES = "across nodes"
_SIZES = ("tp_size", "pp_size", "attention_dp_size", "moe_tp_size", "moe_ep_size")
_ROLE_COUNTS = ("batch_size", "num_workers")


def _int(text: str | None) -> int | None:
    if text is None or str(text).strip() == "":
        return None
    return int(float(text))


#: The columns every row needs: what :func:`row_request` reads and the two measurements.
REQUIRED_COLUMNS = ("model_path", "system", "backend", "mode", "isl", "osl", "silicon_ttft_ms",
                    "silicon_tpot_ms")
#: Columns that, when filled, hold a count (blank: not given).
COUNT_COLUMNS = ("batch_size",) + _SIZES + tuple(
    f"{role}_{key}" for role in ("prefill", "decode") for key in _SIZES + _ROLE_COUNTS)
MEASURED_COLUMNS = ("silicon_ttft_ms", "silicon_tpot_ms")
#: A rows file larger than this is not a measured sample (the shipped one is 0.5 MB).
MAX_ROWS_FILE_BYTES = 256 * 1024 * 1024


def _parse_count(text: str) -> int | None:
    """A count cell: ``None`` when it is not a finite, integral number >= 0."""
    try:
        value = float(text)
    except ValueError:
        return None
    if not math.isfinite(value) or value < 0 or not value.is_integer():
        return None
    return int(value)


def load_rows(path: str | os.PathLike, required: Iterable[str] = REQUIRED_COLUMNS) -> list[dict]:
    """The rows of a silicon-sample CSV, as dicts of strings, checked before any estimate:
    ``ValueError`` naming the file (and row and column) for a file that cannot be read, is not
    UTF-8 text, is empty, lacks one of ``required`` columns, has a row with too few or too many
    fields, or has a cell that is not a number where one belongs (``isl`` / ``osl`` positive
    integers, the parallel sizes and batch sizes integers >= 0 or blank, the measurements
    numbers). A measurement that is a number but not a finite one above 0 is left to
    :func:`measurement_problem`: the row stays, unscored, with that reason."""
    name = os.fspath(path)
    try:
        size = os.stat(name).st_size
        if size > MAX_ROWS_FILE_BYTES:
            raise ValueError(f"rows file {name} is {size} bytes, more than the "
                             f"{MAX_ROWS_FILE_BYTES} a measured sample may have")
        with open(name, newline="", encoding="utf-8") as fh:
            reader = csv.DictReader(fh)
            rows = list(reader)
            header = reader.fieldnames
    except UnicodeDecodeError as exc:
        raise ValueError(f"rows file {name} is not UTF-8 text (byte {exc.start}: "
                         f"{exc.object[exc.start:exc.start + 1]!r}); give a CSV in the "
                         f"calibration.csv layout (data/silicon/README.md)") from None
    except csv.Error as exc:
        raise ValueError(f"rows file {name} is not a CSV file: {exc}") from None
    except OSError as exc:
        raise ValueError(f"cannot read rows file {name}: {exc.strerror or exc}") from None
    if not header:
        raise ValueError(f"rows file {name} is empty: it has no header line and no rows")
    missing = [c for c in required if c not in header]
    if missing:
        raise ValueError(f"rows file {name} lacks the column(s) {', '.join(missing)}; the "
                         f"calibration.csv layout (data/silicon/README.md) has "
                         f"{', '.join(required)} and more")
    if not rows:
        raise ValueError(f"rows file {name} has a header but no rows: there is nothing to "
                         f"estimate")
    for i, row in enumerate(rows, 1):
        where = f"rows file {name}, row {i}"
        if None in row or any(v is None for v in row.values()):
            fields = len(header) + len(row.get(None) or []) - sum(v is None for v in row.values())
            raise ValueError(f"{where}: {fields} fields where the header has {len(header)}")
        for col in ("isl", "osl"):
            if col in header:
                v = _parse_count(row[col])
                if v is None or v < 1:
                    raise ValueError(f"{where}, column {col}: {row[col]!r} is not a positive "
                                     f"integer")
        for col in COUNT_COLUMNS:
            if row.get(col, "").strip() and _parse_count(row[col]) is None:
                raise ValueError(f"{where}, column {col}: {row[col]!r} is not an integer >= 0 "
                                 f"(leave the cell blank when it does not apply)")
        for col in MEASURED_COLUMNS:
            if col in header:
                try:
                    float(row[col])
                except ValueError:
                    raise ValueError(f"{where}, column {col}: {row[col]!r} is not a number "
                                     f"(ms)") from None
    return rows


def measurement_problem(row: dict) -> str:
    """Why a row's measurements cannot score an estimate (``""`` when they can): each must be
    a finite number of milliseconds above 0 (an ``inf`` made every median NaN)."""
    for col in MEASURED_COLUMNS:
        text = row.get(col)
        try:
            value = float(text)
        except (TypeError, ValueError):
            return f"{col} must be a finite number of ms > 0, got {text!r}"
        if not (math.isfinite(value) and value > 0):
            return f"{col} must be a finite number of ms > 0, got {text.strip()}"
    return ""


def unusable_rows(rows: list[dict]) -> list[tuple[str, str]]:
    """``(row, reason)`` of every row whose measurements cannot score an estimate
    (:func:`measurement_problem`); ``row`` reads ``row 3 (id r2)``, counted from 1 after the
    header."""
    out = []
    for i, row in enumerate(rows, 1):
        problem = measurement_problem(row)
        if problem:
            label = f"row {i}" + (f" (id {row['id']})" if str(row.get("id") or "").strip() else "")
            out.append((label, problem))
    return out


def check_rows_usable(rows: list[dict], source, *, allow_partial: bool = False) -> list:
    """The rows whose measurements cannot score an estimate (:func:`unusable_rows`), checked
    before any estimate: :class:`aic.errors.PartialResultError` naming ``source`` and listing
    them, unless ``allow_partial`` (then they are returned, to be reported, and the run scores
    the others). A result over fewer rows than the file holds would look complete."""
    from ..errors import PartialResultError

    skipped = unusable_rows(rows)
    if skipped and not allow_partial:
        shown = "; ".join(f"{row}: {reason}" for row, reason in skipped[:3])
        more = f"; and {len(skipped) - 3} more" if len(skipped) > 3 else ""
        raise PartialResultError(
            f"rows file {os.fspath(source)}: {len(skipped)} of {len(rows)} rows have "
            f"measurements that cannot score an estimate ({shown}{more}); fix or remove those "
            f"rows, or pass --allow-partial (allow_partial=True) to use the others", skipped)
    return skipped


def model_for(model_path: str) -> tuple[str, str]:
    """``(shipped model id, alias label)``; the label is ``""`` when no alias applies."""
    if model_path in MODEL_ALIASES:
        kind, target = MODEL_ALIASES[model_path]
        return target, f"{kind}:{target}"
    return model_path, ""


def family_of(model_path: str) -> str:
    """The model family a row belongs to for leave-one-family-out validation: checkpoints of
    one architecture lineage share it (DeepSeek V3 / R1 and their NVFP4 builds, Llama 3.1 8B /
    70B, Qwen3 dense, ...)."""
    name = model_path.lower()
    for key, fam in (("deepseek", "deepseek"), ("llama", "llama"), ("gpt-oss", "gpt-oss"),
                     ("minimax", "minimax"), ("qwen3.5", "qwen3.5"), ("qwen3-235b", "qwen3-moe"),
                     ("qwen3", "qwen3"), ("kimi", "kimi"), ("glm", "glm")):
        if key in name:
            return fam
    return name


def row_request(row: dict, *, calibrated: bool = False, read_folded: bool = True) -> dict:
    """The keyword arguments of :func:`aic.serving.estimate` for one row (model and system
    included as ``model_path`` / ``system_name``). Raises ``ValueError`` for a disagg row
    lacking a batch size or worker count (the reference counts such rows as not predicted).

    ``calibrated=True``: a MoE width of 0 on a row means "not used" and is dropped (the
    reference ignores MoE sizes of dense models), and a role whose record folds a ``k``-GPU
    "tp k, ep k" launch into ``k x k`` GPUs across nodes is read as the launch
    (:func:`folded_launch`; ``read_folded=False`` keeps such a record as written, for samples
    whose multi-node rows are real wide-EP deployments). A disagg row without batch sizes / worker
    counts stays unpredicted in both modes: guessing the worker counts (tried: one prefill and
    one decode worker holding the recorded concurrency) gives TPOT errors near 100 %."""
    if calibrated:
        row = _completed(row, read_folded)
    model, _ = model_for(row["model_path"])
    args: dict = {"model_path": model, "system_name": row["system"], "mode": row["mode"],
                  "backend_name": row["backend"], "isl": int(row["isl"]), "osl": int(row["osl"])}
    for key in ("gemm_quant_mode", "moe_quant_mode"):
        if (row.get(key) or "").strip():
            args[key] = row[key].strip()
    if row["mode"] == "disagg":
        for role in ("prefill", "decode"):
            for key in _SIZES + _ROLE_COUNTS:
                value = _int(row.get(f"{role}_{key}"))
                if value is not None:
                    args[f"{role}_{key}"] = value
        for role in ("prefill", "decode"):
            for key in _ROLE_COUNTS:
                if f"{role}_{key}" not in args:
                    raise ValueError(f"{role}_{key} is required for disagg mode.")
    else:
        for key in ("batch_size",) + _SIZES:
            value = _int(row.get(key))
            if value is not None:
                args[key] = value
    return args


def recorded_concurrency(row: dict) -> int | None:
    """The ``silicon_concurrency=N`` of the row's benchmark record, if any."""
    m = re.search(r"silicon_concurrency=(\d+)", row.get("silicon_data_source") or "")
    return int(m.group(1)) if m else None


def folded_launch(row: dict, prefix: str = "") -> int | None:
    """``k`` when the parallel sizes of a role (``prefix`` ``""``, ``"prefill_"`` or
    ``"decode_"``) are a *folded* record of a ``k``-GPU "tp k, ep k" launch, else ``None``.

    Some records of the measured sample write such a launch (the engines run it on ``k`` GPUs:
    attention tp ``k`` or attention DP ``k``, experts spread ``k`` ways, MoE tp 1) as if it
    spanned ``k x k`` GPUs, in one of two shapes:

    * MoE tp = MoE EP = ``k`` and attention tp x DP = ``k x k`` (tp ``k x k`` or DP ``k x k``);
    * attention tp = DP = ``k``, MoE tp 1 and MoE EP = ``k x k``.

    The sample holds the same benchmark runs under both records: every folded agg record that
    has a row with the same model, system, backend, lengths and measured TTFT and TPOT (to 4
    digits) has it with the ``k``-GPU layout and no other (ACCURACY.md, "Deployments that span
    nodes"). Only records that span more than one node (tp x DP above :data:`GPUS_PER_NODE`) are
    read as folded: within a node the same shapes are real layouts (a 4-GPU MoE tp 2 x EP 2
    runs faster than its 2-GPU twin)."""
    tp, dp, moe_tp, moe_ep = (_int(row.get(prefix + key)) for key in
                              ("tp_size", "attention_dp_size", "moe_tp_size", "moe_ep_size"))
    if tp is None:
        return None
    dp = dp or 1
    width = tp * dp
    if width <= GPUS_PER_NODE:
        return None
    if moe_tp == moe_ep and moe_tp is not None and moe_tp > 1 and width == moe_tp * moe_ep \
            and width in (tp, dp):
        return moe_tp
    if tp == dp and (moe_tp or 1) == 1 and moe_ep == width:
        return tp
    return None


def _unfolded(row: dict) -> dict:
    """The row with every folded role (:func:`folded_launch`) read as the ``k``-GPU launch it
    records: attention tp ``k`` (DP ``k`` when the record puts the width in attention DP),
    MoE tp 1, MoE EP ``k``; a per-rank batch size is rescaled so the total stays the
    recorded one."""
    row = dict(row)
    for prefix in ("", "prefill_", "decode_"):
        k = folded_launch(row, prefix)
        if k is None:
            continue
        tp = _int(row.get(prefix + "tp_size"))
        dp = _int(row.get(prefix + "attention_dp_size")) or 1
        new_tp, new_dp = (1, k) if tp == 1 else (k, 1)
        batch = _int(row.get(prefix + "batch_size"))
        if batch is not None and dp != new_dp:
            row[prefix + "batch_size"] = str(batch * dp // new_dp)
        row[prefix + "tp_size"], row[prefix + "attention_dp_size"] = str(new_tp), str(new_dp)
        row[prefix + "moe_tp_size"], row[prefix + "moe_ep_size"] = "1", str(k)
    return row


def folded_rows(rows: Iterable[dict]) -> int:
    """How many rows have a role whose record is folded (:func:`folded_launch`)."""
    return sum(1 for r in rows if any(folded_launch(r, p) for p in ("", "prefill_", "decode_")))


def _completed(row: dict, read_folded: bool = True) -> dict:
    """The row with the calibrated mode's completions (see :func:`row_request`)."""
    row = _unfolded(row) if read_folded else dict(row)
    for prefix in ("", "prefill_", "decode_"):
        for key in ("moe_tp_size", "moe_ep_size"):
            if _int(row.get(prefix + key)) == 0:
                row[prefix + key] = ""
    return row


def concurrency(row: dict) -> int | None:
    """The measured concurrency of a row: the recorded ``silicon_concurrency``, else agg
    ``batch_size x attention_dp``, disagg the decode ``batch_size x attention_dp x workers``."""
    recorded = recorded_concurrency(row)
    if recorded:
        return recorded
    if row["mode"] == "disagg":
        b, dp, n = (_int(row.get(f"decode_{k}")) for k in ("batch_size", "attention_dp_size",
                                                           "num_workers"))
        if b is None or n is None:
            return None
        return b * (dp or 1) * n
    b = _int(row.get("batch_size"))
    return None if b is None else b * (_int(row.get("attention_dp_size")) or 1)


@dataclass
class Prediction:
    """One row's estimate: ``ttft`` / ``tpot`` in ms, or the error that stopped it."""

    id: str
    ttft: float | None = None
    tpot: float | None = None
    error_class: str = ""
    error_msg: str = ""
    model_alias: str = ""
    fallback: str = ""
    extra: dict = field(default_factory=dict)

    @property
    def predicted(self) -> bool:
        return self.ttft is not None and self.tpot is not None


def _reference_class(exc: BaseException) -> str:
    name = getattr(type(exc), "reference_class", None) or type(exc).__name__
    if "PerfDataNotAvailable" in type(exc).__name__ or "perf database error" in str(exc):
        return "PerfDataNotAvailableError"
    return name


def predict_row(row: dict, *, calibrated: bool = False, systems_path=None,
                calibration=None, read_folded: bool = True) -> Prediction:
    """Estimates one row (parity mode, or the calibrated mode with ``calibrated=True``)."""
    from ..serving.deployment import estimate

    _, alias = model_for(row["model_path"])
    pred = Prediction(id=row.get("id", ""), model_alias=alias)
    problem = measurement_problem(row)
    if problem:  # nothing to score an estimate against: the row is left out, with the reason
        pred.error_class, pred.error_msg = "InvalidMeasurement", problem
        return pred
    try:
        args = row_request(row, calibrated=calibrated, read_folded=read_folded)
    except ValueError as exc:
        pred.error_class, pred.error_msg = "ValueError", str(exc)
        return pred
    model = args.pop("model_path")
    system = args.pop("system_name")
    if calibrated:
        args["calibrated"] = True
        args["concurrency"] = concurrency(row)
        if calibration is not None:
            args["calibration"] = calibration
    try:
        out = estimate(model, system, systems_path=systems_path, **args)
    except Exception as exc:  # noqa: BLE001 - every failure is a "not predicted" row
        pred.error_class, pred.error_msg = _reference_class(exc), str(exc).splitlines()[0][:300]
        return pred
    result = out["result"]
    pred.ttft, pred.tpot = float(result["ttft"]), float(result["tpot"])
    pred.fallback = str(result.get("calibration", {}).get("fallback", "") or "")
    pred.extra = result.get("calibration", {}) or {}
    return pred


def predict_rows(rows: Iterable[dict], *, calibrated: bool = False, systems_path=None,
                 calibration=None,
                 progress: Callable[[int], None] | None = None,
                 read_folded: bool = True) -> list[Prediction]:
    """Estimates every row; ``progress(i)`` is called after each one. ``calibration``: the
    constants of the calibrated mode (dict or file; default the shipped ones);
    ``read_folded``: see :func:`row_request`."""
    out = []
    for i, row in enumerate(rows, 1):
        out.append(predict_row(row, calibrated=calibrated, systems_path=systems_path,
                               calibration=calibration, read_folded=read_folded))
        if progress is not None:
            progress(i)
    return out


def _median(values: list[float]) -> float:
    s = sorted(values)
    n = len(s)
    if n == 0:
        return math.nan
    return s[n // 2] if n % 2 else 0.5 * (s[n // 2 - 1] + s[n // 2])


def percentile(values: list[float], q: float) -> float:
    """The ``q``-th percentile (0..100) of ``values`` by linear interpolation between the
    closest ranks (position ``q / 100 * (n - 1)`` in the sorted values, numpy's default);
    NaN for no values."""
    s = sorted(values)
    if not s:
        return math.nan
    pos = q / 100.0 * (len(s) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def metrics(rows: list[dict], preds: list[Prediction]) -> dict:
    """Coverage, MdAPE, MAPE, P90 APE, within 10 % / 20 % and median bias (%) for TTFT and TPOT.

    APE is ``|pred - measured| / measured`` in %; ``<metric>_p90_ape`` is its 90th percentile
    (:func:`percentile`: one prediction in ten is off by more); ``<metric>_bias`` is the median
    signed percentage error ``(pred - measured) / measured`` (negative: the estimate is too
    low). Figures over no predicted row are NaN (``null`` in JSON)."""
    out: dict = {"rows": len(rows), "predicted": sum(p.predicted for p in preds)}
    out["coverage"] = out["predicted"] / len(rows) * 100.0 if rows else math.nan
    for metric, col in (("ttft", "silicon_ttft_ms"), ("tpot", "silicon_tpot_ms")):
        ape, bias = [], []
        for row, p in zip(rows, preds):
            if not p.predicted:
                continue
            meas = float(row[col])
            value = getattr(p, metric)
            if not (math.isfinite(meas) and meas > 0):
                continue
            rel = (value - meas) / meas * 100.0
            ape.append(abs(rel))
            bias.append(rel)
        out[f"{metric}_mdape"] = _median(ape)
        out[f"{metric}_mape"] = sum(ape) / len(ape) if ape else math.nan
        out[f"{metric}_p90_ape"] = percentile(ape, 90.0)
        out[f"{metric}_within10"] = (sum(a <= 10.0 for a in ape) / len(ape) * 100.0
                                     if ape else math.nan)
        out[f"{metric}_within20"] = (sum(a <= 20.0 for a in ape) / len(ape) * 100.0
                                     if ape else math.nan)
        out[f"{metric}_bias"] = _median(bias)
    return out


def layout_class(row: dict) -> str:
    """The row's layout class as recorded: :data:`ACROSS_NODES` when its record spans more than
    one 8-GPU node through expert parallelism or attention DP x TP (any of ``moe_ep_size``,
    ``prefill_moe_ep_size``, ``decode_moe_ep_size`` above :data:`GPUS_PER_NODE`, or
    ``tp_size x attention_dp_size`` above it in any role), else :data:`WITHIN_NODE`. Read from
    the record's columns as they are (blank attention DP: 1)."""
    for prefix in ("", "prefill_", "decode_"):
        ep = _int(row.get(prefix + "moe_ep_size"))
        tp = _int(row.get(prefix + "tp_size"))
        dp = _int(row.get(prefix + "attention_dp_size")) or 1
        if (ep is not None and ep > GPUS_PER_NODE) or (tp is not None and tp * dp > GPUS_PER_NODE):
            return ACROSS_NODES
    return WITHIN_NODE


def score(rows: list[dict], preds: list[Prediction]) -> dict:
    """:func:`metrics` overall plus ``by_group`` (system x backend x mode), ``by_model`` and
    ``by_layout`` (:func:`layout_class`: within one node / across nodes)."""
    out = metrics(rows, preds)
    for name, key in (("by_group", lambda r: f"{r['system']} {r['backend']} {r['mode']}"),
                      ("by_model", lambda r: r["model_path"]),
                      ("by_layout", layout_class)):
        groups: dict = {}
        for row, p in zip(rows, preds):
            groups.setdefault(key(row), ([], []))
            groups[key(row)][0].append(row)
            groups[key(row)][1].append(p)
        out[name] = {g: metrics(*groups[g]) for g in sorted(groups)}
    return out


PER_ROW_COLUMNS = ["id", "pred_ttft_ms", "pred_tpot_ms", "silicon_ttft_ms", "silicon_tpot_ms",
                   "model_alias", "fallback", "error_class", "error_msg"]


def write_per_row(path: str | os.PathLike, rows: list[dict], preds: list[Prediction]) -> None:
    """One line per row: predictions (6 decimals, like the reference's file), measurements and
    the error that stopped a row."""
    with open(path, "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(PER_ROW_COLUMNS)
        for row, p in zip(rows, preds):
            w.writerow([p.id, "" if p.ttft is None else f"{p.ttft:.6f}",
                        "" if p.tpot is None else f"{p.tpot:.6f}", row.get("silicon_ttft_ms", ""),
                        row.get("silicon_tpot_ms", ""), p.model_alias, p.fallback, p.error_class,
                        p.error_msg])
