"""Engine flags of a vLLM or SGLang role (spec 60 §7.1): which flags appear, in which order,
and their two printed forms — the flag **string** of the templates (valued flags in double
quotes, lists bare) used by the run scripts and the SGLang worker script, and the **token list**
(the string shell-split) used by the vLLM manifest and the llm-d files."""

from __future__ import annotations

import json
import shlex

from .facts import hardware_profile
from .params import PickParams

#: vLLM's KV-transfer setting of disaggregated roles (spec 60 §6.2).
VLLM_KV_TRANSFER = json.dumps({"kv_connector": "NixlConnector", "kv_role": "kv_both"},
                              separators=(",", ":"))


class Flag:
    """One flag: ``value`` ``None`` for a switch; ``style`` ``quoted`` (``"4"`` in the
    string), ``bare`` (unquoted), ``list`` (space-separated values) or ``json`` (one
    single-quoted token)."""

    __slots__ = ("name", "value", "style")

    def __init__(self, name: str, value=None, style: str = "quoted"):
        self.name, self.value, self.style = name, value, style

    def tokens(self) -> list[str]:
        """The flag as shell tokens."""
        if self.value is None:
            return [self.name]
        if self.style == "list":
            return [self.name, *(str(v) for v in self.value)]
        return [self.name, str(self.value)]

    def text(self) -> str:
        """The flag as the template prints it."""
        if self.value is None:
            return self.name
        if self.style == "list":
            return " ".join([self.name, *(str(v) for v in self.value)])
        if self.style == "json":
            return f"{self.name} '{self.value}'"
        if self.style == "bare":
            return f"{self.name} {self.value}"
        return f'{self.name} "{self.value}"'


def kv_dtype(backend: str, dtype: str | None) -> str | None:
    """The engine's KV-cache dtype name (spec 60 §7.1: bf16 -> ``auto``; SGLang fp8 ->
    ``fp8_e4m3``)."""
    if dtype in (None, "bfloat16", "float16", "auto"):
        return "auto" if dtype is not None else None
    if backend == "sglang" and dtype == "fp8":
        return "fp8_e4m3"
    return dtype


def vllm_flags(pick: PickParams, name: str) -> list[Flag]:
    """The vLLM engine flags of role ``name`` in the template's order (spec 60 §7.1)."""
    r = pick.roles[name]
    out = [Flag("--tensor-parallel-size", r["tensor_parallel_size"]),
           Flag("--pipeline-parallel-size", r["pipeline_parallel_size"]),
           Flag("--data-parallel-size", r["data_parallel_size"])]
    if r.get("enable_expert_parallel"):
        out.append(Flag("--enable-expert-parallel"))
    if r.get("block_size"):
        out.append(Flag("--block-size", r["block_size"]))
    dtype = kv_dtype("vllm", r.get("kv_cache_dtype"))
    if dtype is not None:
        out.append(Flag("--kv-cache-dtype", dtype))
    if name == "agg" and r.get("max_seq_len") is not None:
        out.append(Flag("--max-model-len", r["max_seq_len"]))
    if r.get("max_batch_size") is not None:
        out.append(Flag("--max-num-seqs", r["max_batch_size"]))
    if r.get("max_num_tokens") is not None:
        out.append(Flag("--max-num-batched-tokens", r["max_num_tokens"], "bare"))
    if r.get("cuda_graph_batch_sizes"):
        out.append(Flag("--cudagraph-capture-sizes", r["cuda_graph_batch_sizes"], "list"))
    if r.get("disable_prefix_cache"):
        out.append(Flag("--no-enable-prefix-caching"))
    if r.get("speculative_decoding_type"):
        spec = json.dumps({"method": r["speculative_decoding_type"],
                           "num_speculative_tokens": r["num_nextn_predict_layers"]})
        out.append(Flag("--speculative-config", spec, "json"))
    return out


def sglang_flags(pick: PickParams, name: str) -> list[Flag]:
    """The SGLang engine flags of role ``name`` in the template's order (spec 60 §7.1), the
    hardware's MoE runner appended last."""
    r = pick.roles[name]
    out = [Flag("--tensor-parallel-size", r["tensor_parallel_size"]),
           Flag("--pipeline-parallel-size", r["pipeline_parallel_size"]),
           Flag("--data-parallel-size", r["data_parallel_size"])]
    if r.get("tokens_per_block"):
        out.append(Flag("--page-size", r["tokens_per_block"]))
    dtype = kv_dtype("sglang", r.get("kv_cache_dtype"))
    if dtype is not None:
        out.append(Flag("--kv-cache-dtype", dtype))
    if r.get("max_seq_len") is not None:
        out.append(Flag("--context-length", r["max_seq_len"]))
    if r.get("max_batch_size") is not None:
        out.append(Flag("--max-running-requests", r["max_batch_size"]))
    if r.get("enable_chunked_prefill") and r.get("max_num_tokens") is not None:
        out.append(Flag("--chunked-prefill-size", r["max_num_tokens"]))
    if r.get("max_prefill_tokens") is not None:
        out.append(Flag("--max-prefill-tokens", r["max_prefill_tokens"]))
    if r.get("enable_mixed_chunk"):
        out.append(Flag("--enable-mixed-chunk"))
    if r.get("disable_prefix_cache"):
        out.append(Flag("--disable-radix-cache"))
    if r.get("enable_attention_dp"):
        out.append(Flag("--enable-dp-attention"))
    out.append(Flag("--expert-parallel-size", r["moe_expert_parallel_size"]))
    if r.get("kv_transfer_backend"):
        out.append(Flag("--disaggregation-transfer-backend", r["kv_transfer_backend"]))
    if r.get("cuda_graph_batch_sizes"):
        out.append(Flag("--cuda-graph-bs", r["cuda_graph_batch_sizes"], "list"))
    if r.get("cuda_graph_batch_sizes") and r.get("cuda_graph_enable_padding") is False:
        out.append(Flag("--disable-cuda-graph-padding"))
    if r.get("speculative_decoding_type"):
        out += [Flag("--speculative-algorithm", r["speculative_decoding_type"]),
                Flag("--speculative-num-steps", r["num_nextn_predict_layers"]),
                Flag("--speculative-eagle-topk", r["speculative_eagle_topk"]),
                Flag("--speculative-num-draft-tokens", r["speculative_num_draft_tokens"])]
    if r.get("disable_overlap_scheduler"):
        out.append(Flag("--disable-overlap-schedule"))
    return out


def sglang_fact_flags(pick: PickParams) -> list[Flag]:
    """Flags a hardware fact appends (spec 60 §7.5: ``--moe-runner-backend deepep_moe`` for
    MoE models on b200 / gb200)."""
    profile = hardware_profile(pick.system)
    if pick.is_moe and profile is not None and profile.sglang_moe_runner:
        return [Flag("--moe-runner-backend", profile.sglang_moe_runner)]
    return []


def role_flags(pick: PickParams, name: str) -> tuple[str, list[str]]:
    """``(flag string, token list)`` of role ``name`` (spec 60 §7.1). When a fact appended
    flags, the string is rebuilt from the tokens, each shell-quoted only where needed."""
    if pick.backend == "vllm":
        flags = vllm_flags(pick, name)
        return " ".join(f.text() for f in flags), [t for f in flags for t in f.tokens()]
    flags = sglang_flags(pick, name)
    facts = sglang_fact_flags(pick)
    tokens = [t for f in flags + facts for t in f.tokens()]
    if facts:
        return " ".join(shlex.quote(t) for t in tokens), tokens
    return " ".join(f.text() for f in flags), tokens
