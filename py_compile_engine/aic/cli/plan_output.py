"""The terminal form of a planning result (``sweep``, ``recommend``, ``exp``): one table per
experiment (or per merged mode), what failed and why, and one line saying which experiment won
and by how much (tokens/s/GPU, or GPUs needed for a load target)."""

from __future__ import annotations

from .common import column_table

AGG_COLUMNS = ["parallel", "bs", "ctx_tokens", "ttft", "tpot", "tokens/s/user", "tokens/s/gpu",
               "tokens/s/gpu_cluster", "num_total_gpus", "memory"]
DISAGG_COLUMNS = ["(p)parallel", "(p)workers", "(d)parallel", "(d)bs", "(d)workers", "ttft",
                  "tpot", "tokens/s/user", "tokens/s/gpu", "tokens/s/gpu_cluster",
                  "num_total_gpus"]
LOAD_COLUMNS = ["replicas_needed", "total_gpus_needed"]


def _columns(rows: list[dict], load_match: bool) -> list[str]:
    disagg = any("(d)parallel" in r for r in rows)
    columns = list(DISAGG_COLUMNS if disagg else AGG_COLUMNS)
    if disagg and any("(d)system" in r for r in rows) and any(
            r.get("(d)system") != r.get("(p)system") for r in rows):
        columns[1:1] = ["(p)system"]
        columns.insert(columns.index("(d)parallel"), "(d)system")
    if any("backend" in r and "_task_key" in r for r in rows):
        columns.insert(0, "backend")
    if load_match:
        columns = [c for c in columns if c != "tokens/s/gpu_cluster"] + LOAD_COLUMNS
    return columns


def winner_line(out: dict, load_match: bool) -> str:
    """``chosen: X (…), N% ahead of Y (…)``: the winner and its margin over the runner-up."""
    thr = out.get("best_throughputs") or {}
    chosen = out.get("chosen_exp")
    if chosen not in thr:
        return "chosen: none (no experiment met the targets)"
    if load_match:
        def gpus(name):
            lat = (out.get("best_latencies") or {}).get(name) or {}
            if "total_gpus_needed" in lat:
                return lat["total_gpus_needed"]
            rows = (out.get("best_configs") or {}).get(name) or []
            return rows[0].get("total_gpus_needed") if rows else None

        mine = gpus(chosen)
        text = f"chosen: {chosen} ({mine} GPUs carry the load)"
        others = [(n, gpus(n)) for n in thr if n != chosen and gpus(n)]
        if others:
            name, g = min(others, key=lambda x: x[1])
            text += (f", {g - mine} GPUs fewer than {name} ({g} GPUs)" if g != mine
                     else f", tied with {name} ({g} GPUs; agg wins ties)")
        return text
    def label(name):
        rows = (out.get("best_configs") or {}).get(name) or []
        if rows and rows[0].get("_task_key"):  # a merged mode: name its winning experiment
            return f"{name} ({rows[0]['_task_key']})"
        return name

    best = thr[chosen]
    if best <= 0:
        return ("chosen: none — no configuration meets the SLA (every experiment's strict pick "
                "is empty; loosen --tpot / --request-latency or drop --strict-sla)")
    text = f"chosen: {label(chosen)} ({best:.3f} tokens/s/gpu)"
    others = sorted(((v, n) for n, v in thr.items() if n != chosen), reverse=True)
    if others:
        v, name = others[0]
        name = label(name)
        if v > 0:
            text += f", {100.0 * (best - v) / v:.1f}% ahead of {name} ({v:.3f})"
        else:
            text += f"; {name} has no configuration meeting the targets"
    return text


def result_lines(out: dict, *, load_match: bool = False, inclusive: bool = False,
                 marks: dict | None = None) -> list[str]:
    """The tables of every experiment (merged modes first), the failures, the winner line.
    ``marks`` (``(experiment, rank) -> text``) adds a ``replay p90`` column (``--save-dir``)."""
    lines: list[str] = []
    inclusive = inclusive and "inclusive_best_configs" in out
    best = out.get("inclusive_best_configs") if inclusive else None
    best = best or out.get("best_configs") or {}
    fronts = out.get("pareto_fronts") or {}
    candidates = out.get("candidates") or {}
    for exp, rows in best.items():
        n = len(candidates[exp]) if exp in candidates else sum(
            len(candidates.get(k, [])) for k in candidates if k.startswith(exp + "_"))
        lines.append("")
        lines.append(f"{exp}: best configs ({n} candidates, Pareto front "
                     f"{len(fronts.get(exp) or [])})"
                     + ("  [tpot column: inclusive TPOT]" if inclusive else ""))
        if not rows:
            lines.append("  no configuration meets the SLA (strict SLA: nothing within the "
                         "TPOT / request-latency target)")
            continue
        columns = _columns(rows, load_match)
        if marks:
            rows = [{**r, "replay p90": marks.get((exp, i), "")} for i, r in enumerate(rows, 1)]
            columns = columns + ["replay p90"]
        for line in column_table(rows, columns):
            lines.append("  " + line)
    failed = [(k, v) for k, v in (out.get("outcomes") or {}).items() if v]
    if failed:
        lines.append("")
        for exp, o in failed:
            lines.append(f"{exp}: failed: {o['type']}: {o['message']}")
    if out.get("attempts") and len(out["attempts"]) > 1:
        lines.append("")
        lines.append("budgets tried: " + ", ".join(str(a["gpu_budget"]) for a in out["attempts"])
                     + " (out of memory at the smaller ones)")
    lines.append("")
    lines.append(winner_line(out, load_match))
    return lines
