"""Config-field checks shared by the family builders (issue 22).

A size a family's op list needs to be at least 1 (a head count, a head size, a LoRA rank, a
kernel width) or a head count that must split into whole groups would otherwise reach the
engine as an op field of 0 and fail only at estimate time, naming the op rather than the
config. These checks run at compile and name the Hugging Face config field, its value and
what would fix it. Each family calls them only for the fields its own op list uses, so a
field the family ignores (or clamps, like MiniMax-M3's ``max(1, kv // tp)``) is never
rejected.
"""

from __future__ import annotations


def at_least_one(field: str, value: int, fix: str) -> None:
    """Raises ``ValueError`` when the config field ``field`` is below 1; ``fix`` says what the
    value should be."""
    if value < 1:
        raise ValueError(f"model config: {field} must be at least 1, got {value} ({fix})")


def divisible(heads_field: str, heads: int, groups_field: str, groups: int, why: str) -> None:
    """Raises ``ValueError`` when ``heads`` (config field ``heads_field``) is not a multiple of
    ``groups`` (config field ``groups_field``, already checked to be at least 1)."""
    if heads % groups != 0:
        raise ValueError(
            f"model config: {heads_field} {heads} must be divisible by {groups_field} {groups} "
            f"({why})"
        )


def gqa(heads: int, kv_heads: int, head_dim: int, *, heads_field: str = "num_attention_heads",
        kv_field: str = "num_key_value_heads", dim_field: str = "head_dim") -> None:
    """A grouped-query attention block: at least one KV head, a head size of at least 1, and
    KV heads that split the query heads into whole groups (the same rule as the dense family's
    :func:`aic.compiler.parallel.check_gqa_heads`, for fields that may have other names)."""
    at_least_one(kv_field, kv_heads, f"the number of KV heads; equal to {heads_field} for "
                                     f"multi-head attention")
    at_least_one(dim_field, head_dim, "the size of one attention head")
    divisible(heads_field, heads, kv_field, kv_heads,
              "each KV head serves a whole group of query heads")
