"""``harness cases new --from-git``: real git repositories built here, the real CLI and sandbox."""

from __future__ import annotations

import json
import subprocess
import tarfile
import time
from pathlib import Path

import pytest
import yaml
from support import harness

SOURCE_BEFORE = "def add(a, b):\n    return a - b\n\n\ndef mul(a, b):\n    return a * b\n"
TEST_MUL = "from calc import mul\n\n\ndef test_mul():\n    assert mul(2, 3) == 6\n"
TEST_ADD = (
    "import calc\n\n\ndef test_add():\n    assert calc.add(2, 2) == 4\n\n\n"
    "def test_add_negative():\n    assert calc.add(-1, -1) == -2\n"
)
PYPROJECT = (
    '[project]\nname = "calc"\nversion = "0.1"\n'
    '[project.optional-dependencies]\ntest = ["pytest"]\n'
)
MESSAGE = "Fix add: it subtracted\n\ncalc.add(2, 2) returned 0; it must return the sum.\n"

PROJECT = """\
task_set: golden
policy: policy.yaml
releases:
  noop:
    agent: {adapter: command, command: [sh, -c, "true"]}
  reference:
    agent: {adapter: simulated, simulated: {skill: {default: 1.0}}}
"""


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(repo), *args], capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


def commit_all(repo: Path, message: str) -> str:
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", message)
    return git(repo, "rev-parse", "HEAD")


def make_repo(root: Path) -> Path:
    """A tiny project with its own tests: an initial commit, then a fix with a test."""
    repo = root / "calc-repo"
    (repo / "calc").mkdir(parents=True)
    (repo / "tests").mkdir()
    git(repo, "init", "-q")
    git(repo, "config", "user.email", "dev@example.org")
    git(repo, "config", "user.name", "Dev")
    (repo / "calc" / "__init__.py").write_text(SOURCE_BEFORE)
    (repo / "tests" / "test_mul.py").write_text(TEST_MUL)
    (repo / "pyproject.toml").write_text(PYPROJECT)
    commit_all(repo, "calc: add and mul")
    (repo / "calc" / "__init__.py").write_text(SOURCE_BEFORE.replace("a - b", "a + b"))
    (repo / "tests" / "test_add.py").write_text(TEST_ADD)
    commit_all(repo, MESSAGE)
    return repo


def make_project(root: Path) -> Path:
    proj = root / "proj"
    (proj / "cases").mkdir(parents=True)
    (proj / "harness.yaml").write_text(PROJECT)
    (proj / "policy.yaml").write_text('version: "1"\n')
    return proj


def listing(proj: Path) -> dict[str, bytes]:
    return {
        p.relative_to(proj).as_posix(): p.read_bytes()
        for p in sorted(proj.rglob("*"))
        if p.is_file() and ".harness" not in p.parts
    }


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path)


@pytest.fixture
def proj(tmp_path: Path) -> Path:
    return make_project(tmp_path)


@pytest.mark.slow
@pytest.mark.integration
def test_a_fix_commit_becomes_a_validated_locked_case(repo: Path, proj: Path) -> None:
    fix = git(repo, "rev-parse", "HEAD")
    done = harness(
        proj, "cases", "new", "add-fix", "--from-git", str(repo), "--commit", fix[:10],
        "--repeats", "2", timeout=900,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "fail_to_pass     2" in done.stdout and "read before trusting it" in done.stdout
    case_dir = proj / "cases" / "add-fix"
    case = yaml.safe_load((case_dir / "case.yaml").read_text())
    rule = case["verifier"]["artifacts"][0]
    assert rule["fail_to_pass"] == [
        "tests.test_add::test_add", "tests.test_add::test_add_negative"
    ]  # fmt: skip
    assert rule["pass_to_pass"] == ["tests.test_mul::test_mul"]
    assert case["verifier"]["hidden"] == [
        {"src": "hidden/tests/test_add.py", "dest": "tests/test_add.py"}
    ]
    assert case["request"].startswith("Fix add: it subtracted")
    assert "add-fix" in yaml.safe_load((proj / "cases" / "golden.lock.yaml").read_text())["cases"]
    # The starting state is the parent's tree, with no history and nothing of the fix.
    with tarfile.open(case_dir / case["repo"]["path"]) as tf:
        names = set(tf.getnames())
        source = tf.extractfile("calc/__init__.py").read().decode()  # type: ignore[union-attr]
    assert "tests/test_mul.py" in names and "tests/test_add.py" not in names
    assert not any(n == ".git" or n.startswith(".git/") for n in names)
    assert "a - b" in source and "a + b" not in source
    assert harness(proj, "cases", "check").returncode == 0
    checked = harness(proj, "cases", "validate", timeout=600)
    assert checked.returncode == 0 and "✓ add-fix" in checked.stdout, checked.stdout
    # The no-op agent fails it; an agent applying the reference passes it.
    noop = harness(proj, "run", "--release", "noop", "--k", "1", "--no-report", timeout=600)
    shown = json.loads(harness(proj, "show", "--json").stdout)
    assert noop.returncode == 1 and [t["verdict"]["outcome"] for t in shown["trials"]] == ["fail"]
    ref = harness(proj, "run", "--release", "reference", "--k", "1", "--no-report", timeout=600)
    shown = json.loads(harness(proj, "show", "--json").stdout)
    assert ref.returncode == 0, ref.stdout + ref.stderr
    assert [t["verdict"]["outcome"] for t in shown["trials"]] == ["pass"]


@pytest.mark.slow
@pytest.mark.integration
def test_keep_git_holds_the_parent_and_no_object_of_the_fix(repo: Path, proj: Path) -> None:
    fix = git(repo, "rev-parse", "HEAD")
    done = harness(
        proj, "cases", "new", "add-git", "--from-git", str(repo), "--commit", fix,
        "--keep-git", "--repeats", "1", timeout=900,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    kept = proj / "cases" / "add-git" / "repo.git"
    assert git(kept, "for-each-ref", "--format=%(refname)") == "refs/heads/start"
    assert git(kept, "rev-parse", "refs/heads/start") == git(repo, "rev-parse", "HEAD~1")
    for obj in (fix, git(repo, "rev-parse", f"{fix}:tests/test_add.py")):
        gone = subprocess.run(["git", "-C", str(kept), "cat-file", "-e", obj], check=False)
        assert gone.returncode != 0, f"{obj} is in the kept repository"
    assert not (kept / "logs").exists()


def test_keep_git_refuses_a_history_that_already_holds_the_fix(repo: Path, proj: Path) -> None:
    # Revert the fix, then re-apply it: the re-applied fix's content is in its parent's history.
    git(repo, "revert", "--no-edit", "HEAD")
    git(repo, "revert", "--no-edit", "HEAD")
    before = listing(proj)
    done = harness(
        proj, "cases", "new", "again", "--from-git", str(repo), "--commit", "HEAD", "--keep-git"
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert "--keep-git" in done.stderr and "already holds" in done.stderr
    assert "Traceback" not in done.stderr and listing(proj) == before


def refused(proj: Path, *args: str, timeout: float = 600) -> str:
    before = listing(proj)
    done = harness(proj, "cases", "new", *args, timeout=timeout)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    assert listing(proj) == before, "a refused commit writes nothing"
    assert not [p for p in (proj / "cases").iterdir() if p.name.startswith(".new-case-")]
    return " ".join(done.stderr.split())


def test_not_a_git_repository_is_refused(tmp_path: Path, proj: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    msg = refused(proj, "x", "--from-git", str(plain), "--commit", "HEAD")
    assert "is not a git repository" in msg and "plain" in msg


def test_unknown_commit_is_refused(repo: Path, proj: Path) -> None:
    msg = refused(proj, "x", "--from-git", str(repo), "--commit", "deadbeef" * 5)
    assert "unknown commit 'deadbeefdeadbeef" in msg


def test_root_commit_is_refused(repo: Path, proj: Path) -> None:
    msg = refused(proj, "x", "--from-git", str(repo), "--commit", "HEAD~1")
    assert "is a root commit" in msg


def test_merge_commit_is_refused(repo: Path, proj: Path) -> None:
    git(repo, "checkout", "-q", "-b", "side", "HEAD~1")
    (repo / "README").write_text("side\n")
    commit_all(repo, "side")
    git(repo, "checkout", "-q", "-")
    git(repo, "merge", "-q", "--no-edit", "side")
    msg = refused(proj, "x", "--from-git", str(repo), "--commit", "HEAD")
    assert "is a merge (2 parents)" in msg


def test_commit_without_a_test_change_is_refused(repo: Path, proj: Path) -> None:
    (repo / "calc" / "__init__.py").write_text(SOURCE_BEFORE.replace("a * b", "b * a"))
    commit_all(repo, "mul: commute")
    msg = refused(proj, "x", "--from-git", str(repo), "--commit", "HEAD")
    assert "adds or changes no test file" in msg and "--tests GLOB" in msg


def test_a_request_quoting_the_patch_is_refused(repo: Path, proj: Path, tmp_path: Path) -> None:
    line = "return sum((a, b))  # the arithmetic sum of both arguments"
    (repo / "calc" / "__init__.py").write_text(SOURCE_BEFORE.replace("return a - b", line))
    git(repo, "commit", "-q", "-a", "--amend", "-m", f"Fix add\n\nWrite:\n\n    {line}\n")
    msg = refused(proj, "x", "--from-git", str(repo), "--commit", "HEAD")
    assert "message of commit" in msg and "the request quotes the reference patch" in msg
    assert "sum((a, b))" in msg and "--request FILE" in msg
    request = tmp_path / "request.md"
    request.write_text("Fix add.\n\n```diff\n--- a/calc/__init__.py\n+++ b/calc/__init__.py\n```\n")
    msg = refused(proj, "x", "--from-git", str(repo), "--commit", "HEAD", "--request", str(request))
    assert "request.md" in msg and "the request holds a diff" in msg


@pytest.mark.slow
@pytest.mark.integration
def test_tests_that_do_not_fail_before_are_refused(repo: Path, proj: Path) -> None:
    (repo / "calc" / "__init__.py").write_text(
        SOURCE_BEFORE.replace("a - b", "a + b") + "\n\ndef neg(value):\n    return -value\n"
    )
    (repo / "tests" / "test_mul.py").write_text(TEST_MUL + "\n\ndef test_mul_zero():\n"
                                                 "    assert mul(0, 5) == 0\n")  # fmt: skip
    commit_all(repo, "mul: a test that already passes, and neg")
    msg = refused(proj, "x", "--from-git", str(repo), "--commit", "HEAD", "--repeats", "1")
    assert "no test fails on the parent and passes with the fix" in msg
    assert "tests/test_mul.py" in msg


UNITTEST_TESTS = (
    "import sys\nimport unittest\n\nimport calc\n\n\nclass AddTests(unittest.TestCase):\n"
    "    def test_add(self):\n        self.assertEqual(calc.add(2, 2), 4)\n\n"
    "    @unittest.skipIf(sys.version_info >= (3,), 'not on Python 3')\n"
    "    def test_add_py2(self):\n        self.assertEqual(calc.add(1, 1), 2)\n"
)


@pytest.mark.slow
@pytest.mark.integration
def test_a_fix_whose_tests_skip_with_unittest_decorators_validates(repo: Path, proj: Path) -> None:
    # unittest's skip wrapper carries the test's __module__ (functools.wraps); the verifier's
    # guard once took it for a test not running its own module's code, and no case validated.
    git(repo, "reset", "-q", "--hard", "HEAD~1")
    (repo / "calc" / "__init__.py").write_text(SOURCE_BEFORE.replace("a - b", "a + b"))
    (repo / "tests" / "test_add.py").write_text(UNITTEST_TESTS)
    commit_all(repo, MESSAGE)
    done = harness(
        proj, "cases", "new", "add-fix", "--from-git", str(repo), "--commit", "HEAD",
        "--repeats", "2", "--jobs", "2", timeout=900,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "fail_to_pass     1: tests.test_add.AddTests::test_add" in done.stdout
    assert "took" in done.stdout and "4 test runs" in done.stdout


@pytest.mark.slow
@pytest.mark.integration
def test_tests_that_hang_before_the_fix_are_refused_naming_the_timeout(
    repo: Path, proj: Path
) -> None:
    (repo / "tests" / "test_add.py").write_text(
        "import calc\n\n\ndef test_add_terminates():\n"
        "    while calc.add(1, 1) != 2:\n        pass\n"
    )
    git(repo, "commit", "-q", "-a", "--amend", "--no-edit")
    t0 = time.monotonic()
    msg = refused(
        proj, "x", "--from-git", str(repo), "--commit", "HEAD",
        "--timeout", "3", "--repeats", "3", "--jobs", "2",
    )  # fmt: skip
    assert "the tests on the parent with the hidden tests wrote no report" in msg
    assert "did not finish within --timeout 3s" in msg
    assert time.monotonic() - t0 < 120  # the first run that hangs stops the derivation


@pytest.mark.slow
@pytest.mark.integration
def test_compiled_test_requirements_win_over_their_input(repo: Path, proj: Path) -> None:
    # requirements/tests.in says `pytest`; requirements/tests.txt, compiled from it, pins the
    # version the project's tests ran with (a newer pytest can turn their warnings to errors).
    git(repo, "reset", "-q", "--hard", "HEAD~1")
    (repo / "requirements").mkdir()
    (repo / "requirements" / "tests.in").write_text("pytest\n")
    (repo / "requirements" / "tests.txt").write_text(
        "# compiled from tests.in\npytest==8.3.4\n    # via -r tests.in\n"
    )
    commit_all(repo, "test requirements")
    (repo / "calc" / "__init__.py").write_text(SOURCE_BEFORE.replace("a - b", "a + b"))
    (repo / "tests" / "test_add.py").write_text(TEST_ADD)
    commit_all(repo, MESSAGE)
    done = harness(
        proj, "cases", "new", "add-fix", "--from-git", str(repo), "--commit", "HEAD",
        "--repeats", "1", timeout=900,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "from requirements/tests.txt" in " ".join(done.stdout.split())
    lock = (proj / "cases" / "add-fix" / "requirements.lock").read_text()
    assert "pytest==8.3.4" in lock


@pytest.mark.slow
@pytest.mark.integration
def test_lists_are_derived_on_the_files_the_verifier_keeps(repo: Path, proj: Path) -> None:
    # The fix also changes the runner's configuration, which the verifier restores from the
    # starting state for any agent: a test that needs the fix's configuration fails there,
    # so it must be found failing (and deselected) before the case is validated.
    git(repo, "reset", "-q", "--hard", "HEAD~1")
    (repo / "calc" / "__init__.py").write_text(SOURCE_BEFORE.replace("a - b", "a + b"))
    (repo / "pyproject.toml").write_text(
        PYPROJECT + '[tool.pytest.ini_options]\nmarkers = ["slow: slow tests"]\n'
    )
    (repo / "tests" / "test_add.py").write_text(
        TEST_ADD + "\n\ndef test_markers_declared():\n"
        "    assert 'tool.pytest' in open('pyproject.toml').read()\n"
    )
    commit_all(repo, MESSAGE)
    done = harness(
        proj, "cases", "new", "add-fix", "--from-git", str(repo), "--commit", "HEAD",
        "--repeats", "1", timeout=900,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    out = " ".join(done.stdout.split())
    assert "fail_to_pass 2: tests.test_add::test_add, tests.test_add::test_add_negative" in out
    assert "fail with the fix too, deselected: tests.test_add::test_markers_declared" in out
    assert "the verifier keeps these from the starting state" in out and "pyproject.toml" in out


def test_an_environment_that_cannot_be_built_is_refused(
    repo: Path, proj: Path, tmp_path: Path
) -> None:
    reqs = tmp_path / "reqs.txt"
    reqs.write_text("pytest\nharness-no-such-distribution-4f1c==1.0\n")
    msg = refused(
        proj, "x", "--from-git", str(repo), "--commit", "HEAD", "--requirements", str(reqs)
    )
    assert "the environment cannot be built" in msg
    assert "harness-no-such-distribution-4f1c" in msg


def test_batch_makes_one_case_per_commit_and_reports_each_failure(
    repo: Path, proj: Path, tmp_path: Path
) -> None:
    commits = tmp_path / "commits.txt"
    commits.write_text("# fixes to turn into cases\nHEAD~1\n0000000\n")
    before = listing(proj)
    done = harness(
        proj, "cases", "new", "calc", "--from-git", str(repo), "--commits-file", str(commits)
    )
    assert done.returncode == 2, done.stdout + done.stderr
    root = git(repo, "rev-parse", "HEAD~1")[:8]
    assert f"calc-{root}" in done.stderr and "is a root commit" in done.stderr
    assert "calc-0000000" in done.stderr and "unknown commit" in done.stderr
    assert "0 of 2 commit(s) became validated cases" in done.stdout
    assert listing(proj) == before
