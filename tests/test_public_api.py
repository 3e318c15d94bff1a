"""The public API: every exported name resolves, and the list is deliberate."""

from __future__ import annotations

import importlib

import pytest

import harness


def test_every_exported_name_resolves_to_its_definition():
    for name in harness.__all__:
        value = getattr(harness, name)
        if name != "__version__":
            assert getattr(importlib.import_module(harness._EXPORTS[name]), name) is value


def test_exports_are_sorted_and_unknown_names_raise():
    assert harness.__all__ == sorted(harness.__all__)
    assert set(harness.__all__) == {*harness._EXPORTS, "__version__"}
    with pytest.raises(AttributeError):
        _ = harness.not_a_thing  # type: ignore[attr-defined]
