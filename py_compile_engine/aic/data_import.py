"""``aic-compile data import``: re-create the vendored data folder from a source tree.

A source is either an aic-data folder (holding ``systems/`` and ``model_configs/``, optionally
``NOTICE``) or the ``systems/`` folder of an installed reference package (then ``../model_configs``
beside it is used when present). The destination (default: ``<repo>/data``) receives fresh
``systems/`` and ``model_configs/`` trees, ``NOTICE`` when the source has one, and ``SHA256SUMS``
(``<sha256>  <path relative to the destination>`` per line, sorted by path).

Only regular files are copied, each read without following a symbolic link and bounded in size
(:data:`MAX_FILE_BYTES`, :data:`MAX_TOTAL_BYTES`): a system YAML linked to ``/dev/zero`` was
copied without end. Dot-files, ``__pycache__`` folders and Python files are not data and are
passed over. Any other entry that cannot be copied (a symbolic link, a device, FIFO or socket,
an unreadable or oversized file) makes the import partial: the systems it belongs to would not
answer. A partial import raises :class:`PartialImportError` listing every such entry and leaves
the destination as it was, unless the caller accepts it (``allow_partial=True``, ``aic-compile
data import --allow-partial``); then the entries are listed in :attr:`ImportSummary.skipped`.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from . import paths
from .errors import PartialResultError

TREES = ("systems", "model_configs")
_SKIP_DIRS = frozenset({"__pycache__"})
_SKIP_SUFFIXES = (".py", ".pyc", ".pyo")
#: The largest file copied: the shipped data's largest is 3 MB; a larger one is not perf data.
MAX_FILE_BYTES = 256 * 1024 * 1024
#: The most bytes one import copies (the shipped data is 100 MB).
MAX_TOTAL_BYTES = 8 * 1024 * 1024 * 1024
_CHUNK = 1 << 20


class PartialImportError(PartialResultError):
    """Entries of the source that could not be copied; nothing was imported (the destination
    is unchanged). :attr:`skipped` lists ``(path, reason)`` per entry."""


@dataclass
class ImportSummary:
    dest: Path
    files: int
    trees: tuple[str, ...]
    notice: bool
    checksums: Path
    #: ``(path relative to the source tree's parent, reason)`` of every entry not copied:
    #: symbolic links (never followed), devices, FIFOs, sockets, files over the size bound.
    skipped: list = field(default_factory=list)


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


class _Budget:
    """The bytes an import may still copy (:data:`MAX_TOTAL_BYTES`)."""

    def __init__(self, total: int = MAX_TOTAL_BYTES):
        self.left = total


def _copy_regular(src: Path, dest: Path, budget: _Budget) -> str:
    """Copies one regular file without following a symbolic link and without reading past the
    size bounds; returns ``""`` or why the file was not copied (nothing is left behind)."""
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        st = os.lstat(src)
        if stat.S_ISLNK(st.st_mode):
            return "a symbolic link (links are not followed)"
        if not stat.S_ISREG(st.st_mode):
            return "not a regular file (a device, FIFO or socket)"
        fd = os.open(src, flags)
    except OSError as exc:
        return f"cannot be read: {exc.strerror or exc}"
    limit = min(MAX_FILE_BYTES, budget.left)
    copied = 0
    try:
        with os.fdopen(fd, "rb") as fin:
            if not stat.S_ISREG(os.fstat(fin.fileno()).st_mode):
                return "not a regular file (a device, FIFO or socket)"
            with open(dest, "wb") as fout:
                while True:
                    block = fin.read(_CHUNK)
                    if not block:
                        break
                    copied += len(block)
                    if copied > limit:
                        break
                    fout.write(block)
    except OSError as exc:
        dest.unlink(missing_ok=True)
        return f"cannot be copied: {exc.strerror or exc}"
    if copied > limit:
        dest.unlink(missing_ok=True)
        if limit == budget.left and limit < MAX_FILE_BYTES:
            return f"the import already copied its bound of {MAX_TOTAL_BYTES} bytes"
        return f"larger than the {MAX_FILE_BYTES}-byte bound of a data file"
    budget.left -= copied
    return ""


def _copy_tree(src: Path, dest: Path, skipped: list | None = None,
               budget: _Budget | None = None) -> int:
    """Copies the regular files of ``src`` (contents only; no permissions), skipping dot-files
    and Python files silently and symbolic links, special files and oversized files with a
    reason appended to ``skipped``; symbolic links to folders are not followed either."""
    skipped = [] if skipped is None else skipped
    budget = budget or _Budget()
    count = 0
    dest.mkdir(parents=True)
    for root, dirs, files in os.walk(src):
        rel = Path(root).relative_to(src)
        kept = []
        for d in sorted(dirs):
            if _skip(d):
                continue
            if os.path.islink(Path(root) / d):
                skipped.append(((src.name / rel / d).as_posix(),
                                "a symbolic link to a folder (links are not followed)"))
                continue
            kept.append(d)
        dirs[:] = kept
        target_dir = dest / rel
        target_dir.mkdir(parents=True, exist_ok=True)
        for name in sorted(files):
            if _skip(name):
                continue
            reason = _copy_regular(Path(root) / name, target_dir / name, budget)
            if reason:
                skipped.append(((src.name / rel / name).as_posix(), reason))
                continue
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


def import_data(src: str | os.PathLike, dest: str | os.PathLike | None = None, *,
                allow_partial: bool = False) -> ImportSummary:
    """Re-creates ``dest/systems`` and ``dest/model_configs`` from ``src`` (see module docs).

    :class:`PartialImportError` (a ``ValueError``), with the destination unchanged, when an
    entry of the source cannot be copied, unless ``allow_partial``."""
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
    skipped: list = []
    budget = _Budget()
    try:
        for name, folder in trees.items():
            files += _copy_tree(folder, staging / name, skipped, budget)
        notice_copied = False
        if notice is not None:
            reason = _copy_regular(notice, staging / "NOTICE", budget)
            if reason:
                skipped.append(("NOTICE", reason))
            notice_copied = not reason
        if skipped and not allow_partial:
            raise PartialImportError(_partial_message(src, skipped), skipped)
        for name in trees:
            target = dest / name
            if target.exists():
                old = staging / f".old-{name}"
                os.replace(target, old)
            os.replace(staging / name, target)
        if notice_copied:
            os.replace(staging / "NOTICE", dest / "NOTICE")
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    checksums = write_checksums(dest)
    return ImportSummary(dest, files, tuple(trees), notice is not None, checksums, skipped)


def _partial_message(src, skipped: list) -> str:
    """The one-line message of a partial import: how many entries, the first few with their
    reasons, and what to do."""
    shown = "; ".join(f"{path}: {reason}" for path, reason in skipped[:3])
    more = f"; and {len(skipped) - 3} more" if len(skipped) > 3 else ""
    return (f"data source {os.fspath(src)!r}: {len(skipped)} entr{'y' if len(skipped) == 1 else 'ies'} "
            f"cannot be imported ({shown}{more}), so the systems they belong to would not "
            f"answer; nothing was imported. Replace links and special files with regular "
            f"files, or pass --allow-partial (allow_partial=True) to import the rest")
