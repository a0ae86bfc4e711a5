"""``aic.serving_sweep.sweep``, the path README.md documents for the deployment sweep; the
module is :mod:`aic.serving.sweep`."""

from __future__ import annotations

from .serving.sweep import sweep

__all__ = ["sweep"]
