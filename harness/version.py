"""The harness version.

Recorded in every system definition, so a change of it is a change of the system under
test.
"""

__all__ = ["__version__"]

__version__ = "0.1.0"
