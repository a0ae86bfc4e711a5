"""The parallel search space of one experiment role (spec 50 §9.2, spec 51 §5.2).

A role searches tuples ``(tp, pp, dp, moe_tp, moe_ep, cp)`` drawn from seven candidate lists
(``num_gpu`` and one per width). :func:`default_lists` gives the lists the reference resolves
for a role, :func:`enumerate_tuples` turns lists into the tuples the sweep compiles, in the
reference's order (``tp`` outermost, then pp, dp, moe_tp, moe_ep, cp). Experiment files replace
any of the lists (``agg_tp_candidates: [2, 4]``); ``recommend`` replaces ``num_gpu`` per budget
and keeps the rest. Plain lists and dicts only: this module stays on the lean import path of
the sweep.
"""

from __future__ import annotations

#: The seven list names of a role, in the reference's key order (``agg_<name>_candidates``).
LIST_NAMES = ("num_gpu", "tp", "pp", "dp", "moe_tp", "moe_ep", "cp")

#: Context-parallel widths a CP-capable role explores on SGLang (spec 43 §8, 50 §9.2).
CP_SIZES = (1, 2, 4, 8)


def is_grace_blackwell(system: str) -> bool:
    """gb200 / gb300 systems, whose dense candidate lists reach tp 16 (spec 51 §3.3)."""
    return system.startswith("gb")


def cp_list(family: str, backend: str, runs_context: bool) -> list[int]:
    """The ``cp`` list of one role (spec 50 §9.2): ``[1, 2, 4, 8]`` for agg and prefill workers
    of families declaring SGLang CP support, ``[1]`` otherwise (decode workers, other
    backends). Tuples the CP rules refuse fail to compile and are skipped like any failing
    tuple."""
    from ..compiler.parallel import CP_FAMILIES

    if runs_context and backend == "sglang" and family in CP_FAMILIES:
        return list(CP_SIZES)
    return [1]


def powers_of_two_upto(n: int) -> list[int]:
    """``[1, 2, 4, …, 2^⌊log2 n⌋]`` (``recommend``'s GPU-count list at budget ``n``)."""
    out, v = [], 1
    while v <= n:
        out.append(v)
        v *= 2
    return out


def default_lists(*, is_moe: bool, family: str, backend: str, system: str, runs_context: bool,
                  total_gpus: int) -> dict:
    """The reference's candidate lists of one role (spec 50 §9.2): ``num_gpu`` clamped to the
    budget, the width lists unclamped (a width above the budget yields no tuple)."""
    if is_moe:
        widths = [1, 2, 4, 8, 16]
        lists = {"num_gpu": list(widths), "tp": list(widths), "pp": [1], "dp": list(widths),
                 "moe_tp": list(widths), "moe_ep": list(widths)}
    else:
        widths = [1, 2, 4, 8] + ([16] if is_grace_blackwell(system) else [])
        lists = {"num_gpu": list(widths), "tp": list(widths), "pp": [1], "dp": [1],
                 "moe_tp": [1], "moe_ep": [1]}
    lists["num_gpu"] = [n for n in lists["num_gpu"] if n <= total_gpus]
    lists["cp"] = cp_list(family, backend, runs_context)
    return lists


def enumerate_tuples(lists: dict, *, is_moe: bool, backend: str) -> list[dict]:
    """The compile sizes of every tuple the lists allow, in the reference's order.

    MoE: ``tp·pp·dp·cp ∈ num_gpu``, ``dp·tp·cp = moe_tp·moe_ep`` and the backend rules
    (TRT-LLM refuses attention DP with TP, vLLM refuses MoE TP with EP). Dense:
    ``tp·pp·dp·cp ∈ num_gpu``. ``cp_size`` is present only when it is not 1."""
    allowed = set(lists["num_gpu"])
    out = []
    for tp in lists["tp"]:
        for pp in lists["pp"]:
            for dp in lists["dp"]:
                for moe_tp in lists["moe_tp"]:
                    for moe_ep in lists["moe_ep"]:
                        for cp in lists["cp"]:
                            if tp * pp * dp * cp not in allowed:
                                continue
                            if is_moe:
                                if dp * tp * cp != moe_tp * moe_ep:
                                    continue
                                if backend == "trtllm" and dp > 1 and tp > 1:
                                    continue
                                if backend == "vllm" and moe_tp > 1 and moe_ep > 1:
                                    continue
                            sizes = {"tp_size": tp, "pp_size": pp, "attention_dp_size": dp,
                                     "moe_tp_size": moe_tp, "moe_ep_size": moe_ep}
                            if cp != 1:
                                sizes["cp_size"] = cp
                            out.append(sizes)
    return out
