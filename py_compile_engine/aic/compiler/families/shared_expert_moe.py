"""The routed-MoE + one-shared-expert FFN of the DeepSeek-style family builders.

Why this module exists: DEEPSEEK / KIMIK25 (:mod:`.deepseek`), DEEPSEEKV32, DEEPSEEKV4 and
MINIMAXM3 price the FFN of every layer the same way: a router GEMM, the pre / post dispatch around
the routed experts, and one shared expert (gate-up GEMM, activation, down GEMM), in context as a
flat run and in generation as one ``Overlap`` of the routed path with the shared expert. The
families differ only in how the shared expert is sharded and quantized and in the ``is_context``
flag of the generation dispatches; they set those here and this module emits the ops, in the
order and with the fields the reference's op lists (the goldens' ``spec_ops``) record.
"""

from __future__ import annotations

from collections import namedtuple

from .. import ops
from ..hf_config import ModelConfig
from . import BuildContext

#: Expert-load model of the routed experts of these families.
WORKLOAD_DISTRIBUTION = "power_law_1.01"


class SharedExpertMoe(namedtuple("SharedExpertMoe", (
        "hidden",  # int
        "num_experts",  # int
        "topk",  # int
        "moe_intermediate",  # int
        "moe_tp",  # int
        "moe_ep",  # int
        "attention_dp",  # int
        "backend",  # str
        "moe_quant",  # str
        "shared_n",  # int: shared gate-up output width per rank
        "shared_k",  # int: shared down-projection input width per rank
        "shared_quant",  # str
        "generation_dispatch_is_context",  # bool
))):
    """One layer's MoE FFN: its sizes, parallelism and quant modes, and the ops it prices.
    Immutable (a named tuple: see ``aic.compiler.parallel``)."""

    __slots__ = ()

    def router(self, p: str, s: float) -> dict:
        """The router GEMM (always bf16)."""
        return ops.gemm(p + "router_gemm", s, self.num_experts, self.hidden, "bfloat16")

    def dispatch(self, p: str, s: float, pre: bool, is_context: bool) -> dict:
        """The dispatch before (``pre``) or after the routed experts."""
        name = p + ("moe_pre_dispatch" if pre else "moe_post_dispatch")
        return ops.moe_dispatch(name, s, self.hidden, self.topk, self.num_experts, self.moe_tp,
                                self.moe_ep, self.attention_dp, pre, self.backend, self.moe_quant,
                                is_context=is_context)

    def routed(self, p: str, s: float) -> dict:
        """The routed experts (``is_context`` true in both phases)."""
        return ops.moe(p + "moe", s, self.hidden, self.moe_intermediate, self.topk,
                       self.num_experts, self.moe_tp, self.moe_ep, self.attention_dp,
                       self.moe_quant, WORKLOAD_DISTRIBUTION, is_context=True)

    def shared(self, p: str, s: float) -> list[dict]:
        """The shared expert: gate-up GEMM, activation, down GEMM."""
        return [
            ops.gemm(p + "shared_gate_up_gemm", s, self.shared_n, self.hidden, self.shared_quant),
            ops.elementwise(p + "shared_act_gate", s, self.shared_n, self.shared_k),
            ops.gemm(p + "shared_ffn2_gemm", s, self.hidden, self.shared_k, self.shared_quant),
        ]

    def context_ops(self, s: float) -> list[dict]:
        """The context FFN: shared expert, router, pre dispatch, routed experts, post dispatch."""
        p = "context_"
        return [*self.shared(p, s), self.router(p, s), self.dispatch(p, s, True, True),
                self.routed(p, s), self.dispatch(p, s, False, True)]

    def generation_overlap(self, s: float) -> dict:
        """The generation FFN: the routed path overlapped with the shared expert."""
        p, flag = "generation_", self.generation_dispatch_is_context
        return ops.overlap(
            p + "moe_overlap",
            [self.router(p, s), self.dispatch(p, s, True, flag), self.routed(p, s),
             self.dispatch(p, s, False, flag)],
            self.shared(p, s),
        )


def shared_expert_moe(model: ModelConfig, ctx: BuildContext, *, shared_n: int, shared_k: int,
                      shared_quant: str, generation_dispatch_is_context: bool) -> SharedExpertMoe:
    """The MoE FFN of ``model`` under ``ctx``, with the family's shared-expert widths per rank,
    shared-expert quant mode and generation-dispatch ``is_context`` flag."""
    return SharedExpertMoe(
        hidden=model.hidden_size, num_experts=model.num_experts, topk=model.topk,
        moe_intermediate=model.moe_intermediate_size, moe_tp=ctx.moe_tp_size,
        moe_ep=ctx.moe_ep_size, attention_dp=ctx.attention_dp_size, backend=ctx.backend,
        moe_quant=ctx.moe_quant_mode, shared_n=shared_n, shared_k=shared_k,
        shared_quant=shared_quant, generation_dispatch_is_context=generation_dispatch_is_context,
    )
