"""Front-end exception classes. Every front-end error is a ``ValueError`` subclass."""

from __future__ import annotations


class UnsupportedArchitectureError(ValueError):
    """The model's architecture cannot be compiled by aic.

    ``known_to_reference`` is true when the reference supports the architecture but aic does not
    implement its family yet (as opposed to an architecture nobody supports).
    """

    def __init__(self, message: str, architecture: str, known_to_reference: bool):
        super().__init__(message)
        self.architecture = architecture
        self.known_to_reference = known_to_reference


class HeadDivisibilityError(ValueError):
    """``num_heads % tp_size != 0``. The reference raises ``AssertionError`` with the same text."""

    reference_class = "AssertionError"


class ConfigKeyError(KeyError, ValueError):
    """A key the model's family requires is missing from its config (Gemma 4:
    ``num_key_value_heads``, ``head_dim``). The reference raises ``KeyError('<key>')``; this is
    a ``KeyError`` with the same argument and, like every front-end error, a ``ValueError``."""

    reference_class = "KeyError"


class PartialResultError(ValueError):
    """A command over many inputs (files of a data import, rows of a measured sample, cells of
    the support matrix) could not process some of them: a result without them would look
    complete. :attr:`skipped` lists ``(input, reason)`` per input left out; the caller may
    accept a partial result explicitly (``allow_partial=True``, ``--allow-partial``)."""

    def __init__(self, message: str, skipped: list):
        super().__init__(message)
        self.skipped = list(skipped)
