"""Every shipped system (spec 12): the catalogue behind ``aic-compile data show`` with no
system, the live support matrix of ``aic-compile support``, and the errors of the systems that
ship no perf data."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from aic import AicEngine, _aic, compile_engine, estimate_kv_cache
from aic.cli import main
from aic.serving.support import probe, summary_counts, support_matrix

DATA_LESS = ("a100_pcie", "a30", "h100_pcie", "l4")
WITH_DATA = ("a100_sxm", "b200_sxm", "b300_sxm", "b60", "gb200", "gb300", "h100_sxm", "h200_sxm",
             "l40s", "rtx_pro_6000_server")


def _run(*args):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def test_catalogue_lists_all_fourteen_systems_with_their_slots():
    listing = {s["name"]: s for s in json.loads(_aic.systems_catalogue_json())}
    assert sorted(listing) == sorted(DATA_LESS + WITH_DATA)
    for name in DATA_LESS:
        assert all(b["current"] is None for b in listing[name]["backends"]), name
    gb300 = {b["backend"]: b for b in listing["gb300"]["backends"]}
    assert (gb300["vllm"]["current"], gb300["vllm"]["next"]) == ("0.24.0", "0.27.0")
    assert listing["gb300"]["gpus_per_node"] == 4 and listing["gb300"]["gpus_per_rack"] == 72
    b60 = {b["backend"]: b for b in listing["b60"]["backends"]}
    assert listing["b60"]["sm_version"] is None
    assert (b60["vllm"]["current"], b60["vllm"]["previous"]) == ("0.26.0", "0.20.0")
    assert b60["sglang"]["current"] is None and b60["trtllm"]["current"] is None


def test_data_show_without_a_system_prints_every_system():
    result = _run("data", "show")
    assert result.exit_code == 0, result.output
    for name in DATA_LESS + WITH_DATA:
        assert name in result.output
    assert "no perf data (hardware description only; estimates raise): a100_pcie, a30, " \
           "h100_pcie, l4" in result.output
    assert "current 1.0.0" in result.output  # a100_sxm trtllm, frozen slot
    doc = json.loads(_run("data", "show", "--json").output)
    assert doc["schema"] == "aic-systems/1" and len(doc["systems"]) == 14
    bad = _run("data", "show", "gb200")
    assert bad.exit_code != 0 and "give BACKEND with SYSTEM" in bad.output


@pytest.mark.parametrize("system", DATA_LESS)
def test_data_less_system_estimates_raise_naming_the_system(system):
    spec = compile_engine("Qwen/Qwen3-8B", system, "vllm")
    with pytest.raises(ValueError, match=f"backend_version is required to load the perf "
                                         f"database: system '{system}' ships no vllm perf data"):
        AicEngine.from_spec(spec)
    literal = compile_engine("Qwen/Qwen3-8B", system, "vllm", "0.24.0")
    with pytest.raises(_aic.PerfDataNotAvailableError, match="perf data directory not found"):
        AicEngine.from_spec(literal)
    with pytest.raises(ValueError, match="'NoneType' object has no attribute 'system_spec'"):
        estimate_kv_cache("Qwen/Qwen3-8B", system, "vllm")


def test_gb200_trtllm_estimate_works_with_no_flags():
    result = _run("estimate", "Qwen/Qwen3-32B", "--system", "gb200", "--backend", "trtllm",
                  "--tp", "4", "--json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    assert doc["errors"] == {} and doc["ttft_ms"] > 0 and doc["decode_ms"] > 0


def test_gb300_all_reduce_uses_the_measured_tp8_rows():
    # Spec 12 §6.1: the custom all-reduce cap is the largest tp the table records (16 on gb300
    # sglang), not the 4 GPUs of a node. Worked example: 64 x 0.0645163202286.
    engine = AicEngine.from_spec(compile_engine("Qwen/Qwen3-32B", "gb300", "sglang", tp_size=8))
    op = {"CustomAllReduce": {"name": "context_ar_1", "scale_factor": 64.0, "hidden_size": 5120,
                              "tp_size": 8, "quant": "half", "seq_split": 1}}
    [(name, ms, _energy, source)] = engine.evaluate_ops_json(json.dumps([op]), True, 1, 1024, 0)
    assert name == "context_ar_1" and source == "silicon"
    assert ms == pytest.approx(4.129044494629, rel=1e-9)


def test_b60_collectives_fall_back_to_oneccl():
    # Spec 12 §7.2: no comm/nccl/2.23 folder on b60, so collectives read OneCCL.
    engine = AicEngine.from_spec(compile_engine("Qwen/Qwen3-8B", "b60", "vllm", tp_size=2))
    gather = {"Nccl": {"name": "g", "scale_factor": 1.0, "hidden_size": 4096, "num_gpus": 2,
                       "dtype": "half", "operation": "all_gather", "seq_split": 1}}
    [(_, ms, _, _)] = engine.evaluate_ops_json(json.dumps([gather]), True, 1, 1024, 0)
    assert ms == pytest.approx(0.356439, rel=1e-9)
    alltoall = json.loads(json.dumps(gather))
    alltoall["Nccl"]["operation"] = "alltoall"
    with pytest.raises(_aic.PerfDataNotAvailableError,
                       match=r'neither NCCL nor OneCCL has data for \("half", "alltoall", 2\)'):
        engine.evaluate_ops_json(json.dumps([alltoall]), True, 1, 1024, 0)


def test_support_probe_answers_and_explains():
    ok = probe("Qwen/Qwen3-32B", "gb200", "trtllm")
    assert ok.status == "ok" and ok.version == "1.3.0rc20"
    assert ok.prefill_ms > 0 and ok.decode_ms > 0
    flops = probe("Qwen/Qwen3-32B-FP8", "a100_sxm", "vllm")
    assert flops.status == "missing-flops" and "fp8_tc_flops" in flops.reason
    no_data = probe("Qwen/Qwen3-32B", "l4", "vllm")
    assert no_data.status == "no-perf-data" and "l4" in no_data.reason


def test_support_matrix_for_one_model_over_every_system():
    cells = support_matrix(["Qwen/Qwen3-8B"])
    assert len(cells) == 14 * 3
    counts = summary_counts(cells)
    # Ten systems with data; b60 has vllm only: 10 * 3 - 2 answering cells.
    assert counts == {"ok": 28, "no-perf-data": 14}
    with pytest.raises(ValueError, match="unknown system 'h300'"):
        support_matrix(["Qwen/Qwen3-8B"], systems=["h300"])


def test_support_command_prints_the_table_and_json():
    result = _run("support", "Qwen/Qwen3-8B", "--system", "b60", "--system", "l4")
    assert result.exit_code == 0, result.output
    assert "b60" in result.output and "no-perf-data" in result.output
    assert result.output.rstrip().endswith("6 cells: 1 ok, 5 no-perf-data")
    doc = json.loads(_run("support", "Qwen/Qwen3-8B", "-s", "gb300", "-b", "vllm", "--json").output)
    assert doc["schema"] == "aic-support/1" and doc["counts"] == {"ok": 1}
    [cell] = doc["cells"]
    assert (cell["system"], cell["backend"], cell["version"]) == ("gb300", "vllm", "0.24.0")
