"""``replay.json`` of a pick (beyond the reference): aic's replay of the deployment as the
files deploy it (the §4.1 worker counts) at its operating point — closed loop at the pick's
estimated concurrency E (spec 60 §8.2), the sweep's isl / osl — with TTFT / TPOT p50 / p90 /
p99 next to the SLA targets. The sweep's numbers are means; users sign up to percentiles.
All numbers come from the Rust replay (``aic.serving.replay.replay_deployment``)."""

from __future__ import annotations

import dataclasses

from ..serving.plan import Deployment, Workload

#: Requests replayed per request in flight: every slot turns over this many times, so the
#: percentiles are past the ramp-up of the first wave.
REQUESTS_PER_SLOT = 4
#: Fewest requests replayed (small concurrencies still get enough samples for a p99).
MIN_REQUESTS = 200


def replay_requests(concurrency: int) -> int:
    """How many requests a pick's replay runs: ``max(200, 4 × concurrency)``."""
    return max(MIN_REQUESTS, REQUESTS_PER_SLOT * concurrency)


def deployed(deployment: Deployment, workers: dict) -> Deployment:
    """The deployment with the worker counts the files deploy."""
    roles = {name: dataclasses.replace(role, workers=workers[name])
             for name, role in deployment.roles.items()}
    return dataclasses.replace(deployment, roles=roles)


def _summary(s) -> dict:
    return {"mean": s.mean, "p50": s.p50, "p90": s.p90, "p99": s.p99}


def replay_record(deployment: Deployment, workers: dict, *, isl: int, osl: int, prefix: int,
                  concurrency: int, ttft_target: float, tpot_target: float,
                  estimate: dict, systems_path=None) -> dict:
    """The ``replay.json`` data of one pick; ``estimate`` holds the row's mean ttft / tpot.
    A pick with a cached prefix is not replayed (a generated workload has no shared prefix):
    the record says so."""
    from ..serving.replay import replay_deployment

    targets = {"ttft_ms": ttft_target, "tpot_ms": tpot_target}
    base = {"concurrency": concurrency, "isl": isl, "osl": osl, "targets": targets,
            "estimate": estimate}
    if prefix:
        return {**base, "replayed": False,
                "reason": f"the workload has a cached prefix ({prefix} tokens); a generated "
                          f"replay workload has no shared prefix, so the replay would not "
                          f"describe this operating point"}
    n = replay_requests(concurrency)
    result = replay_deployment(deployed(deployment, workers),
                               Workload(isl=isl, osl=osl, concurrency=concurrency),
                               requests=n, systems_path=systems_path)
    ttft, tpot = _summary(result.ttft), _summary(result.tpot)
    return {**base, "replayed": True, "requests": n, "arrival": "closed_loop",
            "ttft_ms": ttft, "tpot_ms": tpot,
            "meets_p90": {"ttft": ttft["p90"] <= ttft_target, "tpot": tpot["p90"] <= tpot_target},
            "throughput": result.throughput, "report": result.report}
