import pytest

from fieldkit.reader import logical_records, parse_text, with_header
from fieldkit.records import ParseError


def test_rows_comments_and_blank_lines():
    text = "# comment\na,b\n\n1,2\n"
    assert parse_text(text) == [["a", "b"], ["1", "2"]]


def test_quoted_field_spans_lines():
    text = 'id,note\n1,"first\nsecond"\n2,x\n'
    assert parse_text(text) == [["id", "note"], ["1", "first\nsecond"], ["2", "x"]]


def test_logical_records_report_first_line():
    text = 'a\n"b\nc"\nd\n'
    assert [n for n, _ in logical_records(text)] == [1, 2, 4]


def test_document_ending_inside_quotes():
    with pytest.raises(ParseError, match="line 2"):
        parse_text('a\n"b\nc\n')


def test_error_names_line():
    with pytest.raises(ParseError, match="line 3"):
        parse_text('a,b\n1,2\n"x"y,3\n')


def test_with_header_checks_width():
    header, data = with_header([["a", "b"], ["1", "2"]])
    assert header == ["a", "b"] and data == [["1", "2"]]
    with pytest.raises(ParseError, match="row 3 has 1 fields"):
        with_header([["a", "b"], ["1", "2"], ["3"]])
