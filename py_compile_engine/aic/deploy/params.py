"""A picked deployment as the generator's parameter set (spec 60 §4): per role the parallel
sizes, batch and quant modes from the row, the worker counts that fill the GPU budget (§4.1),
and the service, SLA, model, node, bench and cluster sections (§4.2). The derived engine
limits are added by :mod:`aic.deploy.rules`; nothing here estimates anything."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..serving.plan import Deployment, Workload
from .errors import DeployError
from .options import GeneratorOptions

#: GPUs per node when the system file does not say (spec 60 §4.2 Node: 8 on every system in
#: scope; gb200 / gb300 files say 4).
GPUS_PER_NODE = 8


def gpus_per_node(system: str, systems_path=None) -> int:
    """``node.num_gpus_per_node`` of the system's description file (8 when absent)."""
    import os

    import yaml

    from .. import paths

    path = os.path.join(paths.systems_dir(systems_path), f"{system}.yaml")
    try:
        with open(path, encoding="utf-8") as fh:
            data = yaml.safe_load(fh) or {}
    except OSError:
        return GPUS_PER_NODE
    value = (data.get("node") or {}).get("num_gpus_per_node")
    return value if isinstance(value, int) and value > 0 else GPUS_PER_NODE


@dataclass
class PickParams:
    """The parameter set of one pick. ``roles`` maps ``agg`` / ``prefill`` / ``decode`` to a
    dict of engine parameters (spec 60 §4 names: ``tensor_parallel_size``, ``max_batch_size``,
    ...); ``workers`` maps each role to its worker count; the other fields are the shared
    sections."""

    backend: str
    mode: str
    model: str
    served_model_name: str
    system: str
    isl: int
    osl: int
    prefix: int
    ttft: float | None
    tpot: float | None
    is_moe: bool
    nextn: int
    options: GeneratorOptions
    roles: dict = field(default_factory=dict)
    workers: dict = field(default_factory=dict)
    row_gpus: dict = field(default_factory=dict)
    port: int = 8000
    enable_router: bool = False
    estimated_concurrency: int | None = None
    num_gpus_per_node: int = GPUS_PER_NODE

    @property
    def role_names(self) -> tuple:
        """The roles of the pick in their canonical order."""
        return tuple(self.roles)

    def merged(self) -> dict:
        """The merged view conditions read (spec 60 §4.3): agg, then prefill, then decode."""
        out: dict = {}
        for name in ("agg", "prefill", "decode"):
            out.update(self.roles.get(name, {}))
        return out


def _role_params(role) -> dict:
    p = role.parallel
    quant = role.quant
    params = {
        "tensor_parallel_size": p.tp,
        "pipeline_parallel_size": p.pp,
        "data_parallel_size": p.dp,
        "moe_tensor_parallel_size": p.moe_tp if p.moe_tp is not None else 1,
        "moe_expert_parallel_size": p.moe_ep if p.moe_ep is not None else 1,
        "max_batch_size": role.batch_size,
        "gpus_per_worker": p.tp * p.pp * p.dp,
    }
    for name in ("gemm", "moe", "kvcache", "fmha", "comm"):
        value = getattr(quant, name)
        if value is not None:
            params[f"{name}_quant_mode"] = value
    if quant.kvcache is not None:
        params["kv_cache_dtype"] = quant.kvcache
    return params


def worker_counts(deployment: Deployment, total_gpus: int) -> dict:
    """Worker counts that fill the GPU budget (spec 60 §4.1): agg ``total // (tp·pp·dp)``;
    disagg ``replicas = total // (Wp·Gp + Wd·Gd)`` times the row's worker counts."""
    if deployment.mode == "agg":
        p = deployment.roles["agg"].parallel
        return {"agg": total_gpus // (p.tp * p.pp * p.dp)}
    pre, dec = deployment.roles["prefill"], deployment.roles["decode"]
    gp = pre.parallel.tp * pre.parallel.pp * pre.parallel.dp
    gd = dec.parallel.tp * dec.parallel.pp * dec.parallel.dp
    replicas = total_gpus // (pre.workers * gp + dec.workers * gd)
    return {"prefill": replicas * pre.workers, "decode": replicas * dec.workers}


def pick_params(deployment: Deployment, workload: Workload, *, total_gpus: int, is_moe: bool,
                options: GeneratorOptions, systems_path=None) -> PickParams:
    """The parameter set of a pick before the rules (spec 60 §4, §4.1, §4.2). ``workload``
    holds the task's isl / osl / prefix and the row's **estimated** ttft / tpot."""
    backends = {r.backend for r in deployment.roles.values()}
    systems = {r.system for r in deployment.roles.values()}
    if len(backends) != 1 or len(systems) != 1:
        raise DeployError(f"the pick mixes backends {sorted(backends)} or systems "
                          f"{sorted(systems)}; the deployment targets describe one backend on "
                          f"one system")
    for name, role in deployment.roles.items():
        if role.parallel.cp != 1:
            raise DeployError(f"the {name} role uses context parallelism (cp "
                              f"{role.parallel.cp}); the deployment templates have no "
                              f"context-parallel flags, so this pick cannot be expressed")
        if role.batch_size is None and name != "prefill":
            raise DeployError(f"the {name} role has no batch size (row column bs); the "
                              f"engine limits are derived from it")
    backend = backends.pop()
    workers = worker_counts(deployment, total_gpus)
    if min(workers.values()) < 1:
        raise DeployError(f"the pick needs {deployment.gpus} GPUs, more than the budget of "
                          f"{total_gpus}")
    for role in workers:
        override = options.get(f"WorkerConfig.{role}_workers")
        if override is not None:
            workers[role] = override
    served = options.get("ServiceConfig.served_model_name", deployment.model)
    pick = PickParams(
        backend=backend, mode=deployment.mode, model=deployment.model, served_model_name=served,
        system=systems.pop(), isl=workload.isl, osl=workload.osl, prefix=workload.prefix,
        ttft=workload.ttft, tpot=workload.tpot, is_moe=is_moe, nextn=deployment.nextn,
        options=options, port=options.get("ServiceConfig.port", 8000),
        enable_router=bool(options.get("DynConfig.enable_router", False)),
        estimated_concurrency=options.get("BenchConfig.estimated_concurrency"))
    pick.num_gpus_per_node = gpus_per_node(pick.system, systems_path)
    for name, role in deployment.roles.items():
        pick.roles[name] = _role_params(role)
        pick.row_gpus[name] = role.parallel.tp * role.parallel.pp * role.parallel.dp
    pick.workers = workers
    return pick
