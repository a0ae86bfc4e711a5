"""Compiling a model: a Hugging Face ``config.json`` (plus system, backend and deployment
options) becomes an EngineSpec, the context / generation op lists the native engine prices.

``compile`` is the entry point (``compile_engine``, ``compile_report``); ``hf_config`` reads and
normalizes the config, ``families/`` holds one op-list builder per model family, ``quant``,
``parallel`` and ``config_checks`` resolve and check the deployment, ``ops`` and
``spec_builder`` assemble the spec, ``memory`` derives the KV-cache model facts and
``forwarding`` shares keyword signatures between entry points.
"""
