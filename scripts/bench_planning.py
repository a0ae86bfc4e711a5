#!/usr/bin/env python3
"""Times each planning golden case (goldens/planning.json: ``--backend auto``, serving modes,
hetero disagg, ``recommend``, experiment files, the sweep knobs) end to end in a fresh process
— interpreter start, ``import aic``, the compile of every layout, table loads, the sweeps — and
compares it with the reference's recorded wall time (``wall_s``, measured inside the call on a
2-core machine). A benchmark, not a test.

    python scripts/bench_planning.py [--goldens goldens/planning.json] [--repeat 3] [--case ID]

Each case first runs once untimed (that run writes the modules' bytecode, as installing a
wheel does); the best of ``--repeat`` timed runs is kept, with its CPU time (user + system), the
steadier figure on a loaded machine. Prints a Markdown table and the load average.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

CHILD = r"""
import json, sys, time
t0 = time.perf_counter()
from aic.parity.planning import run_golden_case
case = json.loads(sys.argv[1])
try:
    out = run_golden_case(case)
    chosen = out["chosen_exp"]
except Exception as exc:  # an error case: its error is the answer
    chosen = "error " + type(exc).__name__
print(json.dumps({"in_process_s": time.perf_counter() - t0, "chosen": chosen}))
"""

#: Goals of issue 41 by case kind (speed-up against the reference's wall time).
GOALS = {"auto": 50.0, "recommend": 50.0, "single": 100.0}


def goal_of(case: dict) -> tuple[str, float | None]:
    """The goal class of a case: ``auto`` sweeps and recommend 50x, single-backend sweeps
    100x, experiment files and errors have none."""
    if not case["ok"]:
        return "error", None
    if case["kind"] == "recommend":
        return "recommend", GOALS["recommend"]
    if case["kind"] == "sweep":
        if case["kwargs"].get("backend") == "auto":
            return "auto", GOALS["auto"]
        return "single", GOALS["single"]
    return case["kind"], None


def main() -> int:
    root = Path(__file__).resolve().parents[1]
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--goldens", default=str(root / "goldens" / "planning.json"))
    ap.add_argument("--repeat", type=int, default=3, help="fresh processes per case (best kept)")
    ap.add_argument("--case", default=None, help="only case ids containing this")
    args = ap.parse_args()
    doc = json.loads(Path(args.goldens).read_text())
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}

    def run(case):
        payload = {k: case[k] for k in ("kind", "kwargs")}
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        proc = subprocess.run([sys.executable, "-c", CHILD, json.dumps(payload)],
                              capture_output=True, text=True, check=True, env=env)
        wall = time.perf_counter() - start
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        return wall, cpu, json.loads(proc.stdout.strip().splitlines()[-1])

    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print()
    print("| case | kind | reference s | aic s (process) | cpu s | aic s (in-process) | "
          "speed-up | goal | chosen |")
    print("|---|---|---|---|---|---|---|---|---|")
    for case in doc["cases"]:
        if args.case and args.case not in case["id"]:
            continue
        run(case)
        best = None
        for _ in range(args.repeat):
            wall, cpu, info = run(case)
            if best is None or wall < best[0]:
                best = (wall, cpu, info)
        wall, cpu, info = best
        ref = case["wall_s"]
        kind, goal = goal_of(case)
        ratio = ref / wall
        verdict = "" if goal is None else (f"{goal:.0f}x {'met' if ratio >= goal else 'MISSED'}")
        print(f"| {case['id']} | {kind} | {ref:.3f} | {wall:.3f} | {cpu:.3f} | "
              f"{info['in_process_s']:.3f} | {ratio:.1f}x | {verdict} | {info['chosen']} |",
              flush=True)
    print()
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
