"""YAML files → validated models, with errors that name the file, the line and the field.

This is the one YAML loader of `harness`: ``harness.yaml``, ``case.yaml``, the policy and the
task-set lock all come through :func:`load_yaml`. Before anything is built from a file, a
single pass over its parser events enforces :class:`YamlLimits`: the file's size, how deep
it nests and how many values it holds *after aliases are expanded*. A "billion laughs"
file (a few lines whose aliases expand to 10⁹ values) is refused in milliseconds, because
the pass adds up the size of each anchored node once instead of expanding it; a recursive
alias (``&a [*a]``) is refused too. Every failure is a :class:`~harness.errors.ConfigError`
naming the file (and, where known, the line and the key path).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Hashable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from harness.errors import ConfigError

__all__ = [
    "DEFAULT_LIMITS",
    "YamlLimits",
    "load_model",
    "load_yaml",
    "validation_to_config_error",
]

M = TypeVar("M", bound=BaseModel)


@dataclass(frozen=True)
class YamlLimits:
    """Bounds on one YAML file; beyond any of them the file is refused, not parsed."""

    max_bytes: int = 8 * 1024 * 1024
    """File size. The largest real input, a task-set lock of ~1,000 cases, is ~2.5 MiB."""
    max_depth: int = 64
    """Nesting of mappings and sequences, aliases expanded (real files nest < 10 deep)."""
    max_nodes: int = 500_000
    """Scalars, mappings and sequences after expanding every alias."""


DEFAULT_LIMITS = YamlLimits()

_BaseLoader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _UniqueKeyLoader(_BaseLoader):  # type: ignore[valid-type,misc]
    """SafeLoader that rejects duplicate mapping keys instead of keeping the last one."""


_MERGE_TAG = "tag:yaml.org,2002:merge"


def _construct_mapping(loader: _UniqueKeyLoader, node: yaml.MappingNode) -> dict[Any, Any]:
    seen: dict[Any, Any] = {}
    for key_node, _ in node.value:
        if key_node.tag == _MERGE_TAG:  # `<<: *base` merges are resolved by construct_mapping
            continue
        key = loader.construct_object(key_node)
        if not isinstance(key, Hashable):
            raise yaml.constructor.ConstructorError(
                None, None, "a mapping key must be a plain value", key_node.start_mark
            )
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


# ------------------------------------------------------------------------------ limits


@dataclass
class _Frame:
    """An open mapping or sequence during the event pass."""

    anchor: str | None
    mapping: bool
    size: int = 1
    """Values in this collection so far, itself included, aliases expanded."""
    height: int = 1
    """Levels of nesting below and including this collection, aliases expanded."""
    children: int = 0
    key: Any = None
    """For a mapping: the last scalar key seen (for the key path in messages)."""


@dataclass
class _Shape:
    """What the event pass knows about each anchor, and the collections still open."""

    sizes: dict[str, tuple[int, int]] = field(default_factory=dict)
    """Anchor → (expanded size, expanded height) of the node it names."""
    stack: list[_Frame] = field(default_factory=list)
    total: int = 0
    """Values of the whole document so far, aliases expanded."""


def _key_path(stack: list[_Frame]) -> str | None:
    """Dotted key path of the event being looked at (children of the last frame so far)."""
    parts: list[str] = []
    for depth, frame in enumerate(stack):
        # Ancestors have counted their open child already; the last frame has not.
        position = frame.children - (0 if depth == len(stack) - 1 else 1)
        if frame.mapping:
            if position % 2 == 0 or frame.key is None:  # a key itself: the path ends above
                break
            parts.append(str(frame.key))
        else:
            parts.append(str(position))
    if len(parts) > 8:  # a runaway nesting: the start of the path is enough to find it
        parts = [*parts[:8], "…"]
    return ".".join(parts) or None


def _check_shape(text: str, path: Path, error_cls: type[ConfigError], limits: YamlLimits) -> None:
    """Walk the parser events once; refuse the file before it is built when it is too big.

    Raises:
        ConfigError: too deep, too many values after alias expansion, or a recursive alias.
    """
    shape = _Shape()

    def refuse(message: str, event: yaml.Event) -> None:
        line = event.start_mark.line + 1 if event.start_mark is not None else None
        raise error_cls(message, file=path, line=line, field=_key_path(shape.stack))

    def add(size: int, height: int, event: yaml.Event) -> None:
        """Count a node of ``size`` values and ``height`` levels at the current position."""
        shape.total += size
        if shape.total > limits.max_nodes:
            refuse(
                f"holds more than {limits.max_nodes:,} values once its aliases are expanded "
                "(an alias bomb?); refused before loading",
                event,
            )
        if len(shape.stack) + height > limits.max_depth:
            refuse(f"nests deeper than {limits.max_depth} levels; refused before loading", event)
        if shape.stack:
            parent = shape.stack[-1]
            if parent.mapping and parent.children % 2 == 0:
                parent.key = event.value if isinstance(event, yaml.ScalarEvent) else None
            parent.children += 1
            parent.size += size
            parent.height = max(parent.height, height + 1)

    for event in yaml.parse(text, Loader=_BaseLoader):
        if isinstance(event, yaml.ScalarEvent):
            add(1, 1, event)
            if event.anchor is not None:
                shape.sizes[event.anchor] = (1, 1)
        elif isinstance(event, yaml.AliasEvent):
            if any(f.anchor == event.anchor for f in shape.stack):
                refuse(f"alias *{event.anchor} refers to a node that contains it", event)
            # An undefined alias is left for the composer to report with its position.
            size, height = shape.sizes.get(event.anchor or "", (1, 1))
            add(size, height, event)
        elif isinstance(event, yaml.CollectionStartEvent):
            add(1, 1, event)
            shape.stack.append(
                _Frame(event.anchor, mapping=isinstance(event, yaml.MappingStartEvent))
            )
        elif isinstance(event, yaml.CollectionEndEvent):
            done = shape.stack.pop()
            if done.anchor is not None:
                shape.sizes[done.anchor] = (done.size, done.height)
            if shape.stack:  # the collection itself was counted at its start event
                parent = shape.stack[-1]
                parent.size += done.size - 1
                parent.height = max(parent.height, done.height + 1)


# ------------------------------------------------------------------------------ loading


def _read(path: Path, error_cls: type[ConfigError], limits: YamlLimits) -> str:
    """Read at most ``limits.max_bytes`` of a regular file (never a FIFO or a device)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except FileNotFoundError:
        raise error_cls("file not found", file=path) from None
    except IsADirectoryError:
        raise error_cls("is a folder; expected a YAML file", file=path) from None
    except OSError as exc:
        raise error_cls(f"cannot read file: {exc.strerror or exc}", file=path) from None
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        if stat.S_ISDIR(info.st_mode):
            raise error_cls("is a folder; expected a YAML file", file=path)
        raise error_cls("is not a regular file; expected a YAML file", file=path)
    with os.fdopen(fd, "rb") as fh:
        try:
            data = fh.read(limits.max_bytes + 1)
        except OSError as exc:
            raise error_cls(f"cannot read file: {exc.strerror or exc}", file=path) from None
    if len(data) > limits.max_bytes:
        raise error_cls(
            f"file is larger than {limits.max_bytes:,} bytes; refused before loading", file=path
        )
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise error_cls(f"not UTF-8 text (byte {exc.start}: {exc.reason})", file=path) from None


def _line_index(node: yaml.Node | None, path: tuple[Any, ...] = ()) -> dict[tuple[Any, ...], int]:
    """Map each key path in a composed YAML document to its 1-based line."""
    out: dict[tuple[Any, ...], int] = {}
    if node is None:
        return out
    if isinstance(node, yaml.MappingNode):
        for k, v in node.value:
            key = k.value if isinstance(k, yaml.ScalarNode) else f"<{k.id} key>"
            out[(*path, key)] = k.start_mark.line + 1
            out.update(_line_index(v, (*path, key)))
    elif isinstance(node, yaml.SequenceNode):
        for i, v in enumerate(node.value):
            out[(*path, i)] = v.start_mark.line + 1
            out.update(_line_index(v, (*path, i)))
    return out


def load_yaml(
    path: Path,
    error_cls: type[ConfigError] = ConfigError,
    limits: YamlLimits = DEFAULT_LIMITS,
) -> tuple[Any, dict[tuple[Any, ...], int]]:
    """Parse ``path`` within ``limits`` and return the data plus a key-path → line index.

    Raises:
        ConfigError: the file is missing, unreadable, not a regular file, over a limit, or
            not valid YAML (malformed, duplicate key, unsafe tag, several documents).
    """
    text = _read(path, error_cls, limits)
    try:
        _check_shape(text, path, error_cls, limits)
        loader = _UniqueKeyLoader(text)
        try:
            node = loader.get_single_node()
            lines = _line_index(node)
            data = loader.construct_document(node) if node is not None else None
        finally:
            loader.dispose()
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark else None
        raise error_cls(
            f"malformed YAML: {exc.problem or exc.context}", file=path, line=line
        ) from None
    except yaml.YAMLError as exc:
        raise error_cls(f"malformed YAML: {exc}", file=path) from None
    return data, lines


def _short_repr(value: Any, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


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
        msg = f"{msg} (got {_short_repr(first.get('input'))})"
    if len(errors) > 1:
        msg += f" (and {len(errors) - 1} more problem{'s' if len(errors) > 2 else ''})"
    return error_cls(msg, file=path, field=field, line=line)


_UNION_TAGS = {"folder", "git", "archive", "function-after[_relative_path(), str]"}


def load_model(
    path: Path,
    model: type[M],
    error_cls: type[ConfigError] = ConfigError,
    limits: YamlLimits = DEFAULT_LIMITS,
) -> tuple[M, Any]:
    """Load ``path`` as YAML and validate it into ``model``; return the model and raw data."""
    data, lines = load_yaml(path, error_cls, limits)
    if not isinstance(data, dict):
        raise error_cls("expected a mapping at the top level", file=path, line=1)
    try:
        return model.model_validate(data), data
    except ValidationError as exc:
        raise validation_to_config_error(exc, path, lines, error_cls) from None
