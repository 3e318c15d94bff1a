import json
from pathlib import Path

from fieldkit.cli import main

SAMPLE = Path(__file__).resolve().parent.parent / "data" / "sample.csv"


def test_parse_prints_rows(capsys):
    assert main(["parse", str(SAMPLE)]) == 0
    out, err = capsys.readouterr()
    rows = [json.loads(line) for line in out.splitlines()]
    assert rows[2] == ["2", "Hopper, Grace", "Arlington", "7", "no"]
    assert err.strip() == "6 rows"


def test_parse_with_schema(capsys):
    assert main(["parse", str(SAMPLE), "--schema", "id:int,customer,city,amount:float?,paid:bool"]) == 0
    out, _ = capsys.readouterr()
    last = json.loads(out.splitlines()[-1])
    assert last == {"id": 5, "customer": "Claude Shannon", "city": "Petoskey, MI", "amount": None, "paid": False}


def test_report_text(capsys):
    assert main(["report", str(SAMPLE)]) == 0
    out, _ = capsys.readouterr()
    assert out.startswith("5 rows\n")


def test_bad_input_exits_2(tmp_path, capsys):
    bad = tmp_path / "bad.csv"
    bad.write_text('a,b\n"unterminated,1\n')
    assert main(["parse", str(bad)]) == 2
    assert "fieldkit: error: line 2" in capsys.readouterr().err
