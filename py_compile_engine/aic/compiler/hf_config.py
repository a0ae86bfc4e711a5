"""Reading a Hugging Face ``config.json`` into the fields the op builders use (spec 30 §2).

Where the config comes from (spec 30 §2.1, goldens README §5.5):

* ``model_path`` is an existing local folder: ``<dir>/config.json`` (+ optional
  ``<dir>/hf_quant_config.json``);
* ``model_path`` is an existing ``*.json`` file: that file (+ optional ``hf_quant_config.json`` beside it);
* ``model_path`` is an HF id ``org/name`` whose config is shipped: ``<model_configs>/org--name_config.json``
  (+ optional ``org--name_hf_quant_config.json``). This includes ids such as
  ``mistralai/Mixtral-8x7B-v0.1`` that the reference only reaches through the Hub;
* anything else is a ``ValueError`` (we never download).
"""

from __future__ import annotations

import json
import math
import os
import re
import time
from collections import namedtuple

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (see aic.compiler.parallel)
if TYPE_CHECKING:
    from typing import Any

from .. import paths
from ..errors import UnsupportedArchitectureError
from .families import FAMILY_BY_ARCH, NESTED_TEXT_KEY, QK_NORM_ARCHS, supported_architectures

#: Configs the reference does not list among its built-in ids although it ships them; it reaches
#: them through the local-directory path (goldens README §5.5).
SHIPPED_NOT_BUILTIN = frozenset(
    {
        "mistralai/Mixtral-8x7B-v0.1",
        "mistralai/Mixtral-8x22B-v0.1",
        "moonshotai/Kimi-K2-Instruct",
        "Qwen/Qwen3.5-122B-A10B",
    }
)

_HF_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]*/[A-Za-z0-9][A-Za-z0-9_.\-]*$")


class RawConfig(namedtuple("RawConfig", ("config", "hf_quant_config", "source", "location"))):
    """The JSON documents of one model, before parsing: ``config`` (dict), ``hf_quant_config``
    (dict or None), ``source`` (``"builtin"``, ``"shipped-config-as-local-dir"`` or ``"local"``)
    and ``location`` (where it was read from, for messages only). Immutable."""

    __slots__ = ()


#: ``ModelConfig`` fields: the parsed fields of spec 30 §2.3 (ints, ``use_qk_norm`` a bool),
#: then the checkpoint quantization facts of §2.2 step 3 (``quant_algo``,
#: ``kv_cache_quant_algo``: str or None; ``quant_dynamic``: bool or None), then ``raw`` (the
#: config dict), ``config_source`` and ``text``: the dict the fields were parsed from, the
#: flattened text sub-config (``{**text_config, architectures: [arch]}``) for nested
#: architectures, else ``raw``.
_MODEL_FIELDS = (
    "architecture", "family", "num_layers", "hidden_size", "num_heads", "num_kv_heads", "head_dim",
    "intermediate_size", "vocab_size", "max_position_embeddings", "topk", "num_experts",
    "moe_intermediate_size", "use_qk_norm", "v_head_dim", "kv_lora_rank", "qk_rope_head_dim",
    "quant_algo", "kv_cache_quant_algo", "quant_dynamic", "raw", "config_source", "text",
)
#: Defaults from ``topk`` on (``raw`` / ``text``: None becomes a fresh empty dict).
_MODEL_DEFAULTS = (0, 0, 0, False, 0, 0, 0, None, None, None, None, "builtin", None)
#: Fields left out of ``repr`` (whole config documents).
_MODEL_REPR_HIDDEN = frozenset({"raw", "text"})


class ModelConfig(namedtuple("ModelConfig", _MODEL_FIELDS, defaults=_MODEL_DEFAULTS)):
    """The parsed fields of spec 30 §2.3 plus the checkpoint quant facts of §2.2 (the fields
    are listed at ``_MODEL_FIELDS``). Immutable."""

    __slots__ = ()

    def __new__(cls, *args, **kwargs):
        self = super().__new__(cls, *args, **kwargs)
        if self.raw is None or self.text is None:  # a fresh dict each, never a shared default
            self = self._replace(raw={} if self.raw is None else self.raw,
                                 text={} if self.text is None else self.text)
        return self

    def __repr__(self) -> str:
        shown = ", ".join(f"{name}={value!r}" for name, value in zip(self._fields, self)
                          if name not in _MODEL_REPR_HIDDEN)
        return f"ModelConfig({shown})"


def _read_json(path: str, what: str) -> Any:
    try:
        with open(path, encoding="utf-8") as fh:
            return json.load(fh)
    except json.JSONDecodeError as exc:
        raise ValueError(f"malformed JSON in {what} {path}: {exc}") from None
    except UnicodeDecodeError as exc:
        raise ValueError(f"{what} {path} is not UTF-8 text (byte {exc.start}); give the "
                         f"checkpoint's JSON file") from None
    except OSError as exc:
        raise ValueError(f"cannot read {what} {path}: {exc}") from None


def _read_pair(config_file: str, quant_file: str) -> tuple[dict, dict | None]:
    config = _read_json(config_file, "model config")
    if not isinstance(config, dict):
        raise ValueError(
            f"model config {config_file} must be a JSON object, got {type(config).__name__}"
        )
    quant = None
    if os.path.isfile(quant_file):
        quant = _read_json(quant_file, "hf_quant_config")
        if not isinstance(quant, dict):
            raise ValueError(
                f"hf_quant_config {quant_file} must be a JSON object, got {type(quant).__name__}"
            )
    return config, quant


def _looks_like_path(text: str) -> bool:
    return (
        text.endswith(".json")
        or text.startswith((".", "/", "~"))
        or text.count("/") > 1
        or (os.sep != "/" and os.sep in text)
    )


def _locate(model_path: str | os.PathLike, model_configs_path: str | None) -> tuple[str, str, str]:
    """The config file of ``model_path``, its ``hf_quant_config.json`` (which may not exist) and
    the config source (see the module docstring); nothing is read yet. Plain ``os.path`` work:
    ``pathlib`` stays off the compile path (see ``aic.paths``)."""
    if not isinstance(model_path, (str, os.PathLike)) or os.fspath(model_path) == "":
        raise ValueError(
            f"model_path must be an HF id (org/name) or a local folder / config.json path, "
            f"got {model_path!r}"
        )
    text = os.fspath(model_path)
    if os.path.isdir(text):
        config_file = os.path.join(text, "config.json")
        if not os.path.isfile(config_file):
            raise ValueError(f"model folder {text!r} has no config.json")
        return config_file, os.path.join(text, "hf_quant_config.json"), "local"
    if os.path.isfile(text):
        if os.path.splitext(text)[1].lower() != ".json":
            raise ValueError(f"model path {text!r} is a file but not a config.json")
        return text, os.path.join(os.path.dirname(text), "hf_quant_config.json"), "local"
    root = paths.model_configs_dir(model_configs_path)
    if _HF_ID.match(text) and ".." not in text:
        stem = text.replace("/", "--")
        config_file = os.path.join(root, f"{stem}_config.json")
        if os.path.isfile(config_file):
            source = "shipped-config-as-local-dir" if text in SHIPPED_NOT_BUILTIN else "builtin"
            return config_file, os.path.join(root, f"{stem}_hf_quant_config.json"), source
    if _looks_like_path(text):
        raise ValueError(f"missing config.json: no folder or file {text!r} exists")
    shipped = paths.shipped_model_ids(root)
    raise ValueError(
        f"model {text!r} is neither a local folder / config.json path nor a shipped model id "
        f"(aic does not download from the Hub); shipped ids: {', '.join(shipped)}"
    )


def load_raw_config(model_path: str | os.PathLike, model_configs_path: str | None = None) -> RawConfig:
    """Finds and reads the config documents for ``model_path`` (see the module docstring)."""
    config_file, quant_file, source = _locate(model_path, model_configs_path)
    config, quant = _read_pair(config_file, quant_file)
    return RawConfig(config, quant, source, config_file)


# --------------------------------------------------------------------------------------------
# Pre-processing (spec 30 §2.2)
# --------------------------------------------------------------------------------------------

_ALGO_ALIASES = {
    "w4a16_mxfp4": "mxfp4",
    "mixed-precision": "mixed_precision",
    "mixedprecision": "mixed_precision",
}
_KV_ALIASES = {
    "fp8": "fp8",
    "e4m3": "fp8",
    "e5m2": "fp8",
    "fp16": "bfloat16",
    "float16": "bfloat16",
    "bf16": "bfloat16",
    "bfloat16": "bfloat16",
}


def _first_nonempty(*values):
    for value in values:
        if value not in (None, "", [], {}):
            return value
    return None


def _as_dict(value) -> dict:
    return value if isinstance(value, dict) else {}


def preprocess(raw: RawConfig) -> dict:
    """Applies the three pre-processing steps of spec 30 §2.2 and returns the augmented dict."""
    cfg = dict(raw.config)
    # 1. hf_quant_config merge
    if raw.hf_quant_config is not None:
        cfg["hf_quant_config"] = raw.hf_quant_config
        if cfg.get("quantization_config") is None:
            q = _as_dict(raw.hf_quant_config.get("quantization"))
            synth = {}
            algo = q.get("quant_algo") or q.get("quantization_algo")
            if "quant_algo" in q or "quantization_algo" in q:
                synth["quant_method"] = algo.lower() if isinstance(algo, str) else algo
            if "kv_cache_quant_algo" in q:
                kv = q.get("kv_cache_quant_algo")
                synth["kv_cache_quant_method"] = kv.lower() if isinstance(kv, str) else kv
            cfg["quantization_config"] = synth
    # 2. multimodal promotion
    arch = _architecture(cfg)
    text_key = NESTED_TEXT_KEY.get(arch)
    if text_key and cfg.get("quantization_config") is None:
        nested = _as_dict(cfg.get(text_key)).get("quantization_config")
        if nested is not None:
            cfg["quantization_config"] = nested
    # 3. quant-field inference (set-if-absent)
    hq = _as_dict(_as_dict(cfg.get("hf_quant_config")).get("quantization"))
    qc = _as_dict(cfg.get("quantization_config"))
    algo = _first_nonempty(
        hq.get("quant_algo"), qc.get("quant_algo"), qc.get("quant_method"), qc.get("quantization_method")
    )
    if isinstance(algo, str):
        algo = algo.lower()
        algo = _ALGO_ALIASES.get(algo, algo)
        if algo == "fp8" and qc.get("weight_block_size"):
            algo = "fp8_block"
    cfg.setdefault("quant_algo", algo)

    kv = _first_nonempty(
        hq.get("kv_cache_quant_algo"),
        qc.get("kv_cache_quant_algo"),
        qc.get("kv_cache_quant_method"),
        qc.get("kv_cache_dtype"),
    )
    if isinstance(kv, str):
        kv = _KV_ALIASES.get(kv.lower(), kv.lower())
    if kv is None and isinstance(qc.get("kv_cache_scheme"), dict):
        scheme = qc["kv_cache_scheme"]
        kind = str(scheme.get("type", "")).lower()
        bits = scheme.get("num_bits")
        if "fp8" in kind:
            kv = "fp8"
        elif kind == "float" and isinstance(bits, (int, float)):
            if bits <= 8:
                kv = "fp8"
            elif bits >= 16:
                kv = "bfloat16"
    cfg.setdefault("kv_cache_quant_algo", kv)

    dynamic = None
    scheme = qc.get("activation_scheme")
    if scheme == "dynamic":
        dynamic = True
    elif scheme == "static":
        dynamic = False
    else:
        found = []
        for group in _as_dict(qc.get("config_groups")).values():
            for part in ("input_activations", "weights"):
                sub = _as_dict(_as_dict(group).get(part))
                if "dynamic" in sub:
                    found.append(bool(sub["dynamic"]))
        if found:
            dynamic = any(found)
    cfg.setdefault("quant_dynamic", dynamic)
    return cfg


# --------------------------------------------------------------------------------------------
# Field parsing (spec 30 §2.3)
# --------------------------------------------------------------------------------------------


def _architecture(cfg: dict) -> str | None:
    archs = cfg.get("architectures")
    if isinstance(archs, list) and archs and isinstance(archs[0], str):
        return archs[0]
    return None


#: Sizes travel to the engine as unsigned 32-bit integers.
_SIZE_LIMIT = 2**32


def _size(value, key: str, where: str) -> int:
    """A model size from the config: an integer (or integral float) in ``[0, 2**32)``. NaN,
    infinity, booleans, strings and out-of-range numbers are ``ValueError``s naming the field."""
    integral = isinstance(value, int) or (
        isinstance(value, float) and math.isfinite(value) and value.is_integer()
    )
    if isinstance(value, bool) or not integral:
        raise ValueError(f"model config {where}: field {key!r} must be an integer, got {value!r}")
    value = int(value)
    if not 0 <= value < _SIZE_LIMIT:
        raise ValueError(
            f"model config {where}: field {key!r} must be between 0 and {_SIZE_LIMIT - 1}, got "
            f"{value}; fix the value in the config"
        )
    return value


def _positive(value: int, key: str, where: str) -> int:
    if value <= 0:
        raise ValueError(
            f"model config {where}: field {key!r} must be a positive integer, got {value}; a model "
            f"needs at least one"
        )
    return value


def _int_field(cfg: dict, key: str, where: str) -> int:
    """A required size that must be at least 1."""
    if key not in cfg or cfg[key] is None:
        raise ValueError(f"model config {where} lacks the required field {key!r}")
    return _positive(_size(cfg[key], key, where), key, where)


def _opt_int(value, key: str, where: str) -> int:
    if value is None:
        return 0
    return _size(value, key, where)


def parse_model_config(raw: RawConfig) -> ModelConfig:
    """Pre-processes and parses ``raw``; raises ``ValueError`` for architectures the reference
    does not know and for missing required fields. (Whether aic can *build* the family is
    checked by :func:`aic.compiler.families.check_architecture`.)"""
    cfg = preprocess(raw)
    where = raw.location
    arch = _architecture(cfg)
    if arch is None:
        raise ValueError(
            f"model config {where} has no 'architectures' list naming the model class "
            f"(e.g. \"LlamaForCausalLM\")"
        )
    family = FAMILY_BY_ARCH.get(arch)
    if family is None:
        raise UnsupportedArchitectureError(
            f"The model's architecture {arch} is not supported. Supported architectures: "
            f"{', '.join(supported_architectures())}",
            arch,
            known_to_reference=False,
        )
    text_key = NESTED_TEXT_KEY.get(arch)
    if text_key and text_key in cfg:
        # A nested architecture whose config has no text section is read flat (spec 35 §1:
        # the bundled Step-3.7-Flash config names a nested architecture but is flat).
        nested = cfg.get(text_key)
        if not isinstance(nested, dict):
            raise ValueError(f"model config {where}: the {text_key!r} section of {arch} must be "
                             f"a JSON object, got {type(nested).__name__}")
        fields = {**nested, "architectures": [arch]}
    else:
        fields = cfg

    if fields.get("num_hidden_layers") is not None:
        layers = _int_field(fields, "num_hidden_layers", where)
    elif isinstance(fields.get("layers_block_type"), list):
        layers = len(fields["layers_block_type"])
    elif fields.get("hybrid_override_pattern"):
        layers = len(fields["hybrid_override_pattern"])
    else:
        raise ValueError(
            f"model config {where} lacks the layer count (num_hidden_layers, layers_block_type "
            f"or hybrid_override_pattern)"
        )
    _positive(layers, "num_hidden_layers", where)
    hidden = _int_field(fields, "hidden_size", where)
    heads = _int_field(fields, "num_attention_heads", where)
    vocab = _int_field(fields, "vocab_size", where)
    max_pos = _int_field(fields, "max_position_embeddings", where)
    kv_heads = _opt_int(fields.get("num_key_value_heads"), "num_key_value_heads", where)
    inter = _opt_int(fields.get("intermediate_size"), "intermediate_size", where)
    if fields.get("head_dim") is not None:
        head_dim = _opt_int(fields.get("head_dim"), "head_dim", where)
    elif fields.get("attention_head_dim") is not None:
        head_dim = _opt_int(fields.get("attention_head_dim"), "attention_head_dim", where)
    else:
        if heads == 0:
            raise ValueError(f"model config {where}: num_attention_heads must be positive")
        head_dim = hidden // heads
    topk = 0
    for key in ("num_experts_per_tok", "top_k_experts", "moe_top_k"):
        if fields.get(key) is not None:
            topk = _opt_int(fields.get(key), key, where)
            break
    experts = 0
    for key in ("num_local_experts", "n_routed_experts", "moe_num_experts", "num_experts"):
        if fields.get(key):
            experts = _opt_int(fields.get(key), key, where)
            break
    moe_inter = 0
    for key in ("moe_intermediate_size", "intermediate_size"):
        if fields.get(key):
            moe_inter = _opt_int(fields.get(key), key, where)
            break

    return ModelConfig(
        architecture=arch,
        family=family,
        num_layers=layers,
        hidden_size=hidden,
        num_heads=heads,
        num_kv_heads=kv_heads,
        head_dim=head_dim,
        intermediate_size=inter,
        vocab_size=vocab,
        max_position_embeddings=max_pos,
        topk=topk,
        num_experts=experts,
        moe_intermediate_size=moe_inter,
        use_qk_norm=arch in QK_NORM_ARCHS,
        v_head_dim=_opt_int(fields.get("v_head_dim"), "v_head_dim", where),
        kv_lora_rank=_opt_int(fields.get("kv_lora_rank"), "kv_lora_rank", where),
        qk_rope_head_dim=_opt_int(fields.get("qk_rope_head_dim"), "qk_rope_head_dim", where),
        quant_algo=cfg.get("quant_algo"),
        kv_cache_quant_algo=cfg.get("kv_cache_quant_algo"),
        quant_dynamic=cfg.get("quant_dynamic"),
        raw=cfg,
        config_source=raw.source,
        text=fields,
    )


#: Files modified more recently than this many seconds are read anew on every call (a rewrite
#: within the file system's timestamp tick could keep the stamp the same).
_RACY_SECONDS = 2.0
#: Parsed configs of this process: ``(config file, quant file) -> (their stamps, ModelConfig)``.
_PARSED: dict = {}


def _stamp(path: str) -> tuple[int, int] | None:
    """``(mtime_ns, size)`` of a file, None when it does not exist."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_mtime_ns, st.st_size


def load_model_config(model_path: str | os.PathLike, model_configs_path: str | None = None) -> ModelConfig:
    """``load_raw_config`` + ``parse_model_config``.

    A config is read and parsed once per process while its files keep their size and
    modification time (a sweep compiles every layout from the same config): the same immutable
    ``ModelConfig`` is returned, so its ``raw`` / ``text`` dicts must be treated as read-only."""
    config_file, quant_file, source = _locate(model_path, model_configs_path)
    stamps = (_stamp(config_file), _stamp(quant_file))
    key = (config_file, quant_file, source)
    hit = _PARSED.get(key)
    if hit is not None and hit[0] == stamps:
        return hit[1]
    config, quant = _read_pair(config_file, quant_file)
    model = parse_model_config(RawConfig(config, quant, source, config_file))
    newest = max(s[0] for s in stamps if s is not None)
    if stamps[0] is not None and time.time_ns() - newest >= _RACY_SECONDS * 1e9 \
            and stamps == (_stamp(config_file), _stamp(quant_file)):
        _PARSED[key] = (stamps, model)
    return model


def ceil_div(a: int, b: int) -> int:
    """Integer ceiling division (used for per-GPU KV heads)."""
    return -(-a // b)


__all__ = [
    "ModelConfig",
    "RawConfig",
    "load_model_config",
    "load_raw_config",
    "parse_model_config",
    "preprocess",
    "ceil_div",
]
