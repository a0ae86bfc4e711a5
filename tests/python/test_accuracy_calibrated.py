"""The calibrated serving estimate (ACCURACY.md): its closed form on native figures, the memory
verdict reported instead of raised, the HYBRID fallback, the row completions of the accuracy
mapping, the shipped constants (fitted by scripts/fit_calibration.py, reproducible) and the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from aic.accuracy import scoring as accuracy
from aic.cli import main
from aic.serving import estimate, load_calibration

REPO = Path(__file__).resolve().parents[2]
ROWS = {r["id"]: r for r in accuracy.load_rows(REPO / "data" / "silicon" / "calibration.csv")}
IDENTITY = {"version": 1, "groups": {}}
CONSTANTS = {"version": 1, "groups": {"h100_sxm/trtllm/agg": {
    "tpot_scale": 0.8, "tpot_overhead_ms": 2.0, "ttft_scale": 1.5, "ttft_queue": 0.5,
    "ttft_overhead_ms": 30.0}}}
AGG = dict(mode="agg", backend_name="trtllm", isl=1024, osl=256, batch_size=8, tp_size=1)


def _write_rows(path: Path, rows: list[dict]) -> Path:
    """A measured-sample CSV of ``rows`` (the calibration.csv layout)."""
    import csv

    with open(path, "w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    return path


def test_identity_constants_give_parity_tpot_and_one_request_prefill():
    parity = estimate("Qwen/Qwen3-32B", "h100_sxm", **AGG)["result"]
    out = estimate("Qwen/Qwen3-32B", "h100_sxm", calibrated=True, calibration=IDENTITY, **AGG)
    cal = out["result"]["calibration"]
    assert cal["parity_tpot"] == parity["tpot"] and cal["parity_ttft"] == parity["ttft"]
    assert out["result"]["tpot"] == pytest.approx(parity["tpot"], rel=1e-12)
    assert out["result"]["ttft"] == pytest.approx(cal["prefill_one_ms"], rel=1e-12)
    assert cal["requests_per_rank"] == 8 and cal["group"] == "" and cal["fallback"] == ""


def test_worked_example_of_the_correction():
    out = estimate("Qwen/Qwen3-32B", "h100_sxm", calibrated=True, calibration=CONSTANTS,
                   concurrency=16, **AGG)
    cal = out["result"]["calibration"]
    assert cal["group"] == "h100_sxm/trtllm/agg" and cal["requests_per_rank"] == 16
    # TTFT = 1.5 · T1 · (1 + 0.5 · 15 / 2) + 30; TPOT = 0.8 · parity + 2
    assert out["result"]["ttft"] == pytest.approx(1.5 * cal["prefill_one_ms"] * 4.75 + 30.0)
    assert out["result"]["tpot"] == pytest.approx(0.8 * cal["parity_tpot"] + 2.0)
    assert out["result"]["raw"]["tokens/s/user"] == pytest.approx(1000.0 / out["result"]["tpot"])


def test_memory_verdict_is_reported_not_raised():
    row = ROWS["qwen_qwen3_32b_qwen_qwen3_32b_h100_sxm_trtllm_agg_1024x512_c128_tp1_epnone_39"]
    assert not accuracy.predict_row(row).predicted  # parity: OOM
    p = accuracy.predict_row(row, calibrated=True)
    assert p.predicted and p.extra["memory_overruled"] is True


def test_missing_table_falls_back_to_hybrid():
    row = ROWS["2026_04_06_deepseek_r1_b200_sxm_trtllm_fp8_agg_1024x1024_c8_tp8_ep8_929"]
    assert accuracy.predict_row(row).error_class == "PerfDataNotAvailableError"
    p = accuracy.predict_row(row, calibrated=True)
    assert p.predicted and p.fallback == "HYBRID"


def test_missing_dsa_gemm_slice_is_transferred_from_a_sibling_quant():
    """GLM-5 on sglang: the DSA module tables hold gemm bfloat16 and fp8_block only. Parity
    (and the reference) cannot price an fp8 or nvfp4 row, not even in HYBRID; the calibrated
    estimate's HYBRID fallback reads the module from the fp8_block slice (xquant for fp8,
    xprofile for nvfp4)."""
    fp8 = ROWS["2026_03_25_glm_5_b200_sxm_sglang_fp8_agg_1024x1024_c4_tp8_0_ep1_0_486"]
    fp4 = ROWS["2026_04_06_glm_5_b200_sxm_sglang_fp4_agg_1024x1024_c8_tp8_ep1_1981"]
    for row in (fp8, fp4):
        assert accuracy.predict_row(row).error_class == "PerfDataNotAvailableError"
        args = accuracy.row_request(row)
        model = accuracy.model_for(args.pop("model_path"))[0]
        system = args.pop("system_name")
        with pytest.raises(Exception, match="No empirical utilisation data"):
            estimate(model, system, **{**args, "database_mode": "HYBRID"})
        p = accuracy.predict_row(row, calibrated=True)
        assert p.predicted and p.fallback == "HYBRID", p.error_msg
        assert p.extra["hybrid_priced"] == [True, True]


def test_zero_moe_width_is_dropped_and_incomplete_disagg_stays_unpredicted():
    row = ROWS["qwen3_32b_qwen3_32b_h100_sxm_trtllm_agg_4000x1000_c_tp1_epnone_2"]
    assert "moe_ep_size" in accuracy.row_request(row)
    assert "moe_ep_size" not in accuracy.row_request(row, calibrated=True)
    assert accuracy.predict_row(row, calibrated=True).predicted
    incomplete = next(r for r in ROWS.values()
                      if r["mode"] == "disagg" and not r["prefill_batch_size"])
    with pytest.raises(ValueError):
        accuracy.row_request(incomplete, calibrated=True)


def test_static_modes_are_not_calibrated():
    with pytest.raises(ValueError, match="calibrated estimate covers"):
        estimate("Qwen/Qwen3-32B", "h100_sxm", calibrated=True, **{**AGG, "mode": "static"})


def test_class_split_adds_up_to_the_figures_it_splits():
    out = estimate("Qwen/Qwen3-32B", "h100_sxm", calibrated=True, calibration=IDENTITY, **AGG)
    cal = out["result"]["calibration"]
    assert set(cal["tpot_classes"]) == {"gemm", "attention", "moe", "comm", "other"}
    assert sum(cal["tpot_classes"].values()) == pytest.approx(cal["parity_tpot"], rel=1e-9)
    assert sum(cal["prefill_classes"].values()) == pytest.approx(cal["prefill_one_ms"], rel=1e-9)
    assert cal["tpot_classes"]["moe"] == 0.0 and cal["tpot_classes"]["gemm"] > 0.0  # dense model
    assert cal["hybrid_priced"] == [False, False]


def test_class_scales_of_version_2_apply_to_the_split():
    k = {"gemm": 0.5, "attention": 2.0}
    doc = {"version": 2, "groups": CONSTANTS["groups"],
           "classes": {"h100_sxm/trtllm/agg": {"tpot": k, "ttft": k}}}
    out = estimate("Qwen/Qwen3-32B", "h100_sxm", calibrated=True, calibration=doc,
                   concurrency=16, **AGG)
    cal = out["result"]["calibration"]

    def weighted(split):
        return sum(k.get(c, 1.0) * v for c, v in split.items())

    assert out["result"]["tpot"] == pytest.approx(0.8 * weighted(cal["tpot_classes"]) + 2.0)
    assert out["result"]["ttft"] == pytest.approx(
        1.5 * weighted(cal["prefill_classes"]) * 4.75 + 30.0)


def test_hybrid_factors_apply_to_hybrid_priced_rows_only():
    row = ROWS["2026_04_06_deepseek_r1_b200_sxm_trtllm_fp8_agg_1024x1024_c8_tp8_ep8_929"]
    doc = {"version": 2, "groups": {"*/*/*": {"tpot_scale": 1.0, "tpot_overhead_ms": 1.0,
                                              "ttft_scale": 1.0, "ttft_queue": 0.0,
                                              "ttft_overhead_ms": 10.0}},
           "hybrid": {"ttft_scale": 0.5, "tpot_scale": 2.0}}
    p = accuracy.predict_row(row, calibrated=True, calibration=doc)
    assert p.fallback == "HYBRID" and p.extra["hybrid_priced"] == [True, True]
    assert p.ttft == pytest.approx(0.5 * p.extra["prefill_one_ms"] + 10.0)
    assert p.tpot == pytest.approx(2.0 * p.extra["parity_tpot"] + 1.0)
    silicon = estimate("Qwen/Qwen3-32B", "h100_sxm", calibrated=True, calibration=doc,
                       **AGG)["result"]
    assert silicon["calibration"]["hybrid_priced"] == [False, False]
    assert silicon["tpot"] == pytest.approx(silicon["calibration"]["parity_tpot"] + 1.0)


def test_bad_constants_are_refused():
    bad = {"version": 1, "groups": {"*/*/*": {**CONSTANTS["groups"]["h100_sxm/trtllm/agg"],
                                              "tpot_scale": -1.0}}}
    with pytest.raises(ValueError, match=r"tpot_scale must be a finite number in \(0, 100\], got -1"):
        estimate("Qwen/Qwen3-32B", "h100_sxm", calibrated=True, calibration=bad, **AGG)


def test_shipped_constants_have_provenance_and_every_backend():
    doc = load_calibration()
    assert doc["version"] == 2 and "fit_calibration.py" in doc["provenance"]
    assert set(doc["hybrid"]) == {"ttft_scale", "tpot_scale"}
    # the decode attention scale is one per backend, carried by every group of that backend
    for key, c in doc["classes"].items():
        assert set(c) == {"tpot"} and set(c["tpot"]) == {"attention"}
        assert c["tpot"] == doc["classes"][f"*/{key.split('/')[1]}/*"]["tpot"]
    for backend in ("trtllm", "vllm", "sglang"):
        assert f"*/{backend}/*" in doc["groups"]
    assert "*/*/*" in doc["groups"]


def test_cli_estimate_calibrated():
    res = CliRunner().invoke(main, ["estimate", "Qwen/Qwen3-32B", "--system", "h100_sxm",
                                    "--backend", "trtllm", "--mode", "agg", "--isl", "1024",
                                    "--osl", "256", "--batch", "8", "--calibrated",
                                    "--concurrency", "8", "--json"])
    assert res.exit_code == 0, res.output
    assert "calibration" in json.loads(res.output)["result"]


def test_shipped_constants_are_what_the_fit_script_produces():
    """scripts/fit_calibration.py is the only source of data/calibration/serving.json."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("fit_calibration",
                                                  REPO / "scripts" / "fit_calibration.py")
    fit = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fit)
    rows = list(ROWS.values())
    model = fit.fit(fit.features(rows))
    doc = fit.document(model, REPO / "data" / "silicon" / "calibration.csv", len(rows))
    assert doc == load_calibration()


def test_accuracy_data_matches_its_checksums():
    import hashlib

    data = REPO / "data"
    lines = (data / "SHA256SUMS.accuracy").read_text(encoding="utf-8").splitlines()
    assert len(lines) == 4
    for line in lines:
        digest, rel = line.split("  ", 1)
        assert hashlib.sha256((data / rel).read_bytes()).hexdigest() == digest, rel


def test_own_constants_file_from_every_surface(tmp_path):
    """``--calibration FILE`` (estimate, accuracy) and ``estimate(..., calibration=FILE)`` use a
    constants file of the shipped layout; a bad file is one clear error naming it."""
    good = tmp_path / "mine.json"
    good.write_text(json.dumps(CONSTANTS), encoding="utf-8")
    api = estimate("Qwen/Qwen3-32B", "h100_sxm", calibrated=True, calibration=good,
                   concurrency=16, **AGG)["result"]
    assert api["calibration"]["group"] == "h100_sxm/trtllm/agg"
    base = ["estimate", "Qwen/Qwen3-32B", "--system", "h100_sxm", "--backend", "trtllm",
            "--mode", "agg", "--isl", "1024", "--osl", "256", "--batch", "8", "--json"]
    res = CliRunner().invoke(main, base + ["--calibrated", "--concurrency", "16",
                                           "--calibration", str(good)])
    assert res.exit_code == 0, res.output
    assert json.loads(res.output)["result"]["ttft"] == pytest.approx(api["ttft"], rel=1e-12)
    res = CliRunner().invoke(main, base + ["--calibration", str(good)])
    assert res.exit_code == 2 and "--calibration needs --calibrated" in res.output
    # accuracy: the file's constants reach every row
    row = ROWS["qwen_qwen3_32b_qwen_qwen3_32b_h100_sxm_trtllm_agg_1024x256_c8_tp1_epnone_2"]
    rows = _write_rows(tmp_path / "rows.csv", [row])
    per_row = tmp_path / "out.csv"
    res = CliRunner().invoke(main, ["accuracy", "--rows", str(rows), "--calibrated",
                                    "--calibration", str(good), "--out", str(per_row), "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.output)["predicted"] == 1
    expected = accuracy.predict_row(row, calibrated=True, calibration=CONSTANTS)
    assert f"{expected.ttft:.6f}" in per_row.read_text(encoding="utf-8")
    # bad files: not JSON, unsupported version, negative constant, missing
    bad = tmp_path / "bad.json"
    for text, words in (("{", "not JSON"), ('{"version": 7, "groups": {}}', "version 7"),
                        (json.dumps({"version": 1, "groups": {"*/*/*": dict(
                            CONSTANTS["groups"]["h100_sxm/trtllm/agg"], tpot_scale=-1.0)}}),
                         "tpot_scale must be a finite number")):
        bad.write_text(text, encoding="utf-8")
        res = CliRunner().invoke(main, ["accuracy", "--rows", str(rows), "--calibrated",
                                        "--calibration", str(bad)])
        assert res.exit_code == 1 and str(bad) in res.output and words in res.output, res.output
        with pytest.raises(ValueError, match=words):
            estimate("Qwen/Qwen3-32B", "h100_sxm", calibrated=True, calibration=bad, **AGG)
    with pytest.raises(ValueError, match="cannot read the calibration constants"):
        estimate("Qwen/Qwen3-32B", "h100_sxm", calibrated=True,
                 calibration=tmp_path / "missing.json", **AGG)


def test_calibrate_command_fits_checks_and_serves_its_constants(tmp_path):
    """``aic-compile calibrate``: constants fitted on a sample (here a slice of the shipped one:
    two model families on h100 TRT-LLM), written in the shipped layout, judged by native
    calibrated estimates (fitted and leave-one-family-out), usable with ``--calibration``."""
    picked = [r for r in ROWS.values() if r["system"] == "h100_sxm" and r["backend"] == "trtllm"
              and r["mode"] == "agg" and r["model_path"] in ("Qwen/Qwen3-32B",
                                                           "meta-llama/Llama-3.1-8B-Instruct")]
    assert len({accuracy.family_of(r["model_path"]) for r in picked}) == 2 and len(picked) > 60
    rows = _write_rows(tmp_path / "mine.csv", picked)
    out = tmp_path / "constants.json"
    res = CliRunner().invoke(main, ["calibrate", "--rows", str(rows), "--out", str(out), "--cv",
                                    "--json"])
    assert res.exit_code == 0, res.output
    figures = json.loads(res.output)
    doc = json.loads(out.read_text(encoding="utf-8"))
    assert "h100_sxm/trtllm/agg" in doc["groups"] and doc["provenance"].startswith(
        f"fitted by aic-compile calibrate on mine.csv ({len(picked)} rows, sha256 ")
    assert figures["fitted"]["predicted"] == figures["cv"]["predicted"] > 0
    assert figures["fitted"]["tpot_mdape"] <= figures["cv"]["tpot_mdape"]
    # the fitted figures are the native estimates with the written constants
    again = CliRunner().invoke(main, ["accuracy", "--rows", str(rows), "--calibrated",
                                      "--calibration", str(out), "--json"])
    assert json.loads(again.output)["tpot_mdape"] == figures["fitted"]["tpot_mdape"]
    # one family cannot be cross-validated; rows that cannot be estimated cannot be fitted
    one = _write_rows(tmp_path / "one.csv", [r for r in picked if r["model_path"] == "Qwen/Qwen3-32B"])
    res = CliRunner().invoke(main, ["calibrate", "--rows", str(one), "--out", str(out), "--cv"])
    assert res.exit_code == 1 and "two model families or more" in res.output, res.output
    incomplete = [r for r in ROWS.values() if r["mode"] == "disagg" and not r["prefill_batch_size"]]
    none = _write_rows(tmp_path / "none.csv", incomplete[:3])
    res = CliRunner().invoke(main, ["calibrate", "--rows", str(none), "--out", str(out)])
    assert res.exit_code == 1 and "none of the 3 rows could be estimated" in res.output


def _measured_twins():
    """(folded agg record, record of the same run) pairs: same model, system, backend, lengths
    and measured TTFT / TPOT to 4 digits, the second not folded."""
    def key(r):
        return (r["model_path"], r["system"], r["backend"], r["isl"], r["osl"],
                f"{float(r['silicon_ttft_ms']):.4g}", f"{float(r['silicon_tpot_ms']):.4g}")

    by_key: dict = {}
    for r in ROWS.values():
        if r["mode"] == "agg":
            by_key.setdefault(key(r), []).append(r)
    return [(r, t) for r in ROWS.values() if r["mode"] == "agg" and accuracy.folded_launch(r)
            for t in by_key[key(r)] if t is not r and not accuracy.folded_launch(t)]


def test_folded_records_read_as_the_launch_their_measured_twins_record():
    """ACCURACY.md, 'Deployments that span nodes': a record that folds a k-GPU "tp k, ep k"
    launch into k x k GPUs is read, in calibrated mode only, as exactly the request of the
    record of the same run that writes the launch as it ran."""
    pairs = _measured_twins()
    assert len({r["id"] for r, _ in pairs}) >= 30
    shapes = set()
    for folded, twin in pairs:
        assert accuracy.row_request(folded, calibrated=True) == \
            accuracy.row_request(twin, calibrated=True), (folded["id"], twin["id"])
        shapes.add(tuple(folded[k] for k in ("tp_size", "attention_dp_size", "moe_tp_size",
                                             "moe_ep_size")))
    # all three shapes of the fold: tp k x k, attention DP k x k, tp = DP = k with EP k x k
    assert {s[0] for s in shapes} >= {"64", "16", "1", "4"}
    # worked example: attention DP 64 x batch 2 is the launch's DP 8 x batch 16 (128 in all)
    row = ROWS["2026_04_06_deepseek_r1_h200_sxm_trtllm_fp8_agg_1024x1024_c128_tp8_ep8_2012"]
    assert accuracy.folded_launch(row) == 8
    args = accuracy.row_request(row, calibrated=True)
    assert (args["tp_size"], args["attention_dp_size"], args["moe_tp_size"], args["moe_ep_size"],
            args["batch_size"]) == (1, 8, 1, 8, 16)
    parity = accuracy.row_request(row)  # parity mode keeps the record as the reference reads it
    assert (parity["attention_dp_size"], parity["moe_tp_size"], parity["batch_size"]) == (64, 8, 2)


def test_layouts_within_a_node_and_real_multi_node_layouts_are_not_folded():
    def row(**sizes):
        return {**{k: "" for k in accuracy.COUNT_COLUMNS}, **{k: str(v) for k, v in sizes.items()}}

    # the same shapes within one node are real layouts (a 4-GPU MoE tp 2 x EP 2)
    assert accuracy.folded_launch(row(tp_size=4, moe_tp_size=2, moe_ep_size=2)) is None
    assert accuracy.folded_launch(row(tp_size=2, attention_dp_size=2, moe_tp_size=1,
                                      moe_ep_size=4)) is None
    # wide EP over 16 GPUs, attention tp 16, attention DP 16: as recorded
    assert accuracy.folded_launch(row(tp_size=16, moe_tp_size=1, moe_ep_size=16)) is None
    assert accuracy.folded_launch(row(tp_size=1, attention_dp_size=16, moe_tp_size=1,
                                      moe_ep_size=16)) is None
    assert accuracy.folded_launch(row(tp_size=16, moe_tp_size=16, moe_ep_size=1)) is None
    disagg = row(prefill_tp_size=16, prefill_moe_tp_size=4, prefill_moe_ep_size=4,
                 decode_tp_size=8, decode_moe_ep_size=8)
    assert accuracy.folded_launch(disagg, "prefill_") == 4
    assert accuracy.folded_launch(disagg, "decode_") is None


def test_as_recorded_prices_folded_records_as_written(tmp_path):
    """`--as-recorded` (``read_folded=False``) keeps a folded record's layout: for samples whose
    multi-node rows are real wide-EP deployments; the default reads it as the launch and says
    how many rows it read so."""
    folded, twin = next((r, t) for r, t in _measured_twins() if r["backend"] == "sglang")
    args = accuracy.row_request(folded, calibrated=True, read_folded=False)
    assert args["tp_size"] == int(folded["tp_size"]) > 8
    path = _write_rows(tmp_path / "rows.csv", [folded, twin])
    runner = CliRunner()
    read = runner.invoke(main, ["accuracy", "--rows", str(path), "--calibrated", "--json"])
    kept = runner.invoke(main, ["accuracy", "--rows", str(path), "--calibrated", "--json",
                                "--as-recorded"])
    assert read.exit_code == 0 and kept.exit_code == 0, (read.output, kept.output)
    read, kept = json.loads(read.output), json.loads(kept.output)
    assert read["folded_read_as_launch"] == 1 and kept["folded_read_as_launch"] == 0
    across = accuracy.ACROSS_NODES
    # read as the launch, the folded record is priced as its twin; as written, much slower
    as_launch, as_twin = (accuracy.predict_row(r, calibrated=True) for r in (folded, twin))
    assert (as_launch.ttft, as_launch.tpot) == (as_twin.ttft, as_twin.tpot)
    as_written = accuracy.predict_row(folded, calibrated=True, read_folded=False)
    assert as_written.tpot > 1.2 * as_launch.tpot
    assert kept["by_layout"][across]["tpot_bias"] > read["by_layout"][across]["tpot_bias"]
    text = runner.invoke(main, ["accuracy", "--rows", str(path), "--calibrated"])
    assert "1 rows record a k-GPU" in text.output
    bad = runner.invoke(main, ["accuracy", "--rows", str(path), "--as-recorded"])
    assert bad.exit_code != 0 and "--as-recorded needs --calibrated" in bad.output


def test_calibrate_as_recorded_fits_the_records_as_written(tmp_path):
    """`calibrate --as-recorded`: the folded records are fitted as written (their TPOT as
    64-GPU deployments, too slow), by default as their launches."""
    picked = [r for r in ROWS.values() if r["system"] == "b200_sxm" and r["backend"] == "sglang"
              and r["mode"] == "agg" and r["model_path"] == "deepseek-ai/DeepSeek-R1"]
    assert accuracy.folded_rows(picked) >= 10
    rows = _write_rows(tmp_path / "mine.csv", picked)
    runs = {}
    for flags in ([], ["--as-recorded"]):
        out = tmp_path / f"c{len(flags)}.json"
        res = CliRunner().invoke(main, ["calibrate", "--rows", str(rows), "--out", str(out),
                                        "--json", *flags])
        assert res.exit_code == 0, res.output
        runs[bool(flags)] = json.loads(res.output)
    assert runs[False]["folded_read_as_launch"] == accuracy.folded_rows(picked)
    assert runs[True]["folded_read_as_launch"] == 0
    assert runs[False]["fitted"]["tpot_mdape"] < runs[True]["fitted"]["tpot_mdape"]
    res = CliRunner().invoke(main, ["calibrate", "--rows", str(rows), "--few-shot", "3",
                                    "--as-recorded"])
    assert res.exit_code != 0 and "drop --as-recorded" in res.output
