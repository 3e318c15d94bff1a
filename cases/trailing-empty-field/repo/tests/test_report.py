from fieldkit.report import build_report, render_text


def test_build_report():
    report = build_report(["n", "s"], [["1", "x"], ["3", ""], ["", "x"]])
    assert report["rows"] == 3
    n, s = report["columns"]
    assert n == {"name": "n", "filled": 2, "empty": 1, "distinct": 2, "kind": "number",
                 "min": 1.0, "max": 3.0, "mean": 2.0}
    assert s == {"name": "s", "filled": 2, "empty": 1, "distinct": 1, "kind": "text"}


def test_render_text():
    text = render_text(build_report(["n"], [["1"], ["2"]]))
    assert text.splitlines()[0] == "2 rows"
    assert text.splitlines()[2].split() == ["n", "number", "2", "0", "2", "1", "2", "1.5"]
