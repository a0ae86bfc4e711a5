"""Parity of the planning layer against ``goldens/planning.json`` (spec 51 §9, §11).

One check per case (kinds ``sweep`` — ``cli default``, with ``entry: "cli"`` for the command-line
path —, ``recommend`` and ``exp``). A recorded error must be raised as the same class. A
recorded result is compared as spec 51 §9 "Test guidance" says:

* candidate tables as ordered lists modulo permutations inside runs of equal ``tokens/s/gpu``;
* Pareto fronts as multisets of rows;
* best configs by (group key, ranking values) in order — merged tables by (backend, group key,
  value) — with every recorded row present among our candidates (the row kept for a group is
  only determined up to ties, and so is the order of groups tied on the ranking value, whose
  secondary key is the kept row's ``tokens/s/user``), and the rank-1 ``best_latencies`` modulo
  the same ties;
* ``best_throughputs`` (unordered), ``outcomes`` (error classes), ``chosen_exp`` modulo ties,
  ``attempts`` (budgets and outcome classes) and the resolved ``tasks`` fields aic resolves;
* merged ``recommend`` (§11.1): the merged best configs, best throughputs and ``chosen_exp``
  are re-derived from the golden's per-experiment candidates by load-match picking ranked by
  GPUs needed, not taken from the golden's merged rows.

Values are the reference's round3 numbers; they are compared to the relative tolerance.
"""

from __future__ import annotations

import json
import math

#: Task fields compared with the golden's resolved experiment fields: every experiment's,
#: disagg settings, and each role's (unprefixed for agg, ``prefill_`` / ``decode_`` for disagg).
COMMON_TASK_FIELDS = ("serving_mode", "total_gpus", "isl", "osl", "prefix", "ttft", "tpot",
                      "request_latency", "database_mode", "free_gpu_memory_fraction",
                      "max_seq_len", "nextn", "nextn_accepted", "attention_backend")
DISAGG_TASK_FIELDS = ("num_gpu_per_replica", "max_gpu_per_replica", "max_prefill_workers",
                      "max_decode_workers", "prefill_max_batch_size", "decode_max_batch_size",
                      "prefill_latency_correction", "decode_latency_correction",
                      "rate_match_prefill_degradation", "rate_match_decode_degradation",
                      "autoscale_ttft_correction_factor")
ROLE_TASK_FIELDS = ("model_path", "system_name", "backend_name", "backend_version",
                    "gemm_quant_mode", "moe_quant_mode", "kvcache_quant_mode", "fmha_quant_mode",
                    "comm_quant_mode")
LIST_FIELDS = ("num_gpu", "tp", "pp", "dp", "moe_tp", "moe_ep", "cp")
PRIVATE = ("_per_ops_source",)


# ------------------------------------------------------------------------------ running


def run_golden_case(case: dict, systems_path=None) -> dict:
    """Runs one planning case through aic's planning API (the reference call of §9)."""
    kwargs = dict(case["kwargs"])
    kind = case["kind"]
    if kind == "recommend":
        from ..serving.planning import recommend

        return recommend(**kwargs, systems_path=systems_path)
    if kind == "exp":
        from ..serving.experiment_files import run_experiments

        return run_experiments(**kwargs, systems_path=systems_path)
    from ..serving.planning import plan_sweep

    model = kwargs.pop("model_path")
    total = kwargs.pop("total_gpus")
    system = kwargs.pop("system")
    return plan_sweep(model, total, system, **kwargs, systems_path=systems_path)


# ------------------------------------------------------------------------------ comparisons


def _close(a, b, rtol) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        if a == b:
            return True
        if not (math.isfinite(a) and math.isfinite(b)) or b == 0:
            return False
        return abs(a - b) / abs(b) <= rtol
    return a == b


def _clean(row: dict, drop=()) -> dict:
    return {k: v for k, v in row.items() if k not in PRIVATE and k not in drop}


def _row_key(row: dict, drop=()) -> str:
    return json.dumps(_clean(row, drop), sort_keys=True)


def _multiset(rows, drop=()) -> dict:
    out: dict = {}
    for r in rows or []:
        k = _row_key(r, drop)
        out[k] = out.get(k, 0) + 1
    return out


def _runs(rows, key="tokens/s/gpu"):
    """Consecutive runs of equal ``key``: ``[(value, multiset of rows), ...]``."""
    out = []
    for r in rows:
        v = r.get(key)
        if out and out[-1][0] == v:
            out[-1][1].append(r)
        else:
            out.append((v, [r]))
    return [(v, _multiset(rs, ("tokens/s/gpu_cluster",))) for v, rs in out]


def compare_tables_modulo_ties(ours: list, ref: list, label: str) -> list[str]:
    """Ordered lists of rows, modulo permutations inside runs of equal ``tokens/s/gpu``."""
    if len(ours) != len(ref):
        a, b = _multiset(ours, ("tokens/s/gpu_cluster",)), _multiset(ref, ("tokens/s/gpu_cluster",))
        missing = sum(n - a.get(k, 0) for k, n in b.items() if n > a.get(k, 0))
        extra = sum(n - b.get(k, 0) for k, n in a.items() if n > b.get(k, 0))
        return [f"{label}: {len(ours)} vs {len(ref)} rows ({missing} missing, {extra} extra)"]
    ra, rb = _runs(ours), _runs(ref)
    if ra != rb:
        for i, (x, y) in enumerate(zip(ra, rb)):
            if x != y:
                return [f"{label}: rows differ in the run of tokens/s/gpu {y[0]} "
                        f"(run {i}; ours {x[0]})"]
        return [f"{label}: rows differ"]
    return []


def _group_key(row: dict) -> str:
    return "(d)parallel" if "(d)parallel" in row else "parallel"


def _pick_signature(row: dict, merged: bool, load_match: bool) -> tuple:
    gk = _group_key(row)
    sig = (row.get("backend") if merged else None, row.get(gk), row.get("tokens/s/gpu_cluster"))
    if load_match:
        sig += (row.get("total_gpus_needed"), row.get("replicas_needed"))
    return sig


def _sig_close(a: tuple, b: tuple, rtol) -> bool:
    return len(a) == len(b) and all(_close(x, y, rtol) for x, y in zip(a, b))


def _tie_permutation(ours, ref, sa, sb, drop, rtol) -> bool:
    """Whether two pick lists differ only in the order of groups tied on the ranking value,
    where that order comes from rows kept up to ties (spec 51 §9: the row kept for a group is
    only determined up to ties, and the secondary sort key, ``tokens/s/user``, is that row's).
    Within each run of equal ranking value the groups must be the same, and at least one of
    them must have kept a different (tied) row than the golden."""
    if len(sa) != len(sb):
        return False
    i = 0
    while i < len(sb):
        j = i
        while j < len(sb) and _close(sb[j][2], sb[i][2], rtol):
            j += 1
        a = sorted(map(repr, sa[i:j]))
        b = sorted(map(repr, sb[i:j]))
        if a != b:
            return False
        if sa[i:j] != sb[i:j]:
            kept_a = {_row_key(r, drop) for r in ours[i:j]}
            kept_b = {_row_key(r, drop) for r in ref[i:j]}
            if kept_a == kept_b:
                return False
        i = j
    return True


def compare_picks(ours: list, ref: list, candidates: dict, label: str, rtol: float, *,
                  merged: bool, load_match: bool) -> list[str]:
    """Best configs by (group key, ranking value) in order; every recorded row must be one of
    our candidate rows of its experiment (any of several tied rows is a correct pick)."""
    ours, ref = ours or [], ref or []
    sa = [_pick_signature(r, merged, load_match) for r in ours]
    sb = [_pick_signature(r, merged, load_match) for r in ref]
    drop = ("tokens/s/gpu_cluster", "backend", "_task_key", "replicas_needed",
            "total_gpus_needed")
    if len(sa) != len(sb) or not all(_sig_close(x, y, rtol) for x, y in zip(sa, sb)):
        if not _tie_permutation(ours, ref, sa, sb, drop, rtol):
            return [f"{label}: {sa} vs {sb}"[:500]]
    problems = []
    for r in ref:
        exp = r.get("_task_key") or label.split(" ")[0]
        mine = {_row_key(c, drop) for c in candidates.get(exp, [])}
        if _row_key(r, drop) not in mine:
            problems.append(f"{label}: recorded pick {r.get(_group_key(r))} "
                            f"{r.get('tokens/s/gpu_cluster')} is not among our {exp} candidates")
    return problems


def _latencies_tied(ours: dict, ref: dict, rows: list, rtol) -> bool:
    """Whether two rank-1 latency records belong to candidate rows of one group tied on
    ``tokens/s/gpu`` (the reference's unstable sort keeps any of them)."""
    def rows_of(lat):
        return [r for r in rows if all(_close(r.get(k), lat.get(k), rtol)
                                       for k in ("ttft", "tpot", "request_latency"))]
    for a in rows_of(ours):
        for b in rows_of(ref):
            if a.get(_group_key(a)) == b.get(_group_key(b)) and \
                    a.get("tokens/s/gpu") == b.get("tokens/s/gpu"):
                return True
    return False


def compare_latencies(ours: dict, ref: dict, candidates: dict, rtol) -> list[str]:
    problems = []
    if set(ours) != set(ref):
        return [f"best_latencies keys {sorted(ours)} vs {sorted(ref)}"]
    for exp, lat in ref.items():
        mine = ours[exp]
        if set(mine) == set(lat) and all(_close(mine[k], lat[k], rtol) for k in lat):
            continue
        if _latencies_tied(mine, lat, candidates.get(exp, []), rtol):
            continue
        problems.append(f"best_latencies/{exp}: {mine} vs {lat}")
    return problems


# ------------------------------------------------------------------------------ §11.1


def load_match_pick(rows: list, *, target: dict, tpot: float, request_latency, top_n: int):
    """Spec 51 §4.3 on recorded candidate rows (used to re-derive the merged ``recommend``
    fields of §11.1 from the golden's per-experiment candidates)."""
    column = "request_latency" if request_latency else "tpot"
    limit = request_latency if request_latency else tpot
    normal = [r for r in rows if r[column] <= limit]
    closest = not normal
    pool = rows if closest else normal
    groups: dict = {}
    for r in pool:
        r = dict(r, **{"tokens/s/gpu_cluster": r["tokens/s/gpu"]})
        if "request_rate" in target:
            n = max(1, int(math.ceil(target["request_rate"] / r["seq/s"])))
        else:
            conc = r["concurrency"]
            n = max(1, int(math.ceil(target["concurrency"] / conc)))
        r["replicas_needed"] = n
        r["total_gpus_needed"] = n * r["num_total_gpus"]
        key = r[_group_key(r)]
        best = groups.get(key)
        rank = (r[column],) if closest else (r["total_gpus_needed"],)
        if best is None or rank < best[0]:
            groups[key] = (rank, r)
    picked = [v[1] for _, v in sorted(groups.items())]
    if closest:
        picked.sort(key=lambda r: r[column])
    else:
        picked.sort(key=lambda r: (r["total_gpus_needed"], -r["tokens/s/gpu"]))
    return picked[:top_n]


def expected_merged_recommend(case: dict) -> tuple[dict, dict, str]:
    """§11.1: the merged best configs (per mode bucket), best throughputs and ``chosen_exp`` of
    a merged ``recommend``, re-derived from the golden's per-experiment candidates."""
    kw = case["kwargs"]
    target = ({"request_rate": kw["target_request_rate"]} if kw.get("target_request_rate")
              is not None else {"concurrency": kw["target_concurrency"]})
    top_n = kw.get("top_n", 5)
    best, thr = {}, {}
    for mode in ("agg", "disagg"):
        exps = [e for e in case["tasks"] if e.startswith(mode + "_")]
        if not exps:
            continue
        rows = []
        for e in exps:
            for r in load_match_pick(case["candidates"].get(e, []), target=target,
                                     tpot=kw.get("tpot", 30.0),
                                     request_latency=kw.get("request_latency"), top_n=top_n):
                rows.append(dict(r, backend=e.split("_", 1)[1], _task_key=e))
        rows.sort(key=lambda r: (r["total_gpus_needed"], -r["tokens/s/gpu"]))
        best[mode] = rows[:top_n]
        thr[mode] = 1.0 / rows[0]["total_gpus_needed"] if rows else 0.0
    chosen = "agg" if thr.get("agg", 0.0) >= thr.get("disagg", 0.0) else "disagg"
    if not any(thr.values()):
        chosen = "none"
    return best, thr, chosen


# ------------------------------------------------------------------------------ one case


def _is_merged(case: dict) -> bool:
    return len(case.get("tasks") or {}) > 2 and case["kind"] in ("sweep", "recommend")


def compare_result(ours: dict, case: dict, rtol: float) -> list[str]:
    """Every difference between our result and a recorded successful case."""
    problems: list[str] = []
    merged = _is_merged(case)
    load_match = case["kind"] == "recommend"
    rederive = merged and load_match
    cands = case.get("candidates") or {}
    our_cands = ours.get("candidates") or {}
    if set(our_cands) != set(cands):
        problems.append(f"candidates keys {sorted(our_cands)} vs {sorted(cands)}")
    for exp, rows in cands.items():
        problems += compare_tables_modulo_ties(our_cands.get(exp, []), rows,
                                               f"{exp} candidates")
    outcomes, ref_out = ours.get("outcomes") or {}, case.get("outcomes") or {}
    if set(outcomes) != set(ref_out):
        problems.append(f"outcomes keys {sorted(outcomes)} vs {sorted(ref_out)}")
    for exp, o in ref_out.items():
        mine = outcomes.get(exp)
        if (o is None) != (mine is None) or (o and mine and o["type"] != mine["type"]):
            problems.append(f"outcomes/{exp}: {mine} vs {o}"[:300])
    if rederive:
        exp_best, exp_thr, exp_chosen = expected_merged_recommend(case)
    else:
        exp_best, exp_thr, exp_chosen = (case.get("best_configs") or {},
                                         case.get("best_throughputs") or {}, case["chosen_exp"])
    thr = ours.get("best_throughputs") or {}
    if set(thr) != set(exp_thr) or not all(_close(thr[k], v, rtol) for k, v in exp_thr.items()):
        problems.append(f"best_throughputs {thr} vs {exp_thr}")
    chosen = ours.get("chosen_exp")
    if chosen != exp_chosen and not (chosen in thr and exp_chosen in thr
                                     and _close(thr[chosen], thr[exp_chosen], rtol)):
        problems.append(f"chosen_exp {chosen} vs {exp_chosen}")
    our_best = ours.get("best_configs") or {}
    if set(our_best) != set(exp_best):
        problems.append(f"best_configs keys {sorted(our_best)} vs {sorted(exp_best)}")
    for exp, rows in exp_best.items():
        problems += compare_picks(our_best.get(exp), rows, our_cands, f"{exp} best_configs",
                                  rtol, merged=merged, load_match=load_match)
    fronts, ref_fronts = ours.get("pareto_fronts") or {}, case.get("pareto_fronts") or {}
    if set(fronts) != set(ref_fronts):
        problems.append(f"pareto_fronts keys {sorted(fronts)} vs {sorted(ref_fronts)}")
    for exp, rows in ref_fronts.items():
        if _multiset(fronts.get(exp)) != _multiset(rows):
            problems.append(f"{exp} pareto front: {len(fronts.get(exp) or [])} vs "
                            f"{len(rows or [])} rows, or rows differ")
    problems += compare_latencies(ours.get("best_latencies") or {},
                                  case.get("best_latencies") or {}, cands, rtol)
    for key, table in (("inclusive_best_configs", "best"), ("inclusive_pareto_fronts", "front")):
        if key not in case:
            continue
        mine = ours.get(key) or {}
        for exp, rows in case[key].items():
            if table == "best":
                sa = [(r.get(_group_key(r)), r.get("tpot")) for r in mine.get(exp) or []]
                sb = [(r.get(_group_key(r)), r.get("tpot")) for r in rows or []]
                if len(sa) != len(sb) or not all(x[0] == y[0] and _close(x[1], y[1], rtol)
                                                 for x, y in zip(sa, sb)):
                    problems.append(f"{key}/{exp}: {sa} vs {sb}"[:300])
            elif _multiset(mine.get(exp)) != _multiset(rows):
                problems.append(f"{key}/{exp}: rows differ")
    if "attempts" in case:
        a = [(x["gpu_budget"], {k: (v or {}).get("type") for k, v in x["outcomes"].items()})
             for x in ours.get("attempts") or []]
        b = [(x["gpu_budget"], {k: (v or {}).get("type") for k, v in x["outcomes"].items()})
             for x in case["attempts"]]
        if a != b:
            problems.append(f"attempts {a} vs {b}"[:300])
    problems += compare_tasks(ours.get("tasks") or {}, case.get("tasks") or {})
    return problems


def compare_tasks(ours: dict, ref: dict) -> list[str]:
    """The resolved experiment fields aic resolves: versions, quant modes, candidate lists,
    disagg settings, workload and knobs."""
    if set(ours) != set(ref):
        return [f"tasks keys {sorted(ours)} vs {sorted(ref)}"]
    problems = []
    for exp, t in ref.items():
        mine = ours[exp]
        fields = list(COMMON_TASK_FIELDS)
        if t.get("serving_mode") == "disagg":
            fields += DISAGG_TASK_FIELDS
            fields += [f"{r}_{f}" for r in ("prefill", "decode") for f in ROLE_TASK_FIELDS]
            fields += [f"{r}_{n}_candidates" for r in ("prefill", "decode") for n in LIST_FIELDS]
        else:
            fields += ROLE_TASK_FIELDS
            fields += [f"agg_{n}_candidates" for n in LIST_FIELDS]
        for f in dict.fromkeys(fields):
            if f not in t:
                continue
            a, b = mine.get(f), t[f]
            if f.endswith("model_path"):
                a = None if a is None else str(a)
            if a != b and not (isinstance(b, float) and _close(a, b, 1e-12)):
                problems.append(f"tasks/{exp}/{f}: {a!r} vs {b!r}")
    return problems[:8]


def check_planning(case: dict, rtol: float, systems_path=None) -> tuple[bool, str]:
    """One planning golden case: ``(passed, detail)``."""
    try:
        ours, exc = run_golden_case(case, systems_path), None
    except Exception as e:  # noqa: BLE001 - every error is a recorded outcome
        ours, exc = None, e
    if not case["ok"]:
        ref = case["error"]
        if exc is None:
            return False, f"reference raised {ref['type']}: {ref['message']}; ours returned"
        names = {c.__name__ for c in type(exc).__mro__}
        names.add(getattr(type(exc), "reference_class", type(exc).__name__))
        if ref["type"] not in names:
            return False, (f"error classes differ: ours {type(exc).__name__}: {exc} vs ref "
                           f"{ref['type']}: {ref['message']}")[:600]
        return True, "both raised " + ref["type"]
    if exc is not None:
        return False, f"ours raised {type(exc).__name__}: {exc}"[:600]
    problems = compare_result(ours, case, rtol)
    return not problems, "; ".join(problems[:6])[:900]
