"""Family NEMOTRONNAS: Puzzle / NAS-derived Llama variants (spec 33 §6).

``DeciLMForCausalLM`` models list one ``block_configs`` entry per layer; blocks differ in KV-head
grouping and FFN width, and may drop their attention or their FFN. Consecutive blocks with the
same ``(n_heads_in_group, attention no_op, ffn_mult, ffn no_op)`` are merged into one group whose
count is the ops' scale. ``NemotronForCausalLM`` and a DeciLM config without blocks give empty
op lists (every latency 0.0).
"""

from __future__ import annotations

import warnings

from .. import config_checks, ops
from ..hf_config import ModelConfig, ceil_div
from ..parallel import check_heads
from . import BuildContext

#: Head size the reference passes to the attention ops of this family, whatever the model's.
ATTENTION_HEAD_SIZE = 128
#: ``ffn_mult`` of a block that does not set it.
DEFAULT_FFN_MULT = 3.5


def ffn_width(mult, h: int) -> int:
    """``I_b(mult)`` (spec 33 §6.2): ``int(2·mult·h/3)`` rounded up to a multiple of 256."""
    x = int(2 * mult * h / 3)
    return x if x % 256 == 0 else x + 256 - x % 256


def block_groups(blocks: list) -> list[tuple[tuple, int]]:
    """Consecutive equal block tuples merged into ``(tuple, count)`` groups (spec 33 §6.1)."""
    groups: list[tuple[tuple, int]] = []
    for block in blocks:
        attention = block.get("attention", {})
        ffn = block.get("ffn", {})
        key = (attention.get("n_heads_in_group"), attention.get("no_op", False),
               ffn.get("ffn_mult", DEFAULT_FFN_MULT), ffn.get("no_op", False))
        if groups and groups[-1][0] == key:
            groups[-1] = (key, groups[-1][1] + 1)
        else:
            groups.append((key, 1))
    return groups


def _check_size(value: int) -> int:
    """Negative widths fail while the ops are built (the reference's integer conversion)."""
    if value < 0:
        raise OverflowError("out of range integral type conversion attempted")
    return value


def check_block_config(model: ModelConfig, groups: list) -> None:
    """Every attention block's ``n_heads_in_group`` (query heads per KV head) must be at least 1
    and split ``num_attention_heads`` into whole groups (the block has ``n // n_heads_in_group``
    KV heads); ``head_dim`` sizes the QKV GEMM."""
    n = model.num_heads
    if any(not attn_no_op for (_, attn_no_op, _, _), _ in groups):
        config_checks.at_least_one("head_dim", model.head_dim, "the size of one attention head; "
                                   "hidden_size / num_attention_heads when the config has none")
    for (heads_in_group, attn_no_op, _, _), _ in groups:
        if attn_no_op:
            continue
        field = "block_configs[].attention.n_heads_in_group"
        if isinstance(heads_in_group, bool) or not isinstance(heads_in_group, int):
            raise ValueError(f"model config: {field} must be an integer for an attention block, "
                             f"got {heads_in_group!r} (query heads per KV head)")
        config_checks.at_least_one(field, heads_in_group,
                                   "query heads per KV head; 1 for multi-head attention")
        config_checks.divisible("num_attention_heads", n, field, heads_in_group,
                                "each block has num_attention_heads / n_heads_in_group KV heads")


def build(model: ModelConfig, ctx: BuildContext) -> tuple[list[dict], list[dict]]:
    """The context and generation op lists of a Nemotron-NAS model (spec 33 §6.3)."""
    tp, pp = ctx.tp_size, ctx.pp_size
    h, n, d, vocab = model.hidden_size, model.num_heads, model.head_dim, model.vocab_size
    check_heads(n, tp)
    if ctx.nextn > 0:
        raise AssertionError("NemotronNas does not support MTP speculative decoding (nextn must be 0)")
    blocks = model.raw.get("block_configs") if model.architecture == "DeciLMForCausalLM" else None
    if not blocks:
        warnings.warn(f"{model.architecture} config without block_configs: empty op lists",
                      stacklevel=2)
        return [], []
    groups = block_groups(blocks)
    check_block_config(model, groups)
    q, kv, f = ctx.gemm_quant_mode, ctx.kvcache_quant_mode, ctx.fmha_quant_mode

    lists = {}
    for phase in ("context", "generation"):
        p = phase + "_"
        is_ctx = phase == "context"
        out = [ops.embedding(p + "embedding", 1.0, vocab, h)]
        for (heads_in_group, attn_no_op, mult, ffn_no_op), count in groups:
            c = float(count)
            if not attn_no_op:
                nkv_b = ceil_div(n // heads_in_group, tp)
                if is_ctx:
                    attention = ops.context_attention(p + "attention", c, n // tp, nkv_b,
                                                      ATTENTION_HEAD_SIZE, 0, kv, f, False)
                else:
                    attention = ops.generation_attention(p + "attention", c, n // tp, nkv_b,
                                                         ATTENTION_HEAD_SIZE, 0, kv)
                out += [
                    ops.elementwise(p + "add_norm_1", c, 2 * h, 2 * h),
                    ops.gemm(p + "qkv_gemm", c, n * d // tp + 2 * d * nkv_b, h, q),
                    attention,
                    ops.gemm(p + "proj_gemm", c, h, n * d // tp, q),
                    ops.custom_all_reduce(p + "ar_1", c, h, tp),
                ]
            if not ffn_no_op:
                ib = ffn_width(mult, h)
                up, down = _check_size(2 * ib // tp), _check_size(ib // tp)
                out += [
                    ops.elementwise(p + "add_norm_2", c, 2 * h, 2 * h),
                    ops.gemm(p + "gate_ffn1_gemm", c, up, h, q),
                    ops.elementwise(p + "act_gate", c, up, down),
                    ops.gemm(p + "ffn2_gemm", c, h, down, q),
                    ops.custom_all_reduce(p + "ar_2", c, h, tp),
                ]
        out += [
            ops.p2p(p + "p2p", float(pp - 1), pp, h),
            ops.gemm(p + "logits_gemm", 1.0, vocab // tp, h, "bfloat16"),
        ]
        lists[phase] = out
    return lists["context"], lists["generation"]
