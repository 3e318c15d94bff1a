import json
from pathlib import Path

from fieldkit.cli import main
from fieldkit.reader import read_file, with_header
from fieldkit.report import build_report

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "data" / "sample.csv"
ARTIFACT = ROOT / "artifacts" / "sample-report.json"


def _cli_json(capsys, path):
    assert main(["report", "--format", "json", str(path)]) == 0
    return capsys.readouterr().out


def test_report_format_json(capsys, tmp_path):
    f = tmp_path / "t.csv"
    f.write_text("n,s\n1,x\n3,\n")
    out = _cli_json(capsys, f)
    assert out.endswith("}\n")
    data = json.loads(out)
    assert data == build_report(["n", "s"], [["1", "x"], ["3", ""]])
    assert out == json.dumps(data, indent=2, sort_keys=True) + "\n"


def test_report_format_text_is_default(capsys):
    assert main(["report", str(SAMPLE)]) == 0
    assert capsys.readouterr().out.startswith("5 rows\n")


def test_report_output_file(tmp_path, capsys):
    target = tmp_path / "deep" / "r.json"
    assert main(["report", "--format", "json", "--output", str(target), str(SAMPLE)]) == 0
    assert capsys.readouterr().out == ""
    assert target.read_text(encoding="utf-8") == _cli_json(capsys, SAMPLE)


def test_artifact_matches_sample(capsys):
    assert ARTIFACT.is_file(), "artifacts/sample-report.json is missing"
    expected = _cli_json(capsys, SAMPLE)
    assert ARTIFACT.read_text(encoding="utf-8") == expected


def test_artifact_content():
    data = json.loads(ARTIFACT.read_text(encoding="utf-8"))
    header, rows = with_header(read_file(SAMPLE))
    assert data == build_report(header, rows)
    assert data["rows"] == 5
    amount = next(c for c in data["columns"] if c["name"] == "amount")
    assert amount["kind"] == "number" and amount["empty"] == 1
