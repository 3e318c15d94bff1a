import json

from fieldkit.cli import main
from fieldkit.reader import logical_records, parse_text


def test_escaped_quote_does_not_merge_rows():
    text = 'id,note\n1,"27\\" monitor"\n2,x\n'
    assert parse_text(text) == [["id", "note"], ["1", '27" monitor'], ["2", "x"]]


def test_escaped_quote_in_unquoted_field():
    assert parse_text('a\\"b,c\n1,2\n') == [['a"b', "c"], ["1", "2"]]


def test_escaped_quote_then_line_break_in_quotes():
    text = '1,"x \\" y\nz"\n2,w\n'
    assert parse_text(text) == [["1", 'x " y\nz'], ["2", "w"]]


def test_escaped_escape_before_closing_quote():
    text = '1,"tail\\\\"\n2,w\n'
    assert parse_text(text) == [["1", "tail\\"], ["2", "w"]]


def test_logical_records_line_numbers_with_escapes():
    text = 'a\\"\n"b\nc"\nd\n'
    assert [n for n, _ in logical_records(text)] == [1, 2, 4]


def test_cli_counts_every_row(tmp_path, capsys):
    f = tmp_path / "notes.csv"
    f.write_text('id,note\n1,"27\\" monitor"\n2,fine\n3,"ok"\n')
    assert main(["parse", str(f)]) == 0
    out, err = capsys.readouterr()
    assert [json.loads(line)[0] for line in out.splitlines()] == ["id", "1", "2", "3"]
    assert err.strip() == "4 rows"
