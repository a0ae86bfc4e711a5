"""``AicEngine.evaluate_ops_sol_json``: the SOL decomposition (spec 20 §0.7) from Python.

Engines are built from golden cases (their resolved engine config and op lists). Reference
numbers are spec 20's SOL_FULL examples; the decomposed time is also checked against the
SOL-mode engine's ``evaluate_ops_json`` for every op of a compiled spec.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from aic import _aic

GOLDENS = Path(__file__).resolve().parents[2] / "goldens"
DENSE = "dense/Qwen3-32B/h200_sxm/vllm/tp2-pp1-dp1"
DSV3_TRTLLM = "mla/DeepSeek-V3/h200_sxm/trtllm/tp8-pp1-dp1-mtp1-ep8/fmha=bfloat16"


def _case(case_id: str) -> dict:
    name = case_id.split("/")[0]
    with open(GOLDENS / f"{name}.json", encoding="utf-8") as fh:
        for case in json.load(fh)["cases"]:
            if case["id"] == case_id:
                return case
    raise AssertionError(f"golden case {case_id} not found")


def _engine(case_id: str, mode: str | None = None):
    case = _case(case_id)
    engine = dict(case["resolved"]["engine"])
    if mode is not None:
        engine["database_mode"] = mode
    spec = {
        "schema_version": case["resolved"]["spec_schema_version"],
        "engine": engine,
        "context_ops": case["spec_ops"]["context"],
        "generation_ops": case["spec_ops"]["generation"],
    }
    return _aic.AicEngine.from_spec(_aic.encode_spec(json.dumps(spec)))


def _op(case_id: str, name: str) -> dict:
    case = _case(case_id)
    for op in case["spec_ops"]["context"] + case["spec_ops"]["generation"]:
        if next(iter(op.values()))["name"] == name:
            return op
    raise AssertionError(f"op {name} not in {case_id}")


def _printed(ours: float, printed: str) -> None:
    """Within half a unit of the last printed digit of a spec value."""
    decimals = len(printed.split(".")[1]) if "." in printed else 0
    assert abs(ours - float(printed)) <= 0.5 * 10 ** -decimals * (1 + 1e-9), (ours, printed)


@pytest.fixture(scope="module")
def dense():
    return _engine(DENSE)


@pytest.fixture(scope="module")
def dense_sol_mode():
    return _engine(DENSE, "SOL")


def test_signature_and_row_shape(dense):
    assert _aic.AicEngine.evaluate_ops_sol_json.__text_signature__ == (
        "($self, ops_json, is_context, batch_size, s, prefix=0, imbalance_correction_scale=1.0, "
        "x=None)"
    )
    rows = dense.evaluate_ops_sol_json(json.dumps([_op(DENSE, "context_qkv_gemm")]), True, 1, 1024)
    assert isinstance(rows, list) and len(rows) == 1
    name, time, math, mem = rows[0]
    assert name == "context_qkv_gemm"
    assert all(isinstance(v, float) for v in (time, math, mem))


def test_g6_gemm_is_math_bound(dense):
    """20 §1.4 G6: SOL_FULL (3.474190, 3.474190, 0.9786709)."""
    [(_, time, math, mem)] = dense.evaluate_ops_sol_json(
        json.dumps([_op(DENSE, "context_qkv_gemm")]), True, 1, 1024)
    _printed(time, "3.474190")
    _printed(math, "3.474190")
    _printed(mem, "0.9786709")
    assert time == max(math, mem)


def test_ca9a_context_attention_extras_on_the_memory_side(dense):
    """20 §4.5 CA9a: SOL_FULL (0.5567114, 0.5558704, 0.2524993)."""
    [(_, time, math, mem)] = dense.evaluate_ops_sol_json(
        json.dumps([_op(DENSE, "context_attention")]), True, 1, 1024)
    _printed(time, "0.5567114")
    _printed(math, "0.5558704")
    _printed(mem, "0.2524993")


def test_memory_and_comm_conventions(dense):
    """MemOp → (0, time); custom all-reduce → (0, 0); NCCL and P2P → (0, time) (20 §0.7)."""
    ops = [
        _op(DENSE, "context_add_norm_1"),
        {"CustomAllReduce": {"name": "ar", "scale_factor": 1.0, "hidden_size": 4096,
                             "tp_size": 8, "quant": "half", "seq_split": 1}},
        {"Nccl": {"name": "nccl", "scale_factor": 1.0, "hidden_size": 4096.0, "num_gpus": 4,
                  "dtype": "half", "operation": "all_gather", "seq_split": 1}},
        {"P2P": {"name": "p2p", "scale_factor": 1.0, "pp_size": 2, "hidden_size": 5120,
                 "seq_split": 1}},
    ]
    rows = {r[0]: r[1:] for r in dense.evaluate_ops_sol_json(json.dumps(ops), True, 1, 256)}
    time, math, mem = rows["context_add_norm_1"]
    assert math == 0.0 and mem == time > 0
    time, math, mem = rows["ar"]
    _printed(time, "0.008155591")
    assert (math, mem) == (0.0, 0.0)
    time, math, mem = rows["nccl"]
    _printed(time, "0.003495253")
    assert math == 0.0 and mem == time
    time, math, mem = rows["p2p"]
    assert math == 0.0 and mem == time > 0


def test_every_context_and_generation_op_matches_the_sol_mode_latency(dense, dense_sol_mode):
    case = _case(DENSE)
    for is_context, ops, b, s in ((True, case["spec_ops"]["context"], 2, 1000),
                                  (False, case["spec_ops"]["generation"], 8, 2048)):
        text = json.dumps(ops)
        sol = dense.evaluate_ops_sol_json(text, is_context, b, s)
        mode = dense_sol_mode.evaluate_ops_json(text, is_context, b, s)
        assert [r[0] for r in sol] == [r[0] for r in mode]
        for (name, time, math, mem), (_, latency, _, _) in zip(sol, mode):
            assert time == latency, name
            assert math >= 0 and mem >= 0, name


def test_ops_without_a_split_raise_value_error_naming_the_op():
    engine = _engine(DSV3_TRTLLM)
    overlap = _op(DSV3_TRTLLM, "generation_moe_overlap")
    with pytest.raises(ValueError, match=r'"generation_moe_overlap" \(Overlap'):
        engine.evaluate_ops_sol_json(json.dumps([overlap]), False, 8, 2048)


def test_argument_errors(dense):
    with pytest.raises(ValueError, match="evaluate_ops_sol_json: invalid op list JSON"):
        dense.evaluate_ops_sol_json("[{\"Gemm\": {}}]", True, 1, 1)
    with pytest.raises(OverflowError):
        dense.evaluate_ops_sol_json("[]", True, -1, 1)
    assert dense.evaluate_ops_sol_json("[]", True, 1, 1) == []
