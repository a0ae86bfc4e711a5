"""Experiment files (spec 51 §5): building, skip rules with the YAML path and line, and the
command-line errors of the planning options."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
from conftest import native_available

from aic.serving.experiment_files import (
    ExperimentFileError,
    build_experiments,
    load_experiment_file,
    run_experiments,
)

needs_native = pytest.mark.skipif(not native_available(), reason="native module not built")

GOOD = textwrap.dedent("""\
    exps: [disagg_vllm_custom, agg_trt_tp24, missing]
    agg_trt_tp24:
      serving_mode: agg
      model_path: Qwen/Qwen3-32B
      system_name: h200_sxm
      total_gpus: 16
      agg_num_gpu_candidates: [2, 4]
      agg_tp_candidates: [2, 4]
    disagg_vllm_custom:
      serving_mode: disagg
      total_gpus: 16
      prefill_model_path: Qwen/Qwen3-32B
      prefill_system_name: h200_sxm
      prefill_backend_name: vllm
      decode_model_path: Qwen/Qwen3-32B
      decode_system_name: b200_sxm
      decode_backend_name: vllm
      decode_kvcache_quant_mode: fp8
      max_decode_workers: 4
      num_gpu_per_replica: [4, 8]
      autoscale_ttft_correction_factor: 1.5
    """)


def _write(tmp_path, text):
    path = tmp_path / "exp.yaml"
    path.write_text(text)
    return path


@needs_native
def test_experiments_in_exps_order_with_roles_and_options(tmp_path):
    data, lines = load_experiment_file(_write(tmp_path, GOOD))
    warnings: list = []
    exps = build_experiments(data, lines, warnings=warnings)
    assert [e.name for e in exps] == ["disagg_vllm_custom", "agg_trt_tp24"]
    assert any("'missing'" in w for w in warnings)
    disagg, agg = exps
    assert disagg.roles["decode"].system == "b200_sxm"
    assert disagg.roles["decode"].quant["kvcache"] == "fp8"
    assert disagg.roles["prefill"].quant["kvcache"] is None
    assert disagg.disagg["max_decode_workers"] == 4 and disagg.disagg["max_prefill_workers"] == 32
    assert disagg.disagg["autoscale_ttft_correction_factor"] == 1.5
    assert disagg.workload["ttft"] == 1000.0 and disagg.workload["tpot"] == 50.0  # exp defaults
    assert agg.roles["agg"].lists == {"num_gpu": [2, 4], "tp": [2, 4]}
    assert agg.roles["agg"].backend == "trtllm"


def test_unknown_key_names_path_and_line(tmp_path):
    path = _write(tmp_path, textwrap.dedent("""\
        bad:
          serving_mode: agg
          model_path: Qwen/Qwen3-8B
          system_name: h200_sxm
          total_gpus: 8
          agg_tp_list: [1]
        """))
    with pytest.raises(ValueError) as err:
        run_experiments(path)
    text = str(err.value)
    assert text.startswith("No valid experiments found in configuration.")
    assert "bad.agg_tp_list (line 6): unknown key 'agg_tp_list'" in text


def test_golden_unknown_key_case_is_a_value_error():
    config = {"bad": {"serving_mode": "agg", "model_path": "Qwen/Qwen3-8B",
                      "system_name": "h200_sxm", "total_gpus": 8, "agg_tp_list": [1]}}
    with pytest.raises(ValueError, match="^No valid experiments found in configuration"):
        run_experiments(config=config)


@pytest.mark.parametrize("entry, message", [
    ({"serving_mode": "disagg", "model_path": "Qwen/Qwen3-8B", "total_gpus": 8,
      "prefill_system_name": "h200_sxm"}, "Disagg mode: top-level worker fields are not used"),
    ({"serving_mode": "agg", "model_path": "Qwen/Qwen3-8B", "system_name": "h200_sxm"},
     "total_gpus is required"),
    ({"serving_mode": "agg", "model_path": "Qwen/Qwen3-8B", "system_name": "h200_sxm",
      "total_gpus": "8"}, "x.total_gpus (line 5): expected an integer >= 1, got '8'"),
    ({"serving_mode": "agg", "model_path": "Qwen/Qwen3-8B", "system_name": "h200_sxm",
      "total_gpus": 8, "agg_tp_candidates": []}, "expected a non-empty list of positive integers"),
    ({"serving_mode": "agg", "model_path": "Qwen/Qwen3-8B", "system_name": "h200_sxm",
      "total_gpus": 8, "gemm_quant_mode": "fp9"}, "unknown quant mode 'fp9'"),
    ({"serving_mode": "disagg", "prefill_model_path": "Qwen/Qwen3-8B",
      "prefill_system_name": "h200_sxm", "total_gpus": 8, "decode_cp_candidates": [2]},
     "decode CP must be 1"),
    ({"serving_mode": "disagg", "prefill_model_path": "Qwen/Qwen3-8B",
      "prefill_system_name": "h200_sxm", "total_gpus": 1}, "total_gpus must be greater than 2"),
    ({"serving_mode": "agg", "model_path": "Qwen/Qwen3-8B", "system_name": "h200_sxm",
      "total_gpus": 4, "agg_num_gpu_candidates": [8]},
     "x.agg_num_gpu_candidates (line 6): the agg candidate lists allow no parallel layout "
     "within total_gpus 4 (num_gpu [], tp [1, 2, 4, 8]"),
    ({"serving_mode": "agg", "model_path": "Qwen/Qwen3-8B", "system_name": "h200_sxm",
      "total_gpus": 8, "agg_tp_candidates": [3]}, "allow no parallel layout"),
    ({"serving_mode": "afd", "model_path": "Qwen/Qwen3-8B", "system_name": "h200_sxm",
      "total_gpus": 8}, "serving_mode must be agg or disagg"),
])
def test_invalid_entries_are_skipped_with_a_reason(tmp_path, entry, message):
    import yaml

    path = _write(tmp_path, yaml.safe_dump({"x": entry}, sort_keys=False))
    with pytest.raises(ExperimentFileError) as err:
        run_experiments(path)
    assert message in str(err.value)


def test_file_shape_errors(tmp_path):
    with pytest.raises(ValueError, match="^Provide either yaml_path or config, not both.$"):
        run_experiments("a.yaml", config={})
    with pytest.raises(ValueError, match="^Must provide either yaml_path or config.$"):
        run_experiments()
    with pytest.raises(ExperimentFileError, match="Experiment data must be a mapping"):
        run_experiments(_write(tmp_path, "- a\n- b\n"))
    with pytest.raises(ExperimentFileError, match=r"Error loading experiment YAML file .*line 2"):
        run_experiments(_write(tmp_path, "a: [1,\nb: }\n"))
    with pytest.raises(ExperimentFileError, match="Error loading experiment YAML file"):
        run_experiments(tmp_path / "absent.yaml")


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "aic.cli", *args], capture_output=True,
                          text=True)


@pytest.mark.parametrize("args, message", [
    (["sweep", "Qwen/Qwen3-8B", "-s", "h200_sxm"], "sweep needs either --gpus"),
    (["sweep", "Qwen/Qwen3-8B", "-s", "h200_sxm", "--gpus", "8", "--target-request-rate", "2"],
     "--gpus and a load target"),
    (["sweep", "Qwen/Qwen3-8B", "-s", "h200_sxm", "--target-request-rate", "nan"],
     "--target-request-rate: the load target must be a positive finite number"),
    (["sweep", "Qwen/Qwen3-8B", "-s", "h200_sxm", "--gpus", "8", "--transfer-policy", "x"],
     "valid kinds: xop, xprofile, xquant, xshape"),
    (["sweep", "Qwen/Qwen3-8B", "-s", "h200_sxm", "--gpus", "8", "--serving-mode", "afd"],
     "--serving-mode: 'afd' is not one of auto, agg, disagg"),
    (["sweep", "Qwen/Qwen3-8B", "-s", "h200_sxm", "--gpus", "8", "--nextn", "two"],
     "--nextn: expected a non-negative integer or auto"),
    (["sweep", "Qwen/Qwen3-8B", "-s", "h200_sxm", "--gpus", "8",
      "--free-gpu-memory-fraction", "1.5"], "--free-gpu-memory-fraction: expected a number in"),
    (["recommend", "Qwen/Qwen3-8B", "-s", "h200_sxm"], "recommend needs a load target"),
    (["recommend", "Qwen/Qwen3-8B", "-s", "h200_sxm", "--target-concurrency", "2",
      "--target-request-rate", "1"], "give one load target, not both"),
])
def test_cli_option_errors_are_one_line(args, message):
    out = _cli(*args)
    assert out.returncode == 1
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: ") and message in lines[0], out.stderr


def test_cli_exp_error_names_the_yaml_line(tmp_path):
    path = _write(tmp_path, "e:\n  serving_mode: agg\n  total_gpus: 8\n  model_path: m\n"
                            "  system_name: h200_sxm\n  bogus_key: 1\n")
    out = _cli("exp", str(path))
    assert out.returncode == 1 and "Traceback" not in out.stderr
    assert "e.bogus_key (line 6): unknown key 'bogus_key'" in out.stderr


@needs_native
def test_shipped_example_file_builds():
    from conftest import REPO

    path = REPO / "examples" / "experiments" / "agg_trt_vs_hetero_disagg_vllm.yaml"
    data, lines = load_experiment_file(path)
    exps = build_experiments(data, lines)
    assert [e.name for e in exps] == ["agg_trt_tp24", "disagg_vllm_custom",
                                      "disagg_vllm_b200_decode"]
    assert exps[2].roles["decode"].system == "b200_sxm"


@needs_native
def test_a_bad_transfer_policy_is_the_experiments_outcome():
    """As in the reference, the policy fails each experiment when it loads its database (spec
    51 §6.2): nothing feasible, with the policy error named per experiment."""
    from aic.serving import NoFeasibleConfigError
    from aic.serving.planning import plan_sweep

    config = {"x": {"serving_mode": "agg", "model_path": "Qwen/Qwen3-8B",
                    "system_name": "h200_sxm", "total_gpus": 1, "transfer_policy": "bogus"}}
    with pytest.raises(NoFeasibleConfigError, match="x: ValueError: x.transfer_policy: unknown "
                                                    "transfer kind/preset 'bogus'"):
        run_experiments(config=config)
    with pytest.raises(NoFeasibleConfigError, match="^No feasible configurations found for the "
                                                    "given parameters. .agg: ValueError: unknown "
                                                    "transfer kind"):
        plan_sweep("Qwen/Qwen3-8B", 1, "h200_sxm", "vllm", database_mode="HYBRID",
                   transfer_policy="bogus")


@needs_native
def test_a_version_that_does_not_exist_is_refused_naming_the_field():
    from aic.serving.planning import PlanningError

    config = {"x": {"serving_mode": "disagg", "total_gpus": 8,
                    "prefill_model_path": "Qwen/Qwen3-8B", "prefill_system_name": "h200_sxm",
                    "backend_name": "vllm", "backend_version": "9.9"}}
    with pytest.raises(PlanningError, match=r"^x.backend_version: system h200_sxm has no vllm "
                                            r"database version '9.9' \(SILICON mode\)"):
        run_experiments(config=config)


@needs_native
def test_cli_recommend_and_exp_print_one_winner_line():
    from conftest import REPO

    out = _cli("recommend", "Qwen/Qwen3-8B", "--system", "h100_sxm", "--target-concurrency",
               "200", "--isl", "2000", "--osl", "500", "--ttft", "1000", "--tpot", "20")
    assert out.returncode == 0, out.stderr
    # spec 51 §4.5 rec_conc_q8_h100_trt_hybrid: both modes need 4 GPUs, agg wins the tie.
    assert out.stdout.strip().splitlines()[-1] == ("chosen: agg (4 GPUs carry the load), tied "
                                                   "with disagg (4 GPUs; agg wins ties)")
    example = REPO / "examples" / "experiments" / "agg_trt_vs_hetero_disagg_vllm.yaml"
    out = _cli("exp", str(example))
    assert out.returncode == 0, out.stderr
    lines = out.stdout.strip().splitlines()
    assert [line for line in lines if line.startswith("chosen:")] == [lines[-1]]
    assert lines[-1].startswith("chosen: disagg_vllm_b200_decode (")
    assert "ahead of disagg_vllm_custom (1090.375)" in lines[-1]
