"""``harness cases new --from-git``: one validated, locked case from one fix commit.

A plain pipeline, each step returning the next value or raising a
:class:`~harness.errors.ConfigError` (exit 2) that names what was wrong::

    open the commit → split it → request → starting state → environment (lock, build)
    → derive the lists by execution → write case.yaml → validate red/green → lock

Everything is written into a staging folder next to the cases; only a case that
validated is renamed into place and added to the task-set lock. A failure at any step
leaves the cases folder and the lock as they were.
"""

from __future__ import annotations

import hashlib
import re
import shutil
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import yaml

from harness.authoring._derive import (
    JUNIT_PATH,
    Derived,
    base_command,
    derive_lists,
    run_both,
    scratch,
)
from harness.authoring._envpropose import propose_requirements
from harness.authoring._git import FixCommit, git, open_commit
from harness.authoring._keepgit import keep_parent
from harness.authoring._split import DEFAULT_TEST_GLOBS, Split, check_request, split_commit
from harness.cases.environment import Environment
from harness.cases.load import CASE_FILE, LoadedCase, load_case, load_cases
from harness.cases.lock import lock_cases, read_lock, write_lock
from harness.cases.model import (
    ArchiveRepo,
    ArtifactRule,
    Case,
    GitRepo,
    HiddenFile,
    PhaseContract,
    Reference,
    SandboxContract,
    Verifier,
)
from harness.env.build import build_env, compile_lock
from harness.env.model import BuiltEnv, EnvSource
from harness.errors import ConfigError, InfraError
from harness.preflight import validate_in_envs
from harness.project import Project
from harness.sandbox.base import Sandbox
from harness.trial.validate import ValidationResult, apply_patch
from harness.trial.vtree import build_verification_tree
from harness.trial.workspace import materialize

__all__ = ["NewCaseOptions", "NewCaseResult", "batch_case_id", "new_case"]

_ID_RE = re.compile(r"^[a-z0-9][a-z0-9._-]{0,63}$")
_ARCHIVE = "repo.tar.gz"
_KEPT = "repo.git"
_REQUEST_MIN = 40


@dataclass(frozen=True)
class NewCaseOptions:
    """How to make a case from a commit (the CLI's options)."""

    tests: tuple[str, ...] = DEFAULT_TEST_GLOBS
    """Globs naming the test files (hidden from the agent)."""
    request_file: Path | None = None
    """The request; default: the commit message."""
    keep_git: bool = False
    """Keep the parent as a git repository (proven not to hold the fix)."""
    requirements: Path | None = None
    """The environment's loose requirements; default: proposed from the repository."""
    python: str = ">=3.11"
    repeats: int = 3
    """Runs of each tree; a test whose outcome differs between them is flaky."""
    pass_to_pass: int = 0
    """At most this many pass_to_pass tests (a deterministic sample); 0: all."""
    timeout: float = 300.0
    """Wall-clock bound of one test run (and of the verifier)."""
    jobs: int = 1
    """Test runs of the derivation side by side (each in its own fresh sandbox)."""


@dataclass(frozen=True)
class NewCaseResult:
    """What was derived, for the command to print."""

    case_id: str
    commit: str
    parent: str
    dir: Path
    digest: str
    tests: tuple[str, ...]
    source: tuple[str, ...]
    derived: Derived
    env: BuiltEnv
    env_sources: tuple[str, ...]
    request: str
    validation: str
    seconds: float
    steps: tuple[tuple[str, float], ...] = ()
    """Wall-clock seconds of the slow steps (environment, derivation runs, validation)."""
    to_read: tuple[str, ...] = field(default_factory=tuple)
    """What a human should still read before trusting the case."""


def batch_case_id(prefix: str, repo: Path, commit: str) -> str:
    """Return ``<prefix>-<first 8 hex of the commit>`` (the given name when it resolves to none)."""
    done = (
        git(repo, "rev-parse", "--verify", "--quiet", f"{commit}^{{commit}}")
        if repo.is_dir()
        else None
    )
    sha = done.stdout.decode().strip() if done is not None and done.ok else commit
    return f"{prefix}-{re.sub(r'[^a-z0-9._-]', '-', sha.lower())[:8]}"


def _check_target(project: Project, case_id: str) -> Path:
    if not _ID_RE.fullmatch(case_id):
        raise ConfigError(
            f"case id {case_id!r} must be lowercase letters, digits, '.', '_' or '-' "
            "(at most 64, starting with a letter or digit)",
            field="ID",
        )
    cases_dir = project.cases_dir
    if not cases_dir.is_dir():
        raise ConfigError("cases folder does not exist", file=cases_dir, field="cases_dir")
    target = cases_dir / case_id
    if target.exists():
        raise ConfigError(
            f"case {case_id!r} already exists (a new case needs a new id)", file=target
        )
    return target


def _request(fix: FixCommit, options: NewCaseOptions, patch: bytes) -> tuple[str, str]:
    if options.request_file is not None:
        try:
            text = options.request_file.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(
                f"cannot read the request: {exc}", file=options.request_file
            ) from None
        origin = str(options.request_file)
    else:
        text, origin = fix.message, f"message of commit {fix.sha[:12]}"
    return check_request(text, patch, origin), origin


def _write_starting_state(fix: FixCommit, stage: Path, keep_git: bool) -> ArchiveRepo | GitRepo:
    if keep_git:
        keep_parent(fix, stage / _KEPT)
        return GitRepo(url=_KEPT, commit=fix.parent)
    data = fix.parent_archive()
    (stage / _ARCHIVE).write_bytes(data)
    return ArchiveRepo(path=_ARCHIVE, sha256=hashlib.sha256(data).hexdigest())


def _environment(
    fix: FixCommit, stage: Path, options: NewCaseOptions
) -> tuple[Environment, BuiltEnv, tuple[str, ...]]:
    if options.requirements is not None:
        try:
            text = options.requirements.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"cannot read: {exc}", file=options.requirements) from None
        sources: tuple[str, ...] = (str(options.requirements),)
    else:
        proposal = propose_requirements(fix)
        text, sources = proposal.text(), proposal.sources
    (stage / "requirements.in").write_text(text, encoding="utf-8")
    spec = Environment(
        python=options.python, requirements="requirements.in", lock="requirements.lock"
    )
    src = EnvSource(spec=spec, base=stage, file=stage / CASE_FILE, field="environment")
    try:
        compile_lock(src)
        built = build_env(src)
    except InfraError as exc:
        if exc.reason == "package_index_unreachable":
            raise
        raise ConfigError(
            f"the environment cannot be built from {', '.join(sources) or 'pytest alone'}: {exc}"
            " (give one with --requirements FILE)"
        ) from None
    except ConfigError as exc:
        raise ConfigError(
            f"the environment cannot be built from {', '.join(sources) or 'pytest alone'}: "
            f"{exc.message} (give one with --requirements FILE)"
        ) from None
    return spec, built, sources


def _targets(tests: Sequence[str]) -> tuple[str, ...]:
    """Return the folders (or top-level files) holding the hidden tests: what pytest runs."""
    return tuple(sorted({t.split("/", 1)[0] for t in tests}))


def _draft(
    case_id: str, stage: Path, repo: ArchiveRepo | GitRepo, tests: Sequence[str]
) -> LoadedCase:
    """Make a provisional case to build the trees with (never written): its hidden tests."""
    case = Case(
        id=case_id,
        version=1,
        request="draft",
        repo=repo,
        verifier=Verifier(
            command=("true",),
            hidden=tuple(HiddenFile(src=f"hidden/{p}", dest=p) for p in tests),
        ),
        lane="judgment",
    )
    return LoadedCase(case=case, dir=stage, digest="", files={})


def _trees(lc: LoadedCase, patch: Path, tmp: Path) -> tuple[Path, Path, tuple[str, ...]]:
    """Build the verifier's own trees for the agent that did nothing and the reference.

    The same code as a trial's verifier (:func:`build_verification_tree`): the hidden tests
    written in, protected files and the starting state's runner configuration kept. So the
    lists are derived on exactly the files the verifier will see. Also returns what the
    verifier keeps back from the fix (protected files it changes), for a human to read.
    """
    start, done = tmp / "start", tmp / "reference"
    materialize(lc, start)
    shutil.copytree(start, done, symlinks=True)
    try:
        apply_patch(patch, done)
    except ConfigError as exc:
        raise ConfigError(f"the fix does not apply to its parent's tree: {exc}") from None
    red, green = tmp / "red", tmp / "green"
    build_verification_tree(lc, start, start, red, artifacts=[JUNIT_PATH])
    vt = build_verification_tree(lc, start, done, green, artifacts=[JUNIT_PATH])
    return red, green, tuple(vt.tampering)


def _no_fail_to_pass(split: Split, derived: Derived) -> ConfigError:
    excerpt = " ".join(derived.red_excerpt.split())[-600:]
    detail = ""
    if derived.broken:
        names = ", ".join(derived.broken[:5])
        detail = f"; {len(derived.broken)} test(s) fail even with the fix: {names}"
    return ConfigError(
        f"no test fails on the parent and passes with the fix (the hidden tests "
        f"{', '.join(split.tests[:5])} do not fail before){detail}"
        + (f"; red output: {excerpt}" if excerpt else "")
    )


def _case_yaml(case: Case, fix: FixCommit) -> str:
    data = case.model_dump(mode="json", exclude_defaults=True)
    data["repo"] = {"kind": case.repo.kind, **data["repo"]}
    for rule in data["verifier"].get("artifacts", []):
        rule.setdefault("rule", "junit")
    head = (
        f"# Made by `harness cases new --from-git` from commit {fix.sha} (parent {fix.parent}).\n"
        "# Read the request before running it: it is what the agent is told.\n"
    )
    return head + yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=100)


def _to_read(
    request: str, origin: str, split: Split, derived: Derived, env_sources: tuple[str, ...]
) -> tuple[str, ...]:
    notes = [f"the request (from the {origin}): it is all the agent is told"]
    if len(request) < _REQUEST_MIN:
        notes.append(f"the request is short ({len(request)} characters): say what should change")
    if split.deleted_tests:
        notes.append(
            "the commit deleted test files that stay in the starting state: "
            + ", ".join(split.deleted_tests)
        )
    if derived.flaky:
        notes.append(f"{len(derived.flaky)} flaky test(s) left out: {', '.join(derived.flaky[:5])}")
    if derived.broken:
        notes.append(
            f"{len(derived.broken)} test(s) fail with the fix too, deselected: "
            + ", ".join(derived.broken[:5])
        )
    if derived.notes:
        notes.append(
            "the verifier keeps these from the starting state, as it will for any agent "
            f"(the lists were derived without them): {'; '.join(derived.notes[:5])}"
        )
    if not env_sources:
        notes.append("no test requirements were found: the environment is pytest alone")
    return tuple(notes)


def _derived_case(
    case_id: str,
    fix: FixCommit,
    split: Split,
    derived: Derived,
    request: str,
    start: ArchiveRepo | GitRepo,
    spec: Environment,
    final: tuple[str, ...],
    contract: PhaseContract,
) -> Case:
    """Return the case the fix commit makes: its request, starting state, verifier and reference."""
    title = fix.message.splitlines()[0][:120] if fix.message else f"commit {fix.sha[:12]}"
    return Case(
        id=case_id,
        version=1,
        title=title,
        request=request,
        repo=start,
        contract=SandboxContract(verifier=contract),
        verifier=Verifier(
            command=final,
            artifacts=(
                ArtifactRule(
                    path=JUNIT_PATH,
                    rule="junit",
                    min_tests=len(derived.fail_to_pass) + len(derived.pass_to_pass),
                    fail_to_pass=derived.fail_to_pass,
                    pass_to_pass=derived.pass_to_pass,
                ),
            ),
            hidden=tuple(HiddenFile(src=f"hidden/{p}", dest=p) for p in split.tests),
        ),
        reference=Reference(patch="reference.patch"),
        environment=spec,
        tags=("from-git",),
    )


def _validate(
    project: Project, stage: Path, sandbox: Sandbox, side_by_side: bool
) -> tuple[LoadedCase, ValidationResult]:
    """Load the staged case and prove it red before and green after the fix.

    Raises:
        ConfigError: the case does not validate.
    """
    lc = load_case(stage)
    result = validate_in_envs(project, [lc], sandbox, side_by_side=side_by_side)[0]
    if result.status != "ok":
        excerpt = " ".join(result.red_excerpt.split())[-600:]
        raise ConfigError(
            f"the derived case does not validate: {result.message}"
            + (f"; red output: {excerpt}" if excerpt else "")
        )
    return lc, result


def new_case(
    project: Project,
    case_id: str,
    repo: Path,
    commit: str,
    sandbox: Sandbox,
    options: NewCaseOptions = NewCaseOptions(),
) -> NewCaseResult:
    """Make, validate and lock case ``case_id`` from fix ``commit`` of git ``repo``.

    Raises:
        ConfigError: bad input (not a repository, unknown/root/merge commit, no test
            change, a request quoting the patch, an environment that cannot be built,
            tests that do not fail before, a case that does not validate); nothing written.
        InfraError: the sandbox or the package index is unavailable; nothing written.
    """
    t0 = time.monotonic()
    target = _check_target(project, case_id)
    fix = open_commit(repo, commit)
    split = split_commit(fix, options.tests)
    staging = Path(tempfile.mkdtemp(prefix=".new-case-", dir=project.cases_dir))
    try:
        stage = staging / case_id
        stage.mkdir()
        patch = fix.diff(list(split.source))
        if not patch.strip():
            raise ConfigError(f"commit {fix.sha[:12]} changes no source content", file=repo)
        (stage / "reference.patch").write_bytes(patch)
        request, origin = _request(fix, options, patch)
        for path in split.tests:
            dest = stage / "hidden" / path
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_bytes(fix.blob(path))
        start = _write_starting_state(fix, stage, options.keep_git)
        t_env = time.monotonic()
        spec, built, env_sources = _environment(fix, stage, options)
        t_runs = time.monotonic()
        targets = _targets(split.tests)
        command = base_command(targets)
        contract = PhaseContract(timeout_seconds=options.timeout)
        with scratch("authoring") as tmp:
            draft = _draft(case_id, stage, start, split.tests)
            red, green, kept_back = _trees(draft, stage / "reference.patch", Path(tmp))
            label = f"new-{case_id}"
            runs = run_both(
                sandbox, built, red, green, command, contract, options.repeats, label, options.jobs
            )
        t_lists = time.monotonic()
        derived = derive_lists(*runs, pass_to_pass_limit=options.pass_to_pass)
        derived = replace(derived, notes=kept_back)
        if not derived.fail_to_pass:
            raise _no_fail_to_pass(split, derived)
        final = (
            *command,
            *(f"--deselect={n}" for n in derived.deselect),
            *(f"--ignore={p}" for p in derived.ignore),
        )
        case = _derived_case(case_id, fix, split, derived, request, start, spec, final, contract)
        (stage / CASE_FILE).write_text(_case_yaml(case, fix), encoding="utf-8")
        t_validate = time.monotonic()
        lc, result = _validate(project, stage, sandbox, options.jobs > 1)
        t_done = time.monotonic()
        lock, _ = lock_cases(
            [*load_cases(project.cases_dir), lc],
            read_lock(project.lock_path, project.file.task_set),
        )
        stage.rename(target)
        write_lock(project.lock_path, lock)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return NewCaseResult(
        case_id=case_id,
        commit=fix.sha,
        parent=fix.parent,
        dir=target,
        digest=lc.digest,
        tests=split.tests,
        source=split.source,
        derived=derived,
        env=built,
        env_sources=env_sources,
        request=request,
        validation=result.message,
        seconds=time.monotonic() - t0,
        steps=(
            ("environment", t_runs - t_env),
            (f"{2 * options.repeats} test runs", t_lists - t_runs),
            ("validation", t_done - t_validate),
        ),
        to_read=_to_read(request, origin, split, derived, env_sources),
    )
