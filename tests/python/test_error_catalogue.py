"""The bad-input catalogue of the Python surface (issue 8): malformed Hugging Face configs,
unknown models, impossible parallelism, unknown system / backend / version, and misuse of
``AicEngine`` (bad spec bytes, negative or overflowing integers, NaN scales, broken data).

Each case feeds one bad input through the public API and checks the exception class and a
fragment of its message. ``docs/errors.md`` lists the same cases with the full message each one
gets; ``test_doc_lists_exactly_these_cases`` fails when they differ. Regenerate the table after
a deliberate change with ``AIC_BLESS=1 pytest tests/python/test_error_catalogue.py``.

Nothing here skips: the native module must be built (``pip install .``).
"""

from __future__ import annotations

import json
import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import pytest
from conftest import family_not_built

from aic import AicEngine, compile_engine
from aic import _aic
from aic.export.dynamo import ExportError, export_dynamo
from aic.deploy import DeployError, GeneratorOptions
from aic.deploy.options import check_target_backend
from aic.data_import import PartialImportError
from aic.errors import (
    ConfigKeyError,
    HeadDivisibilityError,
    PartialResultError,
    UnsupportedArchitectureError,
)
from aic.serving import NoFeasibleConfigError

REPO = Path(__file__).resolve().parents[2]
SHIPPED_SYSTEMS = REPO / "data" / "systems"
MODEL_CONFIGS = REPO / "data" / "model_configs"
ERRORS_DOC = REPO / "docs" / "errors.md"
GEMM_TABLE = "data/h200_sxm/gemm/vllm/0.24.0/gemm_perf.parquet"
MAX_MESSAGE_CHARS = 300


class Scratch:
    """A private folder per case, with helpers to write the bad inputs into it."""

    def __init__(self, root: Path):
        self.root = root

    def config_dir(self, config, quant=None, raw: str | None = None) -> str:
        """A model folder whose ``config.json`` is ``config`` (or the literal text ``raw``)."""
        folder = self.root / "model"
        folder.mkdir(parents=True, exist_ok=True)
        text = raw if raw is not None else json.dumps(config)
        (folder / "config.json").write_text(text, encoding="utf-8")
        if quant is not None:
            (folder / "hf_quant_config.json").write_text(quant, encoding="utf-8")
        return str(folder)

    def qwen35_27b(self, **changes) -> str:
        """The shipped Qwen3.5-27B config with ``text_config`` fields changed (``None`` deletes)."""
        config = json.loads((MODEL_CONFIGS / "Qwen--Qwen3.5-27B_config.json").read_text())
        for key, value in changes.items():
            if value is None:
                config["text_config"].pop(key, None)
            else:
                config["text_config"][key] = value
        return self.config_dir(config)

    def qwen3_8b(self, **changes) -> str:
        """The shipped Qwen3-8B config with fields changed (``None`` deletes a field)."""
        config = json.loads((MODEL_CONFIGS / "Qwen--Qwen3-8B_config.json").read_text())
        for key, value in changes.items():
            if value is None:
                config.pop(key, None)
            else:
                config[key] = value
        return self.config_dir(config)

    def shipped(self, model: str, change: Callable[[dict], object] | None = None, **changes) -> str:
        """A shipped config with top-level fields changed (``None`` deletes a field) and
        ``change`` applied to its text section (the nested ``text_config`` when there is one,
        else the whole config)."""
        config = json.loads((MODEL_CONFIGS / f"{model.replace('/', '--')}_config.json").read_text())
        for key, value in changes.items():
            if value is None:
                config.pop(key, None)
            else:
                config[key] = value
        if change is not None:
            change(config.get("text_config", config))
        return self.config_dir(config)

    def systems_copy(self) -> Path:
        """A systems folder whose top-level files are copies and whose h200_sxm data is a
        tree of symlinks to the shipped files (so one file can be replaced cheaply)."""
        root = self.root / "systems"
        root.mkdir(parents=True)
        for entry in SHIPPED_SYSTEMS.iterdir():
            if entry.is_file():
                shutil.copy(entry, root / entry.name)
        shipped = SHIPPED_SYSTEMS / "data" / "h200_sxm"
        for folder, _dirs, files in os.walk(shipped):
            target = root / "data" / "h200_sxm" / Path(folder).relative_to(shipped)
            target.mkdir(parents=True, exist_ok=True)
            for name in files:
                (target / name).symlink_to(Path(folder) / name)
        return root


def _spec() -> bytes:
    return compile_engine("Qwen/Qwen3-8B", "h200_sxm", "vllm")


def _engine() -> AicEngine:
    return AicEngine.from_spec(_spec())


@dataclass(frozen=True)
class Case:
    id: str
    input: str
    exception: type
    fragment: str
    run: Callable[[Scratch], object]

    @property
    def exception_name(self) -> str:
        return self.exception.__name__


def _unbuilt(label, run):
    """``run()`` with ``label`` taken out of the builder table."""
    with family_not_built(label):
        return run()


def _serving(**kwargs):
    from aic.serving import estimate

    args = {"model_path": "Qwen/Qwen3-32B", "system_name": "h200_sxm", "mode": "static",
            "backend_name": "vllm", "isl": 1024, "osl": 64, "batch_size": 4, "tp_size": 2}
    args.update(kwargs)
    return estimate(**args)


def _sweep_infeasible():
    from aic.serving.sweep import sweep

    return sweep("Qwen/Qwen3-8B", 1, "h100_sxm", "vllm", isl=1000, osl=100, ttft=1.0)


def _engine_with_gemm_table(scratch: Scratch, content: bytes):
    root = scratch.systems_copy()
    table = root / GEMM_TABLE
    table.unlink()
    table.write_bytes(content)
    engine = AicEngine.from_spec(_spec(), str(root))
    return engine.predict_prefill_latency(1, 128)



def _dsv4_config(drop: str | None = None, **changes) -> dict:
    """The shipped sgl-project/DeepSeek-V4-Flash-FP8 config with a key dropped or replaced."""
    cfg = json.loads((MODEL_CONFIGS / "sgl-project--DeepSeek-V4-Flash-FP8_config.json").read_text())
    cfg.pop(drop, None)
    cfg.update(changes)
    return cfg

CASES = [
    # ---- Hugging Face configs ---------------------------------------------------------------
    Case("config-truncated", "`config.json` cut in half", ValueError, "malformed JSON in model config",
         lambda s: compile_engine(s.config_dir(None, raw='{"architectures": ["Qwen3ForCausalLM"], "hidd'),
                                  "h200_sxm", "vllm")),
    Case("config-empty", "zero-byte `config.json`", ValueError, "malformed JSON in model config",
         lambda s: compile_engine(s.config_dir(None, raw=""), "h200_sxm", "vllm")),
    Case("config-not-object", "`config.json` holding a JSON list", ValueError,
         "must be a JSON object, got list",
         lambda s: compile_engine(s.config_dir([1, 2]), "h200_sxm", "vllm")),
    Case("config-no-architectures", "config without `architectures`", ValueError,
         "has no 'architectures' list naming the model class",
         lambda s: compile_engine(s.qwen3_8b(architectures=None), "h200_sxm", "vllm")),
    Case("config-unknown-architecture", "config with `architectures: [\"FooForCausalLM\"]`",
         UnsupportedArchitectureError, "The model's architecture FooForCausalLM is not supported",
         lambda s: compile_engine(s.qwen3_8b(architectures=["FooForCausalLM"]), "h200_sxm", "vllm")),
    Case("config-architecture-not-implemented", "shipped Kimi-K3 config with its family taken out of the builder table (every family the reference knows is built)",
         UnsupportedArchitectureError, "KimiK3ForConditionalGeneration",
         lambda s: _unbuilt("KIMIK3", lambda: compile_engine("moonshotai/Kimi-K3", "h200_sxm", "vllm",
                                                              tp_size=4, moe_tp_size=4))),
    Case("config-dsa-key-missing", "GLM-5 config without `index_topk`", KeyError,
         "index_topk: the model config lacks this key",
         lambda s: compile_engine(s.config_dir({k: v for k, v in json.loads(
             (MODEL_CONFIGS / "zai-org--GLM-5-FP8_config.json").read_text()).items() if k != "index_topk"}),
             "b200_sxm", "trtllm", tp_size=8, moe_ep_size=8)),
    Case("config-dsv4-key-missing", "DeepSeek-V4-Flash config without `hc_mult`", KeyError,
         "hc_mult: the model config lacks this key",
         lambda s: compile_engine(s.config_dir(_dsv4_config(drop="hc_mult")), "h200_sxm", "sglang",
                                  tp_size=8, moe_ep_size=8)),
    Case("config-dsv4-ratios-short", "DeepSeek-V4-Flash config with 10 `compress_ratios` for 43 layers",
         ValueError, "DeepSeek-V4 compress_ratios length 10 is smaller than num_hidden_layers 43",
         lambda s: compile_engine(s.config_dir(_dsv4_config(compress_ratios=[4] * 10)), "h200_sxm",
                                  "sglang", tp_size=8, moe_ep_size=8)),
    Case("config-dsv4-ratio-unsupported", "DeepSeek-V4-Flash config with compress ratios 8 and 16",
         ValueError, "Unsupported DeepSeek-V4 compress_ratios: [8, 16]",
         lambda s: compile_engine(s.config_dir(_dsv4_config(compress_ratios=[16, 8] + [4] * 42)),
                                  "h200_sxm", "sglang", tp_size=8, moe_ep_size=8)),
    Case("config-missing-field", "config without `hidden_size`", ValueError,
         "lacks the required field 'hidden_size'",
         lambda s: compile_engine(s.qwen3_8b(hidden_size=None), "h200_sxm", "vllm")),
    Case("config-field-wrong-type", "config with `hidden_size: \"big\"`", ValueError,
         "field 'hidden_size' must be an integer, got 'big'",
         lambda s: compile_engine(s.qwen3_8b(hidden_size="big"), "h200_sxm", "vllm")),
    Case("config-field-infinite", "config with `hidden_size: Infinity`", ValueError,
         "field 'hidden_size' must be an integer, got inf",
         lambda s: compile_engine(s.qwen3_8b(hidden_size=float("inf")), "h200_sxm", "vllm")),
    Case("config-field-nan", "config with `intermediate_size: NaN`", ValueError,
         "field 'intermediate_size' must be an integer, got nan",
         lambda s: compile_engine(s.qwen3_8b(intermediate_size=float("nan")), "h200_sxm", "vllm")),
    Case("config-field-negative", "config with `hidden_size: -4096`", ValueError,
         "field 'hidden_size' must be between 0 and 4294967295, got -4096",
         lambda s: compile_engine(s.qwen3_8b(hidden_size=-4096), "h200_sxm", "vllm")),
    Case("config-field-too-large", "config with `vocab_size: 2**40`", ValueError,
         "field 'vocab_size' must be between 0 and 4294967295, got 1099511627776",
         lambda s: compile_engine(s.qwen3_8b(vocab_size=2**40), "h200_sxm", "vllm")),
    Case("config-zero-layers", "config with `num_hidden_layers: 0`", ValueError,
         "field 'num_hidden_layers' must be a positive integer, got 0",
         lambda s: compile_engine(s.qwen3_8b(num_hidden_layers=0), "h200_sxm", "vllm")),
    Case("config-zero-heads", "config with `num_attention_heads: 0`", ValueError,
         "field 'num_attention_heads' must be a positive integer, got 0",
         lambda s: compile_engine(s.qwen3_8b(num_attention_heads=0), "h200_sxm", "vllm")),
    Case("config-quant-not-object", "`hf_quant_config.json` holding a JSON list", ValueError,
         "must be a JSON object, got list",
         lambda s: compile_engine(s.config_dir(json.loads((MODEL_CONFIGS / "Qwen--Qwen3-8B_config.json").read_text()),
                                               quant="[]"), "h200_sxm", "vllm")),
    # ---- where the model comes from ---------------------------------------------------------
    Case("model-unknown-id", "model id `acme/NoSuchModel-1B`", ValueError,
         "is neither a local folder / config.json path nor a shipped model id",
         lambda s: compile_engine("acme/NoSuchModel-1B", "h200_sxm", "vllm")),
    Case("model-path-missing", "model path `./nowhere/config.json`", ValueError,
         "missing config.json: no folder or file './nowhere/config.json' exists",
         lambda s: compile_engine("./nowhere/config.json", "h200_sxm", "vllm")),
    Case("model-folder-without-config", "model folder without `config.json`", ValueError, "has no config.json",
         lambda s: compile_engine(str(s.root), "h200_sxm", "vllm")),
    # ---- parallelism ------------------------------------------------------------------------
    Case("parallel-tp-zero", "`tp_size=0`", ValueError, "tp_size must be positive, got 0.",
         lambda s: compile_engine("Qwen/Qwen3-8B", "h200_sxm", "vllm", tp_size=0)),
    Case("parallel-tp-not-integer", "`tp_size=\"two\"`", ValueError, "tp_size must be an integer, got 'two'.",
         lambda s: compile_engine("Qwen/Qwen3-8B", "h200_sxm", "vllm", tp_size="two")),
    Case("parallel-heads-not-divisible", "`tp_size=3` for 32 attention heads", HeadDivisibilityError,
         "num_heads 32 should be divisible by tp_size 3",
         lambda s: compile_engine("Qwen/Qwen3-8B", "h200_sxm", "vllm", tp_size=3)),
    Case("parallel-moe-width", "MoE model with `tp_size=2`, `moe_ep_size=4`", ValueError,
         "Parallelism width mismatch",
         lambda s: compile_engine("Qwen/Qwen3-30B-A3B", "h200_sxm", "vllm", tp_size=2, moe_ep_size=4)),
    Case("parallel-cp-backend", "`cp_size=2` on trtllm", NotImplementedError,
         "Context parallelism (cp_size=2) is not supported for model_family='LLAMA' on backend='trtllm'.",
         lambda s: compile_engine("Qwen/Qwen3-8B", "h200_sxm", "trtllm", cp_size=2)),
    Case("parallel-cp-with-tp", "`cp_size=2` with `tp_size=2` on sglang", ValueError,
         "sglang CP requires tp_size=1 and attention_dp_size=1 when cp_size>1",
         lambda s: compile_engine("Qwen/Qwen3-8B", "h200_sxm", "sglang", tp_size=2, cp_size=2)),
    Case("parallel-cp-zero-moe", "MoE model with `cp_size=0`", ValueError, "cp_size must be positive, got 0.",
         lambda s: compile_engine("Qwen/Qwen3-30B-A3B", "h200_sxm", "sglang", cp_size=0)),
    Case("parallel-cp-negative-dense", "dense model with `cp_size=-1`", OverflowError,
         "out of range integral type conversion attempted",
         lambda s: compile_engine("Qwen/Qwen3-8B", "h200_sxm", "sglang", cp_size=-1)),
    Case("parallel-cp-family", "`cp_size=2` for Llama 4 (CP op lists not built by aic)", NotImplementedError,
         "Context parallelism (cp_size=2) for model_family='HYBRIDMOE' is not implemented by aic yet",
         lambda s: compile_engine("meta-llama/Llama-4-Scout-17B-16E-Instruct", "h200_sxm", "sglang",
                                  cp_size=2, moe_ep_size=2)),
    Case("parallel-nextn-negative", "`nextn=-1`", ValueError, "nextn (-1) must be >= 0.",
         lambda s: compile_engine("Qwen/Qwen3-8B", "h200_sxm", "vllm", nextn=-1)),
    Case("qwen35-gdn-heads", "Qwen3.5-27B at `tp_size=3` (48 GDN value heads, 16 key heads)", ValueError,
         "Qwen3.5 GDN head counts must both be divisible by tensor parallel size",
         lambda s: compile_engine("Qwen/Qwen3.5-27B", "h200_sxm", "vllm", tp_size=3)),
    Case("qwen35-experts-vs-ep", "Qwen3.5-35B-A3B (256 experts) at `attention_dp_size=512`, `moe_ep_size=512`",
         ValueError, "moe_ep_size 512 exceeds the model's 256 experts",
         lambda s: compile_engine("Qwen/Qwen3.5-35B-A3B", "h200_sxm", "vllm", attention_dp_size=512,
                                  moe_ep_size=512)),
    Case("qwen35-layer-types-length", "Qwen3.5 config whose `layer_types` lists 3 of 64 layers", ValueError,
         "Qwen3.5 layer_types length 3 != num_hidden_layers 64",
         lambda s: compile_engine(s.qwen35_27b(layer_types=["linear_attention"] * 3), "h200_sxm", "vllm")),
    Case("qwen35-missing-gdn-field", "Qwen3.5 config without `linear_num_key_heads`", ValueError,
         "'linear_num_key_heads'",
         lambda s: compile_engine(s.qwen35_27b(linear_num_key_heads=None), "h200_sxm", "vllm")),
    Case("parallel-dense-gemma-ep", "dense Gemma-4-31B with `tp_size=2`, `moe_ep_size=2`", ValueError,
         "dense Gemma 4 variants require moe_ep_size=1, got 2",
         lambda s: compile_engine("nvidia/Gemma-4-31B-IT-NVFP4", "b200_sxm", "vllm", tp_size=2,
                                  moe_ep_size=2)),
    # ---- per-layer patterns of the hybrid-attention families (checked before parallelism) ----
    Case("config-llama4-interleave-step", "Llama-4 Scout config with `interleave_moe_layer_step: 0`",
         ValueError, "interleave_moe_layer_step must be a positive integer, got 0",
         lambda s: compile_engine(s.shipped("meta-llama/Llama-4-Scout-17B-16E-Instruct",
                                            lambda c: c.update(interleave_moe_layer_step=0)),
                                  "h200_sxm", "vllm", tp_size=4)),
    Case("config-mimo-pattern-length", "MiMo-V2-Flash config with a 47-entry `hybrid_layer_pattern`",
         ValueError, "Hybrid pattern length mismatch for MiMoV2FlashForCausalLM: expected 48 entries",
         lambda s: compile_engine(s.shipped("XiaomiMiMo/MiMo-V2-Flash",
                                            lambda c: c["hybrid_layer_pattern"].pop()),
                                  "h200_sxm", "trtllm", tp_size=4)),
    Case("config-mimo-pattern-values", "MiMo-V2-Flash config with a pattern value 2", ValueError,
         "Hybrid patterns for MiMoV2FlashForCausalLM must contain only 0/1 values",
         lambda s: compile_engine(s.shipped("XiaomiMiMo/MiMo-V2-Flash",
                                            lambda c: c["hybrid_layer_pattern"].__setitem__(0, 2)),
                                  "h200_sxm", "trtllm", tp_size=4, moe_ep_size=4)),
    Case("config-step-layer-types-length", "Step-3.7-Flash config with a 44-entry `layer_types`",
         ValueError, "Step3p7 layer_types length 44 != num_hidden_layers 45",
         lambda s: compile_engine(s.shipped("stepfun-ai/Step-3.7-Flash",
                                            lambda c: c.update(layer_types=c["layer_types"][:44])),
                                  "h200_sxm", "trtllm", tp_size=4, moe_ep_size=4)),
    Case("config-step-layer-types-values", "Step-3.7-Flash config with a `linear_attention` layer",
         ValueError, "Step3p7 layer_types must contain only 'sliding_attention' or 'full_attention'",
         lambda s: compile_engine(s.shipped("stepfun-ai/Step-3.7-Flash",
                                            lambda c: c["layer_types"].__setitem__(1, "linear_attention")),
                                  "h200_sxm", "trtllm", tp_size=4, moe_ep_size=4)),
    Case("config-gemma-layer-types-length", "gemma-4-26B config with a 29-entry `layer_types`",
         ValueError, "Gemma 4 layer_types length 29 != num_hidden_layers 30",
         lambda s: compile_engine(s.shipped("google/gemma-4-26B-A4B",
                                            lambda c: c["layer_types"].pop()),
                                  "h200_sxm", "vllm")),
    Case("config-gemma-layer-types-values", "gemma-4-26B config with a `chunked` layer", ValueError,
         "Gemma 4 layer_types must contain only 'sliding_attention' or 'full_attention'",
         lambda s: compile_engine(s.shipped("google/gemma-4-26B-A4B",
                                            lambda c: c["layer_types"].__setitem__(0, "chunked")),
                                  "h200_sxm", "vllm")),
    Case("config-gemma-missing-kv-heads", "gemma-4-26B config without `num_key_value_heads`", ConfigKeyError,
         "'num_key_value_heads'",
         lambda s: compile_engine(s.shipped("google/gemma-4-26B-A4B",
                                            lambda c: c.pop("num_key_value_heads")),
                                  "h200_sxm", "vllm")),
    Case("nemotronh-no-pattern", "Nemotron-H config with neither `hybrid_override_pattern` nor `layers_block_type`",
         TypeError, "NemotronH config must define 'hybrid_override_pattern' or 'layers_block_type'.",
         lambda s: compile_engine(s.shipped("nvidia/Nemotron-H-56B-Base-8K", hybrid_override_pattern=None),
                                  "h200_sxm", "trtllm")),
    Case("nemotronh-block-type", "Nemotron 3 config whose `layers_block_type` lists `\"Mamba\"`", ValueError,
         "Unsupported NemotronH layer block type 'Mamba'. Supported values: *, -, E, M, attention, dense, ffn, mamba, mlp, moe",
         lambda s: compile_engine(s.shipped("nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16", hybrid_override_pattern=None,
                                            layers_block_type=["Mamba"]), "h200_sxm", "trtllm")),
    Case("nemotronh-missing-mamba-field", "Nemotron-H config without `mamba_num_heads`", KeyError,
         "'mamba_num_heads'",
         lambda s: compile_engine(s.shipped("nvidia/Nemotron-H-56B-Base-8K", mamba_num_heads=None),
                                  "h200_sxm", "trtllm")),
    Case("nemotronnas-nextn", "Llama-3.3-Nemotron-Super-49B (NAS) with `nextn=1`", AssertionError,
         "NemotronNas does not support MTP speculative decoding (nextn must be 0)",
         lambda s: compile_engine("nvidia/Llama-3_3-Nemotron-Super-49B-v1", "h200_sxm", "trtllm", nextn=1)),
    # ---- deployment names -------------------------------------------------------------------
    Case("compile-unknown-system", "system `h300_sxm`", ValueError, "'h300_sxm'",
         lambda s: compile_engine("Qwen/Qwen3-8B", "h300_sxm", "vllm")),
    Case("compile-unknown-backend", "backend `tensorrt`", ValueError,
         "unknown backend 'tensorrt'; expected one of: trtllm, sglang, vllm",
         lambda s: compile_engine("Qwen/Qwen3-8B", "h200_sxm", "tensorrt")),
    Case("compile-unknown-version", "vLLM version `9.9.9`", ValueError, "'9.9.9'",
         lambda s: compile_engine("Qwen/Qwen3-8B", "h200_sxm", "vllm", backend_version="9.9.9")),
    Case("compile-unknown-quant", "`gemm_quant_mode=\"fp9\"`", ValueError, "'fp9'",
         lambda s: compile_engine("Qwen/Qwen3-8B", "h200_sxm", "vllm", gemm_quant_mode="fp9")),
    Case("compile-database-mode", "`database_mode=\"silicon\"` (lower case)", ValueError,
         "SILICON, HYBRID, EMPIRICAL, SOL",
         lambda s: compile_engine("Qwen/Qwen3-8B", "h200_sxm", "vllm", database_mode="silicon")),
    Case("compile-kv-block-size", "`kv_block_size=0`", ValueError,
         "kv_block_size must be a positive integer or None, got 0",
         lambda s: compile_engine("Qwen/Qwen3-8B", "h200_sxm", "vllm", kv_block_size=0)),
    # ---- AicEngine --------------------------------------------------------------------------
    Case("engine-spec-garbage", "`AicEngine.from_spec(b\"garbage\")`", ValueError, "not an aic engine spec",
         lambda s: AicEngine.from_spec(b"garbage")),
    Case("engine-spec-not-bytes", "`AicEngine.from_spec` given a `str`", TypeError,
         "argument 'spec_bytes': 'str' object is not an instance of",
         lambda s: AicEngine.from_spec("not bytes")),
    Case("engine-spec-truncated", "compiled spec cut in half", ValueError, "corrupt or truncated spec payload",
         lambda s: AicEngine.from_spec(_spec()[: len(_spec()) // 2])),
    Case("engine-spec-other-schema", "spec JSON with `schema_version` 14", ValueError,
         "unsupported schema version for EngineSpec: got 14, expected 15",
         lambda s: AicEngine.from_spec(json.dumps({**json.loads(_aic.decode_spec(_spec())), "schema_version": 14}).encode())),
    Case("engine-missing-systems-folder", "`from_spec(spec, systems_path=<missing folder>)`", ValueError,
         "does not exist or is not a folder",
         lambda s: AicEngine.from_spec(_spec(), str(s.root / "nowhere"))),
    Case("engine-negative-batch", "`predict_prefill_latency(-1, 128)`", OverflowError,
         "out of range integral type conversion attempted",
         lambda s: _engine().predict_prefill_latency(-1, 128)),
    Case("engine-token-overflow", "`predict_prefill_latency(1, 2**32)` (isl beyond u32)", OverflowError,
         "out of range integral type conversion attempted",
         lambda s: _engine().predict_prefill_latency(1, 2**32)),
    Case("engine-float-argument", "`predict_prefill_latency(1.5, 128)`", TypeError,
         "'float' object cannot be interpreted as an integer",
         lambda s: _engine().predict_prefill_latency(1.5, 128)),
    Case("engine-prefix-equals-isl", "`predict_prefill_latency(1, 128, prefix=128)`", ValueError,
         "isl must be greater than 0 after removing prefix, but got 0",
         lambda s: _engine().predict_prefill_latency(1, 128, 128)),
    Case("engine-nan-scale", "`mixed_step_latency(..., seq_imbalance_correction_scale=nan)`", ValueError,
         "seq_imbalance_correction_scale must be a finite number",
         lambda s: _engine().mixed_step_latency(128, 4, 128, 16, 0, float("nan"))),
    Case("engine-run-mode", "`run_static(..., mode=\"static_bogus\")`", ValueError,
         "invalid mode \"static_bogus\"",
         lambda s: _engine().run_static(1, 1, 128, 16, mode="static_bogus")),
    Case("engine-missing-flops", "nvfp4 GEMMs on h200_sxm (no `fp4_tc_flops`)", _aic.MissingSystemFlopsError,
         "needs 'fp4_tc_flops'",
         lambda s: AicEngine.from_spec(compile_engine("Qwen/Qwen3-8B", "h200_sxm", "vllm", gemm_quant_mode="nvfp4",
                                                      database_mode="SOL")).predict_prefill_latency(1, 128)),
    Case("engine-lfs-table", "GEMM table replaced by a Git LFS pointer", _aic.PerfDataNotAvailableError,
         "unresolved Git LFS pointer, not parquet data; run `git lfs pull`",
         lambda s: _engine_with_gemm_table(s, b"version https://git-lfs.github.com/spec/v1\noid sha256:0\nsize 1\n")),
    # ---- serving level (spec 50) -----------------------------------------------------------
    Case("serving-agg-oom", "`aic.serving.estimate` agg: Llama-3.1-70B on one h100 (weights alone exceed 80 GiB)",
         RuntimeError, "does not fit in GPU memory on system 'h100_sxm' with the given parallelism (tp=1, pp=1, dp=1)",
         lambda s: _serving(model_path="meta-llama/Meta-Llama-3.1-70B", system_name="h100_sxm",
                            mode="agg", backend_name="trtllm", isl=1024, osl=128, batch_size=8,
                            tp_size=1)),
    Case("serving-disagg-oom", "`aic.serving.estimate` disagg whose decode batch exceeds the KV budget",
         RuntimeError, "does not fit in GPU memory on system 'h100_sxm' with the given parallelism. Try increasing",
         lambda s: _serving(model_path="Qwen/Qwen3-8B", system_name="h100_sxm", mode="disagg",
                            backend_name="vllm", isl=8192, osl=4096, tp_size=1, prefill_batch_size=1,
                            prefill_num_workers=1, decode_batch_size=512, decode_num_workers=1)),
    Case("serving-ctx-tokens-zero", "`aic.serving.estimate` agg with `ctx_tokens=0`", ZeroDivisionError,
         "division by zero",
         lambda s: _serving(mode="agg", ctx_tokens=0)),
    Case("serving-agg-batch-zero", "`aic.serving.estimate` agg with `batch_size=0`", ValueError,
         "batch_size must be at least 1 for agg mode",
         lambda s: _serving(mode="agg", batch_size=0)),
    Case("serving-bad-mode", "`aic.serving.estimate(mode=\"offline\")`", ValueError,
         "Unsupported estimate mode: 'offline'",
         lambda s: _serving(mode="offline")),
    Case("serving-disagg-missing-workers", "`aic.serving.estimate` disagg without `prefill_num_workers`",
         ValueError, "prefill_num_workers is required for disagg mode.",
         lambda s: _serving(mode="disagg", prefill_batch_size=1, decode_batch_size=8,
                            decode_num_workers=1)),
    Case("serving-mtp-no-acceptance", "`aic.serving.estimate` with `nextn=1` and no `nextn_accepted`",
         ValueError, "nextn=1 requires 'nextn_accepted'",
         lambda s: _serving(model_path="deepseek-ai/DeepSeek-V3", nextn=1, tp_size=8, moe_ep_size=8)),
    Case("serving-moe-no-width", "`aic.serving.estimate` on an MoE model without MoE widths", ValueError,
         "At least one of moe_tp_size or moe_ep_size must be set for MoE models.",
         lambda s: _serving(model_path="Qwen/Qwen3-30B-A3B", tp_size=2)),
    Case("serving-unknown-backend", "`aic.serving.estimate(backend_name=\"tgi\")`", ValueError,
         "No database found for system=h200_sxm, backend=tgi.",
         lambda s: _serving(backend_name="tgi")),
    Case("serving-fmha-fp8-no-data", "`aic.serving.estimate` DeepSeek-V3 trtllm with explicit `fmha_quant_mode=\"fp8\"`",
         ValueError, "fmha_quant_mode=fp8 has no 'context_mla' perf data",
         lambda s: _serving(model_path="deepseek-ai/DeepSeek-V3", mode="static", backend_name="trtllm",
                            tp_size=8, moe_ep_size=8, fmha_quant_mode="fp8")),
    Case("serving-sweep-infeasible", "`aic.serving_sweep.sweep` with a 1 ms TTFT target", NoFeasibleConfigError,
         "No feasible configurations found for the given parameters.",
         lambda s: _sweep_infeasible()),
    # ---- hostile inputs, round two (issue 22): sizes, FPM JSON, empty version folders
    Case("config-kv-heads-zero", "Qwen3-8B config with `num_key_value_heads: 0`", ValueError,
         "num_key_value_heads must be at least 1, got 0",
         lambda s: compile_engine(s.qwen3_8b(num_key_value_heads=0), "h200_sxm", "vllm")),
    Case("config-kv-heads-not-dividing", "Qwen3-8B config (32 heads) with `num_key_value_heads: 5`", ValueError,
         "num_attention_heads 32 must be divisible by num_key_value_heads 5",
         lambda s: compile_engine(s.qwen3_8b(num_key_value_heads=5), "h200_sxm", "vllm")),
    Case("config-head-dim-zero", "Qwen3-8B config with `head_dim: 0`", ValueError,
         "head_dim must be at least 1, got 0",
         lambda s: compile_engine(s.qwen3_8b(head_dim=0), "h200_sxm", "vllm")),
    Case("engine-from-spec-op-size-zero", "spec JSON whose `CustomAllReduce` has `tp_size: 0`", ValueError,
         'context_ops[11] (CustomAllReduce "context_ar_1"): tp_size must be at least 1, got 0',
         lambda s: AicEngine.from_spec(_spec_json_with(11, "tp_size", 0))),
    Case("fpm-options-misspelt-dict", "FPM options `{\"bucket_cont\": 4}` (a misspelt option)", ValueError,
         'unknown field "bucket_cont" in options; valid fields: max_observations,',
         lambda s: _aic.ForwardPassPerfModel.from_regression({"bucket_cont": 4})),
    Case("fpm-options-list-text", "FPM options given as the JSON list `[64, 5]`", ValueError,
         "options must be a JSON object, got a list",
         lambda s: _aic.ForwardPassPerfModel.from_regression("[64, 5]")),
    Case("fpm-options-nan", "FPM options with `max_slower_correction_factor: NaN`", ValueError,
         "options.max_slower_correction_factor must be a finite number, got NaN",
         lambda s: _aic.ForwardPassPerfModel.from_regression({"max_slower_correction_factor": float("nan")})),
    Case("fpm-counters-top-level-dict", "FPM record with `num_decode_requests` at the top level instead of in `scheduled_requests`",
         ValueError, 'unknown field "num_decode_requests" in the FPM record; valid fields: version,',
         lambda s: _aic.ForwardPassPerfModel.from_regression().estimate_forward_pass_time_ms(
             {"num_decode_requests": 3, "sum_decode_kv_tokens": 300})),
    Case("fpm-tune-wall-time-negative", "tuning iteration whose record has `wall_time: -1`", ValueError,
         "wall_time must be a finite number of seconds >= 0 (0: not measured), got -1",
         lambda s: _aic.ForwardPassPerfModel.from_regression().tune_with_fpms(
             [[{"wall_time": -1, "scheduled_requests": {"num_decode_requests": 1}}]])),
    # ---- config fields every family's op list needs (issue 22 follow-up)
    Case("config-gdn-key-heads-zero", "Qwen3.5-27B config with `linear_num_key_heads: 0`", ValueError,
         "model config: linear_num_key_heads must be at least 1, got 0",
         lambda s: compile_engine(s.qwen35_27b(linear_num_key_heads=0), "h200_sxm", "vllm")),
    Case("config-gemma-global-kv-heads", "gemma-4-26B config (16 heads) with `num_global_key_value_heads: 3`",
         ValueError, "model config: num_attention_heads 16 must be divisible by num_global_key_value_heads 3",
         lambda s: compile_engine(s.shipped("google/gemma-4-26B-A4B",
                                            lambda c: c.__setitem__("num_global_key_value_heads", 3)),
                                  "h200_sxm", "vllm")),
    Case("config-mimo-swa-kv-heads", "MiMo-V2-Flash config (64 heads) with `swa_num_key_value_heads: 3`",
         ValueError, "model config: num_attention_heads 64 must be divisible by swa_num_key_value_heads 3",
         lambda s: compile_engine(s.shipped("XiaomiMiMo/MiMo-V2-Flash",
                                            lambda c: c.__setitem__("swa_num_key_value_heads", 3)),
                                  "h200_sxm", "sglang")),
    Case("config-mamba-head-dim-zero", "Nemotron-H-56B config with `mamba_head_dim: 0`", ValueError,
         "model config: mamba_head_dim must be at least 1, got 0",
         lambda s: compile_engine(s.shipped("nvidia/Nemotron-H-56B-Base-8K", mamba_head_dim=0),
                                  "h200_sxm", "trtllm")),
    Case("config-nas-heads-in-group-zero", "Nemotron-Super-49B config with attention blocks of `n_heads_in_group: 0`",
         ValueError, "model config: block_configs[].attention.n_heads_in_group must be at least 1, got 0",
         lambda s: compile_engine(s.shipped("nvidia/Llama-3_3-Nemotron-Super-49B-v1", _nas_heads_in_group_zero),
                                  "h200_sxm", "trtllm")),
    Case("config-mla-vllm-v-head-dim-zero", "DeepSeek-V3 config with `v_head_dim: 0` on vLLM", ValueError,
         "model config: v_head_dim must be at least 1, got 0",
         lambda s: compile_engine(s.shipped("deepseek-ai/DeepSeek-V3", v_head_dim=0), "h200_sxm", "vllm",
                                  tp_size=8, moe_ep_size=8)),
    Case("config-dsv4-o-lora-rank-zero", "DeepSeek-V4-Flash config with `o_lora_rank: 0`", ValueError,
         "model config: o_lora_rank must be at least 1, got 0",
         lambda s: compile_engine(s.config_dir(_dsv4_config(o_lora_rank=0)), "h200_sxm", "sglang")),
    Case("config-minimax-m3-head-dim-zero", "MiniMax-M3 config with `head_dim: 0`", ValueError,
         "model config: head_dim must be at least 1, got 0",
         lambda s: compile_engine(s.shipped("MiniMaxAI/MiniMax-M3", lambda c: c.__setitem__("head_dim", 0)),
                                  "h200_sxm", "sglang")),
    Case("config-kda-heads-zero", "Kimi-K3 config with `linear_attn_config.num_heads: 0`", ValueError,
         "model config: linear_attn_config.num_heads must be at least 1, got 0",
         lambda s: compile_engine(s.shipped("moonshotai/Kimi-K3",
                                            lambda c: c["linear_attn_config"].__setitem__("num_heads", 0)),
                                  "h200_sxm", "sglang")),
    # ---- hostile inputs, round three (issue 36): serving, sweep, accuracy, calibrate, parity,
    # support, the engine's counts
    Case("config-not-utf8", "`config.json` holding binary bytes (was Python's codec error, no file named)",
         ValueError, "/model/config.json is not UTF-8 text (byte 128)",
         lambda s: compile_engine(_binary_config(s), "h200_sxm", "vllm")),
    Case("serving-isl-negative", "`aic.serving.estimate` with `isl=-1` (was serde's `expected u32`)",
         ValueError, "isl must be a positive integer (input tokens per request), got -1",
         lambda s: _serving(isl=-1)),
    Case("serving-osl-zero", "`aic.serving.estimate` static with `osl=0` (was priced as 1)", ValueError,
         "osl must be a positive integer (output tokens per request, the first one included), got 0",
         lambda s: _serving(osl=0)),
    Case("serving-stride-zero", "`aic.serving.estimate` static with `stride=0` (was priced as 1)",
         ValueError, "stride must be a positive integer (decode steps each priced step stands for), got 0",
         lambda s: _serving(stride=0)),
    Case("serving-batch-bool", "`aic.serving.estimate` with `batch_size=True`", TypeError,
         "batch_size must be an integer (requests per rank in the static batch), got True",
         lambda s: _serving(batch_size=True)),
    Case("serving-fraction-above-one", "`aic.serving.estimate` agg with `free_gpu_memory_fraction=1.5`",
         ValueError, "free_gpu_memory_fraction must be a finite number in (0, 1]",
         lambda s: _serving(mode="agg", free_gpu_memory_fraction=1.5)),
    Case("serving-fraction-nan", "`aic.serving.estimate` agg with `free_gpu_memory_fraction=nan` (was serde's `expected value`)",
         ValueError, "free_gpu_memory_fraction must be a finite number in (0, 1]",
         lambda s: _serving(mode="agg", free_gpu_memory_fraction=float("nan"))),
    Case("serving-short-kv-slot", "`aic.serving.estimate` agg trtllm with `max_seq_len` below `isl + osl` (4 096 requests \"fit\")",
         ValueError, "max_seq_len must be at least isl + osl = 1088",
         lambda s: _serving(mode="agg", backend_name="trtllm", max_seq_len=256, batch_size=4096)),
    Case("serving-disagg-zero-workers", "`aic.serving.estimate` disagg with `prefill_num_workers=0` (printed 0 tokens/s/gpu)",
         ValueError, "prefill_num_workers must be a positive integer (workers of that role), got 0",
         lambda s: _serving(mode="disagg", prefill_batch_size=1, prefill_num_workers=0,
                            decode_batch_size=8, decode_num_workers=1)),
    Case("serving-unknown-version", "`aic.serving.estimate` vLLM with `backend_version=\"9.9.9\"`",
         ValueError, "No database found for system=h200_sxm, backend=vllm, backend_version='9.9.9'",
         lambda s: _serving(backend_version="9.9.9")),
    Case("serving-calibration-huge", "calibration constants file whose `ttft_overhead_ms` is 1e308 (printed `ttft inf ms`)",
         ValueError, "ttft_overhead_ms must be a finite number in [0, 60000], got 1e308",
         lambda s: _calibration_file(s, ttft_overhead_ms=1e308)),
    Case("sweep-negative-latency-target", "`aic.serving_sweep.sweep` with `request_latency=-1` (picked configurations)",
         ValueError, "request_latency must be a finite number > 0 (the end-to-end latency target in ms), got -1",
         lambda s: _sweep(request_latency=-1)),
    Case("sweep-top-n-zero", "`aic.serving_sweep.sweep` with `top_n=0` (returned nothing)", ValueError,
         "top_n must be a positive integer (best configurations kept per experiment), got 0",
         lambda s: _sweep(top_n=0)),
    Case("compile-pp-beyond-layers", "Qwen3-8B (36 layers) with `pp_size=64`", ValueError,
         "pp_size 64 exceeds the model's 36 layers",
         lambda s: compile_engine("Qwen/Qwen3-8B", "h200_sxm", "vllm", pp_size=64)),
    Case("kv-cache-nan-fraction", "`aic.estimate_kv_cache` with `memory_fraction_value=nan` (was serde's `expected value at line 1 column 98`)",
         ValueError, "memory_fraction_value must be a finite number in [0, 1]",
         lambda s: _kv_cache(memory_fraction_value=float("nan"))),
    Case("engine-bool-batch", "`predict_prefill_latency(True, 128)` (priced a batch of 1)", TypeError,
         "argument 'bs': a bool is not a count",
         lambda s: AicEngine.from_spec(_spec()).predict_prefill_latency(True, 128)),
    Case("engine-decode-too-many-steps", "`predict_decode_latency(1, 128, 2**32 - 1)` (hours of pricing before the overflow check)",
         ValueError, "the decode phase would price 134217728 steps one by one",
         lambda s: AicEngine.from_spec(_spec()).predict_decode_latency(1, 128, 2**32 - 1)),
    Case("engine-cp-without-nccl-rows", "Qwen3-32B on sglang with `cp_size=3` (no 3-GPU all-gather rows; the error spoke of OneCCL only)",
         _aic.PerfDataNotAvailableError, "the NCCL table has no half all_gather rows for 3 GPUs (it has 2, 4, 8)",
         lambda s: AicEngine.from_spec(compile_engine("Qwen/Qwen3-32B", "h200_sxm", "sglang", cp_size=3))
         .predict_prefill_latency(1, 32768)),
    Case("accuracy-rows-missing-column", "rows CSV without the `silicon_tpot_ms` column", ValueError,
         "lacks the column(s) silicon_tpot_ms",
         lambda s: _rows(s, drop="silicon_tpot_ms")),
    Case("accuracy-rows-utf16", "rows CSV saved as UTF-16", ValueError, "is not UTF-8 text",
         lambda s: _rows(s, encoding="utf-16")),
    Case("accuracy-rows-empty", "zero-byte rows file (printed `0 of 0 rows (nan %)`)", ValueError,
         "is empty: it has no header line and no rows",
         lambda s: _rows(s, raw="")),
    Case("accuracy-rows-bad-number", "rows CSV with `abc` in the `isl` column", ValueError,
         "row 1, column isl: 'abc' is not a positive integer",
         lambda s: _rows(s, isl="abc")),
    Case("accuracy-rows-short-row", "rows CSV whose row has fewer fields than the header", ValueError,
         "row 1: 8 fields where the header has 9",
         lambda s: _rows(s, short=True)),
    Case("calibrate-measurements-unusable", "`calibrate` rows whose measurements are all NaN or negative (\"fitted 8 of 8 rows\")",
         ValueError, "none of the 2 rows has usable measurements",
         lambda s: _fit_rows_with(s, ["nan", "-5"])),
    Case("parity-rtol-nan", "`run_parity(..., rtol=nan)` (failed every check)", ValueError,
         "rtol must be a finite number >= 0 (the relative tolerance of a parity check), got NaN",
         lambda s: _parity_rtol(float("nan"))),
    Case("parity-cases-not-list", "golden file whose `cases` is an object", ValueError,
         "'cases' must be a list of case objects, got dict",
         lambda s: _golden_file(s, {"format": "aic-goldens/1", "cases": {"id": "x"}})),
    Case("parity-case-without-compile", "golden case without `compile`", ValueError,
         "case 0 (dense/x) lacks 'compile'",
         lambda s: _golden_file(s, {"format": "aic-goldens/1", "cases": [{"id": "dense/x"}]})),
    Case("support-unknown-model", "`support_matrix([\"acme/NoSuchModel-1B\"])` (an error in every cell, exit 0)",
         ValueError, "model 'acme/NoSuchModel-1B' is neither a local folder",
         lambda s: _support(models=["acme/NoSuchModel-1B"])),
    Case("support-empty-systems-folder", "`support_matrix` on a systems folder without systems (\"0 cells\")",
         ValueError, "holds no system description",
         lambda s: _support(models=["Qwen/Qwen3-8B"], systems_path=str(s.root))),
    # ---- the Dynamo export ------------------------------------------------------------------
    Case("export-out-is-a-file", "`export_dynamo(..., out_dir)` where `out_dir` is a file",
         ExportError, "is a file, not a folder", lambda s: _export(s, _written(s.root / "out"))),
    Case("export-out-not-empty", "`export_dynamo` into a non-empty folder without `force`",
         ExportError, "exists and is not empty",
         lambda s: _export(s, _written(s.root / "out" / "keep.txt").parent)),
    Case("export-lengths-above-max", "`export_dynamo` with isl + osl above the model's length",
         ExportError, "is above the deployment's maximum length",
         lambda s: _export(s, s.root / "out", isl=40000, osl=2000)),
    Case("export-no-kv-blocks", "`export_dynamo` of Qwen3-235B-A22B on one H200 (no KV blocks)",
         ExportError, "no KV budget",
         lambda s: _export(s, s.root / "out", model="Qwen/Qwen3-235B-A22B", tp_size=1,
                           moe_ep_size=1)),
    Case("deploy-unknown-target", "`sweep --save-dir DIR --deployment-target k8s`", DeployError,
         "unknown target; known: dynamo, llm-d-helm, llm-d-kustomize",
         lambda s: GeneratorOptions.create(target="k8s")),
    Case("deploy-unknown-dynamo-version", "`--dynamo-version 9.9`", DeployError,
         "unknown Dynamo release; known: 1.3.0",
         lambda s: GeneratorOptions.create(dynamo_version="9.9")),
    Case("deploy-unknown-set-key", "`--set Foo.bar=1`", DeployError,
         "--set Foo.bar: unknown key; known keys: rule",
         lambda s: GeneratorOptions.create(sets=["Foo.bar=1"])),
    Case("deploy-namespace-not-dns-label", "`--namespace Bad_NS`", DeployError,
         "is not a DNS-1123 label",
         lambda s: GeneratorOptions.create(namespace="Bad_NS")),
    Case("deploy-save-dir-is-a-file", "`--save-dir` naming an existing file", DeployError,
         "is a file, not a folder",
         lambda s: _save_dir_file(s)),
    Case("deploy-target-cannot-express", "`--deployment-target llm-d-helm` with `-b trtllm`",
         DeployError, "llm-d has no helm template for trtllm",
         lambda s: check_target_backend("llm-d-helm", "trtllm")),
    Case("support-foreign-systems-folder", "`support_matrix` on a folder whose YAML files are not system descriptions",
         ValueError, "holds no readable system description",
         lambda s: _support(models=["Qwen/Qwen3-8B"], systems_path=_foreign_systems(s))),
    Case("calibration-file-not-utf8", "`load_calibration` of a binary file (a bare `UnicodeDecodeError`, no file named)",
         ValueError, "not UTF-8 text (byte 128",
         lambda s: _calibration_bytes(s, bytes(range(256)))),
    Case("sweep-prefix-covers-isl", "`aic.serving_sweep.sweep` with `prefix=isl` (\"no feasible configuration\")",
         ValueError, "prefix must be less than isl",
         lambda s: _sweep(prefix=1000)),
    Case("sweep-native-request-nan", "`_aic.serving_sweep` with `\"ttft\": NaN` in the request JSON (no field named)",
         ValueError, "invalid sweep request JSON: field ttft: expected value",
         lambda s: _aic.serving_sweep('{"total_gpus": 1, "isl": 1000, "osl": 100, "ttft": NaN, '
                                      '"tpot": 30.0, "agg": []}', str(SHIPPED_SYSTEMS))),
    Case("import-partial", "`import_data` from a source whose system files include a symbolic link (skipped, exit 0)",
         PartialImportError, "1 entry cannot be imported (systems/link.yaml: a symbolic link",
         lambda s: _partial_import(s)),
    Case("rows-partially-unusable", "rows of which one has an infinite measurement (left out, exit 0)",
         PartialResultError, "1 of 2 rows have measurements that cannot score an estimate (row 2 (id r1)",
         lambda s: _check_rows(s, ["80", "inf"])),
]


def _written(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("x", encoding="utf-8")
    return path


def _export(scratch: Scratch, out, *, model="Qwen/Qwen3-32B", isl=512, osl=64, **layout):
    from aic.serving.plan import Workload
    from aic.serving.replay import layout_deployment

    deployment = layout_deployment(model, "h200_sxm", "vllm", **{"tp_size": 2, **layout})
    return export_dynamo(deployment, Workload(isl=isl, osl=osl), out)


def _save_dir_file(scratch: Scratch):
    from aic.deploy.writer import check_save_dir

    path = scratch.root / "afile"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("")
    return check_save_dir(str(path))


def _foreign_systems(scratch: Scratch) -> str:
    (scratch.root / "notes.yaml").write_text("title: not a system\n", encoding="utf-8")
    return str(scratch.root)


def _calibration_bytes(scratch: Scratch, content: bytes):
    from aic.serving import load_calibration

    path = scratch.root / "constants.json"
    path.write_bytes(content)
    return load_calibration(path)


def _partial_import(scratch: Scratch):
    from aic.data_import import import_data

    systems = scratch.root / "src" / "systems"
    systems.mkdir(parents=True)
    (scratch.root / "src" / "model_configs").mkdir()
    (systems / "x1.yaml").write_text("gpu: {}\n", encoding="utf-8")
    (systems / "link.yaml").symlink_to(systems / "x1.yaml")
    return import_data(scratch.root / "src", scratch.root / "dest")


def _check_rows(scratch: Scratch, ttfts: list[str]):
    from aic.accuracy.scoring import check_rows_usable, load_rows

    path = scratch.root / "rows.csv"
    path.write_text(_rows_text([_row(id=f"r{i}", silicon_ttft_ms=t) for i, t in enumerate(ttfts)]),
                    encoding="utf-8")
    return check_rows_usable(load_rows(path), path)


def _binary_config(scratch: Scratch) -> str:
    folder = scratch.root / "model"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_bytes(bytes(range(256)))
    return str(folder)


def _sweep(**kwargs):
    from aic.serving.sweep import sweep

    return sweep("Qwen/Qwen3-8B", 1, "h100_sxm", "vllm", isl=1000, osl=100, **kwargs)


def _kv_cache(**kwargs):
    from aic import estimate_kv_cache

    return estimate_kv_cache("Qwen/Qwen3-8B", "h200_sxm", "vllm", **kwargs)


def _calibration_file(scratch: Scratch, **group):
    from aic.serving import load_calibration

    constants = {"tpot_scale": 1.0, "tpot_overhead_ms": 0.0, "ttft_scale": 1.0, "ttft_queue": 0.0,
                 "ttft_overhead_ms": 0.0, **group}
    path = scratch.root / "constants.json"
    path.write_text(json.dumps({"version": 1, "groups": {"*/*/*": constants}}), encoding="utf-8")
    return load_calibration(path)


_ROW_HEADER = ["id", "model_path", "system", "backend", "mode", "isl", "osl", "silicon_ttft_ms",
               "silicon_tpot_ms"]


def _rows_text(rows: list[dict], header=_ROW_HEADER) -> str:
    lines = [",".join(header)] + [",".join(str(r.get(c, "")) for c in header) for r in rows]
    return "\n".join(lines) + "\n"


def _row(**changes) -> dict:
    row = {"id": "r1", "model_path": "Qwen/Qwen3-8B", "system": "h200_sxm", "backend": "vllm",
           "mode": "agg", "isl": 1024, "osl": 128, "silicon_ttft_ms": 80.0, "silicon_tpot_ms": 9.5}
    row.update(changes)
    return row


def _rows(scratch: Scratch, *, drop=None, encoding="utf-8", raw=None, short=False, **changes):
    from aic.accuracy.scoring import load_rows

    header = [c for c in _ROW_HEADER if c != drop]
    text = raw if raw is not None else _rows_text([_row(**changes)], header)
    if short:
        text = text.rsplit(",", 1)[0] + "\n"
    path = scratch.root / "rows.csv"
    path.write_bytes(text.encode(encoding))
    return load_rows(path)


def _fit_rows_with(scratch: Scratch, ttfts: list[str]):
    from aic.accuracy import calibration_fit

    rows = [_row(id=f"r{i}", silicon_ttft_ms=t) for i, t in enumerate(ttfts)]
    path = scratch.root / "rows.csv"
    path.write_text(_rows_text(rows), encoding="utf-8")
    from aic.accuracy.scoring import load_rows

    return calibration_fit.fit_rows(load_rows(path))


def _parity_rtol(rtol):
    from aic.parity.runner import run_parity

    return run_parity([], rtol=rtol)


def _golden_file(scratch: Scratch, doc: dict):
    from aic.parity.runner import load_cases

    path = scratch.root / "bad.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    return load_cases(path)


def _support(**kwargs):
    from aic.serving.support import support_matrix

    return support_matrix(systems=None if "systems_path" in kwargs else ["h200_sxm"],
                          backends=["vllm"], **kwargs)


def _nas_heads_in_group_zero(config: dict) -> None:
    """Every attention block of a Nemotron-NAS ``block_configs`` gets ``n_heads_in_group: 0``."""
    for block in config["block_configs"]:
        if block["attention"].get("n_heads_in_group"):
            block["attention"]["n_heads_in_group"] = 0


def _spec_json_with(index: int, field: str, value) -> bytes:
    """The Qwen3-8B spec as JSON with one field of context op ``index`` replaced."""
    spec = json.loads(_engine().spec_json())
    (op,) = spec["context_ops"][index].values()
    op[field] = value
    return json.dumps(spec).encode()


def _scratch(tmp_path: Path) -> Scratch:
    return Scratch(tmp_path)


def _raise(case: Case, tmp_path: Path) -> BaseException:
    try:
        result = case.run(_scratch(tmp_path))
    except BaseException as exc:  # noqa: BLE001 - the point is to see what comes out
        return exc
    raise AssertionError(f"{case.id}: the bad input was accepted and returned {result!r}")


@pytest.mark.engine
@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_bad_input_gives_its_exception(case: Case, tmp_path: Path):
    exc = _raise(case, tmp_path)
    assert type(exc) is case.exception, f"{case.id}: expected {case.exception_name}, got {type(exc).__name__}: {exc}"
    assert case.fragment in str(exc), f"{case.id}: message lacks {case.fragment!r}: {exc}"


def test_case_ids_are_unique_and_enough():
    ids = [c.id for c in CASES]
    assert len(ids) == len(set(ids))
    assert len(ids) >= 30


# ---------------------------------------------------------------------------------- the doc


def _doc_message(message: str, tmp_path: Path) -> str:
    text = message.replace(str(tmp_path), "<tmp>").replace(str(REPO), "<repo>")
    text = " ".join(text.split())
    if len(text) > MAX_MESSAGE_CHARS:
        text = text[: MAX_MESSAGE_CHARS - 1] + "…"
    return text.replace("|", "\\|")


def _render(tmp_path_factory) -> str:
    lines = ["| id | bad input | Python exception | message |", "|---|---|---|---|"]
    for case in CASES:
        tmp = tmp_path_factory.mktemp(case.id)
        exc = _raise(case, tmp)
        assert type(exc) is case.exception, f"{case.id}: fix the failing case first: {exc!r}"
        module = type(exc).__module__
        name = case.exception_name if module == "builtins" else f"{module}.{case.exception_name}"
        input_text = case.input.replace("|", "\\|")
        lines.append(f"| `{case.id}` | {input_text} | `{name}` | {_doc_message(str(exc), tmp)} |")
    return "\n".join(lines) + "\n"


def _section(doc: str, name: str) -> tuple[int, int]:
    begin = f"<!-- BEGIN catalogue:{name} -->\n"
    end = f"<!-- END catalogue:{name} -->"
    start = doc.index(begin) + len(begin)
    return start, doc.index(end, start)


@pytest.mark.engine
def test_doc_lists_exactly_these_cases(tmp_path_factory):
    rendered = _render(tmp_path_factory)
    doc = ERRORS_DOC.read_text(encoding="utf-8")
    start, stop = _section(doc, "python")
    if doc[start:stop] == rendered:
        return
    if os.environ.get("AIC_BLESS") == "1":
        ERRORS_DOC.write_text(doc[:start] + rendered + doc[stop:], encoding="utf-8")
        return
    current = doc[start:stop].splitlines()
    fresh = rendered.splitlines()
    stale = [line for line in current if line not in fresh]
    missing = [line for line in fresh if line not in current]
    pytest.fail(
        "docs/errors.md section `python` is out of date with the catalogue cases.\n"
        "rows in the doc but not produced by the tests:\n" + "\n".join(stale) + "\n"
        "rows the tests produce but the doc lacks:\n" + "\n".join(missing) + "\n"
        "Regenerate with: AIC_BLESS=1 pytest tests/python/test_error_catalogue.py"
    )


def test_doc_ids_match_no_other_language():
    doc = ERRORS_DOC.read_text(encoding="utf-8")
    ids = []
    for name in ("rust", "python", "c"):
        start, stop = _section(doc, name)
        ids += re.findall(r"^\| `([^`]+)` \|", doc[start:stop], flags=re.M)
    assert len(ids) == len(set(ids)), "an id appears twice in the docs/errors.md catalogue"
