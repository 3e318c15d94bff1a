"""The CI templates in examples/ci/ run: every step in order, in fresh clones, job after job.

Each job starts from a new ``git clone`` of this repository (plus the working tree's
uncommitted files, so an edited template is what gets tested) with CI-like variables, runs
the template's shell steps as the CI service would (GitHub: one ``bash -eo pipefail`` per
``run:`` step, ``$GITHUB_OUTPUT`` / ``$GITHUB_ENV`` / ``$GITHUB_PATH`` /
``$GITHUB_STEP_SUMMARY`` honoured, ``if: always()`` steps run after a failure; GitLab:
``before_script`` + ``script`` in one shell, ``after_script`` in another, the exit code
judged against ``allow_failure``), and replaces each CI service by its local meaning:

==============================  ==========================================================
``actions/checkout``            nothing: the clone is the checkout
``actions/cache/restore|save``  copy the listed paths from / to a folder per cache key
``cache:`` (GitLab)             (GitHub keys immutable, restore-keys by prefix, newest
                                first; GitLab keys overwritten, ``fallback_keys`` in order)
``mikepenz/action-junit-report``  validate the files against the JUnit schema, read them
``reports: junit:`` (GitLab)    with junitparser
``actions/upload-artifact``     copy the files to an artifact folder (a path that is a
``artifacts:`` (GitLab)         symlink to a folder uploads nothing, as actions/upload-
                                artifact#92 does)
the GitHub / GitLab API         a loopback HTTP server recording the requests
==============================  ==========================================================

The harness is not pip-installed in the test (minutes, network): ``HARNESS_USE_INSTALLED``
makes the install step use the ``harness`` on ``PATH``, a wrapper running the clone's own
package (``PYTHONPATH`` = the clone) with this interpreter. ``HARNESS_K`` is 1 or 2 instead
of 5 to keep the run short.
"""

from __future__ import annotations

import http.server
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import xmlschema
import yaml
from junitparser import JUnitXml

pytestmark = [pytest.mark.slow, pytest.mark.integration]

ROOT = Path(__file__).resolve().parents[2]
TEMPLATES = Path("examples", "ci")  # in the clone: what the CI service checks out
SCHEMA = xmlschema.XMLSchema(str(ROOT / "tests" / "data" / "junit.xsd"))
STEP_TIMEOUT = 900  # a whole gate on 2 busy cores; far above the ~20 s it takes


# -- the pieces every job shares ----------------------------------------------------------


def fresh_clone(dest: Path) -> Path:
    """A clone of this repository with the working tree's files laid over it."""
    subprocess.run(["git", "clone", "-q", str(ROOT), str(dest)], check=True, timeout=300)
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        check=True,
        timeout=60,
    ).stdout
    for name in filter(None, listed.decode().split("\0")):
        src = ROOT / name
        if src.is_file() and not src.is_symlink():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / name)
    return dest


class Cache:
    """The CI service's cache: a folder per key, listed oldest first."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.keys: list[str] = []

    def folder(self, key: str) -> Path:
        return self.root / urllib.parse.quote(key, safe="")

    def save(self, key: str, clone: Path, paths: list[str], *, immutable: bool) -> bool:
        if key in self.keys and immutable:
            return False
        dest = self.folder(key)
        shutil.rmtree(dest, ignore_errors=True)
        for p in paths:
            src = clone / p
            if src.is_dir():
                shutil.copytree(src, dest / p, symlinks=True)
        self.keys = [k for k in self.keys if k != key] + [key]
        return True

    def restore(self, key: str, prefixes: list[str], clone: Path, paths: list[str]) -> str | None:
        found = key if key in self.keys else None
        for prefix in prefixes if found is None else ():
            newest = [k for k in reversed(self.keys) if k.startswith(prefix)]
            if newest:
                found = newest[0]
                break
        if found is not None:
            for p in paths:
                src = self.folder(found) / p
                if src.is_dir():
                    shutil.copytree(src, clone / p, symlinks=True, dirs_exist_ok=True)
        return found


def upload(clone: Path, paths: list[str], dest: Path) -> list[str]:
    """Copy what an artifact uploader would take; returns the uploaded names."""
    taken: list[str] = []
    for p in paths:
        src = clone / p
        if src.is_symlink() or not src.exists():
            continue  # a symlink to a folder uploads nothing (actions/upload-artifact#92)
        files = [src] if src.is_file() else sorted(f for f in src.rglob("*") if f.is_file())
        for f in files:
            rel = f.relative_to(src if src.is_dir() else src.parent)
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(f, dest / rel)
            taken.append(str(rel))
    return taken


def check_junit(path: Path) -> JUnitXml:
    """What a CI JUnit reader needs: valid against the schema, readable by junitparser."""
    SCHEMA.validate(str(path))
    return JUnitXml.fromfile(str(path))


@dataclass
class Api:
    """A loopback stand-in for the GitHub / GitLab REST API."""

    status: int = 201
    requests: list[dict[str, Any]] = field(default_factory=list)
    url: str = ""


@pytest.fixture
def api() -> Iterator[Api]:
    state = Api()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            state.requests.append(
                {"path": self.path, "headers": dict(self.headers), "body": body.decode()}
            )
            reply = b'{"id": 1}' if state.status < 400 else b'{"message": "Forbidden"}'
            self.send_response(state.status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(reply)))
            self.end_headers()
            self.wfile.write(reply)

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    state.url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()


def base_env(clone: Path, tools: Path) -> dict[str, str]:
    """The machine's environment without CI or harness variables, the clone's harness first."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("HARNESS_", "GITHUB_", "CI_", "GITLAB_", "RUNNER_"))
        and k not in ("CI", "PYTHONPATH")
    }
    tools.mkdir(parents=True, exist_ok=True)
    wrapper = tools / "harness"
    wrapper.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m harness.cli "$@"\n')
    wrapper.chmod(0o755)
    env["PATH"] = f"{tools}:{env['PATH']}"
    env["PYTHONPATH"] = str(clone)  # what `pip install .` of this clone would give
    return env


def bash(script: str, cwd: Path, env: dict[str, str], path: Path) -> tuple[int, str]:
    path.write_text(script)
    done = subprocess.run(
        ["bash", "--noprofile", "--norc", "-eo", "pipefail", str(path)],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=STEP_TIMEOUT,
        check=False,
    )
    return done.returncode, done.stdout + done.stderr


# -- GitHub Actions -----------------------------------------------------------------------

EXPR = re.compile(r"\$\{\{\s*(.*?)\s*\}\}")


@dataclass
class GitHubJob:
    """One run of the workflow's job: the outcome of every step, the files it left."""

    clone: Path
    steps: list[tuple[str, str, int | None]]  # (name, ran|skipped, exit code)
    log: str
    exit_code: int  # the first failing step's, 0 when the job succeeded
    summary: str
    artifact: Path
    outputs: dict[str, dict[str, str]]


def run_github_job(
    tmp: Path, n: int, cache: Cache, env_over: dict[str, str], context: dict[str, str]
) -> GitHubJob:
    """Run ``examples/ci/github-actions.yml``'s job in a fresh clone (job number ``n``)."""
    work = tmp / f"job{n}"
    clone = fresh_clone(work / "repo")
    workflow = yaml.safe_load((clone / TEMPLATES / "github-actions.yml").read_text())
    (job,) = workflow["jobs"].values()
    # What `bash -eo pipefail` below models: GitHub's command for `shell: bash`.
    assert workflow["defaults"]["run"]["shell"] == "bash"
    runner_temp = work / "runner-temp"
    runner_temp.mkdir()
    artifact_root = work / "artifacts"
    env = base_env(clone, work / "tools")
    declared = {**workflow.get("env", {}), **job.get("env", {})}
    assert set(env_over) <= set(declared), "the test sets only variables the template declares"
    env.update({k: str(v) for k, v in {**declared, **env_over}.items()})
    env.update(
        GITHUB_ACTIONS="true", CI="true", RUNNER_TEMP=str(runner_temp),
        GITHUB_WORKSPACE=str(clone), GITHUB_REPOSITORY="acme/agent",
        GITHUB_API_URL=context["api"],
    )  # fmt: skip
    outputs: dict[str, dict[str, str]] = {}
    values = {
        "github.ref_name": context["ref_name"],
        "github.run_id": str(1000 + n),
        "github.run_attempt": "1",
        "github.event.repository.default_branch": "main",
        "secrets.GITHUB_TOKEN": context.get("token", ""),
        "github.event.pull_request.number": context.get("pr", ""),
    }

    def resolve(text: Any) -> str:
        def one(m: re.Match[str]) -> str:
            expr = m.group(1)
            if expr.startswith("steps."):
                _, sid, _, name = expr.split(".", 3)
                return outputs.get(sid, {}).get(name, "")
            assert expr in values, f"the test does not know what {expr!r} means in CI"
            return values[expr]

        return EXPR.sub(one, str(text))

    failed = False
    exit_code = 0
    log: list[str] = []
    steps: list[tuple[str, str, int | None]] = []
    summary: list[str] = []
    extra_path: list[str] = []
    for i, step in enumerate(job["steps"]):
        name = step.get("name") or step.get("uses") or f"step {i}"
        cond = step.get("if")
        assert cond in (None, "always()"), f"{name}: condition {cond!r} not modelled"
        if failed and cond is None:
            steps.append((name, "skipped", None))
            continue
        sid = step.get("id", f"step{i}")
        files = {k: runner_temp / f"{k.lower()}-{i}" for k in
                 ("GITHUB_OUTPUT", "GITHUB_ENV", "GITHUB_PATH", "GITHUB_STEP_SUMMARY")}  # fmt: skip
        for f in files.values():
            f.write_text("")
        step_env = {**env, **{k: str(v) for k, v in files.items()}}
        step_env.update({k: resolve(v) for k, v in step.get("env", {}).items()})
        step_env["PATH"] = ":".join([*reversed(extra_path), step_env["PATH"]])
        with_ = {k: resolve(v) for k, v in step.get("with", {}).items()}
        if "run" in step:
            assert "${{" not in step["run"], f"{name}: an expression inside a script"
            rc, out = bash(step["run"], clone, step_env, runner_temp / f"step-{i}.sh")
        else:
            rc, out = github_action(step["uses"], with_, clone, cache, artifact_root)
            if step["uses"].startswith("actions/upload-artifact"):
                outputs[sid] = {"artifact-url": (artifact_root / with_["name"]).as_uri()}
        log.append(f"== {name} (exit {rc})\n{out}")
        steps.append((name, "ran", rc))
        for line in files["GITHUB_OUTPUT"].read_text().splitlines():
            key, _, value = line.partition("=")
            outputs.setdefault(sid, {})[key] = value
        for line in files["GITHUB_ENV"].read_text().splitlines():
            key, _, value = line.partition("=")
            env[key] = value
        extra_path += files["GITHUB_PATH"].read_text().split()
        summary.append(files["GITHUB_STEP_SUMMARY"].read_text())
        if rc != 0 and not step.get("continue-on-error"):
            failed = True
            exit_code = exit_code or rc
    return GitHubJob(clone, steps, "\n".join(log), exit_code, "".join(summary),
                     artifact_root / "harness-report", outputs)  # fmt: skip


def github_action(
    uses: str, with_: dict[str, str], clone: Path, cache: Cache, artifacts: Path
) -> tuple[int, str]:
    """A ``uses:`` step by its local meaning; (exit code, log)."""
    action, _, version = uses.partition("@")
    assert version, f"{uses}: pin a version"
    lines = [p for p in with_.get("path", "").splitlines() if p.strip()]
    if action == "actions/checkout":
        return 0, "the clone is the checkout"
    if action == "actions/cache/restore":
        prefixes = [p for p in with_.get("restore-keys", "").splitlines() if p.strip()]
        found = cache.restore(with_["key"], prefixes, clone, lines)
        return 0, f"restored {found}" if found else "cache miss"
    if action == "actions/cache/save":
        saved = cache.save(with_["key"], clone, lines, immutable=True)
        return 0, "saved" if saved else "key exists: not saved"
    if action == "mikepenz/action-junit-report":
        found = sorted(clone.glob(with_["report_paths"]))
        if not found:
            return 0, "warning: no test report files were found"
        suites = [check_junit(p) for p in found]
        return 0, f"published {len(suites)} report(s)"
    if action == "actions/upload-artifact":
        taken = upload(clone, lines, artifacts / with_["name"])
        if not taken and with_.get("if-no-files-found") == "error":
            return 1, "no files found"
        return 0, f"uploaded {len(taken)} file(s)"
    raise AssertionError(f"{uses}: no local meaning in this test; add one")


def _report(folder: Path) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((folder / "report.json").read_text())
    return doc


def _failed_cases(junit: JUnitXml) -> list[str]:
    return [c.name for suite in junit for c in suite if not (c.is_passed or c.is_skipped)]


def test_github_actions_workflow_runs_job_after_job(tmp_path: Path, api: Api) -> None:
    cache = Cache(tmp_path / "cache")
    ctx = {"api": api.url, "ref_name": "main"}
    quick = {"HARNESS_K": "1", "HARNESS_USE_INSTALLED": "1"}

    # 1. A push to main: the candidate passes; no pull request, so no comment.
    one = run_github_job(tmp_path, 1, cache, quick, ctx)
    assert one.exit_code == 0, one.log
    assert all(state == "ran" and rc == 0 for _, state, rc in one.steps), one.steps
    assert one.outputs["gate"]["exit-code"] == "0"
    latest = one.clone / "reports" / "latest"
    assert latest.is_dir() and not latest.is_symlink()
    run_one = _report(latest)["run_id"]
    assert (one.clone / "reports" / run_one / "index.html").is_file()
    for name in ("index.html", "junit.xml", "summary.md", "report.json"):
        assert (one.artifact / name).is_file(), name
    assert (one.artifact / "evidence" / "1.html").is_file()
    assert _report(one.artifact)["run_id"] == run_one
    assert _failed_cases(check_junit(one.artifact / "junit.xml")) == []
    assert "harness: **PASS**" in one.summary
    assert one.artifact.as_uri() in one.summary
    assert "not a pull request, or no token: no comment" in one.log
    assert api.requests == []
    assert "published 1 report(s)" in one.log
    (key_one,) = cache.keys
    assert (cache.folder(key_one) / ".harness" / "runs" / run_one).is_dir()
    assert (cache.folder(key_one) / ".cache" / "harness" / "envs").is_dir()

    # 2. A pull request with a regressed release: the store comes back from main's cache
    # (no case is validated again), the gate fails the job, and everything after it still
    # runs: store saved, JUnit published with the failing cases, report uploaded, summary
    # written, comment posted.
    ctx_pr = {**ctx, "ref_name": "7/merge", "token": "t0ken", "pr": "7"}
    regressed = {**quick, "HARNESS_RELEASE": "candidate-regressed", "HARNESS_K": "2"}
    two = run_github_job(tmp_path, 2, cache, regressed, ctx_pr)
    assert two.exit_code == 1, two.log
    assert two.outputs["gate"]["exit-code"] == "1"
    assert f"restored {key_one}" in two.log
    assert "preflight: validating" not in two.log
    ran = {name: (state, rc) for name, state, rc in two.steps}
    assert ran["Run the gate"] == ("ran", 1)
    names = [name for name, _, _ in two.steps]
    after = names[names.index("Run the gate") + 1 :]
    assert after and all(ran[n] == ("ran", 0) for n in after), two.steps
    assert "::error::harness: FAIL (exit 1)" in two.log
    run_two = _report(two.clone / "reports" / "latest")["run_id"]
    assert run_two != run_one and _report(two.artifact)["run_id"] == run_two
    assert _failed_cases(check_junit(two.artifact / "junit.xml"))
    assert "harness: **FAIL**" in two.summary
    (post,) = api.requests
    assert post["path"] == "/repos/acme/agent/issues/7/comments"
    assert post["headers"]["Authorization"] == "Bearer t0ken"
    body = json.loads(post["body"])["body"]
    summary_md = (two.clone / "reports" / "latest" / "summary.md").read_text()
    assert body.startswith(summary_md) and two.artifact.as_uri() in body
    assert len(cache.keys) == 2
    history = (two.clone / "reports" / "index.html").read_text()
    assert run_one in history and run_two in history  # the release history spans the jobs

    # 3. The same pull request from a fork: the token cannot comment (403). The gate's
    # run resumes from the cache (nothing re-run) and its exit code, not the comment's,
    # decides the job.
    api.status = 403
    three = run_github_job(tmp_path, 3, cache, regressed, ctx_pr)
    assert three.exit_code == 1, three.log
    assert ("Comment on the pull request", "ran", 0) in three.steps
    assert "could not comment on the pull request" in three.log
    assert len(api.requests) == 2
    assert _report(three.clone / "reports" / "latest")["run_id"] == run_two


# -- GitLab CI ----------------------------------------------------------------------------

VAR = re.compile(r"\$\{(\w+)\}|\$(\w+)")


@dataclass
class GitLabJob:
    clone: Path
    exit_code: int
    status: str  # success | warning (allowed failure) | failed
    log: str
    artifact: Path
    junit: list[JUnitXml]


def run_gitlab_job(
    tmp: Path, n: int, cache: Cache, project_vars: dict[str, str], predefined: dict[str, str]
) -> GitLabJob:
    """Run ``examples/ci/gitlab-ci.yml``'s job in a fresh clone (job number ``n``)."""
    work = tmp / f"gl{n}"
    clone = fresh_clone(work / "repo")
    doc = yaml.safe_load((clone / TEMPLATES / "gitlab-ci.yml").read_text())
    (job,) = (v for v in doc.values() if isinstance(v, dict) and "script" in v)
    env = base_env(clone, work / "tools")
    pre = {"CI": "true", "GITLAB_CI": "true", "CI_PROJECT_DIR": str(clone),
           "CI_PROJECT_ID": "42", "CI_DEFAULT_BRANCH": "main",
           "CI_JOB_URL": f"https://gitlab.invalid/acme/agent/-/jobs/{n}", **predefined}  # fmt: skip
    declared = {**doc.get("variables", {}), **job.get("variables", {})}
    assert set(project_vars) - {"HARNESS_GITLAB_TOKEN"} <= set(declared)
    variables = {k: str(v) for k, v in {**declared, **project_vars}.items()}

    def expand(text: str) -> str:
        scope = {**pre, **variables}
        return VAR.sub(lambda m: scope.get(m.group(1) or m.group(2), ""), text)

    env.update(pre)
    env.update({k: expand(v) for k, v in variables.items()})
    spec = job["cache"]
    key = expand(spec["key"])
    paths = [p.rstrip("/") for p in spec["paths"]]
    found = cache.restore(key, [expand(k) for k in spec.get("fallback_keys", [])], clone, paths)
    log = [f"cache: {'restored ' + found if found else 'miss'}"]
    main = "\n".join([*job.get("before_script", []), *job["script"]])
    rc, out = bash(main, clone, env, work / "script.sh")
    log.append(out)
    allowed = (job.get("allow_failure") or {}).get("exit_codes", [])
    status = "success" if rc == 0 else "warning" if rc in allowed else "failed"
    env["CI_JOB_STATUS"] = "success" if rc == 0 else "failed"
    after = "\n".join(job.get("after_script", []))
    _, out = bash(after, clone, env, work / "after.sh")  # never changes the job's status
    log.append(out)
    if spec.get("when") == "always" or status == "success":
        cache.save(key, clone, paths, immutable=False)
    arts = job["artifacts"]
    artifact = work / "artifacts"
    junit: list[JUnitXml] = []
    if arts.get("when") == "always" or status == "success":
        upload(clone, [p.rstrip("/") for p in arts["paths"]], artifact)
        junit = [check_junit(clone / arts["reports"]["junit"])]
    return GitLabJob(clone, rc, status, "\n".join(log), artifact, junit)


def test_gitlab_ci_job_runs_job_after_job(tmp_path: Path, api: Api) -> None:
    cache = Cache(tmp_path / "cache")
    quick = {"HARNESS_K": "1", "HARNESS_USE_INSTALLED": "1"}
    url = api.url + "/api/v4"

    # 1. The default branch: the candidate passes; no merge request, so no note.
    main = {"CI_API_V4_URL": url, "CI_COMMIT_REF_SLUG": "main", "CI_COMMIT_BRANCH": "main",
            "CI_PIPELINE_SOURCE": "push"}  # fmt: skip
    one = run_gitlab_job(tmp_path, 1, cache, {**quick, "HARNESS_GITLAB_TOKEN": "glpat"}, main)
    assert (one.exit_code, one.status) == (0, "success"), one.log
    assert "cache: miss" in one.log
    run_one = _report(one.clone / "reports" / "latest")["run_id"]
    assert _failed_cases(one.junit[0]) == []
    assert "not a merge request, or no HARNESS_GITLAB_TOKEN" in one.log
    assert api.requests == []
    assert cache.keys == ["harness-store-main"]

    # 2. A merge request from a new branch whose release WARNs (exit 3): the store comes
    # back through the fallback key (no case validated again); exit 3 is an allowed
    # failure, so the job is a warning, not red; the report, JUnit, log section and
    # merge-request note still come, and the branch's own cache is saved.
    mr = {"CI_API_V4_URL": url, "CI_COMMIT_REF_SLUG": "fix-agent",
          "CI_PIPELINE_SOURCE": "merge_request_event", "CI_MERGE_REQUEST_IID": "5"}  # fmt: skip
    warn = {**quick, "HARNESS_RELEASE": "candidate-regressed", "HARNESS_GITLAB_TOKEN": "glpat"}
    two = run_gitlab_job(tmp_path, 2, cache, warn, mr)
    assert (two.exit_code, two.status) == (3, "warning"), two.log
    assert "cache: restored harness-store-main" in two.log
    assert "preflight: validating" not in two.log
    run_two = _report(two.clone / "reports" / "latest")["run_id"]
    assert run_two != run_one
    for name in ("index.html", "junit.xml", "summary.md", "report.json"):
        assert (two.artifact / name).is_file(), name
    assert _report(two.artifact)["run_id"] == run_two
    assert _failed_cases(two.junit[0])  # a WARN names its cases as failed tests
    assert "section_start:" in two.log and "section_end:" in two.log
    assert "harness: **WARN**" in two.log
    (post,) = api.requests
    assert post["path"] == "/api/v4/projects/42/merge_requests/5/notes"
    assert post["headers"]["PRIVATE-TOKEN"] == "glpat"
    body = urllib.parse.parse_qs(post["body"])["body"][0]
    assert body.startswith((two.clone / "reports" / "latest" / "summary.md").read_text())
    assert "https://gitlab.invalid/acme/agent/-/jobs/2/artifacts/browse/reports/latest/" in body
    assert cache.keys == ["harness-store-main", "harness-store-fix-agent"]
