"""The one error the deployment generator raises: bad generator input (an unknown target or
Dynamo version, a ``--set`` key it does not know, a name that is not a DNS-1123 label, a save
folder that cannot be written, a pick a target cannot express). It is a ``ValueError`` so the
CLI reports it as one ``Error:`` line."""

from __future__ import annotations


class DeployError(ValueError):
    """Generator input that cannot be turned into deployment files; the message names the
    option or field and what would fix it."""
