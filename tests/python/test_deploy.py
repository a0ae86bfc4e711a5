"""The deployment generator (aic.deploy, spec 60): the rule layer on the spec's worked examples,
the §16 corrections, option checks, the atomic writer, and the validity of everything it
writes — every YAML parses, every shell script (files and the scripts embedded in manifests)
passes ``bash -n`` and ``shellcheck`` with no error, and the Dynamo manifests have the structure
a DynamoGraphDeployment needs.

``shellcheck`` is a Debian package; without it the script checks skip, unless
``AIC_REQUIRE_SHELLCHECK=1`` (scripts/test-all.sh sets it), where a missing shellcheck fails.
"""

from __future__ import annotations

import csv
import itertools
import json
import os
import shutil
import subprocess

import pytest
import yaml
from conftest import native_available

from aic.deploy import DeployError, GeneratorOptions
from aic.deploy.bench import concurrency_list
from aic.deploy.params import pick_params, worker_counts
from aic.deploy.pick_files import FileContent, pick_files
from aic.deploy.rules import apply_rules, ceil_to, cuda_graph_sizes
from aic.deploy.writer import dump_csv, render, write_tree
from aic.serving.plan import Deployment, Parallelism, QuantModes, Role, Workload

BF16 = QuantModes(gemm="bfloat16", kvcache="bfloat16", fmha="bfloat16", moe="bfloat16",
                  comm="half")


def _role(system, backend, tp=1, pp=1, dp=1, moe_tp=1, moe_ep=1, workers=1, bs=None):
    return Role(system, backend, parallel=Parallelism(tp, pp, dp, moe_tp, moe_ep), quant=BF16,
                workers=workers, batch_size=bs)


def agg(model, system, backend, bs, **par):
    return Deployment(model, "agg", {"agg": _role(system, backend, bs=bs, **par)})


def disagg(model, system, backend, prefill: dict, decode: dict, nextn=0):
    return Deployment(model, "disagg", {"prefill": _role(system, backend, **prefill),
                                         "decode": _role(system, backend, **decode)},
                      nextn=nextn, nextn_accepted=0.8 if nextn else None)


def pick(deployment, isl, osl, total, *, prefix=0, is_moe=False, **options):
    opts = GeneratorOptions.create(**options)
    return apply_rules(pick_params(deployment, Workload(isl=isl, osl=osl, prefix=prefix,
                                                        ttft=100.0, tpot=10.0),
                                   total_gpus=total, is_moe=is_moe, options=opts))


def flag_string(text: str, flag: str) -> str:
    tokens = text.split()
    return tokens[tokens.index(flag) + 1]


# ------------------------------------------------------------------------------ rules (§4, §14)


def test_cuda_graph_list_and_ceil_examples():
    """Spec 60 §4.3: L(bs), window [bs-8, bs+8]; bs <= 8 starts at 1. 58 entries for bs > 8
    (the spec says 57; the goldens' decode lists have 41 + 17 = 58)."""
    sizes = cuda_graph_sizes(320)
    assert len(sizes) == 58 and sizes[:16] == list(range(1, 17))
    assert sizes[-17:] == list(range(312, 329)) and sizes[-18] == 512
    assert cuda_graph_sizes(4)[-12:] == list(range(1, 13))
    assert ceil_to(2500, 32) == 2528 and ceil_to(2624, 32) == 2624


def test_bench_concurrency_examples():
    """Spec 60 §8.2: E = 224, 384 and 4."""
    assert concurrency_list(224) == [1, 2, 8, 16, 32, 64, 128, 212, 224, 235]
    assert concurrency_list(384)[-3:] == [364, 384, 403]
    assert concurrency_list(4) == [1, 2, 3, 4, 8, 16, 32, 64, 128]
    assert concurrency_list(0) == [1, 2, 8, 16, 32, 64, 128]


def test_worker_counts_fill_the_budget():
    """Spec 60 §4.1 examples: tp4 on 8 GPUs -> 2 workers; 4 x tp1 P + 1 x tp4 D -> 1 replica."""
    assert worker_counts(agg("m", "h200_sxm", "vllm", 96, tp=4), 8) == {"agg": 2}
    assert worker_counts(agg("m", "h200_sxm", "vllm", 96, dp=2), 8) == {"agg": 4}
    d = disagg("m", "h200_sxm", "vllm", {"workers": 4, "bs": 1}, {"tp": 4, "bs": 224})
    assert worker_counts(d, 8) == {"prefill": 4, "decode": 1}
    assert worker_counts(d, 16) == {"prefill": 8, "decode": 2}


def test_e1_vllm_agg_and_disagg_limits():
    """Spec 60 §14 E1 (Qwen3-32B, h200, vLLM, 8 GPUs, isl 4000, osl 1000)."""
    p = pick(agg("Qwen/Qwen3-32B", "h200_sxm", "vllm", 96, tp=4), 4000, 1000, 8)
    r = p.roles["agg"]
    assert (p.workers, r["max_seq_len"], r["max_batch_size"], r["max_num_tokens"]) == (
        {"agg": 2}, 6500, 512, 6012)
    assert p.estimated_concurrency == 192
    p = pick(disagg("Qwen/Qwen3-32B", "h200_sxm", "vllm", {"workers": 4, "bs": 1},
                    {"tp": 4, "bs": 224}), 4000, 1000, 8)
    assert p.roles["prefill"]["max_batch_size"] == 1
    assert p.roles["prefill"]["max_num_tokens"] == 5500
    assert (p.roles["decode"]["max_batch_size"], p.roles["decode"]["max_num_tokens"]) == (512, 512)
    assert "max_seq_len" not in p.roles["decode"] and p.estimated_concurrency == 224
    big = pick(agg("m", "h200_sxm", "vllm", 600, tp=1), 100, 100, 1)
    assert big.roles["agg"]["max_batch_size"] == 1200  # 2 x bs at and above 512


def test_e2_trtllm_prefix_limits_and_engine_text():
    """Spec 60 §14 E2: TRT-LLM, prefix 500 (router on, block reuse), no 512 floor."""
    p = pick(agg("Qwen/Qwen3-8B", "h200_sxm", "trtllm", 96), 2000, 500, 4, prefix=500)
    r = p.roles["agg"]
    assert (r["max_batch_size"], r["max_num_tokens"], p.enable_router) == (96, 2624, True)
    assert r["cuda_graph_batch_sizes"][-17:] == list(range(88, 105))
    files = pick_files(p)
    cfg = files["agg_config.yaml"].data
    assert cfg["kv_cache_config"]["enable_block_reuse"] is True
    assert "cache_transceiver_config" not in cfg and cfg["disable_overlap_scheduler"] is False
    p = pick(disagg("Qwen/Qwen3-8B", "h200_sxm", "trtllm", {"workers": 2, "bs": 1},
                    {"tp": 2, "bs": 320}), 2000, 500, 4, prefix=500)
    pre = pick_files(p)["prefill_config.yaml"].data
    dec = pick_files(p)["decode_config.yaml"].data
    assert (pre["max_num_tokens"], pre["cache_transceiver_config"]["max_tokens_in_buffer"]) == (
        2528, 3008)
    assert pre["cuda_graph_config"] == {"enable_padding": False,
                                        "batch_sizes": [1, 2, 4, 8, 16, 32, 64, 128, 256]}
    assert pre["disable_overlap_scheduler"] is True
    assert (dec["tensor_parallel_size"], dec["max_batch_size"], dec["max_num_tokens"]) == (
        2, 320, 320)
    script = pick_files(p)["k8s_deploy.yaml"].data["spec"]["services"][
        "TRTLLMPrefillWorker"]["extraPodSpec"]["mainContainer"]["args"][0]
    assert ("  free_gpu_memory_fraction: 0.8  # Fraction of GPU memory usable for KV-cache"
            in script.split("\n"))
    assert "  batch_sizes: [1,2,4,8,16,32,64,128,256]" in script.split("\n")
    assert "args+=(--publish-events-and-metrics)" in script


def test_e3_sglang_attention_dp_moe_gpus_are_the_rows():
    """Spec 60 §16.1 (E3): SGLang MoE tp1 dp2 ep2 -> engine tp 2, dp 2, but 2 GPUs a worker,
    4 workers on one node; the disagg decode tp1 dp4 moe_tp2 ep2 -> 4 GPUs, no multinode."""
    p = pick(agg("Qwen/Qwen3-30B-A3B", "b200_sxm", "sglang", 176, dp=2, moe_ep=2), 2048, 512, 8,
             is_moe=True)
    files = pick_files(p)
    worker = files["k8s_deploy.yaml"].data["spec"]["services"]["SGLangWorker"]
    assert worker["replicas"] == 4 and worker["resources"]["limits"]["gpu"] == "2"
    script = worker["extraPodSpec"]["mainContainer"]["args"][0]
    assert "--tensor-parallel-size 2 --pipeline-parallel-size 1 --data-parallel-size 2" in script
    assert "--moe-runner-backend deepep_moe" in script and "--enable-dp-attention" in script
    assert sorted(k for k in files if k.startswith("run_")) == ["run_0.sh"]
    lines = files["run_0.sh"].data.split("\n")
    assert "AGG_GPU=2" in lines and "AGG_WORKERS=4" in lines
    p = pick(disagg("Qwen/Qwen3-30B-A3B", "b200_sxm", "sglang", {"workers": 4, "bs": 1},
                    {"dp": 4, "moe_tp": 2, "moe_ep": 2, "bs": 296}), 2048, 512, 8, is_moe=True)
    files = pick_files(p)
    decode = files["k8s_deploy.yaml"].data["spec"]["services"]["SGLangDecodeWorker"]
    assert decode["resources"]["limits"]["gpu"] == "4" and "multinode" not in decode
    assert files["k8s_deploy.yaml"].kind == "yaml"  # no ComputeDomain document
    lines = files["run_0.sh"].data.split("\n")
    assert {"PREFILL_WORKERS=4", "DECODE_WORKERS=1", "DECODE_GPU=4",
            "DECODE_GPU_OFFSET=4"} <= set(lines)
    assert p.estimated_concurrency == 296


def test_a_worker_larger_than_a_node_gets_multinode_and_a_compute_domain():
    """Spec 60 §6.5 still applies to a worker whose (corrected) GPU count exceeds 8."""
    p = pick(agg("Qwen/Qwen3-30B-A3B", "b200_sxm", "trtllm", 64, tp=16, moe_ep=16), 1000, 100,
             16, is_moe=True)
    files = pick_files(p)
    docs = files["k8s_deploy.yaml"].data
    worker = docs[0]["spec"]["services"]["TRTLLMWorker"]
    assert worker["multinode"] == {"nodeCount": 2}
    assert docs[1]["kind"] == "ComputeDomain"
    assert docs[1]["spec"]["channel"]["resourceClaimTemplate"]["name"] == (
        "dynamo-agg-compute-domain-channel")
    assert sorted(k for k in files if k.startswith("run_")) == ["run_0.sh"]


def test_e6_vllm_mtp_flags():
    """Spec 60 §14 E6: the speculative config is one token, on every role."""
    p = pick(disagg("Qwen/Qwen3.5-27B", "b200_sxm", "vllm", {"workers": 2, "bs": 1},
                    {"tp": 2, "bs": 376}, nextn=1), 2000, 500, 4)
    services = pick_files(p)["k8s_deploy.yaml"].data["spec"]["services"]
    for name in ("VllmPrefillWorker", "VllmDecodeWorker"):
        args = services[name]["extraPodSpec"]["mainContainer"]["args"]
        i = args.index("--speculative-config")
        assert args[i + 1] == '{"method": "mtp", "num_speculative_tokens": 1}'
        assert args.index("--disaggregation-mode") > i


def test_cluster_options_e4():
    """Spec 60 §14 E4: Dynamo 1.0.0, namespace, model cache, ib transport, pull secret."""
    p = pick(agg("Qwen/Qwen3-8B", "h100_sxm", "trtllm", 128, tp=2), 1024, 256, 4,
             dynamo_version="1.0.0", namespace="bench", model_cache="model-pvc:/models:qwen3-8b",
             transport="ib", image_pull_secret="ngc-secret")
    files = pick_files(p)
    dgd = files["k8s_deploy.yaml"].data
    assert dgd["metadata"] == {"name": "dynamo-agg", "namespace": "bench"}
    worker = dgd["spec"]["services"]["TRTLLMWorker"]
    pod = worker["extraPodSpec"]
    assert pod["volumes"][0] == {"name": "model-cache",
                                 "persistentVolumeClaim": {"claimName": "model-pvc"}}
    assert pod["imagePullSecrets"] == [{"name": "ngc-secret"}] and "tolerations" not in pod
    assert pod["mainContainer"]["image"] == "nvcr.io/nvidia/ai-dynamo/tensorrtllm-runtime:1.0.0"
    assert worker["envs"] == [{"name": "HF_HOME", "value": "/models/qwen3-8b"}]
    assert [e["name"] for e in pod["mainContainer"]["env"]] == [
        "NCCL_CUMEM_ENABLE", "UCX_MEMTYPE_CACHE", "UCX_TLS", "UCX_CUDA_IPC_ENABLE_MNNVL",
        "UCX_LOG_LEVEL", "NIXL_LOG_LEVEL"]
    job = files["k8s_bench.yaml"].data
    assert job["metadata"]["namespace"] == "bench"
    assert "http://dynamo-agg-frontend.bench.svc.cluster.local:8000" in (
        job["spec"]["template"]["spec"]["containers"][0]["args"][0])


def test_without_namespace_the_bench_job_has_none():
    """Spec 60 §16.2: no ``None`` namespace; the frontend by its short name."""
    job = pick_files(pick(agg("m", "h200_sxm", "vllm", 8), 100, 10, 1))["k8s_bench.yaml"].data
    assert "namespace" not in job["metadata"]
    script = job["spec"]["template"]["spec"]["containers"][0]["args"][0]
    assert "-u http://dynamo-agg-frontend:8000 " in script and "None" not in script


def test_llmd_helm_and_kustomize():
    """Spec 60 §9, §10 (E5)."""
    d = disagg("Qwen/Qwen3-32B", "h200_sxm", "vllm", {"workers": 2, "bs": 1}, {"tp": 2, "bs": 136})
    values = pick_files(pick(d, 2000, 500, 4, target="llm-d-helm"))["llm-d-values.yaml"].data
    assert values["decode"]["parallelism"]["tensor"] == 2
    assert values["prefill"]["replicas"] == 2
    assert values["prefill"]["containers"][0]["ports"][0]["containerPort"] == 8000
    assert "--disaggregation-mode" not in values["decode"]["containers"][0]["args"]
    assert values["modelArtifacts"]["labels"]["llm-d.ai/model"] == "Qwen_Qwen3_32B"
    files = pick_files(pick(d, 2000, 500, 4, target="llm-d-kustomize"))
    assert files["kustomization.yaml"].data["patches"] == [{"path": "patch-decode.yaml"},
                                                          {"path": "patch-prefill.yaml"}]
    args = files["patch-prefill.yaml"].data["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args[-1] == "--port=8000" and '"kv_role":"kv_both"}' in args[-2]


# ------------------------------------------------------------------------------ options


@pytest.mark.parametrize("kwargs, message", [
    ({"target": "k8s"}, "unknown target; known: dynamo, llm-d-helm, llm-d-kustomize"),
    ({"dynamo_version": "9.9"}, "unknown Dynamo release; known: 1.3.0"),
    ({"namespace": "Bad_NS"}, "is not a DNS-1123 label"),
    ({"image_pull_secret": "-x"}, "is not a DNS-1123 label"),
    ({"transport": "rdma"}, "unknown transport; known: nvlink, ib, efa"),
    ({"model_cache": "pvc:relative"}, "must be absolute"),
    ({"sets": ["Foo.bar=1"]}, "--set Foo.bar: unknown key; known keys: rule"),
    ({"sets": ["rule=fast"]}, "expected one of production, benchmark"),
    ({"sets": ["K8sConfig.name=Dyn"]}, "is not a DNS-1123 label"),
    ({"sets": ["WorkerConfig.agg_workers=0"]}, "expected an integer >= 1"),
])
def test_bad_generator_options_name_the_option(kwargs, message):
    with pytest.raises(DeployError, match=None) as info:
        GeneratorOptions.create(**kwargs)
    assert message in str(info.value)


def test_options_accept_the_reference_spellings():
    o = GeneratorOptions.create(target="dynamo-j2", dynamo_version="v1.2.0",
                                model_cache="pvc", sets=["preserve_engine_limits=true"])
    assert (o.target, o.dynamo_version, o.model_cache.mount) == (
        "dynamo", "1.2.0", "/workspace/model_cache")
    assert o.model_cache.hf_home is None and o.get("preserve_engine_limits") is True


def test_a_target_that_cannot_express_the_pick_says_why():
    with pytest.raises(DeployError, match="no Helm template for trtllm"):
        pick_files(pick(agg("m", "h200_sxm", "trtllm", 8), 100, 10, 1, target="llm-d-helm"))
    with pytest.raises(DeployError, match="context parallelism"):
        role = Role("h200_sxm", "sglang", parallel=Parallelism(1, 1, 1, 1, 1, 2), batch_size=4)
        pick(Deployment("m", "agg", {"agg": role}), 100, 10, 2)


def test_preserve_engine_limits_and_benchmark_rules():
    keep = pick(agg("m", "h200_sxm", "vllm", 96, tp=4), 4000, 1000, 8,
                sets=["preserve_engine_limits=true"])
    assert keep.roles["agg"]["max_batch_size"] == 96 and "max_num_tokens" not in keep.roles["agg"]
    bench = pick(agg("m", "h200_sxm", "vllm", 96, tp=4), 4000, 1000, 8, sets=["rule=benchmark"])
    r = bench.roles["agg"]
    assert r["max_batch_size"] == 96 and r["cuda_graph_batch_sizes"] == list(range(1, 97))
    assert r["kv_cache_dtype"] == "auto"


# ------------------------------------------------------------------------------ writer


def test_csv_cells_and_atomic_writer(tmp_path):
    text = dump_csv(["a", "b", "c", "d", "e"],
                    [{"a": 4000, "b": 3.567, "c": 95.0, "d": None, "e": True},
                     {"a": 1, "b": float("nan"), "c": "x", "d": "", "e": False}])
    assert text == "a,b,c,d,e\n4000,3.567,95.0,,True\n1,,x,,False\n"
    path = write_tree(str(tmp_path), "org/name", {
        "x/a.yaml": FileContent("yaml", {"k": [1, 2], "s": "two\nlines\n"}),
        "run.sh": FileContent("text", "#!/bin/bash\n", executable=True)})
    assert yaml.safe_load(open(os.path.join(path, "x/a.yaml"))) == {"k": [1, 2],
                                                                    "s": "two\nlines\n"}
    assert os.access(os.path.join(path, "run.sh"), os.X_OK)
    with pytest.raises(DeployError, match="exists already"):
        write_tree(str(tmp_path), "org/name", {})
    with pytest.raises(ValueError, match="unknown file kind"):
        write_tree(str(tmp_path), "other/name", {"a": FileContent("yaml", {}),
                                                 "b": FileContent("bogus", None)})
    assert sorted(os.listdir(tmp_path)) == ["org"]  # nothing left of the failed tree
    (tmp_path / "afile").write_text("")
    with pytest.raises(DeployError, match="is a file, not a folder"):
        write_tree(str(tmp_path / "afile"), "n", {})


# ------------------------------------------------------------------------------ validity


def _shellcheck() -> str | None:
    found = shutil.which("shellcheck")
    if found is None and os.environ.get("AIC_REQUIRE_SHELLCHECK") == "1":
        pytest.fail("shellcheck is required (AIC_REQUIRE_SHELLCHECK=1) but not installed: "
                    "apt-get install -y shellcheck")
    return found


def _variants():
    """Picks over backends, modes, targets and options (router, MTP, MoE, cluster options)."""
    out = []
    cluster = {"namespace": "bench", "model_cache": "pvc:/models:m", "transport": "ib",
               "image_pull_secret": "sec", "dynamo_version": "0.9.0"}
    for backend, prefix, extra in itertools.product(
            ("vllm", "sglang", "trtllm"), (0, 500), ({}, cluster)):
        out.append(pick(agg("Qwen/Qwen3-8B", "h200_sxm", backend, 64, tp=2), 2000, 500, 8,
                        prefix=prefix, **extra))
        out.append(pick(disagg("Qwen/Qwen3-8B", "h200_sxm", backend, {"workers": 3, "bs": 1},
                               {"tp": 2, "workers": 2, "bs": 96}), 2000, 500, 16,
                        prefix=prefix, **extra))
        out.append(pick(disagg("Qwen/Qwen3-30B-A3B", "b200_sxm", backend,
                               {"workers": 2, "bs": 1, "moe_ep": 1},
                               {"dp": 4, "moe_ep": 4, "bs": 128}, nextn=1), 2000, 500, 8,
                        prefix=prefix, is_moe=True, **extra))
    for target in ("llm-d-helm", "llm-d-kustomize"):
        out.append(pick(agg("Qwen/Qwen3-8B", "h200_sxm", "vllm", 64, tp=2), 2000, 500, 8,
                        target=target))
    return out


def _scripts_of(name: str, content: FileContent) -> list[tuple[str, str]]:
    """Shell scripts of a file: itself, or the ``bash -c`` scripts inside a manifest / Job."""
    if content.kind == "text" and name.endswith(".sh"):
        return [(name, content.data)]
    docs = content.data if content.kind == "yaml_docs" else [content.data]
    found = []

    def walk(node):
        if isinstance(node, dict):
            if node.get("command", [None])[:2] == ["/bin/bash", "-c"]:
                found.append((name, "#!/bin/bash\n" + node["args"][0]))
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    for doc in docs:
        walk(doc)
    return found


def test_every_yaml_parses_and_every_script_is_valid_bash(tmp_path):
    shellcheck = _shellcheck()
    scripts = []
    for i, p in enumerate(_variants()):
        for name, content in pick_files(p).items():
            text = render(content)
            if name.endswith(".yaml"):
                docs = list(yaml.safe_load_all(text))
                expected = content.data if content.kind == "yaml_docs" else [content.data]
                assert docs == expected, name
            scripts.extend((f"{i}-{name}", s) for _, s in _scripts_of(name, content))
    assert len(scripts) > 100
    paths = []
    for j, (name, text) in enumerate(scripts):
        path = tmp_path / f"{j}-{name.replace('/', '_')}.sh"
        path.write_text(text)
        paths.append(str(path))
        result = subprocess.run(["bash", "-n", str(path)], capture_output=True, text=True)
        assert result.returncode == 0, (name, result.stderr)
    if shellcheck is None:
        pytest.skip("shellcheck not installed (apt-get install -y shellcheck); bash -n passed")
    result = subprocess.run([shellcheck, "--severity=error", "--shell=bash", *paths],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stdout[:3000]


def test_dynamo_manifests_have_the_graph_deployment_structure():
    for p in _variants():
        files = pick_files(p)
        if "k8s_deploy.yaml" not in files:
            continue
        content = files["k8s_deploy.yaml"]
        dgd = content.data[0] if content.kind == "yaml_docs" else content.data
        assert dgd["apiVersion"] == "nvidia.com/v1alpha1"
        assert dgd["kind"] == "DynamoGraphDeployment"
        assert dgd["metadata"]["name"] == f"dynamo-{p.mode}"
        services = dgd["spec"]["services"]
        assert list(services)[0] == "Frontend"
        assert services["Frontend"]["componentType"] == "frontend"
        workers = [s for s in services.values() if s["componentType"] == "worker"]
        assert len(workers) == len(p.roles)
        for svc in workers:
            assert isinstance(svc["replicas"], int) and svc["replicas"] >= 1
            assert svc["resources"]["limits"]["gpu"].isdigit()
            container = svc["extraPodSpec"]["mainContainer"]
            assert container["image"].startswith("nvcr.io/nvidia/ai-dynamo/")
            assert container["command"] and container["args"]
        if p.mode == "disagg":
            assert sorted(s.get("subComponentType") for s in workers) == ["decode", "prefill"]


# ------------------------------------------------------------------------------ end to end


@pytest.mark.engine
@pytest.mark.skipif(not native_available(), reason="needs the native module")
def test_save_sweep_writes_the_tree_and_the_deploy_command_renders_one_row(tmp_path):
    from click.testing import CliRunner

    from aic.cli import main
    from aic.deploy import save_sweep
    from aic.serving.replay import replay_available
    from aic.serving.sweep import sweep

    out = sweep("Qwen/Qwen3-8B", 2, "h100_sxm", "vllm", isl=1024, osl=128, top_n=1)
    replay = replay_available()
    saved = save_sweep(out, save_dir=tmp_path, model="Qwen/Qwen3-8B", system="h100_sxm",
                       backend="vllm", total_gpus=2, isl=1024, osl=128, ttft=2000.0, tpot=30.0,
                       replay=replay, suffix=7)
    assert saved.path.endswith("Qwen/Qwen3-8B_h100_sxm_vllm_isl1024_osl128_ttft2000_tpot30_7")
    assert sorted(os.listdir(saved.path)) == ["agg", "disagg", "pareto_frontier.svg"]
    top1 = os.path.join(saved.path, "agg", "top1")
    expected = {"bench_run.sh", "k8s_bench.yaml", "k8s_deploy.yaml", "run_0.sh"}
    assert set(os.listdir(top1)) == expected | ({"replay.json"} if replay else set())
    with open(os.path.join(saved.path, "agg", "best_config_topn.csv"), newline="") as fh:
        header = next(csv.reader(fh))
    assert header[-1] == "tokens/s/gpu_cluster" and not any(c.startswith("_") for c in header)
    if replay:
        record = json.load(open(os.path.join(top1, "replay.json")))
        assert record["replayed"] and record["targets"] == {"ttft_ms": 2000.0, "tpot_ms": 30.0}
        assert set(record["ttft_ms"]) == {"mean", "p50", "p90", "p99"}
        assert record["meets_p90"]["tpot"] == (record["tpot_ms"]["p90"] <= 30.0)
    target = tmp_path / "one"
    result = CliRunner().invoke(main, [
        "deploy", "--csv", os.path.join(saved.path, "agg", "best_config_topn.csv"),
        "--save-dir", str(target), "--no-replay"])
    assert result.exit_code == 0, result.output
    for name in expected:
        assert (target / name).read_text() == open(os.path.join(top1, name)).read(), name
