"""Read-only table views from Python: ``aic-compile data show``, ``_aic.table_coverage_json``
and ``_aic.table_view`` on the shipped h200_sxm data."""

from __future__ import annotations

import array
import json

import pytest
from click.testing import CliRunner

from aic import _aic
from aic.cli import main

FAMILIES = {
    "gemm": "gemm",
    "context_attention": "attention",
    "generation_attention": "attention",
    "custom_allreduce": "comm",
    "nccl": "comm",
    "moe": "moe",
    "context_mla": "mla",
    "generation_mla": "mla",
    "mla_context_module": "mla",
    "mla_generation_module": "mla",
    "mla_bmm": "mla_bmm",
    "computescale": "quantize",
    "scale_matrix": "quantize",
}


def _run(*args):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


@pytest.fixture(scope="module")
def coverage() -> dict:
    result = _run("data", "show", "h200_sxm", "vllm", "--json")
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def test_json_schema_is_stable(coverage):
    assert set(coverage) == {"schema", "system", "backend", "version", "shared_layer",
                             "data_root", "tables"}
    assert coverage["schema"] == "aic-table-coverage/1"
    assert (coverage["system"], coverage["backend"], coverage["version"]) == (
        "h200_sxm", "vllm", "0.24.0")
    assert coverage["shared_layer"] is True
    assert coverage["data_root"] == "systems/data/h200_sxm/vllm/0.24.0"
    assert [t["table"] for t in coverage["tables"]] == _aic.table_names() == list(FAMILIES)
    for t in coverage["tables"]:
        assert set(t) == {"table", "family", "file", "error", "rows", "slices", "keys", "axes",
                          "sources"}
        assert t["family"] == FAMILIES[t["table"]]
        assert t["file"].endswith("_perf.parquet")
        for k in t["keys"]:
            assert set(k) == {"name", "values"}
        for a in t["axes"]:
            assert set(a) == {"name", "min", "max", "count"}
            assert a["min"] <= a["max"] and a["count"] >= 1
        for s in t["sources"]:
            assert set(s) == {"path", "framework", "version", "rows"}
            assert s["path"].startswith("systems/data/h200_sxm/"), s["path"]
        if t["error"] is None:
            assert t["rows"] == sum(s["rows"] for s in t["sources"]) > 0
        else:
            assert t["rows"] == 0 and not t["sources"]


def test_h200_vllm_extents_and_dtypes(coverage):
    tables = {t["table"]: t for t in coverage["tables"]}
    gemm = tables["gemm"]
    assert {"name": "quant", "values": ["bfloat16", "fp8", "fp8_block"]} in gemm["keys"]
    m = next(a for a in gemm["axes"] if a["name"] == "m")
    assert (m["min"], m["max"]) == (1, 32768)  # spec 20 G10c: utilisation frozen at m = 32768
    assert gemm["sources"][0] == {
        "path": "systems/data/h200_sxm/gemm/vllm/0.24.0/gemm_perf.parquet",
        "framework": "vllm", "version": "0.24.0", "rows": gemm["rows"]}
    ctx = tables["context_attention"]
    assert [a["name"] for a in ctx["axes"]] == ["num_heads", "isl", "batch"]
    lanes = next(k for k in ctx["keys"] if k["name"] == "lane")["values"]
    assert "vllm_flash_attn_fa3" in lanes
    moe = tables["moe"]
    tokens = next(a for a in moe["axes"] if a["name"] == "num_tokens")
    assert tokens["max"] == 16384
    quants = next(k for k in moe["keys"] if k["name"] == "quant")["values"]
    assert "bfloat16" in quants and "w4a16_mxfp4" in quants
    assert {s["version"] for s in moe["sources"]} >= {"0.24.0"}
    assert tables["nccl"]["sources"][0]["framework"] == "nccl"


def test_human_table_lists_families_and_extents(coverage):
    result = _run("data", "show", "h200_sxm", "vllm")
    assert result.exit_code == 0, result.output
    out = result.output
    assert out.splitlines()[0].startswith("h200_sxm / vllm 0.24.0 (shared layer on")
    for t in coverage["tables"]:
        line = next(l for l in out.splitlines() if l.startswith(t["table"] + " "))
        assert t["family"] in line
        if t["error"] is None:
            assert f" {t['rows']} " in line
            for a in t["axes"]:
                assert f"{a['name']} {a['min']}..{a['max']} x{a['count']}" in line
        else:
            assert "not available" in line
    assert "quant: bfloat16, fp8, fp8_block" in out
    assert "systems/data/h200_sxm/gemm/vllm/0.24.0/gemm_perf.parquet" in out


def test_version_argument_and_shared_layer_switch(coverage):
    result = _run("data", "show", "h200_sxm", "vllm", "current", "--json", "--no-shared-layer")
    assert result.exit_code == 0, result.output
    own = json.loads(result.output)
    assert own["version"] == "0.24.0" and own["shared_layer"] is False
    moe = next(t for t in own["tables"] if t["table"] == "moe")
    assert {s["version"] for s in moe["sources"]} == {"0.24.0"}
    shared_moe = next(t for t in coverage["tables"] if t["table"] == "moe")
    assert moe["rows"] <= shared_moe["rows"]


@pytest.mark.parametrize(
    ("args", "needles"),
    [
        (("h201_sxm", "vllm"), ("unknown system", "b200_sxm", "h100_sxm", "h200_sxm")),
        (("h200_sxm", "tensorrt"), ('unknown backend "tensorrt"', "trtllm", "sglang", "vllm")),
        (("h200_sxm", "vllm", "9.9.9"), ("9.9.9", "'current': '0.24.0'", "0.24.0")),
    ],
)
def test_unknown_names_list_the_valid_ones(args, needles):
    result = _run("data", "show", *args)
    assert result.exit_code == 1
    for needle in needles:
        assert needle in result.output, (needle, result.output)


def test_table_view_columns_are_arrays():
    view = _aic.table_view(None, "h200_sxm", "vllm", "gemm")
    assert (view["table"], view["family"], view["version"]) == ("gemm", "gemm", "0.24.0")
    bf16 = next(s for s in view["slices"] if s["key"] == {"quant": "bfloat16"})
    assert bf16["axes"] == ["m", "n", "k"]
    coords = bf16["coords"]
    assert all(isinstance(coords[a], array.array) and coords[a].typecode == "Q" for a in "mnk")
    for column in ("latency_ms", "power_w", "energy_wms"):
        assert isinstance(bf16[column], array.array) and bf16[column].typecode == "d"
        assert len(bf16[column]) == len(coords["m"])
    points = {(m, n, k): i for i, (m, n, k) in enumerate(zip(coords["m"], coords["n"], coords["k"]))}
    # spec 20 §1.4 raw row: bf16 (1024, 5120, 5120) = 0.06753333 ms
    assert abs(bf16["latency_ms"][points[(1024, 5120, 5120)]] - 0.06753333) <= 5e-9
    assert memoryview(bf16["latency_ms"]).format == "d"


def test_table_view_errors():
    with pytest.raises(ValueError, match=r'unknown table "gemms"; valid tables: \[gemm, '):
        _aic.table_view(None, "h200_sxm", "vllm", "gemms")
    with pytest.raises(_aic.PerfDataNotAvailableError, match="no MLA op rows"):
        _aic.table_view(None, "h200_sxm", "vllm", "context_mla")


def test_native_names_and_signatures():
    for name in ("table_names", "table_coverage_json", "table_view"):
        assert name in _aic.__all__ and callable(getattr(_aic, name)), name
    assert _aic.table_coverage_json.__text_signature__ == (
        "(systems_path, system, backend, version=None, enable_shared_layer=True)")
    assert _aic.table_view.__text_signature__ == (
        "(systems_path, system, backend, table, version=None, enable_shared_layer=True)")
