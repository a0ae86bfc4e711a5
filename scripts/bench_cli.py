#!/usr/bin/env python3
"""What the command line costs on top of the Python API: the same deployment sweep run as
``aic-compile sweep MODEL --system S --backend B --gpus N`` and as
``from aic.serving_sweep import sweep; sweep(MODEL, N, S, B)``, each in a fresh process,
interleaved (CLI, API, CLI, API, ...) so that both see the same machine load. A benchmark, not a
test (BENCHMARKS.md, "CLI overhead").

    python scripts/bench_cli.py [--runs 31] [--model Qwen/Qwen3-32B --system h200_sxm
                                 --backend vllm --gpus 8]

The CLI runs through the same lines the ``aic-compile`` console script of an installed wheel
runs (pip writes them from pyproject.toml's entry point), with this interpreter; the API
process imports and calls the sweep the way README.md documents. Both run once untimed first
(that writes the modules' bytecode, as installing a wheel does). Prints the median and best wall
time and the median CPU time (user + system; the steadier figure on a loaded machine) of each,
the median difference of the pairs and the load average before and after.
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

#: The body of the console script pip writes for ``aic-compile = "<module>:<function>"``.
CONSOLE_SCRIPT = """import re
import sys
from {module} import {function}
if __name__ == "__main__":
    sys.argv[0] = re.sub(r"(-script\\.pyw|\\.exe)?$", "", sys.argv[0])
    sys.exit({function}())
"""


def console_entry(pyproject: Path) -> tuple[str, str]:
    """``(module, function)`` of the ``aic-compile`` console script in pyproject.toml."""
    match = re.search(r'^aic-compile\s*=\s*"([\w.]+):(\w+)"', pyproject.read_text(), re.M)
    if match is None:
        raise SystemExit(f"no aic-compile console script in {pyproject}")
    return match.group(1), match.group(2)

API = "from aic.serving_sweep import sweep; sweep({model!r}, {gpus}, {system!r}, {backend!r})"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=31, help="fresh processes of each (median kept)")
    ap.add_argument("--model", default="Qwen/Qwen3-32B")
    ap.add_argument("--system", default="h200_sxm")
    ap.add_argument("--backend", default="vllm")
    ap.add_argument("--gpus", type=int, default=8)
    args = ap.parse_args()

    root = Path(__file__).resolve().parents[1]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    source = str(root / "py_compile_engine")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (source, env.get("PYTHONPATH")) if p)

    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "aic-compile"
        module, function = console_entry(root / "pyproject.toml")
        script.write_text(CONSOLE_SCRIPT.format(module=module, function=function),
                          encoding="utf-8")
        cli = [sys.executable, str(script), "sweep", args.model, "--system", args.system,
               "--backend", args.backend, "--gpus", str(args.gpus)]
        api = [sys.executable, "-c", API.format(model=args.model, gpus=args.gpus,
                                                system=args.system, backend=args.backend)]

        def run(command) -> tuple[float, float]:
            """Wall time and CPU time (user + system) of one fresh process."""
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            start = time.perf_counter()
            subprocess.run(command, stdout=subprocess.DEVNULL, check=True, env=env)
            wall = time.perf_counter() - start
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)

        run(cli), run(api)  # untimed: writes the bytecode
        load_before = os.getloadavg()
        times: dict[str, list[float]] = {"cli": [], "api": []}
        cpu: dict[str, list[float]] = {"cli": [], "api": []}
        for _ in range(args.runs):
            for name, command in (("cli", cli), ("api", api)):
                w, c = run(command)
                times[name].append(w)
                cpu[name].append(c)
        load_after = os.getloadavg()

    print(f"CLI: aic-compile sweep {args.model} --system {args.system} --backend {args.backend} "
          f"--gpus {args.gpus}")
    print(f"API: {API.format(model=args.model, gpus=args.gpus, system=args.system, backend=args.backend)}")
    print(f"{args.runs} fresh processes each, interleaved; {os.cpu_count()} CPUs; load average "
          f"{load_before[0]:.2f} before, {load_after[0]:.2f} after")
    for name in ("cli", "api"):
        t = times[name]
        print(f"  {name}: median {statistics.median(t):.4f} s, best {min(t):.4f} s wall; "
              f"median {statistics.median(cpu[name]):.4f} s CPU")
    diffs = [c - a for c, a in zip(times["cli"], times["api"])]
    print(f"  cli - api: median of the pairs {statistics.median(diffs):+.4f} s, "
          f"difference of the medians "
          f"{statistics.median(times['cli']) - statistics.median(times['api']):+.4f} s wall, "
          f"{statistics.median(cpu['cli']) - statistics.median(cpu['api']):+.4f} s CPU")
    return 0


if __name__ == "__main__":
    sys.exit(main())
