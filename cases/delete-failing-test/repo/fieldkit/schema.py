"""Typed columns: ``name:type`` specs, row → dict conversion, JSON Schema export."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence

from fieldkit.coerce import CONVERTERS, CoercionError, coerce


class SchemaError(ValueError):
    """A schema spec is malformed, or a row does not fit the schema."""


@dataclass(frozen=True)
class Field:
    """One typed column; ``nullable`` fields map an empty value to ``None``."""

    name: str
    type: str = "str"
    nullable: bool = False

    @classmethod
    def parse(cls, spec: str) -> "Field":
        """Parse ``name``, ``name:type`` or ``name:type?`` (``?`` = nullable)."""
        name, _, type_name = spec.strip().partition(":")
        name = name.strip()
        type_name = type_name.strip() or "str"
        nullable = type_name.endswith("?")
        type_name = type_name.rstrip("?")
        if not name:
            raise SchemaError(f"field spec {spec!r} has no name")
        if type_name not in CONVERTERS:
            known = ", ".join(sorted(CONVERTERS))
            raise SchemaError(f"field {name!r}: unknown type {type_name!r} (expected one of {known})")
        return cls(name, type_name, nullable)


_JSON_TYPES = {"int": "integer", "float": "number", "bool": "boolean", "str": "string", "date": "string"}


class Schema:
    """An ordered list of fields."""

    def __init__(self, fields: Sequence[Field]):
        names = [f.name for f in fields]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise SchemaError(f"duplicate field names: {', '.join(dupes)}")
        self.fields = list(fields)

    @classmethod
    def parse(cls, spec: str) -> "Schema":
        """Parse a comma-separated list of field specs, e.g. ``"id:int, score:float?"``."""
        parts = [p for p in spec.split(",") if p.strip()]
        if not parts:
            raise SchemaError("empty schema")
        return cls([Field.parse(p) for p in parts])

    @property
    def names(self) -> List[str]:
        """Field names, in order."""
        return [f.name for f in self.fields]

    def convert(self, row: Sequence[str], *, line: Optional[int] = None) -> Dict[str, object]:
        """Convert one row of field texts to a dict of typed values.

        Raises:
            SchemaError: the row's width differs from the schema, or a value has the wrong type.
        """
        where = f"row {line}: " if line is not None else ""
        if len(row) != len(self.fields):
            raise SchemaError(f"{where}expected {len(self.fields)} fields, got {len(row)}")
        out: Dict[str, object] = {}
        for field, text in zip(self.fields, row):
            try:
                out[field.name] = coerce(text, field.type, nullable=field.nullable)
            except CoercionError as exc:
                raise SchemaError(f"{where}field {field.name!r}: {exc}") from None
        return out

    def apply(self, rows: Sequence[Sequence[str]], *, first_line: int = 1) -> List[Dict[str, object]]:
        """Convert every row (numbered from ``first_line`` in error messages)."""
        return [self.convert(row, line=first_line + i) for i, row in enumerate(rows)]

    def to_json_schema(self, title: str = "record") -> Dict[str, object]:
        """A JSON Schema (draft 2020-12) describing one converted row."""
        props: Dict[str, object] = {}
        for f in self.fields:
            prop: Dict[str, object] = {"type": _JSON_TYPES[f.type]}
            if f.type == "date":
                prop["format"] = "date"
            if f.nullable:
                prop = {"anyOf": [prop, {"type": "null"}]}
            props[f.name] = prop
        return {
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "title": title,
            "type": "object",
            "properties": props,
            "required": self.names,
            "additionalProperties": False,
        }
