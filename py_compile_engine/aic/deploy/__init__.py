"""From a pick to a running deployment (spec 60): the result files of a sweep (``--save-dir``)
and the Dynamo / llm-d deployment artifacts of every pick.

One module per concern: :mod:`~aic.deploy.options` (the generator's options, checked),
:mod:`~aic.deploy.params` (a pick as the generator's parameter set) and
:mod:`~aic.deploy.rules` (the derived engine limits, each rule citing its spec section),
:mod:`~aic.deploy.flags` (engine flags), :mod:`~aic.deploy.dynamo` (the DynamoGraphDeployment),
:mod:`~aic.deploy.trtllm_config` (TRT-LLM engine configs), :mod:`~aic.deploy.run_scripts`
(bare-metal launchers), :mod:`~aic.deploy.bench` (aiperf script and Job),
:mod:`~aic.deploy.llmd` (Helm values, Kustomize overlay), :mod:`~aic.deploy.results` (CSVs and
the experiment record), :mod:`~aic.deploy.plot` (the Pareto SVG),
:mod:`~aic.deploy.replay_pick` (``replay.json``), :mod:`~aic.deploy.writer` (the atomic folder
writer) and :mod:`~aic.deploy.save` (the whole tree). The generator only formats: it never
re-estimates.
"""

from .errors import DeployError
from .options import GeneratorOptions
from .save import SaveResult, save_sweep

__all__ = ["DeployError", "GeneratorOptions", "SaveResult", "save_sweep"]
