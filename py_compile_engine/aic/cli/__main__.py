"""``python -m aic.cli``: the ``aic-compile`` command line."""

from . import main

main()
