"""Settings of the installed-wheel smoke suite.

This suite checks the wheel as a user gets it: ``scripts/test-all.sh`` installs the wheel it built
into a fresh virtual environment and runs these tests from a temporary folder outside the source
tree, so nothing can be imported or read from the repository by accident. The golden fixtures are
the one input from the repository; their folder comes from ``--goldens DIR`` or ``AIC_GOLDENS``.
``AIC_SOURCE_TREE`` (optional) names the checkout, which the installed package must not come from.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest


def pytest_addoption(parser):
    parser.addoption("--goldens", default=None,
                     help="folder of the golden *.json files (default: $AIC_GOLDENS)")


@pytest.fixture(scope="session")
def goldens_dir(request) -> Path:
    location = request.config.getoption("--goldens") or os.environ.get("AIC_GOLDENS")
    if not location:
        pytest.fail("no goldens folder: pass --goldens DIR or set AIC_GOLDENS to the repo's goldens/")
    path = Path(location)
    if not path.is_dir():
        pytest.fail(f"goldens folder {location!r} does not exist; pass the repo's goldens/ folder")
    return path


@pytest.fixture(scope="session")
def source_tree() -> Path | None:
    location = os.environ.get("AIC_SOURCE_TREE")
    return Path(location).resolve() if location else None
