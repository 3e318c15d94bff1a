"""YAML files → validated models, with errors that name the file, the line and the field."""

from __future__ import annotations

from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from harness.errors import ConfigError

__all__ = ["load_model", "load_yaml", "validation_to_config_error"]

M = TypeVar("M", bound=BaseModel)


_BaseLoader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _UniqueKeyLoader(_BaseLoader):  # type: ignore[valid-type,misc]
    """SafeLoader that rejects duplicate mapping keys instead of keeping the last one."""


def _construct_mapping(loader: _UniqueKeyLoader, node: yaml.MappingNode) -> dict[Any, Any]:
    seen: dict[Any, Any] = {}
    for key_node, _ in node.value:
        key = loader.construct_object(key_node)
        if key in seen:
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key {key!r}", key_node.start_mark
            )
        seen[key] = True
    mapping: dict[Any, Any] = loader.construct_mapping(node)
    return mapping


_UniqueKeyLoader.add_constructor(
    yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG,
    _construct_mapping,
)


def _line_index(node: yaml.Node | None, path: tuple[Any, ...] = ()) -> dict[tuple[Any, ...], int]:
    """Map each key path in a composed YAML document to its 1-based line."""
    out: dict[tuple[Any, ...], int] = {}
    if node is None:
        return out
    if isinstance(node, yaml.MappingNode):
        for k, v in node.value:
            key = getattr(k, "value", None)
            out[(*path, key)] = k.start_mark.line + 1
            out.update(_line_index(v, (*path, key)))
    elif isinstance(node, yaml.SequenceNode):
        for i, v in enumerate(node.value):
            out[(*path, i)] = v.start_mark.line + 1
            out.update(_line_index(v, (*path, i)))
    return out


def load_yaml(
    path: Path, error_cls: type[ConfigError] = ConfigError
) -> tuple[Any, dict[tuple[Any, ...], int]]:
    """Parse ``path`` and return the data plus a key-path → line index.

    Raises:
        ConfigError: the file is missing, unreadable or not valid YAML.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise error_cls("file not found", file=path) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise error_cls(f"cannot read file: {exc}", file=path) from None
    try:
        data = yaml.load(text, Loader=_UniqueKeyLoader)
        node = yaml.compose(text, Loader=_BaseLoader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark else None
        raise error_cls(
            f"malformed YAML: {exc.problem or exc.context}", file=path, line=line
        ) from None
    except yaml.YAMLError as exc:
        raise error_cls(f"malformed YAML: {exc}", file=path) from None
    return data, _line_index(node)


def validation_to_config_error(
    exc: ValidationError,
    path: Path,
    lines: dict[tuple[Any, ...], int] | None = None,
    error_cls: type[ConfigError] = ConfigError,
) -> ConfigError:
    """Turn the first pydantic error into a ConfigError naming file, line, field, expectation."""
    errors = exc.errors(include_url=False)
    first = errors[0]
    loc = tuple(p for p in first["loc"] if not (isinstance(p, str) and p in _UNION_TAGS))
    field = ".".join(str(p) for p in loc) or None
    line = None
    if lines:
        for n in range(len(loc), 0, -1):
            if loc[:n] in lines:
                line = lines[loc[:n]]
                break
    msg = first["msg"]
    if first["type"] == "extra_forbidden":
        msg = "unknown key (not part of the schema; check the spelling)"
    elif first["type"] == "missing":
        msg = "required field is missing"
    else:
        msg = f"{msg} (got {first.get('input')!r})"
    if len(errors) > 1:
        msg += f" (and {len(errors) - 1} more problem{'s' if len(errors) > 2 else ''})"
    return error_cls(msg, file=path, field=field, line=line)


_UNION_TAGS = {"folder", "git", "archive", "function-after[_relative_path(), str]"}


def load_model(
    path: Path, model: type[M], error_cls: type[ConfigError] = ConfigError
) -> tuple[M, Any]:
    """Load ``path`` as YAML and validate it into ``model``; return the model and raw data."""
    data, lines = load_yaml(path, error_cls)
    if not isinstance(data, dict):
        raise error_cls("expected a mapping at the top level", file=path, line=1)
    try:
        return model.model_validate(data), data
    except ValidationError as exc:
        raise validation_to_config_error(exc, path, lines, error_cls) from None
