"""The one frozen base of the library's pydantic models.

Immutable (``frozen``), unknown fields refused (``extra="forbid"``), each field documented
by the docstring under it (``use_attribute_docstrings``). Models that need one more
setting subclass it with just that setting.
"""

from pydantic import BaseModel, ConfigDict

__all__ = ["Frozen", "FrozenInput"]


class Frozen(BaseModel):
    """Base of the frozen models: immutable, unknown fields refused, field docstrings kept."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)


class FrozenInput(Frozen):
    """Base of the models read from a user's files: also refuses NaN and infinities."""

    model_config = ConfigDict(allow_inf_nan=False)
