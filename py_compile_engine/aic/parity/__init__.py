"""Parity with the reference against the golden corpus (``goldens/``).

``runner`` loads the corpus, runs the engine goldens (compile, queries, memory) and reports;
``serving`` and ``surface`` check the serving-level and the engine-surface goldens.
"""
