"""One planning experiment (spec 51 §0.1) and the run of a list of them.

An :class:`Experiment` is a serving mode, a GPU budget, the workload and SLA, the sweep knobs and,
per role, a :class:`RoleSpace`: where the role runs (model, system, backend, version, quant
modes) and its candidate lists. :func:`run_plan` compiles every role's layouts for the role's
own system, backend and version (a decode role on another GPU type is just another system) and
hands all experiments to the native ``serving_plan`` in one call, which evaluates, picks, merges
and chooses (spec 51 §0.2, §1.3). :func:`tasks_of` gives each experiment's resolved fields. Plain
classes and dicts: this module stays on the sweep's lean import path (no dataclasses).
"""

from __future__ import annotations

import gc
import json
import math

from .. import paths
from .._native import native
from .deployment import build_worker
from .search_space import LIST_NAMES, default_lists, enumerate_tuples

#: Attention backends an experiment accepts (§6.6).
ATTENTION_BACKENDS = ("fa3", "triton", "trtllm_mha", "flashinfer", "fla", "default")
#: Allowed disagg replica sizes by default (spec 50 §9.1).
DEFAULT_REPLICA_SIZES = [1, 2, 4, 8] + list(range(16, 129, 8))
#: The disagg search settings of an experiment and their defaults (§5.2).
DISAGG_DEFAULTS = {
    "num_gpu_per_replica": None, "max_gpu_per_replica": 128, "max_prefill_workers": 32,
    "max_decode_workers": 32, "prefill_max_batch_size": 1, "decode_max_batch_size": 512,
    "prefill_latency_correction": 1.1, "decode_latency_correction": 1.08,
    "rate_match_prefill_degradation": 0.9, "rate_match_decode_degradation": 0.92,
    "autoscale_ttft_correction_factor": 1.8,
}
QUANT_NAMES = ("gemm", "moe", "kvcache", "fmha", "comm")
ROLES_OF_MODE = {"agg": ("agg",), "disagg": ("prefill", "decode")}


def check_attention_backend(value) -> None:
    """§6.6: the accepted names (whether the backend has the lane is the compile's question)."""
    if value is not None and value not in ATTENTION_BACKENDS:
        names = ", ".join(repr(n) for n in ATTENTION_BACKENDS)
        raise ValueError(f"attention_backend must be one of {names}, got {value!r}.")


def _error(exc: BaseException) -> dict:
    return {"type": type(exc).__name__, "message": str(exc)}


def backend_versions(root, system: str, backend: str, version) -> str | None:
    """The literal version the (system, backend) database resolves ``version`` to (``None``:
    the current slot), or ``None`` when the system holds no such database."""
    try:
        literal, _ = native().resolve_backend_version(str(root), system, backend, version)
    except (ValueError, RuntimeError, OSError):
        return None
    return literal



# ------------------------------------------------------------------------------ experiments


class RoleSpace:
    """Where one role of an experiment runs and what it searches: the model, system, backend,
    version (``None``: the current slot of (system, backend)), explicit quant modes (``None``
    values: from the checkpoint) and the candidate lists (``None`` values: the defaults)."""

    __slots__ = ("model", "system", "backend", "version", "quant", "lists")

    def __init__(self, model, system, backend, version=None, quant=None, lists=None):
        self.model = model
        self.system = system
        self.backend = backend
        self.version = version
        self.quant = {k: None for k in QUANT_NAMES}
        self.quant.update(quant or {})
        self.lists = dict(lists or {})

    def copy(self) -> "RoleSpace":
        return RoleSpace(self.model, self.system, self.backend, self.version, dict(self.quant),
                         {k: list(v) for k, v in self.lists.items()})


class Experiment:
    """One experiment (spec 51 §0.1). ``error`` set: it failed before sweeping (a validation
    error), and that is its outcome."""

    def __init__(self, name, mode, total_gpus, workload, knobs, roles, disagg=None):
        self.name = name
        self.mode = mode
        self.total_gpus = total_gpus
        self.workload = dict(workload)     # isl, osl, prefix, ttft, tpot, request_latency
        self.knobs = dict(knobs)           # database_mode, transfer_policy, ... (see KNOBS)
        self.roles = roles                 # {role: RoleSpace}
        self.disagg = dict(DISAGG_DEFAULTS, **(disagg or {})) if mode == "disagg" else None
        self.error = None
        self.resolved: dict = {}           # role -> {"version", "quant", "lists"}

    @property
    def backend(self) -> str:
        """The experiment's backend (the agg role's, or the prefill role's)."""
        return self.roles[ROLES_OF_MODE[self.mode][0]].backend

    def copy(self) -> "Experiment":
        e = Experiment(self.name, self.mode, self.total_gpus, self.workload, self.knobs,
                       {k: r.copy() for k, r in self.roles.items()},
                       dict(self.disagg) if self.disagg else None)
        e.error = self.error
        return e


#: Knobs shared by every role of an experiment, with their defaults.
KNOBS = {"database_mode": "SILICON", "transfer_policy": None, "free_gpu_memory_fraction": None,
         "max_seq_len": None, "nextn": 0, "nextn_accepted": None, "attention_backend": None,
         "enable_chunked_prefill": False}


def _model_facts(model_path):
    from ..compiler import families
    from ..compiler.hf_config import load_model_config

    model = load_model_config(model_path)
    # The MoE search space needs routed experts, not just a MoE family label: Qwen3.5-27B
    # (QWEN35) and Nemotron-H-56B are dense and sweep dense layouts (spec 50 §9.2, 31 §3).
    return model.family, families.is_moe_for_parallelism(model)


def role_search_space(exp: Experiment, role: str) -> tuple[dict, list[dict], str]:
    """The candidate lists of one role (the defaults of spec 50 §9.2 with the experiment's own
    lists in their place, ``num_gpu`` clamped to the budget), the parallel tuples they allow,
    and the backend whose rules enumerated them. Both disagg roles' lists and tuple rules are
    keyed on the prefill backend (spec 51 §3.3, §10)."""
    space = exp.roles[role]
    family, is_moe = _model_facts(space.model)
    list_backend = exp.roles["prefill"].backend if role == "decode" else space.backend
    lists = default_lists(is_moe=is_moe, family=family, backend=list_backend,
                          system=space.system, runs_context=role != "decode",
                          total_gpus=exp.total_gpus)
    for name, given in space.lists.items():
        if given is not None:
            lists[name] = list(given)
    lists["num_gpu"] = [n for n in lists["num_gpu"] if n <= exp.total_gpus]
    return lists, enumerate_tuples(lists, is_moe=is_moe, backend=list_backend), list_backend


class _Compiler:
    """Compiles the layouts of every experiment, sharing workers between experiments whose role
    resolves to the same (model, system, backend, version, database mode, ...)."""

    def __init__(self, root):
        self.root = root
        self.memos: dict = {}
        self.prefetched: set = set()

    def prefetch_all(self, experiments) -> None:
        """Starts loading every database the experiments use (each (system, backend, version)
        once, in build order), so that the loads overlap the compile of all the layouts, not
        only of the first role's."""
        for exp in experiments:
            if exp.error is not None:
                continue
            for space in exp.roles.values():
                version = backend_versions(self.root, space.system, space.backend,
                                           space.version)
                self._prefetch(space.system, space.backend, version,
                               exp.knobs["database_mode"])

    def _prefetch(self, system, backend, version, database_mode) -> None:
        """Starts loading the database's GEMM and communication tables in the background, so
        the load overlaps the compile of the layouts. Best effort, once per database."""
        from ..compiler.spec_builder import shared_layer_enabled

        key = (system, backend, version, database_mode)
        if version is None or key in self.prefetched:
            return
        self.prefetched.add(key)
        try:
            native().prefetch_tables(str(self.root), system, backend, version,
                                     bool(shared_layer_enabled(database_mode)))
        except Exception:  # noqa: BLE001 - an older native module, or no data: nothing to warm
            pass

    def layouts(self, exp: Experiment, role: str) -> list[dict]:
        space = exp.roles[role]
        runs_context = role != "decode"
        k = exp.knobs
        version = backend_versions(self.root, space.system, space.backend, space.version)
        if version is None and space.version is not None:
            version = space.version
        lists, tuples, list_backend = role_search_space(exp, role)
        policy = k["transfer_policy"]
        memo_key = (str(space.model), space.system, space.backend, version, k["database_mode"],
                    k["attention_backend"], k["nextn"], tuple(sorted(space.quant.items())),
                    None if policy is None else tuple(policy))
        if memo_key not in self.memos:
            self._prefetch(space.system, space.backend, version, k["database_mode"])
        memo = self.memos.setdefault(memo_key, {})
        overrides = {f"{q}_quant_mode": v for q, v in space.quant.items()}
        out, labels = [], None
        for sizes in tuples:
            try:
                w = build_worker(space.model, space.system, space.backend, version, self.root,
                                 sizes, overrides, k["nextn"], runs_context, sweep=True,
                                 database_mode=k["database_mode"],
                                 attention_backend=k["attention_backend"],
                                 moe_label_default=1, memo=memo)
                if policy is not None and not w.get("_policy"):
                    spec = json.loads(w["spec"]) if isinstance(w["spec"], str) else w["spec"]
                    spec["engine"]["transfer_policy"] = list(policy)
                    w["spec"] = json.dumps(spec)
                    w["_policy"] = True
                labels = labels or w["labels"]
                out.append({"worker": {kk: v for kk, v in w.items() if kk != "_policy"}})
            except Exception as exc:  # noqa: BLE001 - a layout that cannot be built is skipped
                out.append({"error": f"{type(exc).__name__}: {exc}"})
        exp.resolved[role] = {"version": version, "lists": lists,
                              "quant": {q: (labels or {}).get(q, space.quant[q])
                                        for q in QUANT_NAMES}}
        return out


def _sweep_request(exp: Experiment, compiler: _Compiler, load_target, strict_sla, top_n,
                   inclusive_tpot) -> dict:
    """The native ``serving_sweep`` request of one experiment."""
    w, k = exp.workload, exp.knobs
    request = {
        "total_gpus": exp.total_gpus, "isl": w["isl"], "osl": w["osl"], "prefix": w["prefix"],
        "ttft": float(w["ttft"]), "tpot": float(w["tpot"]),
        "request_latency": w.get("request_latency"),
        "nextn_accepted": k["nextn_accepted"] if k["nextn"] else None,
        "free_gpu_memory_fraction": k["free_gpu_memory_fraction"],
        "max_seq_len": k["max_seq_len"], "top_n": top_n, "strict_sla": bool(strict_sla),
        "modes": [exp.mode], "agg": [], "prefill": [], "decode": [],
        "enable_chunked_prefill": bool(k["enable_chunked_prefill"]) and exp.mode == "agg",
        "inclusive_tpot": bool(inclusive_tpot),
    }
    if load_target is not None:
        request["load_target"] = load_target
    if exp.mode == "agg":
        request["agg"] = compiler.layouts(exp, "agg")
    else:
        request["prefill"] = compiler.layouts(exp, "prefill")
        request["decode"] = compiler.layouts(exp, "decode")
        d = dict(exp.disagg)
        if d["num_gpu_per_replica"] is None:
            d["num_gpu_per_replica"] = list(DEFAULT_REPLICA_SIZES)
        request["disagg_options"] = d
    return request


def _check_disagg_options(exp: Experiment) -> None:
    d = exp.disagg
    for name in ("rate_match_prefill_degradation", "rate_match_decode_degradation"):
        v = d[name]
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) \
                or v <= 0:
            raise ValueError(f"{name} must be a positive finite number, got {v}.")
    if exp.total_gpus < 2:
        raise ValueError(f"total_gpus must be greater than 2 for disagg, got {exp.total_gpus}")


def run_plan(experiments: list[Experiment], *, merge: bool, load_target=None,
             strict_sla=False, top_n=5, inclusive_tpot=False, systems_path=None) -> dict:
    """Runs the experiments (spec 51 §0.2) through one native ``serving_plan`` call and returns
    its answer (``chosen_exp``, ``best_throughputs``, ``best_latencies``, ``outcomes``,
    ``best_configs``, ``pareto_fronts``, ``candidates``), ``outcomes`` listing every experiment
    in build order (those that failed validation included). Never raises for an experiment's
    failure; ``chosen_exp`` is ``"none"`` when no experiment has rows."""
    root = paths.systems_dir(systems_path)
    compiler = _Compiler(root)
    sweeps, early = [], {}
    gc_was_enabled = gc.isenabled()
    gc.disable()  # the compile allocates many small acyclic objects (see sweep.py)
    try:
        compiler.prefetch_all(experiments)
        for exp in experiments:
            if exp.error is None and exp.mode == "disagg":
                try:
                    _check_disagg_options(exp)
                except ValueError as exc:
                    exp.error = _error(exc)
            if exp.error is None:
                try:
                    check_attention_backend(exp.knobs["attention_backend"])
                except ValueError as exc:
                    exp.error = _error(exc)
            if exp.error is not None:
                early[exp.name] = exp.error
                continue
            request = _sweep_request(exp, compiler, load_target, strict_sla, top_n,
                                     inclusive_tpot)
            sweeps.append({"request": request, "names": {exp.mode: exp.name},
                           "backend": exp.backend})
    finally:
        if gc_was_enabled:
            gc.enable()
    if sweeps:
        text = native().serving_plan(json.dumps({"sweeps": sweeps, "merge": bool(merge)},
                                                allow_nan=False), str(root))
        out = json.loads(text)
    else:
        out = {"chosen_exp": "none", "best_throughputs": {}, "best_latencies": {},
               "outcomes": {}, "best_configs": {}, "pareto_fronts": {}, "candidates": {}}
        if inclusive_tpot:
            out["inclusive_best_configs"], out["inclusive_pareto_fronts"] = {}, {}
    native_outcomes = out.get("outcomes") or {}
    out["outcomes"] = {e.name: early.get(e.name, native_outcomes.get(e.name))
                       for e in experiments}
    return out


def tasks_of(experiments: list[Experiment]) -> dict:
    """The resolved fields of each experiment (the goldens' ``tasks``, with the reference's
    key names for what aic resolves)."""
    out = {}
    for exp in experiments:
        w, k = exp.workload, exp.knobs
        t = {"serving_mode": exp.mode, "total_gpus": exp.total_gpus, **w,
             "database_mode": k["database_mode"], "transfer_policy": k["transfer_policy"],
             "free_gpu_memory_fraction": k["free_gpu_memory_fraction"],
             "max_seq_len": k["max_seq_len"], "nextn": k["nextn"],
             "nextn_accepted": k["nextn_accepted"], "attention_backend": k["attention_backend"],
             "enable_chunked_prefill": bool(k["enable_chunked_prefill"])}
        for role, space in exp.roles.items():
            pre = "" if role == "agg" else f"{role}_"
            res = exp.resolved.get(role, {})
            t[f"{pre}model_path"] = str(space.model)
            t[f"{pre}system_name"] = space.system
            t[f"{pre}backend_name"] = space.backend
            t[f"{pre}backend_version"] = res.get("version", space.version)
            for q in QUANT_NAMES:
                t[f"{pre}{q}_quant_mode"] = res.get("quant", space.quant).get(q)
            for name in LIST_NAMES:
                lists = res.get("lists") or space.lists
                if name in lists:
                    t[f"{role}_{name}_candidates"] = list(lists[name])
        if exp.disagg is not None:
            d = dict(exp.disagg)
            if d["num_gpu_per_replica"] is None:
                d["num_gpu_per_replica"] = list(DEFAULT_REPLICA_SIZES)
            d["max_gpu_per_replica"] = min(exp.total_gpus, d["max_gpu_per_replica"])
            t.update(d)
        out[exp.name] = t
    return out
