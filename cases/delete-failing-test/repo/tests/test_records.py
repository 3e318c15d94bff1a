import pytest

from fieldkit.records import TAB, Dialect, ParseError, join_record, split_record


def test_plain_fields():
    assert split_record("a,b,c") == ["a", "b", "c"]


def test_quoted_field_keeps_delimiter():
    assert split_record('"a,b",c') == ["a,b", "c"]


def test_doubled_quote_inside_quotes():
    assert split_record('"say ""hi""",x') == ['say "hi"', "x"]


def test_escaped_quote_inside_quotes():
    assert split_record(r'"say \"hi\"",x') == ['say "hi"', "x"]


def test_escape_outside_quotes():
    assert split_record(r"a\,b,c") == ["a,b", "c"]


def test_empty_fields_keep_their_position():
    assert split_record("a,,c") == ["a", "", "c"]
    assert split_record(",b,") == ["", "b", ""]


def test_tab_dialect():
    assert split_record("a\tb c\t", TAB) == ["a", "b c", ""]


def test_strip_only_unquoted():
    assert split_record(' a , " b " ', Dialect(strip=True)) == ["a", " b "]


def test_unterminated_quote_raises():
    with pytest.raises(ParseError, match="unterminated"):
        split_record('"abc,def', lineno=3)


def test_text_after_closing_quote_raises():
    with pytest.raises(ParseError, match="line 1, column 5"):
        split_record('"ab"c,d', lineno=1)


def test_dialect_rejects_clashing_characters():
    with pytest.raises(ValueError, match="must differ"):
        Dialect(delimiter='"')


def test_join_plain():
    assert join_record(["a", 1, None, 2.5]) == "a,1,,2.5"


ROUND_TRIP = [
    ["plain", "two words"],
    ["a,b", 'say "hi"', ""],
    ["back\\slash", "tail\\"],
    ["line\nbreak", " padded "],
    ["", "", ""],
    ["ünïcödé", "日本語"],
]


@pytest.mark.parametrize("fields", ROUND_TRIP)
def test_round_trip(fields):
    assert split_record(join_record(fields)) == fields


@pytest.mark.parametrize("fields", ROUND_TRIP)
def test_round_trip_tab(fields):
    assert split_record(join_record(fields, TAB), TAB) == fields
