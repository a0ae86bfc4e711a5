"""Bare-metal launch scripts ``run_<i>.sh`` (spec 60 §8.1): workers packed first-fit onto
nodes of 8 GPUs, one script per node, node 0 starting the frontend. Each script is a list of
lines per backend (vLLM, SGLang, TRT-LLM keep the reference's own layouts, fixed lines and
indentation included), joined at the end."""

from __future__ import annotations

import math

from .dynamo import ENGINE_CONFIG_DIR
from .flags import VLLM_KV_TRANSFER, role_flags
from .params import PickParams
from .versions import uses_disaggregation_mode_flag

HEAD = ["#!/bin/bash", "set -e",
        "trap 'echo \"Cleaning up...\"; kill 0 2>/dev/null || true' EXIT INT TERM", ""]
_LABEL = {"agg": "Worker", "prefill": "Prefill", "decode": "Decode"}


def pack_nodes(pick: PickParams) -> list[dict]:
    """Per node, the workers of each role placed on it (spec 60 §8.1): agg workers first-fit;
    disagg in rounds of ``Wp/g`` prefill then ``Wd/g`` decode workers, ``g = gcd(Wp, Wd)``.
    A worker larger than a node takes nodes of its own."""
    per_node = pick.num_gpus_per_node
    nodes: list[dict] = []

    def place(role: str) -> None:
        gpus = pick.roles[role]["gpus_per_worker"]
        for node in nodes:
            if node["used"] + gpus <= per_node:
                node["used"] += gpus
                node[role] = node.get(role, 0) + 1
                return
        nodes.append({"used": gpus, role: 1})

    if pick.mode == "agg":
        for _ in range(pick.workers["agg"]):
            place("agg")
    else:
        wp, wd = pick.workers["prefill"], pick.workers["decode"]
        g = math.gcd(wp, wd) or 1
        for _ in range(g):
            for _ in range(wp // g):
                place("prefill")
            for _ in range(wd // g):
                place("decode")
    return [{k: v for k, v in n.items() if k != "used"} for n in nodes] or [{}]


def _exports(pick: PickParams, order: tuple) -> list[str]:
    values = {"MODEL_PATH": pick.model, "SERVED_MODEL_NAME": pick.served_model_name,
              "HF_TOKEN": "None"}
    return [f'export {k}=${{{k}:-"{values[k]}"}}' for k in order]


def _frontend(pick: PickParams, reset_states: bool) -> str:
    router = ""
    if pick.enable_router:
        router = "--router-mode kv --router-reset-states " if reset_states else "--router-mode kv "
    return (f'python3 -m dynamo.frontend {router}--http-port "{pick.port}" 2>&1 | '
            f'sed "s/^/[Frontend] /" &')


def _gpu_lines(role: str, offset: bool) -> list[str]:
    up = role.upper()
    base = f"{up}_GPU_OFFSET + w * {up}_GPU" if offset else f"w * {up}_GPU"
    return [f"for ((w=0; w<{up}_WORKERS; w++)); do",
            f"  BASE=$(( {base} ))",
            f"  GPU_LIST=$(seq -s, $BASE $((BASE+{up}_GPU-1)))"]


def _role_tail(pick: PickParams, role: str) -> str:
    if role == "agg":
        return ""
    if uses_disaggregation_mode_flag(pick.options.dynamo_version):
        flag = f"--disaggregation-mode {role}"
    else:
        flag = f"--is-{role}-worker"
    return f" {flag} --kv-transfer-config '{VLLM_KV_TRANSFER}'"


# ------------------------------------------------------------------------------ vLLM


def _vllm_block(pick: PickParams, role: str, count: int, offset: int) -> list[str]:
    up = role.upper()
    text, _ = role_flags(pick, role)
    sed = f' 2>&1 | sed "s/^/[{_LABEL[role]} $w] /" ) &'
    if role == "agg":
        lines = [f"AGG_GPU={pick.roles[role]['gpus_per_worker']}", f"AGG_WORKERS={count}",
                 "AGG_GPU_OFFSET=0",
                 "AGG_SYSTEM_PORT_BASE=${AGG_SYSTEM_PORT_BASE:-${DYN_SYSTEM_PORT1:-8081}}",
                 "AGG_EVENT_PORT_BASE=${AGG_EVENT_PORT_BASE:-${DYN_VLLM_KV_EVENT_PORT:-20081}}",
                 "AGG_SIDE_CHANNEL_PORT_BASE=${AGG_SIDE_CHANNEL_PORT_BASE:-"
                 "${VLLM_NIXL_SIDE_CHANNEL_PORT:-20097}}",
                 *_gpu_lines("agg", True),
                 "  SYSTEM_PORT=$(( AGG_SYSTEM_PORT_BASE + w ))",
                 '  if [[ $w -eq 1 && -n "${DYN_SYSTEM_PORT2:-}" ]]; then',
                 "    SYSTEM_PORT=$DYN_SYSTEM_PORT2", "  fi",
                 "  EVENT_PORT=$(( AGG_EVENT_PORT_BASE + w ))",
                 "  SIDE_CHANNEL_PORT=$(( AGG_SIDE_CHANNEL_PORT_BASE + w ))",
                 "  (", "    DYN_SYSTEM_PORT=$SYSTEM_PORT \\",
                 "    DYN_VLLM_KV_EVENT_PORT=$EVENT_PORT \\",
                 "    VLLM_NIXL_SIDE_CHANNEL_PORT=$SIDE_CHANNEL_PORT \\",
                 "    CUDA_VISIBLE_DEVICES=$GPU_LIST python3 -m dynamo.vllm \\",
                 '    --model "$MODEL_PATH" \\', '--served-model-name "$SERVED_MODEL_NAME" \\',
                 "\\", f"    {text}{sed}", "done"]
        return lines
    head = [f"{up}_GPU={pick.roles[role]['gpus_per_worker']}"]
    if role == "decode":
        head.append(f"DECODE_GPU_OFFSET={offset}")
    first = "DYN_SYSTEM_PORT=$SYSTEM_PORT \\"
    env_lines = ["  (", f"  {first}"] if role == "prefill" else [f"  ( {first}"]
    return [*head, *_gpu_lines(role, role == "decode"),
            f"  SYSTEM_PORT=$(( {up}_SYSTEM_PORT_BASE + w ))",
            f"  EVENT_PORT=$(( {up}_EVENT_PORT_BASE + w ))",
            f"  SIDE_CHANNEL_PORT=$(( {up}_SIDE_CHANNEL_PORT_BASE + w ))",
            *env_lines, "  DYN_VLLM_KV_EVENT_PORT=$EVENT_PORT \\",
            "  VLLM_NIXL_SIDE_CHANNEL_PORT=$SIDE_CHANNEL_PORT \\",
            "  CUDA_VISIBLE_DEVICES=$GPU_LIST \\", "    python3 -m dynamo.vllm \\",
            '      --model "$MODEL_PATH" \\', '--served-model-name "$SERVED_MODEL_NAME" \\',
            "\\", f"      {text}{_role_tail(pick, role)}{sed}", "done"]


def _vllm_script(pick: PickParams, node: dict, index: int) -> list[str]:
    lines = HEAD + _exports(pick, ("MODEL_PATH", "SERVED_MODEL_NAME", "HF_TOKEN"))
    if pick.enable_router:
        lines.append("export PYTHONHASHSEED=0")
    if index == 0:
        lines.append(_frontend(pick, reset_states=True))
    lines.append("")
    if pick.mode == "agg":
        return lines + _vllm_block(pick, "agg", node.get("agg", 0), 0) + ["wait"]
    p, d = node.get("prefill", 0), node.get("decode", 0)
    lines += [f"PREFILL_WORKERS={p}", f"DECODE_WORKERS={d}",
              "DECODE_SYSTEM_PORT_BASE=${DECODE_SYSTEM_PORT_BASE:-${DYN_SYSTEM_PORT1:-8081}}",
              "PREFILL_SYSTEM_PORT_BASE=${PREFILL_SYSTEM_PORT_BASE:-${DYN_SYSTEM_PORT2:-"
              "$((DECODE_SYSTEM_PORT_BASE + DECODE_WORKERS))}}",
              "PREFILL_EVENT_PORT_BASE=${PREFILL_EVENT_PORT_BASE:-${DYN_VLLM_KV_EVENT_PORT:-20081}}",
              "PREFILL_SIDE_CHANNEL_PORT_BASE=${PREFILL_SIDE_CHANNEL_PORT_BASE:-"
              "${VLLM_NIXL_SIDE_CHANNEL_PORT:-20097}}",
              "DECODE_EVENT_PORT_BASE=${DECODE_EVENT_PORT_BASE:-"
              "$((PREFILL_EVENT_PORT_BASE + PREFILL_WORKERS))}",
              "DECODE_SIDE_CHANNEL_PORT_BASE=${DECODE_SIDE_CHANNEL_PORT_BASE:-"
              "$((PREFILL_SIDE_CHANNEL_PORT_BASE + PREFILL_WORKERS))}", ""]
    if p:
        lines += _vllm_block(pick, "prefill", p, 0)
    lines.append("")
    if d:
        lines += _vllm_block(pick, "decode", d, p * pick.roles["prefill"]["gpus_per_worker"])
    return lines + ["wait"]


# ------------------------------------------------------------------------------ TRT-LLM


_HEAD_NODE_EXPORTS = ['export HEAD_NODE_IP=${HEAD_NODE_IP:-"0.0.0.0"}',
                      'export ETCD_ENDPOINTS="${HEAD_NODE_IP}:2379"',
                      'export NATS_SERVER="nats://${HEAD_NODE_IP}:4222"']


def _trtllm_block(pick: PickParams, role: str, count: int, offset: int) -> list[str]:
    up = role.upper()
    sed = f'2>&1 | sed "s/^/[{_LABEL[role]} $w] /" ) &'
    head = [f"{up}_GPU={pick.roles[role]['gpus_per_worker']}", f"{up}_WORKERS={count}"]
    if role == "agg":
        head.append("AGG_GPU_OFFSET=0")
    elif role == "decode":
        head.append(f"DECODE_GPU_OFFSET={offset}")
    command = "CUDA_VISIBLE_DEVICES=$GPU_LIST python3 -m dynamo.trtllm \\"
    args = ['    --model-path "$MODEL_PATH" \\',
            '    --served-model-name "$SERVED_MODEL_NAME" \\',
            f'    --extra-engine-args "{ENGINE_CONFIG_DIR}/{role}_config.yaml" \\']
    if role == "decode":
        body = [f"  ( {command}", *args, f"    --disaggregation-mode decode {sed}"]
    elif role == "prefill":
        publish = "--publish-events-and-metrics " if pick.enable_router else " "
        body = ["  (", f"    {command}", *args, "    --disaggregation-mode prefill \\", "\\",
                f"{publish}{sed}"]
    else:
        publish = "--publish-events-and-metrics  " if pick.enable_router else " "
        body = ["  (", f"    {command}", *args, "\\", f"{publish}{sed}"]
    return [*head, *_gpu_lines(role, role != "prefill"), *body, "done"]


def _trtllm_script(pick: PickParams, node: dict, index: int) -> list[str]:
    lines = HEAD + _exports(pick, ("MODEL_PATH", "HF_TOKEN", "SERVED_MODEL_NAME"))
    lines += _HEAD_NODE_EXPORTS + ["", ""]
    if index == 0:
        lines.append(_frontend(pick, reset_states=False))
    lines.append("")
    if pick.mode == "agg":
        return lines + _trtllm_block(pick, "agg", node.get("agg", 0), 0) + ["wait"]
    p, d = node.get("prefill", 0), node.get("decode", 0)
    if p:
        lines += _trtllm_block(pick, "prefill", p, 0)
    lines.append("")
    if d:
        lines += _trtllm_block(pick, "decode", d, p * pick.roles["prefill"]["gpus_per_worker"])
    return lines + ["wait"]


# ------------------------------------------------------------------------------ SGLang


def _sglang_block(pick: PickParams, role: str, count: int, offset: int) -> list[str]:
    up = role.upper()
    text, _ = role_flags(pick, role)
    worker = {"agg": "dynamo-worker", "prefill": "dynamo-worker-prefill",
              "decode": "dynamo-worker-decode"}[role]
    port = "AGG_SYSTEM_PORT" if role == "agg" else f"{up}_SYSTEM_PORT_BASE"
    head = [f"{up}_GPU={pick.roles[role]['gpus_per_worker']}"]
    if role == "agg":
        head += [f"AGG_WORKERS={count}", "AGG_GPU_OFFSET=0"]
    elif role == "decode":
        head.append(f"DECODE_GPU_OFFSET={offset}")
    loop = [*_gpu_lines(role, role != "prefill"),
            "  WORKER_IDX=$(( w + 1 ))", f"  SYSTEM_PORT=$(( {port} + w ))",
            f'  WORKER_NAME="{worker}"', f"  if (( {up}_WORKERS > 1 )); then",
            '    WORKER_NAME="${WORKER_NAME}-${WORKER_IDX}"', "  fi"]
    sed = f'2>&1 | sed "s/^/[{_LABEL[role]} $w] /" ) &'
    if role == "agg":
        body = ["  (", "  CUDA_VISIBLE_DEVICES=$GPU_LIST \\", '  OTEL_SERVICE_NAME="${WORKER_NAME}" \\',
                '  DYN_SYSTEM_PORT="${SYSTEM_PORT}" \\', "  python3 -m dynamo.sglang \\",
                '    --model-path "$MODEL_PATH" \\',
                '    --served-model-name "$SERVED_MODEL_NAME" \\', f"    {text} \\",
                '    --host "0.0.0.0" \\', f"    --enable-metrics {sed}"]
    else:
        first = (["  (", "  CUDA_VISIBLE_DEVICES=$GPU_LIST \\"] if role == "prefill"
                 else ["  ( CUDA_VISIBLE_DEVICES=$GPU_LIST \\"])
        body = [*first, '  OTEL_SERVICE_NAME="${WORKER_NAME}" \\',
                '  DYN_SYSTEM_PORT="${SYSTEM_PORT}" \\', "    python3 -m dynamo.sglang \\",
                '      --model-path "$MODEL_PATH" \\',
                '      --served-model-name "$SERVED_MODEL_NAME" \\',
                f"      {text} --disaggregation-mode {role} \\",
                '      --host "0.0.0.0" \\', f"      --enable-metrics {sed}"]
    return [*head, *loop, *body, "done"]


def _sglang_script(pick: PickParams, node: dict, index: int) -> list[str]:
    p, d = node.get("prefill", 0), node.get("decode", 0)
    lines = HEAD + _exports(pick, ("MODEL_PATH", "HF_TOKEN", "SERVED_MODEL_NAME"))
    lines += _HEAD_NODE_EXPORTS + [
        "", "FRONTEND_SYSTEM_PORT=${FRONTEND_SYSTEM_PORT:-8080}",
        "AGG_SYSTEM_PORT=${AGG_SYSTEM_PORT:-8081}", f"PREFILL_WORKERS={p}",
        f"DECODE_WORKERS={d}", "PREFILL_SYSTEM_PORT_BASE=${PREFILL_SYSTEM_PORT_BASE:-8082}",
        "DECODE_SYSTEM_PORT_BASE=${DECODE_SYSTEM_PORT_BASE:-"
        "$((PREFILL_SYSTEM_PORT_BASE + PREFILL_WORKERS))}", ""]
    if index == 0:
        lines += ["OTEL_SERVICE_NAME=dynamo-frontend \\", _frontend(pick, reset_states=False)]
    lines.append("")
    if pick.mode == "agg":
        return lines + _sglang_block(pick, "agg", node.get("agg", 0), 0) + ["wait"]
    if p:
        lines += _sglang_block(pick, "prefill", p, 0)
    lines.append("")
    if d:
        lines += _sglang_block(pick, "decode", d, p * pick.roles["prefill"]["gpus_per_worker"])
    return lines + ["wait"]


_SCRIPTS = {"vllm": _vllm_script, "trtllm": _trtllm_script, "sglang": _sglang_script}


def run_scripts(pick: PickParams) -> dict[str, str]:
    """``{"run_0.sh": text, ...}``, one script per node of the packing."""
    out = {}
    for i, node in enumerate(pack_nodes(pick)):
        out[f"run_{i}.sh"] = "\n".join(_SCRIPTS[pick.backend](pick, node, i)) + "\n"
    return out
