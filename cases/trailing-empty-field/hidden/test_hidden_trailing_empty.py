from fieldkit.cli import main
from fieldkit.records import TAB, join_record, split_record


def test_trailing_empty_field_is_kept():
    assert split_record("a,b,") == ["a", "b", ""]
    assert split_record("a,b,,") == ["a", "b", "", ""]


def test_lone_delimiter_is_two_empty_fields():
    assert split_record(",") == ["", ""]
    assert split_record("") == [""]


def test_trailing_quoted_empty_field():
    assert split_record('a,""') == ["a", ""]


def test_trailing_empty_field_tab():
    assert split_record("x\t\t", TAB) == ["x", "", ""]


def test_round_trip_trailing_empties():
    for fields in (["a", ""], ["", ""], ["a", "b", "", ""], [""]):
        assert split_record(join_record(fields)) == fields


def test_report_accepts_trailing_empty_column(tmp_path, capsys):
    f = tmp_path / "bill.csv"
    f.write_text("id,amount,note\n1,5,\n2,7,late\n")
    assert main(["report", str(f)]) == 0
    out, _ = capsys.readouterr()
    assert out.startswith("2 rows\n")
    assert out.splitlines()[-1].split()[:4] == ["note", "text", "1", "1"]
