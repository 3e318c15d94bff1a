"""The verifier-owned tree, built on the host from a start and a candidate folder."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.cases.load import load_case
from harness.decision import tampering_fails
from harness.trial.vtree import _runner_sections, build_verification_tree, glob_regex

CASE = {
    "id": "c",
    "version": 1,
    "request": "fix it",
    "repo": {"kind": "folder", "path": "repo"},
    "lane": "judgment",
    "verifier": {
        "command": ["true"],
        "artifacts": [{"path": "reports/junit.xml", "rule": "junit"}],
        "hidden": [{"src": "hidden/test_h.py", "dest": "tests/test_h.py"}],
    },
}


@pytest.fixture
def case(tmp_path: Path):
    d = tmp_path / "c"
    (d / "repo" / "tests").mkdir(parents=True)
    (d / "repo" / "lib.py").write_text("X = 1\n")
    (d / "repo" / "tests" / "test_lib.py").write_text("def test_x(): pass\n")
    (d / "repo" / "pyproject.toml").write_text(
        '[project]\nname = "c"\n\n[tool.pytest.ini_options]\ntestpaths = ["tests"]\n'
    )
    (d / "hidden").mkdir()
    (d / "hidden" / "test_h.py").write_text("def test_h(): pass\n")
    (d / "case.yaml").write_text(yaml.safe_dump(CASE))
    return load_case(d)


def _build(case, tmp_path: Path, edit) -> tuple[object, Path]:
    cand = tmp_path / "cand"
    shutil.copytree(case.dir / "repo", cand, symlinks=True)
    edit(cand)
    dest = tmp_path / "tree"
    vt = build_verification_tree(
        case, case.dir / "repo", cand, dest, artifacts=["reports/junit.xml"]
    )
    return vt, dest


def test_glob_patterns() -> None:
    assert glob_regex("tests/**").fullmatch("tests")
    assert glob_regex("tests/**").fullmatch("tests/a/b.py")
    assert glob_regex("**/conftest.py").fullmatch("conftest.py")
    assert glob_regex("**/conftest.py").fullmatch("a/b/conftest.py")
    assert not glob_regex("*.pth").fullmatch("a/x.pth")
    assert not glob_regex("tests/**").fullmatch("tests2/x")


def test_honest_change_passes_through_untouched(case, tmp_path) -> None:
    vt, dest = _build(case, tmp_path, lambda c: (c / "lib.py").write_text("X = 2\n"))
    assert vt.tampering == [] and vt.left_out == []
    assert (dest / "lib.py").read_text() == "X = 2\n"
    assert (dest / "tests" / "test_h.py").read_text() == "def test_h(): pass\n"


def test_changed_and_deleted_tests_are_restored_added_ones_left_out(case, tmp_path) -> None:
    def edit(c: Path) -> None:
        (c / "tests" / "test_lib.py").unlink()
        (c / "tests" / "test_mine.py").write_text("def test_m(): pass\n")
        (c / "conftest.py").write_text("import pytest\n")

    vt, dest = _build(case, tmp_path, edit)
    assert (dest / "tests" / "test_lib.py").read_text() == "def test_x(): pass\n"
    assert not (dest / "tests" / "test_mine.py").exists()
    assert not (dest / "conftest.py").exists()
    assert vt.left_out == ["tests/test_mine.py: added under a protected path; left out"]
    assert any("conftest.py" in t for t in vt.tampering)
    assert any("test_lib.py: protected, deleted" in t for t in vt.tampering)


def test_config_counts_only_through_its_runner_section(case, tmp_path) -> None:
    def dep(c: Path) -> None:
        text = (c / "pyproject.toml").read_text()
        (c / "pyproject.toml").write_text(text.replace('name = "c"', 'name = "c"\nversion = "2"'))

    vt, dest = _build(case, tmp_path, dep)
    assert vt.tampering == [] and 'version = "2"' in (dest / "pyproject.toml").read_text()
    shutil.rmtree(tmp_path / "cand")
    shutil.rmtree(tmp_path / "tree")

    def addopts(c: Path) -> None:
        with (c / "pyproject.toml").open("a") as fh:
            fh.write('addopts = "-p evil"\n')

    vt, dest = _build(case, tmp_path, addopts)
    assert "addopts" not in (dest / "pyproject.toml").read_text()
    assert any("pyproject.toml" in t for t in vt.tampering)


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("tox.ini", "[pytest] # not a runner section, says configparser]\naddopts = -p evil\n"),
        ("setup.cfg", "[tool:pytest] # x]\naddopts = -p evil\n"),
        ("tox.ini", "[pytest]\naddopts = -p evil\n"),
    ],
    ids=["tox-comment-header", "setup-cfg-comment-header", "tox-plain"],
)
def test_an_ini_file_that_names_pytest_is_the_runners_whatever_its_headers(
    case, tmp_path, name: str, text: str
) -> None:
    # Red team round twenty-three: pytest's ini parser reads ``[pytest] # ...]`` as a pytest
    # section, the standard library's configparser did not, and the addopts loaded.
    def edit(c: Path) -> None:
        (c / name).write_text(text)

    vt, dest = _build(case, tmp_path, edit)
    assert not (dest / name).exists() or "evil" not in (dest / name).read_text()
    assert any(name in t for t in vt.tampering), vt.tampering


def test_an_ini_file_that_never_names_pytest_is_the_projects(case, tmp_path) -> None:
    def edit(c: Path) -> None:
        (c / "setup.cfg").write_text("[metadata]\nname = c\n")

    vt, dest = _build(case, tmp_path, edit)
    assert vt.tampering == [] and "name = c" in (dest / "setup.cfg").read_text()


@pytest.mark.parametrize(
    "tail",
    [
        "[tool.deep]\nx = " + "[" * 200_000 + "]" * 200_000 + "\n",  # exhausts the parser
        "[tool.deep]\nx = " + "{a=" * 5_000 + "1" + "}" * 5_000 + "\n",
        "[tool.big]\n" + "".join(f'k{i} = "{"v" * 60}"\n' for i in range(20_000)),  # > 1 MiB
    ],
    ids=["deep-array", "deep-table", "huge"],
)
def test_a_config_the_host_cannot_parse_is_the_candidates_tampering(
    case, tmp_path, tail: str
) -> None:
    """A candidate's config that breaks the parser is restored as changed, never an error."""

    def edit(c: Path) -> None:
        with (c / "pyproject.toml").open("a") as fh:
            fh.write(tail)

    vt, dest = _build(case, tmp_path, edit)
    assert "tool.deep" not in (dest / "pyproject.toml").read_text()
    assert "tool.big" not in (dest / "pyproject.toml").read_text()
    assert any("pyproject.toml: protected, changed" in t for t in vt.tampering)


@pytest.mark.parametrize("head", ["tool = 5\n", "[[tool]]\nx = 1\n", 'tool = "pytest"\n'])
def test_a_tool_key_that_is_not_a_table_is_unparsable_not_an_error(case, tmp_path, head) -> None:
    def edit(c: Path) -> None:
        (c / "pyproject.toml").write_text(head + '[project]\nname = "c"\n')

    vt, _ = _build(case, tmp_path, edit)
    assert any("pyproject.toml: protected, changed" in t for t in vt.tampering)


_HEADS = st.sampled_from(["", "tool = ", "[tool]\n", "[[tool]]\n", "[tool.pytest]\n", "[pytest]\n"])


@settings(max_examples=150, deadline=None)
@given(head=_HEADS, body=st.text(max_size=300), raw=st.binary(max_size=200))
def test_runner_sections_never_raise(head: str, body: str, raw: bytes) -> None:
    for name in ("pyproject.toml", "setup.cfg", "tox.ini"):
        for data in ((head + body).encode("utf-8", "surrogatepass"), raw):
            _runner_sections(name, data)


def test_no_candidate_symlink_is_followed(case, tmp_path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()

    def edit(c: Path) -> None:
        shutil.rmtree(c / "tests")
        os.symlink(outside, c / "tests")
        os.symlink("/etc", c / "etc_link")
        os.symlink("lib.py", c / "alias.py")

    vt, dest = _build(case, tmp_path, edit)
    assert os.listdir(outside) == [], "hidden files were written through the link"
    assert (dest / "tests").is_dir() and not (dest / "tests").is_symlink()
    assert (dest / "tests" / "test_h.py").is_file()
    assert not (dest / "etc_link").is_symlink()
    # A module that is a link (even inside the tree) could hide code from the scan: left out.
    assert not (dest / "alias.py").exists() and not (dest / "alias.py").is_symlink()
    assert any("alias.py" in t for t in vt.tampering), vt.tampering
    assert any("etc_link" in t and "leaves the tree" in t for t in vt.tampering)


def test_shadowing_modules_and_shipped_artifacts_are_dropped(case, tmp_path) -> None:
    def edit(c: Path) -> None:
        (c / "pytest").mkdir()
        (c / "pytest" / "__init__.py").write_text("")
        (c / "json.py").write_text("")
        (c / "reports").mkdir()
        (c / "reports" / "junit.xml").write_text("<testsuite/>")
        (c / "lib.py").write_text("import _pytest.reports\n")

    vt, dest = _build(case, tmp_path, edit)
    assert not (dest / "pytest").exists() and not (dest / "json.py").exists()
    assert not (dest / "reports" / "junit.xml").exists()
    text = "\n".join(vt.tampering)
    assert "pytest/__init__.py" in text and "json.py" in text and "junit.xml" in text
    assert "lib.py: candidate code touches the test runner's internals (_pytest)" in text


def test_allow_lets_the_candidate_change_a_protected_path(case, tmp_path) -> None:
    data = dict(CASE, verifier={**CASE["verifier"], "protect": {"allow": ["tests/test_new.py"]}})
    (case.dir / "case.yaml").write_text(yaml.safe_dump(data))
    lc = load_case(case.dir)
    vt, dest = _build(lc, tmp_path, lambda c: (c / "tests" / "test_new.py").write_text("x = 1\n"))
    assert (dest / "tests" / "test_new.py").exists() and vt.left_out == []


@pytest.mark.parametrize("allowed", [False, True])
def test_a_file_a_mutant_replaces_is_the_starting_ones_unless_allowed(
    case, tmp_path, allowed
) -> None:
    """Red team round twenty-seven: a candidate that marked the code a mutant replaces had
    a test check the mark, so only the mutant "failed" it. The judged run sees the starting
    file, as the mutant's run sees the mutant: they differ by the mutant alone."""
    (case.dir / "hidden" / "m.py").write_text("X = 0\n")
    mutant = {"name": "m", "replace": [{"src": "hidden/m.py", "dest": "lib.py"}],
              "must_fail": ["t"]}  # fmt: skip
    verifier = {**CASE["verifier"], "mutants": [mutant]}
    if allowed:  # a case whose task is to change it (its tests must fail on the mutant)
        verifier["protect"] = {"allow": ["lib.py"]}
    (case.dir / "case.yaml").write_text(yaml.safe_dump(dict(CASE, verifier=verifier)))
    lc = load_case(case.dir)
    vt, dest = _build(lc, tmp_path, lambda c: (c / "lib.py").write_text("X = 1\nMARK = 1\n"))
    if allowed:
        assert (dest / "lib.py").read_text() == "X = 1\nMARK = 1\n" and vt.tampering == []
    else:
        assert (dest / "lib.py").read_text() == "X = 1\n"
        assert any("lib.py" in t for t in vt.tampering), vt.tampering


def test_policy_can_count_tampering_as_a_fail() -> None:
    from harness.store.records import Outcome, RunRecord

    rec = RunRecord.model_validate(
        {
            "key": {
                "arm": "candidate",
                "release": "r",
                "case_id": "c",
                "case_version": 1,
                "trial": 0,
            },
            "case_digest": "d",
            "system_digest": "s",
            "backend": "local",
            "attempts": [
                {"attempt": 1, "verdict": {"outcome": "pass"}, "tampering": ["conftest.py"]}
            ],
            "verdict": {"outcome": "pass"},
            "started_at": "2026-01-01T00:00:00Z",
            "finished_at": "2026-01-01T00:00:01Z",
            "harness_version": "0",
        }
    )
    assert tampering_fails(rec).outcome is Outcome.FAIL
    untouched = rec.attempts[0].model_copy(update={"tampering": ()})
    clean = rec.model_copy(update={"attempts": (untouched,)})
    assert tampering_fails(clean).outcome is Outcome.PASS


def test_a_hidden_file_replacing_an_untouched_starting_file_is_not_tampering(
    case, tmp_path
) -> None:
    """The case's hidden test replaces one the starting state already has: honest work
    that leaves that file alone is not flagged; a candidate that changes it is."""
    (case.dir / "repo" / "tests" / "test_h.py").write_text("def test_h(): assert False\n")
    vt, dest = _build(case, tmp_path, lambda c: (c / "lib.py").write_text("X = 2\n"))
    assert vt.tampering == [], vt.tampering
    assert (dest / "tests" / "test_h.py").read_text() == "def test_h(): pass\n"

    def edit(c: Path) -> None:
        (c / "tests" / "test_h.py").write_text("def test_h(): pass  # mine\n")

    shutil.rmtree(tmp_path / "cand")
    shutil.rmtree(tmp_path / "tree")
    vt, dest = _build(case, tmp_path, edit)
    assert any("test_h.py" in t for t in vt.tampering), vt.tampering
    assert (dest / "tests" / "test_h.py").read_text() == "def test_h(): pass\n"


def test_what_the_run_may_not_change_is_listed_with_empty_caches(case, tmp_path) -> None:
    def edit(c: Path) -> None:
        (c / "lib.py").write_text("X = 2\n")  # the candidate's: stays changeable
        (c / "util.py").write_text("Y = 1\n")  # added: the candidate's too
        (c / "tests" / "__pycache__").mkdir()
        (c / "tests" / "__pycache__" / "test_lib.cpython-311.pyc").write_bytes(b"x")

    (case.dir / "repo" / "helper.py").write_text("Z = 1\n")  # starting state, untouched
    vt, dest = _build(case, tmp_path, edit)
    assert vt.locked == [
        "helper.py",
        "pyproject.toml",
        "tests/test_h.py",
        "tests/test_lib.py",
        "__pycache__",
        "tests/__pycache__",
    ]
    assert list((dest / "tests" / "__pycache__").iterdir()) == []  # a planted cache is gone
    assert {"lib.py", "util.py"} <= set(vt.candidate)
