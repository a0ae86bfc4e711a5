"""``aic-compile accuracy`` and ``calibrate``: how close the serving estimate is to measured
deployments, and the calibrated estimate's constants fitted on them.

``accuracy`` estimates every row of a silicon sample (``calibration.csv`` layout, see
``data/silicon/README.md``) with :mod:`aic.accuracy.scoring` in parity mode or, with
``--calibrated``, in the calibrated mode, and prints coverage, MdAPE, MAPE, P90 APE, share
within 10 % / 20 % and bias (median signed error) for TTFT and TPOT — overall, by layout
class (within one node / across nodes), by system x backend x mode and by model.
``calibrate`` fits them with :mod:`aic.accuracy.calibration_fit`.
"""

from __future__ import annotations

import json
import math
import sys
import time

import click

from ..json_output import dumps
from .common import (
    CONTEXT_SETTINGS,
    chosen_systems_path,
    partial_failure,
    report_accepted_skips,
)

_HEAD = ["rows", "pred", "cov%", "TTFT MdAPE", "MAPE", "P90", "<=10%", "<=20%", "bias",
         "TPOT MdAPE", "MAPE", "P90", "<=10%", "<=20%", "bias"]
#: The figures of each metric in a table line, in the order of :data:`_HEAD`.
_FIGURES = ("mdape", "mape", "p90_ape", "within10", "within20", "bias")


def _pct(value) -> str:
    return "-" if value is None or (isinstance(value, float) and math.isnan(value)) \
        else f"{value:.1f}"


def _line(name: str, m: dict) -> list[str]:
    cells = [name, str(m["rows"]), str(m["predicted"]), _pct(m["coverage"])]
    for metric in ("ttft", "tpot"):
        cells += [_pct(m[f"{metric}_{k}"]) for k in _FIGURES]
    return cells


def format_table(title: str, named: list[tuple[str, dict]]) -> list[str]:
    """A fixed-width table of :func:`aic.accuracy.scoring.metrics` dicts, one line per name."""
    head = [title] + _HEAD
    lines = [_line(n, m) for n, m in named]
    widths = [max(len(r[i]) for r in [head] + lines) for i in range(len(head))]
    fmt = lambda r: "  ".join(c.ljust(w) if i == 0 else c.rjust(w)  # noqa: E731
                              for i, (c, w) in enumerate(zip(r, widths)))
    return [fmt(head), "  ".join("-" * w for w in widths)] + [fmt(r) for r in lines]


class _Progress:
    """A one-line progress bar on stderr: drawn on a terminal, or when the run is slow (after
    5 s) so long runs in a log show they are alive."""

    def __init__(self, total: int, unit: str = "rows"):
        self.total = total
        self.unit = unit
        self.start = time.monotonic()
        self.tty = sys.stderr.isatty()
        self.drawn = False
        self.last = 0.0

    def __call__(self, done: int) -> None:
        now = time.monotonic()
        elapsed = now - self.start
        if not (self.tty or elapsed > 5.0):
            return
        if done < self.total and now - self.last < (0.2 if self.tty else 10.0):
            return
        self.last = now
        width = 30
        filled = int(width * done / max(self.total, 1))
        end = "\r" if self.tty else "\n"
        sys.stderr.write(f"[{'#' * filled}{'.' * (width - filled)}] {done}/{self.total} "
                         f"{self.unit} "
                         f"{elapsed:.1f} s{end}")
        sys.stderr.flush()
        self.drawn = True

    def close(self) -> None:
        if self.drawn and self.tty:
            sys.stderr.write("\n")


def _check_out(out_file: str, inputs: dict) -> None:
    """``--out``: an existing folder, not a folder itself, none of the input files."""
    from ..validation import check_output_path

    try:
        check_output_path("--out", out_file, inputs)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--out") from None


def _load_rows(rows_file: str, required=None) -> list[dict]:
    """The rows of ``--rows``, checked (:func:`aic.accuracy.scoring.load_rows`); a bad file is
    one line naming the file, row and column."""
    from ..accuracy import scoring

    try:
        if required is None:
            return scoring.load_rows(rows_file)
        return scoring.load_rows(rows_file, required)
    except ValueError as exc:
        raise click.ClickException(str(exc)) from None


_ALLOW_PARTIAL_HELP = ("Use the other rows when some rows' measurements cannot score an "
                       "estimate (not a finite number of ms > 0); they are listed. Default: "
                       "such a file fails before any estimate.")


def _usable_rows(rows: list[dict], rows_file: str, allow_partial: bool) -> list:
    """The rows whose measurements cannot be used, checked before any estimate
    (:func:`aic.accuracy.scoring.check_rows_usable`): a failure listing them unless
    ``--allow-partial``."""
    from ..accuracy import scoring
    from ..errors import PartialResultError

    try:
        return scoring.check_rows_usable(rows, rows_file, allow_partial=allow_partial)
    except PartialResultError as exc:
        raise partial_failure(exc) from None


def _write_json_file(path: str, doc: dict) -> None:
    """Writes ``doc`` as JSON through a temporary file in the same folder, so a full disk or a
    failed write leaves no half-written constants file behind."""
    import os
    import tempfile

    text = json.dumps(doc, indent=2, sort_keys=True, allow_nan=False) + "\n"
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".calibrate-", suffix=".json", dir=folder)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except OSError as exc:
        os.unlink(tmp)
        raise click.ClickException(f"cannot write {path}: {exc.strerror or exc}") from None


@click.command("accuracy", context_settings=CONTEXT_SETTINGS)
@click.option("--rows", "rows_file", required=True, type=click.Path(exists=True, dir_okay=False),
              help="Measured deployments, calibration.csv layout.")
@click.option("--calibrated", is_flag=True,
              help="The calibrated serving estimate (default: parity with the reference).")
@click.option("--calibration", "calibration_file", default=None,
              type=click.Path(exists=True, dir_okay=False),
              help="--calibrated: a constants file in the data/calibration/serving.json layout "
                   "(default: the shipped constants).")
@click.option("--replay", "replayed", is_flag=True,
              help="The replayed estimate: each row's benchmark replayed through aic-replay "
                   "(with --calibrated: calibrated step times). Needs the replay build.")
@click.option("--combined", is_flag=True,
              help="With --calibrated: the closed form, or the replay where the KV cache binds "
                   "(ACCURACY.md, 'Replayed estimate'). Needs the replay build.")
@click.option("--jobs", type=click.IntRange(min=1), default=1, show_default=True,
              help="--replay / --combined: replay the rows in this many processes.")
@click.option("--as-recorded", "as_recorded", is_flag=True,
              help="With --calibrated: price every row's layout as written, also records that "
                   "fold a k-GPU 'tp k, ep k' launch into k x k GPUs across nodes (by default "
                   "read as the launch, ACCURACY.md 'Deployments that span nodes'); for samples "
                   "whose multi-node rows are real wide-EP deployments.")
@click.option("--out", "out_file", default=None, type=click.Path(dir_okay=False),
              help="Write the per-row predictions to this CSV.")
@click.option("--allow-partial", is_flag=True, help=_ALLOW_PARTIAL_HELP)
@click.option("--json", "as_json", is_flag=True, help="The figures as JSON.")
@click.pass_context
def accuracy_cmd(ctx, rows_file, calibrated, calibration_file, replayed, combined, jobs,
                 as_recorded, out_file, allow_partial, as_json):
    """Estimates every measured deployment of ROWS and reports how close the estimate is."""
    from ..accuracy import scoring as accuracy
    from ..serving.deployment import load_calibration

    calibration = None
    if calibration_file and not calibrated:
        raise click.UsageError("--calibration needs --calibrated")
    if as_recorded and not calibrated:
        raise click.UsageError("--as-recorded needs --calibrated (parity mode always prices the "
                               "record as written, as the reference does)")
    if as_recorded and (replayed or combined):
        raise click.UsageError("--as-recorded applies to the closed form; drop --replay / "
                               "--combined")
    if replayed and combined:
        raise click.UsageError("--replay and --combined are two estimates: give one")
    if combined and not calibrated:
        raise click.UsageError("--combined needs --calibrated (it combines the calibrated "
                               "closed form with the calibrated replay)")
    if jobs != 1 and not (replayed or combined):
        raise click.UsageError(f"--jobs {jobs} applies to --replay / --combined (the closed "
                               f"form runs in this process); drop it or add one of them")
    if replayed or combined:
        from ..serving.replay import REPLAY_MISSING, replay_available
        if not replay_available():
            raise click.ClickException(REPLAY_MISSING)
    if out_file:  # before the work: a bad --out used to fail only after every row was estimated
        _check_out(out_file, {"--rows": rows_file, "--calibration": calibration_file})
    if calibration_file:
        try:  # checked once here, so a bad file is one clear error, not every row unpredicted
            calibration = load_calibration(calibration_file)
        except ValueError as exc:
            raise click.ClickException(str(exc)) from None
    rows = _load_rows(rows_file)
    skipped = _usable_rows(rows, rows_file, allow_partial)
    systems_path = chosen_systems_path(ctx, None)
    progress = _Progress(len(rows) * (2 if combined else 1))
    preds = []
    if not replayed:
        preds = accuracy.predict_rows(rows, calibrated=calibrated, calibration=calibration,
                                      systems_path=systems_path, progress=progress,
                                      read_folded=not as_recorded)
    if replayed or combined:
        from ..accuracy import replayed as replay_estimate
        offset = len(preds)
        replays = replay_estimate.replay_rows_parallel(
            rows, [calibration] * len(rows), calibrated=calibrated, systems_path=systems_path,
            jobs=jobs, progress=lambda i: progress(offset + i))
        preds = replay_estimate.combine(preds, replays) if combined else replays
    progress.close()
    if out_file:
        accuracy.write_per_row(out_file, rows, preds)
    figures = accuracy.score(rows, preds)
    figures["estimate"] = "replay" if replayed else ("combined" if combined else "closed_form")
    if combined:
        figures["replayed_rows"] = sum(p.extra.get("estimate") == "replay" for p in preds)
    report_accepted_skips(skipped, "rows not scored (--allow-partial): their measurements "
                                   "cannot score an estimate")
    folded = accuracy.folded_rows(rows) if calibrated and not as_recorded else 0
    figures["folded_read_as_launch"] = folded
    if as_json:
        click.echo(dumps(figures, indent=2))
        return
    mode = "calibrated" if calibrated else "parity (reference model)"
    if replayed:
        mode = f"replayed ({'calibrated step times' if calibrated else 'table-priced steps'})"
    elif combined:
        mode = "combined (calibrated closed form, replay where the KV cache binds)"
    click.echo(f"{rows_file}: {figures['predicted']} of {figures['rows']} rows predicted "
               f"({figures['coverage']:.1f} %), {mode}")
    click.echo(f"TTFT MdAPE {_pct(figures['ttft_mdape'])} %, P90 APE "
               f"{_pct(figures['ttft_p90_ape'])} %, bias {_pct(figures['ttft_bias'])} %; "
               f"TPOT MdAPE {_pct(figures['tpot_mdape'])} %, P90 APE "
               f"{_pct(figures['tpot_p90_ape'])} %, bias {_pct(figures['tpot_bias'])} %")
    if folded:
        click.echo(f"{folded} rows record a k-GPU 'tp k, ep k' launch folded into k x k GPUs "
                   f"across nodes and were read as the launch (--as-recorded prices them as "
                   f"written)")
    click.echo("")
    for line in format_table("overall", [("all", figures)]):
        click.echo(line)
    for key, title in (("by_layout", "layout"), ("by_group", "system backend mode"),
                       ("by_model", "model")):
        click.echo("")
        for line in format_table(title, list(figures[key].items())):
            click.echo(line)


@click.command("calibrate", context_settings=CONTEXT_SETTINGS)
@click.option("--rows", "rows_file", required=True, type=click.Path(exists=True, dir_okay=False),
              help="Measured deployments, calibration.csv layout.")
@click.option("--out", "out_file", default=None, type=click.Path(dir_okay=False),
              help="Write the fitted constants here (data/calibration/serving.json layout); "
                   "required unless --few-shot.")
@click.option("--cv", is_flag=True,
              help="Also judge the fit by leave-one-model-family-out cross-validation.")
@click.option("--few-shot", "shots", default=None, type=click.IntRange(min=1),
              help="Judge few-shot calibration instead of fitting one file: per deployment "
                   "series of ROWS (>= 5 priced rows), fit on N points spread over its "
                   "concurrency and score its other rows (ACCURACY.md). Writes no constants.")
@click.option("--as-recorded", "as_recorded", is_flag=True,
              help="Fit on every row's layout as written, also records that fold a k-GPU "
                   "'tp k, ep k' launch into k x k GPUs across nodes (by default read as the "
                   "launch, ACCURACY.md 'Deployments that span nodes').")
@click.option("--allow-partial", is_flag=True, help=_ALLOW_PARTIAL_HELP)
@click.option("--json", "as_json", is_flag=True, help="The figures as JSON.")
@click.pass_context
def calibrate_cmd(ctx, rows_file, out_file, cv, shots, as_recorded, allow_partial, as_json):
    """Fits the calibrated estimate's constants on the measured deployments of ROWS.

    The constants file then serves `estimate --calibrated --calibration OUT` and
    `accuracy --calibrated --calibration OUT`. The figures printed are native calibrated
    estimates of the rows with the new constants (fitted on the same rows, so optimistic;
    `--cv` adds the honest leave-one-family-out figures).

    `--few-shot N` answers how accurate the rest of a deployment is after calibrating on N
    of its own measured points: every series (same model, system, backend and version,
    mode, precision, quant modes and parallel layout) is fitted on N of its rows, chosen
    by concurrency (3: lowest, middle, highest), and its other rows are scored, beside the
    same rows estimated with constants pooled over all of ROWS and leave-one-family-out.
    """
    from ..accuracy import calibration_fit, scoring as accuracy

    systems_path = chosen_systems_path(ctx, None)
    if shots is not None:
        if as_recorded:
            raise click.UsageError("--few-shot reads the rows as `calibrate` does by default; "
                                   "drop --as-recorded")
        if out_file or cv:
            raise click.UsageError("--few-shot fits one constants file per series and writes "
                                   "none; drop --out and --cv (its figures include the "
                                   "leave-one-family-out ones)")
        _few_shot(rows_file, shots, systems_path, as_json, allow_partial)
        return
    if not out_file:
        raise click.UsageError("Missing option '--out': the file to write the fitted "
                               "constants to (or give --few-shot N to judge few-shot "
                               "calibration, which writes none)")
    # --out never overwrites the measured rows, and a bad path fails before the fit
    _check_out(out_file, {"--rows": rows_file})
    rows = _load_rows(rows_file, calibration_fit.REQUIRED_COLUMNS)
    skipped = _usable_rows(rows, rows_file, allow_partial)
    progress = _Progress(len(rows))
    try:
        fs, model = calibration_fit.fit_rows(rows, systems_path=systems_path, progress=progress,
                                             source=rows_file, allow_partial=allow_partial,
                                             read_folded=not as_recorded)
    except ValueError as exc:
        raise click.ClickException(str(exc)) from None
    finally:
        progress.close()
    doc = calibration_fit.document(model, rows_file, len(rows))
    _write_json_file(out_file, doc)
    fitted = accuracy.score(rows, accuracy.predict_rows(rows, calibrated=True, calibration=doc,
                                                        systems_path=systems_path,
                                                        read_folded=not as_recorded))
    figures = {"fitted": fitted, "groups": len(doc["groups"]), "out": out_file,
               "folded_read_as_launch": 0 if as_recorded else accuracy.folded_rows(rows)}
    if cv:
        try:
            held_out = calibration_fit.native_cross_validation(rows, fs, systems_path=systems_path,
                                                               read_folded=not as_recorded)
        except ValueError as exc:
            raise click.ClickException(str(exc)) from None
        figures["cv"] = accuracy.score(rows, held_out)
    report_accepted_skips(skipped, "rows left out of the fit (--allow-partial): their "
                                   "measurements cannot be fitted")
    if as_json:
        click.echo(dumps(figures, indent=2))
        return
    click.echo(f"wrote {out_file}: {len(doc['groups'])} groups fitted on {fitted['predicted']} "
               f"of {fitted['rows']} rows")
    named = [("fitted on these rows", fitted)]
    if cv:
        named.append(("leave-one-family-out", figures["cv"]))
    for line in format_table("calibrated", named):
        click.echo(line)


def _few_shot(rows_file: str, shots: int, systems_path, as_json: bool,
              allow_partial: bool) -> None:
    """``calibrate --few-shot N``: :func:`aic.accuracy.few_shot.few_shot` on ROWS, printed."""
    from ..accuracy import calibration_fit, few_shot

    rows = _load_rows(rows_file, calibration_fit.REQUIRED_COLUMNS)
    skipped = _usable_rows(rows, rows_file, allow_partial)
    progress = _Progress(len(rows))
    bars = [progress]

    def series_progress(done: int, total: int) -> None:
        if len(bars) == 1:  # the feature pass is over: a bar for the series
            progress.close()
            bars.append(_Progress(total, "series"))
            bars[1].start = progress.start  # slow runs show the bar as the row pass did
        bars[1](done)

    try:
        figures = few_shot.few_shot(rows, shots=shots, systems_path=systems_path,
                                    progress=progress, series_progress=series_progress,
                                    source=rows_file, allow_partial=allow_partial)
    except ValueError as exc:
        raise click.ClickException(str(exc)) from None
    finally:
        bars[-1].close()
    figures.pop("predictions")
    report_accepted_skips(skipped, "rows left out (--allow-partial): their measurements "
                                   "cannot be used")
    if as_json:
        click.echo(dumps(figures, indent=2))
        return
    click.echo(f"{rows_file}: {figures['series']} deployment series with >= "
               f"{figures['min_series_rows']} priced rows; constants fitted on {shots} points "
               f"of each ({figures['fitted_rows']} rows), the other {figures['scored_rows']} "
               f"rows scored")
    named = [(f"fitted on {shots} points of the series", figures["few_shot"]),
             ("pooled over all rows (in-sample)", figures["pooled"]),
             ("pooled, leave-one-family-out", figures["pooled_cv"])]
    for line in format_table("constants", named):
        click.echo(line)
