"""The vendored data under data/ is exactly what data/SHA256SUMS lists, and the installed
package carries the same files under aic/data/."""

from __future__ import annotations

import hashlib
import importlib.util
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "data"
SUMS = DATA / "SHA256SUMS"
CHECKED_TREES = ("systems", "model_configs")


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _listed() -> dict[str, str]:
    """``relative path -> sha256`` from SHA256SUMS (``<hex>  <path>`` per line)."""
    entries: dict[str, str] = {}
    for number, line in enumerate(SUMS.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        digest, sep, rel = line.partition("  ")
        assert sep and len(digest) == 64, f"SHA256SUMS line {number} is malformed: {line!r}"
        rel = rel.lstrip("*")
        assert rel not in entries, f"SHA256SUMS lists {rel} twice"
        entries[rel] = digest.lower()
    return entries


def _files_under(root: Path) -> set[str]:
    found = set()
    for tree in CHECKED_TREES:
        for path in (root / tree).rglob("*"):
            if path.is_file():
                found.add(path.relative_to(root).as_posix())
    return found


def test_sums_file_is_well_formed():
    entries = _listed()
    assert len(entries) > 500, "SHA256SUMS looks truncated"
    for rel in entries:
        assert not rel.startswith("/") and ".." not in Path(rel).parts, rel
        assert rel.split("/", 1)[0] in CHECKED_TREES, f"unexpected tree in SHA256SUMS: {rel}"


def test_every_listed_file_matches_its_sum():
    mismatched, missing = [], []
    for rel, digest in sorted(_listed().items()):
        path = DATA / rel
        if not path.is_file():
            missing.append(rel)
        elif _sha256(path) != digest:
            mismatched.append(rel)
    assert not missing, f"{len(missing)} listed files are missing, e.g. {missing[:5]}"
    assert not mismatched, f"{len(mismatched)} files differ from SHA256SUMS, e.g. {mismatched[:5]}"


def test_no_unlisted_files():
    extra = sorted(_files_under(DATA) - set(_listed()))
    assert not extra, f"files under data/ not in SHA256SUMS: {extra[:10]}"


def test_shipped_systems_present():
    for system in ("h200_sxm", "b200_sxm", "h100_sxm"):
        assert (DATA / "systems" / f"{system}.yaml").is_file()
        assert (DATA / "systems" / "data" / system).is_dir()
    assert (DATA / "NOTICE").is_file()


def test_installed_package_carries_the_same_data():
    """The wheel puts data/systems, data/model_configs and NOTICE under aic/data/; an editable
    install sees the repo's copy through the py_compile_engine/aic/data link."""
    spec = importlib.util.find_spec("aic")
    if spec is None or not spec.submodule_search_locations:
        pytest.fail("the aic package is not installed (run scripts/test-all.sh)")
    package = Path(next(iter(spec.submodule_search_locations)))
    shipped = package / "data"
    assert (shipped / "systems").is_dir(), f"no aic/data/systems in {package}"
    assert (shipped / "model_configs").is_dir(), f"no aic/data/model_configs in {package}"
    assert (shipped / "NOTICE").is_file(), f"no aic/data/NOTICE in {package}"
    listed = _listed()
    assert _files_under(shipped) == set(listed), "installed data differs from SHA256SUMS file list"
    if shipped.resolve() != DATA.resolve():
        bad = [rel for rel, digest in listed.items() if _sha256(shipped / rel) != digest]
        assert not bad, f"installed data differs from SHA256SUMS, e.g. {bad[:5]}"
