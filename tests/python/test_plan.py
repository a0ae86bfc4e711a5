"""The Deployment / Workload values (aic.serving.plan): JSON form, strict reading, rows of a
sweep table, and the estimate and replay that take them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import requires_replay

from aic.serving import estimate
from aic.serving.plan import (
    Deployment,
    Parallelism,
    PlanValueError,
    QuantModes,
    Role,
    Workload,
)

REPO = Path(__file__).resolve().parents[2]


def _disagg(decode_system="h200_sxm") -> Deployment:
    return Deployment(
        model="Qwen/Qwen3-32B", mode="disagg",
        roles={
            "decode": Role(system=decode_system, backend="trtllm", parallel=Parallelism(tp=4),
                           workers=1, batch_size=64),
            "prefill": Role(system="h200_sxm", backend="trtllm", parallel=Parallelism(tp=1),
                            workers=4, batch_size=1),
        })


def test_roles_are_kept_in_canonical_order_and_gpus_add_up():
    dep = _disagg()
    assert list(dep.roles) == ["prefill", "decode"]
    assert dep.gpus == 4 * 1 + 1 * 4
    assert dep.role("decode").parallel.label == "tp4pp1dp1etp1ep1"
    assert Parallelism(tp=1, cp=2).label == "tp1pp1dp1etp1ep1cp2"


def test_json_round_trip_is_exact():
    dep = _disagg("b200_sxm")
    again = Deployment.from_json(dep.to_json())
    assert again == dep
    assert again.to_dict() == json.loads(dep.to_json())
    wl = Workload(isl=4000, osl=1000, prefix=100, request_rate=2.5, ttft=2000.0, tpot=30.0)
    assert Workload.from_json(wl.to_json()) == wl


@pytest.mark.parametrize("mutate, field", [
    (lambda d: d.update(colour="red"), "colour: unknown key"),
    (lambda d: d["roles"]["decode"].update(tp=4), "roles.decode.tp: unknown key"),
    (lambda d: d["roles"]["decode"]["parallel"].update(tp="four"), "roles.decode.parallel.tp"),
    (lambda d: d["roles"]["decode"].update(backend="tensorrt"), "roles.decode.backend"),
    (lambda d: d["roles"]["prefill"].update(workers=0), "roles.prefill.workers"),
    (lambda d: d["roles"].pop("decode"), "roles: a disagg deployment has the roles"),
    (lambda d: d["roles"].update(agg={"system": "h200_sxm", "backend": "vllm"}),
     "roles.agg: not a role of a disagg deployment"),
    (lambda d: d.update(mode="afd"), "mode: 'afd' is not one of agg, disagg"),
    (lambda d: d.pop("model"), "model: required key is missing"),
    (lambda d: d["roles"]["decode"].update(free_gpu_memory_fraction=float("nan")),
     "roles.decode.free_gpu_memory_fraction"),
])
def test_bad_json_names_the_field(mutate, field):
    data = _disagg().to_dict()
    mutate(data)
    with pytest.raises(PlanValueError) as err:
        Deployment.from_dict(data)
    assert field in str(err.value)


@pytest.mark.parametrize("kwargs, field", [
    ({"isl": 0, "osl": 10}, "isl"),
    ({"isl": 100, "osl": 10, "prefix": 100}, "prefix"),
    ({"isl": 100, "osl": 10, "concurrency": 4, "request_rate": 1.0}, "concurrency, request_rate"),
    ({"isl": 100, "osl": 10, "request_rate": float("inf")}, "request_rate"),
    ({"isl": 100, "osl": 10, "ttft": -1.0}, "ttft"),
])
def test_bad_workload_names_the_field(kwargs, field):
    with pytest.raises(PlanValueError) as err:
        Workload(**kwargs)
    assert str(err.value).startswith(field)


def test_mtp_needs_its_acceptance():
    with pytest.raises(PlanValueError, match="nextn_accepted"):
        Deployment(model="m", mode="agg", nextn=1,
                   roles={"agg": Role(system="h200_sxm", backend="vllm")})


@pytest.fixture(scope="module")
def hetero_row() -> dict:
    path = REPO / "goldens" / "planning.json"
    if not path.exists():  # the planning goldens land with the planning command
        path = REPO.parent / "shared" / "goldens" / "planning.json"
    data = json.loads(path.read_text())
    case = next(c for c in data["cases"] if c["id"] == "hetero_q32_h200p_b200d_trt_8gpu")
    return case["best_configs"]["disagg"][0]


@pytest.mark.engine
def test_row_to_deployment_reprices_the_row(hetero_row):
    """A hetero disagg row (prefill h200, decode b200) read back as a Deployment and estimated
    gives the row's TTFT / TPOT inputs: the decode role is priced on its own system."""
    dep = Deployment.from_row(hetero_row)
    assert dep.mode == "disagg"
    assert dep.role("prefill").system == "h200_sxm"
    assert dep.role("decode").system == "b200_sxm"
    assert dep.role("decode").workers == hetero_row["(d)workers"]
    assert dep.role("decode").batch_size == hetero_row["(d)bs"]
    assert dep.gpus == hetero_row["num_total_gpus"]
    wl = Workload(isl=hetero_row["isl"], osl=hetero_row["osl"])
    out = estimate_deployment_for(dep, wl)
    raw = out["result"]["raw"]
    assert raw["(d)system"] == "b200_sxm" and raw["(p)system"] == "h200_sxm"
    assert raw["(d)version"] == hetero_row["(d)version"]
    # The disagg estimate composes the same two workers with the same counts as the sweep
    # (spec 50 §4, §9.4), so the row comes back as it was priced.
    for column in ("ttft", "tpot", "seq/s", "tokens/s/gpu", "num_total_gpus", "(d)memory"):
        assert raw[column] == hetero_row[column], column


def estimate_deployment_for(dep, wl):
    from aic.serving import estimate_deployment

    return estimate_deployment(dep, wl)


@pytest.mark.engine
def test_estimate_deployment_equals_the_keyword_estimate():
    kw = estimate("Qwen/Qwen3-32B", "h200_sxm", "disagg", "trtllm", isl=4000, osl=1000,
                  prefill_tp_size=1, decode_tp_size=4, prefill_batch_size=1,
                  prefill_num_workers=4, decode_batch_size=64, decode_num_workers=1)
    plan = estimate_deployment_for(_disagg(), Workload(isl=4000, osl=1000))
    assert plan["result"]["raw"] == kw["result"]["raw"]
    agg_kw = estimate("Qwen/Qwen3-32B", "h200_sxm", "agg", "vllm", isl=2048, osl=256,
                      tp_size=2, batch_size=16, ctx_tokens=4096)
    agg = Deployment(model="Qwen/Qwen3-32B", mode="agg",
                     roles={"agg": Role(system="h200_sxm", backend="vllm",
                                        parallel=Parallelism(tp=2), batch_size=16,
                                        ctx_tokens=4096)})
    assert estimate_deployment_for(agg, Workload(isl=2048, osl=256))["result"]["raw"] == \
        agg_kw["result"]["raw"]


@pytest.mark.engine
def test_estimate_deployment_needs_batches():
    dep = Deployment(model="Qwen/Qwen3-32B", mode="agg",
                     roles={"agg": Role(system="h200_sxm", backend="vllm")})
    with pytest.raises(ValueError, match="roles.agg.batch_size"):
        estimate_deployment_for(dep, Workload(isl=128, osl=16))


@pytest.mark.engine
@requires_replay()
def test_replay_deployment_equals_the_keyword_replay():
    import aic
    from aic.serving.replay import replay_deployment

    kw = aic.replay("Qwen/Qwen3-32B", "h200_sxm", "vllm", tp_size=2, workers=2,
                    concurrency=8, requests=24, isl=512, osl=32)
    dep = Deployment(model="Qwen/Qwen3-32B", mode="agg",
                     roles={"agg": Role(system="h200_sxm", backend="vllm",
                                        parallel=Parallelism(tp=2), workers=2)})
    plan = replay_deployment(dep, Workload(isl=512, osl=32, concurrency=8), requests=24)
    assert plan.ttft.mean == kw.ttft.mean and plan.tpot.p90 == kw.tpot.p90
    with pytest.raises(ValueError, match="workload.prefix"):
        replay_deployment(dep, Workload(isl=512, osl=32, prefix=64, concurrency=8), requests=4)


def test_quant_overrides_names():
    assert QuantModes(gemm="fp8").overrides() == {
        "gemm_quant_mode": "fp8", "kvcache_quant_mode": None, "fmha_quant_mode": None,
        "moe_quant_mode": None, "comm_quant_mode": None}
