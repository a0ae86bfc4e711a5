"""The planning layer (spec 51) without running a sweep: experiment building (backend filter,
serving modes, decode system), knobs, load targets, the recommend escalation rule, the search
space of candidate lists, and the parity comparison against the planning goldens."""

from __future__ import annotations

import json

import pytest
from conftest import GOLDENS, native_available

from aic.serving import planning
from aic.serving.search_space import default_lists, enumerate_tuples, powers_of_two_upto

needs_native = pytest.mark.skipif(not native_available(), reason="native module not built")


# ------------------------------------------------------------------------------ knobs


def test_transfer_policy_presets_kinds_and_lists():
    assert planning.parse_transfer_policy(None) is None
    assert planning.parse_transfer_policy("off") == []
    assert planning.parse_transfer_policy(" Conservative ") == ["xshape"]
    assert planning.parse_transfer_policy("balanced") == ["xquant", "xshape"]
    assert planning.parse_transfer_policy("xshape,xop") == ["xop", "xshape"]
    assert planning.parse_transfer_policy(["xprofile", "balanced"]) == ["xprofile", "xquant",
                                                                        "xshape"]
    assert planning.parse_transfer_policy("aggressive") == sorted(planning.TRANSFER_KINDS)


def test_unknown_transfer_policy_names_the_valid_ones():
    with pytest.raises(ValueError) as err:
        planning.parse_transfer_policy("bogus")
    assert str(err.value) == ("unknown transfer kind/preset 'bogus'; valid kinds: xop, xprofile, "
                              "xquant, xshape; presets: aggressive, balanced, conservative, off")


def test_attention_backend_names():
    planning.check_attention_backend("flashinfer")
    with pytest.raises(ValueError, match="attention_backend must be one of 'fa3', 'triton', "
                                         "'trtllm_mha', 'flashinfer', 'fla', 'default', got "
                                         "'bogus'."):
        planning.check_attention_backend("bogus")


def test_load_target_exactly_one_positive_finite():
    assert planning.check_load_target(20.0, None) == {"request_rate": 20.0}
    assert planning.check_load_target(None, 200) == {"concurrency": 200.0}
    for rate, conc in ((1.0, 2.0), (None, None)):
        with pytest.raises(ValueError, match="^Exactly one of target_request_rate or "
                                             "target_concurrency must be provided.$"):
            planning.check_load_target(rate, conc)
    with pytest.raises(ValueError, match=r"^Load target must be a positive finite number, got "
                                         r"0.0.$"):
        planning.check_load_target(0.0, None)
    for bad in (float("inf"), float("nan"), -1.0, "x", True):
        with pytest.raises(ValueError, match="Load target must be a positive finite number"):
            planning.check_load_target(None, bad)


def test_recommend_escalates_on_memory_errors_only():
    assert planning._retriable({"type": "InsufficientMemoryError", "message": "…"})
    assert planning._retriable({"type": "KVCacheCapacityError", "message": "…"})
    assert planning._retriable({"type": "RuntimeError",
                                "message": "caused by KVCacheCapacityError: …"})
    assert not planning._retriable(None)
    assert not planning._retriable({"type": "NoFeasibleConfigError", "message": "SLA"})
    assert not planning._retriable({"type": "RuntimeError", "message": "sweep_agg: no results"})
    assert powers_of_two_upto(8) == [1, 2, 4, 8]
    assert powers_of_two_upto(12) == [1, 2, 4, 8]


# ------------------------------------------------------------------------------ search space


def test_candidate_lists_replace_defaults_and_clamp_num_gpu():
    lists = default_lists(is_moe=False, family="LLAMA", backend="trtllm", system="h200_sxm",
                          runs_context=True, total_gpus=16)
    assert lists["num_gpu"] == [1, 2, 4, 8] and lists["cp"] == [1]
    lists.update(num_gpu=[2, 4], tp=[2, 4])   # exp_q32_agg_trt_vs_disagg_vllm
    assert [t["tp_size"] for t in enumerate_tuples(lists, is_moe=False, backend="trtllm")] == [2, 4]
    gb = default_lists(is_moe=False, family="LLAMA", backend="trtllm", system="gb200",
                       runs_context=False, total_gpus=4)
    assert gb["tp"] == [1, 2, 4, 8, 16] and gb["num_gpu"] == [1, 2, 4]


def test_moe_tuples_follow_the_backend_rules():
    for backend in ("trtllm", "vllm"):
        lists = default_lists(is_moe=True, family="MOE", backend=backend, system="h200_sxm",
                              runs_context=True, total_gpus=8)
        assert len(enumerate_tuples(lists, is_moe=True, backend=backend)) == 19
    sgl = default_lists(is_moe=False, family="LLAMA", backend="sglang", system="h200_sxm",
                        runs_context=True, total_gpus=8)
    assert sgl["cp"] == [1, 2, 4, 8]


# ------------------------------------------------------------------------------ experiments


def _names(**kwargs):
    warnings: list = []
    exps = planning.build_default_experiments("Qwen/Qwen3-8B", kwargs.pop("total_gpus", 8),
                                              kwargs.pop("system", "h200_sxm"),
                                              warnings=warnings, **kwargs)
    return [e.name for e in exps], warnings


@needs_native
def test_auto_backend_filter_by_database_mode():
    # spec 51 §1.1 checks: b60 holds vLLM data only.
    names, warnings = _names(system="b60", backend="auto", serving_mode="agg",
                             database_mode="HYBRID")
    assert names == ["agg_vllm"]
    assert any("trtllm" in w for w in warnings) and any("sglang" in w for w in warnings)
    names, _ = _names(system="b60", backend="auto", serving_mode="agg", database_mode="SOL")
    assert names == ["agg_trtllm", "agg_sglang", "agg_vllm"]
    names, _ = _names(backend="auto")
    assert names == ["agg_trtllm", "disagg_trtllm", "agg_sglang", "disagg_sglang", "agg_vllm",
                     "disagg_vllm"]


@needs_native
def test_hetero_decode_system_checks():
    # §1.2: h200 prefill, b60 decode, SILICON, auto.
    names, _ = _names(backend="auto", decode_system="b60")
    assert names == ["agg_trtllm", "agg_sglang", "agg_vllm", "disagg_vllm"]
    # §3.2: an explicit backend the decode system lacks is an error naming decode_system.
    with pytest.raises(planning.PlanningError, match="^decode_system: 'b60' has no perf data "
                                                     "for backend trtllm"):
        _names(backend="trtllm", decode_system="b60")
    exps = planning.build_default_experiments("Qwen/Qwen3-32B", 8, "h200_sxm", "trtllm",
                                              decode_system="b200_sxm", serving_mode="disagg")
    (exp,) = exps
    assert exp.roles["prefill"].system == "h200_sxm" and exp.roles["decode"].system == "b200_sxm"


def test_serving_mode_rules():
    with pytest.raises(ValueError, match=r"^Invalid serving_mode: 'afd'\. Use 'auto', 'all', "
                                         r"'agg', 'disagg', or 'afd'\.$"):
        _names(serving_mode="afd")
    with pytest.raises(planning.PlanningError, match="No task configs could be built for "
                                                     "serving_mode=disagg"):
        _names(serving_mode="disagg", total_gpus=1, backend="vllm")


@needs_native
def test_one_gpu_drops_disagg_quietly():
    names, warnings = _names(total_gpus=1, backend="vllm")
    assert names == ["agg"] and warnings == []


def test_database_mode_is_checked():
    with pytest.raises(planning.PlanningError, match="database_mode: 'FAST' is not one of"):
        _names(database_mode="FAST")


# ------------------------------------------------------------------------------ parity logic


def _golden_cases():
    doc = json.loads((GOLDENS / "planning.json").read_text())
    return {c["id"]: c for c in doc["cases"]}


def test_the_golden_compared_with_itself_passes():
    from aic.parity.planning import compare_result

    for cid, case in _golden_cases().items():
        if not case["ok"] or cid == "rec_auto_q32_h200_rate_hybrid":
            continue
        assert compare_result(case, case, 1e-9) == [], cid


def test_merged_recommend_is_ranked_by_gpus_needed():
    # spec 51 §11.1 worked example: re-derived from the per-experiment candidates.
    from aic.parity.planning import compare_result, expected_merged_recommend

    case = _golden_cases()["rec_auto_q32_h200_rate_hybrid"]
    best, thr, chosen = expected_merged_recommend(case)
    assert [(r["backend"], r["tokens/s/gpu"], r["total_gpus_needed"]) for r in best["disagg"]] \
        == [("vllm", 901.945, 24), ("sglang", 876.07, 24), ("vllm", 836.97, 24),
            ("trtllm", 804.31, 28), ("trtllm", 831.795, 32)]
    assert [r["tokens/s/gpu"] for r in best["agg"]] == [946.906, 897.305, 890.761, 865.432,
                                                         858.97]
    assert thr == {"agg": 1 / 24, "disagg": 1 / 24} and chosen == "agg"
    # The reference's own merged order (by tokens/s/gpu) is what aic does not reproduce.
    assert any("best_throughputs" in p for p in compare_result(case, case, 1e-9))


def test_candidate_tables_compare_modulo_ties():
    from aic.parity.planning import compare_tables_modulo_ties

    a = [{"tokens/s/gpu": 2.0, "bs": 1}, {"tokens/s/gpu": 1.0, "bs": 2},
         {"tokens/s/gpu": 1.0, "bs": 3}]
    b = [a[0], a[2], a[1]]
    assert compare_tables_modulo_ties(a, b, "t") == []
    assert compare_tables_modulo_ties([a[1], a[0], a[2]], a, "t") != []
    assert compare_tables_modulo_ties(a[:2], a, "t") != []


def test_winner_line_says_by_how_much():
    from aic.cli.plan_output import winner_line

    out = {"chosen_exp": "agg", "best_throughputs": {"agg": 946.906, "disagg": 901.945}}
    assert winner_line(out, False) == ("chosen: agg (946.906 tokens/s/gpu), 5.0% ahead of "
                                       "disagg (901.945)")
    out = {"chosen_exp": "agg", "best_throughputs": {"agg": 1 / 6, "disagg": 1 / 8},
           "best_latencies": {"agg": {"total_gpus_needed": 6}, "disagg": {"total_gpus_needed": 8}}}
    assert winner_line(out, True) == ("chosen: agg (6 GPUs carry the load), 2 GPUs fewer than "
                                      "disagg (8 GPUs)")


def test_picked_rows_become_deployments():
    """A merged auto row and a hetero disagg row of the goldens as Deployments: the row's
    backend, per-role systems, versions, layouts and workers."""
    cases = _golden_cases()
    auto = cases["auto_q32_h200_8gpu"]
    dep = planning.result_deployment(auto, "agg", 0)
    assert dep.mode == "agg" and dep.roles["agg"].backend == "sglang"
    assert dep.roles["agg"].parallel.tp == 4 and dep.database_mode == "SILICON"
    hetero = cases["hetero_q32_h200p_b200d_trt_8gpu"]
    dep = planning.result_deployment(hetero, "disagg", 0)
    pre, dec = dep.roles["prefill"], dep.roles["decode"]
    assert (pre.system, dec.system) == ("h200_sxm", "b200_sxm")
    assert (pre.workers, dec.workers, dec.parallel.tp, dec.batch_size) == (4, 1, 4, 168)
    assert dec.version == "1.3.0rc20" and dep.gpus == 8
    with pytest.raises(IndexError, match="no rank 9"):
        planning.result_deployment(hetero, "disagg", 9)
    with pytest.raises(KeyError, match="no experiment 'agg'"):
        planning.result_deployment(hetero, "agg")


def test_groups_tied_on_value_may_swap_only_when_a_tied_row_was_kept():
    from aic.parity.planning import compare_picks

    def row(group, user, bs):
        return {"parallel": group, "tokens/s/gpu_cluster": 5.0, "tokens/s/gpu": 5.0,
                "tokens/s/user": user, "bs": bs}

    ref = [row("tp4", 116.8, 512), row("tp2", 71.5, 512)]
    tied = [row("tp2", 171.9, 136), row("tp4", 170.5, 256)]   # other rows of the same groups
    cands = {"x": ref + tied}
    assert compare_picks(tied, ref, cands, "x best_configs", 1e-9, merged=False,
                         load_match=False) == []
    swapped = [ref[1], ref[0]]   # the very same rows in another order: a real difference
    assert compare_picks(swapped, ref, cands, "x best_configs", 1e-9, merged=False,
                         load_match=False) != []


def test_winner_line_of_a_merged_run_names_the_experiments():
    from aic.cli.plan_output import winner_line

    case = _golden_cases()["auto_q32_h200_8gpu"]
    assert winner_line(case, False) == ("chosen: agg (agg_sglang) (946.906 tokens/s/gpu), 5.0% "
                                        "ahead of disagg (disagg_vllm) (901.945)")


def test_winner_line_when_the_strict_pick_is_empty():
    from aic.cli.plan_output import winner_line

    case = _golden_cases()["strict_nocompliant_q8_h200_vllm_1gpu"]
    assert winner_line(case, False).startswith("chosen: none — no configuration meets the SLA")


@needs_native
def test_a_system_without_the_backends_data_is_refused():
    # b60 holds vLLM data only; the reference exits (SystemExit) where aic raises PlanningError.
    with pytest.raises(planning.PlanningError, match="^system: 'b60' has no perf data for "
                                                     "backend trtllm .SILICON mode.") as err:
        _names(system="b60", backend="trtllm")
    assert type(err.value).reference_class == "SystemExit"
    names, _ = _names(system="b60", backend="trtllm", database_mode="SOL")
    assert names == ["agg", "disagg"]


@needs_native
def test_warnings_are_logged_when_no_list_is_given(caplog):
    import logging

    with caplog.at_level(logging.WARNING, logger="aic.serving.planning"):
        planning.build_default_experiments("Qwen/Qwen3-8B", 8, "b60", "auto",
                                           serving_mode="agg", database_mode="HYBRID")
    assert any("backend trtllm" in r.getMessage() for r in caplog.records)


@needs_native
def test_a_workload_value_drives_sweep_and_recommend():
    """rec_conc_q8_h100_trt_hybrid (spec 51 §4.5) from a Workload, and its agg rank 1 back as a
    Deployment."""
    from aic.serving import Workload

    work = Workload(isl=2000, osl=500, concurrency=200, ttft=1000.0, tpot=20.0)
    out = planning.recommend_workload("Qwen/Qwen3-8B", "h100_sxm", work)
    assert out["best_throughputs"] == {"agg": 0.25, "disagg": 0.25} and out["chosen_exp"] == "agg"
    dep = planning.result_deployment(out, "agg", 0, database_mode="HYBRID")
    assert dep.roles["agg"].parallel.tp == 2 and dep.roles["agg"].batch_size == 128
    out = planning.sweep_workload("Qwen/Qwen3-8B", 1, "h100_sxm", work, backend="vllm")
    assert list(out["tasks"]) == ["agg"] and out["tasks"]["agg"]["isl"] == 2000
    with pytest.raises(TypeError, match="workload must be an aic.serving.plan.Workload"):
        planning.sweep_workload("Qwen/Qwen3-8B", 1, "h100_sxm", {"isl": 1})
