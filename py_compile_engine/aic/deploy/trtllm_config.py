"""TRT-LLM engine configs (spec 60 §6.3): the parsed config of a role (``agg_config.yaml``,
``prefill_config.yaml``, ``decode_config.yaml`` are it dumped as block YAML) and the raw text
the Dynamo worker script embeds, which keeps the engine template's layout (empty lines,
``#`` comments, ``True``/``False``, flow lists without spaces) byte for byte. Both come from the
same key/value data; the raw text is laid out line by line from it."""

from __future__ import annotations

from .facts import hardware_profile
from .params import PickParams

#: The comments the engine template carries on two keys (spec 60 §6.3), with their spacing.
_FRACTION_COMMENT = "  # Fraction of GPU memory usable for KV-cache"
_TRANSCEIVER_COMMENT = (' # The communication backend type to use for the cache transceiver '
                        '("DEFAULT","UCX","NIXL","MPI")')
_PADDING_COMMENT = " # Pad CUDA graph"
#: The prefill batch list when no rule sets one (spec 60 §6.3 item 7).
DEFAULT_BATCH_SIZES = [1, 2, 4, 8, 16, 32, 64, 128, 256]
FREE_GPU_MEMORY_FRACTION = 0.8


def engine_config(pick: PickParams, name: str) -> dict:
    """The engine config of role ``name`` as data, keys in the template's order (spec 60
    §6.3)."""
    r = pick.roles[name]
    cfg: dict = {"backend": "pytorch"}
    if pick.is_moe:
        profile = hardware_profile(pick.system)
        cfg["moe_expert_parallel_size"] = r["moe_expert_parallel_size"]
        cfg["moe_tensor_parallel_size"] = r["moe_tensor_parallel_size"]
        cfg["moe_config"] = {"backend": profile.trtllm_moe_backend if profile else "CUTLASS"}
    cfg["tensor_parallel_size"] = r["tensor_parallel_size"]
    cfg["pipeline_parallel_size"] = r["pipeline_parallel_size"]
    cfg["enable_attention_dp"] = bool(r.get("enable_attention_dp", False))
    cfg["enable_chunked_prefill"] = bool(r.get("enable_chunked_prefill", False))
    cfg["max_batch_size"] = r["max_batch_size"]
    cfg["max_num_tokens"] = r["max_num_tokens"]
    if r.get("max_seq_len") is not None:
        cfg["max_seq_len"] = r["max_seq_len"]
    dtype = r.get("kv_cache_dtype") or "auto"
    cfg["kv_cache_config"] = {
        "free_gpu_memory_fraction": r.get("kv_cache_free_gpu_memory_fraction",
                                          FREE_GPU_MEMORY_FRACTION),
        "dtype": dtype,
        "tokens_per_block": r["tokens_per_block"],
        "enable_block_reuse": r.get("disable_prefix_cache") is False,
    }
    if r.get("cache_transceiver_max_tokens_in_buffer") is not None:
        cfg["cache_transceiver_config"] = {
            "backend": "DEFAULT",
            "max_tokens_in_buffer": r["cache_transceiver_max_tokens_in_buffer"]}
    cfg["cuda_graph_config"] = {
        "enable_padding": bool(r.get("cuda_graph_enable_padding", False)),
        "batch_sizes": list(r.get("cuda_graph_batch_sizes") or DEFAULT_BATCH_SIZES)}
    cfg["disable_overlap_scheduler"] = bool(r["disable_overlap_scheduler"])
    cfg["print_iter_log"] = False
    if r.get("speculative_decoding_type"):
        cfg["speculative_config"] = {"decoding_type": r["speculative_decoding_type"],
                                     "num_nextn_predict_layers": r["num_nextn_predict_layers"]}
    return cfg


def _scalar(value) -> str:
    if isinstance(value, bool):
        return "True" if value else "False"
    if isinstance(value, list):
        return "[" + ",".join(str(v) for v in value) + "]"
    return str(value)


def raw_text_lines(cfg: dict) -> list[str]:
    """The engine template's text of ``cfg`` (spec 60 §6.3 layout), as lines."""
    def line(key, comment=""):
        return f"{key}: {_scalar(cfg[key])}{comment}"

    def child(block, key, comment=""):
        return f"  {key}: {_scalar(cfg[block][key])}{comment}"

    out = [line("backend"), ""]
    if "moe_config" in cfg:
        out += [line("moe_expert_parallel_size"), line("moe_tensor_parallel_size"),
                "moe_config:", child("moe_config", "backend")]
    out += ["", line("tensor_parallel_size"), line("pipeline_parallel_size"),
            line("enable_attention_dp"), line("enable_chunked_prefill"), "", "",
            line("max_batch_size"), line("max_num_tokens")]
    if "max_seq_len" in cfg:
        out.append(line("max_seq_len"))
    out += ["", "kv_cache_config:",
            child("kv_cache_config", "free_gpu_memory_fraction", _FRACTION_COMMENT),
            child("kv_cache_config", "dtype"), child("kv_cache_config", "tokens_per_block"),
            child("kv_cache_config", "enable_block_reuse"), ""]
    if "cache_transceiver_config" in cfg:
        out += ["cache_transceiver_config:",
                child("cache_transceiver_config", "backend", _TRANSCEIVER_COMMENT),
                child("cache_transceiver_config", "max_tokens_in_buffer")]
    out += ["", "cuda_graph_config:",
            child("cuda_graph_config", "enable_padding", _PADDING_COMMENT),
            child("cuda_graph_config", "batch_sizes"), "",
            line("disable_overlap_scheduler"), line("print_iter_log")]
    if "speculative_config" in cfg:
        out += ["speculative_config:", child("speculative_config", "decoding_type"),
                child("speculative_config", "num_nextn_predict_layers")]
    while out and out[0] == "":
        out.pop(0)
    while out and out[-1] == "":
        out.pop()
    return out
