"""Declared environments end to end: built with uv, mounted read-only, preflighted, pinned.

Every test runs the real CLI (or the real trial function) on a tiny project whose cases
declare a Python environment; builds go to a private harness cache (uv's own cache is
shared, so a build takes about a second).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from support import harness, make_project

from harness.cases.environment import Environment
from harness.cases.load import load_case
from harness.env.build import build_env, uv_binary
from harness.env.model import BuiltEnv, EnvSource
from harness.project import AgentSpec, Release
from harness.sandbox.local import LocalSandbox
from harness.store.records import Arm, Outcome, TrialKey
from harness.trial.execute import run_trial
from harness.trial.spec import TrialSpec

pytestmark = pytest.mark.integration

UV_CACHE = os.environ.get("UV_CACHE_DIR") or str(Path.home() / ".cache" / "uv")


def _compile(tmp: Path, name: str, pins: str) -> Path:
    """Lock ``pins`` with uv (hashes included) into ``tmp/name``."""
    req = tmp / f"{name}.in"
    req.write_text(pins + "\n")
    out = tmp / name
    subprocess.run(
        [
            uv_binary(),
            "pip",
            "compile",
            "-q",
            "--generate-hashes",
            "--no-header",
            "--python",
            "/usr/bin/python3",
            str(req),
            "-o",
            str(out),
        ],
        check=True,
        env={**os.environ, "UV_CACHE_DIR": UV_CACHE},
    )
    return out


@pytest.fixture(scope="module")
def locks(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    tmp = tmp_path_factory.mktemp("locks")
    return {
        "ini2.0": _compile(tmp, "a.lock", "iniconfig==2.0.0").read_text(),
        "ini2.1": _compile(tmp, "b.lock", "iniconfig==2.1.0").read_text(),
    }


def run(root: Path, *args: str, extra_env: dict[str, str] | None = None):
    """The CLI in project ``root`` with a private harness cache beside it."""
    cache = {"XDG_CACHE_HOME": str(root.parent / "cache"), "UV_CACHE_DIR": UV_CACHE}
    return harness(root, *args, timeout=600, env={**cache, **(extra_env or {})})


def run_release(root: Path, release: str = "good", *more: str, **kw: Any):
    """``harness run`` of ``release`` with one trial per case and no report."""
    return run(root, "run", "--release", release, "--k", "1", "--no-report", *more, **kw)


def env_project(tmp: Path, lock_text: str, *, n: int = 1, python: str = ">=3.11") -> Path:
    root = make_project(tmp / "proj", n_cases=n)
    (root / "env").mkdir()
    (root / "env" / "requirements.lock").write_text(lock_text)
    text = (root / "harness.yaml").read_text()
    text = text.replace(
        "policy: policy.yaml\n",
        f'policy: policy.yaml\nenvironment: {{python: "{python}", lock: env/requirements.lock}}\n',
    )
    (root / "harness.yaml").write_text(text)
    return root


def add_release(root: Path, name: str, body: str) -> None:
    """Add release ``name`` with the YAML lines ``body`` (indented 4) to harness.yaml."""
    path = root / "harness.yaml"
    path.write_text(path.read_text().replace("  sleepy:\n", f"  {name}:\n{body}  sleepy:\n"))


def lock_cases(root: Path) -> None:
    done = run(root, "cases", "lock")
    assert done.returncode == 0, done.stderr


def locked_env_project(tmp: Path, lock_text: str, **kw: Any) -> Path:
    """:func:`env_project` with its cases locked, ready to run."""
    root = env_project(tmp, lock_text, **kw)
    lock_cases(root)
    return root


def trials(root: Path) -> list[Path]:
    return sorted((root / ".harness").glob("runs/*/trials/*.json"))


def test_bundled_style_run_records_env_digest_in_system_and_trials(tmp_path, locks):
    root = locked_env_project(tmp_path, locks["ini2.0"])
    done = run_release(root)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "preflight: validating add-0 in environment" in done.stderr
    shown = json.loads(run(root, "show", "--json").stdout)
    env_digest = shown["release"]["system"]["environments"]["add-0"]
    assert env_digest.startswith("sha256:")
    assert [t["environment_digest"] for t in shown["trials"]] == [env_digest]
    # A second run reuses the build and the preflight proof.
    again = run_release(root, "good", "--fresh")
    assert again.returncode == 0, again.stderr
    assert "preflight" not in again.stderr


def test_changed_pin_gives_new_system_digest_and_run_id(tmp_path, locks):
    root = locked_env_project(tmp_path, locks["ini2.0"])
    first = run_release(root)
    assert first.returncode == 0, first.stderr
    (root / "env" / "requirements.lock").write_text(locks["ini2.1"])
    second = run_release(root)
    assert second.returncode == 0, second.stderr
    runs = sorted(p.name for p in (root / ".harness" / "runs").iterdir())
    assert len(runs) == 2, runs
    shown = [json.loads(run(root, "show", r, "--json").stdout)["release"] for r in runs]
    assert shown[0]["system_digest"] != shown[1]["system_digest"]
    assert shown[0]["system"]["environments"] != shown[1]["system"]["environments"]


def test_undeclared_package_does_not_pass(tmp_path, locks):
    """The verifier imports six: the host's Python has it, the declared environment not."""
    root = env_project(tmp_path, locks["ini2.0"])
    hidden = root / "cases" / "add-0" / "hidden" / "verify_hidden.py"
    hidden.write_text("import six\n" + hidden.read_text())
    lock_cases(root)
    done = run_release(root)
    assert done.returncode == 4, done.stdout + done.stderr
    assert "case add-0" in done.stderr and "does not validate in environment" in done.stderr
    assert "No module named" in done.stderr and "six" in done.stderr
    assert trials(root) == []


def test_verifier_runner_missing_is_refused_before_trials_and_evaluator_error_in_trial(
    tmp_path, locks, monkeypatch
):
    root = env_project(tmp_path, locks["ini2.0"])
    case_yaml = root / "cases" / "add-0" / "case.yaml"
    case_yaml.write_text(
        case_yaml.read_text().replace("[python3, verify_hidden.py]", "[no-such-test-runner, -q]")
    )
    lock_cases(root)
    done = run_release(root)
    assert done.returncode == 4, done.stdout + done.stderr
    assert "case add-0" in done.stderr and "no trial was run" in done.stderr
    assert trials(root) == []
    # Past the preflight (a trial run on its own), a runner that cannot start is the
    # evaluator's error, never the candidate's failure.
    built = build_project_env(root, monkeypatch)
    out = run_trial(_spec(root / "cases" / "add-0", built), LocalSandbox(tmp_path / "sb"))
    assert out.record.verdict.outcome is Outcome.EVALUATOR_ERROR, out.record.verdict
    assert "127" in out.record.verdict.reason


def build_project_env(root: Path, monkeypatch: pytest.MonkeyPatch) -> BuiltEnv:
    """Build the project's declared environment in this process, into ``run``'s cache."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(root.parent / "cache"))
    monkeypatch.delenv("HARNESS_CACHE_DIR", raising=False)
    src = EnvSource(
        spec=Environment(lock="env/requirements.lock"),
        base=root,
        file=root / "harness.yaml",
        field="environment",
    )
    return build_env(src)


def _spec(case_dir: Path, built, release: Release | None = None) -> TrialSpec:
    lc = load_case(case_dir)
    return TrialSpec(
        key=TrialKey(arm=Arm.CANDIDATE, release="good", case_id=lc.id, case_version=1, trial=0),
        project_root=str(case_dir.parent.parent),
        case_dir=str(case_dir),
        case_digest=lc.digest,
        release=release or Release(agent=AgentSpec(adapter="simulated")),
        system_digest="sha256:x",
        backend="local",
        environment=built,
    )


def test_environment_changed_since_build_is_evaluator_error(tmp_path, locks, monkeypatch):
    root = env_project(tmp_path, locks["ini2.0"])
    built = build_project_env(root, monkeypatch)
    ok = run_trial(_spec(root / "cases" / "add-0", built), LocalSandbox(tmp_path / "sb"))
    assert ok.record.verdict.outcome is Outcome.PASS, ok.record.verdict
    assert ok.record.environment_digest == built.digest
    site = next(Path(built.prefix).glob("lib/python3*/site-packages"))
    (site / "iniconfig" / "__init__.py").write_text("raise SystemExit('tampered')\n")
    out = run_trial(_spec(root / "cases" / "add-0", built), LocalSandbox(tmp_path / "sb"))
    assert out.record.verdict.outcome is Outcome.EVALUATOR_ERROR, out.record.verdict
    assert "changed since it was built" in out.record.verdict.reason


def test_candidate_breaking_its_own_imports_in_a_validated_env_fails(tmp_path, locks):
    root = env_project(tmp_path, locks["ini2.0"])
    add_release(
        root,
        "breaker",
        "    agent: {adapter: command, command: [sh, -c, "
        "\"printf 'import not_a_module\\\\n' | cat - $HARNESS_WORKSPACE/calc.py > /tmp/c && "
        'cp /tmp/c $HARNESS_WORKSPACE/calc.py"]}\n',
    )
    lock_cases(root)
    done = run_release(root, "breaker")
    shown = json.loads(run(root, "show", "--json").stdout)
    [trial] = shown["trials"]
    assert trial["verdict"]["outcome"] == "fail", trial["verdict"]
    assert trial["verdict"]["failure_type"] == "test_failure"
    assert done.returncode in (0, 1, 3), done.stderr  # judged, never blocked


@pytest.mark.parametrize(
    ("mutate", "needle"),
    [
        ("nohash", "has no --hash"),
        ("badhash", "hash mismatch for iniconfig"),
        ("python", "environment.python"),
    ],
)
def test_bad_environment_input_is_a_named_error_and_no_trial(tmp_path, locks, mutate, needle):
    lock = locks["ini2.0"]
    python = ">=3.11"
    if mutate == "nohash":
        lock = "iniconfig==2.0.0\n"
    elif mutate == "badhash":
        lines = lock.splitlines()
        lock = (
            "\n".join(
                line.split("sha256:")[0]
                + "sha256:"
                + "0" * 64
                + (" \\" if line.endswith("\\") else "")
                if "sha256:" in line
                else line
                for line in lines
            )
            + "\n"
        )
    elif mutate == "python":
        python = ">=3.99"
    root = locked_env_project(tmp_path, lock, python=python)
    done = run_release(root)
    assert done.returncode == 2, done.stdout + done.stderr
    assert needle in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
    assert "harness.yaml" in done.stderr or "requirements.lock" in done.stderr
    assert not (root / ".harness" / "runs").exists() or trials(root) == []


def test_unreachable_package_index_blocks_with_exit_4(tmp_path, locks):
    root = locked_env_project(tmp_path, locks["ini2.1"])
    done = run_release(
        root,
        extra_env={
            "UV_INDEX_URL": "http://127.0.0.1:9/simple",
            "UV_DEFAULT_INDEX": "http://127.0.0.1:9/simple",
            "UV_NO_CACHE": "1",
            "UV_OFFLINE": "0",
        },
    )
    assert done.returncode == 4, done.stdout + done.stderr
    assert "package index cannot be reached" in done.stderr, done.stderr
    assert trials(root) == []


@pytest.mark.docker
def test_same_env_digest_and_verdicts_on_local_and_docker(tmp_path, locks):
    """The verifier asserts it runs under the declared environment's interpreter."""
    root = env_project(tmp_path, locks["ini2.0"], n=2)
    for i in range(2):
        hidden = root / "cases" / f"add-{i}" / "hidden" / "verify_hidden.py"
        hidden.write_text(
            "import sys\nassert sys.prefix.startswith('/opt/harness/env/'), sys.prefix\n"
            "import iniconfig\n" + hidden.read_text()
        )
    lock_cases(root)
    seen = {}
    for backend in ("local", "docker"):
        done = run_release(root, "good", "--backend", backend)
        assert done.returncode == 0, done.stdout + done.stderr
        runs = sorted((root / ".harness" / "runs").iterdir(), key=lambda p: p.stat().st_mtime)
        shown = json.loads(run(root, "show", runs[-1].name, "--json").stdout)
        seen[backend] = (
            shown["release"]["system"]["environments"],
            sorted(
                (t["key"]["case_id"], t["verdict"]["outcome"], t["environment_digest"])
                for t in shown["trials"]
            ),
        )
    assert seen["local"] == seen["docker"]


AGENT = (
    "set -e; "
    '/opt/harness/agent-env/bin/python -c "from importlib.metadata import version as v; '
    "assert v('iniconfig') == '2.1.0', v('iniconfig')\"; "
    'python3 -c "from importlib.metadata import version as v; '
    "assert v('iniconfig') == '2.0.0', v('iniconfig')\"; "
    "sed -i 's/a - b/a + b/' $HARNESS_WORKSPACE/calc.py"
)


def test_agent_environment_only_in_agent_phase_case_env_first_on_path(tmp_path, locks):
    root = env_project(tmp_path, locks["ini2.0"])
    (root / "env" / "agent.lock").write_text(locks["ini2.1"])
    add_release(
        root,
        "withenv",
        "    agent:\n"
        "      adapter: command\n"
        f"      command: [sh, -c, {json.dumps(AGENT)}]\n"
        "      environment: {lock: env/agent.lock}\n",
    )
    hidden = root / "cases" / "add-0" / "hidden" / "verify_hidden.py"
    hidden.write_text(
        "import os\nassert not os.path.exists('/opt/harness/agent-env'), 'agent env leaked'\n"
        + hidden.read_text()
    )
    lock_cases(root)
    done = run_release(root, "withenv")
    shown = json.loads(run(root, "show", "--json").stdout)
    [trial] = shown["trials"]
    assert trial["verdict"]["outcome"] == "pass", (trial["verdict"], done.stderr)
    system = shown["release"]["system"]
    assert trial["agent_environment_digest"] == system["agent_environment"]
    assert trial["environment_digest"] == system["environments"]["add-0"]
    assert system["agent_environment"] != system["environments"]["add-0"]


def test_env_lock_writes_hashed_pins_and_env_build_prints_the_digest(tmp_path, locks):
    root = env_project(tmp_path, locks["ini2.0"])
    (root / "env" / "requirements.in").write_text("iniconfig==2.1.0\n")
    text = (root / "harness.yaml").read_text()
    (root / "harness.yaml").write_text(
        text.replace("lock: env/requirements.lock}", "lock: env/requirements.lock, "
                     "requirements: env/requirements.in}")
    )  # fmt: skip
    done = run(root, "env", "lock")
    assert done.returncode == 0, done.stderr
    assert "locked env/requirements.lock" in done.stdout
    lock = (root / "env" / "requirements.lock").read_text()
    assert "iniconfig==2.1.0" in lock and "--hash=sha256:" in lock
    built = run(root, "env", "build")
    assert built.returncode == 0, built.stderr
    assert "env/requirements.lock python 3." in built.stdout
    (root / "env" / "requirements.lock").write_text("iniconfig==2.1.0\n")
    refused = run(root, "env", "build")
    assert refused.returncode == 2 and "has no --hash" in refused.stderr


def test_env_lock_on_a_clean_checkout_reproduces_the_shipped_locks_byte_for_byte(tmp_path):
    repo = Path(__file__).resolve().parents[2]
    files = subprocess.run(["git", "ls-files", "harness.yaml", "env", "examples", "cases",
                            "orchestration", "policy.yaml", "baselines"], cwd=repo,
                           capture_output=True, text=True, check=True).stdout.split()  # fmt: skip
    for name in files:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_bytes((repo / name).read_bytes())
    shipped = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("requirements.lock"))
    assert len(shipped) >= 2
    done = run(tmp_path, "env", "lock")
    assert done.returncode == 0, done.stderr
    for rel in shipped:
        assert (tmp_path / rel).read_bytes() == (repo / rel).read_bytes(), f"{rel} changed"
