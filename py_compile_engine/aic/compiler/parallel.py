"""Parallel-size resolution and validation (spec 30 §1 step 1, §4)."""

from __future__ import annotations

from collections import namedtuple

from ..errors import HeadDivisibilityError

# The compile path's records are named tuples, not dataclasses: ``dataclasses`` imports
# ``inspect`` (with ``ast``, ``dis``, ``tokenize``), about a tenth of a short sweep's process.


class Parallel(namedtuple("Parallel", ("tp_size", "pp_size", "attention_dp_size", "moe_tp_size",
                                       "moe_ep_size", "cp_size"), defaults=(1,))):
    """Resolved parallel sizes, all ``int`` (``cp_size``: context parallelism, spec 43).
    Immutable."""

    __slots__ = ()


def _as_int(name: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        if isinstance(value, float) and value.is_integer():
            return int(value)
        raise ValueError(f"{name} must be an integer, got {value!r}.")
    return value


def apply_defaults(
    tp_size=1, pp_size=1, attention_dp_size=1, moe_tp_size=None, moe_ep_size=None, cp_size=1
) -> dict:
    """Step 1: unset sizes become 1 (``moe_tp_size`` / ``moe_ep_size`` included, not inferred)."""
    return {
        "cp_size": 1 if cp_size is None else cp_size,
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


# MoE widths a dense model may carry as 0 (unused; copied into the engine config).
_DENSE_UNUSED = ("moe_tp_size", "moe_ep_size")


def resolve_parallel(sizes: dict, *, moe: bool) -> Parallel:
    """Checks every size is a positive integer and, for MoE families, the width rule
    ``tp * adp * cp == moe_tp * moe_ep`` (spec 30 §4 rules 1-4, spec 43 §2 step 3).

    ``cp_size`` must be positive for MoE families only: a dense model accepts 0 (every CP field
    is then 0, priced like 1) and fails on a negative value when its ops are built (spec 43 §2).
    A dense model also accepts ``moe_tp_size`` / ``moe_ep_size`` of 0: they reach no op and are
    only copied into the engine config (spec 30 §4), as measured deployments of dense models
    record them.
    """
    order = ("tp_size", "attention_dp_size", "moe_tp_size", "moe_ep_size", "pp_size")
    values = {name: _as_int(name, sizes[name]) for name in order}
    values["cp_size"] = _as_int("cp_size", sizes.get("cp_size", 1))
    checked = ("tp_size", "attention_dp_size", "cp_size") if moe else ("tp_size", "attention_dp_size")
    for name in checked + ("moe_tp_size", "moe_ep_size", "pp_size"):
        if values[name] <= 0 and not (not moe and name in _DENSE_UNUSED and values[name] == 0):
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


def check_pipeline(num_layers: int, pp_size: int) -> None:
    """A pipeline stage holds at least one layer: ``pp_size`` above the model's layer count
    would price stages that hold nothing (the reference accepts it and scales the P2P hops)."""
    if pp_size > num_layers:
        raise ValueError(
            f"pp_size {pp_size} exceeds the model's {num_layers} layers; each pipeline stage "
            f"needs at least one layer: use pp_size <= {num_layers}")


def check_heads(num_heads: int, tp_size: int) -> None:
    """Rule 5: heads must split evenly over TP (the reference asserts; we raise ValueError with
    the same text, trailing space included)."""
    if num_heads % tp_size != 0:
        raise HeadDivisibilityError(
            f"num_heads {num_heads} should be divisible by tp_size {tp_size} "
        )


def check_gqa_heads(num_heads: int, num_kv_heads: int, head_dim: int) -> None:
    """Grouped-query attention needs at least one KV head and a head size of at least 1, and
    the KV heads must split the query heads evenly. Without these checks the spec compiles with
    ``n_kv = 0`` or ``head_size = 0`` and fails only at estimate time, with the lookup key's
    debug text instead of the config field. Raises ``ValueError`` naming the config field."""
    if num_kv_heads < 1:
        raise ValueError(
            f"model config: num_key_value_heads must be at least 1, got {num_kv_heads} (set it "
            f"to the number of KV heads; equal to num_attention_heads for multi-head attention)"
        )
    if head_dim < 1:
        raise ValueError(
            f"model config: head_dim must be at least 1, got {head_dim} (hidden_size / "
            f"num_attention_heads when the config has no head_dim)"
        )
    if num_heads % num_kv_heads != 0:
        raise ValueError(
            f"model config: num_attention_heads {num_heads} must be divisible by "
            f"num_key_value_heads {num_kv_heads} (each KV head serves a whole group of query heads)"
        )


def check_experts(num_experts: int, moe_ep_size: int) -> None:
    """Rule 8 (MoE families): at least as many experts as EP ranks."""
    if num_experts < moe_ep_size:
        raise ValueError(
            f"ep size cannot be larger than num_experts {num_experts}: moe_ep_size "
            f"{moe_ep_size} is too large; allowed: moe_ep_size <= {num_experts} (make up the "
            f"rest of the width with moe_tp_size)."
        )


#: Families whose SGLang model builds context-parallel op lists (spec 43 §2 step 4a, §7).
CP_FAMILIES = frozenset({"LLAMA", "MOE", "DEEPSEEK", "KIMIK25", "QWEN3VL", "QWEN3VL_MOE", "HYBRIDMOE",
                         "STEP3P7", "GEMMA4MIX", "DEEPSEEKV32", "DEEPSEEKV4"})


def check_cp(par: Parallel, family: str, backend: str) -> None:
    """The CP gate (spec 43 §2 step 4, only when ``cp_size > 1``): the family must support CP on
    the backend (SGLang only), and SGLang CP excludes attention TP and attention DP."""
    cp = par.cp_size
    if cp <= 1:
        return
    if family not in CP_FAMILIES or backend != "sglang":
        raise NotImplementedError(
            f"Context parallelism (cp_size={cp}) is not supported for model_family="
            f"{family!r} on backend={backend!r}. The model class must override ``supports_cp`` "
            f"and implement CP in its op pipeline."
        )
    if par.tp_size != 1 or par.attention_dp_size != 1:
        raise ValueError(
            f"sglang CP requires tp_size=1 and attention_dp_size=1 when cp_size>1 (CP and "
            f"attention TP/DP are mutually exclusive on sglang). Got tp_size={par.tp_size}, "
            f"attention_dp_size={par.attention_dp_size}, cp_size={cp}."
        )


def check_cp_seq_split(cp_size: int) -> int:
    """A dense model's ``seq_split`` field: an unsigned integer (the reference raises this
    ``OverflowError`` for a negative ``cp_size`` when it builds the first such op)."""
    if cp_size < 0:
        raise OverflowError("out of range integral type conversion attempted")
    return cp_size
