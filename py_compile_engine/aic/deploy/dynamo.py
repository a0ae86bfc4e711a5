"""The ``DynamoGraphDeployment`` manifest ``k8s_deploy.yaml`` (spec 60 §6): a Frontend service
and one worker service per role, with the worker command of each backend, the hardware and
transport facts, the model cache, pull secret and namespace, and — for a worker larger than a
node — the multi-node settings and a ``ComputeDomain`` document. Built as data; dumped by
:mod:`aic.deploy.writer`."""

from __future__ import annotations

import json

from .facts import TRANSPORT_ENV, hardware_profile
from .flags import VLLM_KV_TRANSFER, role_flags
from .params import PickParams
from .trtllm_config import engine_config, raw_text_lines
from .versions import runtime_image, uses_disaggregation_mode_flag

SERVICE_NAMES = {
    "vllm": {"agg": "VllmWorker", "prefill": "VllmPrefillWorker", "decode": "VllmDecodeWorker"},
    "sglang": {"agg": "SGLangWorker", "prefill": "SGLangPrefillWorker",
               "decode": "SGLangDecodeWorker"},
    "trtllm": {"agg": "TRTLLMWorker", "prefill": "TRTLLMPrefillWorker",
               "decode": "TRTLLMDecodeWorker"},
}
WORKING_DIRS = {"vllm": "/workspace/examples/backends/vllm",
                "sglang": "/workspace/components/backends/sglang",
                "trtllm": "/workspace/components/backends/trtllm"}
HF_TOKEN_SECRET = "hf-token-secret"
ENGINE_CONFIG_DIR = "/workspace/engine_configs"
#: vLLM / SGLang KV-event ports of the router (spec 60 §4.2).
VLLM_KV_EVENT_PORT = 20081
SGLANG_KV_EVENT_PORT = 5557
PROBE_PORT = 9090


def dgd_name(pick: PickParams) -> str:
    """``dynamo-<mode>`` (``K8sConfig.name`` / ``K8sConfig.name_prefix`` override)."""
    return pick.options.get("K8sConfig.name") or (
        f"{pick.options.get('K8sConfig.name_prefix') or 'dynamo'}-{pick.mode}")


def image(pick: PickParams) -> str:
    """The runtime image of the workers and the frontend (spec 60 §7.2)."""
    return pick.options.get("K8sConfig.k8s_image") or runtime_image(
        pick.backend, pick.options.dynamo_version)


def nodes_of(gpus: int, per_node: int) -> int:
    """Nodes a worker of ``gpus`` GPUs spans."""
    return -(-gpus // per_node)


def vllm_args(pick: PickParams, name: str) -> list[str]:
    """The vLLM worker's ``args`` tokens (spec 60 §6.2)."""
    _, tokens = role_flags(pick, name)
    out = ["--model", pick.model, "--served-model-name", pick.served_model_name, *tokens]
    if pick.enable_router:
        events = {"publisher": "zmq", "topic": "kv-events",
                  "endpoint": f"tcp://*:{VLLM_KV_EVENT_PORT}", "enable_kv_cache_events": True}
        out += ["--kv-events-config", json.dumps(events, separators=(",", ":"))]
    if name != "agg":
        if uses_disaggregation_mode_flag(pick.options.dynamo_version):
            out += ["--disaggregation-mode", name]
        else:
            out.append(f"--is-{name}-worker")
        out += ["--kv-transfer-config", VLLM_KV_TRANSFER]
    return out


def sglang_script(pick: PickParams, name: str) -> str:
    """The SGLang worker's ``bash -c`` script (spec 60 §6.2)."""
    text, _ = role_flags(pick, name)
    lines = ["set -euo pipefail", "args=(", f'  --model-path "{pick.model}"',
             f'  --served-model-name "{pick.served_model_name}"', f"  {text}", ")"]
    if name != "agg":
        lines.append('args+=(--host "0.0.0.0")')
        lines.append(f"args+=(--disaggregation-mode {name})")
    if pick.enable_router:
        events = json.dumps({"publisher": "zmq", "topic": "kv-events",
                             "endpoint": f"tcp://*:{SGLANG_KV_EVENT_PORT}"},
                            separators=(",", ":"))
        lines.append(f"args+=(--kv-events-config '{events}')")
    lines.append('exec python3 -m dynamo.sglang "${args[@]}"')
    return "\n".join(lines) + "\n"


def trtllm_script(pick: PickParams, name: str) -> str:
    """The TRT-LLM worker's ``bash -c`` script with the engine config inline (spec 60 §6.2)."""
    path = f"{ENGINE_CONFIG_DIR}/{name}_config.yaml"
    lines = ["set -euo pipefail", f"mkdir -p {ENGINE_CONFIG_DIR}", f"cat > {path} <<'YAML'",
             *raw_text_lines(engine_config(pick, name)), "YAML", "args=(",
             f'  --model-path "{pick.model}"', f'  --served-model-name "{pick.served_model_name}"',
             f'  --extra-engine-args "{path}"', ")"]
    if name != "agg":
        lines.append(f"args+=(--disaggregation-mode {name})")
    if pick.enable_router:
        lines.append("args+=(--publish-events-and-metrics)")
    lines.append('exec python3 -m dynamo.trtllm "${args[@]}"')
    return "\n".join(lines) + "\n"


def _probe(path: str, delay: int, failures: int) -> dict:
    return {"httpGet": {"path": path, "port": PROBE_PORT}, "initialDelaySeconds": delay,
            "periodSeconds": 30, "timeoutSeconds": 10, "failureThreshold": failures}


def _env(pairs) -> list[dict]:
    return [{"name": k, "value": str(v)} for k, v in pairs]


def _pod_common(pick: PickParams, pod: dict, volumes: list) -> None:
    """Volumes, pull secret and hardware placement of a pod spec, in the template's order."""
    profile = hardware_profile(pick.system)
    if volumes:
        pod["volumes"] = volumes
    if pick.options.image_pull_secret:
        pod["imagePullSecrets"] = [{"name": pick.options.image_pull_secret}]
    if profile is not None:
        pod["nodeSelector"] = dict(profile.node_selector)
        if profile.tolerations:
            pod["tolerations"] = [dict(t) for t in profile.tolerations]


def _cache_volume(pick: PickParams) -> tuple[list, list]:
    cache = pick.options.model_cache
    if cache is None:
        return [], []
    return ([{"name": "model-cache", "persistentVolumeClaim": {"claimName": cache.pvc}}],
            [{"name": "model-cache", "mountPath": cache.mount}])


def frontend_service(pick: PickParams) -> dict:
    """The Frontend service (spec 60 §6.1)."""
    volumes, mounts = _cache_volume(pick)
    pod: dict = {}
    _pod_common(pick, pod, volumes)
    container = {"image": image(pick), "imagePullPolicy": "IfNotPresent"}
    if mounts:
        container["volumeMounts"] = mounts
    container["command"] = ["python3", "-m", "dynamo.frontend"]
    container["args"] = ["--http-port", str(pick.port)]
    pod["mainContainer"] = container
    service = {"envFromSecret": HF_TOKEN_SECRET, "componentType": "frontend", "replicas": 1,
               "extraPodSpec": pod}
    envs = []
    if pick.enable_router:
        envs.append(("DYN_ROUTER_MODE", "kv"))
    cache = pick.options.model_cache
    if cache is not None and cache.hf_home:
        envs.append(("HF_HOME", cache.hf_home))
    if envs:
        service["envs"] = _env(envs)
    return service


def worker_service(pick: PickParams, name: str, claim_template: str) -> dict:
    """The worker service of role ``name`` (spec 60 §6.1, §6.2, §6.4, §6.5, §7.4)."""
    r = pick.roles[name]
    gpus = r["gpus_per_worker"]
    profile = hardware_profile(pick.system)
    cache = pick.options.model_cache
    service: dict = {"envFromSecret": HF_TOKEN_SECRET}
    if cache is not None and cache.hf_home:
        service["envs"] = _env([("HF_HOME", cache.hf_home)])
    service["componentType"] = "worker"
    if name != "agg":
        service["subComponentType"] = name
    service["replicas"] = pick.workers[name]
    multinode = gpus > pick.num_gpus_per_node
    if multinode:
        service["multinode"] = {"nodeCount": nodes_of(gpus, pick.num_gpus_per_node)}
    limits: dict = {"gpu": str(gpus)}
    if pick.options.transport == "efa":
        limits["custom"] = {"vpc.amazonaws.com/efa": gpus}
    service["resources"] = {"limits": limits}
    if multinode:
        service["resources"]["claims"] = [{"name": "compute-domain-channel"}]
    if profile is not None:
        shm = profile.shared_memory
        if name == "decode" and profile.decode_shared_memory:
            shm = profile.decode_shared_memory
        service["sharedMemory"] = {"size": shm}
    volumes, mounts = _cache_volume(pick)
    if pick.backend == "trtllm":
        volumes = volumes + [{"name": "engine-configs", "emptyDir": {}},
                             {"name": "tmp", "emptyDir": {"medium": "Memory",
                                                          "sizeLimit": "10Gi"}}]
        mounts = mounts + [{"name": "engine-configs", "mountPath": ENGINE_CONFIG_DIR},
                           {"name": "tmp", "mountPath": "/tmp"}]
    pod: dict = {}
    _pod_common(pick, pod, volumes)
    if multinode:
        pod["resourceClaims"] = [{"name": "compute-domain-channel",
                                  "resourceClaimTemplateName": claim_template}]
    if pick.options.transport == "efa":
        pod["hostIPC"] = True
    container: dict = {"image": image(pick), "workingDir": WORKING_DIRS[pick.backend],
                       "imagePullPolicy": "IfNotPresent"}
    if mounts:
        container["volumeMounts"] = mounts
    if pick.backend == "vllm":
        container["command"] = ["python3", "-m", "dynamo.vllm"]
        container["args"] = vllm_args(pick, name)
    elif pick.backend == "sglang":
        container["command"] = ["/bin/bash", "-c"]
        container["args"] = [sglang_script(pick, name)]
    else:
        container["command"] = ["/bin/bash", "-c"]
        container["args"] = [trtllm_script(pick, name)]
        container["startupProbe"] = _probe("/health", 120, 40)
        container["livenessProbe"] = _probe("/live", 300, 10)
        container["readinessProbe"] = _probe("/live", 300, 10)
    if pick.options.transport == "efa":
        container["securityContext"] = {"privileged": True,
                                        "capabilities": {"add": ["IPC_LOCK"]}}
    env = list(profile.nccl_env) if profile is not None else []
    present = {k for k, _ in env}
    env += [(k, v) for k, v in TRANSPORT_ENV[pick.options.transport] if k not in present]
    if env:
        container["env"] = _env(env)
    pod["mainContainer"] = container
    service["extraPodSpec"] = pod
    return service


def deployment_documents(pick: PickParams) -> list[dict]:
    """The ``k8s_deploy.yaml`` documents: the DynamoGraphDeployment, then a ComputeDomain when
    a worker spans nodes (spec 60 §6.5)."""
    name = dgd_name(pick)
    claim_template = f"{name}-compute-domain-channel"
    metadata = {"name": name}
    if pick.options.namespace:
        metadata["namespace"] = pick.options.namespace
    services = {"Frontend": frontend_service(pick)}
    for role in pick.role_names:
        services[SERVICE_NAMES[pick.backend][role]] = worker_service(pick, role, claim_template)
    docs = [{"apiVersion": "nvidia.com/v1alpha1", "kind": "DynamoGraphDeployment",
             "metadata": metadata, "spec": {"services": services}}]
    if any(r["gpus_per_worker"] > pick.num_gpus_per_node for r in pick.roles.values()):
        domain_meta = {"name": f"{name}-compute-domain"}
        if pick.options.namespace:
            domain_meta["namespace"] = pick.options.namespace
        docs.append({"apiVersion": "resource.nvidia.com/v1beta1", "kind": "ComputeDomain",
                     "metadata": domain_meta,
                     "spec": {"numNodes": 0,
                              "channel": {"resourceClaimTemplate": {"name": claim_template}}}})
    return docs
