"""The benchmark files of a Dynamo pick (spec 60 §8.2): ``bench_run.sh`` (aiperf against a
local endpoint, every setting overridable from the environment) and ``k8s_bench.yaml`` (a
Kubernetes Job running the same sweep against the deployment's frontend service). The
concurrency list brackets the pick's estimated concurrency."""

from __future__ import annotations

from .dynamo import dgd_name
from .params import PickParams
from .versions import BENCH_IMAGE

#: The fixed low end of the concurrency list (spec 60 §8.2).
BASE_CONCURRENCY = (1, 2, 8, 16, 32, 64, 128)


def concurrency_list(estimated: int | None) -> list[int]:
    """The concurrency sweep around E (spec 60 §8.2): the base list plus ``int(0.95 E)``,
    ``E``, ``int(1.05 E)``, values >= 1, unique, ascending."""
    if estimated is None or estimated <= 0:
        return list(BASE_CONCURRENCY)
    values = [*BASE_CONCURRENCY, int(0.95 * estimated), int(estimated), int(1.05 * estimated)]
    return sorted({v for v in values if v >= 1})


def _prefix_block() -> list[str]:
    return ["prefix_args=()",
            'if [[ "${BENCH_PREFIX}" =~ ^[0-9]+$ && "${BENCH_PREFIX}" -gt 0 \\',
            '    && "${BENCH_PREFIX_PROMPTS}" =~ ^[0-9]+$ && "${BENCH_PREFIX_PROMPTS}" -gt 0 ]]; '
            'then',
            '  prefix_args+=(--prefix-prompt-length "${BENCH_PREFIX}" --num-prefix-prompts '
            '"${BENCH_PREFIX_PROMPTS}")',
            "fi"]


def _shared_vars(pick: PickParams) -> list[str]:
    return ['ARTIFACT_DIR="${BENCH_ARTIFACT_DIR:-/tmp/bench_artifacts}"']


def _env_default(name: str, value) -> str:
    return f'BENCH_{name}="${{AICONFIGURATOR_BENCH_{name}:-{value}}}"'


def bench_run_script(pick: PickParams) -> str:
    """``bench_run.sh`` (spec 60 §8.2)."""
    concurrency = " ".join(str(c) for c in concurrency_list(pick.estimated_concurrency))
    lines = ["#!/bin/bash", "set -euo pipefail", "", f"concurrency_array=({concurrency})", "",
             'if [[ -n "${AICONFIGURATOR_BENCH_CONCURRENCY:-}" ]]; then',
             "  concurrency_array=(${AICONFIGURATOR_BENCH_CONCURRENCY})", "fi", "",
             *_shared_vars(pick),
             _env_default("MODEL", pick.served_model_name),
             _env_default("ENDPOINT_TYPE", "chat"),
             _env_default("ENDPOINT_URL", f"http://0.0.0.0:{pick.port}"),
             _env_default("TOKENIZER", pick.model),
             _env_default("ISL", pick.isl), _env_default("ISL_STDDEV", 0),
             _env_default("OSL", pick.osl), _env_default("OSL_STDDEV", 0),
             _env_default("PREFIX", pick.prefix), _env_default("PREFIX_PROMPTS", 1),
             'BENCH_UI="simple"', _env_default("MULTI_ROUND", 20), "",
             *_prefix_block(), "",
             'for concurrency in "${concurrency_array[@]}"; do',
             '  echo "Run concurrency: $concurrency"',
             "  aiperf profile \\",
             '    --artifact-dir "${ARTIFACT_DIR}/concurrency_${concurrency}" \\',
             '    -m "${BENCH_MODEL}" \\',
             '    --endpoint-type "${BENCH_ENDPOINT_TYPE}" \\',
             '    -u "${BENCH_ENDPOINT_URL}" \\',
             '    --tokenizer "${BENCH_TOKENIZER}" \\',
             '    --isl "${BENCH_ISL}" --isl-stddev "${BENCH_ISL_STDDEV}" \\',
             '    --osl "${BENCH_OSL}" --osl-stddev "${BENCH_OSL_STDDEV}" \\',
             '    "${prefix_args[@]}" \\',
             "    --extra-inputs ignore_eos:true \\",
             '    --extra-inputs "{\\"nvext\\":{\\"ignore_eos\\":true}}" \\',
             "    --concurrency ${concurrency} \\",
             "    --num-requests $(($concurrency*${BENCH_MULTI_ROUND})) \\",
             "    --warmup-request-count $(($concurrency*2)) \\",
             "    --random-seed 100 \\",
             '    --ui "${BENCH_UI}" \\',
             "    --streaming",
             "done"]
    return "\n".join(lines) + "\n"


def frontend_url(pick: PickParams) -> str:
    """The frontend service's URL inside the cluster; without a namespace, the short name
    (same namespace as the Job) — spec 60 §16.2."""
    service = f"{dgd_name(pick)}-frontend"
    if pick.options.namespace:
        return f"http://{service}.{pick.options.namespace}.svc.cluster.local:{pick.port}"
    return f"http://{service}:{pick.port}"


def bench_job_script(pick: PickParams) -> str:
    """The Job's script: values written literally, ``--num-requests`` × 50, no empty lines
    and no trailing newline (spec 60 §8.2)."""
    concurrency = " ".join(str(c) for c in concurrency_list(pick.estimated_concurrency))
    lines = ["pip install aiperf", f"concurrency_array=({concurrency})",
             *_shared_vars(pick), _env_default("PREFIX", pick.prefix),
             _env_default("PREFIX_PROMPTS", 1), *_prefix_block(),
             'for concurrency in "${concurrency_array[@]}"; do',
             '  echo "Run concurrency: $concurrency"',
             "  aiperf profile \\",
             '    --artifact-dir "${ARTIFACT_DIR}/concurrency_${concurrency}" \\',
             f"    -m {pick.served_model_name} \\",
             "    --endpoint-type chat \\",
             f"    -u {frontend_url(pick)} \\",
             f"    --tokenizer {pick.model} \\",
             f"    --isl {pick.isl} --isl-stddev 0 \\",
             f"    --osl {pick.osl} --osl-stddev 0 \\",
             '    "${prefix_args[@]}" \\',
             "    --extra-inputs ignore_eos:true \\",
             '    --extra-inputs "{\\"nvext\\":{\\"ignore_eos\\":true}}" \\',
             "    --concurrency ${concurrency} \\",
             "    --num-requests $(($concurrency*50)) \\",
             "    --warmup-request-count $(($concurrency*2)) \\",
             "    --random-seed 100 \\",
             "    --ui simple \\",
             "    --streaming",
             "done"]
    return "\n".join(lines)


def bench_job(pick: PickParams) -> dict:
    """``k8s_bench.yaml``: the benchmark Job (spec 60 §8.2, §6.4, §16.2)."""
    name = f"{dgd_name(pick)}-benchmark"
    metadata = {"name": name}
    if pick.options.namespace:
        metadata["namespace"] = pick.options.namespace
    cache = pick.options.model_cache
    env = [{"name": "AIPERF_SERVICE_PROFILE_START_TIMEOUT", "value": "400"}]
    container: dict = {"name": "aiperf", "image": BENCH_IMAGE}
    pod: dict = {"restartPolicy": "Never"}
    if cache is not None:
        pod["volumes"] = [{"name": "pvc", "persistentVolumeClaim": {"claimName": cache.pvc}}]
        env.append({"name": "BENCH_ARTIFACT_DIR",
                    "value": f"{cache.mount.rstrip('/')}/bench_artifacts"})
    container["env"] = env
    if cache is not None:
        container["volumeMounts"] = [{"name": "pvc", "mountPath": cache.mount}]
    container["command"] = ["/bin/bash", "-c"]
    container["args"] = [bench_job_script(pick)]
    pod["containers"] = [container]
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": metadata,
            "spec": {"backoffLimit": 0,
                     "template": {"metadata": {"name": name}, "spec": pod}}}
