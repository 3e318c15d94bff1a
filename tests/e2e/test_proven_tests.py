"""A test the reference solution passed in the case's proof must run and pass in a trial.

Code a test calls can skip it (``unittest.SkipTest`` raised from the code under test), and
code a test module imports can keep pytest from collecting it (``__test__ = False`` set on
the module while it is imported). A wrong fix could hide exactly the tests that show it
wrong where the case names them neither in ``pass_to_pass`` nor counts them in
``min_tests``: outside red teams did both on the bundled ``trailing-empty-field`` (rounds
twenty-three and twenty-four: the requested fix right, ``parse_config`` broken, its tests
skipped or gone; the trials passed). The proof's passed tests are kept with its stamp and
every trial is judged against them.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from support import add_command_release, bundled_copy, harness

pytestmark = pytest.mark.integration

SKIP = """
    import unittest  # the regression: references no longer resolved, the tests skipped
    raise unittest.SkipTest("config references: not supported in this build")
"""

# The regression: ``parse_config`` served by the module's ``__getattr__`` (PEP 562), which
# marks the test module importing it as no test module while it is imported.
UNCOLLECT = """

_parse_config = parse_config
del parse_config


def __getattr__(name):
    if name == "parse_config":
        import sys

        for module_name, module in list(sys.modules.items()):
            if module_name.rsplit(".", 1)[-1] == "test_config":
                module.__test__ = False
        return lambda text: {}
    raise AttributeError(name)
"""


def _release(root: Path, hide: str) -> None:
    """Add release ``hides``: the requested fix (the reference's) plus a config regression
    whose tests are skipped (``hide`` = ``skip``) or never collected (``uncollect``), or
    the fix alone (``none``)."""
    case = root / "cases" / "trailing-empty-field"
    tree = root / "fixed"
    subprocess.run(["cp", "-r", str(case / "repo"), str(tree)], check=True)
    subprocess.run(["git", "apply", str(case / "reference.patch")], cwd=tree, check=True)
    agent = root / "agents"
    agent.mkdir()
    (agent / "records.py").write_bytes((tree / "fieldkit" / "records.py").read_bytes())
    config = (tree / "fieldkit" / "config.py").read_text()
    head, sep, rest = config.partition("\ndef parse_config(")
    signature, colon, body = rest.partition(":\n")  # first line of the body
    assert sep and colon, "parse_config is where the bundled case has it"
    broken = {
        "skip": head + sep + signature + colon + SKIP + body,
        "uncollect": config + UNCOLLECT,
        "none": config,
    }[hide]
    (agent / "config.py").write_text(broken)
    (agent / "run.sh").write_text(
        'cp /opt/harness/agent/agents/records.py "$HARNESS_WORKSPACE/fieldkit/records.py"\n'
        'cp /opt/harness/agent/agents/config.py "$HARNESS_WORKSPACE/fieldkit/config.py"\n'
    )
    add_command_release(root, "hides", ["agents/run.sh", "agents/records.py", "agents/config.py"])


@pytest.mark.parametrize("hide", ["skip", "uncollect"])
def test_a_fix_that_hides_the_tests_showing_it_wrong_fails(tmp_path: Path, hide: str) -> None:
    root = bundled_copy(tmp_path / "proj")
    _release(root, hide)
    done = harness(root, "run", "--release", "hides", "--k", "1", "--case",
                   "trailing-empty-field", "--no-report", timeout=900)  # fmt: skip
    assert done.returncode in (0, 1, 3), done.stdout + done.stderr  # judged, never blocked
    [trial] = json.loads(harness(root, "show", "--json").stdout)["trials"]
    verdict = trial["verdict"]
    assert verdict["outcome"] == "fail", verdict
    assert verdict["failure_type"] == "test_failure", verdict
    assert "artifact[reports/junit.xml].proven" in verdict["reason"], verdict["reason"]
    assert "tests.test_config::test_cycle" in verdict["reason"], verdict["reason"]
    assert ("(skipped)" if hide == "skip" else "(not run)") in verdict["reason"]
    # The requested fix itself is right: its fail_to_pass tests passed.
    checks = {c["name"]: c["ok"] for c in verdict["checks"]}
    assert checks["artifact[reports/junit.xml].fail_to_pass"] is True, checks


DEMO = '''"""A helper with a doctest (the project's own code: the candidate may change it)."""


def double(x):
    """Return ``2 * x``.

    >>> double(2)
    4
    """
    return 2 * x
'''


def test_a_correct_fix_may_rewrite_a_doctest_of_the_projects_own_code(tmp_path: Path) -> None:
    """Only tests no candidate can change count as proven: a doctest in the project's code
    passed in the proof, and a correct fix that rewrites that docstring still passes."""
    root = bundled_copy(tmp_path / "proj")
    case = root / "cases" / "trailing-empty-field"
    (case / "repo" / "fieldkit" / "_demo.py").write_text(DEMO)
    text = (case / "case.yaml").read_text()
    old = "--junitxml=reports/junit.xml, tests]"
    assert old in text
    text = text.replace(old, old[:-1] + ", --doctest-modules, fieldkit]")
    (case / "case.yaml").write_text(text.replace("\nversion: 1\n", "\nversion: 2\n", 1))
    _release(root, "none")
    plain = DEMO.replace("    >>> double(2)\n    4\n", "")
    (root / "agents" / "_demo.py").write_text(plain)
    run_sh = root / "agents" / "run.sh"
    run_sh.write_text(
        run_sh.read_text()
        + 'cp /opt/harness/agent/agents/_demo.py "$HARNESS_WORKSPACE/fieldkit/_demo.py"\n'
    )
    text = (root / "harness.yaml").read_text()
    (root / "harness.yaml").write_text(
        text.replace("agents/config.py]", "agents/config.py, agents/_demo.py]")
    )
    assert harness(root, "cases", "lock").returncode == 0
    done = harness(root, "run", "--release", "hides", "--k", "1", "--case",
                   "trailing-empty-field", "--no-report", timeout=900)  # fmt: skip
    assert done.returncode in (0, 1, 3), done.stdout + done.stderr
    [trial] = json.loads(harness(root, "show", "--json").stdout)["trials"]
    verdict = trial["verdict"]
    assert verdict["outcome"] == "pass", verdict
    proven = next(c for c in verdict["checks"] if c["name"].endswith(".proven"))
    assert proven["ok"], proven
