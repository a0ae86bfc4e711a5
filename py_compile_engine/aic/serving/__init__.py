"""The serving level (spec 50): what a deployment delivers, not one engine step.

``deployment`` answers one deployment (:func:`estimate`), ``sweep`` searches parallelism, batch
and worker counts for a GPU budget, ``support`` probes which model x system x backend cells
answer. The public names of ``deployment`` are re-exported here, so ``aic.serving.estimate``
is the documented entry point.
"""

from __future__ import annotations

from .deployment import (
    BACKENDS,
    MODES,
    NoFeasibleConfigError,
    calibration_path,
    estimate,
    load_calibration,
)

__all__ = ["BACKENDS", "MODES", "NoFeasibleConfigError", "calibration_path", "estimate",
           "load_calibration"]
