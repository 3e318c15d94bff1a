"""Cases from merged work: a validated, locked case from one fix commit of a git repository.

:func:`new_case` is the library side of ``harness cases new ID --from-git REPO --commit SHA``
(see ``docs/cases-from-git.md``).
"""

from harness.authoring._derive import Derived
from harness.authoring._new import NewCaseOptions, NewCaseResult, batch_case_id, new_case
from harness.authoring._split import DEFAULT_TEST_GLOBS

__all__ = [
    "DEFAULT_TEST_GLOBS",
    "Derived",
    "NewCaseOptions",
    "NewCaseResult",
    "batch_case_id",
    "new_case",
]
