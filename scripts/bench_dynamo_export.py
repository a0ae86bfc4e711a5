"""Wall time of ``aic.export.dynamo.export_dynamo`` (``aic-compile export dynamo``), issue 43: a
dense model (Qwen/Qwen3-32B, vLLM tp 2) and a large MoE (DeepSeek-V3, vLLM tp 8 with expert
parallel 8), both on h200_sxm, isl 2048 / osl 256, agg and disagg. For each, the first export
in the process (tables loaded, model compiled for the first time) and the median of the next
runs (what a sweep that exports per pick pays). Needs the replay build (``pip install .``).

``python scripts/bench_dynamo_export.py [--runs N]`` from the repo root."""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from aic.export.dynamo import export_dynamo
from aic.serving.plan import Workload
from aic.serving.replay import layout_deployment

CASES = {
    "Qwen/Qwen3-32B agg tp2": ("Qwen/Qwen3-32B", dict(tp_size=2)),
    "Qwen/Qwen3-32B disagg tp2/tp2": ("Qwen/Qwen3-32B", dict(mode="disagg", tp_size=2)),
    "DeepSeek-V3 agg tp8 ep8": ("deepseek-ai/DeepSeek-V3", dict(tp_size=8, moe_tp_size=1,
                                                                 moe_ep_size=8)),
    "DeepSeek-V3 disagg tp8 ep8": ("deepseek-ai/DeepSeek-V3", dict(mode="disagg", tp_size=8,
                                                                    moe_tp_size=1,
                                                                    moe_ep_size=8)),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="timed runs after the first")
    args = parser.parse_args()
    workload = Workload(isl=2048, osl=256)
    with tempfile.TemporaryDirectory() as scratch:
        for label, (model, layout) in CASES.items():
            deployment = layout_deployment(model, "h200_sxm", "vllm", **layout)
            walls = []
            for run in range(args.runs + 1):
                out = Path(scratch) / f"{len(walls)}-{label.replace(' ', '_').replace('/', '_')}"
                started = time.perf_counter()
                result = export_dynamo(deployment, workload, out)
                walls.append(time.perf_counter() - started)
            grid = ", ".join(f"{role} {g['decode_grid'][0]}x{g['decode_grid'][1]}"
                             for role, g in result.grid_sizes.items() if role != "planner")
            print(f"{label:<28} first {walls[0] * 1e3:7.1f} ms, then median "
                  f"{statistics.median(walls[1:]) * 1e3:7.1f} ms (min {min(walls[1:]) * 1e3:.1f}, "
                  f"{args.runs} runs); decode grids {grid}")


if __name__ == "__main__":
    main()
