"""The rule layer (spec 60 §4.3, §4.4): the engine limits a pick implies — max sequences,
batched tokens, model length, CUDA-graph sizes, KV transfer, overlap scheduler, attention-DP and
expert-parallel switches, prefix cache and router, MTP — derived in one place from the row's
simulated values. Each step cites its spec section; steps run in the spec's order and each sees
the results of the earlier ones.

One deliberate difference from the reference (spec 60 §16.1): for SGLang and TRT-LLM
attention-DP MoE workers ``gpus_per_worker`` is the row's ``tp · pp · dp`` (the GPUs the
estimate priced), not the MoE-rule ``tp`` times ``dp`` again.
"""

from __future__ import annotations

from .params import PickParams

#: Tokens added to the prompt for the vLLM / SGLang token limits (spec 60 §4.3 vLLM step 5).
VLLM_TOKEN_SLACK = 1500
#: Tokens added for the TRT-LLM production limits (spec 60 §4.3 TRT-LLM step 6; §4.4: 1500).
TRTLLM_TOKEN_SLACK = 500
#: The batch floor of vLLM / SGLang agg and decode workers (spec 60 §4.3 vLLM step 2).
BATCH_FLOOR = 512
#: The TRT-LLM KV block size when unset (spec 60 §4.3 TRT-LLM step 5).
TOKENS_PER_BLOCK = 32


def ceil_to(x: int, m: int) -> int:
    """``((x + m - 1) // m) * m`` (spec 60 conventions)."""
    return ((x + m - 1) // m) * m


def cuda_graph_sizes(bs: int) -> list[int]:
    """L(bs), the CUDA-graph list of spec 60 §4.3: the fixed ladders (duplicates kept) and the
    window ``[max(1, bs - 8) .. bs + 8]``."""
    out = list(range(1, 17))
    for ladder in ((16, 20, 24, 28, 32), (32, 40, 48, 56, 64), (64, 80, 96, 112, 128),
                   (128, 160, 192, 224, 256), (256, 320, 384, 448, 512)):
        out.extend(ladder)
    out.extend(range(max(1, bs - 8), bs + 9))
    return out


def _roles(pick: PickParams, names: str = "agg_prefill_decode"):
    """The roles of ``pick`` an assignment targets (``agg_decode``, ``prefill``, ...)."""
    wanted = names.split("_")
    return [(n, pick.roles[n]) for n in wanted if n in pick.roles]


def _estimated_concurrency(pick: PickParams) -> None:
    # §4.3 vLLM/SGLang/TRT-LLM step 1: before the batch rules, from the simulated batch.
    if pick.estimated_concurrency is not None:
        return
    if "agg" in pick.roles:
        pick.estimated_concurrency = pick.workers["agg"] * (pick.roles["agg"]["max_batch_size"] or 1)
    else:
        pick.estimated_concurrency = (pick.workers["decode"]
                                      * (pick.roles["decode"]["max_batch_size"] or 1))


def _floor_batch(bs) -> int:
    # §4.3 vLLM step 2 / SGLang step 3: 512 if bs < 512 else 2 × bs.
    bs = bs or 1
    return BATCH_FLOOR if bs < BATCH_FLOOR else 2 * bs


def _prefix_and_mtp(pick: PickParams, spec_type: str) -> None:
    # §4.3 vLLM steps 6-7, SGLang 9-10, TRT-LLM 9-10.
    if pick.prefix > 0:
        for _, r in _roles(pick):
            r["disable_prefix_cache"] = False
        pick.enable_router = True
    if pick.nextn > 0:
        for _, r in _roles(pick):
            r["speculative_decoding_type"] = spec_type
            r["num_nextn_predict_layers"] = pick.nextn
            if spec_type == "NEXTN":
                r["speculative_eagle_topk"] = 1
                r["speculative_num_draft_tokens"] = pick.nextn + 1


def _corrected_gpus(pick: PickParams) -> None:
    # §4.3 "gpus_per_worker" step with the §16.1 correction: the row's tp × pp × dp.
    for name, r in _roles(pick):
        r["gpus_per_worker"] = pick.row_gpus[name]


def _vllm(pick: PickParams, limits: bool, benchmark: bool) -> None:
    isl, osl = pick.isl, pick.osl
    _estimated_concurrency(pick)                                     # §4.3 step 1
    if benchmark:                                                    # §4.4 vLLM
        for _, r in _roles(pick, "prefill"):
            r["max_batch_size"] = r["max_batch_size"] or 1
        for _, r in _roles(pick, "decode"):
            r["max_batch_size"] = r["max_batch_size"] or 128
    elif limits:                                                     # §4.3 step 2
        for _, r in _roles(pick, "agg_decode"):
            r["max_batch_size"] = _floor_batch(r["max_batch_size"])
        for _, r in _roles(pick, "prefill"):
            r["max_batch_size"] = r["max_batch_size"] or 1
    if pick.is_moe and not benchmark:                                # §4.3 step 3
        for _, r in _roles(pick):
            r["tensor_parallel_size"] = ((r["moe_tensor_parallel_size"]
                                          * r["moe_expert_parallel_size"])
                                         // r["data_parallel_size"])
    for _, r in _roles(pick):                                        # §4.3 step 4
        r["gpus_per_worker"] = (r["tensor_parallel_size"] * r["pipeline_parallel_size"]
                                * r["data_parallel_size"])
        r["enable_expert_parallel"] = r["moe_expert_parallel_size"] > 1
    if benchmark:                                                    # §4.4 vLLM graphs
        for _, r in _roles(pick):
            r["cuda_graph_batch_sizes"] = list(range(1, (r["max_batch_size"] or 0) + 1))
    if limits:                                                       # §4.3 step 5
        for _, r in _roles(pick, "prefill"):
            r["max_num_tokens"] = isl + VLLM_TOKEN_SLACK
        for _, r in _roles(pick, "decode"):
            r["max_num_tokens"] = r["max_batch_size"]
        for _, r in _roles(pick, "agg"):
            r["max_num_tokens"] = r["max_batch_size"] + isl + VLLM_TOKEN_SLACK
            r["max_seq_len"] = isl + osl + VLLM_TOKEN_SLACK
    _prefix_and_mtp(pick, "mtp")                                     # §4.3 steps 6-7
    if benchmark:                                                    # §4.4: bf16 KV -> auto
        for _, r in _roles(pick):
            if r.get("kv_cache_dtype") == "bfloat16":
                r["kv_cache_dtype"] = "auto"


def _sglang(pick: PickParams, limits: bool, benchmark: bool) -> None:
    isl = pick.isl
    _estimated_concurrency(pick)                                     # §4.3 step 1
    if not benchmark:                                                # §4.3 step 2
        for _, r in _roles(pick, "agg_decode"):
            r["cuda_graph_batch_sizes"] = cuda_graph_sizes(r["max_batch_size"] or 1)
            r["cuda_graph_enable_padding"] = True
    if limits or benchmark:                                          # §4.3 step 3 / §4.4
        for _, r in _roles(pick, "prefill"):
            r["max_batch_size"] = r["max_batch_size"] or 1
        for _, r in _roles(pick, "agg_decode"):
            r["max_batch_size"] = ((r["max_batch_size"] or 128) if benchmark
                                   else _floor_batch(r["max_batch_size"]))
    if limits:                                                       # §4.3 step 4
        for _, r in _roles(pick):
            r["max_prefill_tokens"] = isl + VLLM_TOKEN_SLACK
    for _, r in _roles(pick, "agg"):                                 # §4.3 step 5
        r["enable_mixed_chunk"] = True
    if benchmark:                                                    # §4.4 SGLang graphs
        for _, r in _roles(pick):
            r["cuda_graph_batch_sizes"] = list(range(1, (r["max_batch_size"] or 0) + 1))
    if pick.is_moe:                                                  # §4.3 step 6
        for _, r in _roles(pick):
            r["tensor_parallel_size"] = (r["moe_tensor_parallel_size"]
                                         * r["moe_expert_parallel_size"])
    _corrected_gpus(pick)                                            # §4.3 step 7, §16.1
    for _, r in _roles(pick):
        r["enable_attention_dp"] = r["data_parallel_size"] > 1 and pick.is_moe
    if benchmark:                                                    # §4.4: fp8 KV name
        for _, r in _roles(pick):
            if r.get("kv_cache_dtype") == "fp8":
                r["kv_cache_dtype"] = "fp8_e4m3"
    for _, r in _roles(pick, "prefill_decode"):                      # §4.3 step 8
        r.setdefault("kv_transfer_backend", "nixl")
    if benchmark:
        for _, r in _roles(pick):
            if r.get("kv_cache_dtype") == "bfloat16":
                r["kv_cache_dtype"] = "auto"
    _prefix_and_mtp(pick, "NEXTN")                                   # §4.3 steps 9-10


def _trtllm(pick: PickParams, limits: bool, benchmark: bool) -> None:
    isl, osl = pick.isl, pick.osl
    slack = VLLM_TOKEN_SLACK if benchmark else TRTLLM_TOKEN_SLACK   # §4.4: +1500
    _estimated_concurrency(pick)                                     # §4.3 step 1
    if not benchmark:                                                # §4.3 step 2
        for _, r in _roles(pick, "agg_decode"):
            r["cuda_graph_batch_sizes"] = cuda_graph_sizes(r["max_batch_size"] or 1)
            r["cuda_graph_enable_padding"] = True
    if limits or benchmark:                                          # §4.3 step 3
        for _, r in _roles(pick, "prefill"):
            r["max_batch_size"] = r["max_batch_size"] or 1
        for _, r in _roles(pick, "agg_decode"):
            r["max_batch_size"] = r["max_batch_size"] or 128
    for name, r in _roles(pick):                                     # §4.3 step 4
        r["disable_overlap_scheduler"] = name == "prefill"
    for _, r in _roles(pick):                                        # §4.3 step 5
        r.setdefault("tokens_per_block", TOKENS_PER_BLOCK)
    if limits:                                                       # §4.3 step 6
        for _, r in _roles(pick, "prefill"):
            r["max_num_tokens"] = ceil_to(isl + slack, r["tokens_per_block"])
        for _, r in _roles(pick, "decode"):
            r["max_num_tokens"] = ceil_to(r["max_batch_size"], r["tokens_per_block"])
        for _, r in _roles(pick, "agg"):
            r["max_num_tokens"] = ceil_to(r["max_batch_size"] + isl + slack,
                                          r["tokens_per_block"])
        for _, r in _roles(pick, "prefill_decode"):
            r["cache_transceiver_max_tokens_in_buffer"] = ceil_to(isl + osl + slack,
                                                                  r["tokens_per_block"])
    if benchmark:                                                    # §4.4 TRT-LLM graphs
        for _, r in _roles(pick):
            r["cuda_graph_batch_sizes"] = list(range(1, (r["max_batch_size"] or 0) + 1))
    if pick.is_moe:                                                  # §4.3 step 7
        for _, r in _roles(pick):
            r["tensor_parallel_size"] = (r["moe_tensor_parallel_size"]
                                         * r["moe_expert_parallel_size"])
    _corrected_gpus(pick)                                            # §4.3 step 8, §16.1
    for _, r in _roles(pick):
        r["enable_attention_dp"] = r["data_parallel_size"] > 1 and pick.is_moe
    _prefix_and_mtp(pick, "MTP")                                     # §4.3 steps 9-10
    for _, r in _roles(pick):                                        # §4.3 step 11
        if r.get("kv_cache_dtype") in ("float16", "bfloat16"):
            r["kv_cache_dtype"] = "auto"


_RULES = {"vllm": _vllm, "sglang": _sglang, "trtllm": _trtllm}


def apply_rules(pick: PickParams) -> PickParams:
    """Runs the backend's rules (production, or ``rule=benchmark``) on ``pick`` in place and
    returns it. ``preserve_engine_limits=true`` skips the *limits* blocks."""
    benchmark = pick.options.get("rule", "production") == "benchmark"
    limits = not pick.options.get("preserve_engine_limits", False)
    _RULES[pick.backend](pick, limits, benchmark)
    return pick
