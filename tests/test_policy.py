"""harness.gate.policy: loading, validation errors, digests and the refusal of a changed policy."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.errors import ConfigError
from harness.gate.policy import (
    BaselinePolicy,
    Policy,
    PolicyChangedError,
    load_policy,
    policy_digest,
    verify_policy,
)

ROOT = Path(__file__).resolve().parent.parent

MINIMAL = "version: 3\nalpha: 0.05\n"


def write(tmp_path: Path, text: str, name: str = "policy.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_bundled_policy_loads_with_its_digests() -> None:
    loaded = load_policy(ROOT / "policy.yaml")
    assert loaded.policy.version == "1"
    assert loaded.digest == policy_digest(loaded.policy)
    assert loaded.digest.startswith("sha256:") and loaded.file_digest.startswith("sha256:")
    assert loaded.digest != loaded.file_digest


def test_defaults_and_int_version(tmp_path: Path) -> None:
    policy = load_policy(write(tmp_path, MINIMAL)).policy
    assert policy.version == "3"
    assert policy.thresholds.pass_rate_drop == 0.05
    assert policy.baseline.mode == "all"


@pytest.mark.parametrize(
    ("text", "field", "line", "expect"),
    [
        ("version: 1\nalpha: 0.05\nthreshold:\n  x: 1\n", "threshold", 3, "unknown key"),
        (
            "version: 1\nthresholds:\n  pass_rate_drop: 1.5\n",
            "thresholds.pass_rate_drop",
            3,
            "less than or equal to 1",
        ),
        ("version: 1\nalpha: 0.7\n", "alpha", 2, "less than 0.5"),
        ("alpha: 0.05\n", "version", None, "required field is missing"),
        ("version: 1\nbaseline:\n  mode: sample\n", "baseline", 2, "needs sample_size"),
        ("version: 1\ncritical_cases: [a, b, a]\n", None, None, "more than once"),
        (
            "version: 1\ninfra_errors:\n  warn_above: 0.5\n  block_above: 0.1\n",
            "infra_errors",
            2,
            "block_above must be >= warn_above",
        ),
        ("version: true\n", "version", 1, "string"),
    ],
)
def test_bad_input_names_file_field_and_expectation(
    tmp_path: Path, text: str, field: str | None, line: int | None, expect: str
) -> None:
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as info:
        load_policy(path)
    err = info.value
    assert err.file == str(path)
    assert err.field == field
    if line is not None:
        assert err.line == line
    assert expect in str(err)


def test_malformed_and_missing_files(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="malformed YAML"):
        load_policy(write(tmp_path, "version: [1\n"))
    with pytest.raises(ConfigError, match="file not found"):
        load_policy(tmp_path / "nope.yaml")
    with pytest.raises(ConfigError, match="mapping at the top level"):
        load_policy(write(tmp_path, "- 1\n"))


def test_digest_ignores_layout_but_file_digest_does_not(tmp_path: Path) -> None:
    a = load_policy(write(tmp_path, MINIMAL, "a.yaml"))
    b = load_policy(write(tmp_path, "# a comment\nalpha:   0.05\nversion: '3'\n", "b.yaml"))
    assert a.digest == b.digest
    assert a.file_digest != b.file_digest
    c = load_policy(write(tmp_path, "version: 3\nalpha: 0.04\n", "c.yaml"))
    assert c.digest != a.digest
    # defaults are part of the content: writing one out explicitly changes nothing
    d = load_policy(write(tmp_path, MINIMAL + "thresholds:\n  pass_rate_drop: 0.05\n", "d.yaml"))
    assert d.digest == a.digest


def test_verify_policy_refuses_a_changed_policy(tmp_path: Path) -> None:
    path = write(tmp_path, MINIMAL)
    recorded = load_policy(path)
    assert verify_policy(load_policy(path), recorded.digest, recorded.file_digest) == ()
    path.write_text(MINIMAL + "# tuned after looking\n", encoding="utf-8")
    notes = verify_policy(load_policy(path), recorded.digest, recorded.file_digest)
    assert len(notes) == 1 and "edited" in notes[0]
    path.write_text("version: 3\nalpha: 0.2\n", encoding="utf-8")
    with pytest.raises(PolicyChangedError) as info:
        verify_policy(load_policy(path), recorded.digest, recorded.file_digest)
    message = str(info.value)
    assert str(path) in message
    assert recorded.digest[7:19] in message and "changed after the run started" in message
    assert isinstance(info.value, ConfigError)


def test_baseline_sample_is_seeded_and_bounded() -> None:
    ids = [f"c{i:02d}" for i in range(20)]
    every = BaselinePolicy()
    assert every.sample(reversed(ids)) == tuple(ids)
    s1 = BaselinePolicy(mode="sample", sample_size=5, seed=1)
    assert s1.sample(ids) == s1.sample(list(reversed(ids)))  # order of input is irrelevant
    assert len(s1.sample(ids)) == 5 and set(s1.sample(ids)) <= set(ids)
    assert BaselinePolicy(mode="sample", sample_size=5, seed=2).sample(ids) != s1.sample(ids)
    assert BaselinePolicy(mode="sample", sample_size=50).sample(ids) == tuple(ids)


def test_policy_is_frozen() -> None:
    policy = Policy(version="1")
    with pytest.raises(ValueError, match="frozen"):
        policy.alpha = 0.5  # type: ignore[misc]
