"""Locating the shipped data: system descriptions + perf tables, and Hugging Face model configs.

Search order for the systems root (the folder holding ``<system>.yaml`` and ``data/``):

1. an explicit argument (``systems_path=...`` / ``--systems-path``),
2. the environment variable ``AIC_SYSTEMS_PATH``,
3. ``aic/data/systems`` inside the installed package (wheel layout),
4. ``<repo>/data/systems`` when running from a source checkout.

Model configs follow the same order with ``AIC_MODEL_CONFIGS_PATH``, ``aic/data/model_configs`` and
``<repo>/data/model_configs``. Nothing here is an absolute machine path: every default is derived
from the location of this file.

The lookups work on strings (``os.path``): every compile and sweep resolves the roots, and
``pathlib`` (with ``urllib.parse`` and ``ipaddress`` behind it) costs a short sweep a few per
cent of its process. The public ``*_path`` functions hand out ``pathlib.Path`` objects; the
``*_dir`` ones the same folders as strings.
"""

from __future__ import annotations

import os

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing
if TYPE_CHECKING:
    from pathlib import Path

SYSTEMS_ENV = "AIC_SYSTEMS_PATH"
MODEL_CONFIGS_ENV = "AIC_MODEL_CONFIGS_PATH"

#: YAML files in the systems root that describe data policy rather than a system.
NON_SYSTEM_YAMLS = frozenset(
    {"attention_lane_defaults", "perf_data_reuse_manifest", "query_versions"}
)

_PACKAGE_DIR = os.path.dirname(os.path.realpath(__file__))


def _path(text: str) -> Path:
    from pathlib import Path

    return Path(text)


def package_dir() -> Path:
    """The ``aic`` package folder."""
    return _path(_PACKAGE_DIR)


def _repo_root() -> str | None:
    candidate = os.path.dirname(os.path.dirname(_PACKAGE_DIR))
    if os.path.isdir(os.path.join(candidate, "py_compile_engine")) and (
        os.path.isdir(os.path.join(candidate, "data"))
        or os.path.isfile(os.path.join(candidate, "Cargo.toml"))
    ):
        return candidate
    return None


def repo_root() -> Path | None:
    """The source checkout holding this package (``<repo>/py_compile_engine/aic``), if any.

    Recognised by the repo-level ``data/`` folder or ``Cargo.toml`` next to ``py_compile_engine``.
    """
    root = _repo_root()
    return None if root is None else _path(root)


def repo_data_dir() -> Path | None:
    """``<repo>/data`` of the source checkout, if running from one."""
    root = _repo_root()
    return None if root is None else _path(os.path.join(root, "data"))


def _resolve(explicit: str | os.PathLike | None, env: str, leaf: str) -> str:
    if explicit is not None and str(explicit) != "":
        return os.fspath(explicit)
    from_env = os.environ.get(env)
    if from_env:
        return from_env
    packaged = os.path.join(_PACKAGE_DIR, "data", leaf)
    if os.path.isdir(packaged):
        return packaged
    root = _repo_root()
    if root is not None and os.path.isdir(os.path.join(root, "data", leaf)):
        return os.path.join(root, "data", leaf)
    raise ValueError(
        f"cannot find the shipped {leaf.replace('_', ' ')}: pass an explicit path, set {env}, "
        f"or install the aic wheel (which carries aic/data/{leaf})"
    )


def systems_dir(explicit: str | os.PathLike | None = None) -> str:
    """The systems root to use (see the module docstring for the search order), as a string."""
    return _resolve(explicit, SYSTEMS_ENV, "systems")


def systems_path(explicit: str | os.PathLike | None = None) -> Path:
    """The systems root to use (see the module docstring for the search order)."""
    return _path(systems_dir(explicit))


def model_configs_dir(explicit: str | os.PathLike | None = None) -> str:
    """The folder of ``<org>--<name>_config.json`` files to use, as a string."""
    return _resolve(explicit, MODEL_CONFIGS_ENV, "model_configs")


def model_configs_path(explicit: str | os.PathLike | None = None) -> Path:
    """The folder of ``<org>--<name>_config.json`` files to use."""
    return _path(model_configs_dir(explicit))


def holds_system_files(root: str | os.PathLike) -> bool:
    """Whether ``root`` holds at least one ``<system>.yaml`` (any YAML but the shared
    :data:`NON_SYSTEM_YAMLS`): a cheap test, one folder listing, that tells a systems folder
    from an empty or foreign one (the data folder above it, a model-config folder)."""
    try:
        with os.scandir(os.fspath(root)) as entries:
            return any(e.name.endswith(".yaml") and e.name[:-5] not in NON_SYSTEM_YAMLS
                       for e in entries)
    except OSError:
        return False


def list_systems(root: str | os.PathLike) -> list[str]:
    """Names of the systems described under ``root`` (``<name>.yaml`` with a ``gpu`` section)."""
    root = _path(os.fspath(root))
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
    root = _path(os.fspath(root))
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
