"""Hardware and transport facts of a deployment (spec 60 §7.4, §7.5): node selectors,
tolerations, shared memory, NCCL variables and the MoE backend per system profile, and the
environment a KV transport needs. Data only."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class HardwareProfile:
    """What a GPU product asks of a Kubernetes pod (spec 60 §7.5)."""

    name: str
    node_selector: dict
    tolerations: list = field(default_factory=list)
    shared_memory: str = "64Gi"
    decode_shared_memory: str | None = None
    nccl_env: tuple = (("NCCL_CUMEM_ENABLE", "1"),)
    trtllm_moe_backend: str = "CUTLASS"
    sglang_moe_runner: str | None = None


_GPU_TOLERATION_EQUAL = {"key": "nvidia.com/gpu", "operator": "Equal", "value": "true",
                         "effect": "NoSchedule"}
_GPU_TOLERATION_EXISTS = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}

_H100 = HardwareProfile("h100", {"nvidia.com/gpu.product": "NVIDIA-H100-SXM5-80GB"})
_H200 = HardwareProfile("h200", {"nvidia.com/gpu.product": "NVIDIA-H200"},
                        [_GPU_TOLERATION_EQUAL])
_B200 = HardwareProfile("b200", {"nvidia.com/gpu.product": "NVIDIA-B200"},
                        [_GPU_TOLERATION_EXISTS], trtllm_moe_backend="WIDEEP",
                        sglang_moe_runner="deepep_moe")
_GB200 = HardwareProfile(
    "gb200", {"kubernetes.io/arch": "arm64", "nvidia.com/gpu.product": "NVIDIA-GB200"},
    [_GPU_TOLERATION_EXISTS, {"key": "kubernetes.io/arch", "operator": "Equal",
                              "value": "arm64", "effect": "NoSchedule"}],
    decode_shared_memory="128Gi",
    nccl_env=(("NCCL_CUMEM_ENABLE", "1"), ("NCCL_MNNVL_ENABLE", "1"), ("NCCL_NVLS_ENABLE", "1"),
              ("NCCL_P2P_LEVEL", "NVL"), ("UCX_CUDA_IPC_ENABLE_MNNVL", "y"),
              ("VLLM_USE_NCCL_SYMM_MEM", "1")),
    trtllm_moe_backend="WIDEEP", sglang_moe_runner="deepep_moe")
_H20 = HardwareProfile("h20", {"nvidia.com/gpu.product": "NVIDIA-H20-3e"},
                       [_GPU_TOLERATION_EQUAL])

#: System name -> hardware profile; systems not listed have none (spec 60 §7.5).
PROFILES = {
    "h100_sxm": _H100, "h100_pcie": _H100, "h200_sxm": _H200, "b200_sxm": _B200,
    "b300_sxm": _B200, "gb200": _GB200, "gb200_sxm": _GB200, "gb300": _GB200,
    "h20_3e": _H20,
}


def hardware_profile(system: str) -> HardwareProfile | None:
    """The profile of ``system``, or ``None`` (the manifest then has no node selector,
    tolerations, shared memory or NCCL env)."""
    return PROFILES.get(system)


#: The transports and the worker environment each adds after the NCCL variables (spec 60 §7.4).
#: The ``ib`` set is the golden's (q8_h100_trtllm_dynamo100_cluster). The ``efa`` set is aic's
#: reading of spec 60 §7.4, which names only some of its variables (``FI_EFA_*``, ``PATH``,
#: ``LD_LIBRARY_PATH``, ``NIXL_TELEMETRY_*``): no golden checks it.
TRANSPORT_ENV = {
    "nvlink": (),
    "ib": (("UCX_MEMTYPE_CACHE", "n"), ("UCX_TLS", "cuda_copy,cuda_ipc,tcp"),
           ("UCX_CUDA_IPC_ENABLE_MNNVL", "y"), ("UCX_LOG_LEVEL", "error"),
           ("NIXL_LOG_LEVEL", "ERROR")),
    "efa": (("SGLANG_DISAGGREGATION_NIXL_BACKEND", "LIBFABRIC"), ("FI_PROVIDER", "efa"),
            ("FI_EFA_USE_DEVICE_RDMA", "1"), ("FI_EFA_FORK_SAFE", "1"), ("FI_HMEM", "cuda"),
            ("PATH", "/opt/amazon/efa/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:"
                     "/sbin:/bin"),
            ("LD_LIBRARY_PATH", "/opt/amazon/efa/lib:/usr/local/lib"),
            ("NIXL_TELEMETRY_ENABLE", "n"), ("NIXL_LOG_LEVEL", "ERROR")),
}
TRANSPORTS = tuple(TRANSPORT_ENV)
