"""Turn field text into typed values: int, float, bool, date, str, with nullable types."""

from __future__ import annotations

import datetime as dt
import re
from typing import Callable, Dict, Optional

from fieldkit._booleans import FALSE, TRUE


class CoercionError(ValueError):
    """A value does not match its declared type; names the value and the type."""

    def __init__(self, value: str, type_name: str, reason: str = ""):
        self.value = value
        self.type_name = type_name
        detail = f": {reason}" if reason else ""
        super().__init__(f"cannot read {value!r} as {type_name}{detail}")


_INT = re.compile(r"^[+-]?\d+(_\d+)*$")
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")


def _to_int(text: str) -> int:
    if not _INT.match(text):
        raise CoercionError(text, "int")
    return int(text)


def _to_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise CoercionError(text, "float") from None
    if value != value:
        raise CoercionError(text, "float", "NaN is not allowed")
    return value


def _to_bool(text: str) -> bool:
    low = text.lower()
    if low in TRUE:
        return True
    if low in FALSE:
        return False
    raise CoercionError(text, "bool", "expected one of " + ", ".join(sorted(TRUE | FALSE)))


def _to_date(text: str) -> dt.date:
    if not _DATE.match(text):
        raise CoercionError(text, "date", "expected YYYY-MM-DD")
    try:
        return dt.date.fromisoformat(text)
    except ValueError as exc:
        raise CoercionError(text, "date", str(exc)) from None


def _to_str(text: str) -> str:
    return text


CONVERTERS: Dict[str, Callable[[str], object]] = {
    "int": _to_int,
    "float": _to_float,
    "bool": _to_bool,
    "date": _to_date,
    "str": _to_str,
}


def coerce(text: str, type_name: str, *, nullable: bool = False) -> Optional[object]:
    """Convert ``text`` to ``type_name``; an empty field is ``None`` when ``nullable``.

    Surrounding whitespace is ignored for every type except ``str``.

    Raises:
        CoercionError: ``text`` is not a valid ``type_name`` (or is empty and not nullable).
        KeyError: ``type_name`` is unknown.
    """
    converter = CONVERTERS[type_name]
    if text.strip() == "" and type_name != "str":
        if nullable:
            return None
        raise CoercionError(text, type_name, "empty value in a non-nullable field")
    if text == "" and nullable:
        return None
    if type_name != "str":
        text = text.strip()
    return converter(text)
