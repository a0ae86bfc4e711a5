"""The serving level (spec 50): what a deployment delivers, not one engine step.

``deployment`` answers one deployment (:func:`estimate`), ``sweep`` searches parallelism, batch
and worker counts for a GPU budget, ``support`` probes which model x system x backend cells
answer. The public names of ``deployment`` are re-exported here, so ``aic.serving.estimate``
is the documented entry point. ``plan`` holds the two values every serving path shares:
:class:`Deployment` (roles, each with its system, backend, version, layout, quant modes,
workers and batch) and :class:`Workload` (lengths, prefix, load, targets).
"""

from __future__ import annotations

from .deployment import (
    BACKENDS,
    MODES,
    NoFeasibleConfigError,
    calibration_path,
    estimate,
    estimate_deployment,
    load_calibration,
)

#: The plan values, imported on first use (the sweep's import path stays off ``dataclasses``).
_PLAN_NAMES = ("Deployment", "Parallelism", "PlanValueError", "QuantModes", "Role", "Workload")


def __getattr__(name: str):
    if name in _PLAN_NAMES:
        from . import plan

        value = getattr(plan, name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

__all__ = ["BACKENDS", "MODES", "Deployment", "NoFeasibleConfigError", "Parallelism",
           "PlanValueError", "QuantModes", "Role", "Workload", "calibration_path", "estimate",
           "estimate_deployment", "load_calibration"]
