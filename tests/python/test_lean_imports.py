"""The compile and sweep path stays off ``inspect`` / ``dataclasses`` / ``typing`` / ``pathlib``.

The first three (with ``ast``, ``dis`` and ``tokenize`` behind ``inspect``) took about 12 ms of
a fresh-process sweep that took 80, ``pathlib`` (with ``urllib.parse`` and ``ipaddress``) about 2
more (BENCHMARKS.md, issue 23). The records of the compile path are named tuples,
``aic.forwarding`` reads code objects and ``aic.paths`` works on strings; this keeps it that
way, and checks the records behave as the dataclasses did where callers can tell.
"""

from __future__ import annotations

import json
import subprocess
import sys

from aic.compiler.compile import CompileResult
from aic.compiler.hf_config import ModelConfig, load_model_config
from aic.compiler.parallel import Parallel
from aic.compiler.quant import QuantModes

HEAVY = ("inspect", "dataclasses", "typing", "pathlib")

_CHILD = r"""
import json, sys
from aic.serving.sweep import sweep
from aic.compiler.compile import compile_report
from aic.compiler.memory import model_facts
result = compile_report("Qwen/Qwen3-8B", "h100_sxm", "sglang", tp_size=2)
model_facts(result.model)
# a family with the MLA and shared-expert records too
compile_report("deepseek-ai/DeepSeek-V3", "h200_sxm", "sglang", tp_size=8, moe_ep_size=8)
print(json.dumps(sorted(m for m in sys.modules if m in json.loads(sys.argv[1]))))
"""


def test_compiles_import_no_heavy_module():
    out = subprocess.run([sys.executable, "-c", _CHILD, json.dumps(HEAVY)],
                         capture_output=True, text=True, check=True)
    assert json.loads(out.stdout.strip().splitlines()[-1]) == []


def test_model_config_defaults_are_fresh_and_documents_stay_out_of_repr():
    a = ModelConfig("LlamaForCausalLM", "LLAMA", 2, 64, 4, 4, 16, 128, 100, 2048)
    b = ModelConfig("LlamaForCausalLM", "LLAMA", 2, 64, 4, 4, 16, 128, 100, 2048)
    assert a.raw == {} and a.text == {} and a.raw is not b.raw and a.text is not a.raw
    assert a == b and a.topk == 0 and a.config_source == "builtin"
    model = load_model_config("Qwen/Qwen3-8B")
    assert model.raw and "raw=" not in repr(model) and "text=" not in repr(model)
    assert repr(model).startswith("ModelConfig(architecture='Qwen3ForCausalLM', family='LLAMA'")


def test_records_are_immutable_and_keep_their_defaults():
    p = Parallel(2, 1, 1, 1, 1)
    assert p.cp_size == 1 and p == Parallel(tp_size=2, pp_size=1, attention_dp_size=1,
                                            moe_tp_size=1, moe_ep_size=1, cp_size=1)
    q = QuantModes("fp8", "fp8", "fp8", "bfloat16", "half")
    assert q.gemm_explicit is False and q.as_dict()["comm_quant_mode"] == "half"
    for record, name in ((p, "tp_size"), (q, "gemm_quant_mode")):
        try:
            setattr(record, name, 3)
        except AttributeError:
            continue
        raise AssertionError(f"{type(record).__name__}.{name} could be set")


def test_compile_result_repr_leaves_the_model_out():
    model = ModelConfig("LlamaForCausalLM", "LLAMA", 2, 64, 4, 4, 16, 128, 100, 2048)
    r = CompileResult({"engine": {"tp_size": 1}, "context_ops": [], "generation_ops": []}, "{}",
                      "LLAMA", {}, "builtin", model)
    assert r.engine == {"tp_size": 1} and r.context_ops == [] and "ModelConfig" not in repr(r)
