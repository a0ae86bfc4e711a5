"""Replay speed (issue 37): the same closed-loop replay (Qwen/Qwen3-32B, h200_sxm, vLLM tp 2, 32 in
flight, isl 2048, osl 256) with aic's step latencies and with aisimulate-core's built-in
polynomial timing model, interleaved in one process; 256 and 10,000 requests. Needs the extension
built with the cargo feature `replay`. Prints wall time (request JSON to report JSON: engine load,
simulation, report), the simulator's own time, the time inside aic's timing model, and simulated
requests per second. `python scripts/bench_replay.py` from the repo root."""

import json, time, statistics, sys
from aic import _aic
from aic.serving.deployment import build_worker, resolve_version
from aic.paths import systems_dir
root = systems_dir(None)
version = resolve_version(root, "h200_sxm", "vllm", None)
w = build_worker("Qwen/Qwen3-32B", "h200_sxm", "vllm", version, root,
                 {"tp_size": 2, "pp_size": 1, "attention_dp_size": 1, "moe_tp_size": None, "moe_ep_size": None}, {}, 0, True)
engine = {"spec": {"json": json.loads(w["spec"])}, "facts": w["facts"]}
def req(n, conc, timing):
    return json.dumps({"mode": {"kind": "agg", "engine": engine},
        "workload": {"kind": "generated", "requests": n, "arrival": {"closed_loop": {"concurrency": conc}}, "isl": 2048, "osl": 256, "seed": 0},
        "options": {"timing": timing}})
for n, conc, reps in ((256, 32, 15), (10000, 32, 3)):
    res = {}
    for rep in range(reps):
        for timing in ("aic", "polynomial"):
            t = time.perf_counter(); out = json.loads(_aic.replay_json(req(n, conc, timing), str(root))); dt = time.perf_counter() - t
            res.setdefault(timing, []).append((dt, out["stats"]))
    for timing, runs in res.items():
        walls = [r[0] for r in runs]; sim = [r[1]["simulate_ms"] for r in runs]
        inaic = [sum(t.get("time_in_model_ms", 0) for t in r[1]["timing"]) for r in runs]
        print(f"{n:>6} req, {timing:<10}: wall median {statistics.median(walls)*1e3:8.1f} ms, simulate {statistics.median(sim):8.1f} ms, in aic {statistics.median(inaic):6.2f} ms, {n/statistics.median(walls):9.0f} simulated req/s")
