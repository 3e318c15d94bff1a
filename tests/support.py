"""Test support: a tiny real project on disk (fast verifier) and a JUnit builder."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

from harness.system import SystemDefinition

VERIFY = textwrap.dedent(
    """\
    import os, sys
    sys.path.insert(0, ".")
    from calc import add
    ok = add(2, 2) == 4
    os.makedirs("reports", exist_ok=True)
    failure = "" if ok else '<failure message="add(2,2) != 4"/>'
    body = '<testcase classname="tests.hidden" name="test_add">' + failure + "</testcase>"
    open("reports/junit.xml", "w").write('<testsuite tests="1">' + body + "</testsuite>")
    sys.exit(0 if ok else 1)
    """
)

CASE = textwrap.dedent(
    """\
    id: {id}
    version: 1
    title: add must add
    request: Fix `add` in calc.py.
    repo: {{kind: folder, path: repo}}
    contract:
      agent: {{timeout_seconds: 30, memory_mb: 256, pids: 64, disk_mb: 64}}
      verifier: {{timeout_seconds: 30, memory_mb: 256, pids: 64, disk_mb: 64}}
    verifier:
      command: [python3, verify_hidden.py]
      artifacts:
        - path: reports/junit.xml
          rule: junit
          min_tests: 1
          fail_to_pass: [tests.hidden::test_add]
      hidden:
        - {{src: hidden/verify_hidden.py, dest: verify_hidden.py}}
    reference: {{patch: reference.patch}}
    """
)

PATCH = textwrap.dedent(
    """\
    --- a/calc.py
    +++ b/calc.py
    @@ -1,2 +1,2 @@
     def add(a, b):
    -    return a - b
    +    return a + b
    """
)

PROJECT = textwrap.dedent(
    """\
    task_set: mini
    policy: policy.yaml
    releases:
      good:
        agent: {adapter: simulated, simulated: {skill: {default: 1.0}}}
        components: {model: demo, orchestration: [prompt.txt]}
      bad:
        agent: {adapter: simulated, simulated: {skill: {default: 0.0}, overclaim: 1.0}}
        components: {model: demo}
      tamper:
        agent:
          adapter: command
          command:
            - sh
            - -c
            - |
              cd "$HARNESS_WORKSPACE"
              mkdir -p reports
              printf '<testsuite tests="1"><testcase classname="tests.hidden" name="test_add"/></testsuite>' > reports/junit.xml
              printf 'import sys\\nsys.exit(0)\\n' > verify_hidden.py
              echo yes > PASSED
              printf 'import sys\\nsys.exit(0)\\n' > {project}/cases/add-0/hidden/verify_hidden.py 2>/dev/null
              printf '{"status": "submitted", "claimed_success": true}' > "$HARNESS_RESULT"
              true
      sleepy:
        agent: {adapter: command, command: [sh, -c, "sleep 8; true"]}
        retry: {infra_retries: 0}
      learner:
        agent: {adapter: simulated, simulated: {skill: {default: 0.3}, learns_from_feedback: 1.0}}
        retry: {max_attempts: 2}
      learner-no-retry:
        agent: {adapter: simulated, simulated: {skill: {default: 0.3}, learns_from_feedback: 1.0}}
      coin:
        agent: {adapter: simulated, simulated: {skill: {default: 0.5}}}
    """
)


def make_project(root: Path, n_cases: int = 3) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    # The tamper agent names the host's project folder literally, as an attacker would.
    (root / "harness.yaml").write_text(PROJECT.replace("{project}", str(root.resolve())))
    (root / "prompt.txt").write_text("You are a careful engineer.\n")
    (root / "policy.yaml").write_text('version: "1"\n')
    for i in range(n_cases):
        cid = f"add-{i}"
        d = root / "cases" / cid
        (d / "repo").mkdir(parents=True)
        (d / "repo" / "calc.py").write_text("def add(a, b):\n    return a - b\n")
        (d / "hidden").mkdir()
        (d / "hidden" / "verify_hidden.py").write_text(VERIFY)
        (d / "reference.patch").write_text(PATCH)
        (d / "case.yaml").write_text(CASE.format(id=cid))
    return root


REPO = Path(__file__).resolve().parents[1]


def bundled_copy(dest: Path) -> Path:
    """Copy the bundled example project (tracked files, no harness code) to ``dest``."""
    files = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True,
                           check=True).stdout.split()  # fmt: skip
    for name in files:
        if name.startswith(("harness/", "tests/", "bench/", "docs/")):
            continue
        (dest / name).parent.mkdir(parents=True, exist_ok=True)
        (dest / name).write_bytes((REPO / name).read_bytes())
    return dest


def add_command_release(root: Path, name: str, files: list[str]) -> None:
    """Add release ``name`` to ``root``'s harness.yaml: ``sh {agent}/agents/run.sh`` with
    the agent ``files`` (project-relative), no model."""
    release = (
        f"  {name}:\n"
        "    agent:\n"
        '      command: [sh, "{agent}/agents/run.sh"]\n'
        f"      files: [{', '.join(files)}]\n"
        "    components: {model: none}\n"
    )
    text = (root / "harness.yaml").read_text()
    (root / "harness.yaml").write_text(text.replace("releases:\n", "releases:\n" + release, 1))


def harness(
    root: Path, *args: str, timeout: float = 300, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run the CLI in ``root`` without the caller's ``HARNESS_*`` variables, plus ``env``."""
    full = {k: v for k, v in os.environ.items() if not k.startswith("HARNESS_")}
    return subprocess.run(
        [sys.executable, "-m", "harness.cli", *args],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**full, **(env or {})},
        check=False,
    )


def junit(*cases: tuple[str, bool]) -> bytes:
    body = "".join(
        f'<testcase classname="tests.test_hidden" name="{n}">'
        + ("" if ok else '<failure message="assert 41 == 42">E assert 41 == 42</failure>')
        + "</testcase>"
        for n, ok in cases
    )
    return f'<?xml version="1.0"?><testsuite tests="{len(cases)}">{body}</testsuite>'.encode()


def system_definition(release: str = "cand", **over: object) -> SystemDefinition:
    """A small valid system definition for records built by hand."""
    fields: dict[str, object] = {
        "release": release,
        "agent": {"adapter": "simulated"},
        "components": {"model": "m"},
        "orchestration_digests": {},
        "retry": {"max_attempts": 1},
        "task_set_digest": "sha256:t",
        "harness_version": "0",
    }
    return SystemDefinition.model_validate(fields | over)
