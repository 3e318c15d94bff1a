import datetime as dt

import pytest

from fieldkit.coerce import CoercionError, coerce


@pytest.mark.parametrize(
    ("text", "type_name", "expected"),
    [
        ("42", "int", 42),
        (" -7 ", "int", -7),
        ("1_000", "int", 1000),
        ("2.5", "float", 2.5),
        ("1e3", "float", 1000.0),
        ("Yes", "bool", True),
        ("0", "bool", False),
        (" x ", "str", " x "),
        ("2024-02-29", "date", dt.date(2024, 2, 29)),
    ],
)
def test_coerce(text, type_name, expected):
    assert coerce(text, type_name) == expected


@pytest.mark.parametrize(
    ("text", "type_name"),
    [("4.0", "int"), ("nan", "float"), ("maybe", "bool"), ("2023-02-29", "date"), ("24-1-1", "date")],
)
def test_coerce_rejects(text, type_name):
    with pytest.raises(CoercionError, match=type_name):
        coerce(text, type_name)


def test_empty_value():
    assert coerce("", "int", nullable=True) is None
    with pytest.raises(CoercionError, match="non-nullable"):
        coerce(" ", "float")
