"""Pure parts of harness.authoring: the lists derived from runs, the split, the request check."""

from __future__ import annotations

import pytest

from harness.authoring._derive import TreeRun, derive_lists, nodeid
from harness.authoring._split import check_request
from harness.errors import ConfigError
from harness.trial.junit import JUnitCase

A, B, C, D = (f"tests.test_x::test_{n}" for n in "abcd")


def tree_run(**outcomes: str) -> TreeRun:
    by_id = {f"tests.test_x::test_{k}": v for k, v in outcomes.items()}
    ids = {t: f"tests/test_x.py::{t.split('::')[1]}" for t in by_id}
    return TreeRun(by_id, ids, {}, 0, "", 1.0)


def test_lists_from_repeated_runs_leave_flaky_and_broken_tests_out() -> None:
    red = [tree_run(a="failed", b="passed", c="passed", d="failed")] * 2
    green = [
        tree_run(a="passed", b="passed", c="passed", d="failed"),
        tree_run(a="passed", b="passed", c="failed", d="failed"),
    ]
    got = derive_lists(red, green)
    assert got.fail_to_pass == (A,)
    assert got.pass_to_pass == (B,)
    assert got.flaky == (C,)
    assert got.broken == (D,)
    assert got.deselect == ("tests/test_x.py::test_c", "tests/test_x.py::test_d")


def test_a_test_absent_before_counts_as_failing_before() -> None:
    got = derive_lists([tree_run(b="passed")], [tree_run(a="passed", b="passed")])
    assert got.fail_to_pass == (A,) and got.pass_to_pass == (B,)


def test_pass_to_pass_sampling_is_deterministic() -> None:
    many = {f"p{i}": "passed" for i in range(30)}
    runs = [tree_run(a="failed", **many)], [tree_run(a="passed", **many)]
    one, two = derive_lists(*runs, pass_to_pass_limit=5), derive_lists(*runs, pass_to_pass_limit=5)
    assert len(one.pass_to_pass) == 5 and one.pass_to_pass == two.pass_to_pass
    assert one.sampled_out == 25


def test_nodeid_from_a_junit_case_with_a_class() -> None:
    case = JUnitCase(
        classname="tests.test_x.TestA", name="test_b[1-2]", file="tests/test_x.py", status="passed"
    )
    assert nodeid(case) == "tests/test_x.py::TestA::test_b[1-2]"


def test_request_quoting_an_added_line_is_refused() -> None:
    patch = b"--- a/m.py\n+++ b/m.py\n@@ -1 +1 @@\n-x = 1\n+value = compute_the_answer(41) + 1\n"
    assert check_request("Make value right.", patch, "msg") == "Make value right."
    with pytest.raises(ConfigError, match="quotes the reference patch"):
        check_request("Set it:  value = compute_the_answer(41)  + 1", patch, "msg")
