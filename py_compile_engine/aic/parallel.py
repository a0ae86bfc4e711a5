"""Parallel-size resolution and validation (spec 30 §1 step 1, §4)."""

from __future__ import annotations

from dataclasses import dataclass

from .errors import HeadDivisibilityError


@dataclass(frozen=True)
class Parallel:
    """Resolved parallel sizes. ``cp_size`` is always 1 on the compile path."""

    tp_size: int
    pp_size: int
    attention_dp_size: int
    moe_tp_size: int
    moe_ep_size: int
    cp_size: int = 1


def _as_int(name: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        if isinstance(value, float) and value.is_integer():
            return int(value)
        raise ValueError(f"{name} must be an integer, got {value!r}.")
    return value


def apply_defaults(
    tp_size=1, pp_size=1, attention_dp_size=1, moe_tp_size=None, moe_ep_size=None
) -> dict:
    """Step 1: unset sizes become 1 (``moe_tp_size`` / ``moe_ep_size`` included, not inferred)."""
    return {
        "tp_size": 1 if tp_size is None else tp_size,
        "pp_size": 1 if pp_size is None else pp_size,
        "attention_dp_size": 1 if attention_dp_size is None else attention_dp_size,
        "moe_tp_size": 1 if moe_tp_size is None else moe_tp_size,
        "moe_ep_size": 1 if moe_ep_size is None else moe_ep_size,
    }


def validate_nextn(nextn) -> int:
    """Step 3: ``nextn`` must be an integer >= 0."""
    if nextn is None:
        return 0
    if isinstance(nextn, bool) or not isinstance(nextn, int):
        if isinstance(nextn, float) and nextn.is_integer():
            nextn = int(nextn)
        else:
            raise ValueError(f"nextn ({nextn}) must be an integer draft length.")
    if nextn < 0:
        raise ValueError(f"nextn ({nextn}) must be >= 0.")
    return nextn


def resolve_parallel(sizes: dict, *, moe: bool) -> Parallel:
    """Checks every size is a positive integer and, for MoE families, the width rule
    ``tp * adp * cp == moe_tp * moe_ep`` (spec 30 §4 rules 1-4)."""
    order = ("tp_size", "attention_dp_size", "moe_tp_size", "moe_ep_size", "pp_size")
    values = {name: _as_int(name, sizes[name]) for name in order}
    for name in order:
        if values[name] <= 0:
            raise ValueError(f"{name} must be positive, got {values[name]}.")
    par = Parallel(**values)
    if moe:
        width = par.tp_size * par.attention_dp_size * par.cp_size
        moe_width = par.moe_tp_size * par.moe_ep_size
        if width != moe_width:
            raise ValueError(
                f"Parallelism width mismatch: tp_size({par.tp_size}) * attention_dp_size"
                f"({par.attention_dp_size}) * cp_size({par.cp_size}) = {width}, but moe_tp_size"
                f"({par.moe_tp_size}) * moe_ep_size({par.moe_ep_size}) = {moe_width}. "
                f"These must be equal. {_width_hint(width)}"
            )
    return par


def _width_hint(width: int) -> str:
    """What would fix a width mismatch: the (moe_tp_size, moe_ep_size) pairs of that width."""
    pairs = [(t, width // t) for t in range(1, width + 1) if width % t == 0]
    shown = ", ".join(f"moe_tp_size={t} with moe_ep_size={e}" for t, e in pairs[:8])
    more = ", ..." if len(pairs) > 8 else ""
    return (
        f"The MoE layer must span the same {width} GPUs as attention; allowed: {shown}{more} "
        f"(or change tp_size / attention_dp_size)."
    )


def check_heads(num_heads: int, tp_size: int) -> None:
    """Rule 5: heads must split evenly over TP (the reference asserts; we raise ValueError with
    the same text, trailing space included)."""
    if num_heads % tp_size != 0:
        raise HeadDivisibilityError(
            f"num_heads {num_heads} should be divisible by tp_size {tp_size} "
        )


def check_experts(num_experts: int, moe_ep_size: int) -> None:
    """Rule 8 (MoE families): at least as many experts as EP ranks."""
    if num_experts < moe_ep_size:
        raise ValueError(
            f"ep size cannot be larger than num_experts {num_experts}: moe_ep_size "
            f"{moe_ep_size} is too large; allowed: moe_ep_size <= {num_experts} (make up the "
            f"rest of the width with moe_tp_size)."
        )
