"""``aic.export.dynamo.export_dynamo`` and ``aic-compile export dynamo``: the files, that every
number in them is the engine's, and the one-line errors for bad input (without Dynamo; the
agreement with Dynamo's own replay is ``test_dynamo_export.py``)."""

from __future__ import annotations

import json
import os

import pytest
from click.testing import CliRunner
from conftest import requires_replay

from aic.export.npz import read_npz

pytestmark = requires_replay()

MODEL = "Qwen/Qwen3-32B"
TIMING_KEYS = {"prefill_isl", "prefill_ttft_ms", "decode_active_kv_tokens",
               "decode_context_length", "decode_itl"}
ENGINE_KEYS = {"backend", "num_gpu_blocks", "block_size", "max_num_seqs",
               "max_num_batched_tokens", "enable_prefix_caching", "enable_chunked_prefill",
               "timing_model"}


def _deployment(**layout):
    from aic.serving.replay import layout_deployment

    return layout_deployment(MODEL, "h200_sxm", "vllm", **{"tp_size": 2, **layout})


def _export(out, deployment=None, isl=512, osl=64, **kw):
    from aic.export.dynamo import export_dynamo
    from aic.serving.plan import Workload

    return export_dynamo(deployment or _deployment(), Workload(isl=isl, osl=osl), out, **kw)


def _cli(*args):
    from aic.cli import main

    return CliRunner().invoke(main, ["export", "dynamo", *[str(a) for a in args]])


def _engine(deployment, role):
    from aic import paths
    from aic._native import native
    from aic.export.dynamo import _compile_roles

    spec = _compile_roles(deployment, paths.systems_dir(None))[role]["spec"]
    mod = native()
    return mod.AicEngine.from_spec(bytes(mod.encode_spec(spec)))


def _ascending(values):
    return all(b > a for a, b in zip(values, values[1:]))


def test_agg_export_writes_the_mocker_and_planner_files(tmp_path):
    out = tmp_path / "agg"
    result = _export(out)
    assert sorted(result.files) == sorted([
        "engine_args.json", "export.json", "timing.npz", "profile/prefill_raw_data.json",
        "profile/decode_raw_data.json", "profile/selected_prefill_interpolation/raw_data.npz",
        "profile/selected_decode_interpolation/raw_data.npz"])
    assert sorted(os.listdir(out)) == ["engine_args.json", "export.json", "profile",
                                       "timing.npz"]
    assert not [p for p in os.listdir(tmp_path) if p != "agg"]  # no temporary folder left

    args = json.loads((out / "engine_args.json").read_text())
    engine = args["engine"]
    assert set(engine) == ENGINE_KEYS  # agg: no worker_type
    assert engine["timing_model"] == {"type": "external", "provider": "dynamo_profile",
                                      "config": {"path": str(out / "timing.npz")}}
    assert os.path.isabs(engine["timing_model"]["config"]["path"])
    assert (args["dp_size"], args["tensor_parallel_size"]) == (1, 2)
    setup = result.setups["agg"]
    assert (engine["num_gpu_blocks"], engine["block_size"]) == (setup.num_gpu_blocks, 16)

    table = read_npz(out / "timing.npz")
    assert set(table) == TIMING_KEYS
    n_active, n_context = table["decode_itl"][0]
    assert table["decode_active_kv_tokens"][0] == (n_active,)
    assert table["decode_context_length"][0] == (n_context,)
    for name in ("prefill_isl", "decode_active_kv_tokens", "decode_context_length"):
        assert _ascending(table[name][1]), name
    assert all(v > 0 for v in table["decode_itl"][1])


def test_every_number_is_the_engines(tmp_path):
    """Prefill points are aic's prefill of b requests; a decode point (b·c, c) at a workload
    length is aic's decode step of b requests at sequence length c; the KV blocks are those of
    aic's replay of the same deployment."""
    from aic.serving.plan import Workload
    from aic.serving.replay import replay_deployment

    deployment = _deployment()
    out = tmp_path / "agg"
    _export(out, deployment, isl=512, osl=64)
    table = {k: v[1] for k, v in read_npz(out / "timing.npz").items()}
    engine = _engine(deployment, "agg")
    assert table["prefill_isl"][:3] == [0.0, 512.0, 1024.0]
    assert table["prefill_ttft_ms"][0] == 0.0
    assert table["prefill_ttft_ms"][1] == engine.predict_prefill_latency(1, 512, 0)
    assert table["prefill_ttft_ms"][2] == engine.predict_prefill_latency(2, 512, 0)
    contexts = table["decode_context_length"]
    actives = table["decode_active_kv_tokens"]
    width = len(contexts)
    for batch, length in ((1, 513), (4, 545), (256, 576)):
        i, j = actives.index(batch * length), contexts.index(length)
        assert table["decode_itl"][i * width + j] == \
            engine.decode_step_latency(batch, length - 1, 0, 1.0)
    replayed = replay_deployment(deployment, Workload(isl=512, osl=64, concurrency=1),
                                 requests=1)
    engine_args = json.loads((out / "engine_args.json").read_text())["engine"]
    assert engine_args["num_gpu_blocks"] == replayed.roles[0]["kv"]["num_gpu_blocks"]
    assert engine_args["max_num_seqs"] == replayed.roles[0]["max_num_seqs"]


def test_a_cached_prefix_prices_only_the_new_tokens(tmp_path):
    """With ``prefix`` cached tokens per request the prefill axis counts new tokens
    (``b · (isl − prefix)``), each point priced as aic's prefill of ``isl`` with ``prefix``
    cached (the mocker queries its prefill with the new tokens of a pass)."""
    from aic.export.dynamo import export_dynamo
    from aic.serving.plan import Workload

    deployment = _deployment()
    out = tmp_path / "prefix"
    export_dynamo(deployment, Workload(isl=2048, osl=64, prefix=1536), out)
    table = {k: v[1] for k, v in read_npz(out / "timing.npz").items()}
    engine = _engine(deployment, "agg")
    assert table["prefill_isl"][:3] == [0.0, 512.0, 1024.0]
    assert table["prefill_ttft_ms"][1] == engine.predict_prefill_latency(1, 2048, 1536)
    assert table["prefill_ttft_ms"][2] == engine.predict_prefill_latency(2, 2048, 1536)
    # 8192-token passes hold 16 such requests: the axis reaches one more
    assert table["prefill_isl"][-1] == 17 * 512.0


def test_planner_profile_arrays(tmp_path):
    out = tmp_path / "agg"
    result = _export(out)
    setup = result.setups["agg"]
    prefill = read_npz(out / "profile/selected_prefill_interpolation/raw_data.npz")
    decode = read_npz(out / "profile/selected_decode_interpolation/raw_data.npz")
    assert set(prefill) == {"prefill_isl", "prefill_ttft", "prefill_thpt_per_gpu"}
    isl, ttft, thpt = (prefill[k][1] for k in ("prefill_isl", "prefill_ttft",
                                               "prefill_thpt_per_gpu"))
    assert len(isl) == len(ttft) == len(thpt) >= 3 and 512.0 in isl
    for n, t, p in zip(isl, ttft, thpt):
        assert p == pytest.approx(n / t / 2 * 1000.0, rel=1e-12)  # 2 GPUs, no attention DP
    assert set(decode) == {"x_kv_usage", "y_context_length", "z_itl", "z_thpt_per_gpu",
                           "max_kv_tokens"}
    assert decode["max_kv_tokens"] == ((1,), [setup.capacity_tokens])
    n = len(decode["z_itl"][1])
    assert all(len(decode[k][1]) == n for k in ("x_kv_usage", "y_context_length",
                                                "z_thpt_per_gpu"))
    assert all(0 < x <= 1 for x in decode["x_kv_usage"][1])
    assert 512 + 64 / 2 in decode["y_context_length"][1]
    # the ConfigMap form holds the same numbers
    as_json = json.loads((out / "profile/decode_raw_data.json").read_text())
    assert as_json["z_itl"] == decode["z_itl"][1]
    assert as_json["max_kv_tokens"] == setup.capacity_tokens
    assert json.loads((out / "profile/prefill_raw_data.json").read_text())["prefill_ttft"] == ttft


def test_disagg_export_has_one_config_per_role(tmp_path):
    deployment = _deployment(mode="disagg", prefill_tp_size=1, decode_tp_size=2,
                             prefill_workers=2)
    out = tmp_path / "disagg"
    _export(out, deployment)
    for role in ("prefill", "decode"):
        args = json.loads((out / f"{role}_engine_args.json").read_text())
        assert args["engine"]["worker_type"] == role
        assert args["engine"]["timing_model"]["config"]["path"] == str(out / f"{role}_timing.npz")
        assert set(read_npz(out / f"{role}_timing.npz")) == TIMING_KEYS
    manifest = json.loads((out / "export.json").read_text())
    assert manifest["workers"] == {"prefill": 2, "decode": 1}
    assert manifest["deployment"]["mode"] == "disagg"
    assert not (out / "engine_args.json").exists()


def test_attention_dp_sets_the_dp_size(tmp_path):
    from aic.serving.replay import layout_deployment

    deployment = layout_deployment("Qwen/Qwen3-30B-A3B", "h200_sxm", "vllm", tp_size=1,
                                   attention_dp_size=2, moe_tp_size=1, moe_ep_size=2)
    out = tmp_path / "moe"
    result = _export(out, deployment)
    args = json.loads((out / "engine_args.json").read_text())
    assert (args["dp_size"], args["tensor_parallel_size"]) == (2, 1)
    max_kv = read_npz(out / "profile/selected_decode_interpolation/raw_data.npz")["max_kv_tokens"]
    assert max_kv[1] == [2 * result.setups["agg"].capacity_tokens]


def test_out_folder_rules(tmp_path):
    from aic.export.dynamo import ExportError

    a_file = tmp_path / "file"
    a_file.write_text("x")
    with pytest.raises(ExportError, match="is a file, not a folder"):
        _export(a_file)
    full = tmp_path / "full"
    full.mkdir()
    (full / "keep.txt").write_text("x")
    with pytest.raises(ExportError, match="not empty.*--force"):
        _export(full)
    assert os.listdir(full) == ["keep.txt"]
    _export(full, force=True)
    assert "keep.txt" not in os.listdir(full) and (full / "engine_args.json").exists()
    empty = tmp_path / "empty"
    empty.mkdir()
    _export(empty)
    assert (empty / "timing.npz").exists()
    with pytest.raises(ExportError, match="does not exist"):
        _export(tmp_path / "no" / "such" / "out")
    leftovers = [p for p in os.listdir(tmp_path) if p.startswith(".")]
    assert not leftovers


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into a read-only folder")
def test_unwritable_parent_is_refused(tmp_path):
    from aic.export.dynamo import ExportError

    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        with pytest.raises(ExportError, match="not writable"):
            _export(locked / "out")
    finally:
        locked.chmod(0o700)


def test_lengths_above_the_max_length_and_no_kv_are_refused(tmp_path):
    from aic.export.dynamo import ExportError
    from aic.serving.replay import layout_deployment

    with pytest.raises(ExportError, match=r"isl \+ osl = 40000 \+ 2000 = 42000 is above .* "
                                          r"maximum length 40960"):
        _export(tmp_path / "long", isl=40000, osl=2000)
    big = layout_deployment("Qwen/Qwen3-235B-A22B", "h200_sxm", "vllm", tp_size=1,
                            moe_ep_size=1)
    with pytest.raises(ExportError, match="KV cache .*no KV budget"):
        _export(tmp_path / "big", deployment=big)
    assert not os.listdir(tmp_path)  # nothing written, no temporary folder


def test_cli_writes_the_export_and_prints_a_summary(tmp_path):
    out = tmp_path / "cli"
    done = _cli(MODEL, "-s", "h200_sxm", "-b", "vllm", "--tp", 2, "--isl", 512, "--osl", 64,
                "--out", out)
    assert done.exit_code == 0, done.output
    assert "Dynamo 1.6.1 files" in done.output and "wrote engine_args.json" in done.output
    done = _cli(MODEL, "-s", "h200_sxm", "-b", "vllm", "--tp", 2, "--isl", 512, "--osl", 64,
                "--out", out, "--force", "--json")
    assert done.exit_code == 0, done.output
    assert json.loads(done.output)["roles"]["agg"]["block_size"] == 16


def test_cli_takes_a_deployment_file(tmp_path):
    deployment = _deployment(mode="disagg", prefill_workers=2)
    path = tmp_path / "dep.json"
    path.write_text(deployment.to_json())
    done = _cli("--deployment", path, "--isl", 512, "--osl", 64, "--out", tmp_path / "out")
    assert done.exit_code == 0, done.output
    assert json.loads((tmp_path / "out" / "export.json").read_text())["workers"]["prefill"] == 2


@pytest.mark.parametrize("args, message", [
    (("--deployment", "DEP", MODEL, "--isl", 8, "--osl", 8, "--out", "OUT"),
     "--deployment gives the whole layout; drop MODEL"),
    (("--deployment", "DEP", "--tp", 4, "--isl", 8, "--osl", 8, "--out", "OUT"),
     "drop tp_size"),
    (("--deployment", "missing.json", "--isl", 8, "--osl", 8, "--out", "OUT"),
     "cannot read 'missing.json'"),
    (("--deployment", "BAD", "--isl", 8, "--osl", 8, "--out", "OUT"),
     "roles.agg.parallel.tp: expected an integer >= 1"),
    ((MODEL, "--isl", 8, "--osl", 8, "--out", "OUT"), "give --system, --backend"),
    ((MODEL, "-s", "h200_sxm", "-b", "vllm", "--isl", 8, "--osl", 8, "--prefix", 8, "--out",
      "OUT"), "prefix: the cached prefix (8) must be shorter than the prompt"),
    ((MODEL, "-s", "h200_sxm", "-b", "vllm", "--tp", 2, "--isl", 40000, "--osl", 2000, "--out",
      "OUT"), "above the deployment's maximum length 40960"),
    ((MODEL, "-s", "h200_sxm", "-b", "vllm", "--tp", 2, "--isl", 8, "--osl", 8, "--out",
      "FILE"), "is a file, not a folder"),
    ((MODEL, "-s", "h200_sxm", "-b", "vllm", "--tp", 3, "--isl", 8, "--osl", 8, "--out", "OUT"),
     "Error:"),
])
def test_cli_errors_are_one_line(tmp_path, args, message):
    dep = tmp_path / "dep.json"
    dep.write_text(_deployment().to_json())
    bad = tmp_path / "bad.json"
    bad.write_text(_deployment().to_json().replace('"tp": 2', '"tp": 0'))
    a_file = tmp_path / "a_file"
    a_file.write_text("x")
    names = {"DEP": dep, "BAD": bad, "OUT": tmp_path / "out", "FILE": a_file}
    done = _cli(*[names.get(a, a) if isinstance(a, str) else a for a in args])
    assert done.exit_code != 0
    assert "Traceback" not in done.output
    assert message in done.output, done.output
    assert not (tmp_path / "out").exists()
