"""A baseline pool through the CLI: it grows by the live baseline trials of each gated run,
the report and `harness policy check` show it, and another environment starts another pool."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support import harness

pytestmark = pytest.mark.integration

POLICY = 'version: "1"\nbaseline:\n  pool: {live_trials: 1}\n'


def _ok(root: Path, *args: str) -> str:
    done = harness(root, *args, env={"HARNESS_TRACEBACK": "1"})
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def _promote(root: Path) -> None:
    (root / "policy.yaml").write_text(POLICY)
    _ok(root, "run", "--release", "good", "--k", "2", "--no-report")
    _ok(root, "baseline", "promote", "latest", "--name", "prod")


def _gate(root: Path, run: str = "latest") -> dict:  # type: ignore[type-arg]
    return json.loads(_ok(root, "gate", run, "--json"))  # type: ignore[no-any-return]


def _pooled(gate: dict) -> dict:  # type: ignore[type-arg]
    found = [r for r in gate["decision"]["reasons"] if r["code"] == "baseline_pooled"]
    assert len(found) == 1, gate["decision"]["reasons"]
    return found[0]["data"]  # type: ignore[no-any-return]


def _pools(root: Path) -> dict[str, list[str]]:
    folder = root / ".harness" / "pools"
    return {
        p.name: sorted(e.name for e in (p / "entries").glob("*.json"))
        if (p / "entries").is_dir()
        else []
        for p in sorted(folder.iterdir())
    }


def test_a_pool_grows_over_three_runs_and_the_report_and_policy_check_show_it(
    project: Path,
) -> None:
    _promote(project)
    runs: list[str] = []
    first_entry = b""
    for i in range(3):
        args = ["run", "--release", "good", "--k", "2", "--baseline", "prod"]
        _ok(project, *args, *(["--fresh"] if i else []))
        gate = _gate(project)
        runs.append(gate["run_id"])
        # The comparison uses the pool: the 2 promoted trials plus 1 live per earlier run.
        assert _pooled(gate)["pool_trials"] == {f"add-{c}": 2 + i for c in range(3)}
        assert gate["decision"]["baseline_pooled"] is True
        note = next(n for n in gate["notes"] if n.startswith("baseline pool "))
        assert f"{2 + i} trials per case (2 promoted; {3 * i} live in all from {i} earlier" in note
        assert f"add-1: {2 + i} trials (2 promoted, {i} live)" in note
        # Only the policy's live sample of the baseline ran: 1 trial per case, not k = 2.
        trials = json.loads(_ok(project, "show", "--json"))["trials"]
        assert sum(t["key"]["arm"] == "baseline" for t in trials) == 3
        pools = _pools(project)
        assert len(pools) == 1
        (pool,) = pools
        assert pools[pool] == sorted(f"{r}.json" for r in runs)
        entry = project / ".harness" / "pools" / pool / "entries" / f"{runs[0]}.json"
        first_entry = first_entry or entry.read_bytes()
        assert entry.read_bytes() == first_entry  # append-only: never rewritten
    # The first run is judged again against the pool as it was when it started.
    assert _pooled(_gate(project, runs[0]))["pool_trials"] == {f"add-{c}": 2 for c in range(3)}
    # The report shows the pool's size per case and where its trials came from.
    _ok(project, "report", runs[2])
    page = (project / "reports" / runs[2] / "index.html").read_text()
    assert "4 trials per case (2 promoted; 6 live in all from 2 earlier run(s)" in page
    assert runs[0] in page and runs[1] in page
    # policy check reports the conditional rates for this pool.
    out = _ok(
        project, "policy", "check", "--reps", "50", "--pool-samples", "5", "--pool-releases", "5"
    )
    assert f"baseline pool {pool}: 5 trials per case (2 promoted; 9 live" in out
    assert "conditional false FAIL of unchanged releases at k = 2, 1 live" in out
    for row in ("promoted trials alone", "pools of this size (now)", "after 5 more runs"):
        assert row in out
    assert "this pool, averaged over its posterior" in out


def test_a_bad_pool_policy_is_refused_before_anything_is_stored(project: Path) -> None:
    _promote(project)
    before = sorted(p.name for p in (project / ".harness" / "runs").iterdir())
    (project / "policy.yaml").write_text('version: "1"\nbaseline:\n  pool: {live_trials: -1}\n')
    done = harness(project, "run", "--release", "good", "--k", "2", "--baseline", "prod")
    assert done.returncode == 2, done.stdout + done.stderr
    assert "live_trials" in done.stderr and "policy.yaml" in done.stderr
    assert "Traceback" not in done.stderr
    assert sorted(p.name for p in (project / ".harness" / "runs").iterdir()) == before
    assert not (project / ".harness" / "pools").exists()


@pytest.mark.docker
def test_a_changed_environment_starts_a_new_pool(project: Path) -> None:
    _promote(project)
    base = ["run", "--release", "good", "--k", "2", "--baseline", "prod"]
    _ok(project, *base)
    _ok(project, *base, "--fresh")
    assert _pooled(_gate(project))["pool_trials"] == {f"add-{c}": 3 for c in range(3)}
    # Another sandbox backend is another environment: its pool starts from the promoted trials.
    _ok(project, *base, "--backend", "docker")
    assert _pooled(_gate(project))["pool_trials"] == {f"add-{c}": 2 for c in range(3)}
    pools = _pools(project)
    assert len(pools) == 2
    assert sorted(len(v) for v in pools.values()) == [1, 2]
    out = _ok(
        project, "policy", "check", "--reps", "50", "--pool-samples", "5", "--pool-releases", "5"
    )
    assert "(backend docker," in out and "(backend local," in out
