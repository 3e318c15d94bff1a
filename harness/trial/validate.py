"""``harness cases validate``: prove each verifier can go red and can go green.

For every exec-lane case that expects a change, the verifier runs in a fresh sandbox on
the untouched starting state (it must not pass) and on the starting state with the
reference solution applied (it must pass). A verifier that cannot go red, or cannot go
green, is reported as broken: its verdicts would carry no information.
"""

from __future__ import annotations

import tempfile
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from harness import _proc
from harness.cases.load import LoadedCase
from harness.env.model import BuiltEnv
from harness.errors import CaseError
from harness.sandbox.base import Sandbox
from harness.sandbox.owner import owned_prefix
from harness.store.records import Outcome, Verdict
from harness.trial.execute import verdict_from_exception, verify_tree_phase
from harness.trial.workspace import materialize

__all__ = ["ValidationResult", "apply_patch", "validate_case", "validate_cases"]


@dataclass(frozen=True)
class ValidationResult:
    """The red/green proof of one case."""

    case_id: str
    status: str
    """``ok``, ``broken`` or ``skipped``."""
    red: Verdict | None
    green: Verdict | None
    message: str
    red_excerpt: str = ""
    """Excerpt of the verifier's output on the starting state (why it went red)."""
    green_passed: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    """Per JUnit artifact, the tests that passed with the reference solution: no trial of
    the case may skip them (:func:`harness.trial.verify.judge_verifier`'s ``proven``)."""


def apply_patch(patch: Path, tree: Path) -> None:
    """Apply a unified diff to ``tree`` with ``git apply``.

    Raises:
        CaseError: the patch does not apply.
    """
    done = _proc.run(
        ["git", "apply", "--whitespace=nowarn", str(patch.resolve())], cwd=str(tree), timeout=60
    )
    if done.returncode != 0:
        raise CaseError(
            f"reference patch does not apply: {done.stderr.decode(errors='replace').strip()}",
            file=patch,
        )


def _verify(
    lc: LoadedCase,
    sandbox: Sandbox,
    tree: Path,
    tag: str,
    downgrade: frozenset[str],
    environment: BuiltEnv | None,
    image: str | None,
) -> tuple[Verdict, str, dict[str, tuple[str, ...]], dict[str, tuple[str, ...]]]:
    try:
        record, verdict, passed, broke = verify_tree_phase(
            lc,
            sandbox,
            tree,
            label=f"validate-{tag}",
            downgrade=downgrade,
            environment=environment,
            image=image,
        )
        return verdict, record.excerpt, passed, broke
    except Exception as exc:
        return verdict_from_exception(exc), "", {}, {}


def validate_case(
    lc: LoadedCase,
    sandbox: Sandbox,
    downgrade: frozenset[str] = frozenset(),
    *,
    environment: BuiltEnv | None = None,
    image: str | None = None,
    side_by_side: bool = False,
) -> ValidationResult:
    """Run the red/green proof for one case (in ``environment``, from ``image``).

    ``side_by_side`` runs the red and the green verifier at once (each in its own fresh
    sandbox, on its own tree: the verdicts are the same as one after the other).
    """
    case = lc.case
    if case.lane == "judgment":
        return ValidationResult(lc.id, "skipped", None, None, "judgment lane: no executable oracle")
    if case.expect == "abstain":
        return ValidationResult(
            lc.id, "skipped", None, None, "expects abstention: no change to verify"
        )
    assert case.reference is not None
    with tempfile.TemporaryDirectory(prefix=owned_prefix("validate")) as name:
        tmp = Path(name)
        red_tree, green_tree = tmp / "red", tmp / "green"
        materialize(lc, red_tree)
        materialize(lc, green_tree)
        try:
            apply_patch(lc.path(case.reference.patch), green_tree)
        except CaseError as exc:
            return ValidationResult(lc.id, "broken", None, None, str(exc))
        args = (downgrade, environment, image)
        if side_by_side:
            with ThreadPoolExecutor(max_workers=2, thread_name_prefix="validate") as pool:
                red_run = pool.submit(_verify, lc, sandbox, red_tree, "red", *args)
                green_run = pool.submit(_verify, lc, sandbox, green_tree, "green", *args)
                (red, red_excerpt, _, broke), (green, _, passed, _) = (
                    red_run.result(),
                    green_run.result(),
                )
        else:
            red, red_excerpt, _, broke = _verify(lc, sandbox, red_tree, "red", *args)
            green, _, passed, _ = _verify(lc, sandbox, green_tree, "green", *args)
    problems = []
    if red.outcome in (Outcome.INFRA_ERROR, Outcome.EVALUATOR_ERROR) or green.outcome in (
        Outcome.INFRA_ERROR,
        Outcome.EVALUATOR_ERROR,
    ):
        bad = red if red.outcome is not Outcome.FAIL else green
        return ValidationResult(
            lc.id, "broken", red, green, f"could not verify: {bad.reason}", red_excerpt
        )
    if red.outcome is Outcome.PASS:
        problems.append("cannot go red: the verifier passes on the untouched starting state")
    if green.outcome is not Outcome.PASS:
        problems.append(f"cannot go green: the reference solution fails ({green.reason})")
    for name, caught in broke.items():
        if caught:  # a test that repeats one of these would "catch" it (red team round 28)
            shown = ", ".join(caught[:3]) + (
                f" (+{len(caught) - 3} more)" if len(caught) > 3 else ""
            )
            problems.append(
                f"mutant {name!r} is caught by the starting tests already ({shown}): a new "
                "test that repeats them would catch it too; a mutant must break only what "
                "the new test should check"
            )
    if problems:
        return ValidationResult(lc.id, "broken", red, green, "; ".join(problems), red_excerpt)
    return ValidationResult(
        lc.id,
        "ok",
        red,
        green,
        f"red: {red.reason} · green: {green.reason}",
        red_excerpt,
        passed,
    )


def validate_cases(
    cases: Sequence[LoadedCase], sandbox: Sandbox, downgrade: frozenset[str] = frozenset()
) -> list[ValidationResult]:
    """Validate every case, in order."""
    return [validate_case(lc, sandbox, downgrade) for lc in cases]
