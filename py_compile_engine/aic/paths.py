"""Locating the shipped data: system descriptions + perf tables, and Hugging Face model configs.

Search order for the systems root (the folder holding ``<system>.yaml`` and ``data/``):

1. an explicit argument (``systems_path=...`` / ``--systems-path``),
2. the environment variable ``AIC_SYSTEMS_PATH``,
3. ``aic/data/systems`` inside the installed package (wheel layout),
4. ``<repo>/data/systems`` when running from a source checkout.

Model configs follow the same order with ``AIC_MODEL_CONFIGS_PATH``, ``aic/data/model_configs`` and
``<repo>/data/model_configs``. Nothing here is an absolute machine path: every default is derived
from the location of this file.
"""

from __future__ import annotations

import os
from pathlib import Path

SYSTEMS_ENV = "AIC_SYSTEMS_PATH"
MODEL_CONFIGS_ENV = "AIC_MODEL_CONFIGS_PATH"

#: YAML files in the systems root that describe data policy rather than a system.
NON_SYSTEM_YAMLS = frozenset(
    {"attention_lane_defaults", "perf_data_reuse_manifest", "query_versions"}
)

_PACKAGE_DIR = Path(__file__).resolve().parent


def package_dir() -> Path:
    """The ``aic`` package folder."""
    return _PACKAGE_DIR


def repo_root() -> Path | None:
    """The source checkout holding this package (``<repo>/py_compile_engine/aic``), if any.

    Recognised by the repo-level ``data/`` folder or ``Cargo.toml`` next to ``py_compile_engine``.
    """
    candidate = _PACKAGE_DIR.parent.parent
    if (candidate / "py_compile_engine").is_dir() and (
        (candidate / "data").is_dir() or (candidate / "Cargo.toml").is_file()
    ):
        return candidate
    return None


def repo_data_dir() -> Path | None:
    """``<repo>/data`` of the source checkout, if running from one."""
    root = repo_root()
    return None if root is None else root / "data"


def _resolve(explicit: str | os.PathLike | None, env: str, leaf: str) -> Path:
    if explicit is not None and str(explicit) != "":
        return Path(explicit)
    from_env = os.environ.get(env)
    if from_env:
        return Path(from_env)
    packaged = _PACKAGE_DIR / "data" / leaf
    if packaged.is_dir():
        return packaged
    data = repo_data_dir()
    if data is not None and (data / leaf).is_dir():
        return data / leaf
    raise ValueError(
        f"cannot find the shipped {leaf.replace('_', ' ')}: pass an explicit path, set {env}, "
        f"or install the aic wheel (which carries aic/data/{leaf})"
    )


def systems_path(explicit: str | os.PathLike | None = None) -> Path:
    """The systems root to use (see the module docstring for the search order)."""
    return _resolve(explicit, SYSTEMS_ENV, "systems")


def model_configs_path(explicit: str | os.PathLike | None = None) -> Path:
    """The folder of ``<org>--<name>_config.json`` files to use."""
    return _resolve(explicit, MODEL_CONFIGS_ENV, "model_configs")


def list_systems(root: str | os.PathLike) -> list[str]:
    """Names of the systems described under ``root`` (``<name>.yaml`` with a ``gpu`` section)."""
    root = Path(root)
    names = []
    if not root.is_dir():
        return names
    for path in sorted(root.glob("*.yaml")):
        if path.stem in NON_SYSTEM_YAMLS:
            continue
        try:
            import yaml

            with open(path, encoding="utf-8") as fh:
                doc = yaml.safe_load(fh)
        except Exception:  # an unreadable YAML is not a system
            continue
        if isinstance(doc, dict) and isinstance(doc.get("gpu"), dict):
            names.append(path.stem)
    return names


def shipped_model_ids(root: str | os.PathLike) -> list[str]:
    """HF ids (``org/name``) of the configs shipped under ``root``."""
    root = Path(root)
    ids = []
    if not root.is_dir():
        return ids
    for path in sorted(root.glob("*_config.json")):
        name = path.name[: -len("_config.json")]
        if name.endswith("_hf_quant"):
            continue
        if "--" not in name:
            continue
        org, _, model = name.partition("--")
        ids.append(f"{org}/{model}")
    return ids
