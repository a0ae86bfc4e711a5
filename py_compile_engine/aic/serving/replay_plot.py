"""The picture of a replay (``aic-compile replay --plot FILE``): the latency CDFs (TTFT, TPOT,
end-to-end) and the queue over time, as an SVG written here with no plotting dependency, or as a
PNG through matplotlib when it is installed."""

from __future__ import annotations

from xml.sax.saxutils import escape

#: File suffixes ``--plot`` writes.
SUFFIXES = (".svg", ".png")

_COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd")


def check_plot_path(path: str) -> None:
    """Refuses a plot path before any work runs: an unknown suffix, a missing folder, or a PNG
    without matplotlib. Raises ``ValueError`` naming the path."""
    import os

    suffix = os.path.splitext(path)[1].lower()
    if suffix not in SUFFIXES:
        raise ValueError(f"--plot {path!r}: unknown suffix {suffix or '(none)'!r}; use .svg "
                         f"(no extra package) or .png (needs matplotlib)")
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise ValueError(f"--plot {path!r}: the folder {folder!r} does not exist")
    if suffix == ".png":
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            raise ValueError(f"--plot {path!r}: a PNG needs matplotlib (pip install matplotlib); "
                             f"an .svg needs nothing") from None


def _series(per_request: list[dict]) -> dict[str, list[float]]:
    out = {}
    for label, key in (("TTFT", "ttft_ms"), ("TPOT", "itl_ms"), ("E2E", "e2e_ms")):
        values = sorted(r[key] for r in per_request if r.get(key) is not None)
        if values:
            out[label] = values
    return out


def _queue(timeline: list[dict]) -> tuple[list[float], list[float], list[float]]:
    t = [p["t_ms"] / 1e3 for p in timeline]
    return t, [float(p["running"]) for p in timeline], [float(p["waiting"]) for p in timeline]


def save_plot(report: dict, path: str) -> None:
    """Writes the CDFs of ``report["per_request"]`` and the queue of ``report["timeline"]`` to
    ``path`` (``.svg`` natively, ``.png`` with matplotlib)."""
    series = _series(report.get("per_request", []))
    t, running, waiting = _queue(report.get("timeline", []))
    title = f"{report['model']} on {report['system']} ({report['mode']})"
    if path.lower().endswith(".png"):
        _save_png(series, t, running, waiting, title, path)
    else:
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(svg(series, t, running, waiting, title))


def _save_png(series, t, running, waiting, title, path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4.2))
    for label, values in series.items():
        n = len(values)
        a.step(values, [(i + 1) / n for i in range(n)], where="post", label=label)
    a.set_xscale("log")
    a.set_xlabel("latency, ms (log)")
    a.set_ylabel("fraction of requests")
    a.grid(True, alpha=0.3)
    a.legend()
    b.plot(t, running, label="running")
    b.plot(t, waiting, label="waiting")
    b.set_xlabel("simulated time, s")
    b.set_ylabel("requests")
    b.grid(True, alpha=0.3)
    b.legend()
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def _axis_ticks(lo: float, hi: float, count: int = 5) -> list[float]:
    if hi <= lo:
        return [lo]
    return [lo + (hi - lo) * i / (count - 1) for i in range(count)]


def _fmt(v: float) -> str:
    return f"{v:.3g}"


def svg(series: dict[str, list[float]], t: list[float], running: list[float],
        waiting: list[float], title: str) -> str:
    """The two panels as SVG text: latency CDFs on a log-ms axis, and running / waiting requests
    over simulated time."""
    import math

    width, height = 1000, 420
    pad_l, pad_r, pad_t, pad_b = 60, 20, 50, 50
    panel_w = (width - 2 * pad_l - 2 * pad_r) / 2
    panel_h = height - pad_t - pad_b
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'font-family="sans-serif" font-size="12">',
           f'<rect width="{width}" height="{height}" fill="white"/>',
           f'<text x="{width / 2}" y="22" text-anchor="middle" font-size="15">'
           f'{escape(title)}</text>']

    def frame(x0: float, xlabel: str, ylabel: str, xticks, xpos, yticks, ypos) -> None:
        out.append(f'<rect x="{x0}" y="{pad_t}" width="{panel_w}" height="{panel_h}" '
                   f'fill="none" stroke="#444"/>')
        for v in xticks:
            x = xpos(v)
            out.append(f'<line x1="{x:.1f}" y1="{pad_t}" x2="{x:.1f}" y2="{pad_t + panel_h}" '
                       f'stroke="#ddd"/>')
            out.append(f'<text x="{x:.1f}" y="{pad_t + panel_h + 16}" text-anchor="middle">'
                       f'{_fmt(v)}</text>')
        for v in yticks:
            y = ypos(v)
            out.append(f'<line x1="{x0}" y1="{y:.1f}" x2="{x0 + panel_w}" y2="{y:.1f}" '
                       f'stroke="#ddd"/>')
            out.append(f'<text x="{x0 - 6}" y="{y + 4:.1f}" text-anchor="end">{_fmt(v)}</text>')
        out.append(f'<text x="{x0 + panel_w / 2}" y="{height - 12}" text-anchor="middle">'
                   f'{escape(xlabel)}</text>')
        out.append(f'<text x="{x0 - 44}" y="{pad_t + panel_h / 2}" text-anchor="middle" '
                   f'transform="rotate(-90 {x0 - 44} {pad_t + panel_h / 2})">'
                   f'{escape(ylabel)}</text>')

    def polyline(points, color: str) -> None:
        text = " ".join(f"{x:.1f},{y:.1f}" for x, y in points)
        out.append(f'<polyline points="{text}" fill="none" stroke="{color}" '
                   f'stroke-width="1.6"/>')

    def legend(x0: float, labels: list[str]) -> None:
        for i, label in enumerate(labels):
            y = pad_t + 14 + 16 * i
            out.append(f'<line x1="{x0 + 10}" y1="{y - 4}" x2="{x0 + 30}" y2="{y - 4}" '
                       f'stroke="{_COLORS[i % len(_COLORS)]}" stroke-width="2"/>')
            out.append(f'<text x="{x0 + 36}" y="{y}">{escape(label)}</text>')

    # Left: latency CDFs, log-scaled ms.
    x0 = pad_l
    positive = [v for values in series.values() for v in values if v > 0]
    lo = math.log10(min(positive)) if positive else 0.0
    hi = math.log10(max(positive)) if positive else 1.0
    if hi - lo < 1e-9:
        lo, hi = lo - 0.5, hi + 0.5

    def xpos_log(v: float) -> float:
        return x0 + (math.log10(max(v, 10 ** lo)) - lo) / (hi - lo) * panel_w

    def ypos_frac(f: float) -> float:
        return pad_t + panel_h * (1 - f)

    ticks = [10 ** e for e in range(math.floor(lo), math.ceil(hi) + 1) if lo <= e <= hi] or \
        [10 ** lo, 10 ** hi]
    frame(x0, "latency, ms (log)", "fraction of requests", ticks, xpos_log,
          [0, 0.25, 0.5, 0.75, 1.0], ypos_frac)
    for i, (label, values) in enumerate(series.items()):
        n = len(values)
        pts = []
        for k, v in enumerate(values):
            x = xpos_log(v)
            pts.append((x, ypos_frac(k / n)))
            pts.append((x, ypos_frac((k + 1) / n)))
        polyline(pts, _COLORS[i % len(_COLORS)])
    legend(x0, list(series))

    # Right: the queue over simulated time.
    x1 = pad_l * 2 + pad_r + panel_w
    tmax = max(t) if t else 1.0
    ymax = max([*running, *waiting, 1.0])

    def xpos_t(v: float) -> float:
        return x1 + (v / tmax if tmax > 0 else 0.0) * panel_w

    def ypos_n(v: float) -> float:
        return pad_t + panel_h * (1 - v / ymax)

    frame(x1, "simulated time, s", "requests", _axis_ticks(0.0, tmax), xpos_t,
          _axis_ticks(0.0, ymax), ypos_n)
    for i, values in enumerate((running, waiting)):
        if t:
            polyline([(xpos_t(a), ypos_n(b)) for a, b in zip(t, values)], _COLORS[i])
    legend(x1, ["running", "waiting"])
    out.append("</svg>")
    return "\n".join(out) + "\n"
