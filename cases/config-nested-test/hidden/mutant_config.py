"""Small INI-like config files with ``${key}`` / ``${section.key}`` interpolation.

::

    name = fieldkit          # keys before any section live in section ""
    [paths]
    root = /srv
    data = ${root}/data      # same section first, then section ""
    logs = ${paths.root}/log # qualified reference
"""

from __future__ import annotations

import re
from typing import Dict, List, Optional, Tuple

_REF = re.compile(r"\$\{([A-Za-z0-9_.-]+)\}")
_SECTION = re.compile(r"^\[([A-Za-z0-9_.-]*)\]$")


class ConfigError(ValueError):
    """A malformed line, an undefined reference or a reference cycle."""

    def __init__(self, message: str, *, line: Optional[int] = None):
        self.line = line
        super().__init__(f"line {line}: {message}" if line is not None else message)


Raw = Dict[str, Dict[str, Tuple[str, int]]]


def _strip_comment(line: str) -> str:
    # A '#' starts a comment at the beginning of a line or after whitespace.
    match = re.search(r"(^|\s)#", line)
    return line[: match.start()] if match else line


def _read(text: str) -> Raw:
    raw: Raw = {"": {}}
    section = ""
    for number, line in enumerate(text.splitlines(), start=1):
        line = _strip_comment(line).strip()
        if not line:
            continue
        header = _SECTION.match(line)
        if header:
            section = header.group(1)
            raw.setdefault(section, {})
            continue
        key, sep, value = line.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ConfigError(f"expected 'key = value', got {line!r}", line=number)
        if key in raw[section]:
            raise ConfigError(f"key {key!r} is set twice in section [{section}]", line=number)
        raw[section][key] = (value.strip(), number)
    return raw


def _lookup(raw: Raw, section: str, ref: str) -> Optional[Tuple[str, str]]:
    if "." in ref:
        sec, _, key = ref.rpartition(".")
        if sec in raw and key in raw[sec]:
            return sec, key
        return None
    for sec in (section, ""):
        if ref in raw.get(sec, {}):
            return sec, ref
    return None


def _resolve(raw: Raw, section: str, key: str, stack: List[str], cache: Dict[Tuple[str, str], str]) -> str:
    if (section, key) in cache:
        return cache[(section, key)]
    value, line = raw[section][key]
    name = f"{section}.{key}" if section else key
    if name in stack:
        cycle = " -> ".join([*stack[stack.index(name):], name])
        raise ConfigError(f"reference cycle: {cycle}", line=line)
    stack.append(name)

    def substitute(match: "re.Match[str]") -> str:
        found = _lookup(raw, section, match.group(1))
        if found is None:
            raise ConfigError(f"undefined reference ${{{match.group(1)}}} in {name!r}", line=line)
        _resolve(raw, found[0], found[1], stack, cache)  # still checked: cycles, undefined
        return raw[found[0]][found[1]][0]  # MUTANT: substitutes the raw value, one level only

    result = _REF.sub(substitute, value)
    stack.pop()
    cache[(section, key)] = result
    return result


def parse_config(text: str) -> Dict[str, Dict[str, str]]:
    """Parse ``text`` into ``{section: {key: value}}`` with every reference resolved.

    Raises:
        ConfigError: naming the line of a malformed entry, undefined reference or cycle.
    """
    raw = _read(text)
    cache: Dict[Tuple[str, str], str] = {}
    return {
        section: {key: _resolve(raw, section, key, [], cache) for key in keys}
        for section, keys in raw.items()
    }
