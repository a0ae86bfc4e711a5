"""Experiment files (spec 51 §5, the reference's ``cli exp``): a YAML mapping of named
experiments, each a flat mapping of keys, built into :class:`aic.serving.experiment.Experiment`
values and run side by side.

Reading is strict about what it can name: an unknown key, a value of the wrong type or an
impossible candidate list is reported with the YAML path and line (``disagg_a.decode_tp_candidates
(line 12): ...``). As in the reference, such an experiment is skipped with a warning while others
stay valid; when none is left the run fails with ``ValueError("No valid experiments found in
configuration.")`` followed by every reason.
"""

from __future__ import annotations

import math
import os

from .. import paths
from .deployment import NoFeasibleConfigError, _resolve_nextn
from .experiment import (
    DISAGG_DEFAULTS,
    Experiment,
    RoleSpace,
    backend_versions,
    role_search_space,
    run_plan,
)
from .planning import (
    BACKENDS,
    DATABASE_MODES,
    NO_FEASIBLE_EXP,
    LoggedWarnings,
    PlanningError,
    _finish,
    parse_transfer_policy,
)
from .search_space import LIST_NAMES

QUANT_KEYS = ("gemm_quant_mode", "moe_quant_mode", "kvcache_quant_mode", "fmha_quant_mode",
              "comm_quant_mode")
COMMON_KEYS = ("serving_mode", "total_gpus", "isl", "osl", "prefix", "ttft", "tpot",
               "request_latency", "database_mode", "transfer_policy", "free_gpu_memory_fraction",
               "max_seq_len", "nextn", "nextn_accepted", "attention_backend")
WORKER_KEYS = ("model_path", "system_name", "backend_name", "backend_version",
               "enable_chunked_prefill", "enable_eplb", *QUANT_KEYS)
ROLE_KEYS = tuple(f"{r}_{k}" for r in ("prefill", "decode")
                  for k in ("model_path", "system_name", "backend_name", "backend_version",
                            *QUANT_KEYS))
LIST_KEYS = tuple(f"{r}_{n}_candidates" for r in ("agg", "prefill", "decode") for n in LIST_NAMES)
DISAGG_KEYS = tuple(DISAGG_DEFAULTS) + ("prefill_enable_chunked_prefill", "prefill_enable_eplb",
                                        "decode_enable_eplb")
#: Accepted and not used (spec 51 §5.2 "not in scope but accepted").
IGNORED_KEYS = ("enable_wideep", "prefill_enable_wideep", "decode_enable_wideep", "moe_backend",
                "wideep_num_slots", "engine_step_backend", "forward_model", "image_height",
                "image_width", "num_images_per_request", "enable_encoder_dp", "enable_epd")
KNOWN_KEYS = (COMMON_KEYS + WORKER_KEYS + ROLE_KEYS + LIST_KEYS + DISAGG_KEYS + IGNORED_KEYS
              + ("pareto_sweep",))
#: Top-level worker fields a disagg experiment must not set (§5.1 prefix discipline).
DISAGG_FORBIDDEN = ("model_path", "system_name", "enable_chunked_prefill", "enable_eplb",
                    *QUANT_KEYS)
#: Experiment defaults that differ from ``cli default`` (§5.2).
EXP_DEFAULTS = {"isl": 4000, "osl": 1000, "prefix": 0, "ttft": 1000.0, "tpot": 50.0}


class ExperimentFileError(ValueError):
    """An experiment file that cannot be read or has no valid experiment; the message names
    the file, the YAML path and line."""


# ------------------------------------------------------------------------------ YAML


def _key_lines(text: str) -> dict:
    """``{(key, ...): line}`` (1-based) for every mapping key of the document, from the YAML
    node marks, so errors can say where a value is."""
    import yaml

    lines: dict = {}

    def walk(node, path):
        if isinstance(node, yaml.MappingNode):
            for k, v in node.value:
                key = k.value if isinstance(k, yaml.ScalarNode) else None
                p = path + (key,)
                lines[p] = k.start_mark.line + 1
                walk(v, p)
        elif isinstance(node, yaml.SequenceNode):
            for i, v in enumerate(node.value):
                lines[path + (i,)] = v.start_mark.line + 1
                walk(v, path + (i,))

    try:
        walk(yaml.compose(text, Loader=yaml.SafeLoader), ())
    except yaml.YAMLError:
        pass
    return lines


def load_experiment_file(path) -> tuple[dict, dict]:
    """The mapping of an experiment file and its key lines. ``ExperimentFileError`` names the
    file (and line) when it is unreadable, not YAML or not a mapping."""
    import yaml

    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
    except (OSError, UnicodeDecodeError) as exc:
        raise ExperimentFileError(f"Error loading experiment YAML file '{path}': "
                                  f"{getattr(exc, 'strerror', None) or exc}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1})" if mark is not None else ""
        raise ExperimentFileError(f"Error loading experiment YAML file '{path}'{where}: "
                                  f"{getattr(exc, 'problem', None) or exc}") from None
    if not isinstance(data, dict):
        raise ExperimentFileError(f"{path}: Experiment data must be a mapping (dict), got "
                                  f"{type(data).__name__}")
    return data, _key_lines(text)


# ------------------------------------------------------------------------------ building


class _Skip(Exception):
    """An experiment that is skipped (with a warning naming its path and line)."""


def _where(lines, *path) -> str:
    line = lines.get(tuple(path))
    return ".".join(str(p) for p in path) + (f" (line {line})" if line else "")


def _int(lines, name, entry, key, *, minimum=1, default=None):
    v = entry.get(key, default)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int) or v < minimum:
        raise _Skip(f"{_where(lines, name, key)}: expected an integer >= {minimum}, got {v!r}")
    return v


def _num(lines, name, entry, key, *, default=None, positive=True):
    v = entry.get(key, default)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) \
            or (positive and v <= 0):
        raise _Skip(f"{_where(lines, name, key)}: expected a positive finite number, got {v!r}")
    return float(v)


def _str(lines, name, entry, key, *, default=None, choices=None):
    v = entry.get(key, default)
    if v is None:
        return None
    if not isinstance(v, str) or not v:
        raise _Skip(f"{_where(lines, name, key)}: expected a non-empty string, got {v!r}")
    if choices is not None and v not in choices:
        raise _Skip(f"{_where(lines, name, key)}: {v!r} is not one of {', '.join(choices)}")
    return v


def _int_list(lines, name, entry, key, *, allow_empty=False):
    v = entry.get(key)
    if v is None:
        return None
    if not isinstance(v, list) or (not v and not allow_empty) or any(
            isinstance(x, bool) or not isinstance(x, int) or x < 1 for x in v):
        raise _Skip(f"{_where(lines, name, key)}: expected a "
                    f"{'' if allow_empty else 'non-empty '}list of positive integers, got {v!r}")
    return list(v)


def _quant(lines, name, entry, prefix) -> dict:
    from ..compiler.quant import VOCABULARIES

    out = {}
    for key in QUANT_KEYS:
        full = prefix + key
        v = _str(lines, name, entry, full)
        if v is not None and key in VOCABULARIES and v not in VOCABULARIES[key]:
            raise _Skip(f"{_where(lines, name, full)}: unknown quant mode {v!r} (known: "
                        f"{', '.join(sorted(VOCABULARIES[key]))})")
        out[key.split("_quant_mode")[0]] = v
    return out


def _lists(lines, name, entry, role) -> dict:
    out = {}
    for n in LIST_NAMES:
        v = _int_list(lines, name, entry, f"{role}_{n}_candidates")
        if v is not None:
            out[n] = v
    return out


def build_experiment(name, entry, lines, *, attention_backend=None, root=None,
                     warnings=None) -> Experiment:
    """One YAML entry to an :class:`Experiment` (spec 51 §5.1, §5.2). Raises ``_Skip`` with a
    message naming the YAML path and line for an entry the reference skips, and
    :class:`PlanningError` for a version that does not exist in SILICON / HYBRID."""
    if not isinstance(entry, dict):
        raise _Skip(f"{_where(lines, name)}: an experiment must be a mapping of keys, got "
                    f"{type(entry).__name__}")
    for key in entry:
        if key not in KNOWN_KEYS:
            if key == "predictor":
                raise _Skip(f"{_where(lines, name, key)}: 'predictor' is not YAML-expressible")
            raise _Skip(f"{_where(lines, name, key)}: unknown key {key!r}")
    mode = entry.get("serving_mode")
    if mode not in ("agg", "disagg"):
        raise _Skip(f"{_where(lines, name, 'serving_mode') if 'serving_mode' in entry else name}"
                    f": serving_mode must be agg or disagg, got {mode!r}")
    model = entry.get("model_path") or entry.get("prefill_model_path") \
        or entry.get("decode_model_path")
    if not model:
        raise _Skip(f"{name}: no model (model_path, or prefill_model_path / decode_model_path)")
    if not (entry.get("system_name") or entry.get("prefill_system_name")
            or entry.get("decode_system_name")):
        raise _Skip(f"{name}: no system (system_name, or prefill_system_name / "
                    f"decode_system_name)")
    if "total_gpus" not in entry:
        raise _Skip(f"{name}: total_gpus is required")
    total = _int(lines, name, entry, "total_gpus")
    if entry.get("pareto_sweep", True) is not True:
        raise _Skip(f"{_where(lines, name, 'pareto_sweep')}: only pareto_sweep: true is "
                    f"supported")
    workload = {
        "isl": _int(lines, name, entry, "isl", default=EXP_DEFAULTS["isl"]),
        "osl": _int(lines, name, entry, "osl", default=EXP_DEFAULTS["osl"]),
        "prefix": _int(lines, name, entry, "prefix", minimum=0, default=0),
        "ttft": _num(lines, name, entry, "ttft", default=EXP_DEFAULTS["ttft"]),
        "tpot": _num(lines, name, entry, "tpot", default=EXP_DEFAULTS["tpot"]),
        "request_latency": _num(lines, name, entry, "request_latency"),
    }
    if workload["prefix"] >= workload["isl"]:
        raise _Skip(f"{_where(lines, name, 'prefix')}: the prefix must be shorter than isl")
    db = entry.get("database_mode", "SILICON")
    db = db.upper() if isinstance(db, str) else db
    if db not in DATABASE_MODES:
        raise _Skip(f"{_where(lines, name, 'database_mode')}: {entry['database_mode']!r} is "
                    f"not one of {', '.join(DATABASE_MODES)}")
    try:
        policy, policy_error = parse_transfer_policy(entry.get("transfer_policy")), None
    except ValueError as exc:  # the experiment's outcome when it loads its database (§6.2)
        policy = None
        policy_error = {"type": "ValueError",
                        "message": f"{_where(lines, name, 'transfer_policy')}: {exc}"}
    attn = entry.get("attention_backend", attention_backend)
    nextn = entry.get("nextn", 0)
    try:
        nextn, accepted = _resolve_nextn(model, 0 if nextn is None else nextn,
                                         entry.get("nextn_accepted"))
    except ValueError as exc:
        raise _Skip(f"{_where(lines, name, 'nextn')}: {exc}") from None
    fraction = _num(lines, name, entry, "free_gpu_memory_fraction")
    knobs = {"database_mode": db, "transfer_policy": policy,
             "free_gpu_memory_fraction": fraction,
             "max_seq_len": _int(lines, name, entry, "max_seq_len"),
             "nextn": nextn, "nextn_accepted": accepted, "attention_backend": attn,
             "enable_chunked_prefill": False}
    for key in ("enable_chunked_prefill", "enable_eplb", "prefill_enable_chunked_prefill",
                "prefill_enable_eplb", "decode_enable_eplb"):
        if key in entry and not isinstance(entry[key], bool):
            raise _Skip(f"{_where(lines, name, key)}: expected true or false, got "
                        f"{entry[key]!r}")
    if mode == "agg":
        backend = _str(lines, name, entry, "backend_name", default="trtllm", choices=BACKENDS)
        version = _str(lines, name, entry, "backend_version")
        system = _str(lines, name, entry, "system_name")
        _check_version(root, db, system, backend, version, lines, name, "backend_version")
        knobs["enable_chunked_prefill"] = bool(entry.get("enable_chunked_prefill", False))
        roles = {"agg": RoleSpace(model, system, backend, version, _quant(lines, name, entry, ""),
                                  _lists(lines, name, entry, "agg"))}
        exp = Experiment(name, mode, total, workload, knobs, roles)
        exp.error = policy_error
        _check_search_space(exp, lines)
        return exp
    bad = [k for k in DISAGG_FORBIDDEN if k in entry]
    if bad:
        raise _Skip(f"{_where(lines, name, bad[0])}: Disagg mode: top-level worker fields are "
                    f"not used and must not be set (got {bad}). Use prefill_* / decode_* "
                    f"variants instead.")
    roles = {}
    for role in ("prefill", "decode"):
        r_model = entry.get(f"{role}_model_path") or model
        r_system = _str(lines, name, entry, f"{role}_system_name") or (
            entry.get("prefill_system_name") or entry.get("decode_system_name"))
        r_backend = _str(lines, name, entry, f"{role}_backend_name", default="trtllm",
                         choices=BACKENDS)
        r_version = _str(lines, name, entry, f"{role}_backend_version")
        # The check falls back to the top-level fields; the role itself does not (§5.1).
        _check_version(root, db, r_system,
                       entry.get(f"{role}_backend_name") or entry.get("backend_name") or "trtllm",
                       r_version or entry.get("backend_version"), lines, name,
                       f"{role}_backend_version" if r_version else "backend_version")
        roles[role] = RoleSpace(r_model, r_system, r_backend, r_version,
                                _quant(lines, name, entry, f"{role}_"),
                                _lists(lines, name, entry, role))
    if str(roles["prefill"].model) != str(roles["decode"].model):
        raise _Skip(f"{_where(lines, name, 'decode_model_path')}: disagg mode requires "
                    f"prefill_model_path == decode_model_path")
    if roles["decode"].lists.get("cp", [1]) != [1]:
        raise _Skip(f"{_where(lines, name, 'decode_cp_candidates')}: decode CP must be 1")
    if total < 2:
        raise _Skip(f"{_where(lines, name, 'total_gpus')}: total_gpus must be greater than 2 "
                    f"for disagg, got {total}")
    disagg = {}
    for key in ("max_prefill_workers", "max_decode_workers", "max_gpu_per_replica"):
        if key in entry:
            disagg[key] = _int(lines, name, entry, key)
    for key in ("prefill_max_batch_size", "decode_max_batch_size"):
        if key in entry:
            v = entry[key]
            if isinstance(v, bool) or not isinstance(v, int):
                raise _Skip(f"{_where(lines, name, key)}: expected an integer, got {v!r}")
            disagg[key] = max(1, v)
    if "num_gpu_per_replica" in entry:
        disagg["num_gpu_per_replica"] = _int_list(lines, name, entry, "num_gpu_per_replica",
                                                  allow_empty=True)
    for key in ("prefill_latency_correction", "decode_latency_correction",
                "autoscale_ttft_correction_factor"):
        if key in entry:
            disagg[key] = _num(lines, name, entry, key)
    for key in ("rate_match_prefill_degradation", "rate_match_decode_degradation"):
        if key in entry:  # checked when the experiment runs (its outcome, §5.2)
            v = entry[key]
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                raise _Skip(f"{_where(lines, name, key)}: expected a number, got {v!r}")
            disagg[key] = float(v)
    exp = Experiment(name, mode, total, workload, knobs, roles, disagg)
    exp.error = policy_error
    _check_search_space(exp, lines)
    return exp


def _check_search_space(exp: Experiment, lines) -> None:
    """An experiment whose candidate lists allow no parallel layout at its budget is skipped,
    naming the lists (``num_gpu`` ⊆ ``total_gpus``, widths multiplying to a GPU count)."""
    for role in exp.roles:
        try:
            lists, tuples, _ = role_search_space(exp, role)
        except (ValueError, OSError) as exc:  # an unknown model: named by the compile too
            raise _Skip(f"{exp.name}: {role} role: {exc}") from None
        if not tuples:
            given = [f"{role}_{n}_candidates" for n in exp.roles[role].lists]
            key = given[0] if given else "total_gpus"
            shown = ", ".join(f"{n} {lists[n]}" for n in ("num_gpu", "tp", "pp", "dp", "cp"))
            raise _Skip(f"{_where(lines, exp.name, key)}: the {role} candidate lists allow no "
                        f"parallel layout within total_gpus {exp.total_gpus} ({shown})")


def _check_version(root, db, system, backend, version, lines, name, key) -> None:
    """§5.1: SILICON / HYBRID with an explicit version: (system, backend, version) must exist."""
    if version is None or db not in ("SILICON", "HYBRID") or root is None:
        return
    if backend_versions(root, system, backend or "trtllm", version) is None:
        raise PlanningError(f"{_where(lines, name, key)}: system {system} has no "
                            f"{backend or 'trtllm'} database version {version!r} ({db} mode)")


def build_experiments(data: dict, lines: dict | None = None, *, attention_backend=None,
                      systems_path=None, warnings=None) -> list[Experiment]:
    """Every valid experiment of a file's mapping, in run order (``exps``, else file order).
    Skipped entries add a warning naming their YAML path and line; none valid →
    ``ValueError("No valid experiments found in configuration. ...")``."""
    lines = lines or {}
    warnings = warnings if warnings is not None else LoggedWarnings()
    if not isinstance(data, dict):
        raise TypeError("Experiment data must be a mapping (dict).")
    root = paths.systems_dir(systems_path)
    order = data.get("exps")
    if order is None:
        names = [k for k in data if k != "exps"]
    else:
        if not isinstance(order, list):
            raise ExperimentFileError(f"{_where(lines, 'exps')}: expected a list of experiment "
                                      f"names, got {type(order).__name__}")
        names = [n for n in order if n in data and n != "exps"]
        for n in order:
            if n not in data:
                warnings.append(f"exps: {n!r} is not an experiment of the file; ignored")
    out, reasons = [], []
    for name in names:
        try:
            out.append(build_experiment(name, data[name], lines,
                                        attention_backend=attention_backend, root=root))
        except _Skip as exc:
            reasons.append(str(exc))
            warnings.append(f"experiment skipped: {exc}")
    if not out:
        detail = ("; ".join(reasons)) if reasons else "the file names no experiment"
        raise ExperimentFileError(f"No valid experiments found in configuration. ({detail})")
    return out


def run_experiments(yaml_path=None, config=None, *, attention_backend=None,
                    inclusive_tpot=False, top_n=5, systems_path=None, warnings=None) -> dict:
    """``cli exp`` (spec 51 §5): the experiments of a YAML file (``yaml_path``) or of the same
    mapping (``config``), run one after another, each picked with its own budget and SLA, no
    merge; ``chosen_exp`` is the one with the largest rank-1 ``tokens/s/gpu_cluster``. Returns
    the golden layout plus ``tasks``; raises :class:`NoFeasibleConfigError` when no experiment
    has rows."""
    if yaml_path is not None and config is not None:
        raise ValueError("Provide either yaml_path or config, not both.")
    if yaml_path is None and config is None:
        raise ValueError("Must provide either yaml_path or config.")
    if yaml_path is not None:
        data, lines = load_experiment_file(os.fspath(yaml_path))
    else:
        data, lines = config, {}
    exps = build_experiments(data, lines, attention_backend=attention_backend,
                             systems_path=systems_path, warnings=warnings)
    out = run_plan(exps, merge=False, top_n=top_n, inclusive_tpot=inclusive_tpot,
                   systems_path=systems_path)
    return _finish(out, exps, NO_FEASIBLE_EXP)


__all__ = ["ExperimentFileError", "NoFeasibleConfigError", "build_experiments",
           "load_experiment_file", "run_experiments"]
