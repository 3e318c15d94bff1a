"""A corpus of malformed inputs: each one exits 2 naming the file and the field, quickly.

Every entry copies the bundled example project (the repository root) to a temporary folder,
applies one mutation to one of its files — or passes a bad command-line option — and runs
the CLI. Mutations edit the bundled files in place (set or delete one key, replace the
text, turn the file into a folder...), so fields that other work adds to those files do not
break the corpus.

Each entry must: exit 2; print the file (relative to the project) and the field, or the
option, on stderr; print no traceback; finish well within a time bound; and leave no store
behind. Most entries run in-process through click's CliRunner (fast); a sample also runs
through the real ``python -m harness.cli`` in a subprocess with a timeout.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner
from support import harness

from harness.cli import main

REPO = Path(__file__).resolve().parent.parent
PROJECT_PARTS = ("harness.yaml", "policy.yaml", "cases", "orchestration", "baselines", "env")

HARNESS = "harness.yaml"
AGENT_FILES = "releases.candidate.agent.files"
POLICY = "policy.yaml"
CASE = "cases/date-type/case.yaml"
LOCK = "cases/golden.lock.yaml"
RUN = ("run", "--release", "candidate", "--k", "1", "--case", "date-type", "--no-report")
SECONDS = 20.0
"""Per entry; a correct refusal takes well under a second even on a busy machine."""

# 9 levels of 9 aliases: 9**9 ≈ 387 million values once expanded.
BILLION_LAUGHS = "lol: &a0 [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"l{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]\n" for i in range(1, 9)
)


# ------------------------------------------------------------------------------ mutations


Mutation = Callable[[Path], None]


def _edit(path: Path, change: Callable[[Any], Any]) -> None:
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    data = change(data)
    path.unlink()  # a fresh file, never writing through a link into the template
    path.write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True), encoding="utf-8")


def _walk(data: Any, keys: list[str]) -> Any:
    for k in keys:
        data = data[int(k)] if isinstance(data, list) else data[k]
    return data


def _split(dotted: str) -> list[str]:
    return dotted.split(".")


@dataclass(frozen=True)
class Set:
    """Set the value at a dotted key path (list items by index), creating mappings."""

    key: str
    value: Any

    def __call__(self, path: Path) -> None:
        def change(data: Any) -> Any:
            *parents, last = _split(self.key)
            node = data
            for k in parents:
                if isinstance(node, list):
                    node = node[int(k)]
                else:
                    if not isinstance(node.get(k), dict | list):
                        node[k] = {}
                    node = node[k]
            if isinstance(node, list):
                node[int(last)] = self.value
            else:
                node[last] = self.value
            return data

        _edit(path, change)

    def __str__(self) -> str:
        return f"{self.key}={self.value!r}"[:100]


@dataclass(frozen=True)
class RenameKey:
    """Rename key ``old`` of the mapping at ``parent`` (for keys that are names)."""

    parent: str
    old: str
    new: str

    def __call__(self, path: Path) -> None:
        def change(data: Any) -> Any:
            mapping = _walk(data, _split(self.parent))
            mapping[self.new] = mapping.pop(self.old)
            return data

        _edit(path, change)

    def __str__(self) -> str:
        return f"{self.parent}: {self.old} -> {self.new!r}"


@dataclass(frozen=True)
class Delete:
    """Remove the key at a dotted path."""

    key: str

    def __call__(self, path: Path) -> None:
        def change(data: Any) -> Any:
            *parents, last = _split(self.key)
            del _walk(data, parents)[last]
            return data

        _edit(path, change)

    def __str__(self) -> str:
        return f"del {self.key}"


@dataclass(frozen=True)
class Text:
    """Replace the whole file by ``text`` (str or bytes)."""

    text: str | bytes
    label: str

    def __call__(self, path: Path) -> None:
        path.unlink()
        if isinstance(self.text, bytes):
            path.write_bytes(self.text)
        else:
            path.write_text(self.text, encoding="utf-8")

    def __str__(self) -> str:
        return self.label


@dataclass(frozen=True)
class Append:
    """Append raw text to the file (e.g. a duplicate key)."""

    text: str
    label: str

    def __call__(self, path: Path) -> None:
        text = path.read_text(encoding="utf-8") + self.text
        path.unlink()
        path.write_text(text, encoding="utf-8")

    def __str__(self) -> str:
        return self.label


@dataclass(frozen=True)
class Fs:
    """A filesystem change: the file becomes a folder, a link, a FIFO, or disappears."""

    kind: str
    target: str = ""

    def __call__(self, path: Path) -> None:
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        elif path.exists() or path.is_symlink():
            path.unlink()
        if self.kind == "dir":
            path.mkdir()
            (path / "x.yaml").write_text("a: 1\n")
        elif self.kind == "symlink":
            path.symlink_to(self.target)
        elif self.kind == "fifo":
            os.mkfifo(path)
        elif self.kind == "rename":
            (path.parent / self.target).write_text("id: x\n")
        elif self.kind == "file":
            path.write_text("not a folder\n")
        else:
            assert self.kind == "remove"

    def __str__(self) -> str:
        return f"{self.kind} {self.target}".strip()


@dataclass(frozen=True)
class Bad:
    """One malformed input: where, what, and what stderr must name."""

    file: str | None
    """File mutated and named in the error (relative to the project), None for CLI input."""
    mutation: Mutation | None
    expect: tuple[str, ...]
    """Strings stderr must contain: the field or option, and/or the limit that fired."""
    args: tuple[str, ...] = RUN
    names_file: bool = True
    """False where the error names another file than the one mutated (said in ``expect``)."""

    @property
    def id(self) -> str:
        where = {HARNESS: "harness", POLICY: "policy", CASE: "case", LOCK: "lock"}.get(
            self.file or "", self.file or "cli"
        )
        what = str(self.mutation) if self.mutation else " ".join(self.args)
        return f"{where}:{what}"


def yaml_bombs(file: str) -> list[Bad]:
    """The file-level attacks every YAML input gets."""
    return [
        Bad(file, Text(BILLION_LAUGHS, "billion laughs"), ("alias",)),
        Bad(file, Text("a: &a [1, *a]\n", "recursive alias"), ("alias *a",)),
        Bad(file, Text("a: " + "[" * 200 + "]" * 200 + "\n", "deep nesting"), ("nests deeper",)),
        Bad(file, Text("a: " + "x" * (9 * 1024 * 1024) + "\n", "9 MiB"), ("larger than",)),
        Bad(file, Text("- 1\n- 2\n", "a list"), ("dictionary" if file == LOCK else "mapping",)),
        Bad(file, Text(b"a: \xff\xfe\n", "not utf-8"), ("UTF-8",)),
        Bad(file, Text("a: [1, 2\n", "unclosed flow"), ("malformed YAML",)),
        Bad(file, Text("a: 1\n---\nb: 2\n", "two documents"), ("malformed YAML",)),
        Bad(file, Text("a: !!python/object/apply:os.system [true]\n", "python tag"), ("tag",)),
        Bad(file, Text("? [a]\n: 1\n", "complex key"), ("key",)),
        Bad(file, Fs("dir"), ("folder",)),
        Bad(file, Fs("fifo"), ("regular file",)),
    ]


R = "releases.candidate"
A = f"{R}.agent"
CA = "contract.agent"
CV = "contract.verifier"

CORPUS: list[Bad] = [
    # -- harness.yaml ------------------------------------------------------------------
    *yaml_bombs(HARNESS),
    Bad(HARNESS, Text("", "empty"), ("mapping",)),
    Bad(HARNESS, Append("\ntask_set: golden\n", "duplicate key"), ("duplicate key",)),
    Bad(HARNESS, Set("shcema_version", 1), ("shcema_version",)),
    Bad(HARNESS, Set("schema_version", 2), ("schema_version",)),
    Bad(HARNESS, Set("task_set", "../evil"), ("task_set",)),
    Bad(HARNESS, Set("cases_dir", "../elsewhere"), ("cases_dir",)),
    Bad(HARNESS, Set("cases_dir", "/tmp"), ("cases_dir",)),
    Bad(HARNESS, Set("store_dir", "../store"), ("store_dir",)),
    Bad(HARNESS, Set("store_dir", "/tmp/harness-store"), ("store_dir",)),
    Bad(HARNESS, Set("store_dir", "."), ("store_dir",)),
    Bad(HARNESS, Set("store_dir", "cases/.store"), ("store_dir",)),
    Bad(HARNESS, Set("store_dir", "policy.yaml"), ("store_dir",)),
    Bad(HARNESS, Set("reports_dir", "../reports"), ("reports_dir",)),
    Bad(HARNESS, Set("reports_dir", "/var/tmp/reports"), ("reports_dir",)),
    Bad(HARNESS, Set("reports_dir", "~/reports"), ("reports_dir",)),
    Bad(HARNESS, Set("reports_dir", ".harness"), ("reports_dir",)),
    Bad(HARNESS, Set("baselines_dir", "../../baselines"), ("baselines_dir",)),
    # agent files that would show the agent what judges it (red team round twenty-five)
    Bad(HARNESS, Set("releases.candidate.agent.files", ["cases"]), ("agent.files", "hidden tests")),
    Bad(
        HARNESS,
        Set("releases.candidate.agent.files", ["cases/date-type/hidden"]),
        ("hidden tests",),
    ),
    Bad(
        HARNESS,
        Set("releases.candidate.agent.files", [".harness"]),
        ("agent.files", "record store"),
    ),
    Bad(
        HARNESS, Set("releases.candidate.agent.files", ["baselines"]), ("agent.files", "baselines")
    ),
    Bad(HARNESS, Set("policy", "../policy.yaml"), ("policy",)),
    Bad(HARNESS, Set("policy", "/etc/passwd"), ("policy",)),
    Bad(HARNESS, Set("policy", "cases"), ("policy",)),
    Bad(HARNESS, Set("policy", "nope.yaml"), ("nope.yaml", "not found"), names_file=False),
    Bad(HARNESS, Set("backend", "podman"), ("backend",)),
    Bad(HARNESS, Set("releases", {}), ("releases",)),
    Bad(HARNESS, Delete("releases"), ("releases",)),
    Bad(HARNESS, Set(R, None), (R,)),
    Bad(HARNESS, Delete(f"{R}.agent"), (f"{R}.agent",)),
    Bad(HARNESS, Set(f"{A}.adapter", "llm"), (f"{A}.adapter",)),
    Bad(HARNESS, Set(A, {"adapter": "command", "command": []}), (f"{A}",)),
    Bad(HARNESS, Set(A, {"adapter": "command"}), (f"{A}",)),
    Bad(HARNESS, Set(A, {"adapter": "command", "command": "agent.sh"}), (f"{A}.command",)),
    Bad(HARNESS, Set(A, {"adapter": "command", "command": [""]}), (f"{A}",)),
    Bad(HARNESS, Set(A, {"command": ["{project}/agents/nope.sh"]}), (f"{A}.command",)),
    Bad(
        HARNESS,
        Set(A, {"command": ["{agent}/nope.sh"], "files": ["orchestration"]}),
        (f"{A}.command",),
    ),
    Bad(HARNESS, Set(A, {"command": ["{agent}/loop.yaml"]}), (f"{A}.command",)),
    Bad(HARNESS, Set(A, {"command": ["orchestration/candidate/loop.yaml"]}), (f"{A}.command",)),
    Bad(HARNESS, Set(A, {"command": ["orchestration/nope.sh", "-v"]}), (f"{A}.command",)),
    Bad(HARNESS, Set(A, {"command": ["../outside.sh"]}), (f"{A}.command",)),
    Bad(HARNESS, Set(A, {"command": ["/nonexistent/bin/agent"]}), (f"{A}.command",)),
    Bad(HARNESS, Set(A, {"command": ["no-such-agent-binary-x7"]}), (f"{A}.command",)),
    Bad(HARNESS, Set(f"{A}.command", ["sh", "-c", "true"]), (f"{A}",)),
    Bad(HARNESS, Set(A, {"adapter": "command", "command": ["sh"], "simulated": {}}), (A,)),
    Bad(HARNESS, Set(f"{A}.simulated.overclaim", 2), (f"{A}.simulated.overclaim",)),
    Bad(HARNESS, Set(f"{A}.simulated.skill.default", 5.0), (f"{A}.simulated.skill.default",)),
    Bad(HARNESS, Set(f"{A}.simulated.skill.date-type", -1), (f"{A}.simulated.skill.date-type",)),
    Bad(HARNESS, Set(f"{A}.simulated.abstain.default", 1.5), (f"{A}.simulated.abstain",)),
    Bad(HARNESS, Set(f"{A}.simulated.learns_from_feedback", -0.1), ("learns_from_feedback",)),
    Bad(HARNESS, Set(f"{A}.simulated.skill", [0.5]), (f"{A}.simulated.skill",)),
    Bad(HARNESS, Set(f"{R}.retry.max_attempts", 0), (f"{R}.retry.max_attempts",)),
    Bad(HARNESS, Set(f"{R}.retry.max_attempts", 10**9), (f"{R}.retry.max_attempts",)),
    Bad(HARNESS, Set(f"{R}.retry.wall_seconds", -1), (f"{R}.retry.wall_seconds",)),
    Bad(HARNESS, Set(f"{R}.retry.wall_seconds", float("inf")), (f"{R}.retry.wall_seconds",)),
    Bad(HARNESS, Set(f"{R}.retry.wall_seconds", 1e12), (f"{R}.retry.wall_seconds",)),
    Bad(HARNESS, Set(f"{R}.retry.infra_retries", 100), (f"{R}.retry.infra_retries",)),
    Bad(HARNESS, Set(f"{R}.retry.stop_on_infra_error", "maybe"), ("stop_on_infra_error",)),
    Bad(HARNESS, Set(f"{R}.components.orchestration", ["../x"]), ("components.orchestration",)),
    Bad(HARNESS, Set(f"{R}.components.orchestration", ["/etc"]), ("components.orchestration",)),
    Bad(HARNESS, Set(f"{R}.components.orchestration", ["nope"]), ("components.orchestration",)),
    Bad(HARNESS, Set(f"{R}.components.tools", 5), (f"{R}.components.tools",)),
    Bad(HARNESS, Set(f"{R}.components.extra", {"a": [1]}), (f"{R}.components.extra.a",)),
    Bad(HARNESS, Set(f"{R}.colour", "blue"), (f"{R}.colour",)),
    # names that become paths (release folders, run ids)
    Bad(HARNESS, RenameKey("releases", "candidate", "../../evil"), ("releases", "../../evil")),
    Bad(HARNESS, RenameKey("releases", "candidate", "a/b"), ("releases", "a/b")),
    Bad(HARNESS, RenameKey("releases", "candidate", ".hidden"), ("releases", ".hidden")),
    Bad(HARNESS, RenameKey("releases", "candidate", "x" * 65), ("releases",)),
    Bad(HARNESS, Set(A, {"adapter": "replay", "replay_run": "../run"}), (f"{A}.replay_run",)),
    # -- case.yaml ---------------------------------------------------------------------
    *yaml_bombs(CASE),
    Bad(CASE, Fs("symlink", "nowhere.yaml"), ("regular file",)),
    Bad(CASE, Fs("rename", "case.yml"), ("case.yml",), names_file=False),
    Bad(CASE, Append("\nversion: 2\n", "duplicate key"), ("duplicate key",)),
    Bad(CASE, Set("id", "other-id"), ("id",)),
    Bad(CASE, Set("id", "Date Type"), ("id",)),
    Bad(CASE, Set("version", 0), ("version",)),
    Bad(CASE, Set("version", "one"), ("version",)),
    Bad(CASE, Delete("version"), ("version",)),
    Bad(CASE, Set("request", ""), ("request",)),
    Bad(CASE, Set("title", ["a"]), ("title",)),
    Bad(CASE, Set("schema_version", 3), ("schema_version",)),
    Bad(CASE, Set("verifer", {}), ("verifer",)),
    Bad(CASE, Set("repo.kind", "svn"), ("repo",)),
    Bad(CASE, Set("repo.path", "../../outside"), ("repo.path",)),
    Bad(CASE, Set("repo.path", "/etc"), ("repo.path",)),
    Bad(CASE, Set("repo.path", "no-such-folder"), ("repo.path",)),
    Bad(CASE, Set("repo", {"kind": "git", "url": ".", "commit": "main"}), ("repo.commit",)),
    Bad(
        CASE, Set("repo", {"kind": "archive", "path": "x.tgz", "sha256": "0" * 64}), ("repo.path",)
    ),
    Bad(CASE, Set("tools", "read_file"), ("tools",)),
    Bad(CASE, Set("limits.turns", 0), ("limits.turns",)),
    Bad(CASE, Set("limits.turns", 10**12), ("limits.turns",)),
    Bad(CASE, Set("limits.tokens", -5), ("limits.tokens",)),
    Bad(CASE, Set("limits.wall_seconds", 0), ("limits.wall_seconds",)),
    Bad(CASE, Set("limits.wall_seconds", float("inf")), ("limits.wall_seconds",)),
    Bad(CASE, Set("limits.wall_seconds", 1e12), ("limits.wall_seconds",)),
    Bad(CASE, Set(f"{CA}.network", "bridge"), (f"{CA}.network",)),
    Bad(CASE, Set(f"{CA}.timeout_seconds", -1), (f"{CA}.timeout_seconds",)),
    Bad(CASE, Set(f"{CA}.timeout_seconds", float("nan")), (f"{CA}.timeout_seconds",)),
    Bad(CASE, Set(f"{CA}.timeout_seconds", 1e20), (f"{CA}.timeout_seconds",)),
    Bad(CASE, Set(f"{CA}.cpu_seconds", 0), (f"{CA}.cpu_seconds",)),
    Bad(CASE, Set(f"{CA}.cpus", 1e9), (f"{CA}.cpus",)),
    Bad(CASE, Set(f"{CA}.memory_mb", 8), (f"{CA}.memory_mb",)),
    Bad(CASE, Set(f"{CA}.memory_mb", 10**15), (f"{CA}.memory_mb",)),
    Bad(CASE, Set(f"{CA}.pids", 1), (f"{CA}.pids",)),
    Bad(CASE, Set(f"{CA}.pids", 10**12), (f"{CA}.pids",)),
    Bad(CASE, Set(f"{CV}.disk_mb", 0), (f"{CV}.disk_mb",)),
    Bad(CASE, Set(f"{CV}.disk_mb", 10**15), (f"{CV}.disk_mb",)),
    Bad(CASE, Set(f"{CV}.output_bytes", 10), (f"{CV}.output_bytes",)),
    Bad(CASE, Set(f"{CV}.output_bytes", 10**15), (f"{CV}.output_bytes",)),
    Bad(CASE, Set(f"{CA}.env", "HOME"), (f"{CA}.env",)),
    Bad(CASE, Set(f"{CA}.env", ["BAD=NAME"]), (f"{CA}.env.0",)),
    Bad(CASE, Set(f"{CA}.read_only_root", "sometimes"), (f"{CA}.read_only_root",)),
    Bad(CASE, Set("contract.judge", {}), ("contract.judge",)),
    Bad(CASE, Set("verifier.command", []), ("verifier.command",)),
    Bad(CASE, Set("verifier.command", [""]), ("verifier.command",)),
    Bad(CASE, Set("verifier.command", " "), ("verifier.command",)),
    Bad(CASE, Delete("verifier.command"), ("verifier.command",)),
    Bad(CASE, Set("verifier.expected_exit", 256), ("verifier.expected_exit",)),
    Bad(CASE, Set("verifier.expected_exit", -1), ("verifier.expected_exit",)),
    Bad(CASE, Set("verifier.artifacts.0.rule", "xml"), ("verifier.artifacts.0.rule",)),
    Bad(CASE, Set("verifier.artifacts.0.path", "../x"), ("verifier.artifacts.0.path",)),
    Bad(CASE, Set("verifier.artifacts.0.min_tests", -1), ("verifier.artifacts.0.min_tests",)),
    Bad(CASE, Set("verifier.hidden.0.src", "hidden/nope.py"), ("verifier.hidden.0.src",)),
    Bad(CASE, Set("verifier.hidden.0.src", "../../../harness.yaml"), ("verifier.hidden.0.src",)),
    Bad(CASE, Set("verifier.hidden.0.dest", "/etc/x"), ("verifier.hidden.0.dest",)),
    Bad(
        CASE,
        Set(
            "verifier.mutants",
            [
                {
                    "name": "m",
                    "replace": [{"src": "hidden/nope.py", "dest": "fieldkit/coerce.py"}],
                    "must_fail": ["t"],
                }
            ],
        ),
        ("verifier.mutants.0.replace.0.src", "not a file"),
    ),
    Bad(
        CASE,
        Set("verifier.mutants", [{"name": "m", "replace": [], "must_fail": ["t"]}]),
        ("verifier.mutants.0.replace",),
    ),
    Bad(
        CASE,
        Set(
            "verifier.mutants",
            [
                {
                    "name": "Bad Name",
                    "replace": [{"src": "reference.patch", "dest": "x.py"}],
                    "must_fail": ["t"],
                }
            ],
        ),
        ("verifier.mutants.0.name",),
    ),
    Bad(CASE, Set("reference.patch", "nope.patch"), ("reference.patch",)),
    Bad(CASE, Delete("reference"), ("reference",)),
    Bad(CASE, Set("lane", "manual"), ("lane",)),
    Bad(CASE, Set("expect", "maybe"), ("expect",)),
    Bad(CASE, Set("feedback.public_command", []), ("feedback.public_command",)),
    Bad(CASE, Set("feedback.hidden_diagnostics", "sometimes"), ("feedback.hidden_diagnostics",)),
    Bad(CASE, Set("critical", "very"), ("critical",)),
    Bad(CASE, Set("tags", 5), ("tags",)),
    Bad(CASE, Set("retired", {"date": "yesterday", "reason": "x"}), ("retired.date",)),
    Bad(CASE, Set("retired", {"date": "2024-01-01", "reason": ""}), ("retired.reason",)),
    # -- policy.yaml -------------------------------------------------------------------
    *yaml_bombs(POLICY),
    Bad(POLICY, Fs("remove"), ("not found",)),
    Bad(POLICY, Append("\nalpha: 0.01\n", "duplicate key"), ("duplicate key",)),
    Bad(POLICY, Delete("version"), ("version",)),
    Bad(POLICY, Set("version", ""), ("version",)),
    Bad(POLICY, Set("schema_version", 2), ("schema_version",)),
    Bad(POLICY, Set("alpha", 0.7), ("alpha",)),
    Bad(POLICY, Set("alpha", 0), ("alpha",)),
    Bad(POLICY, Set("alpha", float("nan")), ("alpha",)),
    Bad(POLICY, Set("thresholds.pass_rate_drop", 2), ("thresholds.pass_rate_drop",)),
    Bad(POLICY, Set("thresholds.typo", 0.1), ("thresholds.typo",)),
    Bad(POLICY, Set("regression_budget.confidence", 1), ("regression_budget.confidence",)),
    Bad(POLICY, Set("regression_budget.floor", -1), ("regression_budget.floor",)),
    Bad(POLICY, Set("critical_cases", ["date-type", "date-type"]), ("critical_cases",)),
    Bad(POLICY, Set("critical_cases", "date-type"), ("critical_cases",)),
    Bad(POLICY, Set("infra_errors.warn_above", 1.5), ("infra_errors.warn_above",)),
    Bad(POLICY, Set("infra_errors", {"warn_above": 0.5, "block_above": 0.1}), ("infra_errors",)),
    Bad(POLICY, Set("missing_cases.max_fraction", -0.1), ("missing_cases.max_fraction",)),
    Bad(POLICY, Set("baseline", {"mode": "sample"}), ("baseline",)),
    Bad(POLICY, Set("baseline", {"mode": "sample", "sample_size": 0}), ("baseline.sample_size",)),
    Bad(POLICY, Set("baseline.drift_alpha", 0.9), ("baseline.drift_alpha",)),
    Bad(POLICY, Set("flaky_reruns.extra_trials", 10**9), ("flaky_reruns.extra_trials",)),
    Bad(POLICY, Set("flaky_reruns.extra_trials", -1), ("flaky_reruns.extra_trials",)),
    Bad(POLICY, Set("flaky_reruns.max_cases", -1), ("flaky_reruns.max_cases",)),
    Bad(POLICY, Set("bootstrap.resamples", 10**9), ("bootstrap.resamples",)),
    Bad(POLICY, Set("bootstrap.seed", "x"), ("bootstrap.seed",)),
    # -- task-set lock -----------------------------------------------------------------
    *yaml_bombs(LOCK),
    Bad(LOCK, Set("colour", "blue"), ("colour",)),
    Bad(LOCK, Delete("task_set"), ("task_set",)),
    Bad(LOCK, Set("cases.date-type.1.digest", ["x"]), ("cases.date-type.1.digest",)),
    Bad(LOCK, Set("cases.date-type.1.files", "x"), ("cases.date-type.1.files",)),
    Bad(LOCK, Set("cases.date-type.one", {"digest": "x"}), ("cases.date-type.one",)),
    Bad(LOCK, Set("cases.date-type.1.digest", "sha256:" + "0" * 64), ("date-type",)),
    # -- command line ------------------------------------------------------------------
    Bad(None, None, ("--k",), ("run", "--release", "candidate", "--k", "0")),
    Bad(None, None, ("--k",), ("run", "--release", "candidate", "--k", "-1")),
    Bad(None, None, ("--k",), ("run", "--release", "candidate", "--k", "101")),
    Bad(None, None, ("--k",), ("run", "--release", "candidate", "--k", "1000000000")),
    Bad(None, None, ("--k",), ("run", "--release", "candidate", "--k", "ten")),
    Bad(None, None, ("--jobs",), (*RUN, "--jobs", "0")),
    Bad(None, None, ("--jobs",), (*RUN, "--jobs", "-3")),
    Bad(None, None, ("--jobs",), (*RUN, "--jobs", "100000")),
    Bad(None, None, ("--backend",), (*RUN, "--backend", "podman")),
    Bad(None, None, ("--executor",), (*RUN, "--executor", "ray")),
    Bad(None, None, ("--scheduler",), (*RUN, "--scheduler", "tcp://127.0.0.1:1")),
    Bad(None, None, ("--release",), ("run", "--k", "1")),
    Bad(None, None, ("releases", "nope"), ("run", "--release", "nope", "--k", "1")),
    Bad(None, None, ("baseline", "nope"), (*RUN, "--baseline", "nope")),
    Bad(None, None, ("nope",), ("run", "--release", "candidate", "--k", "1", "--case", "nope")),
    Bad(None, None, ("--allow-unenforced",), (*RUN, "--allow-unenforced", "gravity")),
    Bad(None, None, ("--colour",), (*RUN, "--colour")),
    Bad(None, None, ("nope",), ("cases", "validate", "--case", "nope")),
    Bad(None, None, ("--baseline", "../x"), (*RUN, "--baseline", "../x")),
    Bad(None, None, ("RUN", "../x"), ("gate", "../x")),
    Bad(None, None, ("RUN", "a/b"), ("show", "a/b")),
    Bad(None, None, ("RUN",), ("report", "../../etc")),
    Bad(HARNESS, Fs("remove"), ("--project", "harness.yaml"), ("cases", "list")),
]


# ------------------------------------------------------------------------------ running


@pytest.fixture(scope="session")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("bundled")
    for part in PROJECT_PARTS:
        src = REPO / part
        if src.is_dir():
            shutil.copytree(src, root / part, ignore=shutil.ignore_patterns(".harness"))
        else:
            shutil.copy2(src, root / part)
    return root


def _project(template: Path, tmp_path: Path, bad: Bad) -> Path:
    root = tmp_path / "project"
    # Hard links are enough: every mutation replaces a file rather than writing through it.
    shutil.copytree(template, root, symlinks=True, copy_function=os.link)
    if bad.mutation is not None:
        assert bad.file is not None
        bad.mutation(root / bad.file)
    return root


@contextlib.contextmanager
def _deadline(seconds: float) -> Iterator[None]:
    """Fail an in-process run that does not finish in time (a hang) instead of waiting."""

    def expire(signum: int, frame: object) -> None:
        raise TimeoutError(f"no answer within {seconds} s: a hang")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _args(bad: Bad, root: Path) -> list[str]:
    """The entry's arguments with ``--project`` placed after the (sub)command."""
    args = list(bad.args)
    at = 2 if args[0] in ("cases", "baseline", "images", "sandbox") else 1
    return [*args[:at], "--project", str(root), *args[at:]]


def _check(
    bad: Bad, root: Path, code: int, stderr: str, elapsed: float, limit: float = SECONDS
) -> None:
    assert "Traceback" not in stderr, stderr
    assert code == 2, f"exit {code}, expected 2:\n{stderr}"
    if bad.file is not None and bad.names_file:
        assert bad.file in stderr.replace(os.sep, "/"), f"{bad.file} not named:\n{stderr}"
    for want in bad.expect:
        assert want in stderr, f"{want!r} not named:\n{stderr}"
    assert elapsed < limit, f"took {elapsed:.1f} s"
    assert not (root / ".harness").exists(), "a refused input left a store behind"
    assert not (root / "reports").exists(), "a refused input left a report behind"


@pytest.mark.parametrize("bad", CORPUS, ids=[b.id for b in CORPUS])
def test_malformed_input_exits_2_naming_file_and_field(
    bad: Bad, template: Path, tmp_path: Path
) -> None:
    root = _project(template, tmp_path, bad)
    start = time.monotonic()
    with _deadline(SECONDS):
        result = CliRunner().invoke(main, _args(bad, root))
    elapsed = time.monotonic() - start
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise AssertionError(f"not a clean refusal: {result.exception!r}\n{result.stderr}")
    _check(bad, root, result.exit_code, result.stderr, elapsed)


def test_the_corpus_covers_every_file_and_the_cli() -> None:
    counts: dict[str | None, int] = {}
    for bad in CORPUS:
        counts[bad.file] = counts.get(bad.file, 0) + 1
    assert len(CORPUS) >= 100
    assert {HARNESS, CASE, POLICY, LOCK, None} <= set(counts)
    assert len({b.id for b in CORPUS}) == len(CORPUS), "entry ids must be unique"


# A sample through the real entry point: the process, its exit code and its stderr.
SUBPROCESS_SAMPLE = [
    b
    for b in CORPUS
    if b.id
    in {
        "harness:billion laughs",
        "case:billion laughs",
        "policy:billion laughs",
        "lock:billion laughs",
        "case:fifo",
        "cli:run --release candidate --k 1000000000",
        "case:dir",
        f"harness:{Set(A, {'adapter': 'command', 'command': []})}",
        "harness:store_dir='../store'",
    }
]


@pytest.mark.parametrize("bad", SUBPROCESS_SAMPLE, ids=[b.id for b in SUBPROCESS_SAMPLE])
def test_malformed_input_through_the_real_cli(bad: Bad, template: Path, tmp_path: Path) -> None:
    root = _project(template, tmp_path, bad)
    start = time.monotonic()
    done = harness(root, *_args(bad, root), timeout=SECONDS * 3)
    elapsed = time.monotonic() - start  # includes interpreter start-up and imports
    _check(bad, root, done.returncode, done.stderr + done.stdout, elapsed, limit=SECONDS * 3)


def test_subprocess_sample_is_complete() -> None:
    assert len(SUBPROCESS_SAMPLE) == 9


def test_billion_laughs_is_refused_in_under_a_second(template: Path, tmp_path: Path) -> None:
    bad = Bad(CASE, Text(BILLION_LAUGHS, "billion laughs"), ("alias",))
    root = _project(template, tmp_path, bad)
    start = time.monotonic()
    result = CliRunner().invoke(main, ["cases", "list", "--project", str(root)])
    elapsed = time.monotonic() - start
    assert result.exit_code == 2, result.output
    assert CASE in result.stderr and "alias" in result.stderr
    assert elapsed < 1.0, f"took {elapsed:.2f} s"


def test_no_harness_yaml_advises_the_real_option(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["cases", "list", "--project", str(tmp_path)])
    assert result.exit_code == 2
    assert "--project DIR" in result.stderr
    # The advice works as given: --project after the command.
    advised = CliRunner().invoke(main, ["cases", "list", "--project", str(REPO)])
    assert advised.exit_code == 0, advised.output


# ------------------------------------------------------------------------------ controls

GOOD_AGENT = {
    "adapter": "command",
    "command": ["{agent}/orchestration/candidate/loop.yaml"],
    "files": ["orchestration/candidate"],
}

VALID_VARIANTS: list[tuple[str, Mutation]] = [
    (HARNESS, Set("store_dir", "var/harness-store")),
    (HARNESS, Set("reports_dir", "out/reports")),
    (HARNESS, Set(A, GOOD_AGENT)),
    (HARNESS, Set(A, {"adapter": "command", "command": ["/opt/harness/env/x/bin/mini"]})),
    (HARNESS, Set(A, {"adapter": "command", "command": ["python3", "agent.py"]})),
    (HARNESS, Set(A, {"adapter": "command", "command": ["/bin/sh", "-c", "true"]})),
    (HARNESS, Set(f"{R}.retry.wall_seconds", 3600)),
    (CASE, Set(f"{CA}.env", ["HOME", "_X1"])),
    (CASE, Set("verifier.expected_exit", 255)),
]


@pytest.mark.parametrize("file,mutation", VALID_VARIANTS, ids=[str(m) for _, m in VALID_VARIANTS])
def test_valid_variants_still_load(file: str, mutation: Mutation, template: Path, tmp_path: Path):
    """The checks refuse the corpus, not its neighbours: these load and pass the agent check."""
    from harness.cases.load import load_cases
    from harness.project import load_project

    root = _project(template, tmp_path, Bad(file, mutation, ()))
    project = load_project(root)
    project.check_agent_program("candidate")
    assert load_cases(project.cases_dir, ["date-type"])


@pytest.mark.parametrize("program", ["/opt/agent/bin/agent", "agent-in-the-image"])
def test_docker_leaves_absolute_and_bare_programs_to_the_image(
    program: str, template: Path, tmp_path: Path
) -> None:
    from harness.errors import ConfigError
    from harness.project import load_project

    root = _project(template, tmp_path, Bad(HARNESS, Set(A, {"command": [program]}), ()))
    with pytest.raises(ConfigError, match="agent program"):
        load_project(root).check_agent_program("candidate")
    Set("backend", "docker")(root / HARNESS)
    load_project(root).check_agent_program("candidate")  # the image's business
    Set(A, {"command": ["{agent}/nope.sh"], "files": ["nope.sh"]})(root / HARNESS)
    with pytest.raises(ConfigError, match=r"not a file in the project|does not exist"):
        load_project(root).check_agent_program("candidate")
