"""Op constructors in the wire format of spec 30 §5.1.

Each op is an externally tagged dict ``{"Variant": {fields...}}`` with the fields in the
reference's serialisation order. ``scale_factor`` and ``bytes_per_token`` are always floats.
"""

from __future__ import annotations

DEFAULT_LANES = ("default",)

#: Bytes per element of the KV-cache and comm quant modes (spec 43 §3: μkv, μc).
QUANT_BYTES = {"bfloat16": 2, "half": 2, "fp8": 1, "int8": 1}


def _f(value) -> float:
    return float(value)


def embedding(name: str, scale: float, vocab_size: int, hidden_size: int) -> dict:
    return {"Embedding": {
        "name": name, "scale_factor": _f(scale), "vocab_size": int(vocab_size),
        "hidden_size": int(hidden_size), "quant_mode": "bfloat16", "seq_split": 1,
    }}


def elementwise(name: str, scale: float, dim_in: int, dim_out: int) -> dict:
    """``bytes_per_token = 2*dim_in + 2*dim_out`` (2 bytes per element)."""
    return {"Elementwise": {
        "name": name, "scale_factor": _f(scale), "bytes_per_token": _f(2 * dim_in + 2 * dim_out),
        "scale_num_tokens": 1, "seq_split": 1,
    }}


def gemm(name: str, scale: float, n: int, k: int, quant_mode: str, *,
         low_precision_input: bool = False, below_grid_sol: bool = False) -> dict:
    return {"Gemm": {
        "name": name, "scale_factor": _f(scale), "n": int(n), "k": int(k), "quant_mode": quant_mode,
        "scale_num_tokens": 1, "low_precision_input": bool(low_precision_input), "seq_split": 1,
        "below_grid_sol": bool(below_grid_sol),
    }}


def custom_all_reduce(name: str, scale: float, hidden_size: int, tp_size: int) -> dict:
    return {"CustomAllReduce": {
        "name": name, "scale_factor": _f(scale), "hidden_size": int(hidden_size),
        "tp_size": int(tp_size), "quant": "half", "seq_split": 1,
    }}


def p2p(name: str, scale: float, pp_size: int, hidden_size: int) -> dict:
    return {"P2P": {
        "name": name, "scale_factor": _f(scale), "pp_size": int(pp_size),
        "hidden_size": int(hidden_size), "seq_split": 1,
    }}


def cp_all_gather(num_layers: int, kv_elements: float, cp_size: int, comm_quant_mode: str) -> dict:
    """The KV all-gather after context attention under context parallelism (spec 43 §3.3)."""
    return {"Nccl": {
        "name": "context_cp_all_gather", "scale_factor": _f(num_layers),
        "hidden_size": _f(kv_elements), "num_gpus": int(cp_size), "dtype": comm_quant_mode,
        "operation": "all_gather", "seq_split": 1,
    }}


def check_fmha(fmha_quant_mode: str) -> None:
    """The attention ops accept only ``bfloat16``, ``fp8`` and ``fp8_block``."""
    if fmha_quant_mode not in ("bfloat16", "fp8", "fp8_block"):
        raise ValueError(f'unknown FMHA quant mode: "{fmha_quant_mode}"')


def context_attention(name: str, scale: float, n: int, n_kv: int, head_size: int, window_size: int,
                      kv_cache_dtype: str, fmha_quant_mode: str, use_qk_norm: bool,
                      lane_order=DEFAULT_LANES) -> dict:
    check_fmha(fmha_quant_mode)
    return {"ContextAttention": {
        "name": name, "scale_factor": _f(scale), "n": int(n), "n_kv": int(n_kv),
        "head_size": int(head_size), "window_size": int(window_size),
        "kv_cache_dtype": kv_cache_dtype, "fmha_quant_mode": fmha_quant_mode,
        "use_qk_norm": bool(use_qk_norm), "cp_size": 1, "lane_order": list(lane_order),
    }}


def generation_attention(name: str, scale: float, n: int, n_kv: int, head_size: int,
                         window_size: int, kv_cache_dtype: str, lane_order=DEFAULT_LANES) -> dict:
    return {"GenerationAttention": {
        "name": name, "scale_factor": _f(scale), "n": int(n), "n_kv": int(n_kv),
        "head_size": int(head_size), "window_size": int(window_size),
        "kv_cache_dtype": kv_cache_dtype, "lane_order": list(lane_order),
    }}


def moe(name: str, scale: float, hidden_size: int, inter_size: int, topk: int, num_experts: int,
        moe_tp_size: int, moe_ep_size: int, attention_dp_size: int, quant_mode: str,
        workload_distribution: str, *, is_context: bool = True, is_gated: bool = True) -> dict:
    return {"Moe": {
        "name": name, "scale_factor": _f(scale), "hidden_size": int(hidden_size),
        "inter_size": int(inter_size), "topk": int(topk), "num_experts": int(num_experts),
        "moe_tp_size": int(moe_tp_size), "moe_ep_size": int(moe_ep_size),
        "attention_dp_size": int(attention_dp_size), "quant_mode": quant_mode,
        "workload_distribution": workload_distribution, "is_gated": bool(is_gated), "moe_backend": None,
        "enable_eplb": False, "is_context": bool(is_context),
    }}


def moe_dispatch(name: str, scale: float, hidden_size: int, topk: int, num_experts: int,
                 moe_tp_size: int, moe_ep_size: int, attention_dp_size: int, pre_dispatch: bool,
                 backend: str, moe_quant: str, *, is_context: bool, attn_ar_modeled: bool = False,
                 sms: int = 12, scale_num_tokens: int = 1) -> dict:
    """``attn_ar_modeled``: the attention all-reduce is its own op (vLLM then drops it from the
    pre-dispatch); ``sms`` and ``scale_num_tokens`` are carried but not read by the engine."""
    flavor = "TrtllmAlltoall" if backend == "trtllm" else "CustomAllReduce"
    return {"MoeDispatch": {
        "name": name, "scale_factor": _f(scale), "hidden_size": int(hidden_size), "topk": int(topk),
        "num_experts": int(num_experts), "moe_tp_size": int(moe_tp_size),
        "moe_ep_size": int(moe_ep_size), "attention_dp_size": int(attention_dp_size),
        "pre_dispatch": bool(pre_dispatch), "attn_ar_modeled": bool(attn_ar_modeled),
        "backend": backend, "flavor": flavor, "comm_quant": "half", "moe_quant": moe_quant,
        "attn_cp_size": 1, "is_context": bool(is_context), "sms": int(sms),
        "scale_num_tokens": int(scale_num_tokens),
    }}


def gdn(name: str, scale: float, kernel_source: str, phase: str, d_model: int, d_conv: int,
        num_k_heads: int, head_k_dim: int, num_v_heads: int, head_v_dim: int,
        mamba_ssm_dtype: str) -> dict:
    """One Gated-DeltaNet kernel (spec 31 §4.6); head counts are the per-TP shard's."""
    return {"Gdn": {
        "name": name, "scale_factor": _f(scale), "kernel_source": kernel_source, "phase": phase,
        "d_model": int(d_model), "d_conv": int(d_conv), "num_k_heads": int(num_k_heads),
        "head_k_dim": int(head_k_dim), "num_v_heads": int(num_v_heads),
        "head_v_dim": int(head_v_dim), "mamba_ssm_dtype": mamba_ssm_dtype,
    }}


def mamba2(name: str, scale: float, kernel_source: str, phase: str, d_model: int, d_state: int,
           d_conv: int, nheads: int, head_dim: int, n_groups: int, chunk_size: int) -> dict:
    """One Mamba2 kernel (spec 33 §7.1); head and group counts are the whole layer's."""
    return {"Mamba2": {
        "name": name, "scale_factor": _f(scale), "kernel_source": kernel_source, "phase": phase,
        "d_model": int(d_model), "d_state": int(d_state), "d_conv": int(d_conv),
        "nheads": int(nheads), "head_dim": int(head_dim), "n_groups": int(n_groups),
        "chunk_size": int(chunk_size),
    }}


def variant(op: dict) -> str:
    """The variant tag of an op."""
    return next(iter(op))


def fields(op: dict) -> dict:
    """The field dict of an op."""
    return next(iter(op.values()))


# --------------------------------------------------------------------------------------------
# MLA ops and composites (spec 30 §5.1, §8.3)
# --------------------------------------------------------------------------------------------


def context_mla(name: str, scale: float, num_heads: int, kv_cache_dtype: str,
                fmha_quant_mode: str) -> dict:
    check_fmha(fmha_quant_mode)
    return {"ContextMla": {
        "name": name, "scale_factor": _f(scale), "num_heads": int(num_heads),
        "kv_cache_dtype": kv_cache_dtype, "fmha_quant_mode": fmha_quant_mode, "cp_size": 1,
    }}


def generation_mla(name: str, scale: float, num_heads: int, kv_cache_dtype: str) -> dict:
    return {"GenerationMla": {
        "name": name, "scale_factor": _f(scale), "num_heads": int(num_heads),
        "kv_cache_dtype": kv_cache_dtype,
    }}


def mla_bmm(name: str, scale: float, num_heads: int, quant_mode: str, is_pre: bool) -> dict:
    return {"MlaBmm": {
        "name": name, "scale_factor": _f(scale), "num_heads": int(num_heads),
        "quant_mode": quant_mode, "is_pre": bool(is_pre),
    }}


def mla_module(name: str, scale: float, num_heads: int, kv_cache_dtype: str, fmha_quant_mode: str,
               gemm_quant_mode: str, native_num_heads: int, *, is_context: bool) -> dict:
    """``MlaModuleContext`` / ``MlaModuleGeneration`` (same fields)."""
    check_fmha(fmha_quant_mode)
    tag = "MlaModuleContext" if is_context else "MlaModuleGeneration"
    return {tag: {
        "name": name, "scale_factor": _f(scale), "num_heads": int(num_heads),
        "kv_cache_dtype": kv_cache_dtype, "fmha_quant_mode": fmha_quant_mode,
        "gemm_quant_mode": gemm_quant_mode, "native_num_heads": int(native_num_heads),
    }}


def fallback(name: str, primary: dict, fallback_ops: list[dict]) -> dict:
    """Priced by ``primary`` when its data exists, else by the sum of ``fallback_ops``."""
    return {"Fallback": {"name": name, "primary": primary, "fallback": list(fallback_ops)}}


def overlap(name: str, group_a: list[dict], group_b: list[dict]) -> dict:
    """Two op groups that run concurrently (the slower group counts)."""
    return {"Overlap": {"name": name, "group_a": list(group_a), "group_b": list(group_b)}}
