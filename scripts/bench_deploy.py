"""What ``--save-dir`` adds to a sweep's wall time (BENCHMARKS.md, "Deployment files"): one
sweep through the Python API, then the result tree written from its result without and with
the per-pick replays, each repeated and reported as the median. The writes go to a temporary
folder that is removed at the end.

    python scripts/bench_deploy.py [--repeats 5] [--model Qwen/Qwen3-32B] [--system h200_sxm]
                                   [--backend vllm] [--gpus 8] [--top-n 5]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time

from aic.deploy import save_sweep
from aic.serving.replay import replay_available
from aic.serving.sweep import sweep


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--model", default="Qwen/Qwen3-32B")
    parser.add_argument("--system", default="h200_sxm")
    parser.add_argument("--backend", default="vllm")
    parser.add_argument("--gpus", type=int, default=8)
    parser.add_argument("--isl", type=int, default=4000)
    parser.add_argument("--osl", type=int, default=1000)
    parser.add_argument("--top-n", type=int, default=5)
    args = parser.parse_args()
    kwargs = {"isl": args.isl, "osl": args.osl, "ttft": 2000.0, "tpot": 30.0}

    sweep(args.model, args.gpus, args.system, args.backend, top_n=args.top_n, **kwargs)  # warm
    sweeps, plain, replayed = [], [], []
    folder = tempfile.mkdtemp(prefix="aic-bench-deploy-")
    try:
        for _ in range(args.repeats):
            t = time.perf_counter()
            out = sweep(args.model, args.gpus, args.system, args.backend, top_n=args.top_n,
                        **kwargs)
            sweeps.append(time.perf_counter() - t)
            common = dict(save_dir=folder, model=args.model, system=args.system,
                          backend=args.backend, total_gpus=args.gpus, **kwargs)
            t = time.perf_counter()
            save_sweep(out, replay=False, **common)
            plain.append(time.perf_counter() - t)
            if replay_available():
                t = time.perf_counter()
                save_sweep(out, replay=True, **common)
                replayed.append(time.perf_counter() - t)
        picks = sum(len(rows) for rows in out["best_configs"].values())
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    print(f"{args.model}, {args.gpus} x {args.system}, {args.backend}, top-n {args.top_n} "
          f"({picks} picks), median of {args.repeats}:")
    print(f"  sweep                          {statistics.median(sweeps):7.3f} s")
    print(f"  --save-dir, no replays         {statistics.median(plain):7.3f} s")
    if replayed:
        print(f"  --save-dir with the replays    {statistics.median(replayed):7.3f} s")
    else:
        print("  (the native module has no replay: build with the cargo feature `replay`)")


if __name__ == "__main__":
    main()
