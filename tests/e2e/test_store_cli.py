"""The store through the CLI: names cannot escape, tampering is refused, writes are atomic.

Each attack is made the way a user or a hostile process would: by editing files on disk
or passing a name on the command line, then running the public `harness` command.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support import harness, make_project

from harness.store.store import MANIFEST, _chain

pytestmark = pytest.mark.integration


@pytest.fixture
def small(tmp_path: Path) -> Path:
    root = make_project(tmp_path / "proj", n_cases=2)
    assert harness(root, "cases", "lock").returncode == 0
    return root


def _listing(top: Path) -> dict[str, bytes]:
    """Every file and folder under ``top`` with its content: the filesystem, before/after."""
    out: dict[str, bytes] = {}
    for dirpath, dirs, files in os.walk(top):
        for d in dirs:
            out[os.path.join(dirpath, d) + "/"] = b""
        for f in files:
            p = Path(dirpath, f)
            out[str(p)] = p.read_bytes() if not p.is_symlink() else b"->"
    return out


def _run_dir(root: Path) -> Path:
    [d] = (root / ".harness" / "runs").iterdir()
    return d


def _finished(root: Path, release: str = "bad") -> Path:
    done = harness(root, "run", "--release", release, "--k", "1", "--no-report")
    assert done.returncode in (0, 1), done.stdout + done.stderr
    return _run_dir(root)


# -- names cannot escape ------------------------------------------------------------------


def test_baseline_promote_with_an_escaping_name_exits_2_and_writes_nothing(small):
    _finished(small, "good")
    top = small.parent
    for name in ("../x", "../../../X", "a/b", ".."):
        before = _listing(top)
        done = harness(small, "baseline", "promote", "latest", "--name", name)
        assert done.returncode == 2, (name, done.stdout, done.stderr)
        assert "--name" in done.stderr and "Traceback" not in done.stderr
        assert _listing(top) == before, f"--name {name} wrote something"
    assert not (top / "x").exists() and not (small / "baselines").exists()


def test_a_release_named_to_escape_exits_2_naming_the_file_and_writes_nothing(small):
    yaml = small / "harness.yaml"
    yaml.write_text(yaml.read_text().replace("  good:\n", "  ../../evil:\n"))
    top = small.parent.parent
    before = _listing(small.parent)
    for args in (
        ("run", "--release", "../../evil", "--k", "1"),
        ("gate",),
        ("report",),
        ("show",),
    ):
        done = harness(small, *args)
        assert done.returncode == 2, (args, done.stdout, done.stderr)
        assert "harness.yaml" in done.stderr and "releases" in done.stderr, done.stderr
        assert "Traceback" not in done.stderr
    assert _listing(small.parent) == before
    assert not (top / "evil").exists() and not list(top.glob("evil*"))


def test_a_run_reference_cannot_escape(small):
    for ref in ("../../etc", "x/../../y"):
        done = harness(small, "show", ref)
        assert done.returncode == 2 and "RUN" in done.stderr, done.stderr


# -- a tamper-evident store ---------------------------------------------------------------


def _flip_to_pass(path: Path) -> None:
    data = json.loads(path.read_text())
    data["verdict"] = {"outcome": "pass", "reason": "all checks passed"}
    for a in data["attempts"]:
        a["verdict"] = {"outcome": "pass", "reason": "all checks passed"}
    path.write_text(json.dumps(data, indent=2))


def test_gate_refuses_a_record_edited_from_fail_to_pass_naming_it(small):
    rdir = _finished(small, "bad")
    assert harness(small, "gate").returncode == 1  # no baseline, 0 % passed: a fail
    record = sorted((rdir / "trials").glob("*.json"))[0]
    _flip_to_pass(record)
    promote = ("baseline", "promote", "latest", "--name", "b")
    for args in (("gate",), ("show",), ("report",), promote):
        done = harness(small, *args)
        assert done.returncode == 4, (args, done.stdout, done.stderr)
        assert record.name in done.stderr and "changed since it was committed" in done.stderr
        assert "Traceback" not in done.stderr
    assert not (small / "baselines").exists()


def _rechain(rdir: Path) -> None:
    lines = [json.loads(x) for x in (rdir / MANIFEST).read_text().splitlines()]
    prev, out = "sha256:" + "0" * 64, []
    for e in lines:
        digest = "sha256:" + hashlib.sha256((rdir / e["path"]).read_bytes()).hexdigest()
        new = _chain(e["seq"], e["path"], digest, tuple(e["blobs"]), prev)
        out.append(new.model_dump_json() + "\n")
        prev = new.head
    (rdir / MANIFEST).write_text("".join(out))


def test_an_edited_record_with_a_recomputed_manifest_is_detected_by_the_seal(small):
    rdir = _finished(small, "bad")
    _flip_to_pass(sorted((rdir / "trials").glob("*.json"))[0])
    _rechain(rdir)
    done = harness(small, "gate")
    assert done.returncode == 4, done.stdout + done.stderr
    assert "validity.json" in done.stderr and MANIFEST in done.stderr


def test_a_corrupt_blob_blocks_show_gate_and_report(small):
    rdir = _finished(small, "good")
    entries = [json.loads(x) for x in (rdir / MANIFEST).read_text().splitlines()]
    entry = next(e for e in entries if e["blobs"])
    hexd = entry["blobs"][0].split(":")[1]
    blob = small / ".harness" / "blobs" / "sha256" / hexd[:2] / hexd
    blob.write_bytes(blob.read_bytes() + b"\n# tampered")
    for args in (("show",), ("gate",), ("report",)):
        done = harness(small, *args)
        assert done.returncode == 4, (args, done.stdout, done.stderr)
        assert hexd in done.stderr and "corrupt" in done.stderr and "Traceback" not in done.stderr
    assert not (small / "reports").exists()


def test_a_record_written_just_before_kill_9_is_rerun_on_resume(small, monkeypatch):
    monkeypatch.setenv("_HARNESS_TEST_CRASH_AFTER_RECORD", "2")
    done = harness(small, "run", "--release", "good", "--k", "2", "--jobs", "1", "--no-report")
    assert done.returncode == -9, done.stdout + done.stderr
    rdir = _run_dir(small)
    committed = {json.loads(x)["path"] for x in (rdir / MANIFEST).read_text().splitlines()}
    written = {f"trials/{p.name}" for p in (rdir / "trials").glob("*.json")}
    [stray] = written - committed  # on disk, never committed
    stray_bytes = (rdir / stray).read_bytes()
    shown = harness(small, "show", "--json")
    assert shown.returncode == 0, shown.stderr
    assert len(json.loads(shown.stdout)["trials"]) == 1  # the stray is not part of the run
    monkeypatch.delenv("_HARNESS_TEST_CRASH_AFTER_RECORD")
    done = harness(small, "run", "--release", "good", "--k", "2", "--jobs", "1", "--no-report")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "resuming, 1 trials already recorded" in done.stderr
    assert (rdir / stray).read_bytes() != stray_bytes, "the stray trial must have run again"
    gate = harness(small, "gate")
    assert gate.returncode == 0 and "changed" not in gate.stderr, gate.stdout + gate.stderr


# -- a full disk leaves nothing half-written ----------------------------------------------


@pytest.fixture
def tiny_store(small: Path):
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("needs root to mount a tmpfs")
    store = small / ".harness"
    store.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(store)], capture_output=True
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs: {mounted.stderr!r}")
    try:
        yield store
    finally:
        subprocess.run(["umount", "-l", str(store)], check=False)


def _fill(store: Path, leave: int) -> Path:
    filler = store / "filler"
    st = os.statvfs(store)
    filler.write_bytes(b"\0" * max(0, st.f_bavail * st.f_frsize - leave))
    return filler


def test_a_full_disk_exits_4_and_leaves_nothing_corrupt(small, tiny_store):
    filler = _fill(tiny_store, 24 * 1024)
    done = harness(small, "run", "--release", "good", "--k", "3", "--jobs", "1", "--no-report")
    assert done.returncode == 4, done.stdout + done.stderr
    assert "cannot write the store" in done.stderr and "No space left" in done.stderr
    assert "Traceback" not in done.stderr
    rdir = _run_dir(small)
    assert not list(rdir.rglob(".tmp-*")) and not list(tiny_store.rglob(".tmp-*"))
    assert (rdir / MANIFEST).read_bytes().endswith(b"\n")  # no torn entry
    shown = harness(small, "show", "--json")
    assert shown.returncode == 0, shown.stderr  # every committed record verifies
    committed = len(json.loads(shown.stdout)["trials"])
    assert committed < 6
    filler.unlink()
    done = harness(small, "run", "--release", "good", "--k", "3", "--jobs", "1", "--no-report")
    assert done.returncode == 0, done.stdout + done.stderr
    assert harness(small, "gate").returncode == 0
    assert len(json.loads(harness(small, "show", "--json").stdout)["trials"]) == 6


def test_a_read_only_store_exits_4_on_run_and_still_serves_show_and_gate(small, tiny_store):
    first = harness(small, "run", "--release", "good", "--k", "1", "--no-report")
    assert first.returncode == 0, first.stdout + first.stderr
    before = _listing(tiny_store)
    ro = subprocess.run(["mount", "-o", "remount,ro", str(tiny_store)], capture_output=True)
    assert ro.returncode == 0, ro.stderr
    done = harness(small, "run", "--release", "bad", "--k", "1", "--no-report")
    assert done.returncode == 4, done.stdout + done.stderr
    assert "Read-only file system" in done.stderr and "Traceback" not in done.stderr
    assert harness(small, "show").returncode == 0  # reading never writes
    assert harness(small, "gate").returncode == 0
    assert _listing(tiny_store) == before


# -- temp dirs of killed runs ---------------------------------------------------------------


def _owned_by(tmp: Path, pid: int) -> list[Path]:
    return sorted(d for d in tmp.glob("harness-*") if f"-p{pid}-" in d.name)


def test_temp_dirs_of_a_run_killed_with_sigkill_are_removed_by_the_next_run(
    small, tmp_path, monkeypatch
):
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    monkeypatch.setenv("TMPDIR", str(tmp))
    args = [sys.executable, "-m", "harness.cli", "run", "--release", "sleepy", "--k", "2"]
    proc = subprocess.Popen(
        [*args, "--jobs", "2", "--no-report"],
        cwd=small,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        names = [d.name for d in _owned_by(tmp, proc.pid)]
        if any("-trial-" in n for n in names) and any("agent" in n for n in names):
            break
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    left = _owned_by(tmp, proc.pid)
    assert any("-trial-" in d.name for d in left), left  # what a kill -9 leaves behind
    assert any("agent" in d.name for d in left), left
    live = tmp / f"harness-trial-p{os.getpid()}-abcd1234"  # a live owner's: kept
    live.mkdir()
    done = harness(small, "run", "--release", "good", "--k", "1", "--no-report")
    assert done.returncode == 0, done.stdout + done.stderr
    assert _owned_by(tmp, proc.pid) == [], "the next run must sweep the killed run's dirs"
    assert live.is_dir()
    assert not [m for m in Path("/proc/mounts").read_text().splitlines() if str(tmp) in m]
