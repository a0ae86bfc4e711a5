"""Compatibility with aiconfigurator-core 0.12.0's Python surface: every public name a ported
program calls exists in ``aic._aic`` (and, for the classes, in ``aic``) with the reference's
parameter list, and the ``.pyi`` stubs agree with the compiled module (mypy's stubtest).

The signatures below are the reference's, as recorded in the surface goldens
(``goldens/surface.json``, ``signatures``) plus the core methods whose signatures spec 40 §8-9
states. A renamed parameter, a changed default or order, a lost static method or a missing
name fails here before any user notices.
"""

from __future__ import annotations

import inspect
import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.engine

#: ``qualified name -> (signature as inspect renders it, is a static method)``.
REFERENCE_SIGNATURES = {
    # Spec 40 §8.2 / §9.
    "AicEngine.predict_prefill_latency": ("(self, /, bs, isl, prefix=0)", False),
    "AicEngine.predict_decode_latency": ("(self, /, bs, isl, osl=2)", False),
    "AicEngine.evaluate_ops_json": (
        "(self, /, ops_json, is_context, batch_size, s, prefix=0, imbalance_correction_scale=1.0, x=None)",
        False,
    ),
    # Recorded in goldens/surface.json.
    "AicEngine.decode_step_per_op": ("(self, /, gen_tokens, isl, osl, gen_seq_imbalance_correction_scale=1.0)", False),
    "AicEngine.mixed_step_breakdown_per_op": (
        "(self, /, ctx_tokens, gen_tokens, isl, osl, prefix=0, seq_imbalance_correction_scale=1.0, "
        "gen_seq_imbalance_correction_scale=1.0)",
        False,
    ),
    "AicEngine.evaluate_context_ops": (
        "(self, /, indices, batch_size, s, prefix=0, seq_imbalance_correction_scale=1.0, x=None)",
        False,
    ),
    "AicEngine.evaluate_generation_ops": (
        "(self, /, indices, batch_size, s, gen_seq_imbalance_correction_scale=1.0, prefix=0, x=None)",
        False,
    ),
    "AicEngine.table_view_json": ("(self, /, attribute)", False),
    "AicEngine.attention_lane_density": ("(self, /, attribute)", False),
    "engine_spec_schema_version": ("()", False),
    "engine_spec_bincode_from_json": ("(spec_json)", False),
    "weights_ops_json": ("(ops_json)", False),
    "ops_json_from_ops": ("(ops)", False),
    "op_from_spec_json": ("(spec_json)", False),
    "resolve_op_sources_report_json": (
        "(systems_root, system_data_root, backend, version, op_file_basename, primary_path=None, "
        "enable_shared_layer=True, strict=False)",
        False,
    ),
    "gemm_quant_util_levels": ("()", False),
    "moe_quant_util_levels": ("()", False),
    "table_view_attributes": ("()", False),
    "RustForwardPassPerfModel.avg_correction_factor": ("(self, /)", False),
    "RustForwardPassPerfModel.best_available": ("(config_json, options_json=None)", True),
    "RustForwardPassPerfModel.diagnostics": ("(self, /)", False),
    "RustForwardPassPerfModel.estimate_forward_pass_time_ms": ("(self, /, fpm_json)", False),
    "RustForwardPassPerfModel.from_native": ("(config_json, options_json=None)", True),
    "RustForwardPassPerfModel.from_regression": ("(options_json=None)", True),
    "RustForwardPassPerfModel.max_correction_factor": ("(self, /)", False),
    "RustForwardPassPerfModel.min_correction_factor": ("(self, /)", False),
    "RustForwardPassPerfModel.tune_with_fpms": ("(self, /, iterations_json)", False),
}

GOLDENS = Path(__file__).resolve().parents[2] / "goldens" / "surface.json"
ALLOWLIST = Path(__file__).with_name("stubtest_allowlist.txt")


def _resolve(module, name: str):
    owner, _, attr = name.rpartition(".")
    target = getattr(module, owner) if owner else module
    return target, attr


@pytest.mark.parametrize("name", sorted(REFERENCE_SIGNATURES))
def test_reference_name_exists_with_its_signature(name):
    import aic._aic as native

    signature, static = REFERENCE_SIGNATURES[name]
    target, attr = _resolve(native, name)
    assert hasattr(target, attr), f"aic._aic lacks the reference's {name}"
    assert str(inspect.signature(getattr(target, attr))) == signature
    assert isinstance(inspect.getattr_static(target, attr), staticmethod) == static
    if "." not in name:
        assert attr in native.__all__


def test_listed_signatures_are_the_recorded_ones():
    """The list above covers every entry point the surface goldens record, with their text."""
    recorded = json.loads(GOLDENS.read_text(encoding="utf-8"))["signatures"]
    for name, entry in recorded.items():
        assert REFERENCE_SIGNATURES[name] == (entry["signature"], bool(entry.get("static"))), name


def test_reference_classes_are_exported_by_aic():
    import aic

    for name in ("AicEngine", "RustForwardPassPerfModel", "PerfDataNotAvailableError"):
        assert getattr(aic, name) is getattr(aic._aic, name)
    assert issubclass(aic.PerfDataNotAvailableError, RuntimeError)


def test_stubs_match_the_compiled_module(tmp_path):
    """mypy's stubtest: every runtime name is in ``_aic.pyi`` with a compatible signature and
    vice versa. Type aliases that exist only for typing are allowlisted
    (``stubtest_allowlist.txt``)."""
    try:
        import mypy.stubtest  # noqa: F401
    except ImportError:  # pragma: no cover - the test extra installs mypy
        pytest.fail("mypy is not installed: pip install -e '.[test]' (the test extra has it)")
    result = subprocess.run(
        [sys.executable, "-m", "mypy.stubtest", "aic._aic", "--ignore-disjoint-bases",
         "--allowlist", str(ALLOWLIST), "--concise"],
        capture_output=True, text=True, cwd=tmp_path, timeout=600,
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]


def test_rust_forward_pass_model_takes_json_text():
    """Spec 42 §12: the native model's prefill iteration F(2, 2048, 0, 0, 0) on Qwen3-32B tp2."""
    import aic._aic as native

    config = json.dumps({"schema_version": 1, "model_name": "Qwen/Qwen3-32B", "system_name": "h200_sxm",
                         "backend": "vllm", "backend_version": None, "tp_size": 2, "pp_size": 1})
    model = native.RustForwardPassPerfModel.from_native(config)
    assert json.loads(model.diagnostics())["readiness"] == "ready"
    fpm = {"version": 1, "scheduled_requests": {
        "num_prefill_requests": 2, "sum_prefill_tokens": 2048, "sum_prefill_kv_tokens": 0,
        "num_decode_requests": 0, "sum_decode_kv_tokens": 0}}
    assert model.estimate_forward_pass_time_ms(json.dumps(fpm)) == pytest.approx(101.23303457978317, rel=1e-9)
    regression = native.RustForwardPassPerfModel.from_regression()
    assert regression.estimate_forward_pass_time_ms(json.dumps(fpm)) is None
    assert regression.min_correction_factor() is None
    with pytest.raises(ValueError):
        native.RustForwardPassPerfModel.from_regression("not json")


def test_op_sources_report_lists_the_files_of_one_table():
    import aic._aic as native

    root = Path(native.default_systems_path())
    report = json.loads(native.resolve_op_sources_report_json(
        root, root / "data" / "h200_sxm", "vllm", "0.24.0", "gemm_perf.parquet"))
    first = report["records"][0]
    assert first["channel"] == "primary" and first["exists"]
    assert first["path"].endswith("h200_sxm/gemm/vllm/0.24.0/gemm_perf.parquet")
    assert isinstance(report["warnings"], list)
    with pytest.raises(ValueError, match="keeps its perf data"):
        native.resolve_op_sources_report_json(root, root / "no_such_dir", "vllm", "0.24.0", "gemm_perf.parquet")
