"""Pure parts of harness.env: lock parsing, uv failure classification, the red rule."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.cases.environment import Environment
from harness.env.build import classify_uv_failure
from harness.env.lock import read_lock
from harness.env.model import EnvSource
from harness.env.plan import phase_view
from harness.errors import ConfigError, InfraError
from harness.preflight import red_problem
from harness.store.records import FailureType, Outcome, Verdict
from harness.trial.validate import ValidationResult

H = "--hash=sha256:" + "a" * 64


def src(tmp_path: Path, text: str | None) -> EnvSource:
    if text is not None:
        (tmp_path / "req.lock").write_text(text)
    return EnvSource(
        spec=Environment(lock="req.lock"),
        base=tmp_path,
        file=tmp_path / "case.yaml",
        field="environment",
    )


def test_lock_with_hashes_parses(tmp_path):
    reqs = read_lock(
        src(tmp_path, f"# c\nPy_Test==8.3.3 \\\n    {H}\n    # via x\nsix==1.16.0 {H}\n")
    )
    assert [(r.name, r.version, r.line) for r in reqs] == [
        ("py-test", "8.3.3", 2),
        ("six", "1.16.0", 5),
    ]


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("pytest==8.3.3\n", "has no --hash"),
        (f"pytest>=8 {H}\n", "not pinned to one version"),
        (f"pytest==8.* {H}\n", "not pinned to one version"),
        (f"-e ./pkg {H}\n", "not allowed in a lock"),
        (f"six==1.16.0 {H}\nsix==1.16.0 {H}\n", "pinned twice"),
        ("# nothing\n", "pins no distribution"),
    ],
)
def test_bad_locks_are_config_errors_naming_the_file(tmp_path, text, needle):
    with pytest.raises(ConfigError) as exc:
        read_lock(src(tmp_path, text))
    assert needle in str(exc.value)
    assert "req.lock" in str(exc.value) or "case.yaml" in str(exc.value)


def test_missing_lock_names_the_field(tmp_path):
    with pytest.raises(ConfigError) as exc:
        read_lock(src(tmp_path, None))
    assert "[environment.lock]" in str(exc.value)


@pytest.mark.parametrize("value", ["banana", ">=3.11,<", "3.x"])
def test_python_constraint_must_be_a_specifier(value):
    with pytest.raises(ValueError, match="version constraint"):
        Environment(python=value, lock="x.lock")


def test_bare_python_version_means_the_series():
    assert Environment(python="3.11", lock="x").python == "==3.11.*"
    assert Environment(python="3.11.2", lock="x").python == "==3.11.2"


@pytest.mark.parametrize(
    ("stderr", "kind", "needle"),
    [
        (
            b"error: Failed to download `six==1.16.0`\n"
            b"  Caused by: Hash mismatch for `six==1.16.0`",
            ConfigError,
            "hash mismatch for six==1.16.0",
        ),
        (
            b"error: Request failed after 3 retries\n"
            b"  Caused by: tcp connect error: Connection refused",
            InfraError,
            "package index cannot be reached",
        ),
        (b"x No solution found when resolving dependencies", ConfigError, "cannot be installed"),
        (b"error: something else", InfraError, "failed"),
    ],
)
def test_uv_failures_are_classified(tmp_path, stderr, kind, needle):
    err = classify_uv_failure(src(tmp_path, "x"), "building", stderr)
    assert type(err) is kind
    assert needle in str(err)
    if isinstance(err, InfraError) and "reached" in needle:
        assert err.reason == "package_index_unreachable"


def _result(red: Verdict, excerpt: str = "") -> ValidationResult:
    green = Verdict(outcome=Outcome.PASS)
    return ValidationResult("c", "ok", red, green, "", excerpt)


def test_red_counts_only_when_tests_ran_and_failed():
    failed = Verdict(outcome=Outcome.FAIL, failure_type=FailureType.TEST_FAILURE, tests_run=3)
    assert red_problem(_result(failed, "FAILED tests/test_x.py::test_a")) is None
    assert "could not be collected" in red_problem(
        _result(
            failed, "ERROR collecting tests/test_x.py\nModuleNotFoundError: No module named 'six'"
        )
    )
    # A test that fails on a missing module (what the fix adds) is a test failure, not a
    # collection error; a runner that died importing one is not.
    missing = (
        "    def test_moves():\n>       import six.moves._dummy_thread\n"
        "E   ModuleNotFoundError: No module named 'six.moves._dummy_thread'\n"
        "FAILED test_six.py::test_moves - ModuleNotFoundError: No module named 'six.moves'"
    )
    assert red_problem(_result(failed, missing)) is None
    assert "could not be collected" in red_problem(
        _result(failed, "Traceback (most recent call last):\nModuleNotFoundError: No module")
    )
    none_ran = Verdict(outcome=Outcome.FAIL, failure_type=FailureType.TEST_FAILURE, tests_run=0)
    assert "no test ran" in red_problem(_result(none_ran))
    no_tests = Verdict(outcome=Outcome.FAIL, failure_type=FailureType.NO_TESTS)
    assert "wrong reason" in red_problem(_result(no_tests))
    broken = Verdict(outcome=Outcome.EVALUATOR_ERROR, reason="exit 127")
    assert "wrong reason" in red_problem(_result(broken))


def test_phase_views_keep_the_agent_env_off_path_and_out_of_the_verifier():
    from harness.env.model import BuiltEnv, EnvIdentity

    ident = EnvIdentity(
        implementation="cpython", version="3.11.2", soabi="s", platform="p", distributions={}
    )
    case = BuiltEnv(
        digest="sha256:" + "1" * 64,
        identity=ident,
        prefix="/c",
        interpreter="/usr/bin/python3",
        fingerprint="f",
        build_key="k",
    )
    agent = case.model_copy(update={"digest": "sha256:" + "2" * 64, "prefix": "/a"})
    view = phase_view(case, agent, "agent")
    assert view is not None
    assert view.path_prefix == ("/opt/harness/env/111111111111/bin",)
    assert {(m.source, m.target) for m in view.mounts} == {
        ("/c", "/opt/harness/env/111111111111"),
        ("/a", "/opt/harness/agent-env"),
    }
    verifier = phase_view(case, agent, "verifier")
    assert verifier is not None and [m.source for m in verifier.mounts] == ["/c"]
    in_image = phase_view(case, None, "verifier", in_image=True)
    assert in_image is not None and in_image.mounts == () and in_image.path_prefix
    assert phase_view(None, None, "verifier") is None
