"""The two values every serving path shares: a :class:`Deployment` (what runs where) and a
:class:`Workload` (what it serves).

A deployment is a model, a serving mode and its roles — ``agg``, or ``prefill`` and ``decode``
— each with its own system, backend, version, parallel layout, quant modes, worker count and
batch. Mixed GPU types are not a special case: the decode role simply names another system. A
workload is the request shape (prompt and output lengths, cached prefix) and, where a path needs
one, the load (requests in flight or a request rate) and the latency targets.

Both have a JSON form (:meth:`Deployment.to_dict` / :meth:`Deployment.from_dict`, the same for
:class:`Workload`) that estimate, sweep and recommend rows, replay, the deployment files, the
Dynamo export and experiment files read and write; reading it is strict (an unknown key, a
missing one or a value of the wrong type is a :class:`PlanValueError` naming the field).
:meth:`Deployment.from_row` turns a row of a sweep / recommend table (``best_configs``,
``candidates``) into the deployment that row priced. Nothing here computes a latency.
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass, field
from collections.abc import Mapping

#: The serving modes a deployment can have.
MODES = ("agg", "disagg")
#: Roles per mode, in the order they are listed.
ROLES_OF_MODE = {"agg": ("agg",), "disagg": ("prefill", "decode")}
#: Backends the engine has tables for.
BACKENDS = ("trtllm", "vllm", "sglang")
#: Database modes (spec 51 §6.1).
DATABASE_MODES = ("SILICON", "HYBRID", "EMPIRICAL", "SOL")
#: The quant-mode fields of a role, as the estimate's keyword arguments name them.
QUANT_FIELDS = ("gemm", "kvcache", "fmha", "moe", "comm")


class PlanValueError(ValueError):
    """A deployment or workload value (or its JSON form) that is not valid; the message names
    the field (``roles.decode.parallel.tp``) and what is wrong with it."""


# ------------------------------------------------------------------------------ checks


def _int(path: str, value, *, minimum: int = 1, optional: bool = False):
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        else:
            raise PlanValueError(f"{path}: expected an integer >= {minimum}, got {value!r}")
    if value < minimum:
        raise PlanValueError(f"{path}: expected an integer >= {minimum}, got {value}")
    return value


def _float(path: str, value, *, low: float = 0.0, high: float | None = None,
           low_open: bool = True, optional: bool = False):
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise PlanValueError(f"{path}: expected a number, got {value!r}")
    value = float(value)
    below = value <= low if low_open else value < low
    if not math.isfinite(value) or below or (high is not None and value > high):
        rng = f"{'>' if low_open else '>='} {low}" + (f" and <= {high}" if high is not None else "")
        raise PlanValueError(f"{path}: expected a finite number {rng}, got {value!r}")
    return value


def _str(path: str, value, *, choices=None, optional: bool = False):
    if value is None and optional:
        return None
    if not isinstance(value, str) or not value:
        raise PlanValueError(f"{path}: expected a non-empty string, got {value!r}")
    if choices is not None and value not in choices:
        raise PlanValueError(f"{path}: {value!r} is not one of {', '.join(choices)}")
    return value


def _mapping(path: str, value, allowed, required=()) -> dict:
    if not isinstance(value, Mapping):
        raise PlanValueError(f"{path or 'value'}: expected a mapping, got {type(value).__name__}")
    unknown = [k for k in value if k not in allowed]
    if unknown:
        where = f"{path}." if path else ""
        raise PlanValueError(f"{where}{unknown[0]}: unknown key (known keys: "
                             f"{', '.join(allowed)})")
    for k in required:
        if k not in value:
            where = f"{path}." if path else ""
            raise PlanValueError(f"{where}{k}: required key is missing")
    return dict(value)


# ------------------------------------------------------------------------------ values


@dataclass(frozen=True)
class Parallelism:
    """A worker's parallel layout: tensor, pipeline, attention data, MoE tensor / expert and
    context parallel widths. ``moe_tp`` / ``moe_ep`` are ``None`` for a dense model (or to let
    the estimate infer the missing one from ``tp · dp``)."""

    tp: int = 1
    pp: int = 1
    dp: int = 1
    moe_tp: int | None = None
    moe_ep: int | None = None
    cp: int = 1

    def __post_init__(self):
        for name in ("tp", "pp", "dp", "cp"):
            _int(f"parallel.{name}", getattr(self, name))
        for name in ("moe_tp", "moe_ep"):
            _int(f"parallel.{name}", getattr(self, name), optional=True)

    @property
    def gpus(self) -> int:
        """GPUs of one worker: ``tp · pp · dp · cp``."""
        return self.tp * self.pp * self.dp * self.cp

    @property
    def label(self) -> str:
        """The tables' ``parallel`` string (``tp4pp1dp1etp1ep1``, ``…cp2`` when context parallel)."""
        text = (f"tp{self.tp}pp{self.pp}dp{self.dp}etp{self.moe_tp or 1}ep{self.moe_ep or 1}")
        return text + (f"cp{self.cp}" if self.cp != 1 else "")

    def sizes(self) -> dict:
        """The compile keyword arguments (``tp_size`` … ``moe_ep_size``, ``cp_size`` when > 1)."""
        out = {"tp_size": self.tp, "pp_size": self.pp, "attention_dp_size": self.dp,
               "moe_tp_size": self.moe_tp, "moe_ep_size": self.moe_ep}
        if self.cp != 1:
            out["cp_size"] = self.cp
        return out


@dataclass(frozen=True)
class QuantModes:
    """Quant modes of a role; ``None`` = resolved from the checkpoint (spec 50 §1.3)."""

    gemm: str | None = None
    kvcache: str | None = None
    fmha: str | None = None
    moe: str | None = None
    comm: str | None = None

    def __post_init__(self):
        for name in QUANT_FIELDS:
            _str(f"quant.{name}", getattr(self, name), optional=True)

    def overrides(self) -> dict:
        """The compile overrides (``gemm_quant_mode`` …)."""
        return {f"{k}_quant_mode": getattr(self, k) for k in QUANT_FIELDS}


@dataclass(frozen=True)
class Role:
    """One role of a deployment: where it runs (system, backend, version), how (layout, quant
    modes) and how much of it (workers; ``batch_size`` resident requests per attention rank for
    agg and decode, requests per prefill pass for prefill; ``ctx_tokens`` prompt tokens per agg
    iteration). ``version`` ``None`` = the current slot of (system, backend)."""

    system: str
    backend: str
    version: str | None = None
    parallel: Parallelism = field(default_factory=Parallelism)
    quant: QuantModes = field(default_factory=QuantModes)
    workers: int = 1
    batch_size: int | None = None
    ctx_tokens: int | None = None
    free_gpu_memory_fraction: float | None = None
    max_seq_len: int | None = None

    def __post_init__(self):
        _str("system", self.system)
        _str("backend", self.backend, choices=BACKENDS)
        _str("version", self.version, optional=True)
        if not isinstance(self.parallel, Parallelism):
            raise PlanValueError(f"parallel: expected a Parallelism, got {self.parallel!r}")
        if not isinstance(self.quant, QuantModes):
            raise PlanValueError(f"quant: expected QuantModes, got {self.quant!r}")
        _int("workers", self.workers)
        _int("batch_size", self.batch_size, optional=True)
        _int("ctx_tokens", self.ctx_tokens, optional=True)
        _float("free_gpu_memory_fraction", self.free_gpu_memory_fraction, high=1.0,
               optional=True)
        _int("max_seq_len", self.max_seq_len, optional=True)

    @property
    def gpus(self) -> int:
        """GPUs of the role: workers × GPUs per worker."""
        return self.workers * self.parallel.gpus


_PARALLEL_KEYS = tuple(f.name for f in dataclasses.fields(Parallelism))
_ROLE_KEYS = tuple(f.name for f in dataclasses.fields(Role))
_DEPLOYMENT_KEYS = ("model", "mode", "roles", "database_mode", "nextn", "nextn_accepted",
                    "attention_backend")
_WORKLOAD_KEYS = ("isl", "osl", "prefix", "concurrency", "request_rate", "ttft", "tpot",
                  "request_latency")


def _role_from_dict(path: str, data) -> Role:
    d = _mapping(path, data, _ROLE_KEYS, ("system", "backend"))
    par = _mapping(f"{path}.parallel", d.get("parallel") or {}, _PARALLEL_KEYS)
    quant = _mapping(f"{path}.quant", d.get("quant") or {}, QUANT_FIELDS)
    try:
        return Role(
            system=d["system"], backend=d["backend"], version=d.get("version"),
            parallel=Parallelism(**par), quant=QuantModes(**quant),
            workers=d.get("workers", 1), batch_size=d.get("batch_size"),
            ctx_tokens=d.get("ctx_tokens"),
            free_gpu_memory_fraction=d.get("free_gpu_memory_fraction"),
            max_seq_len=d.get("max_seq_len"))
    except PlanValueError as exc:
        raise PlanValueError(f"{path}.{exc}") from None


@dataclass(frozen=True)
class Deployment:
    """A model served in one mode by its roles (``{"agg": Role}`` or ``{"prefill": Role,
    "decode": Role}``), with the settings every role shares: the database mode, MTP depth and
    acceptance, and the attention backend."""

    model: str
    mode: str
    roles: Mapping[str, Role]
    database_mode: str = "SILICON"
    nextn: int = 0
    nextn_accepted: float | None = None
    attention_backend: str | None = None

    def __post_init__(self):
        _str("model", self.model)
        _str("mode", self.mode, choices=MODES)
        _str("database_mode", self.database_mode, choices=DATABASE_MODES)
        if not isinstance(self.roles, Mapping):
            raise PlanValueError(f"roles: expected a mapping of role name to Role, got "
                                 f"{self.roles!r}")
        expected = ROLES_OF_MODE[self.mode]
        if tuple(sorted(self.roles)) != tuple(sorted(expected)):
            raise PlanValueError(f"roles: a {self.mode} deployment has the roles "
                                 f"{', '.join(expected)}, got {', '.join(self.roles) or 'none'}")
        for name, role in self.roles.items():
            if not isinstance(role, Role):
                raise PlanValueError(f"roles.{name}: expected a Role, got {role!r}")
        # Keep the roles in their canonical order, whatever order they were given in.
        object.__setattr__(self, "roles", {k: self.roles[k] for k in expected})
        _int("nextn", self.nextn, minimum=0)
        _float("nextn_accepted", self.nextn_accepted, low=0.0, low_open=False,
               high=float(self.nextn), optional=True)
        if self.nextn > 0 and self.nextn_accepted is None:
            raise PlanValueError(f"nextn_accepted: required with nextn={self.nextn} (average "
                                 f"accepted draft tokens per step, 0 <= nextn_accepted <= nextn)")
        _str("attention_backend", self.attention_backend, optional=True)

    # -------------------------------------------------------------------- derived facts

    @property
    def gpus(self) -> int:
        """GPUs of the whole deployment (every worker of every role)."""
        return sum(r.gpus for r in self.roles.values())

    def role(self, name: str) -> Role:
        """The role ``name`` (``agg``, ``prefill`` or ``decode``)."""
        try:
            return self.roles[name]
        except KeyError:
            raise PlanValueError(f"roles.{name}: a {self.mode} deployment has no {name} role "
                                 f"(it has {', '.join(self.roles)})") from None

    @property
    def systems(self) -> tuple[str, ...]:
        """The systems the roles run on, in role order, without repeats."""
        return tuple(dict.fromkeys(r.system for r in self.roles.values()))

    def replace_role(self, name: str, **changes) -> "Deployment":
        """A copy with role ``name`` changed (``workers=2``, ``parallel=…``)."""
        roles = dict(self.roles)
        roles[name] = dataclasses.replace(self.role(name), **changes)
        return dataclasses.replace(self, roles=roles)

    # -------------------------------------------------------------------- JSON form

    def to_dict(self) -> dict:
        """The JSON form (plain dicts, lists, numbers and strings)."""
        return {
            "model": self.model, "mode": self.mode,
            "roles": {k: dataclasses.asdict(r) for k, r in self.roles.items()},
            "database_mode": self.database_mode, "nextn": self.nextn,
            "nextn_accepted": self.nextn_accepted, "attention_backend": self.attention_backend,
        }

    def to_json(self, **kwargs) -> str:
        """:meth:`to_dict` as JSON text."""
        return json.dumps(self.to_dict(), allow_nan=False, **kwargs)

    @classmethod
    def from_dict(cls, data) -> "Deployment":
        """Reads the JSON form strictly: unknown keys, missing ones and wrong types are a
        :class:`PlanValueError` naming the field."""
        d = _mapping("", data, _DEPLOYMENT_KEYS, ("model", "mode", "roles"))
        roles_in = d["roles"]
        if not isinstance(roles_in, Mapping):
            raise PlanValueError(f"roles: expected a mapping of role name to role, got "
                                 f"{type(roles_in).__name__}")
        mode = _str("mode", d["mode"], choices=MODES)
        allowed = ROLES_OF_MODE[mode]
        for name in roles_in:
            if name not in allowed:
                raise PlanValueError(f"roles.{name}: not a role of a {mode} deployment "
                                     f"(roles: {', '.join(allowed)})")
        roles = {name: _role_from_dict(f"roles.{name}", roles_in[name]) for name in roles_in}
        return cls(model=d["model"], mode=mode, roles=roles,
                   database_mode=d.get("database_mode", "SILICON"), nextn=d.get("nextn", 0),
                   nextn_accepted=d.get("nextn_accepted"),
                   attention_backend=d.get("attention_backend"))

    @classmethod
    def from_json(cls, text: str) -> "Deployment":
        """:meth:`from_dict` of JSON text."""
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise PlanValueError(f"deployment JSON: {exc}") from None
        return cls.from_dict(data)

    # -------------------------------------------------------------------- from table rows

    @classmethod
    def from_row(cls, row: Mapping, *, mode: str | None = None, database_mode: str = "SILICON",
                 nextn: int = 0, nextn_accepted: float | None = None,
                 attention_backend: str | None = None) -> "Deployment":
        """The deployment one sweep / recommend row priced (a row of ``best_configs``,
        ``candidates`` or ``pareto_fronts``, or a ``best_config_topn.csv`` row read back).

        ``mode`` defaults to ``disagg`` when the row has ``(p)``/``(d)`` columns, else ``agg``.
        The row's quant columns become explicit quant modes, so the deployment compiles to the
        specs the row was priced with."""
        if not isinstance(row, Mapping):
            raise PlanValueError(f"row: expected a mapping of column to value, got "
                                 f"{type(row).__name__}")
        if mode is None:
            mode = "disagg" if "(d)parallel" in row or "(d)tp" in row else "agg"
        _str("mode", mode, choices=MODES)
        model = row.get("model")
        if mode == "agg":
            roles = {"agg": _role_from_row(row, "", "agg", batch_key="bs")}
        else:
            roles = {"prefill": _role_from_row(row, "(p)", "prefill", batch_key="(p)bs"),
                     "decode": _role_from_row(row, "(d)", "decode", batch_key="(d)bs")}
        return cls(model=_str("row.model", model), mode=mode, roles=roles,
                   database_mode=database_mode, nextn=nextn, nextn_accepted=nextn_accepted,
                   attention_backend=attention_backend)


def _row_value(row: Mapping, column: str):
    if column not in row:
        raise PlanValueError(f"row.{column}: column is missing")
    value = row[column]
    return None if value == "" else value


def _role_from_row(row: Mapping, prefix: str, role: str, *, batch_key: str) -> Role:
    def col(name):
        return _row_value(row, prefix + name)

    cp = row.get(prefix + "cp", 1)
    moe_tp, moe_ep = col("moe_tp"), col("moe_ep")
    try:
        parallel = Parallelism(tp=col("tp"), pp=col("pp"), dp=col("dp"),
                               moe_tp=moe_tp, moe_ep=moe_ep, cp=1 if cp in (None, "") else cp)
        quant = QuantModes(**{k: col(k) for k in QUANT_FIELDS})
        workers = 1 if role == "agg" else col("workers")
        return Role(system=col("system"), backend=col("backend"), version=col("version"),
                    parallel=parallel, quant=quant, workers=workers,
                    batch_size=_row_value(row, batch_key),
                    ctx_tokens=row.get("ctx_tokens") if role == "agg" else None)
    except PlanValueError as exc:
        raise PlanValueError(f"row ({role} role): {exc}") from None


@dataclass(frozen=True)
class Workload:
    """What a deployment serves: prompt and output lengths and the cached prefix per request;
    optionally the load (``concurrency`` requests in flight, or ``request_rate`` requests/s —
    at most one) and the latency targets (ms) a plan must meet."""

    isl: int
    osl: int
    prefix: int = 0
    concurrency: int | None = None
    request_rate: float | None = None
    ttft: float | None = None
    tpot: float | None = None
    request_latency: float | None = None

    def __post_init__(self):
        _int("isl", self.isl)
        _int("osl", self.osl)
        _int("prefix", self.prefix, minimum=0)
        if self.prefix >= self.isl:
            raise PlanValueError(f"prefix: the cached prefix ({self.prefix}) must be shorter than "
                                 f"the prompt (isl {self.isl})")
        _int("concurrency", self.concurrency, optional=True)
        _float("request_rate", self.request_rate, optional=True)
        if self.concurrency is not None and self.request_rate is not None:
            raise PlanValueError("concurrency, request_rate: give at most one load (requests in "
                                 "flight or requests per second)")
        for name in ("ttft", "tpot", "request_latency"):
            _float(name, getattr(self, name), optional=True)

    def to_dict(self) -> dict:
        """The JSON form."""
        return dataclasses.asdict(self)

    def to_json(self, **kwargs) -> str:
        """:meth:`to_dict` as JSON text."""
        return json.dumps(self.to_dict(), allow_nan=False, **kwargs)

    @classmethod
    def from_dict(cls, data) -> "Workload":
        """Reads the JSON form strictly (unknown keys and wrong types name the field)."""
        d = _mapping("", data, _WORKLOAD_KEYS, ("isl", "osl"))
        return cls(**d)

    @classmethod
    def from_json(cls, text: str) -> "Workload":
        """:meth:`from_dict` of JSON text."""
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise PlanValueError(f"workload JSON: {exc}") from None
        return cls.from_dict(data)
