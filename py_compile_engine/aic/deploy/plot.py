"""The result folder's Pareto plot (spec 60 §2): both fronts, tokens/s/gpu (cluster) against
tokens/s/user, as an SVG built with ``xml.etree`` (no plotting dependency). Not compared by
parity; the reference writes a PNG of the same axes."""

from __future__ import annotations

import xml.etree.ElementTree as ET

WIDTH, HEIGHT = 640, 420
LEFT, RIGHT, TOP, BOTTOM = 70, 20, 30, 50
COLORS = {"agg": "#1f77b4", "disagg": "#d62728"}


def _ticks(hi: float, count: int = 5) -> list[float]:
    if hi <= 0:
        return [0.0]
    return [hi * i / count for i in range(count + 1)]


def pareto_svg(fronts: dict[str, list[dict]], title: str) -> str:
    """The SVG text of the fronts ``{mode: rows}`` (rows need ``tokens/s/user`` and
    ``tokens/s/gpu_cluster``)."""
    points = [(r["tokens/s/user"], r["tokens/s/gpu_cluster"])
              for rows in fronts.values() for r in rows]
    xmax = max((p[0] for p in points), default=1.0) * 1.05 or 1.0
    ymax = max((p[1] for p in points), default=1.0) * 1.05 or 1.0
    pw, ph = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM

    def x(v):
        return LEFT + v / xmax * pw

    def y(v):
        return TOP + ph - v / ymax * ph

    svg = ET.Element("svg", xmlns="http://www.w3.org/2000/svg", width=str(WIDTH),
                     height=str(HEIGHT), viewBox=f"0 0 {WIDTH} {HEIGHT}")
    ET.SubElement(svg, "rect", x="0", y="0", width=str(WIDTH), height=str(HEIGHT), fill="white")
    ET.SubElement(svg, "text", x=str(WIDTH / 2), y="18", attrib={"text-anchor": "middle",
                  "font-size": "13", "font-family": "sans-serif"}).text = title
    ET.SubElement(svg, "rect", x=str(LEFT), y=str(TOP), width=str(pw), height=str(ph),
                  fill="none", stroke="black")
    for t in _ticks(xmax):
        ET.SubElement(svg, "text", x=f"{x(t):.1f}", y=str(TOP + ph + 16),
                      attrib={"text-anchor": "middle", "font-size": "10",
                              "font-family": "sans-serif"}).text = f"{t:.0f}"
    for t in _ticks(ymax):
        ET.SubElement(svg, "text", x=str(LEFT - 6), y=f"{y(t) + 3:.1f}",
                      attrib={"text-anchor": "end", "font-size": "10",
                              "font-family": "sans-serif"}).text = f"{t:.0f}"
    ET.SubElement(svg, "text", x=str(LEFT + pw / 2), y=str(HEIGHT - 10),
                  attrib={"text-anchor": "middle", "font-size": "12",
                          "font-family": "sans-serif"}).text = "tokens/s/user"
    ET.SubElement(svg, "text", x="14", y=str(TOP + ph / 2),
                  attrib={"text-anchor": "middle", "font-size": "12",
                          "font-family": "sans-serif",
                          "transform": f"rotate(-90 14 {TOP + ph / 2})"}).text = \
        "tokens/s/gpu (cluster)"
    for i, (mode, rows) in enumerate(fronts.items()):
        color = COLORS.get(mode, "#2ca02c")
        pts = sorted((r["tokens/s/user"], r["tokens/s/gpu_cluster"]) for r in rows)
        if pts:
            ET.SubElement(svg, "polyline", fill="none", stroke=color, attrib={
                "stroke-width": "1.5", "points": " ".join(f"{x(a):.1f},{y(b):.1f}"
                                                          for a, b in pts)})
        for a, b in pts:
            ET.SubElement(svg, "circle", cx=f"{x(a):.1f}", cy=f"{y(b):.1f}", r="3", fill=color)
        ET.SubElement(svg, "text", x=str(LEFT + pw - 10), y=str(TOP + 16 + 14 * i),
                      fill=color, attrib={"text-anchor": "end", "font-size": "12",
                                          "font-family": "sans-serif"}).text = mode
    return ET.tostring(svg, encoding="unicode") + "\n"
