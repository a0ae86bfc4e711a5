"""Model families: HF architecture -> family label -> op-list builder.

A family module exposes ``build(model, ctx) -> (context_ops, generation_ops)`` where ``model`` is a
:class:`aic.compiler.hf_config.ModelConfig` and ``ctx`` a :class:`BuildContext`. Register a new
family by adding it to ``_BUILDERS`` (and its architectures to ``FAMILY_BY_ARCH`` if new). Built
today: LLAMA and the QWEN3VL text decoder (spec 30 §6, ``llama``), MOE and QWEN3VL_MOE (§7,
``moe``), DEEPSEEK and KIMIK25 (§8, ``deepseek``), HYBRIDMOE and STEP3P7 (spec 35 §5-§6,
``hybridmoe``), GEMMA4MIX (spec 35 §7, ``gemma4``), DEEPSEEKV32 (spec 32, ``deepseekv32``), QWEN35
(spec 31, ``qwen35``), NEMOTRONH and NEMOTRONNAS (spec 33, ``nemotronh``, ``nemotronnas``),
DEEPSEEKV4 (spec 34, ``deepseekv4``), MINIMAXM3 and KIMIK3 (spec 36, ``minimaxm3``, ``kimik3``). A
module may also expose ``parse(model)``: the config checks the reference runs while it builds the
model object, before any parallelism check (spec 35 §4).
"""

from __future__ import annotations

import importlib
from collections import namedtuple

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (a short sweep's cost)
if TYPE_CHECKING:
    from typing import Callable

from ...errors import UnsupportedArchitectureError

#: The reference's family label for every architecture it accepts (spec 30 §0 and §12).
FAMILY_BY_ARCH: dict[str, str] = {
    # priority 1: dense GQA
    "LlamaForCausalLM": "LLAMA",
    "Qwen2ForCausalLM": "LLAMA",
    "Qwen3ForCausalLM": "LLAMA",
    "MiMoForCausalLM": "LLAMA",
    # priority 2: GQA attention + routed MoE
    "MixtralForCausalLM": "MOE",
    "Qwen2MoeForCausalLM": "MOE",
    "Qwen3MoeForCausalLM": "MOE",
    "MiniMaxM2ForCausalLM": "MOE",
    "GptOssForCausalLM": "MOE",
    # priority 3: MLA + MoE + shared expert
    "DeepSeekForCausalLM": "DEEPSEEK",
    "DeepseekV3ForCausalLM": "DEEPSEEK",
    "KimiK25ForConditionalGeneration": "KIMIK25",
    # other families (spec 30 §12)
    "Qwen3VLForConditionalGeneration": "QWEN3VL",
    "Qwen3VLMoeForConditionalGeneration": "QWEN3VL_MOE",
    "DeciLMForCausalLM": "NEMOTRONNAS",
    "NemotronForCausalLM": "NEMOTRONNAS",
    "NemotronHForCausalLM": "NEMOTRONH",
    "MiMoV2FlashForCausalLM": "HYBRIDMOE",
    "Llama4ForConditionalGeneration": "HYBRIDMOE",
    "Qwen3_5ForConditionalGeneration": "QWEN35",
    "Qwen3_5MoeForConditionalGeneration": "QWEN35",
    "Gemma4ForConditionalGeneration": "GEMMA4MIX",
    "DeepseekV32ForCausalLM": "DEEPSEEKV32",
    "GlmMoeDsaForCausalLM": "DEEPSEEKV32",
    "DeepseekV4ForCausalLM": "DEEPSEEKV4",
    "KimiK3ForConditionalGeneration": "KIMIK3",
    "MiniMaxM3ForCausalLM": "MINIMAXM3",
    "MiniMaxM3SparseForConditionalGeneration": "MINIMAXM3",
    "Step3p7ForConditionalGeneration": "STEP3P7",
    "Step3p5ForCausalLM": "STEP3P7",
    "Step3p7FlashForCausalLM": "STEP3P7",
    "Step3p5FlashForCausalLM": "STEP3P7",
}

#: Architectures whose text model is nested under a sub-config (spec 30 §2.3, §12).
NESTED_TEXT_KEY: dict[str, str] = {
    "KimiK25ForConditionalGeneration": "text_config",
    "Qwen3VLForConditionalGeneration": "text_config",
    "Qwen3VLMoeForConditionalGeneration": "text_config",
    "Llama4ForConditionalGeneration": "text_config",
    "Qwen3_5ForConditionalGeneration": "text_config",
    "Qwen3_5MoeForConditionalGeneration": "text_config",
    "Gemma4ForConditionalGeneration": "text_config",
    "KimiK3ForConditionalGeneration": "text_config",
    "MiniMaxM3SparseForConditionalGeneration": "text_config",
    "Step3p7ForConditionalGeneration": "text_config",
    "Step3p7FlashForCausalLM": "text_config",
}

#: ``use_qk_norm`` is not read from the config: it is true for exactly these (spec 30 §2.3).
QK_NORM_ARCHS = frozenset({"Qwen3ForCausalLM", "Qwen3MoeForCausalLM", "MiniMaxM2ForCausalLM"})

#: MoE families: the MoE parallel rules of spec 30 §4 apply to their members, dense Gemma-4
#: variants included (spec 35 §1), except in QWEN35 and NEMOTRONH, where they apply per model
#: (spec 31 §3, spec 33 §4: Qwen3.5-27B and Nemotron-H-56B have no experts).
MOE_FAMILIES = frozenset(
    {"MOE", "DEEPSEEK", "KIMIK25", "QWEN3VL_MOE", "HYBRIDMOE", "QWEN35", "GEMMA4MIX", "DEEPSEEKV32",
     "DEEPSEEKV4", "KIMIK3", "MINIMAXM3", "STEP3P7", "NEMOTRONH"}
)

#: Families aic can build, and the module implementing each.
_BUILDERS: dict[str, str] = {
    "LLAMA": "llama",
    "MOE": "moe",
    "DEEPSEEK": "deepseek",
    "KIMIK25": "deepseek",
    "DEEPSEEKV32": "deepseekv32",
    "QWEN35": "qwen35",
    "QWEN3VL": "llama",
    "QWEN3VL_MOE": "moe",
    "HYBRIDMOE": "hybridmoe",
    "STEP3P7": "hybridmoe",
    "GEMMA4MIX": "gemma4",
    "NEMOTRONH": "nemotronh",
    "NEMOTRONNAS": "nemotronnas",
    "DEEPSEEKV4": "deepseekv4",
    "MINIMAXM3": "minimaxm3",
    "KIMIK3": "kimik3",
}


class BuildContext(namedtuple("BuildContext", (
        "backend", "tp_size", "pp_size", "attention_dp_size", "moe_tp_size", "moe_ep_size", "nextn",
        "gemm_quant_mode", "moe_quant_mode", "kvcache_quant_mode", "fmha_quant_mode",
        "comm_quant_mode", "gemm_quant_explicit", "cp_size"), defaults=(False, 1))):
    """Deployment facts a family builder needs (already validated and resolved); immutable.
    ``cp_size``: context parallelism (spec 43), 1 = none; the builder writes it into the CP op
    fields. (A named tuple rather than a dataclass: see ``aic.compiler.parallel``.)"""

    __slots__ = ()


#: Families whose MoE parallel rules depend on the parsed model having experts (`E > 0`),
#: not on the family label (spec 31 §3 item 2: Qwen3.5-27B is dense; spec 33: Nemotron-H-56B).
PER_MODEL_MOE_FAMILIES = frozenset({"QWEN35", "NEMOTRONH"})


def is_moe_for_parallelism(model) -> bool:
    """Whether the MoE width rule (``tp * adp * cp == moe_tp * moe_ep``) applies to ``model``."""
    if model.family not in MOE_FAMILIES:
        return False
    return model.num_experts > 0 if model.family in PER_MODEL_MOE_FAMILIES else True


def supported_architectures() -> list[str]:
    """Architectures aic compiles, in the reference's table order."""
    return [arch for arch, family in FAMILY_BY_ARCH.items() if family in _BUILDERS]


def check_architecture(arch: str) -> str:
    """Returns the family label of ``arch``; raises :class:`UnsupportedArchitectureError` when
    aic cannot compile it."""
    family = FAMILY_BY_ARCH.get(arch)
    supported = ", ".join(supported_architectures())
    if family is None:
        raise UnsupportedArchitectureError(
            f"The model's architecture {arch} is not supported. Supported architectures: {supported}",
            arch,
            known_to_reference=False,
        )
    if family not in _BUILDERS:
        raise UnsupportedArchitectureError(
            f"The model's architecture {arch} (family {family}) is not supported by aic yet. "
            f"Supported architectures: {supported}",
            arch,
            known_to_reference=True,
        )
    return family


def check_config(model) -> None:
    """Runs the family's own config checks (``parse(model)`` of its module, if any). They come
    before the parallelism checks of compile step 7 (spec 35 §4)."""
    module = importlib.import_module(f"{__name__}.{_BUILDERS[model.family]}")
    parse = getattr(module, "parse", None)
    if parse is not None:
        parse(model)


#: Families whose builders emit context-parallel op lists (spec 43 §3; DSA: §7). The reference
#: also builds CP specs for HYBRIDMOE, STEP3P7 and GEMMA4MIX, whose CP op lists no document or
#: golden describes yet. DEEPSEEKV4: §7 and 34 §5.6.
CP_BUILDERS = frozenset({"LLAMA", "MOE", "DEEPSEEK", "KIMIK25", "QWEN3VL", "QWEN3VL_MOE",
                         "DEEPSEEKV32", "DEEPSEEKV4"})


def check_cp_support(family: str, cp_size: int) -> None:
    """Refuses ``cp_size > 1`` for families the reference accepts but aic cannot build CP for."""
    if cp_size > 1 and family not in CP_BUILDERS:
        raise NotImplementedError(
            f"Context parallelism (cp_size={cp_size}) for model_family={family!r} is not "
            f"implemented by aic yet; context parallelism is available for "
            f"{', '.join(sorted(CP_BUILDERS))} on sglang."
        )


def builder(family: str) -> Callable:
    """The ``build`` function of a supported family."""
    module = importlib.import_module(f"{__name__}.{_BUILDERS[family]}")
    return module.build
