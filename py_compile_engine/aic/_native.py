"""Access to the native module ``aic._aic`` with a helpful error when it is not built. Kept
apart from the compile front end so that loading a precompiled spec imports nothing else."""

from __future__ import annotations


def native():
    """The native module ``aic._aic`` (raises ``ImportError`` with a hint when it is not built)."""
    try:
        from . import _aic  # type: ignore[attr-defined]
    except ImportError as exc:
        raise ImportError(
            "the native module aic._aic is not available (build it with `pip install -e .` or "
            f"`maturin develop` at the repository root): {exc}"
        ) from exc
    return _aic
