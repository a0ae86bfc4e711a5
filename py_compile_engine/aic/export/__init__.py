"""Exports of aic's estimates in other tools' own file formats, so those tools read aic's numbers
without a code change: :mod:`aic.export.dynamo` (NVIDIA Dynamo's mocker timing profile, engine
config and SLA-planner profile). :mod:`aic.export.npz` writes NumPy archives without numpy and
:mod:`aic.export.grids` chooses where the engine is sampled."""
