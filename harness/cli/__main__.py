"""``python -m harness.cli``: the same command line as the ``harness`` script."""

from harness.cli import main

main()
