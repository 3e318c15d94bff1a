import itertools

import pytest

from fieldkit.records import TAB, Dialect, join_record, split_record

ALPHABET = ["a", " ", ",", "\t", '"', "\\", "\n", "é"]
DIALECTS = [Dialect(), TAB, Dialect(delimiter=";", quote="'", escape=None), Dialect(strip=True)]


def _values(max_len=3):
    for n in range(max_len + 1):
        for chars in itertools.product(ALPHABET, repeat=n):
            yield "".join(chars)


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        (["a", "b c", "1.5"], "a,b c,1.5"),
        (["x", None, ""], "x,,"),
        (["a,b"], '"a,b"'),
        (['say "hi"'], '"say ""hi"""'),
        (["two\nlines"], '"two\nlines"'),
    ],
)
def test_quotes_only_when_needed(fields, expected):
    assert join_record(fields) == expected


def test_tab_dialect_leaves_commas_alone():
    assert join_record(["a,b", "c"], TAB) == "a,b\tc"


@pytest.mark.parametrize("dialect", DIALECTS, ids=["default", "tab", "semicolon", "strip"])
def test_round_trip_exhaustive(dialect):
    for value in _values():
        for fields in ([value], [value, value], ["", value], [value, ""]):
            assert split_record(join_record(fields, dialect), dialect) == fields, (fields, dialect)
