"""Provenance from Python: ``AicEngine.last_provenance()`` (the worst empirical tier of the last
compute call through that object, spec 20 §0.6 / §17.1), ``AicEngine.load_warnings()`` (what the
loader skipped or relaxed, spec 10 §5 / §8), strict provenance (spec 10 §8.6) from the spec flag
and from ``AIC_STRICT_PROVENANCE``, and ``aic-compile estimate --verbose``.

Tier expectations come from spec 20's worked examples (CA12a head 96 → ``xshape``, G11d sq →
``xquant``, G11a int8_wo → ``xprofile``) and from the edge goldens' HYBRID / EMPIRICAL engines.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

_aic = pytest.importorskip("aic._aic", reason="native module aic._aic is not built yet")

from aic.cli import main  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
GOLDENS = REPO / "goldens"
SYSTEMS = REPO / "data" / "systems"
EDGE = "edge/Qwen3-32B/h200_sxm/vllm/tp2-pp1-dp1"
DSV3_VLLM = "mla/DeepSeek-V3/h200_sxm/vllm/tp8-pp1-dp1-mtp1-ep8"
WARNING_KEYS = {"kind", "path", "table", "message"}


def _case(case_id: str) -> dict:
    with open(GOLDENS / f"{case_id.split('/')[0]}.json", encoding="utf-8") as fh:
        for case in json.load(fh)["cases"]:
            if case["id"] == case_id:
                return case
    raise AssertionError(f"golden case {case_id} not found")


def _spec(case_id: str) -> dict:
    case = _case(case_id)
    return {
        "schema_version": case["resolved"]["spec_schema_version"],
        "engine": dict(case["resolved"]["engine"]),
        "context_ops": case["spec_ops"]["context"],
        "generation_ops": case["spec_ops"]["generation"],
    }


def _engine(spec: dict):
    return _aic.AicEngine.from_spec(json.dumps(spec).encode())


def _op(case_id: str, name: str, **changes) -> dict:
    for op in _case(case_id)["spec_ops"]["context"]:
        kind, inner = next(iter(op.items()))
        if inner["name"] == name:
            return {kind: {**inner, **changes}}
    raise AssertionError(f"op {name} not in {case_id}")


def _eval_one(engine, op: dict, b: int, s: int) -> float:
    rows = engine.evaluate_ops_json(json.dumps([op]), True, b, s)
    assert len(rows) == 1
    return rows[0][1]


@pytest.fixture(scope="module")
def hybrid():
    return _engine(_spec(f"{EDGE}/db=HYBRID"))


def test_tiers_of_spec_examples(hybrid):
    # a table hit notes nothing
    _eval_one(hybrid, _op(EDGE, "context_qkv_gemm", scale_factor=1.0), 1, 1024)
    assert hybrid.last_provenance() is None
    # CA12a: head 96 has no slice, transfer from head 128
    op = _op(EDGE, "context_attention", head_size=96, use_qk_norm=False, scale_factor=1.0)
    assert _eval_one(hybrid, op, 1, 1024) == pytest.approx(0.04453350, abs=5e-9)
    assert hybrid.last_provenance() == "xshape"
    # G11d: sq has no GEMM rows, same profile as fp8
    op = _op(EDGE, "context_qkv_gemm", quant_mode="sq", scale_factor=1.0)
    assert _eval_one(hybrid, op, 1, 1024) == pytest.approx(0.05780266, abs=5e-9)
    assert hybrid.last_provenance() == "xquant"
    # G11a: int8_wo, nearest other profile
    op = _op(EDGE, "context_qkv_gemm", quant_mode="int8_wo", scale_factor=1.0)
    assert _eval_one(hybrid, op, 1, 1024) == pytest.approx(0.08595152, abs=5e-9)
    assert hybrid.last_provenance() == "xprofile"


def test_whole_engine_calls_and_reset(hybrid):
    empirical = _engine(_spec(f"{EDGE}/db=EMPIRICAL"))
    int8 = _engine(_spec(f"{EDGE}/gemm=int8_wo/db=HYBRID"))
    assert empirical.last_provenance() is None  # nothing computed yet
    empirical.predict_prefill_latency(1, 1024)
    assert empirical.last_provenance() == "empirical"
    int8.run_static(2, 1, 1024, 64)
    assert int8.last_provenance() == "xprofile"
    hybrid.predict_decode_latency(4, 1024, 64)
    assert hybrid.last_provenance() is None
    # per object: other objects' calls do not change it
    assert int8.last_provenance() == "xprofile"
    assert empirical.last_provenance() == "empirical"
    # spec_json is not a compute call
    json.loads(int8.spec_json())
    assert int8.last_provenance() == "xprofile"
    # a call that fails still resets it
    with pytest.raises(ValueError, match="isl must be greater than 0"):
        int8.predict_prefill_latency(1, 1024, 1024)
    assert int8.last_provenance() is None
    int8.mixed_step_latency(512, 8, 1024, 64)
    assert int8.last_provenance() == "xprofile"


def test_load_warnings_of_shipped_mla_engine():
    engine = _engine(_spec(DSV3_VLLM))
    engine.predict_prefill_latency(1, 1024)
    warnings = engine.load_warnings()
    assert warnings and all(set(w) == WARNING_KEYS for w in warnings)
    low = [w for w in warnings if w["kind"] == "low_fidelity_rows"]
    assert {w["table"] for w in low} >= {"mla_context_module_perf.parquet"}
    # the database is shared by every engine of its identity in the process, so tables other
    # tests loaded (e.g. the DSA modules' trtllm cross fill) may add their own warnings
    assert all("mla/trtllm/1.3.0rc20" in w["path"] for w in low if w["table"].startswith("mla_"))
    assert all("low-fidelity" in w["message"] for w in low)


# ------------------------------------------------------------------------- strict provenance


def _gemm_tree(root: Path, sidecar: str) -> Path:
    """A systems root with h200_sxm.yaml and the vLLM 0.24.0 GEMM table under ``sidecar``."""
    shutil.copy(SYSTEMS / "h200_sxm.yaml", root / "h200_sxm.yaml")
    gemm = root / "data" / "h200_sxm" / "gemm" / "vllm" / "0.24.0"
    gemm.mkdir(parents=True)
    shutil.copy(SYSTEMS / "data" / "h200_sxm" / "gemm" / "vllm" / "0.24.0" / "gemm_perf.parquet", gemm)
    (gemm / "collection_meta.yaml").write_text(sidecar)
    return root


def _gemm_spec(root: Path, strict: bool = False) -> dict:
    spec = _spec(f"{EDGE}/db=HYBRID")
    spec["engine"].update(systems_path=str(root), strict_provenance=strict, database_mode="SILICON")
    spec["context_ops"] = [_op(EDGE, "context_qkv_gemm")]
    spec["generation_ops"] = []
    return spec


def test_strict_provenance_from_the_spec(tmp_path):
    root = _gemm_tree(tmp_path, "schema_version: 1\ntables:\n  moe_perf: {status: complete}\n")
    with pytest.raises(ValueError, match="does not list gemm_perf under `tables:`"):
        _engine(_gemm_spec(root, strict=True))
    lax = _engine(_gemm_spec(root))
    assert lax.predict_prefill_latency(1, 1024) > 0
    assert lax.load_warnings() == []


def test_malformed_sidecar_warns_and_cli_verbose_shows_it(tmp_path):
    root = _gemm_tree(tmp_path, "schema_version: 9\n")
    engine = _engine(_gemm_spec(root))
    (warning,) = engine.load_warnings()
    assert warning["kind"] == "malformed_sidecar"
    assert warning["path"].endswith("gemm/vllm/0.24.0/collection_meta.yaml")
    assert "schema_version must be 1 or 2" in warning["message"]

    spec_file = tmp_path / "gemm.json"
    spec_file.write_text(json.dumps(_gemm_spec(root)))
    runner = CliRunner()
    quiet = runner.invoke(main, ["estimate", "--spec", str(spec_file), "--json"])
    assert quiet.exit_code == 0, quiet.output
    assert "load warning" not in quiet.stderr
    loud = runner.invoke(main, ["estimate", "--spec", str(spec_file), "--json", "--verbose"])
    assert loud.exit_code == 0, loud.output
    assert json.loads(loud.stdout)["ttft_ms"] > 0
    assert "load warning [malformed_sidecar]: malformed" in loud.stderr
    # the environment switch makes the same data an error
    strict = runner.invoke(main, ["estimate", "--spec", str(spec_file)], env={"AIC_STRICT_PROVENANCE": "1"})
    assert strict.exit_code != 0
    assert "cannot load the engine" in strict.output and "schema_version must be 1 or 2" in strict.output


def test_dsa_quant_transfer_is_opt_in_and_reports_its_tier():
    """``AicEngine.from_spec(..., quant_transfer=True)``: a GLM-5 DSA module with a GEMM quant
    mode the sglang module tables lack (they hold bfloat16 and fp8_block) is read from the
    fp8_block slice (``xquant`` for fp8, ``xprofile`` for nvfp4) instead of raising."""
    case = "dsa/GLM-5-FP8/b200_sxm/sglang/tp8-pp1-dp1-mtp1-ep8"
    spec = _spec(case)
    spec["engine"]["database_mode"] = "EMPIRICAL"
    blob = json.dumps(spec).encode()
    plain = _aic.AicEngine.from_spec(blob)
    on = _aic.AicEngine.from_spec(blob, quant_transfer=True)

    def dsa(gemm: str) -> dict:
        return _op(case, "context_attention", gemm_quant_mode=gemm, scale_factor=1.0)

    with pytest.raises(_aic.EmpiricalNotImplementedError):
        _eval_one(plain, dsa("fp8"), 1, 1024)
    block = _eval_one(plain, dsa("fp8_block"), 1, 1024)
    assert plain.last_provenance() == "empirical"
    assert _eval_one(on, dsa("fp8"), 1, 1024) == block
    assert on.last_provenance() == "xquant"
    assert _eval_one(on, dsa("nvfp4"), 1, 1024) > 0
    assert on.last_provenance() == "xprofile"
