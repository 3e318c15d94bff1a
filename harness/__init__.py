"""harness: golden-set release testing for coding agents."""

__version__ = "0.1.0"
