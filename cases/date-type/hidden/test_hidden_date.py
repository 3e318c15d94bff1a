import datetime as dt
import json

import pytest

from fieldkit.cli import main
from fieldkit.coerce import CoercionError, coerce
from fieldkit.schema import Schema


def test_coerce_date():
    assert coerce("2024-02-29", "date") == dt.date(2024, 2, 29)
    assert coerce(" 1999-12-31 ", "date") == dt.date(1999, 12, 31)


@pytest.mark.parametrize("text", ["2023-02-29", "2024-13-01", "24-1-1", "2024/01/01", "yesterday"])
def test_coerce_date_rejects(text):
    with pytest.raises(CoercionError, match="date"):
        coerce(text, "date")


def test_nullable_date():
    assert coerce("", "date", nullable=True) is None
    with pytest.raises(CoercionError, match="non-nullable"):
        coerce("", "date")


def test_schema_date_field():
    rows = Schema.parse("id:int,when:date?").apply([["1", "2024-05-01"], ["2", ""]])
    assert rows == [{"id": 1, "when": dt.date(2024, 5, 1)}, {"id": 2, "when": None}]


def test_json_schema_date_format():
    props = Schema.parse("when:date").to_json_schema()["properties"]
    assert props["when"] == {"type": "string", "format": "date"}


def test_cli_prints_iso_dates(tmp_path, capsys):
    f = tmp_path / "d.csv"
    f.write_text("id,when\n1,2024-05-01\n")
    assert main(["parse", str(f), "--schema", "id:int,when:date"]) == 0
    out, _ = capsys.readouterr()
    assert json.loads(out.splitlines()[0]) == {"id": 1, "when": "2024-05-01"}
