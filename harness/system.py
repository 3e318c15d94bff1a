"""The system definition: everything that makes a release's system under test, hashed.

:meth:`harness.project.Project.system_definition` builds it from ``harness.yaml``; planning
adds the run's environments and case images; every release record carries it
(``ReleaseRecord.system``) and a promoted baseline keeps it. Its :meth:`~SystemDefinition.digest`
is the run's ``system_digest``, which enters the run id.

The digest is the same, byte for byte, as that of the dict this model replaced, so stored runs
resume and stored baselines compare: the fields are that dict's keys in the order they were
written; an optional field that is None is absent (never written as ``null``); and the parts
copied from the configuration (``agent``, ``components``, ``retry``, ``upstream``) are kept as
the JSON the configuration had when the run was planned, so a record written by an older
harness reads and digests exactly as it was written.
"""

from __future__ import annotations

from typing import Any

from pydantic import SerializerFunctionWrapHandler, model_serializer

from harness.digest import digest_json
from harness.frozen import Frozen

__all__ = ["SystemDefinition"]


class SystemDefinition(Frozen):
    """What defines a release's system: its configuration, with file contents hashed."""

    release: str
    """Name of the release in ``harness.yaml``."""
    agent_code: dict[str, str] | None = None
    """Agent code shipped with harness that the release runs (file → digest); absent in
    records written before it was recorded."""
    agent: dict[str, Any]
    """The release's agent settings as configured (``environment`` left out when unset)."""
    components: dict[str, Any]
    """The release's components as configured (model, prompt version, tools, ...)."""
    orchestration_digests: dict[str, str]
    """Orchestration path → digest of the file or tree."""
    retry: dict[str, Any]
    """The release's retry policy as configured."""
    task_set_digest: str
    """Digest of the task set the system runs over."""
    harness_version: str
    """Version of the harness that runs the agent and the verifier."""
    upstream: dict[str, Any] | None = None
    """The model upstream as configured (the key's variable name, never its value)."""
    agent_files: dict[str, str] | None = None
    """Declared agent file or folder → digest of what the sandbox gets."""
    environments: dict[str, str] | None = None
    """Case id → digest of its prepared environment (cases without one are left out)."""
    agent_environment: str | None = None
    """Digest of the release's agent environment."""
    case_images: dict[str, str] | None = None
    """Case id → its Docker case image (docker backend)."""

    # No return annotation on purpose: pydantic then describes the output by the fields (the
    # JSON schema lists them); with one it would describe any value.
    @model_serializer(mode="wrap")
    def _absent_when_none(self, handler: SerializerFunctionWrapHandler):  # type: ignore[no-untyped-def]
        # An unset optional part is absent from the definition, as it was from the dict.
        return {k: v for k, v in handler(self).items() if v is not None}

    def digest(self) -> str:
        """Return the digest of the definition's canonical JSON (the run's system digest)."""
        return digest_json(self.model_dump(mode="json"))

    def replace(self, **changes: Any) -> SystemDefinition:
        """Return a copy with ``changes`` applied and checked; None makes a part absent.

        Raises:
            ValidationError: an unknown field or a value of the wrong type.
        """
        return SystemDefinition.model_validate({**self.model_dump(mode="json"), **changes})
