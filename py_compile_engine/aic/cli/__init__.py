"""``aic-compile``: the command line."""

from __future__ import annotations

from .engine import main

__all__ = ["main"]
