"""A case that asks for a test judges it against a mutant run the test cannot tell apart.

An outside red team (round twenty-six) passed the bundled ``config-nested-test`` with a
test that checked one level of references only and asserted that its own file lay under
``/workspace``: the case's checker ran the mutant from a copy under ``/tmp``, where the
test failed for its path, "catching" the mutant. The harness now runs the verifier's
command again on each declared mutant, in a fresh sandbox, on the same tree at the same
path: only the mutant's files differ.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support import add_command_release, bundled_copy, harness

pytestmark = pytest.mark.integration

DOCKER = pytest.param("docker", marks=pytest.mark.docker)

# One level of references only, and a check that holds in the judged run's folder.
PATH_AWARE = """\
from pathlib import Path

from fieldkit.config import parse_config


def test_nested_reference():
    cfg = parse_config("base = /srv\\nroot = ${base}\\n")
    assert cfg[""]["root"] == "/srv"
    assert Path(__file__).resolve().parts[1] == "workspace"
"""

# Red team round twenty-seven: one level only, and a clock. The mutant runs used to start
# once the judged run had ended, so a test that slept could fail only when it ran late.
LATE_ONLY = """\
import time

from fieldkit.config import parse_config

WRITTEN = float("@WRITTEN@")


def test_nested_reference():
    cfg = parse_config("base = /srv\\nroot = ${base}\\n")
    assert cfg[""]["root"] == "/srv"
    time.sleep(20)
    assert time.time() - WRITTEN < 32
"""

# Red team round twenty-seven: one level only, and a mark the agent added to the very code
# the mutant replaces (the request forbids changing it), so only the mutant lacked it.
MARKED = """\
from fieldkit import config
from fieldkit.config import parse_config


def test_nested_reference():
    cfg = parse_config("base = /srv\\nroot = ${base}\\n")
    assert cfg[""]["root"] == "/srv"
    assert getattr(config, "_SIGNED", None) == "agent"
"""

# Red team round twenty-eight: a test that checks only what the starting suite already
# checks (a reference cycle), which the old mutant (no recursion, so no cycle check) broke.
CYCLE_ONLY = """\
import pytest

from fieldkit.config import ConfigError, parse_config


def test_nested_reference():
    with pytest.raises(ConfigError):
        parse_config("a = ${b}\\nb = ${a}\\n")
"""

# Red team round twenty-nine: a test that checks nothing and fails when its mount table
# names the mutant (the guard's host folder was named after the run it served).
MOUNTS = """\
from fieldkit.config import parse_config


def test_nested_reference():
    assert parse_config("a = 1\\n")[""]["a"] == "1"
    assert "mutant" not in open("/proc/self/mountinfo").read()
"""

# Red team round thirty: a right test, written parametrized. The case names the function;
# every instance must pass on the judged tree and fail on the mutant.
PARAMETRIZED = """\
import pytest

from fieldkit.config import parse_config


@pytest.mark.parametrize("base", ["/srv", "/opt"])
def test_nested_reference(base):
    cfg = parse_config(f"base = {base}\\nroot = ${{base}}/app\\nlogs = ${{root}}/logs\\n")
    assert cfg[""]["logs"] == base + "/app/logs"
"""

AGENT = """set -eu
cd "$HARNESS_WORKSPACE"
A=/opt/harness/agent/agents
if [ -e "$A/reference" ]; then git apply "$A/reference.patch"; else
  cp "$A/test_config_nested.py" tests/test_config_nested.py; fi
sed -i "s/@WRITTEN@/$(date +%s.%N)/" tests/test_config_nested.py
if grep -q _SIGNED tests/test_config_nested.py; then
  echo '_SIGNED = "agent"' >> fieldkit/config.py; fi
"""


def _project(tmp_path: Path, reference: bool, test: str = PATH_AWARE) -> Path:
    root = bundled_copy(tmp_path / "proj")
    agents = root / "agents"
    agents.mkdir()
    (agents / "run.sh").write_text(AGENT)
    (agents / "test_config_nested.py").write_text(test)
    ref = root / "cases" / "config-nested-test" / "reference.patch"
    (agents / "reference.patch").write_bytes(ref.read_bytes())
    if reference:
        (agents / "reference").write_text("")
    add_command_release(root, "writes-a-test", ["agents"])
    return root


def _trial(root: Path, backend: str) -> dict:
    done = harness(root, "run", "--release", "writes-a-test", "--k", "1", "--case",
                   "config-nested-test", "--no-report", "--backend", backend,
                   timeout=900)  # fmt: skip
    assert done.returncode in (0, 1, 3), done.stdout + done.stderr  # judged, never blocked
    [trial] = json.loads(harness(root, "show", "--json").stdout)["trials"]
    return trial


@pytest.mark.parametrize("backend", ["local", DOCKER])
def test_a_test_that_knows_its_folder_does_not_catch_the_mutant(tmp_path, backend) -> None:
    trial = _trial(_project(tmp_path, reference=False), backend)
    verdict = trial["verdict"]
    assert (verdict["outcome"], verdict["failure_type"]) == ("fail", "test_failure"), verdict
    assert "do not catch the mutant 'one-level'" in verdict["reason"], verdict["reason"]
    assert "test_nested_reference (passed)" in verdict["reason"], verdict["reason"]
    [run] = trial["attempts"][-1]["mutants"]  # its own record, beside the judged run's
    assert run["phase"] == "verifier" and run["termination"] == "exit", run


def test_the_reference_test_catches_the_mutant(tmp_path) -> None:
    trial = _trial(_project(tmp_path, reference=True), "local")
    verdict = trial["verdict"]
    assert verdict["outcome"] == "pass", verdict
    [check] = [c for c in verdict["checks"] if c["name"] == "mutant.one-level"]
    assert check["ok"] is True, check
    [run] = trial["attempts"][-1]["mutants"]
    assert run["exit_code"] == 1 and trial["attempts"][-1]["verifier"]["exit_code"] == 0


def test_a_right_test_written_parametrized_passes(tmp_path) -> None:
    trial = _trial(_project(tmp_path, reference=False, test=PARAMETRIZED), "local")
    verdict = trial["verdict"]
    assert verdict["outcome"] == "pass", verdict  # was: fail_to_pass ... (not run)
    [check] = [c for c in verdict["checks"] if c["name"] == "mutant.one-level"]
    assert check["ok"] is True, check


def test_a_test_that_knows_the_time_does_not_catch_the_mutant(tmp_path) -> None:
    """The mutants' runs start with the judged run, not after it: no clock tells them apart."""
    trial = _trial(_project(tmp_path, reference=False, test=LATE_ONLY), "local")
    verdict = trial["verdict"]
    assert verdict["outcome"] == "fail", verdict  # was pass: the late mutant run failed it
    assert "do not catch the mutant 'one-level'" in verdict["reason"], verdict["reason"]
    attempt = trial["attempts"][-1]
    [run] = attempt["mutants"]
    # both ran their 20 s side by side: one after the other, the second ends past 32 s
    assert abs(run["duration_s"] - attempt["verifier"]["duration_s"]) < 10, (run, attempt)


def test_a_test_that_checks_a_mark_on_the_code_does_not_catch_the_mutant(tmp_path) -> None:
    """The judged run has the starting file a mutant replaces: the two differ by it alone."""
    trial = _trial(_project(tmp_path, reference=False, test=MARKED), "local")
    verdict = trial["verdict"]
    assert verdict["outcome"] == "fail", verdict  # was pass: the mutant lacked the mark
    assert any("fieldkit/config.py" in t for t in trial["attempts"][-1]["tampering"]), trial


def test_a_test_the_starting_suite_already_makes_does_not_catch_the_mutant(tmp_path) -> None:
    trial = _trial(_project(tmp_path, reference=False, test=CYCLE_ONLY), "local")
    verdict = trial["verdict"]
    assert verdict["outcome"] == "fail", verdict  # v3's mutant lost cycle detection too
    assert "do not catch the mutant 'one-level'" in verdict["reason"], verdict["reason"]


def test_a_mutant_the_starting_suite_catches_does_not_validate(tmp_path) -> None:
    """Such a mutant proves nothing of a new test: one repeating an old test catches it."""
    root = bundled_copy(tmp_path / "proj")
    case = root / "cases" / "config-nested-test"
    mutant = case / "hidden" / "mutant_config.py"
    text = mutant.read_text()
    keep = "        _resolve(raw, found[0], found[1], stack, cache)  # still checked"
    assert keep in text
    mutant.write_text(text.replace(keep, "        pass  # no cycle check"))
    yaml_text = (case / "case.yaml").read_text()
    (case / "case.yaml").write_text(yaml_text.replace("version: 4", "version: 99", 1))
    assert harness(root, "cases", "lock").returncode == 0
    done = harness(root, "cases", "validate", "--case", "config-nested-test", timeout=600)
    assert done.returncode != 0, done.stdout
    out = done.stdout + done.stderr
    assert "mutant 'one-level' is caught by the starting tests already" in out, out
    assert "tests.test_config::test_cycle" in out, out


@pytest.mark.parametrize("backend", ["local", DOCKER])
def test_a_test_that_reads_its_mount_table_does_not_catch_the_mutant(tmp_path, backend) -> None:
    trial = _trial(_project(tmp_path, reference=False, test=MOUNTS), backend)
    verdict = trial["verdict"]
    assert verdict["outcome"] == "fail", verdict  # was pass: the mutant run's mounts said so
    assert "do not catch the mutant 'one-level'" in verdict["reason"], verdict["reason"]
