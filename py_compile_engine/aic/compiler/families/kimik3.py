"""Family KIMIK3: Kimi delta attention (KDA) interleaved with MLA, a latent MoE, a fixed draft model
(spec 36 §1.3, §4.3, §4.4).

Architecture: KimiK3ForConditionalGeneration (text model under ``text_config``). Layer ``i`` is a
KDA linear-attention layer when ``i + 1`` is listed in ``linear_attn_config.kda_layers`` and an
MLA layer otherwise; only the two counts matter. The KDA kernels are ``Kda`` ops priced from the
``kda_perf`` tables; the MLA block is the DeepSeek one (a ``Fallback`` around the MLA module on
vLLM, the granular MLA ops elsewhere) with an output gate. The routed experts run in a latent
space (``routed_expert_hidden_size``) between a down and an up projection.

Speculative decoding (``nextn > 0``) is DSPARK: it does not scale the layer ops by MTP; the KDA
ops switch to the verify kernels (``draft_tokens = nextn + 1``) and a fixed 5-layer draft model
(``draft_*`` ops, an MLA-style draft on vLLM and a GQA draft elsewhere) is appended to the
generation list, amortised over the accepted block.
"""

from __future__ import annotations

from collections import namedtuple

from .. import config_checks, ops
from ..hf_config import ModelConfig
from ..parallel import check_experts, check_heads
from . import BuildContext
from .deepseek import WORKLOAD_DISTRIBUTION

#: Layers of the DSPARK draft model.
DRAFT_LAYERS = 5
#: FFN width of a draft layer.
DRAFT_INTER = 14336
#: Draft attention: query heads, head size of the GQA draft, its KV heads.
DRAFT_HEADS = 64
DRAFT_GQA_HEAD = 64
DRAFT_KV_HEADS = 16
#: Draft MLA geometry on vLLM: q_lora, the latent KV (kv_lora + rope), q head dim, v head dim.
DRAFT_Q_LORA = 1536
DRAFT_KV_LATENT = 512 + 64
DRAFT_QK_HEAD = 192
DRAFT_V_HEAD = 128


class KimiK3Layout(namedtuple("KimiK3Layout", (
        "n_kda",  # int
        "n_mla",  # int
        "kda_heads",  # int
        "kda_hd",  # int
        "conv",  # int
        "q_lora",  # int
        "kv_lora",  # int
        "qk_nope",  # int
        "qk_rope",  # int
        "v_dim",  # int
        "topk",  # int
        "latent",  # int
        "n_shared",  # int
        "n_dense",  # int
        "dense_i",  # int
        "attn_res",  # int
))):
    """The parsed KIMIK3 extras (spec 36 §1.3).
    Immutable (a named tuple: see ``aic.compiler.parallel``)."""

    __slots__ = ()


def parse(model: ModelConfig) -> KimiK3Layout:
    """The layer plan and extras of a Kimi-K3 text config; raises for a missing or wrong plan."""
    t = model.text or model.raw
    lin = t.get("linear_attn_config") or {}
    ids = list(lin.get("kda_layers") or [])
    if not ids:
        raise ValueError("Kimi-K3 config must define linear_attn_config.kda_layers")
    L = model.num_layers
    bad = sorted(i for i in ids if not 1 <= int(i) <= L)
    if bad:
        raise ValueError(
            f"Kimi-K3 linear_attn_config.kda_layers contains out-of-range 1-based layer ids {bad} "
            f"(num_hidden_layers={L}); they would be silently dropped and produce a wrong hybrid "
            f"layer plan."
        )
    listed = {int(i) for i in ids}
    n_kda = sum(1 for i in range(L) if i + 1 in listed)
    return KimiK3Layout(
        n_kda=n_kda,
        n_mla=L - n_kda,
        kda_heads=int(lin["num_heads"]),
        kda_hd=int(lin["head_dim"]),
        conv=int(lin.get("short_conv_kernel_size", 4)),
        q_lora=int(t["q_lora_rank"]),
        kv_lora=int(t["kv_lora_rank"]),
        qk_nope=int(t["qk_nope_head_dim"]),
        qk_rope=int(t["qk_rope_head_dim"]),
        v_dim=int(t["v_head_dim"]),
        topk=model.topk or int(t.get("num_experts_per_token") or 0),
        latent=int(t.get("routed_expert_hidden_size") or 0) or model.hidden_size,
        n_shared=int(t.get("num_shared_experts") or 0),
        n_dense=int(t.get("first_k_dense_replace") or 0),
        dense_i=int(t.get("intermediate_size") or 0),
        attn_res=int(t.get("attn_res_block_size") or 0),
    )


def kda(name: str, scale: float, kernel: str, phase: str, h: int, k: KimiK3Layout, nk: int,
        draft_tokens: int) -> dict:
    """One KDA kernel op (spec 36 §6.1) of the per-rank shard ``nk`` heads."""
    return {"Kda": {
        "name": name, "scale_factor": float(scale), "kernel_source": kernel, "phase": phase,
        "d_model": int(h), "d_conv": int(k.conv), "num_k_heads": int(nk), "head_k_dim": int(k.kda_hd),
        "num_v_heads": int(nk), "head_v_dim": int(k.kda_hd), "draft_tokens": int(draft_tokens),
    }}


def check_layer_config(model: ModelConfig, k: KimiK3Layout, *, vllm: bool) -> None:
    """The KDA op sizes of ``linear_attn_config``, and when there are MLA layers the LoRA ranks
    and value head size their GEMMs use (plus the KV heads of vLLM's attention ops)."""
    kda_fix = "a size of the KDA layers; copy it from the checkpoint's linear_attn_config"
    if k.n_kda:
        config_checks.at_least_one("linear_attn_config.num_heads", k.kda_heads, kda_fix)
        config_checks.at_least_one("linear_attn_config.head_dim", k.kda_hd, kda_fix)
        config_checks.at_least_one("linear_attn_config.short_conv_kernel_size", k.conv, kda_fix)
    if k.n_mla:
        mla_fix = "a size of the MLA layers; copy it from the checkpoint's text_config"
        config_checks.at_least_one("q_lora_rank", k.q_lora, mla_fix)
        config_checks.at_least_one("kv_lora_rank", k.kv_lora, mla_fix)
        config_checks.at_least_one("v_head_dim", k.v_dim, mla_fix)
        if vllm:
            config_checks.at_least_one("num_key_value_heads", model.num_kv_heads,
                                       "vLLM prices MLA attention per KV head; set it to "
                                       "num_attention_heads")


def build(model: ModelConfig, ctx: BuildContext) -> tuple[list[dict], list[dict]]:
    """The context and generation op lists of a Kimi-K3 model (spec 36 §4.3, §4.4)."""
    k = parse(model)
    tp, pp = ctx.tp_size, ctx.pp_size
    mtp, mep, adp = ctx.moe_tp_size, ctx.moe_ep_size, ctx.attention_dp_size
    L, h, n, B = model.num_layers, model.hidden_size, model.num_heads, ctx.backend
    vocab, E, MI = model.vocab_size, model.num_experts, model.moe_intermediate_size
    check_heads(n, tp)
    if ctx.cp_size > 1:
        raise NotImplementedError("Kimi-K3 does not support context parallelism")
    if k.kda_heads % tp != 0:
        raise ValueError(
            f"Kimi-K3 KDA heads ({k.kda_heads}) are not divisible by tp_size ({tp}); per-rank KDA "
            f"shard would be truncated and has no collected kernel rows."
        )
    check_experts(E, mep)
    check_layer_config(model, k, vllm=B == "vllm")
    g, kv, f, mq = ctx.gemm_quant_mode, ctx.kvcache_quant_mode, ctx.fmha_quant_mode, ctx.moe_quant_mode
    nk = k.kda_heads // tp
    p = nk * k.kda_hd
    qa = k.q_lora + k.kv_lora + k.qk_rope
    qb = n * (k.qk_nope + k.qk_rope)
    kvb = n * (k.qk_nope + k.v_dim)
    o = n * k.v_dim
    heads = n // tp
    kv_heads = model.num_kv_heads // tp
    vocab_tp = vocab // tp
    nm = L - k.n_dense
    si = k.n_shared * MI
    vllm = B == "vllm"

    def kda_front(px):
        return [
            ops.elementwise(px + "kda_norm", k.n_kda, 2 * h, 2 * h),
            ops.gemm(px + "kda_qkvg_gemm", k.n_kda, 4 * p, h, g),
            ops.gemm(px + "kda_bfa_gemm", k.n_kda, k.kda_heads + k.kda_hd, h, g),
            ops.gemm(px + "kda_fb_gemm", k.n_kda, p, k.kda_hd, g),
        ]

    def kda_back(px, onorm=True):
        out = [ops.elementwise(px + "kda_onorm", k.n_kda, 2 * p, p)] if onorm else []
        return out + [
            ops.gemm(px + "kda_o_gemm", k.n_kda, h, p, g, low_precision_input=True),
            ops.custom_all_reduce(px + "kda_ar", k.n_kda, h, tp),
        ]

    def mla_gate(px):
        return [
            ops.gemm(px + "mla_gate_gemm", k.n_mla, o // tp, h, g),
            ops.elementwise(px + "mla_gate_mul", k.n_mla, 2 * (o // tp), o // tp),
            ops.custom_all_reduce(px + "mla_ar", k.n_mla, h, tp),
        ]

    def q_b(px):
        return ops.gemm(px + "mla_q_b_gemm", k.n_mla, qb // tp, k.q_lora, g)

    def o_gemm(px):
        return ops.gemm(px + "mla_o_gemm", k.n_mla, h, o // tp, g, low_precision_input=True)

    def ffn(px):
        out = []
        if k.attn_res > 0:
            out.append(ops.elementwise(px + "attn_res", 2 * L, 4 * h, 2 * h))
        out.append(ops.elementwise(px + "ffn_norm", L, 2 * h, 2 * h))
        if k.n_dense > 0:
            di = k.dense_i
            out += [
                ops.gemm(px + "dense_gate_up_gemm", k.n_dense, 2 * di // tp, h, g),
                ops.elementwise(px + "dense_act_gate", k.n_dense, 2 * di // tp, di // tp),
                ops.gemm(px + "dense_down_gemm", k.n_dense, h, di // tp, g, low_precision_input=True),
                ops.custom_all_reduce(px + "dense_ffn_ar", k.n_dense, h, tp),
            ]
        if nm > 0 and E > 0:
            def dispatch(pre):
                name = px + ("moe_pre_dispatch" if pre else "moe_post_dispatch")
                return ops.moe_dispatch(name, nm, k.latent, k.topk, E, mtp, mep, adp, pre, B, mq,
                                        is_context=True)

            out += [
                ops.gemm(px + "router_gemm", nm, E, h, "bfloat16"),
                ops.gemm(px + "latent_down_gemm", nm, k.latent, h, "bfloat16"),
                ops.elementwise(px + "latent_norm", nm, 2 * k.latent, 2 * k.latent),
                dispatch(True),
                ops.moe(px + "moe", nm, k.latent, MI, k.topk, E, mtp, mep, adp, mq,
                        WORKLOAD_DISTRIBUTION, is_context=True),
                dispatch(False),
                ops.gemm(px + "latent_up_gemm", nm, h, k.latent, "bfloat16"),
            ]
        if si > 0:
            out += [
                ops.gemm(px + "shared_gate_up_gemm", nm, 2 * si // tp, h, "bfloat16"),
                ops.elementwise(px + "shared_act_gate", nm, 2 * si // tp, si // tp),
                ops.gemm(px + "shared_down_gemm", nm, h, si // tp, "bfloat16"),
            ]
        return out

    # context
    px = "context_"
    context = [
        ops.embedding(px + "embedding", 1.0, vocab_tp, h),
        ops.custom_all_reduce(px + "embedding_ar", 1.0, h, tp),
    ]
    if k.n_kda > 0:
        scan = "flashkda_fwd" if vllm else "chunk_kda"
        context += kda_front(px) + [
            kda(px + "kda_conv1d", k.n_kda, "causal_conv1d_fn_qkv3", "context", h, k, nk, 0),
            kda(px + "kda_scan", k.n_kda, scan, "context", h, k, nk, 0),
        ] + kda_back(px)
    if k.n_mla > 0:
        context += [
            ops.elementwise(px + "mla_norm", k.n_mla, 2 * h, 2 * h),
            ops.gemm(px + "mla_downscale_gemm", k.n_mla, qa, h, g),
        ]
        kv_b = ops.gemm(px + "mla_kv_b_gemm", k.n_mla, kvb // tp, k.kv_lora, g)
        if vllm:
            module = ops.mla_module(px + "mla_module", k.n_mla, heads, kv, f, g, n, is_context=True)
            attn = ops.context_attention(px + "attention", k.n_mla, heads, kv_heads, k.v_dim, 0, kv, f,
                                         False)
            context.append(ops.fallback(px + "mla_block", module, [q_b(px), kv_b, attn, o_gemm(px)]))
        else:
            context += [q_b(px), kv_b, ops.context_mla(px + "attention", k.n_mla, heads, kv, f),
                        o_gemm(px)]
        context += mla_gate(px)
    context += ffn(px)
    context += [
        ops.gemm(px + "logits_gemm", 1.0, vocab_tp, h, "bfloat16"),
        ops.p2p(px + "p2p", float(pp - 1), pp, h),
    ]

    # generation
    spec = ctx.nextn > 0
    D = ctx.nextn + 1 if spec else 0
    px = "generation_"
    generation = [
        ops.embedding(px + "embedding", 1.0, vocab_tp, h),
        ops.custom_all_reduce(px + "embedding_ar", 1.0, h, tp),
    ]
    if k.n_kda > 0:
        if spec:
            verify = "fused_recurrent_kda" if vllm else "fused_sigmoid_gating_delta_rule_update"
            block = [kda(px + "kda_conv1d", k.n_kda, "causal_conv1d_update", "verify", h, k, nk, D),
                     kda(px + "kda_verify", k.n_kda, verify, "verify", h, k, nk, D)]
        elif vllm:
            block = [kda(px + "kda_fused_decode", k.n_kda, "fused_kda_decode", "generation", h, k, nk, 0)]
        else:
            block = [kda(px + "kda_conv1d", k.n_kda, "causal_conv1d_update", "generation", h, k, nk, 0),
                     kda(px + "kda_recurrent", k.n_kda, "fused_recurrent_kda_packed_decode", "generation",
                         h, k, nk, 0)]
        generation += kda_front(px) + block + kda_back(px, onorm=spec or not vllm)
    if k.n_mla > 0:
        generation += [
            ops.elementwise(px + "mla_norm", k.n_mla, 2 * h, 2 * h),
            ops.gemm(px + "mla_downscale_gemm", k.n_mla, qa, h, g),
        ]
        if vllm:
            module = ops.mla_module(px + "mla_module", k.n_mla, heads, kv, f, g, n, is_context=False)
            attn = ops.generation_attention(px + "attention", k.n_mla, heads, kv_heads, k.v_dim, 0, kv)
            generation.append(ops.fallback(px + "mla_block", module, [q_b(px), attn, o_gemm(px)]))
        else:
            bmm_q = "fp8" if g != "bfloat16" else "bfloat16"
            generation += [
                q_b(px),
                ops.mla_bmm(px + "bmm_pre", k.n_mla, heads, bmm_q, True),
                ops.generation_mla(px + "attention", k.n_mla, heads, kv),
                ops.mla_bmm(px + "bmm_post", k.n_mla, heads, bmm_q, False),
                o_gemm(px),
            ]
        generation += mla_gate(px)
    generation += ffn(px)
    generation += [
        ops.gemm(px + "logits_gemm", 1.0, vocab_tp, h, "bfloat16"),
        ops.p2p(px + "p2p", float(pp - 1), pp, h),
    ]
    if spec:
        generation += draft_ops(ctx, h, vocab_tp, D)
    return context, generation


def draft_ops(ctx: BuildContext, h: int, vocab_tp: int, D: int) -> list[dict]:
    """The DSPARK draft model's ops (spec 36 §4.4), amortised over a block of ``D`` tokens."""
    tp, g, kv = ctx.tp_size, ctx.gemm_quant_mode, ctx.kvcache_quant_mode
    per_step = 1 / D
    dsf = ctx.nextn / D
    dc = DRAFT_LAYERS
    s = dc * dsf
    inter = DRAFT_INTER
    out = [
        ops.embedding("draft_embedding", 1 * dsf, vocab_tp, h),
        ops.elementwise("draft_norm", 2 * dc * dsf, 2 * h, 2 * h),
    ]
    if ctx.backend == "vllm":
        out += [
            ops.gemm("draft_downscale_gemm", s, DRAFT_Q_LORA + DRAFT_KV_LATENT, h, g),
            ops.gemm("draft_q_b_gemm", s, DRAFT_HEADS * DRAFT_QK_HEAD // tp, DRAFT_Q_LORA, g),
            ops.generation_attention("draft_attention", s, DRAFT_HEADS // tp, DRAFT_HEADS // tp,
                                     DRAFT_V_HEAD, 0, kv),
            ops.gemm("draft_proj_gemm", s, h, DRAFT_HEADS * DRAFT_V_HEAD // tp, g,
                     low_precision_input=True),
        ]
        kv_proj_n = DRAFT_KV_LATENT
    else:
        out += [
            ops.gemm("draft_qkv_gemm", s,
                     (DRAFT_HEADS * DRAFT_GQA_HEAD + 2 * DRAFT_KV_HEADS * DRAFT_GQA_HEAD) // tp, h, g),
            ops.generation_attention("draft_attention", s, DRAFT_HEADS // tp,
                                     max(1, DRAFT_KV_HEADS // tp), DRAFT_GQA_HEAD, 0, kv),
            ops.gemm("draft_proj_gemm", s, h, DRAFT_HEADS * DRAFT_GQA_HEAD // tp, g,
                     low_precision_input=True),
        ]
        kv_proj_n = 2 * DRAFT_KV_HEADS * DRAFT_GQA_HEAD // tp
    out += [
        ops.gemm("draft_gate_up_gemm", s, 2 * inter // tp, h, g),
        ops.elementwise("draft_act_gate", s, 2 * inter // tp, inter // tp),
        ops.gemm("draft_down_gemm", s, h, inter // tp, g, low_precision_input=True),
        ops.custom_all_reduce("draft_ar", 2 * dc * dsf, h, tp),
        ops.gemm("draft_kv_proj_gemm", dc * per_step, kv_proj_n, h, g),
        ops.gemm("draft_logits_gemm", 1 * per_step, vocab_tp, h, "bfloat16"),
    ]
    return out
