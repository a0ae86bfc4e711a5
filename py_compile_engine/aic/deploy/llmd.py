"""The llm-d targets (spec 60 §9, §10): Helm values ``llm-d-values.yaml`` (vLLM and SGLang)
and the Kustomize overlay ``kustomization.yaml`` + ``patch-*.yaml`` (vLLM). The engine tokens
are the Dynamo worker's, without the flags only Dynamo's launchers take."""

from __future__ import annotations

from .errors import DeployError
from .flags import VLLM_KV_TRANSFER, role_flags
from .params import PickParams

#: Flags the Dynamo builders add that llm-d's launchers do not take (spec 60 §9).
_DYNAMO_ONLY = ("--disaggregation-mode", "--kv-transfer-config", "--kv-events-config", "--host")
LLMD_METRICS_PORT = 8200
LLMD_PREFILL_PORT = 8000
KUSTOMIZE_BASES = {"agg": "guides/optimized-baseline/modelserver/gpu/vllm/base",
                   "disagg": "guides/pd-disaggregation/modelserver/gpu/vllm/base"}


def _engine_tokens(pick: PickParams, role: str) -> list[str]:
    _, tokens = role_flags(pick, role)
    out, skip = [], False
    for t in tokens:
        if skip:
            skip = False
            continue
        if t in _DYNAMO_ONLY:
            skip = True
            continue
        out.append(t)
    return out


def _container(pick: PickParams, role: str) -> dict:
    r = pick.roles[role]
    if pick.backend == "vllm":
        name, image = "vllm", pick.options.get("LlmdConfig.vllm_image", "vllm/vllm-openai:latest")
        command, model_flag = "vllmServe", "--model"
    else:
        name = "sglang"
        image = pick.options.get("LlmdConfig.sglang_image", "lmsysorg/sglang:latest")
        command, model_flag = "sglangServe", "--model-path"
    port = LLMD_PREFILL_PORT if role == "prefill" else LLMD_METRICS_PORT
    return {"name": name, "image": image, "modelCommand": command,
            "args": [model_flag, pick.model, "--served-model-name", pick.served_model_name,
                     *_engine_tokens(pick, role)],
            "env": [], "ports": [{"containerPort": port, "name": "metrics", "protocol": "TCP"}],
            "resources": {"limits": {"nvidia.com/gpu": r["gpus_per_worker"]}},
            "mountModelVolume": True,
            "volumeMounts": [{"name": "metrics-volume", "mountPath": "/.config"}]}


def _role_section(pick: PickParams, role: str) -> dict:
    r = pick.roles[role]
    return {"create": True, "replicas": pick.workers[role],
            "parallelism": {"tensor": r["tensor_parallel_size"], "data": r["data_parallel_size"],
                            "dataLocal": 1, "workers": 1},
            "containers": [_container(pick, role)],
            "volumes": [{"name": "metrics-volume", "emptyDir": {}}]}


def helm_values(pick: PickParams) -> dict:
    """``llm-d-values.yaml`` (spec 60 §9)."""
    if pick.backend not in ("vllm", "sglang"):
        raise DeployError(f"--deployment-target llm-d-helm: llm-d has no Helm template for "
                          f"{pick.backend}; use --deployment-target dynamo")
    label = pick.served_model_name.replace("-", "_").replace("/", "_")
    decode_role = "agg" if pick.mode == "agg" else "decode"
    return {
        "enabled": True,
        "modelArtifacts": {"name": pick.model,
                           "labels": {"llm-d.ai/inference-serving": "true",
                                      "llm-d.ai/model": label},
                           "uri": f"hf://{pick.model}", "size": "100Gi",
                           "authSecretName": pick.options.get("LlmdConfig.hf_token_secret"),
                           "mountPath": "/model-cache"},
        "accelerator": {"type": "nvidia", "dra": False},
        "routing": {"servicePort": pick.port,
                    "proxy": {"enabled": True,
                              "image": "ghcr.io/llm-d/llm-d-routing-sidecar:latest",
                              "imagePullPolicy": "Always", "targetPort": LLMD_METRICS_PORT,
                              "connector": "nixlv2", "zapLogLevel": "info"}},
        "multinode": False,
        "decode": _role_section(pick, decode_role),
        "prefill": (_role_section(pick, "prefill") if pick.mode == "disagg"
                    else {"create": False, "replicas": 0}),
    }


def _patch(pick: PickParams, role: str, name: str) -> dict:
    r = pick.roles[role]
    args = [pick.model, "--served-model-name", pick.served_model_name,
            *_engine_tokens(pick, role)]
    transfer = VLLM_KV_TRANSFER.replace(",", ", ")
    if "--kv-transfer-config" not in args:
        args += ["--kv-transfer-config", transfer]
    port = LLMD_PREFILL_PORT if role == "prefill" else LLMD_METRICS_PORT
    args.append(f"--port={port}")
    gpus = str(r["tensor_parallel_size"] * r["pipeline_parallel_size"])
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
            "spec": {"replicas": pick.workers[role],
                     "template": {"spec": {"containers": [{
                         "name": "modelserver",
                         "image": pick.options.get("LlmdConfig.vllm_image",
                                                   "vllm/vllm-openai:latest"),
                         "command": ["vllm", "serve"], "args": args,
                         "resources": {"limits": {"nvidia.com/gpu": gpus},
                                       "requests": {"nvidia.com/gpu": gpus}}}]}}}}


def kustomize_files(pick: PickParams) -> dict[str, dict]:
    """``kustomization.yaml`` and the patch files (spec 60 §10)."""
    if pick.backend != "vllm":
        raise DeployError(f"--deployment-target llm-d-kustomize: llm-d has Kustomize bases for "
                          f"vLLM only, not {pick.backend}; use llm-d-helm or dynamo")
    base = pick.options.get("LlmdConfig.kustomize_base_path", KUSTOMIZE_BASES[pick.mode])
    kustomization: dict = {"apiVersion": "kustomize.config.k8s.io/v1beta1",
                           "kind": "Kustomization", "resources": [base]}
    prefix = pick.options.get("LlmdConfig.kustomize_name_prefix")
    if prefix:
        kustomization["namePrefix"] = prefix
    if pick.mode == "agg":
        kustomization["patches"] = [{"path": "patch-vllm.yaml"}]
        return {"kustomization.yaml": kustomization,
                "patch-vllm.yaml": _patch(pick, "agg", "decode")}
    kustomization["patches"] = [{"path": "patch-decode.yaml"}, {"path": "patch-prefill.yaml"}]
    return {"kustomization.yaml": kustomization,
            "patch-decode.yaml": _patch(pick, "decode", "decode"),
            "patch-prefill.yaml": _patch(pick, "prefill", "prefill")}
