"""Runs Dynamo's own code on an ``aic-compile export dynamo`` folder and prints the result as
JSON. Executed by ``test_dynamo_export.py`` with the Python of a throwaway venv that has Dynamo
1.6.1 installed (this file imports nothing from aic).

* ``python dynamo_runner.py replay EXPORT_DIR REQUESTS CONCURRENCY``: Dynamo's offline replay
  (``dynamo.replay.api.run_synthetic_trace_replay``) on the exported engine args; the lengths,
  the mode and the worker counts come from ``EXPORT_DIR/export.json``. Prints the summary.
* ``python dynamo_runner.py planner PROFILE_DIR``: the SLA planner's profile loaders
  (``_convert_prefill_profiling`` / ``_convert_decode_profiling`` of
  ``dynamo/planner/monitoring/perf_metrics.py``) on the folder, first in its NPZ form, then
  with the NPZ folders removed (the ConfigMap JSON form). The loaders are taken from Dynamo's
  installed file and run as they are: importing ``dynamo.planner`` would need AISimulate, which
  the replay does not. Prints the forward-pass metrics they produce.
"""

import ast
import json
import os
import shutil
import sys


def replay(folder: str, requests: int, concurrency: int) -> dict:
    from dynamo.replay.api import run_synthetic_trace_replay

    with open(os.path.join(folder, "export.json"), encoding="utf-8") as fh:
        manifest = json.load(fh)

    def args(role):
        with open(os.path.join(folder, manifest["engine_args"][role]), encoding="utf-8") as fh:
            return json.load(fh)

    workload, workers = manifest["workload"], manifest["workers"]
    if manifest["deployment"]["mode"] == "agg":
        roles = {"extra_engine_args": args("agg"), "num_workers": workers["agg"]}
    else:
        roles = {"prefill_engine_args": args("prefill"), "decode_engine_args": args("decode"),
                 "num_prefill_workers": workers["prefill"],
                 "num_decode_workers": workers["decode"]}
    report = run_synthetic_trace_replay(workload["isl"], workload["osl"], requests,
                                        replay_concurrency=concurrency, **roles)
    return dict(report.summary)


def planner(folder: str) -> dict:
    import dynamo
    import numpy as np
    from dynamo.common.forward_pass_metrics import ForwardPassMetrics, ScheduledRequestMetrics

    path = os.path.join(list(dynamo.__path__)[0], "planner", "monitoring", "perf_metrics.py")
    with open(path, encoding="utf-8") as fh:
        tree = ast.parse(fh.read())
    names = {"np": np, "os": os, "json": json, "ForwardPassMetrics": ForwardPassMetrics,
             "ScheduledRequestMetrics": ScheduledRequestMetrics}
    wanted = ("_convert_prefill_profiling", "_convert_decode_profiling")
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name in wanted:
            exec(compile(ast.Module([node], []), path, "exec"), names)

    def load():
        out = {}
        for kind in ("prefill", "decode"):
            fpms = names[f"_convert_{kind}_profiling"](folder)
            out[kind] = [{"wall_time": f.wall_time,
                          "num_prefill_requests": f.scheduled_requests.num_prefill_requests,
                          "sum_prefill_tokens": f.scheduled_requests.sum_prefill_tokens,
                          "num_decode_requests": f.scheduled_requests.num_decode_requests,
                          "sum_decode_kv_tokens": f.scheduled_requests.sum_decode_kv_tokens}
                         for f in fpms]
        return out

    from_npz = load()
    for sub in ("selected_prefill_interpolation", "selected_decode_interpolation"):
        shutil.rmtree(os.path.join(folder, sub))
    return {"npz": from_npz, "json": load()}


def main() -> None:
    if sys.argv[1] == "replay":
        result = replay(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
    elif sys.argv[1] == "planner":
        result = planner(sys.argv[2])
    else:
        raise SystemExit(f"unknown command {sys.argv[1]!r} (replay or planner)")
    json.dump(result, sys.stdout)


if __name__ == "__main__":
    main()
