"""``aic-compile data import``: re-create the vendored data folder from a source tree.

A source is either an aic-data folder (holding ``systems/`` and ``model_configs/``, optionally
``NOTICE``) or the ``systems/`` folder of an installed reference package (then ``../model_configs``
beside it is used when present). The destination (default: ``<repo>/data``) receives fresh
``systems/`` and ``model_configs/`` trees, ``NOTICE`` when the source has one, and ``SHA256SUMS``
(``<sha256>  <path relative to the destination>`` per line, sorted by path).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from . import paths

TREES = ("systems", "model_configs")
_SKIP_DIRS = frozenset({"__pycache__"})
_SKIP_SUFFIXES = (".py", ".pyc", ".pyo")


@dataclass
class ImportSummary:
    dest: Path
    files: int
    trees: tuple[str, ...]
    notice: bool
    checksums: Path


def _locate(src: Path) -> tuple[dict[str, Path], Path | None]:
    """Maps tree name -> source folder, plus the NOTICE file if any."""
    if not src.is_dir():
        raise ValueError(f"data source {str(src)!r} is not a folder")
    if (src / "systems").is_dir():
        trees = {"systems": src / "systems"}
        if (src / "model_configs").is_dir():
            trees["model_configs"] = src / "model_configs"
        notice = src / "NOTICE"
        return trees, notice if notice.is_file() else None
    if any(src.glob("*.yaml")) and (src / "data").is_dir():
        trees = {"systems": src}
        if (src.parent / "model_configs").is_dir():
            trees["model_configs"] = src.parent / "model_configs"
        for candidate in (src / "NOTICE", src.parent / "NOTICE"):
            if candidate.is_file():
                return trees, candidate
        return trees, None
    raise ValueError(
        f"data source {str(src)!r} is neither an aic-data folder (with systems/ and "
        f"model_configs/) nor a systems/ folder (with <system>.yaml files and data/)"
    )


def _skip(name: str) -> bool:
    return name.startswith(".") or name in _SKIP_DIRS or name.endswith(_SKIP_SUFFIXES)


def _copy_tree(src: Path, dest: Path) -> int:
    """Copies regular files (contents only; no permissions), skipping dot-files and Python files."""
    count = 0
    dest.mkdir(parents=True)
    for root, dirs, files in os.walk(src):
        dirs[:] = sorted(d for d in dirs if not _skip(d))
        rel = Path(root).relative_to(src)
        target_dir = dest / rel
        target_dir.mkdir(parents=True, exist_ok=True)
        for name in sorted(files):
            if _skip(name):
                continue
            shutil.copyfile(Path(root) / name, target_dir / name)
            count += 1
    return count


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def checksum_lines(dest: Path, trees: tuple[str, ...] = TREES) -> list[str]:
    """``<hex>  <relative/path>`` for every file under ``dest/<tree>``, sorted by path."""
    entries = []
    for tree in trees:
        base = dest / tree
        if not base.is_dir():
            continue
        for path in base.rglob("*"):
            if path.is_file():
                entries.append(path.relative_to(dest).as_posix())
    return [f"{sha256_file(dest / rel)}  {rel}" for rel in sorted(entries)]


def write_checksums(dest: Path) -> Path:
    out = dest / "SHA256SUMS"
    text = "".join(line + "\n" for line in checksum_lines(dest))
    tmp = out.with_name(".SHA256SUMS.tmp")
    tmp.write_text(text, encoding="utf-8", newline="\n")
    os.replace(tmp, out)
    return out


def import_data(src: str | os.PathLike, dest: str | os.PathLike | None = None) -> ImportSummary:
    """Re-creates ``dest/systems`` and ``dest/model_configs`` from ``src`` (see module docs)."""
    trees, notice = _locate(Path(src))
    if dest is None:
        data = paths.repo_data_dir()
        if data is None:
            raise ValueError("not running from a source checkout: pass the destination (--dest)")
        dest = data
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".import-", dir=dest))
    files = 0
    try:
        for name, folder in trees.items():
            files += _copy_tree(folder, staging / name)
        for name in trees:
            target = dest / name
            if target.exists():
                old = staging / f".old-{name}"
                os.replace(target, old)
            os.replace(staging / name, target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    if notice is not None:
        shutil.copyfile(notice, dest / "NOTICE")
    checksums = write_checksums(dest)
    return ImportSummary(dest, files, tuple(trees), notice is not None, checksums)
