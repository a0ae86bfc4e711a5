"""``replay.json`` of a pick (beyond the reference): aic's replay of the deployment as the
files deploy it (the §4.1 worker counts) at its operating point — closed loop at the pick's
estimated concurrency E (spec 60 §8.2), the sweep's isl / osl — with TTFT / TPOT p50 / p90 /
p99 next to the SLA targets. The sweep's numbers are means; users sign up to percentiles.
All numbers come from the Rust replay (``aic.serving.replay.replay_deployment``)."""

from __future__ import annotations

import dataclasses

from ..serving.plan import Deployment, Workload

#: Measured requests per request in flight: every slot turns over this many times.
REQUESTS_PER_SLOT = 4
#: Fewest measured requests (small concurrencies still get enough samples for a p99).
MIN_REQUESTS = 200
#: Warm-up requests per request in flight, left out of the percentiles: the pick's benchmark
#: (``bench_run.sh``, spec 60 §8.2) runs aiperf with ``--warmup-request-count`` 2 × E, so the
#: replay measures the same steady state (a closed loop's first wave arrives at once and
#: queues for prefill; the benchmark does not count it either).
WARMUP_PER_SLOT = 2


def warmup_requests(concurrency: int) -> int:
    """The warm-up requests of a pick's replay: ``2 × concurrency``, as its benchmark."""
    return WARMUP_PER_SLOT * concurrency


def replay_requests(concurrency: int) -> int:
    """How many requests a pick's replay runs: the warm-up plus ``max(200, 4 × concurrency)``
    measured ones."""
    return warmup_requests(concurrency) + max(MIN_REQUESTS, REQUESTS_PER_SLOT * concurrency)


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
    warmup = warmup_requests(concurrency)
    result = replay_deployment(deployed(deployment, workers),
                               Workload(isl=isl, osl=osl, concurrency=concurrency),
                               requests=n, warmup_requests=warmup, systems_path=systems_path)
    ttft, tpot = _summary(result.ttft), _summary(result.tpot)
    return {**base, "replayed": True, "requests": n, "warmup_requests": warmup,
            "arrival": "closed_loop",
            "ttft_ms": ttft, "tpot_ms": tpot,
            "meets_p90": {"ttft": ttft["p90"] <= ttft_target, "tpot": tpot["p90"] <= tpot_target},
            "throughput": result.throughput, "report": result.report}
