"""The promotion policy: a versioned YAML file, recorded before the first trial runs.

A policy is identified by two digests:

* ``digest`` — sha256 over the canonical JSON of the *parsed* model (defaults filled in),
  the identity written into the release record. Reformatting or editing comments keeps it.
* ``file_digest`` — sha256 of the raw bytes, so that *any* edit of the file is noticed.

:func:`verify_policy` compares a loaded policy with the digests recorded for a run: a
different ``digest`` is a different policy and the gate refuses to judge
(:class:`PolicyChangedError`); an equal ``digest`` with a different ``file_digest`` is
reported as a note (the file was edited without changing what it says).
"""

from __future__ import annotations

import random
from collections.abc import Iterable
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field, model_validator

from harness._yaml import load_model
from harness.digest import digest_bytes, digest_json, short
from harness.errors import ConfigError
from harness.frozen import Frozen as _Frozen

__all__ = [
    "AbsolutePolicy",
    "BaselinePolicy",
    "BootstrapPolicy",
    "BudgetPolicy",
    "FlakyRerunPolicy",
    "InfraPolicy",
    "LoadedPolicy",
    "MissingPolicy",
    "Policy",
    "PolicyChangedError",
    "PoolPolicy",
    "Thresholds",
    "load_policy",
    "policy_data",
    "policy_digest",
    "verify_policy",
]


def _version_to_str(value: Any) -> Any:
    if isinstance(value, bool):
        return value
    return str(value) if isinstance(value, int | float) else value


_Magnitude = Annotated[float, Field(ge=0, le=1)]
_Fraction = Annotated[float, Field(ge=0, le=1)]
_Alpha = Annotated[float, Field(gt=0, lt=0.5)]


class Thresholds(_Frozen):
    """Magnitudes, as positive fractions (0.05 = 5 percentage points)."""

    pass_rate_drop: _Magnitude = 0.05
    """A statistically significant drop in mean pass rate at least this large fails."""
    pass_hat_k_drop: _Magnitude = 0.10
    """A statistically significant drop in mean pass^k at least this large fails."""
    non_inferiority_margin: _Magnitude = 0.10
    """Non-inferiority is shown when the one-sided lower bound of the pass-rate difference
    exceeds -margin."""
    non_inferiority: Literal["auto", "warn", "info"] = "auto"
    """``warn``: warn whenever non-inferiority is not shown; ``info``: only report it;
    ``auto``: warn only when the set is large enough for the bound to be informative
    (its half-width is below half the margin), else report it as information."""


class BudgetPolicy(_Frozen):
    """Case regression budget (all-pass in the baseline, not in the candidate)."""

    confidence: Annotated[float, Field(gt=0.5, lt=1)] = 0.99
    """Budget = this quantile of the Poisson-binomial count of noise flips."""
    floor: Annotated[int, Field(ge=0)] = 0
    """Never a budget below this many cases."""


class InfraPolicy(_Frozen):
    """Limits on unverifiable trials (infra + evaluator errors) per arm, as fractions."""

    warn_above: _Fraction = 0.0
    """Warn when an arm's unverifiable fraction is above this."""
    block_above: _Fraction = 0.10
    """Too many to judge: blocked when an arm's unverifiable fraction is above this."""

    @model_validator(mode="after")
    def _ordered(self) -> InfraPolicy:
        if self.block_above < self.warn_above:
            raise ValueError("block_above must be >= warn_above")
        return self


class MissingPolicy(_Frozen):
    """Cases without judged trials in an arm, or present in one arm only."""

    max_fraction: _Fraction = 0.0
    """Warn when more than this fraction of all cases is missing from the comparison."""


class PoolPolicy(_Frozen):
    """A baseline pool (``baseline.pool``): how much of the baseline runs live each time.

    The comparison uses the pool (the promoted run's trials plus the live baseline trials of
    earlier runs that passed the drift check against it); each run executes
    ``live_trials`` baseline trials per case and checks them against the pool for drift.
    See docs/gate.md, "Baseline pool".
    """

    live_trials: Annotated[int, Field(ge=0, le=50)]
    """Baseline trials per case executed live in each run (0: none, the pool never grows;
    with ``--model-replay baseline:NAME`` the promoted trials are replayed for drift)."""
    max_runs: Annotated[int, Field(ge=1)] | None = None
    """Keep the live trials of at most this many latest runs (None = no limit)."""
    max_age_days: Annotated[int, Field(ge=1)] | None = None
    """Drop live trials older than this many days at the run's start (None = no limit)."""
    conditional_share: Annotated[float, Field(gt=0, lt=0.5)] | None = None
    """At most this share of pools may falsely fail more than ``2 * alpha`` of unchanged
    releases: the FAIL level against the pool is lowered to what the conditioning formula
    gives for the run's fixed share (:func:`harness.gate.conditional.pooled_alpha`; None =
    the plain ``alpha``). Enters the digest only when set."""


class BaselinePolicy(_Frozen):
    """How the stored baseline is re-executed and how much disagreement is noise."""

    mode: Literal["all", "sample"] = "all"
    sample_size: Annotated[int, Field(ge=1)] | None = None
    """Number of cases re-executed in ``sample`` mode."""
    seed: int = 0
    """Seed of the sample of cases (``sample`` mode)."""
    drift_alpha: _Alpha = 0.01
    """Family-wise level of the two-sided drift tests (the within-case test and the
    broken-case count, as in the regression rule)."""
    drift_tolerance: _Magnitude = 0.10
    """The within-case drift test also needs |mean pass-rate difference| at least this
    large (more all-pass ↔ all-fail flips than chance allows block on their own)."""
    pool: PoolPolicy | None = None
    """A baseline pool (unset: the baseline is re-executed k times per case, no pool). It
    enters the policy digest only when set, so a policy without it keeps its digest."""

    @model_validator(mode="after")
    def _sample_needs_size(self) -> BaselinePolicy:
        if self.mode == "sample" and self.sample_size is None:
            raise ValueError("mode 'sample' needs sample_size")
        if self.mode == "all" and self.sample_size is not None:
            raise ValueError("sample_size is only meaningful with mode 'sample'")
        return self

    def sample(self, case_ids: Iterable[str]) -> tuple[str, ...]:
        """Return the case ids to re-execute: all of them, or a seeded sample (sorted)."""
        ids = sorted(set(case_ids))
        if self.mode == "all" or self.sample_size is None or self.sample_size >= len(ids):
            return tuple(ids)
        return tuple(sorted(random.Random(self.seed).sample(ids, self.sample_size)))


class FlakyRerunPolicy(_Frozen):
    """Extra trials for cases that look flaky (mixed outcomes) after the first k."""

    extra_trials: Annotated[int, Field(ge=0, le=50)] = 0
    """Trials added per flaky-looking case and arm (0 = off)."""
    max_cases: Annotated[int, Field(ge=0)] | None = None
    """At most this many cases get reruns (None = no limit)."""


class BootstrapPolicy(_Frozen):
    """The seeded paired bootstrap shown as a cross-check."""

    resamples: Annotated[int, Field(ge=0, le=100_000)] = 2000
    seed: int = 0


class AbsolutePolicy(_Frozen):
    """Rules on the candidate alone, applied with or without a baseline."""

    min_pass_rate: _Fraction = 0.0
    """Fail when the candidate's mean per-case pass rate is below this. Whatever this
    says, a candidate with judged trials and not a single pass fails."""
    critical_min_pass_rate: _Fraction = 0.0
    """Fail when a critical case's pass rate is below this. Judged alone (no baseline), a
    critical case that fails every trial fails the gate whatever this says."""


class Policy(_Frozen):
    """A promotion policy: the rule, written down before anyone sees the result."""

    schema_version: Literal[1] = 1
    version: Annotated[str, BeforeValidator(_version_to_str), Field(min_length=1)]
    """The policy's own version; a changed policy is a new version."""
    description: str = ""
    alpha: _Alpha = 0.05
    """Family-wise level of the regression tests that FAIL (the exact within-case test,
    the broken-case count and each critical case's test; see harness.gate.regression)."""
    warn_alpha: _Alpha | None = None
    """Family-wise level at which the same tests WARN (no magnitude condition); at least
    ``alpha``. Unset: the larger of ``alpha`` and 0.10 (see :attr:`warn_level`)."""
    critical_share: Annotated[float, Field(ge=0, lt=1)] = 0.5
    """Share of each level given to the critical cases' tests (when any can reach it)."""
    absolute: AbsolutePolicy = AbsolutePolicy()
    thresholds: Thresholds = Thresholds()
    regression_budget: BudgetPolicy = BudgetPolicy()
    critical_cases: tuple[str, ...] = ()
    """Fail on a significant drop of the case (exact test, inside the family) or without
    data."""
    required_cases: tuple[str, ...] = ()
    """Fail when any judged arm has no data for one of these."""
    infra_errors: InfraPolicy = InfraPolicy()
    missing_cases: MissingPolicy = MissingPolicy()
    baseline: BaselinePolicy = BaselinePolicy()
    flaky_reruns: FlakyRerunPolicy = FlakyRerunPolicy()
    bootstrap: BootstrapPolicy = BootstrapPolicy()
    tampering: Literal["note", "fail"] = "note"
    """``fail``: a trial whose candidate tampered with the verifier's tree counts as a fail
    even when the restored tree passed; ``note``: it is recorded and shown only."""

    @property
    def warn_level(self) -> float:
        """The warning level in force: ``warn_alpha``, or max(alpha, 0.10) when unset."""
        return self.warn_alpha if self.warn_alpha is not None else max(self.alpha, 0.10)

    @model_validator(mode="after")
    def _levels_ordered(self) -> Policy:
        if self.warn_alpha is not None and self.warn_alpha < self.alpha:
            raise ValueError("warn_alpha must be >= alpha (warnings are the looser level)")
        return self

    @model_validator(mode="after")
    def _unique_ids(self) -> Policy:
        for name in ("critical_cases", "required_cases"):
            ids: tuple[str, ...] = getattr(self, name)
            dupes = sorted({i for i in ids if ids.count(i) > 1})
            if dupes:
                raise ValueError(f"{name} lists {', '.join(dupes)} more than once")
        return self


_UNSET_WHEN_NONE = (("baseline", "pool"), ("baseline", "pool", "conditional_share"))
"""Fields added after policies were stored: canonical content leaves them out while unset,
so an existing policy file keeps its digest (and its stored runs still resume)."""


def policy_data(policy: Policy) -> dict[str, Any]:
    """Return the canonical content of ``policy`` (defaults in, unset later fields out)."""
    data = policy.model_dump(mode="json")
    for *path, name in _UNSET_WHEN_NONE:
        where = data
        for part in path:
            where = where.get(part) or {}
        if name in where and where[name] is None:
            del where[name]
    return data


def policy_digest(policy: Policy) -> str:
    """Digest of the canonical content of ``policy`` (:func:`policy_data`)."""
    return digest_json(policy_data(policy))


class PolicyChangedError(ConfigError):
    """The policy on disk is not the one recorded for the run: refuse to judge."""


class LoadedPolicy(_Frozen):
    """A policy as loaded from its file, with both digests."""

    policy: Policy
    path: str
    digest: str
    """:func:`policy_digest` of the parsed content: the identity recorded for a run."""
    file_digest: str
    """Digest of the raw file bytes: any edit (even a comment) changes it."""


def load_policy(path: Path) -> LoadedPolicy:
    """Load and validate a policy file.

    Raises:
        ConfigError: missing or malformed file, unknown key, value out of range; the
            message names the file, line and field.

    """
    policy, _ = load_model(path, Policy)
    try:
        raw = path.read_bytes()
    except OSError as exc:  # pragma: no cover - load_model read it a moment ago
        raise ConfigError(f"cannot read file: {exc}", file=path) from None
    return LoadedPolicy(
        policy=policy, path=str(path), digest=policy_digest(policy), file_digest=digest_bytes(raw)
    )


def verify_policy(
    loaded: LoadedPolicy, recorded_digest: str, recorded_file_digest: str | None = None
) -> tuple[str, ...]:
    """Check that ``loaded`` is the policy recorded for a run; return notes for the report.

    Raises:
        PolicyChangedError: the canonical content differs from the recorded one.

    """
    if loaded.digest != recorded_digest:
        raise PolicyChangedError(
            f"the policy changed after the run started: the run recorded policy "
            f"{short(recorded_digest)}, the file now holds {short(loaded.digest)} "
            f"(version {loaded.policy.version!r}). A changed policy is a new policy: "
            "restore the recorded file, or start a new run under the new policy",
            file=loaded.path,
        )
    if recorded_file_digest is not None and loaded.file_digest != recorded_file_digest:
        return (
            f"policy file {loaded.path} was edited after the run started "
            "(comments or layout only; its content and digest are unchanged)",
        )
    return ()


DEFAULT_POLICY = Policy(version="builtin-default", description="no policy file configured")
