"""Starting states (folder, git at a commit, pinned archive) and candidate snapshots."""

from __future__ import annotations

import hashlib
import subprocess
import tarfile
from pathlib import Path

import pytest

from harness.cases.load import load_case
from harness.errors import CaseError
from harness.trial.workspace import extract_tree, materialize, pack_tree, snapshot


def _case_with_repo(make_case, repo_yaml: str) -> Path:
    d = make_case()
    text = (d / "case.yaml").read_text().replace("repo: {kind: folder, path: repo}", repo_yaml)
    (d / "case.yaml").write_text(text)
    return d


def _git(cwd: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(cwd), *args], capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


def test_git_repo_is_checked_out_at_the_pinned_commit(make_case, tmp_path):
    src = tmp_path / "upstream"
    src.mkdir()
    _git(src, "init", "-q")
    _git(src, "config", "user.email", "t@example.invalid")
    _git(src, "config", "user.name", "t")
    (src / "calc.py").write_text("v = 1\n")
    _git(src, "add", ".")
    _git(src, "commit", "-qm", "one")
    first = _git(src, "rev-parse", "HEAD")
    (src / "calc.py").write_text("v = 2\n")
    _git(src, "commit", "-qam", "two")
    d = _case_with_repo(make_case, f"repo: {{kind: git, url: {src}, commit: {first}}}")
    out = tmp_path / "ws"
    materialize(load_case(d), out)
    assert (out / "calc.py").read_text() == "v = 1\n"
    assert not (out / ".git").exists()


def test_archive_must_match_its_sha256(make_case, tmp_path):
    d = make_case()
    archive = d / "start.tar.gz"
    with tarfile.open(archive, "w:gz") as tf:
        tf.add(d / "repo", arcname=".")
    good = hashlib.sha256(archive.read_bytes()).hexdigest()
    text = (
        (d / "case.yaml")
        .read_text()
        .replace(
            "repo: {kind: folder, path: repo}",
            f"repo: {{kind: archive, path: start.tar.gz, sha256: {good}}}",
        )
    )
    (d / "case.yaml").write_text(text)
    out = tmp_path / "ws"
    materialize(load_case(d), out)
    assert (out / "pkg" / "mod.py").read_text().startswith("def answer")
    (d / "case.yaml").write_text(text.replace(good, "ab" * 32))
    with pytest.raises(CaseError, match="archive sha256 is"):
        load_case(d)


def test_snapshot_identity_diff_and_replayable_tarball(tmp_path):
    start = tmp_path / "start"
    (start / "pkg").mkdir(parents=True)
    (start / "pkg" / "mod.py").write_text("a = 1\n")
    from harness.digest import tree_manifest

    work = tmp_path / "work"
    extract_tree(pack_tree(start), work)
    same = snapshot(start, tree_manifest(start), work)
    assert not same.changed and same.diff == b""
    (work / "pkg" / "mod.py").write_text("a = 2\n")
    (work / "new.txt").write_text("x\n")
    cand = snapshot(start, tree_manifest(start), work)
    assert cand.changed and cand.digest != same.digest
    assert b"-a = 1" in cand.diff and b"+a = 2" in cand.diff and b"b/new.txt" in cand.diff
    assert cand.stats == {"files_changed": 2, "insertions": 2, "deletions": 1}
    replay = tmp_path / "replay"
    extract_tree(cand.tarball, replay)
    assert snapshot(start, tree_manifest(start), replay).digest == cand.digest
    (replay / "new.txt").chmod(0o755)
    assert snapshot(start, tree_manifest(start), replay).digest != cand.digest, "exec bit counts"


def test_snapshot_never_reads_through_a_candidate_symlink(tmp_path) -> None:
    from harness.digest import tree_manifest
    from harness.trial.workspace import snapshot

    secret = tmp_path / "host-secret.txt"
    secret.write_text("CANARY-SECRET\n")
    start, ws = tmp_path / "start", tmp_path / "ws"
    start.mkdir()
    (start / "a.py").write_text("x = 1\n")
    ws.mkdir()
    (ws / "a.py").write_text("x = 1\n")
    (ws / "leak.txt").symlink_to(secret)
    (ws / "odd\udcff\n.txt").write_bytes(b"y\n")
    cand = snapshot(start, tree_manifest(start), ws)
    assert b"CANARY-SECRET" not in cand.diff
    assert b"CANARY-SECRET" not in cand.tarball
    assert cand.changed and cand.stats["files_changed"] == 2
