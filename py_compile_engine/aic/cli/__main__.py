"""``python -m aic.cli``: the ``aic-compile`` command line."""

import sys

from . import run

sys.exit(run())
